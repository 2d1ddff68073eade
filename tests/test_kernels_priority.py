"""StaticPriority and KFCFS run in bulk with the records of the step-by-step engine.

Each run is made with ``fast_path=False`` (the policy decides every iteration) and with the
fast path, where FCFS StaticPriority runs as the rule ``class_priority_fill`` (or, with one
class, ``decode_first_fill``), with and without a KV-memory limit, and KFCFS around FCFS
Sarathi with windows of at least the budget as Sarathi's rule, without calling
``schedule``; request stamps, the batch log, the TBT histogram and every metric must be
identical to the last bit (``_same_run``).
"""

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from test_fast_path import ANCHOR_TIME, _same_records, _same_run

import queuetheory as qt
from queuetheory.engine import Engine
from queuetheory.engine.kernels import bulk_runner
from queuetheory.policies import KFCFS, Orca, Sarathi, StaticPriority

pytestmark = pytest.mark.filterwarnings("ignore::queuetheory.errors.CensoredRunWarning")

SLOTTED = qt.AffineTokenTime(c=0.02, per_prefill=1e-4, per_decode=5e-5, slot=0.025)


def _lognormal(median, sigma=0.8):
    return stats.lognorm(s=sigma, scale=median)




def _random_case(rng, scale):
    """A small multi-class trace with bursts, ties and idle gaps (times in units of
    ``scale``), prompts up to three budgets long, and a StaticPriority over a random order
    of its classes."""
    n = int(rng.integers(5, 50))
    k = int(rng.integers(2, 4))
    budget = int(rng.integers(4, 40))
    gaps = rng.exponential(rng.choice([0.5, 3.0, 20.0]), n) * (rng.random(n) < 0.8)
    arrival = (np.cumsum(gaps) + rng.choice([0.0, 5.0])) * scale
    prompt = rng.integers(1, 3 * budget, n)
    output = rng.integers(1, 40, n)
    cls = rng.integers(0, k, n)
    cls[:k] = np.arange(k)                 # every class present
    never = [[], [k], [-1]][int(rng.integers(0, 3))]     # a listed class that never arrives
    order = tuple(rng.permutation(list(range(k)) + never).tolist())
    max_reqs = None if rng.random() < 0.5 else int(rng.integers(1, 8))
    trace = qt.Workload.from_arrays(arrival, prompt, output, cls)
    return trace, lambda: StaticPriority(budget, order, max_reqs=max_reqs)


@pytest.mark.parametrize("time_model", [qt.UnitTime(), ANCHOR_TIME, SLOTTED],
                         ids=["unit", "affine", "affine-slotted"])
@pytest.mark.parametrize("first_token", ["prefill", "decode"])
def test_random_multiclass_traces_same_records(time_model, first_token):
    rng = np.random.default_rng(18 + len(first_token))
    scale = 1.0 if isinstance(time_model, qt.UnitTime) else 0.02
    skipped = 0
    for case in range(12):
        trace, make_policy = _random_case(rng, scale)
        cut = [{}, {"horizon": float(rng.uniform(5.0, 60.0)) * scale},
               {"max_iterations": int(rng.integers(5, 200))}][case % 3]
        res, _, n_fast = _same_run(trace, make_policy, time_model, first_token=first_token,
                                   **cut)
        assert n_fast == 0
        # a decoder of a lower class waited out iterations the higher classes filled
        skipped += bool((res.requests["tbt_max"] > res.batches["duration"].max()).any())
    assert skipped >= 3


@pytest.mark.parametrize("first_token", ["prefill", "decode"])
@pytest.mark.parametrize("class_order, max_reqs", [((1, 0), None), ((0, 1), None),
                                                   ((2, 0, 1), 24), ((1, 2, 0), None)])
def test_lognormal_classes_under_load_same_records(first_token, class_order, max_reqs):
    classes = [qt.RequestClass(_lognormal(150), _lognormal(150), rate=1.5),
               qt.RequestClass(_lognormal(400), _lognormal(60), rate=1.0),
               qt.RequestClass(_lognormal(60), _lognormal(300), rate=0.5)]
    wl = qt.Workload(classes[: len(class_order)])
    res, n_slow, n_fast = _same_run(wl, lambda: StaticPriority(256, class_order,
                                                              max_reqs=max_reqs),
                                    ANCHOR_TIME, n_requests=150, first_token=first_token)
    assert n_fast == 0 and res.metrics["completed"] == 150
    # the top class's decoders decode at every iteration after their prompt, others wait
    req = res.requests
    top, low = req[req["cls"] == class_order[0]], req[req["cls"] == class_order[-1]]
    longest = res.batches["duration"].max()          # a gap is a difference of end times
    assert top["tbt_max"].max() <= longest * (1 + 1e-12)
    assert low["tbt_max"].max() > 1.2 * longest


@pytest.mark.parametrize("cut", [{"horizon": 20.0}, {"max_iterations": 777}])
def test_stops_mid_run_with_the_same_state(cut):
    wl = qt.Workload([qt.RequestClass(_lognormal(300), _lognormal(200), rate=2.0),
                      qt.RequestClass(_lognormal(100), _lognormal(300), rate=2.0)])
    kw = cut if "horizon" in cut else {**cut, "n_requests": 300}
    res, _, n_fast = _same_run(wl, lambda: StaticPriority(256, (0, 1)), ANCHOR_TIME, **kw)
    assert n_fast == 0
    assert res.requests["finish"].isna().any()


ONE_CLASS = qt.Workload([qt.RequestClass(_lognormal(120), _lognormal(150), rate=6.0)])


@pytest.mark.parametrize("first_token", ["prefill", "decode"])
@pytest.mark.parametrize("memory, max_reqs", [(None, None), (None, 4), (2500, None),
                                              (2500, 6)])
def test_one_class_runs_as_fcfs_sarathi(first_token, memory, max_reqs):
    """With every request of one class, StaticPriority is FCFS Sarathi: the rule
    ``decode_first_fill`` runs it, KV limit and ``max_reqs`` included, and its records are
    Sarathi's."""
    kw = {"n_requests": 60, "memory": memory, "first_token": first_token}
    wl = ONE_CLASS
    res, _, n_fast = _same_run(wl, lambda: StaticPriority(256, (1, 0), max_reqs=max_reqs),
                               ANCHOR_TIME, **kw)
    assert n_fast == 0
    sarathi = qt.simulate(wl, Sarathi(256, max_reqs=max_reqs), ANCHOR_TIME, fast_path=False,
                          **kw)
    pd.testing.assert_frame_equal(res.requests, sarathi.requests, check_exact=True)
    pd.testing.assert_frame_equal(res.batches, sarathi.batches, check_exact=True)
    if memory is not None and max_reqs is None:
        assert res.metrics["restarts"] > 0


def _engine(policy, memory=None, trace=None, budget=64):
    engine = Engine(policy, ANCHOR_TIME, memory=memory, token_budget=budget, n_classes=3)
    if trace is not None:
        engine.load(trace)
    return engine


TWO_CLASSES = qt.Workload.from_arrays(np.arange(6.0), np.full(6, 30), np.full(6, 5),
                                      np.array([0, 1, 0, 1, 0, 1])).sample(n_requests=6)


def test_rule_only_where_it_is_proved():
    static = StaticPriority(64, (1, 0))
    assert bulk_runner(_engine(static, trace=TWO_CLASSES), static) is not None
    not_covered = [
        (StaticPriority(64, (1, 0), order="sjf_prompt"), {}),            # not FCFS
        (StaticPriority(64, (1, 0), preemption="restart"), {"memory": 5000}),
        (StaticPriority(64, (0,)), {}),                                  # class 1 unlisted
    ]
    for policy, kw in not_covered:
        assert bulk_runner(_engine(policy, trace=TWO_CLASSES, **kw), policy) is None, policy

    class Later(StaticPriority):      # a subclass that decides as its parent keeps the rule
        def __repr__(self):
            return "Later"

    later = Later(64, (1, 0))
    assert bulk_runner(_engine(later, trace=TWO_CLASSES), later) is not None

    class Other(StaticPriority):      # ... and one that decides otherwise steps
        def _schedule(self, state):
            return super()._schedule(state)

    other = Other(64, (1, 0))
    assert bulk_runner(_engine(other, trace=TWO_CLASSES), other) is None


@pytest.mark.parametrize("first_token", ["prefill", "decode"])
@pytest.mark.parametrize("class_order, max_reqs", [((1, 0), None), ((0, 2, 1), 6)])
def test_multiclass_memory_limit_same_records(first_token, class_order, max_reqs):
    """vLLM's KV accounting across classes: admission per class and for the whole batch,
    preemption of the youngest residents whatever their class (decoding, waiting their
    turn, or part-way through a prefill), recompute."""
    classes = [qt.RequestClass(_lognormal(150), _lognormal(200), rate=2.0),
               qt.RequestClass(_lognormal(80), _lognormal(150), rate=2.0),
               qt.RequestClass(_lognormal(300), _lognormal(50), rate=1.0)]
    wl = qt.Workload(classes[: len(class_order)])
    res, _, n_fast = _same_run(wl, lambda: StaticPriority(256, class_order, max_reqs=max_reqs),
                               ANCHOR_TIME, n_requests=120, memory=2500,
                               first_token=first_token)
    assert n_fast == 0
    assert res.metrics["restarts"] > 10 and res.requests["recomputed"].sum() > 0


@pytest.mark.parametrize("first_token", ["prefill", "decode"])
def test_random_multiclass_traces_with_memory_same_records(first_token):
    rng = np.random.default_rng(7 + len(first_token))
    preempted = 0
    for case in range(20):
        trace, make_policy = _random_case(rng, 1.0)
        lengths = trace.sample().prompt + trace.sample().output
        memory = int(lengths.max() + rng.integers(0, 150))
        cut = [{}, {"horizon": float(rng.uniform(5.0, 60.0))},
               {"max_iterations": int(rng.integers(5, 200))}][case % 3]
        res, n_slow, n_fast = _same_records(trace, make_policy, qt.UnitTime(),
                                            memory=memory, first_token=first_token, **cut)
        idled = n_slow > res.iterations      # a preemption emptied a batch
        assert n_fast == 0 or (idled and n_fast < n_slow)
        preempted += res.metrics["restarts"] > 0
    assert preempted >= 8


def test_preemption_evicts_the_least_important_class_first():
    """Budget 1: the class-1 request decodes while the older class-0 one, part-way through
    its prompt, waits its turn. When memory runs out, the class-0 request is preempted
    (vLLM's priority scheduling: the least important, then the youngest), not the class-1
    one, which a class-blind eviction preempted again and again until the run idled with
    both unfinished. The bulk rule evicts alike."""
    trace = qt.Workload.from_arrays(np.array([0.0, 0.5, 40.0]), np.array([3, 2, 1]),
                                    np.array([10, 10, 1]), np.array([0, 1, 1]))
    slow, n_slow, n_fast = _same_records(trace, lambda: StaticPriority(1, (1, 0)),
                                         qt.UnitTime(), memory=13, first_token="decode")
    req = slow.requests
    assert slow.metrics["unfinished"] == 0 and slow.metrics["restarts"] > 0
    assert req.loc[0, "restarts"] > 0 and req.loc[1, "restarts"] == 0
    assert req.loc[1, "finish"] < req.loc[0, "finish"]


def test_eviction_order_is_vllm_priority_order():
    """Residents leave the least important class first: the class-1 requests, younger
    than a class-0 one, are never preempted for it, in the engine and in bulk."""
    wl = qt.Workload.from_arrays(np.zeros(4), np.array([4, 4, 4, 4]), np.array([12] * 4),
                                 np.array([0, 1, 0, 1]))
    res, _, _ = _same_records(wl, lambda: StaticPriority(8, (1, 0)), qt.UnitTime(),
                              memory=40, first_token="decode")
    order = res.requests.sort_values("finish").index.tolist()
    assert order[:2] == [1, 3]          # the important class is never preempted for class 0
    assert res.requests.loc[[1, 3], "restarts"].eq(0).all()
    assert res.requests.loc[[0, 2], "restarts"].gt(0).any()


def test_unlisted_class_is_refused_alike():
    for fast in (False, True):
        with pytest.raises(ValueError, match="class_order"):
            qt.simulate(TWO_CLASSES, StaticPriority(64, (0,)), qt.UnitTime(), fast_path=fast)


@pytest.mark.parametrize("first_token", ["prefill", "decode"])
@pytest.mark.parametrize("memory, max_reqs, window", [
    (None, None, (256, 256)), (None, 8, (300, 256)), (2500, None, (256, 1000)),
    (2500, 8, (256, 256)),
])
def test_kfcfs_with_wide_windows_runs_as_sarathi(first_token, memory, max_reqs, window):
    """KFCFS(Sarathi, K_p, K_d) with K_p, K_d >= b decides as Sarathi (the proof in its
    docstring): the stepping KFCFS and Sarathi agree, and the bulk rule agrees with both."""
    kw = {"n_requests": 60, "memory": memory, "first_token": first_token}
    res, _, n_fast = _same_run(ONE_CLASS, lambda: KFCFS(Sarathi(256, max_reqs=max_reqs), *window),
                               ANCHOR_TIME, **kw)
    assert n_fast == 0
    sarathi = qt.simulate(ONE_CLASS, Sarathi(256, max_reqs=max_reqs), ANCHOR_TIME,
                          fast_path=False, **kw)
    pd.testing.assert_frame_equal(res.requests, sarathi.requests, check_exact=True)
    pd.testing.assert_frame_equal(res.batches, sarathi.batches, check_exact=True)
    if memory is not None and max_reqs is None:
        assert res.metrics["restarts"] > 0


def test_kfcfs_rule_only_where_the_windows_never_bind():
    covered = KFCFS(Sarathi(64), 64, 64)
    assert bulk_runner(_engine(covered, trace=TWO_CLASSES), covered) is not None
    for policy in [KFCFS(Sarathi(64), 63, 64), KFCFS(Sarathi(64), 64, 2),
                   KFCFS(Sarathi(64, order="sjf_prompt"), 64, 64), KFCFS(Orca(64), 64, 64),
                   KFCFS(StaticPriority(64, (0,)), 64, 64)]:
        assert bulk_runner(_engine(policy, trace=TWO_CLASSES), policy) is None, policy
    restart = KFCFS(Sarathi(64, preemption="restart"), 64, 64)   # the papers' preemption
    assert bulk_runner(_engine(restart, memory=5000, trace=TWO_CLASSES), restart) is None
    # narrow windows bind, and the engine steps
    wl = qt.Workload([qt.RequestClass(_lognormal(100), _lognormal(100), rate=3.0)])
    res, n_slow, n_fast = _same_run(wl, lambda: KFCFS(Sarathi(256), 2, 3), ANCHOR_TIME,
                                    n_requests=60)
    assert n_fast == n_slow
    assert res.batches["decode_requests"].max() <= 3

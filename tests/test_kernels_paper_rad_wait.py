"""The bulk rules of the paper schedulers change nothing: ``slo_slack`` (SLAI of Bari, Hegde
and de Veciana, §6) and ``cohorts`` (WAIT and Nested WAIT of Ao et al., Algorithms 1–2).

Each run is made with ``fast_path=False`` (the policy decides every iteration) and with the
fast path, where the whole run goes through the rule without a call to ``schedule``; request
stamps, the batch log row by row, the TBT histogram and every metric (for SLAI also its
running mean batch duration) must be identical to the last bit. The papers' conventions are
pinned in their modules — SLAI the real engines' ``first_token="prefill"``
(:mod:`queuetheory.policies.rad`), WAIT and Nested WAIT ``"decode"``
(:mod:`queuetheory.policies.wait`), all with restart preemption, which never happens without
a memory limit — and the rules cover both conventions, so both are checked.
"""

import warnings

import numpy as np
import pytest
from scipy import stats
from test_fast_path import ANCHOR_TIME, _same_run
from test_fast_path import _same_records as _same_records_and_calls

import queuetheory as qt
from queuetheory.engine import Engine
from queuetheory.engine.kernels import bulk_runner
from queuetheory.policies import SLAI, WAIT, FCFSRestart, NestedWAIT

# time in µs as in benchmarks/engine_speed.py (16.1 ms + 57.8 µs/prefill + 39.5 µs/decode)
MICRO = qt.AffineTokenTime(c=16_100.0, per_prefill=57.8, per_decode=39.5)


def _same_records(workload, make_policy, time_model, **kw):
    """Every record identical with and without the fast path (:func:`test_fast_path.
    _same_records`); the step-by-step result and the fast run's calls to ``schedule``."""
    slow, _, n_fast = _same_records_and_calls(workload, make_policy, time_model, **kw)
    return slow, n_fast


def _same_slai(workload, make_policy, time_model, **kw):
    """``_same_run`` plus the policy's own books (its running mean batch duration)."""
    policies = []

    def made():
        policies.append(make_policy())
        return policies[-1]

    res, n_slow, n_fast = _same_run(workload, made, time_model, **kw)
    slow, fast = policies
    assert n_fast == 0                                  # not one call to schedule
    assert (fast._mean, fast._count, fast._prev_time) == (slow._mean, slow._count,
                                                          slow._prev_time)
    np.testing.assert_array_equal(np.sort(slow._prev_rids), fast._prev_rids)
    # e_j of the requests still in the system, once the last batch is booked (the policy
    # books a batch at the next decision)
    log = res.batches
    booked = slow._e.copy()
    if len(log):
        booked[slow._prev_rids] = log["start"].iloc[-1] + log["duration"].iloc[-1]
    live = res.live
    np.testing.assert_array_equal(booked[live], fast._e[live])
    return res


def _lognormal(median, sigma=0.8):
    return stats.lognorm(s=sigma, scale=median)


@pytest.mark.parametrize("first_token", ["prefill", "decode"])
def test_sharegpt_lengths_at_load_0_8_same_records(first_token):
    """The benchmark's setting: ShareGPT lengths, load 0.8, the TBT target 0.5 s in µs."""
    prompt, output = qt.data.sharegpt_lengths()
    wl = qt.Workload.from_lengths(prompt, output, load=0.8, time_model=MICRO, token_budget=512)
    res = _same_slai(wl, lambda: SLAI(512, tbt=(5e5,)), MICRO, n_requests=300,
                first_token=first_token)
    assert res.metrics["completed"] == 300
    dec = res.batches["decode_requests"].to_numpy()
    in_decode = res.requests["prefill_done"].notna()
    assert in_decode.all() and (dec > 0).mean() > 0.5


@pytest.mark.parametrize("tbt", [(0.5, 0.1), (0.2, 0.2)], ids=["paper-targets", "equal-targets"])
@pytest.mark.parametrize("paying_first", [False, True])
def test_two_classes_same_records(tbt, paying_first):
    """Free and paying classes (the paper's §7 targets, or equal ones, whose groups tie on
    ``C_j`` and are merged by arrival); a tight decode limit and budget so that prefills
    squeeze the non-critical decodes out and groups are served in part."""
    wl = qt.Workload([
        qt.RequestClass(_lognormal(150), _lognormal(120), rate=6.0),
        qt.RequestClass(_lognormal(100), _lognormal(80), rate=3.0, priority=1),
    ])
    res = _same_slai(wl, lambda: SLAI(160, alpha=24, beta=12, delta=3.0, tbt=tbt,
                                 paying_first=paying_first), ANCHOR_TIME, n_requests=120)
    served = res.batches["decode_requests"].to_numpy()
    assert served.max() == 12 and np.count_nonzero(served < 12) > 10


@pytest.mark.parametrize("first_token", ["prefill", "decode"])
@pytest.mark.parametrize("kw", [
    {"order": "fcfs"},
    {"beta": None},
    {"offset": "dynamic"},
    {"alpha": 3, "beta": 2},
    {"delta": 0.0, "tbt": (0.0,)},
], ids=["fcfs", "no-decode-limit", "dynamic-offset", "tiny-caps", "every-decode-critical"])
def test_parameters_same_records(kw, first_token):
    wl = qt.Workload([qt.RequestClass(_lognormal(200), _lognormal(100), rate=4.0)])
    _same_slai(wl, lambda: SLAI(256, **{"tbt": (0.15,), **kw}), ANCHOR_TIME, n_requests=60,
          first_token=first_token)


def test_sarathi_form_same_records():
    wl = qt.Workload([qt.RequestClass(_lognormal(300), _lognormal(150), rate=3.0)])
    _same_slai(wl, lambda: SLAI.sarathi(512, alpha=16), ANCHOR_TIME, n_requests=80)


@pytest.mark.parametrize("cut", [{"horizon": 12.0}, {"max_iterations": 700},
                                 {"horizon": 30.0, "max_iterations": 1200}])
@pytest.mark.parametrize("first_token", ["prefill", "decode"])
def test_stops_mid_run_with_the_same_state(cut, first_token):
    wl = qt.Workload([qt.RequestClass(_lognormal(300), _lognormal(200), rate=4.0)])
    kw = cut if "horizon" in cut else {**cut, "n_requests": 300}
    res = _same_slai(wl, lambda: SLAI(256, alpha=32, beta=16, tbt=(0.3,)), ANCHOR_TIME,
                first_token=first_token, **kw)
    req = res.requests
    assert (req["first_token"].notna() & req["finish"].isna()).any()   # cut in decode


@pytest.mark.parametrize("first_token", ["prefill", "decode"])
def test_idle_periods_ties_and_one_token_outputs_same_records(first_token):
    arrival = np.repeat(np.array([0.0, 0.0, 3.0, 50.0, 50.0, 400.0]), 4)
    rng = np.random.default_rng(3)
    n = arrival.size
    trace = qt.Workload.from_arrays(arrival, rng.integers(1, 300, n), rng.integers(1, 30, n))
    res = _same_slai(trace, lambda: SLAI(64, alpha=5, beta=3, delta=1.0, tbt=(4.0,)),
                qt.UnitTime(), first_token=first_token)
    assert (res.requests["output"] == 1).any()


@pytest.mark.parametrize("seed", range(12))
def test_random_small_traces_same_records(seed):
    """Random lengths, arrivals, classes and parameters."""
    rng = np.random.default_rng([seed, 18])
    n = int(rng.integers(20, 120))
    k = int(rng.integers(1, 4))
    arrival = np.sort(rng.exponential(float(rng.uniform(0.01, 0.3)), n).cumsum())
    prompt = rng.integers(1, int(rng.choice([20, 200, 900])), n)
    output = rng.integers(1, int(rng.choice([5, 60, 300])), n)
    cls = rng.integers(0, k, n)
    trace = qt.Workload.from_arrays(arrival, prompt, output, cls,
                                    priority=(cls == k - 1).astype(int))
    budget = int(rng.choice([16, 64, 512]))
    policy = {
        "alpha": int(rng.integers(1, 40)),
        "beta": None if rng.random() < 0.2 else int(rng.integers(1, 40)),
        "delta": float(rng.choice([0.0, 2.0, 10.0])),
        "offset": str(rng.choice(["fixed", "dynamic"])),
        "order": str(rng.choice(["spf", "fcfs"])),
        "paying_first": bool(rng.random() < 0.5),
        "tbt": tuple(rng.choice([0.0, 0.05, 0.2, 0.2], k)),
    }
    first_token = str(rng.choice(["prefill", "decode"]))
    time_model = [ANCHOR_TIME, qt.UnitTime(), qt.PiecewiseLinearTime(c=0.03, a=1e-4, b0=64)][
        seed % 3]
    _same_slai(trace, lambda: SLAI(budget, **policy), time_model, first_token=first_token)


def test_rule_only_where_it_applies():
    tm = ANCHOR_TIME
    plain = SLAI(512)
    assert bulk_runner(Engine(plain, tm, token_budget=512), plain) is not None
    for first_token in ("prefill", "decode"):
        engine = Engine(plain, tm, token_budget=512, first_token=first_token)
        assert bulk_runner(engine, plain) is not None
    # a KV-memory limit (SLAI's admission and evictions), a time model that reads contexts,
    # an engine budget other than the policy's: the engine steps
    for engine in (Engine(plain, tm, token_budget=512, memory=20_000),
                   Engine(plain, qt.LinearMemoryTime(1.0, 0.01), token_budget=512),
                   Engine(plain, tm, token_budget=1024)):
        assert bulk_runner(engine, plain) is None

    class Tweaked(SLAI):                   # another decision: no rule
        def _schedule(self, state):
            return super()._schedule(state)

    assert bulk_runner(Engine(Tweaked(512), tm, token_budget=512), Tweaked(512)) is None
    wl = qt.Workload([qt.RequestClass(prompt=64, output=64, rate=20.0)])
    res, n_slow, n_fast = _same_run(wl, lambda: SLAI(512), tm, n_requests=60, memory=2_000)
    # with memory the engine steps, repeating SLAI's steady decode-only batches (SLAI.steady)
    assert 0 < n_fast < n_slow


# ---- WAIT and Nested WAIT (Ao et al.): the rule ``cohorts`` -----------------------------------
# Ao et al.'s convention, pinned in queuetheory.policies.wait: the prefill emits nothing
PAPER = {"first_token": "decode"}


def _random_trace(rng, n, classes=1, prompt=300, output=120, gap=0.05):
    arrival = np.sort(rng.exponential(gap, n).cumsum())
    return qt.Workload.from_arrays(arrival, rng.integers(1, prompt, n),
                                   rng.integers(1, output, n), rng.integers(0, classes, n))


@pytest.mark.parametrize("first_token", ["decode", "prefill"])
def test_wait_types_same_records(first_token):
    """Three types with their own thresholds; the run drains, so the leftovers run once
    the last request has arrived."""
    trace = _random_trace(np.random.default_rng(1), 150, classes=3)
    res, n_fast = _same_records(trace, lambda: WAIT((3, 2, 4)), ANCHOR_TIME,
                                first_token=first_token)
    assert n_fast == 0 and res.metrics["completed"] == 150
    assert (res.batches["decode_requests"] > 0).mean() > 0.5


def test_wait_paper_synthetic_setting_same_records():
    """§6.1 high demand: ``l = 20``, ``l' = (100, 200, 300)``, rates 6:4:2, thresholds of
    the paper's rule with ``B = 64``, the classes given (the memory bound M^π is known)."""
    classes = [qt.RequestClass(prompt=20, output=o, rate=r)
               for o, r in zip((100, 200, 300), (6.0, 4.0, 2.0), strict=True)]
    n = qt.fluid.wait_thresholds(classes, 1.0, 0.0, rule="paper", batch_limit=64)
    res, n_fast = _same_records(qt.Workload(classes), lambda: WAIT(n, classes),
                                qt.UnitTime(), n_requests=200, **PAPER)
    assert n_fast == 0 and res.metrics["completed"] == 200


@pytest.mark.parametrize("first_token", ["decode", "prefill"])
@pytest.mark.parametrize("segments, thresholds", [
    ((10, 40, 120), (4, 3, 2)),
    ((1, 2, 3, 119), (2, 2, 1, 1)),          # segments one stage wide: a prompt passes on
    ((119,), (5,)),                          # at once; one segment
], ids=["three", "narrow", "one"])
def test_nested_wait_segments_same_records(segments, thresholds, first_token):
    trace = _random_trace(np.random.default_rng(2), 250)
    res, n_fast = _same_records(trace, lambda: NestedWAIT(segments, thresholds), ANCHOR_TIME,
                                first_token=first_token)
    assert n_fast == 0 and res.metrics["completed"] == 250


def test_nested_wait_paper_real_data_setting_same_records():
    """§6.2: segments of 50 decode stages, thresholds ∝ the tail sums 66:43:…:1 (ten
    segments, scaled down tenfold), prompts of about 60 tokens."""
    rng = np.random.default_rng(3)
    n = 300
    share = np.array([23, 11, 8, 7, 6, 4, 3, 2, 1, 1], dtype=float)
    out = 50 * rng.choice(10, n, p=share / share.sum()) + rng.integers(1, 51, n)
    trace = qt.Workload.from_arrays(np.sort(rng.exponential(0.01, n).cumsum()),
                                    rng.integers(40, 80, n), out)
    thresholds = np.maximum(1, np.array([66, 43, 32, 24, 17, 11, 7, 4, 2, 1]) // 10)
    res, n_fast = _same_records(trace, lambda: NestedWAIT(50 * np.arange(1, 11), thresholds),
                                ANCHOR_TIME, **PAPER)
    assert n_fast == 0 and res.metrics["completed"] == n


@pytest.mark.parametrize("cut", [{"horizon": 3.0}, {"max_iterations": 150},
                                 {"horizon": 30.0, "max_iterations": 400}])
def test_wait_and_nested_wait_stop_mid_run_with_the_same_state(cut):
    """With a horizon the leftovers never run (Algorithm 1 stays literal): cohorts below
    their thresholds wait at the cut."""
    wl = qt.Workload([qt.RequestClass(_lognormal(100), _lognormal(60), rate=20.0),
                      qt.RequestClass(_lognormal(50), _lognormal(30), rate=10.0)])
    kw = cut if "horizon" in cut else {**cut, "n_requests": 300}
    for make in (lambda: WAIT((4, 3)), lambda: NestedWAIT((20, 60, 5000), (5, 3, 2))):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", qt.CensoredRunWarning)
            res, n_fast = _same_records(wl, make, ANCHOR_TIME, **PAPER, **kw)
        assert n_fast <= 1      # where the rule ends idle, the engine asks once, and stops
        assert res.requests["finish"].isna().any()


def test_wait_idle_periods_and_one_token_outputs_same_records():
    arrival = np.repeat(np.array([0.0, 0.0, 3.0, 50.0, 50.0, 400.0]), 4)
    rng = np.random.default_rng(4)
    n = arrival.size
    trace = qt.Workload.from_arrays(arrival, rng.integers(1, 300, n), rng.integers(1, 4, n),
                                    rng.integers(0, 2, n))
    for first_token in ("decode", "prefill"):
        for make in (lambda: WAIT((3, 2)), lambda: NestedWAIT((1, 3), (3, 1))):
            res, n_fast = _same_records(trace, make, qt.UnitTime(), first_token=first_token)
            assert n_fast == 0 and (res.requests["output"] == 1).any()


@pytest.mark.parametrize("seed", range(8))
def test_wait_and_nested_wait_random_small_traces_same_records(seed):
    rng = np.random.default_rng([seed, 19])
    k = int(rng.integers(1, 4))
    trace = _random_trace(rng, int(rng.integers(10, 150)), classes=k,
                          prompt=int(rng.choice([10, 400])), output=int(rng.choice([4, 90])),
                          gap=float(rng.uniform(0.002, 0.2)))
    time_model = [ANCHOR_TIME, qt.UnitTime(), qt.PiecewiseLinearTime(c=0.03, a=1e-4, b0=64)][
        seed % 3]
    first_token = str(rng.choice(["decode", "prefill"]))
    n = tuple(int(x) for x in rng.integers(1, 6, k))
    bounds = np.unique(rng.integers(1, 90, int(rng.integers(1, 5))))
    bounds[-1] = 90
    seg_n = tuple(int(x) for x in rng.integers(1, 6, bounds.size))
    for make in (lambda: WAIT(n), lambda: NestedWAIT(bounds, seg_n)):
        _, n_fast = _same_records(trace, make, time_model, first_token=first_token)
        assert n_fast == 0


def _rule_only_without_a_limit(policy):
    """``policy`` runs its bulk rule on a plain engine, and steps with a memory limit, a
    time model that reads the KV contexts (the papers' eq. 1) or a token budget."""
    tm = ANCHOR_TIME
    assert bulk_runner(Engine(policy, tm), policy) is not None
    for engine in (Engine(policy, tm, memory=5_000),
                   Engine(policy, qt.LinearMemoryTime(1.0, 0.01)),
                   Engine(policy, tm, token_budget=512)):
        assert bulk_runner(engine, policy) is None


def test_cohorts_rule_only_where_it_applies():
    tm = ANCHOR_TIME
    for policy in (WAIT((2, 2)), NestedWAIT((5, 20), (2, 1), overflow="gate")):
        _rule_only_without_a_limit(policy)        # (with a limit, the gates step)

    class Tweaked(NestedWAIT):
        def segment_of(self, state):
            return super().segment_of(state)

    tweaked = Tweaked((5, 20), (2, 1))
    assert bulk_runner(Engine(tweaked, tm), tweaked) is None
    # a class without a threshold, an output past the last segment: the policy says so
    trace = qt.Workload.from_arrays(np.zeros(3), np.full(3, 5), np.array([3, 30, 3]),
                                    np.array([0, 2, 1]))
    with pytest.raises(ValueError, match="class 2"):
        qt.simulate(trace, WAIT((1, 1)), tm, **PAPER)
    with pytest.raises(ValueError, match="exceeds the last segment boundary 20"):
        qt.simulate(trace, NestedWAIT((5, 20), (1, 1)), tm, **PAPER)
    # with a memory limit the gate decides every iteration but the relieving stretches
    # (issue 33: a batch that decodes every resident request repeats), the same records
    trace = _random_trace(np.random.default_rng(5), 60)
    res, n_fast = _same_records(trace, lambda: NestedWAIT((10, 119), (3, 2), overflow="gate"),
                                tm, memory=4_000, **PAPER)
    assert 0 < n_fast < res.iterations


@pytest.mark.parametrize("first_token", ["decode", "prefill"])
@pytest.mark.parametrize("cut", [{}, {"horizon": 40.0}, {"max_iterations": 333}])
def test_fcfs_restart_without_a_limit_runs_in_bulk_same_records(first_token, cut):
    """Without a memory limit FCFSRestart runs every request in the system each iteration,
    the new ones with their whole prompts: FCFS Sarathi without a token budget, run as the
    rule ``decode_first_fill`` (not one call to ``schedule``), with stepping's records;
    prompts of one token to a few thousand, outputs of one token, idle periods."""
    rng = np.random.default_rng(7)
    n = 300
    arrival = np.sort(np.concatenate([rng.exponential(0.05, n - 20).cumsum(),
                                      np.repeat([30.0, 90.0], 10)]))
    trace = qt.Workload.from_arrays(arrival, rng.integers(1, 3000, n), rng.integers(1, 200, n))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", qt.CensoredRunWarning)     # (a cut run says so)
        slow, n_fast = _same_records(trace, FCFSRestart, ANCHOR_TIME, first_token=first_token,
                                     **cut)
    assert n_fast == 0 and slow.iterations > 300
    assert (slow.batches["prefill_tokens"] > 4096).any()    # no budget cut a prompt


def test_fcfs_restart_rule_only_without_a_limit():
    """With a memory limit (its evictions restart), a token budget, a time model that
    reads the KV contexts, or a subclass that decides otherwise, FCFSRestart steps."""
    _rule_only_without_a_limit(FCFSRestart())

    class Tweaked(FCFSRestart):
        def _fitting_prefix(self, state, r):
            return super()._fitting_prefix(state, r)

    tweaked = Tweaked()
    assert bulk_runner(Engine(tweaked, ANCHOR_TIME), tweaked) is None


@pytest.mark.parametrize("first_token", ["decode", "prefill"])
def test_wait_and_nested_wait_cut_inside_the_leftovers_same_records(first_token):
    """An iteration cap that falls after the last arrival, while the leftovers run (the
    rule computes them for the whole drain, then keeps the batches before the cap)."""
    trace = _random_trace(np.random.default_rng(6), 120, classes=2, output=150)
    for make in (lambda: WAIT((4, 3)), lambda: NestedWAIT((10, 40, 149), (4, 3, 2))):
        whole = qt.simulate(trace, make(), ANCHOR_TIME, first_token=first_token)
        log = whole.batches
        after = np.flatnonzero(log["start"].to_numpy() >= whole.requests["arrival"].max())
        assert after.size > 20                               # a long drain
        for cap in (int(after[0]) + 1, int(after[after.size // 2])):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", qt.CensoredRunWarning)
                res, n_fast = _same_records(trace, make, ANCHOR_TIME, max_iterations=cap,
                                            first_token=first_token)
            assert n_fast == 0 and res.iterations == cap
            assert res.requests["finish"].isna().any()


@pytest.mark.parametrize("first_token", ["decode", "prefill"])
def test_benchmark_setting_same_records(first_token):
    """The setting of ``benchmarks/engine_speed.py``: ShareGPT lengths at load 0.8, output
    lengths in bins of 50 stages, the thresholds of Ao et al.'s §6 rules with ``B = 512``
    (most of them 1: cohorts of one), and a small ``B = 64`` variant."""
    prompt, output = qt.data.sharegpt_lengths()
    wl = qt.Workload.from_lengths(prompt, output, load=0.8, time_model=MICRO, token_budget=512)
    trace = wl.sample(n_requests=250, seed=1)
    width = 50
    kind = (trace.output - 1) // width
    share = np.bincount(kind).astype(float)
    seg = qt.fluid.Segments(int(trace.prompt.mean()), width * np.arange(1, share.size + 1),
                            share)
    classes = [qt.RequestClass(prompt=int(trace.prompt.mean()), output=width * (j + 1),
                               rate=max(r, 1e-9)) for j, r in enumerate(share)]
    typed = qt.Workload.from_arrays(trace.arrival, trace.prompt, trace.output, kind)
    for batch_limit in (512, 64):
        nested = qt.fluid.nested_thresholds(seg, 1.0, 0.0, rule="tail_sum",
                                            batch_limit=batch_limit)
        res, n_fast = _same_records(trace, lambda n=nested: NestedWAIT(seg, n), MICRO,
                                    first_token=first_token)
        assert n_fast == 0 and res.metrics["completed"] == 250
        types = qt.fluid.wait_thresholds(classes, 1.0, 0.0, rule="paper",
                                         batch_limit=batch_limit)
        res, n_fast = _same_records(typed, lambda n=types: WAIT(n), MICRO,
                                    first_token=first_token)
        assert n_fast == 0 and res.metrics["completed"] == 250

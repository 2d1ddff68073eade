"""The bulk rules of FCFS Orca (``prefill_first_fill``) and iteration-level FasterTransformer
(``decode_priority``) change nothing, nor do request-level FasterTransformer's stretches
(it steps, each cohort's decode phase one stretch through arrivals: ``decodes_through``).

Each run is made with ``fast_path=False`` (the policy decides every iteration) and with the
fast path, where the rule runs without calling ``schedule``; request stamps, the batch log
row by row, the TBT histogram and every metric must be identical to the last bit.
"""

import warnings
from functools import partial

import numpy as np
import pytest
from scipy import stats
from test_fast_path import ANCHOR_TIME, _same_run

import queuetheory as qt
from queuetheory.engine import Engine
from queuetheory.engine.kernels import bulk_runner
from queuetheory.policies import FasterTransformer, Orca


def _lognormal(median, sigma=0.8):
    return stats.lognorm(s=sigma, scale=median)


def _skipped(res):
    """Decoder-iterations skipped: requests in decode at a batch's start that it did not
    decode (runs without preemption)."""
    req, batches = res.requests, res.batches
    start = batches["start"].to_numpy()
    done = req["prefill_done"].to_numpy()
    finish = req["finish"].fillna(np.inf).to_numpy()
    in_decode = ((done[None, :] <= start[:, None]) & (finish[None, :] > start[:, None])).sum(1)
    return int((in_decode - batches["decode_requests"].to_numpy()).sum())


POLICIES = {
    "orca": lambda b, r: Orca(b, max_reqs=r),
    "orca-whole-prompts": lambda b, r: Orca(b, max_reqs=r, chunk=False),
    "ft": lambda b, r: FasterTransformer(b, max_reqs=r),
    "ft-request": lambda b, r: FasterTransformer(b, mode="request", max_reqs=r or 6),
}


@pytest.mark.parametrize("name", list(POLICIES))
@pytest.mark.parametrize("first_token", ["prefill", "decode"])
def test_small_random_traces_same_records(name, first_token):
    """Two to twelve requests with short lengths, budgets from 3 tokens (prompts longer than
    the budget, decoders that skip iterations), ties, idle gaps, ``max_reqs``, KV limits
    from one request's peak to a third more (preemption part-way through a prefill and in
    decode, readmission), horizons and iteration caps that cut the run."""
    rng = np.random.default_rng(11 + len(name) + len(first_token))
    make = POLICIES[name]
    skipped = preempted = cut = through = 0
    for case in range(20):
        n = int(rng.integers(2, 13))
        arrival = np.sort(rng.choice([0.0, 0.5, 1.0, 40.0, 41.0, 400.0], n)
                          + rng.integers(0, 3, n) * rng.random(n))
        prompt, output = rng.integers(1, 40, n), rng.integers(1, 25, n)
        budget = int(rng.choice([3, 8, 16, 48]))
        max_reqs = None if rng.random() < 0.5 else int(rng.integers(1, 6))
        policy = make(budget, max_reqs)
        peak = int((prompt + output).max())
        memory = None if rng.random() < 0.5 else int(rng.integers(peak, peak + peak // 3 + 1))
        if policy.supports(memory=memory, first_token=first_token):
            memory = None
        kw = {"memory": memory, "first_token": first_token}
        roll = rng.random()
        if roll < 0.2:
            kw["horizon"] = float(rng.choice([1.0, 45.0, 200.0])) + rng.random() * 20
        elif roll < 0.4:
            kw["max_iterations"] = int(rng.integers(1, 60))
        trace = qt.Workload.from_arrays(arrival, prompt, output)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", qt.errors.CensoredRunWarning)
            res, n_slow, n_fast = _same_run(trace, partial(make, budget, max_reqs),
                                            qt.UnitTime(), **kw)
        if name == "ft-request":
            through += n_fast < n_slow
        else:
            assert n_fast == 0, case          # the rule decides without asking
        if memory is None:
            skipped += _skipped(res) > 0
        preempted += res.metrics["restarts"] > 0
        cut += bool(res.requests["finish"].isna().any())
    assert cut >= 3
    if name != "ft-request":
        assert preempted >= 2
    else:
        assert through >= 10
    if name in ("orca", "orca-whole-prompts"):
        assert skipped >= 2


@pytest.mark.parametrize("first_token", ["prefill", "decode"])
@pytest.mark.parametrize("memory, max_reqs", [(None, None), (6000, None), (None, 8),
                                              (6000, 8)])
def test_orca_lognormal_lengths_same_records(first_token, memory, max_reqs):
    """Prompts that crowd the decodes out of the budget: the younger decoders skip."""
    wl = qt.Workload([qt.RequestClass(_lognormal(200), _lognormal(300), rate=3.0)])
    res, n_slow, n_fast = _same_run(wl, lambda: Orca(512, max_reqs=max_reqs), ANCHOR_TIME,
                                    n_requests=150, memory=memory, first_token=first_token)
    assert n_fast == 0 and res.metrics["completed"] == 150
    if memory is None:
        assert _skipped(res) > 100
    elif max_reqs is None:
        assert res.metrics["restarts"] > 20


@pytest.mark.parametrize("first_token", ["prefill", "decode"])
@pytest.mark.parametrize("memory", [None, 6000])
def test_orca_two_classes_same_records(first_token, memory):
    """Two classes near the compute bound: the TBT histogram per class (the gaps a prefix
    of decoders shares, and those of decoders that skipped or were preempted) and every
    request's largest gap."""
    wl = qt.Workload([qt.RequestClass(_lognormal(300), _lognormal(40), rate=3.0),
                      qt.RequestClass(_lognormal(60), _lognormal(200), rate=3.0)])
    res, _, n_fast = _same_run(wl, lambda: Orca(256), ANCHOR_TIME, n_requests=200,
                               memory=memory, first_token=first_token)
    assert n_fast == 0 and res.metrics["completed"] == 200
    assert (res.tbt.counts.sum(axis=1) > 0).all()
    if memory is None:
        assert _skipped(res) > 100
    else:
        assert res.metrics["restarts"] > 5


@pytest.mark.parametrize("first_token", ["prefill", "decode"])
@pytest.mark.parametrize("make_policy", [
    lambda: FasterTransformer(256),
    lambda: FasterTransformer(256, max_reqs=4),
    lambda: FasterTransformer(256, mode="request", max_reqs=8),
    lambda: FasterTransformer(4, mode="request", max_reqs=10),      # cohorts wider than b
], ids=["iteration", "iteration-maxreqs", "request", "request-wider-than-budget"])
def test_faster_transformer_same_records(first_token, make_policy):
    wl = qt.Workload([qt.RequestClass(_lognormal(100), _lognormal(40), rate=2.0),
                      qt.RequestClass(_lognormal(300), _lognormal(20), rate=1.0)])
    res, n_slow, n_fast = _same_run(wl, make_policy, ANCHOR_TIME, n_requests=60,
                                    first_token=first_token)
    assert res.metrics["completed"] == 60
    if make_policy().mode == "iteration":
        assert n_fast == 0                    # the rule
    else:        # steps: a cohort within the budget decodes in one stretch through arrivals
        assert 0 < n_fast < n_slow


@pytest.mark.parametrize("first_token", ["prefill", "decode"])
@pytest.mark.parametrize("max_reqs", [None, 12])
def test_faster_transformer_memory_limit_same_records(first_token, max_reqs):
    """Iteration-level FasterTransformer under a KV limit: a wide prefill batch whose
    decodes outgrow memory, preemption (recompute) and readmission."""
    wl = qt.Workload([qt.RequestClass(_lognormal(100), _lognormal(200), rate=4.0)])
    res, _, n_fast = _same_run(wl, lambda: FasterTransformer(2048, max_reqs=max_reqs),
                               ANCHOR_TIME, n_requests=80, memory=2500,
                               first_token=first_token)
    assert n_fast == 0 and res.metrics["completed"] == 80
    assert res.metrics["restarts"] > 5


@pytest.mark.parametrize("cut", [{"horizon": 20.0}, {"max_iterations": 900}])
@pytest.mark.parametrize("make_policy", [lambda: Orca(512), lambda: FasterTransformer(512),
                                         lambda: FasterTransformer(512, mode="request",
                                                                   max_reqs=16)],
                         ids=["orca", "ft", "ft-request"])
def test_stops_mid_run_with_the_same_state(cut, make_policy):
    wl = qt.Workload([qt.RequestClass(_lognormal(400), _lognormal(100), rate=3.0)])
    kw = cut if "horizon" in cut else {**cut, "n_requests": 300}
    memory = None if getattr(make_policy(), "mode", "") == "request" else 6000
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", qt.errors.CensoredRunWarning)
        res, n_slow, n_fast = _same_run(wl, make_policy, ANCHOR_TIME, memory=memory, **kw)
    assert n_fast == 0 if memory else n_fast < n_slow
    assert res.requests["finish"].isna().any()


def test_rule_only_where_it_covers_the_setting():
    tm = ANCHOR_TIME

    class Mine(Orca):                 # a subclass that changes a decision steps
        def _candidates(self, state):
            return super()._candidates(state)

    for policy, kw in [(Orca(512, order="sjf_prompt"), {}),
                       (FasterTransformer(512, order="sjf_decode"), {}),
                       (FasterTransformer(512, mode="request", max_reqs=4), {}),
                       (FasterTransformer(512, mode="request", max_reqs=4, order="sjf_total"),
                        {}),
                       (Orca(512, preemption="restart"), {"memory": 10_000}),
                       (FasterTransformer(512, preemption="restart"), {"memory": 10_000}),
                       (Orca(512), {"token_budget": 1024}), (Mine(512), {})]:
        engine = Engine(policy, tm, memory=kw.get("memory"),
                        token_budget=kw.get("token_budget", 512))
        assert bulk_runner(engine, policy) is None, (policy, kw)
    linear = Engine(Orca(512), qt.LinearMemoryTime(1.0, 0.01), token_budget=512)
    assert bulk_runner(linear, Orca(512)) is None
    for policy in (Orca(512), Orca(512, chunk=False, max_reqs=4), FasterTransformer(512)):
        for memory in (None, 10_000):
            if policy.supports(memory=memory, first_token="prefill"):
                continue
            engine = Engine(policy, tm, token_budget=512, memory=memory)
            assert bulk_runner(engine, policy) is not None, (policy, memory)
    wl = qt.Workload([qt.RequestClass(prompt=64, output=64, rate=2.0)])
    _, _, n_fast = _same_run(wl, lambda: Orca(512, order="sjf_decode"), tm, n_requests=40)
    assert n_fast > 0

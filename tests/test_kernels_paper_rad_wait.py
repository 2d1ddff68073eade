"""The bulk rule ``slo_slack`` (SLAI of Bari, Hegde and de Veciana, §6) changes nothing.

Each run is made with ``fast_path=False`` (SLAI decides every iteration) and with the fast
path, where the whole run goes through the rule without one call to ``schedule``; request
stamps, the batch log row by row, the TBT histogram, every metric and the policy's running
mean batch duration must be identical to the last bit. SLAI's paper runs the real engines'
convention (``first_token="prefill"``, pinned in :mod:`queuetheory.policies.rad`); the rule
covers ``"decode"`` too, so both are checked.
"""

import numpy as np
import pytest
from scipy import stats
from test_fast_path import ANCHOR_TIME, _same_run

import queuetheory as qt
from queuetheory.engine import Engine
from queuetheory.engine.kernels import bulk_runner
from queuetheory.policies import SLAI

# time in µs as in benchmarks/engine_speed.py (16.1 ms + 57.8 µs/prefill + 39.5 µs/decode)
MICRO = qt.AffineTokenTime(c=16_100.0, per_prefill=57.8, per_decode=39.5)


def _same(workload, make_policy, time_model, **kw):
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
    live = res.engine.live
    np.testing.assert_array_equal(booked[live], fast._e[live])
    return res


def _lognormal(median, sigma=0.8):
    return stats.lognorm(s=sigma, scale=median)


@pytest.mark.parametrize("first_token", ["prefill", "decode"])
def test_sharegpt_lengths_at_load_0_8_same_records(first_token):
    """The benchmark's setting: ShareGPT lengths, load 0.8, the TBT target 0.5 s in µs."""
    prompt, output = qt.data.sharegpt_lengths()
    wl = qt.Workload.from_lengths(prompt, output, load=0.8, time_model=MICRO, token_budget=512)
    res = _same(wl, lambda: SLAI(512, tbt=(5e5,)), MICRO, n_requests=300,
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
    res = _same(wl, lambda: SLAI(160, alpha=24, beta=12, delta=3.0, tbt=tbt,
                                 paying_first=paying_first), ANCHOR_TIME, n_requests=160)
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
    _same(wl, lambda: SLAI(256, **{"tbt": (0.15,), **kw}), ANCHOR_TIME, n_requests=80,
          first_token=first_token)


def test_sarathi_form_same_records():
    wl = qt.Workload([qt.RequestClass(_lognormal(300), _lognormal(150), rate=3.0)])
    _same(wl, lambda: SLAI.sarathi(512, alpha=16), ANCHOR_TIME, n_requests=150)


@pytest.mark.parametrize("cut", [{"horizon": 12.0}, {"max_iterations": 700},
                                 {"horizon": 30.0, "max_iterations": 1200}])
@pytest.mark.parametrize("first_token", ["prefill", "decode"])
def test_stops_mid_run_with_the_same_state(cut, first_token):
    wl = qt.Workload([qt.RequestClass(_lognormal(300), _lognormal(200), rate=4.0)])
    kw = cut if "horizon" in cut else {**cut, "n_requests": 300}
    res = _same(wl, lambda: SLAI(256, alpha=32, beta=16, tbt=(0.3,)), ANCHOR_TIME,
                first_token=first_token, **kw)
    req = res.requests
    assert (req["first_token"].notna() & req["finish"].isna()).any()   # cut in decode


@pytest.mark.parametrize("first_token", ["prefill", "decode"])
def test_idle_periods_ties_and_one_token_outputs_same_records(first_token):
    arrival = np.repeat(np.array([0.0, 0.0, 3.0, 50.0, 50.0, 400.0]), 4)
    rng = np.random.default_rng(3)
    n = arrival.size
    trace = qt.Workload.from_arrays(arrival, rng.integers(1, 300, n), rng.integers(1, 30, n))
    res = _same(trace, lambda: SLAI(64, alpha=5, beta=3, delta=1.0, tbt=(4.0,)),
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
    _same(trace, lambda: SLAI(budget, **policy), time_model, first_token=first_token)


def test_rule_only_where_it_applies():
    tm = ANCHOR_TIME
    plain = SLAI(512)
    assert plain.rule() == "slo_slack"
    assert bulk_runner(Engine(plain, tm, budget=512), plain) is not None
    for first_token in ("prefill", "decode"):
        engine = Engine(plain, tm, budget=512, first_token=first_token)
        assert bulk_runner(engine, plain) is not None
    # a KV-memory limit (SLAI's admission and evictions), a time model that reads contexts,
    # an engine budget other than the policy's: the engine steps
    for engine in (Engine(plain, tm, budget=512, memory=20_000),
                   Engine(plain, qt.LinearMemoryTime(1.0, 0.01), budget=512),
                   Engine(plain, tm, budget=1024)):
        assert bulk_runner(engine, plain) is None

    class Tweaked(SLAI):                   # another decision: no rule
        def _schedule(self, state):
            return super()._schedule(state)

    assert Tweaked(512).rule() is None
    wl = qt.Workload([qt.RequestClass(prompt=64, output=64, rate=20.0)])
    res, n_slow, n_fast = _same_run(wl, lambda: SLAI(512), tm, n_requests=60, memory=2_000)
    assert n_fast == n_slow > 0                # with memory it decides every iteration

"""The bulk decision rules of ``engine.kernels`` change nothing.

Each run is made with ``fast_path=False`` (the policy decides every iteration) and with the
fast path, where FCFS Sarathi runs as the rule ``decode_first_fill`` without calling
``schedule``; request stamps, the batch log, the TBT histogram and every metric must be
identical to the last bit.
"""

import numpy as np
import pytest
from scipy import stats
from test_fast_path import ANCHOR_TIME, _same_run

import queuetheory as qt
from queuetheory.engine import Engine
from queuetheory.engine.kernels import bulk_runner
from queuetheory.policies import Orca, Sarathi


def _lognormal(median, sigma=0.8):
    return stats.lognorm(s=sigma, scale=median)


def test_anchor_workload_runs_in_bulk_with_the_same_records():
    wl = qt.Workload([qt.RequestClass(prompt=512, output=256, rate=4.0)])
    res, n_slow, n_fast = _same_run(wl, lambda: Sarathi(512), ANCHOR_TIME, n_requests=300,
        first_token="decode")
    assert res.metrics["completed"] == 300
    assert n_fast == 0                       # not one call to schedule


SLOTTED = qt.AffineTokenTime(c=0.02, per_prefill=1e-4, per_decode=5e-5, slot=0.025)


@pytest.mark.parametrize("time_model", [
    ANCHOR_TIME, qt.PiecewiseLinearTime(c=45.5, a=0.30, b0=64), qt.UnitTime(), SLOTTED,
], ids=["affine", "piecewise", "unit", "affine-slotted"])
@pytest.mark.parametrize("load", [0.3, 0.9])
def test_sharegpt_lengths_same_records(time_model, load):
    prompt, output = qt.data.sharegpt_lengths()
    rate_model = ANCHOR_TIME if time_model is SLOTTED else time_model
    wl = qt.Workload.from_lengths(prompt, output, load=load, time_model=rate_model,
                                  token_budget=512)
    _, _, n_fast = _same_run(wl, lambda: Sarathi(512), time_model, n_requests=400,
        first_token="decode")
    assert n_fast == 0


def test_two_classes_same_records():
    wl = qt.Workload([qt.RequestClass(_lognormal(100), _lognormal(150), rate=1.0),
                      qt.RequestClass(_lognormal(300), _lognormal(60), rate=1.5)])
    _same_run(wl, lambda: Sarathi(256), ANCHOR_TIME, n_requests=300, first_token="decode")


def test_decodes_that_fill_the_budget_starve_prefills_alike():
    # budget 16 and long outputs: 16 requests decode at once and the prompts wait
    wl = qt.Workload([qt.RequestClass(_lognormal(20), _lognormal(200), rate=30.0)])
    res, _, n_fast = _same_run(wl, lambda: Sarathi(16), ANCHOR_TIME, n_requests=200,
        first_token="decode")
    assert n_fast == 0
    load = res.batches["token_load"]
    assert load.max() == 16 and (res.batches["decode_requests"] == 16).sum() > 100


@pytest.mark.parametrize("cut", [{"horizon": 7.5}, {"max_iterations": 333},
                                 {"horizon": 40.0, "max_iterations": 2000}])
def test_stops_mid_run_with_the_same_state(cut):
    wl = qt.Workload([qt.RequestClass(_lognormal(400), _lognormal(300), rate=3.0)])
    kw = cut if "horizon" in cut else {**cut, "n_requests": 300}
    res, _, n_fast = _same_run(wl, lambda: Sarathi(512), ANCHOR_TIME, **kw, first_token="decode")
    assert n_fast == 0
    assert res.requests["finish"].isna().any()          # cut with requests in flight
    assert (res.requests["prefilled"] % 1 == 0).all()


def test_idle_periods_and_simultaneous_arrivals_same_records():
    arrival = np.repeat(np.array([0.0, 0.0, 3.0, 50.0, 50.0, 50.0, 400.0]), 3)
    n = arrival.size
    rng = np.random.default_rng(3)
    trace = qt.Workload.from_arrays(arrival, rng.integers(1, 900, n), rng.integers(1, 40, n))
    _, _, n_fast = _same_run(trace, lambda: Sarathi(128), qt.UnitTime(), first_token="decode")
    assert n_fast == 0


def test_rule_only_where_it_is_the_policy():
    wl = qt.Workload([qt.RequestClass(prompt=64, output=64, rate=2.0)])
    tm = ANCHOR_TIME
    for policy, kw in [(Sarathi(512, order="sjf_decode"), {}), (Sarathi(512, max_reqs=8), {}),
                       (Orca(512), {}), (Sarathi(512), {"memory": 10_000}),
                       (Sarathi(512), {"first_token": "prefill"}),
                       (Sarathi(512), {"token_budget": 256})]:
        engine = Engine(policy, tm, memory=kw.get("memory"),
                        budget=kw.get("token_budget", 512),
                        first_token=kw.get("first_token", "decode"))
        assert bulk_runner(engine, policy) is None, (policy, kw)
    linear = Engine(Sarathi(512), qt.LinearMemoryTime(1.0, 0.01), budget=512)
    assert bulk_runner(linear, Sarathi(512)) is None
    plain = Engine(Sarathi(512), tm, budget=512, first_token="decode")
    assert bulk_runner(plain, Sarathi(512)) is not None
    res, _, n_fast = _same_run(wl, lambda: Sarathi(512, order="sjf_decode"), tm, n_requests=50,
        first_token="decode")
    assert n_fast > 0

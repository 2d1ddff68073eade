"""MC-SF, FCFS and the α-protection benchmarks of seed 001 on the shared engine."""

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import queuetheory as qt
from queuetheory.rounds import FuturePeak, durations, mcsf_schedule


def _instance(rng, n=30, horizon=40, max_prompt=6, max_output=15):
    a = np.sort(rng.integers(0, horizon, n))
    return a, rng.integers(1, max_prompt, n), rng.integers(1, max_output, n)


def _run(policy, a, s, o, memory, first_token="prefill"):
    wl = qt.Workload.from_arrays(a.astype(float), s, o)
    return qt.simulate(wl, policy, qt.UnitTime(), memory=memory, n_requests=len(a),
                       first_token=first_token)


@pytest.mark.parametrize("first_token", ["prefill", "decode"])
@pytest.mark.parametrize("kwargs", [{}, {"on_fail": "skip"}, {"max_starts": 2}, {"fcfs": True}])
def test_mcsf_on_engine_matches_round_reference(first_token, kwargs):
    rng = np.random.default_rng(7)
    kw = dict(kwargs)
    fcfs = kw.pop("fcfs", False)
    for _ in range(6):
        a, s, o = _instance(rng)
        policy = qt.policies.FCFS(**kw) if fcfs else qt.policies.MCSF(**kw)
        res = _run(policy, a, s, o, 40, first_token)
        starts = mcsf_schedule(a, s, o, 40, first_token=first_token,
                               order="arrival" if fcfs else "output", **kw)
        np.testing.assert_array_equal(res.requests["finish"].to_numpy(),
                                      starts + durations(o, first_token))
        assert res.metrics["peak_memory"] <= 40


def test_mcsf_reference_memory_never_exceeds_M():
    from queuetheory.bounds import schedule_memory
    rng = np.random.default_rng(11)
    for conv in ("prefill", "decode"):
        for _ in range(20):
            a, s, o = _instance(rng, n=40)
            st_ = mcsf_schedule(a, s, o, 30, first_token=conv)
            assert np.all(st_ >= a)
            assert schedule_memory(st_, s, durations(o, conv)).max() <= 30


def test_ip_convention_timing_on_engine():
    # one request, prompt 3, output 4, started in round 0: memory 3,4,5,6, done at 4
    # ("prefill", Jaillet et al.'s "ip"); "decode" ("eq1"): memory 3…7, done at 5 (spec §1.2)
    for conv, finish, peak in (("prefill", 4, 6), ("decode", 5, 7)):
        res = _run(qt.policies.MCSF(), np.array([0]), np.array([3]), np.array([4]), 10, conv)
        assert res.requests["finish"].iloc[0] == finish
        assert res.batches["memory"].max() == peak


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 12), min_size=1, max_size=10), st.integers(1, 4),
       st.integers(15, 40))
def test_break_equals_skip_for_equal_prompts(outputs, prompt, memory):
    # spec §2.1: with equal prompts a failing candidate implies every longer one fails
    o = np.array(outputs)
    a = np.zeros(o.size, dtype=np.int64)
    s = np.full(o.size, prompt)
    b = mcsf_schedule(a, s, o, memory, on_fail="break")
    k = mcsf_schedule(a, s, o, memory, on_fail="skip")
    np.testing.assert_array_equal(b, k)


def _feasible_reference(jobs, t, M):
    """Spec §7's reference check: jobs = [(start, size, duration)] incl. the candidate."""
    for pj, _, dj in jobs:
        tau = pj + dj - 1
        if tau < t:
            continue
        if sum(sk + tau - pk for pk, sk, dk in jobs if pk <= tau <= pk + dk - 1) > M:
            return False
    return True


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(1, 5), st.integers(1, 9)),
                max_size=6),
       st.lists(st.tuples(st.integers(1, 5), st.integers(1, 9)), min_size=1, max_size=5),
       st.integers(5, 30))
def test_future_peak_agrees_with_reference(running, candidates, M):
    t = 6
    run = [(p, s, d) for p, s, d in running if p + d - 1 >= t]
    assume(_feasible_reference(run, t, M))          # the running set itself fits
    peak = FuturePeak(M, t, [s + t - p for p, s, _ in run], [p + d - 1 for p, _, d in run])
    admitted = list(run)
    for s, d in candidates:
        want = _feasible_reference(admitted + [(t, s, d)], t, M)
        assert peak.fits(s, t + d - 1) == want
        if want:
            peak.add(s, t + d - 1)
            admitted.append((t, s, d))


def test_alpha_protection_never_infeasible_and_clears():
    rng = np.random.default_rng(3)
    a = np.sort(rng.integers(0, 60, 80))
    s, o = rng.integers(1, 5, 80), rng.integers(5, 30, 80)
    for alpha, beta in ((0.3, None), (0.05, None), (0.1, 0.2), (0.1, 0.5)):
        pol = qt.policies.AlphaProtection(alpha, beta)
        res = _run(pol, a, s, o, 60)
        assert res.metrics["peak_memory"] <= 60
        if pol.loop_at is None:
            assert res.metrics["completed"] == 80
    small = qt.policies.AlphaProtection(0.05)
    res = _run(small, a, s, o, 60)
    assert small.clearings > 0 and res.metrics["restarts"] > 0


def test_alpha_greedy_loop_detected():
    # two requests (prompt 1, output 10) admitted together need 2 + 2·9 = 20 > M = 12 tokens
    # before either finishes: greedy clears both and re-admits them for ever
    a, s, o = np.zeros(2, np.int64), np.ones(2, np.int64), np.full(2, 10)
    pol = qt.policies.AlphaProtection(0.0)
    wl = qt.Workload.from_arrays(a.astype(float), s, o)
    res = qt.simulate(wl, pol, qt.UnitTime(), memory=12, n_requests=2, first_token="prefill",
                      max_iterations=200)
    assert pol.loop_at is not None and res.metrics["completed"] == 0
    pol_ok = qt.policies.AlphaProtection(0.0, beta=0.5)
    res = qt.simulate(wl, pol_ok, qt.UnitTime(), memory=12, n_requests=2, first_token="prefill",
                      max_iterations=400, seed=1)
    assert res.metrics["completed"] == 2 and pol_ok.loop_at is None


@pytest.mark.parametrize("bad", [dict(on_fail="stop"), dict(max_starts=0)])
def test_mcsf_rejects_bad_arguments(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        qt.policies.MCSF(**bad)


def test_bad_arguments_name_the_parameter():
    with pytest.raises(ValueError, match="alpha"):
        qt.policies.AlphaProtection(1.0)
    with pytest.raises(ValueError, match="beta"):
        qt.policies.AlphaProtection(0.1, 0)
    with pytest.raises(ValueError, match="first_token='C1'"):
        durations([1], "C1")
    with pytest.raises(ValueError, match="memory"):
        mcsf_schedule([0], [5], [10], 10)

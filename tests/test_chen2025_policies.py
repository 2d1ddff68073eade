"""The schedulers of seed 003 on the engine: worked examples, invariants, orderings."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import queuetheory as qt
from queuetheory.errors import QueueTheoryError
from queuetheory.policies import HSF, AdaptiveRobust, AEll, AMax, AMin, ARandom
from queuetheory.policies.robust_experiments import (
    BucketInterval,
    FixedInterval,
    corresponding_order,
    input_sequence,
    is_delayed,
    paper_trace,
    run_rounds,
    tel,
)

ALL = [HSF(), AMax(), AMax("random"), ARandom(), AMin(), AMin("dynamic"),
       AMin(bound="generated+1"), AEll(), AdaptiveRobust()]


@pytest.mark.parametrize("seed", range(5))
def test_example3_2_hsf_5_amax_9(seed):
    tr = paper_trace([1] * 5, 1, 1, 4)
    assert tel(run_rounds(HSF(), tr, 10, seed=seed)) == 5
    assert tel(run_rounds(AMax(), tr, 10, seed=seed)) == 9
    assert tel(run_rounds(AMin(), tr, 10, seed=seed)) == 5
    assert tel(run_rounds(AEll(), tr, 10, seed=seed)) == 5


def test_example8_2_hsf_input_sequence_and_definition8_1():
    res = run_rounds(HSF(), paper_trace([1, 2, 3, 4], 1), 7)
    i3 = input_sequence(res)
    assert i3 == [{1, 2, 3}, set(), {4}]
    assert tel(res) == 12
    np.testing.assert_array_equal(res.requests["finish"], [1, 2, 3, 6])
    i1, i2 = [{1, 3}, set(), {2}, {4}], [{3}, {1, 2}, set(), {4}]
    assert corresponding_order(i1, i2) and corresponding_order(i1, i3)
    assert corresponding_order(i2, i3)
    assert is_delayed(i3, i1) and is_delayed(i3, i2)
    assert not is_delayed(i1, i2) and not is_delayed(i2, i1)
    assert not corresponding_order([{1}, {2}], [{2}, {1}])


def _random_instance(seed, n=80, ell=2, u=20, two_point=False):
    rng = np.random.default_rng(seed)
    o = rng.choice([ell, u], n) if two_point else rng.integers(ell, u + 1, n)
    return paper_trace(o, rng.integers(0, 4, n), ell, u), o


@pytest.mark.parametrize("policy", ALL, ids=lambda p: repr(p))
@pytest.mark.parametrize("two_point", [False, True])
def test_every_policy_finishes_within_memory(policy, two_point):
    tr, o = _random_instance(3, two_point=two_point)
    res = run_rounds(policy, tr, 60, max_iterations=20_000)
    req = res.requests
    assert req["finish"].notna().all()
    assert res.batches["memory"].max() <= 60            # the engine checks it too
    assert tel(res) >= o.sum()


@pytest.mark.parametrize("policy", [HSF(), AMax(), AMax("random"), ARandom()],
                         ids=lambda p: repr(p))
def test_non_evicting_policies_never_restart(policy):
    res = run_rounds(policy, _random_instance(4)[0], 60)
    assert res.requests["restarts"].sum() == 0


def test_hsf_with_exact_lengths_is_a_lower_envelope_on_average():
    ratios = []
    for seed in range(2):
        tr, _ = _random_instance(seed, two_point=True)
        h = tel(run_rounds(HSF(), tr, 60))
        ratios += [tel(run_rounds(p, tr, 60, seed=seed)) / h
                   for p in (AMin(), AMax(), ARandom(), AEll())]
    assert min(ratios) > 0.9 and np.mean(ratios) > 1


def test_amin_evicts_requeues_and_never_lowers_bounds():
    class Watch(AMin):
        def _evict(self, state, running):
            before = self._lb.copy()
            out = super()._evict(state, running)
            assert np.all(self._lb[: before.size] >= before)
            return out

    tr, o = _random_instance(1, n=60, ell=1, u=30)
    pol = Watch()
    res = run_rounds(pol, tr, 50)
    assert res.requests["restarts"].sum() > 0           # evictions happened and were re-run
    assert res.requests["finish"].notna().all()
    lb = pol._lb[: len(o)]
    assert np.all(lb >= 1) and np.all(lb <= o)           # õ stays a valid lower bound


def test_aell_promotes_long_jobs_once():
    ell, u = 3, 30
    o = np.repeat([ell, u], [40, 10])
    res = run_rounds(AEll(), paper_trace(o, 0, ell, u), 80)
    restarts = res.requests["restarts"].to_numpy()
    np.testing.assert_array_equal(restarts, (o == u).astype(int))


def test_aell_beats_amin_and_amax_on_skewed_two_point():
    ell, u = 5, 50
    o = np.random.default_rng(2).permutation(np.repeat([ell, u], [400, 40]))
    tr = paper_trace(o, 0, ell, u)
    t = {p: tel(run_rounds(pol, tr, 600, seed=1))
         for p, pol in {"ell": AEll(), "min": AMin(), "max": AMax()}.items()}
    assert t["ell"] < t["min"] < t["max"]


def test_adaptive_switch_picks_by_alpha():
    pol = AdaptiveRobust()
    run_rounds(pol, paper_trace([2, 20, 2], 0, 2, 20), 60)
    assert pol.chosen == "AEll"
    run_rounds(pol, paper_trace([10, 20, 10], 0, 10, 20), 60)
    assert pol.chosen == "AMin"


def test_revised_amin_buckets_not_worse_than_single_interval():
    # Corollary 4.10 (soft): class lower bounds help A_min
    rng = np.random.default_rng(0)
    o = rng.integers(1, 100, 60)
    lo, hi = BucketInterval(20)(None, o, None)
    single = paper_trace(o, 2, 1, 100)
    buckets = paper_trace(o, 2, lo, hi)
    a = np.mean([tel(run_rounds(AMin(), single, 300, seed=s)) for s in range(2)])
    b = np.mean([tel(run_rounds(AMin(), buckets, 300, seed=s)) for s in range(2)])
    assert b < a


def test_predictors_in_a_workload_run_with_any_policy():
    wl = qt.Workload([qt.RequestClass(prompt=4, output=7,
                                      rate=2.0)], predictor=FixedInterval(1, 50))
    res = qt.simulate(wl, AMin(), qt.UnitTime(), memory=200, n_requests=30, first_token="prefill")
    assert res.requests["finish"].notna().all()
    assert (res.requests["hi"] == 50).all()
    lo, hi = BucketInterval(100)(None, np.array([1, 100, 101, 883]), None)
    np.testing.assert_array_equal(lo, [1, 1, 101, 801])
    np.testing.assert_array_equal(hi, [100, 100, 200, 900])


def test_bad_inputs_raise():
    tr = paper_trace([3, 3], 1, 1, 100)
    with pytest.raises(QueueTheoryError, match="memory=20"):
        run_rounds(AMax(), tr, 20)
    with pytest.raises(ValueError, match="memory=None"):
        qt.simulate(tr, AMin(), qt.UnitTime(), first_token="prefill")
    with pytest.raises(ValueError, match="evict_key"):
        AMin("oldest")
    with pytest.raises(ValueError, match="order"):
        AMax("fifo")
    with pytest.raises(ValueError, match="lo, hi"):
        paper_trace([3], 1, 4, 10)
    with pytest.raises(ValueError, match="lo="):
        FixedInterval(5, 2)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10**6), n=st.integers(1, 25), memory=st.integers(40, 120),
       policy=st.sampled_from(ALL))
def test_random_instances_feasible_and_complete(seed, n, memory, policy):
    rng = np.random.default_rng(seed)
    o = rng.integers(1, 15, n)
    lo = np.maximum(1, o - rng.integers(0, 10, n))
    hi = o + rng.integers(0, 10, n)
    tr = paper_trace(o, rng.integers(0, 6, n), lo, hi)
    res = run_rounds(policy, tr, memory, seed=seed, max_iterations=50_000)
    assert res.requests["finish"].notna().all()
    assert tel(res) >= o.sum()

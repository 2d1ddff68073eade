"""The pieces behind the jaillet2025 verdicts (tests/test_ledger.py checks the verdicts)."""

import numpy as np
import pytest

import queuetheory as qt
from queuetheory.bounds import smallest_alg1_counterexample
from queuetheory.bounds.adversarial import (
    long_short_latency,
    theorem62_deterministic_bound,
    theorem62_instance,
    theorem64_distribution,
    theorem64_ratio,
)
from queuetheory.rounds import mcsf_schedule


@pytest.mark.parametrize("first_token", ["decode", "prefill"])
def test_theorem4_2_refuted_smallest_counterexample_has_four_requests(first_token):
    found = smallest_alg1_counterexample(max_n=4, prompts=(1,), max_memory=5, max_output=4,
                                         first_token=first_token)
    assert found.found and found.output.size == 4
    assert found.searched[3] > 0            # every smaller instance was tried first
    n, M, o = found.output.size, found.memory, found.output
    milp = qt.bounds.hindsight_optimum(np.zeros(n, int), np.ones(n, int), o, M,
                                       first_token=first_token)
    assert milp.total_latency == found.opt_latency < found.alg_latency


@pytest.mark.parametrize("first_token", ["decode", "prefill"])
def test_theorem4_2_no_counterexample_below_four_requests(first_token):
    found = smallest_alg1_counterexample(max_n=3, prompts=(1, 2), max_memory=8, max_output=5,
                                         first_token=first_token)
    assert not found.found


def test_theorem6_2_exact_optimum_matches_milp():
    inst = theorem62_instance(48, 1 / 4)
    milp = qt.bounds.hindsight_optimum(inst.arrival, inst.prompt, inst.output, inst.memory)
    assert milp.total_latency == inst.optimum_latency


def test_theorem6_2_mcsf_latency_is_long_start_zero_on_engine():
    inst = theorem62_instance(256, 1 / 4)
    assert inst.algorithm_latency == long_short_latency(256, 1 / 4, inst.tau, 0)[0]
    wl = qt.Workload.from_arrays(inst.arrival.astype(float), inst.prompt, inst.output)
    res = qt.simulate(wl, qt.policies.MCSF(), qt.UnitTime(), memory=256, first_token="prefill",
                      n_requests=len(inst.arrival))
    assert res.requests["latency"].sum() == inst.algorithm_latency
    assert res.metrics["peak_memory"] <= 256


def test_theorem6_2_ratio_approaches_one_plus_two_over_eps():
    ratios = [theorem62_instance(M, 1 / 4).ratio for M in (64, 256, 1024)]
    assert np.all(np.diff(ratios) > 0) and ratios[-1] < 9
    bound, t_best = theorem62_deterministic_bound(256, 1 / 4)
    assert 1 < bound <= theorem62_instance(256, 1 / 4).ratio and 0 <= t_best <= 64


def test_theorem6_4_distribution_as_printed_is_normalised():
    rounds, probs = theorem64_distribution(1024, 1 / 8, 2)
    assert sum(probs) == 1 and rounds[0] == 1024 - 2 * 128 and len(rounds) == 17
    r = theorem64_ratio(1024, 1 / 8, 2)
    # "start immediately" is a deterministic policy: the Yao bound cannot exceed it
    assert r.best <= r.immediate and r.thresholds[0] == 0


def test_mcsf_schedule_is_alg1_on_counterexample_a():
    starts = mcsf_schedule(np.zeros(4, int), np.ones(4, int), np.array([2, 2, 3, 3]), 4)
    np.testing.assert_array_equal(starts, [0, 0, 2, 4])


@pytest.mark.parametrize("M, eps", [(100, 0.3), (100, 1 / 3), (64, 0.5)])
def test_adversarial_sizes_validated(M, eps):
    with pytest.raises(ValueError, match="eps"):
        theorem62_instance(M, eps)


def test_theorem5_3_regret_grows_linearly_with_a_backlog():
    exp = qt.papers.jaillet2025.regret_experiment((100, 200, 400), seeds=(0, 1))
    slope, lo, _ = exp["lower_gap"]
    assert lo > 0 and slope > 0.15                    # Θ(T): about 0.25 per round
    assert np.all(exp["comparator"] <= exp["alg"] + 1e-9)


def test_theorem6_4_printed_distribution_does_not_defeat_start_immediately():
    for c in (2, 4):
        r = theorem64_ratio(1024, 1 / 8, c)
        assert r.immediate < c and r.best < c         # no contradiction with ratio c


def test_kv_token_limit_formula_is_exact_and_not_16492():
    from fractions import Fraction

    from queuetheory.policies.kvcache import kv_token_limit
    assert kv_token_limit(70e9, 80, 8192, 2, 2, 80e9) == Fraction(20_000_000_000, 2_621_440)
    assert kv_token_limit(70 * 2**30, 80, 8192, 2, 2, 80 * 2**30) == 8192
    with pytest.raises(ValueError, match="gpu_bytes"):
        kv_token_limit(70e9, 80, 8192, 2, 1, 80e9)
    with pytest.raises(ValueError, match="layers"):
        kv_token_limit(70e9, 0, 8192, 2, 2, 80e9)

"""Eq. 12–13, λ* = r/T̄^R, T̄^R_LB, the DistServe split and the chunking search."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import queuetheory as qt
from queuetheory.bounds.rad_capacity import (
    ceil_sum,
    distserve_split,
    lcm_chunking_counterexample,
    optimal_chunking,
    rad_capacity,
    rad_n_min,
    request_time,
    request_time_sym,
    t_max,
)
from queuetheory.policies import RAD
from queuetheory.timing import GPUModel, ModelDims, TiledGPUTime
from queuetheory.workload.rad import table1_lengths

TM = TiledGPUTime.illustrative()


def test_ceil_sum_matches_direct_sum():
    for n, t in itertools.product(range(0, 40), (1, 3, 4, 64)):
        assert ceil_sum(n, t) == sum(-(-i // t) for i in range(1, n + 1))


@settings(max_examples=25, deadline=None)
@given(k=st.integers(1, 24), ld=st.integers(1, 3000))
def test_eq12_sympy_equals_numpy(k, ld):
    expr, LP, LD = request_time_sym(TM)
    lp = k * TM.t_lcm
    assert float(expr.subs({LP: lp, LD: ld})) == pytest.approx(request_time(lp, ld, TM)[0],
                                                               rel=1e-12)


def test_paper_and_rad_variants_agree_under_assumption3_and_lb_is_lower():
    p = np.array([256, 512, 4096, 8192 - 256])
    d = np.array([1, 300, 17, 256])
    paper = request_time(p, d, TM)
    assert np.allclose(paper, request_time(p, d, TM, variant="rad"), rtol=1e-13)
    assert np.all(request_time(p, d, TM, variant="lb") < paper)


def test_paper_variant_needs_assumption3():
    with pytest.raises(ValueError, match="prompt=300"):
        request_time(300, 5, TM)


def test_rad_prefill_in_the_engine_takes_the_closed_form_time():
    wl = qt.Workload.from_arrays([0.0], [2048], [6])
    res = qt.simulate(wl, RAD(TM.tile), TM, n_requests=1, first_token="prefill")
    parts = request_time(2048, 5, TM, parts=True)
    prefill = 2048 * (TM.inv_mu_lin / TM.tile[1] + TM.gpu.inv_mu_nlin) + parts[
        "prefill_attention"][0]
    assert res.requests["first_token"][0] == pytest.approx(prefill, rel=1e-13)


def test_capacity_exact_pmf_vs_monte_carlo_within_four_se():
    p = np.array([256, 1024, 2048])
    d = np.array([10, 400, 50])
    w = np.array([0.5, 0.3, 0.2])
    exact = rad_capacity(p, d, TM, weights=w, r=3)
    k = np.random.default_rng(0).choice(3, 50_000, p=w)
    mc = rad_capacity(p[k], d[k], TM, r=3)
    assert abs(mc.T_R - exact.T_R) < 4 * mc.stderr
    assert exact.lambda_star == pytest.approx(3 / exact.T_R)
    assert exact.T_P + exact.T_D == pytest.approx(exact.T_R)
    assert exact.lambda_lb > exact.lambda_star
    assert sum(exact.parts.values()) == pytest.approx(exact.T_R)


def test_table1_capacity_has_a_standard_error():
    p, d = table1_lengths(20_000, round_to=256)
    cap = rad_capacity(p, d, TM)
    assert cap.method == "monte-carlo" and 0 < cap.lambda_stderr < 0.01 * cap.lambda_star


def test_distserve_split_is_the_best_integer_split_and_below_rad():
    for T_P, T_D, r in [(0.2, 0.21, 4), (0.075, 0.014, 2), (0.3, 0.1, 7)]:
        s = distserve_split(T_P, T_D, r)
        brute = max(min(k / T_P, (r - k) / T_D) for k in range(1, r))
        assert s.capacity == pytest.approx(brute)
        assert s.capacity <= r / (T_P + T_D) * (1 + 1e-12)
    assert distserve_split(1.0, 1.0, 4).share == pytest.approx(1.0)


def test_t_max_and_theorem2_n():
    T = t_max(TM, 8192)
    assert t_max(TM, 8192, safe=True) >= T
    assert T > request_time(8192 - 256, 256, TM)[0]
    assert rad_n_min(0.1, 0.4, T, 256) == pytest.approx(255 * T / 0.04)
    with pytest.raises(ValueError, match="eps"):
        rad_n_min(1.5, 0.4, T, 256)


def _brute_force(L, tm):
    best = None
    for cuts in itertools.product((0, 1), repeat=L - 1):
        sizes, c = [], 1
        for cut in cuts:
            if cut:
                sizes.append(c)
                c = 1
            else:
                c += 1
        sizes.append(c)
        starts = np.cumsum([0] + sizes[:-1]) + 1
        cost = int(tm.prefill_bracket(starts, np.array(sizes)).sum())
        best = cost if best is None else min(best, cost)
    return best


def test_chunking_search_equals_brute_force_on_small_tiles():
    dims = ModelDims(N=1, d_x=8, d=8, d_ff=8, d_out=8)
    gpu = GPUModel.from_efficiency(efficiency={(4, 2, 2): 1.0}, gemv_tile=(2, 2))
    tm = TiledGPUTime(dims, gpu, check=False)
    for L in (4, 8, 12):
        assert optimal_chunking(L, tm).cost == _brute_force(L, tm)


def test_lcm_chunking_beaten_when_t_lcm_exceeds_t_col():
    bad = TiledGPUTime(ModelDims.mistral_like(),
                       GPUModel.from_efficiency(efficiency={(256, 128, 32): 1.0}))
    res = optimal_chunking(6 * bad.t_lcm, bad)
    sizes = np.full(12, 128)
    direct = int(bad.prefill_bracket(np.arange(12) * 128 + 1, sizes).sum())
    assert res.cost <= direct < res.lcm_cost and res.ratio < 1
    assert lcm_chunking_counterexample(TM, 3) is None

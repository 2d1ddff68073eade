"""qt.capacity.max_rate from a loaded start: the closed-form boundaries lie inside its
interval, and a slow start from empty cannot pass for stability."""

import pytest
from scipy import stats

import queuetheory as qt
from queuetheory import capacity as cap
from queuetheory.capacity.loaded import backlog_size, loaded_verdict
from queuetheory.timing import BatchLoad

GEOM64 = stats.geom(1 / 64)
PIECEWISE = qt.PiecewiseLinearTime(c=10, a=0.3, b0=128)     # c < a·b0: best load below b


def _inside(m, closed):
    assert m.converged, m.probes
    assert m.interval[0] < closed <= m.interval[1] * (1 + 1e-12), (closed, m, m.probes)


def test_piecewise_time_whose_best_load_is_below_the_budget_has_the_full_batch_boundary():
    """Backlogged, Sarathi runs b-token batches: the boundary is b/t_b/(m_p + m_d), a third
    of the compute bound max_k k/t_k (reached at b0 = 128)."""
    wl, pol = qt.Workload([qt.RequestClass(700, GEOM64, 1.0)]), qt.policies.Sarathi(512)
    br = cap.bounds(wl, PIECEWISE, token_budget=512, policy=pol)
    t_b = float(PIECEWISE.duration(BatchLoad.of_tokens(prefill=512)))
    closed = 512 / t_b / br.stats.work
    assert br.rate("compute") > 2 * closed
    m = cap.max_rate(wl, pol, PIECEWISE, tol=0.02, bracket=br)
    _inside(m, closed)
    assert set(m.probes["decided_by"]) == {"loaded start"}


@pytest.mark.parametrize("factor", [0.9, 1.1])
def test_the_loaded_start_drains_below_the_boundary_and_grows_at_the_fluid_rate_above(factor):
    """From the fluid-sized backlog, Sarathi (piecewise, c < a·b0) drains below its
    boundary and, above it, grows at about the fluid rate ``1 − 1/factor`` of the offered
    work from the start (a 3000-request run's tail)."""
    wl, pol = qt.Workload([qt.RequestClass(700, GEOM64, 1.0)]), qt.policies.Sarathi(512)
    br = cap.bounds(wl, PIECEWISE, token_budget=512, policy=pol)
    x = factor * br.lower
    loaded = loaded_verdict(wl, x, pol, PIECEWISE, horizon=3000 / x,
                            backlog=backlog_size(br, PIECEWISE, 512), seeds=(0,),
                            level=0.99, tolerance=0.03, token_budget=512)
    if factor < 1:
        assert loaded["verdict"] == "stable" and loaded["drift"] < 0.01
    else:
        assert loaded["verdict"] == "unstable"
        assert loaded["drift"] == pytest.approx(1 - 1 / factor, abs=0.025)


def test_vanilla_vllm_lambda_star_holds_with_continuous_poisson_arrivals():
    b, sizes = 768, stats.poisson(31, loc=1)
    wl = qt.Workload([qt.RequestClass(sizes, sizes, 1.0)], arrivals="poisson")
    m = cap.max_rate(wl, qt.policies.VLLMVanilla(b), qt.UnitTime(), first_token="decode",
                     tol=0.02, n_requests=20000)
    _inside(m, cap.vllm_unit_time_rate(b, 32))


def test_m_d_1_through_max_reqs_1():
    """Orca with one request per batch, unit time, (16, 8) tokens: each request takes one
    prefill round and 8 decode rounds, an M/D/1 queue with boundary 1/9."""
    wl = qt.Workload([qt.RequestClass(16, 8, 1.0)])
    m = cap.max_rate(wl, qt.policies.Orca(64, max_reqs=1), qt.UnitTime(),
                     first_token="decode", tol=0.02)
    _inside(m, 1 / 9)


def test_m_g_1_through_max_reqs_1():
    """Sarathi with one request per batch, unit time, b = 64: a prompt uniform on 1..128
    takes ceil(p/64) rounds, then its output (uniform on 1..16) one round per token:
    1/E[S] with E[S] = E[ceil(p/64)] + E[o] = 1.5 + 8.5, exactly."""
    wl = qt.Workload([qt.RequestClass(stats.randint(1, 129), stats.randint(1, 17), 1.0)])
    br = cap.bounds(wl, qt.UnitTime(), token_budget=64, policy=qt.policies.Sarathi(
        64, max_reqs=1), first_token="decode")
    assert br.lower == pytest.approx(1 / 10, rel=1e-9)
    m = cap.max_rate(wl, qt.policies.Sarathi(64, max_reqs=1), qt.UnitTime(),
                     first_token="decode", tol=0.02, bracket=br)
    _inside(m, 1 / 10)


def test_a_bad_start_is_refused():
    with pytest.raises(ValueError, match="start='full'"):
        cap.max_rate(qt.Workload([qt.RequestClass(16, 8, 1.0)]), qt.policies.Sarathi(64),
                     qt.UnitTime(), start="full")

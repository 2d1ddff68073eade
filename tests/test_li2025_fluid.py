"""Fluid model of seed 004 (App. C): (C.19) printed vs corrected, Prop. 2 drain and growth,
policy fluid paths and fluid-scaled simulations (spec §3.4–§3.5, §6 item 1, §7 item 6)."""

import math
from fractions import Fraction

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

import queuetheory as qt
from queuetheory.errors import UnstableError
from queuetheory.fluid import (
    drain_rate,
    drain_time,
    engine_workload,
    fluid_convergence,
    fluid_path,
    fluid_phases,
    printed_c19_workload,
    workload_identity_residual,
)


def test_corrected_workload_satisfies_the_identity_printed_c19_does_not():
    assert workload_identity_residual(engine_workload) == 0
    printed = workload_identity_residual(printed_c19_workload)
    assert printed != 0
    lam = next(s for s in printed.free_symbols if s.name == "lam")
    # an idle engine (no service) with arrivals: printed ḟ = λ m_p instead of λ(m_p + m_d)
    t = sp.Symbol("t", positive=True)
    idle = printed.subs({sp.Derivative(sp.Function(f"B_{f}")(t), t): 0 for f in "pd"})
    assert sp.simplify(idle + lam * next(s for s in printed.free_symbols if s.name == "m_d")) == 0


def test_engine_workload_is_the_tokens_still_owed():
    assert engine_workload(3, 2, 10, 4) == 3 * 14 + 2 * 4
    zp, zd, mp, md = sp.symbols("Z_p Z_d m_p m_d")
    assert sp.expand(engine_workload(zp, zd, mp, md)) == sp.expand(mp * zp + md * (zp + zd))


rates = st.fractions(min_value=Fraction(1, 10), max_value=10, max_denominator=20)


@settings(max_examples=200, deadline=None)
@given(zp0=st.fractions(0, 5, max_denominator=10), zd0=st.fractions(0, 5, max_denominator=10),
       mp=rates, md=rates, lam=st.fractions(0, 3, max_denominator=10),
       mu=st.fractions(1, 40, max_denominator=10), policy=st.sampled_from(["sarathi", "orca"]))
def test_every_fluid_phase_has_workload_slope_minus_delta(zp0, zd0, mp, md, lam, mu, policy):
    """Exact rationals: ḟ = λ(m_p+m_d) − μ on every phase; the path empties at f(0)/δ."""
    phases = fluid_phases(policy, zp0, zd0, lam, mp, md, mu)
    delta = mu - lam * (mp + md)
    for duration, rp, rd in phases:
        assert engine_workload(rp, rd, mp, md) == -delta
        assert duration >= 0
    total = sum(p[0] for p in phases)
    f0 = engine_workload(zp0, zd0, mp, md)
    if delta > 0:
        assert total == f0 / delta
    elif f0 > 0 or delta < 0:
        assert total == math.inf


@settings(max_examples=50, deadline=None)
@given(zp0=st.floats(0, 3), zd0=st.floats(0, 3), rho=st.floats(0.1, 0.95),
       policy=st.sampled_from(["sarathi", "orca"]))
def test_fluid_path_is_max_zero_f0_minus_delta_t(zp0, zd0, rho, policy):
    mp, md, b, t_b = 6.0, 9.0, 30.0, 1.5
    lam = rho * b / t_b / (mp + md)
    f0 = engine_workload(zp0, zd0, mp, md)
    T = drain_time(f0, lam, mp, md, b, t_b)
    t = np.linspace(0, 2 * T + 1, 301)
    path = fluid_path(policy, zp0, zd0, lam, mp, md, b, t_b, t)
    delta = drain_rate(lam, mp, md, b, t_b)
    assert np.allclose(path.f, np.maximum(0.0, f0 - delta * t), atol=1e-9 * max(1, f0))
    assert (path.zp >= 0).all() and (path.zd >= 0).all()
    assert path.empty_at == pytest.approx(T)


def test_weak_instability_above_capacity():
    """Prop. 2(b): from empty, f(t) = (λ(m_p+m_d) − μ)·t under both policies."""
    t = np.linspace(0, 50, 11)
    for policy in ("sarathi", "orca"):
        path = fluid_path(policy, 0, 0, 1.0, 10, 10, 16, 1, t)
        assert np.allclose(path.f, 4 * t) and path.empty_at == math.inf


def test_drain_time_and_errors():
    assert drain_time(20, 1, 10, 10, 32, 1) == pytest.approx(20 / 12)
    with pytest.raises(UnstableError, match="exceeds the limit by 8"):
        drain_time(20, 2, 10, 10, 32, 1)
    with pytest.raises(ValueError, match="policy"):
        fluid_path("vllm", 1, 0, 1, 1, 1, 4, 1, [0, 1])
    with pytest.raises(ValueError, match="b="):
        drain_rate(1, 1, 1, 0, 1)


def test_fluid_scaled_simulations_converge_to_the_fluid_path():
    sizes = stats.binom(18, 0.5, loc=1)
    wl = qt.Workload([qt.RequestClass(sizes, sizes, 1.0)])
    tab = fluid_convergence(qt.policies.Sarathi(32), "sarathi", wl, qt.UnitTime(), 32,
                            scales=(10, 100, 1000))
    assert tab["sup_f"].is_monotonic_decreasing
    assert tab.loc[1000, "sup_f"] < 0.1 and tab.loc[1000, "sup_z"] < 0.15
    assert tab.loc[1000, "drain_ratio"] == pytest.approx(1, abs=0.1)


def test_public_name():
    assert qt.fluid.engine_workload(1, 1, 2, 3) == 8

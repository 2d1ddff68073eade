"""Seed 000 §3: the fluid equilibrium (eqs. 5-8) against its closed forms."""

from fractions import Fraction

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import queuetheory as qt
from queuetheory.errors import UnstableError

PROP4 = [qt.RequestClass(1, 1, 1.0), qt.RequestClass(1, 2, 1.0)]


@pytest.mark.parametrize("m", [1, 2, 3])
def test_fluid_equilibrium_eqs_5_and_7_give_eq_6_and_identity(m):
    s = qt.fluid.equilibrium_symbolic(m)
    W, d0, d1 = s["W"], s["d0"], s["d1"]
    assert sp.simplify(s["memory"] - d0 * W / (1 - d1 * W)) == 0              # (6)
    assert sp.simplify(s["iteration_time"] - d0 / (1 - d1 * W)) == 0          # (7)
    assert sp.simplify(s["memory"] / (d0 + d1 * s["memory"]) - W) == 0        # M*/(d0+d1M*) = W
    for j in range(m):                                         # n_j* = ΔT* λ_j (l'_j+1)
        assert sp.simplify(s["active"][j] - s["iteration_time"] * s["lam"][j]
                           * (s["lp"][j] + 1)) == 0
    assert sp.simplify(s["throughput"]
                       - sum(s["lam"][j] * (s["lp"][j] + 1) for j in range(m))) == 0   # (8)


def test_fluid_equilibrium_numeric_matches_exact_rationals():
    classes = [qt.RequestClass(3, 5, 0.02), qt.RequestClass(7, 2, 0.05),
               qt.RequestClass(1, 9, 0.01)]
    d0, d1 = Fraction(1, 8), Fraction(1, 400)
    W = sum(Fraction(c.rate).limit_denominator(1000) * (c.output + 1)
            * (c.prompt + Fraction(c.output, 2)) for c in classes)
    dT = d0 / (1 - d1 * W)
    eq = qt.fluid.equilibrium(classes, float(d0), float(d1))
    assert eq.iteration_time == pytest.approx(float(dT), rel=1e-12)
    assert eq.memory == pytest.approx(float(d0 * W / (1 - d1 * W)), rel=1e-12)
    assert eq.load == pytest.approx(float(d1 * W), rel=1e-12)
    lam = np.array([0.02, 0.05, 0.01])
    assert np.allclose(eq.per_stage, float(dT) * lam, rtol=1e-12)
    assert np.allclose(eq.active, float(dT) * lam * np.array([6, 3, 10]), rtol=1e-12)
    assert eq.throughput == pytest.approx(0.02 * 6 + 0.05 * 3 + 0.01 * 10)
    assert eq.decode_throughput == pytest.approx(0.02 * 5 + 0.05 * 2 + 0.01 * 9)


def test_fluid_equilibrium_prop4_instance():
    # K = d0/(1 − 9 d1): with d0 = d1 = 0.1, K = 1, n* = (2, 3), M* = 9 (L758)
    eq = qt.fluid.equilibrium(PROP4, 0.1, 0.1)
    assert eq.iteration_time == pytest.approx(1.0)
    assert np.allclose(eq.active, [2, 3]) and eq.memory == pytest.approx(9)
    assert eq.throughput == 5 and eq.decode_throughput == 3


def test_unstable_load_raises_with_excess():
    with pytest.raises(UnstableError, match="exceeds the limit by 0.08") as e:
        qt.fluid.equilibrium(PROP4, 0.1, 0.12)       # d1·W = 9 · 0.12 = 1.08
    assert isinstance(e.value, ValueError)
    assert e.value.load == pytest.approx(1.08)


def test_equilibrium_rejects_random_lengths_and_bad_d0():
    from scipy import stats

    with pytest.raises(ValueError, match="fixed"):
        qt.fluid.equilibrium([qt.RequestClass(2, stats.poisson(4, loc=1), 1.0)], 0.1, 0.01)
    with pytest.raises(ValueError, match="d0"):
        qt.fluid.equilibrium(PROP4, -1, 0.01)


@settings(max_examples=60, deadline=None)
@given(lam=st.floats(0.01, 2), l=st.integers(1, 50), lp=st.integers(1, 50),
       d0=st.floats(0.01, 1), C=st.floats(1, 1e5))
def test_fluid_capacity_interpretation(lam, l, lp, d0, C):
    """W < C/(d0 + d1 C) iff d1W < 1 and C > M* (spec §2.2)."""
    a = (lp + 1) * (l + lp / 2)
    d1 = 0.5 / (lam * a)
    eq = qt.fluid.equilibrium([qt.RequestClass(l, lp, lam)], d0, d1)
    W = eq.work_rate
    if abs(C - eq.memory) > 1e-9 * C:
        assert (W < C / (d0 + d1 * C)) == eq.stable_under(C)

"""Closed forms of seed 003 checked against the matrix (Lemma 4.6) evaluations."""

import numpy as np
import pytest
import sympy as sp

import queuetheory as qt
from queuetheory.bounds import competitive_closed_forms as cf

ALPHA_GRID = np.linspace(0.02, 0.98, 49)
T_GRID = np.concatenate([[0.0], np.logspace(-4, 4, 40001)])


def _two_point(ell, u, t):
    x = np.zeros(u - ell + 1)
    x[0], x[-1] = t, 1.0
    return x


@pytest.mark.parametrize("ell, u", [(1, 2), (1, 4), (2, 8), (3, 5), (10, 100)])
@pytest.mark.parametrize("t", [0.05, 1.0, 3.0, 40.0])
def test_theorem5_1_formula_equals_matrix_evaluation(ell, u, t):
    assert qt.bounds.rayleigh(_two_point(ell, u, t), ell) == pytest.approx(
        float(cf.amin_two_point(ell / u, t)), rel=1e-12)


def test_theorem5_1_sup_is_tight_at_t_one_over_alpha():
    for a in ALPHA_GRID:
        assert cf.amin_two_point(a, T_GRID).max() <= cf.amin_two_point_sup(a) + 1e-12
        assert cf.amin_two_point(a, 1 / a) == pytest.approx(cf.amin_two_point_sup(a), rel=1e-12)


def test_theorem5_2_sup_over_t_equals_bound():
    sup = np.array([cf.aell_two_point(a, T_GRID).max() for a in ALPHA_GRID])
    bound = cf.aell_two_point_sup(ALPHA_GRID)
    assert np.all(sup <= bound + 1e-12)
    np.testing.assert_allclose(sup, bound, atol=1e-6)
    small = ALPHA_GRID[ALPHA_GRID <= 0.5]
    np.testing.assert_allclose(cf.aell_two_point(small, (1 - 2 * small) / small),
                               cf.aell_two_point_sup(small), rtol=1e-12)


def test_alpha_star_is_crossing_of_the_two_bounds():
    a_star = qt.bounds.two_point_threshold()
    assert sp.simplify(cf.two_point_threshold(exact=True) - (3 - sp.sqrt(5)) / 2) == 0
    assert float(cf.aell_two_point_sup(a_star)) == pytest.approx(
        float(cf.amin_two_point_sup(a_star)), rel=1e-12)
    assert np.all((cf.aell_two_point_sup(ALPHA_GRID) < cf.amin_two_point_sup(ALPHA_GRID))
                  == (ALPHA_GRID < a_star))


@pytest.mark.parametrize("ell, u, s", [(1, 4, 0), (2, 10, 0), (2, 10, 3)])
def test_arandom_two_point_equals_fluid_histogram_and_sup_is_two_point(ell, u, s):
    for r in (0.1, 1.0, 4.0):
        assert cf.arandom_fluid_ratio(_two_point(ell, u, r), ell, s) == pytest.approx(
            float(cf.arandom_two_point(r, ell, u, s)), rel=1e-12)
    worst, hist = cf.arandom_worst_case(u, ell, s)
    assert worst == pytest.approx(cf.arandom_two_point_sup(ell, u, s), rel=1e-9)
    assert hist[1:-1].max(initial=0) < 1e-8          # two-point worst histogram
    if s == 0:
        assert cf.arandom_two_point_sup(ell, u) == pytest.approx((1 + u / ell) / 2)


@pytest.mark.parametrize("ell, u", [(1, 4), (2, 10), (1, 10)])
def test_amax_two_point_equals_fluid_and_theorem3_4_construction(ell, u):
    a = ell / u
    for r in (0.3, 1.0, 5.0):
        assert cf.amax_fluid_ratio(_two_point(ell, u, r), ell) == pytest.approx(
            float(cf.amax_two_point(a, r)), rel=1e-12)
        # the proof's r = a/b is N_ℓ/N_u · α
        assert cf.thm34_construction(a, r * a) == pytest.approx(float(cf.amax_two_point(a, r)))
    grid = np.logspace(-3, 4, 200001)
    assert cf.amax_two_point(a, grid).max() == pytest.approx(
        float(cf.thm34_construction_sup(a)), rel=1e-7)


def test_theorem3_4_construction_below_claim_and_upper_bound():
    assert np.all(cf.thm34_construction_sup(ALPHA_GRID) < cf.thm34_claimed(ALPHA_GRID))
    assert np.all(cf.thm34_claimed(ALPHA_GRID) < cf.amax_upper_bound(ALPHA_GRID))
    assert cf.thm34_construction_sup(1.0) == pytest.approx(cf.thm34_claimed(1.0))


def test_amax_worst_histogram_has_full_support():
    # Theorem 8.6 Part 1 fails for A_max in the fluid model: the worst histogram is interior
    worst, hist = cf.amax_worst_case(4, 1)
    assert hist is not None and hist.min() > 0
    assert worst > cf.thm34_construction_sup(0.25)
    assert worst < cf.thm34_claimed(0.25)


def test_geometric_matches_matrix_and_limit():
    for q in (0.3, 0.8):
        u = 400
        x = q ** np.arange(u)
        A, B = qt.bounds.amin_matrices(u)
        assert cf.geometric_ratio(q, u) == pytest.approx(x @ A @ x / (x @ B @ x), rel=1e-10)
    vals = [cf.geometric_ratio(q) for q in (0.1, 0.5, 0.9, 0.99, 0.995)]
    assert np.all(np.diff(vals) > 0) and max(vals) < 1.7
    limit = cf.geometric_limit(exact=True)
    assert sp.simplify(limit - (10 - 12 * sp.log(2))) == 0
    assert vals[-1] == pytest.approx(float(limit), abs=1e-4)


def test_geometric_limit_integral_numerically():
    from scipy.integrate import quad
    from scipy.special import exp1
    val = quad(lambda y: y**3 * np.exp(-y) * exp1(y), 0, np.inf)[0]
    assert 2 - 2 * val == pytest.approx(cf.geometric_limit(), rel=1e-9)


@pytest.mark.parametrize("q", [0.1, 0.45, 0.8, 0.95])
def test_theorem5_3_closed_form_equals_matrix(q):
    assert cf.lg_ratio(q) == pytest.approx(float(cf.lg_ratio_closed(q)), rel=1e-11)


def test_theorem5_3_sup_is_14_over_9():
    assert cf.lg_limit(exact=True) == sp.Rational(14, 9)
    qs = np.linspace(0.001, 0.999, 999)
    v = cf.lg_ratio_closed(qs)
    assert np.all(np.diff(v) > 0) and v.max() < 14 / 9


@pytest.mark.parametrize("fn", [cf.amax_upper_bound, cf.amin_two_point_sup, cf.thm34_claimed])
@pytest.mark.parametrize("bad", [0.0, -0.1, 1.5])
def test_alpha_out_of_range(fn, bad):
    with pytest.raises(ValueError, match="alpha"):
        fn(bad)

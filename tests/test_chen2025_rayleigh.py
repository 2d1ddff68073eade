"""Lemma 4.6, Corollary 4.8, Lemma 4.9 and the trace identity (seed 003, §4.1)."""

from fractions import Fraction

import numpy as np
import pytest
import scipy.linalg
from hypothesis import given, settings
from hypothesis import strategies as st

import queuetheory as qt
from queuetheory.bounds import competitive as cp


def test_corollary4_8_a3_b3_exact():
    A, B = qt.bounds.amin_matrices(3, exact=True)
    F = Fraction
    assert A.tolist() == [[1, F(7, 4), F(7, 3)], [F(7, 4), 4, F(17, 3)], [F(7, 3), F(17, 3), 9]]
    assert B.tolist() == [[1, 1, 1], [1, 4, 4], [1, 4, 9]]


@pytest.mark.parametrize("u", [1, 2, 7, 15])
def test_corollary4_8_general_matrices_reduce_to_paper(u):
    A, B = qt.bounds.amin_matrices(u)
    i = np.arange(1, u + 1, dtype=float)[:, None]
    j = i.T
    m = np.minimum(i, j)
    np.testing.assert_allclose(A, m**2 / (i * j) * ((i + j) ** 2 / 2 - m**2), rtol=1e-13)
    np.testing.assert_array_equal(B, m**2)


@settings(max_examples=40, deadline=None)
@given(s=st.sampled_from([0, 0.5, 1, 3, 20]), ell=st.integers(1, 6), width=st.integers(0, 12),
       seed=st.integers(0, 10**6))
def test_lemma4_6_direct_equals_matrix_form(s, ell, width, seed):
    u = ell + width
    x = np.random.default_rng(seed).random(width + 1) + 1e-3
    A, B = qt.bounds.amin_matrices(u, ell, s)
    direct = qt.bounds.lemma46_ratio(x, ell, s)
    assert direct == pytest.approx(x @ A @ x / (x @ B @ x), rel=1e-12)
    assert qt.bounds.rayleigh(x, ell, s) == pytest.approx(direct, rel=1e-12)


@pytest.mark.parametrize("u, ell, s", [(30, 1, 0), (40, 4, 2.5), (25, 2, 30)])
def test_matvec_matches_dense(u, ell, s):
    A, B = qt.bounds.amin_matrices(u, ell, s)
    x = np.random.default_rng(0).standard_normal(u - ell + 1)
    Ax, Bx = cp.amin_matvec(x, ell, s)
    np.testing.assert_allclose(Ax, A @ x, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(Bx, B @ x, rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize("u", [2, 5, 40])
def test_lemma4_9_positive_definite(u):
    for M in qt.bounds.amin_matrices(u):
        scipy.linalg.cholesky(M)            # raises unless positive definite
        assert np.linalg.eigvalsh(M)[0] > 0


def test_b_inverse_is_tridiagonal_inverse_exactly():
    for u, ell, s in [(6, 1, 0), (5, 2, Fraction(5, 2))]:
        A, B = qt.bounds.amin_matrices(u, ell, s, exact=True)
        prod = qt.bounds.b_inverse(u, ell, s, exact=True).dot(B)
        assert all(v == (r == c) for (r, c), v in np.ndenumerate(prod))
    dense = qt.bounds.b_inverse(50, 3, 1.5).toarray()
    np.testing.assert_allclose(dense @ qt.bounds.amin_matrices(50, 3, 1.5)[1], np.eye(48),
                               atol=1e-10)
    assert np.count_nonzero(np.triu(dense, 2)) == 0


@pytest.mark.parametrize("u", [2, 3, 5, 10, 40])
def test_trace_identity_harmonic_number_exact(u):
    ti = qt.bounds.trace_identity(u)
    assert ti.holds
    assert ti.trace == sum(Fraction(1, i) for i in range(1, u + 1))


def test_trace_identity_float_agrees():
    A, B = qt.bounds.amin_matrices(200)
    tr = np.trace(np.linalg.solve(B, A))
    assert tr == pytest.approx(np.sum(1 / np.arange(1, 201)), rel=1e-8)


@pytest.mark.parametrize("u, ell, s", [(2, 1, 0), (12, 1, 0), (20, 3, 0), (15, 1, 5)])
def test_amin_ratio_matches_independent_eigen_and_simplex(u, ell, s):
    res = qt.bounds.amin_ratio(u, ell, s)
    A, B = qt.bounds.amin_matrices(u, ell, s)
    naive = np.linalg.eigvals(np.linalg.solve(B, A)).real.max()
    assert res.value == pytest.approx(naive, rel=1e-9)
    assert res.one_signed and res.histogram.min() > 0
    assert res.histogram.sum() == pytest.approx(1)
    assert qt.bounds.rayleigh(res.histogram, ell, s) == pytest.approx(res.value, rel=1e-10)
    assert cp.simplex_max(A, B, starts=2) == pytest.approx(res.value, rel=1e-5)


def test_rho_c2_is_two_point_value():
    # u = 2, ℓ = 1 is a two-point case: Theorem 5.1's (3 − α)/2 at α = 1/2
    from queuetheory.bounds.competitive_closed_forms import amin_two_point_sup
    assert qt.bounds.amin_ratio(2).value == pytest.approx(float(amin_two_point_sup(0.5)))


@pytest.mark.parametrize("u", [150, 300])
def test_lanczos_equals_dense(u):
    d = qt.bounds.amin_ratio(u, method="dense")
    lz = qt.bounds.amin_ratio(u, method="lanczos")
    assert lz.value == pytest.approx(d.value, rel=1e-11)
    np.testing.assert_allclose(lz.histogram, d.histogram, atol=1e-9)


def test_lanczos_scales_to_u_10000():
    res = qt.bounds.amin_ratio(10_000)
    assert res.method == "lanczos" and res.one_signed
    assert qt.bounds.amin_ratio(5_000).value < res.value < np.sum(1 / np.arange(1, 10_001))


def test_rho_grows_and_stays_below_harmonic():
    us = [1, 2, 3, 5, 10, 30, 100, 300]
    vals = [qt.bounds.amin_ratio(u).value for u in us]
    assert np.all(np.diff(vals) > 0)
    assert all(v <= np.sum(1 / np.arange(1, u + 1)) + 1e-12 for u, v in zip(us, vals, strict=True))


def test_fit_log_curve_recovers_a_known_curve():
    us = np.arange(10, 500, 7)
    fit = qt.bounds.fit_log_curve(us, 0.3 * np.log(us + 2.0) + 1.1)
    assert (fit.a, fit.b, fit.c) == pytest.approx((0.3, 2.0, 1.1), rel=1e-4)
    assert fit.r2 > 1 - 1e-10


def test_figure1_log_fit_of_rho():
    fit = qt.bounds.fit_log_curve(np.arange(10, 1001, 30))
    assert 0.25 <= fit.a <= 0.26 and fit.r2 > 0.9999


@pytest.mark.parametrize("kwargs, message", [
    (dict(u=0), "u=0"), (dict(u=5, ell=0), "ell=0"), (dict(u=3, ell=4), "u=3"),
    (dict(u=5, s=-1), "s=-1"), (dict(u=2.5), "u=2.5")])
def test_bad_input_names_parameter(kwargs, message):
    with pytest.raises(ValueError, match=message):
        qt.bounds.amin_ratio(**kwargs)


@pytest.mark.parametrize("kwargs, message", [
    (dict(u=float("inf")), "u=inf"), (dict(u=None), "u=None"), (dict(u=float("nan")), "u=nan"),
    (dict(u=5, s=float("nan")), "s=nan"), (dict(u=5, tol=-1.0), "tol=-1.0"),
    (dict(u=5, tol=None), "tol=None")])
def test_non_finite_or_missing_input_is_a_value_error(kwargs, message):
    with pytest.raises(ValueError, match=message):
        qt.bounds.amin_ratio(**kwargs)


def test_too_large_u_is_refused_with_a_memory_estimate():
    with pytest.raises(ValueError, match=r"u=10000000: .*2\.4 GiB.*max_bytes"):
        qt.bounds.amin_ratio(10**7)
    with pytest.raises(ValueError, match="max_bytes"):
        qt.bounds.amin_ratio(2_000, max_bytes=10_000)
    with pytest.raises(ValueError, match="dense"):
        qt.bounds.amin_ratio(50_000, method="dense")


def test_progress_bar_and_loose_tolerance_agree_with_the_default(capsys):
    exact = qt.bounds.amin_ratio(3_000)
    shown = qt.bounds.amin_ratio(3_000, progress=True, tol=1e-6)
    assert "matvec" in capsys.readouterr().err
    assert shown.value == pytest.approx(exact.value, rel=1e-6)

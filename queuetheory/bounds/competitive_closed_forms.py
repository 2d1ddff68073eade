"""Closed-form competitive ratios of Chen, Ye, Zhou, fluid model (``M → ∞``).

Two-point outputs ``o ∈ {ℓ, u}``, ``α = ℓ/u``, ``s = 0`` unless a function takes ``s``:

* A_max: Thm 3.3 upper bound ``α⁻¹(1+α⁻¹)/2``; Thm 3.4's claimed lower bound
  ``α⁻¹(1+α^{-1/2})/2`` and the ratio its proof's construction actually gives (spec §5 #12).
* A_random: Thm 8.6 Part 2, ``1 + r(w_u−w_ℓ)/(w_ℓr²+2w_ℓr+w_u)``, ``w_k = k(s+k)``, sup
  ``(1+√(w_u/w_ℓ))/2``.
* A_min: Thm 5.1, ``1 + α(1−α²)t/(α²t²+2α²t+1)``, ``t = x_ℓ/x_u``, sup ``(3−α)/2``.
* A_ℓ: Thm 5.2, ``1 + (α²t+2α²)/(α²t²+2α²t+1)``, sup ``1+α/(2(1−α))`` (α ≤ ½), ``1+2α²``.
* The threshold α* where A_ℓ's bound meets A_min's (§5.1).
* Geometric (§5.2) and linearly weighted geometric (Thm 5.3) output laws for A_min.

Every formula here is checked against the matrix evaluation of Lemma 4.6 in the tests.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg
import sympy as sp

from .competitive import rayleigh, simplex_max

__all__ = [
    "amax_upper_bound", "thm34_claimed", "thm34_construction", "thm34_construction_sup",
    "amax_two_point", "amax_fluid_ratio", "amax_worst_case",
    "arandom_fluid_ratio", "arandom_worst_case", "arandom_two_point", "arandom_two_point_sup",
    "amin_two_point", "amin_two_point_sup", "aell_two_point", "aell_two_point_sup",
    "two_point_threshold",
    "geometric_ratio", "geometric_limit", "lg_ratio", "lg_ratio_closed", "lg_limit",
]


def _alpha(alpha):
    a = np.asarray(alpha, dtype=float)
    if np.any(~(a > 0)) or np.any(a > 1):
        raise ValueError(f"alpha={alpha!r}: must satisfy 0 < alpha <= 1")
    return a


def amax_upper_bound(alpha):
    """Theorem 3.3: ``CR(A_max) ≤ α⁻¹(1+α⁻¹)/2 + O(1/M)``.

    Parameters
    ----------
    alpha : float or array_like
        ``α = ℓ/u`` in ``(0, 1]``: the shortest over the longest output length.

    Returns
    -------
    float or numpy.ndarray
        The bound's leading term ``α⁻¹(1+α⁻¹)/2`` (Chen, Ye, Zhou, Thm 3.3), shaped as
        ``alpha``.

    Raises
    ------
    ValueError
        If some ``alpha`` is not in ``(0, 1]``.
    """
    a = _alpha(alpha)
    return (1 + 1 / a) / (2 * a)


def thm34_claimed(alpha):
    """Theorem 3.4 as printed: ``CR(A_max) ≥ α⁻¹(1+α^{-1/2})/2`` (not implied by its proof).

    Parameters
    ----------
    alpha : float or array_like
        ``α = ℓ/u`` in ``(0, 1]``.

    Returns
    -------
    float or numpy.ndarray
        ``α⁻¹(1+α^{-1/2})/2`` (Chen, Ye, Zhou, Thm 3.4), shaped as ``alpha``.

    Raises
    ------
    ValueError
        If some ``alpha`` is not in ``(0, 1]``.
    """
    a = _alpha(alpha)
    return (1 + a**-0.5) / (2 * a)


def thm34_construction(alpha, r):
    """The ratio the proof of Thm 3.4 builds, ``r = a/b`` (N_ℓ = au, N_u = bℓ,
    M = ℓu): ``α⁻¹(r+α)(r+1)/(r²+2αr+1)``.

    Parameters
    ----------
    alpha : float or array_like
        ``α = ℓ/u`` in ``(0, 1]``.
    r : float or array_like
        ``r = a/b``: the ratio of the construction's job counts, ``> 0``.

    Returns
    -------
    float or numpy.ndarray
        ``α⁻¹(r+α)(r+1)/(r²+2αr+1)``, broadcast over ``alpha`` and ``r``.

    Raises
    ------
    ValueError
        If some ``alpha`` is not in ``(0, 1]``.
    """
    a = _alpha(alpha)
    r = np.asarray(r, dtype=float)
    return (r + a) * (r + 1) / (a * (r**2 + 2 * a * r + 1))


def thm34_construction_sup(alpha):
    """``sup_r`` of :func:`thm34_construction`: ``(1/(2α))(1+√(2/(1+α)))`` at ``r = 1+√(2+2α)``.

    Parameters
    ----------
    alpha : float or array_like
        ``α = ℓ/u`` in ``(0, 1]``.

    Returns
    -------
    float or numpy.ndarray
        ``(1/(2α))(1+√(2/(1+α)))``, shaped as ``alpha``.

    Raises
    ------
    ValueError
        If some ``alpha`` is not in ``(0, 1]``.
    """
    a = _alpha(alpha)
    return (1 + np.sqrt(2 / (1 + a))) / (2 * a)


def amax_two_point(alpha, r):
    """Fluid ``E TEL(A_max)/TEL(H-SF)`` with ``r = N_ℓ/N_u`` (s=0): every job reserves ``u``, so
    ``M/u`` slots serve a random order: ``(r+1)(rα+1)/(α²r²+2α²r+1)``.

    Parameters
    ----------
    alpha : float or array_like
        ``α = ℓ/u`` in ``(0, 1]``.
    r : float or array_like
        ``r = N_ℓ/N_u``: short jobs per long job, ``>= 0``.

    Returns
    -------
    float or numpy.ndarray
        The ratio ``(r+1)(rα+1)/(α²r²+2α²r+1)``, broadcast over ``alpha`` and ``r``.

    Raises
    ------
    ValueError
        If some ``alpha`` is not in ``(0, 1]``.
    """
    a = _alpha(alpha)
    r = np.asarray(r, dtype=float)
    return (r + 1) * (r * a + 1) / (a**2 * r**2 + 2 * a**2 * r + 1)


def _amax_pencil(u, ell, s):
    k = np.arange(ell, u + 1, dtype=float)
    m = np.minimum(k[:, None], k[None, :])
    A = (s + u) * (k[:, None] + k[None, :]) / 2       # xᵀAx = (s+u)(Σ k x_k)(Σ x_k)
    return A, m * (s + m)


def amax_fluid_ratio(x, ell=1, s=0):
    """Fluid ``E TEL(A_max)/TEL(H-SF)`` for a histogram ``x`` on ``ℓ..u`` (u = ℓ+len(x)−1):
    ``M/(s+u)`` slots each serve a random share in sequence, so
    ``E TEL = n²(s+u)E[o]/(2M)``, against H-SF's ``n² xᵀBx/(2M)``.

    Parameters
    ----------
    x : array_like of float
        The histogram of output lengths: ``x[i]`` jobs (or their share) of length ``ℓ+i``;
        non-negative, not all zero.
    ell : int, default 1
        ``ℓ``: the shortest output length, in tokens.
    s : float, default 0
        ``s``: the prompt size, in tokens.

    Returns
    -------
    float
        The fluid ratio ``E TEL(A_max)/TEL(H-SF)``.
    """
    x = np.asarray(x, dtype=float)
    A, B = _amax_pencil(ell + x.size - 1, ell, s)
    return float(x @ A @ x / (x @ B @ x))


def _arandom_pencil(u, ell, s):
    k = np.arange(ell, u + 1, dtype=float)
    w = k * (s + k)
    m = np.minimum(k[:, None], k[None, :])
    return (w[:, None] + w[None, :]) / 2, m * (s + m)   # xᵀAx = (Σ x_k)(Σ w_k x_k)


def arandom_fluid_ratio(x, ell=1, s=0):
    """Fluid ``E TEL(A_random)/TEL(H-SF)`` for a histogram ``x`` on ``ℓ..u``: a random order
    packs memory×time ``w_k = k(s+k)`` per job, so ``E TEL = n²(Σ x)(Σ w x)/(2M)``.

    Parameters
    ----------
    x : array_like of float
        The histogram of output lengths: ``x[i]`` jobs (or their share) of length ``ℓ+i``;
        non-negative, not all zero.
    ell : int, default 1
        ``ℓ``: the shortest output length, in tokens.
    s : float, default 0
        ``s``: the prompt size, in tokens.

    Returns
    -------
    float
        The fluid ratio ``E TEL(A_random)/TEL(H-SF)``.
    """
    x = np.asarray(x, dtype=float)
    A, B = _arandom_pencil(ell + x.size - 1, ell, s)
    return float(x @ A @ x / (x @ B @ x))


def _worst(A, B):
    w, V = scipy.linalg.eigh(A, B)
    v = V[:, -1] * np.sign(V[:, -1].sum())
    if np.all(v >= -1e-9 * np.abs(v).max()):
        return float(w[-1]), v / v.sum()
    return simplex_max(A, B), None


def amax_worst_case(u, ell=1, s=0):
    """``(sup_x ratio, worst histogram)`` of :func:`amax_fluid_ratio` over histograms on
    ``ℓ..u``: the top generalized eigenpair when it is one-signed, else SLSQP (histogram None).

    Parameters
    ----------
    u : int
        ``u``: the longest output length, in tokens, ``>= ell``.
    ell : int, default 1
        ``ℓ``: the shortest output length, in tokens.
    s : float, default 0
        ``s``: the prompt size, in tokens.

    Returns
    -------
    value : float
        The supremum of :func:`amax_fluid_ratio` over histograms on ``ℓ..u``.
    histogram : numpy.ndarray or None
        The worst histogram (sum 1), or None where the top eigenvector is not one-signed and
        the value comes from :func:`~queuetheory.bounds.competitive.simplex_max`.
    """
    return _worst(*_amax_pencil(u, ell, s))


def arandom_worst_case(u, ell=1, s=0):
    """As :func:`amax_worst_case` for :func:`arandom_fluid_ratio`.

    Parameters
    ----------
    u : int
        ``u``: the longest output length, in tokens, ``>= ell``.
    ell : int, default 1
        ``ℓ``: the shortest output length, in tokens.
    s : float, default 0
        ``s``: the prompt size, in tokens.

    Returns
    -------
    value : float
        The supremum of :func:`arandom_fluid_ratio` over histograms on ``ℓ..u``.
    histogram : numpy.ndarray or None
        The worst histogram (sum 1), or None where the value comes from SLSQP.
    """
    return _worst(*_arandom_pencil(u, ell, s))


def arandom_two_point(r, ell, u, s=0):
    """Theorem 8.6 Part 2's ratio, ``r = N_ℓ/N_u``, ``w_k = k(s+k)``.

    Parameters
    ----------
    r : float or array_like
        ``r = N_ℓ/N_u``: short jobs per long job, ``>= 0``.
    ell : float
        ``ℓ``: the short output length, in tokens.
    u : float
        ``u``: the long output length, in tokens.
    s : float, default 0
        ``s``: the prompt size, in tokens.

    Returns
    -------
    float or numpy.ndarray
        ``1 + r(w_u−w_ℓ)/(w_ℓr²+2w_ℓr+w_u)``, shaped as ``r``.
    """
    wl, wu = ell * (s + ell), u * (s + u)
    r = np.asarray(r, dtype=float)
    return 1 + r * (wu - wl) / (wl * r**2 + 2 * wl * r + wu)


def arandom_two_point_sup(ell, u, s=0):
    """``(1+γ)/2``, ``γ = √(u(s+u)/(ℓ(s+ℓ)))``, at ``r = γ``; ``= (1+α⁻¹)/2`` at ``s=0``.

    Parameters
    ----------
    ell : float
        ``ℓ``: the short output length, in tokens.
    u : float
        ``u``: the long output length, in tokens.
    s : float, default 0
        ``s``: the prompt size, in tokens.

    Returns
    -------
    float
        ``(1+γ)/2``: the supremum over ``r`` of :func:`arandom_two_point`.
    """
    return (1 + np.sqrt(u * (s + u) / (ell * (s + ell)))) / 2


def amin_two_point(alpha, t):
    """Theorem 5.1's ratio, ``t = x_ℓ/x_u``.

    Parameters
    ----------
    alpha : float or array_like
        ``α = ℓ/u`` in ``(0, 1]``.
    t : float or array_like
        ``t = x_ℓ/x_u``: short jobs per long job, ``>= 0``.

    Returns
    -------
    float or numpy.ndarray
        ``1 + α(1−α²)t/(α²t²+2α²t+1)``, broadcast over ``alpha`` and ``t``.

    Raises
    ------
    ValueError
        If some ``alpha`` is not in ``(0, 1]``.
    """
    a = _alpha(alpha)
    t = np.asarray(t, dtype=float)
    return 1 + a * (1 - a**2) * t / (a**2 * t**2 + 2 * a**2 * t + 1)


def amin_two_point_sup(alpha):
    """Theorem 5.1: ``(3−α)/2``, attained at ``t = 1/α``.

    Parameters
    ----------
    alpha : float or array_like
        ``α = ℓ/u`` in ``(0, 1]``.

    Returns
    -------
    float or numpy.ndarray
        ``(3−α)/2``, shaped as ``alpha``.

    Raises
    ------
    ValueError
        If some ``alpha`` is not in ``(0, 1]``.
    """
    return (3 - _alpha(alpha)) / 2


def aell_two_point(alpha, t):
    """Theorem 5.2's ratio, ``t = x_ℓ/x_u``.

    Parameters
    ----------
    alpha : float or array_like
        ``α = ℓ/u`` in ``(0, 1]``.
    t : float or array_like
        ``t = x_ℓ/x_u``: short jobs per long job, ``>= 0``.

    Returns
    -------
    float or numpy.ndarray
        ``1 + (α²t+2α²)/(α²t²+2α²t+1)``, broadcast over ``alpha`` and ``t``.

    Raises
    ------
    ValueError
        If some ``alpha`` is not in ``(0, 1]``.
    """
    a = _alpha(alpha)
    t = np.asarray(t, dtype=float)
    return 1 + (a**2 * t + 2 * a**2) / (a**2 * t**2 + 2 * a**2 * t + 1)


def aell_two_point_sup(alpha):
    """Theorem 5.2: ``1 + α/(2(1−α))`` for ``α ≤ ½`` (at ``t = (1−2α)/α``), ``1 + 2α²`` above.

    Parameters
    ----------
    alpha : float or array_like
        ``α = ℓ/u`` in ``(0, 1]``.

    Returns
    -------
    numpy.ndarray
        The supremum over ``t`` of :func:`aell_two_point`, shaped as ``alpha`` (0-d for a
        scalar).

    Raises
    ------
    ValueError
        If some ``alpha`` is not in ``(0, 1]``.
    """
    a = _alpha(alpha)
    with np.errstate(divide="ignore"):
        return np.where(a <= 0.5, 1 + a / (2 * (1 - a)), 1 + 2 * a**2)


def two_point_threshold(exact=False):
    """α*: the root in (0, ½) of ``1 + α/(2(1−α)) = (3−α)/2`` (i.e. ``α² − 3α + 1 = 0``),
    solved by sympy. A_ℓ has the smaller two-point bound iff ``α < α*``.

    Parameters
    ----------
    exact : bool, default False
        Return sympy's exact root instead of a float.

    Returns
    -------
    float or sympy.Expr
        ``α* = (3−√5)/2 ≈ 0.382``.
    """
    a = sp.symbols("alpha", positive=True)
    roots = [r for r in sp.solve(sp.Eq(1 + a / (2 * (1 - a)), (3 - a) / 2), a)
             if 0 < r < sp.Rational(1, 2)]
    (root,) = roots
    root = sp.nsimplify(sp.simplify(root))
    return root if exact else float(root)


def _geometric_x(q, u, weight):
    k = np.arange(1, u + 1, dtype=float)
    return (k if weight else 1.0) * np.exp((k - 1) * np.log(q))


def geometric_ratio(q, u=None):
    """A_min under ``P(o=k) ∝ q^{k−1}`` on ``1..u`` (§5.2, Fig. 3 left), matrix form at s=0,
    ℓ=1. ``u=None`` truncates where the tail is below 1e−18 (the ``u = ∞`` curve).

    Parameters
    ----------
    q : float
        ``q`` in ``(0, 1)``: the geometric law's parameter.
    u : int, optional
        ``u``: the longest output length, in tokens; None truncates the infinite support.

    Returns
    -------
    float
        ``CR_G(q)``: A_min's asymptotic competitive ratio under this law (Lemma 4.6).

    Raises
    ------
    ValueError
        If ``q`` is not in ``(0, 1)``.
    """
    if not 0 < q < 1:
        raise ValueError(f"q={q!r}: must satisfy 0 < q < 1")
    if u is None:
        u = int(np.ceil(45 / -np.log(q))) + 50
    return rayleigh(_geometric_x(q, u, False))


def geometric_limit(exact=False):
    """``lim_{q→1} CR_G`` (u = ∞): ``4(½ − ½∫₀^∞ y³e^{−y}E₁(y)dy)``. With
    ``E₁(y) = ∫₁^∞ e^{−yt}/t dt`` and Fubini the integral is ``∫₁^∞ 6/(t(1+t)⁴) dt``, which
    sympy integrates exactly.

    Parameters
    ----------
    exact : bool, default False
        Return sympy's exact value instead of a float.

    Returns
    -------
    float or sympy.Expr
        ``lim_{q→1} CR_G`` (about 1.682).
    """
    t = sp.symbols("t", positive=True)
    F = sp.logcombine(sp.integrate(sp.apart(6 / (t * (1 + t) ** 4), t), t), force=True)
    integral = sp.limit(F, t, sp.oo) - F.subs(t, 1)
    value = sp.simplify(2 - 2 * integral)
    return value if exact else float(value)


def lg_ratio(q, u=None):
    """A_min under ``P(o=k) ∝ k q^{k−1}`` (§5.3), matrix form; ``u=None`` as in
    :func:`geometric_ratio`.

    Parameters
    ----------
    q : float
        ``q`` in ``(0, 1)``: the law's parameter.
    u : int, optional
        ``u``: the longest output length, in tokens; None truncates the infinite support.

    Returns
    -------
    float
        A_min's asymptotic competitive ratio under this law (Lemma 4.6).

    Raises
    ------
    ValueError
        If ``q`` is not in ``(0, 1)``.
    """
    if not 0 < q < 1:
        raise ValueError(f"q={q!r}: must satisfy 0 < q < 1")
    if u is None:
        u = int(np.ceil(50 / -np.log(q))) + 50
    return rayleigh(_geometric_x(q, u, True))


def lg_ratio_closed(q):
    """Theorem 5.3: ``(1+q)²(1+3q+6q²+3q³+q⁴)/(1+2q+11q²+8q³+11q⁴+2q⁵+q⁶)`` (u = ∞).

    Parameters
    ----------
    q : float or array_like
        ``q`` in ``(0, 1)``: the law's parameter.

    Returns
    -------
    float or numpy.ndarray
        Theorem 5.3's ratio, shaped as ``q``.
    """
    q = np.asarray(q, dtype=float)
    num = (1 + q) ** 2 * (1 + 3 * q + 6 * q**2 + 3 * q**3 + q**4)
    return num / (1 + 2 * q + 11 * q**2 + 8 * q**3 + 11 * q**4 + 2 * q**5 + q**6)


def lg_limit(exact=False):
    """``lim_{q→1}`` of Theorem 5.3's closed form (its supremum; it increases in q).

    Parameters
    ----------
    exact : bool, default False
        Return sympy's exact value instead of a float.

    Returns
    -------
    float or sympy.Expr
        The limit ``14/9``.
    """
    q = sp.symbols("q")
    expr = ((1 + q) ** 2 * (1 + 3 * q + 6 * q**2 + 3 * q**3 + q**4)
            / (1 + 2 * q + 11 * q**2 + 8 * q**3 + 11 * q**4 + 2 * q**5 + q**6))
    value = sp.limit(expr, q, 1)
    return value if exact else float(value)

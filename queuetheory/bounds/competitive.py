"""A_min's asymptotic competitive ratio as a Rayleigh quotient (Chen et al., §4.1).

Chen, Ye, Zhou, Lemma 4.6: for a histogram ``x`` of output lengths on ``{ℓ, …, u}`` (prompt
size ``s``), the ratio ``E TEL(A_min) / TEL(H-SF)`` tends, as ``M → ∞``, to ``xᵀAx / xᵀBx``.
Corollary 4.8 writes ``A_u, B_u`` for ``s = 0, ℓ = 1``; the general matrices (spec §3.4) are

    P_ij = i/(s+j) · [(s+ℓ)(s+2j−ℓ) + (m−ℓ)(2j−m−ℓ)],   A = (P + Pᵀ)/2,   B_ij = m(s+m),

with ``m = min(i, j)``. The worst case ``ρ(C_u)``, ``C_u = B⁻¹A``, is the top eigenvalue of the
symmetric-definite pencil ``(A, B)``. ``B`` is a Green's matrix ``g(min(i, j))`` with ``g``
increasing, so ``B = L D Lᵀ`` with ``L`` the lower all-ones matrix and ``D = diag(Δg)``:
``B⁻¹`` is tridiagonal (§4.1) and both ``A`` and ``B`` apply to a vector in ``O(u)`` by
cumulative sums. The Lanczos path runs on ``D^{-1/2} L⁻¹ A L⁻ᵀ D^{-1/2}`` matrix-free.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import scipy.linalg
import scipy.optimize
import scipy.sparse
import scipy.sparse.linalg

__all__ = [
    "amin_matrices", "amin_ratio", "AminRatio", "rayleigh", "lemma46_ratio",
    "b_inverse", "trace_identity", "TraceIdentity", "fit_log_curve", "LogFit",
    "amin_matvec", "simplex_max",
]

_DENSE_MAX = 100
_LANCZOS_NCV = 12


def _check(u, ell, s):
    for name, v in (("u", u), ("ell", ell), ("s", s)):
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v):
            raise ValueError(f"{name}={v!r}: must be a finite number")
    if int(ell) != ell or ell < 1:
        raise ValueError(f"ell={ell!r}: must be an integer >= 1")
    if int(u) != u or u < ell:
        raise ValueError(f"u={u!r}: must be an integer >= ell = {ell}")
    if not s >= 0:
        raise ValueError(f"s={s!r}: the prompt size must be >= 0")
    return int(u), int(ell)


def amin_matrices(u, ell=1, s=0, *, exact=False):
    """The pencil ``(A, B)`` of Lemma 4.6 on lengths ``ℓ..u``; Cor. 4.8's ``A_u, B_u`` at
    ``s=0, ℓ=1``. ``exact=True`` returns numpy object arrays of :class:`fractions.Fraction`.

    Parameters
    ----------
    u : int
        ``u``: the longest output length, in tokens, ``>= ell``.
    ell : int, default 1
        ``ℓ``: the shortest output length, in tokens, ``>= 1``.
    s : float, default 0
        ``s``: the prompt size, in tokens, ``>= 0``.
    exact : bool, default False
        Exact rationals (object arrays of :class:`fractions.Fraction`) instead of floats.

    Returns
    -------
    A : numpy.ndarray
        ``A = (P + Pᵀ)/2``, ``(u−ℓ+1) × (u−ℓ+1)``.
    B : numpy.ndarray
        ``B_ij = m(s+m)``, ``m = min(i, j)``.

    Raises
    ------
    ValueError
        If ``u``, ``ell`` or ``s`` is not finite, ``ell`` is not an integer ``>= 1``, ``u`` is
        not an integer ``>= ell``, or ``s < 0``.
    """
    u, ell = _check(u, ell, s)
    if exact:
        s = Fraction(s)
        ks = [Fraction(k) for k in range(ell, u + 1)]
        n = len(ks)
        P = np.empty((n, n), dtype=object)
        B = np.empty((n, n), dtype=object)
        for a, i in enumerate(ks):
            for b, j in enumerate(ks):
                m = min(i, j)
                q = (s + ell) * (s + 2 * j - ell) + (m - ell) * (2 * j - m - ell)
                P[a, b] = i / (s + j) * q
                B[a, b] = m * (s + m)
        return (P + P.T) / 2, B
    k = np.arange(ell, u + 1, dtype=float)
    i, j = k[:, None], k[None, :]
    m = np.minimum(i, j)
    P = i / (s + j) * ((s + ell) * (s + 2 * j - ell) + (m - ell) * (2 * j - m - ell))
    return (P + P.T) / 2, m * (s + m)


class _PencilA:
    """``x ↦ A x`` in ``O(u)`` (cumulative sums), its coefficient arrays computed once."""

    def __init__(self, n, ell, s):
        k = np.arange(ell, ell + n, dtype=float)
        self.k, self.k2 = k, k * k
        self.c0 = (s + ell) * (s + 2 * k - ell) - 2 * ell * k + ell**2  # Q(m,j) = c0(j)+2jm−m²
        self.inv = 1 / (s + k)

    def __call__(self, x):
        k, k2, c0 = self.k, self.k2, self.c0
        y = x * self.inv
        Px = (y @ c0) + np.cumsum(y * k2)
        Px += 2 * k * _above(y * k)
        Px -= k2 * _above(y)
        Px *= k
        kx = k * x
        PTx = c0 * kx.sum()
        PTx += 2 * k * np.cumsum(k * kx)
        PTx -= np.cumsum(k2 * kx)
        PTx += k2 * _above(kx)
        PTx *= self.inv
        Px += PTx
        Px *= 0.5
        return Px


def _above(v):
    """``Σ_{j > i} v_j`` for every ``i`` (a reversed cumulative sum, accurate for the tail)."""
    out = np.zeros_like(v)
    out[:-1] = np.cumsum(v[:0:-1])[::-1]
    return out


def amin_matvec(x, ell=1, s=0):
    """``(A x, B x)`` in ``O(u)`` for ``x`` indexed by ``ℓ..ℓ+len(x)−1`` (cumulative sums)."""
    x = np.asarray(x, dtype=float)
    k = np.arange(ell, ell + x.size, dtype=float)
    g = k * (s + k)
    Bx = np.cumsum(np.diff(g, prepend=0.0) * np.cumsum(x[::-1])[::-1])   # L D Lᵀ x
    return _PencilA(x.size, ell, s)(x), Bx


def rayleigh(x, ell=1, s=0) -> float:
    """``xᵀAx / xᵀBx`` for a histogram ``x`` on ``ℓ..ℓ+len(x)−1`` (Lemma 4.6, matrix form).

    Parameters
    ----------
    x : array_like of float
        The histogram of output lengths: ``x[i]`` jobs (or their share) of length ``ℓ+i``.
    ell : int, default 1
        ``ℓ``: the shortest output length, in tokens.
    s : float, default 0
        ``s``: the prompt size, in tokens.

    Returns
    -------
    float
        The asymptotic ratio ``E TEL(A_min)/TEL(H-SF)`` for this histogram.

    Raises
    ------
    ValueError
        If ``x`` is not a non-zero 1-d array.
    """
    x = np.asarray(x, dtype=float)
    if x.ndim != 1 or x.size == 0 or not np.any(x):
        raise ValueError("x: must be a non-zero 1-d histogram")
    Ax, Bx = amin_matvec(x, ell, s)
    return float(x @ Ax / (x @ Bx))


def lemma46_ratio(x, ell=1, s=0) -> float:
    """Lemma 4.6 as printed: the triple sum, evaluated term by term.

    Parameters
    ----------
    x : array_like of float
        The histogram of output lengths: ``x[i]`` jobs (or their share) of length ``ℓ+i``.
    ell : int, default 1
        ``ℓ``: the shortest output length, in tokens.
    s : float, default 0
        ``s``: the prompt size, in tokens.

    Returns
    -------
    float
        The same ratio as :func:`rayleigh`, from the printed sum (a cross-check).
    """
    x = np.asarray(x, dtype=float)
    ks = np.arange(ell, ell + x.size, dtype=float)
    num = den = 0.0
    for a, k in enumerate(ks):
        d = (s + ell) if a == 0 else 1.0
        tail, strict = x[a:], x[a + 1:]
        kt, ks_ = ks[a:], ks[a + 1:]
        num += d * np.sum(kt * tail) * (np.sum(d * tail / (s + kt))
                                        + 2 * np.sum((ks_ - k) * strict / (s + ks_)))
        den += k * (s + k) * x[a] * (x[a] + 2 * np.sum(strict))
    return float(num / den)


@dataclass(frozen=True)
class AminRatio:
    """Worst case of A_min over histograms on ``ℓ..u``: ``value = ρ(C_u)``, the top generalized
    eigenvector as a histogram (sum 1), and whether it is one-signed (then ``value`` is
    attained by a genuine histogram, Cor. 4.8's max over ``x ≥ 0``).

    Attributes
    ----------
    value : float
        ``ρ(C_u)``: the top generalized eigenvalue of ``(A, B)``.
    histogram : numpy.ndarray
        The top eigenvector, signed and scaled to sum 1.
    one_signed : bool
        Whether that eigenvector is ``>= 0`` (up to rounding), i.e. a genuine histogram.
    lengths : numpy.ndarray
        The output lengths ``ℓ..u`` the histogram is indexed by.
    method : str
        ``"dense"`` or ``"lanczos"``: the method that ran.
    """

    value: float
    histogram: np.ndarray
    one_signed: bool
    lengths: np.ndarray
    method: str


def _green(ell, u, s):
    k = np.arange(ell, u + 1, dtype=float)
    g = k * (s + k)
    return k, np.diff(g, prepend=0.0)      # D = diag(Δg), B = L D Lᵀ


def amin_ratio(u, ell=1, s=0, *, method="auto", tol=1e-12, progress=False,
               max_bytes=2**30) -> AminRatio:
    """``ρ(C_u)``: dense ``scipy.linalg.eigh(A, B)`` for small ``u`` (``method="dense"``), else
    Lanczos (``scipy.sparse.linalg.eigsh``) on the matrix-free similar form (``"lanczos"``).

    ``tol`` is the Lanczos relative accuracy of the eigenvalue; ``progress=True`` shows a
    tqdm bar of matrix-vector products (about a dozen, ``O(u)`` each: u = 10⁶ takes seconds,
    see ``benchmarks/bench_chen2025.py``). Sizes whose working memory (estimated at
    ``(ncv + 20) · 8`` bytes per length, ``ncv = 12`` Lanczos vectors) exceeds ``max_bytes``
    (default 1 GiB, u ≈ 4·10⁶) are refused with the estimate: u = 10⁷ needs 2.4 GiB and
    minutes, so it runs only when asked for with a larger ``max_bytes``.

    Parameters
    ----------
    u : int
        ``u``: the longest output length, in tokens, ``>= ell``.
    ell : int, default 1
        ``ℓ``: the shortest output length, in tokens, ``>= 1``.
    s : float, default 0
        ``s``: the prompt size, in tokens, ``>= 0``.
    method : {"auto", "dense", "lanczos"}, default "auto"
        ``"auto"`` is dense up to 100 lengths, else Lanczos; fewer than 3 lengths always run
        dense.
    tol : float, default 1e-12
        The Lanczos relative accuracy, in ``[0, 1)``.
    progress : bool, default False
        Show a tqdm bar of Lanczos matrix-vector products.
    max_bytes : int, default 2**30
        The most working memory to use, in bytes.

    Returns
    -------
    AminRatio
        ``ρ(C_u)``, the worst histogram and whether it is one-signed.

    Raises
    ------
    ValueError
        If ``u``, ``ell`` or ``s`` is malformed (as in :func:`amin_matrices`), ``method`` or
        ``tol`` is not one of the allowed values, or the size needs more than ``max_bytes``.
    """
    u, ell = _check(u, ell, s)
    n = u - ell + 1
    if method not in ("auto", "dense", "lanczos"):
        raise ValueError(f"method={method!r}: must be 'auto', 'dense' or 'lanczos'")
    if isinstance(tol, bool) or not isinstance(tol, numbers.Real) or not 0 <= tol < 1:
        raise ValueError(f"tol={tol!r}: must be a number in [0, 1)")
    if method == "auto":
        method = "dense" if n <= _DENSE_MAX else "lanczos"
    if n < 3:
        method = "dense"
    need = 8 * n * (n + 4) if method == "dense" else 8 * n * (_LANCZOS_NCV + 20)
    if need > max_bytes:
        raise ValueError(f"u={u}: method={method!r} needs about {need / 2**30:.1f} GiB, more "
                         f"than max_bytes={max_bytes} ({max_bytes / 2**30:.1f} GiB) and about "
                         f"{_LANCZOS_NCV + 1} passes of O(u); raise max_bytes to run it anyway "
                         "(progress=True shows them)")
    if method == "dense":
        A, B = amin_matrices(u, ell, s)
        w, V = scipy.linalg.eigh(A, B, subset_by_index=[n - 1, n - 1])
        value, v = float(w[0]), V[:, 0]
    else:
        value, v = _lanczos(n, ell, s, tol, progress)
    v = v * np.sign(v.sum()) if v.sum() != 0 else v
    tol = 1e-9 * np.abs(v).max()
    one_signed = bool(np.all(v >= -tol))
    return AminRatio(value, v / v.sum(), one_signed, np.arange(ell, u + 1), method)


def _lanczos(n, ell, s, tol, progress):
    """Top eigenpair of ``D^{-1/2} L⁻¹ A L⁻ᵀ D^{-1/2}`` (similar to ``B⁻¹A``), matrix-free.

    The top eigenvalue is well separated from the rest: one Lanczos basis of ``ncv = 12``
    vectors converges (a larger ``ncv`` only costs ``O(u · ncv²)`` of orthogonalisation)."""
    _, d = _green(ell, ell + n - 1, s)
    r = 1 / np.sqrt(d)
    apply_a = _PencilA(n, ell, s)
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(desc="Lanczos A·x", unit="matvec")

    def lt_inv(w):          # L⁻ᵀ w: (w_k − w_{k+1})
        out = w.copy()
        out[:-1] -= w[1:]
        return out

    def matvec(w):
        Ax = apply_a(lt_inv(r * np.ravel(w)))
        Ax[1:] -= Ax[:-1].copy()                    # L⁻¹
        if bar is not None:
            bar.update()
        return r * Ax

    op = scipy.sparse.linalg.LinearOperator((n, n), matvec=matvec, dtype=float)
    try:
        w, W = scipy.sparse.linalg.eigsh(op, k=1, which="LA", tol=tol, v0=np.full(n, 1.0),
                                         ncv=min(n, _LANCZOS_NCV))
    finally:
        if bar is not None:
            bar.close()
    return float(w[0]), lt_inv(r * W[:, 0])


def simplex_max(A, B, *, starts=8, seed=0) -> float:
    """``max xᵀAx/xᵀBx`` over histograms (``x ≥ 0``, ``B ≻ 0``) by multi-start SLSQP — the
    competitive ratio when the top eigenvector is not one-signed. Small sizes."""
    A, B = np.asarray(A, dtype=float), np.asarray(B, dtype=float)
    n = A.shape[0]
    rng = np.random.default_rng(seed)
    cons = ({"type": "eq", "fun": lambda x: x.sum() - 1},)
    starts_x = [np.full(n, 1 / n)] + [rng.dirichlet(np.ones(n)) for _ in range(starts - 1)]
    best = -np.inf
    for x0 in starts_x:
        res = scipy.optimize.minimize(lambda x: -(x @ A @ x) / (x @ B @ x), x0, method="SLSQP",
                                      bounds=[(0, 1)] * n, constraints=cons)
        best = max(best, -float(res.fun))
    return best


def b_inverse(u, ell=1, s=0, *, exact=False):
    """The tridiagonal ``B⁻¹``: ``(B⁻¹)_ii = 1/d_i + 1/d_{i+1}`` (last ``1/d_u``),
    ``(B⁻¹)_{i,i+1} = −1/d_{i+1}``, ``d_k = g_k − g_{k−1}``, ``g_k = k(s+k)``. Returns a sparse
    matrix, or an object array of Fractions with ``exact=True``.

    Parameters
    ----------
    u : int
        ``u``: the longest output length, in tokens, ``>= ell``.
    ell : int, default 1
        ``ℓ``: the shortest output length, in tokens, ``>= 1``.
    s : float, default 0
        ``s``: the prompt size, in tokens, ``>= 0``.
    exact : bool, default False
        Exact rationals (a dense object array) instead of a sparse float matrix.

    Returns
    -------
    scipy.sparse.csr_matrix or numpy.ndarray
        ``B⁻¹``, ``(u−ℓ+1) × (u−ℓ+1)``.

    Raises
    ------
    ValueError
        If ``u``, ``ell`` or ``s`` is malformed (as in :func:`amin_matrices`).
    """
    u, ell = _check(u, ell, s)
    if exact:
        s = Fraction(s)
        g = [Fraction(k) * (s + k) for k in range(ell, u + 1)]
        d = [g[0]] + [g[i] - g[i - 1] for i in range(1, len(g))]
        n = len(d)
        out = np.full((n, n), Fraction(0), dtype=object)
        for i in range(n):
            out[i, i] = 1 / d[i] + (1 / d[i + 1] if i + 1 < n else 0)
            if i + 1 < n:
                out[i, i + 1] = out[i + 1, i] = -1 / d[i + 1]
        return out
    _, d = _green(ell, u, s)
    inv = 1 / d
    diag = inv + np.append(inv[1:], 0.0)
    off = -inv[1:]
    return scipy.sparse.diags([off, diag, off], [-1, 0, 1], format="csr")


@dataclass(frozen=True)
class TraceIdentity:
    """``tr(B_u⁻¹A_u) = T_1 + 2T_2 = H_u`` in exact rationals."""

    u: int
    trace: Fraction
    t1: Fraction
    two_t2: Fraction
    harmonic: Fraction
    t1_closed: Fraction
    two_t2_closed: Fraction

    @property
    def holds(self) -> bool:
        return (self.trace == self.harmonic == self.t1 + self.two_t2
                and self.t1 == self.t1_closed and self.two_t2 == self.two_t2_closed)


def trace_identity(u) -> TraceIdentity:
    """Exact ``tr(B_u⁻¹A_u)`` (s=0, ℓ=1) from the full matrices, its split into the diagonal
    part ``T_1`` and the off-diagonal part ``2T_2``, and the paper's closed forms of both.

    Parameters
    ----------
    u : int
        ``u``: the longest output length, in tokens, ``>= 1`` (exact arithmetic: small ``u``).

    Returns
    -------
    TraceIdentity
        The trace, ``T_1``, ``2T_2``, ``H_u`` and the closed forms; ``holds`` says whether they
        agree.

    Raises
    ------
    ValueError
        If ``u`` is not an integer ``>= 1``.
    """
    u, _ = _check(u, 1, 0)
    A, B = amin_matrices(u, exact=True)
    Binv = b_inverse(u, exact=True)
    if u <= 60:          # the full product, not only the tridiagonal terms
        assert all(v == (1 if r == c else 0) for (r, c), v in np.ndenumerate(Binv.dot(B)))
    t1 = sum((Binv[i, i] * A[i, i] for i in range(u)), Fraction(0))
    two_t2 = 2 * sum((Binv[i, i + 1] * A[i, i + 1] for i in range(u - 1)), Fraction(0))
    trace = sum((Binv[i, :].dot(A[:, i]) for i in range(u)), Fraction(0))
    odd = sum((Fraction(1, 2 * i + 1) for i in range(1, u)), Fraction(0))
    harm = sum((Fraction(1, i) for i in range(1, u + 1)), Fraction(0))
    t1_closed = Fraction(u * u + 1, 2) + odd / 2
    two_t2_closed = -Fraction(u * u - 1, 2) + (harm - 1) - odd / 2
    return TraceIdentity(u, trace, t1, two_t2, harm, t1_closed, two_t2_closed)


@dataclass(frozen=True)
class LogFit:
    """``a·ln(u + b) + c`` fitted to ``ρ(C_u)`` (Figure 1), with its coefficient of
    determination ``r2`` and the largest absolute residual."""

    a: float
    b: float
    c: float
    r2: float
    max_residual: float

    def __call__(self, u):
        return self.a * np.log(np.asarray(u, dtype=float) + self.b) + self.c


def fit_log_curve(us, values=None, *, p0=(0.2555, 0.2793, 1.1587)) -> LogFit:
    """Least-squares fit of Figure 1's curve; ``values`` defaults to ``amin_ratio(u).value``.

    Parameters
    ----------
    us : array_like of float
        The upper bounds ``u``, at least four, each ``>= 1``.
    values : array_like of float, optional
        ``ρ(C_u)`` at each ``u``; computed with :func:`amin_ratio` when omitted.
    p0 : tuple of float, default (0.2555, 0.2793, 1.1587)
        The starting ``(a, b, c)`` of the least-squares fit.

    Returns
    -------
    LogFit
        ``a``, ``b``, ``c``, ``r2`` and the largest absolute residual; calling it evaluates the
        curve.

    Raises
    ------
    ValueError
        If ``us`` is not 1-d with at least four values ``>= 1``.
    """
    us = np.asarray(us, dtype=float)
    if us.ndim != 1 or us.size < 4 or np.any(us < 1):
        raise ValueError("us: need at least 4 upper bounds u >= 1")
    y = (np.array([amin_ratio(int(u)).value for u in us]) if values is None
         else np.asarray(values, dtype=float))

    def f(u, a, b, c):
        return a * np.log(np.maximum(u + b, 1e-9)) + c

    (a, b, c), _ = scipy.optimize.curve_fit(f, us, y, p0=p0, bounds=([0, -0.999 * us.min(), -10],
                                                                     [10, 100, 10]))
    res = y - f(us, a, b, c)
    r2 = 1 - float(res @ res) / float(((y - y.mean()) ** 2).sum())
    return LogFit(float(a), float(b), float(c), r2, float(np.abs(res).max()))

"""Capacity of LLM inference under the tile model (Bari et al., §4 and Appendices B–C).

The per-request optimal effective completion time ``T*^R`` (Eq. 11/12), its mean ``T̄^R``
and the capacity ``λ* = r / T̄^R`` (Theorems 1–2); the ceiling-free lower bound ``T̄^R_LB``
that is a valid converse for every schedule (spec ``rad_slai.md`` §3.8, issue I-1); the
prefill/decode split ``T̄^P + T̄^D``, DistServe's best static split (§3.7), the worst-case
single-request time ``T^max`` (Eq. 13), Theorem 2's condition on ``n`` and the cycle bounds
(Eq. 25, Lemma 4); and the exact search over prefill chunkings that tests the paper's claim
that chunks of ``t*_lcm`` are optimal (Eq. 10 step (c), App. B.1).

Lengths: ``L^P`` prompt tokens and ``L^D`` decode iterations per request (the engine's
``output`` is ``L^D + 1`` tokens, the first one emitted by the last prefill chunk, see
:mod:`queuetheory.policies.rad`). Every function takes a :class:`~queuetheory.TiledGPUTime`
whose tile is the optimal ``t*``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
import sympy as sp

from ..errors import check_positive
from ..timing import TiledGPUTime, ceil_div

__all__ = [
    "ceil_sum", "request_time", "request_time_sym", "rad_capacity", "RadCapacity",
    "distserve_split", "DistServeSplit", "t_max", "rad_n_min", "cycle_time_bound",
    "lemma4_bound", "optimal_chunking", "Chunking", "lcm_chunking_counterexample",
    "uniform_chunk_bracket",
]

VARIANTS = ("paper", "rad", "lb")


def ceil_sum(n, t):
    """``F(n, t) = Σ_{i=1}^{n} ceil(i/t) = t q(q+1)/2 + (q+1)(n − q t)``, ``q = floor(n/t)``.

    Parameters
    ----------
    n : int or array_like of int
        ``n >= 0``: the number of terms.
    t : int
        ``t >= 1``: the divisor (a tile size).

    Returns
    -------
    numpy.int64 or numpy.ndarray of int
        ``F(n, t)``, shaped as ``n``.
    """
    n = np.asarray(n, dtype=np.int64)
    q = n // t
    return t * q * (q + 1) // 2 + (q + 1) * (n - q * t)


def _lengths(prompt, decode):
    p = np.atleast_1d(np.asarray(prompt, dtype=np.int64))
    d = np.atleast_1d(np.asarray(decode, dtype=np.int64))
    p, d = np.broadcast_arrays(p, d)
    if p.size and (p.min() < 1 or d.min() < 1):
        raise ValueError("prompt, decode: lengths must be >= 1 (L^D >= 1 decode iterations)")
    return p, d


def _decode_attention_sum(tm: TiledGPUTime, a, b):
    """``N Σ_{i=a+1}^{b} T^{D,SA}(i)`` in closed form with :func:`ceil_sum`."""
    vr, vc = tm.gpu.gemv_tile
    w = tm.model.kv_width
    rows = (w // vc) * (ceil_sum(b, vr) - ceil_sum(a, vr))
    cols = (w // vr) * (ceil_sum(b, vc) - ceil_sum(a, vc))
    return tm.model.N * (rows + cols) / tm.gpu.mu_gemv[(vr, vc)]


def _rad_prefill(tm: TiledGPUTime, p):
    """RAD's exact prefill of ``L^P`` tokens in ``t_lcm`` chunks, each alone (linear and
    prefill-attention terms); equals Eq. 12 when ``t_lcm`` divides ``L^P``."""
    tl, (tr, tc, tk) = tm.t_lcm, tm.tile
    d = tm.model.d
    K = p // tl
    rest = p - K * tl
    bracket = d * tl * tl * K * (K + 1) // (tr * tc * tk)
    bracket = bracket + np.where(rest > 0, tm.prefill_bracket(K * tl + 1, np.maximum(rest, 1)), 0)
    tiles = K * (tl // tc) + ceil_div(rest, tc)
    chunks = K + (rest > 0)
    return tiles * tm.inv_mu_lin, bracket * tm.attn_unit, chunks


def request_time(prompt, decode, tm: TiledGPUTime, *, variant: str = "paper",
                 parts: bool = False):
    """``T*^R(j)`` of Eq. 12 for arrays of lengths.

    ``variant``: ``"paper"`` — Eq. 12 (needs ``L^P`` a multiple of ``t*_lcm``, Assumption 3);
    ``"rad"`` — RAD's exact time for any ``L^P`` (last chunk shorter; equals ``"paper"``
    under Assumption 3); ``"lb"`` — the ceiling-free bound of spec §3.8 (prefill attention
    ``d L^P (L^P + 1)`` instead of ``d L^P (L^P + t_lcm)``), a lower bound on any schedule.
    With ``parts=True`` returns a dict of the linear, non-linear, decode-attention and
    prefill-attention terms (and ``overhead`` for ``c0 > 0``: one per batch in RAD).

    Parameters
    ----------
    prompt : int or array_like of int
        ``L^P``: prompt tokens per request, ``>= 1``.
    decode : int or array_like of int
        ``L^D``: decode iterations per request, ``>= 1``; broadcast against ``prompt``.
    tm : TiledGPUTime
        The tile model at the optimal tile ``t*``.
    variant : {"paper", "rad", "lb"}, default "paper"
        Which time, as above.
    parts : bool, default False
        Return the terms separately.

    Returns
    -------
    numpy.ndarray or dict of str to numpy.ndarray
        ``T*^R(j)`` per request, in seconds; with ``parts=True`` its terms by name.

    Raises
    ------
    ValueError
        If ``variant`` is unknown, a length is below 1, or (``"paper"``) a prompt is not a
        multiple of ``t*_lcm``.
    """
    if variant not in VARIANTS:
        raise ValueError(f"variant={variant!r}: must be one of {VARIANTS}")
    p, d = _lengths(prompt, decode)
    tr, tc, tk = tm.tile
    tl = tm.t_lcm
    unit = tm.attn_unit * tm.model.d / (tr * tc * tk)
    out = {
        "linear": (p + d) * tm.inv_mu_lin / tc,
        "nonlinear": (p + d) * tm.gpu.inv_mu_nlin,
        "decode_attention": _decode_attention_sum(tm, p, p + d),
    }
    if variant == "paper":
        bad = p % tl != 0
        if bad.any():
            raise ValueError(f"prompt={int(p[bad][0])}: variant='paper' needs L^P a multiple of "
                             f"t*_lcm={tl} (Assumption 3); use variant='rad' or round_prompts")
        out["prefill_attention"] = unit * p * (p + tl)
    elif variant == "lb":
        out["prefill_attention"] = unit * p * (p + 1)
    else:
        lin, attn, _ = _rad_prefill(tm, p)
        out["linear"] = lin + d * tm.inv_mu_lin / tc
        out["prefill_attention"] = attn
    if tm.gpu.c0 and variant != "lb":
        chunks = _rad_prefill(tm, p)[2]
        out["overhead"] = tm.gpu.c0 * (chunks + d / tc)
    if parts:
        return out
    return sum(out.values())


def request_time_sym(tm: TiledGPUTime, *, variant: str = "paper"):
    """Eq. 12 as a sympy expression in the positive integers ``L_P, L_D`` (returns
    ``(expr, L_P, L_D)``); the decode-attention sum uses ``floor`` through ``F(n, t)``.

    Parameters
    ----------
    tm : TiledGPUTime
        The tile model at the optimal tile ``t*``.
    variant : {"paper", "lb"}, default "paper"
        Eq. 12, or the ceiling-free lower bound.

    Returns
    -------
    expr : sympy.Expr
        ``T*^R`` in seconds, as a function of ``L_P`` and ``L_D``.
    L_P : sympy.Symbol
        The prompt length's symbol.
    L_D : sympy.Symbol
        The decode length's symbol.

    Raises
    ------
    ValueError
        If ``variant`` is not ``"paper"`` or ``"lb"``.
    """
    if variant not in ("paper", "lb"):
        raise ValueError(f"variant={variant!r}: the symbolic form is 'paper' or 'lb'")
    LP, LD = sp.symbols("L_P L_D", positive=True, integer=True)
    tr, tc, tk = tm.tile
    vr, vc = tm.gpu.gemv_tile
    w, N = tm.model.kv_width, tm.model.N

    def F(n, t):
        q = sp.floor(n / t)
        return t * q * (q + 1) / 2 + (q + 1) * (n - q * t)

    mu_v = sp.nsimplify(tm.gpu.mu_gemv[(vr, vc)])
    dec = N / mu_v * (sp.Rational(w, vc) * (F(LP + LD, vr) - F(LP, vr))
                      + sp.Rational(w, vr) * (F(LP + LD, vc) - F(LP, vc)))
    shift = tm.t_lcm if variant == "paper" else 1
    unit = sp.nsimplify(tm.attn_unit) * sp.Rational(tm.model.d, tr * tc * tk)
    expr = ((LP + LD) * sp.nsimplify(tm.inv_mu_lin) / tc + (LP + LD) * sp.nsimplify(
        tm.gpu.inv_mu_nlin) + dec + unit * LP * (LP + shift))
    return expr, LP, LD


def round_prompts(prompt, t_lcm: int):
    """Round prompt lengths up to a multiple of ``t_lcm`` (Assumption 3; decision I-24)."""
    check_positive("t_lcm", t_lcm, integer=True)
    return ceil_div(np.asarray(prompt, dtype=np.int64), int(t_lcm)) * int(t_lcm)


@dataclass(frozen=True)
class RadCapacity:
    """``λ* = r / T̄^R`` and its parts (seconds and requests per second).

    ``lambda_lb = r / T̄^R_LB`` is the valid converse: no schedule of the Eq. 7 model exceeds
    it (I-1). ``stderr`` is the Monte Carlo standard error of ``T̄^R`` (0 for an exact pmf).

    Attributes
    ----------
    r : int
        ``r``: the number of nodes.
    lambda_star : float
        ``λ* = r / T̄^R``, in requests per second.
    T_R : float
        ``T̄^R``: the mean per-request time of the chosen variant, in seconds.
    T_R_LB : float
        ``T̄^R_LB``: the mean ceiling-free lower bound, in seconds.
    lambda_lb : float
        ``r / T̄^R_LB``, in requests per second.
    T_P : float
        ``T̄^P``: RAD's mean prefill time, in seconds.
    T_D : float
        ``T̄^D = T̄^R − T̄^P``, in seconds.
    parts : dict of str to float
        The mean of each term of :func:`request_time`, in seconds.
    stderr : float
        The standard error of ``T̄^R``, in seconds (0 for an exact pmf, nan for one sample).
    lambda_stderr : float
        The standard error of ``λ*`` (delta method), in requests per second.
    method : str
        ``"monte-carlo"`` or ``"exact"``.
    variant : str
        ``"paper"`` or ``"rad"``.
    """

    r: int
    lambda_star: float
    T_R: float
    T_R_LB: float
    lambda_lb: float
    T_P: float
    T_D: float
    parts: dict = field(repr=False)
    stderr: float
    lambda_stderr: float
    method: str
    variant: str

    def rho(self, lam: float) -> float:
        """Load ``λ T̄^R / r``.

        Parameters
        ----------
        lam : float
            ``λ``: the arrival rate, in requests per second.

        Returns
        -------
        float
            ``ρ = λ T̄^R / r``.
        """
        return lam * self.T_R / self.r


def rad_capacity(prompt, decode, time_model: TiledGPUTime, *, r: int = 1, weights=None,
                 variant: str = "paper") -> RadCapacity:
    """Capacity ``λ* = r / T̄^R`` of ``r`` nodes for lengths ``(L^P, L^D)``.

    ``prompt``, ``decode``: paired samples (Monte Carlo, with standard error) or, with
    ``weights``, the support of an exact joint pmf. ``variant``: ``"paper"`` or ``"rad"``
    (see :func:`request_time`).

    Parameters
    ----------
    prompt : array_like of int
        ``L^P`` samples (or support points), ``>= 1``.
    decode : array_like of int
        ``L^D`` samples (or support points), ``>= 1``, paired with ``prompt``.
    time_model : TiledGPUTime
        The tile model at the optimal tile ``t*``.
    r : int, default 1
        ``r``: the number of nodes.
    weights : array_like of float, optional
        The pmf over the pairs (non-negative, summing to 1); None treats the pairs as samples.
    variant : {"paper", "rad"}, default "paper"
        The per-request time of :func:`request_time`.

    Returns
    -------
    RadCapacity
        ``λ*``, ``T̄^R`` and its parts, the lower bound's capacity and the standard errors.

    Raises
    ------
    ValueError
        If ``r`` is not a positive integer, ``variant`` is ``"lb"`` or unknown, there are no
        lengths or one is below 1, ``weights`` is malformed, or (``"paper"``) a prompt is not a
        multiple of ``t*_lcm``.
    """
    check_positive("r", r, integer=True)
    if variant == "lb":
        raise ValueError("variant='lb': T̄^R_LB is always returned as T_R_LB")
    p, d = _lengths(prompt, decode)
    if p.size == 0:
        raise ValueError("prompt: need at least one length")
    if weights is None:
        w = np.full(p.size, 1.0 / p.size)
        method = "monte-carlo"
    else:
        w = np.asarray(weights, dtype=float)
        if w.shape != p.shape or w.min() < 0 or not np.isclose(w.sum(), 1.0):
            raise ValueError("weights: must be non-negative, one per length pair, summing to 1")
        method = "exact"
    parts = request_time(p, d, time_model, variant=variant, parts=True)
    T = sum(parts.values())
    T_R = float(w @ T)
    T_LB = float(w @ request_time(p, d, time_model, variant="lb"))
    T_P = float(w @ _rad_prefill_total(time_model, p))
    if method == "exact":
        stderr = 0.0
    else:
        stderr = float(T.std(ddof=1) / np.sqrt(p.size)) if p.size > 1 else float("nan")
    lam = r / T_R
    return RadCapacity(r, lam, T_R, T_LB, r / T_LB, T_P, T_R - T_P,
                       {k: float(w @ v) for k, v in parts.items()}, stderr,
                       lam * stderr / T_R, method, variant)


def _rad_prefill_total(tm, p):
    """RAD's whole prefill time of each prompt (``T^P_j``, and its general-``L^P`` form)."""
    lin, attn, chunks = _rad_prefill(tm, np.atleast_1d(p))
    return lin + attn + p * tm.gpu.inv_mu_nlin + tm.gpu.c0 * chunks


@dataclass(frozen=True)
class DistServeSplit:
    """Best static split (§3.7): ``r_prefill`` prefill nodes, ``λ_DS = min(r_p/T̄^P,
    (r − r_p)/T̄^D)``, its share of ``r/T̄^R`` and the fractional optimum ``r T̄^P / T̄^R``.

    Attributes
    ----------
    r : int
        ``r``: the number of nodes.
    r_prefill : int
        ``r_p``: the best number of prefill nodes.
    capacity : float
        ``λ_DS``, in requests per second.
    share : float
        ``λ_DS / (r/T̄^R)``, with ``T̄^R = T̄^P + T̄^D``.
    fractional_r_prefill : float
        ``r T̄^P / T̄^R``: the optimum over real ``r_p``.
    """

    r: int
    r_prefill: int
    capacity: float
    share: float
    fractional_r_prefill: float


def distserve_split(T_P: float, T_D: float, r: int) -> DistServeSplit:
    """``max_{1≤r_p≤r−1} min(r_p/T̄^P, (r−r_p)/T̄^D)`` by enumeration (exact).

    Parameters
    ----------
    T_P : float
        ``T̄^P``: the mean prefill time, in seconds.
    T_D : float
        ``T̄^D``: the mean decode time, in seconds.
    r : int
        ``r >= 2``: the number of nodes.

    Returns
    -------
    DistServeSplit
        The best split and its capacity.

    Raises
    ------
    ValueError
        If ``T_P`` or ``T_D`` is not positive, or ``r`` is not an integer ``>= 2``.
    """
    check_positive("T_P", T_P)
    check_positive("T_D", T_D)
    check_positive("r", r, integer=True)
    if r < 2:
        raise ValueError(f"r={r}: DistServe needs at least one prefill and one decode node")
    rp = np.arange(1, r)
    cap = np.minimum(rp / T_P, (r - rp) / T_D)
    k = int(np.argmax(cap))
    return DistServeSplit(r, int(rp[k]), float(cap[k]), float(cap[k] * (T_P + T_D) / r),
                          r * T_P / (T_P + T_D))


def t_max(tm: TiledGPUTime, l_max: int, *, safe: bool = False) -> float:
    """Eq. 13: ``l (max_t 1/μ_Lin(t) + 1/μ_nLin) + N Σ_{i=1}^{l} T^{D,SA}(i)`` for
    ``l = l^{P,max} + l^{D,max}``. ``safe=True`` (I-7) also covers prompt tokens prefilled
    one at a time by Eq. 6 (the larger of the two attention costs per position, for every
    tile) and the per-batch overhead ``c0``.

    Parameters
    ----------
    tm : TiledGPUTime
        The tile model (its model and GPU; the linear term takes the worst valid tile).
    l_max : int
        ``l = l^{P,max} + l^{D,max}``: the longest request, in tokens.
    safe : bool, default False
        Also cover token-by-token prefill and ``c0`` (I-7).

    Returns
    -------
    float
        ``T^max``, in seconds.

    Raises
    ------
    ValueError
        If ``l_max`` is not a positive integer.
    """
    check_positive("l_max", l_max, integer=True)
    l_max = int(l_max)
    gpu, model = tm.gpu, tm.model
    tiles = [TiledGPUTime(model, gpu, t, check=False) for t in gpu.mu_gemm
             if all(getattr(model, n) % t[0] == 0 and getattr(model, n) % t[2] == 0
                    for n in ("d_x", "d", "d_ff", "d_out"))]
    lin = max(t.inv_mu_lin for t in tiles)
    i = np.arange(1, l_max + 1)
    dec = model.N * tm.decode_attention(i)
    if not safe:
        return float(l_max * (lin + gpu.inv_mu_nlin) + dec.sum())
    pre = np.max([t.prefill_attention(i, 1) for t in tiles], axis=0)
    return float(l_max * (lin + gpu.inv_mu_nlin + gpu.c0) + np.maximum(dec, pre).sum())


def rad_n_min(eps: float, T_R: float, T_max: float, t_col: int) -> float:
    """Theorem 2: RAD is stable with ``n > (t*_col − 1) T^max / (ε T̄^R)``.

    Parameters
    ----------
    eps : float
        ``ε`` in ``(0, 1)``: the load's slack, ``ρ = 1 − ε``.
    T_R : float
        ``T̄^R``, in seconds.
    T_max : float
        ``T^max`` (Eq. 13), in seconds.
    t_col : int
        ``t*_col``: the tile's column size.

    Returns
    -------
    float
        The bound on ``n`` (RAD's requests per cycle) that Theorem 2 requires.

    Raises
    ------
    ValueError
        If ``eps`` is not in ``(0, 1)``.
    """
    if not 0 < eps < 1:
        raise ValueError(f"eps={eps}: must lie in (0, 1)")
    return (t_col - 1) * T_max / (eps * T_R)


def cycle_time_bound(n: int, T_R: float, T_max: float, t_col: int) -> float:
    """Eq. 25: ``E[T^cycle] ≤ n T̄^R + (t*_col − 1) T^max`` for a backlogged cycle.

    Parameters
    ----------
    n : int
        ``n``: requests per cycle.
    T_R : float
        ``T̄^R``, in seconds.
    T_max : float
        ``T^max``, in seconds.
    t_col : int
        ``t*_col``: the tile's column size.

    Returns
    -------
    float
        The bound on ``E[T^cycle]``, in seconds.
    """
    return n * T_R + (t_col - 1) * T_max


def lemma4_bound(n: int, lam: float, r: int, T_max: float) -> float:
    """Lemma 4: mean cycle length ``≤ r/λ + n T^max``.

    Parameters
    ----------
    n : int
        ``n``: requests per cycle.
    lam : float
        ``λ``: the arrival rate, in requests per second.
    r : int
        ``r``: the number of nodes.
    T_max : float
        ``T^max``, in seconds.

    Returns
    -------
    float
        The bound on the mean cycle length, in seconds.
    """
    return r / lam + n * T_max


# ---- exact search over prefill chunkings (Eq. 10 step (c)) ---------------------------------
@dataclass(frozen=True)
class Chunking:
    """Optimal chunking of one prompt: its cost, the chunk sizes, RAD's ``t_lcm`` chunking
    cost and their ratio (exact ``Fraction`` for ``objective="attention"``).

    Attributes
    ----------
    prompt : int
        ``L^P``: the prompt, in tokens.
    objective : str
        ``"attention"`` or ``"time"``.
    cost : int or float
        The optimum: the Eq. 6 bracket (an integer) or the time in seconds.
    chunks : tuple of int
        The optimal chunk sizes, in order.
    lcm_cost : int or float
        The cost of RAD's ``t_lcm`` chunks.
    ratio : fractions.Fraction or float
        ``cost / lcm_cost`` (below 1: ``t_lcm`` chunks are not optimal).
    tiles : tuple of tuple of int
        The tile of each optimal chunk.
    """

    prompt: int
    objective: str
    cost: object
    chunks: tuple
    lcm_cost: object
    ratio: object
    tiles: tuple = ()

    @property
    def lcm_optimal(self) -> bool:
        """Whether RAD's ``t_lcm`` chunks are optimal for this prompt (``ratio >= 1``)."""
        return self.ratio >= 1


def _chunk_costs(tm_list, S, objective):
    """Cost of the chunk ending at ``S`` for every start ``S0 = 0..S-1`` (each chunk alone),
    the minimum over ``tm_list``'s tiles and the argmin tile."""
    S0 = np.arange(S)
    c = S - S0
    rows = []
    for tm in tm_list:
        b = tm.prefill_bracket(S0 + 1, c)
        if objective == "attention":
            rows.append(b)
        else:
            rows.append(b * tm.attn_unit + tm.linear_time(c) + c * tm.gpu.inv_mu_nlin
                        + tm.gpu.c0)
    rows = np.array(rows)
    k = np.argmin(rows, axis=0)
    return rows[k, S0], k


#: The longest prompt :func:`optimal_chunking` takes (its work is quadratic in the prompt).
MAX_DP_PROMPT = 1 << 16


def optimal_chunking(prompt: int, tm: TiledGPUTime, *, objective: str = "attention",
                     tiles=None, progress: bool = False) -> Chunking:
    """Exact dynamic programme over every chunking of a ``prompt``-token prefill, each chunk
    in its own batch.

    ``objective="attention"``: the integer Eq. 6 bracket summed over chunks (one tile,
    exact); ``"time"``: the whole Eq. 7 time of the chunks (linear, non-linear, attention,
    ``c0``), optionally letting each chunk pick any tile of ``tiles`` (Eq. 10 allows a
    per-batch configuration). Compared with RAD's ``t_lcm`` chunking at the tile ``t*``.

    The programme's work grows as ``prompt²`` (about 47 s at 64k tokens on one core): a
    prompt over ``MAX_DP_PROMPT`` is refused with the time it would take, and
    ``progress=True`` shows a tqdm bar over the prefixes.

    Parameters
    ----------
    prompt : int
        ``L^P``: the prompt, in tokens, at most ``MAX_DP_PROMPT``.
    tm : TiledGPUTime
        The tile model at the optimal tile ``t*``.
    objective : {"attention", "time"}, default "attention"
        What the chunking minimises, as above.
    tiles : sequence of tuple of int, optional
        The tiles a chunk may pick (``objective="time"`` only); None: ``tm``'s tile.
    progress : bool, default False
        Show a tqdm bar over the prefixes.

    Returns
    -------
    Chunking
        The optimal chunks, their cost, and the ratio to RAD's.

    Raises
    ------
    ValueError
        If ``prompt`` is not a positive integer or exceeds ``MAX_DP_PROMPT``, ``objective`` is
        unknown, or ``tiles`` is given with ``objective="attention"``.
    """
    check_positive("prompt", prompt, integer=True)
    if prompt > MAX_DP_PROMPT:
        raise ValueError(f"prompt={prompt}: over MAX_DP_PROMPT = {MAX_DP_PROMPT:,}; the "
                         f"dynamic programme would take about {47 * (prompt / 64000) ** 2 / 60:.3g}"
                         " minutes (quadratic in the prompt)")
    if objective not in ("attention", "time"):
        raise ValueError(f"objective={objective!r}: must be 'attention' or 'time'")
    if tiles is not None and objective == "attention":
        raise ValueError("tiles: per-chunk tiles need objective='time'")
    L = int(prompt)
    tms = [tm] if tiles is None else [TiledGPUTime(tm.model, tm.gpu, t, check=False)
                                      for t in tiles]
    exact = objective == "attention"
    best = np.zeros(L + 1, dtype=np.int64 if exact else float)
    arg = np.zeros(L + 1, dtype=np.int64)
    tile_of = np.zeros(L + 1, dtype=np.int64)
    steps = range(1, L + 1)
    if progress:
        from tqdm.auto import tqdm

        steps = tqdm(steps, desc="optimal chunking", unit="prefix")
    for S in steps:
        cost, k = _chunk_costs(tms, S, objective)
        total = best[:S] + cost
        j = int(np.argmin(total))
        best[S], arg[S], tile_of[S] = total[j], j, k[j]
    chunks, used, S = [], [], L
    while S:
        chunks.append(S - int(arg[S]))
        used.append(tms[int(tile_of[S])].tile)
        S = int(arg[S])
    tl = tm.t_lcm
    starts = np.arange(0, L, tl)
    sizes = np.minimum(tl, L - starts)
    if exact:
        lcm_cost = int(tm.prefill_bracket(starts + 1, sizes).sum())
        cost = int(best[L])
        ratio = Fraction(cost, lcm_cost)
    else:
        lcm_cost = float(_rad_prefill_total(tm, np.array([L]))[0])
        cost = float(best[L])
        ratio = cost / lcm_cost
    return Chunking(L, objective, cost, tuple(chunks[::-1]), lcm_cost, ratio, tuple(used[::-1]))


def lcm_chunking_counterexample(tm: TiledGPUTime, k_max: int = 6, *,
                                objective: str = "attention", tiles=None):
    """The smallest prompt ``L^P = k t_lcm`` (``k ≤ k_max``, Assumption 3) whose optimal
    chunking beats RAD's ``t_lcm`` chunks, or ``None`` when ``t_lcm`` chunks are optimal for
    every such prompt.

    Parameters
    ----------
    tm : TiledGPUTime
        The tile model at the optimal tile ``t*``.
    k_max : int, default 6
        The largest multiple ``k`` of ``t_lcm`` tried.
    objective : {"attention", "time"}, default "attention"
        As in :func:`optimal_chunking`.
    tiles : sequence of tuple of int, optional
        As in :func:`optimal_chunking`.

    Returns
    -------
    Chunking or None
        The first prompt's optimal chunking that beats ``t_lcm`` chunks.

    Raises
    ------
    ValueError
        If ``objective`` or ``tiles`` is refused by :func:`optimal_chunking`.
    """
    for k in range(1, k_max + 1):
        res = optimal_chunking(k * tm.t_lcm, tm, objective=objective, tiles=tiles)
        if res.ratio < 1 and (objective == "attention" or res.ratio < 1 - 1e-12):
            return res
    return None


def uniform_chunk_bracket(prompt: int, chunk: int, tm: TiledGPUTime, *,
                          ceilings: bool = True) -> Fraction:
    """The Eq. 6 attention bracket of a ``prompt``-token prefill in chunks of ``chunk``
    tokens (the last one shorter), each alone in its batch, at ``tm``'s tile.

    ``ceilings=False`` drops the ceilings as step (a) of the proof of Proposition 1 does:
    a chunk ``(i, c)`` then costs ``2 d c (i + c − 1)/(t_row t_col t_red)``, which summed
    over the chunks is smallest for one-token chunks (``d L (L + 1)/(t_row t_col t_red)``),
    not for ``t*_lcm`` ones (``d L (L + t_lcm)/(…)``).

    Parameters
    ----------
    prompt : int
        ``L^P``: the prompt, in tokens.
    chunk : int
        The chunk size, in tokens.
    tm : TiledGPUTime
        The tile model whose tile ``(t_row, t_col, t_red)`` is used.
    ceilings : bool, default True
        Keep Eq. 6's ceilings (False: step (a)'s ceiling-free cost).

    Returns
    -------
    fractions.Fraction
        The summed bracket (an integer with ``ceilings=True``).

    Raises
    ------
    ValueError
        If ``prompt`` or ``chunk`` is not a positive integer.
    """
    check_positive("prompt", prompt, integer=True)
    check_positive("chunk", chunk, integer=True)
    starts = np.arange(0, int(prompt), int(chunk))
    sizes = np.minimum(int(chunk), int(prompt) - starts)
    if ceilings:
        return Fraction(int(tm.prefill_bracket(starts + 1, sizes).sum()))
    tr, tc, tk = tm.tile
    ends = starts + sizes                      # i + c − 1 with i = start + 1
    return Fraction(2 * tm.model.d * int(np.dot(sizes, ends)), tr * tc * tk)

"""Nested WAIT: segments, condition (10)/(14), θ of (16), memory bounds (11)/(12)/(15) and the
memory decomposition of Figs. 16–18 (Ao et al. §5, §7).

Types share a prompt length ``l`` and have output lengths ``l'_1 < … < l'_m`` (or, after the
L-segment design of §7.2, segment *boundaries* ``b_1 < … < b_L``, the longest output of each
cluster). Segment 1 holds stages ``0..b_1``, segment ``i ≥ 2`` stages ``b_{i−1}+1..b_i``.
``Λ_i`` is the rate of prompts that reach segment ``i`` and ``p_i = Λ_{i+1}/Λ_i`` the chance
that a prompt leaving segment ``i`` continues (main-text indexing).

Corrections to the printed paper: the exact full-batch memory is
``n_1 (b_1+1)(l + b_1/2) + Σ_{i≥2} n_i (b_i − b_{i−1})(l + (b_{i−1}+b_i+1)/2)``; eq. (11)
(cumulative ``L'_j``) and the ``M^π`` of condition (14) in §7.2 (``(l + iΔL/2)ΔL``) are
approximations, kept as ``form="paper"`` and ``form="segment_design"``. The lower bound of
θ proved has denominator ``n_{j−1}``; the theorem text prints ``n_j``. The log term of the
memory bound is ``ln((m−1)S/δ)`` in the proof, ``ln(mζS/δ)`` in Thm 2 and
``ln((L−1)(T+1)/δ)`` in Figs. 16–18: all three are offered.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import optimize

from .._quiet import solve_highs
from ..errors import UnstableError, check_positive
from .thresholds import ConditionStatus, check_thresholds

__all__ = ["Segments", "segments", "segment_design", "nested_memory", "NestedCondition",
           "nested_condition", "theta", "theta_bound", "MemoryBound", "nested_memory_bound",
           "nested_thresholds", "memory_decomposition", "TimeVaryingCondition",
           "time_varying_condition"]

_TOL = 1e-9


@dataclass(frozen=True)
class Segments:
    """Segment structure: common prompt ``l``, boundaries ``b`` and per-segment entry rates.

    Attributes
    ----------
    prompt : int
        ``l``: the common prompt length.
    bounds : numpy.ndarray
        ``b_1 < … < b_L``: the last stage of each segment.
    rates : numpy.ndarray
        ``λ'_i``: the rate of prompts whose output ends in segment ``i``.
    """

    prompt: int
    bounds: np.ndarray
    rates: np.ndarray

    @property
    def reach(self) -> np.ndarray:
        """``Λ_i = Σ_{k≥i} λ'_k``: the rate of prompts that enter segment ``i``."""
        return np.cumsum(self.rates[::-1])[::-1]

    @property
    def p(self) -> np.ndarray:
        """``p_i = Λ_{i+1}/Λ_i``, i = 1..L−1 (continuation probabilities)."""
        r = self.reach
        return r[1:] / r[:-1]

    @property
    def widths(self) -> np.ndarray:
        """Stages per segment: ``b_1 + 1`` (stage 0 included), then ``b_i − b_{i−1}``."""
        return np.diff(self.bounds, prepend=-1)

    @property
    def stage_memory(self) -> np.ndarray:
        """``Σ_{k∈S_i} (l + k)``: the KV tokens of one prompt per stage of segment i."""
        lo = np.concatenate([[0], self.bounds[:-1] + 1])
        hi = self.bounds
        return (hi - lo + 1) * (self.prompt + (lo + hi) / 2)

    @property
    def entry_memory(self) -> np.ndarray:
        """``l + b_{i−1}``: KV tokens of a prompt waiting at the entry of segment i ≥ 2."""
        return self.prompt + self.bounds[:-1]

    def __len__(self) -> int:
        return int(self.bounds.size)


def segments(prompt: int, lengths, rates) -> Segments:
    """One segment per output length ``l'_1 < … < l'_m`` (Algorithm 2).

    Parameters
    ----------
    prompt : int
        ``l``: the common prompt length, ``> 0``.
    lengths : array_like of int
        ``l'_1 < … < l'_m``: output lengths, strictly increasing.
    rates : array_like of float
        ``λ_j``: one rate ``>= 0`` per length (the longest's ``> 0``).

    Returns
    -------
    Segments
        One segment per length.

    Raises
    ------
    ValueError
        If ``prompt`` is not a positive integer, the lengths are not increasing positive
        integers, or the rates are malformed.
    """
    check_positive("prompt", prompt, integer=True)
    b = np.asarray(lengths)
    lam = np.asarray(rates, dtype=float)
    if b.ndim != 1 or b.size == 0 or np.any(b != np.round(b)) or np.any(b < 1):
        raise ValueError(f"lengths={lengths!r}: must be positive integers")
    if np.any(np.diff(b) <= 0):
        raise ValueError(f"lengths={lengths!r}: must be strictly increasing (l'_1 < … < l'_m)")
    if lam.shape != b.shape or np.any(lam < 0) or not np.all(np.isfinite(lam)):
        raise ValueError(f"rates={rates!r}: need one finite rate >= 0 per length")
    if lam[-1] <= 0:
        raise ValueError(f"rates={rates!r}: the longest length must have a positive rate")
    return Segments(int(prompt), b.astype(np.int64), lam)


def segment_design(prompt: int, lengths, rates, L: int) -> Segments:
    """Merge ``m`` lengths into ``L`` segments of consecutive types (§7.2).

    Groups are ``np.array_split`` of the sorted types (``ΔL = m/L`` types each when it
    divides); a segment ends at its cluster's longest length and carries the cluster's rate.

    Parameters
    ----------
    prompt : int
        ``l``: the common prompt length, ``> 0``.
    lengths : array_like of int
        ``l'_1 < … < l'_m``: output lengths, strictly increasing.
    rates : array_like of float
        ``λ_j``: one rate ``>= 0`` per length (the longest's ``> 0``).
    L : int
        The number of segments, at most ``m``.

    Returns
    -------
    Segments
        ``L`` segments.

    Raises
    ------
    ValueError
        If ``prompt`` is not a positive integer, the lengths are not increasing positive
        integers, or the rates are malformed.
        Or if ``L`` is not a positive integer ``<= m``.
    """
    base = segments(prompt, lengths, rates)
    check_positive("L", L, integer=True)
    if L > len(base):
        raise ValueError(f"L={L}: at most m={len(base)} segments")
    groups = np.array_split(np.arange(len(base)), int(L))
    return Segments(base.prompt, np.array([base.bounds[g[-1]] for g in groups]),
                    np.array([base.rates[g].sum() for g in groups]))


def nested_memory(n, seg: Segments, *, form: str = "exact") -> float:
    """Memory of a full Nested-WAIT batch (``n_i`` prompts in every stage of segment i).

    ``form="exact"``: ``Σ_i n_i Σ_{k∈S_i} (l + k)``. ``form="paper"``: eq. (11),
    ``Σ_j n_j (l + L'_j/2) Δl'_j`` with ``L'_j = Σ_{k≤j} l'_k`` (not the memory of the
    stated segments: it drops stage 0 and uses cumulative lengths).
    ``form="segment_design"``: the ``M^π`` of condition (14) (§7.2, Segment Design),
    ``Σ_i n_i (l + iΔ_i/2) Δ_i`` for ``L`` segments of ``Δ_i`` stages; for equal segments
    the mean stage of segment ``i`` is ``(i − 1/2)Δ + 1/2``, not ``iΔ/2``, and stage 0 is
    dropped, so it underestimates by ``n_1 l + Σ_i n_i Δ((i−1)Δ + 1)/2``.

    Parameters
    ----------
    n : array_like of float
        ``n_i``: thresholds ``> 0``, one per segment.
    seg : Segments
        The segments (:func:`segments`, :func:`segment_design`).
    form : {"exact", "paper", "segment_design"}, default "exact"
        The formula.

    Returns
    -------
    float
        The memory, in KV tokens.

    Raises
    ------
    ValueError
        If the thresholds are malformed or ``form`` is unknown.
    """
    n = check_thresholds(n, len(seg), integer=False)
    width = np.diff(seg.bounds, prepend=0)
    if form == "exact":
        return float(np.dot(n, seg.stage_memory))
    if form == "paper":
        cum = np.cumsum(seg.bounds)
        return float(np.dot(n, (seg.prompt + cum / 2) * width))
    if form == "segment_design":
        i = np.arange(1, len(seg) + 1)
        return float(np.dot(n, (seg.prompt + i * width / 2) * width))
    raise ValueError(f"form={form!r}: must be 'exact', 'paper' or 'segment_design'")


@dataclass(frozen=True)
class NestedCondition(ConditionStatus):
    """Condition (10) (or (14) for merged segments).

    ``holds`` and ``strict`` say whether every constraint is met, and strictly.

    Attributes
    ----------
    thresholds : numpy.ndarray
        ``n_i``: prompts per stage of segment ``i``.
    iteration_time : float
        ``ΔT(n) = d0 + d1 M^π`` (exact full-batch memory).
    memory : float
        ``M^π``, the exact full-batch memory.
    arrivals : float
        ``Λ_1 ΔT(n)``: expected arrivals per full iteration (must be ``< n_1``).
    p : numpy.ndarray
        Continuation probabilities ``p_i``.
    ratio : numpy.ndarray
        ``n_{i+1}/n_i`` (must exceed ``p_i``).
    status : tuple of str
        Per constraint (first: arrivals; then one per ratio) ``"strict"``, ``"critical"``
        or ``"violated"``.
    """

    thresholds: np.ndarray
    iteration_time: float
    memory: float
    arrivals: float
    p: np.ndarray
    ratio: np.ndarray
    status: tuple[str, ...]

    @property
    def descending(self) -> bool:
        """``n_1 > n_2 > …`` (Lemma 8 needs it for a finite θ)."""
        return bool(np.all(np.diff(self.thresholds) < 0))


def _status(slack, scale) -> str:
    tol = _TOL * max(1.0, scale)
    return "strict" if slack > tol else "critical" if slack >= -tol else "violated"


def nested_condition(n, seg: Segments, d0: float, d1: float, *, require: str | None = None
                     ) -> NestedCondition:
    """Evaluate (10): ``ΔT(n) < n_1/Λ_1`` and ``n_{i+1}/n_i > p_i``. ``require="strict"``
    raises a ``ValueError`` naming the failing constraints.

    Parameters
    ----------
    n : array_like of float
        ``n_i``: thresholds ``> 0``, one per segment.
    seg : Segments
        The segments (:func:`segments`, :func:`segment_design`).
    d0 : float
        ``d0``: the fixed time per iteration (Ao et al., eq. 1).
    d1 : float
        ``d1``: the time per KV token of the batch.
    require : {None, "strict"}, optional
        Raise unless (10) holds strictly.

    Returns
    -------
    NestedCondition
        The constraints' values and status.

    Raises
    ------
    ValueError
        If ``require`` is unknown, ``d0``/``d1`` negative, the thresholds malformed, or (with
        ``require``) a constraint fails.
    """
    if require not in (None, "strict"):
        raise ValueError(f"require={require!r}: must be None or 'strict'")
    check_positive("d0", d0, allow_zero=True)
    check_positive("d1", d1, allow_zero=True)
    n = check_thresholds(n, len(seg), integer=False)
    M = nested_memory(n, seg)
    dT = d0 + d1 * M
    arrivals = float(seg.reach[0] * dT)
    p = seg.p
    ratio = n[1:] / n[:-1]
    status = (_status(n[0] - arrivals, n[0]),) + tuple(
        _status(r - q, 1.0) for r, q in zip(ratio, p, strict=True))
    out = NestedCondition(n, dT, M, arrivals, p, ratio, status)
    if require == "strict" and not out.strict:
        names = ["Λ·ΔT < n_1"] + [f"n_{i + 2}/n_{i + 1} > p_{i + 1}" for i in range(p.size)]
        bad = [nm for nm, s in zip(names, status, strict=True) if s != "strict"]
        raise ValueError(f"thresholds={n.tolist()}: condition (10) fails strictly for {bad}")
    return out


def _g(t, n_prev, n, p):
    return -t * n + n_prev * np.log1p(p * np.expm1(t))


def theta(n_prev: float, n: float, p: float) -> float:
    """The positive root of (16), ``e^{−θ n}(1 − p + p e^θ)^{n_prev} = 1`` (Lemma 8).

    ``n_prev`` is the previous segment's threshold, ``n`` this segment's and ``p`` the
    continuation probability. Needs ``n > n_prev p`` (negative drift); returns ``inf`` when
    ``n ≥ n_prev`` (an entry queue can then never exceed ``n``: no tail term).

    Parameters
    ----------
    n_prev : float
        ``n_{j−1}``: the previous segment's threshold, ``> 0``.
    n : float
        ``n_j``: this segment's threshold, ``> 0``.
    p : float
        ``p``: the continuation probability, in ``(0, 1)``.

    Returns
    -------
    float
        ``θ > 0``, or ``inf`` when ``n >= n_prev``.

    Raises
    ------
    ValueError
        If an argument is out of range or ``n <= n_prev·p``.
    """
    check_positive("n_prev", n_prev)
    check_positive("n", n)
    if not 0 < p < 1:
        raise ValueError(f"p={p}: must lie in (0, 1)")
    D = n - n_prev * p
    if D <= 0:
        raise ValueError(f"n={n}, n_prev={n_prev}, p={p}: (16) has no positive root unless "
                         f"n > n_prev·p (drift n − n_prev·p = {D:.6g})")
    if n >= n_prev:
        return float("inf")
    hi = 1.0
    while _g(hi, n_prev, n, p) <= 0:
        hi *= 2
    return float(optimize.brentq(_g, 1e-12 * hi, hi, args=(n_prev, n, p), xtol=1e-14,
                                 rtol=1e-13))


def theta_bound(n_prev: float, n: float, p: float, *, printed: bool = False) -> float:
    """Lower bound (18) ``θ ≥ 8(n − n_prev p)/n_prev`` (proved); ``printed=True``
    gives the theorem text's ``8(n − n_prev p)/n``.

    Parameters
    ----------
    n_prev : float
        ``n_{j−1}``.
    n : float
        ``n_j``.
    p : float
        The continuation probability.
    printed : bool, default False
        The theorem text's denominator ``n`` instead of the proved ``n_prev``.

    Returns
    -------
    float
        The lower bound on ``θ``.
    """
    D = n - n_prev * p
    return 8 * D / (n if printed else n_prev)


@dataclass(frozen=True)
class MemoryBound:
    """Theorem 2/4 memory requirement (12)/(15) in its three parts (Figs. 16–18).

    Attributes
    ----------
    batch : float
        ``M^π``: full-batch memory, exact or printed form (KV tokens).
    queue : float
        ``Σ_{j≥2} n_j (l + b_{j−1})`` ("queue length bound").
    tail : float
        ``Σ_{j≥2} θ_j^{-1} (l + b_{j−1}) ln(·)`` ("high-probability queue length bound").
    thetas : numpy.ndarray
        ``θ_j`` of (16), ``j ≥ 2``.
    log_term : float
        The ``ln(·)`` used.
    """

    batch: float
    queue: float
    tail: float
    thetas: np.ndarray
    log_term: float

    @property
    def total(self) -> float:
        """``batch + queue + tail``: the memory of (12)/(15)."""
        return self.batch + self.queue + self.tail


def nested_memory_bound(n, seg: Segments, *, delta: float, horizon: float | None = None,
                        iterations: float | None = None, d0: float | None = None,
                        log: str = "proof", form: str = "exact") -> MemoryBound:
    """The memory of (12) (or (15)) that keeps Nested WAIT within capacity w.p. ≥ 1 − δ.

    log="proof": ``ln((L−1)S/δ)`` (the union bound proved); "theorem": ``ln(L S/δ)``
    (ζ = 1); "figure": ``ln((L−1)(T+1)/δ)``. ``S`` is ``iterations`` or, when
    only ``horizon`` and ``d0`` are given, its upper bound ``T/d0``.

    Parameters
    ----------
    n : array_like of float
        ``n_i``: thresholds ``> 0``, one per segment.
    seg : Segments
        The segments (:func:`segments`, :func:`segment_design`).
    delta : float
        ``δ`` in ``(0, 1)``: the allowed overflow probability.
    horizon : float, optional
        ``T``.
    iterations : float, optional
        ``S``: the iterations the union bound covers.
    d0 : float, optional
        ``d0``, for ``S <= T/d0`` when ``iterations`` is not given.
    log : {"proof", "theorem", "figure"}, default "proof"
        The log term.
    form : {"exact", "paper", "segment_design"}, default "exact"
        The batch memory's formula (:func:`nested_memory`).

    Returns
    -------
    MemoryBound
        The three terms, the ``θ_j`` and the log term.

    Raises
    ------
    ValueError
        If ``delta`` is out of ``(0, 1)``, ``log`` is unknown, the log term lacks ``horizon``
        (or ``iterations``/``d0``), or a ``θ_j`` does not exist (:func:`theta`).
    """
    n = check_thresholds(n, len(seg), integer=False)
    if not 0 < delta < 1:
        raise ValueError(f"delta={delta}: must lie in (0, 1)")
    L = len(seg)
    if log == "figure":
        if horizon is None:
            raise ValueError("log='figure' needs horizon (T)")
        count = max(L - 1, 1) * (horizon + 1)
    elif log in ("proof", "theorem"):
        if iterations is None:
            if horizon is None or d0 is None:
                raise ValueError("give iterations (S) or both horizon and d0 (S <= T/d0)")
            iterations = horizon / check_positive("d0", d0)
        count = (max(L - 1, 1) if log == "proof" else L) * iterations
    else:
        raise ValueError(f"log={log!r}: must be 'proof', 'theorem' or 'figure'")
    log_term = float(np.log(count / delta))
    th = np.array([theta(n[i - 1], n[i], seg.p[i - 1]) for i in range(1, L)])
    tail = float(np.sum(seg.entry_memory / th)) * log_term if L > 1 else 0.0
    queue = float(np.dot(n[1:], seg.entry_memory))
    return MemoryBound(nested_memory(n, seg, form=form), queue, tail, th, log_term)


def nested_thresholds(seg: Segments, d0: float, d1: float, *, rule: str = "lp",
                      margin: float = 0.05, batch_limit: int | None = None,
                      integer: bool = True) -> np.ndarray:
    """Integer Nested-WAIT thresholds.

    ``rule="tail_sum"``: ``n_i ∝ Λ_i``, the paper's experiments; ratios equal
    ``p_i``, the boundary of (10). With ``batch_limit=B`` it is the authors' code,
    ``⌈BΛ_i/Σ_k w_k Λ_k⌉`` (``w_k`` stages per segment); otherwise the smallest scale that
    meets the first inequality of (10). ``rule="lp"``: the smallest-memory thresholds with
    ``Λ_1 ΔT(n) ≤ (1 − margin) n_1`` and ``n_{i+1} ≥ p_i n_i (1 + margin (1 − p_i))`` (strict
    (10) whose drift margin is ``margin`` times the Binomial variance ``n_i p_i (1 − p_i)``,
    so θ stays of order ``2·margin`` and the thresholds descend), a MILP solved with HiGHS
    (``integer=False``: its LP relaxation, real thresholds as in Figs. 16–18).

    Parameters
    ----------
    seg : Segments
        The segments (:func:`segments`, :func:`segment_design`).
    d0 : float
        ``d0``: the fixed time per iteration (Ao et al., eq. 1).
    d1 : float
        ``d1``: the time per KV token of the batch.
    rule : {"lp", "tail_sum"}, default "lp"
        The rule.
    margin : float, default 0.05
        In ``[0, 1)``: the slack asked of (10).
    batch_limit : int, optional
        ``B``, for the authors' ``tail_sum`` rule.
    integer : bool, default True
        Integer thresholds (``lp`` only).

    Returns
    -------
    numpy.ndarray
        ``n_i`` per segment.

    Raises
    ------
    UnstableError
        If ``d1·Σ_i Λ_i m_i >= 1 − margin``.
    ValueError
        If ``rule`` is unknown or ``d0``, ``d1``, ``margin`` or ``batch_limit`` is out of range.
    SolverError
        If HiGHS finds no optimum.
    """
    if rule not in ("tail_sum", "lp"):
        raise ValueError(f"rule={rule!r}: must be 'tail_sum' or 'lp'")
    reach, mem = seg.reach, seg.stage_memory
    if rule == "tail_sum" and batch_limit is not None:
        check_positive("batch_limit", batch_limit, integer=True)
        w = np.diff(seg.bounds, prepend=0)
        return np.maximum(1, np.ceil(batch_limit * reach / np.dot(w, reach) - 1e-9)
                          ).astype(np.int64)
    check_positive("d0", d0)
    check_positive("d1", d1, allow_zero=True)
    if not 0 <= margin < 1:
        raise ValueError(f"margin={margin}: must satisfy 0 <= margin < 1")
    load = d1 * float(np.dot(reach, mem))     # d1·W: Σ_i Λ_i m_i is the memory-work rate
    if load >= 1 - margin:
        raise UnstableError("d1·Σ_i Λ_i m_i (segment memory-work, eq. 10)", load, 1 - margin)
    if rule == "tail_sum":
        c = d0 / (1 - margin - load)
        return np.maximum(1, np.ceil(c * reach - 1e-9)).astype(np.int64)
    import cvxpy as cp  # 0.5 s to import: only when a program is built

    x = cp.Variable(len(seg), integer=integer)
    M = mem @ x
    cons = [x >= 1, reach[0] * (d0 + d1 * M) <= (1 - margin) * x[0]]
    if len(seg) > 1:
        p = seg.p
        cons.append(x[1:] >= cp.multiply(p * (1 + margin * (1 - p)), x[:-1]))
    prob = cp.Problem(cp.Minimize(M), cons)
    solve_highs(prob, "nested threshold MILP")
    return np.rint(x.value).astype(np.int64) if integer else np.asarray(x.value, dtype=float)


def memory_decomposition(prompt: int, lengths, rates, Ls, d0: float, d1: float, *,
                         delta: float, horizon: float, margin: float = 0.05,
                         form: str = "exact") -> dict:
    """The three terms of (15) for each number of segments ``L`` in ``Ls`` (Figs. 16–18).

    Thresholds for each L are the smallest real ones meeting (14) with ``margin``
    (``nested_thresholds(rule="lp", integer=False)``) and the log term is the figures'
    ``ln((L−1)(T+1)/δ)``. An L for which (14) has no solution (the full-batch memory-work
    ``d1·Σ Λ_i m_i ≥ 1 − margin``: coarse segments reserve stages for prompts that have
    already finished) gets ``inf``. Returns arrays ``L``, ``batch``, ``queue``, ``tail``,
    ``total``.

    Parameters
    ----------
    prompt : int
        ``l``: the common prompt length, ``> 0``.
    lengths : array_like of int
        ``l'_1 < … < l'_m``: output lengths, strictly increasing.
    rates : array_like of float
        ``λ_j``: one rate ``>= 0`` per length (the longest's ``> 0``).
    Ls : iterable of int
        The numbers of segments ``L``.
    d0 : float
        ``d0``: the fixed time per iteration (Ao et al., eq. 1).
    d1 : float
        ``d1``: the time per KV token of the batch.
    delta : float
        ``δ``: the allowed overflow probability.
    horizon : float
        ``T``.
    margin : float, default 0.05
        The slack asked of (14).
    form : {"exact", "paper", "segment_design"}, default "exact"
        The batch memory's formula.

    Returns
    -------
    dict
        ``{"L", "batch", "queue", "tail", "total"}``, arrays in the order of ``Ls``.
    """
    out = {k: [] for k in ("L", "batch", "queue", "tail", "total")}
    for L in Ls:
        seg = segment_design(prompt, lengths, rates, L)
        try:
            n = nested_thresholds(seg, d0, d1, rule="lp", margin=margin, integer=False)
        except UnstableError:
            for k, v in (("L", L), ("batch", np.inf), ("queue", np.inf), ("tail", np.inf),
                         ("total", np.inf)):
                out[k].append(v)
            continue
        mb = nested_memory_bound(n, seg, delta=delta, horizon=horizon, log="figure", form=form)
        for k, v in (("L", L), ("batch", mb.batch), ("queue", mb.queue), ("tail", mb.tail),
                     ("total", mb.total)):
            out[k].append(v)
    return {k: np.asarray(v) for k, v in out.items()}


@dataclass(frozen=True)
class TimeVaryingCondition:
    """Condition (13) on a grid: the worst window arrivals and continuation probabilities.

    Attributes
    ----------
    thresholds : numpy.ndarray
        ``n_i``.
    iteration_time : float
        ``ΔT(n)``.
    arrivals : float
        ``sup_t Σ_j λ_j[t, t + ΔT(n)]`` (must be ``< n_1``).
    p_star : numpy.ndarray
        The sup over windows of ``p_i[t, t+Δt]`` (must be ``< n_{i+1}/n_i``).
    ratio : numpy.ndarray
        ``n_{i+1}/n_i``.
    """

    thresholds: np.ndarray
    iteration_time: float
    arrivals: float
    p_star: np.ndarray
    ratio: np.ndarray

    @property
    def holds(self) -> bool:
        """Whether (13) holds on the grid."""
        return bool(self.arrivals < self.thresholds[0] and np.all(self.p_star < self.ratio))


def time_varying_condition(n, seg: Segments, rate_fn, d0: float, d1: float, horizon: float, *,
                           grid: int = 4001, windows: int = 16) -> TimeVaryingCondition:
    """Check (13) for rates ``rate_fn(t) -> (L,)`` per segment's cluster on ``[0, horizon]``.

    Cumulative rates ``λ_j[0, t]`` are integrated by the trapezoid rule on ``grid`` points;
    window lengths ``Δt`` run over ``windows`` values in ``(0, ΔT(n)]``.

    Parameters
    ----------
    n : array_like of float
        ``n_i``: thresholds ``> 0``, one per segment.
    seg : Segments
        The segments (:func:`segments`, :func:`segment_design`).
    rate_fn : callable
        ``rate_fn(t)``: the ``L`` cluster rates at time ``t``.
    d0 : float
        ``d0``: the fixed time per iteration (Ao et al., eq. 1).
    d1 : float
        ``d1``: the time per KV token of the batch.
    horizon : float
        The end of the window checked.
    grid : int, default 4001
        Points of the integration grid.
    windows : int, default 16
        Window lengths tried.

    Returns
    -------
    TimeVaryingCondition
        The worst arrivals and continuation probabilities.

    Raises
    ------
    ValueError
        If the thresholds are malformed or ``rate_fn`` returns the wrong number of rates.
    """
    n = check_thresholds(n, len(seg), integer=False)
    dT = d0 + d1 * nested_memory(n, seg)
    t = np.linspace(0.0, horizon + dT, grid)
    lam = np.asarray([np.asarray(rate_fn(s), dtype=float) for s in t])
    if lam.shape != (grid, len(seg)):
        raise ValueError(f"rate_fn: must return {len(seg)} rates, one per segment cluster")
    cum = np.concatenate([np.zeros((1, len(seg))),
                          np.cumsum((lam[1:] + lam[:-1]) / 2 * np.diff(t)[:, None], axis=0)])
    starts = t[t <= horizon]

    def window(dt):
        end = np.array([np.interp(starts + dt, t, cum[:, j]) for j in range(len(seg))]).T
        beg = cum[: starts.size]
        return end - beg            # (starts, L) arrivals per cluster in [t, t+dt]

    arrivals = float(window(dT).sum(axis=1).max())
    p_star = np.zeros(len(seg) - 1)
    for dt in np.linspace(dT / windows, dT, windows):
        w = window(dt)
        tails = np.cumsum(w[:, ::-1], axis=1)[:, ::-1]
        with np.errstate(invalid="ignore", divide="ignore"):
            p = np.nan_to_num(tails[:, 1:] / tails[:, :-1])
        p_star = np.maximum(p_star, p.max(axis=0))
    return TimeVaryingCondition(n, dT, arrivals, p_star, n[1:] / n[:-1])

"""The analytic bracket for the largest stable arrival rate (:func:`bounds`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import optimize

from ..engine.conventions import check_first_token
from ..engine.server import server_settings
from ..errors import check_positive
from ..timing import (
    AffineTokenTime,
    BatchLoad,
    LinearMemoryTime,
    PiecewiseLinearTime,
    TiledGPUTime,
    TimeModel,
    UnitTime,
)
from .prefix import PrefixShare, cached_work, prefix_share, ratio_text
from .rescale import _length_law
from .stats import RequestStats, request_stats


@dataclass(frozen=True, eq=False)
class Bracket:
    """The analytic bracket of :func:`bounds`.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per bound: ``name``, ``rate`` (requests per time unit), ``kind``
        (``upper``: no scheduler is stable above it; ``lower``: a theorem says this
        scheduler is stable below it; ``scheduler``: the paper's rate for this scheduler, a
        fluid or heuristic value, neither side proven; ``estimate``: a fluid estimate of a
        bound, tight where stated), ``source``, ``formula`` and ``premises`` (what the bound
        assumes: a ``lower`` or ``upper`` row is returned only where its premises hold;
        outside them a rate is absent or of kind ``scheduler``, a heuristic).
    lower : float
        The bracket's lower end: the largest proven-stable rate (0 when no theorem covers
        the scheduler).
    upper : float
        The bracket's upper end: the smallest upper bound (``inf`` when none is proven for
        the time model: an operator profile's, whose estimate is the
        ``compute (full batch)`` row).
    binding : str
        The name of the upper bound that binds (the smallest).
    start : float
        Where a search starts: the proven-stable rate where a theorem gives one, else the
        smallest of the upper, scheduler and estimate rates.
    stats : RequestStats
        The workload's :class:`RequestStats` (its prompt tokens before any cache).
    first_token : {"prefill", "decode"}
        The first-token convention the bounds were computed under.
    violated : str or None
        Why no rate is stable (the bracket is empty), or ``None``.
    prefix : PrefixShare or None
        The prefix-cache hit ratio the compute and memory bounds use
        (:class:`~queuetheory.capacity.prefix.PrefixShare`: ``proven`` or ``estimate``), or
        ``None`` where no cache applies.
    """

    table: pd.DataFrame
    lower: float
    upper: float
    binding: str
    start: float
    stats: RequestStats
    first_token: str
    violated: str | None = None
    prefix: PrefixShare | None = None

    @property
    def empty(self) -> bool:
        """Whether the bracket is empty: no rate is stable (``violated`` says why)."""
        return self.violated is not None

    def rate(self, name: str) -> float:
        """The rate of the bound named ``name`` in :attr:`table`.

        Parameters
        ----------
        name : str
            A bound's ``name`` (e.g. ``"compute"``, ``"memory"``, ``"vLLM λ*"``).

        Returns
        -------
        float
            Its rate, in requests per time unit.

        Raises
        ------
        KeyError
            If the table has no bound of that name.
        """
        return float(self.table.set_index("name").loc[name, "rate"])

    def __repr__(self) -> str:
        if self.empty:
            return f"Bracket(empty: {self.violated})"
        cache, p = "", self.prefix
        if p is not None and p.offline is not None:
            cache += f"; prefix cache: offline hit ratio {ratio_text(float(p.offline))} (proven)"
        if p is not None and p.kind == "estimate":
            cache += f"; estimate at hit ratio {ratio_text(p.hit_ratio)}"
        return (f"Bracket([{self.lower:.5g}, {self.upper:.5g}] requests per time unit, "
                f"{self.binding} binds; {len(self.table)} bounds{cache})")


def bounds(workload, time_model, *, token_budget=None, memory=None, policy=None,
           first_token: str | None = None, hit_ratio: float | None = None) -> Bracket:
    """An analytic bracket for the largest stable arrival rate of ``workload``.

    A request brings ``w = m_p + m_d`` tokens of compute on average (``m_d`` decode
    iterations: ``output − 1`` when the prefill iteration emits the first token) and the
    KV-token-iterations ``E[a]`` of :func:`request_stats`. The bounds, in requests per unit:

    **compute** (kind ``upper``): an iteration of ``k ≤ b`` tokens takes at least ``t_k``, so
    the engine does at most ``max_{k≤b} k / t_k`` tokens per unit (Li, Dai, Peng, eq. 2.7:
    ``λ w < b / t_b``). Per model: piecewise-linear and unit time: ``max_{k≤b} k/t_k``
    (``b / t_b`` when ``c ≥ a·b0``); affine ``c + α_p P + α_d D``: every batch takes at least
    ``(P + D)·c/b + α_p P + α_d D``, so ``λ ≤ 1 / (c·w/b + α_p m_p + α_d m_d)``, the rate of
    full batches of the workload's mix; linear memory ``d0 + d1·K``: an iteration that
    processes ``K`` KV tokens of memory work takes ``d0 + d1 K > d1 K``, so ``λ E[a] < 1/d1``
    (Ao et al., eq. 6–7: ``d1 W < 1``), and a batch of ``k ≤ b`` tokens holds ``K ≥ k``, so
    ``λ w ≤ b / (d0 + d1 b)``; tiled GPU: Bari et al.'s converse ``λ ≤ 1 / T̄^R_LB``, the
    ceiling-free per-request time no schedule beats (:func:`~queuetheory.bounds.rad_capacity`).

    **memory** (kind ``upper``, only with ``memory = M``): Little's law on KV-token-time. Let
    ``K(t) ≤ M`` be the KV tokens held at time ``t``. A request holds, during each of its
    iterations, at least the KV tokens it has after that iteration, for the iteration's
    duration ``τ ≥ τ_min`` (the shortest iteration a request can be in: one decode alone),
    so its KV-token-time is ``A ≥ τ_min · a``. Over a long run ``λ E[A] = mean K ≤ M``:
    ``λ ≤ M / (τ_min E[a])``. For linear memory the iteration time grows with ``K`` itself
    and the sharper ``λ E[a] ≤ M / (d0 + d1 M)`` holds (each iteration processes ``K ≤ M``
    memory work at rate ``K/(d0 + d1 K)``): Ao et al.'s ``W < C/(d0 + d1 C)``. The bound is
    tight when the engine runs memory-full batches of iterations that last ``τ_min``: unit
    time, or piecewise-linear decode batches of at most ``b0`` requests; it is loose where
    memory-full batches are slower than ``τ_min`` (then see the estimate below), where
    requests wait resident (preempted or paused), or where evictions redo work.

    **memory (full batch)** (kind ``estimate``): the same balance with ``τ`` the duration of
    a memory-full decode batch (``n = min(b, M / κ)`` requests at the mean KV ``κ`` each, the
    full-batch iteration time): ``λ ≤ M / (τ_M E[a])``. Not a proven bound (batches may be
    shorter); it is the fluid boundary when memory-full batches are the rule.

    **scheduler-specific** (kind ``scheduler``; ``lower`` where a theorem proves stability):
    Sarathi and Orca (chunked): Li, Dai, Peng's Theorem 1(a): work-conserving, so stable
    while ``λ w < b / t_b`` (without a memory limit; the compute bound itself when no
    smaller load is faster); vanilla vLLM in unit time: ``λ*``
    solving ``λ m_d = e^{−λ} b`` (decodes run only in the rounds after one without arrivals,
    Li, Dai, Peng); WAIT with fixed lengths under linear memory: condition (9) of Ao et al.,
    ``d0 + d1 M^π ≤ n_j / λ_j``, scaled to the largest ``λ``; RAD under the tiled GPU model:
    Bari et al.'s ``λ* = 1 / T̄^R`` (Theorems 1–2).

    **prefix caching** (:mod:`~queuetheory.capacity.prefix`): a recorded trace with prefix
    ids (:attr:`~queuetheory.workload.Trace.blocks`, e.g. a Mooncake slice) run by a policy
    that caches prefixes (``VLLMV1``; or ``policy=None``, any scheduler) computes at least
    ``(1 − h_off)·m_p`` prefill tokens per request, ``h_off`` the trace's offline
    unbounded-cache ratio (eq. P2: every distinct block is computed at least once). The
    ``compute`` rows then use ``m_p → (1 − h_off)·m_p`` (``w → (1 − h_off)·m_p + m_d``) and
    stay proven upper bounds for any cache size; the ``memory`` row charges each request only
    its private KV (eq. P3: shared blocks count once, idle cached blocks are evicted on
    demand). ``hit_ratio=h`` adds the ``compute (hit ratio h)`` row of kind ``estimate``, the
    same formula with a realised or assumed ``h``: nothing proves a run reaches or stays
    below it. The tile model and operator profiles have no proven bound with a cache: their
    rows become estimates there. A policy with its own KV blocks (``num_gpu_blocks`` of
    ``VLLMV1``) gives ``memory = (num_gpu_blocks − 1)·block_size`` tokens when ``memory`` is
    ``None`` (vLLM keeps one block aside).

    An empty bracket (``violated``) names the bound broken at every rate: a request whose
    KV peak exceeds ``memory``, or WAIT's ``M^π > memory``. A recorded :class:`Trace`
    stands for its (prompt, output) pairs at its mean rate.

    Parameters
    ----------
    workload : Workload or Trace
        A :class:`~queuetheory.Workload` or a recorded
        :class:`~queuetheory.workload.Trace`.
    time_model : TimeModel or Server
        The batch-time model, or a whole :class:`~queuetheory.engine.Server` (its settings
        then stand for ``token_budget``, ``memory`` and ``first_token``; given again, they
        must agree).
    token_budget : int, optional
        ``b``, the most tokens one batch serves (default: the policy's own).
    memory : int, optional
        KV tokens ``M`` (``None``: the policy's KV blocks, else unlimited).
    policy : Policy, optional
        The scheduler (its scheduler-specific rows, batch cap and prefix cache); ``None``:
        the bounds that hold for any scheduler.
    first_token : {"prefill", "decode"}, optional
        Whether the prefill iteration emits the first output token; default
        ``"prefill"``.
    hit_ratio : float, optional
        A prefix-cache hit ratio in ``[0, 1)`` for an estimate row (``None``: the proven
        offline ratio alone, where the trace has ids).

    Returns
    -------
    Bracket
        The bounds, one row each, and the bracket ``[lower, upper]`` they give.

    Raises
    ------
    ValueError
        A time model that is not a queuetheory one, a budget or memory that is not a
        positive integer (or no budget at all), a loose setting that contradicts the
        :class:`~queuetheory.engine.Server`, a ``first_token`` that is neither value, a hit
        ratio outside ``[0, 1)`` or positive with the policy's cache off, a slotted
        :class:`~queuetheory.timing.AffineTokenTime`, a tile model with a request of no
        decode iteration, or a memory-full batch too large to build
        (``MAX_BATCH_MEMBERS``).
    """
    time_model, token_budget, memory, first_token = server_settings(
        time_model, token_budget, memory, first_token)
    first_token = check_first_token(first_token or "prefill")
    share = prefix_share(workload, policy, hit_ratio, first_token)
    workload = _length_law(workload)
    if not isinstance(time_model, TimeModel):
        raise ValueError(f"time_model={time_model!r}: must be a queuetheory TimeModel")
    if token_budget is None:
        token_budget = getattr(policy, "token_budget", None)
    check_positive("token_budget", token_budget, integer=True)
    b = int(token_budget)
    if memory is not None:
        check_positive("memory", memory, integer=True)
    memory = _memory_of(memory, policy)
    st = request_stats(workload, first_token)
    rows, violated = [], None
    rows += _prefix_compute_bounds(workload, time_model, b, st, first_token, share)
    if memory is not None:
        if st.peak > memory:
            violated = (f"memory: M={memory} is below the KV peak {st.peak} of the longest "
                        "request the workload draws; it can never finish, at any rate")
        private = None if share is None or share.offline is None else share.private_area
        rows += _memory_bounds(time_model, b, int(memory), st, private)
    rows += _batch_cap_bounds(workload, time_model, b, memory, policy, st)
    sched, why = _scheduler_bounds(workload, time_model, b, memory, policy, st)
    rows += sched
    violated = violated or why
    table = pd.DataFrame(rows, columns=["name", "rate", "kind", "source", "formula",
                                        "premises"])
    uppers = table[table["kind"] == "upper"]
    if len(uppers):
        i = int(uppers["rate"].to_numpy().argmin())
        upper, binding = float(uppers["rate"].iloc[i]), str(uppers["name"].iloc[i])
    else:                               # no proven upper bound for this time model
        upper, binding = np.inf, "none proven"
    lows = table.loc[table["kind"] == "lower", "rate"]
    lower = min(float(lows.max()), upper) if len(lows) else 0.0
    start = lower if lower > 0 else float(table.loc[table["kind"] != "lower", "rate"].min())
    if violated is not None:
        lower = upper = start = 0.0
    return Bracket(table, lower, upper, binding, start, st, first_token, violated, share)


def _memory_of(memory, policy):
    """``memory``, or the KV tokens of a policy that keeps its own blocks (``VLLMV1``'s
    ``num_gpu_blocks``, one of them vLLM's null block)."""
    blocks = getattr(policy, "num_gpu_blocks", None)
    if memory is not None or blocks is None:
        return memory
    return (int(blocks) - 1) * int(policy.block_size)


def _prefix_compute_bounds(workload, tm, b, st, first_token, share):
    """The compute rows with a prefix cache (:mod:`~queuetheory.capacity.prefix`): the
    proven ones at ``(1 − h_off)·m_p`` prefill tokens where ``share.offline`` is given, and
    the ``compute (hit ratio h)`` estimate where ``share`` is one."""
    if share is None:
        return _compute_bounds(workload, tm, b, st, first_token)
    proven = float(share.offline) if share.offline is not None else 0.0
    rows = _compute_bounds(workload, tm, b, cached_work(st, proven), first_token)
    if proven > 0:
        exact = isinstance(tm, PiecewiseLinearTime | UnitTime | AffineTokenTime
                           | LinearMemoryTime)
        for r in rows:
            if "m_p" not in r["formula"]:       # a bound on KV work, not prefill: unchanged
                continue
            if exact:
                r["formula"] += f", m_p → (1 − h_off)·m_p, h_off = {float(proven):.4g}"
                r["premises"] += ("; prefix cache: every distinct block of the trace is "
                                  "computed at least once (eq. P1), any cache size")
            else:
                r["kind"] = "estimate"
                r["premises"] = ("the tile model and operator profiles have no proven "
                                 "bound with a prefix cache; " + r["premises"])
    if share.kind == "estimate" and not isinstance(tm, TiledGPUTime):
        h = share.hit_ratio
        for r in _compute_bounds(workload, tm, b, cached_work(st, h), first_token):
            if "m_p" in r["formula"]:
                rows.append(_row(f"compute (hit ratio {ratio_text(h)})", r["rate"],
                                 "estimate", r["source"] + ", prefix cache at a given ratio",
                                 r["formula"] + ", m_p → (1 − h)·m_p",
                                 "heuristic: the fluid rate with a realised or assumed hit "
                                 "ratio h; no run is bounded by it"))
    return rows


def _row(name, rate, kind, source, formula, premises=""):
    return {"name": name, "rate": float(rate), "kind": kind, "source": source,
            "formula": formula, "premises": premises or _PREMISES.get(name, "")}


#: What each bound assumes, stated once: a bound is returned only where these hold.
_PREMISES = {
    "compute": "any schedule; batches of at most b tokens; batch time from the time model",
    "compute (token budget)": "any schedule; batches of at most b tokens",
    "memory": "any schedule; KV of every resident request within M after each batch",
    "memory (prefix cache)": "any schedule; the private KV of every resident request "
                             "(prompt past its prefix blocks, and its output: eq. P3) "
                             "within M after each batch; shared blocks counted once, idle "
                             "cached blocks evicted on demand",
    "memory (full batch)": "heuristic: memory-full decode batches are the rule",
    "batch cap": "any schedule with at most max_reqs requests per batch",
    "M/G/1 (max_reqs=1)": "one request per batch, served alone from first chunk to last "
                          "token, no idling while one waits (FCFS), no memory limit below "
                          "the KV peak; Loynes: stable iff λ E[S] < 1",
    "work-conserving": "Theorem 1(a) of Li, Dai, Peng: a work-conserving (K_p, K_d)-FCFS "
                       "policy (Sarathi, Orca with chunked prefill), no batch cap "
                       "(max_reqs=None), no memory limit, token-count time (piecewise-linear "
                       "or unit), i.i.d. arrivals, E[D²] < ∞",
    "work-conserving (fluid)": "heuristic: the fluid rate of full b-token batches of the "
                               "workload's mix; Theorem 1(a) assumes token-count time, not "
                               "an affine model with separate prefill and decode costs",
    "vLLM λ*": "fluid heuristic of Li, Dai, Peng: vanilla vLLM in unit time, Poisson arrivals",
    "WAIT fluid": "fluid condition of Ao et al.: fixed lengths, linear memory time",
    "RAD λ*": "Bari et al., Theorems 1–2: RAD under the tiled GPU model",
}


def _compute_bounds(workload, tm, b, st, first_token):
    from ..bounds.token_rate import max_token_rate as best_token_rate
    from ..bounds.token_rate import token_capacity

    if isinstance(tm, PiecewiseLinearTime | UnitTime):
        tokens = best_token_rate(tm, b, warn=False).rate
        return [_row("compute", tokens / st.work, "upper", "Li, Dai, Peng (eq. 2.7)",
                     "max_{k≤b} k/t_k / (m_p + m_d)")]
    if isinstance(tm, AffineTokenTime):
        if tm.slot is not None:
            raise ValueError(f"time_model={tm!r}: a slotted AffineTokenTime has no full-batch "
                             "capacity; give slot=None")
        tokens = token_capacity(tm, b, mix=st.prompt / st.work)
        return [_row("compute", tokens / st.work, "upper", "Li, Dai, Peng (eq. 2.7), affine",
                     "1 / (c·w/b + α_p m_p + α_d m_d)")]
    if isinstance(tm, LinearMemoryTime):
        rows = [_row("compute (token budget)", b / ((tm.d0 + tm.d1 * b) * st.work), "upper",
                     "budget b at the least iteration time", "b / ((d0 + d1 b)(m_p + m_d))")]
        if tm.d1 > 0:
            rows.insert(0, _row("compute", 1 / (tm.d1 * st.kv_area), "upper",
                                "Ao et al. (eq. 6–7, d1 W < 1)", "1 / (d1 E[a])"))
        return rows
    if isinstance(tm, TiledGPUTime):
        cap = _rad(workload, tm, first_token)
        return [_row("compute", cap.lambda_lb, "upper", "Bari et al. (converse T̄^R_LB)",
                     "1 / T̄^R_LB")]
    # an operator-profile time (attention by each request's KV): no proven bound, the rate of
    # full b-token batches of the workload's mix at the mean KV per decode
    prefill = int(round(st.prompt / st.work * b))
    context = int(round(st.kv_area / (st.decode + 1)))
    t_full = float(tm.duration(BatchLoad.of_tokens(prefill=prefill, decodes=b - prefill,
                                                   context=context)))
    return [_row("compute (full batch)", b / t_full / st.work, "estimate",
                 f"full batches of the mix on {type(tm).__name__}",
                 "b / t(b tokens of the mix, mean KV) / (m_p + m_d)",
                 "heuristic: full b-token batches at the mean KV; no proven bound for a "
                 "time model that depends on each request's KV")]


def _rad(workload, tm, first_token, n: int = 4000):
    """Bari et al.'s capacity from the workload's lengths (exact for fixed lengths, else a
    Monte Carlo mean over ``n`` draws with a fixed seed)."""
    from ..bounds.rad_capacity import rad_capacity

    tr = workload.sample(n_requests=1 if _fixed(workload) else n, seed=0)
    decode = tr.output - int(first_token == "prefill")
    if decode.min() < 1:
        raise ValueError("workload: Bari et al.'s tile model needs at least one decode "
                         "iteration per request (output ≥ 2 when prefill emits the first token)")
    # RAD's exact time for any prompt length: the last chunk pads to the tile, as on a GPU
    return rad_capacity(tr.prompt, decode, tm, variant="rad")


def _fixed(workload) -> bool:
    return len(workload.classes) == 1 and workload.classes[0].fixed


#: The most decodes a synthetic batch of a length-aware time model may hold (8 bytes each).
MAX_BATCH_MEMBERS = 10**8


def _memory_bounds(tm, b, M, st, private=None):
    """The memory rows; ``private``: the private KV area ``E[a_priv]`` of a prefix-cached
    trace (eq. P3), which the proven row charges instead of ``E[a]`` (the full-batch
    estimate keeps ``E[a]``: no sharing)."""
    if private is not None:
        tau_min = float(tm.duration(BatchLoad.of_tokens(decodes=1)))
        rows = [r for r in _memory_bounds(tm, b, M, st) if r["kind"] != "upper"]
        if private > 0:
            rows.insert(0, _row("memory", M / (tau_min * private), "upper",
                                "Little's law on private KV-token-time",
                                "M / (τ_min E[a_priv])", _PREMISES["memory (prefix cache)"]))
        return rows
    if isinstance(tm, LinearMemoryTime):
        return [_row("memory", M / ((tm.d0 + tm.d1 * M) * st.kv_area), "upper",
                     "Ao et al. (W < C/(d0 + d1 C))", "M / ((d0 + d1 M) E[a])")]
    tau_min = float(tm.duration(BatchLoad.of_tokens(decodes=1)))
    iters = st.decode + 1
    kappa = st.kv_area / iters                      # mean KV held per request-iteration
    n = max(1, min(b, int(M // max(kappa, 1.0))))
    if tm.counts_only:                              # no per-request array to build
        tau_full = float(tm.count_duration(0, n))
    else:
        if n > MAX_BATCH_MEMBERS:
            raise ValueError(f"memory={M}, token_budget={b}: a memory-full batch of {n:,} "
                             f"requests would need {n * 8 / 2**30:.3g} GiB of per-request KV "
                             f"lengths for {type(tm).__name__}, over MAX_BATCH_MEMBERS = "
                             f"{MAX_BATCH_MEMBERS:,}; lower them")
        tau_full = float(tm.duration(BatchLoad.of_tokens(decodes=n,
                                                         context=int(round(kappa)))))
    return [
        _row("memory", M / (tau_min * st.kv_area), "upper", "Little's law on KV-token-time",
             "M / (τ_min E[a])"),
        _row("memory (full batch)", M / (tau_full * st.kv_area), "estimate",
             "Little's law at the memory-full iteration time", "M / (τ_M E[a])"),
    ]


def _work_conserving(policy, memory) -> bool:
    """Whether Theorem 1(a) of Li, Dai, Peng covers ``policy``: Sarathi or Orca (chunked
    prefill), no batch cap, no memory limit."""
    from .. import policies as P

    return (type(policy) in (P.Sarathi, P.Orca) and getattr(policy, "chunk", True)
            and getattr(policy, "max_reqs", None) is None and memory is None)


def _batch_cap_bounds(workload, tm, b, memory, policy, st):
    """Bounds from a batch-size cap ``R = max_reqs``.

    **batch cap** (``upper``): a request is in at least ``m_d + 1`` batches (its decodes and
    the one that ends its prompt), each lasting at least ``τ_min`` (one decode alone), and a
    batch holds at most ``R`` requests, so by Little's law on batch membership
    ``λ (m_d + 1) τ_min ≤ R``. **M/G/1** (``lower`` and ``upper``, ``R = 1`` with Sarathi
    or Orca, FCFS): each request is then served alone, its service time
    ``S = Σ chunk times + Σ decode times`` (:func:`_lone_service`), and the engine is an
    M/G/1 queue, stable iff ``λ E[S] < 1``."""
    from .. import policies as P

    R = getattr(policy, "max_reqs", None)
    if R is None:
        return []
    tau_min = float(tm.duration(BatchLoad.of_tokens(decodes=1)))
    rows = [_row("batch cap", R / ((st.decode + 1) * tau_min), "upper",
                 "Little's law on batch membership", "R / ((m_d + 1) τ_min)")]
    if (R == 1 and type(policy) in (P.Sarathi, P.Orca) and policy.order == "fcfs"
            and (memory is None or memory >= st.peak) and tm.slot is None
            and isinstance(tm, PiecewiseLinearTime | UnitTime | AffineTokenTime)):
        mean, how = _lone_service(workload, tm, b, st)
        for kind in ("upper", "lower"):
            rows.append(_row("M/G/1 (max_reqs=1)", 1 / mean, kind, "Loynes (M/G/1)",
                             f"1 / E[S], S a request served alone ({how})"))
    return rows


def _lone_service(workload, tm, b, st):
    """``E[S]``: the mean time a request takes served alone under a token-count time model
    — its prompt in chunks of at most ``b``, then ``m_d`` decodes of one token each. The
    prompt's part is averaged over the length law's support grid (exact for fixed lengths,
    samples and integer laws; the quadrature :class:`RequestStats` uses otherwise)."""
    t_b = float(tm.duration(BatchLoad.of_tokens(prefill=b)))
    parts, weights = [], []
    for c in workload.classes:
        full, rest = np.divmod(c._prompt._support_grid().astype(np.int64), b)
        values, where = np.unique(rest, return_inverse=True)
        t_rest = np.array([float(tm.duration(BatchLoad.of_tokens(prefill=int(r)))) if r
                           else 0.0 for r in values])
        parts.append(float(np.mean(full * t_b + t_rest[where])))
        weights.append(c.rate)
    w = np.asarray(weights, dtype=float)
    prefill = float(np.average(parts, weights=w if w.sum() > 0 else None))
    return prefill + st.decode * float(tm.duration(BatchLoad.of_tokens(decodes=1))), \
        "the prompt's chunks averaged over the length law's support"


def vllm_unit_time_rate(token_budget: int, decode_tokens: float) -> float:
    """Li, Dai, Peng's ``λ*`` of vanilla vLLM in unit time: the root of ``λ m_d = e^{−λ} b``
    (a round decodes only after a round without arrivals, which has probability
    ``e^{−λ}``, and then serves at most ``b`` decodes).

    Parameters
    ----------
    token_budget : int
        ``b``, the most decodes one round serves.
    decode_tokens : float
        ``m_d``, the mean decode iterations of a request (> 0).

    Returns
    -------
    float
        ``λ*``, in requests per round.

    Raises
    ------
    ValueError
        If ``token_budget`` is not a positive integer or ``decode_tokens`` not a positive
        number.
    """
    check_positive("token_budget", token_budget, integer=True)
    check_positive("decode_tokens", decode_tokens)
    return float(optimize.brentq(lambda lam: lam * decode_tokens - np.exp(-lam) * token_budget,
                                 1e-12, 60.0))


def _scheduler_bounds(workload, tm, b, memory, policy, st):
    from .. import policies as P

    if policy is None:
        return [], None
    out, violated = [], None
    if _work_conserving(policy, memory) and isinstance(tm, PiecewiseLinearTime | UnitTime
                                                       | AffineTokenTime):
        from ..bounds.token_rate import token_capacity

        full = token_capacity(tm, b, mix=st.prompt / st.work) / st.work
        if isinstance(tm, AffineTokenTime):
            out.append(_row("work-conserving (fluid)", full, "scheduler",
                            "full b-token batches of the mix (Li, Dai, Peng's fluid argument)",
                            "λ = (b / t_b(mix)) / (m_p + m_d)"))
        else:
            out.append(_row("work-conserving", full, "lower", "Li, Dai, Peng, Theorem 1(a)",
                            "stable while λ(m_p + m_d) < b/t_b"))
    if type(policy) is P.VLLMVanilla and isinstance(tm, UnitTime) and st.decode > 0:
        out.append(_row("vLLM λ*", vllm_unit_time_rate(b, st.decode) / (tm.slot or 1.0),
                        "scheduler", "Li, Dai, Peng (vanilla vLLM, unit time)",
                        "λ m_d = e^{−λ} b"))
    if isinstance(policy, P.WAIT) and isinstance(tm, LinearMemoryTime):
        from ..fluid.thresholds import wait_condition, wait_memory

        n = np.array(policy.thresholds)
        if len(n) == len(workload.classes) and all(c.fixed for c in workload.classes):
            cond = wait_condition(n, workload.classes, tm.d0, tm.d1)
            lam = workload.rates
            scale = float(np.min(n[lam > 0] / (lam[lam > 0] * cond.iteration_time)))
            out.append(_row("WAIT fluid", scale * workload.total_rate, "scheduler",
                            "Ao et al., condition (9)", "d0 + d1 M^π ≤ n_j / λ_j"))
            m_pi = wait_memory(n, workload.classes)
            if memory is not None and memory < m_pi:
                violated = (f"memory: M={memory} is below WAIT's M^π = {m_pi:g} for thresholds "
                            f"{policy.thresholds} (Ao et al., eq. 9); WAIT refuses to run")
    if isinstance(policy, P.RAD) and isinstance(tm, TiledGPUTime):
        cap = _rad(workload, tm, "prefill")
        out.append(_row("RAD λ*", cap.lambda_star, "scheduler", "Bari et al., Theorems 1–2",
                        "1 / T̄^R"))
    return out, violated

"""Capacity planning: how much load one engine takes, at what latency, and how many engines.

Four questions an inference engineer sizing a deployment asks, each answered by joining the
papers' closed-form capacities to the simulator:

* :func:`bounds` — an analytic bracket for the largest stable arrival rate: the compute
  bound (Li, Dai, Peng's token capacity ``b / t_b``, generalised to every time model), the
  memory bound (Little's law on KV-token-time) and the scheduler-specific rates the papers
  give (vanilla vLLM's ``λ*`` of Li, Dai, Peng; the WAIT fluid condition of Ao et al.; RAD's
  capacity ``T^R`` of Bari et al.);
* :func:`max_rate` — the simulated boundary: a bisection on the arrival rate, started from
  the bracket and judged by :func:`~queuetheory.stability`;
* :func:`goodput` — the largest rate at which at least ``attainment`` of the requests meet
  every latency target (the goodput of DistServe, Zhong et al.), over a steady-state window;
* :func:`replicas` — the fewest engines behind a router (the networks layer) that meet the
  targets at a given total rate.

Rates are requests per time unit of the time model (seconds for the affine and GPU models,
milliseconds for Li, Dai, Peng's fit, rounds for :class:`~queuetheory.UnitTime`). Every
function takes ``first_token`` (``"prefill"``, the real engines' convention and the default:
the prefill iteration emits the first output token; or ``"decode"``, Li, Dai, Peng's), which
fixes how many decode iterations a request needs.
"""

from __future__ import annotations

import dataclasses
import math
import time
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import optimize

from .engine import simulate
from .engine.conventions import check_first_token
from .errors import CensoredRunWarning, UnsupportedSettingError, check_positive
from .stability import default_horizon, stability
from .timing import (
    AffineTokenTime,
    BatchLoad,
    LinearMemoryTime,
    PiecewiseLinearTime,
    TiledGPUTime,
    TimeModel,
    UnitTime,
)
from .workload import Trace, Workload
from .workload.core import _PairedClass
from .workload.traces import mean_rate, with_rate

__all__ = ["bounds", "Bracket", "max_rate", "MaxRate", "goodput", "Goodput", "replicas",
           "Replicas", "at_rate", "replay", "request_stats", "RequestStats", "relaxation_time",
           "vllm_unit_time_rate",
           "SLO_KEYS", "slo_attainment", "load_curve", "plot_capacity", "capacity_main"]

#: The shortest probe of :func:`max_rate`, in lifetimes of a lone mean request.
MIN_LIFETIMES = 50
#: A probe of :func:`max_rate` spans at least this many relaxation times of the backlog
#: (:func:`relaxation_time`): its tail (the last half) then holds ten blocks of about two
#: relaxation times each, long enough for the batch means to be nearly independent.
RELAXATION_RUNS = 40
#: The most expected arrivals one probe of :func:`max_rate` runs by default (about 136 MB
#: of request table, a few seconds for the bulk-rule schedulers on ShareGPT lengths).
MAX_PROBE_REQUESTS = 500_000

#: The latency targets :func:`goodput` and :func:`replicas` accept (time units of the model).
SLO_KEYS = {
    "ttft": "time to first token: first token − arrival",
    "tbt": "time between tokens: the request's LARGEST gap between consecutive output tokens",
    "tpot": "time per output token: the request's MEAN gap after the first token "
            "((finish − first token) / (output − 1))",
    "latency": "end-to-end latency: finish − arrival",
}


# ---- the workload's per-request figures ----------------------------------------------------
@dataclass(frozen=True)
class RequestStats:
    """Means per request, under a ``first_token`` convention.

    prompt, output : mean prompt and output tokens
    decode : mean decode iterations (``output − 1`` when prefill emits the first token)
    work : mean tokens of compute, ``prompt + decode`` (Li, Dai, Peng's ``m_p + m_d``)
    kv_area : mean KV-token-iterations ``E[a]``: the KV tokens a request holds after each of
        its iterations, summed (Ao et al.'s memory work ``(l'+1)(l + l'/2)`` under
        ``"decode"``; ``o·p + o(o−1)/2`` under ``"prefill"``)
    peak : the largest KV footprint a request of the workload reaches (``p + o − 1`` under
        ``"prefill"``), over the law's support (quantile grid for distributions)
    work2 : the second moment ``E[(p + d)²]`` of a request's tokens of compute (prompt and
        output independent within a class unless the class draws them as pairs)
    """

    prompt: float
    output: float
    decode: float
    work: float
    kv_area: float
    peak: int
    work2: float


def request_stats(workload, first_token: str = "prefill") -> RequestStats:
    """The :class:`RequestStats` of ``workload`` (class means weighted by rate)."""
    emit = int(check_first_token(first_token) == "prefill")
    classes = _classes(workload)
    w = np.array([c.rate for c in classes], dtype=float)
    if w.sum() <= 0:
        w = np.ones(len(classes))
    w = w / w.sum()
    area, square, peak = [], [], 0
    for c in classes:
        if isinstance(c, _PairedClass):
            p, o = c._prompt.spec.astype(float), c._output.spec.astype(float)
            d = o - emit
            area.append(float(np.mean((d + 1) * p + d * (d + 1) / 2)))
            square.append(float(np.mean((p + d) ** 2)))
            peak = max(peak, int((p + o).max()) - emit)
        else:
            mp, mo, mo2 = c.mean_prompt, c.mean_output, c.output_moment(2)
            md, md2 = mo - emit, mo2 - 2 * emit * mo + emit
            area.append((md + 1) * mp + (md2 + md) / 2)
            square.append(c._prompt.moment(2) + 2 * mp * md + md2)
            peak = max(peak, c.max_prompt + c.max_output - emit)
    mp = float(w @ [c.mean_prompt for c in classes])
    mo = float(w @ [c.mean_output for c in classes])
    return RequestStats(mp, mo, mo - emit, mp + mo - emit, float(w @ area), int(peak),
                        float(w @ square))


def relaxation_time(workload, rate: float, capacity: float,
                    first_token: str = "prefill") -> float:
    """The time scale on which the backlog of a queue at ``rate`` forgets its start.

    Heavy-traffic approximation (Abate and Whitt, "Transient behavior of regulated Brownian
    motion", 1987): near ``ρ = rate/capacity = 1`` the work in the system is a reflected
    Brownian motion with drift ``−(1 − ρ)`` and variance ``λ E[S²]`` per unit time, ``S`` a
    request's service time at full capacity (its tokens of compute over the token rate
    ``capacity · E[work]``). Its mean approaches steady state on the scale
    ``σ²/μ² = λ E[S²] / (1 − ρ)²``: what this returns. The stationary backlog, and the
    excursions that batch means must average over, live on the same scale, so a run of a
    few relaxation times is still filling up and reads as growth. Infinite at ``ρ ≥ 1``.
    """
    check_positive("rate", rate)
    check_positive("capacity", capacity)
    rho = rate / capacity
    if rho >= 1:
        return math.inf
    st = request_stats(workload, first_token)
    mean_square = st.work2 / (st.work ** 2 * capacity ** 2)
    return rate * mean_square / (1 - rho) ** 2


def _classes(workload):
    if not isinstance(workload, Workload):
        raise ValueError(f"workload={workload!r}: must be a queuetheory Workload")
    return workload.classes


def at_rate(workload: Workload, rate: float) -> Workload:
    """``workload`` with its total arrival rate set to ``rate``: every class's rate scaled by
    the same factor, its length laws, arrival process, predictor and slot kept."""
    check_positive("rate", rate)
    if workload._trace is not None:
        raise ValueError("workload: a recorded trace has its own arrival times; capacity "
                         "planning rescales a Workload that draws arrivals")
    total = workload.total_rate
    if total <= 0:
        raise ValueError(f"workload={workload!r}: total rate 0, no length mix to rescale")
    f = float(rate) / total
    classes = [dataclasses.replace(c, rate=c.rate * f) for c in workload.classes]
    return Workload(classes, arrivals=workload.arrivals, predictor=workload.predictor,
                    slot=workload.slot)


def replay(trace: Trace, rate: float, horizon: float) -> Trace:
    """``trace`` at the mean rate ``rate`` (:func:`~queuetheory.workload.traces.with_rate`:
    every gap scaled by one factor, the burstiness kept), replayed end to end — copies one
    mean gap apart — until ``horizon``: a production trace as long as a probe needs."""
    check_positive("horizon", horizon)
    tr = with_rate(trace, rate)
    t = tr.arrival - tr.arrival[0]
    period = float(t[-1]) + 1 / float(rate)
    copies = max(1, math.ceil(horizon / period))
    fields = {f: np.tile(getattr(tr, f), copies) for f in Trace.__dataclass_fields__}
    fields["arrival"] = (t[None, :] + period * np.arange(copies)[:, None]).ravel()
    return Trace(**fields).until(horizon)


def _length_law(workload):
    """The workload whose length law and rate the bounds read: a trace's (prompt, output)
    pairs at its mean rate, or the workload itself."""
    if isinstance(workload, Trace):
        return Workload.from_lengths(workload.prompt, workload.output,
                                     rate=mean_rate(workload))
    return workload


# ---- 1. the analytic bracket ------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class Bracket:
    """The analytic bracket of :func:`bounds`.

    table : one row per bound: ``name``, ``rate`` (requests per time unit), ``kind``
        (``upper``: no scheduler is stable above it; ``lower``: a theorem says this
        scheduler is stable below it; ``scheduler``: the paper's rate for this scheduler, a
        fluid or heuristic value, neither side proven; ``estimate``: a fluid estimate of a
        bound, tight where stated), ``source`` and ``formula``
    lower, upper : the bracket: the largest proven-stable rate (0 when no theorem covers the
        scheduler) and the smallest upper bound
    binding : the name of the upper bound that binds (the smallest)
    start : where a search starts: the smallest of the upper, scheduler and estimate rates
    stats : the workload's :class:`RequestStats`
    violated : why no rate is stable (the bracket is empty), or ``None``
    """

    table: pd.DataFrame
    lower: float
    upper: float
    binding: str
    start: float
    stats: RequestStats
    first_token: str
    violated: str | None = None

    @property
    def empty(self) -> bool:
        return self.violated is not None

    def rate(self, name: str) -> float:
        return float(self.table.set_index("name").loc[name, "rate"])

    def __repr__(self) -> str:
        if self.empty:
            return f"Bracket(empty: {self.violated})"
        return (f"Bracket([{self.lower:.5g}, {self.upper:.5g}] requests per time unit, "
                f"{self.binding} binds; {len(self.table)} bounds)")


def bounds(workload, time_model, *, token_budget, memory=None, policy=None,
           first_token: str = "prefill") -> Bracket:
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

    An empty bracket (``violated``) names the bound broken at every rate: a request whose
    KV peak exceeds ``memory``, or WAIT's ``M^π > memory``. A recorded :class:`Trace`
    stands for its (prompt, output) pairs at its mean rate.
    """
    first_token = check_first_token(first_token)
    workload = _length_law(workload)
    if not isinstance(time_model, TimeModel):
        raise ValueError(f"time_model={time_model!r}: must be a queuetheory TimeModel")
    check_positive("token_budget", token_budget, integer=True)
    b = int(token_budget)
    if memory is not None:
        check_positive("memory", memory, integer=True)
    st = request_stats(workload, first_token)
    rows, violated = [], None
    rows += _compute_bounds(workload, time_model, b, st, first_token)
    if memory is not None:
        if st.peak > memory:
            violated = (f"memory: M={memory} is below the KV peak {st.peak} of the longest "
                        "request the workload draws; it can never finish, at any rate")
        rows += _memory_bounds(time_model, b, int(memory), st)
    sched, why = _scheduler_bounds(workload, time_model, b, memory, policy, st)
    rows += sched
    violated = violated or why
    table = pd.DataFrame(rows, columns=["name", "rate", "kind", "source", "formula"])
    uppers = table[table["kind"] == "upper"]
    i = int(uppers["rate"].to_numpy().argmin())
    upper, binding = float(uppers["rate"].iloc[i]), str(uppers["name"].iloc[i])
    lows = table.loc[table["kind"] == "lower", "rate"]
    lower = min(float(lows.max()), upper) if len(lows) else 0.0
    start = float(table.loc[table["kind"] != "lower", "rate"].min())
    if violated is not None:
        lower = upper = start = 0.0
    return Bracket(table, lower, upper, binding, start, st, first_token, violated)


def _row(name, rate, kind, source, formula):
    return {"name": name, "rate": float(rate), "kind": kind, "source": source,
            "formula": formula}


def _compute_bounds(workload, tm, b, st, first_token):
    from .bounds.capacity import max_rate as best_token_rate
    from .bounds.capacity import token_capacity

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
    raise ValueError(f"time_model={tm!r}: no compute bound for {type(tm).__name__}; the "
                     "shipped models are PiecewiseLinearTime, UnitTime, AffineTokenTime, "
                     "LinearMemoryTime and TiledGPUTime")


def _rad(workload, tm, first_token, n: int = 4000):
    """Bari et al.'s capacity from the workload's lengths (exact for fixed lengths, else a
    Monte Carlo mean over ``n`` draws with a fixed seed)."""
    from .bounds.rad_capacity import rad_capacity

    tr = workload.sample(n_requests=1 if _fixed(workload) else n, seed=0)
    decode = tr.output - int(first_token == "prefill")
    if decode.min() < 1:
        raise ValueError("workload: Bari et al.'s tile model needs at least one decode "
                         "iteration per request (output ≥ 2 when prefill emits the first token)")
    return rad_capacity(tr.prompt, decode, tm)


def _fixed(workload) -> bool:
    return len(workload.classes) == 1 and workload.classes[0].fixed


def _memory_bounds(tm, b, M, st):
    if isinstance(tm, LinearMemoryTime):
        return [_row("memory", M / ((tm.d0 + tm.d1 * M) * st.kv_area), "upper",
                     "Ao et al. (W < C/(d0 + d1 C))", "M / ((d0 + d1 M) E[a])")]
    tau_min = float(tm.duration(BatchLoad.of_tokens(decodes=1)))
    iters = st.decode + 1
    kappa = st.kv_area / iters                      # mean KV held per request-iteration
    n = max(1, min(b, int(M // max(kappa, 1.0))))
    tau_full = float(tm.duration(BatchLoad.of_tokens(decodes=n, context=int(round(kappa)))))
    return [
        _row("memory", M / (tau_min * st.kv_area), "upper", "Little's law on KV-token-time",
             "M / (τ_min E[a])"),
        _row("memory (full batch)", M / (tau_full * st.kv_area), "estimate",
             "Little's law at the memory-full iteration time", "M / (τ_M E[a])"),
    ]


def vllm_unit_time_rate(token_budget: int, decode_tokens: float) -> float:
    """Li, Dai, Peng's ``λ*`` of vanilla vLLM in unit time: the root of ``λ m_d = e^{−λ} b``
    (a round decodes only after a round without arrivals, which has probability
    ``e^{−λ}``, and then serves at most ``b`` decodes)."""
    check_positive("token_budget", token_budget, integer=True)
    check_positive("decode_tokens", decode_tokens)
    return float(optimize.brentq(lambda lam: lam * decode_tokens - np.exp(-lam) * token_budget,
                                 1e-12, 60.0))


def _scheduler_bounds(workload, tm, b, memory, policy, st):
    from . import policies as P

    if policy is None:
        return [], None
    out, violated = [], None
    if (type(policy) in (P.Sarathi, P.Orca) and getattr(policy, "chunk", True)
            and memory is None and isinstance(tm, PiecewiseLinearTime | UnitTime
                                              | AffineTokenTime)):
        from .bounds.capacity import token_capacity

        full = token_capacity(tm, b, mix=st.prompt / st.work) / st.work
        out.append(_row("work-conserving", full, "lower", "Li, Dai, Peng, Theorem 1(a)",
                        "stable while λ(m_p + m_d) < b/t_b"))
    if type(policy) is P.VLLMVanilla and isinstance(tm, UnitTime):
        out.append(_row("vLLM λ*", vllm_unit_time_rate(b, st.decode) / (tm.slot or 1.0),
                        "scheduler", "Li, Dai, Peng (vanilla vLLM, unit time)",
                        "λ m_d = e^{−λ} b"))
    if isinstance(policy, P.WAIT) and isinstance(tm, LinearMemoryTime):
        from .fluid.thresholds import wait_condition, wait_memory

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


# ---- 2. the simulated boundary -----------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class MaxRate:
    """The answer of :func:`max_rate`.

    rate : the estimated largest stable rate: the geometric middle of the largest rate
        judged stable and the smallest judged unstable (or the analytic upper bound)
    interval : ``(low, high)``: ``high`` the smallest rate judged unstable (or the analytic
        upper bound), ``low`` the largest rate judged stable lowered by the verdict's
        ``tolerance`` (a "stable" verdict means the engine serves at least ``1 − tolerance``
        of the offered work, so no less is certain)
    probes : one row per probe: ``rate``, ``load`` (over the upper bound), ``verdict``,
        ``drift``/``drift_low``/``drift_high`` (relative to the offered work), ``horizon``,
        ``relaxation`` (:func:`relaxation_time` at that rate), ``rounds``, ``arrived`` and
        ``unfinished`` (requests, all seeds of the last round), ``wall_s``
    bracket : the analytic :class:`Bracket`; ``binding`` its binding bound
    efficiency : ``rate`` over the analytic upper bound
    converged : whether the stable and unstable probes are within ``(1 + tol)/(1 − tol)``
    inconclusive : how many probes were inconclusive (treated as unknown)
    """

    rate: float
    interval: tuple[float, float]
    probes: pd.DataFrame
    bracket: Bracket
    efficiency: float
    converged: bool
    tol: float
    tolerance: float
    wall_s: float
    note: str = ""

    @property
    def binding(self) -> str:
        return self.bracket.binding

    @property
    def inconclusive(self) -> int:
        return int((self.probes["verdict"] == "inconclusive").sum())

    def __repr__(self) -> str:
        lo, hi = self.interval
        return (f"MaxRate({self.rate:.5g} [{lo:.5g}, {hi:.5g}] requests per time unit, "
                f"efficiency {self.efficiency:.3f} of {self.binding} "
                f"{self.bracket.upper:.5g}; {len(self.probes)} probes, {self.inconclusive} "
                f"inconclusive, {'converged' if self.converged else 'NOT converged'}, "
                f"{self.wall_s:.1f} s{'; ' + self.note if self.note else ''})")


def _trace_verdict(trace, rate, policy, time_model, H, cap, level, tolerance, kw) -> dict:
    """One probe of :func:`max_rate` on a production trace: :func:`replay` at ``rate`` up to
    ``H`` (doubled while inconclusive, up to ``cap``), judged by
    :func:`~queuetheory.metrics.growth_rate` (the rule of :func:`~queuetheory.stability`).

    The replay is periodic (period ``P = n / rate``, the trace's ``n`` requests at the mean
    rate), and so is a stable backlog: a tail cut mid-period reads the trace's own busy
    hours as growth. ``H`` is therefore rounded up to a whole number of ``2·blocks``
    periods, so that the tail (the last half) is a whole number of periods per block and
    the periodic part cancels from both tests."""
    from .metrics import growth_rate

    blocks = 10                         # growth_rate's blocks; its tail is the last half
    unit = 2 * blocks * len(trace) / rate
    if unit > cap:
        raise ValueError(
            f"trace: {len(trace)} requests; a probe needs {2 * blocks} replays of it "
            f"({2 * blocks * len(trace):.3g} requests), over max_probe_requests: give a "
            "shorter stretch (trace.head(n) or read_trace(window=...)) or raise "
            "max_probe_requests")
    H = unit * math.ceil(H / unit * (1 - 1e-12))
    t0, rounds = time.perf_counter(), 0
    while True:
        rounds += 1
        with warnings.catch_warnings():     # an unstable run's backlog is the evidence here
            warnings.simplefilter("ignore", CensoredRunWarning)
            res = simulate(replay(trace, rate, H), policy, time_model, horizon=H, **kw)
        g = growth_rate(res, level=level, tolerance=tolerance, blocks=blocks)
        if g.verdict != "inconclusive" or 2 * H > cap:
            break
        H = 2 * H
    rel = g.offered if g.offered > 0 else 1.0
    return {"verdict": g.verdict, "drift": g.relative, "drift_low": g.ci_low / rel,
            "drift_high": g.ci_high / rel, "horizon": H, "rounds": rounds,
            "arrived": len(res.trace), "unfinished": int(res.engine.live.size),
            "wall_s": time.perf_counter() - t0}


def _refuse_unsupported(who: str, policy, memory, first_token) -> None:
    """Refuse, before any bound or probe, a setting ``policy`` says it cannot run
    (:meth:`~queuetheory.policies.Policy.supports`)."""
    supports = getattr(policy, "supports", None)
    reason = supports(memory=memory, first_token=first_token) if supports else None
    if reason:
        raise UnsupportedSettingError(
            policy, f"memory={memory}, first_token={first_token!r} in qt.capacity.{who}",
            reason)


def _budget_of(policy, token_budget):
    b = token_budget if token_budget is not None else getattr(policy, "token_budget", None)
    if b is None:
        raise ValueError(f"token_budget=None: {policy!r} has no token_budget of its own; "
                         "give token_budget")
    return int(check_positive("token_budget", b, integer=True))


def max_rate(workload, policy, time_model, *, token_budget=None, memory=None,
             tol: float = 0.01, seeds=(0,), first_token: str = "prefill",
             n_requests: int | None = None, max_horizon_factor: float = 4.0,
             tolerance: float = 0.03, level: float = 0.99, max_probes: int = 24,
             max_probe_requests: float = MAX_PROBE_REQUESTS,
             bracket: Bracket | None = None) -> MaxRate:
    """The largest arrival rate at which ``policy`` is stable, by bisection on the rate.

    The workload's length law is kept and its rate scaled (:func:`at_rate`); a recorded
    :class:`~queuetheory.workload.Trace` is replayed at each rate with its burstiness kept
    (:func:`replay`, the verdict of :func:`~queuetheory.metrics.growth_rate` on the one
    replay: ``seeds`` then only seed the policy). Each probe is
    judged by :func:`~queuetheory.stability` over ``seeds``, with its ``tolerance`` (default
    0.03, stability's own: a "stable" verdict at ``λ`` means the engine serves at least
    ``1 − tolerance`` of what arrives) and runs of stability's default horizon (4000
    arrivals or 200 lifetimes of a lone request, whichever is longer), or of ``n_requests``
    arrivals but at least ``MIN_LIFETIMES`` lone lifetimes (a shorter run is all warm-up
    and looks unstable); a run is doubled while inconclusive, up to ``max_horizon_factor``
    times. That first run settles a probe when it is ``stable`` (the fill-up from empty
    only biases towards growth) or when the backlog surely grows faster than
    ``tolerance`` of the offered work (the drift's lower bound above it: a stable queue's
    fill-up rises at about ``σ/√H`` relative, ``σ² = λE[S²]``, far less at these lengths).
    Otherwise the probe runs again for ``RELAXATION_RUNS`` relaxation times of the backlog
    (:func:`relaxation_time`, ``λE[S²]/(1 − ρ)²`` with ``ρ`` the rate over the bracket's
    upper bound), so that stability's tail lies past the fill-up and its blocks are longer
    than the backlog's excursions; without it, ShareGPT's heavy-tailed lengths read as
    growth at 0.96 of a bound Theorem 1(a) of Li, Dai, Peng proves stable. No probe draws
    more than ``max_probe_requests`` expected arrivals (doublings included). A setting the
    policy refuses (``Policy.supports``) raises
    :class:`~queuetheory.errors.UnsupportedSettingError` before any probe.

    The search first checks the analytic value: the bracket's ``start`` (:func:`bounds`)
    times ``1 − tol`` and, below the upper bound, ``1 + tol``; when the first is stable and
    the second unstable it is done in two probes. Otherwise an unstable probe's next guess
    is the rate it served, ``λ(1 − drift)``, where that lies inside the interval, else the
    geometric middle of the widest gap. An inconclusive probe is unknown: it moves neither
    end, and the search goes on between the stable probes and the inconclusive ones, or
    between those and the unstable ones (probes inside an inconclusive band would be
    inconclusive too). It stops when the largest stable and the smallest unstable probe
    (or the analytic upper bound) are within a factor ``(1 + tol)/(1 − tol)``
    (``converged``: the rate is their geometric middle, within about ``±tol`` of both),
    when an inconclusive band is
    all that is left, or after ``max_probes``. Heavy-tailed lengths (ShareGPT's prompts
    reach 26k tokens) make the backlog jumpy: near the boundary the verdicts stay
    inconclusive unless the runs are long, and ``note`` says so.
    """
    t0 = time.perf_counter()
    _refuse_unsupported("max_rate", policy, memory, check_first_token(first_token))
    trace = workload if isinstance(workload, Trace) else None
    workload = _length_law(workload)
    b = _budget_of(policy, token_budget)
    if not 0 < tol < 0.5:
        raise ValueError(f"tol={tol!r}: the relative precision must lie in (0, 0.5)")
    tolerance = float(check_positive("tolerance", tolerance))
    br = bracket or bounds(workload, time_model, token_budget=b, memory=memory,
                           policy=policy, first_token=first_token)
    cols = ["rate", "load", "verdict", "drift", "drift_low", "drift_high", "horizon",
            "relaxation", "rounds", "arrived", "unfinished", "wall_s"]
    if br.empty:
        return MaxRate(0.0, (0.0, 0.0), pd.DataFrame(columns=cols), br, 0.0, True, tol,
                       tolerance, time.perf_counter() - t0, br.violated)
    rows = []

    lifetime = _lone_lifetime(workload, time_model)

    def probe(x):
        wl = at_rate(workload, x)
        H = (default_horizon(wl, time_model) if n_requests is None
             else max(n_requests / x, MIN_LIFETIMES * lifetime))
        relax = relaxation_time(workload, x, br.upper, first_token)
        long = max(H, min(RELAXATION_RUNS * relax, max_probe_requests / x))
        cap = max(long, min(max_horizon_factor * long, max_probe_requests / x))
        kw = {"memory": memory, "token_budget": b, "first_token": first_token}
        if trace is None:
            def judge(h, most):
                return stability(wl, policy, time_model, horizon=h, max_horizon=most,
                                 seeds=seeds, level=level, tolerance=tolerance, **kw)

            v, rounds, wall = judge(H, H if long > H else cap), 0, 0.0
            clear = (v.verdict == "stable"
                     or (v.verdict == "unstable" and v.drift_interval[0] > tolerance))
            if long > H and not clear:
                rounds, wall = v.rounds, v.wall_s
                v = judge(long, cap)
            row = {"verdict": v.verdict, "drift": v.drift, "drift_low": v.drift_interval[0],
                   "drift_high": v.drift_interval[1], "horizon": v.horizon,
                   "rounds": rounds + v.rounds, "arrived": int(v.runs["arrived"].sum()),
                   "unfinished": int(v.runs["in_system_end"].sum()),
                   "wall_s": wall + v.wall_s}
        else:
            H = long
            row = _trace_verdict(trace, x, policy, time_model, H, cap, level, tolerance, kw)
        rows.append({"rate": x, "load": x / br.upper, "relaxation": relax, **row})
        return row

    lo, hi, unknown, served, note = None, None, [], None, ""
    width = (1 + tol) / (1 - tol) * (1 + 1e-12)   # the widest stable/unstable pair accepted
    planned = [br.start * (1 - tol)]          # first check the analytic value itself
    if br.start * (1 + tol) < br.upper:
        planned.append(br.start * (1 + tol))
    while len(rows) < max_probes:
        x = planned.pop(0) if planned else None
        if x is None:
            top = hi if hi is not None else br.upper   # nothing is stable above the bound
            if lo is None:                             # walk down until a stable probe
                lowest = min(r["rate"] for r in rows)
                guess = served if served is not None and served < lowest else lowest / 2
                x, served = min(max(guess, lowest / 4), lowest * (1 - 2 * tol)), None
                if x < br.start * 1e-4:
                    note = f"not stable at any rate probed, down to {lowest:.3g}"
                    break
            elif lo >= top:
                note = (f"conflicting verdicts: stable at {lo:.5g} above unstable at "
                        f"{top:.5g}; give more seeds or a larger n_requests")
                break
            elif top / lo <= width:
                break
            else:
                inside = [u for u in unknown if lo < u < top]
                gaps = [(lo, min(inside)), (max(inside), top)] if inside else [(lo, top)]
                a, z = max(gaps, key=lambda g: g[1] / g[0])
                if z / a <= width:
                    note = (f"an inconclusive band [{min(inside):.5g}, {max(inside):.5g}] "
                            "remains between the stable and unstable probes: longer runs "
                            "(n_requests) or a larger tolerance narrow it")
                    break
                x = math.sqrt(a * z)
                if served is not None and a * (1 + tol) < served < z / (1 + tol):
                    x = served                       # the rate an overloaded run served
                served = None
        v = probe(x)
        if v["verdict"] == "stable":
            lo = x if lo is None else max(lo, x)
        elif v["verdict"] == "unstable":
            hi = x if hi is None else min(hi, x)
            served = x * (1 - max(v["drift"], 0.0)) * (1 - tol)
        else:
            unknown.append(x)
    probes = pd.DataFrame(rows, columns=cols)
    high = hi if hi is not None else br.upper
    converged = lo is not None and high / lo <= width
    rate = math.sqrt(lo * high) if lo is not None else 0.0
    low = 0.0 if lo is None else lo * (1 - tolerance)
    if converged and hi is None:
        note = note or "stable just below the analytic upper bound"
    if hi is not None and hi < br.lower:
        note = (f"{note + '; ' if note else ''}unstable verdict at {hi:.5g}, below the rate "
                f"{br.lower:.5g} a theorem proves stable: near ρ = 1 the backlog's slow "
                "fill-up reads as growth; longer runs (n_requests) move the boundary up")
    if not converged and not note:
        note = f"stopped after {len(rows)} probes"
    return MaxRate(rate, (low, high), probes, br, rate / br.upper if br.upper else 0.0,
                   converged, tol, tolerance, time.perf_counter() - t0, note)


# ---- 3. goodput under latency targets ---------------------------------------------------------
def _check_slo(slo) -> dict:
    if not isinstance(slo, dict) or not slo:
        raise ValueError(f"slo={slo!r}: give a dict of targets, keys among {sorted(SLO_KEYS)}")
    bad = sorted(set(slo) - set(SLO_KEYS))
    if bad:
        raise ValueError(f"slo: unknown key(s) {bad}; the valid keys are "
                         + "; ".join(f"{k!r} ({v})" for k, v in SLO_KEYS.items()))
    for k, v in slo.items():
        check_positive(f"slo[{k!r}]", v)
    return {k: float(v) for k, v in slo.items()}


def slo_attainment(requests: pd.DataFrame, slo: dict, *, start: float, end: float) -> dict:
    """The share of the requests arriving in ``[start, end)`` that met every target of
    ``slo`` (:data:`SLO_KEYS`); a request that did not finish is a miss (counted in
    ``unfinished``). ``requests`` needs ``arrival``, ``output``, ``first_token``,
    ``finish`` and ``tbt_max`` columns (:attr:`~queuetheory.Result.requests`)."""
    slo = _check_slo(slo)
    r = requests[(requests["arrival"] >= start) & (requests["arrival"] < end)]
    done = r["finish"].notna().to_numpy()
    ok = done.copy()
    ttft = (r["first_token"] - r["arrival"]).to_numpy()
    latency = (r["finish"] - r["arrival"]).to_numpy()
    gaps = np.maximum(r["output"].to_numpy() - 1, 1)
    tpot = np.where(r["output"].to_numpy() > 1, (r["finish"] - r["first_token"]).to_numpy()
                    / gaps, 0.0)
    tbt = np.nan_to_num(r["tbt_max"].to_numpy(dtype=float), nan=0.0)
    with np.errstate(invalid="ignore"):
        for key, value in (("ttft", ttft), ("latency", latency), ("tpot", tpot),
                           ("tbt", tbt)):
            if key in slo:
                ok &= value <= slo[key]
    n = len(r)
    lat = latency[done]
    return {"requests": n, "met": int(ok.sum()), "unfinished": int((~done).sum()),
            "attainment": float(ok.mean()) if n else float("nan"),
            "p50_latency": float(np.percentile(lat, 50)) if lat.size else float("nan"),
            "p99_latency": float(np.percentile(lat, 99)) if lat.size else float("nan")}


@dataclass(frozen=True, eq=False)
class Goodput:
    """The answer of :func:`goodput`.

    rate : the largest rate found to meet the targets (0 when none does); ``interval``:
        ``(rate, the smallest rate found to miss)``
    met : whether some probed rate met the targets; ``best_attainment`` the highest
        attainment seen (what the user can get, when ``met`` is False)
    probes : one row per probed rate: ``attainment``, ``requests`` in the steady-state
        window, ``met`` requests, ``unfinished`` (counted as misses), ``p50_latency``,
        ``p99_latency``, ``meets``
    """

    rate: float
    interval: tuple[float, float]
    met: bool
    best_attainment: float
    slo: dict
    attainment: float
    probes: pd.DataFrame
    bracket: Bracket
    converged: bool
    wall_s: float

    def __repr__(self) -> str:
        if not self.met:
            return (f"Goodput(no rate probed meets {self.slo} for {self.attainment:.0%} of "
                    f"requests; best attainment {self.best_attainment:.1%})")
        lo, hi = self.interval
        return (f"Goodput({self.rate:.5g} [{lo:.5g}, {hi:.5g}] requests per time unit meet "
                f"{self.slo} for ≥ {self.attainment:.0%}; {len(self.probes)} probes, "
                f"{self.wall_s:.1f} s)")


def _lone_lifetime(workload, time_model) -> float:
    """The time a lone mean request spends in an empty engine: its prompt in one chunk,
    then its output one decode at a time."""
    prompt = max(1, math.ceil(workload.mean_prompt))
    return float(time_model.duration(BatchLoad.of_tokens(prefill=prompt))
                 + workload.mean_output * time_model.duration(
                     BatchLoad.of_tokens(decodes=1, context=prompt)))


def _window_run(workload, policy, time_model, rate, slo, *, n_requests, warmup, seeds, b,
                memory, first_token):
    """Attainment over the steady-state window: arrivals in ``[warmup·H, H]`` with
    ``H = n_requests / rate`` (at least ``MIN_LIFETIMES`` lone lifetimes); the run goes on
    to ``H + drain`` (the largest deadline of ``slo``, at least 20 lone lifetimes) with
    arrivals continuing, so the window's last requests meet the load they would in steady
    state."""
    lengths = _length_law(workload)
    H = max(n_requests / rate, MIN_LIFETIMES * _lone_lifetime(lengths, time_model))
    drain = max([slo.get("latency", 0.0), slo.get("ttft", 0.0),
                 20 * _lone_lifetime(lengths, time_model)])
    wl = (replay(workload, rate, H + drain) if isinstance(workload, Trace)
          else at_rate(workload, rate))
    frames = []
    for s in seeds:
        with warnings.catch_warnings():    # cut on purpose: the unfinished are counted
            warnings.simplefilter("ignore", CensoredRunWarning)
            res = simulate(wl, policy, time_model, horizon=H + drain, seed=s, memory=memory,
                           token_budget=b, first_token=first_token, warmup=warmup * H)
        frames.append(res.requests)
    req = pd.concat(frames, ignore_index=True)
    return slo_attainment(req, slo, start=warmup * H, end=H)


def goodput(workload, policy, time_model, *, slo=None, attainment: float = 0.9,
            token_budget=None, memory=None, tol: float = 0.02, seeds=(0,),
            n_requests: int = 2000, warmup: float = 0.2, first_token: str = "prefill",
            max_probes: int = 16, bracket: Bracket | None = None,
            stable_limit: float | None = None) -> Goodput:
    """The largest arrival rate at which at least ``attainment`` of the requests meet every
    target of ``slo`` (DistServe's goodput, Zhong et al.), by bisection on the rate.

    ``slo`` maps keys of :data:`SLO_KEYS` to targets in the time model's unit (default
    ``{"ttft": 1.0, "tbt": 0.1}``): ``tbt`` bounds the request's largest gap between
    tokens (a stream that never stalls longer), ``tpot`` its mean gap. ``workload``: a
    Workload (its rate scaled) or a recorded Trace (replayed at each rate with its
    burstiness, :func:`replay`). Each probe simulates ``n_requests`` arrivals per seed
    (``simulate(warmup=...)`` at the window's start) and judges those that arrive after the
    first ``warmup`` share of them (:func:`slo_attainment`; unfinished requests are misses,
    counted in ``probes`` instead of a :class:`~queuetheory.errors.CensoredRunWarning`:
    the run is cut on purpose). The search starts below the bracket's ``start``, walks up or down by
    halving, then bisects until ``high / low − 1 ≤ tol``. When no probed rate meets the
    targets (down to 1/64 of the start), the result says so with the best attainment seen.

    Goodput is a sustained rate: no rate at or above the stability limit counts, however
    well a finite window looks there. The limit is the bracket's upper bound, or
    ``stable_limit`` (e.g. the upper end of :func:`max_rate`'s interval) when lower; when
    the targets are met just below it, the interval's upper end is the limit itself.
    """
    t0 = time.perf_counter()
    slo = _check_slo({"ttft": 1.0, "tbt": 0.1} if slo is None else slo)
    if not 0 < attainment <= 1:
        raise ValueError(f"attainment={attainment}: must lie in (0, 1]")
    if not 0 <= warmup < 1:
        raise ValueError(f"warmup={warmup}: must lie in [0, 1)")
    check_positive("tol", tol)
    check_positive("n_requests", n_requests, integer=True)
    _refuse_unsupported("goodput", policy, memory, check_first_token(first_token))
    b = _budget_of(policy, token_budget)
    seeds = tuple(int(s) for s in np.atleast_1d(seeds))
    br = bracket or bounds(_length_law(workload), time_model, token_budget=b, memory=memory,
                           policy=policy, first_token=first_token)
    cols = ["rate", "attainment", "requests", "met", "unfinished", "p50_latency",
            "p99_latency", "meets"]
    rows = []
    if br.empty:
        return Goodput(0.0, (0.0, 0.0), False, float("nan"), slo, attainment,
                       pd.DataFrame(columns=cols), br, True, time.perf_counter() - t0)

    def probe(x):
        out = _window_run(workload, policy, time_model, x, slo, n_requests=n_requests,
                          warmup=warmup, seeds=seeds, b=b, memory=memory,
                          first_token=first_token)
        out["meets"] = bool(out["attainment"] >= attainment)
        rows.append({"rate": x, **out})
        return out["meets"]

    ceiling = br.upper if stable_limit is None else min(br.upper, float(stable_limit))
    lo = hi = None
    x = 0.9 * min(br.start, ceiling)
    while len(rows) < max_probes:
        if probe(x):
            lo = x
        else:
            hi = x
        if lo is None:
            x /= 2
            if x < br.start / 64:
                break
        elif hi is None:
            if x >= ceiling * (1 - tol):
                break                   # met just below the stability limit: it binds
            x = min(2 * x, ceiling * (1 - tol / 2))
        elif hi / lo - 1 <= tol:
            break
        else:
            x = math.sqrt(lo * hi)
    probes = pd.DataFrame(rows, columns=cols)
    best = float(probes["attainment"].max())
    if lo is None:
        return Goodput(0.0, (0.0, hi), False, best, slo, attainment, probes, br, False,
                       time.perf_counter() - t0)
    high = hi if hi is not None else ceiling
    return Goodput(lo, (lo, high), True, best, slo, attainment, probes, br,
                   high / lo - 1 <= tol, time.perf_counter() - t0)


# ---- 4. replicas behind a router --------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class Replicas:
    """The answer of :func:`replicas`: the fewest engines ``count`` (``None`` when even
    ``max_replicas`` miss), the lower bound ``at_least`` from the analytic bracket (fewer
    engines cannot even be stable), and one row per replica count tried in ``probes``."""

    count: int | None
    at_least: int
    target_rate: float
    router: str
    slo: dict
    attainment: float
    probes: pd.DataFrame
    wall_s: float

    def __repr__(self) -> str:
        got = f"{self.count} engines" if self.count else "no count up to the limit"
        return (f"Replicas({got} behind {self.router!r} meet {self.slo} for "
                f"≥ {self.attainment:.0%} at {self.target_rate:.5g} requests per time unit; "
                f"≥ {self.at_least} by the bounds; tried {list(self.probes['engines'])})")


def _parallel(workload, policy, time_model, K, b, router, rate):
    """``K`` engines behind one ``router`` per request class (the networks layer), the
    workload's length laws kept (paired samples stay paired)."""
    from .networks.graph import AgentNetwork

    net = AgentNetwork(slot=1.0 if isinstance(time_model, UnitTime) else time_model.slot,
                       name=f"replicas(K={K}, {router})")
    for k in range(1, K + 1):
        net.add_agent(f"E{k}", time_model, b, policy=policy)
    scale = rate / workload.total_rate
    for j, c in enumerate(workload.classes):
        names = [f"c{j}_{k}" for k in range(1, K + 1)]
        for k, name in enumerate(names, start=1):
            net.add_class(name, f"E{k}", 1, 1)
            net.nodes[name]["lengths"] = dataclasses.replace(c, rate=0.0)
        net.add_router(f"router{j}", names, router=router)
        net.add_source(f"src{j}", c.rate * scale, f"router{j}")
    return net


def replicas(target_rate, workload, policy, time_model, *, slo=None, attainment: float = 0.9,
             router: str = "round_robin", token_budget=None, n_requests: int = 2000,
             warmup: float = 0.2, seeds=(0,), max_replicas: int = 64) -> Replicas:
    """The fewest engines behind ``router`` that meet ``slo`` for ``attainment`` of the
    requests at the total rate ``target_rate``.

    Engines run ``policy`` (copied per engine) in the networks layer
    (:func:`queuetheory.networks.simulate`), which follows Li, Dai, Peng's convention
    ``first_token="decode"`` (every output token takes a decode iteration, so the sizing
    is conservative by one iteration per request against real engines) and has no KV-memory
    limit. ``router``: ``random``, ``round_robin``, ``least_requests`` or ``least_tokens``.
    The count starts at the bound ``K ≥ target_rate / upper`` of :func:`bounds` (fewer
    engines are unstable), doubles until the targets are met, then bisects. Attainment is
    judged as in :func:`goodput`, over the arrivals after the first ``warmup`` share of
    ``n_requests·K`` requests.
    """
    from .networks.graph import ROUTERS
    from .networks.simulate import simulate as simulate_network

    t0 = time.perf_counter()
    check_positive("target_rate", target_rate)
    if not isinstance(workload, Workload) or workload._trace is not None:
        raise ValueError(f"workload={workload!r}: replicas splits a Workload that draws "
                         "arrivals among engines; for a recorded trace give its length pairs "
                         "(Workload.from_lengths(trace.prompt, trace.output, rate=...))")
    if router not in ROUTERS:
        raise ValueError(f"router={router!r}: must be one of {ROUTERS}")
    slo = _check_slo({"ttft": 1.0, "tbt": 0.1} if slo is None else slo)
    if not 0 < attainment <= 1:
        raise ValueError(f"attainment={attainment}: must lie in (0, 1]")
    check_positive("max_replicas", max_replicas, integer=True)
    _refuse_unsupported("replicas", policy, None, "decode")
    b = _budget_of(policy, token_budget)
    seeds = tuple(int(s) for s in np.atleast_1d(seeds))
    br = bounds(workload, time_model, token_budget=b, policy=policy, first_token="decode")
    at_least = max(1, math.ceil(target_rate / br.upper * (1 - 1e-12)))
    drain = max([slo.get("latency", 0.0), slo.get("ttft", 0.0),
                 20 * _lone_lifetime(workload, time_model)])
    rows, tried = [], {}

    def meets(K):
        if K not in tried:
            H = n_requests * K / target_rate
            frames = []
            for s in seeds:
                res = simulate_network(_parallel(workload, policy, time_model, K, b, router,
                                                 target_rate), horizon=H + drain, seed=s)
                v = res.visits
                v["tbt_max"] = np.concatenate([e.table.column("tbt_max")
                                               for e in res.engines.values()])
                frames.append(v)
            out = slo_attainment(pd.concat(frames, ignore_index=True), slo, start=warmup * H,
                                 end=H)
            out["meets"] = bool(out["attainment"] >= attainment)
            rows.append({"engines": K, **out})
            tried[K] = out["meets"]
        return tried[K]

    lo, hi = at_least - 1, at_least                 # lo misses (or is below the bound)
    while not meets(hi):
        lo, hi = hi, 2 * hi
        if hi > max_replicas:
            hi = None
            break
    while hi is not None and hi - lo > 1:
        mid = (lo + hi) // 2
        if meets(mid):
            hi = mid
        else:
            lo = mid
    probes = pd.DataFrame(rows).sort_values("engines", ignore_index=True)
    return Replicas(hi, at_least, float(target_rate), router, slo, attainment, probes,
                    time.perf_counter() - t0)


# ---- 5. latency and attainment against load, and the figure ----------------------------------
def load_curve(workload, policy, time_model, rates, *, slo=None, token_budget=None,
               memory=None, n_requests: int = 2000, warmup: float = 0.2, seeds=(0,),
               first_token: str = "prefill") -> pd.DataFrame:
    """P50/P99 latency (completed requests) and SLO attainment at each of ``rates``, over
    the steady-state window of :func:`goodput` (one row per rate, with ``unfinished``)."""
    slo = _check_slo({"ttft": 1.0, "tbt": 0.1} if slo is None else slo)
    b = _budget_of(policy, token_budget)
    seeds = tuple(int(s) for s in np.atleast_1d(seeds))
    rows = [{"rate": float(x), **_window_run(workload, policy, time_model, float(x), slo,
                                            n_requests=n_requests, warmup=warmup,
                                            seeds=seeds, b=b, memory=memory,
                                            first_token=first_token)}
            for x in rates]
    return pd.DataFrame(rows)


def plot_capacity(curve: pd.DataFrame, bracket: Bracket, *, max_rate_result=None,
                  goodput_result=None, attainment: float | None = None, unit: str = "s",
                  title: str = "", axes=None):
    """Two panels against the arrival rate: P50 and P99 latency, and SLO attainment; the
    analytic upper bounds, the simulated boundary (its interval as a band) and the goodput
    as vertical reference lines. Returns the two Axes."""
    from .plotting import finish, reference, series_style

    if axes is None:
        import matplotlib.pyplot as plt

        _, axes = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
    lat, att = axes
    x = curve["rate"].to_numpy()
    for i, (col, label) in enumerate((("p50_latency", "P50 latency"),
                                      ("p99_latency", "P99 latency"))):
        lat.plot(x, curve[col], label=label, **series_style(i))
    att.plot(x, curve["attainment"], label="SLO attainment", **series_style(2))
    if attainment is not None:
        reference(att, attainment, f"target {attainment:.0%}", color="0.5", linestyle=":")
    marks = [(r["name"], r["rate"]) for r in bracket.table.to_dict("records")
             if r["kind"] in ("upper", "scheduler", "estimate")]
    for ax in axes:
        for k, (name, rate) in enumerate(marks):
            reference(ax, rate, f"{name} bound {rate:.3g}", axis="x",
                      color=f"C{5 + k % 5}", linestyle="--")
        if max_rate_result is not None and max_rate_result.rate > 0:
            lo, hi = max_rate_result.interval
            ax.axvspan(lo, hi, color="0.6", alpha=0.25, lw=0,
                       label=f"max-rate interval [{lo:.3g}, {hi:.3g}]")
            reference(ax, max_rate_result.rate, f"simulated max {max_rate_result.rate:.3g}",
                      axis="x", color="k", linestyle="-")
        if goodput_result is not None and goodput_result.met:
            reference(ax, goodput_result.rate, f"goodput {goodput_result.rate:.3g}", axis="x",
                      color="C3", linestyle="-.")
    per = f"requests per {unit}"
    finish(lat, title=f"Latency against load{': ' + title if title else ''}",
           xlabel=f"arrival rate ({per})", ylabel=f"latency ({unit})", y=curve[
               ["p50_latency", "p99_latency"]].to_numpy())
    finish(att, title="SLO attainment against load", xlabel=f"arrival rate ({per})",
           ylabel="share of requests meeting every target", logy=False)
    att.set_ylim(-0.02, 1.02)
    return axes


# ---- 6. the command line ---------------------------------------------------------------------
_ANCHOR = "affine:16.1e-3,57.8e-6,39.5e-6"
POLICIES = ("sarathi", "orca", "vllm", "fastertransformer", "slai")


def _cli_policy(name: str, budget: int):
    from . import policies as P

    if name == "slai":
        return P.SLAI(budget)
    return {"sarathi": P.Sarathi, "orca": P.Orca, "vllm": P.VLLMVanilla,
            "fastertransformer": P.FasterTransformer}[name](budget)


def _cli_time_model(spec: str):
    kind, _, args = spec.partition(":")
    try:
        values = [float(v) for v in args.split(",")] if args else []
        if kind == "unit" and not values:
            return UnitTime(), "round"
        if kind == "affine" and len(values) == 3:
            return AffineTokenTime(*values), "s"
        if kind == "piecewise" and len(values) == 3:
            return PiecewiseLinearTime(*values), "ms"
        if kind == "linear" and len(values) == 2:
            return LinearMemoryTime(*values), "time unit"
    except ValueError:
        pass
    raise ValueError(f"--time {spec!r}: expected 'affine:C,PER_PREFILL,PER_DECODE' (seconds), "
                     "'piecewise:C,A,B0' (ms), 'linear:D0,D1' or 'unit'")


def _cli_parser():
    import argparse

    p = argparse.ArgumentParser(
        prog="queuetheory capacity",
        description="Capacity planning for one engine: the analytic bracket of the largest "
                    "stable rate, the simulated boundary, the SLO goodput, and a figure of "
                    "latency and SLO attainment against load.")
    p.add_argument("--lengths", choices=("sharegpt", "fixed"), default="sharegpt",
                   help="request lengths: the shipped ShareGPT V3 pairs (default) or fixed")
    p.add_argument("--trace", metavar="FILE",
                   help="a production trace (.csv, .jsonl, .parquet; "
                        "queuetheory.workload.read_trace) instead: replayed at each rate "
                        "searched with its arrival gaps scaled by one factor, so its "
                        "burstiness is kept")
    p.add_argument("--format", help="the trace's format: azure, burstgpt, mooncake "
                   "(default: detected from its columns)")
    p.add_argument("--prompt", type=int, default=256, help="fixed prompt tokens")
    p.add_argument("--output", type=int, default=256, help="fixed output tokens")
    p.add_argument("--time", default=_ANCHOR, help=f"time model (default {_ANCHOR}, seconds)")
    p.add_argument("--budget", type=int, default=512, help="token budget b (default 512)")
    p.add_argument("--memory", type=int, help="KV-cache capacity in tokens (default none)")
    p.add_argument("--policy", choices=POLICIES, default="sarathi")
    for key in SLO_KEYS:
        p.add_argument(f"--{key}", type=float, help=f"SLO target: {SLO_KEYS[key]}")
    p.add_argument("--attainment", type=float, default=0.9,
                   help="share of requests that must meet every target (default 0.9)")
    p.add_argument("--tol", type=float, default=0.02, help="relative precision (default 0.02)")
    p.add_argument("--requests", type=int, default=2000,
                   help="requests per probe of the goodput search and the curve")
    p.add_argument("--points", type=int, default=8, help="rates on the curve (default 8)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="capacity", help="folder for the figure (default capacity)")
    return p


def capacity_main(argv) -> int:
    """``queuetheory capacity``: print the bracket, the boundary and the goodput; draw the
    latency and attainment curves into ``--out``."""
    from pathlib import Path

    a = _cli_parser().parse_args(argv)
    tm, unit = _cli_time_model(a.time)
    if a.trace is not None:
        from .workload import read_trace

        wl = read_trace(a.trace, format=a.format)
    elif a.lengths == "sharegpt":
        from .data import sharegpt_lengths

        prompt, output = sharegpt_lengths()
        wl = Workload.from_lengths(prompt, output, rate=1.0)
    else:
        from .workload import RequestClass

        wl = Workload([RequestClass(a.prompt, a.output, 1.0)])
    policy = _cli_policy(a.policy, a.budget)
    slo = {k: getattr(a, k) for k in SLO_KEYS if getattr(a, k) is not None} or None
    slo = _check_slo({"ttft": 1.0, "tbt": 0.1} if slo is None else slo)
    per = f"requests/{unit}"
    br = bounds(wl, tm, token_budget=a.budget, memory=a.memory, policy=policy)
    st = br.stats
    print(f"workload: mean prompt {st.prompt:.1f}, output {st.output:.1f} tokens; "
          f"{type(policy).__name__}(b={a.budget}), {tm!r}, memory {a.memory or 'unlimited'}")
    print("analytic bounds on the largest stable rate:")
    for r in br.table.to_dict("records"):
        print(f"  {r['name']:<22} {r['rate']:10.4g} {per}  [{r['kind']}] {r['source']}: "
              f"{r['formula']}")
    if br.empty:
        print(f"empty bracket: {br.violated}")
        return 1
    print(f"bracket: [{br.lower:.4g}, {br.upper:.4g}] {per}; {br.binding} binds")
    m = max_rate(wl, policy, tm, memory=a.memory, tol=a.tol, seeds=(a.seed,), bracket=br)
    lo, hi = m.interval
    print(f"simulated boundary: {m.rate:.4g} {per} [{lo:.4g}, {hi:.4g}], efficiency "
          f"{m.efficiency:.3f} of the {m.binding} bound; {len(m.probes)} probes "
          f"({m.inconclusive} inconclusive){'; ' + m.note if m.note else ''}")
    g = goodput(wl, policy, tm, slo=slo, attainment=a.attainment, memory=a.memory,
                tol=a.tol, seeds=(a.seed,), n_requests=a.requests, bracket=br,
                stable_limit=m.interval[1])
    if g.met:
        print(f"goodput: {g.rate:.4g} {per} [{g.interval[0]:.4g}, {g.interval[1]:.4g}] meet "
              f"{slo} ({unit}) for ≥ {a.attainment:.0%} of requests")
    else:
        print(f"goodput: no rate meets {slo} ({unit}) for {a.attainment:.0%} of requests; the "
              f"best attainment found is {g.best_attainment:.1%}")
    top = max(br.upper, m.interval[1])
    rates = np.linspace(0.3, 1.1, max(2, a.points)) * top
    curve = load_curve(wl, policy, tm, rates, slo=slo, memory=a.memory,
                       n_requests=a.requests, seeds=(a.seed,))
    import matplotlib

    matplotlib.use("Agg")
    axes = plot_capacity(curve, br, max_rate_result=m, goodput_result=g,
                         attainment=a.attainment, unit=unit, title=type(policy).__name__)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"capacity_{a.policy}.png"
    axes[0].figure.savefig(path, dpi=120)
    print(f"figure: {path}")
    return 0

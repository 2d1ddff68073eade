"""Performance metrics of a run and the growth-rate test of stability."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["summarize", "window", "growth_rate", "path_growth_rate", "drift_interval",
           "trend_interval", "GrowthRate", "VERDICT_RULE", "judge", "check_test_arguments",
           "time_average_in_system"]


def _span(result) -> float:
    """The run's length; 0 for a run in which nothing happened (its rates are 0)."""
    return float(result.end_time)


def _rate(amount, span: float) -> float:
    return float(amount / span) if span > 0 else 0.0


def time_average_in_system(result, start: float = 0.0, end: float | None = None) -> float:
    """``L``: the time-average number of requests in the system over ``[start, end]``
    (default: the whole run; exact); 0 for an empty window."""
    req = result.requests
    T = _span(result) if end is None else min(float(end), _span(result))
    if T <= start:
        return 0.0
    arrive = np.maximum(req["arrival"].to_numpy(), start)
    leave = np.fmin(req["finish"].fillna(np.inf).to_numpy(), T)
    return float(np.clip(leave - arrive, 0, None).sum() / (T - start))


def _pct(a, q) -> float:
    return float(np.percentile(a, q)) if a.size else float("nan")


def _mean(a) -> float:
    return float(a.mean()) if a.size else float("nan")


def summarize(result, start: float = 0.0) -> dict:
    """Throughput, latency, TTFT, TBT, memory, restarts and queue figures of a run.

    ``arrived``, ``completed`` and ``unfinished`` count the whole run; latency and TTFT
    figures are over completed requests only (NaN when none completed), so read them with
    ``unfinished``. ``start > 0`` (``simulate(..., warmup=start)``) takes throughput, latency,
    TTFT and the number in system from the steady-state window ``[start, end]``
    (:func:`window`). A run in which nothing happened has ``time`` 0 and rates 0.

    Times are in the time model's unit (``ms`` for the Llama-3-70B fit, ``s`` for
    :class:`~queuetheory.AffineTokenTime`'s anchor, rounds for
    :class:`~queuetheory.UnitTime`); ``T`` is the end of the run (``time``).

    ==========================  ==================  ============================================
    key                         unit                definition
    ==========================  ==================  ============================================
    ``time``                    time unit           ``T``, the end of the run
    ``arrived``                 requests            arrivals in ``[0, T]``
    ``completed``               requests            requests finished by ``T``
    ``unfinished``              requests            ``arrived − completed``
    ``throughput``              tokens / time unit  output tokens of the completed requests
                                                    over ``T`` (the output length counts the
                                                    first token under both conventions; the
                                                    fluid ``Equilibrium.throughput`` of Ao et
                                                    al. also counts the prefill step)
    ``completion_rate``         requests / time     ``completed / T``
    ``decode_rate``             tokens / time unit  output tokens every request holds at ``T``,
                                                    finished or not (tokens lost to an
                                                    eviction are not counted), over ``T``
    ``mean_latency``            time unit           mean of ``finish − arrival`` (completed)
    ``p50_latency``             time unit           median latency (completed)
    ``p99_latency``             time unit           99th percentile latency (completed)
    ``mean_ttft``               time unit           mean time to first token, over requests
                                                    that emitted one
    ``p99_ttft``                time unit           99th percentile TTFT (same requests)
    ``mean_tbt``                time unit           mean time between successive output
                                                    tokens of a request, over every gap
    ``p99_tbt``                 time unit           99th percentile of those gaps (histogram)
    ``peak_memory``             KV tokens           largest KV cache held at once
    ``restarts``                evictions           requests evicted and restarted (recompute)
    ``iterations``              batches             iterations run
    ``mean_in_system``          requests            time-average number in the system on
                                                    ``[0, T]``
    ``in_system_end``           requests            requests still in the system at ``T``
    ``unfinished_tokens_end``   tokens              prompt and output tokens still to process
                                                    at ``T``
    ``prefix_tokens_saved``     tokens              prompt tokens a prefix cache served (not
                                                    prefilled), every admission counted; only
                                                    where the trace has prefix blocks or a
                                                    policy credited cached tokens
    ``prefix_hit_ratio``        fraction            ``prefix_tokens_saved`` over all the
                                                    prefill tokens asked for (saved plus
                                                    computed, recomputations included: a
                                                    preempted request may find its own blocks
                                                    again; same runs); without preemption at
                                                    most the offline
                                                    :func:`~queuetheory.workload.prefix_hit_ratio`
                                                    of an equal cache
    ==========================  ==================  ============================================
    """
    req = result.requests
    T = _span(result)
    arrived = int((req["arrival"] <= T).sum())
    finished = req["finish"].notna()
    done = req[finished]
    lat, ttft = done["latency"].to_numpy(), req["ttft"].dropna().to_numpy()
    gaps, gap_time = result.table.timed_gaps()
    timed = gaps.sum()
    out = {
        "time": T,
        "arrived": arrived,
        "completed": int(len(done)),
        "unfinished": arrived - int(len(done)),
        "throughput": _rate(done["output"].sum(), T),
        "completion_rate": _rate(len(done), T),
        "decode_rate": _rate(result.table.column("decoded").sum(), T),
        "mean_latency": _mean(lat),
        "p50_latency": _pct(lat, 50),
        "p99_latency": _pct(lat, 99),
        "mean_ttft": _mean(ttft),
        "p99_ttft": _pct(ttft, 99),
        "mean_tbt": float(gap_time.sum() / timed) if timed else float("nan"),
        "p99_tbt": result.tbt.quantile(0.99),
        "peak_memory": int(result.peak_memory),
        "restarts": int(req["restarts"].sum()),
        "iterations": int(result.iterations),
        "mean_in_system": time_average_in_system(result),
        "in_system_end": int(result.live.size),
        "unfinished_tokens_end": int(result.work_left),
    }
    if result.trace.blocks is not None or req["cached"].any():
        saved = int(req["cached"].sum())
        out["prefix_tokens_saved"] = saved
        out["prefix_hit_ratio"] = _rate(saved, saved + int(result.log.column(
            "prefill_tokens").sum()))
    if start > 0:
        w = window(result, start)
        out.update({k: w[k] for k in ("throughput", "completion_rate", "mean_latency",
                                      "p50_latency", "p99_latency", "mean_ttft", "p99_ttft",
                                      "mean_in_system")})
        out.update(warmup=float(start), window_arrived=w["arrived"],
                   window_completed=w["completed"])
    return out


def window(result, t0: float, t1: float | None = None) -> dict:
    """Steady-state figures over the window ``[t0, t1]`` (default ``t1``: the run's end).

    Latency and TTFT are those of the requests that arrived in the window (``arrived``) and
    completed (``completed``; ``unfinished`` did not, by the end of the run); ``throughput``
    is the output tokens emitted in the window per unit time — decode tokens of the
    iterations that ended in it, plus under ``first_token="prefill"`` the first token of
    each prompt finished in it — and ``completion_rate`` the completions in it per unit time;
    ``mean_in_system`` the time-average number in system over it.
    """
    T = _span(result)
    t1 = T if t1 is None else min(float(t1), T)
    t0 = float(t0)
    if not 0 <= t0 <= t1:
        raise ValueError(f"window [t0={t0}, t1={t1}]: need 0 <= t0 <= t1 <= end {T:g}")
    req = result.requests
    arrival = req["arrival"].to_numpy()
    mine = (arrival >= t0) & (arrival <= t1)
    finish = req["finish"].to_numpy()
    done = mine & ~np.isnan(finish)
    lat = (finish - arrival)[done]
    ttft = req["ttft"].to_numpy()[mine]
    ttft = ttft[~np.isnan(ttft)]
    b = result.batches
    ends = (b["start"] + b["duration"]).to_numpy()
    inside = (ends > t0) & (ends <= t1)
    tokens = int(b["decode_requests"].to_numpy()[inside].sum())
    if result.table.emit_first:
        pd_ = req["prefill_done"].to_numpy()
        tokens += int(((pd_ > t0) & (pd_ <= t1)).sum())
    span = t1 - t0
    return {
        "t0": t0, "t1": t1,
        "arrived": int(mine.sum()),
        "completed": int(done.sum()),
        "unfinished": int(mine.sum() - done.sum()),
        "throughput": _rate(tokens, span),
        "completion_rate": _rate(int(((finish > t0) & (finish <= t1)).sum()), span),
        "mean_latency": _mean(lat),
        "p50_latency": _pct(lat, 50),
        "p99_latency": _pct(lat, 99),
        "mean_ttft": _mean(ttft),
        "p99_ttft": _pct(ttft, 99),
        "mean_in_system": time_average_in_system(result, t0, t1),
    }


VERDICT_RULE = """\
The verdict tests the drift ``δ`` of the backlog ``W(t)`` — work arrived minus work done
(unfinished tokens, or requests in the system) — relative to the offered rate, with two
estimates over the tail of the run: the batch-means drift (mean increment of ``W`` per unit
time over ``blocks`` equal blocks, :func:`drift_interval`) and the backlog trend (least-squares
slope of the block averages of ``W`` on time, :func:`trend_interval`). Each gives a two-sided
interval at ``level``, so each one-sided bound holds with probability ``(1 + level) / 2``.

* ``stable``: both upper bounds lie below ``tolerance`` — the null hypothesis "the backlog
  grows by ``tolerance`` of the offered work or more" is rejected: in the long run the
  system serves at least ``1 − tolerance`` of what arrives. A system whose drift is at least
  ``tolerance`` gets this verdict with probability at most ``(1 − level)/2``. A drift
  smaller than ``tolerance`` — an overload below about ``1/(1 − tolerance)``, or a stable
  queue near saturation still far from equilibrium — is below the resolution asked for.
* ``unstable``: otherwise, when some lower bound lies above 0 — the null hypothesis "the
  backlog does not grow" (``δ ≤ 0``) is rejected; a system in steady state gets this
  verdict with probability at most ``1 − level`` (two one-sided tests at ``(1 − level)/2``).
* ``inconclusive``: neither — the intervals reach from 0 or below to ``tolerance`` or
  above; a longer run narrows them (by about ``1/sqrt(T)``).

A finite run cannot tell a stable system far from equilibrium from a slowly growing one: the
tail (default: the last half of the run) must lie past the warm-up, which is why runs near
``ρ = 1`` need longer horizons."""


def judge(lows, highs, tolerance: float) -> str:
    """The verdict of :data:`VERDICT_RULE` from the tests' lower and upper bounds (relative
    drifts, or absolute ones with ``tolerance`` in the same unit)."""
    if max(highs) < tolerance:
        return "stable"
    if max(lows) > 0:
        return "unstable"
    return "inconclusive"


@dataclass(frozen=True)
class GrowthRate:
    """Long-run drift of a queue path with confidence intervals and a verdict.

    ``slope`` and ``ci_low``/``ci_high``: the batch-means drift and its interval
    (:func:`drift_interval`); ``trend``, ``trend_low``/``trend_high``: the backlog trend
    (:func:`trend_interval`), all in path units per unit time. ``relative`` is the slope
    divided by ``offered`` (the offered token rate, or the arrival rate for request counts);
    ``tolerance`` is in path units per unit time (relative tolerance × offered).
    ``verdict``: see :data:`VERDICT_RULE` (``stable`` when both intervals lie below the
    tolerance, else ``unstable`` when either lies above 0, else ``inconclusive``).
    ``window``: the ``(start, end)`` of the stretch tested (for a drained run, a tail of the
    arrivals' window).
    """

    quantity: str
    slope: float
    ci_low: float
    ci_high: float
    offered: float
    relative: float
    tolerance: float
    verdict: str
    blocks: int
    trend: float = float("nan")
    trend_low: float = float("nan")
    trend_high: float = float("nan")
    window: tuple[float, float] = (float("nan"), float("nan"))


def block_edges(start: float, end: float, blocks: int) -> np.ndarray:
    """The ``blocks + 1`` edges of ``blocks`` equal blocks of ``[start, end]``."""
    if blocks < 3:
        raise ValueError(f"blocks={blocks}: need at least 3")
    return np.linspace(start, end, blocks + 1)


def _last_at(t: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """The last index ``i`` with ``t[i] ≤`` each edge (0 before ``t[0]``)."""
    return np.clip(np.searchsorted(t, edges, side="right") - 1, 0, t.size - 1)


def step_path_at(t: np.ndarray, y: np.ndarray, edges: np.ndarray) -> tuple:
    """The step path ``y(t)`` (``y[i]`` holds from ``t[i]`` to ``t[i+1]``; ``y[0]`` before
    ``t[0]``) at the sorted times ``edges``: its values there and its integrals from ``t[0]``
    (what :meth:`~queuetheory.engine.log.ColumnLog.path_at` gives a log's path, without
    expanding a bulk run's columns)."""
    idx = _last_at(t, edges)
    area = np.concatenate([[0.0], np.cumsum(y[:-1] * np.diff(t))])     # ∫ from t[0] to t[i]
    return y[idx], area[idx] + y[idx] * (edges - t[idx])


def block_rates(t: np.ndarray, y: np.ndarray, start: float, end: float,
                blocks: int = 10) -> np.ndarray:
    """Increments per unit time of the step path ``y(t)`` over ``blocks`` equal blocks."""
    edges = block_edges(start, end, blocks)
    return np.diff(y[_last_at(t, edges)]) / np.diff(edges)


def block_means(t: np.ndarray, y: np.ndarray, start: float, end: float,
                blocks: int = 10) -> tuple[np.ndarray, np.ndarray]:
    """Block midpoints and exact time averages of the step path ``y(t)`` (``y[i]`` holds
    from ``t[i]`` to ``t[i+1]``; ``y[0]`` before ``t[0]``) over ``blocks`` equal blocks."""
    edges = block_edges(start, end, blocks)
    return means_of_blocks(edges, step_path_at(t, y, edges)[1])


def means_of_blocks(edges: np.ndarray, integrals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Block midpoints and time averages from a path's integrals up to the block edges."""
    return (edges[:-1] + edges[1:]) / 2, np.diff(integrals) / np.diff(edges)


def _t_quantile(level: float, df: int) -> float:
    """Student's t quantile at ``0.5 + level/2`` (``scipy.special.stdtrit``, what
    ``scipy.stats.t.ppf`` computes, without importing ``scipy.stats``: 0.3 s)."""
    from scipy import special

    return float(special.stdtrit(df, 0.5 + level / 2))


def drift_interval(t: np.ndarray, y: np.ndarray, start: float, end: float, *, blocks: int = 10,
                   level: float = 0.99) -> tuple[float, float, float]:
    """Drift of the step path ``y(t)`` over ``[start, end]`` and its confidence interval.

    The window is cut into ``blocks`` equal pieces; the increments of the path over the
    pieces are nearly independent both for a stable (stationary) path and for an unstable
    one (a random walk with drift), so their mean estimates the drift and their spread, with
    Student's t on ``blocks − 1`` degrees of freedom, its uncertainty.
    """
    return pooled_drift([block_rates(np.asarray(t, float), np.asarray(y, float), start, end,
                                     blocks)], level)


def pooled_drift(rates, level: float = 0.99) -> tuple[float, float, float]:
    """Mean and t-interval of the block rates of one or more independent runs."""
    r = np.concatenate([np.asarray(x, float) for x in rates])
    mean = float(r.mean())
    half = _t_quantile(level, r.size - 1) * float(r.std(ddof=1)) / np.sqrt(r.size)
    return mean, mean - half, mean + half


def trend_fit(t: np.ndarray, y: np.ndarray, start: float, end: float,
              blocks: int = 10) -> tuple[float, float]:
    """Least-squares slope of the block averages of ``y(t)`` on time, and its standard error.

    Block averages of a stable queue near saturation stay correlated when the blocks are not
    much longer than its relaxation time; the error is widened by ``sqrt((1 + r)/(1 − r))``,
    ``r ∈ [0, 0.9]`` the residuals' lag-1 autocorrelation (an AR(1) correction), so that a
    long excursion is not mistaken for growth."""
    return slope_fit(*block_means(np.asarray(t, float), np.asarray(y, float), start, end,
                                  blocks))


def slope_fit(x: np.ndarray, m: np.ndarray) -> tuple[float, float]:
    """:func:`trend_fit` from the block midpoints ``x`` and averages ``m``."""
    xc = x - x.mean()
    sxx = float((xc ** 2).sum())
    slope = float((xc * (m - m.mean())).sum() / sxx)
    resid = m - m.mean() - slope * xc
    ss = float((resid ** 2).sum())
    r = float(np.clip((resid[1:] * resid[:-1]).sum() / ss, 0.0, 0.9)) if ss > 0 else 0.0
    return slope, float(np.sqrt(ss / (x.size - 2) / sxx * (1 + r) / (1 - r)))


def pooled_trend(fits, blocks: int, level: float = 0.99) -> tuple[float, float, float]:
    """Mean of independent runs' trend slopes and its t-interval (``runs·(blocks−2)`` df)."""
    slopes = np.array([f[0] for f in fits])
    se = float(np.sqrt(sum(f[1] ** 2 for f in fits))) / slopes.size
    mean = float(slopes.mean())
    half = _t_quantile(level, slopes.size * (blocks - 2)) * se
    return mean, mean - half, mean + half


def trend_interval(t: np.ndarray, y: np.ndarray, start: float, end: float, *, blocks: int = 10,
                   level: float = 0.99) -> tuple[float, float, float]:
    """The backlog trend: the least-squares slope of the block averages of the step path
    ``y(t)`` over ``[start, end]`` on time, with a t-interval on ``blocks − 2`` degrees of
    freedom. Averages smooth out the oscillation of a batching engine's backlog, so a path
    that grows is caught even where the increments of :func:`drift_interval` are noisy."""
    return pooled_trend([trend_fit(t, y, start, end, blocks)], blocks, level)


def growth_rate(result, quantity: str = "unfinished_tokens", *, tail: float = 0.5,
                blocks: int = 10, level: float = 0.99, tolerance: float = 0.03) -> GrowthRate:
    """Fit the growth rate of ``quantity`` (``unfinished_tokens`` or ``in_system``) over the
    last ``tail`` of the run (see :func:`drift_interval`, :func:`trend_interval`). Rates are
    relative to the offered load: ``tolerance = 0.03`` calls a path stable when, with
    confidence ``level``, it grows slower than 3 % of the arrivals, and unstable when it
    surely grows, and not surely slower (the rule: :data:`VERDICT_RULE`).
    :func:`queuetheory.stability` runs a workload as long as it takes to reach a verdict,
    over several seeds.

    A run without a horizon (a finite trace, or ``n_requests`` drawn) drains its backlog
    after the last arrival, and a drain always shrinks: such a run is judged over its
    arrivals' window ``[0, last arrival]``, not over the drain (``GrowthRate.window`` says
    which window was judged)."""
    if quantity not in ("unfinished_tokens", "in_system"):
        raise ValueError(f"quantity={quantity!r}: must be 'unfinished_tokens' or 'in_system'")
    paths = result.paths
    T = _span(result)
    trace = result.trace
    if not np.isfinite(result.horizon) and len(trace):
        T = min(T, float(trace.arrival[-1]))       # the arrivals' window, not the drain
    arrived = trace.arrival <= T
    if quantity == "unfinished_tokens":
        offered = _rate(float((trace.prompt[arrived] + trace.output[arrived]).sum()), T)
    else:
        offered = _rate(float(arrived.sum()), T)
    t = paths["time"].to_numpy()
    keep = t <= T
    return path_growth_rate(t[keep], paths[quantity].to_numpy()[keep], end=T,
                            offered=offered, quantity=quantity, tail=tail, blocks=blocks,
                            level=level, tolerance=tolerance)


def path_growth_rate(time, values, *, end: float, offered: float, quantity: str = "path",
                     tail: float = 0.5, blocks: int = 10, level: float = 0.99,
                     tolerance: float = 0.03) -> GrowthRate:
    """The test of :func:`growth_rate` on a plain step path: ``values[i]`` holds from
    ``time[i]`` (sorted) until the next time, ``end`` closes the run and ``offered`` is the
    rate the drift is compared with. Networks of engines use it on their total paths."""
    check_test_arguments(tail=tail, blocks=blocks, level=level, tolerance=tolerance)
    t = np.asarray(time, dtype=float)
    y = np.asarray(values, dtype=float)
    if t.shape != y.shape or t.ndim != 1:
        raise ValueError("path_growth_rate: time and values must be 1-d of equal length")
    if t.size < 4 * blocks:
        raise ValueError(f"growth_rate: only {t.size} iterations; need at least {4 * blocks}")
    T = max(float(end), 1e-300)
    start = T * (1 - tail)
    slope, lo, hi = drift_interval(t, y, start, T, blocks=blocks, level=level)
    trend, tlo, thi = trend_interval(t, y, start, T, blocks=blocks, level=level)
    tol = tolerance * offered
    return GrowthRate(quantity, slope, lo, hi, offered,
                      slope / offered if offered else float("nan"), tol,
                      judge((lo, tlo), (hi, thi), tol), blocks, trend, tlo, thi, (start, T))


#: The most blocks a growth test cuts its window into (each needs iterations of its own).
MAX_BLOCKS = 10_000


def check_test_arguments(*, tail, blocks, level, tolerance) -> None:
    """The growth test's arguments, or a ``ValueError`` naming the one that breaks its rule:
    ``0 < tail <= 1`` (and not so small that a block is empty), ``blocks`` an integer ``>= 3``,
    ``0 < level < 1``, ``tolerance > 0``, all finite."""
    for name, value in (("tail", tail), ("level", level), ("tolerance", tolerance)):
        if isinstance(value, bool) or not isinstance(value, int | float | np.number):
            raise ValueError(f"{name}={value!r}: must be a number")
    if not (isinstance(blocks, int | np.integer) and not isinstance(blocks, bool)):
        raise ValueError(f"blocks={blocks!r}: must be an integer >= 3")
    if not 3 <= blocks <= MAX_BLOCKS:
        raise ValueError(f"blocks={blocks}: need at least 3 and at most MAX_BLOCKS = "
                         f"{MAX_BLOCKS:,}")
    if not 1e-6 <= tail <= 1:
        raise ValueError(f"tail={tail}: must lie in [1e-6, 1] (the fraction of the run tested)")
    if not 0 < level < 1:
        raise ValueError(f"level={level}: must lie in (0, 1)")
    if not 0 < tolerance < math.inf:
        raise ValueError(f"tolerance={tolerance}: must be a finite number > 0")

"""Performance metrics of a run and the growth-rate test of stability."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["summarize", "growth_rate", "path_growth_rate", "drift_interval", "trend_interval",
           "GrowthRate", "VERDICT_RULE", "judge", "time_average_in_system"]


def _span(result) -> float:
    return max(float(result.end_time), 1e-300)


def time_average_in_system(result) -> float:
    """``L``: the time-average number of requests in the system over ``[0, end]`` (exact)."""
    req = result.requests
    T = _span(result)
    arrive = req["arrival"].to_numpy()
    leave = np.fmin(req["finish"].fillna(np.inf).to_numpy(), T)
    return float(np.clip(leave - np.maximum(arrive, 0), 0, None)[arrive <= T].sum() / T)


def summarize(result) -> dict:
    """Throughput, latency, TTFT, TBT, memory, restarts and queue figures of a run."""
    eng = result.engine
    req = result.requests
    T = _span(result)
    done = req[req["finish"].notna()]
    lat, ttft = done["latency"].to_numpy(), req["ttft"].dropna().to_numpy()
    gaps, gap_time = eng.table.timed_gaps()
    timed = gaps.sum()

    def pct(a, q):
        return float(np.percentile(a, q)) if a.size else float("nan")

    return {
        "time": T,
        "arrived": int((req["arrival"] <= T).sum()),
        "completed": int(len(done)),
        "throughput": float(done["output"].sum() / T),
        "completion_rate": float(len(done) / T),
        "decode_rate": float(eng.table.column("decoded").sum() / T),
        "mean_latency": float(lat.mean()) if lat.size else float("nan"),
        "p50_latency": pct(lat, 50),
        "p99_latency": pct(lat, 99),
        "mean_ttft": float(ttft.mean()) if ttft.size else float("nan"),
        "p99_ttft": pct(ttft, 99),
        "mean_tbt": float(gap_time.sum() / timed) if timed else float("nan"),
        "p99_tbt": eng.tbt.quantile(0.99),
        "peak_memory": int(eng.peak_memory),
        "restarts": int(req["restarts"].sum()),
        "iterations": int(eng.iteration),
        "mean_in_system": time_average_in_system(result),
        "in_system_end": int(eng.live.size),
        "unfinished_tokens_end": int(eng.work),
    }


VERDICT_RULE = """\
The verdict tests the drift ``δ`` of the backlog ``W(t)`` — work arrived minus work done
(unfinished tokens, or requests in the system) — relative to the offered rate, with two
estimates over the tail of the run: the batch-means drift (mean increment of ``W`` per unit
time over ``blocks`` equal blocks, :func:`drift_interval`) and the backlog trend (least-squares
slope of the block averages of ``W`` on time, :func:`trend_interval`). Each gives a two-sided
interval at ``level``, so each one-sided bound holds with probability ``(1 + level) / 2``.

* ``unstable``: some lower bound is above 0 — the null hypothesis "the backlog does not
  grow" (``δ ≤ 0``) is rejected; for a system in steady state this happens with probability
  at most ``1 − level`` (two one-sided tests at ``(1 − level)/2`` each).
* ``stable``: both upper bounds are below ``tolerance`` — the null hypothesis "the backlog
  grows by ``tolerance`` of the offered work or more" is rejected; the system serves, in the
  long run, at least ``1 − tolerance`` of what arrives. A drift smaller than ``tolerance``
  (an overload below about ``1/(1 − tolerance)``) is beyond what the run can resolve.
* ``inconclusive``: neither: the intervals reach from at or below 0 to ``tolerance`` or
  above; a longer run narrows them (by about ``1/sqrt(T)``).

A finite run cannot tell a stable system far from equilibrium from a slowly growing one: the
tail (default: the last half of the run) must lie past the warm-up, which is why runs near
``ρ = 1`` need longer horizons."""


def judge(lows, highs, tolerance: float) -> str:
    """The verdict of :data:`VERDICT_RULE` from the tests' lower and upper bounds (relative
    drifts, or absolute ones with ``tolerance`` in the same unit)."""
    if max(lows) > 0:
        return "unstable"
    if max(highs) < tolerance:
        return "stable"
    return "inconclusive"


@dataclass(frozen=True)
class GrowthRate:
    """Long-run drift of a queue path with confidence intervals and a verdict.

    ``slope`` and ``ci_low``/``ci_high``: the batch-means drift and its interval
    (:func:`drift_interval`); ``trend``, ``trend_low``/``trend_high``: the backlog trend
    (:func:`trend_interval`), all in path units per unit time. ``relative`` is the slope
    divided by ``offered`` (the offered token rate, or the arrival rate for request counts);
    ``tolerance`` is in path units per unit time (relative tolerance × offered).
    ``verdict``: see :data:`VERDICT_RULE` (``unstable`` when either interval lies above 0,
    ``stable`` when both lie below the tolerance, else ``inconclusive``).
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


def _block_edges(t: np.ndarray, start: float, end: float, blocks: int) -> tuple:
    if blocks < 3:
        raise ValueError(f"blocks={blocks}: need at least 3")
    edges = np.linspace(start, end, blocks + 1)
    idx = np.clip(np.searchsorted(t, edges, side="right") - 1, 0, t.size - 1)
    return edges, idx


def block_rates(t: np.ndarray, y: np.ndarray, start: float, end: float,
                blocks: int = 10) -> np.ndarray:
    """Increments per unit time of the step path ``y(t)`` over ``blocks`` equal blocks."""
    edges, idx = _block_edges(t, start, end, blocks)
    return np.diff(y[idx]) / np.diff(edges)


def block_means(t: np.ndarray, y: np.ndarray, start: float, end: float,
                blocks: int = 10) -> tuple[np.ndarray, np.ndarray]:
    """Block midpoints and exact time averages of the step path ``y(t)`` (``y[i]`` holds
    from ``t[i]`` to ``t[i+1]``; ``y[0]`` before ``t[0]``) over ``blocks`` equal blocks."""
    edges, idx = _block_edges(t, start, end, blocks)
    area = np.concatenate([[0.0], np.cumsum(y[:-1] * np.diff(t))])     # ∫ from t[0] to t[i]
    at = area[idx] + y[idx] * (edges - t[idx])
    mid = (edges[:-1] + edges[1:]) / 2
    return mid, np.diff(at) / np.diff(edges)


def _t_quantile(level: float, df: int) -> float:
    from scipy import stats  # scipy.stats takes a second to import: only when needed

    return float(stats.t.ppf(0.5 + level / 2, df))


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
    """Least-squares slope of the block averages of ``y(t)`` on time, and its standard error."""
    x, m = block_means(np.asarray(t, float), np.asarray(y, float), start, end, blocks)
    xc = x - x.mean()
    sxx = float((xc ** 2).sum())
    slope = float((xc * (m - m.mean())).sum() / sxx)
    resid = m - m.mean() - slope * xc
    return slope, float(np.sqrt((resid ** 2).sum() / (x.size - 2) / sxx))


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
    surely grows (the rule: :data:`VERDICT_RULE`). :func:`queuetheory.stability` runs a
    workload as long as it takes to reach a verdict, over several seeds."""
    if quantity not in ("unfinished_tokens", "in_system"):
        raise ValueError(f"quantity={quantity!r}: must be 'unfinished_tokens' or 'in_system'")
    paths = result.paths
    T = _span(result)
    trace = result.trace
    arrived = trace.arrival <= T
    if quantity == "unfinished_tokens":
        offered = float((trace.prompt[arrived] + trace.output[arrived]).sum() / T)
    else:
        offered = float(arrived.sum() / T)
    return path_growth_rate(paths["time"].to_numpy(), paths[quantity].to_numpy(), end=T,
                            offered=offered, quantity=quantity, tail=tail, blocks=blocks,
                            level=level, tolerance=tolerance)


def path_growth_rate(time, values, *, end: float, offered: float, quantity: str = "path",
                     tail: float = 0.5, blocks: int = 10, level: float = 0.99,
                     tolerance: float = 0.03) -> GrowthRate:
    """The test of :func:`growth_rate` on a plain step path: ``values[i]`` holds from
    ``time[i]`` (sorted) until the next time, ``end`` closes the run and ``offered`` is the
    rate the drift is compared with. Networks of engines use it on their total paths."""
    if not 0 < tail <= 1:
        raise ValueError(f"tail={tail}: must lie in (0, 1]")
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
                      judge((lo, tlo), (hi, thi), tol), blocks, trend, tlo, thi)

"""Performance metrics of a run and the growth-rate test of stability."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["summarize", "growth_rate", "path_growth_rate", "drift_interval", "GrowthRate",
           "time_average_in_system"]


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
    """Throughput, latency, TTFT, TBT, memory, restarts and queue figures of a run.

    Times are in the time model's unit (``ms`` for the Llama-3-70B fit, ``s`` for
    :class:`~queuetheory.AffineTokenTime`'s anchor, rounds for
    :class:`~queuetheory.UnitTime`); ``T`` is the end of the run (``time``). Latency figures
    are over *completed* requests only: ``arrived − completed`` says how many they leave
    out, and they are NaN when none completed.

    ==========================  ==================  ============================================
    key                         unit                definition
    ==========================  ==================  ============================================
    ``time``                    time unit           ``T``, the end of the run
    ``arrived``                 requests            arrivals in ``[0, T]``
    ``completed``               requests            requests finished by ``T``
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
    ==========================  ==================  ============================================
    """
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


@dataclass(frozen=True)
class GrowthRate:
    """Long-run drift of a queue path with a confidence interval (batch means).

    ``relative`` is the slope divided by the offered token rate (or arrival rate for
    ``in_system``). ``verdict``: ``unstable`` if the whole interval lies above ``tolerance``,
    ``stable`` if it lies below, else ``inconclusive``.
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


def drift_interval(t: np.ndarray, y: np.ndarray, start: float, end: float, *, blocks: int = 10,
                   level: float = 0.99) -> tuple[float, float, float]:
    """Drift of the step path ``y(t)`` over ``[start, end]`` and its confidence interval.

    The window is cut into ``blocks`` equal pieces; the increments of the path over the
    pieces are nearly independent both for a stable (stationary) path and for an unstable
    one (a random walk with drift), so their mean estimates the drift and their spread, with
    Student's t on ``blocks − 1`` degrees of freedom, its uncertainty.
    """
    if blocks < 3:
        raise ValueError(f"blocks={blocks}: need at least 3")
    edges = np.linspace(start, end, blocks + 1)
    idx = np.clip(np.searchsorted(t, edges, side="right") - 1, 0, t.size - 1)
    rates = np.diff(y[idx]) / np.diff(edges)
    mean = float(rates.mean())
    from scipy import stats  # scipy.stats takes a second to import: only when needed

    half = float(stats.t.ppf(0.5 + level / 2, blocks - 1) * rates.std(ddof=1) / np.sqrt(blocks))
    return mean, mean - half, mean + half


def growth_rate(result, quantity: str = "unfinished_tokens", *, tail: float = 0.5,
                blocks: int = 10, level: float = 0.99, tolerance: float = 0.03) -> GrowthRate:
    """Fit the growth rate of ``quantity`` (``unfinished_tokens`` or ``in_system``) over the
    last ``tail`` of the run (see :func:`drift_interval`). Rates are relative to the offered
    load, so ``tolerance = 0.03`` calls a path unstable when, with confidence ``level``, it
    grows faster than 3 % of the arrivals, and stable when it surely grows slower."""
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
    slope, lo, hi = drift_interval(t, y, T * (1 - tail), T, blocks=blocks, level=level)
    tol = tolerance * offered
    verdict = "unstable" if lo > tol else "stable" if hi < tol else "inconclusive"
    return GrowthRate(quantity, slope, lo, hi, offered,
                      slope / offered if offered else float("nan"), tol, verdict, blocks)

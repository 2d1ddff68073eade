"""Performance metrics of a run's records, and a step path's values and integrals.

The growth-rate test of stability (``growth_rate``, ``path_growth_rate``,
``drift_interval``, ``trend_interval``, ``GrowthRate``, ``VERDICT_RULE``, ``judge``, …) is
in :mod:`queuetheory.stability`; its names still work here for one release, with a
``DeprecationWarning``.
"""

from __future__ import annotations

import functools

import numpy as np

from .errors import moved_names

__all__ = ["summarize", "window", "time_average_in_system", "step_path_at"]


def _span(result) -> float:
    """The run's length; 0 for a run in which nothing happened (its rates are 0)."""
    return float(result.end_time)


def _rate(amount, span: float) -> float:
    return float(amount / span) if span > 0 else 0.0


def time_average_in_system(result, start: float = 0.0, end: float | None = None) -> float:
    """``L``: the time-average number of requests in the system over ``[start, end]``
    (default: the whole run; exact); 0 for an empty window.

    Parameters
    ----------
    result : Result
        A run of :func:`~queuetheory.simulate`.
    start : float, default 0.0
        The window's start, in the time model's unit.
    end : float, optional
        The window's end; default (and at most) the run's end.

    Returns
    -------
    float
        ``L``, in requests.
    """
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

    Parameters
    ----------
    result : Result
        A run's records (:func:`~queuetheory.simulate`).
    start : float
        The start of the steady-state window (0: the whole run).

    Returns
    -------
    dict
        The figures above.
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

    Parameters
    ----------
    result : Result
        A run's records.
    t0, t1 : float
        The window (``t1`` default: the run's end).

    Returns
    -------
    dict
        ``t0``, ``t1``, ``arrived``, ``completed``, ``unfinished``, ``throughput``,
        ``completion_rate``, latency and TTFT figures, ``mean_in_system``.

    Raises
    ------
    ValueError
        Unless ``0 <= t0 <= t1``.
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


def _last_at(t: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """The last index ``i`` with ``t[i] ≤`` each edge (0 before ``t[0]``)."""
    return np.clip(np.searchsorted(t, edges, side="right") - 1, 0, t.size - 1)


def step_path_at(t: np.ndarray, y: np.ndarray, edges: np.ndarray) -> tuple:
    """The step path ``y(t)`` (``y[i]`` holds from ``t[i]`` to ``t[i+1]``; ``y[0]`` before
    ``t[0]``) at the sorted times ``edges``: its values there and its integrals from ``t[0]``
    (what :meth:`~queuetheory.engine.log.ColumnLog.path_at` gives a log's path, without
    expanding a bulk run's columns).

    Parameters
    ----------
    t, y : numpy.ndarray
        The step path, ``t`` sorted.
    edges : numpy.ndarray
        Sorted times to read it at.

    Returns
    -------
    tuple of numpy.ndarray
        The path's values at ``edges`` and its integrals from ``t[0]`` up to them.
    """
    idx = _last_at(t, edges)
    area = np.concatenate([[0.0], np.cumsum(y[:-1] * np.diff(t))])     # ∫ from t[0] to t[i]
    return y[idx], area[idx] + y[idx] * (edges - t[idx])


#: Names of the growth-rate test that moved to :mod:`queuetheory.stability` (issue 31).
MOVED_TO_STABILITY = frozenset({
    "growth_rate", "path_growth_rate", "GrowthRate", "drift_interval", "trend_interval",
    "VERDICT_RULE", "judge", "check_test_arguments", "MAX_BLOCKS", "block_edges",
    "block_rates", "block_means", "means_of_blocks", "trend_fit", "slope_fit",
    "pooled_drift", "pooled_trend", "_t_quantile"})


def _from_stability(name: str):
    """The object ``name`` of :mod:`queuetheory.stability` (its module's own name:
    ``queuetheory.stability`` as an attribute is the function)."""
    # a deprecated upward import, listed in tests/test_layers.py's DEPRECATED
    from .stability import __dict__ as moved

    return moved[name]


__getattr__ = moved_names(__name__, {
    name: (functools.partial(_from_stability, name), f"queuetheory.stability.{name}",
           "or qt.growth_rate" if name == "growth_rate" else "")
    for name in MOVED_TO_STABILITY})

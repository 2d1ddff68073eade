"""Per-class latency figures of one run (:func:`slo_metrics`) and the capacity at per-class
targets on a grid of rates (:func:`slo_capacity`, the capacity figure of Bari, Hegde, de
Veciana §7: median TTFT and each class's token-level P99 TBT).

Beside :func:`~queuetheory.capacity.goodput` (the largest rate at which a share of the
requests meets every target, by bisection over a steady-state window) this is the papers'
cruder rule: rates tried upward until one misses, each from one run judged over all of its
requests. Moved from ``queuetheory.policies.rad`` (the old names keep working for one
release with a ``DeprecationWarning``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..engine import simulate
from ..errors import check_positive

__all__ = ["slo_metrics", "slo_capacity"]


def slo_metrics(result, tbt=(0.5, 0.1)) -> pd.DataFrame:
    """Per class: requests, median and mean TTFT, P99 TBT (token level), and the shares of
    requests and of token gaps that missed the class's TBT target.

    Parameters
    ----------
    result : Result
        A run of :func:`~queuetheory.simulate`.
    tbt : float or sequence of float, default (0.5, 0.1)
        The TBT target of each class, in the time model's unit (the last one for the classes
        beyond); the defaults are the paper's seconds for free and paying users.

    Returns
    -------
    pandas.DataFrame
        Indexed by ``cls``: ``requests``, ``tbt_target``, ``median_ttft``, ``mean_ttft``,
        ``p99_tbt`` (from the run's token-gap histogram), ``request_miss`` (the share of
        requests whose largest gap exceeds the target) and ``token_miss`` (the share of
        gaps above it, exact to the histogram's 1.2 % bins).
    """
    req = result.requests
    hist = result.tbt
    tbt = np.asarray(tbt, dtype=float).reshape(-1)
    rows = []
    for k in range(hist.counts.shape[0]):
        mine = req[req["cls"] == k]
        target = float(tbt[min(k, tbt.size - 1)])
        counts = hist.counts[k]
        lower = 10.0 ** (hist.LOW + np.arange(counts.size) / hist.PER_DECADE)
        timed = mine[mine["tbt_max"] > 0]
        rows.append({
            "cls": k, "requests": len(mine), "tbt_target": target,
            "median_ttft": float(mine["ttft"].median()),
            "mean_ttft": float(mine["ttft"].mean()),
            "p99_tbt": hist.quantile(0.99, k),
            "request_miss": float((timed["tbt_max"] > target).mean()) if len(timed) else np.nan,
            "token_miss": float(counts[lower >= target].sum() / counts.sum())
            if counts.sum() else np.nan,
        })
    return pd.DataFrame(rows).set_index("cls")


def slo_capacity(make_policy, make_workload, time_model, rates, *, horizon: float,
                 ttft: float = 0.5, tbt=(0.5, 0.1), seed=0, **kwargs):
    """The largest rate of ``rates``, tried in increasing order until one fails, at which
    the median TTFT is at most ``ttft`` and every class's P99 TBT meets its target.

    Parameters
    ----------
    make_policy : callable
        ``make_policy()`` builds a fresh scheduler for each run.
    make_workload : callable
        ``make_workload(rate)`` builds the workload at a rate.
    time_model : TimeModel
        The batch time.
    rates : iterable of float
        The rates to try (sorted first), in requests per time unit.
    horizon : float
        Each run's length, in the time model's unit.
    ttft : float, default 0.5
        The median-TTFT target.
    tbt : float or sequence of float, default (0.5, 0.1)
        The P99 TBT target per class (:func:`slo_metrics`).
    seed : int, default 0
        The seed of every run.
    **kwargs
        Passed to :func:`~queuetheory.simulate` (``first_token="prefill"`` by default).

    Returns
    -------
    rate : float or None
        The largest rate that meets the targets before the first that misses (None if the
        first misses).
    table : pandas.DataFrame
        One row per rate tried: ``rate``, ``median_ttft``, ``tbt_ok``, ``ok``.

    Raises
    ------
    ValueError
        If ``horizon`` is not positive.
    """
    check_positive("horizon", horizon)
    kwargs.setdefault("first_token", "prefill")
    tbt = np.asarray(tbt, dtype=float).reshape(-1)
    best, rows = None, []
    for rate in sorted(rates):
        res = simulate(make_workload(rate), make_policy(), time_model, horizon=horizon,
                       seed=seed, **kwargs)
        m = slo_metrics(res, tbt)
        med = float(res.requests["ttft"].median())
        tbt_ok = bool(np.all(m["p99_tbt"].fillna(0).to_numpy() <= m["tbt_target"].to_numpy()))
        ok = med <= ttft and tbt_ok
        rows.append({"rate": rate, "median_ttft": med, "tbt_ok": tbt_ok, "ok": ok})
        if not ok:
            break
        best = rate
    return best, pd.DataFrame(rows)

"""Latency targets per metric and percentile ("p99 TTFT ≤ 2 s and p99 TPOT ≤ 100 ms"),
each judged on its own, beside the joint attainment of :func:`slo_attainment`."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..errors import check_positive
from .slo import SLO_KEYS

_KEY = re.compile(r"^p(\d+(?:\.\d+)?)_(ttft|tbt|tpot|latency)$")


def check_percentiles(percentiles) -> dict:
    """``{"p99_ttft": 2.0, "p99_tpot": 0.1}`` checked and parsed.

    Parameters
    ----------
    percentiles : dict
        Maps ``p<q>_<metric>`` (``q`` in (0, 100], ``metric`` a key of :data:`SLO_KEYS`) to
        a target in the time model's unit.

    Returns
    -------
    dict
        key -> ``(q, metric, target)``.

    Raises
    ------
    ValueError
        Not a non-empty dict, a key of another form, a percentile outside (0, 100] or a
        target that is not positive.
    """
    if not isinstance(percentiles, dict) or not percentiles:
        raise ValueError(f"percentiles={percentiles!r}: give a dict such as "
                         "{'p99_ttft': 2.0, 'p99_tpot': 0.1}")
    out = {}
    for key, target in percentiles.items():
        m = _KEY.match(str(key))
        if m is None:
            raise ValueError(f"percentiles: key {key!r} must read p<q>_<metric>, e.g. "
                             f"'p99_ttft', with metric among {sorted(SLO_KEYS)}")
        q = float(m.group(1))
        if not 0 < q <= 100:
            raise ValueError(f"percentiles: {key!r} asks for the {q:g}th percentile; it must "
                             "lie in (0, 100]")
        out[key] = (q, m.group(2), float(check_positive(f"percentiles[{key!r}]", target)))
    return out


def metric_values(requests: pd.DataFrame, metric: str) -> np.ndarray:
    """Each request's ``metric`` (:data:`SLO_KEYS`), ``inf`` where the run ended before it
    was reached (a request not yet finished has missed any finite target it has not met).

    Parameters
    ----------
    requests : pandas.DataFrame
        Needs ``arrival``, ``output``, ``first_token``, ``finish``, ``tbt_max``.
    metric : {"ttft", "tbt", "tpot", "latency"}
        The metric (:data:`SLO_KEYS`).

    Returns
    -------
    numpy.ndarray
        One value per row, in the time model's unit.
    """
    arrival = requests["arrival"].to_numpy(float)
    first = requests["first_token"].to_numpy(float)
    finish = requests["finish"].to_numpy(float)
    output = requests["output"].to_numpy()
    if metric == "ttft":
        v = first - arrival
    elif metric == "latency":
        v = finish - arrival
    elif metric == "tpot":
        with np.errstate(invalid="ignore", divide="ignore"):
            v = np.where(output > 1, (finish - first) / np.maximum(output - 1, 1), 0.0)
        v = np.where(np.isnan(finish), np.nan, v)
    else:
        v = np.where(np.isnan(finish), np.nan,
                     np.nan_to_num(requests["tbt_max"].to_numpy(float), nan=0.0))
    return np.where(np.isnan(v), np.inf, v)


def percentile_report(requests: pd.DataFrame, percentiles: dict, *, start: float,
                      end: float) -> pd.DataFrame:
    """Each percentile target judged over the requests arriving in ``[start, end)``.

    Parameters
    ----------
    requests : pandas.DataFrame
        The run's requests (the columns :func:`metric_values` reads).
    percentiles : dict
        The targets (:func:`check_percentiles`).
    start : float
        The start of the steady-state window of arrivals.
    end : float
        The end of the window (arrivals before it count).

    Returns
    -------
    pandas.DataFrame
        One row per target, indexed by its key: ``metric``, ``percentile``, ``target``,
        ``value`` (the achieved percentile, ``inf`` when more than ``100 − q`` percent
        never reached the metric), ``share`` (of requests within the target), ``meets``
        (``share ≥ q/100``).

    Raises
    ------
    ValueError
        If ``percentiles`` breaks a rule of :func:`check_percentiles`.
    """
    parsed = check_percentiles(percentiles)
    arrival = requests["arrival"].to_numpy(float)
    window = requests[(arrival >= start) & (arrival < end)]
    rows = []
    for key, (q, metric, target) in parsed.items():
        v = metric_values(window, metric)
        share = float(np.mean(v <= target)) if v.size else float("nan")
        value = float(np.quantile(v, q / 100, method="inverted_cdf")) if v.size \
            else float("nan")
        rows.append({"key": key, "metric": metric, "percentile": q, "target": target,
                     "value": value, "share": share, "meets": bool(share >= q / 100)})
    return pd.DataFrame(rows).set_index("key")

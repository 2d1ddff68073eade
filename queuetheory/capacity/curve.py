"""Latency and SLO attainment against load, and the figure with the bounds."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import check_positive, check_seeds
from .bounds import Bracket
from .inputs import _budget_of
from .slo import _check_slo, _window_run


def load_curve(workload, policy, time_model, rates, *, slo=None, token_budget=None,
               memory=None, n_requests: int = 2000, warmup: float = 0.2, seeds=(0,),
               first_token: str = "prefill") -> pd.DataFrame:
    """P50/P99 latency (completed requests) and SLO attainment at each of ``rates``, over
    the steady-state window of :func:`goodput` (one row per rate, with ``unfinished``)."""
    slo = _check_slo({"ttft": 1.0, "tbt": 0.1} if slo is None else slo)
    b = _budget_of(policy, token_budget)
    seeds = check_seeds(seeds)
    rows = [{"rate": float(x), **_window_run(workload, policy, time_model, float(x), slo,
                                            n_requests=n_requests, warmup=warmup,
                                            seeds=seeds, b=b, memory=memory,
                                            first_token=first_token)}
            for x in rates]
    return pd.DataFrame(rows)


def curve_rates(boundary: float, points: int, *, goodput: float | None = None) -> np.ndarray:
    """``points`` arrival rates for :func:`load_curve` from 0.3 to 1.1 of ``boundary`` (the
    simulated boundary's upper end), reaching down to half the ``goodput`` where that lies
    lower, so the attainment curve shows where it crosses its target; evenly spaced, or
    geometrically where the span exceeds 10× (the figure's rate axis is then logarithmic)."""
    check_positive("boundary", boundary)
    if not check_positive("points", points, integer=True) >= 2:
        raise ValueError(f"points={points}: need at least 2 rates")
    points = int(points)
    low, high = 0.3 * boundary, 1.1 * boundary
    if goodput is not None and 0 < goodput < 2 * low:
        low = goodput / 2
    space = np.geomspace if high / low > 10 else np.linspace
    return space(low, high, points)


def plot_capacity(curve: pd.DataFrame, bracket: Bracket, *, max_rate_result=None,
                  goodput_result=None, attainment: float | None = None, unit: str = "s",
                  title: str = "", axes=None):
    """Two panels against the arrival rate: P50 and P99 latency, and SLO attainment; the
    analytic upper bounds, the simulated boundary (its interval as a band) and the goodput
    as vertical reference lines. Returns the two Axes."""
    from ..plotting import finish, reference, series_style

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
    drawn = [*x, *(rate for _, rate in marks)]     # every x drawn: the scale spans them all
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
            drawn += [lo, hi]
        if goodput_result is not None and goodput_result.met:
            reference(ax, goodput_result.rate, f"goodput {goodput_result.rate:.3g}", axis="x",
                      color="C3", linestyle="-.")
            drawn.append(goodput_result.rate)
    per = f"requests per {unit}"
    finish(lat, title=f"Latency against load{': ' + title if title else ''}",
           xlabel=f"arrival rate ({per})", ylabel=f"latency ({unit})", x=drawn, y=curve[
               ["p50_latency", "p99_latency"]].to_numpy())
    finish(att, title="SLO attainment against load", xlabel=f"arrival rate ({per})",
           ylabel="share of requests meeting every target", x=drawn, logy=False)
    att.set_ylim(-0.02, 1.02)
    return axes

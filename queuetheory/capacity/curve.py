"""Latency and SLO attainment against load, and the figure with the bounds."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..engine.server import token_budget_for
from ..errors import check_positive, check_seeds
from .bounds import Bracket
from .slo import _check_slo, _window_run


def load_curve(workload, policy, time_model, rates, *, slo=None, token_budget=None,
               memory=None, n_requests: int = 2000, warmup: float = 0.2, seeds=(0,),
               first_token: str = "prefill") -> pd.DataFrame:
    """P50/P99 latency (completed requests) and SLO attainment at each of ``rates``, over
    the steady-state window of :func:`goodput` (one row per rate, with ``unfinished``).

    Parameters
    ----------
    workload : Workload or Trace
        The workload, its total rate set to each of ``rates`` (:func:`at_rate`), or a
        recorded :class:`~queuetheory.workload.Trace` replayed at each (:func:`replay`).
    policy : Policy
        The scheduler.
    time_model : TimeModel
        The batch-time model.
    rates : iterable of float
        The arrival rates, in requests per time unit (e.g. :func:`curve_rates`).
    slo : dict, optional
        The latency targets (:data:`SLO_KEYS`); default ``{"ttft": 1.0, "tbt": 0.1}``.
    token_budget : int, optional
        ``b``, the most tokens one batch serves; default the policy's own.
    memory : int, optional
        The KV-cache capacity ``M``, in tokens; default unlimited.
    n_requests : int, default 2000
        The expected arrivals of each run's window (at least ``MIN_LIFETIMES`` lone
        lifetimes).
    warmup : float, default 0.2
        The share of the window left out at its start.
    seeds : iterable of int, default (0,)
        The seeds, one run each, pooled per rate.
    first_token : {"prefill", "decode"}, default "prefill"
        Whether the prefill iteration emits the first output token.

    Returns
    -------
    pandas.DataFrame
        One row per rate: ``rate`` and :func:`slo_attainment`'s figures (``requests``,
        ``met``, ``unfinished``, ``attainment``, ``p50_latency``, ``p99_latency``,
        ``{key}_p90``, ``undecided``) plus ``drain``, the cool-down run past the window.

    Raises
    ------
    ValueError
        If ``slo`` is not a valid dict of targets, no token budget is given or the policy's
        is not a positive integer, ``seeds`` are not distinct integers >= 0, or
        :func:`~queuetheory.simulate` refuses the settings.
    """
    slo = _check_slo({"ttft": 1.0, "tbt": 0.1} if slo is None else slo)
    b = token_budget_for(policy, token_budget, required=True)
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
    geometrically where the span exceeds 10× (the figure's rate axis is then logarithmic).

    Parameters
    ----------
    boundary : float
        The simulated boundary's upper end (``MaxRate.interval[1]``), in requests per time
        unit (> 0).
    points : int
        How many rates (at least 2).
    goodput : float, optional
        The goodput (``Goodput.rate``); where half of it lies below ``0.3·boundary`` the
        rates reach down to it.

    Returns
    -------
    numpy.ndarray
        The ``points`` rates, increasing.

    Raises
    ------
    ValueError
        If ``boundary`` is not a positive number or ``points`` is not an integer >= 2.
    """
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
                  title: str = "", axes=None, slo: dict | None = None):
    """Panels against the arrival rate: P50 and P99 latency; SLO attainment with its target;
    and, with ``slo``, each target's metric at P90 over the target (the line 1 is the
    target). The analytic upper bounds, the simulated boundary (its interval as a band) and
    the goodput are vertical reference lines. A rate past the stability boundary (the upper
    end of the simulated interval, else the bracket's upper bound) has no steady state: its
    points are crossed out in red and not joined to the others. Returns the Axes.

    Parameters
    ----------
    curve : pandas.DataFrame
        The output of :func:`load_curve`.
    bracket : Bracket
        The analytic bracket (:func:`bounds`); its ``upper``, ``scheduler`` and ``estimate``
        rows are drawn.
    max_rate_result : MaxRate, optional
        The simulated boundary (:func:`max_rate`), drawn as a line and its interval as a
        band.
    goodput_result : Goodput, optional
        The goodput (:func:`goodput`), drawn where it met its target.
    attainment : float, optional
        The attainment target, drawn on the attainment panel.
    unit : str, default "s"
        The time unit, for the labels.
    title : str, default ""
        Appended to the latency panel's title.
    axes : sequence of matplotlib.axes.Axes, optional
        Where to draw (two panels, three with ``slo``); default a new figure.
    slo : dict, optional
        The latency targets; given, a third panel shows each target's metric at P90 over
        the target.

    Returns
    -------
    sequence of matplotlib.axes.Axes
        The panels drawn on.
    """
    from ..plotting import finish, reference, series_style

    keys = [k for k in (slo or {}) if f"{k}_p90" in curve]
    if axes is None:
        import matplotlib.pyplot as plt

        n = 3 if keys else 2
        _, axes = plt.subplots(1, n, figsize=(5.6 * n, 4), layout="constrained")
    lat, att = axes[0], axes[1]
    x = curve["rate"].to_numpy()
    limit = (max_rate_result.interval[1] if max_rate_result is not None
             and max_rate_result.rate > 0 else bracket.upper)
    past = x > limit * (1 + 1e-9)
    panels = [(lat, [(curve[c].to_numpy(), label, i) for i, (c, label) in enumerate(
        (("p50_latency", "P50 latency"), ("p99_latency", "P99 latency")))])]
    panels.append((att, [(curve["attainment"].to_numpy(), "SLO attainment", 2)]))
    if keys:
        panels.append((axes[2], [(curve[f"{k}_p90"].to_numpy() / slo[k], f"P90 {k} / target "
                                  f"{slo[k]:g} {unit}", 3 + j) for j, k in enumerate(keys)]))
        reference(axes[2], 1.0, "target (ratio 1)", color="0.3", linestyle=":")
    for ax, lines_ in panels:
        for y, label, i in lines_:
            ax.plot(x[~past], y[~past], label=label, **series_style(i))
        if past.any():
            ax.scatter(np.repeat(x[past], len(lines_)),
                       np.concatenate([y[past] for y, _, _ in lines_]), marker="x",
                       color="red", s=50, zorder=4,
                       label="past the stability boundary: no steady state")
    if attainment is not None:
        reference(att, attainment, f"target {attainment:.0%}", color="0.5", linestyle=":")
    if slo and "latency" in slo:
        reference(lat, slo["latency"], f"latency target {slo['latency']:g} {unit}",
                  color="0.3", linestyle=":")
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
    y_lat = curve[["p50_latency", "p99_latency"]].to_numpy().ravel()
    if slo and "latency" in slo:
        y_lat = np.append(y_lat, slo["latency"])
    finish(lat, title=f"Latency against load{': ' + title if title else ''}",
           xlabel=f"arrival rate ({per})", ylabel=f"latency ({unit})", x=drawn, y=y_lat)
    finish(att, title="SLO attainment against load", xlabel=f"arrival rate ({per})",
           ylabel="share of requests meeting every target", x=drawn, logy=False)
    att.set_ylim(-0.02, 1.02)
    if keys:
        ratios = np.concatenate([curve[f"{k}_p90"].to_numpy() / slo[k] for k in keys] + [[1]])
        finish(axes[2], title="Each target's metric at P90, over the target",
               xlabel=f"arrival rate ({per})", ylabel="P90 / target (1 = the target)",
               x=drawn, y=ratios[np.isfinite(ratios)])
    return axes

"""Matplotlib figures shared by the CLI, the report and the notebooks, in one style.

The style, written once here and used everywhere:

- every Axes has a title and labelled axes with units (:func:`finish`);
- an axis whose positive values span more than 10× is drawn on a log scale (:func:`finish`
  decides from the data it is given);
- intervals are bands around their line along a continuous axis, never error bars, and a
  band of a non-negative metric never crosses zero (:func:`band`); categories (schedulers at
  a few loads) are a dot plot with interval whiskers (:func:`dots`), never lines joining
  them;
- a point that is no steady state (an unstable run) is marked, never drawn as an ordinary
  value (:func:`dots`' ``flagged``);
- log axes carry plain-number ticks at 1, 2 and 5 per decade (:func:`finish`);
- bounds and capacities are reference lines, labelled (:func:`reference`);
- series that may overlap get distinct markers and line styles (:func:`series_style`);
- legends sit outside the data area, to the right (:func:`finish`).
"""

from __future__ import annotations

import numpy as np

__all__ = ["new_axes", "finish", "band", "reference", "reference_curve", "series_style",
           "spans_decades", "plot_paths", "gantt", "bars", "lines", "dots", "readable_log_ticks"]

_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "*")
_LINESTYLES = ("-", "--", "-.", ":")


def new_axes(ax=None, figsize=(6.4, 4.0)):
    """``ax`` itself, or the Axes of a new figure of ``figsize`` inches.

    Parameters
    ----------
    ax : matplotlib.axes.Axes, optional
        Returned as it is when given.
    figsize : tuple of float, default (6.4, 4.0)
        The new figure's width and height, in inches.

    Returns
    -------
    matplotlib.axes.Axes
        ``ax`` or the new Axes (constrained layout).
    """
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    _, ax = plt.subplots(figsize=figsize, layout="constrained")
    return ax


def series_style(i: int) -> dict:
    """Line style, marker and colour of the ``i``-th series: distinguishable even where
    two series coincide (a marker and a dash pattern of its own).

    Parameters
    ----------
    i : int
        The series' index (the styles cycle).

    Returns
    -------
    dict
        ``marker``, ``linestyle``, ``color``, ``markersize`` and ``markerfacecolor``, keyword
        arguments of ``Axes.plot``.
    """
    return {"marker": _MARKERS[i % len(_MARKERS)], "linestyle": _LINESTYLES[i % len(_LINESTYLES)],
            "color": f"C{i % 10}", "markersize": 4, "markerfacecolor": "none"}


def spans_decades(values, ratio: float = 10.0) -> bool:
    """True when the finite positive ``values`` span more than ``ratio`` (max / min).

    Parameters
    ----------
    values : array_like
        The values (NaN, infinite and non-positive ones are ignored).
    ratio : float, default 10.0
        The span that counts as wide.

    Returns
    -------
    bool
        Whether at least two such values span more than ``ratio``.
    """
    v = np.asarray(values, dtype=float).ravel()
    v = v[np.isfinite(v) & (v > 0)]
    return v.size >= 2 and float(v.max()) > ratio * float(v.min())


def finish(ax, *, title: str, xlabel: str, ylabel: str, x=None, y=None, logx=None, logy=None,
           legend: bool | None = None):
    """Title, axis labels (with units), log scales and the legend of ``ax``.

    ``logx``/``logy``: ``None`` decides from the data ``x``/``y`` (a log scale when every
    value is positive and they span more than 10×, see :func:`spans_decades`).
    ``legend``: ``None`` draws one when some artist has a label; it sits to the right of
    the data area, never on it.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        The Axes to draw on.
    title : str
        The title (required).
    xlabel : str
        The x-axis label, with its unit (required).
    ylabel : str
        The y-axis label, with its unit (required).
    x, y : array_like, optional
        The data drawn, from which ``logx``/``logy`` decide.
    logx, logy : bool, optional
        Log scales; ``None`` decides from ``x``/``y``.
    legend : bool, optional
        Draw the legend; ``None`` draws it when some artist has a label.

    Returns
    -------
    matplotlib.axes.Axes
        ``ax``.

    Raises
    ------
    ValueError
        If the title or an axis label is empty: every figure needs all three.
    """
    if not title or not xlabel or not ylabel:
        raise ValueError("finish: every figure needs a title and both axis labels")
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    for axis, flag, data in (("x", logx, x), ("y", logy, y)):
        if flag is None:
            v = None if data is None else np.asarray(data, dtype=float).ravel()
            flag = v is not None and bool(np.all(v[np.isfinite(v)] > 0)) and spans_decades(v)
        if flag:
            (ax.set_xscale if axis == "x" else ax.set_yscale)("log")
            readable_log_ticks(ax.xaxis if axis == "x" else ax.yaxis)
    handles, labels = ax.get_legend_handles_labels()
    if legend or (legend is None and labels):
        ax.legend(handles, labels, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                  borderaxespad=0.0, frameon=False)
    ax.grid(True, which="major", alpha=0.3, lw=0.5)
    return ax


def _span_locator():
    """The major-tick locator of :func:`readable_log_ticks`: its ticks chosen for the span
    of the view when the figure is drawn."""
    from matplotlib import ticker

    class SpanLocator(ticker.LogLocator):
        def tick_values(self, vmin, vmax):
            lo, hi = sorted((vmin, vmax))
            decades = np.log10(hi / lo) if lo > 0 else np.inf
            if decades < 1:
                return ticker.MaxNLocator(nbins=4).tick_values(lo, hi)
            self.set_params(subs=(1.0,) if decades > 2.5 else (1.0, 2.0, 5.0))
            return super().tick_values(vmin, vmax)

    return SpanLocator(base=10)


def readable_log_ticks(axis) -> None:
    """Ticks at 1, 2 and 5 per decade labelled as plain numbers (``0.5``, ``20``,
    ``5000``; powers of ten beyond 10⁵), minor ticks unlabelled: a reader finds a value
    between the decades. Where the axis spans more than 2.5 decades the labels are the
    powers of ten only, and where it spans less than one, four or so round values: their
    labels would otherwise run into one another (decided when the figure is drawn, on the
    axis's final limits).

    Parameters
    ----------
    axis : matplotlib.axis.Axis
        ``ax.xaxis`` or ``ax.yaxis``, on a log scale.
    """
    from matplotlib import ticker

    def label(v, _pos):
        if v <= 0:
            return ""
        if 1e-3 <= v < 1e5:
            return f"{v:g}"
        exp = int(np.floor(np.log10(v) + 1e-9))
        lead = v / 10.0 ** exp
        return f"$10^{{{exp}}}$" if abs(lead - 1) < 1e-6 else f"${lead:g}·10^{{{exp}}}$"

    axis.set_major_locator(_span_locator())
    axis.set_major_formatter(ticker.FuncFormatter(label))
    axis.set_minor_formatter(ticker.NullFormatter())


def dots(ax, groups, series: dict, *, flagged: dict | None = None, flag_label: str = "",
         title: str, xlabel: str, ylabel: str, references: dict | None = None,
         logy: bool | None = None):
    """A dot plot of categories: for each of ``groups`` (a load, a setting) one dot per
    series, side by side in :func:`series_style`, its interval a whisker; nothing joins the
    groups. ``series``: ``{name: (mid, lo, hi)}``, one value per group (``lo``/``hi`` NaN:
    no interval). ``flagged``: ``{name: booleans per group}`` of points that are no steady
    state (an unstable run): each is also crossed out in red under one legend entry
    ``flag_label``. ``references``: labelled horizontal lines ``{label: value}``.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        The Axes to draw on.
    groups : iterable
        The categories, in order along the x axis.
    series : dict
        ``{name: (mid, lo, hi)}``, arrays of one value per group.
    flagged : dict, optional
        ``{name: booleans per group}``: the points to cross out.
    flag_label : str, default ""
        The legend entry of the crossed-out points.
    title : str
        The title (required).
    xlabel : str
        The x-axis label, with its unit (required).
    ylabel : str
        The y-axis label, with its unit (required).
    references : dict, optional
        ``{label: value}``: horizontal reference lines.
    logy : bool, optional
        A log y axis; ``None`` decides from the values.

    Returns
    -------
    matplotlib.axes.Axes
        ``ax``, finished (:func:`finish`).

    Raises
    ------
    ValueError
        If the title or an axis label is empty (:func:`finish`).
    """
    groups = list(groups)
    pos = np.arange(len(groups), dtype=float)
    width = 0.8 / max(len(series), 1)
    values, marked = [], False
    for i, (name, (mid, lo, hi)) in enumerate(series.items()):
        x = pos + (i - (len(series) - 1) / 2) * width
        mid, lo, hi = (np.asarray(a, dtype=float) for a in (mid, lo, hi))
        style = series_style(i)
        has = np.isfinite(lo) & np.isfinite(hi)
        err = np.vstack([np.where(has, mid - np.maximum(lo, 0), 0),
                         np.where(has, hi - mid, 0)])
        ax.errorbar(x, mid, yerr=err, fmt=style["marker"], color=style["color"],
                    markersize=5, markerfacecolor="none", capsize=2, lw=1, label=name)
        bad = np.asarray(flagged.get(name, np.zeros(len(groups), bool)) if flagged else
                         np.zeros(len(groups), bool), dtype=bool)
        if bad.any():
            ax.scatter(x[bad], mid[bad], marker="x", s=70, color="red", zorder=4,
                       label=None if marked else flag_label)
            marked = True
        values += [mid, np.where(has, lo, np.nan), np.where(has, hi, np.nan)]
    for k, (label, value) in enumerate((references or {}).items()):
        reference(ax, value, label, linestyle=_LINESTYLES[(k + 1) % len(_LINESTYLES)])
        values.append(np.array([float(value)]))
    ax.set_xticks(pos, [str(g) for g in groups])
    for edge in pos[:-1] + 0.5:
        ax.axvline(edge, color="0.85", lw=0.6)
    ax.set_xlim(-0.5, len(groups) - 0.5)
    y = np.concatenate(values) if values else None
    finish(ax, title=title, xlabel=xlabel, ylabel=ylabel, y=y, logy=logy, logx=False)
    ax.grid(False, axis="x")
    return ax


def band(ax, x, mid, lo, hi, *, label=None, style: dict | None = None,
         nonnegative: bool = True):
    """A line at ``mid`` with its interval ``[lo, hi]`` as a band of the same colour; for a
    ``nonnegative`` metric the band is clipped at zero (a physical bound is never crossed).

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        The Axes to draw on.
    x, mid, lo, hi : array_like
        The abscissae, the line and the band's lower and upper edges.
    label : str, optional
        The line's legend label.
    style : dict, optional
        Keyword arguments of ``Axes.plot`` (e.g. :func:`series_style`).
    nonnegative : bool, default True
        Clip the band at zero.

    Returns
    -------
    matplotlib.lines.Line2D
        The line drawn.
    """
    x, mid, lo, hi = (np.asarray(a, dtype=float) for a in (x, mid, lo, hi))
    if nonnegative:
        lo = np.maximum(lo, 0.0)
    style = dict(style or {})
    (line,) = ax.plot(x, mid, label=label, **style)
    ax.fill_between(x, lo, hi, color=line.get_color(), alpha=0.2, lw=0)
    return line


def reference(ax, value: float, label: str, *, axis: str = "y", color: str = "0.25",
              linestyle: str = "--"):
    """A labelled reference line at ``value`` (a bound, a capacity, a threshold): horizontal
    for ``axis="y"``, vertical for ``axis="x"``.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        The Axes to draw on.
    value : float
        Where the line is drawn.
    label : str
        Its legend label.
    axis : {"y", "x"}, default "y"
        ``"y"``: a horizontal line at ``y = value``; ``"x"``: a vertical one.
    color : str, default "0.25"
        Its colour.
    linestyle : str, default "--"
        Its dash pattern.

    Returns
    -------
    matplotlib.lines.Line2D
        The line drawn.

    Raises
    ------
    ValueError
        If ``axis`` is neither ``"x"`` nor ``"y"``.
    """
    if axis not in ("x", "y"):
        raise ValueError(f"axis={axis!r}: must be 'x' or 'y'")
    draw = ax.axhline if axis == "y" else ax.axvline
    return draw(float(value), color=color, linestyle=linestyle, lw=1.0, label=label)


def reference_curve(ax, x, y, label: str, *, color: str = "0.25", linestyle: str = "--"):
    """A labelled reference curve: a bound that depends on the parameter on the x axis.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        The Axes to draw on.
    x, y : array_like
        The curve.
    label : str
        Its legend label.
    color : str, default "0.25"
        Its colour.
    linestyle : str, default "--"
        Its dash pattern.

    Returns
    -------
    matplotlib.lines.Line2D
        The line drawn.
    """
    (line,) = ax.plot(np.asarray(x, dtype=float), np.asarray(y, dtype=float), color=color,
                      linestyle=linestyle, lw=1.0, label=label)
    return line


def gantt(ax, starts, durations, *, labels=None, colors=None, title: str,
          xlabel: str = "round", ylabel: str = "request"):
    """A schedule as a Gantt chart: request ``i`` runs ``[starts[i], starts[i] +
    durations[i])``, one row per request (labelled ``labels[i]``, default its index).

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        The Axes to draw on.
    starts, durations : array_like
        Each request's start and duration (same shape), in ``xlabel``'s unit.
    labels : sequence of str, optional
        The rows' labels; default the indices.
    colors : sequence, optional
        The bars' colours; default the colour cycle.
    title : str
        The title (required).
    xlabel : str, default "round"
        The x-axis label.
    ylabel : str, default "request"
        The y-axis label.

    Returns
    -------
    matplotlib.axes.Axes
        ``ax``, finished (:func:`finish`).

    Raises
    ------
    ValueError
        If ``starts`` and ``durations`` differ in shape, or the title is empty.
    """
    starts = np.asarray(starts, dtype=float)
    durations = np.asarray(durations, dtype=float)
    if starts.shape != durations.shape:
        raise ValueError(f"starts, durations: shapes {starts.shape} and {durations.shape} "
                         "differ")
    labels = [str(i) for i in range(starts.size)] if labels is None else list(labels)
    for i, (s, d) in enumerate(zip(starts, durations, strict=True)):
        c = colors[i] if colors is not None else f"C{i % 10}"
        ax.barh(i, d, left=s, height=0.6, color=c, alpha=0.8, edgecolor="k", lw=0.5)
    ax.set_yticks(range(starts.size), labels)
    ax.invert_yaxis()
    end = float((starts + durations).max()) if starts.size else 1.0
    ax.set_xlim(min(0.0, float(starts.min()) if starts.size else 0.0), end + 0.5)
    return finish(ax, title=title, xlabel=xlabel, ylabel=ylabel, logx=False, logy=False,
                  legend=False)


def bars(ax, values: dict, *, title: str, ylabel: str, xlabel: str = "", groups=None,
         reference_value: float | None = None, reference_label: str = "",
         logy: bool | None = None):
    """Bars of ``values``: ``{label: number}``, or ``{series: {group: number}}`` drawn as
    grouped bars (``groups`` fixes their order); ``reference_value`` adds a labelled
    reference line (a bound, the paper's figure).

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        The Axes to draw on.
    values : dict
        ``{label: number}`` or ``{series: {group: number}}``.
    title : str
        The title (required).
    ylabel : str
        The y-axis label, with its unit (required).
    xlabel : str, default ""
        The x-axis label.
    groups : sequence, optional
        The groups' order (nested ``values``); default the first series' order.
    reference_value : float, optional
        A reference line's value.
    reference_label : str, default ""
        Its legend label.
    logy : bool, optional
        A log y axis; ``None`` decides from the values.

    Returns
    -------
    matplotlib.axes.Axes
        ``ax``, finished (:func:`finish`).

    Raises
    ------
    ValueError
        If the title or an axis label is empty (:func:`finish`).
    """
    first = next(iter(values.values()), None)
    nested = isinstance(first, dict)
    series = values if nested else {"": values}
    groups = list(groups or (first if nested else values))
    width = 0.8 / len(series)
    allv = []
    for i, (name, vals) in enumerate(series.items()):
        x = np.arange(len(groups)) + (i - (len(series) - 1) / 2) * width
        y = [float(vals.get(g, np.nan)) for g in groups]
        allv += y
        ax.bar(x, y, width=width * 0.95, color=f"C{i % 10}", label=name or None)
    ax.set_xticks(range(len(groups)), [str(g) for g in groups],
                  rotation=30 if max(len(str(g)) for g in groups) > 8 else 0,
                  ha="right" if max(len(str(g)) for g in groups) > 8 else "center")
    if reference_value is not None:
        reference(ax, reference_value, reference_label)
        allv.append(reference_value)
    return finish(ax, title=title, xlabel=xlabel or " ", ylabel=ylabel, y=allv, logy=logy,
                  logx=False)


def lines(ax, x, series: dict, *, title: str, xlabel: str, ylabel: str,
          references: dict | None = None, logx: bool | None = None, logy: bool | None = None,
          markers: bool = True):
    """One line per ``{label: y}`` of ``series`` against ``x`` (or ``{label: (x, y)}``), in
    :func:`series_style`; ``references`` adds labelled horizontal reference lines
    ``{label: value}`` (bounds, the paper's figures).

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        The Axes to draw on.
    x : array_like
        The common abscissae (unused by series given as ``(x, y)``).
    series : dict
        ``{label: y}`` or ``{label: (x, y)}``.
    title : str
        The title (required).
    xlabel : str
        The x-axis label, with its unit (required).
    ylabel : str
        The y-axis label, with its unit (required).
    references : dict, optional
        ``{label: value}``: horizontal reference lines.
    logx, logy : bool, optional
        Log scales; ``None`` decides from the data.
    markers : bool, default True
        Mark the points.

    Returns
    -------
    matplotlib.axes.Axes
        ``ax``, finished (:func:`finish`).

    Raises
    ------
    ValueError
        If the title or an axis label is empty (:func:`finish`).
    """
    xs, ys = [], []
    for i, (name, y) in enumerate(series.items()):
        xi, yi = y if isinstance(y, tuple) else (x, y)
        style = series_style(i)
        if not markers:
            style["marker"] = None
        ax.plot(np.asarray(xi, dtype=float), np.asarray(yi, dtype=float), label=name, **style)
        xs.append(np.asarray(xi, dtype=float).ravel())
        ys.append(np.asarray(yi, dtype=float).ravel())
    for i, (name, value) in enumerate((references or {}).items()):
        reference(ax, value, name, linestyle=_LINESTYLES[(i + 1) % len(_LINESTYLES)])
        ys.append(np.array([float(value)]))
    return finish(ax, title=title, xlabel=xlabel, ylabel=ylabel,
                  x=np.concatenate(xs) if xs else None, y=np.concatenate(ys) if ys else None,
                  logx=logx, logy=logy)


def plot_paths(results: dict, ax=None, quantity: str = "unfinished_tokens", *,
               predicted_slope: float | None = None, time_scale: float = 1.0,
               time_label: str = "time", title: str | None = None):
    """Plot ``quantity`` of ``Result.paths`` against time for each named result.

    ``predicted_slope`` adds the line ``slope · t`` (Theorem 1(b) of Li, Dai, Peng:
    λ(m_p+m_d) − b/t_b) as a reference. Each value of ``results`` is a
    :class:`~queuetheory.Result` or its ``paths`` DataFrame.

    Parameters
    ----------
    results : dict
        ``{name: Result or paths DataFrame}``.
    ax : matplotlib.axes.Axes, optional
        The Axes to draw on; default a new figure.
    quantity : str, default "unfinished_tokens"
        A column of ``Result.paths`` (``unfinished_tokens``, ``in_system``, ...).
    predicted_slope : float, optional
        The slope of the reference line, in ``quantity`` per unit of the run's time.
    time_scale : float, default 1.0
        Divides the times on the x axis (e.g. 1000 for ms to s).
    time_label : str, default "time"
        The x-axis label.
    title : str, optional
        The title; default "<quantity> over time".

    Returns
    -------
    matplotlib.axes.Axes
        The Axes drawn on.
    """
    ax = new_axes(ax)
    end = 0.0
    for i, (name, r) in enumerate(results.items()):
        p = getattr(r, "paths", r)
        style = series_style(i)
        style.update(marker=None)
        ax.plot(p["time"] / time_scale, p[quantity], lw=0.8, label=name, **style)
        end = max(end, float(p["time"].iloc[-1]) if len(p) else 0.0)
    if predicted_slope is not None:
        ax.plot([0, end / time_scale], [0, predicted_slope * end], color="0.25", ls="--", lw=1,
                label=f"predicted slope {predicted_slope:.4g}")
    what = quantity.replace("_", " ")
    return finish(ax, title=title or f"{what} over time", xlabel=time_label,
                  ylabel=what + (" (tokens)" if "tokens" in quantity else " (requests)"
                                 if quantity == "in_system" else ""), logy=False)

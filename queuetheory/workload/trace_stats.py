"""How bursty a trace is, and how long its requests are: the statistics of a replayed log.

* **mean rate** ``(n − 1) / (t_last − t_first)`` requests per time unit;
* **coefficient of variation** of the inter-arrival times (1 for Poisson arrivals, 0 for
  evenly spaced ones, > 1 for bursty ones);
* **index of dispersion of counts** ``Var N(w) / E N(w)`` of the arrivals in consecutive
  windows of length ``w`` (1 for Poisson arrivals at every ``w``); the default ``w`` holds
  10 arrivals on average (``w = 10 / mean rate``), so that rescaling time
  (``read_trace(rate=...)``) leaves it unchanged;
* **rate over time**: arrivals per time unit in consecutive bins (default 60 bins);
* **length laws**: quantiles of the prompt and output lengths, beside a reference's when
  one is given (e.g. ShareGPT's, ``reference=qt.data.sharegpt_lengths(tokenizer="words")``:
  whitespace words, not model tokens: compare shapes, not absolute values).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..errors import check_positive
from .core import Trace

__all__ = ["TraceStats", "trace_stats", "length_quantiles"]

QUANTILES = (0.1, 0.5, 0.9, 0.99)


def length_quantiles(prompt, output) -> pd.DataFrame:
    """Mean, P10, median, P90, P99 and max of the prompt and output lengths (tokens)."""
    rows = {}
    for side, a in (("prompt", prompt), ("output", output)):
        a = np.asarray(a, dtype=float)
        q = np.quantile(a, QUANTILES)
        rows[side] = {"mean": a.mean(), **{f"p{round(100 * p)}": v for p, v in
                                           zip(QUANTILES, q, strict=True)}, "max": a.max()}
    return pd.DataFrame(rows).T


@dataclass
class TraceStats:
    """What :func:`trace_stats` measured (times in ``time_unit``).

    Attributes
    ----------
    requests : int
        Number of requests ``n``.
    duration : float
        ``t_last − t_first``, in ``time_unit``.
    mean_rate : float
        ``(n − 1) / (t_last − t_first)``, requests per ``time_unit``.
    cv_interarrival : float
        Coefficient of variation of the inter-arrival times (1 for Poisson arrivals).
    dispersion : float
        Index of dispersion of counts ``Var N(w) / E N(w)`` (NaN with fewer than two
        windows).
    dispersion_window : float
        The counting window ``w``, in ``time_unit``.
    rate_over_time : pandas.DataFrame
        Per bin: ``start``, ``width``, ``arrivals`` and ``rate`` (arrivals per time unit).
    lengths : pandas.DataFrame
        Mean, P10, median, P90, P99 and max of the prompt and output lengths, indexed by
        (source, side): the trace's, and the reference's where given.
    time_unit : str, default "s"
        The label of the arrival times' unit.
    """

    requests: int
    duration: float
    mean_rate: float
    cv_interarrival: float
    dispersion: float
    dispersion_window: float
    rate_over_time: pd.DataFrame = field(repr=False)
    lengths: pd.DataFrame = field(repr=False)
    time_unit: str = "s"

    def summary(self) -> dict:
        """The scalar statistics as a JSON-ready dict (NaN as None).

        Returns
        -------
        dict
            ``requests``, ``duration``, ``mean_rate``, ``cv_interarrival``, ``dispersion``,
            ``dispersion_window`` and ``time_unit``.
        """
        keys = ("requests", "duration", "mean_rate", "cv_interarrival", "dispersion",
                "dispersion_window", "time_unit")
        out = {k: getattr(self, k) for k in keys}
        return {k: None if isinstance(v, float) and not np.isfinite(v) else v
                for k, v in out.items()}

    def plot(self, ax=None, *, title: str | None = None):
        """Arrivals per time unit over time, with the mean rate as a reference line.

        Parameters
        ----------
        ax : matplotlib.axes.Axes, optional
            The axes to draw on; ``None`` makes a new figure.
        title : str, optional
            The title (default: the CV of the inter-arrivals and the dispersion).

        Returns
        -------
        matplotlib.axes.Axes
            The axes drawn on.
        """
        from ..plotting import finish, new_axes, reference, series_style

        ax = new_axes(ax)
        r = self.rate_over_time
        style = series_style(0)
        style.update(marker=None, linestyle="-")
        ax.step(r["start"], r["rate"], where="post", lw=1.0, label="arrival rate per bin",
                **style)
        reference(ax, self.mean_rate, f"mean rate {self.mean_rate:.3g}/{self.time_unit}")
        u = self.time_unit
        head = title or (f"arrival rate over time: CV of inter-arrivals "
                         f"{self.cv_interarrival:.2f}, dispersion {self.dispersion:.2f}")
        return finish(ax, title=head, xlabel=f"time ({u})",
                      ylabel=f"arrivals per {u} (bins of {float(r['width'].iloc[0]):.3g} {u})",
                      logy=False)


def trace_stats(trace: Trace, *, window: float | None = None, bins: int = 60,
                time_unit: str = "s", reference=None,
                reference_label: str = "reference") -> TraceStats:
    """Burstiness and length statistics of ``trace`` (see the module docstring).

    ``window``: the counting window of the index of dispersion (default ``10 / mean
    rate``); ``bins``: number of bins of the rate over time; ``time_unit``: the unit of the
    trace's arrival times (a label); ``reference``: a :class:`Trace` or a pair
    ``(prompts, outputs)`` whose length quantiles go beside the trace's, under
    ``reference_label`` (``None``: the trace's only). The name ``"sharegpt"`` is deprecated:
    pass ``qt.data.sharegpt_lengths(tokenizer="words")``.

    Parameters
    ----------
    trace : Trace
        The requests, at least 3, arriving over a positive span.
    window : float, optional
        The counting window ``w`` of the index of dispersion, in ``time_unit`` (default
        ``10 / mean rate``).
    bins : int, default 60
        Number of bins of the rate over time.
    time_unit : str, default "s"
        The unit of the trace's arrival times (a label).
    reference : Trace or (array_like, array_like), optional
        Lengths whose quantiles go beside the trace's: a trace, or a pair
        ``(prompts, outputs)``.
    reference_label : str, default "reference"
        The reference's name in ``lengths``.

    Returns
    -------
    TraceStats
        The rate, burstiness and length statistics.

    Raises
    ------
    ValueError
        If ``trace`` is not a Trace or has fewer than 3 requests or a zero span, ``bins`` or
        ``window`` is not positive, or ``reference`` is neither a Trace nor a pair.

    Warns
    -----
    DeprecationWarning
        For ``reference="sharegpt"``.
    """
    if not isinstance(trace, Trace):
        raise ValueError(f"trace={trace!r}: must be a queuetheory Trace")
    check_positive("bins", bins, integer=True)
    if len(trace) < 3:
        raise ValueError(f"trace: {len(trace)} request(s); statistics need at least 3")
    t = np.asarray(trace.arrival, dtype=float)
    span = float(t[-1] - t[0])
    if span <= 0:
        raise ValueError("trace: every request arrives at the same time; no rate to measure")
    iat = np.diff(t)
    mean_rate = (t.size - 1) / span
    w = 10.0 / mean_rate if window is None else float(check_positive("window", window))
    n_win = int(span // w)
    if n_win >= 2:
        counts = np.bincount(((t - t[0]) // w).astype(np.int64), minlength=n_win)[:n_win]
        dispersion = float(counts.var(ddof=1) / counts.mean()) if counts.mean() > 0 else np.nan
    else:
        dispersion = np.nan
    width = span / int(bins)
    idx = np.minimum(((t - t[0]) // width).astype(np.int64), int(bins) - 1)
    per_bin = np.bincount(idx, minlength=int(bins))
    over_time = pd.DataFrame({"start": t[0] + width * np.arange(int(bins)),
                              "width": width, "arrivals": per_bin, "rate": per_bin / width})
    lengths = length_quantiles(trace.prompt, trace.output)
    lengths.index = pd.MultiIndex.from_product([["trace"], lengths.index])
    if isinstance(reference, str) and reference == "sharegpt":
        warnings.warn('reference="sharegpt" is deprecated and goes in the next release: pass '
                      'reference=qt.data.sharegpt_lengths(tokenizer="words")',
                      DeprecationWarning, stacklevel=2)
        from ..data import sharegpt_lengths  # deprecated path (tests/test_layers.py)

        reference, reference_label = sharegpt_lengths(tokenizer="words"), "ShareGPT (words)"
    if reference is not None:
        pair = (reference.prompt, reference.output) if isinstance(reference, Trace) else None
        if pair is None and not isinstance(reference, str):
            try:
                pair = tuple(reference)
            except TypeError:
                pair = None
        if pair is None or len(pair) != 2:
            raise ValueError(f"reference={reference!r}: must be a Trace, a pair (prompts, "
                             "outputs) or None")
        ref = length_quantiles(*pair)
        ref.index = pd.MultiIndex.from_product([[reference_label], ref.index])
        lengths = pd.concat([lengths, ref])
    return TraceStats(int(t.size), span, float(mean_rate), float(iat.std() / iat.mean()),
                      dispersion, w, over_time, lengths, time_unit)

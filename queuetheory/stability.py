"""Is this system stable? The verdict rule, its tests, and the one run-longer loop.

One room for every stability verdict of the package:

* the rule (:data:`VERDICT_RULE`, :func:`judge`) and the two tests of a backlog path over
  the tail of a run: the batch-means drift (:func:`drift_interval`) and the backlog trend
  (:func:`trend_interval`), pooled over independent runs (:func:`pooled_drift`,
  :func:`pooled_trend`);
* the test of one run (:func:`growth_rate`, a :class:`~queuetheory.Result`) or of any
  step path (:func:`path_growth_rate`: networks of engines, loaded-start probes);
* the one run-longer loop (:func:`run_longer`): judge, and while the answer is not yet
  clear run longer, up to a budget;
* :func:`stability`: a workload under a policy on several seeds, run as long as it takes.

``capacity`` (its probes of :func:`~queuetheory.capacity.max_rate`) and ``networks`` (their
``growth_rate``) call it. The names once in :mod:`queuetheory.metrics` (``growth_rate``,
``path_growth_rate``, ``drift_interval``, ``trend_interval``, ``GrowthRate``,
``VERDICT_RULE``, ``judge``, …) still work there for one release, with a
``DeprecationWarning``.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .engine import as_server, simulate
from .errors import CensoredRunWarning, check_positive, check_seeds
from .metrics import step_path_at
from .timing import BatchLoad, TimeModel
from .workload import Workload

__all__ = ["stability", "StabilityVerdict", "default_horizon", "lone_lifetime", "run_longer",
           "growth_rate", "path_growth_rate", "GrowthRate", "drift_interval",
           "trend_interval", "VERDICT_RULE", "judge", "pool_verdicts", "check_test_arguments"]

#: Expected arrivals, and lifetimes of a lone request, that a default first run spans.
START_ARRIVALS = 4000
START_LIFETIMES = 200
#: The default budget: this many times the first horizon (three doublings).
BUDGET_FACTOR = 8
#: The most expected arrivals one run may draw (memory: see ``_BYTES_PER_REQUEST``).
MAX_REQUESTS = 5e7
#: The most points of each seed's backlog path a verdict keeps (evenly spaced iterations).
BACKLOG_POINTS = 100_000
_BYTES_PER_REQUEST = 17 * 8     # the engine's request table: 17 eight-byte fields


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
    """The verdict of :data:`VERDICT_RULE` from the tests' bounds.

    Parameters
    ----------
    lows, highs : sequence of float
        The lower and upper bounds of the tests' intervals (relative drifts, or absolute
        ones with ``tolerance`` in the same unit).
    tolerance : float
        The growth below which a path counts as stable.

    Returns
    -------
    str
        ``"stable"``, ``"unstable"`` or ``"inconclusive"``.
    """
    if max(highs) < tolerance:
        return "stable"
    if max(lows) > 0:
        return "unstable"
    return "inconclusive"


def pool_verdicts(verdicts) -> str:
    """The verdict of independent runs judged apart, pooled conservatively.

    Parameters
    ----------
    verdicts : iterable of str
        Each run's verdict (:func:`judge`).

    Returns
    -------
    str
        ``"unstable"`` if any run's is, ``"stable"`` if every run's is, else
        ``"inconclusive"``.
    """
    verdicts = list(verdicts)
    if "unstable" in verdicts:
        return "unstable"
    if all(v == "stable" for v in verdicts):
        return "stable"
    return "inconclusive"


#: The most blocks a growth test cuts its window into (each needs iterations of its own).
MAX_BLOCKS = 10_000


def check_test_arguments(*, tail, blocks, level, tolerance) -> None:
    """Check the growth test's arguments.

    Parameters
    ----------
    tail : float
        The fraction of the run tested: ``1e-6 <= tail <= 1``.
    blocks : int
        Batch-means blocks: an integer in ``[3, MAX_BLOCKS]``.
    level : float
        Confidence of the intervals: ``0 < level < 1``.
    tolerance : float
        Relative growth called stable: finite and ``> 0``.

    Raises
    ------
    ValueError
        Naming the first argument that breaks its rule.
    """
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


# ---- the drift and trend tests -----------------------------------------------------------
def block_edges(start: float, end: float, blocks: int) -> np.ndarray:
    """The edges of ``blocks`` equal blocks of ``[start, end]``.

    Parameters
    ----------
    start, end : float
        The window.
    blocks : int
        How many blocks (at least 3).

    Returns
    -------
    numpy.ndarray
        ``blocks + 1`` edges, ``start`` and ``end`` included.

    Raises
    ------
    ValueError
        For fewer than 3 blocks.
    """
    if blocks < 3:
        raise ValueError(f"blocks={blocks}: need at least 3")
    return np.linspace(start, end, blocks + 1)


def block_rates(t: np.ndarray, y: np.ndarray, start: float, end: float,
                blocks: int = 10) -> np.ndarray:
    """Increments per unit time of a step path over equal blocks.

    Parameters
    ----------
    t, y : numpy.ndarray
        The step path: ``y[i]`` holds from ``t[i]`` (sorted) to ``t[i+1]``; ``y[0]`` before
        ``t[0]``.
    start, end : float
        The window cut into blocks.
    blocks : int
        How many equal blocks.

    Returns
    -------
    numpy.ndarray
        The ``blocks`` increments of ``y`` over the blocks, each over the block's length.
    """
    edges = block_edges(start, end, blocks)
    return np.diff(step_path_at(t, y, edges)[0]) / np.diff(edges)


def block_means(t: np.ndarray, y: np.ndarray, start: float, end: float,
                blocks: int = 10) -> tuple[np.ndarray, np.ndarray]:
    """Block midpoints and exact time averages of a step path over equal blocks.

    Parameters
    ----------
    t, y : numpy.ndarray
        The step path (``y[i]`` holds from ``t[i]`` to ``t[i+1]``; ``y[0]`` before ``t[0]``).
    start, end : float
        The window cut into blocks.
    blocks : int
        How many equal blocks.

    Returns
    -------
    tuple of numpy.ndarray
        The blocks' midpoints and the path's time average over each.
    """
    edges = block_edges(start, end, blocks)
    return means_of_blocks(edges, step_path_at(t, y, edges)[1])


def means_of_blocks(edges: np.ndarray, integrals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Block midpoints and time averages from a path's integrals up to the block edges.

    Parameters
    ----------
    edges : numpy.ndarray
        The block edges.
    integrals : numpy.ndarray
        The path's integral from a fixed origin up to each edge.

    Returns
    -------
    tuple of numpy.ndarray
        The blocks' midpoints and the path's time average over each.
    """
    return (edges[:-1] + edges[1:]) / 2, np.diff(integrals) / np.diff(edges)


def _t_quantile(level: float, df: int) -> float:
    """Student's t quantile at ``0.5 + level/2`` (``scipy.special.stdtrit``, what
    ``scipy.stats.t.ppf`` computes, without importing ``scipy.stats``: 0.3 s)."""
    from scipy import special

    return float(special.stdtrit(df, 0.5 + level / 2))


def drift_interval(t: np.ndarray, y: np.ndarray, start: float, end: float, *, blocks: int = 10,
                   level: float = 0.99) -> tuple[float, float, float]:
    """Drift of a step path over a window and its confidence interval (batch means).

    The window is cut into ``blocks`` equal pieces; the increments of the path over the
    pieces are nearly independent both for a stable (stationary) path and for an unstable
    one (a random walk with drift), so their mean estimates the drift and their spread, with
    Student's t on ``blocks − 1`` degrees of freedom, its uncertainty.

    Parameters
    ----------
    t, y : array_like
        The step path (``y[i]`` holds from ``t[i]`` to ``t[i+1]``).
    start, end : float
        The window tested.
    blocks : int
        Batch-means blocks.
    level : float
        The interval's two-sided confidence.

    Returns
    -------
    tuple of float
        ``(drift, low, high)`` in path units per unit time.
    """
    return pooled_drift([block_rates(np.asarray(t, float), np.asarray(y, float), start, end,
                                     blocks)], level)


def pooled_drift(rates, level: float = 0.99) -> tuple[float, float, float]:
    """Mean and t-interval of the block rates of one or more independent runs.

    Parameters
    ----------
    rates : sequence of array_like
        Each run's block rates (:func:`block_rates`).
    level : float
        The interval's two-sided confidence.

    Returns
    -------
    tuple of float
        ``(mean, low, high)``.
    """
    r = np.concatenate([np.asarray(x, float) for x in rates])
    mean = float(r.mean())
    half = _t_quantile(level, r.size - 1) * float(r.std(ddof=1)) / np.sqrt(r.size)
    return mean, mean - half, mean + half


def trend_fit(t: np.ndarray, y: np.ndarray, start: float, end: float,
              blocks: int = 10) -> tuple[float, float]:
    """Least-squares slope of the block averages of a step path on time, and its error.

    Block averages of a stable queue near saturation stay correlated when the blocks are not
    much longer than its relaxation time; the error is widened by ``sqrt((1 + r)/(1 − r))``,
    ``r ∈ [0, 0.9]`` the residuals' lag-1 autocorrelation (an AR(1) correction), so that a
    long excursion is not mistaken for growth.

    Parameters
    ----------
    t, y : array_like
        The step path.
    start, end : float
        The window.
    blocks : int
        How many block averages.

    Returns
    -------
    tuple of float
        ``(slope, standard_error)``.
    """
    return slope_fit(*block_means(np.asarray(t, float), np.asarray(y, float), start, end,
                                  blocks))


def slope_fit(x: np.ndarray, m: np.ndarray) -> tuple[float, float]:
    """:func:`trend_fit` from the block midpoints and averages.

    Parameters
    ----------
    x, m : numpy.ndarray
        Block midpoints and the path's averages over the blocks (:func:`means_of_blocks`).

    Returns
    -------
    tuple of float
        ``(slope, standard_error)``, the error widened for the residuals' autocorrelation.
    """
    xc = x - x.mean()
    sxx = float((xc ** 2).sum())
    slope = float((xc * (m - m.mean())).sum() / sxx)
    resid = m - m.mean() - slope * xc
    ss = float((resid ** 2).sum())
    r = float(np.clip((resid[1:] * resid[:-1]).sum() / ss, 0.0, 0.9)) if ss > 0 else 0.0
    return slope, float(np.sqrt(ss / (x.size - 2) / sxx * (1 + r) / (1 - r)))


def pooled_trend(fits, blocks: int, level: float = 0.99) -> tuple[float, float, float]:
    """Mean of independent runs' trend slopes and its t-interval.

    Parameters
    ----------
    fits : sequence of (float, float)
        Each run's ``(slope, standard_error)`` (:func:`trend_fit`).
    blocks : int
        The blocks of each fit (``runs·(blocks − 2)`` degrees of freedom).
    level : float
        The interval's two-sided confidence.

    Returns
    -------
    tuple of float
        ``(mean, low, high)``.
    """
    slopes = np.array([f[0] for f in fits])
    se = float(np.sqrt(sum(f[1] ** 2 for f in fits))) / slopes.size
    mean = float(slopes.mean())
    half = _t_quantile(level, slopes.size * (blocks - 2)) * se
    return mean, mean - half, mean + half


def trend_interval(t: np.ndarray, y: np.ndarray, start: float, end: float, *, blocks: int = 10,
                   level: float = 0.99) -> tuple[float, float, float]:
    """The backlog trend: the slope of a step path's block averages on time, with its interval.

    Averages smooth out the oscillation of a batching engine's backlog, so a path that grows
    is caught even where the increments of :func:`drift_interval` are noisy.

    Parameters
    ----------
    t, y : array_like
        The step path.
    start, end : float
        The window tested.
    blocks : int
        Block averages fitted (a t-interval on ``blocks − 2`` degrees of freedom).
    level : float
        The interval's two-sided confidence.

    Returns
    -------
    tuple of float
        ``(slope, low, high)`` in path units per unit time.
    """
    return pooled_trend([trend_fit(t, y, start, end, blocks)], blocks, level)


# ---- the test of one path ----------------------------------------------------------------
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

    Attributes
    ----------
    quantity : str
        The path tested (``unfinished_tokens``, ``in_system``, or a network's name for it).
    slope : float
        The batch-means drift, in path units per unit time.
    ci_low, ci_high : float
        Its interval at the test's level.
    offered : float
        The offered rate the drift is compared with.
    relative : float
        ``slope / offered`` (NaN without an offered rate).
    tolerance : float
        The tolerance in path units per unit time.
    verdict : str
        ``"stable"``, ``"unstable"`` or ``"inconclusive"``.
    blocks : int
        The number of blocks the tested window was cut into.
    trend : float
        The backlog trend, in path units per unit time.
    trend_low, trend_high : float
        Its interval.
    window : tuple of float
        The ``(start, end)`` of the stretch tested.
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
    which window was judged).

    Parameters
    ----------
    result : Result
        A run of :func:`~queuetheory.simulate`.
    quantity : str, default "unfinished_tokens"
        ``"unfinished_tokens"`` (offered: prompt and output tokens arrived per unit time) or
        ``"in_system"`` (offered: the arrival rate).
    tail : float, default 0.5
        The share of the run tested (its last part), in ``[1e-6, 1]``.
    blocks : int, default 10
        The number of equal blocks of the tail (3 to ``MAX_BLOCKS``).
    level : float, default 0.99
        The intervals' confidence level, in ``(0, 1)``.
    tolerance : float, default 0.03
        The growth, relative to ``offered``, below which the path counts as stable.

    Returns
    -------
    GrowthRate
        The drift, the trend, their intervals and the verdict.

    Raises
    ------
    ValueError
        If ``quantity`` is neither name, a test argument breaks its rule
        (:func:`check_test_arguments`), or the run has fewer than ``4 * blocks`` iterations.
    """
    if quantity not in ("unfinished_tokens", "in_system"):
        raise ValueError(f"quantity={quantity!r}: must be 'unfinished_tokens' or 'in_system'")
    paths = result.paths
    T = float(result.end_time)
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


def _rate(amount, span: float) -> float:
    return float(amount / span) if span > 0 else 0.0


def path_growth_rate(time, values, *, end: float, offered: float, quantity: str = "path",
                     tail: float = 0.5, blocks: int = 10, level: float = 0.99,
                     tolerance: float = 0.03) -> GrowthRate:
    """The test of :func:`growth_rate` on a plain step path: ``values[i]`` holds from
    ``time[i]`` (sorted) until the next time, ``end`` closes the run and ``offered`` is the
    rate the drift is compared with. Networks of engines use it on their total paths.

    Parameters
    ----------
    time : array_like
        The times of the step path, sorted (1-d).
    values : array_like
        Its values, as many as ``time``.
    end : float
        The end of the run.
    offered : float
        The rate the drift is compared with (path units per unit time).
    quantity : str, default "path"
        The name recorded in the result.
    tail : float, default 0.5
        The share of the run tested (its last part), in ``[1e-6, 1]``.
    blocks : int, default 10
        The number of equal blocks of the tail (3 to ``MAX_BLOCKS``).
    level : float, default 0.99
        The intervals' confidence level, in ``(0, 1)``.
    tolerance : float, default 0.03
        The growth, relative to ``offered``, below which the path counts as stable.

    Returns
    -------
    GrowthRate
        The drift, the trend, their intervals and the verdict.

    Raises
    ------
    ValueError
        If ``time`` and ``values`` are not 1-d of equal length, the path has fewer than
        ``4 * blocks`` points, or a test argument breaks its rule (:func:`check_test_arguments`).
    """
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


# ---- the one run-longer loop -------------------------------------------------------------
def run_longer(judge_at, horizon: float, max_horizon: float, *, longer=None,
               settled=None) -> tuple:
    """Judge runs of ``horizon``, then of longer ones, until a verdict settles.

    The one run-longer loop: of :func:`stability` (the horizon doubles, the last step cut
    to ``max_horizon``), of a replayed trace's probe (whole doublings only) and of
    :func:`~queuetheory.capacity.max_rate`'s ladder of probe runs. Anything that can run
    its seeds to a horizon and judge them — a workload, a replayed trace, an agent network —
    runs longer through it.

    Parameters
    ----------
    judge_at : callable
        ``judge_at(H)`` runs to the horizon ``H`` and returns its judgement (any object).
    horizon : float
        The first horizon.
    max_horizon : float
        No run is longer; a run of at least this long is the last.
    longer : callable, optional
        ``longer(H)``: the next horizon (default ``min(2 H, max_horizon)``). A next horizon
        past ``max_horizon`` ends the loop instead (steps that must stay whole).
    settled : callable, optional
        ``settled(judgement)``: whether the judgement is final (default: its ``verdict`` is
        not ``"inconclusive"``).

    Returns
    -------
    tuple
        ``(judgement, horizon, rounds)``: the last judgement, its horizon and how many runs
        were judged.
    """
    if longer is None:
        def longer(h):
            return min(2 * h, max_horizon)
    if settled is None:
        def settled(out):
            return out.verdict != "inconclusive"
    H, rounds = horizon, 0
    while True:
        rounds += 1
        out = judge_at(H)
        if settled(out) or H >= max_horizon:
            return out, H, rounds
        nxt = longer(H)
        if nxt > max_horizon:
            return out, H, rounds
        H = nxt


@dataclass(frozen=True, eq=False)
class StabilityVerdict:
    """The answer of :func:`stability` and its evidence.

    Attributes
    ----------
    verdict : str
        ``"stable"``, ``"unstable"`` or ``"inconclusive"``
        (:data:`VERDICT_RULE`).
    drift : float
        The pooled batch-means drift of the backlog, relative to the offered token rate.
    drift_interval : tuple of float
        Its interval at ``level``.
    trend : float
        The pooled backlog trend (slope of the block averages), relative to the offered
        token rate.
    trend_interval : tuple of float
        Its interval at ``level``.
    offered : float
        Tokens offered per unit time (arrived over all seeds / simulated time).
    tolerance : float
        The growth, relative to the offered rate, below which the system counts as stable.
    level : float
        The intervals' confidence level.
    horizon : float
        The simulated time of each run of the last round.
    max_horizon : float
        The longest horizon the doublings could reach.
    runs : pandas.DataFrame
        One row per seed of the last round: ``seed``, ``horizon``, ``iterations``,
        ``wall_s``, ``arrived``, ``completed``, ``backlog_end`` (tokens),
        ``in_system_end``, the seed's own ``drift``/``trend`` intervals and ``verdict``.
    backlog : pandas.DataFrame
        The backlog paths of the last round: ``seed``, ``time``, ``backlog`` (unfinished
        tokens), ``in_system`` (requests) at the end of every iteration, or of evenly spaced
        ones (the last included) where a run has more than ``BACKLOG_POINTS`` (for plots;
        the tests use every iteration).
    rounds : int
        How many horizons were tried (1 + doublings).
    wall_s : float
        Seconds in all.
    needed_horizon : float or None
        For ``inconclusive``, the horizon at which the interval would be narrow enough to
        decide if its width shrinks as ``1/sqrt(T)`` (``None`` otherwise).
    tail : float
        The share of each run that was tested (its last part); :meth:`plot` shades it.
    """

    verdict: str
    drift: float
    drift_interval: tuple[float, float]
    trend: float
    trend_interval: tuple[float, float]
    offered: float
    tolerance: float
    level: float
    horizon: float
    max_horizon: float
    runs: pd.DataFrame
    backlog: pd.DataFrame
    rounds: int
    wall_s: float
    needed_horizon: float | None
    tail: float = 0.5

    def plot(self, ax=None, *, rho: float | None = None, time_label: str = "time"):
        """The evidence in one figure: each seed's backlog path (unfinished tokens, linear
        axes: a growing backlog is a straight line), the tested tail shaded, the pooled
        drift drawn from the tail's start as a line of slope ``drift × offered`` with its
        interval as a band, and the verdict, the drift and ``rho`` (the load, where known)
        in the title.

        Parameters
        ----------
        ax : matplotlib.axes.Axes, optional
            The Axes to draw on; default a new figure.
        rho : float, optional
            The load, shown in the title where given.
        time_label : str, default "time"
            The x-axis label (the time unit of the time model).

        Returns
        -------
        matplotlib.axes.Axes
            The Axes drawn on.
        """
        from .plotting import finish, new_axes, series_style

        ax = new_axes(ax, figsize=(7.2, 4.0))
        if self.backlog.empty:
            ax.text(0.5, 0.5, "no arrivals: nothing can grow", ha="center",
                    transform=ax.transAxes)
        for i, (seed, path) in enumerate(self.backlog.groupby("seed", sort=True)):
            style = series_style(i)
            style.update(marker=None, lw=0.8)
            ax.plot(path["time"], path["backlog"], label=f"seed {seed}", **style)
        H = self.horizon
        start = H * (1 - self.tail)
        if H > 0:
            ax.axvspan(start, H, color="0.85", alpha=0.5, lw=0,
                       label=f"tested tail [{start:.3g}, {H:.3g}]")
            tail = self.backlog[self.backlog["time"] >= start]
            y0 = float(tail.groupby("seed")["backlog"].first().mean()) if len(tail) else 0.0
            t = np.array([start, H])
            lo, hi = self.drift_interval
            ax.plot(t, y0 + self.drift * self.offered * (t - start), color="k", lw=1.2,
                    ls="--", label=f"drift {self.drift:+.3g} of the offered load")
            ax.fill_between(t, np.maximum(y0 + lo * self.offered * (t - start), 0),
                            y0 + hi * self.offered * (t - start), color="k", alpha=0.15,
                            lw=0, label=f"{self.level:.0%} interval [{lo:+.3g}, {hi:+.3g}]")
            ax.plot(t, y0 + self.tolerance * self.offered * (t - start), color="C3", lw=1,
                    ls=":", label=f"tolerance: growth of {self.tolerance:g} of the offered load")
        load = f", ρ = {rho:.3g}" if rho is not None else ""
        finish(ax, title=f"{self.verdict}: backlog over {len(self.runs)} seed(s){load}; "
                         f"tolerance {self.tolerance:g}",
               xlabel=time_label, ylabel="backlog (unfinished tokens)", logx=False,
               logy=False)
        return ax

    @property
    def per_seed(self) -> dict:
        """Each seed's own verdict (the pooled ``verdict`` is the one to report)."""
        return dict(zip(self.runs["seed"], self.runs["verdict"], strict=True))

    def __repr__(self) -> str:
        lo, hi = self.drift_interval
        tlo, thi = self.trend_interval
        more = (f", needs horizon ≈ {self.needed_horizon:.3g}"
                if self.needed_horizon is not None else "")
        return (f"StabilityVerdict({self.verdict!r}: drift {self.drift:+.3g} [{lo:+.3g}, "
                f"{hi:+.3g}], trend {self.trend:+.3g} [{tlo:+.3g}, {thi:+.3g}] of the offered "
                f"load at level {self.level:g}, tolerance {self.tolerance:g}; "
                f"{len(self.runs)} seed(s) × horizon {self.horizon:.4g}, {self.rounds} "
                f"round(s), {self.wall_s:.2f} s{more})")


def default_horizon(workload: Workload, time_model: TimeModel) -> float:
    """A first horizon long enough for a verdict away from ``ρ = 1``.

    Parameters
    ----------
    workload : Workload
        Its rate and mean lengths.
    time_model : TimeModel
        The batch-time model.

    Returns
    -------
    float
        The longer of ``START_ARRIVALS`` expected arrivals and ``START_LIFETIMES`` lifetimes
        of a lone mean request (:func:`lone_lifetime`).
    """
    return max(START_ARRIVALS / workload.total_rate,
               START_LIFETIMES * lone_lifetime(workload, time_model))


def lone_lifetime(workload: Workload, time_model: TimeModel) -> float:
    """How long a lone mean request takes.

    Parameters
    ----------
    workload : Workload
        Its mean prompt and output lengths.
    time_model : TimeModel
        The batch-time model.

    Returns
    -------
    float
        The time of its prompt in one chunk, then of its output one decode at a time.
    """
    prompt, output = workload.mean_prompt, workload.mean_output
    return float(time_model.duration(BatchLoad.of_tokens(prefill=max(1, math.ceil(prompt))))
                 + output * time_model.duration(
                     BatchLoad.of_tokens(decodes=1, context=math.ceil(prompt))))


def stability(workload, policy, time_model, *, horizon=None, n_requests=None,
              max_horizon=None, seeds=(0,), level: float = 0.99, tolerance: float = 0.03,
              tail: float = 0.5, blocks: int = 10, **simulate_kwargs) -> StabilityVerdict:
    """Is ``policy`` stable on ``workload``? Run, test, and run longer while unclear.

    Each seed runs :func:`~queuetheory.simulate` up to ``horizon`` (default
    :func:`default_horizon`; ``n_requests`` instead sets it to the expected arrival time of
    that many requests). The backlog ``W(t)`` — tokens arrived minus tokens done, the
    engine's unfinished work — is tested over the last ``tail`` of every run, the seeds
    pooled (their block rates and trend slopes are independent replications). While the
    verdict is ``inconclusive`` the horizon doubles, up to ``max_horizon`` (default
    ``BUDGET_FACTOR`` times the first horizon); every round runs afresh.

    ``simulate_kwargs`` go to :func:`~queuetheory.simulate` (``memory``, ``token_budget``,
    ``first_token``, …). A workload without arrivals is ``stable`` at once (nothing can
    grow), with zero drift. The verdict (:data:`VERDICT_RULE`), with
    the drifts relative to the offered token rate:

    Parameters
    ----------
    workload : Workload
        A workload that draws arrivals (not a finite trace, which always drains).
    policy : Policy
        The scheduler.
    time_model : TimeModel or Server
        The batch-time model, or a whole :class:`~queuetheory.engine.Server` (its
        ``token_budget``, ``memory`` and ``first_token`` then go to every run).
    horizon : float, optional
        The first round's simulated time; default :func:`default_horizon`.
    n_requests : int, optional
        Instead of ``horizon``: the expected arrival time of this many requests.
    max_horizon : float, optional
        The longest horizon the doublings may reach; default ``BUDGET_FACTOR`` times the
        first.
    seeds : iterable of int, default (0,)
        The seeds, one run each (distinct).
    level : float, default 0.99
        The intervals' confidence level, in ``(0, 1)``.
    tolerance : float, default 0.03
        The growth, relative to the offered rate, below which the system counts as stable.
    tail : float, default 0.5
        The share of each run tested (its last part), in ``[1e-6, 1]``.
    blocks : int, default 10
        The batch-means blocks of the tail (at least 3).
    **simulate_kwargs
        Passed to :func:`~queuetheory.simulate` (not ``seed``).

    Returns
    -------
    StabilityVerdict
        The verdict and its evidence.

    Raises
    ------
    ValueError
        If ``workload`` draws no arrivals (a trace), ``time_model`` is not a
        :class:`~queuetheory.timing.TimeModel`, ``seed`` is passed, both ``horizon`` and
        ``n_requests`` are given, the horizon is not finite and positive or shorter than
        one lone request's lifetime, ``max_horizon`` is below the horizon or would draw more
        than ``MAX_REQUESTS`` requests per run, or a test argument breaks its rule
        (:func:`check_test_arguments`).
    """
    if not isinstance(workload, Workload) or workload._trace is not None:
        raise ValueError(f"workload={workload!r}: stability needs a Workload that draws "
                         "arrivals (a finite trace always drains: simulate it and use "
                         "qt.growth_rate on its Result, which judges a drained run "
                         "over its arrivals' window)")
    server = as_server(time_model, **{k: simulate_kwargs.pop(k) for k in
                                      ("token_budget", "memory", "first_token")
                                      if k in simulate_kwargs})
    time_model = server.time_model
    simulate_kwargs["token_budget"] = server.token_budget
    simulate_kwargs["memory"] = server.memory
    simulate_kwargs["first_token"] = server.first_token
    if "seed" in simulate_kwargs:
        raise ValueError(f"seed={simulate_kwargs['seed']!r}: give seeds=(...) to stability")
    seeds = check_seeds(seeds)
    check_test_arguments(tail=tail, blocks=blocks, level=level, tolerance=tolerance)
    lam = workload.total_rate
    if lam <= 0:
        return _no_arrivals(seeds, level, tolerance)
    if horizon is not None and n_requests is not None:
        raise ValueError(f"horizon={horizon}, n_requests={n_requests}: give at most one")
    if n_requests is not None:
        check_positive("n_requests", n_requests, integer=True)
        horizon = n_requests / lam
    H = float(horizon) if horizon is not None else default_horizon(workload, time_model)
    if not H > 0 or not math.isfinite(H):
        raise ValueError(f"horizon={horizon}: must be a finite number > 0")
    life = lone_lifetime(workload, time_model)
    if H < life:
        raise ValueError(f"horizon={H:g}: shorter than one lone request's lifetime {life:.4g}; "
                         "no backlog can be judged over it")
    cap = BUDGET_FACTOR * H if max_horizon is None else float(max_horizon)
    if not cap >= H:
        raise ValueError(f"max_horizon={max_horizon}: must be at least the horizon {H:g}")
    if lam * cap > MAX_REQUESTS:
        raise ValueError(f"max_horizon={cap:g}: about {lam * cap:.3g} requests per run, over "
                         f"{MAX_REQUESTS:.0e} (the request table alone would hold "
                         f"{lam * cap * _BYTES_PER_REQUEST / 2**30:.1f} GiB); lower it")
    started = time.perf_counter()

    def judge_at(h):
        runs = [_run(workload, policy, time_model, h, s, tail, blocks, level, tolerance,
                     simulate_kwargs) for s in seeds]
        return runs, _pool(runs, h, blocks, level, tolerance)

    (runs, out), H, rounds = run_longer(
        judge_at, H, cap, settled=lambda judged: judged[1]["verdict"] != "inconclusive")
    return StabilityVerdict(
        out["verdict"], out["drift"], out["drift_interval"], out["trend"],
        out["trend_interval"], out["offered"], tolerance, level, H, cap,
        pd.DataFrame([r["row"] for r in runs]),
        pd.concat([r["path"] for r in runs], ignore_index=True), rounds,
        time.perf_counter() - started, out["needed"], float(tail))


def _run(workload, policy, time_model, H, seed, tail, blocks, level, tolerance, kwargs):
    """One seed's run and its own tests."""
    t0 = time.perf_counter()
    with warnings.catch_warnings():     # an unstable run's backlog is the evidence here
        warnings.simplefilter("ignore", CensoredRunWarning)
        res = simulate(workload, policy, time_model, horizon=H, seed=seed, **kwargs)
    wall = time.perf_counter() - t0
    log = res.log    # read at the block edges and a thinned path, not expanded
    trace = res.trace
    offered_tokens = float((trace.prompt + trace.output).sum())
    edges = block_edges(H * (1 - tail), H, blocks)
    if log.n < blocks:      # (nearly) no batches: an empty path, constant at zero
        values, integrals = step_path_at(np.array([0.0, H]), np.zeros(2), edges)
    else:
        values, integrals = log.path_at("unfinished_tokens", edges)
    rates = np.diff(values) / np.diff(edges)
    fit = slope_fit(*means_of_blocks(edges, integrals))
    rel = offered_tokens / H
    d, dlo, dhi = (v / rel for v in pooled_drift([rates], level)) if rel else (0.0,) * 3
    tr, tlo, thi = (v / rel for v in pooled_trend([fit], blocks, level)) if rel else (0.0,) * 3
    done = np.isfinite(res.table.column("finish"))
    row = {"seed": seed, "horizon": H, "iterations": res.iterations,
           "wall_s": wall, "arrived": len(trace), "completed": int(done.sum()),
           "backlog_end": res.work_left, "in_system_end": int(res.live.size),
           "drift": d, "drift_low": dlo, "drift_high": dhi,
           "trend": tr, "trend_low": tlo, "trend_high": thi,
           "verdict": judge((dlo, tlo), (dhi, thi), tolerance)}
    kept = _thinned(log.n)
    path = pd.DataFrame({"seed": seed, "time": log.ends(kept),
                         "backlog": log.column("unfinished_tokens", at=kept),
                         "in_system": log.column("in_system", at=kept)})
    return {"row": row, "rates": rates, "fit": fit, "tokens": offered_tokens, "path": path}


def _thinned(n: int) -> np.ndarray:
    """Indices of at most ``BACKLOG_POINTS`` iterations out of ``n``, evenly spaced, the
    last one included (the path kept for plots)."""
    step = -(-n // BACKLOG_POINTS)
    return np.unique(np.append(np.arange(0, n, step), n - 1)) if n else np.arange(0)


def _pool(runs, H, blocks, level, tolerance) -> dict:
    """The seeds' tests pooled into one verdict, and the horizon a verdict would need."""
    rel = sum(r["tokens"] for r in runs) / (H * len(runs))
    if rel <= 0:
        zero = (0.0, 0.0)
        return {"verdict": "stable", "drift": 0.0, "drift_interval": zero, "trend": 0.0,
                "trend_interval": zero, "offered": 0.0, "needed": None}
    d, dlo, dhi = (v / rel for v in pooled_drift([r["rates"] for r in runs], level))
    tr, tlo, thi = (v / rel for v in pooled_trend([r["fit"] for r in runs], blocks, level))
    verdict = judge((dlo, tlo), (dhi, thi), tolerance)
    needed = None
    if verdict == "inconclusive":
        needed = H * _needed_factor(((d, (dhi - dlo) / 2), (tr, (thi - tlo) / 2)), tolerance)
    return {"verdict": verdict, "drift": d, "drift_interval": (dlo, dhi), "trend": tr,
            "trend_interval": (tlo, thi), "offered": rel, "needed": needed}


def _needed_factor(estimates, tolerance) -> float:
    """How many times longer the runs must be for an interval to clear 0 (any test) or to
    fall below ``tolerance`` (every test), if half-widths shrink as ``1/sqrt(T)`` and the
    estimates stay where they are."""
    def factor(half, gap):
        return (half / gap) ** 2 if gap > 0 else math.inf

    grow = min(factor(h, e) for e, h in estimates)
    hold = max(factor(h, tolerance - e) for e, h in estimates)
    return max(1.0, min(grow, hold))


def _no_arrivals(seeds, level, tolerance) -> StabilityVerdict:
    runs = pd.DataFrame({"seed": list(seeds), "horizon": 0.0, "iterations": 0, "wall_s": 0.0,
                         "arrived": 0, "completed": 0, "backlog_end": 0, "in_system_end": 0,
                         "drift": 0.0, "drift_low": 0.0, "drift_high": 0.0, "trend": 0.0,
                         "trend_low": 0.0, "trend_high": 0.0, "verdict": "stable"})
    backlog = pd.DataFrame({"seed": pd.Series(dtype=int), "time": pd.Series(dtype=float),
                            "backlog": pd.Series(dtype=int), "in_system": pd.Series(dtype=int)})
    return StabilityVerdict("stable", 0.0, (0.0, 0.0), 0.0, (0.0, 0.0), 0.0, tolerance, level,
                            0.0, 0.0, runs, backlog, 0, 0.0, None)


# the verdict's rule, once, before the Parameters section
stability.__doc__ = stability.__doc__.replace("\n    Parameters\n", "\n" + "\n".join(
    "    " + line if line else "" for line in VERDICT_RULE.splitlines())
    + "\n\n    Parameters\n", 1)

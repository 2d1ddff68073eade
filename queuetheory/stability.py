"""Is this system stable? A verdict with its evidence, run as long as it takes.

:func:`stability` simulates a workload under a policy on several seeds, tests the drift of
the backlog (work arrived minus work done) over the tail of each run, and — while the
answer is not yet clear — doubles the horizon up to a budget. The verdict's meaning is
defined once, in :data:`~queuetheory.metrics.VERDICT_RULE`, and repeated in
:func:`stability`'s docstring.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .engine import simulate
from .errors import CensoredRunWarning, check_positive, check_seeds
from .metrics import (
    VERDICT_RULE,
    block_edges,
    check_test_arguments,
    judge,
    means_of_blocks,
    pooled_drift,
    pooled_trend,
    slope_fit,
    step_path_at,
)
from .timing import BatchLoad, TimeModel
from .workload import Workload

__all__ = ["stability", "StabilityVerdict", "default_horizon", "lone_lifetime"]

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


@dataclass(frozen=True, eq=False)
class StabilityVerdict:
    """The answer of :func:`stability` and its evidence.

    Attributes
    ----------
    verdict : ``"stable"``, ``"unstable"`` or ``"inconclusive"`` (:data:`VERDICT_RULE`)
    drift, drift_interval : the pooled batch-means drift of the backlog, relative to the
        offered token rate, and its interval at ``level``
    trend, trend_interval : the pooled backlog trend (slope of the block averages), relative
    offered : tokens offered per unit time (arrived over all seeds / simulated time)
    horizon : the simulated time of each run of the last round
    runs : one row per seed of the last round: ``seed``, ``horizon``, ``iterations``,
        ``wall_s``, ``arrived``, ``completed``, ``backlog_end`` (tokens),
        ``in_system_end``, the seed's own ``drift``/``trend`` intervals and ``verdict``
    backlog : the backlog paths of the last round: ``seed``, ``time``, ``backlog``
        (unfinished tokens), ``in_system`` (requests) at the end of every iteration, or of
        evenly spaced ones (the last included) where a run has more than
        ``BACKLOG_POINTS`` (for plots; the tests use every iteration)
    rounds : how many horizons were tried (1 + doublings); ``wall_s``: seconds in all
    needed_horizon : for ``inconclusive``, the horizon at which the interval would be
        narrow enough to decide if its width shrinks as ``1/sqrt(T)`` (``None`` otherwise)
    tail : the share of each run that was tested (its last part); :meth:`plot` shades it
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
        in the title. Returns the Axes."""
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
    """A first horizon long enough for a verdict away from ``ρ = 1``: the longer of
    ``START_ARRIVALS`` expected arrivals and ``START_LIFETIMES`` lifetimes of a lone mean
    request (its prompt in one chunk, then its output one decode at a time)."""
    return max(START_ARRIVALS / workload.total_rate,
               START_LIFETIMES * lone_lifetime(workload, time_model))


def lone_lifetime(workload: Workload, time_model: TimeModel) -> float:
    """How long a lone mean request takes: its prompt in one chunk, then its output one
    decode at a time."""
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
    grow), with zero drift. The verdict (:data:`~queuetheory.metrics.VERDICT_RULE`), with
    the drifts relative to the offered token rate:
    """
    if not isinstance(workload, Workload) or workload._trace is not None:
        raise ValueError(f"workload={workload!r}: stability needs a Workload that draws "
                         "arrivals (a finite trace always drains: simulate it and use "
                         "qt.metrics.growth_rate on its Result, which judges a drained run "
                         "over its arrivals' window)")
    if not isinstance(time_model, TimeModel):
        raise ValueError(f"time_model={time_model!r}: must be a queuetheory TimeModel")
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
    started, rounds = time.perf_counter(), 0
    while True:
        rounds += 1
        runs = [_run(workload, policy, time_model, H, s, tail, blocks, level, tolerance,
                     simulate_kwargs) for s in seeds]
        out = _pool(runs, H, blocks, level, tolerance)
        if out["verdict"] != "inconclusive" or H >= cap:
            break
        H = min(2 * H, cap)
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


stability.__doc__ += "\n" + "\n".join(
    "    " + line if line else "" for line in VERDICT_RULE.splitlines())

"""Probes from a loaded start: a run that begins with a backlog sized by the fluid model,
so that a slow start (a metastable low-backlog state) cannot pass for stability."""

from __future__ import annotations

import dataclasses
import math
import time
import warnings

import numpy as np

from ..engine import simulate
from ..errors import CensoredRunWarning
from ..stability import path_growth_rate, pool_verdicts
from ..timing import BatchLoad
from .rescale import at_rate

#: The loaded start holds this many times the requests a backlogged engine has in service
#: (Little's law at the bracket's upper bound, :func:`backlog_size`).
BACKLOG_FACTOR = 4


def backlog_size(bracket, time_model, token_budget: int) -> int:
    """The requests queued at time 0 of a loaded-start probe.

    Fluid model: a backlogged engine runs full batches of ``b`` tokens, each lasting
    ``t_b``, and a request is in at least ``m_d + 1`` of them; by Little's law, at a rate
    up to the bracket's upper bound ``U`` it holds ``U (m_d + 1) t_b`` requests in service.
    The loaded start queues ``BACKLOG_FACTOR`` times that (at least ``BACKLOG_FACTOR``
    requests): enough to fill every batch from the first iteration, so an engine above its
    boundary starts in the backlogged regime and grows at the fluid rate, while one below
    drains its backlog (a negative drift, which the verdict reads as stable).

    Parameters
    ----------
    bracket : Bracket
        The :class:`~queuetheory.capacity.Bracket` of the workload (its upper bound ``U``
        and request figures).
    time_model : TimeModel
        The engine's batch-time model (``t_b``).
    token_budget : int
        The token budget ``b``.

    Returns
    -------
    int
        The backlog, in requests.
    """
    st = bracket.stats
    mix = st.prompt / st.work
    prefill = int(round(mix * token_budget))
    t_full = float(time_model.duration(BatchLoad.of_tokens(
        prefill=prefill, decodes=token_budget - prefill)))
    rate = bracket.upper if np.isfinite(bracket.upper) else bracket.start
    in_service = rate * (st.decode + 1) * t_full
    return max(BACKLOG_FACTOR, math.ceil(BACKLOG_FACTOR * in_service))


def loaded_verdict(workload, rate: float, policy, time_model, *, horizon: float, backlog: int,
                   seeds, level: float, tolerance: float, blocks: int = 10,
                   **simulate_kwargs) -> dict:
    """The stability test of one probe run from a loaded start.

    Each seed runs ``workload`` at ``rate`` up to ``horizon`` with ``backlog`` extra
    requests (drawn from the same length law, another stream of the seed) all arriving at
    time 0; the backlog of unfinished tokens is tested over the run's last half with the
    rule of :func:`~queuetheory.stability` (:func:`~queuetheory.stability.path_growth_rate`),
    its drift relative to the offered work of the arrivals (the initial backlog left out).
    The seeds' verdicts are pooled conservatively
    (:func:`~queuetheory.stability.pool_verdicts`: ``unstable`` if any seed's is, ``stable``
    if every seed's is, else ``inconclusive``).

    Parameters
    ----------
    workload : Workload
        A :class:`~queuetheory.Workload` that draws arrivals.
    rate : float
        The total arrival rate, in requests per time unit.
    policy : Policy
        The scheduler.
    time_model : TimeModel
        The batch-time model.
    horizon : float
        Simulated time of each run.
    backlog : int
        Requests queued at time 0 (:func:`backlog_size`).
    seeds : iterable of int
        Independent replications, one run each.
    level : float
        The verdict's confidence level.
    tolerance : float
        The verdict's drift tolerance, relative to the offered work.
    blocks : int, default 10
        Batch-means blocks of the test.
    **simulate_kwargs
        To :func:`~queuetheory.simulate`: ``memory``, ``token_budget``, ``first_token``.

    Returns
    -------
    dict
        ``verdict``, ``drift`` (the mean of the seeds' relative drifts), ``drift_low``,
        ``drift_high`` (the widest over seeds), ``arrived``, ``unfinished``, ``wall_s``.

    Raises
    ------
    ValueError
        If ``rate`` is not a positive number or the workload cannot be rescaled
        (:func:`at_rate`), or :func:`~queuetheory.simulate` refuses the settings.
    """
    t0 = time.perf_counter()
    wl = at_rate(workload, rate)
    verdicts, drifts, lows, highs, arrived, unfinished = [], [], [], [], 0, 0
    for s in np.atleast_1d(seeds):
        tr = _with_backlog(wl, horizon, backlog, int(s))
        with warnings.catch_warnings():     # an unstable run's backlog is the evidence here
            warnings.simplefilter("ignore", CensoredRunWarning)
            res = simulate(tr, policy, time_model, horizon=horizon, seed=int(s),
                           **simulate_kwargs)
        later = tr.arrival > 0
        offered = float((tr.prompt[later] + tr.output[later]).sum()) / horizon
        paths = res.paths
        if len(paths) < 4 * blocks:
            g_verdict, rel, lo, hi = "inconclusive", float("nan"), -math.inf, math.inf
        else:
            g = path_growth_rate(paths["time"].to_numpy(), paths["unfinished_tokens"]
                                 .to_numpy(), end=horizon, offered=offered, blocks=blocks,
                                 level=level, tolerance=tolerance)
            g_verdict, rel = g.verdict, g.relative
            lo, hi = g.ci_low / offered, g.ci_high / offered
        verdicts.append(g_verdict)
        drifts.append(rel)
        lows.append(lo)
        highs.append(hi)
        arrived += len(tr)
        unfinished += int(res.live.size)
    return {"verdict": pool_verdicts(verdicts), "drift": float(np.mean(drifts)),
            "drift_low": min(lows), "drift_high": max(highs), "arrived": arrived,
            "unfinished": unfinished, "wall_s": time.perf_counter() - t0}


def _with_backlog(workload, horizon: float, backlog: int, seed: int):
    """``workload``'s arrivals up to ``horizon`` (seed ``seed``) with ``backlog`` requests
    of the same law queued at time 0 (drawn from a child stream of the seed)."""
    tr = workload.sample(horizon=horizon, seed=seed)
    first = workload.sample(n_requests=backlog, seed=np.random.SeedSequence([seed, 1]))
    fields = ("arrival", "prompt", "output", "cls", "lo", "hi", "priority")
    parts = {f: np.concatenate([getattr(first, f), getattr(tr, f)]) for f in fields}
    parts["arrival"][:backlog] = 0.0
    return dataclasses.replace(tr, **parts, blocks=None, block_size=None)


def saturated_rate(workload, policy, time_model, *, bracket, token_budget: int, seeds=(0, 1, 2),
                   n_requests: int = 1500, level: float = 0.95, **simulate_kwargs) -> dict:
    """The fluid estimate of one engine's boundary: its throughput while backlogged.

    Each seed runs the engine with ``n_requests`` queued at time 0 and arrivals at 1.2 times
    the bracket's upper bound (so the queue never empties), for the time the bound takes to
    serve ``n_requests``; the tokens processed per unit time over the run's second half,
    over a request's mean tokens of compute, are the backlogged throughput in requests.
    For a work-conserving scheduler (Sarathi, Orca, vLLM V1)
    this is the fluid model's boundary: below it a backlog drains, above it it grows. The
    seeds are independent replications: the answer is their mean with a Student-t interval
    at ``level``.

    Parameters
    ----------
    workload : Workload
        A :class:`~queuetheory.Workload` (its length law).
    policy : Policy
        The scheduler.
    time_model : TimeModel
        The batch-time model.
    bracket : Bracket
        The workload's :class:`~queuetheory.capacity.Bracket` (its upper bound).
    token_budget : int
        The per-batch token budget ``b``.
    seeds : iterable of int, default (0, 1, 2)
        Independent replications (at least two for an interval).
    n_requests : int, default 1500
        The backlog queued at time 0.
    level : float, default 0.95
        The interval's confidence level.
    **simulate_kwargs
        To :func:`~queuetheory.simulate`: ``memory``, ``first_token``.

    Returns
    -------
    dict
        ``rate`` (requests per time unit, at most the bracket's upper bound), ``interval``
        (``(low, high)``, NaN with one seed), ``per_seed``.

    Raises
    ------
    ValueError
        If the workload cannot be rescaled (:func:`at_rate`), or
        :func:`~queuetheory.simulate` refuses the settings.
    """
    from scipy import stats

    up = bracket.upper if np.isfinite(bracket.upper) else bracket.start
    horizon = n_requests / up
    per_seed = []
    for s in np.atleast_1d(seeds):
        tr = _with_backlog(at_rate(workload, 1.2 * up), horizon, n_requests, int(s))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CensoredRunWarning)
            res = simulate(tr, policy, time_model, horizon=horizon, seed=int(s),
                           token_budget=token_budget, **simulate_kwargs)
        log = res.log
        late = log.column("start") >= horizon / 2
        tokens = float(log.column("token_load")[late].sum())
        per_seed.append(tokens / (horizon / 2) / bracket.stats.work)
    x = np.asarray(per_seed)
    if x.size < 2:
        return {"rate": min(float(x.mean()), bracket.upper),
            "interval": (float("nan"), float("nan")),
                "per_seed": per_seed}
    half = stats.t.ppf((1 + level) / 2, x.size - 1) * x.std(ddof=1) / np.sqrt(x.size)
    top = bracket.upper                     # no schedule beats the upper bound
    mean = min(float(x.mean()), top)
    return {"rate": mean, "interval": (float(x.mean() - half), min(float(x.mean() + half),
                                                                  top)),
            "per_seed": per_seed}

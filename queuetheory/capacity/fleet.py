"""A fleet of identical engines behind a router, each with its own KV-cache limit, fed by a
drawn workload or a replayed trace (:func:`simulate_fleet`)."""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..engine import Engine
from ..engine.conventions import check_first_token
from ..errors import check_positive
from ..workload import Trace

#: The routers of :func:`simulate_fleet`: what each sends a new request to.
FLEET_ROUTERS = {
    "round_robin": "the next engine in turn",
    "random": "an engine drawn uniformly",
    "least_requests": "the engine with the fewest requests (join the shortest queue)",
    "least_tokens": "the engine with the fewest unprocessed tokens",
    "least_kv": "the engine with the least KV load: resident KV tokens plus the prompt "
                "tokens its waiting requests will write",
}


@dataclass(frozen=True, eq=False)
class FleetRun:
    """The records of one :func:`simulate_fleet` run.

    Attributes
    ----------
    requests : one row per request: ``engine``, ``arrival``, ``prompt``, ``output``,
        ``first_token``, ``finish``, ``tbt_max`` (NaN where not reached)
    batches : one row per batch of every engine (the engine's batch log plus ``engine``)
    engines, router, memory, token_budget, horizon : the fleet and the run's end
    """

    requests: pd.DataFrame
    batches: pd.DataFrame
    engines: int
    router: str
    memory: int | None
    token_budget: int
    horizon: float

    def utilisation(self, start: float = 0.0, max_reqs: int | None = None) -> dict:
        """Time-weighted use of each resource over ``[start, horizon]``, averaged over the
        engines: ``busy`` (share of time running a batch), ``tokens`` (batch tokens over
        the budget, while busy), ``kv`` (KV tokens over the memory limit), ``batch``
        (requests per batch over ``max_reqs``) and ``evictions`` per request."""
        b = self.batches[self.batches["start"] >= start]
        span = max(self.horizon - start, 1e-300) * self.engines
        w = b["duration"].to_numpy()
        busy = float(w.sum() / span)
        wsum = max(float(w.sum()), 1e-300)
        out = {"busy": busy,
               "tokens": float((w * b["token_load"]).sum() / wsum / self.token_budget),
               "kv": (float((w * b["memory"]).sum() / wsum / self.memory)
                      if self.memory else float("nan")),
               "batch": (float((w * (b["prefill_requests"] + b["decode_requests"])).sum()
                               / wsum / max_reqs) if max_reqs else float("nan")),
               "evictions": float(b["evicted"].sum() / max(len(self.requests), 1))}
        return out


def _kv_load(engine) -> int:
    """Resident KV tokens plus the prompt tokens still to be written by the engine's
    requests (what a KV-aware router balances)."""
    tab = engine.table
    live = engine.live
    if live.size == 0:
        return 0
    return int(engine.kv_total + (tab.prompt[live] - tab.prefilled[live]).clip(0).sum())


def _score(engine, router: str) -> float:
    if router == "least_requests":
        return engine.live.size
    if router == "least_tokens":
        return engine.work
    return _kv_load(engine)


def simulate_fleet(trace: Trace, policy, time_model, engines: int, *,
                   router: str = "round_robin", memory: int | None = None,
                   token_budget: int | None = None, first_token: str = "prefill",
                   horizon: float | None = None, seed: int = 0) -> FleetRun:
    """Run ``engines`` copies of one engine behind ``router`` on ``trace``.

    Every request goes, at its arrival, to the engine the router picks
    (:data:`FLEET_ROUTERS`); each engine runs its own copy of ``policy`` with KV limit
    ``memory`` (tokens per engine) and the ``first_token`` convention of
    :func:`~queuetheory.simulate` (the real engines' by default). Engines advance between
    arrivals; a router reads each engine's state at the arrival, the batch in flight
    counted as done (the router sees the load a batch later than a real one would, at most
    one iteration).

    Parameters
    ----------
    trace : the requests (a sampled :class:`~queuetheory.workload.Trace` or a replayed one)
    policy : the scheduler of every engine (copied per engine)
    time_model : the batch time of every engine
    engines : how many engines
    router : a key of :data:`FLEET_ROUTERS`
    memory : KV-cache tokens per engine (``None``: unlimited)
    token_budget : the per-batch token budget (default: the policy's)
    first_token : ``"prefill"`` or ``"decode"``
    horizon : stop starting batches at this time (default: when every request is done)
    seed : seeds the random router and the policies

    Returns
    -------
    FleetRun

    Raises
    ------
    ValueError : an unknown router, a non-positive engine count or memory, a request whose
        KV peak exceeds ``memory``
    """
    if router not in FLEET_ROUTERS:
        raise ValueError(f"router={router!r}: must be one of {sorted(FLEET_ROUTERS)}")
    K = int(check_positive("engines", engines, integer=True))
    emit = check_first_token(first_token) == "prefill"
    if memory is not None:
        check_positive("memory", memory, integer=True)
        peak = trace.prompt + trace.output - int(emit)
        if len(trace) and peak.max() > memory:
            raise ValueError(f"memory={memory}: below the KV peak {int(peak.max())} of a "
                             "request of the trace; it could never finish on one engine")
    budget = token_budget if token_budget is not None else policy.token_budget
    stop = np.inf if horizon is None else float(horizon)
    rng = np.random.default_rng(seed)
    fleet = []
    for k in range(K):
        pol = copy.deepcopy(policy)
        pol.reset(seed=seed * 1_000_003 + k)
        fleet.append(Engine(pol, time_model, memory=memory, budget=budget,
                            first_token=first_token, capacity=max(16, 2 * len(trace) // K)))
    free = np.zeros(K)                 # when each engine may start its next batch
    where = np.empty(len(trace), np.int64)
    ids = np.empty(len(trace), np.int64)
    fields = ("arrival", "prompt", "output", "cls", "lo", "hi", "priority")
    for i in range(len(trace)):
        t = float(trace.arrival[i])
        if t >= stop:
            where, ids = where[:i], ids[:i]
            break
        for k in range(K):
            _advance(fleet[k], free, k, t)
        if router == "round_robin":
            k = i % K
        elif router == "random":
            k = int(rng.integers(K))
        else:
            k = int(np.argmin([_score(e, router) for e in fleet]))
        one = Trace(*(getattr(trace, f)[i:i + 1] for f in fields))
        ids[i] = int(fleet[k].add(one)[0])
        where[i] = k
        free[k] = max(free[k], t)
    for k in range(K):
        _advance(fleet[k], free, k, stop)
    return FleetRun(_records(fleet, where, ids), _batches(fleet), K, router, memory,
                    int(budget), float(min(stop, free.max(initial=0.0)))
                    if stop == np.inf else stop)


def _advance(engine, free, k, until) -> None:
    """Run engine ``k`` from ``free[k]`` until it would start a batch at or after
    ``until`` (the next arrival) or idles."""
    while free[k] < until and engine.live.size:
        out = engine.advance(free[k], until, 1 << 62)
        if isinstance(out, tuple):
            free[k] = out[0]
            continue
        wake = out.until
        if wake is None or wake >= until:
            free[k] = until
            return
        free[k] = max(wake, np.nextafter(free[k], np.inf))


def _records(fleet, where, ids) -> pd.DataFrame:
    cols = ("arrival", "prompt", "output", "first_token", "finish", "tbt_max")
    parts = {c: np.empty(where.size) for c in cols}
    for k, e in enumerate(fleet):
        mine = where == k
        for c in cols:
            parts[c][mine] = e.table.column(c)[ids[mine]]
    return pd.DataFrame({"engine": where, **parts})


def _batches(fleet) -> pd.DataFrame:
    frames = [e.log.frame().assign(engine=k) for k, e in enumerate(fleet)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def fleet_trace(workload, rate: float, horizon: float, seed: int) -> Trace:
    """The arrivals a fleet sees up to ``horizon``: ``workload`` drawn at the total
    ``rate`` (a :class:`~queuetheory.Workload`), or a recorded trace replayed at that mean
    rate with its burstiness kept (:func:`~queuetheory.capacity.replay`, started at a
    seeded random offset into the trace so that seeds are distinct replications)."""
    from .rescale import at_rate, replay

    if isinstance(workload, Trace):
        n = len(workload)
        shift = int(np.random.default_rng(seed).integers(n))
        t = workload.arrival - workload.arrival[0]
        period = float(t[-1]) + float(t[-1]) / max(n - 1, 1)
        arrival = np.r_[t[shift:], t[:shift] + period] - t[shift]
        rolled = dataclasses.replace(workload.take(np.r_[shift:n, 0:shift]), arrival=arrival)
        return replay(rolled, rate, horizon)
    return at_rate(workload, rate).sample(horizon=horizon, seed=seed)

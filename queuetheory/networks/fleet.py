"""A fleet of identical engines behind a router: a drawn workload, a replayed trace or
closed-loop sessions, with each engine's KV limit and prefix cache.

Each engine runs its own copy of one scheduler on the shared time model; each arriving
request is sent, when it arrives, to one engine by the router:

- ``"round_robin"``: engines in turn; ``"random"``: one drawn uniformly;
- ``"least_requests"``: the fewest requests in it (join the shortest queue);
- ``"least_tokens"``: the fewest unprocessed tokens;
- ``"least_kv"``: the least KV load — the blocks a :class:`~queuetheory.policies.VLLMV1`
  holds (in tokens), else the resident KV tokens plus the prompt tokens still to write;
- ``"cache_aware"``: the rule of SGLang's and vLLM's routers: when the busiest engine holds
  more than ``balance_abs`` requests over the idlest **and** more than ``balance_rel`` times
  as many, the least-loaded engine; otherwise the engine whose prefix cache holds the longest
  prefix of the request, when that prefix is more than ``cache_threshold`` of the prompt,
  else the engine with the least KV load. The router reads each engine's actual cache (as a
  router that mirrors its engines' caches does).

A router reads each engine's state at the arrival, the batch in flight counted as done (it
sees the load at most one iteration late).
"""

from __future__ import annotations

import copy
import dataclasses
import heapq
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..engine import Engine
from ..engine.server import as_server
from ..errors import check_positive
from ..policies.vllm import prefix_keys
from ..workload import Trace
from ..workload.sessions import SessionPlan

__all__ = ["simulate_fleet", "FleetResult", "FLEET_ROUTERS"]

#: The routers of :func:`simulate_fleet`: what each sends a new request to.
FLEET_ROUTERS = {
    "round_robin": "the next engine in turn",
    "random": "an engine drawn uniformly",
    "least_requests": "the engine with the fewest requests (join the shortest queue)",
    "least_tokens": "the engine with the fewest unprocessed tokens",
    "least_kv": "the engine with the least KV load",
    "cache_aware": "the engine holding the longest cached prefix, balanced against load "
                   "(SGLang's and vLLM's routers' rule)",
}


@dataclass(frozen=True, eq=False)
class FleetResult:
    """The records of one :func:`simulate_fleet` run.

    Attributes
    ----------
    requests : pandas.DataFrame
        One row per request routed, in the trace's order: ``engine``, ``prompt``,
        ``output``, ``cached`` (prompt tokens a prefix cache served), ``first_token``,
        ``finish``, ``tbt_max`` (NaN where not reached), ``prefilled`` and ``decoded``
        (the request's progress at the run's end), ``arrival``, ``ttft``, ``latency``.
    batches : pandas.DataFrame
        One row per batch of every engine: the engine's batch log plus ``engine``.
    engines : int
        How many engines.
    router : str
        The router, a key of :data:`FLEET_ROUTERS`.
    memory : int or None
        KV-cache tokens per engine (``None``: unlimited).
    token_budget : int or None
        The per-batch token budget of every engine (``None``: none).
    horizon : float
        The run's end: the horizon given, else when the last batch ended.
    """

    requests: pd.DataFrame
    batches: pd.DataFrame
    engines: int
    router: str
    memory: int | None
    token_budget: int | None
    horizon: float

    def utilisation(self, start: float = 0.0, max_reqs: int | None = None) -> dict:
        """Time-weighted use of each resource over ``[start, horizon]``, averaged over the
        engines.

        Parameters
        ----------
        start : float, default 0.0
            The start of the window (batches that start before it are left out).
        max_reqs : int, optional
            The most requests a batch may hold, for ``batch`` (None: ``batch`` is NaN).

        Returns
        -------
        dict
            ``busy`` (share of time running a batch), ``tokens`` (batch tokens over the
            budget, while busy), ``kv`` (KV tokens over the memory limit), ``batch``
            (requests per batch over ``max_reqs``) and ``evictions`` per request; NaN where
            the limit is not set.
        """
        b = self.batches[self.batches["start"] >= start]
        span = max(self.horizon - start, 1e-300) * self.engines
        w = b["duration"].to_numpy()
        wsum = max(float(w.sum()), 1e-300)
        return {"busy": float(w.sum() / span),
                "tokens": (float((w * b["token_load"]).sum() / wsum / self.token_budget)
                           if self.token_budget else float("nan")),
                "kv": (float((w * b["memory"]).sum() / wsum / self.memory)
                       if self.memory else float("nan")),
                "batch": (float((w * (b["prefill_requests"] + b["decode_requests"])).sum()
                                / wsum / max_reqs) if max_reqs else float("nan")),
                "evictions": float(b["evicted"].sum() / max(len(self.requests), 1))}

    def per_engine(self) -> pd.DataFrame:
        """Per engine: what was routed to it and what it computed.

        Returns
        -------
        pandas.DataFrame
            One row per engine: ``requests`` routed to it, ``prompt_tokens``,
            ``cached_tokens`` (prompt tokens its cache served), ``mean_ttft``,
            ``prefix_hit_ratio`` and ``prefill_tokens`` (prefill tokens computed).
        """
        r = self.requests
        g = r.groupby("engine")
        df = pd.DataFrame({"requests": g.size(), "prompt_tokens": g["prompt"].sum(),
                           "cached_tokens": g["cached"].sum(), "mean_ttft": g["ttft"].mean()})
        df = df.reindex(range(self.engines), fill_value=0)
        df["prefix_hit_ratio"] = df["cached_tokens"] / df["prompt_tokens"].where(
            df["prompt_tokens"] > 0)
        pre = self.batches.groupby("engine")["prefill_tokens"].sum() if len(self.batches) \
            else pd.Series(dtype=float)
        df["prefill_tokens"] = pre.reindex(range(self.engines), fill_value=0).astype(np.int64)
        return df

    @property
    def metrics(self) -> dict:
        """TTFT and latency over the completed requests (``unfinished`` says how many did not
        complete), the fleet's prefix hit ratio (prompt tokens served by a cache over all
        prompt tokens asked for, recomputations included) and the load imbalance: the
        busiest engine's requests, and prefill tokens computed, over the mean (1 = even)."""
        r = self.requests
        done = r[r["finish"].notna()]
        per = self.per_engine()
        saved = int(r["cached"].sum())
        computed = int(per["prefill_tokens"].sum())
        return {
            "arrived": len(r), "completed": len(done), "unfinished": len(r) - len(done),
            "mean_ttft": float(done["ttft"].mean()),
            "p99_ttft": float(done["ttft"].quantile(.99)),
            "mean_latency": float(done["latency"].mean()),
            "p99_latency": float(done["latency"].quantile(.99)),
            "prefix_tokens_saved": saved,
            "prefix_hit_ratio": saved / (saved + computed) if saved + computed else 0.0,
            "request_imbalance": float(per["requests"].max() / per["requests"].mean()),
            "prefill_imbalance": float(per["prefill_tokens"].max()
                                       / max(per["prefill_tokens"].mean(), 1e-300)),
        }


class _Router:
    def __init__(self, rule, fleet, rng, block_size, cache_threshold, balance_abs,
                 balance_rel):
        self.rule, self.fleet, self.rng, self.bs = rule, fleet, rng, block_size
        self.threshold, self.abs, self.rel = cache_threshold, balance_abs, balance_rel
        self.turn = 0
        self.keys = None        # the prefix keys of the request routed last, if computed

    def _kv(self) -> np.ndarray:
        out = []
        for e in self.fleet:
            pool = getattr(e.policy, "pool", None)
            if pool is not None:
                out.append(pool.used * e.policy.block_size)
                continue
            live = e.live
            out.append(int(e.kv_total + (e.table.prompt[live] - e.table.prefilled[live])
                           .clip(0).sum()) if live.size else 0)
        return np.array(out)

    def __call__(self, trace: Trace, i: int) -> int:
        rule, fleet = self.rule, self.fleet
        self.keys = None
        if rule == "round_robin":
            self.turn += 1
            return (self.turn - 1) % len(fleet)
        if rule == "random":
            return int(self.rng.integers(len(fleet)))
        if rule == "least_tokens":
            return int(np.argmin([e.work for e in fleet]))
        if rule == "least_kv":
            return int(np.argmin(self._kv()))
        loads = np.array([e.live.size for e in fleet])
        if rule == "least_requests" or (loads.max() - loads.min() > self.abs
                                        and loads.max() > self.rel * loads.min()):
            return int(np.argmin(loads))
        keys = [] if trace.blocks is None else prefix_keys(trace.blocks[i], trace.block_size,
                                                           self.bs)
        self.keys = keys
        most = (int(trace.prompt[i]) - 1) // self.bs
        match = np.array([len(e.policy.pool.hits(keys, most)) if hasattr(e.policy, "pool")
                          else 0 for e in fleet]) * self.bs / int(trace.prompt[i])
        best = int(np.argmax(match))
        if match[best] > self.threshold:
            return best
        return int(np.argmin(self._kv()))


def simulate_fleet(trace, policy, time_model, engines: int = 1, *,
                   router: str = "round_robin", memory: int | None = None,
                   token_budget: int | None = None, first_token: str | None = None,
                   horizon: float | None = None, seed: int = 0,
                   cache_threshold: float = 0.3, balance_abs: int = 64,
                   balance_rel: float = 1.5, fast_path: bool = True) -> FleetResult:
    """Run ``engines`` copies of one engine behind ``router`` (module docstring).

    Engines advance between arrivals (in bulk where the policy allows); with sessions, one
    batch at a time in time order, each finished turn sending the session's next turn a
    think time later.

    Parameters
    ----------
    trace : Trace or SessionPlan
        The requests: a drawn or replayed :class:`~queuetheory.workload.Trace` (with prefix
        blocks for prefix caches to matter), or a
        :class:`~queuetheory.workload.SessionPlan` (closed-loop sessions).
    policy : Policy
        The scheduler of every engine (copied per engine), e.g. ``VLLMV1(...)``.
    time_model : TimeModel or Server
        The batch time of every engine, or a whole :class:`~queuetheory.engine.Server` (its
        settings then stand for ``memory``, ``token_budget`` and ``first_token``).
    engines : int, default 1
        How many engines.
    router : str, default "round_robin"
        A key of :data:`FLEET_ROUTERS`.
    memory : int, optional
        KV-cache tokens per engine (None: unlimited; a ``VLLMV1`` keeps its own blocks
        instead).
    token_budget : int, optional
        The per-batch token budget (None: the policy's).
    first_token : {"prefill", "decode"}, optional
        The first-token convention (None: ``"prefill"``).
    horizon : float, optional
        Stop starting batches at this time (None: when every request is done).
    seed : int, default 0
        Seeds the random router and engine ``k``'s policy.
    cache_threshold : float, default 0.3
        The ``cache_aware`` router's least share of the prompt a cached prefix must cover,
        in ``[0, 1]`` (the defaults of the three are SGLang's and vLLM's routers').
    balance_abs : int, default 64
        The ``cache_aware`` router balances load when the busiest engine holds more than
        this many requests over the idlest...
    balance_rel : float, default 1.5
        ...and more than this many times as many.
    fast_path : bool, default True
        Repeat steady decode-only batches in closed form where the policy promises them
        (:meth:`~queuetheory.engine.Engine.advance`); the records are the same as with
        ``fast_path=False``, which asks every engine's policy at every iteration.

    Returns
    -------
    FleetResult
        The requests' and batches' records of every engine.

    Raises
    ------
    ValueError
        An unknown router, a non-positive engine count or memory, a router setting out of
        its range, or a request whose KV peak exceeds ``memory``.
    UnsupportedSettingError
        If the policy refuses a setting (a ``ValueError`` too).
    """
    plan = None
    if isinstance(trace, SessionPlan):
        plan, trace = trace, trace.trace
    if router not in FLEET_ROUTERS:
        raise ValueError(f"router={router!r}: must be one of {sorted(FLEET_ROUTERS)}")
    K = int(check_positive("engines", engines, integer=True))
    server = as_server(time_model, token_budget=token_budget, memory=memory,
                       first_token=first_token)
    time_model, memory, first_token = server.time_model, server.memory, server.first_token
    emit = first_token == "prefill"
    check_positive("balance_abs", balance_abs, allow_zero=True)
    check_positive("balance_rel", balance_rel)
    if not 0 <= cache_threshold <= 1:
        raise ValueError(f"cache_threshold={cache_threshold!r}: must lie in [0, 1]")
    if memory is not None:
        peak = trace.prompt + trace.output - int(emit)
        if len(trace) and peak.max() > memory:
            raise ValueError(f"memory={memory}: below the KV peak {int(peak.max())} of a "
                             "request of the trace; it could never finish on one engine")
    server.check(policy, where="qt.networks.simulate_fleet")
    budget = server.budget_for(policy)
    stop = np.inf if horizon is None else float(horizon)
    fleet = []
    for k in range(K):
        pol = copy.deepcopy(policy)
        pol.reset(seed=seed * 1_000_003 + k)
        fleet.append(Engine(pol, time_model, memory=memory, token_budget=budget,
                            first_token=first_token, capacity=max(16, 2 * len(trace) // K)))
    route = _Router(router, fleet, np.random.default_rng(seed),
                    getattr(policy, "block_size", 16), cache_threshold, balance_abs,
                    balance_rel)
    where = np.full((len(trace), 2), -1, dtype=np.int64)
    rows_of: list[list[int]] = [[] for _ in range(K)]      # engine k's request r -> row
    arrival = trace.arrival.copy()
    first = np.arange(len(trace)) if plan is None else plan.first
    pending = [(float(arrival[i]), int(i)) for i in first]
    heapq.heapify(pending)
    free = np.zeros(K)                      # when each engine may start its next batch

    def follow_up(k, finished, end):        # closed sessions: the next turns are sent
        soonest = np.inf
        for r in finished.tolist():
            nxt = int(plan.next[rows_of[k][r]])
            if nxt >= 0:
                arrival[nxt] = end + plan.think[nxt]
                heapq.heappush(pending, (float(arrival[nxt]), nxt))
                soonest = min(soonest, float(arrival[nxt]))
        return soonest

    while True:
        t = min(pending[0][0] if pending else np.inf, stop)
        t = _run_until(fleet, free, t, None if plan is None else follow_up,
                       1 << 62 if fast_path else 1)
        if not pending or pending[0][0] >= stop:
            if t >= stop or not any(e.live.size for e in fleet):
                break
            continue
        while pending and pending[0][0] <= t:
            i = heapq.heappop(pending)[1]
            k = route(trace, i)
            if plan is None:
                where[i] = k, fleet[k].add(trace, rows=slice(i, i + 1))[0]
            else:                                   # a session's turn: its arrival set now
                one = dataclasses.replace(trace.take(slice(i, i + 1)), arrival=arrival[i:i + 1])
                where[i] = k, fleet[k].add(one)[0]
            if route.keys is not None and hasattr(fleet[k].policy, "share_keys"):
                fleet[k].policy.share_keys(int(where[i, 1]), route.keys)   # computed once
            rows_of[k].append(i)
            free[k] = max(free[k], float(arrival[i]))
    routed = where[:, 0] >= 0           # a horizon leaves later arrivals unrouted
    records = _records(fleet, where).assign(arrival=arrival)[routed].reset_index(drop=True)
    records["ttft"] = records["first_token"] - records["arrival"]
    records["latency"] = records["finish"] - records["arrival"]
    end = stop if stop < np.inf else float(free.max(initial=0.0))
    return FleetResult(records, _batches(fleet), K, router, memory, budget, end)


def _run_until(fleet, free, until, on_finish, most) -> float:
    """Run every engine through the batches that start before ``until``; returns the time
    the fleet was run to. Without ``on_finish`` each engine runs alone, in bulk where its
    policy allows; with it (closed sessions), one batch at a time in time order, each
    finish reported, and ``until`` moves earlier when a next turn is sent before it.
    ``most``: the most iterations one call to an engine may run (1: no fast path)."""
    if on_finish is None:
        for k, engine in enumerate(fleet):
            _advance(engine, free, k, until, most)
        return until
    while True:
        busy = [k for k, e in enumerate(fleet) if e.live.size and free[k] < until]
        if not busy:
            return until
        k = min(busy, key=free.__getitem__)
        out = fleet[k].advance(free[k], until, 1)
        if isinstance(out, tuple):
            free[k] = out[0]
            until = min(until, on_finish(k, out[1], out[0]))
        else:
            _idle(out, free, k, until)


def _advance(engine, free, k, until, most) -> None:
    """Run engine ``k`` from ``free[k]`` until it would start a batch at or after
    ``until`` (the next arrival) or idles."""
    while free[k] < until and engine.live.size:
        out = engine.advance(free[k], until, most)
        if isinstance(out, tuple):
            free[k] = out[0]
            continue
        if _idle(out, free, k, until):
            return


def _idle(batch, free, k, until) -> bool:
    """An idle policy waits for its own wake-up time or the next arrival; True when that is
    the next arrival."""
    wake = batch.until
    if wake is None or wake >= until:
        free[k] = until
        return True
    free[k] = max(wake, np.nextafter(free[k], np.inf))
    return False


def _records(fleet, where) -> pd.DataFrame:
    """The requests' rows of :class:`FleetResult` (``where``: each request's engine and
    row in that engine's table, ``-1`` where not routed)."""
    cols = ("prompt", "output", "cached", "first_token", "finish", "tbt_max", "prefilled",
            "decoded")
    parts = {c: np.full(len(where), np.nan) for c in cols}
    for k, e in enumerate(fleet):
        mine = np.flatnonzero(where[:, 0] == k)
        for c in cols:
            parts[c][mine] = e.table.column(c)[where[mine, 1]]
    df = pd.DataFrame({"engine": where[:, 0], **parts})
    for c in ("prompt", "output", "cached", "prefilled", "decoded"):
        df[c] = df[c].fillna(0).astype(np.int64)
    return df


def _batches(fleet) -> pd.DataFrame:
    frames = [e.log.frame().assign(engine=k) for k, e in enumerate(fleet)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

"""A fleet of identical engines behind a router, replaying a trace: where prefix caches
make the router's choice matter.

Each engine runs its own copy of one scheduler (typically :class:`~queuetheory.policies.
VLLMV1`, whose KV block pool keeps a prefix cache) on the shared time model; each arriving
request is sent, when it arrives, to one engine by the router:

- ``"round_robin"``: engines in turn;
- ``"least_requests"``: the engine with the fewest requests in it (join the shortest queue);
- ``"least_kv"``: the engine holding the fewest KV blocks;
- ``"cache_aware"``: the rule of SGLang's and vLLM's routers (``cache_aware``): when the
  busiest engine holds more than ``balance_abs`` requests over the idlest **and** more than
  ``balance_rel`` times as many, the least-loaded engine; otherwise the engine whose cache
  holds the longest prefix of the request, when that prefix is more than ``cache_threshold``
  of the prompt, else the engine holding the fewest KV blocks. The router sees each engine's
  actual cache (as a router that mirrors its engines' caches does), not an estimate.
"""

from __future__ import annotations

import copy
import dataclasses
import heapq
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..engine import Engine
from ..errors import check_positive
from ..policies.vllm import prefix_keys
from ..workload import Trace
from ..workload.sessions import SessionPlan

__all__ = ["simulate_fleet", "FleetResult", "FLEET_ROUTERS"]

FLEET_ROUTERS = ("round_robin", "least_requests", "least_kv", "cache_aware")


@dataclass
class FleetResult:
    """The records of a fleet run: ``requests`` (one row per request, in arrival order:
    ``engine``, ``arrival``, ``prompt``, ``output``, ``cached`` prompt tokens served by the
    engine's prefix cache, ``first_token``, ``finish``, ``ttft``, ``latency``), the
    ``engines`` and the ``router``."""

    requests: pd.DataFrame
    engines: list
    router: str

    def per_engine(self) -> pd.DataFrame:
        """Per engine: requests routed to it, prompt tokens, prompt tokens its cache served,
        its hit ratio, prefill tokens computed, mean TTFT."""
        r = self.requests
        g = r.groupby("engine")
        df = pd.DataFrame({"requests": g.size(), "prompt_tokens": g["prompt"].sum(),
                           "cached_tokens": g["cached"].sum(), "mean_ttft": g["ttft"].mean()})
        df = df.reindex(range(len(self.engines)), fill_value=0)
        df["prefix_hit_ratio"] = df["cached_tokens"] / df["prompt_tokens"].where(
            df["prompt_tokens"] > 0)
        df["prefill_tokens"] = [int(e.log.column("prefill_tokens").sum()) for e in self.engines]
        return df

    @property
    def metrics(self) -> dict:
        """TTFT and latency over the completed requests (``unfinished`` says how many did not
        complete), the fleet's prefix hit ratio (prompt tokens served by a cache over all
        prompt tokens asked for, recomputations included) and the load imbalance: the
        busiest engine's share of the requests, and of the prefill tokens computed, over
        the mean share (1 = even)."""
        r = self.requests
        done = r[r["finish"].notna()]
        per = self.per_engine()
        saved = int(r["cached"].sum())
        computed = int(per["prefill_tokens"].sum())
        return {
            "arrived": len(r), "completed": len(done), "unfinished": len(r) - len(done),
            "mean_ttft": float(done["ttft"].mean()), "p99_ttft": float(done["ttft"].quantile(.99)),
            "mean_latency": float(done["latency"].mean()),
            "p99_latency": float(done["latency"].quantile(.99)),
            "prefix_tokens_saved": saved,
            "prefix_hit_ratio": saved / (saved + computed) if saved + computed else 0.0,
            "request_imbalance": float(per["requests"].max() / per["requests"].mean()),
            "prefill_imbalance": float(per["prefill_tokens"].max()
                                       / max(per["prefill_tokens"].mean(), 1e-300)),
        }


class _Router:
    def __init__(self, rule, engines, block_size, cache_threshold, balance_abs, balance_rel):
        self.rule, self.engines, self.bs = rule, engines, block_size
        self.threshold, self.abs, self.rel = cache_threshold, balance_abs, balance_rel
        self.turn = 0

    def _blocks_held(self):
        return np.array([e.policy.pool.used if hasattr(e.policy, "pool") else int(e.kv_total)
                         for e in self.engines])

    def __call__(self, trace: Trace, i: int) -> int:
        loads = np.array([e.live.size for e in self.engines])
        if self.rule == "round_robin":
            self.turn += 1
            return (self.turn - 1) % len(self.engines)
        if self.rule == "least_requests":
            return int(np.argmin(loads))
        if self.rule == "least_kv":
            return int(np.argmin(self._blocks_held()))
        if loads.max() - loads.min() > self.abs and loads.max() > self.rel * loads.min():
            return int(np.argmin(loads))
        keys = [] if trace.blocks is None else prefix_keys(trace.blocks[i], trace.block_size,
                                                           self.bs)
        most = (int(trace.prompt[i]) - 1) // self.bs
        match = np.array([len(e.policy.pool.hits(keys, most)) if hasattr(e.policy, "pool")
                          else 0 for e in self.engines]) * self.bs / int(trace.prompt[i])
        best = int(np.argmax(match))
        if match[best] > self.threshold:
            return best
        return int(np.argmin(self._blocks_held()))


def simulate_fleet(trace, policy, time_model, *, engines: int = 1,
                   router: str = "cache_aware", cache_threshold: float = 0.3,
                   balance_abs: int = 64, balance_rel: float = 1.5, seed=0) -> FleetResult:
    """Replay ``trace`` on ``engines`` copies of ``policy`` behind ``router`` (module
    docstring), each on ``time_model``, until every request is done.

    Parameters
    ----------
    trace : the requests, with prefix blocks for the prefix caches to matter; or a
        :class:`~queuetheory.workload.SessionPlan`, whose later turns are sent a think time
        after the previous turn's answer (a closed loop)
    policy : the scheduler each engine runs a copy of (e.g. ``VLLMV1(...)``)
    time_model : one engine's batch time
    engines : how many engines
    router : one of :data:`FLEET_ROUTERS`
    cache_threshold, balance_abs, balance_rel : the ``cache_aware`` router's settings (its
        defaults are SGLang's and vLLM's routers')
    seed : seeds engine ``j``'s policy with ``seed + j``

    Returns
    -------
    FleetResult

    Raises
    ------
    ValueError
        A router not in :data:`FLEET_ROUTERS`, a count of engines that is not a positive
        integer, or a setting the policy refuses.
    """
    plan = None
    if isinstance(trace, SessionPlan):
        plan, trace = trace, trace.trace
    if router not in FLEET_ROUTERS:
        raise ValueError(f"router={router!r}: must be one of {FLEET_ROUTERS}")
    check_positive("engines", engines, integer=True)
    check_positive("balance_abs", balance_abs, allow_zero=True)
    check_positive("balance_rel", balance_rel)
    if not 0 <= cache_threshold <= 1:
        raise ValueError(f"cache_threshold={cache_threshold!r}: must lie in [0, 1]")
    reason = policy.supports(memory=None, first_token="prefill")
    if reason:
        raise ValueError(f"policy={policy!r}: {reason}")
    fleet = []
    for j in range(engines):
        p = copy.deepcopy(policy)
        p.reset(seed=seed + j)
        fleet.append(Engine(p, time_model, budget=getattr(p, "token_budget", None),
                            capacity=max(16, 2 * len(trace) // engines)))
    route = _Router(router, fleet, getattr(policy, "block_size", 16), cache_threshold,
                    balance_abs, balance_rel)
    rows_of: list[list[int]] = [[] for _ in range(engines)]   # engine j's request r: row
    where = np.full((len(trace), 2), -1, dtype=np.int64)
    arrival = trace.arrival.copy()
    pending = [(float(arrival[i]), int(i)) for i in
               (np.arange(len(trace)) if plan is None else plan.first)]
    heapq.heapify(pending)
    busy = np.full(engines, np.inf)
    done = [np.empty(0, np.int64)] * engines       # finishing with the running batch
    while True:
        t = min(busy.min(), pending[0][0] if pending else np.inf)
        if t == np.inf:
            break
        for j in np.flatnonzero(busy == t):
            busy[j] = np.inf
            if plan is not None:                    # the sessions' next turns are sent
                for r in done[j].tolist():
                    i = int(rows_of[j][r])
                    if plan.next[i] >= 0:
                        arrival[plan.next[i]] = t + plan.think[plan.next[i]]
                        heapq.heappush(pending, (arrival[plan.next[i]], int(plan.next[i])))
        while pending and pending[0][0] <= t:
            i = heapq.heappop(pending)[1]
            j = route(trace, i)
            one = trace.take(slice(i, i + 1))
            if plan is not None:
                one = dataclasses.replace(one, arrival=arrival[i:i + 1])
            where[i] = j, fleet[j].add(one)[0]
            rows_of[j].append(i)
        for j in np.flatnonzero(busy == np.inf):
            eng = fleet[j]
            if eng.live.size:
                out = eng.step(t)
                if isinstance(out, tuple):
                    busy[j], done[j] = t + out[0], out[1]
    if plan is not None:
        trace = dataclasses.replace(trace, arrival=arrival)
    return FleetResult(_records(trace, fleet, where), fleet, router)


def _records(trace, fleet, where) -> pd.DataFrame:
    cols = {c: np.empty(len(trace)) for c in ("first_token", "finish")}
    cached = np.zeros(len(trace), np.int64)
    for j, eng in enumerate(fleet):
        mine = np.flatnonzero(where[:, 0] == j)
        rid = where[mine, 1]
        for c in cols:
            cols[c][mine] = eng.table.column(c)[rid]
        cached[mine] = eng.table.column("cached")[rid]
    df = pd.DataFrame({"engine": where[:, 0], "arrival": trace.arrival, "prompt": trace.prompt,
                       "output": trace.output, "cached": cached, **cols})
    df["ttft"] = df["first_token"] - df["arrival"]
    df["latency"] = df["finish"] - df["arrival"]
    return df

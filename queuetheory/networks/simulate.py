"""Simulation of an :class:`AgentNetwork`: one shared :class:`~queuetheory.engine.Engine` per agent.

Event-driven (spec §1.4, "event-driven equivalent"): time jumps to the next batch end or
arrival. At each epoch, finished batches release their requests, which enter the next node
of their route at that same time (a fresh visit with lengths drawn for the new class), then
external arrivals are admitted, then every free agent with work starts its next batch. With
``net.slot`` set, arrivals in ``(n−1, n]`` are admitted at slot ``n``, so with
:class:`~queuetheory.UnitTime` every agent acts once per slot, simultaneously (spec §4).

A request is one external arrival; forks turn it into one task per branch, and the join
releases it when all its tasks are done.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..engine import Engine
from ..errors import check_positive
from ..metrics import path_growth_rate
from ..workload import RequestClass, Trace, Workload
from .graph import mean_tokens
from .traffic import agent_loads

__all__ = ["simulate", "NetworkResult"]


class _Lengths:
    """Per-visit lengths of one class, drawn in vectorised chunks."""

    def __init__(self, lengths: RequestClass, rng, chunk: int = 4096):
        self.lengths, self.rng, self.chunk = lengths, rng, chunk
        self.prompt = self.output = np.empty(0, np.int64)

    def take(self, n: int):
        if n > self.prompt.size:
            p, o = self.lengths.sample_lengths(self.rng, max(self.chunk, n))
            self.prompt = np.concatenate([self.prompt, p])
            self.output = np.concatenate([self.output, o])
        p, o = self.prompt[:n], self.output[:n]
        self.prompt, self.output = self.prompt[n:], self.output[n:]
        return p, o


def _grow(a: np.ndarray, n: int) -> np.ndarray:
    if n <= a.size:
        return a
    out = np.full(max(n, 2 * a.size), -1, dtype=a.dtype)
    out[: a.size] = a
    return out


class _Run:
    def __init__(self, net, horizon: float, seed):
        self.net, self.horizon = net, float(horizon)
        ss = np.random.SeedSequence(seed)
        s_arr, s_len, s_route, s_pol = ss.spawn(4)
        self.names = list(net.agents)
        self.where = {}                                  # class -> (agent index, local class)
        self.engines, self.local = [], []
        for j, (name, agent) in enumerate(net.agents.items()):
            mine = net.classes_at(name)
            self.local.append(mine)
            self.where.update({k: (j, c) for c, k in enumerate(mine)})
            policy = agent.make_policy(mine)
            policy.reset(seed=s_pol.spawn(1)[0])
            # Li, Dai, Peng §4: every output token takes a decode iteration of its own
            self.engines.append(Engine(policy, agent.time_model, budget=agent.token_budget,
                                       first_token="decode", n_classes=len(mine)))
        len_rngs = [np.random.default_rng(s) for s in s_len.spawn(len(self.where))]
        self.lengths = {k: _Lengths(net.nodes[k]["lengths"], r)
                        for k, r in zip(self.where, len_rngs, strict=True)}
        self.rng = np.random.default_rng(s_route)
        self.mean_tokens = {k: sum(mean_tokens(net.nodes[k]["lengths"])) for k in self.where}
        self.job_of = [np.empty(0, np.int64) for _ in self.engines]
        self._arrivals(s_arr)
        self.join_count = {v: np.zeros(self.n_jobs, np.int16) for v in net.nodes_of("join")}
        self.join_waiting = 0
        self.rr = {v: 0 for v in net.nodes_of("router")}
        self.tokens_in = 0
        self.done = 0

    def _arrivals(self, ss):
        sources = self.net.nodes_of("source")
        times, kinds = [], []
        for i, (s, child) in enumerate(zip(sources, ss.spawn(len(sources)), strict=True)):
            wl = Workload([RequestClass(1, 1, self.net.nodes[s]["rate"])],
                          arrivals=self.net.graph["arrivals"])
            t = wl.sample(horizon=self.horizon, seed=child).arrival
            times.append(t)
            kinds.append(np.full(t.size, i))
        t, kind = np.concatenate(times), np.concatenate(kinds)
        order = np.argsort(t, kind="stable")
        self.arrival, self.source = t[order], kind[order]
        self.sources = sources
        self.first = [next(iter(self.net.successors(s))) for s in sources]
        slot = self.net.slot
        self.admit = self.arrival if slot is None else np.ceil(self.arrival / slot - 1e-12) * slot
        self.n_jobs = int(t.size)
        self.finish = np.full(self.n_jobs, np.nan)

    # ---- routing ------------------------------------------------------------------------------
    def enter(self, node, jobs: np.ndarray, t: float):
        """Send ``jobs`` into ``node`` at time ``t``."""
        if jobs.size == 0:
            return
        d = self.net.nodes[node]
        kind = d["kind"]
        if kind == "class":
            j, c = self.where[node]
            p, o = self.lengths[node].take(jobs.size)
            n = jobs.size
            tr = Trace(np.full(n, t), p, o, np.full(n, c, np.int64), o, o, np.zeros(n, np.int64))
            ids = self.engines[j].add(tr)
            self.job_of[j] = _grow(self.job_of[j], int(ids[-1]) + 1)
            self.job_of[j][ids] = jobs
            self.tokens_in += int(p.sum() + o.sum())
            self.dirty[j] = True
        elif kind == "sink":
            self.finish[jobs] = t
            self.done += jobs.size
        elif kind == "fork":
            for v in self.net.successors(node):
                self.enter(v, jobs, t)
        elif kind == "join":
            count = self.join_count[node]
            np.add.at(count, jobs, 1)
            need = self.net.in_degree(node)
            ready = np.unique(jobs[count[jobs] >= need])
            self.join_waiting += jobs.size - need * ready.size
            self.enter(next(iter(self.net.successors(node))), ready, t)
        else:
            self._route(node, d["router"], jobs, t)

    def _route(self, node, rule, jobs, t):
        targets = list(self.net.successors(node))
        K = len(targets)
        if rule == "random":
            pick = self.rng.integers(0, K, jobs.size)
        elif rule == "round_robin":
            pick = (self.rr[node] + np.arange(jobs.size)) % K
            self.rr[node] += jobs.size
        else:
            agents = [self.where[v][0] for v in targets]
            if rule == "least_requests":
                score = np.array([self.engines[j].live.size + self.finishing[j].size
                                  for j in agents], float)
                step = np.ones(jobs.size)
            else:
                score = np.array([self.engines[j].work + self.in_batch[j] for j in agents],
                                 float)
                step = None
            pick = np.empty(jobs.size, np.int64)
            for i in range(jobs.size):           # each choice sees the ones before it
                pick[i] = int(np.argmin(score))  # ties: lowest index
                if step is not None:
                    score[pick[i]] += 1
                else:
                    score[pick[i]] += self.mean_tokens[targets[pick[i]]]
        for k in range(K):
            self.enter(targets[k], jobs[pick == k], t)

    # ---- the event loop -----------------------------------------------------------------------
    def run(self):
        J = len(self.engines)
        self.busy = np.full(J, np.inf)        # end of the running batch
        self.until = np.full(J, np.inf)       # an idling policy's wake-up time
        self.dirty = np.zeros(J, bool)        # new requests since the agent last idled
        self.idle = np.ones(J, bool)
        self.finishing = [np.empty(0, np.int64) for _ in range(J)]
        self.in_batch = np.zeros(J, np.int64)
        rows = []
        ptr = 0
        while True:
            nxt_arrival = self.admit[ptr] if ptr < self.n_jobs else np.inf
            t = min(self.busy.min(), nxt_arrival, self.until.min())
            if not t < self.horizon:
                break
            for j in np.flatnonzero(self.busy == t):
                fin = self.finishing[j]
                self.busy[j], self.in_batch[j] = np.inf, 0
                self.finishing[j] = np.empty(0, np.int64)
                self.idle[j] = False
                self._release(j, fin, t)
            stop = int(np.searchsorted(self.admit, t, side="right"))
            if stop > ptr:
                jobs = np.arange(ptr, stop)
                src = self.source[ptr:stop]
                for i in np.unique(src):
                    self.enter(self.first[i], jobs[src == i], t)
                ptr = stop
            for j in range(J):
                eng = self.engines[j]
                if self.busy[j] < np.inf or eng.live.size == 0:
                    continue
                if self.idle[j] and not self.dirty[j] and self.until[j] > t:
                    continue
                before = eng.work
                out = eng.step(t)
                self.dirty[j] = False
                if isinstance(out, tuple):
                    self.busy[j] = t + out[0]
                    self.finishing[j] = out[1]
                    self.in_batch[j] = before - eng.work
                    self.until[j] = np.inf
                else:
                    self.idle[j] = True
                    self.until[j] = np.inf if out.until is None else out.until
            rows.append((t, ptr - self.done, self.join_waiting,
                         *[e.live.size + f.size for e, f in zip(self.engines, self.finishing,
                                                                strict=True)],
                         *[e.work for e in self.engines]))
        return rows, ptr

    def _release(self, j, fin, t):
        if fin.size == 0:
            return
        cls = self.engines[j].table.cls[fin]
        jobs = self.job_of[j][fin]
        if fin.size == 1 or not np.count_nonzero(cls != cls[0]):     # one class
            node = self.local[j][cls[0]]
            self.enter(next(iter(self.net.successors(node))), jobs, t)
            return
        for c in np.unique(cls):
            node = self.local[j][c]
            self.enter(next(iter(self.net.successors(node))), jobs[cls == c], t)


@dataclass
class NetworkResult:
    """The records of one network run.

    ``paths``: at every epoch, ``requests`` (external requests in the network),
    ``tokens`` (unprocessed tokens at all agents, ``|X(n)|`` summed; the two panels of Figure 8),
    ``join_waiting`` and per agent ``requests[a]`` and ``tokens[a]``. ``requests`` (one row
    per external request), ``per_agent``, ``per_type`` and ``per_class`` are DataFrames;
    ``engines`` maps each agent to its :class:`~queuetheory.engine.Engine`.
    """

    net: object
    engines: dict
    paths: pd.DataFrame
    requests: pd.DataFrame
    horizon: float
    tokens_in: int
    local: dict
    job_of: dict

    def growth_rate(self, quantity: str = "tokens", **kwargs):
        """Block-means slope of ``tokens`` or ``requests`` (see
        :func:`~queuetheory.metrics.path_growth_rate`), relative to the tokens (requests) that
        entered the agents per time unit."""
        if quantity not in ("tokens", "requests"):
            raise ValueError(f"quantity={quantity!r}: must be 'tokens' or 'requests'")
        offered = (self.tokens_in if quantity == "tokens" else len(self.requests)) / self.horizon
        return path_growth_rate(self.paths["time"].to_numpy(), self.paths[quantity].to_numpy(),
                                end=self.horizon, offered=offered, quantity=quantity, **kwargs)

    def time_average(self, column: str) -> float:
        """Time average of a ``paths`` column over ``[first epoch, horizon]``."""
        t = self.paths["time"].to_numpy()
        y = self.paths[column].to_numpy(float)
        if t.size == 0:
            return 0.0
        dt = np.diff(np.append(t, self.horizon))
        return float((y * dt).sum() / max(self.horizon - t[0], 1e-300))

    @property
    def per_agent(self) -> pd.DataFrame:
        loads = agent_loads(self.net)["load"]
        rows = []
        for a, eng in self.engines.items():
            log = eng.log
            rows.append({"agent": a, "load": loads[a], "iterations": eng.iteration,
                         "busy_fraction": float(log.column("duration").sum()) / self.horizon,
                         "token_throughput": float(log.column("token_load").sum()) / self.horizon,
                         "mean_requests": self.time_average(f"requests[{a}]"),
                         "requests_end": int(self.paths[f"requests[{a}]"].iloc[-1]),
                         "tokens_end": int(self.paths[f"tokens[{a}]"].iloc[-1])})
        return pd.DataFrame(rows).set_index("agent")

    @property
    def per_type(self) -> pd.DataFrame:
        r = self.requests
        g = r.groupby("type")
        return pd.DataFrame({"arrived": g.size(), "completed": g["finish"].count(),
                             "mean_sojourn": g["sojourn"].mean(),
                             "p99_sojourn": g["sojourn"].quantile(0.99)})

    @property
    def visits(self) -> pd.DataFrame:
        """One row per visit of a request (or fork task) to a class: agent, class, request,
        lengths, entry (``arrival``), ``first_token`` and ``finish`` times."""
        frames = []
        for a, eng in self.engines.items():
            t = eng.table
            local = np.asarray(self.local[a], dtype=object)
            frames.append(pd.DataFrame({
                "agent": a, "class": local[t.column("cls")], "request": self.job_of[a][: t.n],
                "prompt": t.column("prompt"), "output": t.column("output"),
                "arrival": t.column("arrival"), "first_token": t.column("first_token"),
                "finish": t.column("finish")}))
        return pd.concat(frames, ignore_index=True)

    @property
    def per_class(self) -> pd.DataFrame:
        rows = []
        for a, eng in self.engines.items():
            t = eng.table
            cls, fin, arr = t.column("cls"), t.column("finish"), t.column("arrival")
            for c, k in enumerate(self.local[a]):
                mine = cls == c
                done = mine & ~np.isnan(fin)
                rows.append({"class": k, "agent": a, "visits": int(mine.sum()),
                             "completed": int(done.sum()),
                             "mean_sojourn": float(np.mean(fin[done] - arr[done]))
                             if done.any() else float("nan")})
        return pd.DataFrame(rows).set_index("class")

    @property
    def metrics(self) -> dict:
        r = self.requests
        done = r["finish"].notna()
        return {"horizon": self.horizon, "arrived": int(len(r)), "completed": int(done.sum()),
                "mean_sojourn": float(r.loc[done, "sojourn"].mean()),
                "mean_requests": self.time_average("requests"),
                "mean_tokens": self.time_average("tokens"),
                "requests_end": int(self.paths["requests"].iloc[-1]) if len(self.paths) else 0,
                "tokens_end": int(self.paths["tokens"].iloc[-1]) if len(self.paths) else 0}


def simulate(net, *, horizon: float, seed=0) -> NetworkResult:
    """Run ``net`` (an :class:`AgentNetwork`) from empty until ``horizon``.

    Every agent is the shared engine with its own policy; arrivals are the sources' Poisson
    processes, lengths are drawn per visit. Returns a :class:`NetworkResult`.
    """
    net.validate()
    check_positive("horizon", horizon)
    run = _Run(net, horizon, seed)
    rows, arrived = run.run()
    names = run.names
    cols = (["time", "requests", "join_waiting"] + [f"requests[{a}]" for a in names]
            + [f"tokens[{a}]" for a in names])
    paths = pd.DataFrame(rows, columns=cols) if rows else pd.DataFrame(columns=cols)
    paths["tokens"] = paths[[f"tokens[{a}]" for a in names]].sum(axis=1)
    reqs = pd.DataFrame({"type": np.asarray(run.sources, dtype=object)[run.source[:arrived]],
                         "arrival": run.arrival[:arrived], "finish": run.finish[:arrived]})
    reqs["sojourn"] = reqs["finish"] - reqs["arrival"]
    reqs.index.name = "request"
    return NetworkResult(net, dict(zip(names, run.engines, strict=True)), paths, reqs,
                         float(horizon), run.tokens_in, dict(zip(names, run.local, strict=True)),
                         dict(zip(names, run.job_of, strict=True)))

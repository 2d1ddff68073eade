"""The general path of the network simulation: one :class:`~queuetheory.engine.Engine` decision
per agent per epoch.

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

import numpy as np

from ..engine import Engine
from ..workload import RequestClass, Trace, Workload
from .graph import mean_tokens

__all__ = ["StepRun"]


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


class StepRun:
    """One run of a network: the arrivals, the per-class length streams, the routing, and
    the agents' engines stepped one decision at a time (:meth:`run`)."""

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
            self.engines.append(Engine(policy, agent.time_model, token_budget=agent.token_budget,
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
            p, o = self.lengths[node].take(jobs.size)
            self.tokens_in += int(p.sum() + o.sum())
            self._into_class(*self.where[node], jobs, p, o, t)
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
                score = np.array([self._requests_at(j) for j in agents], float)
                step = np.ones(jobs.size)
            else:
                score = np.array([self._tokens_at(j) for j in agents], float)
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

    def _into_class(self, j, c, jobs, prompt, output, t):
        """Admit ``jobs`` to agent ``j`` as visits of its local class ``c``."""
        n = jobs.size
        tr = Trace(np.full(n, t), prompt, output, np.full(n, c, np.int64), output, output,
                   np.zeros(n, np.int64))
        ids = self.engines[j].add(tr)
        self.job_of[j] = _grow(self.job_of[j], int(ids[-1]) + 1)
        self.job_of[j][ids] = jobs
        self.dirty[j] = True

    def _requests_at(self, j) -> int:
        """Agent ``j``'s requests as a least-requests router sees them: those of a running
        batch included."""
        return self.engines[j].live.size + self.finishing[j].size

    def _tokens_at(self, j) -> int:
        """Agent ``j``'s unprocessed tokens as a least-tokens router sees them: those of a
        running batch included."""
        return self.engines[j].work + self.in_batch[j]

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

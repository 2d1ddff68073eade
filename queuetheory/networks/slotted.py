"""The fast path of the network simulation: a per-slot kernel for unit-time networks.

Under :class:`~queuetheory.UnitTime` batches of one slot, with arrivals admitted on the
same slot grid (Li, Dai, Peng §4), every agent with work runs one batch per slot, all
agents in step. When every agent's scheduler is FCFS :class:`~queuetheory.policies.Sarathi`
or FCFS :class:`~queuetheory.policies.StaticPriority` (no ``max_reqs``; networks have no
KV-memory limit), a batch follows from a few counts per queue, where a *queue* is one class
of a static priority, or all the classes of Sarathi:

* its requests in decode, in arrival order, each owing ``o_i − decoded_i ≥ 1`` tokens:
  the queue decodes all of them (a *full* decode) when the budget left allows, else the
  first ones, as many as the budget allows (a *partial* decode, rare);
* the requests waiting for their prompt, FIFO, the head one perhaps part-way: the budget
  left after the decodes is filled with prompt tokens in order, the last prompt chunked
  (Li, Dai, Peng's rules 2.5a–d, decode-first within each queue);
* then the next queue in priority order, while budget is left.

A request that finishes its prompt decodes from the next slot on. Requests decoded at
every decode of their queue since some decode ``s`` are *in sync*: they are not touched
one by one; their completions are filed under the decode at which they finish, and the
time-between-tokens gap they share at each decode is counted once per queue and class.
A request skipped by a partial decode, or new in decode, is *loose* and handled alone
until its next decode. ``tbt_max`` of a request in sync is its maximum before ``s`` or the
largest gap between its queue's decodes since ``s``, read from a monotone stack of the
queue's gaps (suffix maxima).

The kernel reproduces :class:`~queuetheory.networks.stepped.StepRun` (the general path, one
:class:`~queuetheory.engine.Engine` decision per agent per slot) exactly: the same engine
tables, batch logs, TBT histograms, paths and routing, the same random draws in the same
order; ``tests/test_networks_slotted.py`` compares the two.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import deque

import numpy as np

from ..policies import Sarathi, StaticPriority
from ..timing import UnitTime
from ..workload import Trace
from .stepped import StepRun

__all__ = ["SlotRun", "covers"]

_NAN = float("nan")


def _queues(policy, n_classes: int):
    """The queues of an agent (lists of local classes, most important first), or ``None``
    when its policy is not one the kernel reproduces."""
    if getattr(policy, "order", None) != "fcfs" or getattr(policy, "max_reqs", 0) is not None:
        return None
    if type(policy) is Sarathi:
        return [list(range(n_classes))]
    if type(policy) is StaticPriority:
        order = [c for c in policy.class_order if 0 <= c < n_classes]
        if sorted(order) != list(range(n_classes)):
            return None         # the general path names the missing classes
        return [[c] for c in order]
    return None


def covers(net) -> bool:
    """Whether the kernel reproduces runs of ``net``: every agent runs UnitTime batches of
    exactly the network's slot (a whole number of time units, so that slot times add up
    exactly), with a policy :func:`_queues` accepts."""
    slot = net.slot
    if slot is None or not float(slot).is_integer():
        return False
    for name, agent in net.agents.items():
        tm = agent.time_model
        if type(tm) is not UnitTime or tm.count_duration(0, 1) != slot:
            return False
        mine = net.classes_at(name)
        if _queues(agent.make_policy(mine), len(mine)) is None:
            return False
    return True


class _Queue:
    """One queue of an agent (see the module doc)."""

    __slots__ = ("classes", "waiting", "head", "loose", "due", "synced", "ends", "stack_at",
                 "stack_gap")

    def __init__(self, classes, n_classes):
        self.classes = classes
        self.waiting = deque()      # ids waiting for (the rest of) their prompt, FIFO
        self.head = 0               # prompt tokens done of waiting[0]
        self.loose = []             # ids in decode handled one by one, in arrival order
        self.due = {}               # decode index -> ids in sync finishing at that decode
        self.synced = [0] * n_classes   # ids in sync, per class
        self.ends = []              # end time of every decode of the queue
        self.stack_at = []          # decode indices whose gap exceeds every later gap ...
        self.stack_gap = []         # ... and those gaps (strictly decreasing)

    def since(self, s: int) -> float:
        """The largest gap between the queue's decodes ``s`` and later ones (0: none)."""
        k = bisect_left(self.stack_at, s + 1)
        return self.stack_gap[k] if k < len(self.stack_at) else 0.0


class _Agent:
    """One agent's requests and queues, advanced one slot at a time."""

    def __init__(self, engine, n_classes):
        self.engine = engine
        self.budget = engine.policy.token_budget
        plan = _queues(engine.policy, n_classes)
        self.queues = [_Queue(cs, n_classes) for cs in plan]
        self.queue_of = [None] * n_classes
        for q in self.queues:
            for c in q.classes:
                self.queue_of[c] = q
        self.hist = [{} for _ in range(n_classes)]    # per class: gap -> tokens
        # per request id, in arrival order
        self.arrival, self.prompt, self.output, self.cls, self.job = [], [], [], [], []
        self.prefill_done, self.first, self.last, self.finish = [], [], [], []
        self.decoded, self.sync, self.tmax = [], [], []
        self.live = 0               # requests in the system
        self.work = 0               # their unprocessed tokens
        self.kv = 0                 # their KV tokens
        self.peak = 0
        self.rows = []              # the batch log, one tuple per batch
        self.pending = 0            # requests of the last batch not yet released ...
        self.in_batch = 0           # ... and its tokens

    def enter(self, c, jobs, prompt, output, t):
        n = len(prompt)
        start = len(self.prompt)
        self.arrival.extend([t] * n)
        self.prompt.extend(prompt)
        self.output.extend(output)
        self.cls.extend([c] * n)
        self.job.extend(jobs)
        for stamps in (self.prefill_done, self.first, self.last, self.finish):
            stamps.extend([_NAN] * n)
        self.decoded.extend([0] * n)
        self.sync.extend([-1] * n)
        self.tmax.extend([0.0] * n)
        self.queue_of[c].waiting.extend(range(start, start + n))
        self.live += n
        self.work += sum(prompt) + sum(output)

    def step(self, t, end):
        """Run one batch from ``t`` to ``end``; return the ids it finishes."""
        left = self.budget
        chunks = prefills = decodes = 0
        done = []
        prompt = self.prompt
        for q in self.queues:
            if left <= 0:
                break
            n = sum(q.synced) + len(q.loose)
            if n:
                k = n if n <= left else left
                self._decode(q, end, k, n, done)
                decodes += k
                left -= k
            waiting = q.waiting
            if left > 0 and waiting:
                head = q.head
                while left > 0 and waiting:
                    r = waiting[0]
                    rest = prompt[r] - head
                    prefills += 1
                    if rest <= left:
                        left -= rest
                        chunks += rest
                        waiting.popleft()
                        head = 0
                        self.prefill_done[r] = end
                        q.loose.append(r)
                    else:
                        head += left
                        chunks += left
                        left = 0
                q.head = head
        tokens = chunks + decodes
        used = self.kv + tokens
        self.peak = max(self.peak, used)
        self.work -= tokens
        self.rows.append((t, end - t, prefills, chunks, decodes, tokens, used, self.live,
                          self.work))
        if done:
            out = self.output
            self.kv = used - sum([prompt[r] + out[r] for r in done])
            self.live -= len(done)
            done.sort()
        else:
            self.kv = used
        self.pending, self.in_batch = len(done), tokens
        return done

    def _decode(self, q, end, k, n, done):
        """The queue's decode at ``end`` of its first ``k`` of ``n`` requests in decode."""
        ends = q.ends
        e = len(ends)
        if k < n:
            members = self._loosen(q, e)
            q.loose = members[k:]
            members = members[:k]
        else:
            members = q.loose
            q.loose = []
        ends.append(end)
        hist, cls = self.hist, self.cls
        if e:
            gap = end - ends[e - 1]
            at, gaps = q.stack_at, q.stack_gap
            while gaps and gaps[-1] <= gap:
                gaps.pop()
                at.pop()
            at.append(e)
            gaps.append(gap)
            for c in q.classes:
                m = q.synced[c]
                if m:
                    h = hist[c]
                    h[gap] = h.get(gap, 0) + m
        last, first, decoded, output = self.last, self.first, self.decoded, self.output
        tmax, due, synced = self.tmax, q.due, q.synced
        for r in members:
            before = last[r]
            if before == before:
                gap = end - before
                h = hist[cls[r]]
                h[gap] = h.get(gap, 0) + 1
                if gap > tmax[r]:
                    tmax[r] = gap
            else:
                first[r] = end
            d = decoded[r] + 1
            decoded[r] = d
            if d >= output[r]:
                last[r] = self.finish[r] = end
                done.append(r)
            else:
                self.sync[r] = e
                at = e + output[r] - d
                if at in due:
                    due[at].append(r)
                else:
                    due[at] = [r]
                synced[cls[r]] += 1
        finished = due.pop(e, None)
        if finished:
            sync = self.sync
            for r in finished:
                s = sync[r]
                sync[r] = -1
                decoded[r] = output[r]
                last[r] = self.finish[r] = end
                tmax[r] = max(tmax[r], q.since(s))
                synced[cls[r]] -= 1
            done.extend(finished)

    def _loosen(self, q, e):
        """Before decode ``e``: make every request in sync loose; return all the queue's
        requests in decode in arrival order."""
        members = list(q.loose)
        if q.due:
            sync, decoded, last, tmax = self.sync, self.decoded, self.last, self.tmax
            previous = q.ends[e - 1]
            for ids in q.due.values():
                for r in ids:
                    s = sync[r]
                    decoded[r] += e - 1 - s
                    last[r] = previous
                    tmax[r] = max(tmax[r], q.since(s))
                    sync[r] = -1
                members.extend(ids)
            q.due = {}
            q.synced = [0] * len(q.synced)
        members.sort()
        return members

    def to_engine(self):
        """Write the run into the agent's :class:`~queuetheory.engine.Engine`: its request
        table, live requests, counters, batch log and TBT histogram, as the general path
        leaves them."""
        eng = self.engine
        n = len(self.prompt)
        if n:
            prompt = np.array(self.prompt, dtype=np.int64)
            output = np.array(self.output, dtype=np.int64)
            eng.table.append(Trace(np.array(self.arrival, dtype=float), prompt, output,
                                   np.array(self.cls, dtype=np.int64), output, output,
                                   np.zeros(n, np.int64)))
        decoded, last, tmax = list(self.decoded), list(self.last), list(self.tmax)
        for q in self.queues:
            e = len(q.ends) - 1
            for ids in q.due.values():
                for r in ids:
                    s = self.sync[r]
                    decoded[r] += e - s
                    last[r] = q.ends[e]
                    tmax[r] = max(tmax[r], q.since(s))
        tab = eng.table
        prefilled = np.array(self.prompt, dtype=np.int64)
        waiting = []
        for q in self.queues:
            if q.waiting:
                ids = np.fromiter(q.waiting, dtype=np.int64, count=len(q.waiting))
                prefilled[ids] = 0
                prefilled[ids[0]] = q.head
                waiting.append(ids)
        for name, values in (("prefilled", prefilled), ("decoded", decoded),
                             ("prefill_done", self.prefill_done), ("first_token", self.first),
                             ("last_token", last), ("finish", self.finish), ("tbt_max", tmax)):
            getattr(tab, name)[:n] = values
        tab.in_decode[:n] = prefilled >= tab.prompt[:n]
        eng.live = np.flatnonzero(np.isnan(tab.finish[:n]))
        eng.iteration = len(self.rows)
        eng.work, eng.kv_total, eng.peak_memory = self.work, self.kv, self.peak
        if self.rows:
            cols = list(zip(*self.rows, strict=True))
            k = len(self.rows)
            eng.log.extend(k, np.array(cols[0]), np.array(cols[1]),
                           *(np.array(c, dtype=np.int64) for c in cols[2:6]), 0,
                           *(np.array(c, dtype=np.int64) for c in cols[6:]))
        for c, h in enumerate(self.hist):
            if h:
                eng.tbt.add_counted(np.array(list(h), dtype=float),
                                    np.array(list(h.values()), dtype=np.int64), c)
        return np.array(self.job, dtype=np.int64)


class SlotRun(StepRun):
    """A network run through the per-slot kernel (see the module doc); :func:`covers` says
    when it applies. Its :meth:`run` returns what :meth:`StepRun.run` returns and leaves the
    engines as that does."""

    def __init__(self, net, horizon, seed):
        super().__init__(net, horizon, seed)
        self.agents = [_Agent(eng, len(mine)) for eng, mine in zip(self.engines, self.local,
                                                                    strict=True)]
        self.slot = float(net.slot)
        self.next_of = [[next(iter(net.successors(k))) for k in mine] for mine in self.local]

    def _into_class(self, j, c, jobs, prompt, output, t):
        self.agents[j].enter(c, jobs.tolist(), prompt.tolist(), output.tolist(), t)

    def _requests_at(self, j) -> int:
        a = self.agents[j]
        return a.live + a.pending

    def _tokens_at(self, j) -> int:
        a = self.agents[j]
        return a.work + a.in_batch

    def run(self):
        agents, J = self.agents, len(self.agents)
        admit, n_jobs, slot = self.admit, self.n_jobs, self.slot
        finished = [[] for _ in range(J)]
        stepped = []
        rows = []
        ptr = 0
        t = float(admit[0]) if n_jobs else np.inf
        while t < self.horizon:
            for j in stepped:
                self._release(j, finished[j], t)
                agents[j].pending = agents[j].in_batch = 0
            if ptr < n_jobs and admit[ptr] <= t:
                stop = int(np.searchsorted(admit, t, side="right"))
                jobs = np.arange(ptr, stop)
                src = self.source[ptr:stop]
                for i in np.unique(src):
                    self.enter(self.first[i], jobs[src == i], t)
                ptr = stop
            end = t + slot
            stepped = [j for j in range(J) if agents[j].live]
            for j in stepped:
                finished[j] = agents[j].step(t, end)
            rows.append((t, ptr - self.done, self.join_waiting,
                         *[agents[j].rows[-1][7] if j in stepped else 0 for j in range(J)],
                         *[a.work for a in agents]))
            t = end if stepped else (float(admit[ptr]) if ptr < n_jobs else np.inf)
        for j, a in enumerate(agents):
            self.job_of[j] = a.to_engine()
        return rows, ptr

    def _release(self, j, done, t):
        if not done:
            return
        a = self.agents[j]
        cls, job = a.cls, a.job
        first = cls[done[0]]
        if all(cls[r] == first for r in done):
            self.enter(self.next_of[j][first], np.array([job[r] for r in done]), t)
            return
        for c in sorted({cls[r] for r in done}):
            self.enter(self.next_of[j][c], np.array([job[r] for r in done if cls[r] == c]), t)

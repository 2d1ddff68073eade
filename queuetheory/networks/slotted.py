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
    if (getattr(policy, "order", None) != "fcfs" or getattr(policy, "max_reqs", 0) is not None
            or getattr(policy, "chunk", False) is not True):
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

    __slots__ = ("classes", "several", "waiting", "head", "loose", "due", "synced", "n_sync",
                 "ends", "stack_at", "stack_gap")

    def __init__(self, classes, n_classes):
        self.classes = classes
        self.several = len(classes) > 1
        self.waiting = deque()      # ids waiting for (the rest of) their prompt, FIFO
        self.head = 0               # prompt tokens done of waiting[0]
        self.loose = []             # ids in decode handled one by one, in arrival order
        self.due = {}               # decode index -> ids in sync finishing at that decode
        self.synced = [0] * n_classes   # ids in sync, per class (kept with several) ...
        self.n_sync = 0                 # ... and in all
        self.ends = []              # end time of every decode of the queue
        self.stack_at = []          # decode indices whose gap exceeds every later gap ...
        self.stack_gap = []         # ... and those gaps (strictly decreasing)

    def since(self, s: int) -> float:
        """The largest gap between the queue's decodes ``s`` and later ones (0: none)."""
        k = bisect_left(self.stack_at, s + 1)
        return self.stack_gap[k] if k < len(self.stack_at) else 0.0


class _Stream:
    """A class's per-visit lengths as lists: the draws of
    :class:`~queuetheory.networks.stepped.StepRun`'s stream, in the same chunks."""

    def __init__(self, draws):
        self.law, self.rng, self.chunk = draws.lengths, draws.rng, draws.chunk
        self.prompt, self.output, self.at = [], [], 0

    def take(self, n: int):
        at = self.at
        if n > len(self.prompt) - at:
            p, o = self.law.sample_lengths(self.rng, max(self.chunk, n))
            self.prompt = self.prompt[at:] + p.tolist()
            self.output = self.output[at:] + o.tolist()
            at = 0
        self.at = at + n
        return self.prompt[at: at + n], self.output[at: at + n]


_ROW = 9        # start, duration, prefill requests and tokens, decodes, token load, memory,
                # requests in the system, unfinished tokens: the batch log less its evictions
_FIELDS = (("arrival", 0.0), ("prompt", 0), ("output", 0), ("cls", 0), ("job", 0),
           ("prefill_done", _NAN), ("first", _NAN), ("last", _NAN), ("finish", _NAN),
           ("decoded", 0), ("sync", -1), ("tmax", 0.0))


class _Agent:
    """One agent's requests and queues, advanced one slot at a time.

    Per request id (arrival order, as the engine numbers them) plain lists hold its
    lengths and stamps; ``decoded`` and ``tmax`` of a request in sync are those at its sync
    decode ``sync`` (``-1``: not in sync), ``last`` is kept for loose requests only."""

    def __init__(self, engine, n_classes):
        self.engine = engine
        self.budget = engine.policy.token_budget
        self.queues = [_Queue(cs, n_classes) for cs in _queues(engine.policy, n_classes)]
        self.queue_of = [None] * n_classes
        for q in self.queues:
            for c in q.classes:
                self.queue_of[c] = q
        self.hist = [{} for _ in range(n_classes)]    # per class: gap -> tokens that closed it
        for name, _ in _FIELDS:
            setattr(self, name, [])
        self.n = self.cap = 0
        self.live = 0               # requests in the system
        self.work = 0               # their unprocessed tokens
        self.kv = 0                 # their KV tokens
        self.peak = 0
        self.log = []               # the batch log, row after row (flat: few objects to track)
        self.pending = 0            # requests of the last batch not yet released ...
        self.in_batch = 0           # ... and its tokens

    def _grow(self, need):
        cap = max(need, 2 * self.cap, 1024)
        for name, fill in _FIELDS:
            getattr(self, name).extend([fill] * (cap - self.cap))
        self.cap = cap

    def enter(self, c, jobs, prompt, output, tokens, t):
        n = len(jobs)
        start = self.n
        stop = self.n = start + n
        if stop > self.cap:
            self._grow(stop)
        if n == 1:
            self.arrival[start], self.prompt[start], self.output[start] = t, prompt[0], output[0]
            self.cls[start], self.job[start] = c, jobs[0]
            self.queue_of[c].waiting.append(start)
        else:
            self.arrival[start:stop] = [t] * n
            self.prompt[start:stop] = prompt
            self.output[start:stop] = output
            self.cls[start:stop] = [c] * n
            self.job[start:stop] = jobs
            self.queue_of[c].waiting.extend(range(start, stop))
        self.live += n
        self.work += tokens

    def step(self, t, end):
        """Run one batch from ``t`` to ``end``; return the ids it finishes, sorted."""
        left = self.budget
        chunks = prefills = decodes = 0
        done = []
        for q in self.queues:
            if left <= 0:
                break
            n = q.n_sync + len(q.loose)
            if n:
                if n <= left:
                    self._decode(q, end, q.loose, done)
                    q.loose = []
                    decodes += n
                    left -= n
                else:
                    members = self._loosen(q)
                    q.loose = members[left:]
                    self._decode(q, end, members[:left], done)
                    decodes += left
                    left = 0
            waiting = q.waiting
            if left > 0 and waiting:
                prompt, head, loose = self.prompt, q.head, q.loose
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
                        loose.append(r)
                    else:
                        head += left
                        chunks += left
                        left = 0
                q.head = head
        tokens = chunks + decodes
        used = self.kv + tokens
        if used > self.peak:
            self.peak = used
        self.work -= tokens
        self.log.extend((t, end - t, prefills, chunks, decodes, tokens, used, self.live,
                         self.work))
        self.pending, self.in_batch = len(done), tokens
        if done:
            prompt, output = self.prompt, self.output
            self.kv = used - sum([prompt[r] + output[r] for r in done])
            self.live -= len(done)
            done.sort()
        else:
            self.kv = used
        return done

    def _decode(self, q, end, members, done):
        """The queue's next decode, at ``end``: every request in sync and the loose
        ``members``."""
        ends = q.ends
        e = len(ends)
        hist, cls, several = self.hist, self.cls, q.several
        if e:
            gap = end - ends[-1]
            at, gaps = q.stack_at, q.stack_gap
            if gaps and gaps[-1] == gap:
                at[-1] = e
            else:
                while gaps and gaps[-1] <= gap:
                    gaps.pop()
                    at.pop()
                at.append(e)
                gaps.append(gap)
            if q.n_sync:
                if several:
                    for c in q.classes:
                        m = q.synced[c]
                        if m:
                            h = hist[c]
                            h[gap] = h.get(gap, 0) + m
                else:
                    h = hist[q.classes[0]]
                    h[gap] = h.get(gap, 0) + q.n_sync
        ends.append(end)
        due = q.due
        if members:
            last, decoded, output, tmax = self.last, self.decoded, self.output, self.tmax
            sync, synced, joined = self.sync, q.synced, 0
            for r in members:
                before = last[r]
                if before == before:
                    gap = end - before
                    h = hist[cls[r]]
                    h[gap] = h.get(gap, 0) + 1
                    if gap > tmax[r]:
                        tmax[r] = gap
                else:
                    self.first[r] = end
                d = decoded[r] + 1
                decoded[r] = d
                if d >= output[r]:
                    last[r] = self.finish[r] = end
                    done.append(r)
                else:
                    sync[r] = e
                    at = e + output[r] - d
                    if at in due:
                        due[at].append(r)
                    else:
                        due[at] = [r]
                    joined += 1
                    if several:
                        synced[cls[r]] += 1
            q.n_sync += joined
        finished = due.pop(e, None)
        if finished:
            sync, tmax, decoded, output = self.sync, self.tmax, self.decoded, self.output
            last, finish, synced = self.last, self.finish, q.synced
            oldest, top = q.stack_at[0], q.stack_gap[0]     # the largest gap of all
            for r in finished:
                decoded[r] = output[r]
                last[r] = finish[r] = end
                s = sync[r]
                gap = top if oldest > s else q.since(s)
                if gap > tmax[r]:
                    tmax[r] = gap
                sync[r] = -1
                if several:
                    synced[cls[r]] -= 1
            q.n_sync -= len(finished)
            done.extend(finished)

    def _loosen(self, q):
        """Make every request of ``q`` in sync loose, as before the queue's next decode;
        return all its requests in decode, in arrival order."""
        members = list(q.loose)
        if q.due:
            sync, decoded, last, tmax = self.sync, self.decoded, self.last, self.tmax
            e = len(q.ends) - 1
            for ids in q.due.values():
                for r in ids:
                    s = sync[r]
                    decoded[r] += e - s
                    last[r] = q.ends[e]
                    tmax[r] = max(tmax[r], q.since(s))
                    sync[r] = -1
                members.extend(ids)
            q.due = {}
            q.synced = [0] * len(q.synced)
            q.n_sync = 0
        members.sort()
        return members

    def to_engine(self):
        """Write the run into the agent's :class:`~queuetheory.engine.Engine` (request table,
        live requests, counters, batch log, TBT histogram) as the general path leaves it;
        return the network request of every engine id."""
        for q in self.queues:
            self._loosen(q)         # stamps of the requests in sync, as of their last decode
        eng, n = self.engine, self.n
        if n:
            output = np.array(self.output[:n], dtype=np.int64)
            eng.table.append(Trace(np.array(self.arrival[:n]),
                                   np.array(self.prompt[:n], dtype=np.int64), output,
                                   np.array(self.cls[:n], dtype=np.int64), output, output,
                                   np.zeros(n, np.int64)))
        tab = eng.table
        prefilled = tab.prompt[:n].copy()
        for q in self.queues:
            if q.waiting:
                ids = np.fromiter(q.waiting, dtype=np.int64, count=len(q.waiting))
                prefilled[ids] = 0
                prefilled[ids[0]] = q.head
        for name, mine in (("prefilled", prefilled), ("decoded", self.decoded),
                           ("prefill_done", self.prefill_done), ("first_token", self.first),
                           ("last_token", self.last), ("finish", self.finish),
                           ("tbt_max", self.tmax)):
            getattr(tab, name)[:n] = mine[:n]
        tab.in_decode[:n] = prefilled >= tab.prompt[:n]
        eng.live = np.flatnonzero(np.isnan(tab.finish[:n]))
        k = eng.iteration = len(self.log) // _ROW
        eng.work, eng.kv_total, eng.peak_memory = self.work, self.kv, self.peak
        if k:
            cols = [self.log[i::_ROW] for i in range(_ROW)]
            ints = [np.array(c, dtype=np.int64) for c in cols[2:]]
            eng.log.extend(k, np.array(cols[0], dtype=float), np.array(cols[1], dtype=float),
                           *ints[:4], 0, *ints[4:])
        for c, h in enumerate(self.hist):
            if h:
                eng.tbt.add_counted(np.array(list(h), dtype=float),
                                    np.array(list(h.values()), dtype=np.int64), c)
        return np.array(self.job[:n], dtype=np.int64)


class SlotRun(StepRun):
    """A network run through the per-slot kernel (see the module doc); :func:`covers` says
    when it applies. Its :meth:`run` returns what :meth:`StepRun.run` returns and leaves the
    engines as that leaves them."""

    def __init__(self, net, horizon, seed):
        super().__init__(net, horizon, seed)
        self.agents = [_Agent(eng, len(mine)) for eng, mine in zip(self.engines, self.local,
                                                                    strict=True)]
        self.slot = float(net.slot)
        self.streams = {k: _Stream(d) for k, d in self.lengths.items()}
        self.kind = dict(net.nodes(data="kind"))
        self.succ = {v: list(net.successors(v)) for v in net}
        self.need = {v: net.in_degree(v) for v in net.nodes_of("join")}
        self.joined = {v: {} for v in self.need}
        self.next_of = [[self.succ[k][0] for k in mine] for mine in self.local]

    def enter(self, node, jobs, t):
        """Send ``jobs`` (a list, or an array from a router) into ``node`` at time ``t``."""
        if type(jobs) is np.ndarray:
            jobs = jobs.tolist()
        if not jobs:
            return
        kind = self.kind[node]
        if kind == "class":
            p, o = self.streams[node].take(len(jobs))
            tokens = sum(p) + sum(o)
            self.tokens_in += tokens
            j, c = self.where[node]
            self.agents[j].enter(c, jobs, p, o, tokens, t)
        elif kind == "sink":
            self.finish[jobs] = t
            self.done += len(jobs)
        elif kind == "fork":
            for v in self.succ[node]:
                self.enter(v, jobs, t)
        elif kind == "join":
            count, need = self.joined[node], self.need[node]
            ready = []
            for x in jobs:
                k = count.get(x, 0) + 1
                if k >= need:
                    del count[x]
                    ready.append(x)
                else:
                    count[x] = k
            ready.sort()
            self.join_waiting += len(jobs) - need * len(ready)
            self.enter(self.succ[node][0], ready, t)
        else:
            self._route(node, self.net.nodes[node]["router"], jobs, t)

    def _route(self, node, rule, jobs, t):
        """:meth:`StepRun._route` on a list: the join-the-least rules choose with plain
        floats, as the general path does with numpy (ties to the lowest index)."""
        if rule not in ("least_requests", "least_tokens"):
            super()._route(node, rule, np.array(jobs, dtype=np.int64), t)
            return
        targets = self.succ[node]
        agents = [self.where[v][0] for v in targets]
        if rule == "least_requests":
            score = [float(self._requests_at(j)) for j in agents]
            step = [1.0] * len(targets)
        else:
            score = [float(self._tokens_at(j)) for j in agents]
            step = [self.mean_tokens[v] for v in targets]
        picks = [[] for _ in targets]
        choices = range(len(targets))
        for x in jobs:                      # each choice sees the ones before it
            k = min(choices, key=score.__getitem__)
            picks[k].append(x)
            score[k] += step[k]
        for v, mine in zip(targets, picks, strict=True):
            self.enter(v, mine, t)

    def _requests_at(self, j) -> int:
        a = self.agents[j]
        return a.live + a.pending

    def _tokens_at(self, j) -> int:
        a = self.agents[j]
        return a.work + a.in_batch

    def run(self):
        agents, J = self.agents, len(self.agents)
        admit, source, n_jobs = self.admit.tolist(), self.source.tolist(), self.n_jobs
        slot, horizon, enter, first = self.slot, self.horizon, self.enter, self.first
        finished = [[] for _ in range(J)]
        everyone = range(J)
        stepped, flat = [], []
        ptr = 0
        t = admit[0] if n_jobs else np.inf
        while t < horizon:
            for j in stepped:
                if finished[j]:
                    self._release(j, finished[j], t)
                agents[j].pending = agents[j].in_batch = 0
            if ptr < n_jobs and admit[ptr] <= t:
                stop = ptr + 1
                while stop < n_jobs and admit[stop] <= t:
                    stop += 1
                kinds = source[ptr:stop]
                if stop - ptr == 1 or kinds.count(kinds[0]) == len(kinds):
                    enter(first[kinds[0]], list(range(ptr, stop)), t)
                else:
                    for i in sorted(set(kinds)):
                        enter(first[i], [x for x, k in zip(range(ptr, stop), kinds, strict=True)
                                         if k == i], t)
                ptr = stop
            end = t + slot
            counts = [a.live for a in agents]
            stepped = [j for j in everyone if counts[j]]
            for j in stepped:
                finished[j] = agents[j].step(t, end)
            flat.append(t)
            flat.append(ptr - self.done)
            flat.append(self.join_waiting)
            flat.extend(counts)
            flat.extend([a.work for a in agents])
            t = end if stepped else (admit[ptr] if ptr < n_jobs else np.inf)
        for j, a in enumerate(agents):
            self.job_of[j] = a.to_engine()
        return list(zip(*[iter(flat)] * (3 + 2 * J), strict=True)), ptr

    def _release(self, j, done, t):
        """Send the requests agent ``j`` finished (sorted ids) to their next nodes, class by
        class."""
        a = self.agents[j]
        cls, job, nxt = a.cls, a.job, self.next_of[j]
        c = cls[done[0]]
        if len(nxt) == 1 or all(cls[r] == c for r in done):
            self.enter(nxt[c], [job[r] for r in done], t)
            return
        for c in sorted({cls[r] for r in done}):
            self.enter(nxt[c], [job[r] for r in done if cls[r] == c], t)

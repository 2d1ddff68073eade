"""The rule ``slo_slack``: SLAI of Bari, Hegde and de Veciana (§6), without a KV-memory limit.

A decision of :class:`~queuetheory.policies.SLAI` orders the requests in decode by their
last schedulable time ``C_j = e_j + T_j − δ t̄`` (Eq. 8: ``e_j`` the end of the last batch
``j`` was in, ``T_j`` its class's TBT target, ``t̄`` the running mean batch duration), ties by
arrival; it serves the critical ones (``t ≥ C_j``) up to ``β``, then one chunk of the
prefill under way, new prompts (SPF or FCFS, paying first if asked) while fewer than ``α``
requests hold KV, and the non-critical decodes into what is left of the budget and ``β``.
The decodes it serves are therefore always a prefix of that order.

Every request served in a batch gets the same ``e_j``, the batch's end, so the requests in
decode fall into a few *groups* of equal key ``K = e_j + T_j`` (one class each), and since
``C = K − δ t̄`` for all of them the order is the groups' order by ``K``, by arrival within a
group. (Rounding may make ``C`` of two groups equal although their ``K`` differ, or two
classes may share a target; the decodes of groups with equal ``C`` are then merged by
arrival, as the stable sort does.) A decision thus costs a few integer operations per
group: how many decode, which whole groups and which part of one. Served groups of a class
merge into the largest of them (the others' members move), so that a group that waits and is
served again keeps its members.

Output tokens are recorded per group, not per token (:mod:`~.memberships`): a membership opens
when a request enters decode or moves into another group and closes when it moves or
finishes. Each group lists its members by the history index at which they emit their last
token (an entry of a member that has moved since is passed over).

The rule runs with a token-count time model, no KV-memory limit (SLAI's memory admission
and evictions are not covered: the engine steps), either first-token convention, and the
policy's own token budget.
"""

from __future__ import annotations

import heapq
from array import array
from bisect import bisect_left, insort
from collections import deque
from typing import NamedTuple

import numpy as np

from .common import durations, log_columns
from .memberships import write_back

__all__ = ["slo_slack", "Books"]


class Books(NamedTuple):
    """SLAI's books after the run, as if it had made every decision itself: the running
    mean batch duration and its count, the previous batch's start, each request's last
    token time ``e_j`` (NaN once finished) and the members of the last batch."""

    mean: float
    count: int
    prev_time: float | None
    e: np.ndarray | None
    prev_rids: np.ndarray


class _Group:
    """Requests in decode with equal key ``K = e + T`` and class ``cls``, sorted by id;
    ``hist``: the iterations the group was served in (the first: where it was formed);
    ``leaving``: history index of the last token -> the last membership opened with it
    (each membership links to the one opened before it with the same index)."""

    __slots__ = ("K", "cls", "members", "hist", "leaving", "gid")

    def __init__(self, K, cls, members, hist, gid):
        self.K, self.cls, self.members, self.hist, self.gid = K, cls, members, hist, gid
        self.leaving = {}


# long: bulk kernel, one pass per iteration in plain ints: helper calls per iteration cost its speed
def slo_slack(  # noqa: C901
        engine, t, stop, limit, *, tbt, alpha, beta, delta, spf, paying_first):
    """Run SLAI's decisions from ``t`` on a fresh engine without a KV-memory limit until
    the horizon ``stop``, the iteration cap ``limit`` or the last completion; write the
    records as if it had stepped; return the time reached and the policy's :class:`Books`.

    Parameters
    ----------
    engine : Engine
        A fresh engine without a KV-memory limit.
    t, stop, limit : float, float, float
        Start time, horizon and iteration cap.
    tbt : sequence of float
        The TBT target per class (the last one for classes beyond).
    alpha : int
        At most this many requests hold KV (SLAI's ``α``).
    beta : int or None
        At most this many critical decodes per batch (``β``; ``None``: the token budget).
    delta : float
        The offset ``δ`` of the last schedulable time, Bari et al. eq. (8).
    spf, paying_first : bool
        New prefills shortest prompt first (else FCFS); the paying class first.
    """
    tab = engine.table
    n = tab.n
    arrival = tab.column("arrival").tolist()
    prompt = tab.column("prompt").tolist()
    output = tab.column("output").tolist()
    cls_of = tab.column("cls").tolist()
    targets = list(tbt)
    target = [targets[min(c, len(targets) - 1)] for c in range(max(cls_of, default=0) + 1)]
    taus, new_tau = durations(engine.time_model)
    b = engine.token_budget
    e = tab.emit_first
    beta = b if beta is None else min(beta, b)
    queue = _WaitingQueue(spf, paying_first, prompt, tab.column("priority").tolist())

    # memberships, six numbers each: request, group, first and last history index, whether
    # the first entry is silent (the request entered decode there without emitting a token)
    # and the next membership of its group's leaving list; a membership is known by the
    # position of its first number
    mem = array("q")
    cur = [-1] * n                 # open membership of each request
    decoded = [0] * n              # tokens of its closed memberships
    prefill_end = [-1] * n
    finish = [-1] * n
    groups: list = []              # every group ever formed, by id
    order: list = []               # the groups with members, by K
    partial = partial_filled = partial_last = -1
    pre: list = []
    times, counts = array("d"), array("q")   # the batch log (:func:`.common.log_columns`)
    admitted = finished = ndec = carried = 0
    mean, count, prev_time = 0.0, 0, None         # a fresh policy's books
    work, kv, peak = engine.work, engine.kv_total, engine.peak_memory
    s = engine.iteration

    def new_group(K, c, members, first):
        g = _Group(K, c, members, [first], len(groups))
        groups.append(g)
        return g

    def join(r, g, silent):
        """Open ``r``'s membership at the last entry of ``g``'s history; return the
        history index of its last token (if it stays) and the membership."""
        mid = len(mem)
        a = len(g.hist) - 1
        mem.extend((r, g.gid, a, -1, silent, -1))
        cur[r] = mid
        return a + output[r] - decoded[r] - 1 + silent, mid

    def leave(r, last):
        mid = cur[r]
        mem[mid + 3] = last
        decoded[r] += last - mem[mid + 2] + 1 - mem[mid + 4]
        cur[r] = -1

    def move(rids, src, g, silent, gone):
        """Move ``rids`` from ``src`` into ``g`` at its last history entry; those whose
        token there is their last finish (into ``gone``); return the others."""
        old, idx, gid = len(src.hist) - 1, len(g.hist) - 1, g.gid
        leaving, stay = g.leaving, []
        for r in rids:
            mid = cur[r]                 # close the membership in src ...
            mem[mid + 3] = old
            d = decoded[r] = decoded[r] + old - mem[mid + 2] + 1 - mem[mid + 4]
            mid = cur[r] = len(mem)      # ... and open one in g
            mem.extend((r, gid, idx, -1, silent, -1))
            fin = idx + output[r] - d - 1 + silent
            if fin == idx:
                leave(r, idx)
                gone.append(r)
            else:
                mem[mid + 5] = leaving.get(fin, -1)
                leaving[fin] = mid
                stay.append(r)
        return stay

    while t < stop and s < limit:
        while admitted < n and arrival[admitted] <= t:
            work += prompt[admitted] + output[admitted]
            queue.push(admitted)
            admitted += 1
        live = admitted - finished
        if not live:
            if admitted == n:
                break
            t = arrival[admitted]
            continue
        if carried:                      # the policy books the previous batch (_observe)
            count += 1
            mean += (t - prev_time - mean) / count
        dm = delta * mean
        # how many decode: the critical ones up to beta, then the prefills, then the rest
        ncrit = 0
        for g in order:
            if t >= g.K - dm:
                ncrit += len(g.members)
            else:
                break
        d1 = ncrit if ncrit < beta else beta
        left = b - d1
        pre, chunk = [], []
        if partial >= 0 and left > 0:
            c = prompt[partial] - partial_filled
            c = c if c < left else left
            pre.append(partial)
            chunk.append(c)
            left -= c
        room = alpha - ndec - (partial >= 0)
        while room > 0 and left > 0 and queue:
            r = queue.pop()
            c = prompt[r] if prompt[r] < left else left
            pre.append(r)
            chunk.append(c)
            left -= c
            room -= 1
        chunk_sum = b - d1 - left
        cap2 = left if left < beta - d1 else beta - d1
        served = d1 + (min(cap2, ndec - ncrit) if cap2 > 0 else 0)
        tau = taus.get((chunk_sum, served)) or new_tau(chunk_sum, served)
        end = t + tau
        gone: list = []
        hosts: dict = {}
        if served:
            if served == ndec:           # every group, whole (the common case)
                whole, rest = order, []
            else:
                whole, rest = _split(order, served, dm, new_group, move, gone)
            if len(whole) == 1:
                hosts[whole[0].cls] = whole[0]
            else:
                for g in whole:          # the largest served group of each class hosts
                    h = hosts.get(g.cls)
                    if h is None or len(g.members) > len(h.members):
                        hosts[g.cls] = g
            for h in hosts.values():
                h.hist.append(s)
                idx = len(h.hist) - 1
                out = []
                mid = h.leaving.pop(idx, -1)
                while mid >= 0:          # (passing over members that moved since)
                    r = mem[mid]
                    if cur[r] == mid:
                        leave(r, idx)
                        out.append(r)
                    mid = mem[mid + 5]
                if out:
                    gone += out
                    mine = h.members
                    for r in out:
                        del mine[bisect_left(mine, r)]
            if len(whole) > 1:
                for g in whole:
                    h = hosts[g.cls]
                    if g is not h:
                        stay = move(g.members, g, h, 0, gone)
                        h.members = sorted(h.members + stay)
            order = rest
        ndec -= len(gone)
        # prefills: chunks, and completions (new decodes, or finished by their first token)
        new = []
        for j, r in enumerate(pre):
            c = chunk[j]
            if r == partial:
                if c < prompt[r] - partial_filled:
                    partial_filled += c
                    partial_last = s
                    continue
                partial = -1
            elif c < prompt[r]:
                partial, partial_filled, partial_last = r, c, s
                continue
            prefill_end[r] = s
            new.append(r)
        work -= chunk_sum + served + e * len(new)
        for r in new:
            c = cls_of[r]
            h = hosts.get(c)
            if h is None:
                h = hosts[c] = new_group(0.0, c, [], s)
            fin, mid = join(r, h, 1 - e)
            if fin == len(h.hist) - 1:
                leave(r, fin)
                gone.append(r)
            else:
                mem[mid + 5] = h.leaving.get(fin, -1)
                h.leaving[fin] = mid
                insort(h.members, r)
                ndec += 1
        for c, h in hosts.items():        # the batch's end is every served request's e_j
            if h.members:
                h.K = end + target[c]
                at = len(order)
                while at and order[at - 1].K > h.K:
                    at -= 1
                order.insert(at, h)
        used = kv + chunk_sum + served
        times.extend((t, tau))
        counts.extend((len(pre), chunk_sum, served, 0, used, live, work))
        peak = used if used > peak else peak
        for r in gone:
            finish[r] = s
            used -= prompt[r] + output[r] - e
        kv = used
        finished += len(gone)
        carried = live - len(gone)
        prev_time = t
        t = end
        s += 1
    for r in range(admitted):             # memberships still open
        if cur[r] >= 0:
            leave(r, len(groups[mem[cur[r] + 1]].hist) - 1)
    e_of, prev_rids = _write_back(engine, admitted, log_columns(times, counts), groups, mem,
                                  decoded, prefill_end, finish,
                                  (partial, partial_filled, partial_last), pre)
    engine.work, engine.kv_total, engine.peak_memory = work, kv, peak
    return t, Books(mean, count, prev_time, e_of, prev_rids)


class _WaitingQueue:
    """The requests not yet started, in the policy's order: SPF (prompt length, then
    arrival) or FCFS, paying class first with ``paying_first``. A heap of integer keys
    ``(rank · (longest prompt + 1) + prompt) · n + request`` (no tuples to keep alive)."""

    def __init__(self, spf, paying, prompt, priority):
        n = len(prompt)
        self.n, self.heap = max(n, 1), []
        self.fifo = deque() if not (spf or paying) else None
        top, longest = max(priority, default=0), max(prompt, default=0) + 1
        self.keys = [((top - priority[r] if paying else 0) * longest
                      + (prompt[r] if spf else 0)) * self.n + r for r in range(n)]

    def __bool__(self):
        return bool(self.heap) if self.fifo is None else bool(self.fifo)

    def push(self, r):
        if self.fifo is not None:
            self.fifo.append(r)
        else:
            heapq.heappush(self.heap, self.keys[r])

    def pop(self):
        return self.fifo.popleft() if self.fifo is not None else heapq.heappop(self.heap) % self.n


def _split(order, served, dm, new_group, move, gone):
    """The groups served whole this batch (the served part of a group that is served in
    part split off as a group of its own) and the groups left, in order."""
    i = cum = 0
    while i < len(order) and cum + len(order[i].members) <= served:
        cum += len(order[i].members)
        i += 1
    if cum == served and not (0 < i < len(order) and order[i - 1].K - dm == order[i].K - dm):
        return order[:i], order[i:]
    lo = hi = i if cum < served else i - 1
    hi = i
    C = order[i].K - dm
    while lo > 0 and order[lo - 1].K - dm == C:
        lo -= 1
    while hi + 1 < len(order) and order[hi + 1].K - dm == C:
        hi += 1
    run = order[lo: hi + 1]
    cum -= sum(len(g.members) for g in order[lo:i])
    take = [0] * len(run)                # decodes of a run of equal C go by arrival
    if len(run) > 1:
        for _, j in sorted((r, j) for j, g in enumerate(run) for r in g.members)[: served - cum]:
            take[j] += 1
    else:
        take[0] = served - cum
    whole, rest = order[:lo], []
    for g, k in zip(run, take, strict=True):
        if k == len(g.members):
            whole.append(g)
        elif not k:
            rest.append(g)
        else:                            # split: the smaller side moves to a new group
            last = g.hist[-1]
            P, R = g.members[:k], g.members[k:]
            if k <= len(R):
                f = new_group(g.K, g.cls, P, last)
                f.members = move(P, g, f, 1, gone)
                g.members = R
                whole.append(f)
                rest.append(g)
            else:
                f = new_group(g.K, g.cls, R, last)
                f.members = move(R, g, f, 1, gone)
                g.members = P
                whole.append(g)
                rest.append(f)
    return whole, rest + order[hi + 1:]


def _write_back(engine, admitted, cols, groups, memberships, decoded, prefill_end, finish,
                partial, last_pre):
    """The engine's records and state after the bulk run, as if it had stepped; return the
    policy's books: its ``e_j`` of the requests left (``None`` when none arrived), the
    members of the last batch."""
    r_part, filled, part_last = partial
    ends, at, hist, rid, lo, hi = write_back(
        engine, admitted, cols, [g.hist for g in groups],
        np.asarray(memberships, np.int64).reshape(-1, 6).T, decoded, prefill_end, finish)
    tab = engine.table
    if r_part >= 0:
        tab.prefilled[r_part] = filled
    e_of = None
    if admitted:
        e_of = np.full(admitted, np.nan)
        e_of[rid] = at[hi]              # memberships in time order: the last one stays
        if r_part >= 0:
            e_of[r_part] = ends[part_last - (engine.iteration - ends.size)]
        e_of[np.isfinite(tab.finish[:admitted])] = np.nan
    emitted_last = rid[(hist[hi] == ends.size - 1) & (hi >= lo)]
    return e_of, np.union1d(emitted_last, np.array(last_pre, dtype=np.int64))

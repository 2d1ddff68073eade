"""The rule ``cohorts``: WAIT and Nested WAIT of Ao et al. (Algorithms 1–2) without a KV-memory
limit.

Both schedulers run *cohort groups* all or nothing: WAIT a type ``j`` (its in-progress
prompts, all of class ``j``), Nested WAIT a segment ``i`` (the prompts admitted to it that
have not reached its last stage ``b_i``). A group runs in a batch when it is ready —
WAIT: at least ``n_j`` type-``j`` prompts wait for prefill; Nested WAIT: segments ``1..i``
all have at least ``n`` prompts at their entries — or, once no request will arrive any
more in a run that drains, when it has anything to do (the leftovers of the module notes of
:mod:`queuetheory.policies.wait`). A running group admits the first ``n`` of its entry queue
by arrival (a prefill of the whole prompt for a type or the first segment, a decode for a
later segment) and every member advances one stage; paused groups keep their caches. A
Nested WAIT prompt that reaches its segment's last stage moves to the next segment's entry
queue; a prompt that has all its output finishes. With no group ready the GPU idles until
the next arrival.

So a decision costs a few integer operations per group, and tokens are recorded per group
(:mod:`~.memberships`): a membership opens when a prompt is admitted to a group and closes
when it leaves it; each group lists its members by the history index at which they leave.

The rule runs with a token-count time model, no KV-memory limit (WAIT's and Nested WAIT's
memory gates are not covered: the engine steps), either first-token convention (the papers'
is ``"decode"``), and no token budget (neither scheduler has one).
"""

from __future__ import annotations

import heapq
from array import array
from functools import partial

from .common import durations
from .memberships import write_back

__all__ = ["cohorts", "cohorts_runner"]


def cohorts_runner(engine, policy):
    """The rule's entry in :data:`~queuetheory.engine.kernels.RULES`: the rule for WAIT (a
    group per type) or Nested WAIT (a group per segment, ``policy.segments``) without a
    KV-memory limit; ``None`` with one, or where the policy itself would refuse a request (a
    class without a threshold, an output past the last segment): the engine steps."""
    tab = engine.table
    if engine.memory is not None:
        return None
    segments = getattr(policy, "segments", None)
    if segments is not None:
        if tab.n and tab.column("output").max() > segments[-1]:
            return None
        return partial(cohorts, first_group=[0] * tab.n, thresholds=policy.thresholds,
                       bounds=segments, nested=True)
    if tab.n and tab.column("cls").max() >= len(policy.thresholds):
        return None
    return partial(cohorts, first_group=tab.column("cls").tolist(),
                   thresholds=policy.thresholds, bounds=None, nested=False)


class _Cohort:
    """One type or segment: threshold ``n``, entry queue (a heap of request ids), how many
    members (they all advance), the iterations it ran in (``hist``), and ``leaving``:
    history index -> the last membership that leaves there (linked to the one before)."""

    __slots__ = ("n", "last", "queue", "members", "hist", "leaving", "gid")

    def __init__(self, n, last, gid):
        self.n, self.last, self.gid = n, last, gid
        self.queue, self.members, self.hist, self.leaving = [], 0, [], {}


def cohorts(engine, t, stop, limit, *, first_group, thresholds, bounds, nested):
    """``first_group[r]``: the group a request enters first (its type; segment 0);
    ``bounds``: each group's last stage (None: the output length); ``nested``: groups run
    as a ready prefix and pass prompts on (Nested WAIT), else each on its own (WAIT)."""
    tab = engine.table
    n = tab.n
    arrival = tab.column("arrival").tolist()
    prompt = tab.column("prompt").tolist()
    output = tab.column("output").tolist()
    taus, new_tau = durations(engine.time_model)
    e = tab.emit_first
    groups = [_Cohort(k, None if bounds is None else bounds[g], g)
              for g, k in enumerate(thresholds)]
    mem = array("q")               # memberships, six numbers each (see slo_slack)
    cur = [-1] * n                 # open membership of each request
    decoded = [0] * n              # tokens of its closed memberships
    prefill_end = [-1] * n
    finish = [-1] * n
    rows = [array(code) for code in "ddqqqqqq"]
    start, dur, n_pre, chunks, decs, used_col, in_sys, work_col = rows
    admitted = finished = 0
    work, kv, peak = engine.work, engine.kv_total, engine.peak_memory
    final = engine._final
    ready: set = set()                   # groups whose entry queue is at the threshold
    busy: set = set()                    # groups with members or prompts at the entry
    s = engine.iteration
    while t < stop and s < limit:
        while admitted < n and arrival[admitted] <= t:
            work += prompt[admitted] + output[admitted]
            g = groups[first_group[admitted]]
            heapq.heappush(g.queue, admitted)
            if len(g.queue) == g.n:
                ready.add(g.gid)
            busy.add(g)
            admitted += 1
        live = admitted - finished
        if not live:
            if admitted == n:
                break
            t = arrival[admitted]
            continue
        done = final and admitted == n       # nothing will arrive: leftovers run
        # Nested WAIT's segments are run last first: the prompts a segment passes on join
        # the entry queue of one that has already admitted this batch's prompts
        if done:
            running = [g for g in reversed(groups) if g in busy] if nested else list(busy)
        elif nested:                         # the longest ready prefix
            k = 0
            while k in ready:
                k += 1
            running = groups[k - 1::-1] if k else ()
        else:
            running = [groups[j] for j in ready]
        if not running:                      # the GPU idles until the next arrival
            if admitted == n:
                break
            t = arrival[admitted]
            continue
        chunk_sum = n_prefill = decodes = 0
        gone = []
        for g in running:
            queue, last, gid = g.queue, g.last, g.gid
            decodes += g.members
            g.hist.append(s)                 # (a running group has members or admits)
            idx = len(g.hist) - 1
            leaving = g.leaving
            out = []
            mid = leaving.pop(idx, -1)
            while mid >= 0:
                out.append(mem[mid])
                mid = mem[mid + 5]
            if queue:                        # admissions: the first n by arrival
                new = [heapq.heappop(queue) for _ in range(min(g.n, len(queue)))]
                if len(queue) < g.n:
                    ready.discard(gid)
                if not nested or gid == 0:   # admitted by a prefill
                    n_prefill += len(new)
                    silent = 1 - e
                    for r in new:
                        chunk_sum += prompt[r]
                        prefill_end[r] = s
                else:
                    decodes += len(new)
                    silent = 0
                for r in new:
                    cap = output[r] if last is None or last > output[r] else last
                    mid = cur[r] = len(mem)
                    mem.extend((r, gid, idx, -1, silent, -1))
                    leave = idx + cap - decoded[r] - 1 + silent
                    if leave == idx:
                        out.append(r)
                    else:
                        mem[mid + 5] = leaving.get(leave, -1)
                        leaving[leave] = mid
                g.members += len(new)
            if out:
                g.members -= len(out)
                if last is None:             # WAIT: a member leaves with all its output
                    for r in out:
                        mem[cur[r] + 3] = idx
                        cur[r] = -1
                        decoded[r] = output[r]
                    gone += out
                else:
                    nxt = groups[gid + 1] if gid + 1 < len(groups) else None
                    for r in out:            # Nested WAIT: at the segment's last stage
                        mem[cur[r] + 3] = idx
                        cur[r] = -1
                        if last >= output[r]:
                            decoded[r] = output[r]
                            gone.append(r)
                        else:                # on to the next segment's entry queue
                            decoded[r] = last
                            heapq.heappush(nxt.queue, r)
                    if nxt is not None and nxt.queue:
                        if len(nxt.queue) >= nxt.n:
                            ready.add(nxt.gid)
                        busy.add(nxt)
            if not (g.members or queue):
                busy.discard(g)
        tau = taus.get((chunk_sum, decodes)) or new_tau(chunk_sum, decodes)
        used = kv + chunk_sum + decodes
        work -= chunk_sum + decodes + e * n_prefill
        start.append(t)
        dur.append(tau)
        n_pre.append(n_prefill)
        chunks.append(chunk_sum)
        decs.append(decodes)
        used_col.append(used)
        in_sys.append(live)
        work_col.append(work)
        peak = used if used > peak else peak
        for r in gone:
            finish[r] = s
            used -= prompt[r] + output[r] - e
        kv = used
        finished += len(gone)
        t = t + tau
        s += 1
    for r in range(admitted):                # memberships still open
        mid = cur[r]
        if mid >= 0:
            mem[mid + 3] = last = len(groups[mem[mid + 1]].hist) - 1
            decoded[r] += last - mem[mid + 2] + 1 - mem[mid + 4]
    write_back(engine, admitted, rows, [g.hist for g in groups], mem, decoded,
               prefill_end, finish)
    engine.work, engine.kv_total, engine.peak_memory = work, kv, peak
    return t

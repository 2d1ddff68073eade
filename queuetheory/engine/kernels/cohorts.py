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

Every entry queue is first in, first out by arrival, and so is every group: a group admits
in arrival order, and its members all enter at the same stage, so the cohorts that reach
the segment's last stage leave in the order they came. A group's entrants are therefore
known in advance — WAIT's type ``j``: the type-``j`` requests by arrival; Nested WAIT's
segment ``i``: the requests with more than ``b_{i−1}`` output tokens by arrival — and the
rule follows counts only: how many have reached the entry, how many were admitted, how many
are members. A cohort admitted in a group's run ``h`` (positions ``a..b`` of its entrants)
leaves, apart from the requests that finish inside the group (one look-up each), at run
``h + L − 1`` (``L`` the stages of the segment), when the next segment's entrants become
the survivors among positions ``< b``. So a decision costs a few integer operations per
group. At the end the counts become the records (:mod:`~.memberships`, in numpy): each
admitted request's membership of a group (its first and last run there), its stamps, and
the batch log's memory, population and unprocessed-work columns.

The rule runs with a token-count time model, no KV-memory limit (WAIT's and Nested WAIT's
memory gates are not covered: the engine steps), either first-token convention (the papers'
is ``"decode"``), and no token budget (neither scheduler has one).
"""

from __future__ import annotations

from bisect import bisect_right
from functools import partial

import numpy as np

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
        return partial(cohorts, thresholds=policy.thresholds, bounds=segments)
    if tab.n and tab.column("cls").max() >= len(policy.thresholds):
        return None
    return partial(cohorts, thresholds=policy.thresholds, bounds=None)


class _Cohort:
    """One type or segment. Fixed: threshold ``n``; ``entrants`` (request ids in entry
    order); ``prefill`` (entrants admitted by a prefill); ``first`` (stage of the entry,
    ``b_{i−1}``, 0 for a prefill) and ``silent`` (1 where the admitting prefill emits
    nothing); ``stay`` (per entrant, runs after its admission until it leaves); for the
    run: ``prompts`` (prefix sums of the entrants' prompts), ``ends``/``after`` (positions
    of the entrants that finish inside the group and their ``stay``, then a sentinel),
    ``passed`` (prefix counts of the entrants that go on), ``span`` (``L − 1``: the
    ``stay`` of those). State: entrants ``arrived`` at the entry and ``admitted``,
    ``members``, the next finisher ``p``, survivors ``gone_on``; ``hist`` (the iterations
    it ran in), ``filled`` (``admitted`` after each run), ``leaving`` (run -> finishers)."""

    __slots__ = ("n", "entrants", "prefill", "first", "silent", "stay", "finishes", "prompts",
                 "ends", "after", "passed", "span", "arrived", "admitted", "members", "p",
                 "gone_on", "hist", "filled", "leaving", "gid", "next")

    def __init__(self, gid, n, entrants, output, prompt, first, last, silent):
        self.gid, self.next = gid, None
        self.n, self.entrants, self.first, self.silent = n, entrants, first, silent
        self.prefill = first == 0
        out = output[entrants]
        cap = out if last is None else np.minimum(out, last)
        self.stay = cap - first - 1 + silent
        self.finishes = out <= (cap if last is None else last)
        self.prompts = np.concatenate([[0], np.cumsum(prompt[entrants])]).tolist() \
            if self.prefill else None
        ends = np.flatnonzero(self.finishes)
        self.ends = ends.tolist() + [entrants.size]           # the sentinel
        self.after = self.stay[ends].tolist()
        self.passed = np.concatenate([[0], np.cumsum(~self.finishes)]).tolist()
        self.span = None if last is None else last - first - 1 + silent
        self.arrived = self.admitted = self.members = self.p = self.gone_on = 0
        self.hist, self.filled, self.leaving = [], [], {}


def cohorts(engine, t, stop, limit, *, thresholds, bounds):
    """``bounds``: each segment's last stage (Nested WAIT: groups run as a ready prefix and
    pass prompts on), or None (WAIT: a group per type, each on its own)."""
    tab = engine.table
    n = tab.n
    arrival_np = tab.column("arrival")
    prompt_np, output_np = tab.column("prompt"), tab.column("output")
    arrival = arrival_np.tolist()
    taus, new_tau = durations(engine.time_model)
    e = int(tab.emit_first)
    nested = bounds is not None
    ids = np.arange(n)
    if nested:
        lows = (0,) + tuple(bounds[:-1])
        groups = [_Cohort(g, k, ids[output_np > lo], output_np, prompt_np, lo, hi,
                          1 - e if g == 0 else 0)
                  for g, (k, lo, hi) in enumerate(zip(thresholds, lows, bounds, strict=True))]
        for g, nxt in zip(groups, groups[1:], strict=False):
            g.next = nxt
        kind = None
    else:
        cls = tab.column("cls")
        groups = [_Cohort(g, k, ids[cls == g], output_np, prompt_np, 0, None, 1 - e)
                  for g, k in enumerate(thresholds)]
        kind = [groups[c] for c in cls.tolist()]
    head = groups[0]
    ready: set = set()                   # groups whose entry queue is at the threshold
    rows = [[] for _ in range(5)]
    start, dur, n_pre, chunks, decs = rows
    admitted = 0
    final = engine._final
    s = engine.iteration
    while t < stop and s < limit:
        if admitted < n and arrival[admitted] <= t:
            new = bisect_right(arrival, t, admitted)
            if nested:
                head.arrived = new
                if new - head.admitted >= head.n:
                    ready.add(0)
            else:
                for r in range(admitted, new):
                    g = kind[r]
                    g.arrived += 1
                    if g.arrived - g.admitted == g.n:
                        ready.add(g.gid)
            admitted = new
        # Nested WAIT's segments are run last first: the prompts a segment passes on join
        # the entry queue of one that has already admitted this batch's prompts
        if final and admitted == n:          # nothing will arrive: leftovers run
            running = [g for g in (reversed(groups) if nested else groups)
                       if g.members or g.arrived > g.admitted]
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
        for g in running:
            members = g.members
            decodes += members
            hist = g.hist
            idx = len(hist)
            hist.append(s)
            a = g.admitted
            c = g.arrived - a
            if c:                            # admissions: the first n by arrival
                if c > g.n:
                    c = g.n
                b = g.admitted = a + c
                if g.arrived - b < g.n:
                    ready.discard(g.gid)
                if g.prefill:
                    n_prefill += c
                    chunk_sum += g.prompts[b] - g.prompts[a]
                else:
                    decodes += c
                members += c
                ends, p = g.ends, g.p
                if ends[p] < b:              # those that finish inside the group
                    after, leaving = g.after, g.leaving
                    while ends[p] < b:
                        leave = idx + after[p]
                        if leave == idx:
                            members -= 1
                        else:
                            leaving[leave] = leaving.get(leave, 0) + 1
                        p += 1
                    g.p = p
            g.filled.append(g.admitted)
            if g.leaving:
                members -= g.leaving.pop(idx, 0)
            span = g.span
            if span is not None and idx >= span:     # a cohort reaches the last stage
                on = g.passed[g.filled[idx - span]]
                if on != g.gone_on:              # its survivors go on to the next entry
                    members -= on - g.gone_on
                    g.gone_on = on
                    nxt = g.next
                    nxt.arrived = on
                    if on - nxt.admitted >= nxt.n:
                        ready.add(nxt.gid)
            g.members = members
        tau = taus.get((chunk_sum, decodes)) or new_tau(chunk_sum, decodes)
        start.append(t)
        dur.append(tau)
        n_pre.append(n_prefill)
        chunks.append(chunk_sum)
        decs.append(decodes)
        t = t + tau
        s += 1
    _write_back(engine, admitted, groups, [np.array(r) for r in rows], e)
    return t


def _write_back(engine, admitted, groups, rows, e):
    """The counts become the records: each group's memberships (its entrants up to
    ``admitted``, each from its admission run to the run it leaves, or to the group's last
    run), each request's output count, prefill and finish; the batch log's memory,
    population and unprocessed-work columns from the iterations' admissions and
    completions (:func:`~.memberships.write_back` does the rest)."""
    tab = engine.table
    n = tab.n
    s0 = engine.iteration
    prompt, output = tab.column("prompt"), tab.column("output")
    decoded = np.zeros(n, dtype=np.int64)
    prefill_end = np.full(n, -1, dtype=np.int64)
    finish = np.full(n, -1, dtype=np.int64)
    mem = []
    for gid, g in enumerate(groups):     # in segment order: a request's in time order
        if not g.admitted:
            continue
        runs = len(g.hist)
        hist = np.array(g.hist, dtype=np.int64)
        filled = np.array(g.filled, dtype=np.int64)
        first = np.repeat(np.arange(runs), np.diff(filled, prepend=0))
        rid = g.entrants[:g.admitted]
        leave = first + g.stay[:g.admitted]
        closed = leave < runs
        last = np.where(closed, leave, runs - 1)
        mem.append(np.column_stack([rid, np.full(rid.size, gid), first, last,
                                    np.full(rid.size, g.silent), np.zeros(rid.size, np.int64)]))
        decoded[rid] = np.where(closed, g.first + g.stay[:g.admitted] + 1 - g.silent,
                                g.first + last - first + 1 - g.silent)
        done = closed & g.finishes[:g.admitted]
        finish[rid[done]] = hist[leave[done]]
        if g.prefill:
            prefill_end[rid] = hist[first]
    mem = np.concatenate(mem) if mem else np.zeros((0, 6), dtype=np.int64)
    start, dur, n_pre, chunks, decs = rows
    k = start.size
    start = start.astype(np.float64)
    n_pre, chunks, decs = (x.astype(np.int64) for x in (n_pre, chunks, decs))
    # per iteration: the tokens processed, and the requests that finished and their KV
    done = np.flatnonzero(finish >= 0)
    at = finish[done] - s0
    freed = np.bincount(at, weights=prompt[done] + output[done] - e, minlength=k)
    freed = freed.astype(np.int64)
    ended = np.bincount(at, minlength=k)
    processed = chunks + decs
    used = engine.kv_total + np.cumsum(processed) - (np.cumsum(freed) - freed)
    arrived = np.searchsorted(tab.column("arrival")[:admitted], start, side="right")
    in_sys = arrived - (np.cumsum(ended) - ended)
    brought = np.concatenate([[0], np.cumsum(prompt[:admitted] + output[:admitted])])
    work = engine.work + brought[arrived] - np.cumsum(processed + e * n_pre)
    peak = engine.peak_memory
    if k:
        peak = max(peak, int(used.max()))
    engine.kv_total += int(processed.sum() - freed.sum())
    engine.work += int(brought[-1] - processed.sum() - e * n_pre.sum())
    write_back(engine, admitted, (start, dur, n_pre, chunks, decs, used, in_sys, work),
               [g.hist for g in groups], mem, decoded, prefill_end, finish)
    engine.peak_memory = peak

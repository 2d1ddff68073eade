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
rule follows counts of them, never the requests one by one. Until the leftovers a running
group admits exactly ``n``, so its entrant ``q`` joins in its run ``q // n`` and leaves in
run ``q // n + stay`` (``stay``: the stages it has left there): WAIT's loop books each
member's departure (:func:`_ready_types`), Nested WAIT's reads a segment's decodes and
readiness per run from tables made before the loop (:func:`_ready_prefix`: a few list
look-ups per segment and batch). The leftovers — every group with work runs in every
batch, and with no arrival left no decision depends on time — are worked out group by
group in numpy, then timed batch by batch (:func:`_leftovers`). At the end the counts
become the records (:mod:`~.memberships`, in numpy): each admitted request's membership of
a group (its first and last run there), its stamps, and the batch log's memory,
population and unprocessed-work columns.

The rule runs with a token-count time model, no KV-memory limit (WAIT's and Nested WAIT's
memory gates are not covered: the engine steps), either first-token convention (the papers'
is ``"decode"``), and no token budget (neither scheduler has one).
"""

from __future__ import annotations

from bisect import bisect_right

import numpy as np

from .common import durations
from .memberships import write_back

__all__ = ["cohorts"]


class _Cohort:
    """One type or segment. Fixed: threshold ``n``; ``entrants`` (request ids in entry
    order); ``prefill`` (entrants admitted by a prefill); ``first`` (``b_{i−1}``, the stage
    before the entry; 0 for a prefill) and ``silent`` (1 where the admitting prefill emits
    nothing); per entrant ``stay`` (runs after its admission until it leaves) and
    ``finishes`` (its output ends inside the group); ``prompts`` (prefix sums of the
    entrants' prompts). State: entrants ``arrived`` at the entry and ``admitted``;
    ``hist`` (the iterations it ran in) and ``filled`` (``admitted`` after each run)."""

    __slots__ = ("n", "entrants", "prefill", "first", "silent", "stay", "finishes", "prompts",
                 "arrived", "admitted", "hist", "filled")

    def __init__(self, n, entrants, output, prompt, first, last, silent):
        self.n, self.entrants, self.first, self.silent = n, entrants, first, silent
        self.prefill = first == 0
        out = output[entrants]
        cap = out if last is None else np.minimum(out, last)
        self.stay = cap - first - 1 + silent
        self.finishes = out <= cap
        self.prompts = np.concatenate([[0], np.cumsum(prompt[entrants])]) \
            if self.prefill else None
        self.arrived = self.admitted = 0
        self.hist, self.filled = [], []

    def pending(self):
        """The members still in the group after its runs so far: their positions and the
        run (counted from now) in which each leaves."""
        runs, a = len(self.hist), self.admitted
        first = np.searchsorted(self.filled, np.arange(a), side="right")
        leave = first + self.stay[:a] - runs
        return np.flatnonzero(leave >= 0), leave[leave >= 0]


def cohorts(engine, t, stop, limit, *, thresholds, bounds):
    """Run WAIT or Nested WAIT from a fresh engine without a KV-memory limit at ``t`` up to
    the horizon ``stop`` or the iteration cap ``limit``; return the time reached.
    ``thresholds``: each group's threshold; ``bounds``: each segment's last stage (Nested
    WAIT: groups run as a ready prefix and pass prompts on), or None (WAIT: a group per
    type, each on its own). Every request must belong to a group: a class below
    ``len(thresholds)`` (WAIT), an output within the last segment (Nested WAIT)."""
    tab = engine.table
    n = tab.n
    prompt, output = tab.column("prompt"), tab.column("output")
    arrival = tab.column("arrival").tolist()
    taus, new_tau = durations(engine.time_model)
    e = int(tab.emit_first)
    ids = np.arange(n)
    rows = [[] for _ in range(5)]
    final = engine._final
    if bounds is not None:
        lows = (0,) + tuple(bounds[:-1])
        groups = [_Cohort(k, ids[output > lo], output, prompt, lo, hi, 1 - e if g == 0 else 0)
                  for g, (k, lo, hi) in enumerate(zip(thresholds, lows, bounds, strict=True))]
        t, s, admitted = _ready_prefix(groups, arrival, t, stop, limit, engine.iteration,
                                       final, rows, taus, new_tau)
    else:
        cls = tab.column("cls")
        groups = [_Cohort(k, ids[cls == g], output, prompt, 0, None, 1 - e)
                  for g, k in enumerate(thresholds)]
        t, s, admitted = _ready_types(groups, cls.tolist(), arrival, t,
                                      stop, limit, engine.iteration, final, rows, taus,
                                      new_tau)
    if final and admitted == n:
        t = _leftovers(groups, bounds is not None, t, stop, limit, s, rows, taus, new_tau)
    _write_back(engine, admitted, groups, [np.array(r) for r in rows], e)
    return t


def _full_runs(g):
    """What each run of ``g`` does while every run admits exactly ``n`` (entrant ``q``
    joins in run ``q // n`` and leaves in run ``q // n + stay``): the decodes of run ``h``
    (members before it, and the entrants it admits by a decode); the prompt tokens it
    prefills; and how many entrants have gone on to the next segment after ``h`` runs."""
    full = np.arange(g.entrants.size // g.n + 1)
    leave = np.arange(g.entrants.size) // g.n + g.stay
    left = np.searchsorted(np.sort(leave), full)               # left before run h
    decodes = (g.n * full - left + (0 if g.prefill else g.n))[:-1].tolist()
    prompts = np.diff(g.prompts[::g.n]).tolist() if g.prefill else None
    return decodes, prompts, np.searchsorted(np.sort(leave[~g.finishes]), full)


def _ready_types(groups, kind, arrival, t, stop, limit, s, final, rows, taus, new_tau):
    """WAIT until its leftovers run (or the run stops): the ready types run, each admitting
    ``n`` (a prefill), what a run does read from :func:`_full_runs`. Returns ``t``, the
    iteration and the requests admitted."""
    n_req = len(arrival)
    start, dur, n_pre, chunks, decs = rows
    tables = [_full_runs(g) for g in groups]
    decodes_at = [d for d, _, _ in tables]
    prompts_at = [p for _, p, _ in tables]
    size = [g.n for g in groups]
    runs = [0] * len(groups)
    arrived = [0] * len(groups)
    hists = [g.hist for g in groups]
    ready: set = set()                   # types whose entry queue is at the threshold
    admitted = 0
    while t < stop and s < limit:
        if admitted < n_req and arrival[admitted] <= t:
            new = bisect_right(arrival, t, admitted)
            for r in range(admitted, new):
                j = kind[r]
                arrived[j] += 1
                if arrived[j] == size[j] * (runs[j] + 1):
                    ready.add(j)
            admitted = new
        if final and admitted == n_req:  # the leftovers: cohorts() goes on
            break
        if not ready:                    # the GPU idles until the next arrival
            if admitted == n_req:
                break
            t = arrival[admitted]
            continue
        chunk_sum = n_prefill = decodes = 0
        for j in list(ready):
            h = runs[j]
            decodes += decodes_at[j][h]
            chunk_sum += prompts_at[j][h]
            n_prefill += size[j]
            runs[j] = h + 1
            hists[j].append(s)
            if arrived[j] < size[j] * (h + 2):
                ready.discard(j)
        tau = taus.get((chunk_sum, decodes)) or new_tau(chunk_sum, decodes)
        start.append(t)
        dur.append(tau)
        n_pre.append(n_prefill)
        chunks.append(chunk_sum)
        decs.append(decodes)
        t = t + tau
        s += 1
    for j, g in enumerate(groups):
        g.arrived, g.admitted = arrived[j], g.n * runs[j]
        g.hist = np.array(g.hist, dtype=np.int64)
        g.filled = np.arange(g.n, g.admitted + 1, g.n)
    return t, s, admitted


def _ready_prefix(groups, arrival, t, stop, limit, s, final, rows, taus, new_tau):
    """Nested WAIT until its leftovers run (or the run stops): every segment of the ready
    prefix admits exactly ``n``, so what a run does is read from :func:`_full_runs`, and a
    segment is ready for its run ``h`` once the segment before has made the runs that bring
    its ``n (h + 1)``-th entrant. Returns ``t``, the iteration and the requests admitted."""
    n_req, last = len(arrival), len(groups)
    decodes_at, chunk_at, went_on = zip(*(_full_runs(g) for g in groups), strict=True)
    ready_after = [None] + [         # runs of the segment before, for n entrants a run
        np.searchsorted(on, g.n * np.arange(1, g.entrants.size // g.n + 1)).tolist()
        + [n_req + 1] for on, g in zip(went_on, groups[1:], strict=False)]
    head = groups[0]
    n0 = head.n
    chunk_at = chunk_at[0]
    first_decodes = decodes_at[0]
    arrival = arrival + [np.inf]         # a sentinel
    done_at = n_req if final else -1     # the leftovers run from there: cohorts() goes on
    runs = [0] * last
    ks = []                              # the ready prefix of each batch
    start, dur, n_pre, chunks, decs = rows
    s0, admitted, h0 = s, 0, 0
    while t < stop and s < limit:
        if arrival[admitted] <= t:
            admitted = bisect_right(arrival, t, admitted)
        if admitted == done_at:
            break
        if admitted < n0 * (h0 + 1):     # the GPU idles until the next arrival
            if admitted == n_req:
                break
            t = arrival[admitted]
            continue
        chunk_sum = chunk_at[h0]
        decodes = first_decodes[h0]
        prev = h0
        h0 += 1
        g = 1                            # the longest ready prefix
        while g < last:
            h = runs[g]
            if prev < ready_after[g][h]:
                break
            decodes += decodes_at[g][h]
            runs[g] = h + 1
            prev = h
            g += 1
        ks.append(g)
        tau = taus.get((chunk_sum, decodes)) or new_tau(chunk_sum, decodes)
        start.append(t)
        dur.append(tau)
        decs.append(decodes)
        t = t + tau
        s += 1
    runs[0] = h0
    chunks += chunk_at[:h0]
    n_pre += [n0] * h0
    ks = np.array(ks, dtype=np.int64)
    for gid, g in enumerate(groups):
        g.admitted = g.n * runs[gid]
        g.arrived = admitted if gid == 0 else int(went_on[gid - 1][runs[gid - 1]])
        g.hist = s0 + np.flatnonzero(ks > gid)
        g.filled = np.arange(g.n, g.admitted + 1, g.n)
    return t, s, admitted


def _leftovers(groups, nested, t, stop, limit, s, rows, taus, new_tau):
    """Once nothing will arrive, every group with members or entrants waiting runs in every
    batch, admitting up to ``n``: what each does in the ``i``-th batch from now follows from
    its own entrants, group by group in numpy. With ``A_i`` entrants arrived by batch ``i``,
    ``admitted_i = min(admitted_{i−1} + n, A_i)``, a running minimum; a member leaves
    ``stay`` batches after its admission (the group runs in every batch while it has
    members); a Nested WAIT segment's survivors reach the next entry one batch later. The
    batches then run in order up to the horizon or iteration cap. Returns ``t``."""
    start, dur, n_pre, chunks, decs = rows
    inflow = None                        # survivors reaching this segment's entry, per batch
    parts = []
    for g in groups:
        pos, leave = g.pending()
        arrived = np.full(1, g.arrived, dtype=np.int64)
        if inflow is not None and inflow.size:
            arrived = g.arrived + np.concatenate([[0], np.cumsum(inflow)])
        waiting = int(arrived[-1]) - g.admitted
        size = max(arrived.size + -(-waiting // g.n) + int(g.stay.max(initial=0)) + 1,
                   int(leave.max(initial=-1)) + 2)
        arrived = np.concatenate([arrived, np.full(size - arrived.size, arrived[-1])])
        i = np.arange(1, size + 1)
        after = g.n * i + np.minimum(g.admitted, np.minimum.accumulate(arrived - g.n * i))
        before = np.concatenate([[g.admitted], after[:-1]])
        q = np.arange(g.admitted, after[-1])
        joined = np.searchsorted(after, q, side="right")
        leave = np.concatenate([leave, joined + g.stay[q]])
        pos = np.concatenate([pos, q])
        left = np.bincount(leave, minlength=size)
        members = before - g.admitted + pos.size - q.size - (np.cumsum(left) - left)
        running = (members > 0) | (arrived > before)
        admits = after - before
        dec = members + (0 if g.prefill else admits)
        pre = g.prompts[after] - g.prompts[before] if g.prefill else None
        parts.append((running, after, dec, admits if g.prefill else None, pre))
        if nested:
            inflow = np.bincount(leave[~g.finishes[pos]], minlength=size)
            inflow = inflow[:np.flatnonzero(inflow)[-1] + 1] if inflow.any() else inflow[:0]
    size = max(p[0].size for p in parts)

    def total(k):
        out = np.zeros(size, dtype=np.int64)
        for p in parts:
            if p[k] is not None:
                out[:p[k].size] += p[k]
        return out

    busy = np.zeros(size, dtype=bool)
    for p in parts:
        busy[:p[0].size] |= p[0]
    batches = int(np.count_nonzero(busy))
    decodes, admits, prompts = total(2).tolist(), total(3).tolist(), total(4).tolist()
    i = 0
    while i < batches and t < stop and s < limit:
        chunk_sum, d = prompts[i], decodes[i]
        tau = taus.get((chunk_sum, d)) or new_tau(chunk_sum, d)
        start.append(t)
        dur.append(tau)
        n_pre.append(admits[i])
        chunks.append(chunk_sum)
        decs.append(d)
        t = t + tau
        s += 1
        i += 1
    s0 = s - i
    for g, (running, after, *_) in zip(groups, parts, strict=True):
        ran = np.flatnonzero(running[:i])
        g.hist = np.concatenate([g.hist, s0 + ran])
        g.filled = np.concatenate([g.filled, after[ran]])
        if ran.size:
            g.admitted = int(after[ran[-1]])
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
    mem = np.empty((5, sum(g.admitted for g in groups)), dtype=np.int64)  # memberships'
    at = 0                                                       # columns, group by group
    for gid, g in enumerate(groups):     # in segment order: a request's in time order
        if not g.admitted:
            continue
        runs = len(g.hist)
        hist, filled = g.hist, g.filled
        first = np.repeat(np.arange(runs), np.diff(filled, prepend=0))
        rid = g.entrants[:g.admitted]
        leave = first + g.stay[:g.admitted]
        closed = leave < runs
        last = np.where(closed, leave, runs - 1)
        block = mem[:, at: at + rid.size]
        block[0], block[1], block[2], block[3], block[4] = rid, gid, first, last, g.silent
        at += rid.size
        decoded[rid] = np.where(closed, g.first + g.stay[:g.admitted] + 1 - g.silent,
                                g.first + last - first + 1 - g.silent)
        done = closed & g.finishes[:g.admitted]
        finish[rid[done]] = hist[leave[done]]
        if g.prefill:
            prefill_end[rid] = hist[first]
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
    write_back(engine, admitted, (start, dur, n_pre, chunks, decs, 0, used, in_sys, work),
               [g.hist for g in groups], mem, decoded, prefill_end, finish)
    engine.peak_memory = peak

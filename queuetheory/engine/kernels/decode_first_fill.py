"""The rule ``decode_first_fill``: Sarathi-Serve with FCFS order (see :mod:`..kernels`)."""

from __future__ import annotations

import heapq
from array import array
from bisect import bisect_left
from itertools import accumulate, repeat

import numpy as np

from .common import (
    RepeatedBatches,
    add_inner_gaps,
    durations,
    log_columns,
    stamp_runs,
    tail_of,
    write_log,
    write_runs,
    write_states,
)

__all__ = ["decode_first_fill", "decode_first_fill_memory"]


def decode_first_fill(engine, t, stop, limit):
    """The rule without a KV-memory limit or ``max_reqs`` (see :mod:`..kernels`): run from a
    fresh engine at ``t`` up to the horizon ``stop`` or ``limit`` iterations; return the time
    reached. Without a token budget (the engine's is ``None``) every prompt enters whole at
    the first iteration after it arrives, as FCFSRestart without a memory limit decides
    (every request in the system runs each iteration)."""
    tab = engine.table
    n = tab.n
    arrival = tab.column("arrival").tolist()
    prompt = tab.column("prompt").tolist()
    output = tab.column("output").tolist()
    taus, new_tau = durations(engine.time_model)
    b = float("inf") if engine.token_budget is None else engine.token_budget
    e = tab.emit_first           # 1: the iteration that ends a prompt emits its first token
    prefill_end = [-1] * n       # iteration in which each prompt finished
    leaving: dict = {}           # iteration -> requests that emit their last token in it
    freed: dict = {}             # iteration -> their KV tokens
    times, counts = array("d"), array("q")   # the batch log (:func:`.common.log_columns`)
    admitted = finished = head = head_done = decoding = 0
    work, kv, peak = engine.work, engine.kv_total, engine.peak_memory
    s = engine.iteration
    while t < stop and s < limit:
        while admitted < n and arrival[admitted] <= t:
            work += prompt[admitted] + output[admitted]
            admitted += 1
        live = admitted - finished
        if not live:
            if admitted == n:
                break
            t = arrival[admitted]
            continue
        room, chunk_sum, members, done, i = b - decoding, 0, 0, 0, head
        while room and i < admitted:
            left = prompt[i] - head_done
            c = left if left < room else room
            chunk_sum += c
            room -= c
            members += 1
            if c == left:        # the prompt finishes in this iteration
                prefill_end[i] = s
                last = s + output[i] - e
                leaving[last] = leaving.get(last, 0) + 1
                freed[last] = freed.get(last, 0) + prompt[i] + output[i] - e
                done += 1
                i += 1
                head_done = 0
            else:
                head_done += c
        head = i
        tau = taus.get((chunk_sum, decoding)) or new_tau(chunk_sum, decoding)
        used = kv + chunk_sum + decoding
        work -= chunk_sum + decoding + e * done
        times.extend((t, tau))
        counts.extend((members, chunk_sum, decoding, 0, used, live, work))
        peak = used if used > peak else peak
        gone = leaving.pop(s, 0)
        kv = used - freed.pop(s, 0)
        finished += gone
        decoding += done - gone
        t = t + tau
        s += 1
    _write_back(engine, np.array(prefill_end[:admitted], dtype=np.int64), admitted, head,
                head_done, log_columns(times, counts))
    engine.work, engine.kv_total, engine.peak_memory = work, kv, peak
    return t


def _write_back(engine, prefill_end, admitted, head, head_done, cols):
    """The engine's records and state after the bulk run, as if it had stepped."""
    start, dur = cols[:2]
    k = start.size
    s0 = write_log(engine, admitted, cols)
    tab = engine.table
    ends = start + dur                                   # t + τ, as the engine adds them
    gaps = ends - start                                  # the gap each decode closes
    ids = np.flatnonzero(prefill_end >= 0)
    q = prefill_end[ids] - s0                            # local iteration of the last chunk
    f = q + 1 - tab.emit_first                           # ... and of the first token
    out = tab.output[ids]
    emitted = np.minimum(out, k - f)                     # tokens out by the end of the run
    tab.prefilled[ids] = tab.prompt[ids]
    tab.in_decode[ids] = True
    tab.prefill_done[ids] = ends[q]
    tab.decoded[ids] = emitted
    talked = emitted > 0
    tab.first_token[ids[talked]] = ends[f[talked]]
    tab.last_token[ids[talked]] = ends[(f + emitted - 1)[talked]]
    over = emitted == out
    tab.finish[ids[over]] = ends[(f + out - 1)[over]]
    # a request's gaps are those of iterations f+1 … f+emitted-1
    timed = emitted > 1
    add_inner_gaps(engine, gaps, (f + 1)[timed], (f + emitted)[timed], ids[timed])
    if head < admitted and head_done:
        tab.prefilled[head] = head_done
    rid = np.arange(admitted)
    engine.live = rid[np.isnan(tab.finish[:admitted])]



# long: bulk kernel, one pass per iteration in plain ints: helper calls per iteration cost its speed
def decode_first_fill_memory(engine, t, stop, limit, *, max_reqs=None):
    """The rule with a KV-memory limit ``M`` (vLLM's accounting and recompute preemption,
    :func:`~queuetheory.policies.base.fit_memory`) and a batch-size limit ``R``
    (``max_reqs``; ``None``: none).

    Under FCFS the requests holding KV (residents) are the oldest in the system, all in
    decode but the youngest, which may be part-way through its prefill (and holds KV for
    the whole of it); the others wait in arrival order, preempted ones first. Every resident
    in decode decodes at every iteration (prefills start only while the budget and ``R``
    leave room after the decodes, so the decodes never exceed either), hence a residency
    emits its tokens in consecutive iterations: the kernel keeps per request only where its
    current residency began, and per iteration a few integers.
    """
    from collections import deque

    tab = engine.table
    n = tab.n
    arrival = tab.column("arrival").tolist()
    prompt = tab.column("prompt").tolist()
    output = tab.column("output").tolist()
    taus, new_tau = durations(engine.time_model)
    b, e = engine.token_budget, tab.emit_first
    M = engine.memory if engine.memory is not None else float("inf")
    R = max_reqs or b
    length = prompt[:]             # current prefill: prompt plus recomputed output
    filled = [0] * n               # prefilled tokens of the current prefill
    recomputed = [0] * n
    restarts = [0] * n
    seg_first = [-1] * n           # iteration of the first token of the current residency
    prefill_end = [-1] * n
    finish = [-1] * n
    epoch = [0] * n                # bumped by a preemption: cancels a planned completion
    segments = array("q")          # closed residencies: (request, first iteration, tokens)
    repeats = array("q")           # log rows that stand for k decode-only batches: (row, k)
    leaving: dict = {}             # iteration -> [(request, epoch)] completing in it
    soon: list = []                # a heap of leaving's keys
    resident: list = []            # in arrival order; the last may be prefilling
    waiting: deque = deque()
    times, counts = array("d"), array("q")   # the batch log (:func:`.common.log_columns`)
    admitted = 0
    decoding = 0                   # residents in decode
    work, used, peak = engine.work, engine.kv_total, engine.peak_memory
    s = engine.iteration
    while t < stop and s < limit:
        while admitted < n and arrival[admitted] <= t:
            work += prompt[admitted] + output[admitted]
            waiting.append(admitted)
            admitted += 1
        live = len(resident) + len(waiting)
        if not live:
            if admitted == n:
                break
            t = arrival[admitted]
            continue
        d = decoding
        if d > b or d > R:     # cannot happen (see the docstring); refuse rather than differ
            raise RuntimeError(f"decode_first_fill: {d} decodes over the budget {b} or R={R}")
        p = resident[-1] if decoding < len(resident) else -1
        promised = length[p] - filled[p] if p >= 0 else 0
        free = M - used - promised
        if d and d <= free and (d >= b or d >= R or (p < 0 and (
                not waiting or length[waiting[0]] > free - d))):
            # a decode-only batch that repeats unchanged (no prefill can start: the budget
            # or R is taken, or memory, which only shrinks, refuses the oldest waiting
            # request) until a completion, an arrival, a preemption, the horizon or the cap
            while soon and soon[0] < s:
                heapq.heappop(soon)
            most = min(soon[0] - s if soon else limit - s, limit - s,
                       (free - d) // d + 1 if free < float("inf") else limit - s)
            if most > 1:
                bound = min(stop, arrival[admitted] if admitted < n else float("inf"))
                tau = taus.get((0, d)) or new_tau(0, d)
                if bound < float("inf"):    # no more iterations than can start before it
                    most = min(most, int((bound - t) / tau) + 2)
                starts = list(accumulate(repeat(tau, int(most)), initial=t))  # t = t + τ
                k = bisect_left(starts, bound, 0, len(starts) - 1)
                if k:         # one row of the log stands for the k batches
                    times.extend((t, tau))
                    counts.extend((0, 0, d, 0, used + d, live, work - d))
                    repeats.extend((len(times) // 2 - 1, k))
                    t = starts[k]
                    used += d * k
                    work -= d * k
                    peak = used if used > peak else peak
                    s += k
                    continue
        chunk_sum = members = done = gone = 0
        out = []
        if d > free:                       # preempt the youngest residents until d fits
            need, saved = d - free, 0
            while saved < need:
                v = resident.pop()
                if v == p:
                    held, extra, decoded = filled[v], promised, recomputed[v]
                else:
                    emitted = s - seg_first[v]
                    held = length[v] + (emitted - e if emitted > e else 0)
                    extra, decoded = 1, recomputed[v] + emitted
                    segments.extend((v, seg_first[v], emitted))
                    decoding -= 1
                    epoch[v] += 1
                saved += held + extra
                used -= held
                work += filled[v] + decoded - recomputed[v]
                recomputed[v] = decoded
                length[v] = prompt[v] + decoded
                filled[v] = 0
                restarts[v] += 1
                out.append(v)
            waiting.extendleft(out)
            d = decoding
            if not d:          # unreachable while every request fits in M alone
                raise RuntimeError("decode_first_fill: a preemption emptied the batch")
        else:
            room, slots = b - d, R - d
            memory_left = free - d
            if room > 0 and slots > 0:
                while room > 0 and slots > 0:
                    if p >= 0:
                        w, p = p, -1
                    elif waiting and length[waiting[0]] <= memory_left:
                        w = waiting.popleft()
                        memory_left -= length[w]
                        resident.append(w)
                    else:
                        break
                    left = length[w] - filled[w]
                    c = left if left < room else room
                    filled[w] += c
                    chunk_sum += c
                    room -= c
                    slots -= 1
                    members += 1
                    if c == left:          # the prefill ends in this iteration
                        prefill_end[w] = s
                        seg_first[w] = s + 1 - e
                        done += 1
                        last = seg_first[w] + output[w] - recomputed[w] - 1
                        if last not in leaving:
                            leaving[last] = []
                            heapq.heappush(soon, last)
                        leaving[last].append((w, epoch[w]))
        tau = taus.get((chunk_sum, d)) or new_tau(chunk_sum, d)
        used += chunk_sum + d
        work -= chunk_sum + d + e * done
        times.extend((t, tau))
        counts.extend((members, chunk_sum, d, len(out), used, live, work))
        peak = used if used > peak else peak
        decoding += done
        for v, ep in leaving.pop(s, ()):
            if ep == epoch[v]:
                finish[v] = s
                used -= prompt[v] + output[v] - e
                segments.extend((v, seg_first[v], output[v] - recomputed[v]))
                resident.remove(v)
                decoding -= 1
                gone += 1
        t = t + tau
        s += 1
    for v in resident:                     # residencies still open
        if seg_first[v] >= 0 and filled[v] >= length[v]:
            segments.extend((v, seg_first[v], max(s - seg_first[v], 0)))
    _write_back_memory(engine, admitted, RepeatedBatches(log_columns(times, counts), repeats),
                       segments, filled, recomputed, restarts, prefill_end, finish, resident,
                       waiting)
    engine.work, engine.kv_total, engine.peak_memory = work, used, peak
    if any(restarts):
        tab.recomputing = True
    return t

def _write_back_memory(engine, admitted, runs, segments, filled, recomputed, restarts,
                       prefill_end, finish, resident, waiting):
    """The engine's records and state after the memory-aware bulk run, as if it had stepped:
    each residency ``(request, first iteration, tokens)`` emitted its tokens at the ends of
    consecutive iterations; the first token of a later residency closes the gap from the
    last token of the one before (the preemption's stall included). ``runs``: the batch
    log (:class:`~.common.RepeatedBatches`)."""
    start = runs.start
    s0 = write_runs(engine, admitted, runs)
    tab = engine.table
    ends = start + engine.log.column("duration")[s0:s0 + runs.size]   # read once, kept
    gaps = ends - start
    ids = np.arange(admitted)
    over = write_states(engine, admitted, s0, ends.__getitem__, filled, recomputed, restarts,
                        recomputed, prefill_end, finish)
    if segments:
        seg = np.frombuffer(segments, dtype=np.int64).reshape(-1, 3)
        rid, first, count = seg[:, 0], seg[:, 1] - s0, seg[:, 2]
        order = np.lexsort((first, rid))          # residencies of each request in time order
        rid, first, count = rid[order], first[order], count[order]
        talked = count > 0
        rid, first, count = rid[talked], first[talked], count[talked]
        last = first + count - 1
        open_ = np.zeros(admitted, dtype=bool)
        open_[resident] = True
        # decoded: output for finished requests, else the tokens of the open residency
        running = open_[rid] & tail_of(rid) & tab.in_decode[rid]
        tab.decoded[rid[running]] = tab.recomputed[rid[running]] + count[running]
        tab.decoded[ids[over]] = tab.output[ids[over]]
        # first and last tokens; across a preemption, from the last token before it to
        # the first after it; within a residency, the gaps of iterations first+1 … last
        stamp_runs(engine, rid, ends[first], ends[last])
        timed = count > 1
        add_inner_gaps(engine, gaps, (first + 1)[timed], (last + 1)[timed], rid[timed])
    engine.live = np.sort(np.array(resident + list(waiting), dtype=np.int64))



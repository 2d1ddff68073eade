"""What the rules ``prefill_first_fill`` (Orca) and ``decode_priority`` (FasterTransformer)
share: under FCFS the requests that decode in an iteration are the oldest requests in decode.

Prompts are prefilled in arrival order (the youngest resident alone may be part-way through
its prompt), so the requests in decode, taken in arrival order, form a list that grows at its
end; an iteration decodes its first ``m`` members. A request therefore emits its tokens in
*runs* of consecutive iterations, and leaves a run only when ``m`` falls below its place in
the list (or a preemption takes it). The loop keeps the list, the length ``a`` of its prefix
whose runs are open, and per request only where its open run began; runs are opened and
closed as ``m`` moves, and the stamps, the TBT histogram and the batch log follow from the
runs and the iterations' end times at the end (:func:`write_back_runs`).
"""

from __future__ import annotations

import heapq
from array import array
from bisect import bisect_left
from collections import deque
from itertools import accumulate, repeat

import numpy as np

from .common import durations, expand, tail_of

__all__ = ["ORCA", "FT_ITERATION", "FT_REQUEST", "run_decode_prefix", "write_back_runs"]

#: the decisions: Orca's prefill-first mixed batch; FasterTransformer's decode-only batch
#: whenever a request decodes, else a prefill-only batch; FasterTransformer's cohorts
ORCA, FT_ITERATION, FT_REQUEST = 0, 1, 2


def run_decode_prefix(engine, t, stop, limit, kind, chunk=True):
    """Run the decision ``kind`` from a fresh engine at ``t`` up to the horizon ``stop`` or
    ``limit`` iterations; return the time reached. ``chunk=False``: only whole prompts enter
    a batch, except a first one longer than the room left (Orca without chunking)."""
    tab = engine.table
    n = tab.n
    arrival = tab.column("arrival").tolist()
    prompt = tab.column("prompt").tolist()
    output = tab.column("output").tolist()
    taus, new_tau = durations(engine.time_model)
    b, e = engine.budget, tab.emit_first
    inf = float("inf")
    M = engine.memory if engine.memory is not None else inf
    max_reqs = getattr(engine.policy, "max_reqs", None)
    R = n + 1 if max_reqs is None else max_reqs
    length = prompt[:]             # current prefill: prompt plus recomputed output
    filled = [0] * n               # prefilled tokens of the current prefill
    recomputed = [0] * n
    restarts = [0] * n
    decoded = [0] * n              # output tokens emitted before the open run
    run_first = [-1] * n           # iteration of the open run's first token; -1: none open
    prefill_end = [-1] * n
    finish = [-1] * n
    epoch = [0] * n                # bumped by a preemption: voids the residency's entries
    runs = array("q")              # closed runs: (request, first iteration, tokens)
    repeats = array("q")           # log rows that stand for k decode-only batches: (row, k)
    # a heap of (iteration, request, epoch): no request in decode emits its last token
    # before its entries' least iteration (a run's end if nothing interrupts it; a request
    # that skips iterations only finishes later), checked and renewed when reached
    soon: list = []
    dec: list = []                 # requests in decode, in arrival order
    a = 0                          # dec[:a] emitted in the last iteration: their runs are open
    p = -1                         # the resident part-way through its prefill
    waiting: deque = deque()       # requests without KV, in arrival order
    line = waiting if kind != FT_REQUEST else deque()   # where prefills are taken from
    rows = [array(code) for code in "ddqqqqqqq"]
    start, dur, n_pre, chunks, decs, evicted_col, used_col, in_sys, work_col = rows
    admitted = 0
    work, used, peak = engine.work, engine.kv_total, engine.peak_memory
    s = engine.iteration
    while t < stop and s < limit:
        while admitted < n and arrival[admitted] <= t:
            work += prompt[admitted] + output[admitted]
            waiting.append(admitted)
            admitted += 1
        D = len(dec)
        live = D + (p >= 0) + len(waiting) + (len(line) if kind == FT_REQUEST else 0)
        if not live:
            if admitted == n:
                break
            t = arrival[admitted]
            continue
        promised = length[p] - filled[p] if p >= 0 else 0
        free = M - used - promised
        # the decision: prefill members (planned) and the number m of decodes
        plan = []
        chunk_sum = 0
        if kind == ORCA or (kind == FT_ITERATION and not D) or (
                kind == FT_REQUEST and (p >= 0 or line or not D)):
            if kind == FT_REQUEST and not D and p < 0 and not line:   # a new cohort
                for _ in range(min(R, len(waiting))):
                    line.append(waiting.popleft())
            room, slots = b, (R if kind != FT_REQUEST else n + 1)
            memory_left = free - D
            i = 0
            while room > 0 and slots > 0:
                if p >= 0 and not plan:
                    w = p
                elif i < len(line) and length[line[i]] <= memory_left:
                    w = line[i]
                    memory_left -= length[w]
                    i += 1
                else:
                    break
                left = length[w] - filled[w]
                if left <= room:
                    c = left
                elif chunk or not plan:
                    c = room
                else:
                    break
                plan.append((w, c))
                chunk_sum += c
                room -= c
                slots -= 1
            m = min(b - chunk_sum, D, R - len(plan)) if kind == ORCA else 0
        else:
            m = b if b < D else D
            if kind == FT_ITERATION and R < m:
                m = R
        if not m and not plan:     # an empty batch (not met while every request fits in M
            if admitted == n:      # alone): the engine waits for the next arrival
                break
            t = arrival[admitted]
            continue
        if m and not plan and a == m and m <= free:
            # a decode-only batch that repeats unchanged (no prompt can start before an
            # arrival: memory, which only shrinks, refuses the oldest waiting one) until a
            # completion, an arrival, the horizon, the cap or a preemption
            most = min(soon[0][0] - s if soon else limit - s, limit - s,
                       (free - m) // m + 1 if free < inf else limit - s)
            if most > 1:
                bound = min(stop, arrival[admitted] if admitted < n else inf)
                tau = taus.get((0, m)) or new_tau(0, m)
                if bound < inf:     # no more iterations than can start before it
                    most = min(most, int((bound - t) / tau) + 2)
                times = list(accumulate(repeat(tau, int(most)), initial=t))  # t = t + τ
                k = bisect_left(times, bound, 0, len(times) - 1)
                if k:         # one row of the log stands for the k batches (expand)
                    start.append(t)
                    dur.append(tau)
                    n_pre.append(0)
                    chunks.append(0)
                    decs.append(m)
                    evicted_col.append(0)
                    used_col.append(used + m)
                    in_sys.append(live)
                    work_col.append(work - m)
                    repeats.extend((len(start) - 1, k))
                    t = times[k]
                    used += m * k
                    work -= m * k
                    peak = used if used > peak else peak
                    s += k
                    continue
        members = done = 0
        out = []
        ended = []
        if m > free:
            # vLLM's preemption (fit_memory): the youngest residents go, the one part-way
            # through its prefill first, until the decodes fit; no prompt starts
            chunk_sum, need, saved = 0, m - free, 0
            while saved < need:
                if p >= 0:
                    v, p = p, -1
                    held, extra = filled[v], promised
                else:
                    v = dec.pop()
                    i = len(dec)
                    tokens = decoded[v] - recomputed[v]
                    if i < a:                    # close its open run
                        count = s - run_first[v]
                        runs.extend((v, run_first[v], count))
                        tokens += count
                        decoded[v] += count
                        run_first[v] = -1
                        a = i
                    epoch[v] += 1
                    held = length[v] + (tokens - e if tokens > e else 0)
                    extra = 1 if i < m else 0
                    if i < m:
                        m = i
                work += filled[v] + decoded[v] - recomputed[v]
                saved += held + extra
                used -= held
                recomputed[v] = decoded[v]
                length[v] = prompt[v] + decoded[v]
                filled[v] = 0
                restarts[v] += 1
                out.append(v)
            line.extendleft(out)
            if not m:          # unreachable while every request fits in M alone
                raise RuntimeError("decode_prefix: a preemption emptied the batch")
        else:
            for w, c in plan:
                if w != p:
                    line.popleft()
                filled[w] += c
                members += 1
                if filled[w] == length[w]:       # the prefill ends in this iteration
                    prefill_end[w] = s
                    ended.append(w)
                    p = -1
                else:
                    p = w
            done = len(ended)
        # the runs of dec[:m] are open after this iteration, no other
        if m > a:
            for v in dec[a:m]:
                run_first[v] = s
        elif m < a:
            for v in dec[m:a]:
                first = run_first[v]
                runs.extend((v, first, s - first))
                decoded[v] += s - first
                run_first[v] = -1
        a = m
        tau = taus.get((chunk_sum, m)) or new_tau(chunk_sum, m)
        used += chunk_sum + m
        work -= chunk_sum + m + e * done
        start.append(t)
        dur.append(tau)
        n_pre.append(members)
        chunks.append(chunk_sum)
        decs.append(m)
        evicted_col.append(len(out))
        used_col.append(used)
        in_sys.append(live)
        work_col.append(work)
        peak = used if used > peak else peak
        while soon and soon[0][0] <= s:
            _, v, ep = heapq.heappop(soon)
            if ep != epoch[v] or finish[v] >= 0:
                continue
            first = run_first[v]
            if first < 0:                        # skipped this iteration: not before …
                heapq.heappush(soon, (s + output[v] - decoded[v], v, ep))
                continue
            last = first + output[v] - decoded[v] - 1
            if last > s:                         # skipped iterations since its entry
                heapq.heappush(soon, (last, v, ep))
                continue
            finish[v] = s
            used -= prompt[v] + output[v] - e
            runs.extend((v, first, s - first + 1))
            decoded[v] = output[v]
            run_first[v] = -1
            del dec[bisect_left(dec, v)]
            a -= 1
        for v in ended:                          # in arrival order, younger than dec
            if e:                                # the prefill iteration emits a token
                if decoded[v] + 1 == output[v]:
                    finish[v] = s
                    decoded[v] += 1
                    used -= prompt[v] + output[v] - e
                    runs.extend((v, s, 1))
                    continue
                if a == len(dec):                # every other emitter of s is before it
                    run_first[v] = s
                    a += 1
                else:
                    runs.extend((v, s, 1))
                    decoded[v] += 1
            heapq.heappush(soon, (s + output[v] - decoded[v] - (run_first[v] >= 0), v,
                                  epoch[v]))
            dec.append(v)
        t = t + tau
        s += 1
    for v in dec[:a]:                            # runs still open
        count = s - run_first[v]
        runs.extend((v, run_first[v], count))
        decoded[v] += count
    live_ids = dec + ([p] if p >= 0 else []) + list(waiting)
    if kind == FT_REQUEST:
        live_ids += list(line)
    write_back_runs(engine, admitted, expand(rows, repeats), runs, decoded, filled,
                    recomputed, restarts, prefill_end, finish, live_ids)
    engine.work, engine.kv_total, engine.peak_memory = work, used, peak
    if any(restarts):
        tab.recomputing = True
    return t


def write_back_runs(engine, admitted, rows, runs, decoded, filled, recomputed, restarts,
                    prefill_end, finish, live):
    """The engine's records and state after a bulk run, as if it had stepped: each run
    ``(request, first iteration, tokens)`` emitted its tokens at the ends of consecutive
    iterations; the first token of a later run closes the gap from the last token of the
    one before (iterations skipped, or a preemption's stall). ``rows``: the batch log's
    columns, one entry per iteration (:func:`~.common.expand`); ``decoded``: each
    request's output tokens emitted; ``live``: the requests left in the system."""
    start, dur, n_pre, chunks, decs, evicted, used, in_sys, work = rows
    k = start.size
    s0 = engine.iteration
    if k:
        engine.log.extend(k, start, dur, n_pre, chunks, decs, chunks + decs, evicted, used,
                          in_sys, work)
    engine.iteration += k
    engine._pending = admitted
    tab = engine.table
    ends = start + dur
    gaps = ends - start
    ids = np.arange(admitted)
    tab.prefilled[:admitted] = filled[:admitted]
    tab.recomputed[:admitted] = recomputed[:admitted]
    tab.restarts[:admitted] = restarts[:admitted]
    tab.decoded[:admitted] = decoded[:admitted]
    tab.in_decode[:admitted] = tab.prefilled[:admitted] >= tab.prompt[:admitted] + \
        tab.recomputed[:admitted]
    pend = np.array(prefill_end[:admitted], dtype=np.int64) - s0
    has = pend >= 0
    tab.prefill_done[ids[has]] = ends[pend[has]]
    fin = np.array(finish[:admitted], dtype=np.int64) - s0
    over = fin >= 0
    tab.finish[ids[over]] = ends[fin[over]]
    if not runs:
        engine.live = np.sort(np.array(live, dtype=np.int64))
        return
    run = np.frombuffer(runs, dtype=np.int64).reshape(-1, 3)
    rid, first, count = run[:, 0], run[:, 1] - s0, run[:, 2]
    order = np.argsort(rid * (k + 1) + first)     # the runs of each request in time order
    rid, first, count = rid[order], first[order], count[order]
    last = first + count - 1
    lead = np.ones(rid.size, dtype=bool)
    lead[1:] = rid[1:] != rid[:-1]                # each request's first run
    tab.first_token[rid[lead]] = ends[first[lead]]
    tail = tail_of(rid)
    tab.last_token[rid[tail]] = ends[last[tail]]
    cls = tab.cls[rid]
    timed = count > 1                             # within a run: iterations first+1 … last
    if np.count_nonzero(timed):
        lo, hi = (first + 1)[timed], (last + 1)[timed]
        np.maximum.at(tab.tbt_max, rid[timed], _range_max(gaps, lo, hi))
        engine.tbt.add_intervals(gaps, lo, hi, cls[timed])
    again = np.flatnonzero(~lead)                 # from one run to the next
    if again.size:
        stall = ends[first[again]] - ends[last[again - 1]]
        np.maximum.at(tab.tbt_max, rid[again], stall)
        engine.tbt.add(cls[again], stall)
    engine.live = np.sort(np.array(live, dtype=np.int64))


def _range_max(values, lo, hi):
    """``max(values[lo[i]:hi[i]])`` for every ``i`` (``hi > lo``), from a sparse table built
    one level at a time: level ``j`` holds the maxima over spans of 2^j, and a query of
    length in [2^j, 2^(j+1)) is the larger of two of them, overlapping."""
    level = np.frexp(hi - lo)[1] - 1              # ⌊log2(hi − lo)⌋, exactly
    out = np.empty(lo.size)
    row = values
    for j in range(int(level.max()) + 1):
        if j:
            half = 1 << (j - 1)
            row = np.maximum(row[:-half], row[half:])
        pick = np.flatnonzero(level == j)
        if pick.size:
            out[pick] = np.maximum(row[lo[pick]], row[hi[pick] - (1 << j)])
    return out

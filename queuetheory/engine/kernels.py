"""Decision rules the engine can run in bulk, without asking the policy at every iteration.

A policy whose every decision follows a rule listed here says so (:meth:`Policy.rule`);
``simulate`` then runs the rule in a loop of plain integer and float arithmetic, one pass per
iteration, and writes the request stamps, batch log and TBT histogram in bulk at the end.
The records are those of the step-by-step engine to the last bit (``tests/test_kernels.py``).

``"decode_first_fill"`` (Sarathi-Serve with FCFS order, seed 004 L222): every request whose
prompt is prefilled decodes one token, and the rest of the token budget ``b`` goes to prompt
tokens in arrival order, the last prompt chunked. Prefills therefore finish in arrival order,
and a request whose prompt finishes in iteration ``q`` emits its ``o`` output tokens in
iterations ``q+1 … q+o``, one per iteration, under ``first_token="decode"``, and in
iterations ``q … q+o−1`` under ``first_token="prefill"`` (the prefill iteration emits the
first token): its time stamps follow from the iterations' end times. Every batch is
feasible by construction: each prompt that finishes took at least one token of the room
``b − d`` the ``d`` decodes left, so at most ``b`` requests ever decode and the token load
never exceeds ``b``. With a KV-memory limit (vLLM's accounting and recompute preemption,
:func:`~queuetheory.policies.base.fit_memory`) or a batch-size limit ``max_reqs`` the rule runs
as :func:`_decode_first_fill_memory`, which follows residencies instead of prompts.

``"prefill_batches"`` (vanilla vLLM with FCFS order, seed 004 L218): a prefill-only batch
whenever a prompt can start, else a decode-only batch of every request in decode
(:func:`_prefill_batches`).

The rules run with a token-count time model, prompts and outputs of at least one token, under
either first-token convention, and with recompute preemption where memory is limited;
elsewhere the engine steps.
"""

from __future__ import annotations

import heapq
from array import array
from bisect import bisect_left
from itertools import accumulate, repeat

import numpy as np

__all__ = ["bulk_runner"]


def bulk_runner(engine, policy):
    """A function ``run(t, stop, limit) -> t`` running the policy's rule from a fresh
    engine at ``t``, or ``None`` when no rule applies. A rule may stop before ``stop`` and
    ``limit`` in a state it does not cover; the engine then steps on from there."""
    rule = getattr(policy, "rule", None)
    rule = rule() if rule is not None else None
    tab = engine.table
    if (rule not in ("decode_first_fill", "prefill_batches")
            or not engine.time_model.counts_only or engine.budget != policy.token_budget
            or engine.iteration or engine.live.size
            or (tab.n and min(tab.column("prompt").min(), tab.column("output").min()) < 1)):
        return None
    if engine.memory is not None and engine.preemption != "recompute":
        return None
    if rule == "prefill_batches":
        return lambda t, stop, limit: _prefill_batches(engine, t, stop, limit)
    if engine.memory is None and getattr(policy, "max_reqs", None) is None:
        return lambda t, stop, limit: _decode_first_fill(engine, t, stop, limit)
    return lambda t, stop, limit: _decode_first_fill_memory(engine, t, stop, limit)


def _durations(time_model):
    """``count_duration`` memoised: ``(table, new)``, where ``table.get((prefill_tokens,
    decodes))`` is the duration of a batch seen before and ``new(prefill_tokens, decodes)``
    computes, checks and keeps one (a dict look-up costs less than the model's calls)."""
    table = {}

    def new(prefill_tokens, decodes):
        tau = time_model.count_duration(prefill_tokens, decodes)
        if not tau > 0:
            raise ValueError(f"{time_model!r} returned a non-positive duration {tau}")
        if len(table) >= 1 << 16:           # bounded memory on long, varied runs
            table.clear()
        table[prefill_tokens, decodes] = tau
        return tau

    return table, new


def _decode_first_fill(engine, t, stop, limit):
    tab = engine.table
    n = tab.n
    arrival = tab.column("arrival").tolist()
    prompt = tab.column("prompt").tolist()
    output = tab.column("output").tolist()
    taus, new_tau = _durations(engine.time_model)
    b = engine.budget
    e = tab.emit_first           # 1: the iteration that ends a prompt emits its first token
    prefill_end = [-1] * n       # iteration in which each prompt finished
    leaving: dict = {}           # iteration -> requests that emit their last token in it
    freed: dict = {}             # iteration -> their KV tokens
    rows = [array(code) for code in "ddqqqqqq"]           # the batch log, as machine words
    start, dur, n_pre, chunks, decs, used_col, in_sys, work_col = rows
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
        start.append(t)
        dur.append(tau)
        n_pre.append(members)
        chunks.append(chunk_sum)
        decs.append(decoding)
        used_col.append(used)
        in_sys.append(live)
        work_col.append(work)
        peak = used if used > peak else peak
        gone = leaving.pop(s, 0)
        kv = used - freed.pop(s, 0)
        finished += gone
        decoding += done - gone
        t = t + tau
        s += 1
    _write_back(engine, np.array(prefill_end[:admitted], dtype=np.int64), admitted, head,
                head_done, rows)
    engine.work, engine.kv_total, engine.peak_memory = work, kv, peak
    return t


def _write_back(engine, prefill_end, admitted, head, head_done, rows):
    """The engine's records and state after the bulk run, as if it had stepped."""
    start, dur, n_pre, chunks, decs, used, in_sys, work = (np.frombuffer(r, r.typecode)
                                                           for r in rows)
    k = start.size
    s0 = engine.iteration
    if k:
        load = chunks + decs
        engine.log.extend(k, start, dur, n_pre, chunks, decs, load, 0, used, in_sys, work)
    engine.iteration += k
    engine._pending = admitted
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
    lo, hi = (f + 1)[timed], (f + emitted)[timed]
    if lo.size:
        bounds = np.column_stack([lo, hi]).ravel()
        tab.tbt_max[ids[timed]] = np.maximum.reduceat(np.append(gaps, 0.0), bounds)[::2]
        engine.tbt.add_intervals(gaps, lo, hi, tab.cls[ids[timed]])
    if head < admitted and head_done:
        tab.prefilled[head] = head_done
    rid = np.arange(admitted)
    engine.live = rid[np.isnan(tab.finish[:admitted])]



def _decode_first_fill_memory(engine, t, stop, limit):
    """The rule with a KV-memory limit ``M`` (vLLM's accounting and recompute preemption,
    :func:`~queuetheory.policies.base.fit_memory`) and a batch-size limit ``R``.

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
    taus, new_tau = _durations(engine.time_model)
    b, e = engine.budget, tab.emit_first
    M = engine.memory if engine.memory is not None else float("inf")
    R = getattr(engine.policy, "max_reqs", None) or b
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
    rows = [array(code) for code in "ddqqqqqqq"]
    start, dur, n_pre, chunks, decs, evicted_col, used_col, in_sys, work_col = rows
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
                times = list(accumulate(repeat(tau, int(most)), initial=t))  # t = t + τ
                k = bisect_left(times, bound, 0, len(times) - 1)
                if k:         # one row of the log stands for the k batches (_expand)
                    start.append(t)
                    dur.append(tau)
                    n_pre.append(0)
                    chunks.append(0)
                    decs.append(d)
                    evicted_col.append(0)
                    used_col.append(used + d)
                    in_sys.append(live)
                    work_col.append(work - d)
                    repeats.extend((len(start) - 1, k))
                    t = times[k]
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
        start.append(t)
        dur.append(tau)
        n_pre.append(members)
        chunks.append(chunk_sum)
        decs.append(d)
        evicted_col.append(len(out))
        used_col.append(used)
        in_sys.append(live)
        work_col.append(work)
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
    _write_back_memory(engine, admitted, _expand(rows, repeats), segments, filled, recomputed,
                       restarts, prefill_end, finish, resident, waiting)
    engine.work, engine.kv_total, engine.peak_memory = work, used, peak
    if any(restarts):
        tab.recomputing = True
    return t


def _expand(rows, repeats):
    """The batch log's columns, one entry per iteration, from the kernel's rows, where a row
    ``r`` listed in ``repeats`` as ``(r, k)`` stands for ``k`` identical decode-only batches
    of ``d`` decodes: memory grows and unfinished work falls by ``d`` a batch, and each
    starts where the one before ends (``t + τ``, added in sequence as the engine adds them:
    column by column over all such rows at once)."""
    cols = [np.frombuffer(r, r.typecode) for r in rows]
    if not repeats:
        return cols
    row, k = np.frombuffer(repeats, np.int64).reshape(-1, 2).T
    reps = np.ones(cols[0].size, dtype=np.int64)
    reps[row] = k
    first = reps.cumsum() - reps                   # the row's first iteration
    start, dur, n_pre, chunks, decs, evicted, used, in_sys, work = (c.repeat(reps)
                                                                    for c in cols)
    step = np.arange(start.size)
    step -= first.repeat(reps)                     # batches since the row's first
    step *= decs
    used += step
    work -= step
    order = np.argsort(-k, kind="stable")
    k, at, tau = k[order], first[row[order]], cols[1][row[order]]
    longer = np.searchsorted(-k, -np.arange(int(k[0])), side="left")   # rows with k > j
    for j in range(1, int(k[0])):
        live = longer[j]
        pos = at[:live] + j
        start[pos] = start[pos - 1] + tau[:live]
    return [start, dur, n_pre, chunks, decs, evicted, used, in_sys, work]


def _write_back_memory(engine, admitted, rows, segments, filled, recomputed, restarts,
                       prefill_end, finish, resident, waiting):
    """The engine's records and state after the memory-aware bulk run, as if it had stepped:
    each residency ``(request, first iteration, tokens)`` emitted its tokens at the ends of
    consecutive iterations; the first token of a later residency closes the gap from the
    last token of the one before (the preemption's stall included). ``rows``: the batch
    log's columns, one entry per iteration (:func:`_expand`)."""
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
    tab.decoded[:admitted] = recomputed[:admitted]
    tab.in_decode[:admitted] = tab.prefilled[:admitted] >= tab.prompt[:admitted] + \
        tab.recomputed[:admitted]
    pend = np.array(prefill_end[:admitted], dtype=np.int64) - s0
    has = pend >= 0
    tab.prefill_done[ids[has]] = ends[pend[has]]
    fin = np.array(finish[:admitted], dtype=np.int64) - s0
    over = fin >= 0
    tab.finish[ids[over]] = ends[fin[over]]
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
        lead = np.ones(rid.size, dtype=bool)
        lead[1:] = rid[1:] != rid[:-1]                 # each request's first residency
        tab.first_token[rid[lead]] = ends[first[lead]]
        tail = tail_of(rid)
        tab.last_token[rid[tail]] = ends[last[tail]]
        cls = tab.cls[rid]
        # within a residency: the gaps of iterations first+1 … last
        timed = count > 1
        if np.count_nonzero(timed):
            lo, hi = (first + 1)[timed], (last + 1)[timed]
            bounds = np.column_stack([lo, hi]).ravel()
            inner = np.maximum.reduceat(np.append(gaps, 0.0), bounds)[::2]
            np.maximum.at(tab.tbt_max, rid[timed], inner)
            engine.tbt.add_intervals(gaps, lo, hi, cls[timed])
        # across a preemption: from the last token before it to the first after it
        again = ~lead
        if np.count_nonzero(again):
            stall = ends[first[again]] - ends[last[np.flatnonzero(again) - 1]]
            np.maximum.at(tab.tbt_max, rid[again], stall)
            engine.tbt.add(cls[again], stall)
    engine.live = np.sort(np.array(resident + list(waiting), dtype=np.int64))


def tail_of(rid):
    """Marks the last row of each run of equal values in the sorted ``rid``."""
    tail = np.ones(rid.size, dtype=bool)
    tail[:-1] = rid[1:] != rid[:-1]
    return tail


def _prefill_batches(engine, t, stop, limit):
    """The rule ``prefill_batches`` (vanilla vLLM under FCFS): a prefill-only batch of whole
    prompts in arrival order (a prompt longer than the budget chunked alone) whenever one can
    start — memory permitting, vLLM's accounting — else a decode-only batch of every request
    in decode, preempting the youngest (recompute) when their tokens do not fit.

    The residents are the oldest requests; all decode at every decode-only batch, so a
    residency emits its tokens (after the first, under ``first_token="prefill"``) in
    consecutive decode-only batches. Stops, for the engine to step on, where the decodes
    exceed the budget or ``max_reqs`` (some would wait a turn).
    """
    from collections import deque

    tab = engine.table
    n = tab.n
    arrival = tab.column("arrival").tolist()
    prompt = tab.column("prompt").tolist()
    output = tab.column("output").tolist()
    taus, new_tau = _durations(engine.time_model)
    b, e = engine.budget, tab.emit_first
    M = engine.memory if engine.memory is not None else float("inf")
    max_reqs = getattr(engine.policy, "max_reqs", None)
    R = n + 1 if max_reqs is None else max_reqs
    cap = min(b, R)
    length = prompt[:]
    filled = [0] * n
    recomputed = [0] * n
    restarts = [0] * n
    first_batch = [0] * n          # index of the first decode-only batch of the residency
    prefill_end = [-1] * n
    finish = [-1] * n
    epoch = [0] * n
    segments = array("q")          # residencies: (request, prefill end, first batch, decodes)
    leaving: dict = {}             # decode-only batch index -> [(request, epoch)]
    resident: list = []
    waiting: deque = deque()
    decode_iters = array("q")      # iteration of each decode-only batch
    rows = [array(code) for code in "ddqqqqqqq"]
    start, dur, n_pre, chunks, decs, evicted_col, used_col, in_sys, work_col = rows
    admitted = decoding = 0
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
        p = resident[-1] if decoding < len(resident) else -1
        promised = length[p] - filled[p] if p >= 0 else 0
        free = M - used - promised
        chunk_sum = members = done = d = 0
        out, ended = [], []
        if p >= 0 or (waiting and length[waiting[0]] <= free):      # a prefill-only batch
            room, memory_left = b, free
            while members < R:
                if p >= 0:
                    w, p = p, -1
                elif waiting and length[waiting[0]] <= memory_left:
                    w = waiting[0]
                else:
                    break
                left = length[w] - filled[w]
                if left > room and members:
                    break
                c = left if left <= room else room
                if filled[w] == 0 and w == (waiting[0] if waiting else -1):
                    waiting.popleft()
                    memory_left -= length[w]
                    resident.append(w)
                filled[w] += c
                chunk_sum += c
                room -= c
                members += 1
                if c == left:
                    prefill_end[w] = s
                    first_batch[w] = len(decode_iters)
                    done += 1
                    ended.append(w)
                    rest = output[w] - recomputed[w] - e       # decode-only batches to go
                    if rest:
                        key = first_batch[w] + rest - 1
                        leaving.setdefault(key, []).append((w, epoch[w]))
                else:
                    break
        else:                                                       # a decode-only batch
            d = decoding
            if d > cap:
                break                      # some would wait a turn: the engine steps on
            j = len(decode_iters)
            if d > free:
                need, saved = d - free, 0
                while saved < need:
                    v = resident.pop()
                    count = j - first_batch[v]
                    held = length[v] + count
                    decoded = recomputed[v] + e + count
                    segments.extend((v, prefill_end[v], first_batch[v], count))
                    decoding -= 1
                    epoch[v] += 1
                    saved += held + 1
                    used -= held
                    work += length[v] + decoded - recomputed[v]
                    recomputed[v] = decoded
                    length[v] = prompt[v] + decoded
                    filled[v] = 0
                    restarts[v] += 1
                    out.append(v)
                waiting.extendleft(out)
                d = decoding
                if not d:      # unreachable while every request fits in M alone
                    raise RuntimeError("prefill_batches: a preemption emptied the batch")
            decode_iters.append(s)
        tau = taus.get((chunk_sum, d)) or new_tau(chunk_sum, d)
        used += chunk_sum + d
        work -= chunk_sum + d + e * done
        start.append(t)
        dur.append(tau)
        n_pre.append(members)
        chunks.append(chunk_sum)
        decs.append(d)
        evicted_col.append(len(out))
        used_col.append(used)
        in_sys.append(live)
        work_col.append(work)
        peak = used if used > peak else peak
        decoding += done
        if d:
            gone = leaving.pop(len(decode_iters) - 1, ())
        else:          # prefills that emit their last token (first_token="prefill")
            gone = [(w, epoch[w]) for w in ended if output[w] - recomputed[w] - e == 0]
        for v, ep in gone:
            if ep == epoch[v]:
                finish[v] = s
                used -= prompt[v] + output[v] - e
                segments.extend((v, prefill_end[v], first_batch[v],
                                 output[v] - recomputed[v] - e))
                resident.remove(v)
                decoding -= 1
        t = t + tau
        s += 1
    j = len(decode_iters)
    for v in resident:
        if filled[v] >= length[v]:
            segments.extend((v, prefill_end[v], first_batch[v], j - first_batch[v]))
    _write_back_batches(engine, admitted, rows, np.frombuffer(decode_iters, np.int64)
                        if j else np.empty(0, np.int64), segments, filled, recomputed,
                        restarts, prefill_end, finish, resident, waiting)
    engine.work, engine.kv_total, engine.peak_memory = work, used, peak
    if any(restarts):
        tab.recomputing = True
    return t


def _write_back_batches(engine, admitted, rows, decode_iters, segments, filled, recomputed,
                        restarts, prefill_end, finish, resident, waiting):
    """The engine's records after ``_prefill_batches``: a residency ``(request, prefill
    end, first decode-only batch, decodes)`` emits (under ``first_token="prefill"``) a token
    at the end of its prefill iteration, then one at each of its decode-only batches."""
    cols = [np.frombuffer(r, r.typecode) for r in rows]
    start, dur, n_pre, chunks, decs, evicted, used, in_sys, work = cols
    k = start.size
    s0 = engine.iteration
    if k:
        engine.log.extend(k, start, dur, n_pre, chunks, decs, chunks + decs, evicted, used,
                          in_sys, work)
    engine.iteration += k
    engine._pending = admitted
    tab = engine.table
    e = tab.emit_first
    ends = start + dur
    ids = np.arange(admitted)
    tab.prefilled[:admitted] = filled[:admitted]
    tab.recomputed[:admitted] = recomputed[:admitted]
    tab.restarts[:admitted] = restarts[:admitted]
    tab.decoded[:admitted] = recomputed[:admitted]
    tab.in_decode[:admitted] = tab.prefilled[:admitted] >= tab.prompt[:admitted] + \
        tab.recomputed[:admitted]
    pend = np.array(prefill_end[:admitted], dtype=np.int64) - s0
    has = pend >= 0
    tab.prefill_done[ids[has]] = ends[pend[has]]
    fin = np.array(finish[:admitted], dtype=np.int64) - s0
    over = fin >= 0
    tab.finish[ids[over]] = ends[fin[over]]
    if not segments:
        engine.live = np.sort(np.array(resident + list(waiting), dtype=np.int64))
        return
    dec_end = ends[decode_iters - s0]                  # end of each decode-only batch
    seg = np.frombuffer(segments, dtype=np.int64).reshape(-1, 4)
    rid, q, first, count = seg[:, 0], seg[:, 1] - s0, seg[:, 2], seg[:, 3]
    order = np.lexsort((q, rid))
    rid, q, first, count = rid[order], q[order], first[order], count[order]
    talked = (count + e) > 0
    rid, q, first, count = rid[talked], q[talked], first[talked], count[talked]
    tail = tail_of(rid)
    open_ = np.zeros(admitted, dtype=bool)
    open_[resident] = True
    running = open_[rid] & tail & tab.in_decode[rid]
    tab.decoded[rid[running]] = tab.recomputed[rid[running]] + e + count[running]
    tab.decoded[ids[over]] = tab.output[ids[over]]
    last_dec = first + count - 1
    head = ends[q] if e else dec_end[first]           # a residency's first token ...
    tail_time = np.where(count > 0, np.append(dec_end, 0.0)[np.maximum(last_dec, 0)],
                         ends[q])                                      # ... and last
    lead = np.ones(rid.size, dtype=bool)
    lead[1:] = rid[1:] != rid[:-1]
    tab.first_token[rid[lead]] = head[lead]
    tab.last_token[rid[tail]] = tail_time[tail]
    cls = tab.cls[rid]
    gaps = np.concatenate([[0.0], dec_end[1:] - dec_end[:-1]])   # between decode batches
    timed = count > 1
    if np.count_nonzero(timed):
        lo, hi = (first + 1)[timed], (first + count)[timed]
        bounds = np.column_stack([lo, hi]).ravel()
        inner = np.maximum.reduceat(np.append(gaps, 0.0), bounds)[::2]
        np.maximum.at(tab.tbt_max, rid[timed], inner)
        engine.tbt.add_intervals(gaps, lo, hi, cls[timed])
    single = []
    if e:                       # from the prefill's token to the first decode-only batch
        step = count > 0
        single.append((rid[step], dec_end[first[step]] - ends[q[step]]))
    again = np.flatnonzero(~lead)      # across a preemption
    single.append((rid[again], head[again] - tail_time[again - 1]))
    for who, gap in single:
        if who.size:
            np.maximum.at(tab.tbt_max, who, gap)
            engine.tbt.add(tab.cls[who], gap)
    engine.live = np.sort(np.array(resident + list(waiting), dtype=np.int64))

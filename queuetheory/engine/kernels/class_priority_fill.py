"""The rule ``class_priority_fill``: work-conserving static priority between classes, FCFS
within each class (:class:`~queuetheory.policies.StaticPriority`, Li, Dai, Peng §4.2).

At every iteration the classes are served in ``class_order``: a class's requests in decode
decode one token each, oldest first, while the token budget ``b`` and ``max_reqs`` leave
room; only if all of them decode do its prompts take the room left, in arrival order, the
last one chunked. With a single class this is FCFS Sarathi (the rule ``decode_first_fill``,
which the factory then returns). With several, a lower class's decodes wait whenever the
classes above fill the batch, so the decoders of a class that decode at an iteration are the
oldest ``m`` of them, ``m`` between 0 and all.

The rule therefore follows each class on its own clock: the iterations in which the class
decoded at all (``served``). Between two of them the class's decoders that run form a prefix
of its decoders in arrival order (new decoders join at the end, since prompts finish in
arrival order within a class), and a decoder emits one token at each tick of its class's
clock while it stays in that prefix: its run is a range of ticks, and its completion tick is
known when the run starts. An iteration costs a few integer operations per class, plus one
per decoder that enters or leaves the running prefix (where ``m`` changes); an iteration in
which the higher classes take the whole budget costs the lower classes nothing.
"""

from __future__ import annotations

from array import array
from collections import deque

import numpy as np

from .common import durations, tail_of
from .decode_first_fill import decode_first_fill, decode_first_fill_memory

__all__ = ["class_priority_fill", "class_priority_runner"]


def class_priority_runner(engine, policy):
    """The rule for ``policy`` (a :class:`StaticPriority` under FCFS) on ``engine``, or
    ``None``: with the trace's requests all of one listed class it is FCFS Sarathi (with a
    KV-memory limit and ``max_reqs`` too: its candidates, its admission check and its
    evictions are Sarathi's when every request in decode decodes); with several classes it
    needs no memory limit; a class missing from ``class_order`` is left to the stepping
    engine, which refuses it."""
    present = np.unique(engine.table.column("cls")).tolist()
    if not set(present) <= set(policy.class_order):
        return None
    if len(present) <= 1:
        if engine.memory is None and policy.max_reqs is None:
            return decode_first_fill
        return decode_first_fill_memory
    if engine.memory is not None:
        return None
    return class_priority_fill


def class_priority_fill(engine, t, stop, limit):
    tab = engine.table
    n = tab.n
    policy = engine.policy
    arrival = tab.column("arrival").tolist()
    prompt = tab.column("prompt").tolist()
    output = tab.column("output").tolist()
    rank = {c: i for i, c in enumerate(policy.class_order)}
    cls = [rank[c] for c in tab.column("cls").tolist()]     # priority rank of each request
    K = len(rank)
    taus, new_tau = durations(engine.time_model)
    b, e = engine.budget, tab.emit_first
    R = policy.max_reqs or b       # each member takes a token: at most b members anyway
    waiting = [deque() for _ in range(K)]     # per class, in arrival order
    head_done = [0] * K                       # prompt tokens of each class's head prefilled
    decoders = [[] for _ in range(K)]         # per class, in arrival order
    running = [0] * K                         # the prefix of decoders in a run
    served = [array("q") for _ in range(K)]   # the class's clock: iterations it decoded in
    leaving = [{} for _ in range(K)]          # clock tick -> [(request, epoch)] ending in it
    seg_first = [-1] * n           # tick of the current run's first token
    emitted = [0] * n              # tokens emitted before the current run
    epoch = [0] * n                # bumped when a run stops: cancels its completion
    prefill_end = [-1] * n
    finish = [-1] * n
    segments = array("q")          # closed runs: (request, first tick, tokens)
    rows = [array(code) for code in "ddqqqqqq"]
    start, dur, n_pre, chunks, decs, used_col, in_sys, work_col = rows
    admitted = finished = 0
    work, kv, peak = engine.work, engine.kv_total, engine.peak_memory
    s = engine.iteration
    while t < stop and s < limit:
        while admitted < n and arrival[admitted] <= t:
            work += prompt[admitted] + output[admitted]
            waiting[cls[admitted]].append(admitted)
            admitted += 1
        live = admitted - finished
        if not live:
            if admitted == n:
                break
            t = arrival[admitted]
            continue
        room, slots = b, R
        chunk_sum = members = d = done = freed = gone = 0
        for i in range(K):
            if room <= 0 or slots <= 0:
                break           # the higher classes filled the batch
            dec = decoders[i]
            m = len(dec)
            if m > room:
                m = room
            if m > slots:
                m = slots
            if m:
                tick = len(served[i])
                served[i].append(s)
                was = running[i]
                if m < was:                  # the youngest runners wait
                    for v in dec[m:was]:
                        count = tick - seg_first[v]
                        segments.extend((v, seg_first[v], count))
                        emitted[v] += count
                        epoch[v] += 1
                        seg_first[v] = -1
                elif m > was:                # waiting decoders run again
                    ends = leaving[i]
                    for v in dec[was:m]:
                        seg_first[v] = tick
                        last = tick + output[v] - emitted[v] - 1
                        if last in ends:
                            ends[last].append((v, epoch[v]))
                        else:
                            ends[last] = [(v, epoch[v])]
                running[i] = m
                room -= m
                slots -= m
                d += m
                for v, ep in leaving[i].pop(tick, ()):
                    if ep == epoch[v]:
                        finish[v] = s
                        freed += prompt[v] + output[v] - e
                        segments.extend((v, seg_first[v], tick - seg_first[v] + 1))
                        dec.remove(v)
                        running[i] -= 1
                        gone += 1
            queue = waiting[i]
            while room > 0 and slots > 0 and queue:
                w = queue[0]
                left = prompt[w] - head_done[i]
                c = left if left < room else room
                chunk_sum += c
                room -= c
                slots -= 1
                members += 1
                if c < left:
                    head_done[i] += c
                    break
                queue.popleft()
                head_done[i] = 0
                prefill_end[w] = s
                done += 1
                emitted[w] = e
                if output[w] > e:
                    dec.append(w)
                else:            # one output token, emitted by the prefill iteration
                    finish[w] = s
                    freed += prompt[w]
                    gone += 1
        tau = taus.get((chunk_sum, d)) or new_tau(chunk_sum, d)
        used = kv + chunk_sum + d
        work -= chunk_sum + d + e * done
        start.append(t)
        dur.append(tau)
        n_pre.append(members)
        chunks.append(chunk_sum)
        decs.append(d)
        used_col.append(used)
        in_sys.append(live)
        work_col.append(work)
        peak = used if used > peak else peak
        kv = used - freed
        finished += gone
        t = t + tau
        s += 1
    for i in range(K):                       # runs still open
        tick = len(served[i])
        for v in decoders[i][: running[i]]:
            segments.extend((v, seg_first[v], tick - seg_first[v]))
    _write_back(engine, admitted, rows, served, rank, segments, prefill_end, finish,
                waiting, head_done)
    engine.work, engine.kv_total, engine.peak_memory = work, kv, peak
    return t


def _write_back(engine, admitted, rows, served, rank, segments, prefill_end, finish,
                waiting, head_done):
    """The engine's records after the bulk run, as if it had stepped. A request emits (under
    ``first_token="prefill"``) a token at the end of its prefill iteration, then one at each
    tick of its runs ``(request, first tick, tokens)`` on its class's clock; a token closes
    the gap since the request's previous one."""
    start, dur, n_pre, chunks, decs, used, in_sys, work = (np.frombuffer(r, r.typecode)
                                                           for r in rows)
    k = start.size
    s0 = engine.iteration
    if k:
        engine.log.extend(k, start, dur, n_pre, chunks, decs, chunks + decs, 0, used, in_sys,
                          work)
    engine.iteration += k
    engine._pending = admitted
    tab = engine.table
    e = tab.emit_first
    ends = start + dur
    ids = np.arange(admitted)
    q = np.array(prefill_end[:admitted], dtype=np.int64) - s0
    has = q >= 0
    done = ids[has]
    tab.prefilled[done] = tab.prompt[done]
    tab.in_decode[done] = True
    tab.prefill_done[done] = ends[q[has]]
    for queue, part in zip(waiting, head_done, strict=True):
        if part:
            tab.prefilled[queue[0]] = part
    fin = np.array(finish[:admitted], dtype=np.int64) - s0
    over = fin >= 0
    tab.finish[ids[over]] = ends[fin[over]]
    # every class's clock ticks, one after another: tick j of class i is served[i][j]
    offset = np.cumsum([0] + [len(c) for c in served])
    ticks = np.concatenate([np.frombuffer(c, np.int64) for c in served]) - s0
    tick_end = ends[ticks]
    gaps = np.zeros(ticks.size)                       # from the class's previous tick
    gaps[1:] = tick_end[1:] - tick_end[:-1]           # (a class's first counts for none)
    class_rank = np.zeros(int(tab.cls[:admitted].max(initial=0)) + 1, dtype=np.int64)
    for c, i in rank.items():
        if c < class_rank.size:
            class_rank[c] = i
    seg = np.frombuffer(segments, dtype=np.int64).reshape(-1, 3)
    rid, first, count = seg[:, 0], seg[:, 1] + offset[class_rank[tab.cls[seg[:, 0]]]], seg[:, 2]
    first_end, last_end = tick_end[first], tick_end[first + count - 1]
    if e:                 # the prefill iteration's token: a run of its own, in no clock
        said = ids[has]
        rid = np.concatenate([said, rid])
        first_end = np.concatenate([ends[q[has]], first_end])
        last_end = np.concatenate([ends[q[has]], last_end])
        first = np.concatenate([np.zeros(said.size, np.int64), first])
        count = np.concatenate([np.ones(said.size, np.int64), count])
        inside = np.concatenate([np.zeros(said.size, bool), np.ones(seg.shape[0], bool)])
    else:
        inside = np.ones(rid.size, bool)
    order = np.lexsort((first_end, rid))
    rid, first, count, first_end, last_end, inside = (
        a[order] for a in (rid, first, count, first_end, last_end, inside))
    tab.decoded[:admitted] = np.bincount(rid, weights=count, minlength=admitted
                                         )[:admitted].astype(np.int64)
    lead = np.ones(rid.size, dtype=bool)
    lead[1:] = rid[1:] != rid[:-1]
    tab.first_token[rid[lead]] = first_end[lead]
    tail = tail_of(rid)
    tab.last_token[rid[tail]] = last_end[tail]
    cls = tab.cls[rid]
    timed = np.flatnonzero(inside & (count > 1))   # gaps between a run's consecutive ticks
    if timed.size:
        timed = timed[np.argsort(first[timed], kind="stable")]   # so that reduceat's spans
        lo, hi = first[timed] + 1, first[timed] + count[timed]    # between runs stay short
        bounds = np.column_stack([lo, hi]).ravel()
        longest = np.maximum.reduceat(np.append(gaps, 0.0), bounds)[::2]
        np.maximum.at(tab.tbt_max, rid[timed], longest)
        engine.tbt.add_intervals(gaps, lo, hi, cls[timed])
    again = np.flatnonzero(~lead)              # from a run's last token to the next run's first
    if again.size:
        wait = first_end[again] - last_end[again - 1]
        np.maximum.at(tab.tbt_max, rid[again], wait)
        engine.tbt.add(cls[again], wait)
    engine.live = ids[~over]

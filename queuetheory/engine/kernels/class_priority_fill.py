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
which the higher classes take the whole budget costs the lower classes nothing. With a
KV-memory limit (vLLM's accounting and recompute preemption) the rule runs as
:func:`class_priority_fill_memory`.
"""

from __future__ import annotations

from array import array
from collections import deque
from functools import partial

import numpy as np

from .common import (
    add_inner_gaps,
    durations,
    log_columns,
    stamp_runs,
    write_log,
    write_states,
)
from .decode_first_fill import decode_first_fill, decode_first_fill_memory

__all__ = ["class_priority_fill", "class_priority_fill_memory", "class_priority_kernel"]


def class_priority_kernel(engine, class_order, max_reqs=None):
    """The kernel of a :class:`StaticPriority` under FCFS with ``class_order`` and
    ``max_reqs`` on ``engine``, as ``run(engine, t, stop, limit)``, or ``None``. With the
    trace's requests all of one listed class it is FCFS Sarathi (with a KV-memory limit and
    ``max_reqs`` too: its candidates, its admission check and its evictions are Sarathi's
    when every request in decode decodes); with several classes, :func:`class_priority_fill`
    or, with a KV-memory limit, :func:`class_priority_fill_memory`; a class missing from
    ``class_order`` is left to the stepping engine, which refuses it."""
    present = np.unique(engine.table.column("cls")).tolist()
    if not set(present) <= set(class_order):
        return None
    if len(present) <= 1:
        if engine.memory is None and max_reqs is None:
            return decode_first_fill
        return partial(decode_first_fill_memory, max_reqs=max_reqs)
    kernel = class_priority_fill if engine.memory is None else class_priority_fill_memory
    return partial(kernel, class_order=class_order, max_reqs=max_reqs)


def class_priority_fill(engine, t, stop, limit, *, class_order, max_reqs=None):
    """The rule without a memory limit, any ``max_reqs`` (see the module docstring)."""
    tab = engine.table
    n = tab.n
    arrival = tab.column("arrival").tolist()
    prompt = tab.column("prompt").tolist()
    output = tab.column("output").tolist()
    rank = {c: i for i, c in enumerate(class_order)}
    cls = [rank[c] for c in tab.column("cls").tolist()]     # priority rank of each request
    K = len(rank)
    taus, new_tau = durations(engine.time_model)
    b, e = engine.token_budget, tab.emit_first
    R = max_reqs or b       # each member takes a token: at most b members anyway
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
    times, counts = array("d"), array("q")   # the batch log (:func:`.common.log_columns`)
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
                if m != running[i]:
                    _resize(dec, running[i], m, tick, seg_first, emitted, epoch, leaving[i],
                            output, segments)
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
        times.extend((t, tau))
        counts.extend((members, chunk_sum, d, 0, used, live, work))
        peak = used if used > peak else peak
        kv = used - freed
        finished += gone
        t = t + tau
        s += 1
    for i in range(K):                       # runs still open
        tick = len(served[i])
        for v in decoders[i][: running[i]]:
            segments.extend((v, seg_first[v], tick - seg_first[v]))
    q = np.array(prefill_end[:admitted], dtype=np.int64)
    ids = np.flatnonzero(q >= 0)
    filled = np.where(q >= 0, tab.prompt[:admitted], 0)
    for queue, part in zip(waiting, head_done, strict=True):
        if part:
            filled[queue[0]] = part
    said = np.column_stack([ids, q[ids]]) if e else np.empty((0, 2), np.int64)
    _write_back(engine, admitted, log_columns(times, counts), served, rank, segments, said,
                filled, None, None, q, finish)
    engine.work, engine.kv_total, engine.peak_memory = work, kv, peak
    return t


# long: bulk kernel, one pass per iteration in plain ints: helper calls per iteration cost its speed
def class_priority_fill_memory(  # noqa: C901
        engine, t, stop, limit, *, class_order, max_reqs=None):
    """The rule with a KV-memory limit ``M`` (vLLM's accounting and recompute preemption,
    :func:`~queuetheory.policies.base.admissible` and :func:`~queuetheory.policies.base.fit_memory`)
    and any ``max_reqs``.

    Within a class, requests are admitted in arrival order, so the class's requests holding
    KV (residents) are its oldest, all in decode but possibly the head of its queue,
    part-way through its prefill; a preempted request (the least important class's residents
    go first, the youngest first, as vLLM's priority scheduling evicts) rejoins the head of
    its class's queue with its generated tokens to prefill again. Each class keeps its clock
    and runs as without memory; per iteration: the decisions of the classes in order (a
    class's new prompts admissible while their prefills, summed over the class, fit in the
    memory left after every request in decode and the promised prefills), then vLLM's check
    of the whole batch (new prefills in batch order while they fit after the batch's
    decodes; or, when the decodes do not fit, residents preempted in that order and no new
    prefill). Stops, for the engine to step on, before a batch that preemption would leave
    empty (the engine then idles until the next arrival).
    """
    tab = engine.table
    n = tab.n
    arrival = tab.column("arrival").tolist()
    prompt = tab.column("prompt").tolist()
    output = tab.column("output").tolist()
    rank = {c: i for i, c in enumerate(class_order)}
    cls = [rank[c] for c in tab.column("cls").tolist()]
    K = len(rank)
    taus, new_tau = durations(engine.time_model)
    b, e, M = engine.token_budget, tab.emit_first, engine.memory
    R = max_reqs or b
    length = prompt[:]             # current prefill: prompt plus recomputed output
    filled = [0] * n               # prefilled tokens of the current prefill
    recomputed = [0] * n
    restarts = [0] * n
    tokens = [0] * n               # tokens emitted before the current run
    waiting = [deque() for _ in range(K)]     # per class: preempted first, then arrival order
    decoders = [[] for _ in range(K)]
    running = [0] * K
    served = [array("q") for _ in range(K)]
    leaving = [{} for _ in range(K)]
    seg_first = [-1] * n
    epoch = [0] * n
    prefill_end = [-1] * n
    finish = [-1] * n
    segments = array("q")
    said = array("q")              # (request, iteration): a prefill's first token
    resident: set = set()          # requests holding KV
    times, counts = array("d"), array("q")   # the batch log (:func:`.common.log_columns`)
    admitted = finished = in_decode = 0
    work, used, peak = engine.work, engine.kv_total, engine.peak_memory
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
        promised = 0
        for queue in waiting:
            if queue and filled[queue[0]]:
                promised += length[queue[0]] - filled[queue[0]]
        free = M - used - promised
        room = free - in_decode         # what admissible leaves new prefills
        budget, slots = b, R
        picks = [0] * K                 # decodes of each class
        takes = []                      # prefills (class, request, chunk) in batch order
        d = 0
        for i in range(K):
            if budget <= 0 or slots <= 0:
                break
            m = len(decoders[i])
            if m > budget:
                m = budget
            if m > slots:
                m = slots
            picks[i] = m
            budget -= m
            slots -= m
            d += m
            asked = 0
            for w in waiting[i]:
                if budget <= 0 or slots <= 0:
                    break
                if not filled[w]:
                    asked += length[w]
                    if asked > room:
                        break
                left = length[w] - filled[w]
                c = left if left < budget else budget
                takes.append((i, w, c))
                budget -= c
                slots -= 1
                if c < left:
                    break
        victims = []
        if d > free:    # preempt until d fits: the least important class first, youngest first
            need, saved = d - free, 0
            order = sorted(resident, key=lambda v: (-cls[v], -v))
            while saved < need:
                if len(victims) == len(order):   # unreachable while every request fits alone
                    raise RuntimeError("class_priority_fill: preempted every resident")
                v = order[len(victims)]
                victims.append(v)
                if filled[v] < length[v]:               # part-way: held and promised
                    saved += length[v]
                else:
                    i = cls[v]
                    at = decoders[i].index(v)
                    got = tokens[v] + (len(served[i]) - seg_first[v] if at < running[i] else 0)
                    saved += length[v] + max(got - recomputed[v] - e, 0) + (at < picks[i])
            gone_set = set(victims)
            out = [[] for _ in range(K)]
            takes = [x for x in takes if filled[x[1]] and x[1] not in gone_set]
            for v in victims:
                if filled[v] >= length[v]:
                    picks[cls[v]] = min(picks[cls[v]], decoders[cls[v]].index(v))
            d = sum(picks)
        else:                           # new prefills in batch order while they fit
            room, kept, shut = free - d, [], False
            for x in takes:
                w = x[1]
                if not filled[w]:
                    if shut:
                        continue
                    room -= length[w]
                    if room < 0:
                        shut = True
                        continue
                kept.append(x)
            takes = kept
        if not takes and not d:
            break                       # an empty batch: the engine steps on from here
        for v in victims:               # within a class, youngest first
            i = cls[v]
            if filled[v] < length[v]:   # the head of its class's queue, part-way
                work += filled[v]
                used -= filled[v]
            else:
                dec = decoders[i]
                at = dec.index(v)
                got = tokens[v]
                if at < running[i]:
                    tick = len(served[i])
                    count = tick - seg_first[v]
                    if count:
                        segments.extend((v, seg_first[v], count))
                    got += count
                    epoch[v] += 1
                    seg_first[v] = -1
                del dec[at]
                if running[i] > len(dec):
                    running[i] = len(dec)
                in_decode -= 1
                used -= length[v] + max(got - recomputed[v] - e, 0)
                work += filled[v] + got - recomputed[v]
                recomputed[v] = tokens[v] = got
                length[v] = prompt[v] + got
                out[i].append(v)
            filled[v] = 0
            restarts[v] += 1
        if victims:
            resident -= gone_set
            for i in range(K):
                waiting[i].extendleft(out[i])
        chunk_sum = members = done = freed = gone = 0
        for i in range(K):
            m = picks[i]
            if not m:
                continue
            dec = decoders[i]
            tick = len(served[i])
            served[i].append(s)
            if m != running[i]:
                _resize(dec, running[i], m, tick, seg_first, tokens, epoch, leaving[i], output,
                        segments)
            running[i] = m
            for v, ep in leaving[i].pop(tick, ()):
                if ep == epoch[v]:
                    finish[v] = s
                    freed += prompt[v] + output[v] - e
                    segments.extend((v, seg_first[v], tick - seg_first[v] + 1))
                    dec.remove(v)
                    resident.discard(v)
                    running[i] -= 1
                    in_decode -= 1
                    gone += 1
        for i, w, c in takes:
            if not filled[w]:
                resident.add(w)
            filled[w] += c
            chunk_sum += c
            members += 1
            if filled[w] < length[w]:
                continue
            waiting[i].popleft()
            prefill_end[w] = s
            done += 1
            if e:
                said.extend((w, s))
                tokens[w] += 1
            if tokens[w] < output[w]:
                decoders[i].append(w)
                in_decode += 1
            else:            # its last token, emitted by the prefill iteration
                finish[w] = s
                freed += prompt[w] + output[w] - e
                resident.discard(w)
                gone += 1
        tau = taus.get((chunk_sum, d)) or new_tau(chunk_sum, d)
        used += chunk_sum + d
        work -= chunk_sum + d + e * done
        times.extend((t, tau))
        counts.extend((members, chunk_sum, d, len(victims), used, live, work))
        peak = used if used > peak else peak
        used -= freed
        finished += gone
        t = t + tau
        s += 1
    for i in range(K):
        tick = len(served[i])
        for v in decoders[i][: running[i]]:
            segments.extend((v, seg_first[v], tick - seg_first[v]))
    _write_back(engine, admitted, log_columns(times, counts), served, rank, segments,
                np.frombuffer(said, np.int64).reshape(-1, 2) if said else
                np.empty((0, 2), np.int64), np.array(filled[:admitted], dtype=np.int64),
                recomputed[:admitted], restarts[:admitted],
                np.array(prefill_end[:admitted], dtype=np.int64), finish)
    engine.work, engine.kv_total, engine.peak_memory = work, used, peak
    if any(restarts):
        tab.recomputing = True
    return t


def _resize(dec, was, m, tick, seg_first, emitted, epoch, ends, output, segments):
    """A class's running prefix ``dec[:was]`` of its decoders becomes ``dec[:m]`` at its
    clock's tick ``tick``: the youngest runners wait (their runs close into ``segments``,
    their planned completions cancelled by ``epoch``), or waiting decoders run again (their
    completion ticks planned in ``ends``). ``emitted``: tokens before each current run."""
    if m < was:
        for v in dec[m:was]:
            count = tick - seg_first[v]
            segments.extend((v, seg_first[v], count))
            emitted[v] += count
            epoch[v] += 1
            seg_first[v] = -1
        return
    for v in dec[was:m]:
        seg_first[v] = tick
        last = tick + output[v] - emitted[v] - 1
        if last in ends:
            ends[last].append((v, epoch[v]))
        else:
            ends[last] = [(v, epoch[v])]


def _write_back(engine, admitted, cols, served, rank, segments, said, filled, recomputed,
                restarts, prefill_end, finish):
    """The engine's records after the bulk run, as if it had stepped. A request emits a
    token at each tick of its runs ``(request, first tick, tokens)`` on its class's clock and
    (under ``first_token="prefill"``) at the end of each prefill it finishes (``said``:
    ``(request, iteration)``); every token closes the gap since the request's previous one,
    across a wait or a preemption too. ``filled``: each request's prefilled tokens;
    ``recomputed`` and ``restarts``: ``None`` when nothing was preempted."""
    s0 = write_log(engine, admitted, cols)
    start, dur = cols[:2]
    tab = engine.table
    ends = start + dur
    over = write_states(engine, admitted, s0, ends.__getitem__, filled, recomputed, restarts,
                        None, prefill_end, finish)
    engine.live = np.flatnonzero(~over)
    # every class's clock ticks, one after another: tick j of class i is served[i][j]
    offset = np.cumsum([0] + [len(c) for c in served])
    ticks = np.concatenate([np.frombuffer(c, np.int64) for c in served]) - s0
    tick_end = ends[ticks]
    gaps = np.zeros(ticks.size)                       # from the class's previous tick
    gaps[1:] = tick_end[1:] - tick_end[:-1]           # (a class's first counts for none)
    class_rank = np.zeros(int(tab.cls[:admitted].max(initial=0)) + 1, dtype=np.int64)
    for c, i in rank.items():
        if 0 <= c < class_rank.size:
            class_rank[c] = i
    seg = np.frombuffer(segments, dtype=np.int64).reshape(-1, 3)
    rid = np.concatenate([said[:, 0], seg[:, 0]])
    first = np.concatenate([np.zeros(len(said), np.int64),
                            seg[:, 1] + offset[class_rank[tab.cls[seg[:, 0]]]]])
    count = np.concatenate([np.ones(len(said), np.int64), seg[:, 2]])
    said_end = ends[said[:, 1] - s0]
    first_end = np.concatenate([said_end, tick_end[first[len(said):]]])
    last_end = np.concatenate([said_end, tick_end[(first + count - 1)[len(said):]]])
    on_clock = np.arange(rid.size) >= len(said)       # a prefill's token is on no clock
    order = np.lexsort((first_end, rid))
    rid, first, count, first_end, last_end, on_clock = (
        a[order] for a in (rid, first, count, first_end, last_end, on_clock))
    tab.decoded[:admitted] = np.bincount(rid, weights=count, minlength=admitted
                                         )[:admitted].astype(np.int64)
    if not rid.size:
        return
    stamp_runs(engine, rid, first_end, last_end)     # and from a run's last token to the next
    timed = np.flatnonzero(on_clock & (count > 1))    # gaps between a run's consecutive ticks
    timed = timed[np.argsort(first[timed], kind="stable")]
    add_inner_gaps(engine, gaps, first[timed] + 1, first[timed] + count[timed], rid[timed])

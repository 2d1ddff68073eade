"""The rule ``prefill_batches``: vanilla vLLM with FCFS order (see :mod:`..kernels`)."""

from __future__ import annotations

from array import array
from functools import partial

import numpy as np

from .common import (
    add_inner_gaps,
    durations,
    log_columns,
    stamp_runs,
    tail_of,
    write_log,
    write_states,
)
from .decode_prefix import VLLM, run_decode_prefix

__all__ = ["prefill_batches_kernel", "residencies_or_oldest", "prefill_batches",
           "vllm_decode_prefix"]


def prefill_batches_kernel(engine, max_reqs=None):
    """The kernel of the rule ``prefill_batches`` (vanilla vLLM under FCFS, Li, Dai, Peng §3): a
    prefill-only batch of whole prompts in arrival order (a prompt longer than the budget
    chunked alone) whenever one can start — memory permitting, vLLM's accounting — else a
    decode-only batch of the oldest requests in decode, up to the budget ``b`` and
    ``max_reqs``, preempting the youngest (recompute) when their tokens do not fit.

    While no more requests are in decode than a decode-only batch takes (``min(b,
    max_reqs)``), every one decodes in every decode-only batch and :func:`prefill_batches`
    follows residencies; at the first decode-only batch that would leave one out it stops,
    having written nothing, and :func:`vllm_decode_prefix` runs from the start, following the
    oldest decoders (:mod:`.decode_prefix`)."""
    return partial(residencies_or_oldest, max_reqs=max_reqs)


def residencies_or_oldest(engine, t, stop, limit, *, max_reqs=None):
    """:func:`prefill_batches`, or where more requests come to be in decode than a batch
    takes, :func:`vllm_decode_prefix` on the engine it left untouched."""
    reached = prefill_batches(engine, t, stop, limit, max_reqs=max_reqs)
    if reached is None:
        return vllm_decode_prefix(engine, t, stop, limit, max_reqs=max_reqs)
    return reached


def vllm_decode_prefix(engine, t, stop, limit, *, max_reqs=None):
    """Vanilla vLLM under FCFS as the decision ``VLLM`` of :func:`.decode_prefix.
    run_decode_prefix` (whole prompts; the decoders that decode are the oldest)."""
    return run_decode_prefix(engine, t, stop, limit, VLLM, chunk=False, max_reqs=max_reqs)


# long: bulk kernel, one pass per iteration in plain ints: helper calls per iteration cost its speed
def prefill_batches(engine, t, stop, limit, *, max_reqs=None):
    """Vanilla vLLM under FCFS where every request in decode decodes in every decode-only
    batch (see :func:`prefill_batches_kernel`): the residents are the oldest requests, so a
    residency emits its tokens (after the first, under ``first_token="prefill"``) in
    consecutive decode-only batches. Returns the time reached, or ``None``, with nothing
    written into the engine, at a decode-only batch that would leave a request in decode
    out (more than ``min(b, max_reqs)`` of them).
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
    times, counts = array("d"), array("q")   # the batch log (:func:`.common.log_columns`)
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
            if d > cap:        # the oldest decode: not this rule's (nothing written yet)
                return None
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
        times.extend((t, tau))
        counts.extend((members, chunk_sum, d, len(out), used, live, work))
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
    _write_back_batches(engine, admitted, log_columns(times, counts),
                        np.frombuffer(decode_iters, np.int64) if j else np.empty(0, np.int64),
                        segments, filled, recomputed,
                        restarts, prefill_end, finish, resident, waiting)
    engine.work, engine.kv_total, engine.peak_memory = work, used, peak
    if any(restarts):
        tab.recomputing = True
    return t


def _write_back_batches(engine, admitted, cols, decode_iters, segments, filled, recomputed,
                        restarts, prefill_end, finish, resident, waiting):
    """The engine's records after ``_prefill_batches``: a residency ``(request, prefill
    end, first decode-only batch, decodes)`` emits (under ``first_token="prefill"``) a token
    at the end of its prefill iteration, then one at each of its decode-only batches."""
    s0 = write_log(engine, admitted, cols)
    start, dur = cols[:2]
    tab = engine.table
    e = tab.emit_first
    ends = start + dur
    ids = np.arange(admitted)
    over = write_states(engine, admitted, s0, ends.__getitem__, filled, recomputed, restarts,
                        recomputed, prefill_end, finish)
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
    stamp_runs(engine, rid, head, tail_time)        # and the stall across a preemption
    gaps = np.concatenate([[0.0], dec_end[1:] - dec_end[:-1]])   # between decode batches
    timed = count > 1
    add_inner_gaps(engine, gaps, (first + 1)[timed], (first + count)[timed], rid[timed])
    step = count > 0
    if e and np.count_nonzero(step):   # from the prefill's token to the first decode batch
        who = rid[step]
        gap = dec_end[first[step]] - ends[q[step]]
        np.maximum.at(tab.tbt_max, who, gap)
        engine.tbt.add(tab.cls[who], gap)
    engine.live = np.sort(np.array(resident + list(waiting), dtype=np.int64))

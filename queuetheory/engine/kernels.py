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
never exceeds ``b``. The rule runs without a KV-memory limit, with a
token-count time model and prompts and outputs of at least one token, under either first-token
convention; elsewhere the engine steps.
"""

from __future__ import annotations

from array import array

import numpy as np

__all__ = ["bulk_runner"]


def bulk_runner(engine, policy):
    """A function ``run(t, stop, limit) -> t`` running the policy's rule from a fresh
    engine at ``t``, or ``None`` when no rule applies."""
    rule = getattr(policy, "rule", None)
    tab = engine.table
    if (rule is None or rule() != "decode_first_fill" or engine.memory is not None
            or not engine.time_model.counts_only or engine.budget != policy.token_budget
            or engine.iteration or engine.live.size
            or (tab.n and min(tab.column("prompt").min(), tab.column("output").min()) < 1)):
        return None
    return lambda t, stop, limit: _decode_first_fill(engine, t, stop, limit)


def _decode_first_fill(engine, t, stop, limit):
    tab = engine.table
    n = tab.n
    arrival = tab.column("arrival").tolist()
    prompt = tab.column("prompt").tolist()
    output = tab.column("output").tolist()
    duration = engine.time_model.count_duration
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
        tau = duration(chunk_sum, decoding)
        if not tau > 0:
            raise ValueError(f"{engine.time_model!r} returned a non-positive duration {tau}")
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


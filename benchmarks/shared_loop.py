"""Issue 31's experiment: one bookkeeping loop shared by the bulk rules, each giving only
its decision — tried on ``decode_first_fill`` (FCFS Sarathi, no KV limit) and timed against
the rule's own loop, on one core.

:func:`shared_loop` keeps what every rule keeps (arrivals, unfinished work, KV memory, the
log rows, completions from the iteration each prefill ends); a rule hands it ``decide``,
called once per iteration with the requests admitted so far and the token room the decodes
leave, returning the prompt tokens, the prefill members and the requests whose prefill ends.
``decode_first_fill``'s decision is the chunking of prompts in arrival order. Records are
checked identical to the package's kernel (``queuetheory.engine.kernels.decode_first_fill``);
the ratio of CPU seconds (best of three) is the price of the callback.

Run from the repository root: ``python -m benchmarks.shared_loop``.
"""

from __future__ import annotations

import importlib
import sys
import time
from array import array
from pathlib import Path

import numpy as np

import queuetheory as qt
from benchmarks import engine_speed as es
from benchmarks.anchor import anchor_trace
from queuetheory.engine.kernels.common import durations, log_columns

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
dff = importlib.import_module("queuetheory.engine.kernels.decode_first_fill")


def shared_loop(engine, t, stop, limit, decide):
    """The bookkeeping of a bulk run (no KV limit, no preemption) around ``decide``."""
    tab = engine.table
    n = tab.n
    arrival = tab.column("arrival").tolist()
    prompt = tab.column("prompt").tolist()
    output = tab.column("output").tolist()
    taus, new_tau = durations(engine.time_model)
    b, e = engine.token_budget, tab.emit_first
    prefill_end = [-1] * n
    leaving, freed = {}, {}
    times, counts = array("d"), array("q")       # the batch log (common.log_columns)
    admitted = finished = decoding = 0
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
        chunk_sum, members, done = decide(admitted, b - decoding)
        for i in done:
            prefill_end[i] = s
            last = s + output[i] - e
            leaving[last] = leaving.get(last, 0) + 1
            freed[last] = freed.get(last, 0) + prompt[i] + output[i] - e
        tau = taus.get((chunk_sum, decoding)) or new_tau(chunk_sum, decoding)
        used = kv + chunk_sum + decoding
        work -= chunk_sum + decoding + e * len(done)
        times.extend((t, tau))
        counts.extend((members, chunk_sum, decoding, 0, used, live, work))
        peak = used if used > peak else peak
        gone = leaving.pop(s, 0)
        kv = used - freed.pop(s, 0)
        finished += gone
        decoding += len(done) - gone
        t = t + tau
        s += 1
    return t, prefill_end, admitted, log_columns(times, counts), (work, kv, peak)


def decode_first_fill_shared(engine, t, stop, limit):
    """``decode_first_fill`` as a decision of :func:`shared_loop`."""
    prompt = engine.table.column("prompt").tolist()
    head = [0, 0]                      # the first prompt not finished, its tokens done

    def decide(admitted, room):
        chunk_sum = members = 0
        done = []
        i, head_done = head
        while room and i < admitted:
            left = prompt[i] - head_done
            c = left if left < room else room
            chunk_sum += c
            room -= c
            members += 1
            if c == left:
                done.append(i)
                i += 1
                head_done = 0
            else:
                head_done += c
        head[:] = i, head_done
        return chunk_sum, members, done

    t, prefill_end, admitted, rows, (work, kv, peak) = shared_loop(engine, t, stop, limit,
                                                                   decide)
    dff._write_back(engine, np.array(prefill_end[:admitted], dtype=np.int64), admitted,
                    head[0], head[1], rows)
    engine.work, engine.kv_total, engine.peak_memory = work, kv, peak
    return t


def timed(kernel, trace):
    """CPU seconds and result of FCFS ``Sarathi(512)`` with ``kernel`` as its rule."""
    from pyserq_driver import TIME

    from queuetheory.policies import classic

    own, classic.decode_first_fill = classic.decode_first_fill, kernel
    try:
        c0 = time.process_time()
        res = qt.simulate(trace, qt.policies.Sarathi(512), TIME, first_token="prefill")
        return time.process_time() - c0, res
    finally:
        classic.decode_first_fill = own


def main():
    cases = (("anchor, 10^4", anchor_trace(10_000)[:3]),
             ("ShareGPT load 0.8, 10^4", es.trace(10_000, True, 0.8)),
             ("ShareGPT load 0.8, 10^5", es.trace(100_000, True, 0.8)))
    print("| trace | iterations | own loop CPU s | shared loop CPU s | shared / own |")
    print("|---|---:|---:|---:|---:|")
    for label, arrays in cases:
        trace = qt.Workload.from_arrays(*arrays)
        best = {}
        for _ in range(3):
            for name, kernel in (("own", dff.decode_first_fill),
                                 ("shared", decode_first_fill_shared)):
                cpu, res = timed(kernel, trace)
                best[name] = min(best.get(name, np.inf), cpu)
                if name == "own":
                    ref = res
                elif not (res.requests.equals(ref.requests)
                          and res.batches.equals(ref.batches)):
                    raise AssertionError(f"{label}: the shared loop's records differ")
        print(f"| {label} | {len(ref.batches):,} | {best['own']:.3f} | {best['shared']:.3f} "
              f"| {best['shared'] / best['own']:.2f} |", flush=True)


if __name__ == "__main__":
    main()

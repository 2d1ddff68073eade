"""What the bulk rules share: memoised batch durations, a log row standing for many batches,
and run tails."""

from __future__ import annotations

import numpy as np

__all__ = ["durations", "expand", "tail_of", "write_log"]


def durations(time_model):
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


def expand(rows, repeats):
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



def tail_of(rid):
    """Marks the last row of each run of equal values in the sorted ``rid``."""
    tail = np.ones(rid.size, dtype=bool)
    tail[:-1] = rid[1:] != rid[:-1]
    return tail


def write_log(engine, admitted, start, dur, n_pre, chunks, decs, evicted, used, in_sys, work):
    """Append a bulk run's batch log (numpy columns, one entry per iteration; ``evicted`` 0
    for a rule that never evicts) to the engine's, and move the engine's iteration count and
    admission pointer past the run (the requests below ``admitted`` have arrived). Returns
    the engine's iteration at the start of the run."""
    s0 = engine.iteration
    k = start.size
    if k:
        engine.log.extend(k, start, dur, n_pre, chunks, decs, chunks + decs, evicted, used,
                          in_sys, work)
    engine.iteration += k
    engine._pending = admitted
    return s0

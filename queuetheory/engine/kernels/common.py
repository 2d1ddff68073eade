"""What the bulk rules share: memoised batch durations, a log row standing for many batches,
and run tails."""

from __future__ import annotations

import numpy as np

__all__ = ["durations", "RepeatedBatches", "tail_of", "write_log", "write_runs"]


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


class RepeatedBatches:
    """A bulk run's batch log as the kernel's rows, where a row ``r`` listed in ``repeats``
    as ``(r, k)`` stands for ``k`` identical decode-only batches of ``d`` decodes: memory
    grows and unfinished work falls by ``d`` a batch, and each starts where the one before
    ends (``t + τ``, added in sequence as the engine adds them: column by column over all
    such rows at once). ``start`` is expanded at once (the records are stamped from it);
    every other column, one entry per iteration, only when read (:meth:`column`, through
    :meth:`~queuetheory.engine.log.ColumnLog.extend_lazy`): a run of 10⁷ iterations whose
    log is read for a few columns never holds all ten."""

    def __init__(self, rows, repeats):
        cols = [np.frombuffer(r, r.typecode) for r in rows]
        self._rows = dict(zip(("start", "duration", "prefill_requests", "prefill_tokens",
                               "decode_requests", "evicted", "memory", "in_system",
                               "unfinished_tokens"), cols, strict=True))
        self._reps = self._first = None
        self.start = cols[0]
        self.size = cols[0].size
        if repeats:
            row, k = np.frombuffer(repeats, np.int64).reshape(-1, 2).T
            reps = np.ones(self.size, dtype=np.int64)
            reps[row] = k
            self._reps = reps
            self.size = int(reps.sum())
            first = self._first = reps.cumsum() - reps     # the row's first iteration
            start = cols[0].repeat(reps)
            order = np.argsort(-k, kind="stable")
            k, at, tau = k[order], first[row[order]], cols[1][row[order]]
            longer = np.searchsorted(-k, -np.arange(int(k[0])), side="left")   # k > j
            for j in range(1, int(k[0])):
                live = longer[j]
                pos = at[:live] + j
                start[pos] = start[pos - 1] + tau[:live]
            self.start = start

    def per_iteration(self, values: np.ndarray) -> np.ndarray:
        """``values``, one entry (or row) per kernel row, as one per iteration."""
        return values if self._reps is None else values.repeat(self._reps, axis=0)

    def column(self, name: str) -> np.ndarray:
        """The log column ``name``, one entry per iteration."""
        if name == "start":
            return self.start
        if name == "token_load":
            return self.column("prefill_tokens") + self.column("decode_requests")
        out = self.per_iteration(self._rows[name])
        if self._reps is not None and name in ("memory", "unfinished_tokens"):
            step = np.arange(self.size)
            step -= self.per_iteration(self._first)        # batches since the row's first
            step *= self.per_iteration(self._rows["decode_requests"])
            if name == "memory":
                out += step
            else:
                out -= step
        return out


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


def write_runs(engine, admitted, runs: RepeatedBatches):
    """:func:`write_log` for a run kept as :class:`RepeatedBatches`: the engine's log
    expands its columns only when read."""
    s0 = engine.iteration
    if runs.size:
        engine.log.extend_lazy(runs.size, runs)
    engine.iteration += runs.size
    engine._pending = admitted
    return s0

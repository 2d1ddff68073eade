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
    log is read for a few columns never holds all ten. ``arrivals``: the arrival times of
    the requests the run admitted and their tokens, for a rule whose repeated batches go on
    past arrivals (FasterTransformer decodes on whatever arrives): each iteration's
    ``in_system`` and ``unfinished_tokens`` then add what arrived since its row's first
    iteration began (the engine admits arrivals at the start of each iteration)."""

    def __init__(self, rows, repeats, arrivals=None):
        cols = [np.frombuffer(r, r.typecode) for r in rows]
        if arrivals is not None:         # arrival times, and the tokens arrived by each
            times, tokens = (np.asarray(v) for v in arrivals)
            arrivals = times, np.concatenate(([0], np.cumsum(tokens, dtype=np.int64)))
        self._arrivals = arrivals
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

    def column(self, name: str, at: np.ndarray | None = None) -> np.ndarray:
        """The log column ``name``, one entry per iteration, or at the iterations ``at``
        only (a few points of a long run, without expanding the column)."""
        if name == "start":
            return self.start if at is None else self.start[at]
        if name == "token_load":
            return self.column("prefill_tokens", at) + self.column("decode_requests", at)
        values = self._rows[name]
        if self._reps is None:
            return values if at is None else values[at]
        if at is None:
            iters, row, starts = np.arange(self.size), None, self.start
        else:
            iters = np.asarray(at, dtype=np.int64)
            row = np.searchsorted(self._first, iters, side="right") - 1
            starts = self.start[iters]

        def per(v):                   # a per-row column at the iterations read
            return self.per_iteration(v) if row is None else v[row]

        # each row's value at its first iteration, moved to a constant of the row, then the
        # change since: d decodes a batch (memory up, unfinished work down), and the
        # requests, or their tokens, that arrived since (admitted at each batch's start)
        shift = 0
        if name in ("memory", "unfinished_tokens"):
            decodes = self._rows["decode_requests"]
            sign = 1 if name == "memory" else -1
            values = values - sign * self._first * decodes
            shift = sign * iters * per(decodes)
        arrived = self._arrivals is not None and name in ("in_system", "unfinished_tokens")
        if arrived:
            times, prefix = self._arrivals
            before = np.searchsorted(times, self.start[self._first], side="right")
            if row is None:           # the arrivals by each start, counted from their places
                tokens = np.diff(prefix) if name == "unfinished_tokens" else None
                since = np.bincount(np.searchsorted(starts, times, side="left"),
                                    weights=tokens, minlength=self.size + 1)[:-1].cumsum()
                since = since.astype(np.int64)     # exact: integer sums below 2^53
            else:
                since = np.searchsorted(times, starts, side="right")
                if name == "unfinished_tokens":
                    since = prefix[since]
            if name == "unfinished_tokens":
                before = prefix[before]
            values = values - before
            shift = shift + since
        return per(values) + shift


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

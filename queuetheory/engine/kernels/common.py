"""What the bulk rules share: memoised batch durations, a log row standing for many batches,
and run tails."""

from __future__ import annotations

from itertools import accumulate, repeat

import numpy as np

__all__ = ["durations", "RepeatedBatches", "log_columns", "tail_of", "write_log", "write_runs",
           "write_states"]


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
    """A bulk run's batch log as the kernel's rows (:func:`log_columns`), where a row ``r`` listed
    in ``repeats`` as ``(r, k)`` stands for ``k`` identical decode-only batches of ``d``
    decodes: memory grows and unfinished work falls by ``d`` a batch, and each starts where the
    one before ends (``t + τ``, added in sequence as the engine adds them: column by column over
    all such rows at once). Every column, one entry per iteration, is expanded only when read
    (:meth:`column`, through :meth:`~queuetheory.engine.log.ColumnLog.extend_lazy`), and read at
    a few iterations without expanding it (:meth:`starts_at`, :meth:`ends_at`, ``column(name,
    at)``; the gaps a row at a time, :meth:`gaps`): a run of 10⁷ iterations whose log is read
    for a few columns never holds all ten. ``arrivals``: the arrival times of the requests the
    run admitted and their tokens, for a rule whose repeated batches go on past arrivals
    (FasterTransformer decodes on whatever arrives): each iteration's ``in_system`` and
    ``unfinished_tokens`` then add what arrived since its row's first iteration began (the
    engine admits arrivals at the start of each iteration)."""

    def __init__(self, cols, repeats, arrivals=None):
        if arrivals is not None:         # arrival times, and the tokens arrived by each
            times, tokens = (np.asarray(v) for v in arrivals)
            arrivals = times, np.concatenate(([0], np.cumsum(tokens, dtype=np.int64)))
        self._arrivals = arrivals
        self._rows = dict(zip(("start", "duration", "prefill_requests", "prefill_tokens",
                               "decode_requests", "evicted", "memory", "in_system",
                               "unfinished_tokens"), cols, strict=True))
        self._reps = self._first = self._repeated = None
        self._start = cols[0]
        self.size = cols[0].size
        # every row's gap, its end less its start; a run of batches within one binade
        # [2^e, 2^(e+1)) adds the same gap each time (``decode_prefix.one_gap``, here for
        # all runs at once: the numbers there are the multiples of one spacing u, so the
        # sum rounds τ to one multiple of u, unless τ/u is a half-integer); the other runs
        # are kept to add one by one
        start, tau = cols[0], cols[1]
        self._gap = (start + tau) - start
        self._odd: dict = {}
        if repeats:
            row, k = np.frombuffer(repeats, np.int64).reshape(-1, 2).T
            reps = np.ones(self.size, dtype=np.int64)
            reps[row] = k
            self._reps = reps
            self.size = int(reps.sum())
            self._first = reps.cumsum() - reps     # the row's first iteration
            self._repeated = row, k
            s, t, g = start[row], tau[row], self._gap[row]
            one_binade = (s > 0) & (np.frexp(s)[1] == np.frexp(s + k * g)[1]) & (
                (t / np.spacing(s)) % 1 != 0.5)
            self._odd = dict.fromkeys(row[~one_binade].tolist())
            self._start = None

    @property
    def start(self) -> np.ndarray:
        """Every iteration's start (the records are stamped from it), expanded when first
        read: each batch of a run starts where the one before ends (``t + τ``, added in
        sequence as the engine adds them: column by column over all runs at once)."""
        if self._start is None:
            row, k = self._repeated
            starts = self._rows["start"]
            start = starts.repeat(self._reps)
            order = np.argsort(-k, kind="stable")
            k, at, tau = k[order], self._first[row[order]], self._rows["duration"][row[order]]
            longer = np.searchsorted(-k, -np.arange(int(k[0])), side="left")   # k > j
            for j in range(1, int(k[0])):
                live = longer[j]
                pos = at[:live] + j
                start[pos] = start[pos - 1] + tau[:live]
            self._start = start
        return self._start

    def _odd_starts(self, r: int) -> np.ndarray:
        """The starts of run ``r`` whose sums leave one binade (or round ties): one by one."""
        if self._odd[r] is None:
            tau = float(self._rows["duration"][r])
            self._odd[r] = np.fromiter(accumulate(repeat(tau, int(self._reps[r]) - 1),
                                                  initial=float(self._rows["start"][r])),
                                       dtype=float)
        return self._odd[r]

    def _odd_ends(self, r: int) -> np.ndarray:
        """The ends (start plus duration) of the batches of run ``r`` taken one by one."""
        return self._odd_starts(r) + self._rows["duration"][r]

    def _row_of(self, iters: np.ndarray) -> np.ndarray:
        """The log row of each iteration in ``iters``."""
        if self._reps is None:
            return iters
        return np.searchsorted(self._first, iters, side="right") - 1

    def starts_at(self, iters) -> np.ndarray:
        """The starts of the iterations ``iters``, as :attr:`start` has them, without
        expanding it: a run's ``j``-th batch starts ``j`` gaps after the run, exactly."""
        iters = np.asarray(iters, dtype=np.int64)
        if self._start is not None:
            return self._start[iters]
        row = self._row_of(iters)
        j = iters - self._first[row]
        out = self._rows["start"][row] + j * self._gap[row]
        for r in set(row.tolist()).intersection(self._odd):
            mine = row == r
            out[mine] = self._odd_starts(r)[j[mine]]
        return out

    def ends_at(self, iters) -> np.ndarray:
        """The ends (start plus duration) of the iterations ``iters``."""
        iters = np.asarray(iters, dtype=np.int64)
        return self.starts_at(iters) + self._rows["duration"][self._row_of(iters)]

    def gaps(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every iteration's gap (its end less its start), a row at a time: ``(gaps, rows,
        counts)``, gap ``gaps[i]`` met ``counts[i]`` times in row ``rows[i]`` — once per
        row, with the row's batches as its count, except in the runs whose gaps are taken
        one by one."""
        rows = np.arange(self._gap.size)
        if self._reps is None:
            return self._gap, rows, np.ones(rows.size, dtype=np.int64)
        counts = self._reps.copy()
        gaps, of_row, ones = [self._gap], [rows], [counts]
        for r in self._odd:
            s = self._odd_starts(r)
            counts[r] = 0
            gaps.append(self._odd_ends(r) - s)
            of_row.append(np.full(s.size, r))
            ones.append(np.ones(s.size, dtype=np.int64))
        return np.concatenate(gaps), np.concatenate(of_row), np.concatenate(ones)

    def _within(self, r: np.ndarray, x: np.ndarray, at_start: bool) -> np.ndarray:
        """In each row ``r``: with ``at_start``, the first batch starting at or after ``x``
        (``x`` past the row's start, up to its last batch's start), else the last batch
        ending by ``x`` (0 where none does)."""
        k = self._reps[r] if self._reps is not None else np.ones(r.size, np.int64)
        base = self._rows["start"][r] if at_start else self.ends_at(self._first_of(r))
        g = self._gap[r]
        with np.errstate(divide="ignore", invalid="ignore"):
            q = (x - base) / g
            j = np.where(g > 0, np.ceil(q) if at_start else np.floor(q), k - 1)
        j = np.clip(np.nan_to_num(j), 0, k - 1).astype(np.int64)
        # the division may be off by one batch: the exact sums decide
        if at_start:
            j[(j > 0) & (base + (j - 1) * g >= x)] -= 1
            j[(j < k - 1) & (base + j * g < x)] += 1
        else:
            j[(j > 0) & (base + j * g > x)] -= 1
            j[(j < k - 1) & (base + (j + 1) * g <= x)] += 1
        for row in set(r.tolist()).intersection(self._odd):
            mine = r == row
            if at_start:
                j[mine] = np.searchsorted(self._odd_starts(row), x[mine], side="left")
            else:
                j[mine] = np.maximum(np.searchsorted(self._odd_ends(row), x[mine],
                                                     side="right") - 1, 0)
        return j

    def _first_of(self, rows: np.ndarray) -> np.ndarray:
        return rows if self._first is None else self._first[rows]

    def path_at(self, name: str, edges) -> tuple[np.ndarray, np.ndarray]:
        """The step path of column ``name`` against the iterations' ends (value ``y[i]``
        from the end of iteration ``i`` to the next end), at the sorted times ``edges``:
        its values and its integrals from the first end, as
        :func:`~queuetheory.metrics.step_path_at` computes them from the expanded columns,
        here a row at a time (the integrals equal to rounding). Within a run the value moves
        by ``d`` a batch (``memory`` up, ``unfinished_tokens`` down), and, for a rule whose
        runs go on past arrivals, each arrival adds its request (or tokens) from the end of
        the first batch that starts after it to the end of the run."""
        edges = np.asarray(edges, dtype=float)
        n_rows = self._gap.size
        rows = np.arange(n_rows)
        k = self._reps if self._reps is not None else np.ones(n_rows, np.int64)
        first_end = self.ends_at(self._first_of(rows))
        r = np.maximum(np.searchsorted(first_end, edges, side="right") - 1, 0)
        j = self._within(r, edges, at_start=False)
        idx = self._first_of(r) + j
        values = self.column(name, at=idx).astype(float)
        # the path without the arrivals during runs: each row's value at its first batch,
        # moving by ``slope`` a batch, held ``g`` a batch and, the last, to the next row's
        # first end ``after``
        y0 = self._rows[name].astype(float)
        slope = np.zeros(n_rows)
        if name in ("memory", "unfinished_tokens"):
            slope = (1.0 if name == "memory" else -1.0) * self._rows["decode_requests"]
        g = self._gap
        after = np.append(first_end[1:], first_end[-1])
        last_end = first_end + (k - 1) * g
        area = g * ((k - 1) * y0 + slope * (k - 1) * (k - 2) / 2) + \
            (y0 + slope * (k - 1)) * (after - last_end)
        for row in self._odd:
            ends = self._odd_ends(row)
            held = np.diff(np.append(ends, after[row]))
            area[row] = float(((y0[row] + slope[row] * np.arange(ends.size)) * held).sum())
        area[-1] = 0.0                   # the last row is held to the edges below
        before = np.concatenate(([0.0], np.cumsum(area[:-1])))
        t_idx = self.ends_at(idx)
        y_base = y0[r] + slope[r] * j
        partial = g[r] * (j * y0[r] + slope[r] * j * (j - 1) / 2)
        for row in set(r.tolist()).intersection(self._odd):
            held = np.diff(self._odd_ends(row))
            for i in np.flatnonzero(r == row).tolist():
                jj = int(j[i])
                partial[i] = float(((y0[row] + slope[row] * np.arange(jj)) * held[:jj]).sum())
        integrals = before[r] + partial + y_base * (edges - t_idx)
        if self._arrivals is not None and self._reps is not None and name in (
                "in_system", "unfinished_tokens"):
            times, prefix = self._arrivals
            weight = np.diff(prefix).astype(float) if name == "unfinished_tokens" else \
                np.ones(times.size)
            ra = np.searchsorted(self._rows["start"], times, side="left") - 1
            inside = ra >= 0
            inside[inside] &= k[ra[inside]] > 1
            ra, times, weight = ra[inside], times[inside], weight[inside]
            last_start = self.starts_at(self._first[ra] + k[ra] - 1)
            inside = times <= last_start
            ra, times, weight = ra[inside], times[inside], weight[inside]
            from_ = self.ends_at(self._first[ra] + self._within(ra, times, at_start=True))
            until = np.where(ra + 1 < n_rows, first_end[np.minimum(ra + 1, n_rows - 1)],
                             np.inf)
            for e, x in enumerate(edges.tolist()):
                held = np.minimum(np.maximum(x - from_, 0.0), until - from_)
                integrals[e] += float((held * weight).sum())   # no BLAS threads
        return values, integrals

    def per_iteration(self, values: np.ndarray) -> np.ndarray:
        """``values``, one entry (or row) per kernel row, as one per iteration."""
        return values if self._reps is None else values.repeat(self._reps, axis=0)

    def column(self, name: str, at: np.ndarray | None = None) -> np.ndarray:
        """The log column ``name``, one entry per iteration, or at the iterations ``at``
        only (a few points of a long run, without expanding the column)."""
        if name == "start":
            return self.start if at is None else self.starts_at(at)
        if name == "token_load":
            return self.column("prefill_tokens", at) + self.column("decode_requests", at)
        values = self._rows[name]
        if self._reps is None:
            return values if at is None else values[at]
        if at is None:
            iters, row, starts = np.arange(self.size), None, self.start
        else:
            iters = np.asarray(at, dtype=np.int64)
            row = self._row_of(iters)
            starts = self.starts_at(iters)

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
            before = np.searchsorted(times, self._rows["start"], side="right")
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


def stamp_runs(engine, rid, first_time, last_time):
    """Stamp the tokens of runs of consecutive tokens, one run per row, sorted by request
    and then in time (a request has several after preemptions): each request's first and
    last token, and the stall from a run's last token to the next run's first (a
    preemption's, or a turn's wait) into ``tbt_max`` and the TBT histogram.

    Returns the rows that open and that close a request's runs."""
    tab = engine.table
    lead = np.ones(rid.size, dtype=bool)
    lead[1:] = rid[1:] != rid[:-1]
    tab.first_token[rid[lead]] = first_time[lead]
    tail = tail_of(rid)
    tab.last_token[rid[tail]] = last_time[tail]
    again = np.flatnonzero(~lead)
    if again.size:
        stall = first_time[again] - last_time[again - 1]
        np.maximum.at(tab.tbt_max, rid[again], stall)
        engine.tbt.add(tab.cls[rid[again]], stall)
    return lead, tail


def add_inner_gaps(engine, gaps, lo, hi, who):
    """The gaps inside runs: ``gaps[lo[i]:hi[i]]`` closed by request ``who[i]``'s tokens,
    into ``tbt_max`` (its longest) and the TBT histogram. The runs are taken in the order
    of ``lo``: then ``reduceat``'s spans between runs are disjoint and cover the gaps at
    most once (taken by request, where requests start out of arrival order, a span may
    cover most of the run, and the work grows with the square of the run's length)."""
    if not lo.size:
        return
    if lo.size > 1 and (lo[1:] < lo[:-1]).any():
        order = lo.argsort(kind="stable")
        lo, hi, who = lo[order], hi[order], who[order]
    bounds = np.empty(2 * lo.size, dtype=np.int64)      # lo[0], hi[0], lo[1], hi[1], …
    bounds[0::2], bounds[1::2] = lo, hi
    longest = np.maximum.reduceat(np.append(gaps, 0.0), bounds)[::2]
    np.maximum.at(engine.table.tbt_max, who, longest)
    engine.tbt.add_intervals(gaps, lo, hi, engine.table.cls[who])


def log_columns(times, counts):
    """A bulk run's batch log as a kernel keeps it, two arrays of machine words appended a
    row per batch — ``times``: start and duration; ``counts``: prefill requests, prefill
    tokens, decode requests, evicted, memory, in system, unfinished tokens — as the nine
    numpy columns in that order (one ``extend`` of a tuple costs less than seven appends)."""
    floats = np.frombuffer(times, np.float64).reshape(-1, 2).T
    ints = np.frombuffer(counts, np.int64).reshape(-1, 7).T
    return [*np.ascontiguousarray(floats), *np.ascontiguousarray(ints)]


def write_log(engine, admitted, cols):
    """Append a bulk run's batch log ``cols`` (the nine columns of :func:`log_columns`, one
    entry per iteration; ``evicted`` may be 0 for a rule that never evicts) to the engine's,
    and move the engine's iteration count and admission pointer past the run (the requests
    below ``admitted`` have arrived). Returns the engine's iteration at the start of the run."""
    start, dur, n_pre, chunks, decs, evicted, used, in_sys, work = cols
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


def write_states(engine, admitted, s0, ends_at, filled, recomputed, restarts, decoded,
                 prefill_end, finish):
    """Each admitted request's state after a bulk run from iteration ``s0``: its prefilled,
    recomputed, restart and output counts (indexed by request; ``None``: left as they are),
    whether it is in decode, and the end times (``ends_at`` of the run's iterations, counted
    from its first) of the iterations ``prefill_end`` and ``finish`` (-1: none). Returns the
    mask of the admitted requests that finished."""
    tab = engine.table
    ids = np.arange(admitted)
    for column, values in ((tab.prefilled, filled), (tab.recomputed, recomputed),
                           (tab.restarts, restarts), (tab.decoded, decoded)):
        if values is not None:
            column[:admitted] = values[:admitted]
    tab.in_decode[:admitted] = tab.prefilled[:admitted] >= tab.prompt[:admitted] + \
        tab.recomputed[:admitted]
    for column, iterations in ((tab.prefill_done, prefill_end), (tab.finish, finish)):
        at = np.array(iterations[:admitted], dtype=np.int64) - s0
        over = at >= 0
        column[ids[over]] = ends_at(at[over])
    return over

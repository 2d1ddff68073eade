"""One LLM engine: a request table, a policy, a time model, and the iteration step."""

from __future__ import annotations

import numpy as np

from ..timing import BatchLoad
from .batch import Batch, _total, check_batch
from .log import ColumnLog, TBTHistogram
from .state import RequestTable, State

__all__ = ["Engine"]

_BATCH_COLUMNS = {
    "start": float, "duration": float, "prefill_requests": np.int64, "prefill_tokens": np.int64,
    "decode_requests": np.int64, "token_load": np.int64, "evicted": np.int64,
    "memory": np.int64, "in_system": np.int64, "unfinished_tokens": np.int64,
}


class Engine:
    """Runs a policy's batches on a time model and keeps the books.

    ``step(t)`` asks the policy for one batch over the requests in the system at time ``t``,
    checks it (:func:`check_batch`), applies it and returns its duration, or ``None`` when
    the policy idles. The driver (:func:`~queuetheory.engine.simulate` or a network) admits
    arrivals and advances time.

    ``emit_first``: the iteration that finishes a prompt also emits the first output token
    (vLLM's convention and seeds 001/003's rounds); by default it does not (seed 004's model,
    where every output token takes a decode iteration of its own).
    """

    def __init__(self, policy, time_model, *, memory=None, budget=None, emit_first=False,
                 n_classes: int = 1, capacity: int = 1024):
        self.policy = policy
        self.time_model = time_model
        self.memory = memory
        self.budget = budget
        self.table = RequestTable(emit_first, capacity)
        self.live = np.empty(0, dtype=np.int64)
        self.iteration = 0
        self.work = 0          # unprocessed tokens of the requests in the system, |X(n)|
        self.peak_memory = 0
        self.kv_total = 0      # resident KV tokens of the requests in the system
        self.log = ColumnLog(_BATCH_COLUMNS)
        self.tbt = TBTHistogram(n_classes)
        self._pending = 0      # first table row not yet admitted (pre-loaded traces)

    # ---- arrivals -----------------------------------------------------------------------------
    def load(self, trace) -> None:
        """Pre-load a whole trace; rows are admitted by :meth:`admit_until` as time passes."""
        self.table.append(trace)
        self._arrival = self.table.column("arrival")

    def admit_until(self, t: float) -> None:
        """Admit the pre-loaded requests that arrived at or before ``t``."""
        stop = int(np.searchsorted(self._arrival, t, side="right"))
        if stop > self._pending:
            self._admit(np.arange(self._pending, stop))
            self._pending = stop

    def next_arrival(self) -> float:
        return float(self._arrival[self._pending]) if self._pending < self.table.n else np.inf

    def add(self, trace) -> np.ndarray:
        """Admit new requests now (networks); returns their ids."""
        ids = self.table.append(trace)
        self._admit(ids)
        return ids

    def _admit(self, ids):
        t = self.table
        self.work += int(t.prompt[ids].sum() + t.output[ids].sum())
        self.live = np.concatenate([self.live, ids])

    # ---- one iteration ----------------------------------------------------------------------
    def state(self, t: float) -> State:
        return State(self.table, self.live, t, self.budget, self.memory,
                     kv_total=self.kv_total)

    def step(self, t: float):
        """Run one batch starting at ``t``. Returns ``(duration, finished_ids)`` or the
        policy's empty :class:`Batch` when it idles."""
        out = self._iterate(t)
        return out if isinstance(out, Batch) else out[:2]

    def advance(self, t: float, until: float = np.inf, max_iterations: int = 1):
        """One decision of the policy at ``t``, then — when the policy declares the batch
        steady (:meth:`Policy.steady`) and the time model has a closed form for repeating it
        (:meth:`TimeModel.repeat_decode`) — the same batch again and again, at most
        ``max_iterations`` in all, while every repeat starts before ``until`` (the next
        arrival or the horizon) and no member finishes before the last one.

        Every skipped iteration is checked analytically (output lengths, token budget and
        KV memory over the whole stretch) and recorded exactly as :meth:`step` would, row
        by row in the batch log. Returns ``(end_time, finished_ids)`` or the idle Batch.
        """
        out = self._iterate(t, until, max_iterations)
        return out if isinstance(out, Batch) else (out[2], out[1])

    def _iterate(self, t, until=np.inf, max_iterations=1):
        state = self.state(t)
        batch = self.policy.schedule(state)
        if not isinstance(batch, Batch):
            raise TypeError(f"{self.policy!r}.schedule returned {type(batch).__name__}, not Batch")
        used = check_batch(state, batch, policy=self.policy, iteration=self.iteration,
                           budget=self.budget, memory=self.memory,
                           emit_first=bool(self.table.emit_first))
        if batch.evict.size:
            self._evict(state.rid[batch.evict])
        if batch.empty:
            return batch
        tab = self.table
        pre, dec = state.rid[batch.prefill], state.rid[batch.decode]
        chunk_sum = _total(batch.chunk)
        context = tab.kv(dec)
        load = BatchLoad(batch.chunk, tab.prefilled[pre], context)
        duration = float(self.time_model.duration(load))
        if not duration > 0:
            raise ValueError(f"{self.time_model!r} returned a non-positive duration {duration}")
        end = t + duration

        emitted = dec
        if pre.size:
            tab.prefilled[pre] += batch.chunk
            done_prefill = pre[tab.prefilled[pre] >= tab.prompt[pre]]
            tab.prefill_done[done_prefill] = end
            if tab.emit_first and done_prefill.size:
                tab.decoded[done_prefill] += 1
                emitted = np.concatenate([dec, done_prefill])
                self.work -= done_prefill.size
        tab.decoded[dec] += 1
        self.kv_total += chunk_sum + (dec.size if not tab.emit_first
                                      else np.count_nonzero(tab.decoded[dec] > 1))
        self._stamp_tokens(emitted, end)
        self.work -= chunk_sum + dec.size

        finished = self._finish(emitted, end)
        self.peak_memory = max(self.peak_memory, used)
        self.log.append(t, duration, pre.size, chunk_sum, dec.size,
                        chunk_sum + dec.size, batch.evict.size, used, state.n, self.work)
        self.iteration += 1
        if (max_iterations > 1 and not pre.size and not batch.evict.size and not finished.size
                and end < until and self.policy.steady(state, batch)):
            end = self._repeat(dec, end, used, state.n, until, max_iterations - 1)
            finished = self._finish(dec, end)
        return duration, finished, end

    def _finish(self, emitted, end):
        """Stamp and remove the requests of ``emitted`` that now have all their output."""
        tab = self.table
        finished = emitted[tab.decoded[emitted] >= tab.output[emitted]]
        if finished.size:
            finished = np.sort(finished)
            self.kv_total -= int(tab.kv(finished).sum())
            tab.finish[finished] = end
            self.live = self.live[np.isnan(tab.finish[self.live])]
        return finished

    def _repeat(self, dec, t, used, n_live, until, most) -> float:
        """The fast path: repeat the decode-only batch ``dec`` from ``t`` in closed form."""
        tab = self.table
        d = dec.size
        # The stretch is checked analytically: members stay in decode (no prefill, no
        # eviction), the token load d was checked against the budget, no member decodes past
        # its output (2.5c: k <= the least remaining output), memory after repeat j is
        # used + j·d <= M.
        k = min(most, int((tab.output[dec] - tab.decoded[dec]).min()))
        if self.memory is not None:
            k = min(k, (self.memory - used) // d)
        if k < 1:
            return t
        context = tab.kv(dec)
        durations = self.time_model.repeat_decode(context, k)
        if durations is None:
            return t
        ends = np.cumsum(np.concatenate([[t], durations]))   # sequential, as t += τ
        k = min(k, int(ends[:k].searchsorted(until, side="left")))
        if k < 1:
            return t
        ends, durations = ends[: k + 1], durations[:k]
        if not durations.min() > 0:
            raise ValueError(f"{self.time_model!r} returned a non-positive duration")
        tab.decoded[dec] += k
        self.kv_total += k * d
        gaps = ends[1:] - ends[:-1]
        tab.tbt_max[dec] = np.maximum(tab.tbt_max[dec], gaps.max())
        sums = np.empty((d, k + 1))
        sums[:, 0] = tab.tbt_sum[dec]
        sums[:, 1:] = gaps
        tab.tbt_sum[dec] = np.cumsum(sums, axis=1)[:, -1]      # sequential, as += per token
        tab.tokens_timed[dec] += k
        tab.last_token[dec] = ends[-1]
        self.tbt.add_repeated(tab.cls[dec], gaps)
        steps = np.arange(1, k + 1)
        memory = used + steps * d
        work = self.work - steps * d
        self.log.extend(k, ends[:-1], durations, 0, 0, d, d, 0, memory, n_live, work)
        self.work = int(work[-1])
        self.peak_memory = max(self.peak_memory, int(memory[-1]))
        self.iteration += k
        return float(ends[-1])

    def _stamp_tokens(self, rid, end):
        tab = self.table
        first = np.isnan(tab.first_token[rid])
        if np.count_nonzero(first):
            tab.first_token[rid[first]] = end
            gap_ids = rid[~first]
        else:
            gap_ids = rid
        if gap_ids.size:
            gaps = end - tab.last_token[gap_ids]
            tab.tbt_max[gap_ids] = np.maximum(tab.tbt_max[gap_ids], gaps)
            tab.tbt_sum[gap_ids] += gaps
            tab.tokens_timed[gap_ids] += 1
            self.tbt.add(tab.cls[gap_ids], gaps)
        tab.last_token[rid] = end

    def _evict(self, rid):
        tab = self.table
        self.kv_total -= int(tab.kv(rid).sum())
        self.work += int(tab.prefilled[rid].sum() + tab.decoded[rid].sum())
        tab.prefilled[rid] = 0
        tab.decoded[rid] = 0
        tab.restarts[rid] += 1

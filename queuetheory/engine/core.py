"""One LLM engine: a request table, a policy, a time model, and the iteration step."""

from __future__ import annotations

import numpy as np

from ..timing import BatchLoad
from .batch import Batch, check_batch
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
        return State(self.table, self.live, t, self.budget, self.memory)

    def step(self, t: float):
        """Run one batch starting at ``t``. Returns ``(duration, finished_ids)`` or the
        policy's empty :class:`Batch` when it idles."""
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
        load = BatchLoad(batch.chunk, tab.prefilled[pre], tab.kv(dec))
        duration = float(self.time_model.duration(load))
        if not duration > 0:
            raise ValueError(f"{self.time_model!r} returned a non-positive duration {duration}")
        end = t + duration

        tab.prefilled[pre] += batch.chunk
        done_prefill = pre[tab.prefilled[pre] >= tab.prompt[pre]]
        tab.prefill_done[done_prefill] = end
        emitted = dec
        if tab.emit_first:
            tab.decoded[done_prefill] += 1
            emitted = np.concatenate([dec, done_prefill])
        tab.decoded[dec] += 1
        self._stamp_tokens(emitted, end)
        self.work -= batch.token_load + (done_prefill.size if tab.emit_first else 0)

        finished_mask = tab.decoded[self.live] >= tab.output[self.live]
        finished = self.live[finished_mask]
        tab.finish[finished] = end
        self.live = self.live[~finished_mask]
        self.peak_memory = max(self.peak_memory, used)
        self.log.append(t, duration, pre.size, int(batch.chunk.sum()), dec.size,
                        batch.token_load, batch.evict.size, used, state.n, self.work)
        self.iteration += 1
        return duration, finished

    def _stamp_tokens(self, rid, end):
        tab = self.table
        first = np.isnan(tab.first_token[rid])
        tab.first_token[rid[first]] = end
        gap_ids = rid[~first]
        if gap_ids.size:
            gaps = end - tab.last_token[gap_ids]
            tab.tbt_max[gap_ids] = np.maximum(tab.tbt_max[gap_ids], gaps)
            tab.tbt_sum[gap_ids] += gaps
            tab.tokens_timed[gap_ids] += 1
            self.tbt.add(tab.cls[gap_ids], gaps)
        tab.last_token[rid] = end

    def _evict(self, rid):
        tab = self.table
        self.work += int(tab.prefilled[rid].sum() + tab.decoded[rid].sum())
        tab.prefilled[rid] = 0
        tab.decoded[rid] = 0
        tab.restarts[rid] += 1

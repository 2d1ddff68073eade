"""What a policy returns each iteration, and the engine's check of it."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import InfeasibleBatchError

__all__ = ["Batch", "check_batch"]

_EMPTY = np.empty(0, dtype=np.int64)


def _ints(x) -> np.ndarray:
    a = np.asarray(x, dtype=np.int64).reshape(-1)
    return a


@dataclass(frozen=True)
class Batch:
    """One iteration's work, as positions in the :class:`State` the policy was given.

    prefill : positions that get a prefill chunk;  chunk : its size for each of them
    decode : positions that get one decode token
    evict : positions whose KV cache is dropped before the batch runs (progress lost)
    until : for an empty batch, the time to wait until (default: the next arrival)
    """

    prefill: np.ndarray = field(default_factory=lambda: _EMPTY)
    chunk: np.ndarray = field(default_factory=lambda: _EMPTY)
    decode: np.ndarray = field(default_factory=lambda: _EMPTY)
    evict: np.ndarray = field(default_factory=lambda: _EMPTY)
    until: float | None = None

    def __post_init__(self):
        for name in ("prefill", "chunk", "decode", "evict"):
            object.__setattr__(self, name, _ints(getattr(self, name)))

    @property
    def empty(self) -> bool:
        return self.prefill.size == 0 and self.decode.size == 0

    @property
    def token_load(self) -> int:
        return int(self.chunk.sum()) + int(self.decode.size)

    def members(self) -> np.ndarray:
        return np.concatenate([self.prefill, self.decode])


def _unique(a: np.ndarray) -> bool:
    return a.size < 2 or np.unique(a).size == a.size


def check_batch(state, batch: Batch, *, policy, iteration: int, budget, memory,
                emit_first: bool) -> int:
    """Check seed 004's rules (2.5a–d), the token budget and KV memory; return the memory
    of all resident requests after the batch. Raise :class:`InfeasibleBatchError` otherwise."""

    def fail(rule, detail):
        raise InfeasibleBatchError(policy, iteration, rule, detail)

    n = state.n
    for name in ("prefill", "decode", "evict"):
        a = getattr(batch, name)
        if a.size and (a.min() < 0 or a.max() >= n):
            fail("index", f"{name} positions must lie in [0, {n})")
        if not _unique(a):
            fail("index", f"{name} lists a request twice")
    if batch.chunk.shape != batch.prefill.shape:
        fail("2.5b", "chunk must give one size per prefill request")
    prefilled = state.prefilled.copy()
    decoded = state.decoded.copy()
    if batch.evict.size:
        if np.any(state.kv[batch.evict] == 0):
            fail("evict", "evicted a request that holds no KV cache")
        prefilled[batch.evict] = 0
        decoded[batch.evict] = 0
    if np.intersect1d(batch.prefill, batch.decode).size:
        fail("2.5a", "a request is in both the prefill and the decode part")
    rem = state.prompt[batch.prefill] - prefilled[batch.prefill]
    if np.any(batch.chunk < 1) or np.any(batch.chunk > rem):
        fail("2.5b", "a prefill chunk is < 1 or larger than the remaining prompt")
    d = batch.decode
    if np.any(prefilled[d] < state.prompt[d]):
        fail("2.5a", "a decode token for a request whose prefill is unfinished")
    if np.any(decoded[d] >= state.output[d]):
        fail("2.5c", "a decode token for a request that has all its output")
    if budget is not None and batch.token_load > budget:
        fail("2.5d", f"token load {batch.token_load} exceeds the budget {budget}")
    kv = prefilled + np.maximum(decoded - emit_first, 0)
    used = int(kv.sum()) + state.outside_kv + int(batch.chunk.sum()) + int(d.size)
    if memory is not None and used > memory:
        fail("memory", f"KV memory after the batch {used} exceeds M = {memory}")
    return used

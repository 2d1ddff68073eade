"""Batch-time models: how long one iteration (one batch) takes.

Every model turns a :class:`BatchLoad` into a duration through one public method,
:meth:`TimeModel.duration`; subclasses override the private hook ``_raw``. With ``slot``
set, durations are rounded up to whole slots (at least one), the slotted models of
seed 004 (``t_slots(b') = max(1, ceil(t(b')/slot))``, spec §1.3).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .errors import check_positive

__all__ = ["BatchLoad", "TimeModel", "LinearMemoryTime", "PiecewiseLinearTime", "UnitTime",
           "AffineTokenTime"]


@dataclass(frozen=True)
class BatchLoad:
    """What a time model may look at in a batch.

    chunk : prefill tokens given to each prefill member in this batch
    chunk_start : tokens of that prompt already prefilled before the chunk
    decode_context : KV tokens of each decode member before its new token
    """

    chunk: np.ndarray
    chunk_start: np.ndarray
    decode_context: np.ndarray

    @property
    def token_load(self) -> int:
        """``b' = Σ δ^p + Σ δ^d`` (seed 004, eq. 2.5d)."""
        return int(self.chunk.sum()) + int(self.decode_context.size)

    @property
    def kv_tokens(self) -> int:
        """KV tokens of the batch members after the batch (seed 000, eq. 1's Σ(l_j + k))."""
        return int((self.chunk_start + self.chunk).sum() + (self.decode_context + 1).sum())

    @classmethod
    def of_tokens(cls, prefill: int = 0, decodes: int = 0, context: int = 0) -> BatchLoad:
        """A synthetic load: one prefill chunk of ``prefill`` tokens and ``decodes`` decodes."""
        ch = np.array([prefill] if prefill else [], dtype=np.int64)
        return cls(ch, np.zeros_like(ch), np.full(decodes, context, dtype=np.int64))


class TimeModel:
    """Base class: ``duration(load)`` in the model's time unit, rounded up to ``slot``."""

    unit = "time unit"

    def __init__(self, slot: float | None = None):
        if slot is not None:
            check_positive("slot", slot)
        self.slot = slot

    def _raw(self, load: BatchLoad) -> float:
        raise NotImplementedError

    def _round(self, t: float) -> float:
        if self.slot is None:
            return t
        return max(1, math.ceil(t / self.slot - 1e-12)) * self.slot

    def duration(self, load: BatchLoad) -> float:
        return self._round(self._raw(load))

    def token_time(self, b: int) -> float:
        """Duration of a batch whose token load is ``b`` (models that depend on ``b'`` only)."""
        raise TypeError(f"{type(self).__name__} does not depend on the token load alone")

    def full_batch_time(self, prefill_tokens: float, decode_tokens: float, budget: int) -> float:
        """Time to serve these tokens in full batches of ``budget`` tokens: the saturated
        engine's rate, whose inverse gives the capacity ``b / t_b`` of seed 004 (eq. 2.7)."""
        return self.token_time(budget) * (prefill_tokens + decode_tokens) / budget

    def repeat_decode(self, context: np.ndarray, k: int) -> np.ndarray | None:
        """Durations of ``k`` successive decode-only batches of the same members, whose KV
        contexts are ``context`` before the first and grow by one token per batch: the
        engine's fast path. Must equal ``duration`` of each batch exactly (same floating
        point operations). ``None`` (the default) means no closed form: step one by one."""
        return None

    def _round_many(self, t: np.ndarray) -> np.ndarray:
        if self.slot is None:
            return t
        return np.maximum(1, np.ceil(t / self.slot - 1e-12)) * self.slot

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if v is not None)
        return f"{type(self).__name__}({params})"


class LinearMemoryTime(TimeModel):
    """``τ = d0 + d1 · Σ_{i∈batch} (l_i + k_i)``: seed 000, eq. (1).

    ``d0`` is the fixed overhead per iteration and ``d1`` the time per KV token of the batch
    members after the iteration (time units per token).
    """

    def __init__(self, d0: float, d1: float, slot: float | None = None):
        super().__init__(slot)
        self.d0 = check_positive("d0", d0, allow_zero=True)
        self.d1 = check_positive("d1", d1, allow_zero=True)

    def _raw(self, load):
        return self.d0 + self.d1 * load.kv_tokens

    def repeat_decode(self, context, k):
        # kv_tokens of batch j (0-based): Σ (context + 1) + j·d, exact integers
        kv = int((context + 1).sum()) + np.arange(k, dtype=np.int64) * context.size
        return self._round_many(self.d0 + self.d1 * kv)


class PiecewiseLinearTime(TimeModel):
    """``t_{b'} = c + a · max(0, b' − b0)`` on the token load ``b'``: seed 004, eq. (2.3).

    ``c`` is in time units, ``a`` in time units per token, ``b0`` in tokens. The paper's
    Llama-3-70B fit (L116): ``c = 45.5`` ms, ``a = 0.30`` ms/token, ``b0 = 64``.
    """

    def __init__(self, c: float, a: float, b0: float = 0, slot: float | None = None):
        super().__init__(slot)
        self.c = check_positive("c", c)
        self.a = check_positive("a", a, allow_zero=True)
        self.b0 = check_positive("b0", b0, allow_zero=True)

    def _raw(self, load):
        return self._raw_tokens(load.token_load)

    def _raw_tokens(self, b):
        return self.c + self.a * max(0.0, b - self.b0)

    def token_time(self, b):
        return self._round(self._raw_tokens(b))

    def repeat_decode(self, context, k):
        return np.full(k, self.token_time(int(context.size)))


class UnitTime(TimeModel):
    """Every batch, full or partial, takes one round (seeds 001, 003; seed 004 App. B, §4.4)."""

    unit = "round"

    def _raw(self, load):
        return 1.0

    def token_time(self, b):
        return self._round(1.0)

    def repeat_decode(self, context, k):
        return np.full(k, self._round(1.0))


class AffineTokenTime(TimeModel):
    """``τ = c + per_prefill · Σ δ^p + per_decode · Σ δ^d``: separate per-token costs.

    A fixed cost ``c`` per iteration plus a cost for each prefill token and each decode token
    of the batch (issue 9's anchor: ``c = 16.1`` ms, ``per_prefill = 57.8`` µs,
    ``per_decode = 39.5`` µs). It depends on the counts only, so a stretch of identical
    decode-only iterations has the closed-form duration ``k · (c + per_decode · d)``.
    """

    def __init__(self, c: float, per_prefill: float, per_decode: float,
                 slot: float | None = None):
        super().__init__(slot)
        self.c = check_positive("c", c)
        self.per_prefill = check_positive("per_prefill", per_prefill, allow_zero=True)
        self.per_decode = check_positive("per_decode", per_decode, allow_zero=True)

    def _raw(self, load):
        return self._raw_counts(int(load.chunk.sum()), int(load.decode_context.size))

    def _raw_counts(self, prefill_tokens, decodes):
        return self.c + self.per_prefill * prefill_tokens + self.per_decode * decodes

    def repeat_decode(self, context, k):
        return np.full(k, self._round(self._raw_counts(0, int(context.size))))

    def full_batch_time(self, prefill_tokens, decode_tokens, budget):
        if self.slot is not None:
            raise TypeError("full_batch_time: a slotted AffineTokenTime depends on the mix")
        return (self.c * (prefill_tokens + decode_tokens) / budget
                + self.per_prefill * prefill_tokens + self.per_decode * decode_tokens)

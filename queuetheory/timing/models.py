"""Batch-time models: how long one iteration (one batch) takes.

Every model turns a :class:`BatchLoad` into a duration through one public method,
:meth:`TimeModel.duration`; subclasses override the private hook ``_raw``. With ``slot``
set, durations are rounded up to whole slots (at least one), the slotted models of
Li, Dai, Peng (``t_slots(b') = max(1, ceil(t(b')/slot))``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import check_positive

__all__ = ["BatchLoad", "TimeModel", "LinearMemoryTime", "PiecewiseLinearTime", "UnitTime",
           "AffineTokenTime"]


@dataclass(frozen=True)
class BatchLoad:
    """What a time model may look at in a batch.

    Attributes
    ----------
    chunk : numpy.ndarray
        Prefill tokens given to each prefill member in this batch.
    chunk_start : numpy.ndarray
        Tokens of that prompt already prefilled before the chunk.
    decode_context : numpy.ndarray
        KV tokens of each decode member before its new token.
    """

    chunk: np.ndarray
    chunk_start: np.ndarray
    decode_context: np.ndarray

    @property
    def token_load(self) -> int:
        """``b' = Σ δ^p + Σ δ^d`` (Li, Dai, Peng, eq. 2.5d)."""
        return int(self.chunk.sum()) + int(self.decode_context.size)

    @property
    def kv_tokens(self) -> int:
        """KV tokens of the batch members after the batch (Ao et al., eq. 1's Σ(l_j + k))."""
        return int((self.chunk_start + self.chunk).sum() + (self.decode_context + 1).sum())

    @classmethod
    def of_tokens(cls, prefill: int = 0, decodes: int = 0, context: int = 0) -> BatchLoad:
        """A synthetic load: one prefill chunk of ``prefill`` tokens and ``decodes`` decodes.

        Parameters
        ----------
        prefill : int, default 0
            The chunk's tokens (no prefill member when 0).
        decodes : int, default 0
            The number of decode members.
        context : int, default 0
            The KV tokens of each decode member before its new token.

        Returns
        -------
        BatchLoad
            The load.
        """
        ch = np.array([prefill] if prefill else [], dtype=np.int64)
        return cls(ch, np.zeros_like(ch), np.full(decodes, context, dtype=np.int64))


class TimeModel:
    """Base class: ``duration(load)`` in the model's time unit, rounded up to ``slot``.

    A duration must not depend on the order of the batch's members: where a model has no
    closed form for repeated decodes (:meth:`decode_durations`), the engine runs a
    policy's promised stretch batch by batch, its members in id order where they leave on
    the way, which may not be the order the policy gave them.

    Parameters
    ----------
    slot : float, optional
        Round every duration up to whole slots of this length (at least one): the slotted
        models of Li, Dai, Peng.

    Raises
    ------
    ValueError
        If ``slot`` is not a finite number > 0.
    """

    unit = "time unit"
    #: True when a duration depends on the batch's prefill and decode token counts only;
    #: the engine then calls :meth:`count_duration` and never gathers the KV contexts
    counts_only = False

    def __init__(self, slot: float | None = None):
        if slot is not None:
            check_positive("slot", slot)
        self.slot = slot

    def _raw(self, load: BatchLoad) -> float:
        raise NotImplementedError

    def _round(self, t: float) -> float:
        if self.slot is None:
            return t
        slots = t / self.slot
        if not math.isfinite(slots):
            raise ValueError(f"slot={self.slot!r}: a duration of {t:.6g} is {slots} slots; "
                             "the slot must be a finite fraction of the durations")
        return max(1, math.ceil(slots - 1e-12)) * self.slot

    def duration(self, load: BatchLoad) -> float:
        """The duration of one batch, rounded up to whole slots where ``slot`` is set.

        Parameters
        ----------
        load : BatchLoad
            The batch.

        Returns
        -------
        float
            Its duration, in the model's time unit (``unit``).

        Raises
        ------
        ValueError
            If the duration is not a finite number of slots.
        """
        return self._round(self._raw(load))

    def count_duration(self, prefill_tokens: int, decodes: int) -> float:
        """``duration`` of a batch with these token counts (``counts_only`` models).

        Parameters
        ----------
        prefill_tokens : int
            The batch's prefill tokens ``Σ δ^p``.
        decodes : int
            Its decode members ``Σ δ^d``.

        Returns
        -------
        float
            The duration, in the model's time unit.

        Raises
        ------
        TypeError
            If the model depends on more than the token counts (``counts_only`` is False).
        """
        raise TypeError(f"time_model={self!r}: count_duration needs a model of the token "
                        "counts alone; this one depends on more")

    def token_time(self, b: int) -> float:
        """Duration of a batch whose token load is ``b`` (models that depend on ``b'`` only).

        Parameters
        ----------
        b : int
            The token load ``b'`` (Li, Dai, Peng, eq. 2.5d), ``>= 0``.

        Returns
        -------
        float
            The duration ``t_{b'}``, in the model's time unit.

        Raises
        ------
        TypeError
            If the model depends on more than the token load.
        ValueError
            If ``b`` is negative (models that define it).
        """
        raise TypeError(f"time_model={self!r}: token_time(b) needs a model of the token load "
                        "b alone; this one depends on more")

    def full_batch_time(self, prefill_tokens: float, decode_tokens: float, budget: int) -> float:
        """Time to serve these tokens in full batches of ``budget`` tokens: the saturated
        engine's rate, whose inverse gives the capacity ``b / t_b`` of Li, Dai, Peng (eq. 2.7).

        Parameters
        ----------
        prefill_tokens : float
            Prefill tokens to serve, ``>= 0``.
        decode_tokens : float
            Decode tokens to serve, ``>= 0``.
        budget : int
            The token budget ``b`` of a full batch.

        Returns
        -------
        float
            The time, in the model's time unit.

        Raises
        ------
        ValueError
            If ``budget`` is not a positive integer or a token count is negative.
        TypeError
            If the model has no :meth:`token_time` (or, for :class:`AffineTokenTime`, has a
            ``slot``).
        """
        check_positive("budget", budget, integer=True)
        check_positive("prefill_tokens", prefill_tokens, allow_zero=True)
        check_positive("decode_tokens", decode_tokens, allow_zero=True)
        return self.token_time(budget) * (prefill_tokens + decode_tokens) / budget

    def decode_durations(self, decodes: np.ndarray, kv_tokens: np.ndarray) -> np.ndarray | None:
        """Durations of successive decode-only batches, batch ``j`` with ``decodes[j]``
        members and ``kv_tokens[j]`` KV tokens of its members after it (BatchLoad's
        ``kv_tokens``): the engine's fast path. Must equal ``duration`` of each batch exactly
        (same floating-point operations). ``None`` (the default) means no closed form: the
        engine steps one batch at a time.

        Parameters
        ----------
        decodes : numpy.ndarray
            Decode members of each batch.
        kv_tokens : numpy.ndarray
            KV tokens of each batch's members after it.

        Returns
        -------
        numpy.ndarray or None
            One duration per batch, or ``None`` without a closed form.
        """
        return None

    def _round_many(self, t: np.ndarray) -> np.ndarray:
        if self.slot is None:
            return t
        slots = t / self.slot
        if not np.all(np.isfinite(slots)):
            raise ValueError(f"slot={self.slot!r}: some durations are infinitely many slots; "
                             "the slot must be a finite fraction of the durations")
        return np.maximum(1, np.ceil(slots - 1e-12)) * self.slot

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if v is not None)
        return f"{type(self).__name__}({params})"


class _TokenCountTime(TimeModel):
    """A model whose duration is a function ``_raw_counts(prefill_tokens, decodes)`` of the
    batch's token counts. Its ``decode_durations`` repeat the scalar formula's operations
    on arrays, so that they match ``duration`` to the last bit."""

    counts_only = True

    def _raw_counts(self, prefill_tokens: int, decodes: int) -> float:
        raise NotImplementedError

    def _raw(self, load):
        return self._raw_counts(int(load.chunk.sum()), int(load.decode_context.size))

    def count_duration(self, prefill_tokens, decodes):
        return self._round(self._raw_counts(prefill_tokens, decodes))



class LinearMemoryTime(TimeModel):
    """``τ = d0 + d1 · Σ_{i∈batch} (l_i + k_i)``: Ao et al., eq. (1).

    ``d0`` is the fixed overhead per iteration and ``d1`` the time per KV token of the batch
    members after the iteration (time units per token).

    Parameters
    ----------
    d0 : float
        The fixed overhead per iteration ``d0``, ``>= 0``.
    d1 : float
        The time per KV token ``d1``, ``>= 0``.
    slot : float, optional
        Round every duration up to whole slots of this length (at least one): the slotted
        models of Li, Dai, Peng.

    Raises
    ------
    ValueError
        If a parameter is negative, not finite, or (``c``, ``slot``) not positive.
    """

    def __init__(self, d0: float, d1: float, slot: float | None = None):
        super().__init__(slot)
        self.d0 = float(check_positive("d0", d0, allow_zero=True))
        self.d1 = float(check_positive("d1", d1, allow_zero=True))

    def _raw(self, load):
        return self.d0 + self.d1 * load.kv_tokens

    def decode_durations(self, decodes, kv_tokens):
        return self._round_many(self.d0 + self.d1 * kv_tokens)


class PiecewiseLinearTime(_TokenCountTime):
    """``t_{b'} = c + a · max(0, b' − b0)`` on the token load ``b'``: Li, Dai, Peng, eq. (2.3).

    ``c`` is in time units, ``a`` in time units per token, ``b0`` in tokens. The paper's
    Llama-3-70B fit: ``c = 45.5`` ms, ``a = 0.30`` ms/token, ``b0 = 64``.

    Parameters
    ----------
    c : float
        The batch time ``c`` at or below ``b0`` tokens, ``> 0``.
    a : float
        The time per token above ``b0``, ``>= 0``.
    b0 : float, default 0
        The token load ``b0`` up to which a batch costs ``c``.
    slot : float, optional
        Round every duration up to whole slots of this length (at least one): the slotted
        models of Li, Dai, Peng.

    Raises
    ------
    ValueError
        If a parameter is negative, not finite, or (``c``, ``slot``) not positive.
    """

    def __init__(self, c: float, a: float, b0: float = 0, slot: float | None = None):
        super().__init__(slot)
        self.c = float(check_positive("c", c))
        self.a = float(check_positive("a", a, allow_zero=True))
        self.b0 = float(check_positive("b0", b0, allow_zero=True))

    def _raw_counts(self, prefill_tokens, decodes):
        return self._raw_tokens(prefill_tokens + decodes)

    def _raw_tokens(self, b):
        return self.c + self.a * max(0.0, b - self.b0)

    def token_time(self, b):
        check_positive("b", b, allow_zero=True)
        return self._round(self._raw_tokens(b))

    def decode_durations(self, decodes, kv_tokens):
        return self._round_many(self.c + self.a * np.maximum(0.0, decodes - self.b0))


class UnitTime(_TokenCountTime):
    """Every batch, full or partial, takes one round: the round models of Jaillet et al. and
    Chen et al., and of Li, Dai, Peng App. B and §4.4.

    Parameters
    ----------
    slot : float, optional
        Round every duration up to whole slots of this length (at least one): the slotted
        models of Li, Dai, Peng.

    Raises
    ------
    ValueError
        If ``slot`` is not a finite number > 0.
    """

    unit = "round"

    def _raw_counts(self, prefill_tokens, decodes):
        return 1.0

    def token_time(self, b):
        check_positive("b", b, allow_zero=True)
        return self._round(1.0)

    def decode_durations(self, decodes, kv_tokens):
        return np.full(decodes.size, self._round(1.0))


class AffineTokenTime(_TokenCountTime):
    """``τ = c + per_prefill · Σ δ^p + per_decode · Σ δ^d``: separate per-token costs.

    A fixed cost ``c`` per iteration plus a cost for each prefill token and each decode token
    of the batch (issue 9's anchor: ``c = 16.1`` ms, ``per_prefill = 57.8`` µs,
    ``per_decode = 39.5`` µs). It depends on the counts only, so a stretch of identical
    decode-only iterations has the closed-form duration ``k · (c + per_decode · d)``.

    Parameters
    ----------
    c : float
        The fixed cost per iteration, ``> 0``.
    per_prefill : float
        The cost per prefill token, ``>= 0``.
    per_decode : float
        The cost per decode token, ``>= 0``.
    slot : float, optional
        Round every duration up to whole slots of this length (at least one): the slotted
        models of Li, Dai, Peng.

    Raises
    ------
    ValueError
        If a parameter is negative, not finite, or (``c``, ``slot``) not positive.
    """

    def __init__(self, c: float, per_prefill: float, per_decode: float,
                 slot: float | None = None):
        super().__init__(slot)
        self.c = float(check_positive("c", c))
        self.per_prefill = float(check_positive("per_prefill", per_prefill, allow_zero=True))
        self.per_decode = float(check_positive("per_decode", per_decode, allow_zero=True))

    def _raw_counts(self, prefill_tokens, decodes):
        return self.c + self.per_prefill * prefill_tokens + self.per_decode * decodes

    def decode_durations(self, decodes, kv_tokens):
        return self._round_many(self._raw_counts(0, decodes))

    def full_batch_time(self, prefill_tokens, decode_tokens, budget):
        check_positive("budget", budget, integer=True)
        check_positive("prefill_tokens", prefill_tokens, allow_zero=True)
        check_positive("decode_tokens", decode_tokens, allow_zero=True)
        if self.slot is not None:
            raise TypeError(f"time_model={self!r}: full_batch_time needs slot=None (a slotted "
                            "AffineTokenTime depends on the prefill/decode mix of each batch)")
        return (self.c * (prefill_tokens + decode_tokens) / budget
                + self.per_prefill * prefill_tokens + self.per_decode * decode_tokens)

"""What a policy returns each iteration, and the engine's check of it."""

from __future__ import annotations

import numpy as np

from ..errors import InfeasibleBatchError, renamed_keywords

__all__ = ["Batch", "check_batch"]

_EMPTY = np.empty(0, dtype=np.int64)
_INT64 = _EMPTY.dtype                # the one native int64 dtype: compared by identity


def _ints(x) -> np.ndarray:
    if type(x) is np.ndarray and x.dtype is _INT64 and x.ndim == 1:
        return x
    return np.asarray(x, dtype=np.int64).reshape(-1)


class Batch:
    """One iteration's work, as positions in the :class:`State` the policy was given.

    Immutable; the position arrays are 1-d int64 (a policy builds one every iteration, so
    the constructor is kept to a few attribute stores).

    Parameters
    ----------
    prefill : array_like of int, optional
        Positions that get a prefill chunk (empty: none).
    chunk : array_like of int, optional
        The chunk of each ``prefill`` member, in prompt tokens, in the same order (Li, Dai,
        Peng's 2.5b: at least 1, at most the prefill left).
    decode : array_like of int, optional
        Positions that get one decode token (empty: none).
    evict : array_like of int, optional
        Positions whose KV cache is dropped before the batch runs (progress lost, or the
        generated tokens put back into the prefill under ``preemption="recompute"``).
    until : float, optional
        For an empty batch, the time to wait until (``None``: the next arrival).
    cached : array_like of int, optional
        For each prefill member, prompt tokens found in a prefix cache (vLLM's automatic
        prefix caching): prefilled before the chunk, never computed; only on a request with
        nothing prefilled yet (empty: none).
    """

    __slots__ = ("prefill", "chunk", "decode", "evict", "until", "cached")

    def __init__(self, prefill=_EMPTY, chunk=_EMPTY, decode=_EMPTY, evict=_EMPTY,
                 until: float | None = None, cached=_EMPTY):
        store = object.__setattr__
        store(self, "prefill", _ints(prefill))
        store(self, "chunk", _ints(chunk))
        store(self, "decode", _ints(decode))
        store(self, "evict", evict if evict is _EMPTY else _ints(evict))
        store(self, "until", until)
        store(self, "cached", cached if cached is _EMPTY else _ints(cached))

    def __setattr__(self, name, value):
        raise AttributeError(f"Batch is immutable: cannot set {name!r}")

    def __repr__(self) -> str:
        parts = [f"{k}={getattr(self, k).tolist()}"
                 for k in ("prefill", "chunk", "decode", "evict")]
        return f"Batch({', '.join(parts)}, until={self.until})"

    @property
    def empty(self) -> bool:
        """Whether the batch has no prefill and no decode member (the policy idles)."""
        return self.prefill.size == 0 and self.decode.size == 0

    @property
    def token_load(self) -> int:
        """The tokens the batch processes: its chunks plus one per decode member (what the
        token budget ``b`` bounds, 2.5d)."""
        return int(self.chunk.sum()) + int(self.decode.size)

    def members(self) -> np.ndarray:
        """The positions of every member of the batch.

        Returns
        -------
        numpy.ndarray
            The prefill positions, then the decode positions (int64).
        """
        return np.concatenate([self.prefill, self.decode])


# Hot path: ndarray methods and np.count_nonzero are several times cheaper here than the
# np.any/np.all/np.flatnonzero wrappers and ufunc reductions on the small arrays of a batch.

def _increasing(a: np.ndarray) -> bool:
    return a.size < 2 or not np.count_nonzero(a[1:] <= a[:-1])


def _total(a: np.ndarray) -> int:
    return int(a[0]) if a.size == 1 else int(a.sum()) if a.size else 0


def _positions_ok(a: np.ndarray, n: int) -> bool:
    """Positions in ``[0, n)``, none twice (in any order: a policy may list its classes
    one after another)."""
    if not a.size:
        return True
    if not _increasing(a):
        a = np.sort(a)
        if not _increasing(a):
            return False
    return a[0] >= 0 and a[-1] < n


def _feasible_used(state, batch: Batch, budget, memory, recompute=None) -> int | None:
    """The memory after a feasible batch, or None when in doubt (:func:`_quick_check`)."""
    quick = _quick_check(state, batch, budget, memory, recompute)
    return None if quick is None else quick[0]


def _quick_check(state, batch: Batch, budget, memory, recompute=None, unfinished=False):
    """The quick check of a batch, and what it read: ``(used, pre, dec, decoded, output)``
    (the memory after the batch; the prefill and decode members' request ids; the decode
    members' output tokens done before the batch and their output lengths), or None when
    in doubt. ``unfinished``: every request in decode is known to have output left (the
    engine's books), so the decode members' output is not compared.

    Sound but incomplete: it accepts only batches :func:`check_batch` accepts (unique
    positions; a chunk ``1 <= c <= remaining`` puts a prefill member outside the decode part,
    so the two parts cannot overlap; a cached prefix only on a request with nothing
    prefilled, the chunk within what it leaves; evicted requests that hold KV and are not
    decode members, whose KV leaves the sum the engine keeps, and which start their prefill
    again where they are prefill members — prompt, plus their output with ``recompute``,
    or in doubt when it is ``None``), in a few array operations on the members alone (the
    state's columns gather every request in the system).
    """
    pre, chunk, d, cached = batch.prefill, batch.chunk, batch.decode, batch.cached
    n = state.n
    if chunk.shape != pre.shape or (cached.size and cached.shape != pre.shape):
        return None
    if not ((0 <= pre[0] < n) if pre.size == 1 else _positions_ok(pre, n)) or not (
            _positions_ok(d, n)):
        return None
    tab, rid = state._t, state.rid
    freed, again = 0, None               # again: the prefill members evicted first
    if batch.evict.size:
        evicted = _freed(tab, rid, batch.evict, pre, d, n, recompute)
        if evicted is None:
            return None
        freed, again = evicted
    chunk_sum = credit = 0
    pre_ids = rid[pre] if pre.size else _EMPTY
    if pre.size == 1:
        chunk_sum = int(chunk[0])
        r = int(pre_ids[0])
        if again is None:
            length = int(tab.prompt[r]) + (int(tab.recomputed[r]) if tab.recomputing else 0)
            prefilled = int(tab.prefilled[r])
        else:
            length, prefilled = int(tab.prompt[r]) + (int(tab.decoded[r]) if recompute else 0), 0
        if cached.size:             # a cached prefix, credited to a request not yet begun
            credit = int(cached[0])
            if credit < 0 or (credit and prefilled):
                return None
        if not 1 <= chunk_sum <= length - prefilled - credit:
            return None
    elif pre.size:
        prefilled, length = tab.prefilled[pre_ids], tab.prefill_length(pre_ids)
        if again is not None:
            prefilled = np.where(again, 0, prefilled)
            length = np.where(again, tab.prompt[pre_ids] + (tab.decoded[pre_ids] if recompute
                                                            else 0), length)
        rem = length - prefilled
        if cached.size:
            if np.count_nonzero(cached < 0) or np.count_nonzero((cached > 0) & (prefilled > 0)):
                return None
            rem = rem - cached
            credit = int(cached.sum())
        if np.count_nonzero(chunk < 1) or np.count_nonzero(chunk > rem):
            return None
        chunk_sum = int(chunk.sum())
    dec = decoded = output = _EMPTY
    if d.size:
        dec = rid[d]
        decoded, output = tab.decoded[dec], tab.output[dec]
        if (np.count_nonzero(tab.in_decode[dec]) != d.size
                or not unfinished and np.count_nonzero(decoded >= output)):
            return None
    if budget is not None and chunk_sum + d.size > budget:
        return None
    used = state.memory_used - freed + credit + chunk_sum + int(d.size)
    if memory is not None and used > memory:
        return None
    return used, pre_ids, dec, decoded, output


def _freed(tab, rid, evict, pre, d, n, recompute):
    """``(freed, again)``: the KV tokens the evicted positions ``evict`` hold, and which
    prefill members they are (None: none), or None when in doubt: positions out of range or
    twice, a request that holds none, a decode member, a prefill member without knowing
    what an eviction keeps (``recompute`` None)."""
    if not _positions_ok(evict, n):
        return None
    kv = tab.kv(rid[evict])
    if np.count_nonzero(kv) != kv.size:
        return None
    mark = np.zeros(n, dtype=bool)
    mark[evict] = True
    again = mark[pre]
    if np.count_nonzero(mark[d]) or (recompute is None and np.count_nonzero(again)):
        return None
    return int(kv.sum()), again if np.count_nonzero(again) else None


@renamed_keywords(budget="token_budget")
def check_batch(state, batch: Batch, *, policy, iteration: int, token_budget, memory,
                emit_first: bool, recompute: bool = False) -> int:
    """Check Li, Dai, Peng's rules (2.5a–d), the token budget and KV memory; return the memory
    of all resident requests after the batch. Raise :class:`InfeasibleBatchError` otherwise.
    ``recompute``: evictions keep the generated tokens (``preemption="recompute"``).

    Parameters
    ----------
    state : State
        The view the policy was given (the batch's positions index it).
    batch : Batch
        The policy's batch.
    policy : Policy
        The policy that built it (named in the error).
    iteration : int
        The iteration's index (named in the error).
    token_budget : int or None
        The per-batch token budget ``b`` (2.5d); ``None``: none.
    memory : int or None
        The KV capacity ``M`` in tokens; ``None``: unlimited.
    emit_first : bool
        Whether the prefill iteration emits the first output token
        (``first_token="prefill"``), which then holds no KV until the next decode.
    recompute : bool, default False
        Whether evictions keep the generated tokens (``preemption="recompute"``) instead of
        discarding them.

    Returns
    -------
    int
        The resident KV tokens after the batch (evictions, cached prefixes, chunks and
        decode tokens counted), at most ``memory``.

    Raises
    ------
    InfeasibleBatchError
        Naming the first rule the batch breaks: a position out of range or listed twice,
        an eviction of a request holding no KV, a request in both parts (2.5a), a decode
        before the prefill is done (2.5a), a chunk below 1 or past the prefill left (2.5b),
        a decode past the output (2.5c), the token budget (2.5d), a bad cached prefix, or
        the KV memory.
    """
    used = _feasible_used(state, batch, token_budget, memory)
    if used is not None:
        return used
    return _check_every_rule(state, batch, policy=policy, iteration=iteration,
                             budget=token_budget, memory=memory, emit_first=emit_first,
                             recompute=recompute)


def _check_every_rule(state, batch, *, policy, iteration, budget, memory, emit_first,
                      recompute=False) -> int:
    """The complete check, rule by rule, naming the first rule broken."""

    def fail(rule, detail):
        raise InfeasibleBatchError(policy, iteration, rule, detail)

    n = state.n
    for name in ("prefill", "decode", "evict"):
        a = getattr(batch, name)
        if not a.size:
            continue
        increasing = _increasing(a)        # the common case: no sort needed
        lo, hi = (a[0], a[-1]) if increasing else (a.min(), a.max())
        if lo < 0 or hi >= n:
            fail("index", f"{name} positions must lie in [0, {n})")
        if not increasing and np.unique(a).size != a.size:
            fail("index", f"{name} lists a request twice")
    pre, chunk, d = batch.prefill, batch.chunk, batch.decode
    if chunk.shape != pre.shape:
        fail("2.5b", "chunk must give one size per prefill request")
    if batch.evict.size:
        if np.count_nonzero(state.kv[batch.evict] == 0):
            fail("evict", "evicted a request that holds no KV cache")
        prefilled = state.prefilled.copy()
        decoded = state.decoded.copy()
        recomputed = state.recomputed.copy()
        prefilled[batch.evict] = 0
        if recompute:
            recomputed[batch.evict] = decoded[batch.evict]
        else:
            decoded[batch.evict] = recomputed[batch.evict] = 0
        kv_total = int((prefilled + np.maximum(decoded - recomputed - emit_first, 0)).sum())
        length = state.prompt + recomputed
        in_decode = prefilled >= length
    else:
        prefilled, decoded = state.prefilled, state.decoded
        kv_total = state.memory_used - state.outside_kv
        in_decode = state.in_decode
        length = state.prefill_length
    if pre.size and d.size:
        mark = np.zeros(n, dtype=bool)
        mark[pre] = True
        if np.count_nonzero(mark[d]):
            fail("2.5a", "a request is in both the prefill and the decode part")
    chunk_sum = cached_sum = 0
    if batch.cached.size:
        cached = batch.cached
        if cached.shape != pre.shape:
            fail("cached", "cached must give one count per prefill request")
        if np.count_nonzero(cached < 0):
            fail("cached", "a negative count of cached prefix tokens")
        if np.count_nonzero((cached > 0) & (prefilled[pre] > 0)):
            fail("cached", "cached prefix tokens credited to a request already prefilling")
        cached_sum = _total(cached)
        prefilled = prefilled.copy()
        prefilled[pre] += cached
    if pre.size:
        rem = length[pre] - prefilled[pre]
        if np.count_nonzero(chunk < 1) or np.count_nonzero(chunk > rem):
            fail("2.5b", "a prefill chunk is < 1 or larger than the remaining prompt"
                 + (" after its cached prefix" if cached_sum else ""))
        chunk_sum = _total(chunk)
    if d.size:
        if np.count_nonzero(in_decode[d]) != d.size:
            fail("2.5a", "a decode token for a request whose prefill is unfinished")
        if np.count_nonzero(decoded[d] >= state.output[d]):
            fail("2.5c", "a decode token for a request that has all its output")
    if budget is not None and chunk_sum + d.size > budget:
        fail("2.5d", f"token load {chunk_sum + d.size} exceeds the budget {budget}")
    used = kv_total + state.outside_kv + cached_sum + chunk_sum + int(d.size)
    if memory is not None and used > memory:
        fail("memory", f"KV memory after the batch {used} exceeds M = {memory}")
    return used

"""vLLM's V1 scheduler, where a measured run depends on it: KV memory in blocks, the
running requests served before the waiting ones, recompute preemption, prefix caching.

Modelled on ``vllm/v1/core/sched/scheduler.py`` (``Scheduler.schedule``) and
``vllm/v1/core/{kv_cache_manager,block_pool}.py`` of vLLM 0.19:

- each step has a token budget (``max_num_batched_tokens``); the **running** requests come
  first, in the order they were admitted, each asking for all its uncomputed tokens (one for
  a decode, the rest of its prompt, at most ``long_prefill_token_threshold`` when set, for a
  prefill), cut to the budget left (chunked prefill);
- KV memory is ``num_gpu_blocks`` blocks of ``block_size`` tokens (one is vLLM's null
  block); a request holds ``ceil(tokens / block_size)`` blocks for the tokens computed and
  scheduled; when a running request's blocks cannot be allocated, the **last running
  request is preempted** (recompute: its blocks are freed, it goes back to the front of the
  waiting queue with its generated tokens, to be prefilled again) until they can, or the
  request itself was the last;
- the **waiting** requests are admitted in order only in a step that preempted nothing
  (or that preempted and runs nothing: vLLM's next step then comes at once), while the
  budget lasts and fewer than ``max_num_seqs`` run, each only if its whole
  current sequence fits in the free blocks (``scheduler_reserve_full_isl``); the first that
  does not stops the admissions;
- **prefix caching**: a full block is keyed by its prefix (the trace's prefix-block ids for
  prompt blocks, the request's own key past them); a freed block keeps its key and goes to
  the tail of the free queue, to be reused, least recently freed first (a request's blocks
  are freed last block first); an admitted request reuses the longest run of cached blocks
  of its sequence, at most ``num_tokens − 1`` tokens, which are then not computed
  (:attr:`~queuetheory.engine.Batch.cached`). A preempted request finds its own blocks again
  when they are still cached.

- **asynchronous scheduling** (``async_scheduling``, vLLM 0.19's default): step ``n + 1``
  is scheduled when step ``n`` is launched, before its outputs are known. So a request that
  arrives while step ``n`` runs waits for step ``n + 2`` (unless the engine is idle), and a
  request that finishes in step ``n`` keeps its slot and its blocks, with no token, through
  step ``n + 1``.

Not modelled (named in :meth:`VLLMV1.from_engine_args`'s warning): speculative decoding,
swap and CPU offloading, priorities, LoRA, multimodal encoders, the tokenizer and HTTP front
end, and the CPU time of a step (the profiles time the GPU's kernels).
"""

from __future__ import annotations

import json
import warnings
from collections import deque
from functools import partial
from itertools import chain, islice, takewhile
from operator import is_not
from pathlib import Path

import numpy as np

from ..engine import Batch
from ..errors import InfeasibleBatchError, check_positive
from ..timing import ceil_div
from .base import Policy, decides_as_shipped

__all__ = ["VLLMV1", "BlockPool", "prefix_keys", "cudagraph_capture_sizes"]


_is_key = partial(is_not, None)

#: the largest count a setting takes (sequences, tokens, blocks): past it numpy's integers
#: would overflow
MAX_COUNT = 2**40


def _count(name: str, value, *, allow_zero: bool = False) -> int:
    """``value`` as an integer count, or a ``ValueError`` naming ``name`` and the rule."""
    check_positive(name, value, integer=True, allow_zero=allow_zero)
    if value > MAX_COUNT:
        raise ValueError(f"{name}={value!r}: must be at most {MAX_COUNT}")
    return int(value)


def prefix_keys(ids, id_block: int | None, block_size: int) -> list:
    """Cache keys of the KV blocks of ``block_size`` tokens that a prompt's prefix-block ids
    (blocks of ``id_block`` tokens, :attr:`~queuetheory.workload.Trace.blocks`) identify: a
    KV block is keyed by the id of the prefix block it ends in, with its place in that block
    where prefix blocks are larger (the Mooncake traces' 512 tokens against vLLM's 16).

    Parameters
    ----------
    ids : array_like of int or None
        The prompt's prefix-block ids, in order (``None`` or empty: no keys).
    id_block : int
        Tokens per prefix block of ``ids``.
    block_size : int
        Tokens per KV block; one of the two sizes divides the other.

    Returns
    -------
    list
        One key per full KV block the ids cover.
    """
    if ids is None or not len(ids):
        return []
    if id_block >= block_size:
        per = id_block // block_size
        if (per > 1 and isinstance(ids, np.ndarray) and ids.dtype.kind in "iu"
                and 0 <= ids.min() and ids.max() < 2**62 // per):   # in bulk, no overflow
            return (ids[:, None] * per + np.arange(per)).ravel().tolist()
        ids = ids.tolist() if hasattr(ids, "tolist") else list(ids)
        return ids if per == 1 else [i * per + j for i in ids for j in range(per)]
    ids = ids.tolist() if hasattr(ids, "tolist") else list(ids)
    return ids[block_size // id_block - 1::block_size // id_block]


def _every(first: np.ndarray, k: int, period: int) -> tuple[np.ndarray, np.ndarray]:
    """For each member ``i``, the steps ``first[i] + period · q <= k`` (``q >= 0``): the
    members (indices) and the steps, member by member."""
    count = np.maximum((k - first) // period + 1, 0)
    member = np.repeat(np.arange(first.size), count)
    step = first[member] + period * (np.arange(member.size) - (count.cumsum() - count)[member])
    return member, step


class BlockPool:
    """vLLM's KV block pool with its prefix cache: free blocks in a queue, least recently
    freed first, each keeping its prefix key until reused.

    ``num_free`` counts the blocks an allocation may take: never-used blocks first, then
    freed ones from the head of the queue (evicting their key from the cache).

    A request's blocks are taken, touched, registered and freed together, each call doing
    its blocks one by one in vLLM's order, in bulk: a Mooncake prompt holds some 750 blocks
    of 16 tokens. The free queue is an array of blocks in the order freed with each block's
    place in it (``-1`` once taken: its entry goes stale and is skipped when the head
    reaches it), reference counts and each block's key are arrays (the keys an object
    array, gathered and cleared by block ids), and the cache (key → block) is a dict read
    and written by C-level ``map``.

    Parameters
    ----------
    num_blocks : int or None
        vLLM's ``num_gpu_blocks``, the null block included (``capacity`` is one less);
        ``None``: unlimited.
    caching : bool, default True
        Whether full blocks are registered and found in the prefix cache.
    """

    def __init__(self, num_blocks: int | None, caching: bool = True):
        self.capacity = None if num_blocks is None else num_blocks - 1   # the null block
        self._fresh = np.inf if num_blocks is None else num_blocks - 1
        size = 1024 if num_blocks is None else max(num_blocks - 1, 1)
        self._refs = np.zeros(size, dtype=np.int64)     # references to each block
        self._slot = np.full(size, -1, dtype=np.int64)  # its place in the free queue, or -1
        self._q = np.empty(2 * size, dtype=np.int64)    # the free queue, stale entries too
        self._head = self._tail = 0
        self._free = 0                          # blocks in the free queue
        self._keyof = np.full(size, None, dtype=object)   # block -> its key, or None
        self._cached: dict[object, int] = {}    # key -> block
        self._next = 0
        self.caching = caching
        self.used = 0

    @property
    def num_free(self) -> float:
        """The blocks an allocation may take: never used, then free (``inf``: unlimited)."""
        return self._fresh + self._free

    def hits(self, keys, most: int) -> list[int]:
        """The cached blocks of the longest prefix of ``keys``, at most ``most`` of them.

        Parameters
        ----------
        keys : list
            A request's block keys, in order (:func:`prefix_keys`).
        most : int
            The most blocks to find.

        Returns
        -------
        list of int
            The blocks found, in order (empty with caching off).
        """
        if not self.caching or most <= 0:
            return []
        # lazily, key by key, up to the first key not cached
        return list(takewhile(_is_key, map(self._cached.get, islice(keys, most))))

    def evictable(self, blocks) -> int:
        """How many of ``blocks`` sit in the free queue (taking them uses free blocks).

        Parameters
        ----------
        blocks : list of int
            Block ids (a cached prefix: :meth:`hits`).

        Returns
        -------
        int
            Those held by no request.
        """
        if not blocks:
            return 0
        return int(np.count_nonzero(self._slot[np.array(blocks, dtype=np.int64)] >= 0))

    def touch(self, blocks) -> None:
        """Take references to ``blocks`` (a request's cached prefix: distinct blocks).

        Parameters
        ----------
        blocks : list of int
            The block ids; those in the free queue leave it.
        """
        if not blocks:
            return
        blocks = np.array(blocks, dtype=np.int64)
        slot = self._slot
        queued = blocks[slot[blocks] >= 0]
        if queued.size:
            slot[queued] = -1
            self._free -= queued.size
            self.used += queued.size
        self._refs[blocks] += 1

    def allocate(self, n: int) -> list[int]:
        """Take ``n`` blocks: never-used ones first, then the least recently freed (their
        keys evicted from the cache).

        Parameters
        ----------
        n : int
            How many blocks (none at ``<= 0``).

        Returns
        -------
        list of int
            The block ids, each with one reference.

        Raises
        ------
        RuntimeError
            When fewer than ``n`` blocks are free.
        """
        if n > self.num_free:
            raise RuntimeError(f"{n} blocks asked of {self.num_free} free")
        if n <= 0:
            return []
        fresh = int(min(n, self._fresh))
        if n == 1:                                  # a decode step's block
            b = self._next if fresh else self._pop_one()
            if fresh:
                self._take_fresh(1)
            self._refs[b] = 1
            self.used += 1
            return [b]
        if fresh == n:                              # never-used blocks only: a range
            first = self._next
            self._take_fresh(n)
            self._refs[first: first + n] = 1
            self.used += n
            return list(range(first, first + n))
        parts = []
        if fresh:
            parts.append(np.arange(self._next, self._next + fresh))
            self._take_fresh(fresh)
        if n > fresh:                               # then the least recently freed
            parts.append(self._pop(n - fresh))
        out = parts[0] if len(parts) == 1 else np.concatenate(parts)
        self._refs[out] = 1
        self.used += n
        return out.tolist()

    def _take_fresh(self, n: int) -> None:
        self._fresh -= n
        self._next += n
        if self._next > self._refs.size:            # an unlimited pool grows
            self._grow(self._next)

    def _pop_one(self) -> int:
        """Take the block at the head of the free queue, evicting its key."""
        q, slot, head = self._q, self._slot, self._head
        for _ in range(8):                          # a few stale entries one by one
            b = int(q[head])
            head += 1
            if slot[b] == head - 1:
                self._head = head
                slot[b] = -1
                self._free -= 1
                key = self._keyof[b]
                if key is not None:
                    self._keyof[b] = None
                    del self._cached[key]
                return b
        self._head = head
        return int(self._pop(1)[0])

    def _pop(self, n: int) -> np.ndarray:
        """Take ``n`` blocks from the head of the free queue, evicting their keys: in
        windows, past the stale entries."""
        q, slot, head = self._q, self._slot, self._head
        got, parts, window = 0, [], max(2 * n, 64)
        while got < n:
            stop = min(head + window, self._tail)
            seg = q[head:stop]
            live = (slot[seg] == np.arange(head, stop)).nonzero()[0][: n - got]
            parts.append(seg[live])
            got += live.size
            head = head + int(live[-1]) + 1 if got == n else stop
            window *= 2
        popped = parts[0] if len(parts) == 1 else np.concatenate(parts)
        self._head = head
        slot[popped] = -1
        self._free -= n
        if self._cached:
            keys = self._keyof[popped]
            self._keyof[popped] = None
            keys = keys.tolist()
            unkeyed = keys.count(None)
            if unkeyed < n:
                list(map(self._cached.__delitem__,
                         filter(_is_key, keys) if unkeyed else keys))
        return popped

    def free(self, blocks) -> None:
        """Release a request's blocks, last first (so its tail is reused first).

        Parameters
        ----------
        blocks : list of int
            The request's blocks, in its order; those left with no reference join the free
            queue, keeping their keys.
        """
        if not blocks:
            return
        order = np.fromiter(reversed(blocks), np.int64, len(blocks))
        refs = self._refs
        refs[order] -= 1
        zero = order[refs[order] == 0]
        if zero.size:
            if self._tail + zero.size > self._q.size:
                self._compact(zero.size)
            tail = self._tail
            self._q[tail: tail + zero.size] = zero
            self._slot[zero] = np.arange(tail, tail + zero.size)
            self._tail = tail + zero.size
            self._free += zero.size
            self.used -= zero.size

    def _compact(self, more: int) -> None:
        """Move the queue's live entries to the front (wider if ``more`` do not fit)."""
        seg = self._q[self._head: self._tail]
        live = seg[self._slot[seg] == np.arange(self._head, self._tail)]
        if live.size + more > self._q.size // 2:
            self._q = np.empty(2 * (live.size + more), dtype=np.int64)
        self._q[: live.size] = live
        self._slot[live] = np.arange(live.size)
        self._head, self._tail = 0, live.size

    def _grow(self, need: int) -> None:
        size = max(2 * self._refs.size, need)
        self._refs = np.concatenate([self._refs, np.zeros(size - self._refs.size, np.int64)])
        self._slot = np.concatenate([self._slot, np.full(size - self._slot.size, -1, np.int64)])
        self._keyof = np.concatenate([self._keyof,
                                      np.full(size - self._keyof.size, None, dtype=object)])

    def cache(self, block: int, key) -> None:
        """Register a full block under its prefix key (a key already held stays put, and a
        block that holds a key keeps it).

        Parameters
        ----------
        block : int
            The block, held by the request whose tokens fill it.
        key : hashable
            Its prefix key (:func:`prefix_keys`).
        """
        if self.caching and key not in self._cached and self._keyof[block] is None:
            self._cached[key] = block
            self._keyof[block] = key

    def cache_many(self, blocks: list, keys: list) -> None:
        """:meth:`cache` each block of ``blocks`` under its key of ``keys``, in order, where
        none of the blocks holds a key (a request's blocks past those it registered were
        allocated to it since). A key already held stays put, its block unkeyed: one
        ``setdefault`` per pair does both, the first of a key repeated in ``keys`` winning.

        Parameters
        ----------
        blocks : list of int
            Distinct blocks, none holding a key.
        keys : list
            Their prefix keys, one per block.
        """
        if not self.caching or not blocks:
            return
        got = list(map(self._cached.setdefault, keys, blocks))
        if got != blocks:                      # some keys were held: those blocks stay unkeyed
            new = [i for i, (g, b) in enumerate(zip(got, blocks, strict=True)) if g == b]
            blocks, keys = [blocks[i] for i in new], [keys[i] for i in new]
        if len(blocks) < 16:                   # a step's few: one by one is quicker
            list(map(self._keyof.__setitem__, blocks, keys))
        else:
            self._keyof[np.fromiter(blocks, np.intp, len(blocks))] = np.fromiter(
                keys, dtype=object, count=len(keys))

    def snapshot(self) -> dict:
        """The pool's state, for comparisons: the free queue in order with each block's
        key, the cache, each block's key, the references held, the blocks never used.

        Returns
        -------
        dict
            ``queue`` (``(block, key)`` pairs), ``cached`` (key → block), ``key`` (block →
            key), ``refs`` (block → references, held blocks only), ``next``, ``fresh`` and
            ``used``.
        """
        refs = self._refs[: self._next]
        held = np.flatnonzero(refs)
        seg = self._q[self._head: self._tail]
        queue = seg[self._slot[seg] == np.arange(self._head, self._tail)].tolist()
        keyed = {b: k for b, k in enumerate(self._keyof[: self._next].tolist()) if k is not None}
        return {"queue": [(b, keyed.get(b)) for b in queue], "cached": dict(self._cached),
                "key": keyed,
                "refs": dict(zip(held.tolist(), refs[held].tolist(), strict=True)),
                "next": self._next, "fresh": self._fresh, "used": self.used}


class VLLMV1(Policy):
    """vLLM's V1 scheduler (module docstring) as a policy of this engine.

    Runs under the real engines' convention (``first_token="prefill"``) and keeps its own
    block ledger: run it with ``memory=None`` (the engine's token count would count a shared
    block once per request). Every step's blocks are checked against ``num_gpu_blocks``.

    Parameters
    ----------
    max_num_seqs : int, default 256
        The most requests running at once.
    max_num_batched_tokens : int, default 2048
        Tokens per step (the token budget).
    num_gpu_blocks : int, optional
        KV cache size in blocks, at least 2 (one is vLLM's null block); ``None``: unlimited.
    block_size : int, default 16
        Tokens per KV block.
    enable_prefix_caching : bool, default True
        Reuse cached full blocks (keys from the trace's prefix blocks,
        :attr:`~queuetheory.workload.Trace.blocks`, whose block size and ``block_size`` must
        divide one another; without them a request only finds its own blocks after
        preemption).
    long_prefill_token_threshold : int, default 0
        Most prefill tokens of one request per step (0: no limit).
    max_model_len : int, optional
        Longest sequence (prompt + output) accepted; a longer request raises
        ``ValueError`` when it arrives. ``None``: no limit.
    reserve_full_sequence : bool, default True
        Admit a waiting request only when its whole sequence fits (vLLM's
        ``scheduler_reserve_full_isl``, on by default).
    async_scheduling : bool, default True
        Schedule each step while the previous one runs (module docstring); vLLM 0.19's
        default, on here too.

    Raises
    ------
    ValueError
        For a count that is not a positive integer (``long_prefill_token_threshold``: not
        ``>= 0``) or is over :data:`MAX_COUNT`, or fewer than 2 ``num_gpu_blocks``.
    """

    preemption = "recompute"
    #: replay a stretch's allocations in one call where no registration can change (the
    #: tests turn it off to prove the step-by-step replay too)
    _bulk_replay = True

    def __init__(self, max_num_seqs: int = 256, max_num_batched_tokens: int = 2048, *,
                 num_gpu_blocks: int | None = None, block_size: int = 16,
                 enable_prefix_caching: bool = True, long_prefill_token_threshold: int = 0,
                 max_model_len: int | None = None, reserve_full_sequence: bool = True,
                 async_scheduling: bool = True):
        self.max_num_seqs = _count("max_num_seqs", max_num_seqs)
        self.token_budget = _count("max_num_batched_tokens", max_num_batched_tokens)
        self.block_size = _count("block_size", block_size)
        if num_gpu_blocks is not None:
            num_gpu_blocks = _count("num_gpu_blocks", num_gpu_blocks)
            if num_gpu_blocks < 2:
                raise ValueError(f"num_gpu_blocks={num_gpu_blocks}: needs at least 2 (one is "
                                 "vLLM's null block)")
        self.num_gpu_blocks = num_gpu_blocks
        self.enable_prefix_caching = bool(enable_prefix_caching)
        self.long_prefill_token_threshold = _count(          # 0: no limit
            "long_prefill_token_threshold", long_prefill_token_threshold, allow_zero=True)
        self.max_model_len = None if max_model_len is None else _count("max_model_len",
                                                                       max_model_len)
        self.reserve_full_sequence = bool(reserve_full_sequence)
        self.async_scheduling = bool(async_scheduling)

    def __repr__(self) -> str:
        return (f"VLLMV1(max_num_seqs={self.max_num_seqs}, max_num_batched_tokens="
                f"{self.token_budget}, num_gpu_blocks={self.num_gpu_blocks}, block_size="
                f"{self.block_size}, enable_prefix_caching={self.enable_prefix_caching}, "
                f"async_scheduling={self.async_scheduling})")

    def supports(self, *, memory, first_token):
        if first_token != "prefill":
            return ("vLLM's prefill iteration emits the first output token: run it with "
                    "first_token='prefill'")
        if memory is not None:
            return ("VLLMV1 keeps KV memory in blocks itself (num_gpu_blocks): run it with "
                    "memory=None")
        return None

    # ---- state kept between steps ------------------------------------------------------------
    def _reset(self):
        self.pool = BlockPool(self.num_gpu_blocks, self.enable_prefix_caching)
        self.running: list[int] = []           # request ids, in the order admitted
        self.waiting: deque[int] = deque()
        self.blocks: dict[int, list[int]] = {}
        # by request id: blocks held (``len(blocks[r])``) and full blocks registered in the
        # cache, kept as arrays so that a step reads them for every running request at once
        self.held = np.zeros(0, dtype=np.int64)
        self.keyed = np.zeros(0, dtype=np.int64)
        # the ids of `running` less `_finishing`, in order, as the last step left them (None:
        # it preempted; read the list again)
        self._serving: np.ndarray | None = None
        self._keycache: dict[int, list] = {}  # prefix keys of the requests in the system
        self._shared: dict[int, list] = {}    # their prompts' keys, as a router computed them
        self._seen = 0                        # requests up to this id have joined `waiting`
        self._queued: list[float] = []        # when each request joined the waiting queue
        self._finishing: list[int] = []       # finished in the last step, not yet known (async)
        self._launched = None                 # start of the step in flight (async), or None
        self._queue_log: list[tuple[float, int, int, int]] = []
        self._queue_runs: list[tuple] = []    # stretches' rows: (place, starts, running,
        #                                       waiting, blocks after each step)
        self._plain = False                   # the last step served every running request
        self._stretch = None                  # (members, their KV tokens, the chunk)

    def _sync(self, state) -> None:
        """Free the blocks of the requests that finished; queue the new arrivals. With
        asynchronous scheduling, what happened in the step still in flight when this one was
        scheduled (the previous step) is not known yet: its finished requests leave one step
        later, and requests that arrived after it started join the queue one step later."""
        live = state.rid
        for r in self._finishing:
            self._release(r)
        self._finishing = []
        run = self._serving
        if run is None:
            run = np.fromiter(self.running, dtype=np.int64, count=len(self.running))
        finish = state._t.finish[run]
        over = finish == finish                   # finished: a time, not NaN
        done = []
        if np.count_nonzero(over):
            done = run[over].tolist()
            run = run[~over]
        self._serving = run
        if self.async_scheduling and self._launched is not None:
            self._finishing = done
        else:
            for r in done:
                self._release(r)
        new = live[live.searchsorted(self._seen):]
        queued = state.time
        if new.size and self.async_scheduling and self._launched is not None:
            new = new[state._t.arrival[new] <= self._launched]
            queued = self._launched
        if new.size:
            tab = state._t
            if self.max_model_len is not None:
                total = tab.prompt[new] + tab.output[new]
                over = (total > self.max_model_len).nonzero()[0]
                if over.size:
                    r = int(new[over[0]])
                    raise ValueError(f"request {r}: prompt {int(tab.prompt[r])} + output "
                                     f"{int(tab.output[r])} tokens exceed max_model_len="
                                     f"{self.max_model_len}")
            if self.pool.capacity is not None:
                blocks = ceil_div(tab.prompt[new] + tab.output[new], self.block_size)
                over = (blocks > self.pool.capacity).nonzero()[0]
                if over.size:
                    r = int(new[over[0]])
                    raise ValueError(f"request {r}: {int(tab.prompt[r] + tab.output[r])} tokens "
                                     f"need {int(blocks[over[0]])} KV blocks, more than the "
                                     f"{self.pool.capacity} the cache holds (num_gpu_blocks="
                                     f"{self.num_gpu_blocks}, one is vLLM's null block)")
            size = tab.block_size
            if (size is not None and self.enable_prefix_caching and size % self.block_size
                    and self.block_size % size):
                raise ValueError(f"block_size={self.block_size}: the trace's prefix blocks are "
                                 f"of {size} tokens; one must divide the other")
            self.waiting.extend(new.tolist())
            self._queued.extend([queued] * (int(new[-1]) + 1 - self._seen))
            self._seen = int(new[-1]) + 1
            if self._seen > self.held.size:
                grow = max(2 * self.held.size, self._seen, 1024) - self.held.size
                self.held = np.concatenate([self.held, np.zeros(grow, np.int64)])
                self.keyed = np.concatenate([self.keyed, np.zeros(grow, np.int64)])

    def _keys(self, state, r: int) -> list:
        """Prefix keys of request ``r``'s KV blocks, for its whole sequence (built once while
        it is in the system): the trace's id of the prefix block a KV block ends in (with the
        KV block's place in it, where the trace's blocks are larger), then keys of the
        request's own past its shared prompt blocks."""
        keys = self._keycache.get(r)
        if keys is not None:
            return keys
        tab, bs = state._t, self.block_size
        total = ceil_div(tab.prompt[r] + tab.output[r], bs)
        keys = self._shared.pop(r, None)
        if keys is None:
            keys = prefix_keys(tab.blocks[r], tab.block_size, bs)
        keys = keys[:total] + [("own", r, b) for b in range(len(keys), total)]
        self._keycache[r] = keys
        return keys

    def share_keys(self, r: int, keys: list) -> None:
        """Request ``r``'s prompt keys as ``prefix_keys(blocks, id_block, block_size)``
        gives them with this policy's ``block_size`` (a fleet's router computed them to
        route it): not computed again. Not copied: the list is only read.

        Parameters
        ----------
        r : int
            The request id.
        keys : list
            Its prompt's block keys (:func:`prefix_keys`).
        """
        self._shared[r] = keys

    def _register(self, state, r: int, tokens: int) -> None:
        """Key the blocks of ``r`` that ``tokens`` computed tokens fill."""
        full = tokens // self.block_size
        done = int(self.keyed[r])
        if full > done:
            # the blocks past those registered were allocated to r since: they hold no key
            self.pool.cache_many(self.blocks[r][done:full], self._keys(state, r)[done:full])
            self.keyed[r] = full

    def _register_many(self, run: np.ndarray, full: np.ndarray) -> None:
        """:meth:`_register` of each request of ``run``, in order, up to its ``full`` blocks
        (more than it registered), in one call of the pool: a registration reads only the
        cache the ones before it wrote, as :meth:`BlockPool.cache_many` does in order."""
        blocks, keys = self.blocks, self._keycache     # a running request's keys are built
        done = self.keyed[run]
        if int(full.sum() - done.sum()) == run.size:   # a block each (each fills one or more)
            at = list(zip(run.tolist(), done.tolist(), strict=True))
            self.pool.cache_many([blocks[r][d] for r, d in at], [keys[r][d] for r, d in at])
            self.keyed[run] = full
            return
        span = list(zip(run.tolist(), done.tolist(), full.tolist(), strict=True))
        self.pool.cache_many(
            list(chain.from_iterable([blocks[r][d:f] for r, d, f in span])),
            list(chain.from_iterable([keys[r][d:f] for r, d, f in span])))
        self.keyed[run] = full

    def _allocate_many(self, run: list, need: list) -> None:
        """Allocate ``need`` blocks to each request of ``run``, in order, in one call of the
        pool (the blocks one call per request would take, in the same order); the caller
        counts them in :attr:`held`."""
        got, at, blocks = self.pool.allocate(sum(need)), 0, self.blocks
        if len(got) == len(run):                    # a block each (each needs one or more)
            for r, b in zip(run, got, strict=True):
                blocks[r].append(b)
            return
        for r, n in zip(run, need, strict=True):
            blocks[r] += got[at: at + n]
            at += n

    def _release(self, r: int, keep_keys: bool = False) -> None:
        """Take ``r`` out of the running requests and free its blocks (they stay cached);
        ``keep_keys``: it will be back (preempted), so its prefix keys are kept."""
        self.running.remove(r)
        self.pool.free(self.blocks.pop(r))
        if not keep_keys:
            self._keycache.pop(r, None)

    def _preempt(self, r: int) -> None:
        """Free ``r``'s blocks and put it back at the head of the waiting queue — unless it
        finished in the step still in flight (asynchronous scheduling): then it just leaves."""
        finished = r in self._finishing
        self._release(r, keep_keys=not finished)
        if finished:
            self._finishing.remove(r)
        else:
            self.waiting.appendleft(r)

    # ---- one step -----------------------------------------------------------------------------
    def _schedule(self, state) -> Batch:
        self._sync(state)
        run, tokens, preempted, budget = self._serve_running(state)
        admitted: dict[int, int] = {}
        cached: dict[int, int] = {}
        if not preempted or not run.size:
            # a step that preempted admits nothing; where it runs nothing either, its next
            # step comes at once, and admits (the victims evicted first, in the same batch)
            budget = self._admit_waiting(state, budget, admitted, cached)
        scheduled = run.size + len(admitted)
        if not scheduled and not preempted and self._launched is not None:
            self._launched = None     # nothing in flight: the engine schedules at once
            return self._schedule(state)
        self._launched = state.time if scheduled else None
        # every running request served, none preempted (those admitted are prefill members:
        # steady takes a batch with one, the last running, spending the budget, or none)
        self._plain = (not preempted
                       and scheduled == len(self.running) - len(self._finishing))
        self._stretch = None
        self._queue_log.append((state.time, len(self.running), len(self.waiting),
                                self.pool.used))
        if self.pool.capacity is not None and self.pool.used > self.pool.capacity:
            raise InfeasibleBatchError(self, -1, "blocks", f"{self.pool.used} KV blocks held, "
                                       f"over the {self.pool.capacity} usable")
        if admitted:
            run = np.concatenate([run, np.fromiter(admitted, np.int64, len(admitted))])
            tokens = np.concatenate([tokens, np.fromiter(admitted.values(), np.int64,
                                                         len(admitted))])
        if preempted:
            self._serving = None
        elif admitted:      # (only with budget left: every running request was served)
            self._serving = run
        return self._batch(state, run, tokens, cached, preempted)

    # ---- stretches in closed form (the engine's fast path) ----------------------------------
    def steady(self, state, batch) -> int:
        """How many more times the decode-only ``batch`` just run repeats (:meth:`_promise`:
        the conditions, the bound, the books :meth:`repeated` keeps).

        Parameters
        ----------
        state : State
            The state the batch was built on.
        batch : Batch
            The decode-only batch :meth:`schedule` returned on it.

        Returns
        -------
        int
            The further repeats promised (0: ask again now).
        """
        return 0 if batch.prefill.size else self._promise(state, batch)

    def steady_chunk(self, state, batch) -> int:
        """How many more times the ``batch`` of decodes and one prefill chunk just run
        repeats (:meth:`_promise`).

        Parameters
        ----------
        state : State
            The state the batch was built on.
        batch : Batch
            The batch of one prefill chunk :meth:`schedule` returned on it.

        Returns
        -------
        int
            The further repeats promised (0: ask again now).
        """
        return self._promise(state, batch) if batch.prefill.size else 0

    def _promise(self, state, batch) -> int:
        """How many more times the ``batch`` just run repeats, every running request asking
        the same tokens each time, before anything this scheduler decides changes — with
        :meth:`repeated` keeping the books over them (0: ask again now).

        The step just scheduled preempted nothing and served every running request but
        those that finished a step earlier (asynchronous scheduling:
        the next step frees their blocks, allowed only while no request waits, as freed
        blocks could admit it); every request in the system has been seen (none arrived
        after the step in flight was launched). Then, while nothing arrives and no request
        finishes, each next step frees nothing more and queues nothing, and:

        - a **decode-only** batch: each running request asks one token (the budget took
          them all once, it does again), and nothing is admitted: the waiting head was
          refused for want of blocks (or the budget or ``max_num_seqs`` stopped the
          admissions), and over the stretch the free blocks only fall and its cached prefix
          only shrinks (an allocation evicts keys, a decode registers only keys of its own
          request), so the blocks it needs only grow;
        - a batch of decodes and **one prefill chunk** that spends the whole token budget
          (the step may have admitted that request, with its cached prefix): the
          prefilling request is the last running one (a request admitted after it would
          have had budget left), the decodes ask one token each and it asks the same chunk
          again (the rest of the budget, as long as more than a chunk of its prompt is left:
          the stretch stops before its last chunk), and nothing is admitted, with no budget
          left.

        What changes is the block ledger: a request allocates the blocks its new tokens
        start, and registers in the prefix cache the blocks they fill. The stretch ends
        before the first step whose allocations exceed the free blocks (that step
        preempts), or at the first member's last token (the engine stops there too).
        """
        finishing = self._finishing
        if not (self._plain and decides_as_shipped(self)
                and not (finishing and self.waiting)
                and (not state.n or int(state.rid[-1]) < self._seen)):
            return 0
        members = [r for r in self.running if r not in finishing] if finishing \
            else self.running.copy()
        tab, bs = state._t, self.block_size
        chunk = 0
        if batch.prefill.size:      # one chunk spending the budget, by the last running
            if (batch.prefill.size != 1 or batch.decode.size != len(members) - 1
                    or int(state.rid[batch.prefill[0]]) != members[-1]):
                return 0
            chunk = int(batch.chunk[0])
            if chunk + batch.decode.size != self.token_budget:
                return 0
        elif batch.decode.size != len(members):
            return 0
        run = np.array(members, dtype=np.int64)
        kv = tab.kv(run)
        held, keyed = self.held[run], self.keyed[run]
        decodes = run[:-1] if chunk else run
        if (np.count_nonzero(held != ceil_div(kv, bs)) or np.count_nonzero(keyed != kv // bs)
                or np.count_nonzero(~tab.in_decode[decodes])):
            return 0
        rate = np.ones(run.size, dtype=np.int64)
        most = int((tab.output[decodes] - tab.decoded[decodes]).min()) if decodes.size \
            else MAX_COUNT
        if chunk:
            p = members[-1]                   # steps whose chunk leaves some of its prompt
            most = min(most, (int(tab.prompt[p] + tab.decoded[p] - kv[-1]) - 1) // chunk)
            rate[-1] = chunk
        free = self.pool.num_free             # (before the finished requests free theirs)
        base = ceil_div(kv, bs)

        def allocations(j):                   # blocks allocated by steps 1 … j
            return int((ceil_div(kv + j * rate, bs) - base).sum())

        if most > 0 and allocations(most) > free:   # the first step that would preempt,
            lo, hi = 0, most                  # less one: allocations(lo) <= free < (hi)
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (mid, hi) if allocations(mid) <= free else (lo, mid)
            most = lo
        self._stretch = (members, kv.tolist(), chunk)
        return max(most, 0)

    def repeated(self, k: int, starts) -> None:
        """The books of ``k`` steps of the stretch :meth:`steady` or :meth:`steady_chunk`
        promised, started at
        ``starts``: each step's allocations, in the order of the running requests, then its
        full blocks registered in the cache — the block ids, the free queue's order and the
        cache as stepping leaves them — its row of :attr:`queue_log`, and the step in
        flight.

        Parameters
        ----------
        k : int
            The number of steps the engine ran, ``<=`` the count :meth:`steady` promised.
        starts : numpy.ndarray
            Their start times, in order.
        """
        for r in self._finishing:     # the first step's sync frees the requests that
            self._release(r)          # finished before the stretch (asynchronous scheduling)
        self._finishing = []
        run, kv, chunk = self._stretch
        bs, caching = self.block_size, self.pool.caching
        last = len(run) - 1 if chunk else len(run)
        tokens = np.array(kv, dtype=np.int64)
        decodes = tokens[:last]
        # the events (step, 0: allocate / 1: register, member, count / first block, end
        # block) as columns: a decode allocates a block at each step where its length starts
        # one, and registers one at each step that fills one
        member, step = _every((-decodes) % bs + 1, k, bs)
        columns = [(step, np.zeros_like(step), member, np.ones_like(step),
                    np.zeros_like(step))]
        if caching:
            member, step = _every((-decodes - 1) % bs + 1, k, bs)
            end = (decodes[member] + step) // bs
            columns.append((step, np.ones_like(step), member, end - 1, end))
        if chunk:                                # the prefill: a chunk's blocks each step
            columns.append(self._chunk_events(last, kv[last], chunk, k))
        step, kind, member, first, end = (np.concatenate(c) for c in zip(*columns, strict=True))
        order = np.lexsort((member, kind, step))          # stepping's order
        step, kind, member, first, end = (step[order], kind[order], member[order],
                                          first[order], end[order])
        alloc = kind == 0
        per_step = np.bincount(step[alloc], weights=first[alloc], minlength=k + 1)
        used = self.pool.used + per_step[1:].cumsum().astype(np.int64)  # after each step
        ids = np.array(run, dtype=np.int64)
        if step.size:
            self._replay(ids, step, kind, member, first, end)
            self.held[ids] += np.bincount(member[alloc], weights=first[alloc],
                                          minlength=ids.size).astype(np.int64)
        rates = np.ones(ids.size, dtype=np.int64)
        if chunk:
            rates[-1] = chunk
        tokens += k * rates
        self.keyed[ids] = tokens // bs
        self._queue_runs.append((len(self._queue_log), starts.copy(), len(run),
                                 len(self.waiting), used))
        self._launched = float(starts[-1])
        self._stretch = (run, tokens.tolist(), chunk)

    def _chunk_events(self, m, tokens, chunk, k):
        """The events of member ``m``, the prefill with ``tokens`` computed, over ``k``
        steps of ``chunk`` tokens: the blocks each step's chunk starts, the blocks it
        fills (:meth:`repeated`'s columns)."""
        bs, caching = self.block_size, self.pool.caching
        events = []
        held, full = -(-tokens // bs), tokens // bs
        for j in range(1, k + 1):
            tokens += chunk
            more, filled = -(-tokens // bs), tokens // bs
            if more > held:
                events.append((j, 0, m, more - held, 0))
            if caching and filled > full:
                events.append((j, 1, m, full, filled))
            held, full = more, filled
        if not events:
            return (np.zeros(0, np.int64),) * 5
        return tuple(np.array(c, dtype=np.int64) for c in zip(*events, strict=True))

    def _replay(self, ids, step, kind, member, first, end) -> None:
        """Allocations (kind 0: ``first`` blocks) and cache registrations (kind 1: blocks
        ``first`` to ``end``) of the members (``ids[member]``), in stepping's order.

        Where none of the keys to register is cached yet, no allocation can change what a
        registration does (an allocation only evicts keys; the blocks registered are held,
        never taken), so all the allocations are made in one call, in order, and then the
        registrations; otherwise step by step, a step's allocations in one call."""
        pool, blocks, keys = self.pool, self.blocks, self._keycache
        reg = kind == 1
        register = list(zip(ids[member[reg]].tolist(), first[reg].tolist(),
                            end[reg].tolist(), strict=True))
        new_keys = list(chain.from_iterable([keys[r][b0:b1] for r, b0, b1 in register]))
        if self._bulk_replay and pool._cached.keys().isdisjoint(new_keys):
            alloc = ~reg
            self._allocate_many(ids[member[alloc]].tolist(), first[alloc].tolist())
            if register:
                pool.cache_many(list(chain.from_iterable(
                    [blocks[r][b0:b1] for r, b0, b1 in register])), new_keys)
            return
        events = list(zip(step.tolist(), kind.tolist(), ids[member].tolist(), first.tolist(),
                          end.tolist(), strict=True))
        i, total = 0, len(events)
        while i < total:
            at, registers, r, b0, b1 = events[i]
            if not registers:
                j = i + 1
                while j < total and events[j][0] == at and not events[j][1]:
                    j += 1
                self._allocate_many([e[2] for e in events[i:j]], [e[3] for e in events[i:j]])
                i = j
                continue
            pool.cache_many(blocks[r][b0:b1], keys[r][b0:b1])
            i += 1

    def _queue_rows(self) -> list[tuple]:
        """The rows of :attr:`queue_log`: the steps asked, with the stretches' in place."""
        if not self._queue_runs:
            return self._queue_log
        rows, at = [], 0
        for place, starts, running, waiting, used in self._queue_runs:
            rows += self._queue_log[at:place]
            rows += zip(starts.tolist(), [running] * len(used), [waiting] * len(used),
                        used.tolist(), strict=True)
            at = place
        return rows + self._queue_log[at:]

    @property
    def queued(self) -> np.ndarray:
        """When each request of the last run (by id) joined the waiting queue: the start of
        the first step scheduled after it arrived (or its arrival, the engine idle), as
        vLLM's engine loop takes new requests in between steps — the ``queued_ts`` that
        vLLM's TTFT and E2E are measured from."""
        return np.array(self._queued, dtype=float)

    @property
    def peak_blocks(self) -> int:
        """The most KV blocks held after any step of the last run."""
        runs = max((int(run[4].max()) for run in self._queue_runs), default=0)
        return max(max((row[3] for row in self._queue_log), default=0), runs)

    @property
    def queue_log(self):
        """One row per step of the last run: ``time`` (the step's start), ``running`` and
        ``waiting`` (vLLM's queues after scheduling it) and ``blocks`` (KV blocks held)."""
        import pandas as pd

        return pd.DataFrame(self._queue_rows(),
                            columns=["time", "running", "waiting", "blocks"])

    def _asks(self, state, run):
        """Tokens computed and tokens asked for by the requests ``run``, in order."""
        tab = state._t
        computed = tab.kv(run)
        new = tab.prompt[run] + tab.decoded[run] - computed
        if self.long_prefill_token_threshold:
            new = np.minimum(new, self.long_prefill_token_threshold)
        return computed, new

    def _serve_running(self, state):
        """The running requests' tokens, in order, while the budget lasts; when blocks run
        out, the last running requests are preempted. Returns ``(scheduled, preempted,
        budget left)``, ``scheduled`` the requests and their tokens (arrays).

        The common step (no preemption) reads the running requests' columns at once: the
        blocks they need from :attr:`held`, the cache registrations from :attr:`keyed`;
        only those that start or fill a block are visited, their allocations made in one
        call of the pool and then their registrations in another, in order."""
        budget, bs = self.token_budget, self.block_size
        run = self._serving
        if not run.size:
            return run, run, [], budget
        computed, new = self._asks(state, run)
        ends = new.cumsum()
        if ends[-1] > budget:                      # the budget ends at the request served last
            served = int(ends.searchsorted(budget, side="left")) + 1
            run, computed, new = run[:served], computed[:served], new[:served].copy()
            new[-1] = min(new[-1], budget - (int(ends[served - 2]) if served > 1 else 0))
        upto = computed + new
        need = ceil_div(upto, bs) - self.held[run]
        full = upto // bs
        if self.pool.capacity is not None and need.sum() > self.pool.num_free:
            return self._serve_running_preempting(state, run, new, upto, need, full)
        more = (need > 0).nonzero()[0]                 # the common step: no preemption
        if more.size:
            grow, need = run[more], need[more]
            self._allocate_many(grow.tolist(), need.tolist())
            self.held[grow] += need
        fill = (full > self.keyed[run]).nonzero()[0]
        if fill.size:
            self._register_many(run[fill], full[fill])
        return run, new, [], budget - int(new.sum())

    def _serve_running_preempting(self, state, run, new, upto, need, full):
        """:meth:`_serve_running` one request at a time, preempting as vLLM does: the
        requests ``run`` (those the budget reaches) ask ``new`` tokens, ``upto`` computed
        after them, ``need`` more blocks, ``full`` blocks filled (as at the start: a
        preemption only takes the last running requests, after the one it serves). A request
        that neither allocates nor registers changes nothing: only the others are visited,
        in order; the preempted are the last of ``run``, so those served are its first
        ``cut``."""
        budget = self.token_budget
        # vLLM's loop stops once the budget is spent: past a request that asks nothing too
        served = int(new.cumsum().searchsorted(budget, side="left")) + 1
        run, new = run[:served], new[:served]
        pool, blocks, running = self.pool, self.blocks, self.running
        visit = ((need[:served] > 0) | (full[:served] > self.keyed[run])).nonzero()[0]
        ids, need, upto = run.tolist(), need.tolist(), upto.tolist()
        preempted: list[int] = []
        gone: set[int] = set()
        cut = len(ids)
        for i in visit.tolist():
            if i >= cut:                  # preempted by one before it
                break
            r, n = ids[i], need[i]
            if n > 0:
                while n > pool.num_free:
                    victim = running[-1]
                    preempted.append(victim)
                    gone.add(victim)
                    self._preempt(victim)
                    if victim == r:
                        break
                while cut and ids[cut - 1] in gone:
                    cut -= 1
                if i >= cut:              # r itself
                    break
                blocks[r] += pool.allocate(n)
                self.held[r] += n
            self._register(state, r, upto[i])
        run, new = run[:cut], new[:cut]
        return run, new, preempted, budget - int(new.sum())

    def _admit_waiting(self, state, budget, scheduled, cached) -> int:
        """Admit waiting requests in order, each with its cached prefix, while the budget,
        the sequence cap and the free blocks allow; returns the budget left."""
        tab, bs = state._t, self.block_size
        threshold = self.long_prefill_token_threshold
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            r = self.waiting[0]
            tokens = int(tab.prompt[r] + tab.decoded[r])
            hit = self.pool.hits(self._keys(state, r), (tokens - 1) // bs)
            hit_tokens = len(hit) * bs
            new = tokens - hit_tokens
            if 0 < threshold < new:
                new = threshold
            new = min(new, budget)
            upto = tokens if self.reserve_full_sequence else hit_tokens + new
            need = ceil_div(upto, bs) - len(hit) + self.pool.evictable(hit)
            if need > self.pool.num_free:
                break
            self.waiting.popleft()
            self.pool.touch(hit)
            self.blocks[r] = hit + self.pool.allocate(ceil_div(hit_tokens + new, bs) - len(hit))
            self.held[r] = len(self.blocks[r])
            self.keyed[r] = len(hit)
            self._register(state, r, hit_tokens + new)
            self.running.append(r)
            scheduled[r] = new
            cached[r] = hit_tokens
            budget -= new
        return budget

    def _batch(self, state, ids, tokens, cached, preempted) -> Batch:
        """The step's batch: the requests ``ids`` scheduled ``tokens`` each (those in
        prefill with their ``cached`` prefix), the ``preempted`` that hold KV evicted."""
        rid = state.rid
        in_decode = state._t.in_decode[ids]
        if not preempted and in_decode.all():     # decodes only
            return Batch(decode=rid.searchsorted(ids))
        evict = np.empty(0, np.int64)
        if preempted:
            gone = np.array(preempted, dtype=np.int64)
            gone = gone[np.isnan(state._t.finish[gone])]      # not those that had finished
            evict = rid.searchsorted(gone[state._t.kv(gone) > 0])
        prefill = ~in_decode
        pre = ids[prefill]
        hits = np.array([cached.get(r, 0) for r in pre.tolist()], dtype=np.int64) \
            if cached else np.zeros(0, np.int64)
        return Batch(prefill=rid.searchsorted(pre), chunk=tokens[prefill],
                     decode=rid.searchsorted(ids[in_decode]), evict=evict,
                     cached=hits if hits.any() else np.empty(0, np.int64))

    # ---- from vLLM's own engine arguments ----------------------------------------------------
    @classmethod
    def with_kv_tokens(cls, max_num_batched_tokens: int, kv_tokens: int | None, *,
                       enable_prefix_caching: bool = True) -> VLLMV1:
        """vLLM V1 with its defaults (256 sequences, 16-token blocks) and a KV cache of
        ``kv_tokens`` tokens: the command line's ``--policy vllm-v1 --memory M``.

        Parameters
        ----------
        max_num_batched_tokens : int
            Tokens per step (the token budget).
        kv_tokens : int or None
            KV-cache tokens, kept as ``kv_tokens // 16`` blocks plus vLLM's null block
            (``None``: unlimited).
        enable_prefix_caching : bool, default True
            Reuse cached full blocks.

        Returns
        -------
        VLLMV1
            The scheduler.

        Raises
        ------
        ValueError
            For ``kv_tokens`` below one block (16 tokens), or a setting :class:`VLLMV1`
            refuses.
        """
        if kv_tokens is not None and not kv_tokens >= 16:
            raise ValueError(f"kv_tokens={kv_tokens!r}: must hold at least one 16-token block")
        blocks = None if kv_tokens is None else kv_tokens // 16 + 1
        return cls(256, max_num_batched_tokens, num_gpu_blocks=blocks,
                   enable_prefix_caching=enable_prefix_caching)

    @classmethod
    def from_engine_args(cls, args) -> VLLMV1:
        """The scheduler of a vLLM engine from its arguments: a ``vllm_meta.json`` (path or
        dict: ``engine_kwargs``, ``kv_cache``, ``resolved_config``) or a flat dict of
        vLLM's engine arguments.

        Arguments that change the schedule and are not modelled are listed in a
        :class:`UserWarning`, never dropped silently; a KV cache size the arguments do not
        record is taken as unlimited, with a warning.

        Parameters
        ----------
        args : str, pathlib.Path or dict
            The path of a ``vllm_meta.json``, its contents, or a flat dict of engine
            arguments (``max_num_seqs``, ``max_num_batched_tokens``, ``num_gpu_blocks``, ...;
            a missing one takes this class's default).

        Returns
        -------
        VLLMV1
            The scheduler with those settings (asynchronous scheduling unless
            ``async_scheduling`` says otherwise).

        Raises
        ------
        ValueError
            For ``enable_chunked_prefill=False`` (only chunked prefill is modelled), ``args``
            that is neither a dict nor a path, or a setting the constructor refuses.

        Warns
        -----
        UserWarning
            Naming the arguments not modelled, or when the KV cache size is missing.
        """
        flat, resolved = _flatten(args)
        if "async_scheduling" not in flat:
            flat["async_scheduling"] = True      # vLLM 0.19's default
        unmodelled = [f"{k}={flat[k]!r}" for k, default in _UNMODELLED.items()
                      if k in flat and flat[k] not in default]
        cudagraph = resolved.get("compilation_config", {}).get("cudagraph_mode")
        if cudagraph or (flat.get("enforce_eager") is False):
            unmodelled.append("CUDA graphs' launch savings (the profiles time eager kernels; "
                              "a batch's padding to a captured size is modelled)")
        if unmodelled:
            warnings.warn("vLLM arguments not modelled by VLLMV1: " + ", ".join(unmodelled),
                          UserWarning, stacklevel=2)
        blocks = flat.get("num_gpu_blocks") or flat.get("num_gpu_blocks_override")
        if blocks is None:
            warnings.warn("the KV cache size (num_gpu_blocks) is not in these arguments: "
                          "taken as unlimited; pass it where the run's KV cache may fill",
                          UserWarning, stacklevel=2)
        if flat.get("enable_chunked_prefill") is False:
            raise ValueError("enable_chunked_prefill=False: VLLMV1 models vLLM V1's chunked "
                             "prefill only")
        return cls(max_num_seqs=flat.get("max_num_seqs") or 256,
                   max_num_batched_tokens=flat.get("max_num_batched_tokens") or 2048,
                   num_gpu_blocks=blocks, block_size=flat.get("block_size") or 16,
                   enable_prefix_caching=flat.get("enable_prefix_caching") is not False,
                   long_prefill_token_threshold=flat.get("long_prefill_token_threshold") or 0,
                   max_model_len=flat.get("max_model_len"),
                   reserve_full_sequence=flat.get("scheduler_reserve_full_isl") is not False,
                   async_scheduling=bool(flat["async_scheduling"]))


def _flatten(args) -> tuple[dict, dict]:
    """vLLM's engine arguments as one flat dict (``engine_kwargs`` first, then the resolved
    scheduler, cache and model settings, the KV cache, then top-level keys), and the
    resolved configuration; ``args`` a ``vllm_meta.json`` (path or dict) or a flat dict."""
    if isinstance(args, str | Path):
        args = json.loads(Path(args).read_text())
    if not isinstance(args, dict):
        raise ValueError(f"args={args!r}: must be a dict of vLLM engine arguments or the "
                         "path of a vllm_meta.json")
    flat = dict(args.get("engine_kwargs", {}))
    resolved = args.get("resolved_config", {})
    for section in ("scheduler_config", "cache_config", "model_config"):
        flat.update({k: v for k, v in resolved.get(section, {}).items()
                     if flat.get(k) is None})
    flat.update({k: v for k, v in args.get("kv_cache", {}).items() if flat.get(k) is None})
    flat.update({k: v for k, v in args.items()
                 if k not in ("engine_kwargs", "resolved_config", "kv_cache", "hardware")})
    return flat, resolved


def _graphs_off(mode) -> bool:
    """vLLM's ``cudagraph_mode`` says no graphs: ``NONE`` (0), or a (decode, mixed) pair
    of them."""
    if isinstance(mode, list | tuple):
        return all(_graphs_off(m) for m in mode)
    return mode == 0 or (isinstance(mode, str) and mode.upper().endswith("NONE"))


def cudagraph_capture_sizes(args, *, max_num_seqs: int | None = None,
                            max_num_batched_tokens: int | None = None) -> tuple[int, ...]:
    """The batch sizes (tokens) a vLLM engine captures CUDA graphs at, from its arguments
    (as :meth:`VLLMV1.from_engine_args` takes them); ``()`` where it runs eagerly.

    The list the run resolved (``resolved_config.compilation_config.cudagraph_capture_sizes``)
    where it is recorded; ``()`` with ``enforce_eager`` or ``cudagraph_mode`` NONE;
    otherwise vLLM's default (``VllmConfig._set_cudagraph_sizes``, vLLM 0.19): up to
    ``min(2 · max_num_seqs, 512, max_num_batched_tokens)``, 1, 2, 4, then every 8 below 256,
    then every 16. ``max_num_seqs`` and ``max_num_batched_tokens`` override the arguments'
    (a what-if scheduler); a recorded list is then not used where they differ.

    Parameters
    ----------
    args : str, pathlib.Path or dict
        The path of a ``vllm_meta.json``, its contents, or a flat dict of engine arguments.
    max_num_seqs : int, optional
        A scheduler's ``max_num_seqs`` in place of the arguments' (``None``: theirs, else
        256).
    max_num_batched_tokens : int, optional
        A token budget in place of the arguments' (``None``: theirs, else 2048).

    Returns
    -------
    tuple of int
        The capture sizes, ascending, none above the token budget.
    """
    flat, resolved = _flatten(args)
    comp = {**resolved.get("compilation_config", {}),
            **(flat.get("compilation_config") or {})}
    if flat.get("enforce_eager") or _graphs_off(comp.get("cudagraph_mode")):
        return ()
    seqs = flat.get("max_num_seqs") or 256
    tokens = flat.get("max_num_batched_tokens") or 2048
    same = (max_num_seqs in (None, seqs)) and (max_num_batched_tokens in (None, tokens))
    seqs, tokens = max_num_seqs or seqs, max_num_batched_tokens or tokens
    recorded = comp.get("cudagraph_capture_sizes")
    if recorded is not None and same:
        return tuple(sorted({int(s) for s in recorded if int(s) <= tokens}))
    top = min(int((same and comp.get("max_cudagraph_capture_size")) or min(2 * seqs, 512)),
              tokens)
    sizes = [s for s in (1, 2, 4) if s <= top]
    if top >= 8:
        sizes += list(range(8, min(top + 1, 256), 8))
    if top >= 256:
        sizes += list(range(256, top + 1, 16))
    return tuple(sizes)


#: engine arguments that change the schedule but are not modelled, with the values that
#: leave it unchanged
_UNMODELLED = {
    "policy": ("fcfs", None),
    "speculative_config": (None,),
    "max_num_partial_prefills": (1, None),
    "max_long_partial_prefills": (1, None),
    "kv_offloading_size": (None,),
    "cpu_offload_gb": (0, 0.0, None),
    "swap_space": (0, None),
    "enable_lora": (False, None),
    "pipeline_parallel_size": (1, None),
    "data_parallel_size": (1, None),
    "kv_cache_dtype": ("auto", None),
    "watermark": (0, 0.0, None),
}

"""Prefix reuse in a trace, offline: how much of its prompts a block cache could serve.

:func:`prefix_hit_ratio` replays a trace's prefix blocks (:attr:`Trace.blocks`) in arrival
order through a least-recently-used cache of ``capacity`` blocks, each block inserted when
it is requested. It is the ceiling a serving engine's prefix cache works under: in a
simulation a block still being prefilled cannot be reused yet, and a preempted request's
blocks may be evicted, so the realised ratio is at most this one for the same cache size
(``metrics['prefix_hit_ratio']`` of a run says how far below).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from ..errors import check_positive
from .core import Trace

__all__ = ["prefix_hit_ratio", "PrefixReuse", "cache_ratio_definitions"]


@dataclass(frozen=True)
class PrefixReuse:
    """An offline replay's counts: ``requested`` blocks, ``reused`` (found in the cache),
    ``distinct`` blocks, the ``capacity`` (blocks; ``None`` unbounded), ``block_size``, the
    trace's ``prompt_tokens`` and per request the blocks it reused (``per_request``).

    Attributes
    ----------
    requested : int
        Blocks requested, every request's full prefix blocks.
    reused : int
        Blocks found in the cache.
    distinct : int
        Distinct block ids in the trace.
    capacity : int or None
        The cache size in blocks; ``None``: unbounded.
    block_size : int
        Tokens per block.
    prompt_tokens : int
        The trace's prompt tokens in all.
    per_request : numpy.ndarray of int64
        Blocks each request reused, in arrival order.
    """

    requested: int
    reused: int
    distinct: int
    capacity: int | None
    block_size: int
    prompt_tokens: int
    per_request: np.ndarray

    @property
    def ratio(self) -> float:
        """Reused blocks over requested blocks."""
        return self.reused / self.requested if self.requested else 0.0

    @property
    def tokens_saved(self) -> int:
        """Prompt tokens in the reused blocks."""
        return self.reused * self.block_size

    @property
    def token_ratio(self) -> float:
        """Prompt tokens in the reused blocks over all prompt tokens: the ceiling of a
        simulation's ``metrics['prefix_hit_ratio']`` with a cache of the same size."""
        return self.tokens_saved / self.prompt_tokens if self.prompt_tokens else 0.0


def prefix_hit_ratio(trace: Trace, capacity: int | None = None, *,
                     details: bool = False) -> float | PrefixReuse:
    """The share of a trace's prompt blocks an LRU block cache of ``capacity`` blocks reuses.

    Every requested block counts: a block found in the cache is reused (and becomes the most
    recently used), any other is inserted, evicting the least recently used block when the
    cache is full. Blocks are requested in arrival order, each request's in prompt order.

    Parameters
    ----------
    trace : Trace
        A :class:`Trace` with prefix blocks (``blocks``, ``block_size``), e.g.
        :func:`queuetheory.data.mooncake_trace`.
    capacity : int, optional
        Cache size in blocks of ``trace.block_size`` tokens; ``None``: unbounded, and then
        the ratio is ``1 − distinct / requested`` (each distinct block misses once).
    details : bool, default False
        Return the :class:`PrefixReuse` counts instead of the ratio.

    Returns
    -------
    float or PrefixReuse
        Reused blocks over requested blocks (0 with none requested), or with ``details``
        the counts.

    Raises
    ------
    ValueError
        A trace without prefix blocks, or a capacity that is not a positive integer.
    """
    if not isinstance(trace, Trace) or trace.blocks is None:
        raise ValueError("trace: needs prefix blocks (Trace.blocks), e.g. "
                         "qt.data.mooncake_trace('conversation')")
    if capacity is not None:
        check_positive("capacity", capacity, integer=True)
    blocks = list(trace.blocks)
    sizes = np.array([len(b) for b in blocks], dtype=np.int64)
    flat = np.concatenate(blocks) if blocks else np.empty(0, np.int64)
    distinct = int(np.unique(flat).size)
    per_request = np.zeros(len(blocks), dtype=np.int64)
    if capacity is None:
        seen: set = set()
        for i, b in enumerate(blocks):
            ids = b.tolist()
            per_request[i] = sum(1 for k in ids if k in seen)
            seen.update(ids)
    else:
        cache: OrderedDict = OrderedDict()
        for i, b in enumerate(blocks):
            hits = 0
            for k in b.tolist():
                if k in cache:
                    cache.move_to_end(k)
                    hits += 1
                else:
                    cache[k] = None
                    if len(cache) > capacity:
                        cache.popitem(last=False)
            per_request[i] = hits
    out = PrefixReuse(int(sizes.sum()), int(per_request.sum()), distinct, capacity,
                      int(trace.block_size), int(trace.prompt.sum()), per_request)
    return out if details else out.ratio


def cache_ratio_definitions(hash_ids, input_lengths, arrival, *, block_size: int,
                            warmups=(0.0, 0.1, 0.25)):
    """A trace's prefix-cache ratio under each definition a paper could mean.

    With an unbounded cache (every block seen before is found), the ratio is computed
    ``block``-weighted (reused blocks over requested blocks) or ``token``-weighted (their
    tokens, a partial last block counting its own length), over ``all`` blocks or over
    ``full`` blocks only, and after a warm-up (blocks of the requests that arrive in the
    first ``w`` of the trace's span fill the cache but are not counted).

    Parameters
    ----------
    hash_ids : sequence of sequence of int
        Per request, its prefix-block ids (the partial last block included, as the Mooncake
        traces give them).
    input_lengths : array_like of int
        Prompt tokens per request.
    arrival : array_like of float
        Arrival times (any unit).
    block_size : int
        Tokens per id.
    warmups : sequence of float, default (0.0, 0.1, 0.25)
        Fractions of the span left out of the count.

    Returns
    -------
    pandas.DataFrame
        One row per definition: ``weight``, ``blocks`` (``"all"`` or ``"full"``),
        ``warmup`` and ``ratio``.

    Raises
    ------
    ValueError
        A block size that is not a positive integer, or per-request inputs of unequal
        lengths.
    """
    import pandas as pd

    check_positive("block_size", block_size, integer=True)
    arrival = np.asarray(arrival, dtype=float)
    span = float(arrival.max() - arrival.min()) if arrival.size else 0.0
    rows = []
    for w in warmups:
        cut = float(arrival.min()) + w * span
        seen: set = set()
        n = {k: 0 for k in ("req_all", "hit_all", "req_full", "hit_full", "tok_all",
                            "tok_hit_all", "tok_full", "tok_hit_full")}
        for ids, length, t in zip(hash_ids, input_lengths, arrival, strict=True):
            if t >= cut:
                for k, h in enumerate(ids):
                    size = min(block_size, int(length) - block_size * k)
                    hit = h in seen
                    n["req_all"] += 1
                    n["hit_all"] += hit
                    n["tok_all"] += size
                    n["tok_hit_all"] += size * hit
                    if size == block_size:
                        n["req_full"] += 1
                        n["hit_full"] += hit
                        n["tok_full"] += size
                        n["tok_hit_full"] += size * hit
            seen.update(ids)
        for blocks in ("all", "full"):
            rows.append({"weight": "block", "blocks": blocks, "warmup": w,
                         "ratio": n[f"hit_{blocks}"] / max(n[f"req_{blocks}"], 1)})
            rows.append({"weight": "token", "blocks": blocks, "warmup": w,
                         "ratio": n[f"tok_hit_{blocks}"] / max(n[f"tok_{blocks}"], 1)})
    return pd.DataFrame(rows)

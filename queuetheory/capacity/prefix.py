"""Prefix caching in the capacity bounds: the prefill work a cache saves, and what is proven.

A prefix cache serves the prompt tokens of full KV blocks an earlier request computed, so a
request computes ``(1 − h)·m_p`` prefill tokens on average instead of ``m_p``, ``h`` the
token-weighted hit ratio. Which ``h`` a bound may use decides whether it is proven.

**The proven ratio** (:class:`PrefixShare` of kind ``"proven"``): a trace's ids key the
blocks a cache can hold, and a key can enter a cache only after some request computed its
block. So every distinct key is computed at least once, whatever the cache size, eviction
order, router, preemption or order of the prefills: over any run that serves the trace, the
prefill tokens computed are at least ``Σ_i (p_i − k_i) + s·D``, ``k_i`` the tokens of
request ``i``'s keyed blocks (blocks of ``s`` tokens), ``D`` the distinct keys (eq. P1). The
realised ratio is therefore at most the **offline unbounded-cache ratio**

    h_off = s·(N − D) / Σ_i p_i,        N = Σ_i k_i / s the keys requested          (P2)

(``prefix_hit_ratio(trace, details=True).token_ratio`` where the engine's blocks divide the
trace's), and a throughput bound computed with ``(1 − h_off)·m_p`` prefill tokens per
request holds for any cache size. A replay of the trace at another rate
(:func:`~queuetheory.capacity.replay`) gives each copy its own ids, so (P1) holds per copy.
Over a fleet the same count holds for the fleet's total (each engine's cache is filled by
its own computations), so ``K`` engines serve at most ``K`` times one engine's bound.

**An estimate** (kind ``"estimate"``): a ratio the user gives — a run's realised
``metrics["prefix_hit_ratio"]``, or an assumed one for a workload without ids. Nothing
bounds the run by it: a bound computed with it is the fluid rate of full batches of that
mix, labelled so.

**Memory.** Cached blocks take KV memory, in two ways, each treated once:

* an idle cached block (reference count 0) stays in the free queue until a new block is
  needed, and is evicted then: it never keeps a request out, so the bounds charge it
  nothing;
* a block shared by running requests is held once for all of them, so a request's own
  KV-token-time is not what it adds to memory. The proven memory bound charges each request
  only its **private** KV — the prompt tokens past its keyed blocks and its output, which no
  other request can share — giving the private KV area
  ``a_priv = (d + 1)·(p − k) + d(d + 1)/2`` per request (``d`` decode iterations, eq. P3),
  and ``λ ≤ M / (τ_min E[a_priv])``. It is loose where prefixes are long and rarely shared
  at once; the ``memory (full batch)`` estimate keeps every request's full KV (no sharing).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ..errors import check_between

__all__ = ["PrefixShare", "prefix_share", "offline_token_ratio"]


@dataclass(frozen=True)
class PrefixShare:
    """The prefix-cache hit ratio a :func:`~queuetheory.capacity.bounds` call uses.

    Attributes
    ----------
    hit_ratio : float
        The token-weighted ratio ``h`` the compute bound's prefill work ``(1 − h)·m_p``
        uses (eq. P2 when proven), in ``[0, 1)``.
    kind : {"proven", "estimate"}
        ``"proven"`` (``h`` is the trace's offline unbounded-cache ratio: no run does
        better) or ``"estimate"`` (a ratio given: a realised or an assumed one).
    offline : fractions.Fraction or None
        The trace's offline unbounded-cache ratio as an exact fraction (eq. P2) where it
        bounds the run (a trace with prefix ids, a policy that caches prefixes or any
        policy), else ``None``: the proven compute bound uses it whatever ``hit_ratio`` is.
    private_area : float or None
        The mean private KV area ``E[a_priv]`` (eq. P3), in KV-token-iterations, where
        ``offline`` is given, else ``None``.
    source : str
        Where ``h`` comes from, in words.
    """

    hit_ratio: float
    kind: str
    offline: Fraction | None
    private_area: float | None
    source: str


def offline_token_ratio(trace, block_size: int | None = None) -> Fraction:
    """The offline unbounded-cache token ratio ``h_off`` of a trace (eq. P2), exactly.

    Parameters
    ----------
    trace : Trace
        A :class:`~queuetheory.workload.Trace` with prefix ids (``blocks``).
    block_size : int, optional
        The engine's KV block size in tokens (vLLM's 16); ``None``: the trace's. Where it
        divides the trace's block size each engine block is keyed by its trace block and
        place, and the ratio is the trace's own; where the trace's block size divides it,
        an engine block is keyed by the id of the last trace block in it, as
        :func:`~queuetheory.policies.vllm.prefix_keys` keys it.

    Returns
    -------
    fractions.Fraction
        ``s·(N − D) / Σ p``: tokens in the keys requested again over all prompt tokens.

    Raises
    ------
    ValueError
        A trace without prefix ids, or block sizes neither of which divides the other.
    """
    saved, prompt = _saved_tokens(trace, block_size)
    return Fraction(saved, prompt) if prompt else Fraction(0)


def _saved_tokens(trace, block_size) -> tuple[int, int]:
    """``(s·(N − D), Σ p)`` of eq. P2, at the engine's block size."""
    from ..workload import Trace

    if not isinstance(trace, Trace) or trace.blocks is None:
        raise ValueError("trace: needs prefix ids (Trace.blocks), e.g. "
                         "qt.data.mooncake_trace('conversation')")
    size = int(trace.block_size)
    engine = size if block_size is None else int(block_size)
    prompt = int(np.asarray(trace.prompt, dtype=np.int64).sum())
    if size % engine == 0:          # engine blocks inside trace blocks: keyed (id, place)
        step, unit = 1, size
    elif engine % size == 0:        # one key per engine block: the id of its last trace block
        step, unit = engine // size, engine
    else:
        raise ValueError(f"block_size={block_size}: the trace's prefix blocks are {size} "
                         "tokens; one block size must divide the other")
    keys = [np.asarray(b, dtype=np.int64)[step - 1::step] for b in trace.blocks]
    flat = np.concatenate(keys) if keys else np.empty(0, np.int64)
    return unit * int(flat.size - np.unique(flat).size), prompt


def _private_area(trace, first_token: str) -> float:
    """``E[a_priv]`` of eq. P3: per request, the KV past its full prefix blocks, summed over
    its iterations (the one that ends the prompt and its decodes)."""
    emit = int(first_token == "prefill")
    full = np.array([len(b) for b in trace.blocks], dtype=np.int64) * int(trace.block_size)
    q = (np.asarray(trace.prompt, dtype=np.int64) - full).astype(float)
    d = np.asarray(trace.output, dtype=np.int64).astype(float) - emit
    return float(np.mean((d + 1) * q + d * (d + 1) / 2))


def caches_prefixes(policy) -> bool:
    """Whether ``policy`` keeps a prefix cache (``None``: any scheduler, a caching one
    among them)."""
    return policy is None or bool(getattr(policy, "enable_prefix_caching", False))


def prefix_share(workload, policy, hit_ratio, first_token: str,
                 block_size: int | None = None) -> PrefixShare | None:
    """The :class:`PrefixShare` of :func:`~queuetheory.capacity.bounds`.

    Parameters
    ----------
    workload : Workload or Trace
        A Workload or a Trace (with or without prefix ids).
    policy : Policy or None
        The scheduler, or ``None`` (any scheduler).
    hit_ratio : float or None
        ``None`` (the trace's proven ratio, eq. P2, where it has ids and the policy caches
        prefixes) or a number in ``[0, 1)``: an estimate.
    first_token : {"prefill", "decode"}
        The first-token convention (for the private KV area).
    block_size : int, optional
        The engine's KV block size (default the policy's ``block_size``).

    Returns
    -------
    PrefixShare or None
        ``None`` where no cache applies and no ratio is given (a workload without ids, or a
        policy without a prefix cache).

    Raises
    ------
    ValueError
        A ratio outside ``[0, 1)``, or a positive one for a policy whose cache is off.
    """
    from ..workload import Trace

    if hit_ratio is not None:
        h = check_between("hit_ratio", hit_ratio, 0, 1, low_closed=True)
        if h > 0 and policy is not None and hasattr(policy, "enable_prefix_caching") \
                and not policy.enable_prefix_caching:
            raise ValueError(f"hit_ratio={hit_ratio!r}: the policy's prefix cache is off "
                             f"(enable_prefix_caching=False); give 0 or turn it on")
    proven = (isinstance(workload, Trace) and workload.blocks is not None
              and caches_prefixes(policy))
    if not proven and hit_ratio is None:
        return None
    offline = private = None
    if proven:
        offline = offline_token_ratio(workload, block_size or getattr(policy, "block_size",
                                                                       None))
        private = _private_area(workload, first_token)
    if hit_ratio is None:
        return PrefixShare(float(offline), "proven", offline, private,
                           "the trace's offline unbounded-cache ratio (eq. P2)")
    return PrefixShare(float(hit_ratio), "estimate", offline, private,
                       "given (a realised or assumed ratio)")


def cached_work(stats, h: float):
    """``stats`` with a request's prefill work ``(1 − h)·m_p`` (the compute bounds' ``m_p``
    and ``w = m_p + m_d``); its KV area, peak and second moment kept (cached tokens are
    still held and attended)."""
    import dataclasses

    prompt = (1 - h) * stats.prompt
    return dataclasses.replace(stats, prompt=prompt, work=prompt + stats.decode)


def ratio_text(h: float) -> str:
    """``h`` as the bounds' names print it (one decimal of a percent)."""
    return f"{100 * h:.1f} %" if math.isfinite(h) else str(h)

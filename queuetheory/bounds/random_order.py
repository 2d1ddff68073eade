"""Exact expected latencies of random-order admission (A_random of Chen, Ye, Zhou, Alg. 4) in
the discrete round model, by enumerating every order, and the worst case over output-length
vectors (Theorem 8.6 Part 1).

A_random draws one uniformly random permutation at the start and, each round, admits the
waiting jobs in that order while the future-peak memory check holds, stopping at the first
that does not fit; H-SF does the same in order of the true output length. Both schedules are
computed by :func:`queuetheory.rounds.mcsf_schedule` (``order="arrival"`` on the
permuted jobs, ``order="output"``), in either memory convention of that module: with
``first_token="prefill"`` (Jaillet et al.'s ``"ip"``) a job of prompt ``p`` holds
``p … p+o−1`` over ``o`` rounds (Chen et al.'s rounds, peak ``s + o`` as in their Example
3.2, are ``p = s + 1``); with ``"decode"`` (``"eq1"``) it holds ``p … p+o`` over ``o+1``
rounds (eq. (3) of Chen et al. read literally, ``p = s``). A job's latency is its last start
plus ``o`` (eq. (2)).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from itertools import combinations_with_replacement, permutations

import numpy as np

from ..rounds import durations, first_token_of, mcsf_schedule, takes_first_token

__all__ = ["random_order_tel", "hsf_tel", "RandomOrderWorstCase", "random_order_worst_case",
           "smallest_two_point_counterexample"]

_MAX_JOBS = 8


def _check(output, prompt: int, memory: int, first_token: str) -> np.ndarray:
    o = np.asarray(output, dtype=np.int64)
    first_token = first_token_of(first_token)
    if o.ndim != 1 or o.size == 0 or o.min() < 1:
        raise ValueError(f"output={o.tolist()}: need a non-empty vector of lengths >= 1")
    if o.size > _MAX_JOBS:
        raise ValueError(f"output: {o.size} jobs; exact enumeration of all orders takes at "
                         f"most {_MAX_JOBS} ({math.factorial(_MAX_JOBS)} orders)")
    peak = prompt + int(durations(o, first_token).max()) - 1
    if peak > memory:
        raise ValueError(f"memory={memory}: below the peak {peak} of the longest job")
    return o


def _tel(starts, o) -> int:
    return int((starts + o).sum())


@takes_first_token
def hsf_tel(output, prompt: int, memory: int, first_token: str = "prefill") -> int:
    """Total latency of H-SF (shortest true output first, future-peak check).

    Parameters
    ----------
    output : array_like of int
        ``o_i``: the jobs' output lengths, ``>= 1``, at most 8 jobs.
    prompt : int
        ``p``: the common prompt length, in tokens.
    memory : int
        ``M``: the KV memory, in tokens, at least the longest job's peak.
    first_token : {"prefill", "decode"}, default "prefill"
        The memory convention, as above (Jaillet et al.'s ``"ip"``, ``"eq1"``).

    Returns
    -------
    int
        H-SF's total latency (TEL), in rounds.

    Raises
    ------
    ValueError
        If ``first_token`` is unknown, ``output`` is empty, holds a length below 1 or more than
        8 jobs, or ``memory`` is below the longest job's peak.
    """
    o = _check(output, prompt, memory, first_token)
    z = np.zeros(o.size, np.int64)
    return _tel(mcsf_schedule(z, np.full(o.size, prompt), o, memory, first_token=first_token), o)


@takes_first_token
def random_order_tel(output, prompt: int, memory: int,
                     first_token: str = "prefill") -> Fraction:
    """``E[TEL]`` of A_random over a uniformly random order, exactly (every distinct order of
    the multiset ``output`` enumerated, weighted by its multiplicity).

    Parameters
    ----------
    output : array_like of int
        ``o_i``: the jobs' output lengths, ``>= 1``, at most 8 jobs.
    prompt : int
        ``p``: the common prompt length, in tokens.
    memory : int
        ``M``: the KV memory, in tokens, at least the longest job's peak.
    first_token : {"prefill", "decode"}, default "prefill"
        The memory convention, as above (Jaillet et al.'s ``"ip"``, ``"eq1"``).

    Returns
    -------
    fractions.Fraction
        ``E[TEL]`` of A_random, in rounds.

    Raises
    ------
    ValueError
        If ``first_token`` is unknown, ``output`` is empty, holds a length below 1 or more than
        8 jobs, or ``memory`` is below the longest job's peak.
    """
    o = _check(output, prompt, memory, first_token)
    z, p = np.zeros(o.size, np.int64), np.full(o.size, prompt)
    total, count = 0, 0
    for order in set(permutations(o.tolist())):
        arr = np.array(order, dtype=np.int64)
        total += _tel(mcsf_schedule(z, p, arr, memory, first_token=first_token, order="arrival"),
                      arr)
        count += 1
    return Fraction(total, count)


@dataclass(frozen=True)
class RandomOrderWorstCase:
    """Worst ``E TEL(A_random)/TEL(H-SF)`` over ``[ℓ, u]^n`` and over ``{ℓ, u}^n``.

    Attributes
    ----------
    n : int
        The number of jobs.
    lo : int
        ``ℓ``: the shortest output length, in tokens.
    hi : int
        ``u``: the longest output length, in tokens.
    prompt : int
        ``p``: the common prompt length, in tokens.
    memory : int
        ``M``: the KV memory, in tokens.
    first_token : str
        ``"prefill"`` or ``"decode"`` (Jaillet et al.'s ``"ip"``, ``"eq1"``).
    interval : fractions.Fraction
        The worst ratio over ``[ℓ, u]^n``.
    interval_output : tuple of int
        The output multiset attaining it.
    two_point : fractions.Fraction
        The worst ratio over ``{ℓ, u}^n``.
    two_point_output : tuple of int
        The output multiset attaining it.
    """

    n: int
    lo: int
    hi: int
    prompt: int
    memory: int
    first_token: str
    interval: Fraction
    interval_output: tuple
    two_point: Fraction
    two_point_output: tuple

    @property
    def two_point_is_worst(self) -> bool:
        """Whether the two-point worst case is the worst over the whole interval (Theorem 8.6
        Part 1)."""
        return self.two_point >= self.interval


@takes_first_token
def random_order_worst_case(n: int, lo: int, hi: int, prompt: int, memory: int,
                            first_token: str = "prefill") -> RandomOrderWorstCase:
    """The exact worst case of A_random's ratio over every output multiset in ``[lo, hi]^n``
    (the ratio depends only on the multiset), and over those in ``{lo, hi}^n``.

    Parameters
    ----------
    n : int
        The number of jobs, at most 8.
    lo : int
        ``ℓ >= 1``: the shortest output length, in tokens.
    hi : int
        ``u >= ℓ``: the longest output length, in tokens.
    prompt : int
        ``p``: the common prompt length, in tokens.
    memory : int
        ``M``: the KV memory, in tokens, at least the longest job's peak.
    first_token : {"prefill", "decode"}, default "prefill"
        The memory convention (see the module's docstring).

    Returns
    -------
    RandomOrderWorstCase
        Both worst cases and the multisets attaining them.

    Raises
    ------
    ValueError
        If ``1 <= lo <= hi`` fails, ``n`` exceeds 8, ``first_token`` is unknown, or ``memory``
        is below the longest job's peak.
    """
    if not 1 <= lo <= hi:
        raise ValueError(f"lo={lo}, hi={hi}: need 1 <= lo <= hi")
    first_token = first_token_of(first_token)
    best, best_two = (Fraction(-1), ()), (Fraction(-1), ())
    for o in combinations_with_replacement(range(lo, hi + 1), n):
        r = random_order_tel(o, prompt, memory, first_token) / hsf_tel(o, prompt, memory,
                                                                      first_token)
        best = max(best, (r, o))
        if set(o) <= {lo, hi}:
            best_two = max(best_two, (r, o))
    return RandomOrderWorstCase(n, lo, hi, prompt, memory, first_token, best[0], best[1],
                                best_two[0], best_two[1])


@takes_first_token
def smallest_two_point_counterexample(max_n: int = 5, max_hi: int = 5, prompts=(1, 2),
                                      max_memory_factor: int = 3,
                                      first_token: str = "prefill") -> RandomOrderWorstCase | None:
    """The first instance, in order of ``n``, then ``u`` (``ℓ = 1``), then the prompt, then
    ``M`` (from the longest job's peak to ``max_memory_factor`` times it), where A_random's
    worst case over ``[1, u]^n`` exceeds its worst case over ``{1, u}^n``; None if none.

    Parameters
    ----------
    max_n : int, default 5
        The most jobs tried.
    max_hi : int, default 5
        The largest ``u`` tried, in tokens.
    prompts : iterable of int, default (1, 2)
        The prompt lengths tried, in tokens.
    max_memory_factor : int, default 3
        ``M`` runs up to this multiple of the longest job's peak.
    first_token : {"prefill", "decode"}, default "prefill"
        The memory convention (see the module's docstring).

    Returns
    -------
    RandomOrderWorstCase or None
        The first counterexample, or None.

    Raises
    ------
    ValueError
        If ``first_token`` is unknown or ``max_n`` exceeds 8.
    """
    first_token = first_token_of(first_token)
    for n in range(1, max_n + 1):
        for hi in range(2, max_hi + 1):
            for s in prompts:
                peak = s + int(durations([hi], first_token)[0]) - 1
                for memory in range(peak, max_memory_factor * peak + 1):
                    w = random_order_worst_case(n, 1, hi, s, memory, first_token)
                    if not w.two_point_is_worst:
                        return w
    return None

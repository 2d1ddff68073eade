"""Stand-ins for length data the papers used but did not publish: the LMSYS-Chat-1M
lengths of Jaillet et al. (a log-normal sample matched on reported medians and means) and
of Ao et al. (their ten output-length bins, flat within each bin)."""

from __future__ import annotations

import numpy as np

__all__ = ["LMSYS_BINS", "lmsys_bin_rates", "lmsys_length_sample"]

LMSYS_BINS = np.array([23, 11, 8, 7, 6, 4, 3, 2, 1, 1], dtype=float)
"""Ao et al.'s ten output-length bins of LMSYS-Chat-1M (§6.2), relative frequencies."""


def lmsys_bin_rates(total_rate: float, m: int = 500):
    """500 output lengths 1..500 with rates ∝ the paper's 10-bin proportions (§6.2), flat
    inside each bin of 50: a surrogate of the LMSYS-Chat-1M frequencies of Fig. 15.

    Parameters
    ----------
    total_rate : float
        The total arrival rate ``λ``, split over the lengths, per time unit.
    m : int, default 500
        The number of output lengths ``1..m`` (a multiple of the 10 bins).

    Returns
    -------
    lengths : numpy.ndarray of int
        The output lengths ``1..m`` in tokens.
    rates : numpy.ndarray of float
        The arrival rate of each length (Ao et al.'s ``λ_j``), summing to ``total_rate``.
    """
    per = np.repeat(LMSYS_BINS / LMSYS_BINS.sum(), m // LMSYS_BINS.size) / (m // LMSYS_BINS.size)
    return np.arange(1, m + 1), per * total_rate


def lmsys_length_sample(n: int, rate: float, *, memory: int = 4096, seed: int = 0):
    """Arrival rounds, prompts and outputs standing in for the LMSYS-Chat-1M sample of
    Jaillet et al. §7 (spec decision D9): log-normal lengths matched on the reported medians
    and means (input 11 / 40.62, output 45 / 85.32 words), redrawn when ``s + o − 1 > M``;
    Poisson arrivals at ``rate`` per round, floored to whole rounds. ``memory`` defaults to
    4096 tokens, the scaled capacity of the Section 7 claims.

    Parameters
    ----------
    n : int
        Number of requests, ≥ 1.
    rate : float
        Arrival rate per round, > 0.
    memory : int, default 4096
        The KV capacity ``M`` in tokens: every request has ``s + o − 1 ≤ M``.
    seed : int, default 0
        Seed of the draw.

    Returns
    -------
    arrival : numpy.ndarray of float
        Arrival rounds (whole numbers), non-decreasing.
    prompt : numpy.ndarray of int64
        Prompt lengths ``s_i`` in tokens (words).
    output : numpy.ndarray of int64
        Output lengths ``o_i`` in tokens (words).

    Raises
    ------
    ValueError
        If ``n < 1``, ``rate ≤ 0`` or ``memory < 1``.
    """
    if n < 1 or rate <= 0 or memory < 1:
        raise ValueError(f"n={n}, rate={rate}, memory={memory}: need n >= 1, rate > 0 and "
                         "memory >= 1")
    rng = np.random.default_rng(seed)
    s, o = np.empty(0, np.int64), np.empty(0, np.int64)
    while s.size < n:
        ds = np.maximum(1, np.rint(rng.lognormal(np.log(11), 1.616, 2 * n))).astype(np.int64)
        do = np.maximum(1, np.rint(rng.lognormal(np.log(45), 1.131, 2 * n))).astype(np.int64)
        keep = ds + do - 1 <= memory
        s, o = np.r_[s, ds[keep]], np.r_[o, do[keep]]
    arrival = np.floor(np.cumsum(rng.exponential(1 / rate, n)))
    return arrival, s[:n], o[:n]

"""Lower-bound instance families of Jaillet et al. §6: Theorem 6.2 (deterministic) and
Theorem 6.4 (randomized, Yao's principle), in the "ip" convention.

One long request (prompt ``s = εM``, output ``(1 − ε)M``, so ``s + o = M``) arrives at 0;
``K = εM`` short requests (prompt ``s``, output 1) arrive together at round ``τ``. Given
the long request's start ``p``, serving as many shorts as fit in each round is optimal
(they are identical and free their memory at once), so the total latency is an exact
function of ``p`` (:func:`long_short_latency`) and the non-preemptive hindsight optimum is
its minimum over ``p`` (checked against the App. B.1 MILP in the tests).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ..rounds import mcsf_schedule

__all__ = ["AdversarialInstance", "shorts_latency", "long_short_latency", "theorem62_instance",
           "theorem62_deterministic_bound",
           "theorem64_distribution", "Theorem64Result", "theorem64_ratio"]


@dataclass(frozen=True)
class AdversarialInstance:
    """Arrays of one instance, the online algorithm's and the optimum's total latency."""

    arrival: np.ndarray
    prompt: np.ndarray
    output: np.ndarray
    memory: int
    eps: float
    tau: int
    algorithm_latency: int
    optimum_latency: int
    optimum_long_start: int

    @property
    def ratio(self) -> float:
        return self.algorithm_latency / self.optimum_latency

    @property
    def limit(self) -> float:
        """``1 + 2/ε``: the ratio's limit as ``M → ∞`` at fixed ε (the exact form in the paper)."""
        return 1 + 2 / self.eps


#: The largest memory ``M`` of an instance: the exact optimum's work grows about as
#: ``M^1.5`` (0.8 s at ``M = 4096``, about a minute at ``2^16`` on one core).
MAX_MEMORY = 1 << 16


def _sizes(M: int, eps) -> tuple[int, int, int]:
    """``(s, d_long, K)``; ε must make ``εM`` and ``1/ε`` integers; ``M`` is an integer up
    to ``MAX_MEMORY`` (the instance holds ``εM`` requests, its schedule arrays ``M``)."""
    if isinstance(M, bool) or not isinstance(M, int | np.integer) or M < 1:
        raise ValueError(f"M={M!r}: the KV memory must be an integer >= 1")
    if M > MAX_MEMORY:
        raise ValueError(f"M={M}: over MAX_MEMORY = {MAX_MEMORY:,} (about a minute there; "
                         f"the work grows as M^1.5, so about {(M / MAX_MEMORY) ** 1.5:.3g} "
                         "minutes here, and arrays of M eight-byte entries)")
    try:
        e = Fraction(eps).limit_denominator(10**6)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"eps={eps!r}: must be a finite number in (0, 1/2)") from None
    if not 0 < e < Fraction(1, 2):
        raise ValueError(f"eps={eps!r}: must lie in (0, 1/2)")
    if (e * M).denominator != 1 or (1 / e).denominator != 1:
        raise ValueError(f"eps={eps!r}, M={M}: εM and 1/ε must be integers")
    s = int(e * M)
    return s, M - s, s


def shorts_latency(M: int, eps, offset) -> np.ndarray:
    """Total latency of the ``K`` shorts when the long request is ``offset = τ − p`` rounds
    old at their arrival ``τ`` (negative: it starts ``−offset`` rounds after them).

    They are served greedily, ``⌊(M − m_long(t))/s⌋`` per round; the value depends on the
    offset only, which makes every quantity below one vectorised pass.
    """
    s, d, K = _sizes(M, eps)
    off = np.clip(np.atleast_1d(np.asarray(offset, dtype=np.int64)), -K, d)
    horizon = d + K + 2          # the shorts wait at most until the long one ends
    out = np.empty(off.size, dtype=np.int64)
    for lo in range(0, off.size, 256):                     # chunks bound the memory used
        age = off[lo:lo + 256, None] + np.arange(horizon)[None, :]
        free = np.where((age >= 0) & (age < d), M - s - age, M)
        served = np.cumsum(free // s, axis=1)
        if np.any(served[:, -1] < K):
            raise RuntimeError("shorts_latency: horizon too short (a bug)")
        before = K - np.concatenate([np.zeros((served.shape[0], 1), np.int64),
                                     served[:, :-1]], axis=1)
        out[lo:lo + 256] = np.clip(before, 0, None).sum(axis=1)
    return out


def long_short_latency(M: int, eps, tau: int, long_start) -> np.ndarray:
    """Exact total latency of the instance for each start round of the long request.

    Parameters
    ----------
    M : int
        ``M``: the KV memory, in tokens, an integer in ``[1, MAX_MEMORY]``.
    eps : float or fractions.Fraction
        ``ε`` in ``(0, 1/2)``, with ``εM`` and ``1/ε`` integers.
    tau : int
        ``τ``: the shorts' arrival round.
    long_start : int or array_like of int
        ``p``: the long request's start round(s).

    Returns
    -------
    numpy.ndarray of int
        The total latency (TEL), in rounds, for each ``p``.

    Raises
    ------
    ValueError
        If ``M`` or ``eps`` is out of range, or ``εM`` or ``1/ε`` is not an integer.
    """
    _, d, _ = _sizes(M, eps)
    p = np.atleast_1d(np.asarray(long_start, dtype=np.int64))
    return p + d + shorts_latency(M, eps, tau - p)


def _optimum_table(M, eps, last_tau):
    """``OPT(τ)`` for every ``τ ∈ [0, last_tau]`` and the best offset ``τ − p`` of each.

    ``OPT(τ) = τ + d + min_{−K ≤ δ ≤ τ} (g(δ) − δ)`` with ``g`` = :func:`shorts_latency`
    (a start later than ``τ + K`` cannot help: the shorts are done by then).
    """
    _, d, K = _sizes(M, eps)
    delta = np.arange(-K, last_tau + 1)
    h = shorts_latency(M, eps, delta) - delta
    best = np.minimum.accumulate(h)[K:]                  # min over δ ≤ τ, for τ = 0 … last
    taus = np.arange(last_tau + 1)
    return taus + d + best


def _optimum(M, eps, tau, first=0):
    """Best long start ``≥ first`` and its total latency (the shorts finish by τ + K)."""
    _, _, K = _sizes(M, eps)
    starts = np.arange(first, max(first, tau + K) + 1)
    tel = long_short_latency(M, eps, tau, starts)
    k = int(np.argmin(tel))
    return int(starts[k]), int(tel[k])


def theorem62_deterministic_bound(M: int, eps) -> tuple[float, int]:
    """``min_{t'} TEL/OPT`` over every deterministic non-preemptive algorithm: one that
    starts the long request at ``t'`` meets shorts at ``t' + (1 − 2ε)M`` and then plays
    optimally. Returns the bound and the best ``t'`` (later than ``εM`` never helps: OPT
    is then constant while the algorithm's latency grows by one per round).

    Parameters
    ----------
    M : int
        ``M``: the KV memory, in tokens, an integer in ``[1, MAX_MEMORY]``.
    eps : float or fractions.Fraction
        ``ε`` in ``(0, 1/2)``, with ``εM`` and ``1/ε`` integers.

    Returns
    -------
    ratio : float
        ``min_{t'} TEL/OPT``: no deterministic algorithm does better on this family.
    t_prime : int
        The best start ``t'`` of the long request.

    Raises
    ------
    ValueError
        If ``M`` or ``eps`` is out of range, or ``εM`` or ``1/ε`` is not an integer.
    """
    s, d, _ = _sizes(M, eps)
    tau0 = M - 2 * s
    opt = _optimum_table(M, eps, tau0 + s)[tau0:]
    t = np.arange(s + 1)
    alg = t + d + shorts_latency(M, eps, tau0)[0]
    ratio = alg / opt
    k = int(np.argmin(ratio))
    return float(ratio[k]), int(t[k])


def theorem62_instance(M: int, eps) -> AdversarialInstance:
    """Theorem 6.2's instance against MC-SF (which starts the long request at 0): shorts at
    ``τ = (1 − 2ε)M``; returns MC-SF's latency (simulated) and the exact optimum.

    Parameters
    ----------
    M : int
        ``M``: the KV memory, in tokens, an integer in ``[1, MAX_MEMORY]``.
    eps : float or fractions.Fraction
        ``ε`` in ``(0, 1/2)``, with ``εM`` and ``1/ε`` integers.

    Returns
    -------
    AdversarialInstance
        The instance's arrays, MC-SF's and the optimum's total latency, and the optimum's
        long start; ``ratio`` and ``limit`` compare them.

    Raises
    ------
    ValueError
        If ``M`` or ``eps`` is out of range, or ``εM`` or ``1/ε`` is not an integer.
    """
    s, d, K = _sizes(M, eps)
    tau = M - 2 * s
    arrival = np.r_[0, np.full(K, tau)]
    prompt = np.full(K + 1, s)
    output = np.r_[d, np.ones(K, dtype=np.int64)]
    starts = mcsf_schedule(arrival, prompt, output, M)
    alg = int((starts + output - arrival).sum())
    p_opt, opt = _optimum(M, eps, tau)
    return AdversarialInstance(arrival, prompt, output, M, float(eps), tau, alg, opt, p_opt)


def theorem64_distribution(M: int, eps, c: int, corrected: bool = False):
    """Arrival rounds of the shorts and their probabilities (Theorem 6.4, Eq. (8)).

    As printed: ``k ∈ {1 − 2ε, 1 − ε, …, c + 1 − 2ε}``, each with probability ``ε/c``
    (they sum to ``1 + ε/c``; normalised here). Corrected (spec §3.9): ``k ∈ {0, ε, …, c}``,
    uniform. Returns ``(rounds kM, probabilities)`` as integers and Fractions.
    """
    s, _, _ = _sizes(M, eps)
    if c < 1 or int(c) != c:
        raise ValueError(f"c={c!r}: must be an integer >= 1")
    first = 0 if corrected else M - 2 * s
    count = int(c) * (M // s) + 1
    rounds = first + s * np.arange(count)
    return rounds, [Fraction(1, count)] * count


@dataclass(frozen=True)
class Theorem64Result:
    """E[TEL]/E[OPT] of each threshold policy ``k'`` (start the long request at ``k'M``)."""

    thresholds: np.ndarray       # k'M, rounds
    ratios: np.ndarray
    immediate: float             # k' = 0: start immediately (MC-SF)
    best: float                  # min over k'

    @property
    def best_threshold(self) -> int:
        return int(self.thresholds[int(np.argmin(self.ratios))])


def theorem64_ratio(M: int, eps, c: int, corrected: bool = False) -> Theorem64Result:
    """Ratio of expectations ``E[TEL]/E[OPT]`` (Eq. (8)) of every deterministic policy.

    A deterministic policy is a round ``p``: start the long request at ``p`` unless the
    shorts arrive first, and from their arrival on play optimally (a start no earlier than
    their arrival). By Yao's principle ``best`` bounds every randomized algorithm's ratio
    (in the ratio-of-expectations form of Eq. (8)).

    Parameters
    ----------
    M : int
        ``M``: the KV memory, in tokens, an integer in ``[1, MAX_MEMORY]``.
    eps : float or fractions.Fraction
        ``ε`` in ``(0, 1/2)``, with ``εM`` and ``1/ε`` integers.
    c : int
        ``c >= 1``: the shorts arrive at a round ``kM`` with ``k`` up to about ``c`` (Eq. (8)).
    corrected : bool, default False
        Use the corrected distribution (spec §3.9) instead of the printed one.

    Returns
    -------
    Theorem64Result
        Each threshold's ratio, MC-SF's (``immediate``) and the best.

    Raises
    ------
    ValueError
        If ``M`` or ``eps`` is out of range, ``εM`` or ``1/ε`` is not an integer, or ``c`` is
        not an integer ``>= 1``.
    """
    _, d, K = _sizes(M, eps)
    rounds, probs = theorem64_distribution(M, eps, c, corrected)
    w = np.array([float(p) for p in probs])
    last = int(rounds.max())
    delta = np.arange(-K, last + 1)
    g = shorts_latency(M, eps, delta)                   # g[δ + K], δ = τ − p
    opt = (np.arange(last + 1) + d + np.minimum.accumulate(g - delta)[K:])[rounds]
    wait = d + int((g - delta)[: K + 1].min())          # + τ: start no earlier than the shorts
    p = np.arange(last + 2)[:, None]
    started = p <= rounds[None, :]
    tel = np.where(started, p + d + g[np.where(started, rounds[None, :] - p, 0) + K],
                   rounds[None, :] + wait)
    ratios = tel @ w / (opt @ w)
    return Theorem64Result(p[:, 0], ratios, float(ratios[0]), float(ratios.min()))

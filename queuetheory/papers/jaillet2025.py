"""Jaillet, Jiang, Podimata, Zhou's experiments: the work of one admission round
(Proposition 4.1), the regret runs against a feasible comparator (Theorem 5.3) and Section 7
in model form (the scaled KV capacity, the six benchmarks of Figure 5, the runs).

The ledger (:mod:`queuetheory.claims.jaillet2025`) checks the paper's statements on these;
they lived there until this release (the old names warn until the next one).
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from ..rounds import FuturePeak, mcsf_schedule
from ..workload.surrogates import lmsys_length_sample

__all__ = ["admission_work", "bernoulli_arrivals", "regret_experiment", "PAPER_M", "MODEL_M",
           "BENCHMARKS", "section7_run", "section7_experiment"]


class _CountingPeak(FuturePeak):
    """FuturePeak that counts checkpoint evaluations (one per checkpoint per check)."""

    def __init__(self, *args):
        super().__init__(*args)
        self.work = 0

    def fits(self, m, e):
        self.work += self.taus.size + 1
        return super().fits(m, e)


def admission_work(memory: int, *, seed: int = 0, rounds: int = 40) -> int:
    """Largest number of checkpoint evaluations of one round of Algorithm 1 on a saturated
    semi-online instance (prompt 1, outputs uniform on ``1 … M/8``), replaying each round of
    the run; also checks the replay admits exactly what :func:`mcsf_schedule` admitted.

    Parameters
    ----------
    memory : int
        The KV capacity ``M`` in tokens (``>= 8``): ``4M`` requests arrive at round 0.
    seed : int, default 0
        Seed of the output lengths.
    rounds : int, default 40
        How many rounds to replay (fewer when the run starts its last request earlier).

    Returns
    -------
    int
        The most checkpoint evaluations (one per checkpoint per admission check, Proposition
        4.1) any replayed round made.

    Raises
    ------
    AssertionError
        If a round's replay admits other requests than :func:`mcsf_schedule` started then.
    """
    rng = np.random.default_rng(seed)
    n = 4 * memory
    o = rng.integers(1, memory // 8 + 1, n)
    a, s = np.zeros(n, np.int64), np.ones(n, np.int64)
    start = mcsf_schedule(a, s, o, memory)
    order = np.lexsort((np.arange(n), o))
    worst = 0
    for t in range(min(rounds, int(start.max()) + 1)):
        run = (start < t) & (start + o > t)
        peak = _CountingPeak(memory, t, s[run] + t - start[run], start[run] + o[run] - 1)
        cand = order[start[order] >= t]
        ok = peak.admit(s[cand], t + o[cand] - 1)
        if not np.array_equal(np.sort(cand[ok]), np.flatnonzero(start == t)):
            raise AssertionError(f"admission replay differs from mcsf_schedule at round {t}")
        worst = max(worst, peak.work)
    return worst


def bernoulli_arrivals(horizon: int, probs, seed: int) -> np.ndarray:
    """Arrival rounds with an i.i.d. number of arrivals per round, ``P(k) = probs[k]``.

    Parameters
    ----------
    horizon : int
        The number of rounds ``T``: rounds ``0 … T-1``.
    probs : sequence of float
        ``probs[k]`` the weight of ``k`` arrivals in a round (normalised to sum to 1).
    seed : int
        Seed of the counts.

    Returns
    -------
    numpy.ndarray
        The arrival round of each request, sorted (a round repeated once per arrival).
    """
    rng = np.random.default_rng(seed)
    counts = rng.choice(len(probs), size=horizon, p=np.asarray(probs) / np.sum(probs))
    return np.repeat(np.arange(horizon), counts)


def regret_experiment(horizons, seeds, *, probs=(0.25, 0.25, 0.25, 0.25), output: int = 10,
                      prompt: int = 1, memory: int = 100, cap: int = 2) -> dict:
    """Algorithm 2 against the feasible comparator "at most ``cap`` starts per round" (an
    upper bound on the hindsight optimum) and against ``output`` (a lower bound on every
    request's latency), for growing horizons ``T``; fits the slope in ``T`` of both gaps.

    ``lower_gap`` = AEL(Alg 2) − AEL(comparator) ≤ regret;
    ``upper_gap`` = AEL(Alg 2) − ``output`` ≥ regret.

    Parameters
    ----------
    horizons : iterable of int
        The horizons ``T`` (rounds); the fit needs at least three runs in all.
    seeds : iterable of int
        The seeds of the arrivals, one run per horizon and seed.
    probs : sequence of float, default (0.25, 0.25, 0.25, 0.25)
        Weights of ``0, 1, 2, …`` arrivals per round (:func:`bernoulli_arrivals`).
    output : int, default 10
        Every request's output length.
    prompt : int, default 1
        Every request's prompt length.
    memory : int, default 100
        The KV capacity in tokens.
    cap : int, default 2
        The comparator's most starts per round.

    Returns
    -------
    dict
        ``rows`` (``(T, seed, AEL of Alg 2, AEL of the comparator)`` per run), ``lower_gap``
        and ``upper_gap`` (each ``(slope, low, high)``: the fitted slope in ``T`` and its
        99 % confidence interval), and the per-run arrays ``alg``, ``comparator`` and ``T``.
    """
    rows = []
    for T in horizons:
        for seed in seeds:
            a = bernoulli_arrivals(int(T), probs, seed)
            s, o = np.full(a.size, prompt), np.full(a.size, output)
            alg = float((mcsf_schedule(a, s, o, memory) + o - a).mean())
            comp = float((mcsf_schedule(a, s, o, memory, max_starts=cap) + o - a).mean())
            rows.append((int(T), seed, alg, comp))
    T, _, alg, comp = (np.array(c) for c in zip(*rows, strict=True))

    def slope(y):
        fit = stats.linregress(T, y)
        half = stats.t.ppf(0.995, T.size - 2) * fit.stderr
        return fit.slope, fit.slope - half, fit.slope + half

    return {"rows": rows, "lower_gap": slope(alg - comp), "upper_gap": slope(alg - output),
            "alg": alg, "comparator": comp, "T": T}


PAPER_M = 16492
"""KV capacity of Section 7 in tokens, as stated."""

MODEL_M = 4096
"""The scaled capacity the Section 7 claims run at (a quarter of :data:`PAPER_M`, so that a
few hundred requests already congest the system and a check takes seconds)."""

BENCHMARKS = {"greedy α=0.30": (0.3, None), "greedy α=0.25": (0.25, None),
              "clearing α=0.2 β=0.2": (0.2, 0.2), "clearing α=0.2 β=0.1": (0.2, 0.1),
              "clearing α=0.1 β=0.2": (0.1, 0.2), "clearing α=0.1 β=0.1": (0.1, 0.1)}
"""The six benchmark configurations of Figure 5 (§7.1, §7.2)."""


def section7_run(policy, arrival, prompt, output, memory: int = MODEL_M) -> dict:
    """One engine run (``UnitTime`` rounds, "ip" convention): average latency, completions,
    peak memory, restarts and the loop flag of the α-protection benchmarks.

    Parameters
    ----------
    policy : Policy
        The scheduler (:class:`~queuetheory.policies.MCSF`,
        :class:`~queuetheory.policies.AlphaProtection`, ...).
    arrival : array_like of int
        Each request's arrival round.
    prompt : array_like of int
        Each request's prompt length.
    output : array_like of int
        Each request's output length.
    memory : int, default MODEL_M
        The KV capacity in tokens.

    Returns
    -------
    dict
        ``mean_latency`` (``inf`` when the policy reports a loop), ``completed``,
        ``peak_memory``, ``restarts``, ``loop_at`` (the policy's ``loop_at``, or ``None``)
        and ``result`` (the :class:`~queuetheory.engine.Result`).
    """
    from ..engine import simulate
    from ..timing import UnitTime
    from ..workload import Workload

    wl = Workload.from_arrays(arrival, prompt, output)
    res = simulate(wl, policy, UnitTime(), memory=memory, first_token="prefill",
                   n_requests=len(arrival))
    m = res.metrics
    loop = getattr(policy, "loop_at", None)
    return {"mean_latency": m["mean_latency"] if loop is None else float("inf"),
            "completed": m["completed"], "peak_memory": m["peak_memory"],
            "restarts": m["restarts"], "loop_at": loop, "result": res}


def section7_experiment(rates, n: int, *, memory: int = MODEL_M, seed: int = 0,
                        benchmarks=None) -> dict:
    """Average latency of MC-SF and of each benchmark ``{name: (alpha, beta)}`` at each
    arrival rate (per round) on one surrogate stream per rate: ``{rate: {name: AEL}}``.

    Parameters
    ----------
    rates : iterable of float
        Arrival rates, requests per round.
    n : int
        Requests per stream.
    memory : int, default MODEL_M
        The KV capacity in tokens (every surrogate request has ``s + o − 1 ≤ memory``).
    seed : int, default 0
        Seed of each rate's stream.
    benchmarks : dict, optional
        ``{name: (alpha, beta)}`` of the α-protection benchmarks; ``None`` runs
        :data:`BENCHMARKS`.

    Returns
    -------
    dict
        ``{rate: {name: average end-to-end latency}}``, ``"MC-SF"`` first.
    """
    from ..policies.kvcache import MCSF, AlphaProtection

    benchmarks = BENCHMARKS if benchmarks is None else benchmarks
    table = {}
    for rate in rates:
        a, s, o = lmsys_length_sample(n, rate, memory=memory, seed=seed)
        row = {"MC-SF": section7_run(MCSF(), a, s, o, memory)["mean_latency"]}
        for name, (alpha, beta) in benchmarks.items():
            row[name] = section7_run(AlphaProtection(alpha, beta), a, s, o, memory)[
                "mean_latency"]
        table[rate] = row
    return table

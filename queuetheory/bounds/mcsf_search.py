"""Exhaustive searches for instances where MC-SF (Jaillet, Jiang, Podimata, Zhou, Algorithm 1)
is not optimal, against the exact hindsight optimum.

:func:`smallest_alg1_counterexample` enumerates semi-online instances (all arrivals at round
0, one prompt size) in order of size and returns the first where Algorithm 1's total latency
exceeds the optimum of :func:`~queuetheory.bounds.hindsight.hindsight_brute_force` (a dynamic
program, exact). Both timing conventions of :mod:`queuetheory.rounds` are
supported: ``"eq1"`` (Eq. (1), §3–§4: ``o + 1`` rounds, memory ``s … s + o``) and ``"ip"``
(App. B.1: ``o`` rounds, memory ``s … s + o − 1``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations_with_replacement

import numpy as np

from ..rounds import durations, first_token_of, mcsf_schedule, takes_first_token
from .hindsight import hindsight_brute_force

__all__ = ["Alg1Counterexample", "smallest_alg1_counterexample", "identical_jobs_gap"]


@dataclass(frozen=True)
class Alg1Counterexample:
    """The result of :func:`smallest_alg1_counterexample`.

    ``searched[n]`` counts the instances with ``n`` requests that were compared with the
    optimum; when ``found`` the instance (``memory``, ``prompt``, ``output``) and both
    schedules (start rounds and total latencies) are given.

    Attributes
    ----------
    found : bool
        Whether a counterexample was found.
    first_token : str
        ``"decode"`` or ``"prefill"`` (Jaillet et al.'s ``"eq1"``, ``"ip"``).
    searched : dict of int to int
        The number of instances compared, by number of requests.
    memory : int
        ``M``: the instance's KV memory, in tokens (0 if none was found).
    prompt : int
        ``s``: the common prompt length, in tokens (0 if none was found).
    output : numpy.ndarray or None
        The output lengths ``o_i``, in tokens.
    alg_starts : numpy.ndarray or None
        Algorithm 1's start rounds.
    alg_latency : int
        Algorithm 1's total latency, in rounds.
    opt_starts : numpy.ndarray or None
        The optimal start rounds.
    opt_latency : int
        The optimal total latency, in rounds.
    """

    found: bool
    first_token: str
    searched: dict = field(default_factory=dict)
    memory: int = 0
    prompt: int = 0
    output: np.ndarray | None = None
    alg_starts: np.ndarray | None = None
    alg_latency: int = 0
    opt_starts: np.ndarray | None = None
    opt_latency: int = 0

    @property
    def durations(self) -> np.ndarray:
        """The rounds ``d_i`` each request runs under ``first_token``."""
        return durations(self.output, self.first_token)


@takes_first_token
def smallest_alg1_counterexample(max_n: int = 4, prompts=(1, 2, 3), max_memory: int = 14,
                                 max_output: int = 7, *,
                                 first_token: str = "decode") -> Alg1Counterexample:
    """The first semi-online instance, in order of the number of requests, then the memory
    ``M``, then the prompt ``s``, then the output multiset, where Algorithm 1's total
    latency exceeds the exact optimum. Instances whose largest request cannot fit
    (``s + d − 1 > M``) are skipped, and so are those where Algorithm 1 starts every request
    at round 0 (nothing can beat that).

    Parameters
    ----------
    max_n : int, default 4
        The most requests per instance.
    prompts : iterable of int, default (1, 2, 3)
        The prompt lengths ``s`` tried, in tokens.
    max_memory : int, default 14
        The largest memory ``M`` tried, in tokens.
    max_output : int, default 7
        The largest output length ``o`` tried, in tokens.
    first_token : {"decode", "prefill"}, default "decode"
        The timing convention of :mod:`queuetheory.rounds` (Jaillet et al.'s ``"eq1"``,
        ``"ip"``).

    Returns
    -------
    Alg1Counterexample
        The first counterexample, or ``found=False`` with the counts searched.

    Raises
    ------
    ValueError
        If ``first_token`` is unknown, or ``max_n``, ``max_memory`` or ``max_output`` is
        below 1.
    """
    first_token = first_token_of(first_token)
    for name, v, lo in (("max_n", max_n, 1), ("max_memory", max_memory, 1),
                        ("max_output", max_output, 1)):
        if int(v) < lo:
            raise ValueError(f"{name}={v}: must be >= {lo}")
    searched = {}
    for n in range(1, max_n + 1):
        searched[n] = 0
        for M in range(1, max_memory + 1):
            for s in prompts:
                for o in combinations_with_replacement(range(1, max_output + 1), n):
                    out = np.array(o)
                    d = durations(out, first_token)
                    if s + d.max() - 1 > M:
                        continue
                    searched[n] += 1
                    a, p = np.zeros(n, np.int64), np.full(n, s)
                    alg = mcsf_schedule(a, p, out, M, first_token=first_token)
                    alg_tel = int((alg + d).sum())
                    if alg_tel == int(d.sum()):
                        continue
                    opt = hindsight_brute_force(a, p, out, M, first_token=first_token)
                    if opt.total_latency < alg_tel:
                        return Alg1Counterexample(True, first_token, searched, M, s, out, alg,
                                                  alg_tel, opt.starts, int(opt.total_latency))
    return Alg1Counterexample(False, first_token, searched)


@takes_first_token
def identical_jobs_gap(n: int, output: int = 10, prompt: int = 1, memory: int = 100,
                       cap: int = 2, *, first_token: str = "prefill") -> tuple[float, float]:
    """Average latency of Algorithm 1 and of the capped (``cap`` starts per round) variant on
    ``n`` identical jobs: the waves-versus-staggering mechanism behind Theorem 4.2's failure.

    Parameters
    ----------
    n : int
        The number of identical jobs, all arriving at round 0.
    output : int, default 10
        ``o``: each job's output length, in tokens.
    prompt : int, default 1
        ``s``: each job's prompt length, in tokens.
    memory : int, default 100
        ``M``: the KV memory, in tokens.
    cap : int, default 2
        The most starts per round of the capped variant.
    first_token : {"prefill", "decode"}, default "prefill"
        The timing convention of :mod:`queuetheory.rounds` (Jaillet et al.'s ``"ip"``,
        ``"eq1"``).

    Returns
    -------
    alg : float
        Algorithm 1's mean latency, in rounds.
    capped : float
        The capped variant's mean latency, in rounds.

    Raises
    ------
    ValueError
        If ``first_token`` is unknown, ``cap`` is invalid, or ``memory`` is below a job's peak.
    """
    a, s, o = np.zeros(n, np.int64), np.full(n, prompt), np.full(n, output)
    d = durations(o, first_token)
    alg = mcsf_schedule(a, s, o, memory, first_token=first_token)
    capped = mcsf_schedule(a, s, o, memory, max_starts=cap, first_token=first_token)
    return float((alg + d).mean()), float((capped + d).mean())

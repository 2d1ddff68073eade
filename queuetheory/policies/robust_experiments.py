"""Instances, interval predictors and experiments of Chen, Ye, Zhou (§6).

* :func:`paper_trace` turns a paper instance (prompt ``s``, outputs, intervals, all arriving at
  ``t = 0``) into an engine trace (prompt ``s + 1``, see :mod:`.robust`); :func:`run_rounds`
  runs a policy on it in the paper's round model and returns the result.
* Predictors for :class:`~queuetheory.workload.Workload` (usable by every scheduler):
  :class:`FixedInterval` (Exp. 1: every request ``[1, 1000]``), :class:`BucketInterval`
  (Exp. 2: ``[1,100], [101,200], …`` from the true length, a perfect classifier, spec §5 #29);
  Exp. 3's ``[(1−x)o, (1+x)o]`` is :class:`~queuetheory.workload.RelativeInterval`.
* :func:`lmsys_like` draws the synthetic surrogate of the 2,000 LMSYS-Chat-1M conversations
  (the data set is not shipped): log-normal lengths clipped to the reported ranges, with
  medians 11 (prompts) and 43 (outputs) as reported (§6).
* :func:`latency_experiment` runs Experiments 1–3 and returns average latencies (TEL/n).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..engine import simulate
from ..timing import UnitTime
from ..workload import RelativeInterval, Trace

__all__ = ["paper_trace", "run_rounds", "tel", "input_sequence", "corresponding_order",
           "is_delayed", "FixedInterval", "BucketInterval", "lmsys_like", "latency_experiment"]


def paper_trace(output, prompt=1, lo=None, hi=None) -> Trace:
    """The engine trace of a paper instance: ``n`` jobs at ``t = 0`` with prompt ``s`` (scalar
    or per job), true ``output`` and intervals ``[lo, hi]`` (default exact).

    Parameters
    ----------
    output : array_like of int
        The true output length ``o_i`` of each job, ``>= 1``.
    prompt : int or array_like of int, default 1
        The paper's prompt ``s`` (scalar or per job), ``>= 0``; the trace's is ``s + 1``.
    lo : int or array_like of int, optional
        The lower ends of the intervals, ``1 <= lo <= output``; ``None``: ``output``.
    hi : int or array_like of int, optional
        The upper ends, ``>= output``; ``None``: ``output``.

    Returns
    -------
    Trace
        The jobs, all arriving at 0, in class 0.

    Raises
    ------
    ValueError
        For no job, an output below 1, a negative prompt, or an interval that does not hold
        its job's output or starts below 1.
    """
    output = np.asarray(output, dtype=np.int64)
    n = output.size
    prompt = np.broadcast_to(np.asarray(prompt, dtype=np.int64), (n,))
    lo = output if lo is None else np.broadcast_to(np.asarray(lo, dtype=np.int64), (n,))
    hi = output if hi is None else np.broadcast_to(np.asarray(hi, dtype=np.int64), (n,))
    if n == 0 or output.min() < 1 or prompt.min() < 0:
        raise ValueError("output: need at least one job, outputs >= 1 and prompts >= 0")
    if np.any(lo > output) or np.any(hi < output) or lo.min() < 1:
        raise ValueError("lo, hi: need 1 <= lo <= output <= hi for every job")
    z = np.zeros(n, dtype=np.int64)
    return Trace(np.zeros(n), prompt + 1, output.copy(), z, lo.copy(), hi.copy(), z)


def run_rounds(policy, trace: Trace, memory: int, seed=0, max_iterations=None):
    """Run ``policy`` on ``trace`` in the paper's round model (``UnitTime``, emit-first).

    Parameters
    ----------
    policy : Policy
        The scheduler (:class:`~queuetheory.policies.AMin`, ...).
    trace : Trace
        The jobs (:func:`paper_trace`).
    memory : int
        The KV capacity ``M`` in tokens.
    seed : int, default 0
        Seeds the policy's randomness.
    max_iterations : int, optional
        Hard cap on the number of rounds.

    Returns
    -------
    Result
        The run (:func:`~queuetheory.engine.simulate`), one batch per round.
    """
    return simulate(trace, policy, UnitTime(), memory=memory, seed=seed, first_token="prefill",
                    max_iterations=max_iterations)


def tel(result) -> float:
    """Total end-to-end latency ``Σ_i L_i`` (eq. 2) of a finished run.

    Parameters
    ----------
    result : Result
        A run (:func:`run_rounds`).

    Returns
    -------
    float
        The sum of the requests' latencies, in rounds.

    Raises
    ------
    ValueError
        When some request did not finish.
    """
    lat = result.requests["latency"].to_numpy()
    if np.isnan(lat).any():
        raise ValueError("result: some requests did not finish; TEL is undefined")
    return float(lat.sum())


def input_sequence(result) -> list[set[int]]:
    """The input queue ``I = (I_0, …, I_T)`` of a run: ``I_t`` holds the jobs (1-based, in
    trace order) whose last start is round ``t``; a job's last start is ``finish − output``.

    Parameters
    ----------
    result : Result
        A finished run (:func:`run_rounds`).

    Returns
    -------
    list of set of int
        ``I_t`` for ``t = 0 … T``, ``T`` the last start.

    Raises
    ------
    ValueError
        When some request did not finish.
    """
    req = result.requests
    start = (req["finish"] - req["output"]).to_numpy()
    if np.isnan(start).any():
        raise ValueError("result: some requests did not finish")
    start = np.rint(start).astype(int)
    seq = [set() for _ in range(int(start.max()) + 1)]
    for job, p in enumerate(start, 1):
        seq[p].add(job)
    return seq


def _index(seq):
    return {job: t for t, jobs in enumerate(seq) for job in jobs}


def corresponding_order(seq1, seq2) -> bool:
    """Definition 8.1: ``(i − j)(i' − j') ≥ 0`` for every pair of jobs, where ``i, j`` are their
    indices in ``seq1`` and ``i', j'`` in ``seq2``.

    Parameters
    ----------
    seq1 : list of set of int
        An input sequence (:func:`input_sequence`).
    seq2 : list of set of int
        Another, of the same jobs.

    Returns
    -------
    bool
        Whether the two sequences order every pair of jobs alike (ties allowed).

    Raises
    ------
    ValueError
        When the sequences do not schedule the same jobs.
    """
    a, b = _index(seq1), _index(seq2)
    if a.keys() != b.keys():
        raise ValueError("seq1, seq2: must schedule the same jobs")
    jobs = sorted(a)
    x = np.array([a[j] for j in jobs])
    y = np.array([b[j] for j in jobs])
    return bool(np.all(np.subtract.outer(x, x) * np.subtract.outer(y, y) >= 0))


def is_delayed(seq1, seq2) -> bool:
    """Definition 8.1: ``seq2`` is delayed relative to ``seq1`` (``seq1 ≤ seq2``): every job's
    index in ``seq1`` is at most its index in ``seq2``.

    Parameters
    ----------
    seq1 : list of set of int
        An input sequence (:func:`input_sequence`).
    seq2 : list of set of int
        Another, of the same jobs.

    Returns
    -------
    bool
        Whether ``seq1 ≤ seq2``.

    Raises
    ------
    ValueError
        When the sequences do not schedule the same jobs.
    """
    a, b = _index(seq1), _index(seq2)
    if a.keys() != b.keys():
        raise ValueError("seq1, seq2: must schedule the same jobs")
    return all(a[j] <= b[j] for j in a)


@dataclass(frozen=True)
class FixedInterval:
    """Every request gets the same interval ``[lo, hi]`` (Exp. 1: ``[1, 1000]``).

    Called as ``predictor(rng, output, cls)`` it returns the ``(lo, hi)`` arrays, and raises
    ``ValueError`` when an output falls outside the interval.

    Attributes
    ----------
    lo : int
        The interval's lower end, ``>= 1``.
    hi : int
        Its upper end, ``>= lo``.

    Raises
    ------
    ValueError
        Unless ``1 <= lo <= hi``.
    """

    lo: int
    hi: int

    def __post_init__(self):
        if not 1 <= self.lo <= self.hi:
            raise ValueError(f"lo={self.lo}, hi={self.hi}: need 1 <= lo <= hi")

    def __call__(self, rng, output, cls):
        if np.any(output < self.lo) or np.any(output > self.hi):
            raise ValueError(f"FixedInterval: some outputs fall outside [{self.lo}, {self.hi}]")
        return np.full(output.size, self.lo, np.int64), np.full(output.size, self.hi, np.int64)


@dataclass(frozen=True)
class BucketInterval:
    """``[w⌊(o−1)/w⌋ + 1, w⌊(o−1)/w⌋ + w]``: the bucket of width ``w`` holding the true length
    (Exp. 2 with ``w = 100``; Alg. 5's disjoint intervals).

    Called as ``predictor(rng, output, cls)`` it returns the ``(lo, hi)`` arrays.

    Attributes
    ----------
    width : int, default 100
        The bucket width ``w``.

    Raises
    ------
    ValueError
        For a ``width`` that is not an integer ``>= 1``.
    """

    width: int = 100

    def __post_init__(self):
        if int(self.width) != self.width or self.width < 1:
            raise ValueError(f"width={self.width}: must be an integer >= 1")

    def __call__(self, rng, output, cls):
        lo = self.width * ((np.asarray(output, dtype=np.int64) - 1) // self.width) + 1
        return lo, lo + self.width - 1


def lmsys_like(n, seed=0):
    """``(prompt, output)`` of ``n`` synthetic LMSYS-Chat-1M-like conversations:
    ``round(LogNormal(ln 11, 1.6))`` clipped to [1, 468] and ``round(LogNormal(ln 43, 1.1))``
    clipped to [1, 883].

    Parameters
    ----------
    n : int
        The number of conversations.
    seed : int, default 0
        Seed of the draw.

    Returns
    -------
    prompt : numpy.ndarray
        Prompt lengths, int64.
    output : numpy.ndarray
        Output lengths, int64.
    """
    rng = np.random.default_rng(seed)
    prompt = np.clip(np.rint(rng.lognormal(np.log(11), 1.6, n)), 1, 468).astype(np.int64)
    output = np.clip(np.rint(rng.lognormal(np.log(43), 1.1, n)), 1, 883).astype(np.int64)
    return prompt, output


def _intervals(setup, output):
    if setup == "rough":
        return FixedInterval(1, 1000)(None, output, None)
    if setup == "buckets":
        return BucketInterval(100)(None, output, None)
    if isinstance(setup, float):
        return RelativeInterval(setup)(None, output, None)
    raise ValueError(f"setup={setup!r}: must be 'rough', 'buckets' or a relative width x")


def latency_experiment(policies: dict, setups=("rough", "buckets", 0.1, 0.95, 0.99), *, n=400,
                       memory=8000, seed=0, reps=1) -> pd.DataFrame:
    """Average end-to-end latency (TEL/n, in rounds) of each policy under each interval setup
    (Exps. 1–3, §6) on :func:`lmsys_like` lengths, all arriving at ``t = 0``; ``reps`` seeds of
    the policies' randomness are averaged. Rows: setups; columns: policy names.

    Parameters
    ----------
    policies : dict
        ``{name: policy}``: the schedulers to run.
    setups : sequence, default ("rough", "buckets", 0.1, 0.95, 0.99)
        The interval setups: ``"rough"`` (Exp. 1, :class:`FixedInterval` ``[1, 1000]``),
        ``"buckets"`` (Exp. 2, :class:`BucketInterval` of width 100) or a relative width
        ``x`` (Exp. 3, :class:`~queuetheory.workload.RelativeInterval`).
    n : int, default 400
        Jobs per instance.
    memory : int, default 8000
        The KV capacity ``M`` in tokens.
    seed : int, default 0
        Seed of the lengths; the ``r``-th repetition seeds the policies with ``seed + r``.
    reps : int, default 1
        Repetitions averaged.

    Returns
    -------
    pandas.DataFrame
        TEL/n per setup (rows, named by ``str(setup)``) and policy (columns).
    """
    prompt, output = lmsys_like(n, seed)
    rows = {}
    for setup in setups:
        lo, hi = _intervals(setup, output)
        trace = paper_trace(output, prompt, lo, hi)
        rows[str(setup)] = {
            name: np.mean([tel(run_rounds(pol, trace, memory, seed=seed + r)) / n
                           for r in range(reps)])
            for name, pol in policies.items()}
    return pd.DataFrame.from_dict(rows, orient="index")

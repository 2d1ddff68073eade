"""The hindsight program's inputs and its preparation: the start window from an upper bound,
symmetry between requests of one shape, the completion-count cuts (:mod:`queuetheory.bounds.
hindsight`)."""

from __future__ import annotations

import math
import numbers
import time
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from ...rounds import durations, mcsf_schedule
from .cuts import completion_caps
from .search import order_search


@dataclass(frozen=True)
class HindsightResult:
    """A hindsight schedule: total latency (TEL), start rounds, solver status, seconds.

    ``starts`` are integers for the exact solvers and the brute force; for the LP relaxation
    they are the fractional mean start rounds ``Σ_k k x_{i,k}``. ``upper`` is the TEL of the
    feasible schedule (MC-SF improved by local search) that fixed the horizon. ``proven``:
    ``total_latency`` is proven optimal (by the solver, or by meeting ``⌈LP⌉``); ``gap``:
    ``(total_latency − best bound) / total_latency`` (0 when proven; the bound is the better
    of the solver's and ``⌈LP⌉``); ``solver`` names the formulation or cvxpy solver that ran.

    Attributes
    ----------
    total_latency : float
        TEL: the schedule's total latency, in rounds.
    starts : numpy.ndarray
        Each request's start round (fractional means for the LP relaxation).
    status : str
        ``"optimal"``, ``"time_limit"`` or the LP solver's status.
    seconds : float
        The wall time taken, in seconds.
    completions : numpy.ndarray
        Each request's completion round, ``starts + d``.
    horizon : int
        The number of rounds the program spans.
    upper : float
        The TEL of the upper-bound schedule (nan for the brute force).
    solver : str
        The formulation or cvxpy solver that ran (``"dynamic-program"`` for the brute force).
    proven : bool, default False
        Whether ``total_latency`` is proven optimal.
    gap : float, default nan
        ``(total_latency − best bound) / total_latency``.
    """

    total_latency: float
    starts: np.ndarray
    status: str
    seconds: float
    completions: np.ndarray
    horizon: int
    upper: float
    solver: str
    proven: bool = False
    gap: float = float("nan")

    @property
    def mean_latency(self) -> float:
        """The mean latency per request, ``total_latency / n``, in rounds."""
        return self.total_latency / max(len(self.starts), 1)


def _integers(name, values, minimum) -> np.ndarray:
    """``values`` as an int64 vector, refusing non-numbers, non-integers and values < minimum."""
    try:
        v = np.asarray(values, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        raise ValueError(f"{name}={values!r}: must be numbers (one per request)") from None
    for rule, bad in (("finite", ~np.isfinite(v)), ("an integer", v != np.round(v)),
                      (f">= {minimum}", v < minimum)):
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(f"{name}: request {i} has {name}={float(v[i])!r}; every value must be "
                             f"{rule}")
    return v.astype(np.int64)


#: The most (round, request) cells of the time-indexed arrays an instance may need.
MAX_GRID_CELLS = 2 * 10**7


def _check_memory(memory) -> int:
    if (isinstance(memory, bool) or not isinstance(memory, numbers.Real)
            or not math.isfinite(memory) or memory != int(memory) or not 1 <= memory <= 2**53):
        raise ValueError(f"memory={memory!r}: the KV capacity M must be an integer in "
                         "[1, 2**53]")
    return int(memory)


def _check_time_limit(time_limit):
    if time_limit is None:
        return None
    if (isinstance(time_limit, bool) or not isinstance(time_limit, numbers.Real)
            or not time_limit > 0 or math.isnan(time_limit)):
        raise ValueError(f"time_limit={time_limit!r}: must be a number of seconds > 0, or None")
    return float(time_limit)


def _inputs(arrival, prompt, output, memory, first_token):
    a = _integers("arrival", arrival, 0)
    s = _integers("prompt", prompt, 0)
    o = _integers("output", output, 1)
    if not (a.size == s.size == o.size):
        raise ValueError(f"arrival, prompt, output: lengths {a.size}, {s.size}, {o.size} differ")
    memory = _check_memory(memory)
    d = durations(o, first_token)
    if np.any(s + d - 1 > memory):
        i = int(np.argmax(s + d - 1))
        raise ValueError(f"memory={memory}: below the peak {int(s[i] + d[i] - 1)} of request {i} "
                         "(prompt + rounds - 1); it could never run")
    if a.size:
        rounds = int(a.max()) + int(d.sum()) + 1        # a horizon every schedule fits in
        if rounds * a.size > MAX_GRID_CELLS:
            raise ValueError(f"arrival, output: schedules span up to {rounds:,} rounds for "
                             f"{a.size} requests, {rounds * a.size:.3g} round-request cells "
                             f"(about {rounds * a.size * 8 / 2**30:.3g} GiB per array), over "
                             f"MAX_GRID_CELLS = {MAX_GRID_CELLS:.0e}; shift the arrivals to "
                             "start near round 0 or solve the instance in parts")
    return a, s, o, d, memory


def schedule_memory(starts, prompt, d, horizon=None) -> np.ndarray:
    """KV tokens held in each round ``0 … horizon−1`` by the non-preemptive schedule.

    Parameters
    ----------
    starts : array_like of int
        ``k_i``: each request's start round.
    prompt : array_like of int
        ``s_i``: each request's prompt length, in tokens.
    d : array_like of int
        ``d_i``: the rounds each request runs.
    horizon : int, optional
        The number of rounds; default the last completion.

    Returns
    -------
    numpy.ndarray of int
        ``Σ_i (s_i + t − k_i)`` over the requests running in round ``t``, per round.
    """
    starts, s, d = (np.asarray(v, dtype=np.int64) for v in (starts, prompt, d))
    horizon = int((starts + d).max()) if horizon is None else horizon
    t = np.arange(horizon)[:, None]
    age = t - starts[None, :]
    return np.where((age >= 0) & (age < d[None, :]), s[None, :] + age, 0).sum(axis=1)


class _Grid(NamedTuple):
    """The time-indexed grid every formulation shares (see :func:`_grid`)."""

    upper: int
    hint: np.ndarray
    rows: np.ndarray
    cols: np.ndarray
    horizon: int
    mem: sp.csr_matrix
    cap: sp.csr_matrix
    cap_rhs: np.ndarray
    cap_rounds: np.ndarray


def _grid(a, s, d, memory, search_deadline=None, caps_deadline=None) -> _Grid:
    """The start window, memory rows and completion-count cuts shared by the formulations.

    Returns the heuristic's upper bound and schedule (:func:`_heuristic`, searching until
    ``search_deadline``), the (request, start round) pairs ``rows, cols`` of the
    time-indexed variables, the horizon, the sparse rows ``mem[t, v]`` = tokens variable
    ``v`` holds in round ``t``, and the cuts ``cap @ x ≤ cap_rhs`` (at most ``cap_rhs[r]``
    requests complete by round ``cap_rounds[r]``) of
    :func:`~queuetheory.bounds.hindsight.cuts.completion_caps` (computed until
    ``caps_deadline``)."""
    upper, hint = _heuristic(a, s, d, memory, search_deadline)
    last = a + upper - (d.sum() - d) - d                  # latest useful start of each request
    rows = np.concatenate([np.full(int(last[i] - a[i] + 1), i) for i in range(a.size)])
    cols = np.concatenate([np.arange(a[i], last[i] + 1) for i in range(a.size)])
    horizon = int((cols + d[rows]).max())
    # variable v occupies rounds cols[v] … cols[v] + d − 1 with s + age tokens
    nv, dv = rows.size, d[rows]
    rep = np.repeat(np.arange(nv), dv)
    age = np.arange(int(dv.sum())) - np.repeat(np.cumsum(dv) - dv, dv)
    mem = sp.csr_matrix((s[rows][rep] + age, (cols[rep] + age, rep)), shape=(horizon, nv))
    caps = completion_caps(s, d, memory, deadline=caps_deadline)
    done = [np.flatnonzero(cols + d[rows] <= t) for t, _ in caps]   # complete by round t
    cap = sp.csr_matrix((np.ones(sum(v.size for v in done)),
                         (np.repeat(np.arange(len(caps)), [v.size for v in done]),
                          np.concatenate(done + [np.zeros(0, np.int64)]))),
                        shape=(len(caps), nv))
    cap_rhs = np.array([m for _, m in caps], dtype=float)
    cap_rounds = np.array([t for t, _ in caps], dtype=np.int64)
    return _Grid(upper, hint, rows, cols, horizon, mem, cap, cap_rhs, cap_rounds)


def _heuristic(a, s, d, memory, deadline=None):
    """TEL and start rounds of the best feasible schedule found quickly: the best of a few
    MC-SF variants (capped admissions stagger starts) improved by local search over start
    orders (:func:`~queuetheory.bounds.hindsight.search.order_search`, stopped at
    ``deadline``), each shape class in the order :func:`_same_shape` asks for."""
    # ``d`` is passed as the output under "ip", where durations equal outputs
    runs = [mcsf_schedule(a, s, d, memory, max_starts=q, order=order)
            for q in (None, 1, 2, 3) for order in ("output", "arrival")]
    best = runs[int(np.argmin([k.sum() for k in runs]))]
    best = _canonical(order_search(a, s, d, memory, best, deadline=deadline), a, s, d)
    return int((best + d - a).sum()), best


def _shape_classes(a, s, d) -> list:
    """Requests with the same prompt and rounds, each class in order of (arrival, index)."""
    classes = {}
    for i in np.lexsort((np.arange(a.size), a)):
        classes.setdefault((int(s[i]), int(d[i])), []).append(int(i))
    return [c for c in classes.values() if len(c) > 1]


def _same_shape(a, s, d) -> list:
    """Pairs ``(i, j)`` of requests with the same prompt and rounds, ``j`` next after ``i`` in
    the order of (arrival, index): some optimal schedule starts ``i`` no later than ``j``.

    Proof: deal a class's start rounds to its members in increasing order, sorted by
    (arrival, index). The tokens held in every round are unchanged (the same profile at the
    same start rounds), so is TEL (``Σ k − Σ a`` over the class), and no start precedes its
    arrival: the ``m``-th smallest start round has ``m`` members of the class started by it,
    hence arrived by it, so the ``m``-th smallest arrival is no later.
    """
    return [(c[m], c[m + 1]) for c in _shape_classes(a, s, d) for m in range(len(c) - 1)]


def _canonical(starts, a, s, d) -> np.ndarray:
    """``starts`` with each shape class's start rounds dealt as in :func:`_same_shape`."""
    starts = starts.copy()
    for c in _shape_classes(a, s, d):
        starts[c] = np.sort(starts[c])
    return starts


def _remaining(deadline):
    """Seconds to ``deadline`` (a ``time.perf_counter`` value, or None for no limit)."""
    return None if deadline is None else max(deadline - time.perf_counter(), 0.01)


def _restrict(grid, keep):
    """``grid`` with only the time-indexed variables ``keep`` marks."""
    return grid._replace(rows=grid.rows[keep], cols=grid.cols[keep],
                         mem=grid.mem[:, keep].tocsr(), cap=grid.cap[:, keep].tocsr())


def _better(starts, grid, a, d):
    """The solver's schedule, or MC-SF's where the solver found none or a worse one in time."""
    upper, hint = grid.upper, grid.hint
    if starts is None or (starts + d - a).sum() > upper:
        starts = hint.astype(np.int64)
    return starts, float((starts + d - a).sum())


def _gap(tel, bound, d) -> float:
    """Relative gap to ``bound`` (the solver's or ⌈LP⌉), or to ``Σ d_i`` (no request finishes
    sooner than its rounds) where that is better."""
    bound = max(bound, float(d.sum())) if np.isfinite(bound) else float(d.sum())
    return max(tel - bound, 0.0) / max(tel, 1.0)

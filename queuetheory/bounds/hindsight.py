"""The hindsight-optimal schedule of Jaillet et al.'s KV-cache model (App. B.1).

Every request ``i`` (arrival ``a_i``, prompt ``s_i``, ``d_i`` rounds, see
:func:`queuetheory.rounds.durations` for the two timing conventions) starts once,
in a round ``k ≥ a_i``, and runs without pausing; in round ``t`` it holds ``s_i + t − k``
tokens. With ``x_{i,k} = 1`` iff ``i`` starts in round ``k`` the integer program is

    min  Σ_i Σ_k (k + d_i − a_i) x_{i,k}                         (total latency, TEL)
    s.t. Σ_k x_{i,k} = 1                                          ∀ i           (B.1 (1))
         Σ_i Σ_{k ≤ t < k + d_i} (s_i + t − k) x_{i,k} ≤ M          ∀ t           (B.1 (2)–(3))
         x ∈ {0, 1}

— the paper's bilinear constraint (3) written linearly, and its objective ``Σ (p_i + o_i)``
less the constant ``Σ a_i``. Every formulation starts from the same preparation:

1. an upper bound ``UB``: the best MC-SF variant improved by local search over start orders
   (:mod:`queuetheory.bounds.hindsight_search`); start rounds are limited to a window that
   provably contains every schedule at least that good (``c_i ≤ a_i + UB − Σ_{j≠i} d_j``);
2. requests of the same prompt and rounds start in the order of their arrivals (symmetry
   breaking, proved in :func:`_same_shape`);
3. completion-count cuts (:mod:`queuetheory.bounds.hindsight_cuts`): at most ``m`` requests
   complete by round ``t``, from exact makespans of the shortest requests;
4. reduced-cost fixing: the LP relaxation (value ``LP``, reduced costs ``r_{i,k}``) shows
   that every schedule with ``x_{i,k} = 1`` costs at least ``LP + r_{i,k}``, so a start with
   ``LP + r_{i,k}`` above ``UB`` is dropped (no optimal schedule uses it); ``⌈LP⌉`` bounds the
   objective, and a schedule meeting it is optimal.

The LP relaxation (with the cuts) is a lower bound on the optimum
(:func:`hindsight_lower_bound`); :func:`hindsight_brute_force` solves tiny instances by
dynamic programming over rounds, independently of the programs. Four exact formulations
solve the prepared program (``solver=``):

* ``"bnb"`` — branch and bound over rounds
  (:func:`~queuetheory.bounds.hindsight_bnb.branch_and_bound`): each round starts a set of
  requests that fits; nodes are pruned by dominance (same requests left, less memory held,
  no more cost) and by a Lagrangian bound that keeps a chain of pairwise conflicting
  requests in order (:mod:`queuetheory.bounds.hindsight_chain`), priced with multipliers
  raised from the LP's duals by subgradient steps, so at the root it is at least the LP
  bound, and the reported bound is the better of the two;
* ``"milp"`` — the time-indexed MILP above, HiGHS through cvxpy (or any cvxpy MILP solver
  named directly, e.g. ``"SCIPY"``);
* ``"cpsat"`` — OR-Tools CP-SAT on integer start rounds ``k_i``. The growing profile
  ``s_i + t − k_i`` over rounds ``k_i … k_i + d_i − 1`` is split exactly into ``d_i`` fixed
  intervals sharing the start variable: height ``s_i`` on ``[k_i, k_i + d_i)`` and height 1 on
  ``[k_i + j, k_i + d_i)`` for ``j = 1 … d_i − 1`` (at round ``t`` the covering ones sum to
  ``s_i + t − k_i``), all in one cumulative of capacity ``M``. The time-indexed rows are added
  as a redundant linear relaxation (``k_i = Σ_k k x_{i,k}``);
* ``"cpsat-ti"`` — CP-SAT on the time-indexed Booleans ``x_{i,k}`` themselves (one
  ``exactly_one`` per request, one linear row per round and per cut).

The CP-SAT models take the ``UB`` schedule as their hint, the branch and bound starts from
it. All four honour ``time_limit``
(the solver's own limit, less the preparation) and report whether the optimum is proven and
the relative gap ``(TEL − bound) / TEL``, the bound being the better of the solver's and
``⌈LP⌉``.
"""

from __future__ import annotations

import math
import numbers
import time
import warnings
from dataclasses import dataclass
from functools import cache
from itertools import combinations
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from .._quiet import silence_highs_banner
from ..rounds import durations, mcsf_schedule
from .hindsight_bnb import branch_and_bound
from .hindsight_chain import chain_multipliers
from .hindsight_cuts import completion_caps
from .hindsight_search import order_search

__all__ = ["HindsightResult", "hindsight_optimum", "hindsight_lower_bound",
           "hindsight_brute_force", "schedule_memory"]

_MILP_SOLVERS = ("HIGHS", "SCIPY")
SOLVERS = ("bnb", "cpsat-ti", "cpsat", "milp")
"""The exact formulations of :func:`hindsight_optimum`; a cvxpy MILP solver name also works."""
DEFAULT_SOLVER = "bnb"
_OWN_SOLVERS = ("bnb", "cpsat", "cpsat-ti")
"""The formulations solved here rather than through cvxpy (no LP relaxation of their own)."""


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


def _inputs(arrival, prompt, output, memory, convention):
    a = _integers("arrival", arrival, 0)
    s = _integers("prompt", prompt, 0)
    o = _integers("output", output, 1)
    if not (a.size == s.size == o.size):
        raise ValueError(f"arrival, prompt, output: lengths {a.size}, {s.size}, {o.size} differ")
    memory = _check_memory(memory)
    d = durations(o, convention)
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
    :func:`~queuetheory.bounds.hindsight_cuts.completion_caps` (computed until
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
    orders (:func:`~queuetheory.bounds.hindsight_search.order_search`, stopped at
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


def _program(a, s, d, memory, grid, relax: bool, floor=None):
    """The B.1 program as cvxpy data on ``grid`` (TEL ≥ ``floor`` if given); returns
    (problem, x)."""
    import cvxpy as cp  # 0.5 s to import: only when a program is built

    silence_highs_banner()  # the programs solve with HiGHS; its banner is C++ output
    rows, cols, mem, cap, cap_rhs = grid.rows, grid.cols, grid.mem, grid.cap, grid.cap_rhs
    nv = rows.size
    x = cp.Variable(nv, boolean=not relax, nonneg=relax)
    assign = sp.csr_matrix((np.ones(nv), (rows, np.arange(nv))), shape=(a.size, nv))
    cost = (cols + d[rows] - a[rows]).astype(float)
    cons = [assign @ x == 1, mem @ x <= memory, cap @ x <= cap_rhs]
    if floor is not None:
        cons.append(cost @ x >= floor)
    if relax:
        cons.append(x <= 1)
    else:
        for i, j in _same_shape(a, s, d):
            w = np.where(rows == i, cols, 0) - np.where(rows == j, cols, 0)
            cons.append(w.astype(float) @ x <= 0)
    return cp.Problem(cp.Minimize(cost @ x), cons), x


def _pick_solver(solver, mixed_integer: bool) -> str:
    import cvxpy as cp

    installed = cp.installed_solvers()
    if solver is not None and solver != "milp":
        if solver not in installed:
            raise ValueError(f"solver={solver!r}: must be one of {SOLVERS} or an installed "
                             f"cvxpy solver {installed}")
        return solver
    for name in (_MILP_SOLVERS if mixed_integer else ("HIGHS", "CLARABEL", "SCIPY")):
        if name in installed:
            return name
    raise RuntimeError(f"no MILP solver among {_MILP_SOLVERS} is installed for cvxpy")


def _remaining(deadline):
    """Seconds to ``deadline`` (a ``time.perf_counter`` value, or None for no limit)."""
    return None if deadline is None else max(deadline - time.perf_counter(), 0.01)


def _restrict(grid, keep):
    """``grid`` with only the time-indexed variables ``keep`` marks."""
    return grid._replace(rows=grid.rows[keep], cols=grid.cols[keep],
                         mem=grid.mem[:, keep].tocsr(), cap=grid.cap[:, keep].tocsr())


def _solve_cvxpy(a, s, d, memory, grid, name, relax, deadline, lp=None):
    floor = None if relax else math.ceil(lp - 1e-6)
    prob, x = _program(a, s, d, memory, grid, relax, floor)
    rows, cols = grid.rows, grid.cols
    limit = _remaining(deadline)
    opts = {}
    if limit is not None:
        opts = ({"time_limit": limit} if name == "HIGHS"
                else {"scipy_options": {"time_limit": limit}} if name == "SCIPY" else {})
    with warnings.catch_warnings():
        # HiGHS stopped by its time limit hands back its incumbent as "optimal_inaccurate";
        # the result says so (``proven``, ``gap``, status "time_limit") instead
        warnings.filterwarnings("ignore", "Solution may be inaccurate", UserWarning)
        prob.solve(solver=name, **opts)
    if relax:
        if x.value is None:
            raise RuntimeError(f"hindsight LP: solver {name} returned status {prob.status} "
                               f"(time left: {limit} s)")
        xv = np.clip(x.value, 0, 1)
        starts = np.bincount(rows, weights=xv * cols, minlength=a.size)
        return float(prob.value), starts, prob.status, prob.status == "optimal", prob.value
    chosen = np.zeros(rows.size, bool) if x.value is None else x.value > 0.5
    starts = None
    if np.bincount(rows[chosen], minlength=a.size).tolist() == [1] * a.size:
        starts = np.zeros(a.size, dtype=np.int64)
        starts[rows[chosen]] = cols[chosen]
    starts, tel = _better(starts, grid, a, d)
    proven = prob.status == "optimal"
    status = "time_limit" if limit is not None and not proven else prob.status
    info = prob.solver_stats.extra_stats
    bound = getattr(info, "mip_dual_bound", float("nan"))    # the cost is TEL itself
    return tel, starts, status, proven, tel if proven else bound


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


def _add_rows(model, x, rows, rhs):
    """The rows ``Σ_v rows[r, v] x_v ≤ rhs[r]`` (``rows`` in CSR) on CP-SAT Booleans ``x``,
    leaving out those that cannot be violated."""
    for r in range(rows.shape[0]):
        lo, hi = rows.indptr[r], rows.indptr[r + 1]
        if rows.data[lo:hi].sum() > rhs[r]:
            model.add(sum(int(w) * x[v] for w, v in zip(rows.data[lo:hi], rows.indices[lo:hi],
                                                        strict=True)) <= int(rhs[r]))


def _run_cpsat(model, workers, deadline):
    """Solve ``model`` with ``workers`` threads within what is left before ``deadline``;
    return the solver (for values and bounds) and its status code."""
    from ortools.sat.python import cp_model

    solver = cp_model.CpSolver()
    solver.parameters.num_workers = workers
    limit = _remaining(deadline)
    if limit is not None:
        solver.parameters.max_time_in_seconds = limit
    return solver, solver.solve(model)


def _solve_cpsat(a, s, d, memory, grid, lp, deadline, workers):
    from ortools.sat.python import cp_model

    hint, rows, cols, horizon = grid.hint, grid.rows, grid.cols, grid.horizon
    mem, cap, cap_rhs = grid.mem, grid.cap, grid.cap_rhs
    n = a.size
    model = cp_model.CpModel()
    k = [model.new_int_var_from_domain(cp_model.Domain.from_values(cols[rows == i].tolist()),
                                       f"k{i}") for i in range(n)]
    intervals, heights = [], []
    for i in range(n):                    # s_i + t − k_i as d_i stacked fixed intervals
        for j in range(int(d[i])):
            height = int(s[i]) if j == 0 else 1
            if height:
                intervals.append(model.new_fixed_size_interval_var(k[i] + j, int(d[i]) - j,
                                                                   f"m{i}_{j}"))
                heights.append(height)
    model.add_cumulative(intervals, heights, memory)
    x = [model.new_bool_var(f"x{v}") for v in range(rows.size)]   # redundant time index
    for i in range(n):
        mine = np.flatnonzero(rows == i)
        model.add_exactly_one(x[v] for v in mine)
        model.add(k[i] == sum(int(cols[v]) * x[v] for v in mine))
    _add_rows(model, x, mem, np.full(horizon, memory))
    _add_rows(model, x, cap, cap_rhs)
    for i, j in _same_shape(a, s, d):
        model.add(k[i] <= k[j])
    for i in range(n):
        model.add_hint(k[i], int(hint[i]))
    offset = int((d - a).sum())
    model.add(sum(k) >= math.ceil(lp - 1e-6) - offset)
    model.minimize(sum(k))
    solver, code = _run_cpsat(model, workers, deadline)
    starts = (np.array([solver.value(v) for v in k], dtype=np.int64)
              if code in (cp_model.OPTIMAL, cp_model.FEASIBLE) else None)
    starts, tel = _better(starts, grid, a, d)
    proven = code == cp_model.OPTIMAL
    bound = solver.best_objective_bound + offset if code != cp_model.UNKNOWN else lp
    return tel, starts, "optimal" if proven else "time_limit", proven, tel if proven else bound


def _reduced_cost_fixing(a, s, d, memory, grid):
    """LP bound, the time-indexed variables that may be 1 in a schedule with TEL ≤ the
    heuristic's, and the LP's duals of the memory rows and of the cuts (both ≥ 0).

    With the LP's duals, any feasible ``x`` costs at least ``LP + r_v`` when ``x_v = 1``
    (``r_v`` the reduced cost of ``x_v``); a variable is kept unless that exceeds the upper
    bound (with a margin of half a round: keeping one too many is always safe)."""
    prob, _ = _program(a, s, d, memory, grid, relax=True)
    prob.solve(solver=_pick_solver(None, False))
    assign, mem, cap = prob.constraints[:3]
    if prob.status != "optimal" or assign.dual_value is None:
        return (float(d.sum()), np.ones(grid.rows.size, bool), np.zeros(grid.horizon),
                np.zeros(grid.cap_rhs.size))
    rows, cols = grid.rows, grid.cols
    lam = np.maximum(np.asarray(mem.dual_value, dtype=float), 0.0)
    mu = np.maximum(np.atleast_1d(np.asarray(cap.dual_value, dtype=float)), 0.0)
    cost = (cols + d[rows] - a[rows]).astype(float)
    reduced = cost + assign.dual_value[rows] + grid.mem.T @ lam + grid.cap.T @ mu
    return float(prob.value), prob.value + reduced <= grid.upper + 0.5, lam, mu


def _solve_cpsat_ti(a, s, d, memory, grid, lp, deadline, workers):
    from ortools.sat.python import cp_model

    hint, rows, cols, horizon = grid.hint, grid.rows, grid.cols, grid.horizon
    mem, cap, cap_rhs = grid.mem, grid.cap, grid.cap_rhs
    model = cp_model.CpModel()
    x = [model.new_bool_var(f"x{v}") for v in range(rows.size)]
    for i in range(a.size):
        mine = np.flatnonzero(rows == i)
        model.add_exactly_one(x[v] for v in mine)
        for v in mine:
            model.add_hint(x[v], int(cols[v] == hint[i]))
    _add_rows(model, x, mem, np.full(horizon, memory))
    _add_rows(model, x, cap, cap_rhs)
    start = [sum(int(cols[v]) * x[v] for v in np.flatnonzero(rows == i)) for i in range(a.size)]
    for i, j in _same_shape(a, s, d):
        model.add(start[i] <= start[j])
    tel = sum(int(c) * x[v] for v, c in enumerate(cols + d[rows] - a[rows]))
    model.add(tel >= math.ceil(lp - 1e-6))
    model.minimize(tel)
    solver, code = _run_cpsat(model, workers, deadline)
    starts = None
    if code in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        chosen = np.array([solver.boolean_value(v) for v in x])
        starts = np.zeros(a.size, dtype=np.int64)
        starts[rows[chosen]] = cols[chosen]
    starts, tel = _better(starts, grid, a, d)
    proven = code == cp_model.OPTIMAL
    bound = solver.best_objective_bound if code != cp_model.UNKNOWN else lp
    return tel, starts, "optimal" if proven else "time_limit", proven, tel if proven else bound


SEARCH_SHARE, CAPS_SHARE, CHAIN_SHARE = 0.1, 0.15, 0.1
"""Shares of ``time_limit`` for the local search (:func:`_heuristic`), the
completion-count cuts (:func:`~queuetheory.bounds.hindsight_cuts.completion_caps`) and the
chain bound's subgradient steps
(:func:`~queuetheory.bounds.hindsight_chain.chain_multipliers`, ``"bnb"`` only)."""
HIGHS_MARGIN = 0.02
"""The share of ``time_limit`` (at most a second) the MILP solver is given less than what
is left: HiGHS checks its limit between phases and stops a little after it."""


def _solve(arrival, prompt, output, memory, convention, solver, relax, time_limit,
           workers=1):
    start = time.perf_counter()
    a, s, o, d, memory = _inputs(arrival, prompt, output, memory, convention)
    time_limit = _check_time_limit(time_limit)
    if isinstance(workers, bool) or not isinstance(workers, numbers.Integral) or workers < 1:
        raise ValueError(f"workers={workers!r}: must be an integer >= 1")
    own = solver in _OWN_SOLVERS and not relax
    name = solver if own else _pick_solver(solver, not relax)
    if a.size == 0:
        return HindsightResult(0.0, a, "optimal", 0.0, a, 0, 0.0, name, True, 0.0)
    deadline = None if time_limit is None else start + time_limit

    def share(fraction):
        return None if time_limit is None else start + fraction * time_limit

    grid = _grid(a, s, d, memory, share(SEARCH_SHARE), share(SEARCH_SHARE + CAPS_SHARE))
    if relax:
        tel, starts, status, _, _ = _solve_cvxpy(a, s, d, memory, grid, name, True, deadline)
        return HindsightResult(tel, starts, status, time.perf_counter() - start, starts + d,
                               grid.horizon, float(grid.upper), name, status == "optimal", 0.0)
    lp, keep, lam, mu = _reduced_cost_fixing(a, s, d, memory, grid)
    grid = _restrict(grid, keep)
    if name == "bnb":
        chain = chain_multipliers(a, s, d, memory, grid, lam, mu,
                                  share(SEARCH_SHARE + CAPS_SHARE + CHAIN_SHARE))
        if chain is not None:     # its first step is at the LP's duals: no weaker
            lam, mu, lp = chain.lam, chain.mu, max(lp, chain.bound)
        tel, starts, proven = branch_and_bound(
            a, s, d, memory, grid, lam, mu, deadline,
            None if chain is None else (chain.members, chain.later))
        out = (float(tel), starts, "optimal" if proven else "time_limit", proven,
               float(tel) if proven else lp)
    elif name == "cpsat":
        out = _solve_cpsat(a, s, d, memory, grid, lp, deadline, int(workers))
    elif name == "cpsat-ti":
        out = _solve_cpsat_ti(a, s, d, memory, grid, lp, deadline, int(workers))
    else:
        # HiGHS checks its limit between phases: it gets the limit less a margin
        if deadline is not None:
            deadline -= min(1.0, HIGHS_MARGIN * time_limit)
        out = _solve_cvxpy(a, s, d, memory, grid, name, False, deadline, lp)
    tel, starts, status, proven, bound = out
    # TEL is an integer; the LP bound holds whatever the solver reached, and a schedule
    # meeting the bound is optimal
    bound = math.ceil(max(bound, lp) - 1e-6) if np.isfinite(bound) else math.ceil(lp - 1e-6)
    if tel <= bound:
        proven, status = True, "optimal"
    gap = 0.0 if proven else _gap(tel, bound, d)
    return HindsightResult(tel, starts, status, time.perf_counter() - start, starts + d,
                           grid.horizon, float(grid.upper), name, proven, gap)


def hindsight_optimum(arrival, prompt, output, memory, *, convention="ip", solver=None,
                      time_limit=None, workers=1) -> HindsightResult:
    """Optimal total latency with all arrivals and lengths known in advance (App. B.1).

    Parameters
    ----------
    arrival : array_like of int
        ``a_i``: each request's arrival round, ``>= 0``.
    prompt : array_like of int
        ``s_i``: each request's prompt length, in tokens, ``>= 0``.
    output : array_like of int
        ``o_i``: each request's output length, in tokens, ``>= 1``.
    memory : int
        The KV capacity ``M``, in tokens (an integer in ``[1, 2**53]``).
    convention : {"ip", "eq1"}, default "ip"
        ``"ip"`` (``d_i = o_i``, the IP's own) or ``"eq1"`` (``d_i = o_i + 1``).
    solver : str, optional
        ``"bnb"`` (branch and bound over rounds with dominance and a Lagrangian
        bound that keeps a chain of pairwise conflicting requests in order), ``"milp"``
        (time-indexed MILP, HiGHS through cvxpy), ``"cpsat"`` (OR-Tools CP-SAT, cumulative
        profile), ``"cpsat-ti"`` (CP-SAT on the time-indexed
        Booleans after LP reduced-cost fixing) or a cvxpy MILP solver name; default
        :data:`DEFAULT_SOLVER`, chosen by ``benchmarks/jaillet2025_hindsight.py``.
    time_limit : float, optional
        Seconds, preparation included (the local search takes at most
        :data:`SEARCH_SHARE` of it, the cuts :data:`CAPS_SHARE` more, and for ``"bnb"`` the
        chain bound's subgradient steps :data:`CHAIN_SHARE` more); on a time-out
        ``proven`` is False, the schedule is the better of the solver's best and the
        upper-bound schedule (both feasible) and ``gap`` bounds its distance to the optimum.
        HiGHS checks its limit between phases: it is given :data:`HIGHS_MARGIN` of the
        limit (at most a second) less than what is left, and may still overrun by a
        fraction of a second, or by seconds in a process starved of CPU
        (``benchmarks/README.md``). CP-SAT and the branch and bound keep to their limit.
        The LP relaxation of the fixing step runs unlimited (HiGHS: about a second at
        n = 40). None: no limit.
    workers : int, default 1
        CP-SAT's ``num_workers`` (the MILP uses HiGHS's default; the branch and bound
        one thread).

    Returns
    -------
    HindsightResult
        The schedule's total latency (TEL, in rounds), start rounds, whether it is proven
        optimal and the gap to the best bound.

    Raises
    ------
    ValueError
        If a length or arrival is not an integer in range, the arrays differ in length,
        ``memory`` is malformed or below a request's peak ``s_i + d_i − 1``, the instance
        exceeds ``MAX_GRID_CELLS``, ``convention``, ``solver``, ``time_limit`` or
        ``workers`` is invalid.
    RuntimeError
        If ``solver="milp"`` (or None for a cvxpy formulation) and no MILP solver is
        installed for cvxpy.
    """
    return _solve(arrival, prompt, output, memory, convention,
                  DEFAULT_SOLVER if solver is None else solver, False, time_limit, workers)


def hindsight_lower_bound(arrival, prompt, output, memory, *, convention="ip", solver=None,
                          time_limit=None) -> HindsightResult:
    """The LP relaxation of :func:`hindsight_optimum`'s time-indexed program, with its
    completion-count cuts: ``total_latency`` ≤ the optimum.

    Parameters
    ----------
    arrival : array_like of int
        ``a_i``: each request's arrival round, ``>= 0``.
    prompt : array_like of int
        ``s_i``: each request's prompt length, in tokens, ``>= 0``.
    output : array_like of int
        ``o_i``: each request's output length, in tokens, ``>= 1``.
    memory : int
        The KV capacity ``M``, in tokens.
    convention : {"ip", "eq1"}, default "ip"
        As in :func:`hindsight_optimum`.
    solver : str, optional
        A cvxpy LP solver name; default the first of HiGHS, Clarabel and SciPy installed.
    time_limit : float, optional
        Seconds for the preparation and the LP; None: no limit.

    Returns
    -------
    HindsightResult
        The LP bound as ``total_latency`` (in rounds) and the fractional mean start rounds.

    Raises
    ------
    ValueError
        If the instance is malformed (as in :func:`hindsight_optimum`), or ``solver`` is one of
        the exact formulations or not an installed cvxpy solver.
    RuntimeError
        If no LP solver is installed for cvxpy, or the LP solver returns no solution.
    """
    if solver in _OWN_SOLVERS:
        raise ValueError(f"solver={solver!r}: the LP relaxation needs an LP solver (a cvxpy name)")
    return _solve(arrival, prompt, output, memory, convention, solver, True, time_limit)


def hindsight_brute_force(arrival, prompt, output, memory, *, convention="ip",
                          max_requests: int = 7) -> HindsightResult:
    """Exact optimum by dynamic programming over rounds, for tiny instances only.

    State: the round (while arrivals are pending), the waiting requests and the age of each
    running one. Each round any subset of the arrived waiting requests may start, provided
    memory holds in that round; every round costs the number of arrived unfinished
    requests. Idling with nothing running after the last arrival is never optimal (shifting
    the rest of the schedule earlier is feasible and cheaper), which keeps the state space
    finite.

    Parameters
    ----------
    arrival : array_like of int
        ``a_i``: each request's arrival round, ``>= 0``.
    prompt : array_like of int
        ``s_i``: each request's prompt length, in tokens, ``>= 0``.
    output : array_like of int
        ``o_i``: each request's output length, in tokens, ``>= 1``.
    memory : int
        The KV capacity ``M``, in tokens.
    convention : {"ip", "eq1"}, default "ip"
        As in :func:`hindsight_optimum`.
    max_requests : int, default 7
        The most requests accepted.

    Returns
    -------
    HindsightResult
        The optimal TEL (in rounds) and start rounds, ``solver="dynamic-program"``.

    Raises
    ------
    ValueError
        If the instance is malformed (as in :func:`hindsight_optimum`) or has more than
        ``max_requests`` requests.
    RuntimeError
        If no feasible schedule is found (a bug: every valid instance has one).
    """
    a, s, o, d, memory = _inputs(arrival, prompt, output, memory, convention)
    n = a.size
    if n > max_requests:
        raise ValueError(f"arrival: {n} requests; the brute force takes at most "
                         f"max_requests={max_requests}")
    t0 = time.perf_counter()
    last_arrival = int(a.max()) if n else 0
    inf = float("inf")

    @cache
    def best(t, waiting, running):
        # waiting: frozenset of ids; running: tuple of (id, age) sorted; returns (cost, plan)
        if not waiting and not running:
            return 0.0, ()
        arrived = [i for i in waiting if a[i] <= t]
        base = sum(s[i] + age for i, age in running)
        present = len(running) + len(arrived)
        options = []
        for k in range(len(arrived) + 1):
            for group in combinations(sorted(arrived), k):
                if base + sum(int(s[i]) for i in group) > memory:
                    continue
                if not group and not running and t >= last_arrival:
                    continue
                nxt = tuple(sorted([(i, age + 1) for i, age in running if age + 1 < d[i]]
                                   + [(i, 1) for i in group if d[i] > 1]))
                cost, plan = best(min(t + 1, last_arrival), waiting - frozenset(group), nxt)
                options.append((cost, group, plan))
        if not options:
            return inf, ()
        cost, group, plan = min(options, key=lambda c: c[0])
        return present + cost, ((group,) + plan)

    cost, plan = best(int(a.min()) if n else 0, frozenset(range(n)), ())
    if cost == inf:
        raise RuntimeError("hindsight_brute_force: no feasible schedule (should not happen)")
    starts = _replay(plan, a, int(a.min()) if n else 0)
    return HindsightResult(float(cost), starts, "optimal", time.perf_counter() - t0,
                           starts + d, int((starts + d).max()) if n else 0, float("nan"),
                           "dynamic-program")


def _replay(plan, a, t0):
    """Start rounds from the DP's per-round start groups."""
    starts = np.full(a.size, -1, dtype=np.int64)
    for t, group in enumerate(plan, start=t0):
        for i in group:
            starts[i] = t
    return starts

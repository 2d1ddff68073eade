"""The time-indexed program and its LP relaxation through cvxpy (HiGHS by default), with
reduced-cost fixing (:mod:`queuetheory.bounds.hindsight`)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import scipy.sparse as sp

from ..._quiet import silence_highs_banner
from .model import _better, _remaining, _same_shape

_MILP_SOLVERS = ("HIGHS", "SCIPY")
SOLVERS = ("bnb", "cpsat-ti", "cpsat", "milp")
"""The exact formulations of :func:`~queuetheory.bounds.hindsight.hindsight_optimum`; a cvxpy
MILP solver name also works."""


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

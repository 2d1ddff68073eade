"""The two CP-SAT models of the hindsight program, on start rounds (a cumulative) and on the
time-indexed Booleans (:mod:`queuetheory.bounds.hindsight`)."""

from __future__ import annotations

import math

import numpy as np

from .model import _better, _remaining, _same_shape


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

"""Completion-count cuts for the hindsight program of Jaillet et al. (App. B.1).

The time-indexed LP relaxation lets memory freed by a completion be refilled at once by
fractions of requests started in different rounds, while an integer schedule refills it
only as new requests grow: the LP bound sits 8–20 % below the optimum. The cuts below bound
the number of requests that can have completed by each round, from makespans computed
exactly on a relaxed instance.

**Validity.** Let ``S`` be the requests a feasible schedule completes by round ``t``
(``k_i + d_i ≤ t``). Giving every request arrival 0 and the smallest prompt ``s_min`` keeps
the schedule feasible (each profile ``s + age`` shrinks). Then the ``|S|`` requests with the
smallest ``d`` overall, relaxed the same way, also complete by ``t``: put the ``r``-th
smallest of them in the slot of the ``r``-th smallest ``d`` in ``S`` (same start, a profile
no higher in every round and no longer). Hence ``|S| ≤ N(t) = max{m : T_m ≤ t}``, with
``T_m`` the least makespan of the ``m`` smallest relaxed requests, nondecreasing in ``m``
(dropping the longest of ``m + 1`` requests leaves the ``m`` smallest, dominated). Any lower
bound ``L_m ≤ T_m`` keeps the cut valid: at most ``m − 1`` requests complete by round
``L_m − 1``. With equal prompts and arrivals (the semi-online model) nothing is relaxed.

``T_m`` is found by CP-SAT feasibility checks (the ramp as ``d`` stacked intervals in one
cumulative, as in :func:`queuetheory.bounds.hindsight_optimum`'s ``"cpsat"``) from the
previous makespan upwards; a check that runs out of time stops the computation, and the
larger ``m`` keep the easy bounds (the longest request; the memory area over ``M``).
"""

from __future__ import annotations

import math
import time

import numpy as np

__all__ = ["completion_caps"]


def _fits_by(prompt, d, memory, horizon, seconds, work):
    """CP-SAT: do requests of prompt ``prompt`` and rounds ``d`` (sorted), all arriving at
    0, complete by ``horizon``? True, False, or None when the check ran out of time."""
    from ortools.sat.python import cp_model

    model = cp_model.CpModel()
    k = [model.new_int_var(0, horizon - int(di), f"k{i}") for i, di in enumerate(d)]
    intervals, heights = [], []
    for i, di in enumerate(d):
        for j in range(int(di)):
            if j or prompt:
                intervals.append(model.new_fixed_size_interval_var(k[i] + j, int(di) - j, ""))
                heights.append(int(prompt) if j == 0 else 1)
    model.add_cumulative(intervals, heights, memory)
    for i in range(len(d) - 1):          # equal requests in index order
        if d[i] == d[i + 1]:
            model.add(k[i] <= k[i + 1])
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.max_time_in_seconds = max(seconds, 0.01)
    solver.parameters.max_deterministic_time = work
    code = solver.solve(model)
    if code in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return True
    return False if code == cp_model.INFEASIBLE else None


def completion_caps(prompt, d, memory, *, deadline=None, work=0.5) -> list:
    """Pairs ``(t, m)``: in every feasible schedule at most ``m`` requests complete by round
    ``t`` (``k_i + d_i ≤ t``), one pair for each ``m < n`` where that says more than
    ``k_i + d_i ≥ d_i`` does (see the module for the proof).

    ``deadline`` (a ``time.perf_counter`` value) and ``work`` (CP-SAT's deterministic
    seconds per check) bound the effort; the pairs stay valid when either stops it early.
    """
    s_min = int(np.min(prompt))
    d = np.sort(np.asarray(d, dtype=np.int64))
    lower, exact = [], True                   # lower[m - 1] ≤ T_m
    for m in range(1, d.size + 1):
        sub = d[:m]
        area = int(s_min * sub.sum() + (sub * (sub - 1) // 2).sum())
        t = max(lower[-1] if lower else 0, int(sub[-1]), math.ceil(area / memory))
        while exact:
            left = None if deadline is None else deadline - time.perf_counter()
            if left is not None and left <= 0:
                exact = False
                break
            fits = _fits_by(s_min, sub, memory, t, 60.0 if left is None else left, work)
            if fits:
                break
            if fits is None:
                exact = False
            else:
                t += 1
        lower.append(t)
    # at most m requests complete by round lower[m] − 1; d_(m+1) − 1 already says as much
    return [(t - 1, m) for m, t in enumerate(lower[1:], start=1) if t > d[m]]

"""The hindsight-optimal schedule of Jaillet et al.'s KV-cache model (App. B.1).

Every request ``i`` (arrival ``a_i``, prompt ``s_i``, ``d_i`` rounds, see
:func:`queuetheory.policies.kvcache.durations` for the two timing conventions) starts once,
in a round ``k ≥ a_i``, and runs without pausing; in round ``t`` it holds ``s_i + t − k``
tokens. With ``x_{i,k} = 1`` iff ``i`` starts in round ``k`` the integer program is

    min  Σ_i Σ_k (k + d_i − a_i) x_{i,k}                         (total latency, TEL)
    s.t. Σ_k x_{i,k} = 1                                          ∀ i           (B.1 (1))
         Σ_i Σ_{k ≤ t < k + d_i} (s_i + t − k) x_{i,k} ≤ M          ∀ t           (B.1 (2)–(3))
         x ∈ {0, 1}

— the paper's bilinear constraint (3) written linearly, and its objective ``Σ (p_i + o_i)``
less the constant ``Σ a_i``. Start rounds are limited to a window that provably contains
every schedule at least as good as MC-SF's (``c_i ≤ a_i + UB − Σ_{j≠i} d_j``), and
identical requests start in index order (symmetry breaking). The LP relaxation is a lower
bound on the optimum (:func:`hindsight_lower_bound`); :func:`hindsight_brute_force` solves
tiny instances by dynamic programming over rounds, independently of the MILP.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import cache
from itertools import combinations

import cvxpy as cp
import numpy as np
import scipy.sparse as sp

from ..policies.kvcache import durations, mcsf_schedule

__all__ = ["HindsightResult", "hindsight_optimum", "hindsight_lower_bound",
           "hindsight_brute_force", "schedule_memory"]

_MILP_SOLVERS = ("HIGHS", "SCIPY")


@dataclass(frozen=True)
class HindsightResult:
    """A hindsight schedule: total latency (TEL), start rounds, solver status, seconds.

    ``starts`` are integers for the MILP and the brute force; for the LP relaxation they are
    the fractional mean start rounds ``Σ_k k x_{i,k}``. ``upper`` is the TEL of the feasible
    MC-SF schedule that fixed the horizon.
    """

    total_latency: float
    starts: np.ndarray
    status: str
    seconds: float
    completions: np.ndarray
    horizon: int
    upper: float
    solver: str

    @property
    def mean_latency(self) -> float:
        return self.total_latency / max(len(self.starts), 1)


def _inputs(arrival, prompt, output, memory, convention):
    a = np.asarray(arrival, dtype=np.int64).reshape(-1)
    s = np.asarray(prompt, dtype=np.int64).reshape(-1)
    o = np.asarray(output, dtype=np.int64).reshape(-1)
    if not (a.size == s.size == o.size):
        raise ValueError(f"arrival, prompt, output: lengths {a.size}, {s.size}, {o.size} differ")
    if np.any(np.asarray(arrival) != a):
        raise ValueError("arrival: rounds must be integers")
    if np.any(a < 0):
        raise ValueError("arrival: rounds must be >= 0")
    if np.any(s < 0) or np.any(o < 1):
        raise ValueError("prompt must be >= 0 and output >= 1 for every request")
    d = durations(o, convention)
    if np.any(s + d - 1 > memory):
        i = int(np.argmax(s + d - 1))
        raise ValueError(f"memory={memory}: below the peak {int(s[i] + d[i] - 1)} of request {i} "
                         "(prompt + rounds - 1); it could never run")
    return a, s, o, d


def schedule_memory(starts, prompt, d, horizon=None) -> np.ndarray:
    """KV tokens held in each round ``0 … horizon−1`` by the non-preemptive schedule."""
    starts, s, d = (np.asarray(v, dtype=np.int64) for v in (starts, prompt, d))
    horizon = int((starts + d).max()) if horizon is None else horizon
    t = np.arange(horizon)[:, None]
    age = t - starts[None, :]
    return np.where((age >= 0) & (age < d[None, :]), s[None, :] + age, 0).sum(axis=1)


def _program(a, s, d, memory, relax: bool):
    """Build the B.1 program as cvxpy data; returns (problem, x, (rows, cols) of x)."""
    n = a.size
    upper = _heuristic_upper(a, s, d, memory)
    last = a + upper - (d.sum() - d) - d                  # latest useful start of each request
    rows = np.concatenate([np.full(int(last[i] - a[i] + 1), i) for i in range(n)])
    cols = np.concatenate([np.arange(a[i], last[i] + 1) for i in range(n)])
    horizon = int((cols + d[rows]).max())
    nv = rows.size
    x = cp.Variable(nv, boolean=not relax, nonneg=relax)
    assign = sp.csr_matrix((np.ones(nv), (rows, np.arange(nv))), shape=(n, nv))
    # memory: variable v occupies rounds cols[v] … cols[v] + d − 1 with s + age tokens
    dv = d[rows]
    rep = np.repeat(np.arange(nv), dv)
    age = np.arange(int(dv.sum())) - np.repeat(np.cumsum(dv) - dv, dv)
    mem = sp.csr_matrix((s[rows][rep] + age, (cols[rep] + age, rep)), shape=(horizon, nv))
    cost = (cols + dv - a[rows]).astype(float)
    cons = [assign @ x == 1, mem @ x <= memory]
    if relax:
        cons.append(x <= 1)
    else:
        cons += _symmetry(a, s, d, rows, cols, x)
    return cp.Problem(cp.Minimize(cost @ x), cons), x, rows, cols, horizon, upper


def _heuristic_upper(a, s, d, memory) -> int:
    """TEL of the best of a few feasible MC-SF variants (capped admissions stagger starts)."""
    # ``d`` is passed as the output under "ip", where durations equal outputs
    best = min(int((mcsf_schedule(a, s, d, memory, max_starts=q, order=order) + d - a).sum())
               for q in (None, 1, 2, 3) for order in ("output", "arrival"))
    return best


def _symmetry(a, s, d, rows, cols, x) -> list:
    """Identical requests (same a, s, d) start in index order."""
    n = a.size
    cons = []
    for i in range(n):
        later = np.flatnonzero((a == a[i]) & (s == s[i]) & (d == d[i]) & (np.arange(n) > i))
        if later.size:
            j = int(later[0])
            wi = sp.csr_matrix((cols[rows == i].astype(float), (np.zeros((rows == i).sum()),
                               np.flatnonzero(rows == i))), shape=(1, rows.size))
            wj = sp.csr_matrix((cols[rows == j].astype(float), (np.zeros((rows == j).sum()),
                               np.flatnonzero(rows == j))), shape=(1, rows.size))
            cons.append((wi - wj) @ x <= 0)
    return cons


def _pick_solver(solver, mixed_integer: bool) -> str:
    installed = cp.installed_solvers()
    if solver is not None:
        if solver not in installed:
            raise ValueError(f"solver={solver!r}: not installed; installed: {installed}")
        return solver
    for name in (_MILP_SOLVERS if mixed_integer else ("HIGHS", "CLARABEL", "SCIPY")):
        if name in installed:
            return name
    raise RuntimeError(f"no MILP solver among {_MILP_SOLVERS} is installed for cvxpy")


def _solve(arrival, prompt, output, memory, convention, solver, relax, time_limit):
    a, s, o, d = _inputs(arrival, prompt, output, memory, convention)
    start = time.perf_counter()
    if a.size == 0:
        return HindsightResult(0.0, a, "optimal", 0.0, a, 0, 0.0, "none")
    prob, x, rows, cols, horizon, upper = _program(a, s, d, memory, relax)
    name = _pick_solver(solver, not relax)
    opts = {}
    if time_limit is not None:
        opts = ({"time_limit": float(time_limit)} if name == "HIGHS"
                else {"scipy_options": {"time_limit": float(time_limit)}} if name == "SCIPY"
                else {})
    prob.solve(solver=name, **opts)
    seconds = time.perf_counter() - start
    if x.value is None:
        raise RuntimeError(f"hindsight program: solver {name} returned status {prob.status}")
    xv = np.clip(x.value, 0, 1)
    if relax:
        starts = np.bincount(rows, weights=xv * cols, minlength=a.size)
        tel = float(prob.value)
    else:
        chosen = xv > 0.5
        starts = np.zeros(a.size, dtype=np.int64)
        starts[rows[chosen]] = cols[chosen]
        tel = float((starts + d - a).sum())
    return HindsightResult(tel, starts, prob.status, seconds, starts + d, horizon, float(upper),
                           name)


def hindsight_optimum(arrival, prompt, output, memory, *, convention="ip", solver=None,
                      time_limit=None) -> HindsightResult:
    """Optimal total latency with all arrivals and lengths known in advance (App. B.1 MILP).

    Parameters
    ----------
    arrival, prompt, output : per-request integer arrival rounds and lengths
    memory : KV capacity ``M``
    convention : ``"ip"`` (``d_i = o_i``, the IP's own) or ``"eq1"`` (``d_i = o_i + 1``)
    solver : a cvxpy MILP solver name (default HIGHS, else SCIPY)
    time_limit : seconds; on a time-out ``status`` is not ``"optimal"`` and the schedule is
        the best found (still feasible)
    """
    return _solve(arrival, prompt, output, memory, convention, solver, False, time_limit)


def hindsight_lower_bound(arrival, prompt, output, memory, *, convention="ip", solver=None,
                          time_limit=None) -> HindsightResult:
    """The LP relaxation of :func:`hindsight_optimum`: ``total_latency`` ≤ the optimum."""
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
    """
    a, s, o, d = _inputs(arrival, prompt, output, memory, convention)
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

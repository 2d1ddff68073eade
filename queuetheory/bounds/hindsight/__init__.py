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
   (:mod:`.search`); start rounds are limited to a window that
   provably contains every schedule at least that good (``c_i ≤ a_i + UB − Σ_{j≠i} d_j``);
2. requests of the same prompt and rounds start in the order of their arrivals (symmetry
   breaking, proved in :func:`_same_shape`);
3. completion-count cuts (:mod:`.cuts`): at most ``m`` requests
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
  (:func:`~.bnb.branch_and_bound`): each round starts a set of
  requests that fits; nodes are pruned by dominance (same requests left, less memory held,
  no more cost) and by a Lagrangian bound that keeps a chain of pairwise conflicting
  requests in order (:mod:`.chain`), priced with multipliers
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

One module per part: :mod:`.model` (the inputs and the prepared program: window, symmetry,
cuts), :mod:`.search` (the upper bound), :mod:`.cuts`, :mod:`.milp` (the time-indexed program
and its LP relaxation, through cvxpy), :mod:`.cpsat` (both CP-SAT models), :mod:`.bnb` and
:mod:`.chain` (branch and bound and its Lagrangian bound), :mod:`.brute_force`; this module
is the one entry.
"""

from __future__ import annotations

import math
import numbers
import time

import numpy as np

from ...rounds import takes_first_token
from .bnb import branch_and_bound
from .brute_force import hindsight_brute_force
from .chain import chain_multipliers
from .cpsat import _solve_cpsat, _solve_cpsat_ti
from .milp import SOLVERS as SOLVERS
from .milp import _pick_solver, _reduced_cost_fixing, _solve_cvxpy
from .model import (
    MAX_GRID_CELLS as MAX_GRID_CELLS,
)
from .model import (
    HindsightResult,
    _check_time_limit,
    _gap,
    _grid,
    _inputs,
    _restrict,
    schedule_memory,
)

__all__ = ["HindsightResult", "hindsight_optimum", "hindsight_lower_bound",
           "hindsight_brute_force", "schedule_memory"]

DEFAULT_SOLVER = "bnb"
_OWN_SOLVERS = ("bnb", "cpsat", "cpsat-ti")
"""The formulations solved here rather than through cvxpy (no LP relaxation of their own)."""


SEARCH_SHARE, CAPS_SHARE, CHAIN_SHARE = 0.1, 0.15, 0.1
"""Shares of ``time_limit`` for the local search (:func:`~.model._heuristic`), the
completion-count cuts (:func:`~queuetheory.bounds.hindsight.cuts.completion_caps`) and the
chain bound's subgradient steps
(:func:`~queuetheory.bounds.hindsight.chain.chain_multipliers`, ``"bnb"`` only)."""
HIGHS_MARGIN = 0.02
"""The share of ``time_limit`` (at most a second) the MILP solver is given less than what
is left: HiGHS checks its limit between phases and stops a little after it."""


def _solve(arrival, prompt, output, memory, first_token, solver, relax, time_limit,
           workers=1):
    start = time.perf_counter()
    a, s, o, d, memory = _inputs(arrival, prompt, output, memory, first_token)
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


@takes_first_token
def hindsight_optimum(arrival, prompt, output, memory, *, first_token="prefill", solver=None,
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
    first_token : {"prefill", "decode"}, default "prefill"
        ``"prefill"`` (``d_i = o_i``, the IP's own, Jaillet et al.'s ``"ip"``) or
        ``"decode"`` (``d_i = o_i + 1``, their ``"eq1"``).
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
        exceeds ``MAX_GRID_CELLS``, ``first_token``, ``solver``, ``time_limit`` or
        ``workers`` is invalid.
    RuntimeError
        If ``solver="milp"`` (or None for a cvxpy formulation) and no MILP solver is
        installed for cvxpy.
    """
    return _solve(arrival, prompt, output, memory, first_token,
                  DEFAULT_SOLVER if solver is None else solver, False, time_limit, workers)


@takes_first_token
def hindsight_lower_bound(arrival, prompt, output, memory, *, first_token="prefill",
                          solver=None,
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
    first_token : {"prefill", "decode"}, default "prefill"
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
    return _solve(arrival, prompt, output, memory, first_token, solver, True, time_limit)

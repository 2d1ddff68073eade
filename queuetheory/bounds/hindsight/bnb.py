"""The hindsight optimum of Jaillet et al. (App. B.1) by branch and bound over rounds.

The search walks a schedule's rounds in order. A node is a decision round ``t``, the set
``U`` of requests not yet started, the tokens ``P(τ)``, ``τ ≥ t``, that the running ones
will hold, and the cost ``g = Σ (k_i + d_i − a_i)`` of those started. A child starts, in
round ``t``, a set ``X`` of arrived requests of ``U`` whose ramps fit beside ``P`` in every
round — each class of equal prompt and rounds in order of arrival, as
:func:`queuetheory.bounds.hindsight._same_shape` allows — and moves to the first later
round where some request of ``U \\ X`` fits alone (in the rounds between, none can start).
Starting nothing is a child too, except with nothing running after the last arrival:
moving every later start a round earlier would then be feasible and cheaper.

Three tests prune a node:

1. **Dominance.** After the last arrival the rest of the problem is shift-invariant: a
   node ``(t, U, P, g)`` is dominated by a node seen before with the same ``U``, a profile
   no higher in every round (each counted from its own ``t``) and ``g + |U| t`` no larger —
   any completion of the first, moved to start the second's rounds, is feasible for the
   second (less memory is held), respects the arrivals (all past) and costs no more.
   Before the last arrival, the same test applies among nodes of equal ``t``.
2. **Combinatorial bound.** Request ``j`` starts no earlier than ``e_j``, the first round
   where its ramp fits alone beside ``P``; the ``m``-th completion among ``U`` comes no
   earlier than the ``m``-th smallest ``e_j + d_j`` nor than the round by which the free
   memory ``M − P`` has held the ``m`` smallest areas ``Σ_g (s_j + g)``.
3. **Lagrangian bound.** For multipliers ``λ_τ ≥ 0`` of the memory rows and ``μ_r ≥ 0``
   of the completion-count cuts (:mod:`queuetheory.bounds.hindsight.cuts`), the remaining
   cost is at least ``Σ_{j∈U} min_{k ≥ e_j} c̃_{j,k} − Σ_{τ ≥ t} λ_τ (M − P(τ)) −
   Σ_r μ_r (m_r − done_r)``, where ``c̃_{j,k}`` is the cost of starting ``j`` in round ``k``
   plus ``λ`` times the tokens it holds plus the ``μ_r`` of the cuts it completes by and
   ``done_r`` counts the started requests that complete by cut ``r``'s round. The root LP's
   duals make this the LP bound at the root. For the members of a chain (requests no two
   of which can start in the same round, :mod:`queuetheory.bounds.hindsight.chain`) the
   sum of their ``min_k c̃`` is replaced by the larger cheapest chain of the members left,
   the first at its ``e_x`` or later, the next ones separated as in any schedule; the
   multipliers are then the chain bound's.

Start rounds are limited to the time-indexed grid left by reduced-cost fixing, which keeps
every schedule no worse than the upper bound (:func:`queuetheory.bounds.hindsight._grid`);
the search starts from that bound's schedule and proves optimality by exhausting the tree.
"""

from __future__ import annotations

import time
from bisect import bisect_left, insort
from operator import le

import numpy as np

from .chain import lagrangian_costs
from .model import _same_shape

__all__ = ["branch_and_bound"]

MAX_STATES = 1_000_000
"""Dominance entries kept at most (a few hundred bytes each); beyond, nodes are no longer
recorded, which only weakens the dominance test. The cache of first fitting rounds is
emptied when it reaches as many entries."""


def _lagrangian_tables(a, d, grid, lam, mu):
    """Suffix minima over start rounds of the Lagrangian costs ``c̃_{j,k}``
    (:func:`~queuetheory.bounds.hindsight.chain.lagrangian_costs`), the suffix sums of
    ``λ``, and ``W(c) = Σ_{r: τ_r ≥ c} μ_r`` (the cuts a completion in round ``c`` meets)."""
    horizon = grid.horizon
    table = lagrangian_costs(a, d, grid, lam, mu)
    suffix_min = np.minimum.accumulate(table[:, ::-1], axis=1)[:, ::-1]
    lam = np.concatenate([lam, np.zeros(horizon + 2 - lam.size)])
    lam_suffix = np.cumsum(lam[::-1])[::-1]
    met = np.zeros(horizon + 2)
    np.add.at(met, np.minimum(grid.cap_rounds, horizon + 1), mu)
    meets = np.cumsum(met[::-1])[::-1]                      # W(c) = Σ_{τ_r ≥ c} μ_r
    return suffix_min.tolist(), lam.tolist(), lam_suffix.tolist(), meets.tolist()


# long: one search: bounds, branching and the incumbent share state
def branch_and_bound(a, s, d, memory, grid, lam, mu, deadline=None, chain=None):  # noqa: C901
    """Search the tree of the module; return ``(TEL, starts, proven)``.

    ``grid`` is the restricted time-indexed grid (its upper bound and schedule seed the
    search), ``lam``/``mu`` multipliers of its memory rows and cuts (the LP's duals, or
    a :class:`~queuetheory.bounds.hindsight.chain.Chain`'s); ``chain`` its
    ``(members, later)`` table at those multipliers, or None; ``deadline`` a
    ``time.perf_counter`` value. ``proven`` is False when the deadline stopped the search
    (the schedule is then the best found, no worse than ``grid.upper``)."""

    n, M = a.size, int(memory)
    a_, s_, d_ = a.tolist(), s.tolist(), d.tolist()
    ramps = [[s_[i] + g for g in range(d_[i])] for i in range(n)]
    area = [sum(r) for r in ramps]
    suffix_min, lam_l, lam_suffix, meets = _lagrangian_tables(a, d, grid, lam, mu)
    members, later = chain if chain is not None else ([], None)
    member = {j: x for x, j in enumerate(members)}
    cut_total = float(np.dot(mu, grid.cap_rhs))
    width = len(lam_l)
    allowed = [set() for _ in range(n)]
    for i, k in zip(grid.rows.tolist(), grid.cols.tolist(), strict=True):
        allowed[i].add(k)
    last_start = [max(ks) for ks in allowed]
    after, before = [-1] * n, [-1] * n    # each shape class in order of (arrival, index)
    for i, j in _same_shape(a, s, d):
        after[i], before[j] = j, i
    last_arrival = max(a_)
    # i covers j: prompt, rounds and arrival no larger (ties broken by index), so i fits
    # alone wherever j does; the first round where some request fits is found among the
    # requests no other one left covers
    key = [(s_[i], d_[i], a_[i], i) for i in range(n)]
    covered_by = [sum(1 << i for i in range(n) if key[i] < key[j]
                      and all(map(le, key[i][:3], key[j][:3]))) for j in range(n)]
    best = [int(grid.upper), np.asarray(grid.hint, dtype=np.int64).copy()]
    starts = [-1] * n
    seen, entries = {}, [0]
    earliest_cache = {}

    def earliest(P, j, off):
        """First offset ``k ≥ off`` from P's round where ramp ``j`` fits beside ``P``."""
        key = (P, s_[j], d_[j], off)
        hit = earliest_cache.get(key)
        if hit is not None:
            return hit
        ramp, length, k = ramps[j], len(P), off
        while True:
            for g in range(min(d_[j], length - k)):
                if P[k + g] + ramp[g] > M:
                    break
            else:
                break
            k += 1
        if len(earliest_cache) >= MAX_STATES:
            earliest_cache.clear()
        earliest_cache[key] = k
        return k

    def dominated(t, U, P, g):
        allin = t >= last_arrival
        key, value = (U if allin else (t, U)), g + (U.bit_count() * t if allin else 0)
        total, length = sum(P), len(P)
        front = seen.get(key)            # sorted by value: only a prefix can dominate
        if front is None:
            front = seen[key] = []
        for v, m, q, Q in front:
            if v > value:
                break
            if m <= length and q <= total and all(map(le, Q, P)):
                return True
        first = bisect_left(front, (value,))
        beaten = [i for i in range(first, len(front)) if length <= front[i][1]
                  and total <= front[i][2] and all(map(le, P, front[i][3]))]
        for i in reversed(beaten):
            del front[i]
        entries[0] -= len(beaten)
        if entries[0] < MAX_STATES:
            insort(front, (value, length, total, P))
            entries[0] += 1
        return False

    def bound(t, todo, P, met):
        """Lower bound on the remaining cost (tests 2 and 3 of the module)."""
        done_by, minus_a, lagrange, firsts = [], 0, 0.0, []
        for j in todo:
            e = t + earliest(P, j, max(a_[j] - t, 0))
            if e > last_start[j] or e >= width:
                return float("inf")
            done_by.append(e + d_[j])
            minus_a -= a_[j]
            lagrange += suffix_min[j][e]
            if j in member:
                firsts.append((member[j], e, suffix_min[j][e]))
        if len(firsts) > 1:      # the chain's members: the better of the two prices
            R = sum(1 << x for x, _, _ in firsts)
            lagrange += max(min(later[R, x, e] for x, e, _ in firsts)
                            - sum(v for _, _, v in firsts), 0.0)
        done_by.sort()
        free, tau, need, combinatorial = 0, 0, 0, 0
        for m, size in enumerate(sorted(area[j] for j in todo)):
            need += size
            while free < need:
                free += M - (P[tau] if tau < len(P) else 0)
                tau += 1
            combinatorial += max(done_by[m], t + tau)
        lagrange -= M * lam_suffix[t] if t < width else 0.0
        for i, p in enumerate(P):
            if t + i < width:
                lagrange += lam_l[t + i] * p
        lagrange -= cut_total - met
        return max(combinatorial + minus_a, lagrange)

    def children(t, U, P):
        """(set X, profile with X, cost of X) for every startable set ``X`` at round ``t``."""
        out = []

        def grow(ready, profile, X, cost):
            if not ready:
                out.append((X, profile, cost))
                return
            j, rest = ready[0], ready[1:]
            grow(rest, profile, X, cost)
            if t not in allowed[j]:
                return
            ramp = ramps[j]
            for g in range(min(d_[j], len(profile))):
                if profile[g] + ramp[g] > M:
                    return
            joined = list(profile) + [0] * (d_[j] - len(profile))
            for g in range(d_[j]):
                joined[g] += ramp[g]
            nxt = after[j]
            if nxt >= 0 and a_[nxt] <= t:
                rest = [nxt] + rest
            grow(rest, joined, X | (1 << j), cost + t + d_[j] - a_[j])

        ready = [j for j in range(n) if U >> j & 1 and a_[j] <= t
                 and (before[j] < 0 or not U >> before[j] & 1)]
        grow(ready, list(P), 0, 0)
        out.sort(key=lambda c: -c[0].bit_count())
        return out

    def visit(t, U, P, g, met):
        if deadline is not None and time.perf_counter() > deadline:
            raise TimeoutError
        if U == 0:
            if g < best[0]:
                best[0], best[1] = g, np.array(starts, dtype=np.int64)
            return
        if dominated(t, U, P, g):
            return
        todo = [j for j in range(n) if U >> j & 1]
        if g + bound(t, todo, P, met) > best[0] - 1 + 1e-9:
            return
        idle_useless = not any(P) and t >= last_arrival
        for X, profile, cost in children(t, U, P):
            if X == 0 and idle_useless:
                continue
            started = [j for j in todo if X >> j & 1]
            rest = U & ~X
            profile = profile[1:]
            while profile and profile[-1] == 0:
                profile.pop()
            for j in started:
                starts[j] = t
            gained = sum(meets[min(t + d_[j], width - 1)] for j in started)
            if rest == 0:
                visit(t + 1, 0, (), g + cost, met + gained)
            else:
                left = [j for j in todo if rest >> j & 1 and not rest & covered_by[j]]
                profile = tuple(profile)
                skip = min(earliest(profile, j, max(a_[j] - t - 1, 0)) for j in left)
                visit(t + 1 + skip, rest, profile[skip:], g + cost, met + gained)
            for j in started:
                starts[j] = -1

    try:
        visit(0, (1 << n) - 1, (), 0, 0.0)
        proven = True
    except TimeoutError:
        proven = False
    return best[0], best[1], proven

"""A chain bound for the hindsight program of Jaillet et al. (App. B.1).

Two requests *conflict* when their ramps overflow the memory ``M`` in some round if both
start in the same round with nothing else running. A **chain** is a set ``C`` of pairwise
conflicting requests (chosen greedily by decreasing peak ``s_i + d_i − 1``).

**Validity.** In a feasible schedule the members of ``C`` start in distinct rounds. Order
them by start: for consecutive members ``x`` then ``y``, ``k_y − k_x ≥ δ_{xy}``, the least
offset at which ``y``'s ramp fits beside ``x``'s alone (other requests only add memory).
Relax the memory rows of the time-indexed program with multipliers ``λ ≥ 0`` and the
completion-count cuts (:mod:`queuetheory.bounds.hindsight.cuts`) with ``μ ≥ 0``, but keep
these separations. For every ``λ, μ`` the optimum is then at least

    L(λ, μ) = Σ_{j ∉ C} min_k c̃_{j,k} + min_{chains} Σ_{x ∈ C} c̃_{x,k_x} − M Σ_τ λ_τ − Σ_r μ_r m_r,

with ``c̃_{j,k}`` the cost of starting ``j`` in round ``k`` plus ``λ`` times the tokens it
holds plus the ``μ_r`` of the cuts it completes by. The chain minimum runs over orders and
start rounds of ``C`` with the separations; a dynamic program over subsets (Held and Karp)
computes it exactly. Without ``C``, ``L`` at the LP's duals is the LP bound; the chain only
adds constraints, so from the LP's duals ``L ≥ LP``. Projected subgradient steps (Polyak's
step towards the upper bound) then raise ``L``; every iterate is a valid bound and the best
is kept.

Start rounds are those of the restricted grid (:func:`queuetheory.bounds.hindsight._grid`
after reduced-cost fixing), which holds every schedule no worse than the upper bound, so
``L`` bounds the optimum. The branch and bound
(:func:`~queuetheory.bounds.hindsight.bnb.branch_and_bound`) reads the same tables at its
nodes.
"""

from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np

__all__ = ["Chain", "conflict_chain", "chain_tables", "chain_multipliers", "lagrangian_costs"]

MAX_MEMBERS = 10
"""Members of a chain at most: its tables hold ``2^b · b`` rows of start rounds."""
MAX_TABLE = 2_000_000
"""Entries of the chain tables at most (16 bytes each, two tables); fewer members beyond."""
ITERATIONS = 50
"""Subgradient steps without a deadline."""


class Chain(NamedTuple):
    """A chain (``members``, ``separation[x, y]`` = least start offset of member ``y`` after
    member ``x``), the multipliers that bound best, that bound ``L(λ, μ)`` and the chain's
    table ``later`` (:func:`chain_tables`) at those multipliers."""

    members: list
    separation: np.ndarray
    lam: np.ndarray
    mu: np.ndarray
    bound: float
    later: np.ndarray


def lagrangian_costs(a, d, grid, lam, mu):
    """``c̃[j, k]``: the cost of starting ``j`` in round ``k`` plus ``λ`` times the tokens it
    holds plus the ``μ_r`` of the cuts it completes by; ``inf`` off the grid. Columns run
    to ``grid.horizon + 1``."""
    table = np.full((a.size, grid.horizon + 2), np.inf)
    table[grid.rows, grid.cols] = ((grid.cols + d[grid.rows] - a[grid.rows]).astype(float)
                                   + grid.mem.T @ lam + grid.cap.T @ mu)
    return table


def _fit_together(si, di, sj, dj, offset, memory) -> bool:
    """Do ramps ``i`` (from round 0) and ``j`` (from round ``offset ≥ 0``) fit alone?"""
    return all(si + t + sj + t - offset <= memory for t in range(offset, min(di, offset + dj)))


def conflict_chain(s, d, memory, max_members=MAX_MEMBERS):
    """Greedy chain: requests by decreasing peak (then rounds), each kept if it conflicts
    with every one kept. Returns ``(members, separation)``; fewer than two members means
    no chain."""
    s_, d_ = [int(v) for v in s], [int(v) for v in d]
    members = []
    for i in sorted(range(len(s_)), key=lambda i: (-(s_[i] + d_[i]), -d_[i], i)):
        if len(members) < max_members and not any(
                _fit_together(s_[i], d_[i], s_[j], d_[j], 0, memory) for j in members):
            members.append(i)
    b = len(members)
    separation = np.zeros((b, b), dtype=np.int64)
    for x, i in enumerate(members):
        for y, j in enumerate(members):
            if x != y:
                offset = 1
                while not _fit_together(s_[i], d_[i], s_[j], d_[j], offset, memory):
                    offset += 1
                separation[x, y] = offset
    return members, separation


def chain_tables(costs, separation):
    """Held–Karp over the chain, backwards: ``first[R, x, k]`` is the least cost of starting
    the members in ``R`` (a bitmask) as a chain whose first is ``x`` in round ``k``;
    ``later[R, x, k] = min_{k' ≥ k} first[R, x, k']``. ``costs[x, k]``: member ``x`` started
    in round ``k`` (``inf`` where it may not start)."""
    b, width = costs.shape
    first = np.full((1 << b, b, width), np.inf)
    later = np.full((1 << b, b, width), np.inf)
    sets = np.arange(1 << b)
    size = np.array([int(r).bit_count() for r in sets])
    for p in range(1, b + 1):
        layer = sets[size == p]
        if p == 1:
            x = np.log2(layer).astype(np.int64)
            first[layer, x] = costs[x]
        else:
            rest_min = np.full((layer.size, b, width), np.inf)
            for x in range(b):
                for y in range(b):
                    pick = (layer >> x) & (layer >> y) & 1 == 1
                    if x == y or not pick.any():
                        continue
                    rows, rest = np.flatnonzero(pick), layer[pick] & ~(1 << x)
                    gap = separation[x, y]     # y starts at least ``gap`` rounds after x
                    rest_min[rows, x, :width - gap] = np.minimum(rest_min[rows, x, :width - gap],
                                                                 later[rest, y, gap:])
            first[layer] = costs[None] + rest_min
        later[layer] = np.minimum.accumulate(first[layer][:, :, ::-1], axis=2)[:, :, ::-1]
    return first, later


def _cheapest_chain(first, later, separation):
    """The chain minimum over all members and one chain attaining it: ``(value, [(x, k)])``."""
    b, width = separation.shape[0], first.shape[2]
    R = (1 << b) - 1
    x = int(np.argmin(later[R, :, 0]))
    value, k, chain = float(later[R, x, 0]), int(np.argmin(first[R, x])), []
    while True:
        chain.append((x, k))
        R &= ~(1 << x)
        if R == 0:
            return value, chain
        options = [(later[R, y, k + separation[x, y]], y) for y in range(b)
                   if R >> y & 1 and k + separation[x, y] < width]
        _, y = min(options)
        k += int(separation[x, y])
        x, k = y, k + int(np.argmin(first[R, y, k:]))


def chain_multipliers(a, s, d, memory, grid, lam, mu, deadline=None, iterations=ITERATIONS):
    """The chain of :func:`conflict_chain` and the best multipliers found from the LP's
    duals ``lam, mu`` by projected subgradient steps (Polyak's step towards
    ``grid.upper``; the step halves after 8 steps without a better bound), stopping after
    ``iterations`` steps or at ``deadline`` (a ``time.perf_counter`` value); ``None`` when
    there is no chain of two or more members or no step was taken."""
    n, width = a.size, grid.horizon + 2
    most = max(b for b in range(2, MAX_MEMBERS + 1) if (1 << b) * b * width <= MAX_TABLE
               or b == 2)
    members, separation = conflict_chain(s, d, memory, most)
    if len(members) < 2:
        return None
    rows, cols = grid.rows, grid.cols
    others = np.setdiff1d(np.arange(n), members)
    var = np.full((n, width), -1)
    var[rows, cols] = np.arange(rows.size)
    best, history, step_scale = None, [], 1.0
    lam, mu = lam.astype(float), mu.astype(float)
    for step in range(iterations):
        if deadline is not None and time.perf_counter() > deadline:
            break
        table = lagrangian_costs(a, d, grid, lam, mu)
        first, later = chain_tables(table[members], separation)
        if not np.isfinite(later[-1, :, 0].min()):
            break                # no chain fits the grid (it holds the upper bound's)
        value, chain = _cheapest_chain(first, later, separation)
        picks = np.argmin(table[others], axis=1)
        bound = (table[others, picks].sum() + value - memory * lam.sum()
                 - mu @ grid.cap_rhs)
        history.append(bound)
        if best is None or bound > best.bound:
            best = Chain(members, separation, lam.copy(), mu.copy(), float(bound), later)
        x = np.zeros(rows.size)
        x[var[others, picks]] = 1
        x[[var[members[m], k] for m, k in chain]] = 1
        over_mem, over_cap = grid.mem @ x - memory, grid.cap @ x - grid.cap_rhs
        over_mem[lam <= 0] = np.maximum(over_mem[lam <= 0], 0)   # projected on λ, μ ≥ 0
        over_cap[mu <= 0] = np.maximum(over_cap[mu <= 0], 0)
        norm = over_mem @ over_mem + over_cap @ over_cap
        if norm == 0 or bound >= grid.upper:
            break
        size = step_scale * (grid.upper - bound) / norm
        lam = np.maximum(lam + size * over_mem, 0.0)
        mu = np.maximum(mu + size * over_cap, 0.0)
        if step % 8 == 7 and max(history[-8:]) <= max(history[:-8], default=-np.inf):
            step_scale /= 2
    return best

"""The chain bound of the hindsight program (Jaillet et al., App. B.1): requests no two of
which start in the same round, ordered with their least separations."""

import itertools
import time

import numpy as np

from queuetheory.bounds import hindsight_brute_force, schedule_memory
from queuetheory.bounds.hindsight.chain import (
    _cheapest_chain,
    chain_multipliers,
    chain_tables,
    conflict_chain,
)
from queuetheory.bounds.hindsight.milp import _reduced_cost_fixing
from queuetheory.bounds.hindsight.model import _grid, _restrict


def _fits(starts, s, d, M):
    return schedule_memory(np.asarray(starts), s, d).max() <= M


def _requests(rng, sizes, prompts, rounds, memories):
    """Random prompts and rounds of ``n`` requests and a memory that holds each alone."""
    n = int(rng.integers(*sizes))
    s, d = rng.integers(*prompts, n), rng.integers(*rounds, n)
    return s, d, int(max(int((s + d - 1).max()), rng.integers(*memories)))


def test_chain_members_conflict_pairwise_and_separations_are_the_least_that_fit():
    rng = np.random.default_rng(3)
    checked = 0
    for _ in range(20):
        s, d, M = _requests(rng, (4, 9), (0, 4), (1, 12), (8, 16))
        n = s.size
        members, separation = conflict_chain(s, d, M)
        for x, i in enumerate(members):
            for y, j in enumerate(members):
                if x == y:
                    continue
                pair_s, pair_d = s[[i, j]], d[[i, j]]
                assert not _fits([0, 0], pair_s, pair_d, M)
                gap = int(separation[x, y])
                assert _fits([0, gap], pair_s, pair_d, M)
                assert not any(_fits([0, k], pair_s, pair_d, M) for k in range(1, gap))
                checked += 1
        left_out = [i for i in range(n) if i not in members]
        for i in left_out:   # greedy: each request left out fits beside some member
            assert any(_fits([0, 0], s[[i, j]], d[[i, j]], M) for j in members)
    assert checked >= 20


def test_chain_tables_equal_enumeration_of_orders_and_start_rounds():
    rng = np.random.default_rng(8)
    for _ in range(10):
        b, width = int(rng.integers(2, 5)), 9
        costs = rng.integers(0, 20, (b, width)).astype(float)
        costs[rng.random((b, width)) < 0.3] = np.inf
        separation = rng.integers(1, 4, (b, b))
        first, later = chain_tables(costs, separation)
        exact = np.inf
        for order in itertools.permutations(range(b)):
            for ks in itertools.product(range(width), repeat=b):
                if all(ks[m + 1] - ks[m] >= separation[order[m], order[m + 1]]
                       for m in range(b - 1)):
                    exact = min(exact, sum(costs[x, k] for x, k in zip(order, ks, strict=True)))
        full = (1 << b) - 1
        assert later[full, :, 0].min() == exact
        if np.isfinite(exact):
            value, chain = _cheapest_chain(first, later, separation)
            assert value == exact == sum(costs[x, k] for x, k in chain)
            assert sorted(x for x, _ in chain) == list(range(b))
            for (x, k), (y, k2) in itertools.pairwise(chain):
                assert k2 - k >= separation[x, y]


def test_chain_bound_lies_between_the_lp_and_the_dynamic_programs_optimum():
    rng = np.random.default_rng(21)
    above, chains = 0, 0
    for _ in range(25):
        s, d, M = _requests(rng, (4, 8), (1, 4), (3, 9), (8, 13))
        a = np.sort(rng.integers(0, 4, s.size))
        grid = _grid(a, s, d, M)
        lp, keep, lam, mu = _reduced_cost_fixing(a, s, d, M, grid)
        grid = _restrict(grid, keep)
        chain = chain_multipliers(a, s, d, M, grid, lam, mu)
        if chain is None:
            continue
        chains += 1
        exact = hindsight_brute_force(a, s, d, M).total_latency
        assert lp - 1e-6 <= chain.bound <= exact + 1e-6
        assert np.all(chain.lam >= 0) and np.all(chain.mu >= 0)
        above += chain.bound > lp + 0.5
    assert chains >= 15 and above >= 12


def test_chain_multipliers_take_no_step_past_their_deadline():
    a, s, d = np.zeros(6, np.int64), np.ones(6, np.int64), np.array([12, 13, 14, 15, 6, 7])
    grid = _grid(a, s, d, 20)
    lp, keep, lam, mu = _reduced_cost_fixing(a, s, d, 20, grid)
    grid = _restrict(grid, keep)
    assert chain_multipliers(a, s, d, 20, grid, lam, mu, deadline=time.perf_counter() - 1) is None
    chain = chain_multipliers(a, s, d, 20, grid, lam, mu)
    assert sorted(chain.members) == [0, 1, 2, 3] and chain.bound >= lp - 1e-6

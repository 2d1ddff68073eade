"""The App. B.1 hindsight MILP, its LP relaxation and the dynamic-programming cross-check."""

import time
import warnings

import numpy as np
import pytest

import queuetheory as qt
from queuetheory.bounds import (
    hindsight_brute_force,
    hindsight_lower_bound,
    hindsight_optimum,
    schedule_memory,
)
from queuetheory.bounds.hindsight.cuts import completion_caps
from queuetheory.bounds.hindsight.search import order_search, place_in_order
from queuetheory.rounds import durations, mcsf_schedule


@pytest.mark.parametrize("solver", ["milp", "cpsat", "cpsat-ti", "bnb"])
@pytest.mark.parametrize("first_token", ["prefill", "decode"])
def test_exact_solvers_equal_dynamic_program_on_tiny_instances(first_token, solver):
    rng = np.random.default_rng(5)
    for _ in range(8):
        n = int(rng.integers(2, 6))
        a = np.sort(rng.integers(0, 4, n))
        s, o = rng.integers(1, 3, n), rng.integers(1, 5, n)
        M = int(rng.integers(6, 10))
        milp = hindsight_optimum(a, s, o, M, first_token=first_token, solver=solver)
        dp = hindsight_brute_force(a, s, o, M, first_token=first_token)
        assert milp.status == "optimal" and milp.proven and milp.gap == 0
        assert milp.total_latency == dp.total_latency
        d = durations(o, first_token)
        for res in (milp, dp):
            assert np.all(res.starts >= a)
            assert schedule_memory(res.starts, s, d).max() <= M
            assert res.total_latency == (res.starts + d - a).sum()


def test_lp_below_milp_below_mcsf():
    rng = np.random.default_rng(9)
    for _ in range(3):
        n = 8
        a = np.sort(rng.integers(0, 8, n))
        s, o = rng.integers(1, 4, n), rng.integers(2, 12, n)
        lp = hindsight_lower_bound(a, s, o, 30)
        milp = hindsight_optimum(a, s, o, 30)
        alg = (mcsf_schedule(a, s, o, 30) + o - a).sum()
        assert lp.total_latency <= milp.total_latency + 1e-6
        assert milp.total_latency <= milp.upper <= alg


def test_twelve_requests_solve():
    # the size the issue asks for (timing is measured in benchmarks/, not asserted here)
    rng = np.random.default_rng(1)
    o = rng.integers(2, 16, 12)
    res = hindsight_optimum(np.zeros(12, np.int64), np.ones(12, np.int64), o, 40)
    assert res.status == "optimal" and res.total_latency >= o.sum()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_formulations_agree_on_random_instances_up_to_twelve(seed):
    rng = np.random.default_rng(seed)
    for n in (6, 9, 12):
        a = np.sort(rng.integers(0, 6, n))
        s, o = rng.integers(0, 4, n), rng.integers(1, 8, n)
        M = int(rng.integers(14, 24))
        res = [hindsight_optimum(a, s, o, M, solver=name, time_limit=120)
               for name in ("milp", "cpsat", "cpsat-ti", "bnb")]
        assert all(r.proven for r in res), [r.status for r in res]
        assert len({r.total_latency for r in res}) == 1
        for r in res:
            assert np.all(r.starts >= a) and schedule_memory(r.starts, s, o).max() <= M


@pytest.mark.parametrize("solver", ["milp", "cpsat", "cpsat-ti", "bnb"])
def test_time_limit_is_honoured_and_gap_reported(solver):
    rng = np.random.default_rng(0)
    o = rng.integers(2, 16, 24)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = hindsight_optimum(np.zeros(24, np.int64), np.ones(24, np.int64), o, 20,
                                solver=solver, time_limit=1.0)
    assert not [w for w in caught if issubclass(w.category, UserWarning)]   # quiet
    assert not res.proven and 0 < res.gap <= 1 and res.status == "time_limit"
    assert res.seconds < 15                 # the solver's own limit, with room for a busy CPU
    assert res.total_latency <= res.upper
    assert schedule_memory(res.starts, np.ones(24, np.int64), o).max() <= 20


def test_public_names_and_result_fields():
    res = qt.bounds.hindsight_optimum([0, 0, 0, 0], [1, 1, 1, 1], [2, 2, 3, 3], 4,
                                      first_token="prefill", solver="SCIPY")
    assert res.total_latency == 15 and res.status == "optimal" and res.seconds >= 0
    assert res.solver == "SCIPY" and res.starts.shape == (4,)
    assert res.proven and res.gap == 0
    cp = qt.bounds.hindsight_optimum([0, 0, 0, 0], [1, 1, 1, 1], [2, 2, 3, 3], 4, solver="cpsat")
    assert (cp.total_latency, cp.solver, cp.proven) == (15, "cpsat", True)


@pytest.mark.parametrize("kwargs, name", [
    (dict(arrival=[0, 1], prompt=[1], output=[1, 1], memory=5), "lengths"),
    (dict(arrival=[0.5], prompt=[1], output=[1], memory=5), "arrival"),
    (dict(arrival=[0], prompt=[3], output=[5], memory=5), "memory"),
    (dict(arrival=[0], prompt=[1], output=[0], memory=5), "output"),
    (dict(arrival=[4], prompt=[4], output=[4], memory=float("nan")), "memory=nan"),
    (dict(arrival=[0], prompt=[1], output=[1], memory=1.5), "memory=1.5"),
    (dict(arrival=[0], prompt=[float("nan")], output=[1], memory=5), "prompt=nan"),
    (dict(arrival=[0], prompt=[1], output=[1], memory=5, time_limit=-1), "time_limit=-1"),
])
@pytest.mark.parametrize("fn", [hindsight_optimum, hindsight_lower_bound])
def test_bad_input_names_the_parameter(kwargs, name, fn):
    with pytest.raises(ValueError, match=name):
        fn(**kwargs)


def test_bad_solver_and_convention():
    with pytest.raises(ValueError, match="solver"):
        hindsight_optimum([0], [1], [1], 5, solver="NOPE")
    with pytest.raises(ValueError, match="solver='cpsat'"):
        hindsight_lower_bound([0], [1], [1], 5, solver="cpsat")
    with pytest.raises(ValueError, match="solver='cpsat-ti'"):
        hindsight_lower_bound([0], [1], [1], 5, solver="cpsat-ti")
    with pytest.raises(ValueError, match="workers=0"):
        hindsight_optimum([0], [1], [1], 5, solver="cpsat", workers=0)
    with pytest.raises(ValueError, match="first_token='C2'"):
        hindsight_optimum([0], [1], [1], 5, first_token="C2")
    with pytest.raises(ValueError, match="max_requests"):
        hindsight_brute_force(np.zeros(9, int), np.ones(9, int), np.ones(9, int), 5)


def _all_feasible_schedules(a, s, d, M, span):
    """Every start vector with a_i ≤ k_i < a_i + span that keeps memory ≤ M (tiny n)."""
    grids = np.meshgrid(*[np.arange(ai, ai + span) for ai in a], indexing="ij")
    starts = np.stack([g.reshape(-1) for g in grids], axis=1)
    t = np.arange(int(a.max() + span + d.max()))[None, :, None]
    age = t - starts[:, None, :]
    held = np.where((age >= 0) & (age < d), s + age, 0).sum(axis=2)
    return starts[held.max(axis=1) <= M]


def test_completion_caps_hold_in_every_feasible_schedule():
    rng = np.random.default_rng(3)
    checked = 0
    for _ in range(30):
        n = int(rng.integers(2, 5))
        a, s = rng.integers(0, 3, n), rng.integers(0, 3, n)
        d = rng.integers(1, 6, n)
        M = int(max((s + d - 1).max(), rng.integers(3, 9)))
        caps = completion_caps(s, d, M)
        if not caps:
            continue
        done = _all_feasible_schedules(a, s, d, M, span=7) + d       # completions
        for t, m in caps:
            assert (done <= t).sum(axis=1).max() <= m
        checked += len(caps)
    assert checked >= 10                   # the cuts bind somewhere


def test_local_search_schedules_are_feasible_and_no_worse():
    rng = np.random.default_rng(4)
    for _ in range(10):
        n = int(rng.integers(3, 12))
        a, s, o = np.sort(rng.integers(0, 6, n)), rng.integers(0, 4, n), rng.integers(1, 9, n)
        M = 16
        start = mcsf_schedule(a, s, o, M)
        found = order_search(a, s, o, M, start, seed=1)
        assert np.all(found >= a) and schedule_memory(found, s, o).max() <= M
        assert found.sum() <= start.sum()
        placed = place_in_order(rng.permutation(n), a, s, o, M)
        assert np.all(placed >= a) and schedule_memory(placed, s, o).max() <= M


@pytest.mark.parametrize("solver", ["milp", "cpsat", "cpsat-ti", "bnb"])
def test_same_shape_requests_with_different_arrivals_match_dynamic_program(solver):
    # classes of equal (prompt, rounds) whose members arrive at different rounds: the
    # symmetry breaking orders them by arrival
    rng = np.random.default_rng(6)
    for _ in range(6):
        n = int(rng.integers(3, 6))
        shapes = rng.integers(0, 2, n)
        a = np.sort(rng.integers(0, 4, n))
        s, o = np.where(shapes, 2, 1), np.where(shapes, 3, 4)
        M = int(rng.integers(5, 9))
        res = hindsight_optimum(a, s, o, M, solver=solver)
        dp = hindsight_brute_force(a, s, o, M)
        assert res.proven and res.total_latency == dp.total_latency


def _one_at_a_time(a, d):
    """Start rounds running the requests one after another in order of arrival: feasible
    whenever every request fits alone, and usually far from optimal."""
    starts, free = np.zeros(a.size, np.int64), 0
    for i in np.argsort(a, kind="stable"):
        starts[i] = free = max(free, int(a[i]))
        free += int(d[i])
    return starts


@pytest.mark.parametrize("duals", ["none", "lp", "chain"])
def test_branch_and_bound_from_a_poor_schedule_finds_the_dynamic_programs_optimum(duals):
    # the search must do the work: it starts from a schedule far worse than the optimum,
    # without multipliers, with the LP's and reduced-cost fixing, or with the chain bound's
    from queuetheory.bounds.hindsight.bnb import branch_and_bound
    from queuetheory.bounds.hindsight.chain import chain_multipliers
    from queuetheory.bounds.hindsight.milp import _reduced_cost_fixing
    from queuetheory.bounds.hindsight.model import _grid, _restrict

    rng = np.random.default_rng(11)
    improved = chains = 0
    for _ in range(30):
        n = int(rng.integers(3, 6))
        a = np.sort(rng.integers(0, 4, n))
        s, d = rng.integers(0, 3, n), rng.integers(1, 6, n)
        M = int(rng.integers(max(6, int((s + d - 1).max())), 11))
        grid = _grid(a, s, d, M)
        chain = None
        if duals == "none":
            lam, mu = np.zeros(grid.horizon), np.zeros(grid.cap_rhs.size)
        else:
            _, keep, lam, mu = _reduced_cost_fixing(a, s, d, M, grid)
            grid = _restrict(grid, keep)
        poor = _one_at_a_time(a, d)
        grid = grid._replace(upper=int((poor + d - a).sum()), hint=poor)
        if duals == "chain":
            found = chain_multipliers(a, s, d, M, grid, lam, mu)
            if found is not None:
                lam, mu, chain = found.lam, found.mu, (found.members, found.later)
                chains += 1
        tel, starts, proven = branch_and_bound(a, s, d, M, grid, lam, mu, chain=chain)
        exact = hindsight_brute_force(a, s, d, M).total_latency
        assert proven and tel == exact
        assert np.all(starts >= a) and schedule_memory(starts, s, d).max() <= M
        assert tel == (starts + d - a).sum()
        improved += exact < grid.upper
    assert improved >= 20                      # the poor schedule was beaten, not returned
    assert duals != "chain" or chains >= 10


def test_branch_and_bound_stops_at_its_deadline_with_a_feasible_schedule():
    from queuetheory.bounds.hindsight.bnb import branch_and_bound
    from queuetheory.bounds.hindsight.model import _grid

    rng = np.random.default_rng(0)
    n = 24
    a, s, d = np.zeros(n, np.int64), np.ones(n, np.int64), rng.integers(2, 16, n)
    soon = time.perf_counter() + 0.5
    grid = _grid(a, s, d, 20, search_deadline=soon, caps_deadline=soon)
    poor = _one_at_a_time(a, d)
    grid = grid._replace(upper=int((poor + d - a).sum()), hint=poor)
    began = time.perf_counter()
    tel, starts, proven = branch_and_bound(a, s, d, 20, grid, np.zeros(grid.horizon),
                                           np.zeros(grid.cap_rhs.size), began + 0.5)
    assert time.perf_counter() - began < 2 and not proven
    assert tel == (starts + d - a).sum() <= grid.upper
    assert schedule_memory(starts, s, d).max() <= 20

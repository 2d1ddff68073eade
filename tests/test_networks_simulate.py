"""The network simulation: routing, fork-join, conservation, and the growth-rate test."""

import numpy as np
import pytest

import queuetheory as qt
from queuetheory.networks import fork_join, parallel, rybko_stolyar, simulate
from queuetheory.stability import path_growth_rate


def test_every_token_is_accounted_for():
    res = simulate(fork_join(0.9), horizon=400, seed=5)
    served = sum(int(e.log.column("token_load").sum()) for e in res.engines.values())
    left = sum(int(e.work) for e in res.engines.values())
    assert served + left == res.tokens_in
    assert res.metrics["completed"] + res.metrics["requests_end"] == res.metrics["arrived"]


def test_fork_join_releases_a_request_when_both_tasks_are_done():
    v = simulate(fork_join(0.9), horizon=400, seed=6).visits.set_index(["request", "class"])
    finish, arrival = v["finish"].unstack(), v["arrival"].unstack()
    forked = arrival["c1"].notna()
    assert (arrival.loc[forked, "c1"] == finish.loc[forked, "c0"]).all()
    assert (arrival.loc[forked, "c2"] == finish.loc[forked, "c0"]).all()
    joined = arrival["c3"].notna()
    assert joined.sum() > 50
    both = finish.loc[joined, ["c1", "c2"]].max(axis=1)
    assert (arrival.loc[joined, "c3"] == both).all()
    # a request whose tasks are not both done never reaches agent 3
    pending = finish["c1"].isna() | finish["c2"].isna()
    assert arrival.loc[pending, "c3"].isna().all()


def test_rs_second_stage_starts_when_the_first_ends_on_the_slot_grid():
    res = simulate(rybko_stolyar("up", 0.9), horizon=300, seed=7)
    v = res.visits.set_index(["request", "class"])
    a, f = v["arrival"].unstack(), v["finish"].unstack()
    moved = a["A2"].notna()
    assert moved.sum() > 50 and (a.loc[moved, "A2"] == f.loc[moved, "A1"]).all()
    assert np.all(v["arrival"] == np.round(v["arrival"]))       # UnitTime: integer slots
    # a request enters its first agent at the first slot boundary at or after it arrives
    first = a["A1"].dropna()
    arrived = res.requests.loc[first.index, "arrival"]
    assert np.all((first >= arrived) & (first < arrived + 1))


def test_round_robin_and_least_requests_balance_the_engines():
    for router, spread in (("round_robin", 1), ("least_requests", 0.1)):
        v = simulate(parallel(3, router, rho=0.9), horizon=200, seed=8).visits
        counts = v.groupby("agent").size().to_numpy()
        assert counts.max() - counts.min() <= max(1, spread * counts.mean())


def test_same_seed_same_paths_different_seed_different_paths():
    a = simulate(parallel(2, "random"), horizon=100, seed=1).paths
    b = simulate(parallel(2, "random"), horizon=100, seed=1).paths
    c = simulate(parallel(2, "random"), horizon=100, seed=2).paths
    assert a.equals(b) and not a.equals(c)


def test_priority_names_map_to_the_engines_local_classes():
    """'up': agent 1 favours B2 over A1, agent 2 favours A2 over B1 (L316); 'down' reverses."""
    for prio, first in (("up", ("B2", "A2")), ("down", ("A1", "B1"))):
        net = rybko_stolyar(prio, 0.9)
        for agent, top in zip(("agent1", "agent2"), first, strict=True):
            local = net.classes_at(agent)
            policy = net.agents[agent].make_policy(local)
            assert isinstance(policy, qt.policies.StaticPriority)
            assert local[policy.class_order[0]] == top


def test_path_growth_rate_separates_linear_growth_from_noise():
    rng = np.random.default_rng(0)
    t = np.arange(4000.0)
    noise = rng.normal(0, 5, t.size)
    assert path_growth_rate(t, 0.5 * t + noise, end=4000, offered=1.0).verdict == "unstable"
    assert path_growth_rate(t, 20 + noise, end=4000, offered=1.0).verdict == "stable"
    with pytest.raises(ValueError, match="blocks"):
        path_growth_rate(t, noise, end=4000, offered=1.0, blocks=2)


def test_simulate_rejects_bad_horizon():
    with pytest.raises(ValueError, match="horizon"):
        simulate(parallel(2), horizon=0)


def test_agent_policy_instances_are_copied_per_agent():
    policy = qt.policies.Sarathi(768)
    net = parallel(2, "random", policy=policy)
    res = simulate(net, horizon=50, seed=0)
    pols = [e.policy for e in res.engines.values()]
    assert pols[0] is not pols[1] and policy not in pols


def _static_priority_full_scan(policy, state):
    """StaticPriority as it was before its FCFS head shortcut: every candidate of every
    class ordered, checked for memory and offered to the budget (the reference)."""
    from queuetheory.policies.base import admissible, ordered, take_decodes

    budget, left = policy.token_budget, policy.max_reqs
    ps, cs, ds = [], [], []
    for k in policy.class_order:
        mine = state.cls == k
        dec = ordered(state, np.flatnonzero(mine & state.in_decode), policy.order)
        pre = admissible(state, ordered(state, np.flatnonzero(mine & ~state.in_decode),
                                        policy.order))
        d = take_decodes(dec, budget, left)
        budget -= d.size
        left = policy._left(left, d.size)
        p, c = policy._prefills(state, pre, budget, left)
        budget -= int(c.sum())
        left = policy._left(left, p.size)
        ps.append(p), cs.append(c), ds.append(d)
    return np.concatenate(ps), np.concatenate(cs), np.concatenate(ds)


@pytest.mark.parametrize("max_reqs", [None, 5])
def test_static_priority_head_shortcut_equals_full_scan(max_reqs):
    policy = qt.policies.StaticPriority(64, (1, 0), max_reqs=max_reqs)
    compared = []
    schedule = policy._schedule

    def checked(state):
        batch = schedule(state)
        ref = _static_priority_full_scan(policy, state)
        for got, want in zip((batch.prefill, batch.chunk, batch.decode), ref, strict=True):
            np.testing.assert_array_equal(got, want)
        compared.append(state.n)
        return batch

    policy._schedule = checked
    wl = qt.Workload([qt.RequestClass(20, 8, rate=1.5), qt.RequestClass(40, 4, rate=1.0)])
    qt.simulate(wl, policy, qt.UnitTime(), n_requests=300, seed=3, fast_path=False,
                first_token="decode")
    assert len(compared) > 100 and max(compared) > 64     # queues longer than the budget

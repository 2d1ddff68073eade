"""The per-slot kernel of unit-time networks reproduces the general path exactly.

Every record of a run is compared between ``simulate(..., fast_path=True)`` (the kernel,
queuetheory.networks.slotted) and ``fast_path=False`` (one engine decision per agent per
slot): paths, requests, every column of every engine's request table, batch logs, TBT
histograms, engine counters and the derived frames.
"""

import numpy as np
import pandas as pd
import pytest

import queuetheory as qt
from queuetheory.networks import (
    Agent,
    AgentNetwork,
    fork_join,
    parallel,
    rybko_stolyar,
    simulate,
    slotted,
    two_type_engine,
)
from queuetheory.policies import Orca, Sarathi, StaticPriority

TABLE = ("arrival", "prompt", "output", "cls", "lo", "hi", "priority", "prefilled", "decoded",
         "recomputed", "restarts", "discarded", "prefill_done", "first_token", "last_token",
         "finish", "tbt_max", "in_decode")


def assert_same_run(net, horizon, seed):
    fast = simulate(net, horizon=horizon, seed=seed)
    ref = simulate(net, horizon=horizon, seed=seed, fast_path=False)
    pd.testing.assert_frame_equal(fast.paths, ref.paths)
    pd.testing.assert_frame_equal(fast.requests, ref.requests)
    assert fast.tokens_in == ref.tokens_in
    for name, a in fast.engines.items():
        b = ref.engines[name]
        n = b.table.n
        assert a.table.n == n
        for f in TABLE:
            np.testing.assert_array_equal(a.table.column(f), b.table.column(f),
                                          err_msg=f"{name}: {f}")
        np.testing.assert_array_equal(fast.job_of[name][:n], ref.job_of[name][:n])
        pd.testing.assert_frame_equal(a.log.frame(), b.log.frame())
        np.testing.assert_array_equal(a.tbt.counts, b.tbt.counts)
        np.testing.assert_array_equal(a.live, b.live)
        assert (a.iteration, a.work, a.kv_total, a.peak_memory) == (
            b.iteration, b.work, b.kv_total, b.peak_memory)
    if ref.paths.empty:
        return fast
    assert str(fast.metrics) == str(ref.metrics)
    for frame in ("per_agent", "per_class", "per_type", "visits"):
        pd.testing.assert_frame_equal(getattr(fast, frame), getattr(ref, frame))
    return fast


@pytest.fixture
def partial_decodes(monkeypatch):
    """Counts the kernel's partial decodes (a queue with more requests in decode than the
    budget left), so that a test can show it exercised them."""
    seen = []
    loosen = slotted._Agent._loosen

    def counted(self, q):
        seen.append(len(q.ends))
        return loosen(self, q)

    monkeypatch.setattr(slotted._Agent, "_loosen", counted)
    return seen


@pytest.mark.parametrize("priority", ["up", "down"])
def test_rybko_stolyar_at_the_papers_parameters(priority):
    res = assert_same_run(rybko_stolyar(priority, 0.9), 1000, 0)
    assert res.metrics["completed"] > 1000


def test_rybko_stolyar_with_a_small_budget_decodes_partially(partial_decodes):
    """A budget of 12 tokens against outputs of 10: the low classes are often given fewer
    decode tokens than they have requests in decode, and starve for several slots."""
    for prio, seed in (("up", 1), ("down", 2)):
        net = rybko_stolyar(prio, 0.95, short=(2, 10), long=(6, 10), token_budget=12)
        res = assert_same_run(net, 1200, seed)
        gaps = np.concatenate([e.table.column("tbt_max") for e in res.engines.values()])
        assert gaps.max() > 2
    assert len(partial_decodes) > 100


def test_fork_join_and_its_join():
    res = assert_same_run(fork_join(0.95), 1000, 2)
    assert res.time_average("join_waiting") > 0


def test_fork_join_with_small_budgets_and_fixed_lengths(partial_decodes):
    net = fork_join(1.05, sizes=((6, 4), (9, 3), (3, 7), (12, 2)), token_budget=16,
                    lengths="fixed")
    assert_same_run(net, 800, 3)
    assert partial_decodes


@pytest.mark.parametrize("router", ["random", "round_robin", "least_requests", "least_tokens"])
def test_parallel_engines_behind_every_router(router):
    assert_same_run(parallel(3, router, rho=0.95), 600, 4)


@pytest.mark.parametrize("priority", [None, ("short", "long"), ("long", "short")])
def test_one_engine_two_types(priority, partial_decodes):
    """``None``: type-blind Sarathi, both classes in one queue."""
    net = two_type_engine(priority, rho=1.0, sizes=((5, 6), (20, 4)), token_budget=12)
    assert_same_run(net, 800, 5)
    assert partial_decodes


def test_routers_downstream_of_agents_see_running_batches():
    """A least-requests and a least-tokens router fed by agents' completions: while the
    agents release their requests one after another, the scores count the running batches
    of the agents not yet released."""
    tm = qt.UnitTime()
    net = AgentNetwork(slot=1.0)
    for a in ("front", "E1", "E2", "E3"):
        net.add_agent(a, tm, 16, policy=Sarathi(16) if a == "front" else None)
    net.add_class("f1", "front", 3, 2, to="r1")
    net.add_class("f2", "front", 2, 2, to="r2")
    for k in (1, 2, 3):
        net.add_class(f"x{k}", f"E{k}", 4, 3)
        net.add_class(f"y{k}", f"E{k}", 2, 5)
    net.add_router("r1", ["x1", "x2", "x3"], router="least_requests")
    net.add_router("r2", ["y1", "y2", "y3"], router="least_tokens")
    net.add_router("r0", ["f1", "f2", "x3"], router="random")
    net.add_source("src", 3.5, "r0")
    assert slotted.covers(net)
    assert_same_run(net, 500, 6)


def test_horizons_off_the_grid_and_before_any_arrival():
    net = rybko_stolyar("up", 0.9)
    assert_same_run(net, 250.5, 7)
    first = simulate(net, horizon=1000, seed=7).requests["arrival"].min()
    empty = assert_same_run(net, first / 2, 7)
    assert empty.paths.empty


def test_networks_the_kernel_does_not_cover_take_the_general_path():
    assert slotted.covers(rybko_stolyar("up", 0.9)) and slotted.covers(fork_join(0.9))
    slow = [fork_join(0.9, policy=Orca(768)),
            fork_join(0.9, policy=Sarathi(768, order="sjf_prompt")),
            fork_join(0.9, policy=Sarathi(768, max_reqs=8)),
            fork_join(0.9, time_model=qt.PiecewiseLinearTime(1.0, 0.001, slot=1.0)),
            fork_join(0.9, time_model=qt.UnitTime(slot=2.0))]
    for net in slow:
        assert not slotted.covers(net)
    assert_same_run(slow[0], 200, 8)
    # a static priority that misses a class fails in the general path, with its message
    net = two_type_engine(("short", "long"))
    net.agents["E"] = Agent("E", qt.UnitTime(), 768, policy=StaticPriority(768, [0]))
    assert not slotted.covers(net)
    with pytest.raises(ValueError, match="misses classes"):
        simulate(net, horizon=50, seed=0)


def test_random_small_networks():
    """Budgets of a few tokens to a few dozen, loads on both sides of 1, fixed and Poisson
    lengths: the kernel's decodes, prefills, starvation and joins against the general path."""
    rng = np.random.default_rng(11)
    for i in range(6):
        b = int(rng.integers(4, 40))
        sizes = [tuple(int(x) for x in rng.integers(1, 12, 2)) for _ in range(4)]
        lengths = ("fixed", "poisson")[i % 2]
        rho = float(rng.uniform(0.8, 1.2))
        if i % 3 == 2:
            net = fork_join(rho, sizes=sizes, token_budget=b, lengths=lengths)
        else:
            net = rybko_stolyar(("up", "down")[i % 2], rho, short=sizes[0], long=sizes[1],
                                token_budget=b, lengths=lengths)
        assert_same_run(net, 300, i)


def test_length_streams_draw_as_the_general_path_does():
    """The kernel's list streams give the general path's lengths for any group sizes,
    groups longer than a drawing chunk included."""
    from queuetheory.networks.stepped import _Lengths
    from queuetheory.workload import RequestClass

    law = RequestClass(qt.networks.length_law(20), qt.networks.length_law(7), rate=0.0)
    ref = _Lengths(law, np.random.default_rng(3), chunk=8)
    mine = slotted._Stream(_Lengths(law, np.random.default_rng(3), chunk=8))
    for n in (1, 3, 7, 2, 20, 1, 9, 8, 33, 4):
        p, o = ref.take(n)
        assert mine.take(n) == (p.tolist(), o.tolist())

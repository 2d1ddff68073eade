"""A bounded property-based fuzz of the public entry points: only documented outcomes.

Every call must either return a result whose figures are finite and non-negative (NaN only
for a figure over an empty set: latencies when nothing completed, TTFT when no first token
was emitted, TBT when no request emitted two tokens), or raise a ``ValueError`` /
``TypeError`` whose message names one of the call's parameters, or raise one of the
project's own exceptions (:mod:`queuetheory.errors`) other than ``InfeasibleBatchError`` (a
policy's bug). Anything else — an ``OverflowError``, a ``ZeroDivisionError``, an
``IndexError``, a ``MemoryError``, a bare numpy message — fails. The new layers (stability,
capacity, fit, traces from files, policy constructors, the command line) are fuzzed in
``test_fuzz_layers.py``; the rules and strategies both use live in ``fuzzing.py``.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from fuzzing import FUZZ, _names, check_metrics, lengths, numbers, outcome, rates
from hypothesis import given
from hypothesis import strategies as st

import queuetheory as qt

# ---- time models -------------------------------------------------------------------------
TIME_NAMES = ["c", "a", "b0", "slot", "d0", "d1", "per_prefill", "per_decode", "b", "budget",
              "time_model", "prefill_tokens", "decode_tokens"]


@st.composite
def time_models(draw):
    kind = draw(st.sampled_from(["piecewise", "linear", "affine", "unit"]))
    slot = draw(st.one_of(st.none(), numbers))
    x, y, z = draw(numbers), draw(numbers), draw(numbers)
    if kind == "piecewise":
        return lambda: qt.PiecewiseLinearTime(x, y, z, slot)
    if kind == "linear":
        return lambda: qt.LinearMemoryTime(x, y, slot)
    if kind == "affine":
        return lambda: qt.AffineTokenTime(x, y, z, slot)
    return lambda: qt.UnitTime(slot)


# valid time models, so that the simulations run (absurd ones are test_time_models's)
sane_time_models = st.sampled_from([
    lambda: qt.UnitTime(), lambda: qt.PiecewiseLinearTime(2.0, 0.1, 8),
    lambda: qt.PiecewiseLinearTime(1.0, 0.5, 0, slot=0.7), lambda: qt.LinearMemoryTime(0.5, 0.01),
    lambda: qt.AffineTokenTime(1.0, 0.02, 0.05), lambda: qt.TiledGPUTime.illustrative(),
])


@FUZZ
@given(time_models(), numbers, numbers, numbers)
def test_time_models(make, b, prefill, decode):
    tm = outcome(make, TIME_NAMES)
    if tm is None:
        return
    for call in (lambda: tm.token_time(b), lambda: tm.full_batch_time(prefill, decode, b)):
        out = outcome(call, TIME_NAMES)
        assert out is None or (math.isfinite(out) and out >= 0)


# ---- workloads -------------------------------------------------------------------------------
WORKLOAD_NAMES = ["prompt", "output", "rate", "arrivals", "slot", "horizon", "n_requests",
                  "arrival", "cls_", "lo", "hi", "priority", "classes", "peak"]


@FUZZ
@given(st.lists(st.tuples(lengths, lengths, rates), min_size=1, max_size=3),
       st.sampled_from(["poisson", "deterministic", "bernoulli", "poisson-slot"]),
       st.one_of(st.none(), numbers), st.one_of(st.none(), st.integers(-1, 60)))
def test_workload_sampling(classes, arrivals, horizon, n):
    def draw():
        wl = qt.Workload([qt.RequestClass(p, o, r) for p, o, r in classes], arrivals=arrivals)
        return wl.sample(horizon=horizon, n_requests=n, seed=0)

    tr = outcome(draw, WORKLOAD_NAMES)
    if tr is not None:
        assert np.all(tr.prompt >= 1) and np.all(tr.output >= 1)
        assert np.all(np.diff(tr.arrival) >= 0)


@FUZZ
@given(st.integers(0, 5).flatmap(lambda n: st.tuples(
    st.lists(numbers, min_size=n, max_size=n), st.lists(lengths, min_size=n, max_size=n),
    st.lists(lengths, min_size=n, max_size=n),
    st.one_of(st.none(), st.lists(st.integers(-1, 3), min_size=n, max_size=n + 1)),
    st.one_of(st.none(), st.lists(lengths, min_size=0, max_size=n)))))
def test_from_arrays(args):
    arrival, prompt, output, cls_, lo = args
    wl = outcome(lambda: qt.Workload.from_arrays(arrival, prompt, output, cls_, lo=lo),
                 WORKLOAD_NAMES)
    if wl is not None:
        tr = wl.sample()
        assert len(tr) == len(arrival) and np.all(tr.prompt >= 1)


# ---- simulate with every policy ------------------------------------------------------------
def _policies(budget: int, n_classes: int) -> dict:
    p = qt.policies
    return {
        "Sarathi": lambda: p.Sarathi(budget), "Orca": lambda: p.Orca(budget),
        "VLLMVanilla": lambda: p.VLLMVanilla(budget),
        "FasterTransformer": lambda: p.FasterTransformer(budget),
        "FasterTransformer-request": lambda: p.FasterTransformer(budget, mode="request"),
        "KFCFS": lambda: p.KFCFS(p.Sarathi(budget), budget, budget),
        "StaticPriority": lambda: p.StaticPriority(budget, tuple(range(n_classes))),
        "RAD": lambda: p.RAD((16, 16, 16)),
        "CycleScheduler": lambda: p.CycleScheduler((16, 16, 16)),
        "RequestLevel": lambda: p.RequestLevel(4), "SLAI": lambda: p.SLAI(budget),
        "PrefillOnly": lambda: p.PrefillOnly(), "DecodeOnly": lambda: p.DecodeOnly(),
        "HSF": lambda: p.HSF(), "AMax": lambda: p.AMax(), "ARandom": lambda: p.ARandom(),
        "AMin": lambda: p.AMin(), "AEll": lambda: p.AEll(),
        "AdaptiveRobust": lambda: p.AdaptiveRobust(),
        "FCFSRestart": lambda: p.FCFSRestart(), "MCSF": lambda: p.MCSF(), "FCFS": lambda: p.FCFS(),
        "AlphaProtection": lambda: p.AlphaProtection(0.2),
        "VLLMV1": lambda: p.VLLMV1(8, budget, num_gpu_blocks=64, block_size=4),
    }


POLICY_NAMES = sorted(_policies(8, 1))
SIM_NAMES = WORKLOAD_NAMES + TIME_NAMES + [
    "workload", "policy", "memory", "token_budget", "max_iterations", "first_token", "tile",
    "thresholds", "classes"]


def test_every_policy_is_fuzzed():
    import inspect

    exported = {n for n in qt.policies.__all__ if inspect.isclass(getattr(qt.policies, n))
                and issubclass(getattr(qt.policies, n), qt.policies.Policy)}
    assert exported - {"Policy"} <= {n.split("-")[0] for n in POLICY_NAMES} | {"WAIT",
                                                                             "NestedWAIT"}


@FUZZ
@given(st.sampled_from(POLICY_NAMES + ["WAIT"]),
       st.lists(st.tuples(st.integers(1, 12), st.integers(1, 12), st.floats(0.01, 0.6)),
                min_size=1, max_size=2),
       st.one_of(sane_time_models, time_models()), st.one_of(st.none(), st.integers(0, 300)),
       st.one_of(st.none(), st.integers(0, 80)), st.integers(1, 80),
       st.one_of(st.floats(1.0, 300.0), st.none()),
       st.sampled_from(["prefill", "decode"]))
def test_simulate_every_policy(name, classes, make_tm, memory, token_budget, budget, horizon,
                               first_token):
    tm = outcome(make_tm, TIME_NAMES)
    if tm is None:
        return
    cls = [qt.RequestClass(p, o, r) for p, o, r in classes]
    if name == "WAIT":
        def make_policy():
            return qt.policies.WAIT([1] * len(cls), cls)
    else:
        make_policy = _policies(budget, len(cls))[name]

    def run():
        return qt.simulate(qt.Workload(cls), make_policy(), tm, memory=memory,
                           token_budget=token_budget, horizon=horizon,
                           n_requests=None if horizon else 30, first_token=first_token,
                           max_iterations=5000, seed=1)

    res = outcome(run, SIM_NAMES)
    if res is not None:
        check_metrics(res)


# ---- fluid, bounds, networks, CLI --------------------------------------------------------------
ANALYTIC_NAMES = ["classes", "d0", "d1", "margin", "rule", "batch_limit", "b", "lam", "mp",
                  "md", "m_p", "m_d", "workload", "time_model", "b_max", "thresholds", "rho",
                  "K", "router", "priority", "prompt", "output", "rate"] + TIME_NAMES


@FUZZ
@given(st.lists(st.tuples(st.integers(1, 6), st.integers(1, 6), rates), min_size=1, max_size=3),
       numbers, numbers, st.floats(0.0, 0.9))
def test_fluid(classes, d0, d1, margin):
    def build():
        return [qt.RequestClass(p, o, r) for p, o, r in classes]

    cls = outcome(build, ANALYTIC_NAMES)
    if cls is None:
        return
    eq = outcome(lambda: qt.fluid.equilibrium(cls, d0=d0, d1=d1), ANALYTIC_NAMES)
    if eq is not None:
        assert eq.throughput >= eq.decode_throughput >= 0
    n = outcome(lambda: qt.fluid.wait_thresholds(cls, d0, d1, margin=margin), ANALYTIC_NAMES)
    if n is not None:
        assert np.all(n >= 1)
        cond = qt.fluid.wait_condition(n, cls, d0, d1)
        assert cond.holds


@FUZZ
@given(time_models(), numbers, numbers, numbers, numbers)
def test_bounds(make_tm, b, lam, mp, md):
    tm = outcome(make_tm, TIME_NAMES)
    if tm is None:
        return
    for call in (lambda: qt.bounds.token_capacity(tm, b),
                 lambda: qt.bounds.max_token_rate(tm, b, warn=False).rate,
                 lambda: qt.bounds.min_token_budget(lam, mp, md, tm),
                 lambda: qt.bounds.max_stable_rate((mp, md), tm, b)):
        out = outcome(call, ANALYTIC_NAMES)
        assert out is None or (math.isfinite(out) and out >= 0)


@FUZZ
@given(st.sampled_from(["rybko_stolyar", "parallel", "two_type_engine", "fork_join"]),
       numbers, st.sampled_from(["up", "down", None, "random", "round_robin", "bogus"]),
       st.integers(-1, 5))
def test_network_builders(builder, rho, choice, K):
    n = qt.networks
    calls = {"rybko_stolyar": lambda: n.rybko_stolyar(priority=choice, rho=rho),
             "parallel": lambda: n.parallel(K, router=choice, rho=rho),
             "two_type_engine": lambda: n.two_type_engine(choice, rho=rho),
             "fork_join": lambda: n.fork_join(rho)}
    net = outcome(calls[builder], ANALYTIC_NAMES)
    if net is not None:
        rep = outcome(lambda: n.stability_report(net), ANALYTIC_NAMES)
        assert rep is None or rep.conditions is not None


NETWORK_NAMES = ["node", "class", "agent", "source", "router", "fork", "join", "routes",
                 "network", "rate", "horizon"]
#: the rules a network can break, by the shapes that can break them (None: a valid network)
DEFECTS = {None: ("chain", "router", "fork_join"), "unknown_node": ("chain", "router",
           "fork_join"), "loop": ("chain", "fork_join"), "bad_router": ("router",),
           "bad_rate": ("chain", "router", "fork_join"), "no_source": ("chain", "router",
           "fork_join"), "unknown_agent": ("chain", "fork_join"),
           "join_without_fork": ("fork_join",), "bad_horizon": ("chain", "router", "fork_join")}


def small_network(shape, stages, time_models, budget, rate, router, slot, defect):
    """A ``chain`` of ``stages`` (prompt, output) over the agents in turn, a ``router`` over
    one class per agent, or a ``fork_join`` (c0, then c1 ∥ c2, then c3), with the rule
    ``defect`` broken. Every agent serves a class."""
    net = qt.networks.AgentNetwork(slot=slot)
    if shape == "chain":
        time_models = time_models[:len(stages)]
    agents = [f"A{k}" for k in range(len(time_models))]
    for a, tm in zip(agents, time_models, strict=True):
        net.add_agent(a, tm, budget)
    if defect == "bad_rate":
        rate = (0.0, -1.0, float("nan"), float("inf"))[len(stages)]
    (p, o), last = stages[0], agents[-1]
    if shape == "chain":
        on = [(agents[k % len(agents)], p_k, o_k) for k, (p_k, o_k) in enumerate(stages)]
        if defect == "unknown_agent":
            on.append(("Z", p, o))
        first = net.add_route("r", rate, on, to="r1" if defect == "loop" else "sink")[0]
    elif shape == "router":
        names = [f"c{k}" for k in range(len(agents))]
        for name, a in zip(names, agents, strict=True):
            net.add_class(name, a, p, o)
        first = "lb"
        net.add_router(first, names, router="nearest" if defect == "bad_router" else router)
        net.add_source("src", rate, first)
    else:
        first = "c0"
        net.add_class(first, agents[0], p, o, to="fork")
        net.add_fork("fork", ["c1", "c2"])
        net.add_class("c1", agents[0], p, o, to="join")
        net.add_class("c2", "Z" if defect == "unknown_agent" else last, p, o, to="join")
        net.add_join("join", "c0" if defect == "join_without_fork" else "fork",
                     to=first if defect == "loop" else "c3")
        net.add_class("c3", last, *stages[-1])
        net.add_source("src", rate, first)
    if defect == "unknown_node":
        net.add_edge(first, "nowhere")
    if defect == "no_source":
        net.remove_nodes_from(net.nodes_of("source"))
    return net


@FUZZ
@given(st.sampled_from(["chain", "router", "fork_join"]),
       st.lists(st.tuples(st.integers(1, 6), st.integers(1, 6)), min_size=1, max_size=3),
       st.lists(st.sampled_from([qt.UnitTime(), qt.PiecewiseLinearTime(1.0, 0.05, 8)]),
                min_size=1, max_size=2),
       st.integers(6, 24), st.floats(0.01, 0.3), st.sampled_from(qt.networks.ROUTERS),
       st.sampled_from([None, 1.0]), st.sampled_from(list(DEFECTS)), st.floats(5.0, 150.0),
       st.integers(0, 3))
def test_network_simulate(shape, stages, time_models, budget, rate, router, slot, defect,
                          horizon, seed):
    """A broken network is refused with a ValueError naming the node or the parameter; a
    valid one runs, and every request is accounted for: finished, or with a task still in
    an engine at the horizon (none stranded between nodes)."""
    defect = defect if shape in DEFECTS[defect] else None
    if defect == "bad_horizon":
        horizon = (0.0, -5.0, float("inf"), float("nan"))[seed]
    net = small_network(shape, stages, time_models, budget, rate, router, slot, defect)
    if defect is not None:
        with pytest.raises(ValueError) as err:
            qt.networks.simulate(net, horizon=horizon, seed=seed)
        assert _names(str(err.value), NETWORK_NAMES), str(err.value)
        return
    res = qt.networks.simulate(net, horizon=horizon, seed=seed)
    m = res.metrics
    assert m["completed"] + m["requests_end"] == m["arrived"] == len(res.requests)
    served = sum(int(e.log.column("token_load").sum()) for e in res.engines.values())
    assert served + sum(int(e.work) for e in res.engines.values()) == res.tokens_in
    visits = res.visits
    assert set(visits["request"]) == set(res.requests.index)      # every request entered
    inside = visits["finish"].isna() | (visits["finish"] >= horizon)
    unfinished = set(res.requests.index[res.requests["finish"].isna()])
    stranded = unfinished - set(visits.loc[inside, "request"])
    assert not stranded, f"requests {sorted(stranded)} neither finished nor in an engine"
    done = res.requests.loc[res.requests["finish"].notna(), ["arrival", "finish"]]
    last = visits.groupby("request")["finish"].max()
    assert (done["finish"] >= done["arrival"]).all()
    assert (last.loc[done.index] <= done["finish"]).all()


@FUZZ
@given(st.sampled_from(["sarathi", "orca", "vllm", "fastertransformer", "bogus"]),
       numbers, lengths, lengths, st.integers(-1, 600), numbers,
       st.sampled_from(["unit", "45.5,0.30,64", "1,2", "x,y,z", "1,0.1,8"]))
def test_cli_simulate(policy, rate, prompt, output, budget, horizon, time):
    from queuetheory.cli import main

    argv = ["simulate", "--policy", policy, "--rate", str(rate), "--prompt", str(prompt),
            "--output", str(output), "--budget", str(budget), "--horizon", str(horizon),
            "--time", time, "--json"]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert main(argv) == 0
    except SystemExit as exit_:
        assert isinstance(exit_.code, str) and exit_.code.startswith("queuetheory"), exit_.code


@pytest.fixture(autouse=True)
def _no_progress_output(capsys):
    yield
    capsys.readouterr()


TRACE_NAMES = ["source", "format", "columns", "timestamp_unit", "time_unit", "window", "speedup",
               "rate", "drop_bad", "zero_tokens", "arrival", "prompt", "output", "class"]
cells = st.one_of(numbers, st.sampled_from(["x", None, "", "12"]))


@FUZZ
@given(st.integers(0, 6).flatmap(lambda n: st.tuples(*(st.lists(cells, min_size=n, max_size=n)
                                                       for _ in range(3)))),
       st.one_of(st.none(), st.sampled_from(["s", "ms", "us", "ns", "datetime", "days"])),
       st.sampled_from(["s", "ms", "h"]), st.one_of(st.none(), numbers),
       st.one_of(st.none(), st.tuples(numbers, numbers)), st.booleans(),
       st.sampled_from(["drop", "clip", "keep"]))
def test_read_trace(columns, timestamp_unit, time_unit, rate, window, drop_bad, zero_tokens):
    import pandas as pd

    arrival, prompt, output = columns
    df = pd.DataFrame({"timestamp": arrival, "input_length": prompt, "output_length": output})
    tr = outcome(lambda: qt.workload.read_trace(
        df, timestamp_unit=timestamp_unit, time_unit=time_unit, rate=rate, window=window,
        drop_bad=drop_bad, zero_tokens=zero_tokens), TRACE_NAMES)
    if tr is not None:
        assert np.all(np.isfinite(tr.arrival)) and np.all(np.diff(tr.arrival) >= 0)
        assert np.all(tr.prompt >= 1) and np.all(tr.output >= 1)

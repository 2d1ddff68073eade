"""The fuzz of the newer layers: stability, capacity, timing.fit, traces read from CSV, JSONL
and Parquet files (bad rows, time zones), policy constructors with every argument, the
bounds that size their work, and every command-line subcommand in-process. Only the
documented outcomes of ``fuzzing.py`` are allowed: a result that keeps its invariants, a
``ValueError``/``TypeError`` naming a parameter, or the project's own exception; every call
within ``CALL_LIMIT`` seconds. Example counts are fixed (derandomized) for CI."""

from __future__ import annotations

import inspect
import math
import os
import tempfile

import numpy as np
import pandas as pd
from fuzzing import cli_outcome, counts, fractions, fuzz, numbers, one_bad, outcome
from hypothesis import given
from hypothesis import strategies as st

import queuetheory as qt

P = qt.policies
SMALL = qt.Workload([qt.RequestClass(4, 4, 0.3)])
UNIT = qt.UnitTime()

# fast models and small workloads, so that the runs the arguments allow stay short
time_models = st.sampled_from([qt.UnitTime(), qt.PiecewiseLinearTime(1.0, 0.05, 8),
                               qt.AffineTokenTime(1.0, 0.02, 0.05),
                               qt.LinearMemoryTime(0.5, 0.001)])
small_workloads = st.builds(
    lambda p, o, r: qt.Workload([qt.RequestClass(p, o, r)]),
    st.integers(1, 12), st.integers(1, 12), st.sampled_from([0.05, 0.2, 0.5]))
seeds_ = st.one_of(st.lists(counts, max_size=3), counts)
STABILITY_NAMES = ["workload", "time_model", "horizon", "n_requests", "max_horizon", "seeds",
                   "seed", "level", "tolerance", "tail", "blocks", "memory", "token_budget"]


# ---- stability and the growth test ----------------------------------------------------------
@fuzz(25)
@given(small_workloads, time_models, one_bad(
    {"horizon": st.sampled_from([None, 300.0]), "n_requests": st.sampled_from([None, 200]),
     "max_horizon": st.sampled_from([None, 1200.0]),
     "seeds": st.sampled_from([(0,), (1, 2), 3]), "level": st.sampled_from([0.9, 0.99]),
     "tolerance": st.sampled_from([0.03, 0.1]), "tail": st.sampled_from([0.5, 1.0]),
     "blocks": st.sampled_from([5, 10])},
    {"horizon": numbers, "n_requests": counts, "max_horizon": numbers, "seeds": seeds_,
     "level": fractions, "tolerance": numbers, "tail": fractions, "blocks": counts}))
def test_stability(wl, tm, kw):
    kw = {k: v for k, v in kw.items() if v is not None}
    if "horizon" in kw and "n_requests" in kw:
        kw.pop("n_requests")
    v = outcome(lambda: qt.stability(wl, P.Sarathi(16), tm, **kw), STABILITY_NAMES)
    if v is not None:
        assert v.verdict in ("stable", "unstable", "inconclusive")
        lo, hi = v.drift_interval
        assert lo <= v.drift <= hi and math.isfinite(lo) and math.isfinite(hi)
        assert len(v.runs) == len(set(v.runs["seed"])) >= 1


@fuzz(25)
@given(st.sampled_from([None, 50.0, 500.0]), one_bad(
    {"quantity": st.sampled_from(["unfinished_tokens", "in_system"]),
     "tail": st.sampled_from([0.5, 0.25]), "blocks": st.integers(3, 12),
     "level": st.sampled_from([0.9, 0.99]), "tolerance": st.sampled_from([0.03, 0.5])},
    {"quantity": st.just("memory"), "tail": fractions, "blocks": counts, "level": fractions,
     "tolerance": numbers}))
def test_growth_rate(horizon, kw):
    res = outcome(lambda: qt.simulate(SMALL, P.Sarathi(16), UNIT, horizon=horizon,
                                      n_requests=None if horizon else 200), STABILITY_NAMES)
    g = outcome(lambda: qt.growth_rate(res, **kw),
                ["quantity", "tail", "blocks", "level", "tolerance", "growth_rate"])
    if g is not None:
        assert g.ci_low <= g.slope <= g.ci_high and g.tolerance > 0
        assert g.verdict in ("stable", "unstable", "inconclusive")
        assert 0 <= g.window[0] < g.window[1] <= res.end_time


# ---- capacity ---------------------------------------------------------------------------------
CAPACITY_NAMES = STABILITY_NAMES + [
    "policy", "rate", "tol", "first_token", "max_horizon_factor", "max_probes",
    "max_probe_requests", "bracket", "slo", "attainment", "warmup", "stable_limit", "target_rate",
    "router", "max_replicas", "prompt", "output", "b", "budget", "trace", "boundary", "points",
    "decode_tokens", "m_p", "m_d", "d0", "d1", "c", "a", "b0", "per_prefill", "per_decode",
    "lam", "thresholds", "classes", "rates"]
capacity_policies = st.sampled_from([
    lambda b: P.Sarathi(b), lambda b: P.VLLMVanilla(b), lambda b: P.FasterTransformer(b),
    lambda b: P.SLAI(b), lambda b: P.MCSF(), lambda b: P.WAIT([2], [qt.RequestClass(4, 4, 0.1)]),
    lambda b: P.RAD((16, 16, 16))])


@fuzz(40)
@given(st.lists(st.tuples(st.integers(1, 40), st.integers(1, 40), st.floats(0.01, 1.0)),
                min_size=1, max_size=2),
       st.one_of(time_models, st.just(qt.TiledGPUTime.illustrative())), capacity_policies,
       st.one_of(numbers, st.sampled_from([2**62, 64, 512])),
       st.one_of(st.none(), numbers, st.sampled_from([2**62, 10**6])),
       st.sampled_from(["prefill", "decode", "both"]))
def test_capacity_bounds(classes, tm, make_policy, budget, memory, first_token):
    wl = qt.Workload([qt.RequestClass(p, o, r) for p, o, r in classes])
    br = outcome(lambda: qt.capacity.bounds(wl, tm, token_budget=budget, memory=memory,
                                            policy=outcome(lambda: make_policy(64), []),
                                            first_token=first_token), CAPACITY_NAMES)
    if br is not None and not br.empty:
        assert 0 <= br.lower <= br.upper < math.inf
        assert np.all(np.isfinite(br.table["rate"])) and np.all(br.table["rate"] >= 0)


@fuzz(12)
@given(small_workloads, one_bad(
    {"tol": st.sampled_from([0.05, 0.2]), "tolerance": st.sampled_from([0.03, 0.1]),
     "seeds": st.sampled_from([(0,), (1, 2)]), "max_probes": st.integers(1, 3),
     "n_requests": st.sampled_from([None, 200]), "max_probe_requests": st.just(3000),
     "max_horizon_factor": st.sampled_from([1.0, 2.0]), "level": st.just(0.99)},
    {"tol": fractions, "tolerance": fractions, "seeds": seeds_, "max_probes": counts,
     "n_requests": counts, "max_probe_requests": numbers, "max_horizon_factor": numbers,
     "level": fractions}))
def test_max_rate(wl, kw):
    m = outcome(lambda: qt.capacity.max_rate(wl, P.Sarathi(16), UNIT, **kw), CAPACITY_NAMES)
    if m is not None:
        lo, hi = m.interval
        assert 0 <= lo <= m.rate <= hi <= m.bracket.upper * (1 + 1e-9)


slos = st.one_of(
    st.dictionaries(st.sampled_from(["ttft", "tbt", "tpot", "latency", "p99"]), numbers,
                    max_size=3),
    st.sampled_from([None, "fast", {"ttft": 50.0, "latency": 400.0}]))


@fuzz(12)
@given(small_workloads, one_bad(
    {"slo": st.sampled_from([{"ttft": 20.0, "tbt": 5.0}, {"latency": 100.0}]),
     "attainment": st.sampled_from([0.5, 0.9]), "warmup": st.sampled_from([0.0, 0.2]),
     "seeds": st.sampled_from([(0,), (1, 2)]), "n_requests": st.integers(50, 300),
     "max_probes": st.integers(1, 4), "stable_limit": st.sampled_from([None, 0.2])},
    {"slo": slos, "attainment": fractions, "warmup": fractions, "seeds": seeds_,
     "n_requests": counts, "max_probes": counts, "stable_limit": numbers}))
def test_goodput(wl, kw):
    g = outcome(lambda: qt.capacity.goodput(wl, P.Sarathi(16), UNIT, **kw), CAPACITY_NAMES)
    if g is not None:
        lo, hi = g.interval              # the seeds' interval around their mean answer
        if len(g.per_seed) > 1 or not g.met:
            assert 0 <= lo <= g.rate <= hi
        else:                            # one seed: no sampling interval
            assert np.isnan(lo) and np.isnan(hi)
        assert g.met or g.rate == 0


@fuzz(8)
@given(one_bad(
    {"target_rate": st.sampled_from([0.3, 1.0]), "slo": st.just({"latency": 100.0}),
     "router": st.sampled_from(["round_robin", "least_tokens"]),
     "max_replicas": st.integers(1, 4), "n_requests": st.integers(50, 200)},
    {"target_rate": numbers, "slo": slos, "router": st.just("nearest"), "max_replicas": counts,
     "n_requests": counts}))
def test_replicas(kw):
    r = outcome(lambda: qt.capacity.replicas(
        kw.pop("target_rate"), qt.Workload([qt.RequestClass(4, 4, 0.3)]), P.Sarathi(16), UNIT,
        simulator="network", **kw), CAPACITY_NAMES)
    if r is not None:
        assert r.count is None or 1 <= r.at_least <= r.count <= kw["max_replicas"]


@fuzz(30)
@given(numbers, numbers, st.booleans())
def test_replay_and_rescale(rate, horizon, recorded):
    trace = qt.data.azure_trace("code", window=(0, 60))
    out = outcome(lambda: qt.capacity.replay(trace, rate, horizon) if recorded
                  else qt.capacity.at_rate(SMALL, rate), CAPACITY_NAMES)
    if out is not None and recorded:
        assert np.all(np.diff(out.arrival) >= 0) and out.arrival[-1] <= horizon
    elif out is not None:
        assert math.isclose(out.total_rate, rate, rel_tol=1e-12)


# ---- the timing fit --------------------------------------------------------------------------
FIT_NAMES = ["measurements", "model", "relative", "folds", "seed", "dims", "gpu_spec",
             "intervals", "resamples", "duration", "prefill_tokens", "decode_tokens",
             "kv_tokens"]
bad_cells = st.sampled_from([-1, float("nan"), float("inf"), 1e300, "x", None])


@fuzz(30)
@given(st.integers(0, 3), st.integers(4, 40), st.floats(0.0, 0.2), one_bad(
    {"model": st.sampled_from(["affine", "piecewise", "linear_memory", "best"]),
     "folds": st.integers(2, 5), "seed": st.integers(0, 5),
     "intervals": st.sampled_from(["jacobian", "bootstrap"]), "resamples": st.just(20),
     "gpu_spec": st.sampled_from([None, "a100"]), "cell": st.none(), "drop": st.none()},
    {"model": st.sampled_from(["tiled", "cubic", ""]), "folds": counts, "seed": counts,
     "intervals": st.just("exact"), "resamples": counts, "gpu_spec": st.just("tpu"),
     "cell": bad_cells, "drop": st.sampled_from(["kv_tokens", "duration", "all rows"])}))
def test_timing_fit(seed, n, noise, kw):
    """Measured batches from an affine law with noise, perhaps with one bad cell, a missing
    column or no rows: a fit with finite parameters, or a refusal naming the problem."""
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"prefill_tokens": rng.integers(0, 2048, n),
                       "decode_tokens": rng.integers(0, 256, n),
                       "kv_tokens": rng.integers(0, 60_000, n)})
    df["duration"] = (0.016 + 5.8e-5 * df["prefill_tokens"] + 4e-5 * df["decode_tokens"]) \
        * (1 + noise * rng.standard_normal(n)).clip(0.5)
    cell, drop = kw.pop("cell"), kw.pop("drop")
    if cell is not None:
        df = df.astype(object)
        df.iloc[int(rng.integers(n)), int(rng.integers(4))] = cell
    if drop == "all rows":
        df = df.iloc[:0]
    elif drop is not None:
        df = df.drop(columns=drop)
    model = kw.pop("model")
    rep = outcome(lambda: qt.timing.fit(df, model, **kw), FIT_NAMES)
    if rep is not None:
        assert isinstance(rep.model, qt.TimeModel) and rep.heldout_error >= 0
        assert all(math.isfinite(v) for v in rep.params.values())


# ---- traces read from files ------------------------------------------------------------------
TRACE_NAMES = ["source", "format", "columns", "timestamp_unit", "time_unit", "window", "speedup",
               "rate", "drop_bad", "zero_tokens", "arrival", "prompt", "output", "class"]
ZONES = ["+00:00", "+02:00", "-05:00", "Z", ""]
bad_rows = st.sampled_from([("yesterday", 10, 5), ("", 10, 5), (None, 10, 5), (0, "x", 5),
                            (0, 12, None), (0, -3, 5), (0, 1.5, 5), (0, 2**62, 5), (0, 0, 5)])


@fuzz(30)
@given(st.lists(st.tuples(st.floats(0, 30), st.integers(1, 3000), st.integers(0, 500),
                          st.sampled_from(ZONES)), min_size=0, max_size=8),
       st.sampled_from(["csv", "jsonl", "parquet", "csv.gz", "txt"]),
       st.sampled_from(["seconds", "datetime"]), st.one_of(st.none(), bad_rows),
       st.integers(0, 8), one_bad(
           {"time_unit": st.sampled_from(["s", "ms"]), "speedup": st.sampled_from([None, 2.0]),
            "window": st.sampled_from([None, (0.0, 1e6)]), "rate": st.just(None),
            "drop_bad": st.booleans(), "zero_tokens": st.sampled_from(["drop", "clip"])},
           {"time_unit": st.just("h"), "speedup": numbers, "window": st.tuples(numbers, numbers),
            "rate": numbers, "drop_bad": st.just(False), "zero_tokens": st.just("keep")}))
def test_read_trace_from_files(rows, kind, clock, bad, where, kw):
    """A trace as a user's file: gaps in seconds or date-times with UTC offsets (each row
    its own), perhaps one bad row; read to a trace in time order, or refused naming the
    row, the column or the argument."""
    t, table = 0.0, []
    for gap, prompt, output, zone in rows:
        t += gap
        if clock == "datetime":
            stamp = (pd.Timestamp("2024-03-31T00:00:00Z") + pd.Timedelta(seconds=t))
            offset = pd.Timedelta(0) if zone in ("Z", "", "+00:00") else pd.Timedelta(
                hours=int(zone[:3]))
            stamp = (stamp + offset).strftime("%Y-%m-%dT%H:%M:%S.%f") + zone
        else:
            stamp = t
        table.append((stamp, prompt, output))
    if bad is not None:
        table.insert(min(where, len(table)), bad)
    df = pd.DataFrame(table, columns=["timestamp", "input_length", "output_length"],
                      dtype=object)
    unit = None if clock == "datetime" else "s"
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, f"trace.{kind}")
        if kind.startswith("csv") or kind == "txt":
            df.to_csv(path, index=False)
        elif kind == "jsonl":
            df.to_json(path, orient="records", lines=True)
        else:
            try:
                df.astype(str).to_parquet(path)
            except ImportError:
                return
        tr = outcome(lambda: qt.workload.read_trace(path, format="mooncake",
                                                    timestamp_unit=unit or "datetime", **kw),
                     TRACE_NAMES)
    if tr is not None:
        assert len(tr) >= 1 and np.all(np.isfinite(tr.arrival)) and tr.arrival[0] >= 0
        assert np.all(np.diff(tr.arrival) >= 0)
        assert np.all(tr.prompt >= 1) and np.all(tr.output >= 1)


# ---- every policy's constructor ----------------------------------------------------------------
def _public_policies():
    return {name: getattr(P, name) for name in P.__all__
            if inspect.isclass(getattr(P, name)) and issubclass(getattr(P, name), P.Policy)
            and getattr(P, name) is not P.Policy}


POLICIES = _public_policies()
values = st.one_of(numbers, counts, fractions,
                   st.sampled_from(["fcfs", "sjf_prompt", "random", "dynamic", "static",
                                    "gate", "soft", "break", "skip", "recompute", "swap",
                                    "request", "iteration", "spf", "fixed", (1, 0), (16, 16, 16),
                                    (), [2], (0.5, 0.1), None]))


@fuzz(80)
@given(st.sampled_from(sorted(POLICIES)), st.lists(values, max_size=3),
       st.dictionaries(st.sampled_from(["order", "max_reqs", "preemption", "mode", "on_fail",
                                        "max_starts", "evict_key", "chunk", "beta", "alpha",
                                        "delta", "offset", "overflow", "threshold", "cap",
                                        "strict_cycles", "bound", "tbt"]), values, max_size=2),
       st.one_of(st.none(), st.integers(8, 400)), st.sampled_from(["prefill", "decode"]))
def test_policy_constructors(name, args, kwargs, memory, first_token):
    """Any arguments: the policy is built or refused naming a parameter; a built policy runs
    a small workload to a documented outcome (never an infeasible batch)."""
    cls = POLICIES[name]
    sig = inspect.signature(cls)
    names = list(sig.parameters) + ["class_order", "segments", "tile",
                                                          "n", "classes", "thresholds"]
    kwargs = {k: v for k, v in kwargs.items() if k in sig.parameters}
    try:                        # too many or missing arguments: Python's own TypeError
        sig.bind(*args, **kwargs)
    except TypeError:
        return
    policy = outcome(lambda: cls(*args, **kwargs), names)
    if policy is None:
        return
    wl = qt.Workload([qt.RequestClass(4, 3, 0.2), qt.RequestClass(6, 2, 0.1)])
    res = outcome(lambda: qt.simulate(wl, policy, qt.PiecewiseLinearTime(1.0, 0.05, 8),
                                      memory=memory, n_requests=40, first_token=first_token,
                                      max_iterations=4000), STABILITY_NAMES + names + [
                                          "policy", "first_token", "class", "WAIT"])
    if res is not None:
        assert res.metrics["completed"] <= 40


def test_every_policy_class_is_fuzzed():
    assert {"Sarathi", "MCSF", "WAIT", "NestedWAIT", "RAD", "SLAI", "AlphaProtection",
            "StaticPriority", "KFCFS"} <= set(POLICIES)


# ---- bounds that size their own work ---------------------------------------------------------
BOUND_NAMES = ["M", "eps", "prompt", "tm", "objective", "tiles", "arrival", "output", "memory",
               "convention", "solver", "time_limit", "workers", "c", "corrected"]


@fuzz(30)
@given(one_bad({"M": st.sampled_from([64, 256, 1024]), "eps": st.sampled_from([0.25, 1 / 8])},
               {"M": st.one_of(st.sampled_from([2**40, 4096.5, 0]), numbers),
                "eps": st.one_of(st.sampled_from([0.5, 0.3]), numbers)}))
def test_adversarial_instances(kw):
    M, eps = kw["M"], kw["eps"]
    inst = outcome(lambda: qt.bounds.theorem62_instance(M, eps), BOUND_NAMES)
    if inst is not None:
        assert inst.ratio >= 1


@fuzz(20)
@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 4), st.integers(1, 5)),
                max_size=6),
       st.integers(0, 6), one_bad(
           {"memory": st.integers(9, 20), "solver": st.sampled_from(["bnb", "milp", None]),
            "time_limit": st.just(2.0), "extra": st.none()},
           {"memory": numbers, "solver": st.just("magic"),
            "time_limit": st.sampled_from([0, -1, float("nan"), "1"]),
            "extra": st.sampled_from([(10**9, 1, 1), (-1, 1, 1), (2.5, 1, 1), (0, 1, 10**7),
                                      (0, -1, 1)])}))
def test_hindsight_optimum(jobs, where, kw):
    """Small instances (a time limit keeps CI's solves short), perhaps with one bad job or
    argument: an optimum no smaller than the requests' own rounds, or a refusal."""
    if kw["extra"] is not None:
        jobs = jobs[:where] + [kw["extra"]] + jobs[where:]
    arrival, prompt, output = ([list(x) for x in zip(*jobs, strict=True)] if jobs
                               else ([], [], []))
    r = outcome(lambda: qt.bounds.hindsight_optimum(
        arrival, prompt, output, kw["memory"], solver=kw["solver"],
        time_limit=kw["time_limit"]), BOUND_NAMES)
    if r is not None and jobs:
        assert r.starts.size == len(jobs) and np.all(r.starts >= np.asarray(arrival))


@fuzz(20)
@given(st.one_of(st.integers(1, 2000), st.sampled_from([10**6, 0, 2.5, -3])),
       st.sampled_from(["attention", "time", "speed"]))
def test_optimal_chunking(prompt, objective):
    tm = qt.TiledGPUTime.illustrative()
    ch = outcome(lambda: qt.bounds.optimal_chunking(prompt, tm, objective=objective),
                 BOUND_NAMES)
    if ch is not None:
        assert sum(ch.chunks) == prompt


# ---- every subcommand in-process ----------------------------------------------------------
flags = st.one_of(st.integers(-2, 400).map(str), st.sampled_from(
    ["0.5", "nan", "inf", "-1", "x", "1e300", "conv", "code", "/missing/file.csv", "unit",
     "45.5,0.30,64", "a100", "affine:1,0.01,0.02", "piecewise:1,0.1,8", "1,2"]))
#: a good value for each flag, so that about half of the commands run through
GOOD = {"--loads": "0.7", "--seeds": "1", "--requests": "60", "--budget": "256",
        "--memory": "65536", "--alpha": "0.3", "--time": "anchor", "--trace": "code",
        "--prompt": "8", "--output": "6", "--ttft": "50", "--tbt": "5", "--latency": "500",
        "--attainment": "0.8", "--tol": "0.1", "--points": "2", "--seed": "3",
        "--lengths": "fixed", "--policy": "orca", "--format": "azure", "--rate": "2",
        "--horizon": "1500", "--time-unit": "s", "--order": "sjf_total"}


def _argv(pairs, good_too: bool):
    """The flags of ``pairs``: each with its drawn value, or (``good_too``) all but the
    first with a good one."""
    out = []
    for k, (flag, value) in enumerate(pairs):
        out += [flag, value if (k == 0 or not good_too or flag not in GOOD) else GOOD[flag]]
    return out


@fuzz(15)
@given(st.lists(st.tuples(st.sampled_from(["--loads", "--seeds", "--requests", "--budget",
                                           "--memory", "--alpha", "--time", "--trace",
                                           "--bogus"]), flags), max_size=3),
       st.booleans(), st.booleans())
def test_cli_compare(pairs, good_too, good):
    from queuetheory.cli import main

    argv = ["compare", "--quick", "--classic", "--requests", "40", "--seeds", "1",
            "--loads", "0.5"]
    pairs = [(f, GOOD.get(f, v) if good else v) for f, v in pairs]
    pairs = [(f, str(min(int(v), 80)) if f == "--requests" and v.isdigit() else v)
             for f, v in pairs]
    cli_outcome(main, argv + _argv(pairs, good_too))


@fuzz(15)
@given(st.lists(st.tuples(st.sampled_from(["--prompt", "--output", "--budget", "--memory",
                                           "--ttft", "--tbt", "--latency", "--attainment",
                                           "--tol", "--points", "--seed", "--time",
                                           "--lengths", "--trace", "--policy"]), flags),
                max_size=3), st.booleans(), st.booleans())
def test_cli_capacity(pairs, good_too, good):
    from queuetheory.cli import main

    pairs = [(f, GOOD.get(f, v) if good else v) for f, v in pairs]
    pairs = [(f, str(min(int(v), 3)) if f == "--points" and v.isdigit() else v)
             for f, v in pairs]
    with tempfile.TemporaryDirectory() as folder:
        argv = ["capacity", "--time", "unit", "--prompt", "4", "--output", "4", "--requests",
                "100", "--points", "2", "--out", folder]
        cli_outcome(main, argv + _argv(pairs, good_too))


@fuzz(10)
@given(st.lists(st.sampled_from([("--only", "bogus"), ("--json", "/missing/dir/x.json"),
                                 ("--out", "/etc/hostname/report"), ("--bogus", "1"),
                                 ("--only", ""), ("--json", "/etc/hostname/x.json")]),
                min_size=1, max_size=2))
def test_cli_reproduce_refuses_bad_arguments_at_once(pairs):
    """The ledger itself is the claims tests' (minutes); here only arguments that must be
    refused before it starts."""
    from queuetheory.cli import main

    argv = ["reproduce", "--quick"] + [x for pair in pairs for x in pair]
    assert cli_outcome(main, argv) is None


@fuzz(15)
@given(st.lists(st.tuples(st.sampled_from(["--trace", "--format", "--rate", "--horizon",
                                           "--time", "--time-unit", "--memory", "--seed",
                                           "--policy", "--order"]), flags), max_size=3),
       st.booleans(), st.booleans())
def test_cli_simulate_with_traces(pairs, good_too, good):
    from queuetheory.cli import main

    pairs = [(f, GOOD.get(f, v) if good else v) for f, v in pairs
             if f != "--trace" or v in ("conv", "code", "/missing/file.csv")]
    argv = ["simulate", "--trace", "code", "--horizon", "2000", "--json"]
    cli_outcome(main, argv + _argv(pairs, good_too))

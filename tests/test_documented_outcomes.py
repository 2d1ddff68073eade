"""What a new user touches gives a documented outcome: a verdict over the right window, a
marked unstable run, a refusal at start, a result independent of the time unit, and a
ValueError naming the parameter, its value and the rule — sizes refused with an estimate."""

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import queuetheory as qt
from queuetheory.errors import CensoredRunWarning, UnsupportedSettingError

WL = qt.Workload([qt.RequestClass(8, 6, 0.3)])
TM = qt.PiecewiseLinearTime(1.0, 0.01, 16)
UNIT = qt.UnitTime()
LLAMA = qt.PiecewiseLinearTime(45.5, 0.30, 64)


def _quiet(call):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CensoredRunWarning)
        return call()


# ---- a drained trace is judged over its arrivals ------------------------------------------
@pytest.fixture(scope="module")
def conv_ms():
    return qt.data.azure_trace("conv", time_unit="ms")


@pytest.mark.parametrize("speed,verdict", [(1.0, "unstable"), (10.0, "stable")])
def test_a_drained_trace_is_judged_over_its_arrivals_window(conv_ms, speed, verdict):
    """The Azure conv trace on the Llama fit: the backlog grows while requests arrive (the
    drain that follows always shrinks); an engine 10× faster keeps up."""
    tm = qt.PiecewiseLinearTime(45.5 / speed, 0.30 / speed, 64)
    res = qt.simulate(conv_ms, qt.policies.Sarathi(512), tm)
    g = qt.growth_rate(res)
    assert res.end_time > conv_ms.arrival[-1]            # the run drained past the arrivals
    assert g.window[1] == pytest.approx(conv_ms.arrival[-1])
    assert g.verdict == verdict


def test_simulate_cli_on_a_shipped_trace_says_what_it_ran(capsys):
    from queuetheory.cli import main

    assert main(["simulate", "--trace", "conv"]) == 0
    out = capsys.readouterr().out
    assert "# workload: trace conv: 19366 requests" in out
    assert "# policy: Sarathi" in out and "# time_model: PiecewiseLinearTime" in out
    verdict = next(line for line in out.splitlines() if line.startswith("growth_verdict"))
    assert verdict.split()[1] == "unstable"


# ---- compare marks unstable schedulers ------------------------------------------------------
def test_compare_marks_a_scheduler_whose_backlog_grows():
    import matplotlib

    matplotlib.use("Agg")
    from queuetheory.compare import CLASSIC, compare

    result = compare([CLASSIC[2], CLASSIC[3]], loads=[0.5], seeds=1, n_requests=150)
    table = result.table.droplevel(1)
    assert table.loc["FasterTransformer", "completion"] == 1      # drained, yet unstable
    assert table.loc["FasterTransformer", "backlog"] == "grows"
    assert "unstable" in table.loc["FasterTransformer", "note"]
    assert table.loc["Sarathi", "backlog"] != "grows"
    ax = result.figures()["mean_latency"].axes[0]
    labels = ax.get_legend_handles_labels()[1]
    assert any(label.startswith("unstable at this load") for label in labels)
    summary = result.summary()
    assert "mean latency (s)" in summary.columns and "nan" not in summary.to_string()


def test_compare_help_has_no_markup_and_every_option_is_explained(capsys):
    from queuetheory.compare import compare_main

    with pytest.raises(SystemExit):
        compare_main(["--help"])
    out = capsys.readouterr().out
    assert "``" not in out
    for flag in ("--budget", "--memory", "--time", "--seeds"):
        block = out.split(flag, 1)[1].split("\n  -", 1)[0]
        assert len(block.split()) > 3, flag                    # a help text, not just a name


# ---- round-model schedulers and a token budget ----------------------------------------------
ROUND_MODELS = {
    "MCSF": lambda: qt.policies.MCSF(), "FCFS": lambda: qt.policies.FCFS(),
    "AMax": lambda: qt.policies.AMax(), "AMin": lambda: qt.policies.AMin(),
    "HSF": lambda: qt.policies.HSF(), "ARandom": lambda: qt.policies.ARandom(),
    "AEll": lambda: qt.policies.AEll(), "AdaptiveRobust": lambda: qt.policies.AdaptiveRobust(),
    "FCFSRestart": lambda: qt.policies.FCFSRestart(),
    "AlphaProtection": lambda: qt.policies.AlphaProtection(0.2),
    "WAIT": lambda: qt.policies.WAIT([1], [qt.RequestClass(8, 6, 0.3)]),
}


@pytest.mark.parametrize("name", sorted(ROUND_MODELS))
def test_a_round_model_refuses_a_token_budget_before_it_starts(name):
    with pytest.raises(UnsupportedSettingError, match="token_budget=512"):
        qt.simulate(WL, ROUND_MODELS[name](), TM, memory=4096, token_budget=512, n_requests=50)
    # a budget of at least M can never bind: the run goes ahead, every batch within it
    res = _quiet(lambda: qt.simulate(WL, ROUND_MODELS[name](), TM, memory=128,
                                     token_budget=128, n_requests=50))
    assert res.batches["token_load"].max() <= 128


def test_wait_below_its_memory_bound_is_refused_before_it_starts():
    with pytest.raises(UnsupportedSettingError, match=r"M\^π = 77"):
        qt.simulate(WL, ROUND_MODELS["WAIT"](), TM, memory=64, n_requests=50)


def test_capacity_refuses_a_round_model_with_a_budget_before_any_probe():
    with pytest.raises(UnsupportedSettingError, match="max_rate"):
        qt.capacity.max_rate(WL, qt.policies.MCSF(), TM, token_budget=64, memory=4096)


# ---- a result that depends on the time unit --------------------------------------------------
def test_alpha_protection_decides_the_same_in_every_time_unit():
    """Its loop watchdog counts rounds: the same requests in µs, ms and s are served in the
    same batches (it compared elapsed time with a count of rounds)."""
    prompt, output = qt.data.sharegpt_lengths(n=2000)
    wl = qt.Workload.from_arrays(np.zeros(prompt.size), prompt, output)
    runs = []
    for scale in (1e6, 1e3, 1.0):
        tm = qt.AffineTokenTime(16.1e-3 * scale, 57.8e-6 * scale, 39.5e-6 * scale)
        res = _quiet(lambda tm=tm: qt.simulate(wl, qt.policies.AlphaProtection(0.2), tm,
                                               memory=30_000))
        runs.append((res.metrics["completed"], len(res.batches),
                     res.batches["token_load"].to_numpy()))
    for other in runs[1:]:
        assert other[:2] == runs[0][:2]
        assert np.array_equal(other[2], runs[0][2])
    assert runs[0][0] > 1


# ---- lengths, priorities, intervals -------------------------------------------------------
@pytest.mark.parametrize("law,rule", [(stats.uniform(0, 0), "not all finite"),
                                      (stats.norm(-50, 1), "clipped"),
                                      (stats.uniform(1, 1e13), "MAX_LENGTH")])
def test_a_length_law_that_would_be_mangled_is_refused(law, rule):
    with pytest.raises(ValueError, match=rf"prompt=.*{rule}"):
        qt.RequestClass(prompt=law, output=5, rate=1.0)


@pytest.mark.parametrize("priority", [float("nan"), "hi", 1.5, float("inf")])
def test_a_priority_must_be_an_integer(priority):
    with pytest.raises(ValueError, match="priority="):
        qt.RequestClass(8, 6, 0.3, priority=priority)


@pytest.mark.parametrize("bounds", [((0, 10),), ((5, 3),), (), ((1.5, 3),), "x"])
def test_class_intervals_are_checked_when_built(bounds):
    with pytest.raises(ValueError, match="bounds="):
        qt.ClassInterval(bounds)


# ---- arguments of the new layers ----------------------------------------------------------
@pytest.fixture(scope="module")
def small_run():
    return qt.simulate(WL, qt.policies.Sarathi(64), TM, horizon=2000)


@pytest.mark.parametrize("kwargs,name", [({"level": 1.5}, "level"),
                                         ({"tolerance": -1}, "tolerance"),
                                         ({"blocks": 2.5}, "blocks"), ({"tail": 1e-300}, "tail")])
def test_growth_rate_arguments(small_run, kwargs, name):
    with pytest.raises(ValueError, match=f"{name}="):
        qt.growth_rate(small_run, **kwargs)


@pytest.mark.parametrize("kwargs,name", [
    ({"n_requests": 2.5}, "n_requests"), ({"seeds": [1.5]}, "seeds"), ({"seeds": [-1]}, "seeds"),
    ({"seeds": ()}, "seeds"), ({"tail": 1e-300}, "tail"), ({"blocks": float("nan")}, "blocks")])
def test_stability_arguments(kwargs, name):
    with pytest.raises(ValueError, match=f"{name}="):
        qt.stability(WL, qt.policies.Sarathi(64), TM, **kwargs)


@pytest.mark.parametrize("kwargs,name", [({"max_probes": 0}, "max_probes"),
                                         ({"seeds": ()}, "seeds"),
                                         ({"stable_limit": 0}, "stable_limit")])
def test_goodput_arguments(kwargs, name):
    with pytest.raises(ValueError, match=f"{name}="):
        qt.capacity.goodput(WL, qt.policies.Sarathi(64), TM, slo={"latency": 100}, **kwargs)


@pytest.mark.parametrize("kwargs,name", [({"tolerance": 1.0}, "tolerance"),
                                         ({"level": 0}, "level"), ({"seeds": [-2]}, "seeds"),
                                         ({"max_probes": 0}, "max_probes")])
def test_max_rate_arguments(kwargs, name):
    with pytest.raises(ValueError, match=f"{name}="):
        qt.capacity.max_rate(WL, qt.policies.Sarathi(64), TM, **kwargs)


def test_vllm_unit_time_rate_is_skipped_when_no_request_decodes():
    """Output 1 with the prefill iteration emitting it: no decode round, so Li, Dai, Peng's
    vLLM λ* does not bound the rate (it asked for decode_tokens=0, no such argument)."""
    br = qt.capacity.bounds(qt.Workload([qt.RequestClass(8, 1, 0.3)]), qt.UnitTime(),
                            token_budget=64, policy=qt.policies.VLLMVanilla(64))
    assert "vLLM λ*" not in set(br.table["name"]) and br.upper > 0


@pytest.mark.parametrize("call,name", [
    (lambda: qt.simulate(WL, qt.policies.Sarathi(64), TM, horizon=100, seed=-1), "seed"),
    (lambda: qt.simulate(WL, qt.policies.Sarathi(64), TM, horizon=100, warmup=1e9), "warmup"),
    (lambda: qt.simulate(WL, qt.policies.Sarathi(64), TM, n_requests=5, warmup=1e9).metrics,
     "warmup"),
    (lambda: qt.policies.StaticPriority(64, ()), "class_order"),
    (lambda: qt.bounds.theorem62_instance(4096.5, 0.25), "M"),
    (lambda: qt.bounds.theorem62_instance(4096, "x"), "eps"),
    (lambda: qt.data.azure_trace(["conv"]), "name"),
])
def test_arguments_named_in_the_error(call, name):
    with pytest.raises(ValueError, match=f"{name}="):
        call()


def _measurements(n=40):
    k = np.arange(n)
    return pd.DataFrame({"prefill_tokens": 10 * k, "decode_tokens": k % 7, "kv_tokens": 3 * k,
                         "duration": 1 + 0.01 * k})


@pytest.mark.parametrize("kwargs,name", [({"folds": float("inf")}, "folds"),
                                         ({"seed": -1}, "seed"), ({"folds": "x"}, "folds")])
def test_timing_fit_arguments(kwargs, name):
    with pytest.raises(ValueError, match=f"{name}="):
        qt.timing.fit(_measurements(), **kwargs)


# ---- traces -----------------------------------------------------------------------------------
def test_read_trace_honours_utc_offsets():
    """The same instant written with two offsets is the same arrival; local time that runs
    backwards is a bad row named as such, not pandas' 'Mixed timezones' message."""
    df = pd.DataFrame({"timestamp": ["2024-01-01T00:00:00+00:00", "2024-01-01T02:00:05+02:00",
                                     "2024-01-01T00:00:10+00:00"],
                       "input_length": [10, 11, 12], "output_length": [5, 6, 7]})
    tr = qt.workload.read_trace(df, timestamp_unit="datetime")
    assert np.allclose(tr.arrival, [0, 5, 10])
    df.loc[1, "timestamp"] = "2024-01-01T03:00:05+04:00"          # 23:00:05 the day before
    with pytest.raises(ValueError, match="row 1.*earlier than a timestamp above it"):
        qt.workload.read_trace(df, timestamp_unit="datetime")


def test_read_trace_refuses_a_duplicated_column():
    df = pd.DataFrame([[0, 1, 2, 3], [1, 2, 3, 4]],
                      columns=["timestamp", "input_length", "input_length", "output_length"])
    with pytest.raises(ValueError, match="'input_length'.*appears 2 times"):
        qt.workload.read_trace(df)


@pytest.mark.parametrize("kwargs,name", [({"speedup": 1e-300}, "speedup"),
                                         ({"rate": 1e-320}, "rate")])
def test_read_trace_refuses_a_rescaling_past_the_clock(kwargs, name):
    df = pd.DataFrame({"timestamp": [0, 1, 2.0], "input_length": [3, 4, 5],
                       "output_length": [3, 4, 5]})
    with pytest.raises(ValueError, match=f"{name}=.*2\\*\\*53"):
        qt.workload.read_trace(df, **kwargs)


# ---- sizes estimated before allocating ---------------------------------------------------
@pytest.mark.parametrize("call,estimate", [
    (lambda: qt.capacity.replay(qt.data.azure_trace("code"), 1.0, 1e9), "GiB"),
    (lambda: qt.capacity.replay(qt.data.azure_trace("code"), 1e300, 100.0), "GiB"),
    (lambda: qt.bounds.hindsight_optimum([0, 10**9], [1, 1], [1, 1], 4, solver="bnb"), "GiB"),
    (lambda: qt.bounds.theorem62_instance(2**40, 0.25), "minutes"),
    (lambda: qt.bounds.optimal_chunking(10**6, qt.TiledGPUTime.illustrative()), "minutes"),
])
def test_a_size_that_would_exhaust_memory_or_time_is_refused_with_an_estimate(call, estimate):
    with pytest.raises(ValueError, match=estimate):
        call()


def test_huge_capacity_bounds_need_no_huge_array():
    """A token-count model's memory-full batch is timed from its counts (it built an array
    of 2^62 KV lengths: 3 EiB)."""
    br = qt.capacity.bounds(WL, TM, token_budget=2**62, memory=2**62)
    assert br.upper > 0


# ---- the command line ----------------------------------------------------------------------
def test_capacity_cli_fixed_lengths_are_used_not_sharegpt(tmp_path, capsys):
    from queuetheory.cli import main

    assert main(["capacity", "--prompt", "100", "--output", "50", "--requests", "300",
                 "--points", "2", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "mean prompt 100.0, output 50.0 tokens" in out
    assert "SLO targets {'ttft': 1.0, 'tbt': 0.1} in s" in out
    with pytest.raises(SystemExit, match="--prompt/--output"):
        main(["capacity", "--lengths", "sharegpt", "--prompt", "100"])


def test_capacity_cli_help_gives_units_and_every_option(capsys):
    from queuetheory.capacity.cli import _cli_parser

    text = _cli_parser().format_help()
    for flag in ("--seed", "--budget", "--memory", "--ttft", "--tbt"):
        block = text.split(flag, 1)[1].split("\n  -", 1)[0]
        assert len(block.split()) > 3, flag
    assert "time model's unit" in text


def test_reproduce_refuses_an_unwritable_json_at_once():
    from queuetheory.cli import main

    with pytest.raises(SystemExit, match="--json.*does not exist"):
        main(["reproduce", "--quick", "--json", "/missing/dir/x.json"])


def test_reproduce_collects_the_ledgers_censored_warnings():
    from queuetheory.cli import _censored_quietly

    with pytest.warns(UserWarning, match="another"):
        with _censored_quietly() as censored:
            warnings.warn("cut on purpose", CensoredRunWarning, stacklevel=1)
            warnings.warn("another", UserWarning, stacklevel=1)
    assert len(censored) == 1


def test_stability_accepts_no_trace_and_says_how_to_judge_one():
    tr = WL.sample(n_requests=20)
    with pytest.raises(ValueError, match="growth_rate"):
        qt.stability(tr, qt.policies.Sarathi(64), TM)


# ---- figures -------------------------------------------------------------------------------
def test_a_stability_verdict_plots_its_evidence():
    import matplotlib

    matplotlib.use("Agg")
    wl = qt.Workload([qt.RequestClass(100, 50, 3.3)])
    v = qt.stability(wl, qt.policies.VLLMVanilla(512), qt.UnitTime(), seeds=(0, 1),
                     horizon=3000.0)
    ax = v.plot(rho=wl.token_rate / 512)
    labels = ax.get_legend_handles_labels()[1]
    assert {"seed 0", "seed 1"} <= set(labels)
    assert any(label.startswith("drift") for label in labels)
    assert any(label.startswith("tolerance") for label in labels)
    assert ax.get_title().startswith(v.verdict) and "ρ = " in ax.get_title()
    assert ax.get_yscale() == "linear"


def test_the_capacity_figure_crosses_out_rates_past_the_boundary():
    import matplotlib

    matplotlib.use("Agg")
    br = qt.capacity.bounds(WL, UNIT, token_budget=16, policy=qt.policies.Sarathi(16))
    rates = np.array([0.3, 0.6, 1.2]) * br.upper
    curve = qt.capacity.load_curve(WL, qt.policies.Sarathi(16), UNIT, rates,
                                   slo={"latency": 50.0}, n_requests=200)
    axes = qt.capacity.plot_capacity(curve, br, slo={"latency": 50.0})
    assert len(axes) == 3
    lat_labels = axes[0].get_legend_handles_labels()[1]
    assert "past the stability boundary: no steady state" in lat_labels
    assert any(label.startswith("latency target") for label in lat_labels)
    line = axes[0].get_lines()[0]
    assert line.get_xdata().max() <= br.upper          # no line is drawn past the boundary


def test_a_seed_given_twice_is_refused_not_pooled_as_two_runs():
    with pytest.raises(ValueError, match="seeds=.*twice"):
        qt.stability(WL, qt.policies.Sarathi(64), TM, seeds=[0, 0])

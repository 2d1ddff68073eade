"""Production traces: every file format, the presets, the options, each kind of bad row."""

import json
import warnings

import numpy as np
import pandas as pd
import pytest

import queuetheory as qt
from queuetheory.compare import ANCHOR_TIME
from queuetheory.workload import read_trace, trace_stats

AZURE = pd.DataFrame({
    "TIMESTAMP": ["2023-11-16 18:15:46.6805900", "2023-11-16 18:15:50.9951690",
                  "2023-11-16 18:15:51.0000000", "2023-11-16 18:16:00.5000000"],
    "ContextTokens": [374, 396, 879, 10],
    "GeneratedTokens": [44, 109, 55, 3],
})
AZURE_T = np.array([0.0, 4.314579, 4.31941, 13.81941])


def _burstgpt():
    return pd.DataFrame({"Timestamp": [5.0, 6.5, 6.5, 9.0], "Model": ["GPT-4", "ChatGPT",
                         "GPT-4", "ChatGPT"], "Request tokens": [100, 20, 30, 40],
                         "Response tokens": [10, 0, 5, 7], "Total tokens": [110, 20, 35, 47],
                         "Log Type": ["Conversation log"] * 4})


def _mooncake_lines():
    return [{"timestamp": 0, "input_length": 6955, "output_length": 52, "hash_ids": [0, 1]},
            {"timestamp": 250, "input_length": 100, "output_length": 8, "hash_ids": [2]},
            {"timestamp": 1000, "input_length": 50, "output_length": 1, "hash_ids": []}]


def test_azure_csv_gz_parquet_and_dataframe_read_the_same(tmp_path):
    AZURE.to_csv(tmp_path / "a.csv", index=False)
    AZURE.to_csv(tmp_path / "a.csv.gz", index=False)
    AZURE.to_parquet(tmp_path / "a.parquet")
    traces = [read_trace(tmp_path / f) for f in ("a.csv", "a.csv.gz", "a.parquet")]
    traces.append(qt.Workload.from_trace(AZURE))
    for tr in traces:
        np.testing.assert_allclose(tr.arrival, AZURE_T, atol=1e-9)
        np.testing.assert_array_equal(tr.prompt, AZURE.ContextTokens)
        np.testing.assert_array_equal(tr.output, AZURE.GeneratedTokens)
        np.testing.assert_array_equal(tr.lo, tr.output)


def test_mooncake_jsonl_timestamps_in_ms(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in _mooncake_lines()))
    tr = read_trace(path)
    np.testing.assert_allclose(tr.arrival, [0.0, 0.25, 1.0])
    np.testing.assert_array_equal(tr.prompt, [6955, 100, 50])
    np.testing.assert_array_equal(tr.output, [52, 8, 1])
    tr_ms = read_trace(path, time_unit="ms")
    np.testing.assert_allclose(tr_ms.arrival, [0.0, 250.0, 1000.0])


def test_mooncake_hash_ids_become_full_prefix_blocks(tmp_path):
    """A Mooncake file's ``hash_ids`` are the trace's 512-token prefix blocks, the partial
    last block dropped; they follow the rows dropped, the window and the rescaling."""
    lines = _mooncake_lines() + [{"timestamp": 1500, "input_length": 1024, "output_length": 0,
                                  "hash_ids": [7, 8]},
                                 {"timestamp": 2000, "input_length": 1100, "output_length": 3,
                                  "hash_ids": [0, 9, 10]}]
    path = tmp_path / "m.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in lines))
    with pytest.warns(UserWarning, match="1 request"):        # the zero output dropped
        tr = read_trace(path)
    assert tr.block_size == 512
    assert [b.tolist() for b in tr.blocks] == [[0, 1], [], [], [0, 9]]
    with pytest.warns(UserWarning):
        late = read_trace(path, window=(0.5, 3.0), rate=2.0)
    assert [b.tolist() for b in late.blocks] == [[], [0, 9]]
    assert qt.workload.prefix_hit_ratio(tr, details=True).reused == 1     # id 0 again
    as_text = pd.DataFrame(lines).assign(hash_ids=lambda d: d["hash_ids"].map(json.dumps))
    as_text.to_csv(tmp_path / "m.csv", index=False)
    with pytest.warns(UserWarning):
        from_csv = read_trace(tmp_path / "m.csv", format="mooncake")
    assert [b.tolist() for b in from_csv.blocks] == [b.tolist() for b in tr.blocks]


def test_a_custom_blocks_column_needs_its_block_size_and_integer_ids():
    df = pd.DataFrame({"t": [0.0, 1.0], "p": [40, 33], "o": [2, 2], "ids": [[1, 2], [1, 3]]})
    cols = {"arrival": "t", "prompt": "p", "output": "o", "blocks": "ids"}
    tr = read_trace(df, columns=cols, block_size=16)
    assert tr.block_size == 16 and [b.tolist() for b in tr.blocks] == [[1, 2], [1, 3]]
    assert [b.tolist() for b in read_trace(df, columns=cols, block_size=32).blocks] == [[1], [1]]
    with pytest.raises(ValueError, match="needs block_size="):
        read_trace(df, columns=cols)
    with pytest.raises(ValueError, match="block_size"):
        read_trace(df, columns=cols, block_size=0)
    bad = df.assign(ids=[[1, 2], ["x"]])
    with pytest.raises(ValueError, match="row 1 .*'ids'.*not a list of integer block ids"):
        read_trace(bad, columns=cols, block_size=16)
    assert read_trace(df.drop(columns="ids"), columns={"arrival": "t", "prompt": "p",
                                                       "output": "o"}).blocks is None


def test_shipped_mooncake_file_reads_as_the_named_trace():
    from importlib import resources

    name = qt.data.mooncake.MOONCAKE_TRACES["synthetic"]
    with resources.as_file(resources.files("queuetheory.data").joinpath("mooncake", name)) as f:
        from_file = read_trace(f)
    named = qt.data.open_trace("mooncake:synthetic")
    np.testing.assert_array_equal(from_file.arrival, named.arrival)
    assert all(np.array_equal(a, b) for a, b in zip(from_file.blocks, named.blocks,
                                                   strict=True))
    assert (np.array([len(b) for b in named.blocks]) == named.prompt // 512).all()
    with pytest.raises(ValueError, match="format='azure'"):
        qt.data.open_trace("mooncake:synthetic", format="azure")
    with pytest.raises(ValueError, match="name='toolagent'"):
        qt.data.open_trace("mooncake:toolagent")


def test_burstgpt_classes_and_zero_outputs():
    with pytest.warns(UserWarning, match="1 request.*0 prompt or 0 output tokens dropped"):
        tr = read_trace(_burstgpt())
    np.testing.assert_allclose(tr.arrival, [0.0, 1.5, 4.0])
    np.testing.assert_array_equal(tr.cls, [1, 1, 0])          # sorted: ChatGPT=0, GPT-4=1
    with pytest.warns(UserWarning, match="counted as 1 token"):
        clipped = read_trace(_burstgpt(), zero_tokens="clip")
    np.testing.assert_array_equal(clipped.output, [10, 1, 5, 7])


def test_custom_columns_and_timestamp_unit():
    df = pd.DataFrame({"t_us": [3_000_000, 3_500_000], "in": [5, 6], "out": [2, 3]})
    with pytest.raises(ValueError, match="match no preset"):
        read_trace(df)
    tr = read_trace(df, columns={"arrival": "t_us", "prompt": "in", "output": "out"},
                    timestamp_unit="us")
    np.testing.assert_allclose(tr.arrival, [0.0, 0.5])
    with pytest.raises(ValueError, match="timestamp_unit='hours'"):
        read_trace(df, columns={"arrival": "t_us", "prompt": "in", "output": "out"},
                   timestamp_unit="hours")


def test_window_speedup_and_rate_keep_the_burstiness():
    full = qt.data.azure_trace("conv")
    part = qt.data.azure_trace("conv", window=(600, 1200))
    inside = full.arrival[(full.arrival >= 600) & (full.arrival < 1200)]
    np.testing.assert_allclose(part.arrival, inside - 600)
    fast = qt.data.azure_trace("conv", speedup=4)
    np.testing.assert_allclose(fast.arrival, full.arrival / 4)
    scaled = qt.data.azure_trace("conv", rate=20.0)
    assert (len(scaled) - 1) / scaled.arrival[-1] == pytest.approx(20.0)
    a, b = trace_stats(full, reference=None), trace_stats(scaled, reference=None)
    assert b.cv_interarrival == pytest.approx(a.cv_interarrival)
    assert b.dispersion == pytest.approx(a.dispersion, rel=1e-6)
    with pytest.raises(ValueError, match="at most one"):
        qt.data.azure_trace("conv", speedup=2, rate=3)
    with pytest.raises(ValueError, match="window"):
        qt.data.azure_trace("conv", window=(5000, 6000))


def test_shipped_azure_traces():
    conv, code = qt.data.azure_trace("conv"), qt.data.azure_trace("code")
    assert (len(conv), len(code)) == (19366, 8819)
    assert conv.arrival[0] == 0 and np.all(np.diff(conv.arrival) >= 0)
    assert conv.prompt.min() >= 1 and conv.output.min() >= 1
    with pytest.raises(ValueError, match="name='chat'"):
        qt.data.azure_trace("chat")


@pytest.mark.parametrize("column, value, message", [
    ("ContextTokens", -3, r"row 2 \(0-based data row\), column 'ContextTokens': -3 is negative"),
    ("GeneratedTokens", 2.5, r"row 2 .*column 'GeneratedTokens': 2.5 is not an integer"),
    ("GeneratedTokens", None, r"row 2 .*column 'GeneratedTokens'.*missing or not a number"),
    ("TIMESTAMP", "yesterday", r"row 2 .*column 'TIMESTAMP': 'yesterday' is missing or not a "
                               "timestamp"),
    ("TIMESTAMP", "2023-11-16 18:15:40.0000000", r"row 2 .*column 'TIMESTAMP'.*earlier than"),
])
def test_each_bad_row_is_named_or_dropped(column, value, message):
    df = AZURE.copy().astype({column: object})
    df.loc[2, column] = value
    with pytest.raises(ValueError, match=message):
        read_trace(df)
    with pytest.warns(UserWarning, match=r"dropped 1 bad row\(s\) of 4"):
        tr = read_trace(df, drop_bad=True)
    np.testing.assert_array_equal(tr.prompt, AZURE.ContextTokens[[0, 1, 3]])


def test_missing_column_and_unknown_file_type(tmp_path):
    with pytest.raises(ValueError, match="column 'GeneratedTokens'.*missing"):
        read_trace(AZURE.drop(columns="GeneratedTokens"), format="azure")
    (tmp_path / "t.xlsx").write_text("x")
    with pytest.raises(ValueError, match="unknown file type '.xlsx'"):
        read_trace(tmp_path / "t.xlsx")
    with pytest.raises(ValueError, match="format='sharegpt'"):
        read_trace(AZURE, format="sharegpt")


def test_drop_bad_counts_every_bad_row():
    df = AZURE.copy()
    df.loc[1, "ContextTokens"] = -1
    df.loc[3, "GeneratedTokens"] = -5
    with pytest.raises(ValueError, match="2 bad row"):
        read_trace(df)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tr = read_trace(df, drop_bad=True)
    assert len(tr) == 2 and "dropped 2 bad row(s)" in str(caught[0].message)


def test_trace_statistics_of_poisson_arrivals_are_near_one():
    tr = qt.Workload.from_lengths(100, 50, rate=5.0).sample(horizon=4000, seed=1)
    s = trace_stats(tr, reference=None)
    n = len(tr)
    # CV of n exponential inter-arrivals: standard error about 1/sqrt(n)
    assert abs(s.cv_interarrival - 1) < 4 / np.sqrt(n)
    windows = int(s.duration // s.dispersion_window)
    assert abs(s.dispersion - 1) < 4 * np.sqrt(2 / windows)
    assert s.mean_rate == pytest.approx(5.0, rel=4 / np.sqrt(n))
    assert s.rate_over_time["arrivals"].sum() == n
    summary = trace_stats(qt.data.azure_trace("code")).summary()
    assert summary["cv_interarrival"] > 3 and summary["dispersion"] > 3   # bursty
    json.dumps(summary)


def test_trace_replays_through_the_engine():
    tr = qt.data.azure_trace("conv", window=(0, 60))
    res = qt.simulate(tr, qt.policies.Sarathi(512), ANCHOR_TIME, memory=65536)
    assert res.metrics["completed"] == len(tr)


def _no_nan(text):
    def refuse(name):
        raise AssertionError(f"{name} in JSON output")
    return json.loads(text, parse_constant=refuse)


def test_cli_names_every_paper_scheduler():
    from queuetheory.cli import POLICIES, cli_name
    from queuetheory.compare import paper_schedulers

    assert sorted(POLICIES) == sorted(cli_name(s.name) for s in paper_schedulers())


@pytest.mark.parametrize("policy", ["sarathi", "orca", "vllm", "fastertransformer",
                                    "nested-wait", "mc-sf", "a-max", "a-min", "slai"])
def test_cli_simulate_replays_a_trace_with_every_scheduler(policy, tmp_path, capsys):
    from queuetheory.cli import main

    path = tmp_path / "t.jsonl"
    tr = qt.data.azure_trace("conv", window=(0, 40))
    pd.DataFrame({"timestamp": 1e3 * tr.arrival, "input_length": tr.prompt,
                  "output_length": tr.output}).to_json(path, orient="records", lines=True)
    assert main(["simulate", "--trace", str(path), "--policy", policy, "--time-unit", "s",
                 "--time", "0.02,0.0001,64", "--memory", "65536", "--json"]) == 0
    m = _no_nan(capsys.readouterr().out)
    assert m["arrived"] == len(tr) and m["units"]["p99_ttft"] == "s" and m["time_unit"] == "s"
    # Nested WAIT holds a segment until its threshold of prompts is queued: the last few
    # requests of a finite trace may wait for ever; every other scheduler drains the trace
    assert m["completed"] == len(tr) if policy != "nested-wait" else m["completed"] > 0


def test_cli_simulate_vllm_v1_reuses_a_mooncake_file_s_prefixes(tmp_path, capsys):
    """``simulate --policy vllm-v1`` on a file with ``hash_ids``: the prefix cache saves the
    tokens of the blocks the requests share, ``--no-prefix-cache`` none; the same run
    through the API gives the same metrics."""
    from queuetheory.cli import main

    rows = [{"timestamp": 400 * i, "input_length": 1100 + 7 * i, "output_length": 5,
             "hash_ids": [1, 2, 100 + i]} for i in range(12)]   # 1,024 shared tokens
    path = tmp_path / "m.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    args = ["simulate", "--trace", str(path), "--policy", "vllm-v1", "--budget", "512",
            "--time-unit", "s", "--time", "0.02,0.0001,64", "--memory", "65536", "--json"]
    assert main(args) == 0
    on = _no_nan(capsys.readouterr().out)
    assert main(args + ["--no-prefix-cache"]) == 0
    off = _no_nan(capsys.readouterr().out)
    assert on["completed"] == off["completed"] == 12
    assert on["prefix_tokens_saved"] == 11 * 1024 and on["units"]["prefix_hit_ratio"]
    assert off["prefix_tokens_saved"] == 0 and off["mean_ttft"] > on["mean_ttft"]
    tm = qt.PiecewiseLinearTime(0.02, 0.0001, 64)
    res = qt.simulate(read_trace(path), qt.policies.VLLMV1(256, 512, num_gpu_blocks=4097),
                      tm, first_token="prefill")
    assert res.metrics["prefix_tokens_saved"] == on["prefix_tokens_saved"]
    assert res.metrics["mean_ttft"] == pytest.approx(on["mean_ttft"], rel=1e-12)
    with pytest.raises(SystemExit, match="--no-prefix-cache: only vllm-v1"):
        main(args[:4] + ["sarathi", "--no-prefix-cache"] + args[5:])
    with pytest.raises(SystemExit, match="--order sjf_prompt: vllm-v1"):
        main(args + ["--order", "sjf_prompt"])


def test_cli_simulate_writes_null_not_nan_and_prints_units(capsys):
    from queuetheory.cli import main

    # a run too short to finish any request: its latencies are undefined
    assert main(["simulate", "--rate", "0.01", "--prompt", "100", "--output", "50",
                 "--horizon", "1000", "--json"]) == 0
    m = _no_nan(capsys.readouterr().out)
    assert m["completed"] == 0 and m["mean_latency"] is None and m["units"]["time"] == "ms"
    assert main(["simulate", "--rate", "0.01", "--prompt", "100", "--output", "50",
                 "--horizon", "1000"]) == 0
    assert "output tokens/ms" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="--prompt, --output: required without --trace"):
        main(["simulate", "--rate", "1", "--horizon", "10"])
    with pytest.raises(SystemExit, match="--time-unit s"):
        main(["simulate", "--rate", "1", "--prompt", "1", "--output", "1", "--horizon", "1",
              "--time", "a100"])


def test_compare_replays_a_trace_at_each_load():
    from queuetheory.compare import CLASSIC, compare

    tr = qt.data.azure_trace("conv")
    result = compare(CLASSIC[2:3], loads=[0.3, 0.6], seeds=1, n_requests=60, trace=tr,
                     memory=65536)
    runs = result.runs.set_index("load")
    assert (runs["completed"] == 60).all()
    # the same requests arrive twice as fast at twice the load: they finish sooner
    assert runs.loc[0.6, "time"] < runs.loc[0.3, "time"]


def test_trace_stats_plot_has_title_units_and_the_mean_rate():
    import matplotlib

    matplotlib.use("Agg")
    s = trace_stats(qt.data.azure_trace("conv"), reference=None)
    ax = s.plot()
    assert "CV" in ax.get_title() and "(s)" in ax.get_xlabel()
    assert any(line.get_label().startswith("mean rate") for line in ax.get_lines())
    with pytest.raises(ValueError, match="at least 3"):
        trace_stats(qt.data.azure_trace("conv").head(2))


def test_cli_compare_takes_a_trace(tmp_path, capsys):
    from queuetheory.cli import main

    path = tmp_path / "conv.csv"
    tr = qt.data.azure_trace("conv", window=(0, 30))
    pd.DataFrame({"Timestamp": tr.arrival, "Model": "ChatGPT", "Request tokens": tr.prompt,
                  "Response tokens": tr.output, "Total tokens": tr.prompt + tr.output,
                  "Log Type": "Conversation log"}).to_csv(path, index=False)
    assert main(["compare", "--classic", "--loads", "0.5", "--seeds", "1", "--requests", "40",
                 "--trace", str(path), "--format", "burstgpt", "--out", str(tmp_path)]) == 0
    table = pd.read_csv(tmp_path / "compare_table.csv")
    assert len(table) == 4 and table["p99_ttft"].notna().all()

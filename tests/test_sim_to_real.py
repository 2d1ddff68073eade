"""Sim-to-real: the operator-profile batch time, vLLM's V1 scheduler and the replay of the
measured vLLM 0.19 runs shipped with the package (LLMServingSim 2.0's, MIT)."""

import json
import shutil
import warnings
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import queuetheory as qt
from queuetheory.cli import main
from queuetheory.errors import InfeasibleBatchError, UnsupportedSettingError
from queuetheory.policies.vllm import BlockPool, cudagraph_capture_sizes
from queuetheory.timing import BatchLoad
from queuetheory.timing.profile import (
    OperatorProfile,
    ProfileError,
    ProfileRangeWarning,
    ProfileTime,
)
from queuetheory.validate import RunFolderError, error_table, load_run, replay

RUNS = Path(str(resources.files("queuetheory.data").joinpath("vllm_runs")))
PRO = RUNS / "profiles/RTXPRO6000/meta-llama/Llama-3.1-8B/bf16"
LAYER_OPS = {"layernorm": 2, "qkv_proj": 1, "rotary_emb": 1, "o_proj": 1, "gate_up_proj": 1,
             "act_fn": 1, "down_proj": 1}


@pytest.fixture(scope="module")
def pro():
    return OperatorProfile.from_llmservingsim(PRO)


@pytest.fixture(scope="module")
def pro_csv():
    read = lambda name: pd.read_csv(PRO / "tp1" / f"{name}.csv.gz")  # noqa: E731
    return read("dense"), read("attention"), read("per_sequence"), read("skew_fit")


@pytest.fixture(scope="module")
def pro_replay():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return replay("rtxpro6000")


def _load(decode_kv=(), chunk=(), start=()):
    return BatchLoad(np.array(chunk, np.int64), np.array(start, np.int64),
                     np.array(decode_kv, np.int64))


# ---- the batch-time model ---------------------------------------------------------------------
def test_profile_time_is_the_layer_composition_at_profiled_points(pro, pro_csv):
    """At a profiled point every lookup is a table row: the iteration is embedding + 32 ×
    [2·layernorm + … + attention] + final_layernorm + lm_head + sampler, read off the CSVs."""
    dense, attn, seqs, _ = pro_csv
    n, kv = 128, 1024
    at = lambda layer, tokens: float(  # noqa: E731
        dense[(dense.layer == layer) & (dense.tokens == tokens)].time_us.iloc[0])
    layer = sum(k * at(op, n) for op, k in LAYER_OPS.items())
    a = float(attn[(attn.prefill_chunk == 0) & (attn.n_decode == n) & (attn.kv_prefill == 0)
                   & (attn.kv_decode == kv)].time_us.iloc[0])
    seq = sum(float(seqs[(seqs.layer == s) & (seqs.sequences == n)].time_us.iloc[0])
              for s in ("lm_head", "sampler"))
    expect = at("embedding", n) + 32 * (layer + a) + at("final_layernorm", n) + seq
    tm = ProfileTime(pro, unit="us")
    assert tm.duration(_load([kv] * n)) == pytest.approx(expect, rel=1e-12)
    assert ProfileTime(pro).duration(_load([kv] * n)) == pytest.approx(expect * 1e-6, rel=1e-12)


def test_attention_is_linear_between_profiled_kv_lengths(pro):
    tm = ProfileTime(pro, unit="us")
    lo, hi = (tm.breakdown(_load([k] * 64))["attention"] for k in (1024, 1152))
    assert tm.breakdown(_load([1088] * 64))["attention"] == pytest.approx((lo + hi) / 2)
    assert hi > lo


def test_unequal_decodes_get_the_profiles_skew_correction(pro, pro_csv):
    """Decodes of unequal KV: t_mean + α (t_max − t_mean), α from skew_fit.csv's bucket."""
    *_, skew = pro_csv
    kv = np.array([200] * 60 + [3000] * 4)             # n = 64, mean 375, max 3000
    tm = ProfileTime(pro, unit="us")
    mean, top = (tm.breakdown(_load([k] * 64))["attention"] for k in (kv.mean(), kv.max()))
    sr = (kv.mean() - kv.min()) / (kv.max() - kv.min())    # 0.0625: "sr<=15%"
    assert 0.05 < sr <= 0.15
    row = skew[(skew.pc == 0) & (skew.n_label == "n<=64") & (skew.skew_rate_label == "sr<=15%")
               & (skew.kv_big_label == "kvB<=4k") & (skew.kp_label == "kp=0")]
    alpha = float(row.alpha.iloc[0])
    assert tm.breakdown(_load(kv))["attention"] == pytest.approx(mean + alpha * (top - mean))


def test_a_mixed_batch_costs_more_than_its_decodes_alone(pro):
    tm = ProfileTime(pro, unit="us")
    dec = tm.duration(_load([1500] * 100))
    assert tm.duration(_load([1500] * 100, chunk=[900], start=[300])) > dec
    # more decodes than the mixed grid holds (128) add the decode grid's cost of the extra
    assert tm.duration(_load([1500] * 200, chunk=[512], start=[0])) > tm.duration(
        _load([1500] * 128, chunk=[512], start=[0]))


def test_cuda_graph_sizes_pad_the_dense_operators_only(pro):
    """Under CUDA graphs vLLM runs a batch of at most the largest captured size by the graph
    of the next size up: the per-token operators see the padded rows, attention and the LM
    head the real batch; above the largest size (or eager) nothing is padded."""
    sizes = cudagraph_capture_sizes({"max_num_seqs": 128, "max_num_batched_tokens": 2048})
    eager, graphs = ProfileTime(pro, unit="us"), ProfileTime(pro, unit="us", graph_sizes=sizes)
    load = _load([1500] * 120, chunk=[9], start=[700])          # 129 tokens, 121 sequences
    a, b = eager.breakdown(load), graphs.breakdown(load)
    assert b["dense"] == pytest.approx(eager.breakdown(_load([1500] * 127, chunk=[9],
                                                             start=[700]))["dense"])  # 136
    assert b["dense"] > a["dense"]
    assert (b["attention"], b["sequence"]) == (a["attention"], a["sequence"])
    for big in (_load([1500] * 128, chunk=[300], start=[0]), _load([1500] * 128)):
        assert graphs.duration(big) == eager.duration(big)     # 428 > 256; 128 is captured
    assert graphs.padded(1) == 1 and graphs.padded(3) == 4 and graphs.padded(257) == 257
    for bad in ([0, 8], "8", [2.5], 8):
        with pytest.raises(ValueError, match="graph_sizes"):
            ProfileTime(pro, graph_sizes=bad)
    assert ProfileTime(pro, graph_sizes=[]).graph_sizes is None


def test_cuda_graph_sizes_come_from_the_engine_arguments():
    """vLLM's own list where the run resolved one (the 4090), its default rule otherwise
    (min(2·max_num_seqs, 512, max_num_batched_tokens): 1, 2, 4, every 8 below 256, then every
    16), none for an eager engine."""
    pro_args = load_run("rtxpro6000").engine_args
    assert cudagraph_capture_sizes(pro_args) == (1, 2, 4, *range(8, 257, 8))
    meta = json.loads((RUNS / "rtx4090/vllm_meta.json").read_text())
    recorded = meta["resolved_config"]["compilation_config"]["cudagraph_capture_sizes"]
    assert cudagraph_capture_sizes(meta) == tuple(recorded) == (
        1, 2, 4, *range(8, 256, 8), *range(256, 513, 16))
    assert cudagraph_capture_sizes(meta, max_num_seqs=64) == (1, 2, 4, *range(8, 129, 8))
    assert cudagraph_capture_sizes({"max_num_seqs": 512, "max_num_batched_tokens": 300}) == (
        1, 2, 4, *range(8, 256, 8), 256, 272, 288)
    assert cudagraph_capture_sizes({"max_num_seqs": 8, "enforce_eager": True}) == ()
    off = {**meta, "resolved_config": {**meta["resolved_config"], "compilation_config": {
        **meta["resolved_config"]["compilation_config"], "cudagraph_mode": 0}}}
    assert cudagraph_capture_sizes(off) == ()


def test_outside_the_grid_warns_or_refuses_naming_the_axis(pro):
    with pytest.warns(ProfileRangeWarning, match="tokens=3000"):
        ProfileTime(pro).duration(_load(chunk=[3000], start=[0]))
    with pytest.raises(ProfileError, match="kv_decode=40000"):
        ProfileTime(pro, outside="error").duration(_load([40000] * 4))


def test_a_profile_with_a_missing_layer_or_column_is_refused(tmp_path):
    bundle = tmp_path / "bundle"
    shutil.copytree(PRO, bundle)
    dense = pd.read_csv(bundle / "tp1/dense.csv.gz")
    dense[dense.layer != "o_proj"].to_csv(bundle / "tp1/dense.csv.gz", index=False)
    with pytest.raises(ProfileError, match="o_proj"):
        OperatorProfile.from_llmservingsim(bundle)
    attn = pd.read_csv(PRO / "tp1/attention.csv.gz").drop(columns="kv_decode")
    attn.to_csv(bundle / "tp1/attention.csv.gz", index=False)
    shutil.copy(PRO / "tp1/dense.csv.gz", bundle / "tp1/dense.csv.gz")
    with pytest.raises(ProfileError, match="kv_decode"):
        OperatorProfile.from_llmservingsim(bundle)
    with pytest.raises(ProfileError, match="n_layers"):
        OperatorProfile.from_llmservingsim(PRO, model="some/unknown-model")


def test_vidur_layout_composes_its_operators_and_attention():
    """Vidur's layout: the linear and non-linear operators of its mlp.csv (the package's
    aggregated medians), and attention from its attention.csv (here a small one of known
    times: prefill c·(h + c/2) ns, decode 2 µs + n·kv ns)."""
    with resources.files("queuetheory.data").joinpath("vidur_operator_medians.csv.gz").open(
            "rb") as f:
        mlp = pd.read_csv(f, compression="gzip")
    mlp = mlp[(mlp.gpu == "h100") & (mlp.model == "Llama-2-7b-hf")]
    rows = []
    for c in (16, 64, 256, 1024):
        for h in (0, 256, 1024, 4096):
            rows.append({"num_tensor_parallel_workers": 1, "batch_size": 1, "is_prefill": True,
                         "prefill_chunk_size": c, "kv_cache_size": h,
                         "time_stats.attn_prefill.median": c * (h + c / 2) * 1e-6,
                         "time_stats.attn_decode.median": np.nan})
    for n in (1, 8, 64, 256):
        for kv in (16, 256, 1024, 4096):
            rows.append({"num_tensor_parallel_workers": 1, "batch_size": n, "is_prefill": False,
                         "prefill_chunk_size": 0, "kv_cache_size": kv,
                         "time_stats.attn_prefill.median": np.nan,
                         "time_stats.attn_decode.median": (2000 + n * kv) * 1e-6})
    with pytest.warns(ProfileRangeWarning, match="lm_head"):
        prof = OperatorProfile.from_vidur(mlp, pd.DataFrame(rows),
                                          model="meta-llama/Llama-2-7b-hf", gpu="h100")
    tm = ProfileTime(prof, unit="us")
    b = tm.breakdown(_load([1024] * 64))
    assert b["attention"] == pytest.approx(32 * (2.0 + 64 * 1024 * 1e-3))
    assert b["sequence"] == 0.0
    assert tm.breakdown(_load(chunk=[256], start=[1024]))["attention"] == pytest.approx(
        32 * 256 * (1024 + 128) * 1e-3)
    with pytest.raises(ProfileError, match="attention"):
        OperatorProfile.from_vidur(mlp, None, model="meta-llama/Llama-2-7b-hf")


# ---- vLLM's scheduler ---------------------------------------------------------------------------
def test_block_pool_reuses_cached_blocks_and_evicts_the_least_recently_freed():
    pool = BlockPool(5, caching=True)            # 4 usable (one is vLLM's null block)
    a = pool.allocate(2)
    pool.cache(a[0], "x0")
    pool.cache(a[1], "x1")
    assert pool.hits(["x0", "x1", "x2"], 3) == a and pool.hits(["x0", "x1"], 1) == a[:1]
    pool.free(a)                                 # freed tail first: a[1] then a[0]
    assert pool.num_free == 4 and pool.evictable(a) == 2
    b = pool.allocate(3)                         # 2 fresh, then the least recently freed
    assert a[1] in b and a[0] not in b
    assert pool.hits(["x0", "x1"], 2) == [a[0]]  # x1 evicted, x0 still cached
    pool.touch([a[0]])
    assert pool.num_free == 0 and pool.used == 4


@pytest.mark.parametrize("budget", [64, 512])
def test_vllm_v1_without_limits_is_sarathi_record_for_record(budget):
    """Unlimited KV and sequences, no prefix caching, synchronous: vLLM V1 serves the running
    requests (decodes, then the one partial prefill) before admitting waiting ones — Sarathi's
    FCFS chunked prefill, whose records pyserq reproduces (tests/test_oracle_pyserq.py)."""
    wl = qt.Workload([qt.RequestClass(prompt=stats.randint(1, 900), output=stats.randint(1, 200),
                                      rate=3.0)])
    tm = qt.AffineTokenTime(0.01, 5e-5, 4e-5)
    a = qt.simulate(wl, qt.policies.Sarathi(budget), tm, n_requests=400, seed=1)
    b = qt.simulate(wl, qt.policies.VLLMV1(10**6, budget, async_scheduling=False,
                                           enable_prefix_caching=False), tm,
                    n_requests=400, seed=1)
    cols = ["prefill_done", "first_token", "finish"]
    pd.testing.assert_frame_equal(a.requests[cols], b.requests[cols])


def _trace(prompt, output, arrival, blocks=None, block_size=4):
    n = len(prompt)
    z = np.zeros(n, np.int64)
    out = np.asarray(output, np.int64)
    b = None
    if blocks is not None:
        b = np.empty(n, dtype=object)
        for i, ids in enumerate(blocks):
            b[i] = np.asarray(ids, np.int64)
    return qt.Trace(np.asarray(arrival, float), np.asarray(prompt, np.int64), out, z, out, out,
                    z, blocks=b, block_size=block_size if b is not None else None)


def test_vllm_v1_preempts_the_last_running_request_and_recomputes_it():
    tr = _trace([8, 8, 8], [12, 12, 12], [0.0, 0.0, 0.0])
    pol = qt.policies.VLLMV1(8, 64, num_gpu_blocks=10, block_size=4, async_scheduling=False,
                             reserve_full_sequence=False)
    res = qt.simulate(tr, pol, qt.UnitTime())
    r = res.requests
    assert r.finish.notna().all() and (r.decoded == 12).all()
    assert r.restarts.sum() > 0 and r.restarts.iloc[0] == 0    # the first never preempted
    assert pol.peak_blocks <= 9


def test_vllm_v1_finishes_every_request_within_its_blocks_in_random_settings():
    """Small caches, shared prefixes, thresholds, both scheduling modes: every run ends with
    every request done, the blocks held never over the cache (the engine checks each batch)."""
    rng = np.random.default_rng(7)
    for _ in range(40):
        n, bs = int(rng.integers(1, 30)), int(rng.choice([1, 4, 16]))
        prompt, out = rng.integers(1, 60, n), rng.integers(1, 40, n)
        blocks = None
        if rng.random() < 0.5:
            blocks = [np.concatenate([np.arange(c), 1000 * (i + 1) + np.arange(p // bs - c)])
                      for i, p in enumerate(prompt) for c in [int(rng.integers(0, p // bs + 1))]]
        need = int(np.max(-(-(prompt + out) // bs))) + 1
        cache = int(rng.integers(need + 1, 4 * need + 3))
        pol = qt.policies.VLLMV1(int(rng.integers(1, 10)), int(rng.integers(1, 80)),
                                 num_gpu_blocks=cache, block_size=bs,
                                 async_scheduling=bool(rng.random() < 0.5),
                                 reserve_full_sequence=bool(rng.random() < 0.5),
                                 long_prefill_token_threshold=int(rng.choice([0, 3, 17])))
        tr = _trace(prompt, out, np.sort(rng.uniform(0, 20, n)), blocks, bs)
        r = qt.simulate(tr, pol, qt.AffineTokenTime(0.01, 1e-3, 1e-3)).requests
        assert r.finish.notna().all() and (r.decoded == r.output).all()
        assert pol.peak_blocks <= cache - 1


def test_vllm_v1_refuses_a_request_larger_than_its_cache():
    with pytest.raises(ValueError, match="request 1: 40 tokens need 10 KV blocks, more than"):
        qt.simulate(_trace([8, 30], [2, 10], [0.0, 1.0]),
                    qt.policies.VLLMV1(num_gpu_blocks=9, block_size=4), qt.UnitTime())


def test_vllm_v1_reuses_a_cached_prefix_and_skips_its_prefill():
    # request 1 shares request 0's first two 4-token blocks and arrives after it finished
    tr = _trace([10, 11], [2, 2], [0.0, 50.0], blocks=[[7, 8], [7, 8]])
    res = qt.simulate(tr, qt.policies.VLLMV1(4, 64, num_gpu_blocks=40, block_size=4),
                      qt.UnitTime())
    assert res.requests.cached.tolist() == [0, 8]
    assert res.batches.prefill_tokens.tolist() == [10, 0, 3, 0]


def test_prefix_credit_is_checked_by_the_engine():
    class Bad(qt.policies.Policy):
        def _schedule(self, state):
            return qt.Batch(prefill=[0], chunk=[2], cached=[-1])

    with pytest.raises(InfeasibleBatchError, match="cached"):
        qt.simulate(_trace([10], [2], [0.0]), Bad(), qt.UnitTime())


def test_vllm_v1_from_engine_args_names_what_it_does_not_model():
    with pytest.warns(UserWarning, match="policy='priority'.*speculative_config"):
        pol = qt.policies.VLLMV1.from_engine_args(
            {"max_num_seqs": 64, "max_num_batched_tokens": 1024, "num_gpu_blocks": 500,
             "policy": "priority", "speculative_config": {"method": "ngram"}})
    assert (pol.max_num_seqs, pol.token_budget, pol.num_gpu_blocks) == (64, 1024, 500)
    with pytest.warns(UserWarning, match="num_gpu_blocks"):
        qt.policies.VLLMV1.from_engine_args({"max_num_seqs": 8})
    with pytest.raises(ValueError, match="enable_chunked_prefill"):
        qt.policies.VLLMV1.from_engine_args({"num_gpu_blocks": 9,
                                             "enable_chunked_prefill": False})
    meta = json.loads((RUNS / "rtx4090/vllm_meta.json").read_text())
    with pytest.warns(UserWarning, match="CUDA graphs"):
        pol = qt.policies.VLLMV1.from_engine_args(meta)
    assert (pol.num_gpu_blocks, pol.max_num_seqs, pol.max_model_len, pol.async_scheduling) == (
        2588, 256, 32768, True)


def test_vllm_v1_refuses_token_memory_and_over_long_requests():
    with pytest.raises(UnsupportedSettingError, match="memory=None"):
        qt.simulate(_trace([10], [2], [0.0]), qt.policies.VLLMV1(), qt.UnitTime(), memory=100)
    with pytest.raises(ValueError, match="request 0.*max_model_len=16"):
        qt.simulate(_trace([10], [8], [0.0]), qt.policies.VLLMV1(max_model_len=16),
                    qt.UnitTime())


# ---- the measured runs ---------------------------------------------------------------------------
def test_prefix_block_ids_reproduce_the_shared_prefix_column():
    """The ids derived from the prompts' tokens give, for every request, exactly the
    block-aligned prefix it shares with an earlier one (capped below its prompt)."""
    wl = load_run("rtxpro6000").workload
    seen, shared = set(), []
    for ids, prompt in zip(wl.prefix_block_ids.fillna("").astype(str), wl.input_toks,
                           strict=True):
        ids = ids.split()
        k = 0
        while k < len(ids) and ids[k] in seen:
            k += 1
        shared.append(min(k, (prompt - 1) // 16) * 16)
        seen.update(ids)
    assert shared == wl.block_aligned_shared_prefix_toks.tolist()
    assert 0 < sum(shared) < wl.input_toks.sum()


def test_error_table_reproduces_the_measured_summary_and_the_peers_published_errors():
    """The table's statistics are those of measured_summary.json (from the same timestamps,
    before measured_per_request.csv rounded them), and LLMServingSim's own
    per-request prediction gives its published signed errors of the means (−4.0, −1.0,
    −1.8 % in llmservingsim_validation_summary.txt, to its one decimal)."""
    run = load_run("rtxpro6000")
    summary = json.loads((RUNS / "rtxpro6000/measured_summary.json").read_text())
    table = error_table(run.measured, run.peer, name="peer").set_index(["metric", "statistic"])
    for m, key in (("TTFT", "ttft_ms"), ("TPOT", "tpot_ms"), ("E2E", "e2e_ms")):
        assert table.loc[(m, "mean"), "measured_ms"] == pytest.approx(summary[key]["mean"],
                                                                     rel=1e-5)
        assert table.loc[(m, "p90"), "measured_ms"] == pytest.approx(summary[key]["p90"],
                                                                     rel=1e-5)
        assert table.loc[(m, "p99"), "measured_ms"] == pytest.approx(summary[key]["p99"],
                                                                     rel=1e-5)
    published = {}
    for line in (RUNS / "rtxpro6000/llmservingsim_validation_summary.txt").read_text().split(
            "\n"):
        parts = line.split()
        if len(parts) == 5 and parts[1] == "Mean":
            published[parts[0].replace("Latency", "E2E")] = float(parts[4].rstrip("%"))
    for m, pct in published.items():
        assert round(table.loc[(m, "mean"), "peer_error_pct"], 1) == pct


def test_replay_of_the_rtx_pro_6000_run_stays_within_its_targets(pro_replay):
    """A regression guard on the figures the code computes (the accuracy docs' table): the
    means within 4 % (TTFT) and 2 % (TPOT, E2E); per request, TTFT, TPOT and E2E at least
    as close as LLMServingSim's own prediction of the same run (its median absolute error)."""
    t = pro_replay.errors().set_index(["metric", "statistic"])
    assert abs(t.loc[("TTFT", "mean"), "queuetheory_error_pct"]) <= 4
    assert abs(t.loc[("TPOT", "mean"), "queuetheory_error_pct"]) <= 2
    assert abs(t.loc[("E2E", "mean"), "queuetheory_error_pct"]) <= 2
    median = "per-request median abs error"
    for m in ("TTFT", "TPOT", "E2E"):
        assert t.loc[(m, median), "queuetheory_error_pct"] <= t.loc[
            (m, median), "LLMServingSim_error_pct"]
    s = pro_replay.summary()
    assert s["unfinished"] == 0 and s["preemptions"] == 0 and s["prefix_cached_tokens"] > 0
    assert pro_replay.policy.peak_blocks * 16 < 500_000        # the KV cache never binds


def test_the_rtx_4090_prediction_reads_no_measurement(tmp_path):
    """The 4090 folder holds settings only, and a copy holding nothing but the engine
    arguments, the workload and the profile predicts the same, request for request."""
    run = load_run("rtx4090")
    assert run.measured is None and run.peer is None and run.timeseries is None
    assert sorted(p.name for p in (RUNS / "rtx4090").iterdir()) == [
        "llmservingsim_cluster_config.json", "vllm_meta.json"]
    folder = tmp_path / "mine"
    folder.mkdir()
    shutil.copy(RUNS / "rtx4090/vllm_meta.json", folder)
    shutil.copy(RUNS / "workload.csv.gz", folder)
    shutil.copytree(RUNS / "profiles/RTX4090/meta-llama/Llama-3.1-8B/bf16", folder / "profile")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a, b = replay(run), replay(folder)
    pd.testing.assert_frame_equal(a.predicted, b.predicted)
    assert not a.has_measurements and a.summary()["preemptions"] > 0     # KV-bound
    with pytest.raises(ValueError, match="no measurements"):
        a.errors()


def test_cli_validate_writes_the_prediction_and_the_table(tmp_path, capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["validate", "rtxpro6000", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "LLMServingSim error" in out and "TTFT | mean" in out
    pred = pd.read_csv(tmp_path / "predicted_per_request.csv")
    assert list(pred.columns) == ["req_idx", "ttft_ms", "tpot_ms", "e2e_ms"] and len(pred) == 300
    for name in ("errors.csv", "errors.md", "requests.png", "queue.png", "queue.csv"):
        assert (tmp_path / name).exists()


def test_a_run_folder_missing_an_input_is_named(tmp_path):
    with pytest.raises(RunFolderError, match="vllm_meta.json"):
        load_run(tmp_path)
    shutil.copy(RUNS / "rtx4090/vllm_meta.json", tmp_path)
    with pytest.raises(RunFolderError, match="workload.csv"):
        load_run(tmp_path)
    pd.DataFrame({"arrival_time_ns": [0], "input_toks": [5]}).to_csv(tmp_path / "workload.csv")
    with pytest.raises(RunFolderError, match="output_toks"):
        load_run(tmp_path)
    pd.DataFrame({"arrival_time_ns": [0, 1], "input_toks": [5, 30000],
                  "output_toks": [5, 5000]}).to_csv(tmp_path / "workload.csv", index=False)
    with pytest.raises(RunFolderError, match="no GPU profile"):
        load_run(tmp_path)
    shutil.copytree(RUNS / "profiles/RTX4090/meta-llama/Llama-3.1-8B/bf16", tmp_path / "profile")
    with pytest.raises(ValueError, match="request 1 .*max_model_len=32768"):
        load_run(tmp_path)

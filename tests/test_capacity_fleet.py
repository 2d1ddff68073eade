"""Fleets as users run them: KV limits per engine, trace replay, routers, percentile
targets per metric, GPUs by name, and the one-command sizing answer."""

import re
import warnings

import numpy as np
import pandas as pd
import pytest

import queuetheory as qt
from queuetheory import capacity as cap
from queuetheory.capacity.fleet import fleet_trace
from queuetheory.capacity.sizing import size_fleet
from queuetheory.capacity.targets import check_percentiles, percentile_report
from queuetheory.cli import main
from queuetheory.errors import CensoredRunWarning
from queuetheory.networks import simulate_fleet
from queuetheory.timing.catalog import FitRangeWarning, gpu_engine, kv_cache_tokens

AFFINE = qt.AffineTokenTime(c=16.1e-3, per_prefill=57.8e-6, per_decode=39.5e-6)


def fixed(prompt=32, output=32, rate=1.0):
    return qt.Workload([qt.RequestClass(prompt, output, rate)])


# ---- percentile targets ------------------------------------------------------------------------
def test_a_percentile_target_is_met_when_that_share_is_within_it():
    """Ten requests, TTFT 0.1..1.0 and one unfinished: p80 ≤ 0.8 holds (8 of 10 within),
    p90 ≤ 0.8 does not, and the p95 of a window with an unfinished request is infinite."""
    ttft = np.arange(1, 11) / 10
    req = pd.DataFrame({"arrival": np.zeros(10), "output": np.full(10, 5),
                        "first_token": ttft, "finish": ttft + 1.0, "tbt_max": 0.25})
    rep = percentile_report(req, {"p80_ttft": 0.8, "p90_ttft": 0.8, "p50_tpot": 0.25},
                            start=0, end=1)
    assert rep.loc["p80_ttft", "meets"] and not rep.loc["p90_ttft", "meets"]
    assert rep.loc["p80_ttft", "value"] == pytest.approx(0.8)
    assert rep.loc["p50_tpot", "value"] == pytest.approx(0.25)      # (1.0) / (5 − 1)
    req.loc[9, ["first_token", "finish"]] = np.nan
    rep = percentile_report(req, {"p95_ttft": 5.0}, start=0, end=1)
    assert rep.loc["p95_ttft", "value"] == np.inf and not rep.loc["p95_ttft", "meets"]


@pytest.mark.parametrize("bad, match", [({"p99ttft": 1}, "p<q>_<metric>"),
                                        ({"p120_ttft": 1}, "120th"),
                                        ({"p99_ttft": -1}, "p99_ttft"),
                                        ({"p99_speed": 1}, "p<q>_<metric>")])
def test_a_bad_percentile_target_names_the_rule(bad, match):
    with pytest.raises(ValueError, match=match):
        check_percentiles(bad)


# ---- the fleet simulator ------------------------------------------------------------------------
def test_a_fleet_of_one_is_the_engine_itself():
    """One engine behind any router, with a KV limit, gives the records of qt.simulate."""
    tr = fixed(64, 48, 4.0).sample(horizon=200.0, seed=3)
    pol = qt.policies.Sarathi(128)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CensoredRunWarning)
        ref = qt.simulate(tr, pol, AFFINE, memory=4000, horizon=200.0).requests
    run = simulate_fleet(tr, pol, AFFINE, 1, router="least_kv", memory=4000, horizon=200.0)
    for col in ("first_token", "finish", "tbt_max"):
        np.testing.assert_allclose(run.requests[col].to_numpy(), ref[col].to_numpy(),
                                   equal_nan=True)


@pytest.mark.parametrize("fast_path", [True, False])
def test_a_random_router_is_the_thinning_of_the_trace(fast_path):
    """A random router reads no engine: engine k's records are qt.simulate's on the requests
    drawn to it (``default_rng(seed).integers(0, engines, n)``, in arrival order), batch for
    batch."""
    tr = fixed(64, 48, 3.0).sample(n_requests=300, seed=2)
    horizon, pol = float(tr.arrival[-1]), qt.policies.Sarathi(128)
    run = simulate_fleet(tr, pol, AFFINE, 3, router="random", horizon=horizon, seed=7,
                         fast_path=fast_path)
    split = np.random.default_rng(7).integers(0, 3, len(tr))
    b = run.batches
    assert len(set(split)) == 3
    for k in range(3):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CensoredRunWarning)
            ref = qt.simulate(tr.take(split == k), pol, AFFINE, horizon=horizon)
        mine = run.requests[run.requests["engine"] == k].reset_index(drop=True)
        ref_rows = ref.requests[ref.requests["arrival"] < horizon].reset_index(drop=True)
        cols = ["arrival", "prompt", "output", "prefilled", "decoded", "first_token",
                "finish", "tbt_max"]
        pd.testing.assert_frame_equal(mine[cols], ref_rows[cols], check_exact=True,
                                      check_dtype=False)
        pd.testing.assert_frame_equal(
            b[b["engine"] == k].drop(columns="engine").reset_index(drop=True),
            ref.batches.reset_index(drop=True), check_exact=True)


def test_join_the_shortest_queue_beats_random_routing_at_high_load():
    """Four engines at 90 % of their compute bound: joining the shortest queue keeps the
    p99 TTFT below random routing's (the classic JSQ gain)."""
    wl, pol = fixed(200, 50), qt.policies.Sarathi(256)
    upper = cap.bounds(wl, AFFINE, token_budget=256, policy=pol).upper
    tr = fleet_trace(wl, 0.9 * 4 * upper, 4000 / (3.6 * upper), seed=1)
    p99 = {}
    for router in ("random", "least_requests"):
        run = simulate_fleet(tr, pol, AFFINE, 4, router=router, seed=1)
        p99[router] = np.percentile(run.requests["first_token"] - run.requests["arrival"], 99)
    assert p99["least_requests"] < 0.5 * p99["random"]


def test_a_replayed_trace_keeps_its_pairs_and_seeds_start_at_other_offsets():
    tr = qt.data.azure_trace("conv").head(500)
    a, b = fleet_trace(tr, 10.0, 30.0, 0), fleet_trace(tr, 10.0, 30.0, 1)
    pairs = set(zip(tr.prompt.tolist(), tr.output.tolist(), strict=True))
    assert set(zip(a.prompt.tolist(), a.output.tolist(), strict=True)) <= pairs
    assert not np.array_equal(a.prompt[:50], b.prompt[:50])
    assert len(a) == pytest.approx(300, rel=0.25)                  # 10 per s for 30 s


def test_a_bad_router_and_a_request_over_the_kv_limit_are_refused():
    tr = fixed(64, 48).sample(n_requests=5, seed=0)
    with pytest.raises(ValueError, match="router='jsq'"):
        simulate_fleet(tr, qt.policies.Sarathi(128), AFFINE, 2, router="jsq")
    with pytest.raises(ValueError, match="memory=100"):
        simulate_fleet(tr, qt.policies.Sarathi(128), AFFINE, 2, memory=100)


# ---- sizing ------------------------------------------------------------------------------------
def test_size_fleet_meets_every_target_and_one_engine_fewer_does_not():
    """Unit time, (32, 32) tokens, b = 64: one engine serves 1 request per round at most,
    so 3.5 per round needs at least 4; the answer meets p99 TTFT ≤ 30 rounds and its
    neighbour below misses it."""
    f = size_fleet(3.5, fixed(), qt.policies.Sarathi(64), qt.UnitTime(),
                   percentiles={"p99_ttft": 30.0}, seeds=(0, 1), n_requests=300,
                   router="least_tokens", first_token="decode")
    assert f.at_least == 4 and f.count >= f.at_least
    assert f.report[f.count].loc["p99_ttft", "meets"]
    if f.count - 1 in f.report:
        assert not f.report[f.count - 1].loc["p99_ttft", "meets"]
    assert f.binding == "compute" and 0.5 < f.use["compute"] <= 1.0


def test_a_kv_limit_shows_as_the_binding_resource():
    """Long prompts on a KV cache that holds three requests: memory binds, not compute."""
    wl = fixed(900, 100)
    f = size_fleet(0.02, wl, qt.policies.Sarathi(512), qt.UnitTime(), memory=3000,
                   percentiles={"p90_latency": 5000.0}, seeds=(0,), n_requests=150)
    assert f.count is not None
    assert f.bracket.binding == "memory" and f.binding == "KV memory"


def test_targets_no_count_meets_say_so_with_the_best_found():
    """A p99 TTFT of half a round: a prompt takes a whole round, so no fleet meets it."""
    f = size_fleet(1.0, fixed(), qt.policies.Sarathi(64), qt.UnitTime(),
                   percentiles={"p99_ttft": 0.5}, seeds=(0,), n_requests=100,
                   max_replicas=4)
    assert f.count is None and f.best is not None and f.best["p99_ttft"] >= 1.0


# ---- GPUs by name ------------------------------------------------------------------------------
def test_kv_cache_from_the_gpus_memory():
    """H100 (80 GiB) with Llama-2-7B at 90 %: what the weights leave, over 0.5 MiB a token
    (2 · 32 layers · 4096 · 2 bytes); a tensor-parallel pair holds more than twice as much."""
    one = kv_cache_tokens("h100", "llama-2-7b")
    assert one == int((0.9 * 80 * 2**30 - 6.74e9 * 2) // (2 * 32 * 32 * 128 * 2))
    assert kv_cache_tokens("h100", "llama-2-7b", 2) > 2 * one
    with pytest.raises(ValueError, match="no room"):
        kv_cache_tokens("rtx4090", "llama-2-7b", utilization=0.5)
    with pytest.raises(ValueError, match="gpu='b200'"):
        kv_cache_tokens("b200", "llama-2-7b")


def test_a_shipped_gpu_engine_runs_every_capacity_function_on_real_prompt_lengths():
    """The tiled H100 fit pads a prompt of 1043 tokens to its tile instead of refusing; the
    fit says what it is valid for and warns beyond its measured tokens per batch."""
    eng = gpu_engine("h100", "llama-2-7b")
    assert eng.valid_for == {"model": "llama-2-7b", "gpu": "h100", "tp": 1, "tokens": 4096}
    with pytest.warns(FitRangeWarning, match="4096"):
        eng.check(8192)
    wl, pol = fixed(1043, 64), qt.policies.Sarathi(512)
    br = cap.bounds(wl, eng.time_model, token_budget=512, memory=eng.kv_tokens, policy=pol)
    assert 0 < br.upper < np.inf
    f = size_fleet(1.5 * br.upper, wl, pol, eng.time_model, memory=eng.kv_tokens,
                   percentiles={"p99_ttft": 2.0}, seeds=(0,), n_requests=100)
    assert f.count is not None and f.count >= 2
    with pytest.raises(ValueError, match="no shipped profile"):
        gpu_engine("rtx4090", "llama-2-7b")


def test_cli_sizes_a_fleet_with_percentile_targets(tmp_path, capsys):
    assert main(["capacity", "--time", "unit", "--lengths", "fixed", "--prompt", "32",
                 "--output", "32", "--budget", "64", "--rate", "3.5", "--p99-ttft", "30",
                 "--seeds", "2", "--requests-per-engine", "200", "--router", "least_tokens",
                 "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"answer: \d+ engines", out) and "binding resource: compute" in out
    assert "per-engine boundary" in out and (tmp_path / "fleet_sizing.png").exists()


def test_cli_says_which_target_no_count_meets(tmp_path, capsys):
    assert main(["capacity", "--time", "unit", "--lengths", "fixed", "--budget", "64",
                 "--prompt", "32", "--output", "32", "--rate", "1", "--p99-ttft", "0.5",
                 "--seeds", "1", "--requests-per-engine", "100", "--max-engines", "4",
                 "--out", str(tmp_path)]) == 1
    assert "no count up to" in capsys.readouterr().out


def test_replicas_with_a_kv_limit_and_a_trace_sizes_the_fleet_whole():
    tr = qt.data.azure_trace("code").head(2000)
    f = cap.replicas(8.0, tr, qt.policies.Sarathi(512), AFFINE, memory=20000,
                     percentiles={"p90_ttft": 2.0}, router="least_kv", n_requests=100)
    assert f.count is not None and f.router == "least_kv" and f.memory == 20000
    assert f.report[f.count].loc["p90_ttft", "meets"]


def test_an_operator_profile_gets_an_estimate_not_a_proven_compute_bound():
    """An RTX 4090 profile (attention by each request's KV): no proven compute bound, the
    full-batch rate as an estimate; the memory bound of its 24 GiB still holds."""
    eng = gpu_engine("rtx4090", "llama-3.1-8b")
    br = cap.bounds(fixed(1043, 200), eng.time_model, token_budget=512,
                    memory=eng.kv_tokens, policy=qt.policies.Sarathi(512))
    rows = br.table.set_index("name")
    assert rows.loc["compute (full batch)", "kind"] == "estimate"
    assert br.binding == "memory" and np.isfinite(br.upper)
    assert br.start == pytest.approx(rows.loc["compute (full batch)", "rate"])

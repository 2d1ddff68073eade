"""The capacity bounds with a prefix cache (queuetheory.capacity.prefix): the offline ratio
as an exact fraction, the proven compute and memory bounds against simulated runs (no run
beats them, whatever the cache size or router), the estimate rows, and max_rate and
replicas on a trace with the cache on and off."""

import dataclasses
import math
from fractions import Fraction

import numpy as np
import pytest

import queuetheory as qt
from queuetheory.capacity.prefix import offline_token_ratio
from queuetheory.capacity.rescale import replay
from queuetheory.policies.vllm import prefix_keys
from queuetheory.workload import prefix_hit_ratio

TM = qt.AffineTokenTime(0.01, 5e-5, 4e-5)
B = 256


def shared_trace(n=40, seed=0, system=256, bs=16):
    """``n`` requests sharing a system prompt of ``system`` tokens, each with its own
    32–96 tokens after it (ids from the request's index) and 8–32 output tokens."""
    rng = np.random.default_rng(seed)
    arrival = np.cumsum(rng.exponential(1.0, n))
    arrival = arrival - arrival[0]
    prompt = system + rng.integers(32, 97, n)
    output = rng.integers(8, 33, n)
    blocks = np.empty(n, object)
    for i in range(n):
        ids = np.arange(int(prompt[i]) // bs, dtype=np.int64)
        ids[system // bs:] += (i + 1) * 1000
        blocks[i] = ids
    z = np.zeros(n, np.int64)
    return qt.Trace(arrival, prompt, output, z, output.copy(), output.copy(), z,
                    blocks=blocks, block_size=bs)


def queued(trace):
    """``trace`` with every request arriving at 0 (a backlog)."""
    return dataclasses.replace(trace, arrival=np.zeros(len(trace)))


def vllm(blocks=400, on=True):
    return qt.policies.VLLMV1(32, B, num_gpu_blocks=blocks, enable_prefix_caching=on)


def affine_bound(tm, b, m_p, m_d):
    """1 / (c·w/b + α_p m_p + α_d m_d), in fractions."""
    c, ap, ad = (Fraction(x) for x in (tm.c, tm.per_prefill, tm.per_decode))
    return 1 / (c * (m_p + m_d) / b + ap * m_p + ad * m_d)


def test_offline_ratio_is_the_unbounded_lru_token_ratio_exactly():
    conv = qt.data.mooncake_trace("conversation").until(300.0)
    reuse = prefix_hit_ratio(conv, details=True)
    want = Fraction(reuse.tokens_saved, reuse.prompt_tokens)
    assert offline_token_ratio(conv) == want
    assert offline_token_ratio(conv, 16) == want        # vLLM's 16-token blocks in 512's
    assert want == Fraction(512 * (reuse.requested - reuse.distinct), int(conv.prompt.sum()))
    tr = shared_trace()
    # engine blocks coarser than the trace's: one key per 32 tokens, as VLLMV1 keys them
    keys = [prefix_keys(b, 16, 32) for b in tr.blocks]
    flat = [k for ks in keys for k in ks]
    assert offline_token_ratio(tr, 32) == Fraction(32 * (len(flat) - len(set(flat))),
                                                   int(tr.prompt.sum()))
    with pytest.raises(ValueError, match="block_size=24"):
        offline_token_ratio(tr, 24)
    with pytest.raises(ValueError, match="prefix ids"):
        offline_token_ratio(dataclasses.replace(tr, blocks=None, block_size=None))


def test_proven_compute_bound_is_the_affine_formula_at_the_offline_ratio():
    tr = shared_trace()
    br = qt.capacity.bounds(tr, TM, token_budget=B, policy=vllm())
    h = offline_token_ratio(tr, 16)
    n = len(tr)
    m_p = Fraction(int(tr.prompt.sum()), n)
    m_d = Fraction(int((tr.output - 1).sum()), n)
    assert br.prefix.kind == "proven" and br.prefix.offline == h and 0 < h < 1
    assert br.binding == "compute"
    assert br.upper == pytest.approx(float(affine_bound(TM, B, (1 - h) * m_p, m_d)),
                                     rel=1e-12)
    off = qt.capacity.bounds(tr, TM, token_budget=B, policy=vllm(on=False))
    assert off.prefix is None
    assert off.upper == pytest.approx(float(affine_bound(TM, B, m_p, m_d)), rel=1e-12)
    # any scheduler (policy=None) may cache: the proven bound is the cached one
    anyone = qt.capacity.bounds(tr, TM, token_budget=B)
    assert anyone.upper == pytest.approx(br.upper, rel=1e-12)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("blocks", [40, 2000])
def test_no_run_beats_the_proven_bound(seed, blocks):
    """Pathwise: every request queued at 0, the engine busy until the last finishes; its
    throughput N / (Σ batch durations) is at most the proven bound, and its prefill tokens
    computed at least Σ p − s·(N − D) (eq. P1), with a cache of 40 blocks (evictions and
    preemptions) or of 2000."""
    tr = shared_trace(30, seed)
    pol = vllm(blocks)
    br = qt.capacity.bounds(tr, TM, token_budget=B, policy=pol)
    res = qt.simulate(queued(tr), pol, TM)
    assert res.metrics["completed"] == len(tr)
    h = offline_token_ratio(tr, 16)
    computed = int(res.batches["prefill_tokens"].sum())
    assert computed >= (1 - h) * int(tr.prompt.sum())
    busy = float(res.batches["duration"].sum())
    assert len(tr) / busy <= br.upper * (1 + 1e-12)
    if blocks == 2000:      # a cache that keeps the system prompt beats the no-cache bound
        off = qt.capacity.bounds(tr, TM, token_budget=B, policy=vllm(on=False))
        assert len(tr) / busy > off.upper


def test_a_fleet_serves_at_most_k_times_the_proven_bound():
    tr = shared_trace(60, 3)
    pol = vllm(2000)
    br = qt.capacity.bounds(tr, TM, token_budget=B, policy=pol)
    for router in ("round_robin", "cache_aware"):
        fleet = qt.networks.simulate_fleet(queued(tr), pol, TM, engines=3, router=router)
        busy = fleet.batches.groupby("engine")["duration"].sum()
        # every engine busy from 0 to its last finish: the fleet's total rate over its span
        assert len(tr) / busy.max() <= 3 * br.upper * (1 + 1e-12)
        assert len(tr) / busy.sum() <= br.upper * (1 + 1e-12)


def test_memory_bound_charges_private_kv_only():
    tr = shared_trace()
    pol = vllm(400)
    br = qt.capacity.bounds(tr, TM, token_budget=B, policy=pol)
    M = (400 - 1) * 16                         # vLLM keeps one block aside
    q = tr.prompt - 16 * np.array([len(b) for b in tr.blocks])
    d = tr.output - 1
    area = Fraction(int(((d + 1) * q).sum()) + int((d * (d + 1)).sum()) // 2, len(tr))
    tau = TM.duration(qt.timing.BatchLoad.of_tokens(decodes=1))
    assert br.rate("memory") == pytest.approx(M / (tau * float(area)), rel=1e-12)
    row = br.table.set_index("name").loc["memory"]
    assert row["kind"] == "upper" and "private" in row["premises"]
    off = qt.capacity.bounds(tr, TM, token_budget=B, policy=vllm(400, on=False))
    assert off.rate("memory") < br.rate("memory")   # without sharing every token counts


def test_a_given_hit_ratio_is_an_estimate_row():
    wl = qt.Workload([qt.RequestClass(1000, 100, 1.0)])
    br = qt.capacity.bounds(wl, TM, token_budget=B, hit_ratio=0.3)
    rows = br.table.set_index("name")
    est = rows.loc["compute (hit ratio 30.0 %)"]
    assert est["kind"] == "estimate" and "no run is bounded" in est["premises"]
    want = affine_bound(TM, B, Fraction(7, 10) * 1000, 99)
    assert est["rate"] == pytest.approx(float(want), rel=1e-12)
    assert br.upper == rows.loc["compute", "rate"] < est["rate"]   # proven: no ids, no cache
    assert br.prefix.kind == "estimate" and br.prefix.offline is None
    tr = shared_trace()
    both = qt.capacity.bounds(tr, TM, token_budget=B, policy=vllm(), hit_ratio=0.5)
    assert both.prefix.offline == offline_token_ratio(tr, 16)      # the proven row stays
    assert both.upper == pytest.approx(
        qt.capacity.bounds(tr, TM, token_budget=B, policy=vllm()).upper, rel=1e-12)


@pytest.mark.parametrize("bad", [-0.1, 1.0, 1.5, "0.2", float("nan")])
def test_bad_hit_ratio_is_refused_by_name(bad):
    with pytest.raises(ValueError, match="hit_ratio"):
        qt.capacity.bounds(shared_trace(), TM, token_budget=B, policy=vllm(), hit_ratio=bad)


def test_a_hit_ratio_with_the_cache_off_is_refused():
    with pytest.raises(ValueError, match=r"hit_ratio=0.4.*enable_prefix_caching=False"):
        qt.capacity.bounds(shared_trace(), TM, token_budget=B, policy=vllm(on=False),
                           hit_ratio=0.4)


def test_replay_gives_each_copy_its_own_ids():
    tr = shared_trace(20)
    period = float(tr.arrival[-1]) + float(tr.arrival[-1]) / (len(tr) - 1)
    rate = qt.workload.mean_rate(tr)
    rep = replay(tr, rate, 3 * period - 1e-9)
    assert len(rep) == 3 * len(tr)
    assert offline_token_ratio(rep) == offline_token_ratio(tr)    # no copy reuses another
    flat = [set(np.concatenate(list(rep.blocks[c * 20:(c + 1) * 20])).tolist())
            for c in range(3)]
    assert not (flat[0] & flat[1]) and not (flat[1] & flat[2])
    # within a copy, equal ids stay equal: the system prompt's blocks are shared
    assert (rep.blocks[20][:16] == rep.blocks[21][:16]).all()


def test_max_rate_with_the_cache_beats_the_no_cache_bound_within_the_proven_one():
    tr = shared_trace()
    on = qt.capacity.max_rate(tr, vllm(), TM, tol=0.05, max_probe_requests=4000)
    off = qt.capacity.bounds(tr, TM, token_budget=B, policy=vllm(on=False))
    assert on.bracket.prefix.kind == "proven"
    assert on.converged
    assert off.upper < on.interval[0] and on.interval[1] <= on.bracket.upper


def test_replicas_on_a_trace_start_at_the_proven_count():
    tr = shared_trace(40)
    rate = 150.0
    on = qt.capacity.replicas(rate, tr, vllm(), TM, router="cache_aware", seeds=(0,),
                              n_requests=40, slo={"ttft": 5.0}, max_replicas=8)
    off = qt.capacity.replicas(rate, tr, vllm(on=False), TM, router="cache_aware",
                               seeds=(0,), n_requests=40, slo={"ttft": 5.0}, max_replicas=8)
    assert on.at_least == math.ceil(rate / on.bracket.upper)
    assert off.at_least == math.ceil(rate / off.bracket.upper) > on.at_least
    assert on.count is not None and on.count >= on.at_least
    assert off.count is None or off.count >= off.at_least


def test_cli_prints_the_estimate_row_of_a_hit_ratio(tmp_path, capsys):
    from queuetheory.cli import main

    rc = main(["capacity", "--prompt", "48", "--output", "12", "--time", "unit", "--budget",
               "64", "--hit-ratio", "0.5", "--latency", "200", "--tol", "0.05", "--requests",
               "300", "--points", "2", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0
    row = next(line for line in out.splitlines() if "compute (hit ratio 50.0 %)" in line)
    assert "[estimate]" in row
    br = qt.capacity.bounds(qt.Workload([qt.RequestClass(48, 12, 1.0)]), qt.UnitTime(),
                            token_budget=64, hit_ratio=0.5)
    assert f"{br.rate('compute (hit ratio 50.0 %)'):10.4g}" in row
    with pytest.raises((SystemExit, ValueError), match="hit_ratio=1.2"):
        main(["capacity", "--prompt", "48", "--output", "12", "--time", "unit",
              "--hit-ratio", "1.2", "--out", str(tmp_path)])
    with pytest.raises((SystemExit, ValueError), match="--hit-ratio 0.5"):
        main(["capacity", "--rate", "2", "--prompt", "48", "--output", "12", "--time", "unit",
              "--hit-ratio", "0.5", "--out", str(tmp_path)])


def test_cli_bounds_of_vllm_v1_on_a_mooncake_file_are_the_proven_prefix_rows(tmp_path, capsys):
    """``--trace`` keeps a Mooncake file's hash ids, ``--policy vllm-v1`` caches prefixes: the
    compute row is the proven one at the trace's offline ratio; ``--bounds-only`` stops
    there."""
    import json

    from queuetheory.cli import main

    tr = shared_trace(n=30, system=1024, bs=512)       # 512-token ids, as Mooncake's
    rows = [{"timestamp": float(a) * 1000, "input_length": int(p), "output_length": int(o),
             "hash_ids": b.tolist()} for a, p, o, b in zip(tr.arrival, tr.prompt, tr.output,
                                                         tr.blocks, strict=True)]
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    rc = main(["capacity", "--trace", str(path), "--policy", "vllm-v1", "--budget", "256",
               "--time", "affine:0.01,5e-5,4e-5", "--memory", "16000", "--bounds-only",
               "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0 and "simulated boundary" not in out
    h = offline_token_ratio(read := qt.workload.read_trace(path), 16)
    assert 0 < h < 1
    row = next(line for line in out.splitlines() if line.strip().startswith("compute "))
    assert "[upper]" in row and f"h_off = {float(h):.4g}" in row
    policy = qt.policies.VLLMV1(256, 256, num_gpu_blocks=16000 // 16 + 1,
                                enable_prefix_caching=True)
    expected = qt.capacity.bounds(read, TM, token_budget=256, policy=policy)
    assert f"{expected.rate('compute'):10.4g}" in row


def test_vllm_v1_with_kv_tokens_keeps_them_as_blocks_and_refuses_less_than_one():
    pol = qt.policies.VLLMV1.with_kv_tokens(512, 16_000)
    assert (pol.num_gpu_blocks, pol.block_size, pol.max_num_seqs) == (1001, 16, 256)
    with_kv = qt.policies.VLLMV1.with_kv_tokens
    assert pol.enable_prefix_caching and with_kv(512, None).num_gpu_blocks is None
    assert not with_kv(512, 64, enable_prefix_caching=False).enable_prefix_caching
    for bad in (0, 15, -100):
        with pytest.raises(ValueError, match=f"kv_tokens={bad}"):
            qt.policies.VLLMV1.with_kv_tokens(512, bad)

"""Fuzz of the sim-to-real and prefix-caching entry points: the vLLM scheduler and its
engine arguments, the operator-profile time, the offline hit ratio, sessions, the fleet
and the ``validate`` and ``fleet`` commands. Only documented outcomes are allowed
(``tests/fuzzing.py``)."""

import numpy as np
from fuzzing import check_metrics, cli_outcome, counts, fuzz, numbers, one_bad, outcome
from hypothesis import given
from hypothesis import strategies as st

import queuetheory as qt
from queuetheory.cli import main

NAMES = ["max_num_seqs", "max_num_batched_tokens", "num_gpu_blocks", "block_size",
         "long_prefill_token_threshold", "max_model_len", "capacity", "rate", "turns",
         "new_tokens", "output", "think", "system", "n_sessions", "engines", "router",
         "cache_threshold", "balance_abs", "balance_rel", "memory", "token_budget", "seed",
         "request", "args", "enable_chunked_prefill", "run", "profile", "outside",
         "n_layers", "model", "trace", "blocks", "time_unit", "name", "horizon"]


_PROFILE = qt.timing.OperatorProfile.from_llmservingsim(
    qt.validate.load_run("rtx4090").profile_root)


def _trace(rng, n, block):
    prompt = rng.integers(1, 80, n)
    out = rng.integers(1, 20, n)
    blocks = np.empty(n, dtype=object)
    for i, p in enumerate(prompt):
        shared = int(rng.integers(0, p // block + 1))
        blocks[i] = np.concatenate([np.arange(shared), 10_000 * (i + 1)
                                    + np.arange(p // block - shared)]).astype(np.int64)
    z = np.zeros(n, np.int64)
    return qt.Trace(np.sort(rng.uniform(0, 10, n)), prompt, out, z, out, out, z,
                    blocks=blocks, block_size=block)


@fuzz(25)
@given(st.integers(0, 10_000), one_bad(
    {"max_num_seqs": st.integers(1, 8), "max_num_batched_tokens": st.integers(1, 64),
     "num_gpu_blocks": st.integers(40, 200), "block_size": st.sampled_from([1, 4, 16]),
     "long_prefill_token_threshold": st.integers(0, 20),
     "async_scheduling": st.booleans(), "reserve_full_sequence": st.booleans()},
    {"max_num_seqs": counts, "max_num_batched_tokens": counts, "num_gpu_blocks": counts,
     "block_size": counts, "long_prefill_token_threshold": counts}))
def test_vllm_v1_runs_or_refuses(seed, kw):
    rng = np.random.default_rng(seed)
    tr = _trace(rng, int(rng.integers(1, 25)), int(rng.choice([4, 16])))
    pol = outcome(lambda: qt.policies.VLLMV1(**kw), NAMES)
    if pol is None:
        return
    res = outcome(lambda: qt.simulate(tr, pol, qt.AffineTokenTime(0.01, 1e-3, 1e-3)), NAMES)
    if res is not None:
        check_metrics(res)
        assert pol.peak_blocks <= pol.num_gpu_blocks - 1
        assert 0 <= res.metrics["prefix_hit_ratio"] <= 1


@fuzz(20)
@given(st.dictionaries(st.sampled_from(["max_num_seqs", "max_num_batched_tokens",
                                        "num_gpu_blocks", "block_size", "policy",
                                        "enable_chunked_prefill", "max_model_len",
                                        "async_scheduling", "speculative_config"]),
                       st.one_of(numbers, st.booleans(), st.none(), st.just("fcfs")),
                       max_size=4))
def test_vllm_v1_from_engine_args(args):
    outcome(lambda: qt.policies.VLLMV1.from_engine_args(args), NAMES)


@fuzz(20)
@given(st.lists(st.tuples(st.integers(0, 2048), st.integers(0, 8192), st.integers(0, 300),
                          st.lists(st.integers(1, 20_000), max_size=6)), min_size=1,
                max_size=3),
       st.sampled_from(["warn", "error", "allow"]))
def test_profile_time(batches, outside):
    tm = qt.timing.ProfileTime(_PROFILE, outside=outside)
    for chunk, start, _, kv in batches:
        load = qt.BatchLoad(np.array([chunk] if chunk else [], np.int64),
                            np.array([start] if chunk else [], np.int64),
                            np.array(kv, np.int64))
        if not load.token_load:
            continue
        t = outcome(lambda load=load: tm.duration(load), NAMES + ["tokens", "kv_decode",
                                                                   "kv_prefill",
                                                                   "prefill_chunk",
                                                                   "n_decode", "sequences"])
        assert t is None or (np.isfinite(t) and t > 0)


@fuzz(20)
@given(st.integers(0, 10_000), st.one_of(st.none(), counts, st.integers(1, 50)))
def test_prefix_hit_ratio(seed, capacity):
    tr = _trace(np.random.default_rng(seed), 20, 4)
    r = outcome(lambda: qt.workload.prefix_hit_ratio(tr, capacity, details=True), NAMES)
    if r is not None:
        assert 0 <= r.reused <= r.requested and 0 <= r.ratio <= 1
        assert r.token_ratio <= 1


@fuzz(20)
@given(one_bad({"rate": st.floats(0.1, 2.0), "turns": st.integers(1, 4),
                "new_tokens": st.integers(1, 60), "output": st.integers(1, 30),
                "think": st.floats(0.0, 5.0), "system": st.integers(0, 64),
                "block_size": st.sampled_from([4, 16])},
               {"rate": numbers, "turns": counts,
                "new_tokens": counts, "output": counts, "think": numbers,
                "system": counts, "block_size": counts}),
       st.one_of(st.integers(1, 6), counts),
       st.sampled_from(list(qt.networks.FLEET_ROUTERS) + ["jsq"]), st.integers(1, 3))
def test_sessions_on_a_fleet(kw, n_sessions, router, engines):
    plan = outcome(lambda: qt.workload.Sessions(**kw).sample(n_sessions), NAMES)
    if plan is None:
        return
    res = outcome(lambda: qt.networks.simulate_fleet(
        plan, qt.policies.VLLMV1(8, 64, num_gpu_blocks=400), qt.AffineTokenTime(0.01, 1e-3,
                                                                                 1e-3),
        engines, router=router), NAMES)
    if res is not None:
        m = res.metrics
        assert m["completed"] == m["arrived"] == len(plan.trace)
        assert 0 <= m["prefix_hit_ratio"] <= 1 and m["request_imbalance"] >= 1


@fuzz(12)
@given(argv=st.sampled_from([["validate", "rtx4090", "--out", "{tmp}"],
                        ["validate", "nowhere", "--out", "{tmp}"],
                        ["validate", "rtxpro6000", "--outside", "sometimes"],
                        ["fleet", "--until", "5", "--engines", "2", "--router", "cache_aware"],
                        ["fleet", "--trace", "mooncake:nothing", "--until", "5"],
                        ["fleet", "--engines", "-1"], ["fleet", "--time", "a,b"],
                        ["fleet", "--until", "5", "--num-gpu-blocks", "1"]]))
def test_cli_validate_and_fleet(argv, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("cli"))
    cli_outcome(main, [a.replace("{tmp}", out) for a in argv])

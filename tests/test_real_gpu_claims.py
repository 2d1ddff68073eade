"""The ledger's checks on real GPU timings (queuetheory/claims/real_gpu.py) can reach other
verdicts than the ones the shipped profiles give: negative and positive controls on
synthetic timings, judged by the same functions."""

import numpy as np
import pandas as pd

from queuetheory.claims.real_gpu import PROFILES, _profile, eq1_judgement, piecewise_judgement


def _decode_batches(time_of, seed=0):
    """Synthetic timings of decode batches whose KV tokens vary apart from the token count."""
    rng = np.random.default_rng(seed)
    batch = rng.integers(1, 256, 300)
    kv = batch * rng.integers(16, 2048, 300)
    d = pd.DataFrame({"prefill_tokens": 0, "decode_tokens": batch, "kv_tokens": kv})
    d["duration"] = time_of(d) * rng.lognormal(0, 0.01, len(d))
    return {"synthetic": d}


def test_linear_memory_vidur_can_reach_other_verdicts_on_other_data():
    follows_kv = _decode_batches(lambda d: 5e-3 + 2e-8 * d.kv_tokens)
    follows_tokens = _decode_batches(lambda d: 5e-3 + 3e-5 * d.decode_tokens)
    assert eq1_judgement(follows_kv, ["attn_decode"])[::2] == ("qualified", True)
    # negative controls: eq. (1) rejected where the time ignores the KV tokens, and where
    # no attention kernel is in the times
    assert eq1_judgement(follows_tokens, ["attn_decode"])[::2] == ("not-reproducible", True)
    assert eq1_judgement(follows_kv, [])[::2] == ("not-reproducible", False)



def _with_time(law, seed=0):
    """The shipped profiles' token grids, timed by ``law(tokens)`` with 2 % noise."""
    rng = np.random.default_rng(seed)
    out = {}
    for gpu, model in PROFILES:
        d = _profile(gpu, model).copy()
        d["duration"] = law(d.num_tokens.to_numpy()) * rng.lognormal(0, 0.02, len(d))
        out[f"{model} {gpu}"] = d
    return out


def test_piecewise_linear_vidur_rejects_timings_without_a_knee():
    knee = _with_time(lambda t: 8e-3 + 5.6e-5 * np.maximum(0, t - 64))
    assert piecewise_judgement(knee)[0]
    # negative control: an affine law (no flat part) with the same noise is rejected
    for seed in range(3):
        assert not piecewise_judgement(_with_time(lambda t: 8e-3 + 5.6e-5 * t, seed))[0]

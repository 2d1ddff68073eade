"""Time models fitted to measurements: known parameters recovered, the true family chosen,
the Vidur profiles read."""

import numpy as np
import pandas as pd
import pytest

import queuetheory as qt
from queuetheory.timing import (
    AffineTokenTime,
    BatchLoad,
    LinearMemoryTime,
    ModelDims,
    PiecewiseLinearTime,
    TiledGPUTime,
    fit,
    vidur_profile,
)

DIMS = ModelDims(N=32, d_x=4096, d=4096, d_ff=11008, d_out=32768, n_ffn_mats=3)


def _batches(n=400, seed=0):
    rng = np.random.default_rng(seed)
    prefill = rng.integers(0, 2048, n) * (rng.random(n) < 0.7)
    decode = rng.integers(1, 256, n)
    kv = rng.integers(1_000, 200_000, n)
    return pd.DataFrame({"prefill_tokens": prefill, "decode_tokens": decode, "kv_tokens": kv})


def _noisy(df, truth, rel_noise=0.01, seed=1):
    rng = np.random.default_rng(seed)
    out = df.copy()
    out["duration"] = truth * (1 + rel_noise * rng.standard_normal(len(df)))
    return out


def _within_4se(report, truth: dict):
    for name, value in truth.items():
        est, se = report.params[name], report.stderr[name]
        assert se > 0, name
        assert abs(est - value) < 4 * se, (name, est, value, se)
        lo, hi = report.intervals[name]
        assert lo >= 0 and lo <= est <= hi


def test_affine_recovered_with_absolute_noise():
    df = _batches()
    truth = {"c": 0.016, "per_prefill": 5.8e-5, "per_decode": 4.0e-5}
    y = (truth["c"] + truth["per_prefill"] * df.prefill_tokens
         + truth["per_decode"] * df.decode_tokens)
    rng = np.random.default_rng(2)
    df["duration"] = y + 5e-4 * rng.standard_normal(len(df))
    r = fit(df, "affine", relative=False)
    assert isinstance(r.model, AffineTokenTime)
    _within_4se(r, truth)
    assert r.heldout_error < 0.05


def test_piecewise_recovered():
    df = _batches()
    b = df.prefill_tokens + df.decode_tokens
    truth = {"c": 0.0455, "a": 3.0e-4, "b0": 300.0}
    r = fit(_noisy(df, truth["c"] + truth["a"] * np.maximum(0, b - truth["b0"])), "piecewise")
    assert isinstance(r.model, PiecewiseLinearTime)
    _within_4se(r, truth)
    assert r.model.b0 == pytest.approx(r.params["b0"])


def test_linear_memory_recovered():
    df = _batches()
    truth = {"d0": 0.01, "d1": 2e-7}
    r = fit(_noisy(df, truth["d0"] + truth["d1"] * df.kv_tokens), "linear_memory")
    assert isinstance(r.model, LinearMemoryTime)
    _within_4se(r, truth)


def test_tiled_recovered_and_built_as_a_tiled_gpu_time():
    df = _batches()
    b = (df.prefill_tokens + df.decode_tokens).to_numpy()
    truth = {"c0": 0.003, "alpha": 0.004, "beta": 1.5e-5}
    y = truth["c0"] + truth["alpha"] * -(-b // 64) + truth["beta"] * b
    r = fit(_noisy(df, y), "tiled", dims=DIMS, gpu_spec="h100")
    assert r.params["t_col"] == 64
    _within_4se(r, truth)
    m = r.model
    assert isinstance(m, TiledGPUTime) and m.tile[1] == 64
    # Eq. 4 + per-token term + overhead of the built model give the fitted function back
    for tau in (1, 64, 65, 1000):
        comp = m.components(BatchLoad.of_tokens(tau))
        fitted = r.params["c0"] + r.params["alpha"] * -(-tau // 64) + r.params["beta"] * tau
        assert comp["linear"] + comp["nonlinear"] + comp["overhead"] == pytest.approx(fitted)
    with pytest.raises(ValueError, match="dims"):
        fit(_noisy(df, y), "tiled")


@pytest.mark.parametrize("family", ["affine", "piecewise", "linear_memory", "tiled"])
def test_best_picks_the_true_family(family):
    df = _batches(seed=3)
    b = (df.prefill_tokens + df.decode_tokens).to_numpy()
    y = {"affine": 0.016 + 8e-5 * df.prefill_tokens + 2e-5 * df.decode_tokens,
         "piecewise": 0.04 + 3e-4 * np.maximum(0, b - 600),
         "linear_memory": 0.01 + 2e-7 * df.kv_tokens,
         "tiled": 0.003 + 0.006 * -(-b // 128) + 1e-5 * b}[family]
    r = fit(_noisy(df, np.asarray(y, float), seed=4), "best", dims=DIMS)
    assert r.family == family, r.comparison
    assert r.comparison.index[0] == family and len(r.comparison) == 4


def test_bad_measurements_are_refused():
    df = _noisy(_batches(n=20), 0.01 + np.zeros(20))
    with pytest.raises(ValueError, match="missing column"):
        fit(df.drop(columns="kv_tokens"), "affine")
    bad = df.copy()
    bad.loc[3, "duration"] = -1.0
    with pytest.raises(ValueError, match="row 3, column 'duration'"):
        fit(bad, "affine")
    with pytest.raises(ValueError, match="model='cubic'"):
        fit(df, "cubic")


def test_vidur_profile_reads_the_linear_layers():
    d = vidur_profile("a100", "llama-2-7b")
    assert d.num_tokens.min() == 1 and d.num_tokens.max() == 4096 and d.num_tokens.is_unique
    assert (d.decode_tokens == 0).all() and (d.kv_tokens == d.num_tokens).all()
    ms = vidur_profile("a100", "llama-2-7b", unit="ms")
    np.testing.assert_allclose(ms.duration, 1e3 * d.duration)
    every = vidur_profile("a100", "llama-2-7b", ops="all")
    assert (every.duration > d.duration).all()
    # more tokens cost more: the largest batch at least 5x the smallest
    assert d.duration.iloc[-1] > 5 * d.duration.iloc[0]
    assert len(vidur_profile("a100", "llama-3-8b", tp=8)) > len(d)
    with pytest.raises(ValueError, match="gpu='h100'"):
        vidur_profile("h100", "llama-3-8b")
    with pytest.raises(ValueError, match="tp=3"):
        vidur_profile(tp=3)


def test_tiled_gpu_time_fitted_to_vidur():
    from queuetheory.timing.vidur import fit_tiled

    report = fit_tiled("h100", "llama-2-7b")
    m = report.model
    assert isinstance(m, TiledGPUTime) and m.tile[1] == report.params["t_col"]
    assert report.heldout_error < 0.2 and any("no attention" in n for n in report.notes)
    assert qt.TiledGPUTime.fitted("h100").tile == m.tile
    ax = report.plot_residuals()
    assert ax.get_title()


def test_bootstrap_intervals_agree_with_the_jacobian_on_a_linear_model():
    """For least squares with homoscedastic noise both estimate the same spread: the
    bootstrap standard errors (200 resamples, ≈5 % sampling error) within 30 % of the
    Jacobian's, the truth within 4 of them, and a fixed seed repeats the intervals."""
    df = _batches()
    truth = {"c": 0.016, "per_prefill": 5.8e-5, "per_decode": 4.0e-5}
    y = (truth["c"] + truth["per_prefill"] * df.prefill_tokens
         + truth["per_decode"] * df.decode_tokens)
    df["duration"] = y + 5e-4 * np.random.default_rng(2).standard_normal(len(df))
    local = fit(df, "affine", relative=False)
    boot = fit(df, "affine", relative=False, intervals="bootstrap")
    assert boot.params == local.params
    for name in truth:
        assert 0.7 < boot.stderr[name] / local.stderr[name] < 1.3, name
    _within_4se(boot, truth)
    assert any("bootstrap" in n for n in boot.notes)
    again = fit(df, "affine", relative=False, intervals="bootstrap")
    assert again.intervals == boot.intervals


def test_bootstrap_carries_the_kink_of_the_piecewise_fit():
    """The kink ``b0`` moves with the data: its bootstrap interval holds the truth and has
    a positive width."""
    df = _batches(seed=3)
    b = df.prefill_tokens + df.decode_tokens
    truth = {"c": 0.02, "a": 3e-5, "b0": 256.0}
    r = fit(_noisy(df, truth["c"] + truth["a"] * np.maximum(0, b - truth["b0"])), "piecewise",
            intervals="bootstrap", resamples=100)
    for name, value in truth.items():
        lo, hi = r.intervals[name]
        assert lo < hi and lo <= value <= hi, (name, lo, value, hi)


def test_bad_interval_options():
    df = _noisy(_batches(n=40), 0.02 + 1e-5 * np.arange(40))
    with pytest.raises(ValueError, match="intervals='exact'"):
        fit(df, "affine", intervals="exact")
    with pytest.raises(ValueError, match="resamples=5"):
        fit(df, "affine", intervals="bootstrap", resamples=5)

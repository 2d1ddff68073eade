"""Eq. 2–7 of seed 002: the tiled GPU batch-time model and Assumptions 1–2."""

import numpy as np
import pytest

import queuetheory as qt
from queuetheory.timing import AssumptionError, BatchLoad, GPUModel, ModelDims, TiledGPUTime


@pytest.fixture(scope="module")
def tm():
    return TiledGPUTime.illustrative()


def _rectangular_gemv():
    """The illustrative model on a GPU whose GeMV tile is 32 × 64 (``t_row ≠ t_col``)."""
    import dataclasses

    tm = TiledGPUTime.illustrative()
    gpu = dataclasses.replace(tm.gpu, mu_gemv={(32, 64): 0.6 * tm.gpu.mu_gemv[(64, 64)]})
    return TiledGPUTime(tm.model, gpu, check=False)


def test_tiled_gpu_time_is_exported(tm):
    assert isinstance(tm, qt.TiledGPUTime) and isinstance(tm, qt.TimeModel)


def test_eq7_staircase_linear_term_steps_at_multiples_of_t_col(tm):
    tc = tm.tile[1]
    t = [tm.components(BatchLoad.of_tokens(prefill=b))["linear"] for b in (1, tc, tc + 1)]
    assert t[0] == t[1] and t[2] == pytest.approx(2 * t[1], rel=1e-14)


def test_eq6_bracket_over_lcm_chunks_matches_closed_form(tm):
    tr, tc, tk = tm.tile
    tl, d = tm.t_lcm, tm.model.d
    for L in (tl, 3 * tl, 8 * tl):
        starts = np.arange(0, L, tl) + 1
        assert int(tm.prefill_bracket(starts, tl).sum()) * tr * tc * tk == d * L * (L + tl)


@pytest.mark.parametrize("model", ["illustrative", "rectangular-gemv"])
def test_eq5_decode_attention_counts_gemv_tiles(model):
    tm = TiledGPUTime.illustrative() if model == "illustrative" else _rectangular_gemv()
    vr, vc = tm.gpu.gemv_tile
    w = tm.model.kv_width
    i = 1000
    tiles = (w // vc) * -(-i // vr) + -(-i // vc) * (w // vr)
    assert tm.decode_attention(i) == pytest.approx(tiles / tm.gpu.mu_gemv[(vr, vc)])


def test_eq7_batch_time_is_the_sum_of_its_parts(tm):
    load = BatchLoad(np.array([300, 40]), np.array([0, 256]), np.array([700, 10, 5000]))
    parts = tm.components(load)
    tau = 343
    assert parts["linear"] == pytest.approx(-(-tau // tm.tile[1]) * tm.inv_mu_lin)
    assert tm.duration(load) == pytest.approx(sum(parts.values()))
    assert tm.batch_time([701, 11, 5001], [(1, 300), (257, 40)]) == pytest.approx(
        tm.duration(load))


@pytest.mark.parametrize("model", ["illustrative", "fitted-a100", "rectangular-gemv"])
def test_eq7_terms_are_the_methods_per_member_and_chunk(model):
    """``components`` (the engine's ``duration``) against Eq. 5 and Eq. 6 taken member by
    member and chunk by chunk with :meth:`decode_attention` and :meth:`prefill_attention`:
    the decode term is the exact sum of the members' tile-pairs over ``μ`` times ``N``,
    within two roundings (checked in rationals); the same in any order of the members; a
    chunk's term is the method's to the bit."""
    from fractions import Fraction

    tm = {"illustrative": TiledGPUTime.illustrative, "rectangular-gemv": _rectangular_gemv,
          "fitted-a100": lambda: TiledGPUTime.fitted("a100")}[model]()
    vr, vc = tm.gpu.gemv_tile
    mu = tm.gpu.mu_gemv[(vr, vc)]
    rng = np.random.default_rng(7)
    for _ in range(50):
        context = rng.integers(0, 20_000, size=int(rng.integers(1, 300)))
        chunk, start = rng.integers(1, 2048, size=1), rng.integers(0, 4096, size=1)
        parts = tm.components(BatchLoad(chunk, start, context))
        w = tm.model.kv_width
        tiles = sum((w // vc) * -(-(k + 1) // vr) + -(-(k + 1) // vc) * (w // vr)
                    for k in context.tolist())
        exact = Fraction(tm.model.N * tiles) / Fraction(mu)
        assert abs(Fraction(parts["decode_attention"]) - exact) <= 2 * Fraction(
            np.spacing(parts["decode_attention"]))
        assert parts["decode_attention"] == pytest.approx(
            tm.model.N * tm.decode_attention(context + 1).sum(), rel=1e-14)
        shuffled = tm.components(BatchLoad(chunk, start, rng.permutation(context)))
        assert shuffled["decode_attention"] == parts["decode_attention"]
        assert parts["prefill_attention"] == float(tm.prefill_attention(start + 1, chunk)[0])
        chunks = np.append(chunk, rng.integers(1, 512, size=2))
        starts = np.append(start, rng.integers(0, 4096, size=2))
        assert tm.components(BatchLoad(chunks, starts, context))["prefill_attention"] == float(
            tm.prefill_attention(starts + 1, chunks).sum())


def test_decode_time_grows_with_context(tm):
    t = [tm.batch_time([i] * 64) for i in (100, 1000, 8000)]
    assert t[0] < t[1] < t[2]


def test_assumption1_violation_raises():
    gpu = GPUModel.from_efficiency(efficiency={(128, 256, 32): 0.8, (128, 128, 32): 1.0})
    with pytest.raises(AssumptionError, match="Assumption 1"):
        TiledGPUTime(ModelDims.mistral_like(), gpu, tile=(128, 256, 32))
    assert gpu.t_star == (128, 128, 32)


def test_assumption2_violation_raises():
    gpu = GPUModel.from_efficiency(gemv_bandwidth=1e18)
    with pytest.raises(AssumptionError, match="Assumption 2"):
        TiledGPUTime(ModelDims.mistral_like(), gpu)


def test_t_star_prefers_lcm_equal_to_t_col_on_ties():
    gpu = GPUModel.from_efficiency(efficiency={(256, 128, 32): 1.0, (128, 256, 32): 1.0})
    assert gpu.t_star == (128, 256, 32)


@pytest.mark.parametrize("kw, name", [({"N": 0}, "N"), ({"n_ffn_mats": 4}, "n_ffn_mats")])
def test_bad_model_dims_name_the_parameter(kw, name):
    args = dict(N=2, d_x=256, d=256, d_ff=512, d_out=256) | kw
    with pytest.raises(ValueError, match=name):
        ModelDims(**args)


def test_dims_must_be_tile_multiples():
    dims = ModelDims(N=2, d_x=4096, d=4096, d_ff=1000, d_out=32000)
    with pytest.raises(ValueError, match="d_ff"):
        TiledGPUTime(dims, GPUModel.from_efficiency())

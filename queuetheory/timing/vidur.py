"""Real GPU timings: the per-operator profiles published with the Vidur simulator.

Vidur (microsoft/vidur, MIT license) profiled every operator of a transformer layer on real
GPUs at 1 to 4,096 tokens (32,768 for Llama-3-8B) and tensor parallel 1–8: Llama-2-7B on
A100 and H100, Llama-3-8B on A100. The toolkit ships the per-operator **median** times (ms,
one layer) aggregated per (GPU, model, tensor parallel, token count), 3,912 rows, in
``queuetheory/data/vidur_operator_medians.csv.gz`` with the MIT license text
(``VIDUR_LICENSE.txt``, attribution in ``VIDUR.md``); ``python -m queuetheory.timing.vidur
<vidur profiling dir>`` rebuilds it from the raw ``mlp.csv`` files.

:func:`vidur_profile` turns them into **per-batch linear-layer times**: the sum of the
linear operators' medians (``attn_pre_proj`` = Q/K/V, ``attn_post_proj`` = O,
``mlp_up_proj`` = gate and up, ``mlp_down_proj``) times the number of layers. What is
**not** in these profiles, and so not in the times: attention kernels (prefill and decode
attention over the KV cache), the LM head, the embedding lookup, the sampler, and for
``tp > 1`` the all-reduce communication; with ``ops="all"`` the profiled non-linear ops
(layer norms, rotary embedding, activation, residual add) are added.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["vidur_profile", "VIDUR_MODELS", "LINEAR_OPS", "NONLINEAR_OPS"]

SHIPPED = "vidur_operator_medians.csv.gz"
LINEAR_OPS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")
NONLINEAR_OPS = ("input_layernorm", "attn_rope", "post_attention_layernorm", "mlp_act", "add")
SHAPE = ("n_head", "n_kv_head", "n_embd", "n_expanded_embd", "vocab_size")

#: profiled models: the file name Vidur uses and the number of layers (not in the files)
VIDUR_MODELS = {
    "llama-2-7b": {"file": "Llama-2-7b-hf", "layers": 32, "gpus": ("a100", "h100")},
    "llama-3-8b": {"file": "Meta-Llama-3-8B", "layers": 32, "gpus": ("a100",)},
}
_UNITS = {"s": 1e-3, "ms": 1.0}


@cache
def _shipped() -> pd.DataFrame:
    """The shipped table, read once (callers filter it, which copies)."""
    with resources.files("queuetheory.data").joinpath(SHIPPED).open("rb") as f:
        return pd.read_csv(f, compression="gzip")


def vidur_profile(gpu: str = "a100", model: str = "llama-2-7b", tp: int = 1, *,
                  ops: str = "linear", unit: str = "s") -> pd.DataFrame:
    """Per-batch times of the linear layers measured by Vidur, one row per token count.

    Parameters
    ----------
    gpu : str, default "a100"
        ``"a100"`` or ``"h100"`` (Llama-3-8B: A100 only).
    model : str, default "llama-2-7b"
        ``"llama-2-7b"`` or ``"llama-3-8b"``.
    tp : int, default 1
        Tensor parallel degree, 1, 2, 4 or 8 (times per GPU, communication not included).
    ops : str, default "linear"
        ``"linear"`` (the four linear operators), ``"nonlinear"`` (the profiled non-linear
        ops) or ``"all"`` (both); attention kernels are never included (not profiled).
    unit : str, default "s"
        ``"s"`` or ``"ms"``.

    Returns
    -------
    pandas.DataFrame
        ``num_tokens``, ``duration`` (all layers, median), ``duration_std`` (the operators'
        standard deviations over repeated runs, combined as independent, all layers), and
        the measurement columns :func:`queuetheory.timing.fit` reads: ``prefill_tokens =
        kv_tokens = num_tokens`` and ``decode_tokens = 0`` (a linear layer costs the same
        for a prefill and a decode token; read the token count as one batch of fresh prompt
        tokens).

    Raises
    ------
    ValueError
        If ``model``, ``gpu`` (for that model), ``tp``, ``ops`` or ``unit`` is not one of
        those listed.
    """
    if model not in VIDUR_MODELS:
        raise ValueError(f"model={model!r}: must be one of {tuple(VIDUR_MODELS)}")
    if gpu not in VIDUR_MODELS[model]["gpus"]:
        raise ValueError(f"gpu={gpu!r}: {model} was profiled on {VIDUR_MODELS[model]['gpus']}")
    if tp not in (1, 2, 4, 8):
        raise ValueError(f"tp={tp!r}: must be 1, 2, 4 or 8")
    if ops not in ("linear", "nonlinear", "all"):
        raise ValueError(f"ops={ops!r}: must be 'linear', 'nonlinear' or 'all'")
    if unit not in _UNITS:
        raise ValueError(f"unit={unit!r}: must be one of {tuple(_UNITS)}")
    d = _shipped()
    d = d[(d.gpu == gpu) & (d.model == VIDUR_MODELS[model]["file"]) & (d.tp == tp)]
    names = {"linear": LINEAR_OPS, "nonlinear": NONLINEAR_OPS,
             "all": LINEAR_OPS + NONLINEAR_OPS}[ops]
    layers = VIDUR_MODELS[model]["layers"]
    scale = layers * _UNITS[unit]
    tokens = d["num_tokens"].to_numpy(np.int64)
    duration = d[[f"{o}.median" for o in names]].sum(axis=1).to_numpy() * scale
    var = (d[[f"{o}.std" for o in names]] ** 2).sum(axis=1).to_numpy()
    return pd.DataFrame({"num_tokens": tokens, "duration": duration,
                         "duration_std": np.sqrt(var) * scale, "prefill_tokens": tokens,
                         "decode_tokens": 0, "kv_tokens": tokens}).reset_index(drop=True)


def model_shape(gpu: str = "a100", model: str = "llama-2-7b") -> dict:
    """The profiled model's shape as Vidur records it (heads, widths, vocabulary) and its
    number of layers."""
    d = _shipped()
    row = d[(d.gpu == gpu) & (d.model == VIDUR_MODELS[model]["file"])].iloc[0]
    return {**{k: int(row[k]) for k in SHAPE}, "layers": VIDUR_MODELS[model]["layers"]}


def build(source: Path, path: Path | None = None) -> Path:
    """Aggregate Vidur's ``<gpu>/<model>_mlp.csv`` files under ``source`` into the shipped
    table: per-operator median and std, averaged over repeated (tp, num_tokens) rows."""
    frames = []
    for gpu_dir in sorted(p for p in Path(source).iterdir() if p.is_dir()):
        for f in sorted(gpu_dir.glob("*_mlp.csv")):
            raw = pd.read_csv(f)
            cols = {f"time_stats.{o}.{s}": f"{o}.{s}" for o in LINEAR_OPS + NONLINEAR_OPS
                    for s in ("median", "std")}
            part = raw.rename(columns=cols).rename(columns={"num_tensor_parallel_workers": "tp"})
            part = part.groupby(["tp", "num_tokens"], as_index=False)[
                list(cols.values()) + list(SHAPE)].mean()
            part.insert(0, "model", f.name.removesuffix("_mlp.csv"))
            part.insert(0, "gpu", gpu_dir.name)
            frames.append(part)
    path = Path(path) if path else Path(__file__).parents[1] / "data" / SHIPPED
    out = pd.concat(frames, ignore_index=True)
    out[list(SHAPE)] = out[list(SHAPE)].astype(np.int64)
    out.round(6).to_csv(path, index=False, compression={"method": "gzip", "mtime": 0})
    return path


if __name__ == "__main__":
    import sys

    if len(sys.argv) != 2:
        raise SystemExit("usage: python -m queuetheory.timing.vidur <vidur profiling dir>")
    written = build(Path(sys.argv[1]))
    print(f"wrote {written} ({written.stat().st_size:,} bytes)")


def model_dims(gpu: str = "a100", model: str = "llama-2-7b"):
    """The profiled model in the abstraction of Bari, Hegde, de Veciana (:class:`ModelDims`):
    ``d = d_x`` = hidden width, ``d_kv`` = the K/V width of grouped-query attention, three
    FFN matrices (SwiGLU), ``d_out`` = Vidur's (padded) vocabulary."""
    from .gpu import ModelDims

    s = model_shape(gpu, model)
    return ModelDims(N=s["layers"], d_x=s["n_embd"], d=s["n_embd"], d_ff=s["n_expanded_embd"],
                     d_out=s["vocab_size"], d_kv=s["n_embd"] * s["n_kv_head"] // s["n_head"],
                     n_ffn_mats=3)


def fit_tiled(gpu: str = "a100", model: str = "llama-2-7b", tp: int = 1, *,
              max_tokens: int = 4096, folds: int = 5, seed: int = 0):
    """Eq. 7's first two terms fitted to Vidur's profiles up to ``max_tokens`` tokens: the
    tiled fit (:func:`queuetheory.timing.fit`, ``model="tiled"``) of the linear layers
    (the staircase, tile width ``t_col``), plus an affine fit of the non-linear ops added
    to the per-token term ``1/μ_nLin`` and the overhead ``c0``. Returns the linear fit's
    :class:`FitReport` (intervals, held-out error) whose ``model`` is the combined
    :class:`TiledGPUTime`, in seconds.

    The LM head is not profiled: every time is scaled by ``K_lin / (K_lin − d_x d_out)``
    (the abstraction's weights with and without it), i.e. it is taken to run at the layers'
    time per weight. Attention is not profiled either: the model's attention terms use the
    fitted GeMM speed (prefill) and the data-sheet bandwidth (decode GeMV), not measurements.
    """
    from .fitting import GPU_SPECS, _tiled_model, fit

    dims = model_dims(gpu, model)
    lm_head = dims.K_lin / (dims.K_lin - dims.d_x * dims.d_out)

    def scaled(ops):
        d = vidur_profile(gpu, model, tp, ops=ops)
        d = d[d.num_tokens <= max_tokens].copy()
        d["duration"] *= lm_head
        return d

    report = fit(scaled("linear"), "tiled", dims=dims, gpu_spec=gpu, folds=folds, seed=seed)
    nonlinear = fit(scaled("nonlinear"), "affine", folds=folds, seed=seed)
    c_n, p_n = nonlinear.params["c"], nonlinear.params["per_token"]
    p = report.params
    report.notes = [f"Vidur {gpu} {model} tp={tp}: linear layers up to {max_tokens} tokens "
                    f"(tiled fit) plus non-linear ops (affine fit: {c_n:.4g} s + {p_n:.4g} "
                    f"s/token, held-out error {100 * nonlinear.heldout_error:.2g} %), scaled "
                    f"by {lm_head:.4f} for the LM head; no attention, no communication "
                    "measured"]
    report.model = _tiled_model((p["c0"] + c_n, p["alpha"], p["beta"] + p_n), p["t_col"], dims,
                                GPU_SPECS[gpu], report.notes)
    return report


@cache
def fitted_model(gpu: str = "a100", model: str = "llama-2-7b", tp: int = 1):
    """``fit_tiled(gpu, model, tp).model``, fitted once per process."""
    return fit_tiled(gpu, model, tp).model

"""Do batch-time fits transfer across models and GPUs? Vidur's published profiles.

Vidur (microsoft/vidur, MIT) profiled the linear layers of eight models on A100, H100 and
A40 (``data/profiling/compute/<gpu>/<org>/<model>/mlp.csv``). Per GPU, at tensor parallel
1 and 1 to 4,096 tokens, one layer's linear time (``attn_pre_proj + attn_post_proj +
mlp_up_proj + mlp_down_proj``, medians) is compared with two predictions:

* **transfer**: a source model's measured time scaled by the weights per layer,
  ``K = d(d + 2 d_kv) + d² + m·d·d_ff`` (``m`` = 3 for SwiGLU, 2 for phi-2's GELU MLP), the
  target's over the source's — what the tiled model of Bari et al. does when one model's fit
  is applied to another model's dimensions (its linear time is ``K_lin`` over a fitted
  speed, with the fitted staircase);
* **refit**: :func:`queuetheory.timing.fit` on the target's own profile (``"best"`` family,
  5-fold held-out error).

Reported per (GPU, source, target): the median and the 10th–90th percentiles of
``predicted / measured``, and the median absolute error; per target the refit's held-out
RMS relative error. Run: ``python benchmarks/gpu_transfer.py VIDUR_REPO`` (a checkout of
microsoft/vidur; nothing is downloaded).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

import queuetheory as qt

LINEAR = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")
NONLINEAR = ("input_layernorm", "attn_rope", "post_attention_layernorm", "mlp_act", "add")
GELU = ("phi-2",)
#: decoder layers (not in Vidur's files; from the models' configs)
LAYERS = {"Llama-2-7b-hf": 32, "Meta-Llama-3-8B": 32, "Llama-2-70b-hf": 80,
          "Meta-Llama-3-70B": 80, "Qwen-72B": 80, "CodeLlama-34b-Instruct-hf": 48,
          "internlm-20b": 60, "phi-2": 32}


def load(repo: Path) -> pd.DataFrame:
    rows = []
    for f in sorted((repo / "data" / "profiling" / "compute").glob("*/*/*/mlp.csv")):
        gpu, model = f.parts[-4], f.parts[-2]
        d = pd.read_csv(f)
        d = d[d["num_tensor_parallel_workers"] == 1]
        t = d[[f"time_stats.{o}.median" for o in LINEAR]].sum(axis=1)
        nl = d[[f"time_stats.{o}.median" for o in NONLINEAR
                if f"time_stats.{o}.median" in d]].sum(axis=1)
        part = pd.DataFrame({"gpu": gpu, "model": model, "tokens": d["num_tokens"],
                             "ms": t, "ms_all": t + nl})
        part = part.groupby(["gpu", "model", "tokens"], as_index=False)[["ms", "ms_all"]].mean()
        first = d.iloc[0]
        dm, dff = int(first["n_embd"]), int(first["n_expanded_embd"])
        dkv = dm * int(first["n_kv_head"]) // int(first["n_head"])
        mats = 2 if model in GELU else 3
        part["weights"] = dm * (dm + 2 * dkv) + dm * dm + mats * dm * dff
        part[["d", "d_kv", "d_ff", "vocab", "mats"]] = (dm, dkv, dff,
                                                        int(first["vocab_size"]), mats)
        rows.append(part)
    return pd.concat(rows, ignore_index=True)


def transfer(df: pd.DataFrame) -> pd.DataFrame:
    out = []
    for gpu, g in df.groupby("gpu"):
        for src, s in g.groupby("model"):
            s = s.set_index("tokens")
            for dst, t in g.groupby("model"):
                if dst == src:
                    continue
                t = t.set_index("tokens")
                common = s.index.intersection(t.index)
                common = common[common <= 4096]
                pred = s.loc[common, "ms"] * t["weights"].iloc[0] / s["weights"].iloc[0]
                r = (pred / t.loc[common, "ms"]).to_numpy()
                out.append({"gpu": gpu, "source": src, "target": dst,
                            "weights_ratio": t["weights"].iloc[0] / s["weights"].iloc[0],
                            "ratio_median": float(np.median(r)),
                            "ratio_p10": float(np.percentile(r, 10)),
                            "ratio_p90": float(np.percentile(r, 90)),
                            "median_abs_error": float(np.median(np.abs(r - 1)))})
    return pd.DataFrame(out)


def tiled_transfer(df: pd.DataFrame) -> pd.DataFrame:
    """The shipped tiled fit of Llama-2-7B (:meth:`TiledGPUTime.fitted`) applied to each
    target's dimensions (its GPU parameters kept, the model's swapped): a prefill batch's
    time less attention and the LM head (neither profiled), against the target's measured
    linear and non-linear ops per layer times its layers. ``scaled``: the same with the
    fit's per-token cost (``1/μ_nLin``, which absorbs most of the linear layers' measured
    time) and overhead scaled by the weights per layer, target over source."""
    from queuetheory.timing import BatchLoad, ModelDims, TiledGPUTime

    out = []
    for gpu in ("a100", "h100"):
        src = TiledGPUTime.fitted(gpu, "llama-2-7b")
        per_layer_src = (src.model.K_lin - src.model.d_x * src.model.d_out) / src.model.N
        for model, t in df[df["gpu"] == gpu].groupby("model"):
            t = t[t["tokens"] <= 4096]
            r0 = t.iloc[0]
            dims = ModelDims(N=LAYERS[model], d_x=int(r0["d"]), d=int(r0["d"]),
                             d_ff=int(r0["d_ff"]), d_out=int(r0["vocab"]),
                             d_kv=int(r0["d_kv"]), n_ffn_mats=int(r0["mats"]))
            tm = TiledGPUTime(dims, src.gpu, src.tile, check=False)
            share = 1 - dims.d_x * dims.d_out / dims.K_lin
            k = (dims.K_lin - dims.d_x * dims.d_out) / dims.N / per_layer_src
            measured = t["ms_all"].to_numpy() * LAYERS[model]
            row = {"gpu": gpu, "target": model}
            for how in ("as is", "scaled"):
                pred = []
                for n in t["tokens"].to_numpy():
                    c = tm.components(BatchLoad.of_tokens(prefill=int(n)))
                    rest = c["nonlinear"] + c["overhead"]
                    pred.append(c["linear"] + (rest * k * dims.N / src.model.N
                                               if how == "scaled" else rest))
                r = np.array(pred) * share * 1e3 / measured
                row[f"{how}: median"] = float(np.median(r))
                row[f"{how}: p10-p90"] = f"{np.percentile(r, 10):.2f}-{np.percentile(r, 90):.2f}"
                row[f"{how}: |err| median"] = float(np.median(np.abs(r - 1)))
            out.append(row)
    return pd.DataFrame(out)


def refit(df: pd.DataFrame) -> pd.DataFrame:
    out = []
    for (gpu, model), g in df.groupby(["gpu", "model"]):
        g = g[g["tokens"] <= 4096]
        m = pd.DataFrame({"duration": g["ms"].to_numpy(), "prefill_tokens": g["tokens"],
                          "decode_tokens": 0, "kv_tokens": g["tokens"]})
        rep = qt.timing.fit(m, "best")
        pred = np.array([rep.model.duration(qt.timing.BatchLoad.of_tokens(prefill=int(n)))
                         for n in g["tokens"]])
        out.append({"gpu": gpu, "model": model, "family": type(rep.model).__name__,
                    "heldout_rms": rep.heldout_error,
                    "median_abs_error": float(np.median(np.abs(pred / g["ms"] - 1)))})
    return pd.DataFrame(out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("vidur", type=Path, help="a checkout of microsoft/vidur")
    a = p.parse_args()
    df = load(a.vidur)
    pd.set_option("display.width", 200)
    tr = transfer(df)
    print("transfer from Llama-2-7b (the shipped default) to every other model:")
    print(tr[tr["source"] == "Llama-2-7b-hf"].round(3).to_string(index=False))
    print("\nthe best source per target (smallest median absolute error):")
    best = tr.loc[tr.groupby(["gpu", "target"])["median_abs_error"].idxmin()]
    print(best.round(3).to_string(index=False))
    print("\nthe shipped tiled fit of Llama-2-7b applied to each model's dimensions:")
    print(tiled_transfer(df).round(3).to_string(index=False))
    print("\nrefit per configuration:")
    print(refit(df).round(3).to_string(index=False))


if __name__ == "__main__":
    main()

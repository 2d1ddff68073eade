"""Speed of the real-data layer: reading traces and fitting time models, on one core.

* ``qt.data.azure_trace("conv")``: the shipped 19,366-request Azure conversation trace
  (gzip CSV, date-time timestamps) into a Trace (target < 0.5 s); also the code trace and
  the same conversation rows from Parquet and JSONL files written to a temporary folder;
* ``qt.timing.fit(vidur_profile("a100", "llama-2-7b"), "best", dims=...)``: the four families
  with 5-fold held-out errors on the Vidur A100 profile (target < 2 s), and the fit behind
  ``TiledGPUTime.fitted("a100")`` (which caches it);
* the reference: ``benchmarks/anchor.py``'s simulation (10⁴ requests, Sarathi), timed in the
  same run, so that a slow machine shows.

Each figure is the median of ``--repeat`` runs after one warm-up run (imports and the first
file read are counted separately as ``first call``).

Run: ``python benchmarks/traces.py [--repeat 5]``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import pandas as pd

import queuetheory as qt


def timed(fn, repeat: int) -> dict:
    start = time.perf_counter()
    fn()
    first = time.perf_counter() - start
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - start)
    return {"first call s": first, "median s": statistics.median(runs), "min s": min(runs)}


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    from anchor import anchor

    from queuetheory.timing import ModelDims, fit, vidur_profile
    from queuetheory.timing.vidur import fit_tiled

    rows = {}
    rows["azure_trace('conv'), 19,366 rows, csv.gz"] = timed(
        lambda: qt.data.azure_trace("conv"), args.repeat)
    rows["azure_trace('code'), 8,819 rows, csv.gz"] = timed(
        lambda: qt.data.azure_trace("code"), args.repeat)
    conv = qt.data.azure_trace("conv")
    frame = pd.DataFrame({"timestamp": 1e3 * conv.arrival, "input_length": conv.prompt,
                          "output_length": conv.output})
    with tempfile.TemporaryDirectory() as tmp:
        pq, jl = Path(tmp) / "conv.parquet", Path(tmp) / "conv.jsonl"
        frame.to_parquet(pq)
        frame.to_json(jl, orient="records", lines=True)
        rows["read_trace, 19,366 rows, Parquet (Mooncake columns)"] = timed(
            lambda: qt.Workload.from_trace(pq), args.repeat)
        rows["read_trace, 19,366 rows, JSONL (Mooncake columns)"] = timed(
            lambda: qt.Workload.from_trace(jl), args.repeat)
    profile = vidur_profile("a100", "llama-2-7b")
    dims = ModelDims(N=32, d_x=4096, d=4096, d_ff=11008, d_out=32768, n_ffn_mats=3)
    rows["vidur_profile('a100', 'llama-2-7b')"] = timed(
        lambda: vidur_profile("a100", "llama-2-7b"), args.repeat)
    rows["fit(profile, 'best'), 4 families, 5-fold"] = timed(
        lambda: fit(profile, "best", dims=dims), args.repeat)
    rows["fit_tiled('a100') (behind TiledGPUTime.fitted)"] = timed(
        lambda: fit_tiled("a100"), args.repeat)
    rows["reference: anchor.py (10^4 requests, Sarathi)"] = timed(anchor, args.repeat)
    with pd.option_context("display.width", 120):
        print(pd.DataFrame(rows).T.round(4).to_string())


if __name__ == "__main__":
    main()

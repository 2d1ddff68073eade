"""Speed and accuracy of the sim-to-real replay (``qt.validate.replay``) on one core.

* the CPU time of a whole replay of each shipped 300-request vLLM run (reading the run and
  the profile, building the scheduler, simulating, the per-request table), the median of
  ``--repeat`` runs after a warm-up; the reference simulation of ``benchmarks/anchor.py``
  (10⁴ requests, Sarathi) is timed in the same run, so that a slow machine shows;
* on the RTX PRO 6000 run, what each modelled vLLM behaviour is worth: the errors of the
  prediction with asynchronous scheduling off (``VLLMV1(async_scheduling=False)``), with
  the engine taken as eager (``enforce_eager``: no batch padded to a CUDA graph size) and
  with TTFT and E2E measured from the client's send time instead of the engine's queue time.

LLMServingSim itself (C++ ASTRA-Sim under Python) is not run here: its replay of these runs
takes minutes by its authors' account; its per-request prediction ships with the run.

Run: ``python -m benchmarks.validate [--repeat 5]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
import warnings

import numpy as np

import queuetheory as qt
from benchmarks.anchor import anchor_trace, ours
from queuetheory.validate import error_table, load_run, replay


def _cpu(fn, repeat):
    fn()
    times = []
    for _ in range(repeat):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return statistics.median(times)


def _row(name, table):
    t = table.set_index(["metric", "statistic"])["queuetheory_error_pct"]
    cells = [f"{t[(m, 'mean')]:+.1f} %" for m in ("TTFT", "TPOT", "E2E")]
    cells += [f"{t[(m, 'per-request median abs error')]:.2f} %" for m in ("TTFT", "TPOT", "E2E")]
    return f"| {name} | " + " | ".join(cells) + " |"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeat", type=int, default=5)
    a = p.parse_args(argv)
    warnings.simplefilter("ignore")
    ref = statistics.median(ours(*anchor_trace(10_000), qt.policies.Sarathi(512))["cpu_s"]
                            for _ in range(a.repeat))
    print(f"reference (anchor, 10^4 requests, Sarathi): {ref:.3f} s CPU")
    for name in ("rtxpro6000", "rtx4090"):
        cpu = _cpu(lambda name=name: replay(name).predicted, a.repeat)
        v = replay(name)
        print(f"replay {name}: {cpu:.3f} s CPU in all ({v.cpu_seconds:.3f} s simulating, "
              f"{len(v.result.batches):,} iterations, {v.summary()['preemptions']} preemptions)")

    run = load_run("rtxpro6000")
    print("\n| RTX PRO 6000 run | TTFT mean | TPOT mean | E2E mean | TTFT per request "
          "| TPOT per request | E2E per request |\n|---|---|---|---|---|---|---|")
    final = replay(run)
    print(_row("as shipped (asynchronous scheduling, from the queue time)", final.errors()))
    sync = replay(run, policy=qt.policies.VLLMV1.from_engine_args(
        {**run.engine_args, "async_scheduling": False}))
    print(_row("synchronous scheduling", sync.errors()))
    eager = replay(dataclasses.replace(run, engine_args={**run.engine_args,
                                                         "enforce_eager": True}))
    print(_row("eager (no CUDA graph padding)", eager.errors()))
    r = final.result.requests
    sent = final.predicted.assign(
        ttft_ms=1e3 * (r["first_token"].to_numpy() - r["arrival"].to_numpy()),
        e2e_ms=1e3 * (r["finish"].to_numpy() - r["arrival"].to_numpy()))
    print(_row("TTFT and E2E from the send time", error_table(run.measured, sent)))
    print(_row("LLMServingSim's own prediction", error_table(run.measured, run.peer)))
    assert np.isfinite(final.predicted[["ttft_ms", "e2e_ms"]].to_numpy()).all()


if __name__ == "__main__":
    main()

"""Coverage of ``qt.capacity.goodput``'s interval, and the fleet-sizing command against a
long independent run.

**Coverage.** Sarathi (b = 512) on the shipped ShareGPT V3 pairs with the affine batch time
of issue 9 (seconds), targets TTFT ≤ 1 s and largest token gap ≤ 0.1 s for 90 % of the
requests. ``--reps`` times (default 20), ``goodput`` runs with its defaults (5 seeds, 2,000
requests a probe) on seeds no other repetition uses, and its 95 % interval is compared with
an independent long-run answer: ``goodput`` with one replication of ``--long`` requests a
probe (default 40,000) at tolerance 0.5 %, on a seed of its own. Reported: how many
intervals hold the long-run answer, the mean spread, the mean bias.

**Sizing.** The command of the README (``queuetheory capacity --gpu h100 --model llama-2-7b
--policy sarathi --budget 512 --trace azure-conv --rate 30 --p99-ttft 2 --p99-tpot 0.1``)
is timed (CPU seconds), and its count checked against long independent runs of the same
fleet: each count from one below to one above the answer runs ``--fleet-requests``
arrivals per engine (default 8,000) on seeds the command did not use, and the smallest count
meeting both targets there is the long-run answer.

Run: ``python benchmarks/capacity_coverage.py [--reps 20] [--long 40000] [--skip-sizing]``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

import numpy as np

import queuetheory as qt
from queuetheory import capacity as cap
from queuetheory.capacity.fleet import fleet_trace
from queuetheory.capacity.targets import percentile_report
from queuetheory.networks import simulate_fleet
from queuetheory.timing.catalog import gpu_engine

TIME = qt.AffineTokenTime(c=16.1e-3, per_prefill=57.8e-6, per_decode=39.5e-6)
SLO = {"ttft": 1.0, "tbt": 0.1}
COMMAND = ["capacity", "--gpu", "h100", "--model", "llama-2-7b", "--policy", "sarathi",
           "--budget", "512", "--trace", "azure-conv", "--rate", "30", "--p99-ttft", "2",
           "--p99-tpot", "0.1"]


def coverage(reps: int, long: int, n: int | None = None) -> dict:
    prompt, output = qt.data.sharegpt_lengths()
    wl = qt.Workload.from_lengths(prompt, output, rate=1.0)
    pol = qt.policies.Sarathi(512)
    t0 = time.process_time()
    ref = cap.goodput(wl, pol, TIME, slo=SLO, n_requests=long, seeds=(10_000,), tol=0.005)
    truth, ref_cpu = ref.rate, time.process_time() - t0
    rows = []
    for r in range(reps):
        c0 = time.process_time()
        kw = {} if n is None else {"n_requests": n}
        g = cap.goodput(wl, pol, TIME, slo=SLO, seeds=tuple(range(5 * r, 5 * r + 5)), **kw)
        lo, hi = g.interval
        rows.append((g.rate, lo, hi, lo <= truth <= hi, g.spread, time.process_time() - c0))
        print(f"rep {r:2d}: {g.rate:.4g} [{lo:.4g}, {hi:.4g}] "
              f"{'holds' if lo <= truth <= hi else 'MISSES'} {truth:.4g}; spread "
              f"±{g.spread:.1%}; {rows[-1][-1]:.1f} s CPU", flush=True)
    a = np.array(rows, dtype=float)
    return {"truth": truth, "truth_cpu_s": ref_cpu, "covered": int(a[:, 3].sum()),
            "reps": reps, "mean_spread": float(a[:, 4].mean()),
            "max_spread": float(a[:, 4].max()),
            "bias": float(a[:, 0].mean() / truth - 1), "cpu_s": float(a[:, 5].mean())}


def sizing(fleet_requests: int) -> dict:
    c0 = time.process_time()
    out = subprocess.run([sys.executable, "-m", "queuetheory", *COMMAND, "--out",
                          "/tmp/capacity_coverage"], capture_output=True, text=True,
                         check=False)
    wall_cpu = time.process_time() - c0
    print(out.stdout)
    line = [x for x in out.stdout.splitlines() if x.startswith("answer:")]
    cpu = [x for x in out.stdout.splitlines() if x.startswith("CPU time:")]
    count = int(line[0].split()[1]) if line else None
    eng = gpu_engine("h100", "llama-2-7b")
    trace = qt.data.azure_trace("conv")
    pol = qt.policies.Sarathi(512)
    verdict = {}
    for K in ([count - 1, count, count + 1] if count else []):
        if K < 1:
            continue
        H = fleet_requests * K / 30.0
        reports = []
        for seed in (101, 102):
            tr = fleet_trace(trace, 30.0, H + 60.0, seed)
            run = simulate_fleet(tr, pol, eng.time_model, K, router="least_kv",
                                 memory=eng.kv_tokens, horizon=H + 60.0, seed=seed)
            reports.append(percentile_report(run.requests, {"p99_ttft": 2.0,
                                                            "p99_tpot": 0.1},
                                             start=0.2 * H, end=H))
        verdict[K] = [(r["value"].round(4).to_dict(), bool(r["meets"].all()))
                      for r in reports]
        print(f"long run, {K} engines: {verdict[K]}", flush=True)
    meeting = [K for K, v in verdict.items() if all(m for _, m in v)]
    return {"count": count, "command_cpu": cpu[0] if cpu else None,
            "long_run_count": min(meeting) if meeting else None, "long_runs": verdict,
            "subprocess_wait_s": wall_cpu}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--long", type=int, default=40_000)
    p.add_argument("-n", type=int, help="requests a probe (default: goodput's)")
    p.add_argument("--fleet-requests", type=int, default=8_000)
    p.add_argument("--skip-sizing", action="store_true")
    p.add_argument("--skip-coverage", action="store_true")
    a = p.parse_args()
    if not a.skip_coverage:
        print(coverage(a.reps, a.long, a.n), flush=True)
    if not a.skip_sizing:
        print(sizing(a.fleet_requests), flush=True)


if __name__ == "__main__":
    main()

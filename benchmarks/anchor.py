"""The anchor workload of issue 9, run end to end by ``simulate`` on one core.

Fixed 512-token prompts, 256 output tokens, Poisson arrivals at 4 requests/s, Sarathi with
chunk (token budget) 512, batch time 16.1 ms + 57.8 µs per prefill token + 39.5 µs per decode
token, 10⁴ requests. Time is in seconds. Run: ``python benchmarks/anchor.py [--fast-path off]``.
"""

from __future__ import annotations

import argparse
import resource
import time

import queuetheory as qt


def anchor(n_requests: int = 10_000, fast_path: bool = True, seed: int = 0) -> dict:
    wl = qt.Workload([qt.RequestClass(prompt=512, output=256, rate=4.0)])
    tm = qt.AffineTokenTime(c=16.1e-3, per_prefill=57.8e-6, per_decode=39.5e-6)
    pol = qt.policies.Sarathi(token_budget=512)
    t0, c0 = time.perf_counter(), time.process_time()
    res = qt.simulate(wl, pol, tm, n_requests=n_requests, seed=seed, fast_path=fast_path)
    m = res.metrics
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {
        "requests": n_requests, "wall_s": wall, "cpu_s": cpu,
        "requests_per_s": n_requests / wall,
        "iterations": m["iterations"], "iterations_per_s": m["iterations"] / wall,
        "completed": m["completed"], "mean_latency_s": m["mean_latency"],
        "peak_rss_MB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("-n", type=int, default=10_000)
    ap.add_argument("--fast-path", choices=("on", "off"), default="on")
    args = ap.parse_args()
    out = anchor(args.n, args.fast_path == "on")
    for k, v in out.items():
        print(f"{k:>18}: {v:,.4g}" if isinstance(v, float) else f"{k:>18}: {v:,}")


if __name__ == "__main__":
    main()

"""``qt.capacity.max_rate`` on ShareGPT lengths for each classic scheduler, on one core.

The shipped ShareGPT V3 pairs (mean prompt 213, output 207 words), the affine batch time of
issue 9 (16.1 ms + 57.8 µs per prefill token + 39.5 µs per decode token; seconds), token
budget 512, no memory limit. For each scheduler: the wall and CPU time of ``max_rate`` at
``--tol`` (default 0.01), its rate and interval, how many probes (and how many inconclusive)
it took, and whether it converged. The anchor workload (``anchor.py``, 10⁴ requests) is
timed in the same run as the reference for the machine's speed. Run:
``python benchmarks/capacity.py [--tol 0.01] [-n 2000] [--policy sarathi ...]``.
"""

from __future__ import annotations

import argparse
import time

import queuetheory as qt
from queuetheory import capacity as cap

TIME = qt.AffineTokenTime(c=16.1e-3, per_prefill=57.8e-6, per_decode=39.5e-6)
POLICIES = {"sarathi": qt.policies.Sarathi, "orca": qt.policies.Orca,
            "vllm": qt.policies.VLLMVanilla, "fastertransformer": qt.policies.FasterTransformer}


def reference(n_requests: int = 10_000) -> tuple[float, float]:
    """Wall and CPU seconds of ``simulate`` on the anchor workload (Sarathi, 512/256, 4/s)."""
    wl = qt.Workload([qt.RequestClass(prompt=512, output=256, rate=4.0)])
    t0, c0 = time.perf_counter(), time.process_time()
    qt.simulate(wl, qt.policies.Sarathi(512), TIME, n_requests=n_requests)
    return time.perf_counter() - t0, time.process_time() - c0


def run(name: str, tol: float, n_requests: int | None) -> dict:
    prompt, output = qt.data.sharegpt_lengths()
    wl = qt.Workload.from_lengths(prompt, output, rate=1.0)
    t0, c0 = time.perf_counter(), time.process_time()
    m = cap.max_rate(wl, POLICIES[name](512), TIME, tol=tol, n_requests=n_requests)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    lo, hi = m.interval
    return {"policy": name, "wall_s": wall, "cpu_s": cpu, "rate": m.rate, "low": lo,
            "high": hi, "half_width": (hi - lo) / (hi + lo), "efficiency": m.efficiency,
            "probes": len(m.probes), "inconclusive": m.inconclusive,
            "converged": m.converged, "note": m.note}


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tol", type=float, default=0.01)
    ap.add_argument("-n", type=int, default=None,
                    help="requests per probe (default: stability's default horizon)")
    ap.add_argument("--policy", nargs="+", choices=sorted(POLICIES), default=list(POLICIES))
    args = ap.parse_args()
    wall, cpu = reference()
    print(f"reference: anchor simulate, 10^4 requests: wall {wall:.3f} s, cpu {cpu:.3f} s")
    for name in args.policy:
        out = run(name, args.tol, args.n)
        print(" ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                       for k, v in out.items()), flush=True)
    wall, cpu = reference()
    print(f"reference again: wall {wall:.3f} s, cpu {cpu:.3f} s")


if __name__ == "__main__":
    main()

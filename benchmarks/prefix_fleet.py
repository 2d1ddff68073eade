"""A fleet with prefix caches on the whole Mooncake conversation trace, on one core.

``qt.networks.simulate_fleet`` of ``qt.data.mooncake_trace("conversation")`` (12,031
requests over 59 minutes, prompts of some 12,000 tokens in 512-token prefix blocks) on 8
engines, each ``VLLMV1(128, 2048, num_gpu_blocks=40_000, enable_prefix_caching=True)``
(16-token KV blocks) on ``AffineTokenTime(0.01, 5e-5, 4e-5)``, behind the ``cache_aware``
router (issue 32's target: under 15 s of CPU) and the ``round_robin`` one. Prints the CPU
seconds of the simulation (the records' metrics included), the iterations (batches of all
engines), µs per iteration, the prefix hit ratio and the preemptions. The reference
simulation of ``benchmarks/anchor.py`` (10⁴ requests, Sarathi) is timed in the same run, so
that a slow or crowded machine shows.

``--until S`` keeps the requests arriving before ``S`` seconds; ``--fast-path off`` asks
every engine's scheduler at every iteration (the records are the same); ``--routers``
picks the routers.

Run from the repository root: ``python -m benchmarks.prefix_fleet [--until 600]
[--fast-path off] [--routers cache_aware round_robin]``.
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np

import queuetheory as qt
from benchmarks.anchor import anchor_trace, ours
from queuetheory.networks import simulate_fleet  # imported before any clock starts


def fleet(trace, router: str, fast_path: bool = True) -> dict:
    policy = qt.policies.VLLMV1(128, 2048, num_gpu_blocks=40_000, enable_prefix_caching=True)
    time_model = qt.AffineTokenTime(0.01, 5e-5, 4e-5)
    c0, t0 = time.process_time(), time.perf_counter()
    res = simulate_fleet(trace, policy, time_model, 8, router=router, fast_path=fast_path)
    m = res.metrics
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    iterations = len(res.batches)
    return {"cpu_s": cpu, "wall_s": wall, "iterations": iterations,
            "us_per_iteration": 1e6 * cpu / iterations, "completed": m["completed"],
            "prefix_hit_ratio": m["prefix_hit_ratio"],
            "preemptions": int(res.batches["evicted"].sum())}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--until", type=float, default=None)
    ap.add_argument("--fast-path", choices=("on", "off"), default="on")
    ap.add_argument("--routers", nargs="+", default=["cache_aware", "round_robin"],
                    choices=sorted(qt.networks.FLEET_ROUTERS))
    a = ap.parse_args(argv)
    ref = ours(*anchor_trace(10_000), qt.policies.Sarathi(512))
    print(f"reference (anchor, 10^4 requests, Sarathi): {ref['cpu_s']:.3f} s CPU")
    trace = qt.data.mooncake_trace("conversation")
    if a.until is not None:
        trace = trace.take(slice(0, int(np.searchsorted(trace.arrival, a.until))))
    print(f"Mooncake conversation: {len(trace):,} requests, 8 engines, "
          f"fast path {a.fast_path}")
    for router in a.routers:
        out = fleet(trace, router, a.fast_path == "on")
        print(f"  {router}: cpu_s={out['cpu_s']:.2f}  wall_s={out['wall_s']:.2f}  "
              f"iterations={out['iterations']:,}  µs/iteration={out['us_per_iteration']:.1f}  "
              f"completed={out['completed']:,}  prefix_hit_ratio={out['prefix_hit_ratio']:.4f}  "
              f"preemptions={out['preemptions']}")
    print(f"peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()

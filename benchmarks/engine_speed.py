"""Engine speed at scale: a scheduler with token budget 512 at load 0.9 on one core.

Prompt and output lengths lognormal with medians 256 and 256 tokens (σ = 0.8), or the
ShareGPT lengths shipped in ``queuetheory.data`` with ``--sharegpt``; the anchor time model
(16.1 ms + 57.8 µs per prefill token + 39.5 µs per decode token, in seconds); the arrival
rate is set by the load (:meth:`Workload.from_lengths`). The scheduler is Sarathi (FCFS,
which the engine runs in bulk as the rule ``decode_first_fill``) or, with ``--policy``, Orca
or vLLM, which decide every iteration and use the decode-only fast path. Prints wall and CPU
time, requests/s, iterations/s and peak memory for each size.

Run: ``python benchmarks/engine_speed.py [-n 10000 100000] [--sharegpt]
[--policy sarathi|orca|vllm] [--fast-path off]``.
"""

from __future__ import annotations

import argparse
import resource
import time

from scipy import stats

import queuetheory as qt

TIME = qt.AffineTokenTime(c=16.1e-3, per_prefill=57.8e-6, per_decode=39.5e-6)
POLICIES = {"sarathi": qt.policies.Sarathi, "orca": qt.policies.Orca,
            "vllm": qt.policies.VLLMVanilla}


def workload(sharegpt: bool, load: float = 0.9):
    if sharegpt:
        prompt, output = qt.data.sharegpt_lengths()
    else:
        prompt = output = stats.lognorm(s=0.8, scale=256)
    return qt.Workload.from_lengths(prompt, output, load=load, time_model=TIME,
                                    token_budget=512)


def run(n: int, sharegpt=False, fast_path=True, seed=0, policy="sarathi") -> dict:
    wl = workload(sharegpt)
    w0, c0 = time.perf_counter(), time.process_time()
    res = qt.simulate(wl, POLICIES[policy](token_budget=512), TIME, n_requests=n,
                      seed=seed, fast_path=fast_path)
    m = res.metrics
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    return {"requests": n, "wall_s": wall, "cpu_s": cpu, "requests_per_s": n / wall,
            "iterations": m["iterations"], "iterations_per_s": m["iterations"] / wall,
            "completed": m["completed"], "mean_latency_s": m["mean_latency"],
            "peak_rss_MB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("-n", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--sharegpt", action="store_true")
    ap.add_argument("--policy", choices=tuple(POLICIES), default="sarathi")
    ap.add_argument("--fast-path", choices=("on", "off"), default="on")
    args = ap.parse_args()
    for n in args.n:
        out = run(n, args.sharegpt, args.fast_path == "on", policy=args.policy)
        print("  ".join(f"{k}={v:,.4g}" if isinstance(v, float) else f"{k}={v:,}"
                        for k, v in out.items()), flush=True)


if __name__ == "__main__":
    main()

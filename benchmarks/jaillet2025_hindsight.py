"""Solve times of the App. B.1 hindsight MILP and its LP relaxation (seed 001).

Run by hand: ``python benchmarks/jaillet2025_hindsight.py``. Semi-online random instances
(s = 1, outputs uniform on 2…15) and online ones (arrivals uniform on 0…9, prompts 1…3).
"""

import time

import numpy as np

import queuetheory as qt


def main(sizes=(8, 10, 12, 14), memories=(20, 40), reps=3, seed=0):
    rng = np.random.default_rng(seed)
    print(f"{'kind':8s} {'n':>3s} {'M':>3s} {'MC-SF':>6s} {'OPT':>6s} {'LP':>8s} "
          f"{'MILP s':>7s} {'LP s':>6s} status")
    for kind in ("semi", "online"):
        for n in sizes:
            for M in memories:
                for _ in range(reps):
                    if kind == "semi":
                        a, s = np.zeros(n, np.int64), np.ones(n, np.int64)
                    else:
                        a, s = np.sort(rng.integers(0, 10, n)), rng.integers(1, 4, n)
                    o = rng.integers(2, 16, n)
                    t = time.perf_counter()
                    opt = qt.bounds.hindsight_optimum(a, s, o, M, time_limit=120)
                    lp = qt.bounds.hindsight_lower_bound(a, s, o, M)
                    print(f"{kind:8s} {n:3d} {M:3d} {opt.upper:6.0f} {opt.total_latency:6.0f} "
                          f"{lp.total_latency:8.1f} {opt.seconds:7.2f} {lp.seconds:6.2f} "
                          f"{opt.status} ({time.perf_counter() - t:.1f} s)", flush=True)


if __name__ == "__main__":
    main()

"""Solve times of the App. B.1 hindsight optimum (Jaillet, Jiang, Podimata, Zhou): the
time-indexed MILP (HiGHS through cvxpy) and the CP-SAT formulations (``cpsat``: cumulative
profile; ``cpsat-ti``: time-indexed Booleans after LP reduced-cost fixing), same instances.

Run by hand:
``python benchmarks/jaillet2025_hindsight.py [sizes] [reps] [limit] [solvers] [workers]``,
e.g. ``python benchmarks/jaillet2025_hindsight.py 12,20,40 3 60 milp,cpsat,cpsat-ti 1``; the
instances depend only on the sizes and reps, so runs with other solvers see the same ones.
Semi-online random instances (all arrivals 0, s = 1, outputs uniform on 2…15) and online ones
(arrivals uniform on 0…9, prompts 1…3), M = 20. CP-SAT runs with ``num_workers=workers``
(default 1, as HiGHS is single-threaded): one core each by default, on a 2-core machine that
may be shared, so compare solvers within one run. Each row: the solver's TEL, whether it is
proven optimal, the relative gap and seconds; the summary gives the median seconds and how
many instances each solver proved.
"""

import sys
import time

import numpy as np

import queuetheory as qt


def instance(kind, n, rng):
    if kind == "semi":
        a, s = np.zeros(n, np.int64), np.ones(n, np.int64)
    else:
        a, s = np.sort(rng.integers(0, 10, n)), rng.integers(1, 4, n)
    return a, s, rng.integers(2, 16, n)


def main(sizes=(12, 20, 40), reps=3, limit=60.0, solvers=("milp", "cpsat", "cpsat-ti"),
         workers=1, memory=20, seed=0):
    rng = np.random.default_rng(seed)
    print(f"{'kind':6s} {'n':>3s} {'M':>3s} {'MC-SF':>6s} "
          + " ".join(f"{name + ' TEL':>12s} {'gap':>6s} {'s':>6s}" for name in solvers))
    summary = {}
    for n in sizes:
        for kind in ("semi", "online"):
            for _ in range(reps):
                a, s, o = instance(kind, n, rng)
                res = [qt.bounds.hindsight_optimum(a, s, o, memory, solver=name,
                                                   time_limit=limit, workers=workers)
                       for name in solvers]
                cells = [f"{r.total_latency:11.0f}{'*' if r.proven else ' '} {r.gap:6.1%} "
                         f"{r.seconds:6.1f}" for r in res]
                print(f"{kind:6s} {n:3d} {memory:3d} {res[0].upper:6.0f} " + " ".join(cells),
                      flush=True)
                for name, r in zip(solvers, res, strict=True):
                    summary.setdefault((kind, n, name), []).append(r)
    print(f"\n* = proven optimal. Time limit {limit:.0f} s, CP-SAT workers {workers}.")
    print(f"{'kind':6s} {'n':>3s} {'solver':8s} {'median s':>9s} {'proven':>7s} {'max gap':>8s}")
    for (kind, n, name), rs in summary.items():
        print(f"{kind:6s} {n:3d} {name:8s} {np.median([r.seconds for r in rs]):9.1f} "
              f"{sum(r.proven for r in rs):3d}/{len(rs):<3d} {max(r.gap for r in rs):8.1%}")


if __name__ == "__main__":
    args = sys.argv[1:]
    t0 = time.perf_counter()
    main(tuple(int(v) for v in args[0].split(",")) if args else (12, 20, 40),
         int(args[1]) if len(args) > 1 else 3, float(args[2]) if len(args) > 2 else 60.0,
         tuple(args[3].split(",")) if len(args) > 3 else ("milp", "cpsat", "cpsat-ti"),
         int(args[4]) if len(args) > 4 else 1)
    print(f"total {time.perf_counter() - t0:.0f} s")

"""Solve times of the App. B.1 hindsight optimum (Jaillet, Jiang, Podimata, Zhou): the
branch and bound over rounds (``bnb``), the time-indexed MILP (HiGHS through cvxpy) and the
CP-SAT formulations (``cpsat``: cumulative profile; ``cpsat-ti``: time-indexed Booleans after
LP reduced-cost fixing), same instances.

Run by hand:
``python benchmarks/jaillet2025_hindsight.py [sizes] [reps] [limit] [solvers] [workers]
[reference.py] [reference solvers]``,
e.g. ``python benchmarks/jaillet2025_hindsight.py 12,20,40 3 60 bnb,milp,cpsat,cpsat-ti 1``; the
instances depend only on the sizes and reps, so runs with other solvers see the same ones.
``reference.py`` is a former ``queuetheory/bounds/hindsight.py`` (e.g. from ``git show``),
run on each instance right after the current code with the reference solvers (default
``milp``), so that both see the same load on a shared machine.
Semi-online random instances (all arrivals 0, s = 1, outputs uniform on 2…15) and online ones
(arrivals uniform on 0…9, prompts 1…3), M = 20. CP-SAT runs with ``num_workers=workers``
(default 1, as HiGHS is single-threaded). Each row: the solver's TEL, whether it is proven
optimal (``*``), the relative gap, wall seconds (what the time limit counts) and CPU seconds of
this process (``time.process_time``: what a loaded machine distorts least); the summary gives
the median seconds and how many instances each solver proved.
"""

import importlib.util
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


def load_reference(path):
    """A former hindsight module, imported inside ``queuetheory.bounds`` (its relative
    imports resolve there)."""
    spec = importlib.util.spec_from_file_location("queuetheory.bounds._reference", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.hindsight_optimum


def timed(solve, *args, **kwargs):
    cpu = time.process_time()
    res = solve(*args, **kwargs)
    return res, time.process_time() - cpu


def main(sizes=(12, 20, 40), reps=3, limit=60.0, solvers=("bnb", "milp", "cpsat", "cpsat-ti"),
         workers=1, reference=None, reference_solvers=("milp",), memory=20, seed=0):
    rng = np.random.default_rng(seed)
    runs = [(name, qt.bounds.hindsight_optimum) for name in solvers]
    if reference is not None:
        ref = load_reference(reference)
        runs += [(f"ref-{name}", lambda *a, name=name, **k: ref(*a, **{**k, "solver": name}))
                 for name in reference_solvers]
    print(f"{'kind':6s} {'n':>3s} {'upper':>6s} "
          + " ".join(f"{name + ' TEL':>14s} {'gap':>6s} {'s':>5s} {'cpu':>5s}"
                     for name, _ in runs))
    summary = {}
    for n in sizes:
        for kind in ("semi", "online"):
            for _ in range(reps):
                a, s, o = instance(kind, n, rng)
                res = [timed(solve, a, s, o, memory, solver=name, time_limit=limit,
                             workers=workers) for name, solve in runs]
                cells = [f"{r.total_latency:13.0f}{'*' if r.proven else ' '} {r.gap:6.1%} "
                         f"{r.seconds:5.1f} {cpu:5.1f}" for r, cpu in res]
                print(f"{kind:6s} {n:3d} {res[0][0].upper:6.0f} " + " ".join(cells), flush=True)
                for (name, _), r in zip(runs, res, strict=True):
                    summary.setdefault((kind, n, name), []).append(r)
    print(f"\n* = proven optimal. M = {memory}, time limit {limit:.0f} s, CP-SAT workers "
          f"{workers}; upper = the current code's starting schedule.")
    print(f"{'kind':6s} {'n':>3s} {'solver':12s} {'median s':>9s} {'median cpu':>10s} "
          f"{'proven':>7s} {'max gap':>8s}")
    for (kind, n, name), rs in summary.items():
        print(f"{kind:6s} {n:3d} {name:12s} {np.median([r.seconds for r, _ in rs]):9.1f} "
              f"{np.median([c for _, c in rs]):10.1f} "
              f"{sum(r.proven for r, _ in rs):3d}/{len(rs):<3d} {max(r.gap for r, _ in rs):8.1%}")


if __name__ == "__main__":
    args = sys.argv[1:]
    t0 = time.perf_counter()
    main(tuple(int(v) for v in args[0].split(",")) if args else (12, 20, 40),
         int(args[1]) if len(args) > 1 else 3, float(args[2]) if len(args) > 2 else 60.0,
         tuple(args[3].split(",")) if len(args) > 3 else ("bnb", "milp", "cpsat", "cpsat-ti"),
         int(args[4]) if len(args) > 4 else 1, args[5] if len(args) > 5 else None,
         tuple(args[6].split(",")) if len(args) > 6 else ("milp",))
    print(f"total {time.perf_counter() - t0:.0f} s")

"""The anchor workload of issue 9, run end to end by ``simulate`` on one core, and by pyserq
(an independent simulator written in Rust) on the same trace in the same run.

Fixed 512-token prompts, 256 output tokens, Poisson arrivals at 4 requests/s, Sarathi with
chunk (token budget) 512, batch time 16.1 ms + 57.8 µs per prefill token + 39.5 µs per decode
token, 10⁴ requests, the real engines' convention (the prefill iteration emits the first
token). Time is in µs for both simulators. pyserq runs its fastest program for FCFS Sarathi
(``advance running;``, checked identical by ``tests/test_oracle_pyserq.py``); its compile
step (writing and parsing the trace) is not timed. Run from the repository root:
``python -m benchmarks.anchor [-n 10000] [--fast-path off] [--memory M] [--no-pyserq]``.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import queuetheory as qt

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def anchor_trace(n_requests: int, seed: int = 0):
    wl = qt.Workload([qt.RequestClass(prompt=512, output=256, rate=4.0)])
    tr = wl.sample(n_requests=n_requests, seed=seed)
    return tr.arrival * 1e6, tr.prompt, tr.output


def ours(arrival, prompt, output, policy, memory=None, fast_path=True, cls=None) -> dict:
    from pyserq_driver import TIME

    trace = qt.Workload.from_arrays(arrival, prompt, output, cls)
    t0, c0 = time.perf_counter(), time.process_time()
    res = qt.simulate(trace, policy, TIME, memory=memory, fast_path=fast_path,
                      first_token="prefill")
    m = res.metrics
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"wall_s": wall, "cpu_s": cpu, "iterations": m["iterations"],
            "iterations_per_s": m["iterations"] / wall, "completed": m["completed"],
            "restarts": m["restarts"], "latency": res.requests["latency"].to_numpy()}


def theirs(arrival, prompt, output, program, budget, memory=None) -> dict:
    import pyserq
    from pyserq_driver import compile_pyserq, records

    with tempfile.TemporaryDirectory() as folder:
        compiled = compile_pyserq(folder, arrival, prompt, output, scheduler=program,
                                  budget=budget, memory=memory)
        t0, c0 = time.perf_counter(), time.process_time()
        report = pyserq.run(compiled)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    rec = records(report, arrival)
    return {"wall_s": wall, "cpu_s": cpu, "iterations": rec["iterations"],
            "iterations_per_s": rec["iterations"] / wall, "restarts": rec["preemptions"],
            "latency": rec["latency"]}


def show(name, out):
    print(f"{name:>10}: " + "  ".join(
        f"{k}={v:,.4g}" if isinstance(v, float) else f"{k}={v:,}"
        for k, v in out.items() if k != "latency"), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("-n", type=int, default=10_000)
    ap.add_argument("--fast-path", choices=("on", "off"), default="on")
    ap.add_argument("--memory", type=int, default=None, help="KV-cache capacity in tokens")
    ap.add_argument("--no-pyserq", action="store_true")
    args = ap.parse_args()
    arrival, prompt, output = anchor_trace(args.n)
    mine = ours(arrival, prompt, output, qt.policies.Sarathi(512), args.memory,
                args.fast_path == "on")
    show("simulate", mine)
    if not args.no_pyserq:
        from pyserq_driver import SARATHI_FCFS

        ref = theirs(arrival, prompt, output, SARATHI_FCFS, 512, args.memory)
        show("pyserq", ref)
        same = np.array_equal(mine["latency"], ref["latency"])
        print(f"same latencies: {same};  pyserq / simulate (wall) = "
              f"{ref['wall_s'] / mine['wall_s']:.2f}, (CPU) = {ref['cpu_s'] / mine['cpu_s']:.2f}")
    print(f"peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()

"""What each scheduler's bulk rule buys over the generic path, on one core.

For every scheduler with a bulk rule (:meth:`~queuetheory.policies.Policy.bulk`), the same
trace is simulated twice: as shipped, and with the rule masked on the instance (its
``bulk`` returning ``None``), so that the engine steps and takes the policy's steady-state
stretches (:meth:`~queuetheory.policies.Policy.steady`, ``drains``) — the path a user's own
policy runs on. The records must be the same (checked); the ratio of CPU seconds is what the
rule buys. Issue 31's rule of thumb: a rule that buys less than about 3× gives way to the
generic path. ShareGPT lengths at load 0.8 (``benchmarks/engine_speed.py``'s trace), without
a KV limit and with ``--memory`` (default 30,000 tokens) wherever the scheduler runs there;
best of ``--repeat`` runs each.

Run from the repository root: ``python -m benchmarks.bulk_gain [-n 10000] [--memory 30000]
[--repeat 2] [POLICY ...]`` (default: every scheduler of ``engine_speed.py`` with a rule).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

import queuetheory as qt
from benchmarks import engine_speed as es

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

WITH_RULES = ("sarathi", "sarathi-maxreqs", "orca", "vllm", "static", "static2", "ft",
              "kfcfs", "mcsf", "mcsf-fcfs", "amax", "amin", "hsf", "arandom",
              "adaptive", "slai", "wait", "nested-wait", "fcfs-restart")


def run(name: str, trace, memory, masked: bool):
    """CPU seconds and result of ``name`` on ``trace`` (arrival, prompt, output)."""
    from pyserq_driver import TIME

    policy, tr, first = es.scheduler(name, *trace, memory)
    ran = []                                     # the runner the policy handed over
    if masked:
        policy.bulk = lambda engine: None        # the generic path: steps and stretches
    else:
        rule = policy.bulk
        policy.bulk = lambda engine: ran.append(rule(engine)) or ran[-1]
    c0 = time.process_time()
    res = qt.simulate(tr, policy, TIME, memory=memory, first_token=first)
    return time.process_time() - c0, res, any(r is not None for r in ran)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-n", type=int, default=10_000)
    ap.add_argument("--memory", type=int, default=30_000)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("policies", nargs="*", default=list(WITH_RULES))
    a = ap.parse_args(argv)
    trace = es.trace(a.n, True, 0.8)
    print("| scheduler | KV limit | iterations | bulk rule CPU s | generic CPU s | bulk buys |")
    print("|---|---:|---:|---:|---:|---:|")
    for memory in (None, a.memory):
        for name in a.policies:
            if not es.supported(name, memory, *trace):
                continue
            best = {}
            for _ in range(a.repeat):
                for masked in (False, True):
                    cpu, res, ruled = run(name, trace, memory, masked)
                    best[masked] = min(best.get(masked, np.inf), cpu)
                    if not masked:
                        ref, used = res, ruled
                    elif not (res.requests.equals(ref.requests)
                              and res.batches.equals(ref.batches)):
                        raise AssertionError(f"{name}: the generic path's records differ")
            gain = f"{best[True] / best[False]:.1f}×" if used else "no rule here: steps"
            print(f"| {name} | {memory or '—'} | {len(ref.batches):,} | {best[False]:.3f} | "
                  f"{best[True]:.3f} | {gain} |", flush=True)


if __name__ == "__main__":
    main()

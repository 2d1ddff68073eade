"""Stepping schedulers under a time model that reads each decode member's context.

Bari et al.'s tiled GPU model fitted to the A100 (``TiledGPUTime.fitted("a100")``, Eq. 7)
has no closed form for repeated decodes: the engine runs the stretches a policy promises
batch by batch, without asking the policy. Each scheduler runs the same trace twice: with
the fast path, and with ``fast_path=False`` (a decision at every iteration, the reference);
the records must be the same (checked). Printed per scheduler: iterations, decisions of
each run, CPU seconds of each (the least of ``--repeat``), and the ratio. Then the cost of
one duration of Eq. 7 on the batches of the first scheduler's run: ``duration`` (its
constants read once, the decode tile-pairs summed as integers) against the same terms
composed from the public methods member by member (``linear_time``,
``decode_attention``, ``prefill_attention``: how ``duration`` computed them before).
ShareGPT lengths, the arrivals of ``engine_speed.py``'s trace at ``--load`` (set for its
anchor time model, read in seconds), a KV limit of ``--memory`` tokens where the scheduler
takes one.

Run from the repository root: ``python -m benchmarks.context_time [-n 2000] [--load 0.8]
[--memory 30000] [--repeat 2] [NAME ...]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import queuetheory as qt
from benchmarks import engine_speed as es

#: schedulers that step (no bulk rule reads a context), with a KV limit or without
DEFAULT = ("sarathi:kv", "vllm", "orca", "slai:kv", "rad", "amin:kv", "vllm-v1",
           "fcfs-restart", "wait:kv")
#: Bari et al.'s Eq. 7 with the parameters fitted to Vidur's A100 timings (seconds)
TIME_MODEL = qt.TiledGPUTime.fitted("a100")


def run(name, trace, memory, fast):
    """CPU seconds, result and decisions of one run."""
    policy, tr, first = es.scheduler(name, *trace, memory)
    asked = [0]
    schedule = policy.schedule

    def counted(state):
        asked[0] += 1
        return schedule(state)

    policy.schedule = counted
    c0 = time.process_time()
    res = qt.simulate(tr, policy, TIME_MODEL, memory=memory, first_token=first,
                      fast_path=fast)
    return time.process_time() - c0, res, asked[0]


def eq7_cost(loads, repeat):
    """µs per batch of ``duration`` and of Eq. 7 composed from the per-member methods."""
    tm = TIME_MODEL
    gpu, N = tm.gpu, tm.model.N

    def composed(load):
        tau = load.token_load
        return sum((float(tm.linear_time(tau)), tau * gpu.inv_mu_nlin,
                    float(N * tm.decode_attention(load.decode_context + 1).sum()),
                    float(tm.prefill_attention(load.chunk_start + 1, load.chunk).sum()),
                    gpu.c0 if tau else 0.0))

    best = {}
    for _ in range(repeat):
        for name, f in (("duration", tm.duration), ("composed", composed)):
            c0 = time.process_time()
            for load in loads:
                f(load)
            best[name] = min(best.get(name, np.inf), time.process_time() - c0)
    return {k: v / len(loads) * 1e6 for k, v in best.items()}


def same(a, b) -> bool:
    """The two results' request stamps and batch logs, to the bit."""
    return all(x.equals(y) for x, y in ((a.requests, b.requests), (a.batches, b.batches))
               ) and np.array_equal(a.tbt.counts, b.tbt.counts)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-n", type=int, default=2000)
    ap.add_argument("--load", type=float, default=0.8)
    ap.add_argument("--memory", type=int, default=30_000)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("names", nargs="*", default=list(DEFAULT))
    a = ap.parse_args(argv)
    known = [*es.POLICIES, *es.AO]
    for spec in a.names:
        name, colon, kv = spec.partition(":")
        if name not in known or (colon and kv != "kv"):
            ap.error(f"names: {spec!r} is not a scheduler of engine_speed, with ':kv' for a "
                     f"KV limit ({', '.join(known)})")
    if a.n < 1:
        ap.error(f"-n={a.n}: at least one request")
    arrival, prompt, output = es.trace(a.n, True, a.load)
    trace = (arrival * 1e-6, prompt, output)                   # µs of the anchor, in s
    print("| scheduler | KV limit | iterations | decisions, fast path | decisions, stepping "
          "| CPU s, fast path | CPU s, stepping | stepping / fast path |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    loads = []
    for spec in a.names:
        name, _, kv = spec.partition(":")
        memory = max(a.memory, int((prompt + output).max())) if kv else None
        best = {}
        for _ in range(a.repeat):
            for fast in (True, False):
                cpu, res, asked = run(name, trace, memory, fast)
                if fast not in best or cpu < best[fast][0]:
                    best[fast] = (cpu, res, asked)
        (cf, rf, af), (cs, rs, ast) = best[True], best[False]
        if not same(rf, rs):
            raise AssertionError(f"{spec}: the fast path's records differ from stepping's")
        print(f"| {name} | {memory or '—'} | {rf.iterations:,} | {af:,} | {ast:,} "
              f"| {cf:.2f} | {cs:.2f} | {cs / cf:.1f}× |", flush=True)
        if not loads:                    # the first scheduler's batches, for Eq. 7's cost
            loads = batch_loads(name, trace, memory)
    cost = eq7_cost(loads, a.repeat)
    print(f"\nEq. 7 on {len(loads):,} batches: duration {cost['duration']:.1f} µs, composed "
          f"from the per-member methods {cost['composed']:.1f} µs per batch "
          f"({cost['composed'] / cost['duration']:.1f}×)")


def batch_loads(name, trace, memory):
    """The loads of the batches of one run of ``name``, as the engine hands them over."""
    seen = []
    duration = TIME_MODEL.duration
    TIME_MODEL.duration = lambda load: seen.append(load) or duration(load)
    try:
        run(name, trace, memory, False)
    finally:
        del TIME_MODEL.duration
    return seen


if __name__ == "__main__":
    main()

"""Speed of the network simulation: the Rybko–Stolyar network at ρ = 0.9 (both priorities)
and the fork-join network at ρ = 0.95, over 2×10⁴ slots.

Run by hand: ``python -m benchmarks.networks_rs [slots] [repeats]``. For each network it
times, in the same run, the per-slot kernel (``fast_path=True``, the default; best of
``repeats`` runs) and the general path (``fast_path=False``: one engine decision per agent
per slot, the reference), checks that the two give the same paths, and prints CPU seconds,
slots per CPU second and the cost per agent-step (benchmarks/README.md).
"""

import sys
import time

import pandas as pd

from queuetheory.networks import fork_join, rybko_stolyar, simulate


def _timed(net, slots, fast_path):
    cpu = time.process_time()
    res = simulate(net, horizon=slots, seed=0, fast_path=fast_path)
    return time.process_time() - cpu, res


def main(slots: int = 20000, repeats: int = 3):
    cases = [("RS up", rybko_stolyar("up", 0.9)), ("RS down", rybko_stolyar("down", 0.9)),
             ("fork-join", fork_join(0.95))]
    for name, net in cases:
        fast, res = min((_timed(net, slots, True) for _ in range(repeats)),
                        key=lambda x: x[0])
        general, ref = _timed(net, slots, False)
        pd.testing.assert_frame_equal(res.paths, ref.paths)
        steps = sum(e.iteration for e in res.engines.values())
        for label, cpu in (("kernel", fast), ("general", general)):
            print(f"{name:>9} {label:>7}: {slots} slots, {steps} agent-steps, {cpu:.2f} s CPU, "
                  f"{slots / cpu:,.0f} slots/s CPU, {1e6 * cpu / steps:.1f} µs CPU per "
                  f"agent-step", flush=True)
        print(f"{name:>9}: {general / fast:.1f}x, same paths, "
              f"{res.metrics['requests_end']} requests at the end", flush=True)


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))

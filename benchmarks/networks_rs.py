"""Speed of the network simulation: the Rybko–Stolyar network at ρ = 0.9 (both priorities)
and the fork-join network at ρ = 0.95, over 2×10⁴ slots.

Run by hand: ``python benchmarks/networks_rs.py [slots]``. Prints CPU and wall seconds,
slots per CPU second and the cost per agent-step. To compare two versions, run it with each
on the ``PYTHONPATH`` back to back (benchmarks/README.md).
"""

import sys
import time

from queuetheory.networks import fork_join, rybko_stolyar, simulate


def main(slots: int = 20000):
    cases = [("RS up", rybko_stolyar("up", 0.9)), ("RS down", rybko_stolyar("down", 0.9)),
             ("fork-join", fork_join(0.95))]
    for name, net in cases:
        cpu, wall = time.process_time(), time.perf_counter()
        res = simulate(net, horizon=slots, seed=0)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        steps = sum(e.iteration for e in res.engines.values())
        print(f"{name:>9}: {slots} slots, {steps} agent-steps, {cpu:.1f} s CPU "
              f"({wall:.1f} s wall), {slots / cpu:,.0f} slots/s CPU, "
              f"{1e6 * cpu / steps:.0f} µs CPU per agent-step, "
              f"{res.metrics['requests_end']} requests at the end", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20000)

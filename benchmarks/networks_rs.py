"""Speed of the network simulation: the Rybko–Stolyar network at ρ = 0.9 over 2×10⁴ slots.

Run by hand: ``python benchmarks/networks_rs.py [slots]``. Prints CPU and wall seconds per
priority and the cost per agent-step.
"""

import sys
import time

from queuetheory.networks import rybko_stolyar, simulate


def main(slots: int = 20000):
    for priority in ("down", "up"):
        cpu, wall = time.process_time(), time.perf_counter()
        res = simulate(rybko_stolyar(priority, 0.9), horizon=slots, seed=0)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        steps = sum(e.iteration for e in res.engines.values())
        print(f"{priority:>4}: {slots} slots, {steps} agent-steps, {cpu:.1f} s CPU "
              f"({wall:.1f} s wall), {1e6 * cpu / steps:.0f} µs CPU per agent-step, "
              f"{res.metrics['requests_end']} requests at the end")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20000)

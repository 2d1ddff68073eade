"""Capacities, competitive ratios, Lyapunov drift, hindsight optima and adversarial instances."""

from .hindsight import (
    HindsightResult,
    hindsight_brute_force,
    hindsight_lower_bound,
    hindsight_optimum,
    schedule_memory,
)

__all__: list[str] = []
__all__ += ["HindsightResult", "hindsight_optimum", "hindsight_lower_bound",
            "hindsight_brute_force", "schedule_memory"]

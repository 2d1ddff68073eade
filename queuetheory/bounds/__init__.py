"""Capacities, competitive ratios, Lyapunov drift, hindsight optima and adversarial instances."""

__all__: list[str] = []
from . import rad_capacity as rad  # noqa: E402
from .rad_capacity import (  # noqa: E402
    DistServeSplit,
    RadCapacity,
    distserve_split,
    optimal_chunking,
    rad_capacity,
    request_time,
    request_time_sym,
)

__all__ += ["rad", "rad_capacity", "RadCapacity", "request_time", "request_time_sym",
            "distserve_split", "DistServeSplit", "optimal_chunking"]

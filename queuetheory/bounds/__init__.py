"""Capacities, competitive ratios, Lyapunov drift, hindsight optima and adversarial instances."""

from . import competitive_closed_forms
from .competitive import (
    AminRatio,
    amin_matrices,
    amin_ratio,
    b_inverse,
    fit_log_curve,
    lemma46_ratio,
    rayleigh,
    trace_identity,
)
from .competitive_closed_forms import two_point_threshold

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
__all__ += ["amin_matrices", "amin_ratio", "AminRatio", "rayleigh", "lemma46_ratio", "b_inverse",
            "trace_identity", "fit_log_curve", "two_point_threshold", "competitive_closed_forms"]

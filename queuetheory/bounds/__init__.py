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
__all__ += ["amin_matrices", "amin_ratio", "AminRatio", "rayleigh", "lemma46_ratio", "b_inverse",
            "trace_identity", "fit_log_curve", "two_point_threshold", "competitive_closed_forms"]

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
from .drift import (  # noqa: E402  (Li, Dai, Peng)
    Drift,
    DriftCertificate,
    LinearLyapunov,
    QuadraticLyapunov,
    appendix_b_constant,
    certificate_states,
    drift_certificate,
    length_pmf,
    one_step_drift,
)
from .token_rate import (  # noqa: E402  (Li, Dai, Peng)
    LLAMA3_70B,
    MaxTokenRate,
    capacity_table,
    llama3_70b_table,
    max_stable_rate,
    max_token_rate,
    min_token_budget,
    smallest_stable_budget,
    token_capacity,
)
from .work_conserving import (  # noqa: E402  (Li, Dai, Peng)
    WorkConservation,
    available_tokens,
    dtmc_state,
    is_work_conserving,
    work_conservation_witness,
)

__all__ += [
    "token_capacity", "max_token_rate", "MaxTokenRate", "max_stable_rate", "min_token_budget",
    "smallest_stable_budget", "capacity_table", "LLAMA3_70B", "llama3_70b_table",
    "LinearLyapunov", "QuadraticLyapunov", "appendix_b_constant", "length_pmf", "Drift",
    "one_step_drift", "DriftCertificate", "drift_certificate", "certificate_states",
    "dtmc_state", "available_tokens", "is_work_conserving", "WorkConservation",
    "work_conservation_witness",
]
from .adversarial import (  # noqa: E402  (Jaillet et al.)
    long_short_latency,
    theorem62_deterministic_bound,
    theorem62_instance,
    theorem64_ratio,
)
from .hindsight import (  # noqa: E402  (Jaillet et al.; Chen, Ye, Zhou)
    HindsightResult,
    hindsight_brute_force,
    hindsight_lower_bound,
    hindsight_optimum,
    schedule_memory,
)

__all__ += ["HindsightResult", "hindsight_optimum", "hindsight_lower_bound",
            "hindsight_brute_force", "schedule_memory", "theorem62_instance",
            "theorem62_deterministic_bound", "theorem64_ratio", "long_short_latency"]
from .mcsf_search import (  # noqa: E402  (Jaillet et al.)
    Alg1Counterexample,
    identical_jobs_gap,
    smallest_alg1_counterexample,
)

__all__ += ["Alg1Counterexample", "smallest_alg1_counterexample", "identical_jobs_gap"]
from .overflow import prop4_overflow_probability  # noqa: E402  (Ao et al.)

__all__ += ["prop4_overflow_probability"]
from .random_order import (  # noqa: E402  (Chen et al.)
    RandomOrderWorstCase,
    hsf_tel,
    random_order_tel,
    random_order_worst_case,
    smallest_two_point_counterexample,
)

__all__ += ["RandomOrderWorstCase", "hsf_tel", "random_order_tel", "random_order_worst_case",
            "smallest_two_point_counterexample"]
from .quantile_std import QuantileStd, min_std_given_quantiles  # noqa: E402  (Bari et al.)

__all__ += ["QuantileStd", "min_std_given_quantiles"]

from ..errors import moved_names as _moved_names  # noqa: E402

_TOKEN_RATE = ("the best token rate, in tokens per time unit; queuetheory.capacity.max_rate is "
               "the simulated request rate")
#: Old names kept for one release: name -> (a function giving the object, the new name, a
#: remark) for :func:`queuetheory.errors.moved_names`.
_DEPRECATED = {
    "max_rate": (lambda: max_token_rate, "queuetheory.bounds.max_token_rate", _TOKEN_RATE),
    "MaxRate": (lambda: MaxTokenRate, "queuetheory.bounds.MaxTokenRate", _TOKEN_RATE),
}
# the module ``capacity`` (now :mod:`.token_rate`) loads on its first read and warns itself
__getattr__ = _moved_names(__name__, _DEPRECATED, submodules=("capacity",))

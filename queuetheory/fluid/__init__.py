"""Symbolic and numeric fluid models: KV-memory equilibria and thresholds, the
token-budget engine's fluid model."""

__all__: list[str] = []

from .engine import (  # noqa: E402  (Li, Dai, Peng)
    FluidPath,
    ScaledRun,
    drain_rate,
    drain_time,
    engine_workload,
    fluid_convergence,
    fluid_path,
    fluid_phases,
    printed_c19_workload,
    scaled_run,
    workload_identity_residual,
)

__all__ += [
    "engine_workload", "printed_c19_workload", "workload_identity_residual", "drain_rate",
    "drain_time", "FluidPath", "fluid_phases", "fluid_path", "ScaledRun", "scaled_run",
    "fluid_convergence",
]

from .equilibrium import Equilibrium, equilibrium, equilibrium_symbolic, memory_work  # noqa: E402
from .nested import (  # noqa: E402
    MemoryBound,
    NestedCondition,
    Segments,
    TimeVaryingCondition,
    memory_decomposition,
    nested_condition,
    nested_memory,
    nested_memory_bound,
    nested_thresholds,
    segment_design,
    segments,
    theta,
    theta_bound,
    time_varying_condition,
)
from .thresholds import (  # noqa: E402
    WaitCondition,
    threshold_problem,
    wait_condition,
    wait_memory,
    wait_thresholds,
)

__all__ += [
    "Equilibrium", "equilibrium", "equilibrium_symbolic", "memory_work",
    "WaitCondition", "wait_condition", "wait_memory", "wait_thresholds", "threshold_problem",
    "Segments", "segments", "segment_design", "nested_memory", "NestedCondition",
    "nested_condition", "theta", "theta_bound", "MemoryBound", "nested_memory_bound",
    "nested_thresholds", "memory_decomposition", "TimeVaryingCondition",
    "time_varying_condition",
]

from .queue_chain import wait_queue_chain  # noqa: E402

__all__ += ["wait_queue_chain"]

"""Symbolic and numeric fluid models: KV-memory equilibria and thresholds (seed 000), the
token-budget engine's fluid model (seed 004)."""

__all__: list[str] = []
from .engine import (  # noqa: E402  (seed 004)
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

"""queuetheory: the queueing theory of LLM inference.

Closed forms, thresholds, bounds and stability conditions of five scheduling papers, one
simulator that runs every scheduler on the same model, and a ledger of the papers' claims.
"""

from . import bounds, claims, data, fluid, metrics, networks, plotting, policies
from .engine import Batch, Result, State, simulate
from .errors import InfeasibleBatchError, QueueTheoryError, UnstableError
from .gpu_timing import GPUModel, ModelDims, TiledGPUTime
from .sweep import sweep
from .timing import (
    AffineTokenTime,
    BatchLoad,
    LinearMemoryTime,
    PiecewiseLinearTime,
    TimeModel,
    UnitTime,
)
from .workload import (
    ClassInterval,
    ExactPredictor,
    RelativeInterval,
    RequestClass,
    TimeVarying,
    Trace,
    Workload,
)

__version__ = "0.1.0"

__all__ = [
    "bounds", "claims", "data", "fluid", "metrics", "networks", "plotting", "policies",
    "Batch", "Result", "State", "simulate",
    "InfeasibleBatchError", "QueueTheoryError", "UnstableError",
    "BatchLoad", "TimeModel", "LinearMemoryTime", "PiecewiseLinearTime", "UnitTime",
    "AffineTokenTime", "TiledGPUTime", "GPUModel", "ModelDims", "sweep",
    "RequestClass", "Workload", "Trace", "TimeVarying",
    "ExactPredictor", "RelativeInterval", "ClassInterval",
]

"""queuetheory: the queueing theory of LLM inference.

Closed forms, thresholds, bounds and stability conditions of five scheduling papers, one
simulator that runs every scheduler on the same model, and a ledger of the papers' claims.
"""

from . import policies
from .engine import Batch, Result, Server, State, simulate
from .errors import (
    CensoredRunWarning,
    InfeasibleBatchError,
    QueueTheoryError,
    SolverError,
    UnstableError,
    UnsupportedSettingError,
)
from .stability import GrowthRate, StabilityVerdict, growth_rate, stability
from .sweep import sweep
from .timing import (
    AffineTokenTime,
    BatchLoad,
    GPUModel,
    LinearMemoryTime,
    ModelDims,
    PiecewiseLinearTime,
    TiledGPUTime,
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
    "bounds", "capacity", "claims", "data", "fluid", "metrics", "networks", "papers", "plotting",
    "policies", "validate",
    "Batch", "Result", "Server", "State", "simulate", "stability", "StabilityVerdict",
    "growth_rate",
    "GrowthRate",
    "InfeasibleBatchError", "QueueTheoryError", "SolverError", "UnstableError",
    "UnsupportedSettingError", "CensoredRunWarning",
    "BatchLoad", "TimeModel", "LinearMemoryTime", "PiecewiseLinearTime", "UnitTime",
    "AffineTokenTime", "TiledGPUTime", "GPUModel", "ModelDims", "sweep",
    "RequestClass", "Workload", "Trace", "TimeVarying",
    "ExactPredictor", "RelativeInterval", "ClassInterval",
]

# The analytic subpackages (sympy, cvxpy, scipy, matplotlib behind them) load on first use,
# so that ``import queuetheory`` for a simulation stays quick.
_LAZY = ("bounds", "capacity", "claims", "data", "fluid", "metrics", "networks", "papers",
         "plotting", "rounds", "validate")


def __getattr__(name):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    return import_module(f".{name}", __name__)


def __dir__():
    return sorted(set(globals()) | set(_LAZY))

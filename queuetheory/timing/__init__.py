"""Every batch-time model: how long one iteration (one batch) takes.

- :mod:`.models`: the token-count and memory models — ``AffineTokenTime``,
  ``PiecewiseLinearTime`` (Li, Dai, Peng eq. 2.3), ``LinearMemoryTime`` (Ao et al. eq. 1),
  ``UnitTime`` (the round models of Jaillet et al. and Chen et al.);
- :mod:`.gpu`: the GPU tiling model of Bari, Hegde, de Veciana (``TiledGPUTime``).
"""

from .gpu import AssumptionError, GPUModel, ModelDims, TiledGPUTime, ceil_div
from .models import (
    AffineTokenTime,
    BatchLoad,
    LinearMemoryTime,
    PiecewiseLinearTime,
    TimeModel,
    UnitTime,
)

__all__ = ["BatchLoad", "TimeModel", "LinearMemoryTime", "PiecewiseLinearTime", "UnitTime",
           "AffineTokenTime", "TiledGPUTime", "GPUModel", "ModelDims", "AssumptionError",
           "ceil_div"]

"""Every batch-time model: how long one iteration (one batch) takes.

- :mod:`.models`: the token-count and memory models — ``AffineTokenTime``,
  ``PiecewiseLinearTime`` (Li, Dai, Peng eq. 2.3), ``LinearMemoryTime`` (Ao et al. eq. 1),
  ``UnitTime`` (the round models of Jaillet et al. and Chen et al.);
- :mod:`.gpu`: the GPU tiling model of Bari, Hegde, de Veciana (``TiledGPUTime``);
- :mod:`.fitting`: ``fit``, any of them fitted to measured batch durations (least squares,
  intervals, held-out error, ``model="best"``);
- :mod:`.vidur`: ``vidur_profile``, real A100/H100 linear-layer times from the Vidur
  profiles (MIT), shipped aggregated;
- :mod:`.profile`: ``ProfileTime``, one iteration composed from a GPU's operator profile
  (``OperatorProfile``: LLMServingSim's layout or Vidur's), attention by each request's KV;
- :mod:`.catalog`: ``gpu_engine("h100", "llama-2-7b")``, a shipped GPU and model by name:
  its batch time, its KV cache from the GPU's memory, what the fit is valid for.
"""

import importlib

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
           "ceil_div", "fit", "FitReport", "vidur_profile", "OperatorProfile", "ProfileTime",
           "ProfileRangeWarning", "ProfileError", "gpu_engine", "GPUEngine", "kv_cache_tokens",
           "FitRangeWarning"]

# the fitting layer needs scipy.optimize: loaded on first use, so ``import queuetheory`` stays
# quick
_LAZY = {"fit": "fitting", "FitReport": "fitting", "vidur_profile": "vidur",
         "OperatorProfile": "profile", "ProfileTime": "profile",
         "ProfileRangeWarning": "profile", "ProfileError": "profile",
         "gpu_engine": "catalog", "GPUEngine": "catalog", "kv_cache_tokens": "catalog",
         "FitRangeWarning": "catalog"}


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""Workloads: request classes, arrival processes, length laws and traces.

- :mod:`.core`: ``RequestClass``, ``Workload``, ``Trace``, ``TimeVarying`` and the
  output-length predictors;
- :mod:`.rad`: the SLAI evaluation workload of Bari, Hegde, de Veciana (Table 1), imported
  on first use (it needs ``scipy.stats``).
"""

from .core import (
    ClassInterval,
    ExactPredictor,
    Lengths,
    RelativeInterval,
    RequestClass,
    TimeVarying,
    Trace,
    Workload,
)

__all__ = ["RequestClass", "Workload", "Trace", "TimeVarying", "Lengths", "ExactPredictor",
           "RelativeInterval", "ClassInterval"]

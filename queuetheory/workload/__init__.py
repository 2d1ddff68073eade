"""Workloads: request classes, arrival processes, length laws and traces.

- :mod:`.core`: ``RequestClass``, ``Workload``, ``Trace``, ``TimeVarying`` and the
  output-length predictors;
- :mod:`.rad`: the SLAI evaluation workload of Bari, Hegde, de Veciana (Table 1), imported
  on first use (it needs ``scipy.stats``);
- :mod:`.surrogates`: stand-ins for the LMSYS-Chat-1M lengths of Jaillet et al. and Ao et al.
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
from .surrogates import LMSYS_BINS, lmsys_bin_rates, lmsys_length_sample

__all__ = ["RequestClass", "Workload", "Trace", "TimeVarying", "Lengths", "ExactPredictor",
           "RelativeInterval", "ClassInterval", "LMSYS_BINS", "lmsys_bin_rates",
           "lmsys_length_sample"]

"""Workloads: request classes, arrival processes, length laws and traces.

- :mod:`.core`: ``RequestClass``, ``Workload``, ``Trace``, ``TimeVarying`` and the
  output-length predictors;
- :mod:`.traces`: ``read_trace`` (also ``Workload.from_trace``), production traces from
  CSV, JSONL or Parquet with the Azure, BurstGPT and Mooncake presets;
- :mod:`.trace_stats`: ``trace_stats``, burstiness and length laws of a trace, one plot;
- :mod:`.rad`: the SLAI evaluation workload of Bari, Hegde, de Veciana (Table 1), imported
  on first use (it needs ``scipy.stats``);
- :mod:`.surrogates`: stand-ins for the LMSYS-Chat-1M lengths of Jaillet et al. and Ao et al.;
- :mod:`.prefix`: ``prefix_hit_ratio``, a trace's prefix blocks through an offline LRU cache;
- :mod:`.sessions`: ``Sessions``, multi-turn chat and agent sessions that resend their history.
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
from .prefix import PrefixReuse, cache_ratio_definitions, prefix_hit_ratio
from .sessions import SessionPlan, Sessions
from .surrogates import LMSYS_BINS, lmsys_bin_rates, lmsys_length_sample
from .trace_stats import TraceStats, trace_stats
from .traces import FORMATS, mean_rate, read_trace, with_rate

__all__ = ["RequestClass", "Workload", "Trace", "TimeVarying", "Lengths", "ExactPredictor",
           "RelativeInterval", "ClassInterval", "read_trace", "FORMATS", "trace_stats",
           "TraceStats", "mean_rate", "with_rate", "LMSYS_BINS", "lmsys_bin_rates",
           "lmsys_length_sample", "prefix_hit_ratio", "PrefixReuse",
           "cache_ratio_definitions", "Sessions", "SessionPlan"]

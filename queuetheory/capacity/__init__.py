"""Capacity planning: how much load one engine takes, at what latency, and how many engines.

Four questions an inference engineer sizing a deployment asks, each answered by joining the
papers' closed-form capacities to the simulator:

* :func:`bounds` — an analytic bracket for the largest stable arrival rate: the compute
  bound (Li, Dai, Peng's token capacity ``b / t_b``, generalised to every time model), the
  memory bound (Little's law on KV-token-time) and the scheduler-specific rates the papers
  give (vanilla vLLM's ``λ*`` of Li, Dai, Peng; the WAIT fluid condition of Ao et al.; RAD's
  capacity ``T^R`` of Bari et al.);
* :func:`max_rate` — the simulated boundary: a bisection on the arrival rate, started from
  the bracket and judged by :func:`~queuetheory.stability`;
* :func:`goodput` — the largest rate at which at least ``attainment`` of the requests meet
  every latency target (the goodput of DistServe, Zhong et al.), over a steady-state window;
* :func:`replicas` — the fewest engines behind a router (the networks layer) that meet the
  targets at a given total rate.

Rates are requests per time unit of the time model (seconds for the affine and GPU models,
milliseconds for Li, Dai, Peng's fit, rounds for :class:`~queuetheory.UnitTime`). Every
function takes ``first_token`` (``"prefill"``, the real engines' convention and the default:
the prefill iteration emits the first output token; or ``"decode"``, Li, Dai, Peng's), which
fixes how many decode iterations a request needs.

One module per job: ``stats`` (a workload's per-request figures), ``rescale`` (a workload
at another rate, a trace replayed), ``bounds`` (the analytic bracket), ``relaxation`` (the
backlog's time scale near capacity), ``search`` (:func:`max_rate`'s bisection and its
probes), ``slo`` (the latency targets and a steady-state window), ``goodput``,
``replicas``, ``curve`` (latency and attainment against load, and the figure) and ``cli``
(``queuetheory capacity``).
"""

from .bounds import Bracket, bounds, vllm_unit_time_rate
from .cli import capacity_main
from .curve import curve_rates, load_curve, plot_capacity
from .goodput import Goodput, goodput
from .relaxation import arrival_variability, relaxation_time
from .replicas import Replicas, replicas
from .rescale import at_rate, replay
from .search import MAX_PROBE_REQUESTS, RELAXATION_RUNS, MaxRate, max_rate
from .slo import SLO_KEYS, drain_time, slo_attainment
from .stats import MIN_LIFETIMES, RequestStats, request_stats

__all__ = ["bounds", "Bracket", "max_rate", "MaxRate", "goodput", "Goodput", "replicas",
           "Replicas", "at_rate", "replay", "request_stats", "RequestStats", "relaxation_time",
           "arrival_variability", "vllm_unit_time_rate", "SLO_KEYS", "slo_attainment",
           "drain_time", "curve_rates", "load_curve", "plot_capacity", "capacity_main",
           "MIN_LIFETIMES", "RELAXATION_RUNS", "MAX_PROBE_REQUESTS"]

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
* :func:`replicas` — the fewest engines behind a router that meet the targets at a given
  total rate, on the networks layer (``simulator="network"``, this release's default) or on
  whole engines (``simulator="fleet"``, :func:`size_fleet`, the next release's default);
* :func:`size_fleet` — the same for fleets as users run them: each engine with its KV cache,
  a drawn workload or a replayed trace, routers that see every engine's load (round robin,
  join the shortest queue, least KV load), targets per metric and percentile
  (``{"p99_ttft": 2.0, "p99_tpot": 0.1}``), the binding resource and the seeds' spread;
  ``queuetheory capacity --rate R`` answers it in one command, on a GPU and model by name
  (:func:`~queuetheory.timing.catalog.gpu_engine`).

With a prefix cache (``VLLMV1`` on a trace with prefix ids, e.g. a Mooncake slice) the
bounds, :func:`max_rate` and :func:`replicas` take the cache into account: the compute bound
at the trace's offline unbounded-cache hit ratio is proven for any cache size, a ratio given
as ``hit_ratio=`` is an estimate row (:mod:`.prefix`, :class:`PrefixShare`,
:func:`offline_token_ratio`); the same call with ``enable_prefix_caching=False`` gives the
capacity with the cache off.

Every bound states its premises (``Bracket.table["premises"]``) and is returned as proven
(``lower``/``upper``) only where they hold; every probe of :func:`max_rate` is judged from a
fluid-sized backlog as well as from empty (:mod:`.loaded`).

Rates are requests per time unit of the time model (seconds for the affine and GPU models,
milliseconds for Li, Dai, Peng's fit, rounds for :class:`~queuetheory.UnitTime`). Every
function takes ``first_token`` (``"prefill"``, the real engines' convention and the default:
the prefill iteration emits the first output token; or ``"decode"``, Li, Dai, Peng's), which
fixes how many decode iterations a request needs.

One module per job: ``stats`` (a workload's per-request figures), ``rescale`` (a workload
at another rate, a trace replayed), ``bounds`` (the analytic bracket), ``relaxation`` (the
backlog's time scale near capacity), ``search`` (:func:`max_rate`'s bisection and its
probes), ``loaded`` (probes from a backlog, the backlogged throughput), ``slo`` (the latency
targets and a steady-state window), ``targets`` (percentile targets per metric),
``prefix`` (the prefix cache's hit ratio in the bounds), ``goodput``, ``slo_scan``
(per-class latency figures and the capacity on a grid of rates at per-class targets, Bari et
al.'s figure: :func:`slo_metrics`, :func:`slo_capacity`), ``replicas``,
``counts`` (the smallest count that meets a test), ``fleet``
(engines with KV caches behind a router), ``sizing`` (:func:`size_fleet`), ``curve``
(latency and attainment against load, and the figure), ``cli`` and ``sizing_cli``
(``queuetheory capacity``).
"""

from ..errors import moved_names as _moved_names
from .bounds import Bracket, bounds, vllm_unit_time_rate
from .cli import capacity_main
from .curve import curve_rates, load_curve, plot_capacity
from .fleet import fleet_trace
from .goodput import Goodput, goodput
from .loaded import backlog_size, loaded_verdict, saturated_rate
from .prefix import PrefixShare, offline_token_ratio
from .relaxation import arrival_variability, relaxation_time
from .replicas import Replicas, replicas
from .rescale import at_rate, replay
from .search import MAX_PROBE_REQUESTS, RELAXATION_RUNS, MaxRate, max_rate
from .sizing import FleetSize, size_fleet
from .slo import SLO_KEYS, cooldown_time, slo_attainment
from .slo_scan import slo_capacity, slo_metrics
from .stats import MIN_LIFETIMES, RequestStats, request_stats
from .targets import check_percentiles, percentile_report

__all__ = ["bounds", "Bracket", "max_rate", "MaxRate", "goodput", "Goodput", "replicas",
           "Replicas", "at_rate", "replay", "request_stats", "RequestStats", "relaxation_time",
           "arrival_variability", "vllm_unit_time_rate", "SLO_KEYS", "slo_attainment",
           "cooldown_time", "curve_rates", "load_curve", "plot_capacity", "capacity_main",
           "MIN_LIFETIMES", "RELAXATION_RUNS", "MAX_PROBE_REQUESTS", "size_fleet", "FleetSize",
           "fleet_trace", "percentile_report",
           "check_percentiles", "saturated_rate", "loaded_verdict", "backlog_size",
           "PrefixShare", "offline_token_ratio", "slo_metrics", "slo_capacity"]

#: Old names kept for one release: name -> (a function giving the object, the new name, a
#: remark) for :func:`queuetheory.errors.moved_names`.
_DEPRECATED = {"drain_time": (lambda: cooldown_time, "queuetheory.capacity.cooldown_time",
                              "queuetheory.fluid.drain_time is the time a fluid backlog takes "
                              "to drain")}
__getattr__ = _moved_names(__name__, _DEPRECATED)

"""Replica count (:func:`replicas`): the fewest engines behind a router that meet the
latency targets at a total rate."""

from __future__ import annotations

import dataclasses
import math
import time
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..engine.server import server_settings, token_budget_for
from ..errors import check_between, check_positive, check_seeds
from ..timing import UnitTime
from ..workload import Workload
from .bounds import bounds
from .counts import smallest_count
from .inputs import _checked_settings
from .slo import _check_slo, cooldown_time, slo_attainment
from .stats import _lone_lifetime


@dataclass(frozen=True, eq=False)
class Replicas:
    """The answer of :func:`replicas`: the fewest engines ``count`` (``None`` when even
    ``max_replicas`` miss), the lower bound ``at_least`` from the analytic bracket (fewer
    engines cannot even be stable), and one row per replica count tried in ``probes``.

    Attributes
    ----------
    count : int or None
        The fewest engines that meet the targets, ``None`` when even ``max_replicas`` miss.
    at_least : int
        Fewer engines cannot be stable: ``ceil(target_rate / upper)``, ``upper`` the
        bracket's upper bound of one engine (:func:`bounds`).
    target_rate : float
        The total arrival rate, in requests per time unit.
    router : str
        The router in front of the engines.
    slo : dict
        The latency targets judged (:data:`SLO_KEYS`).
    attainment : float
        The share of requests that must meet every target.
    probes : pandas.DataFrame
        One row per count tried: ``engines``, ``requests``, ``met``, ``unfinished``,
        ``attainment``, ``p50_latency``, ``p99_latency``, ``undecided``, ``meets``.
    wall_s : float
        Wall-clock seconds the search took.
    """

    count: int | None
    at_least: int
    target_rate: float
    router: str
    slo: dict
    attainment: float
    probes: pd.DataFrame
    wall_s: float

    def __repr__(self) -> str:
        got = f"{self.count} engines" if self.count else "no count up to the limit"
        return (f"Replicas({got} behind {self.router!r} meet {self.slo} for "
                f"≥ {self.attainment:.0%} at {self.target_rate:.5g} requests per time unit; "
                f"≥ {self.at_least} by the bounds; tried {list(self.probes['engines'])})")


def _parallel(workload, policy, time_model, K, b, router, rate):
    """``K`` engines behind one ``router`` per request class (the networks layer), the
    workload's length laws kept (paired samples stay paired)."""
    from ..networks.graph import AgentNetwork

    net = AgentNetwork(slot=1.0 if isinstance(time_model, UnitTime) else time_model.slot,
                       name=f"replicas(K={K}, {router})")
    for k in range(1, K + 1):
        net.add_agent(f"E{k}", time_model, b, policy=policy)
    scale = rate / workload.total_rate
    for j, c in enumerate(workload.classes):
        names = [f"c{j}_{k}" for k in range(1, K + 1)]
        for k, name in enumerate(names, start=1):
            net.add_class(name, f"E{k}", 1, 1)
            net.nodes[name]["lengths"] = dataclasses.replace(c, rate=0.0)
        net.add_router(f"router{j}", names, router=router)
        net.add_source(f"src{j}", c.rate * scale, f"router{j}")
    return net


def _default_simulator(memory, percentiles, recorded, first_token, router) -> str:
    """This release's default: the fleet where a setting needs it, else the network, with a
    ``FutureWarning`` that the next release's default is the fleet."""
    from ..networks.graph import ROUTERS

    if (memory is not None or percentiles is not None or recorded
            or first_token is not None or router not in ROUTERS):
        return "fleet"
    warnings.warn("replicas() runs Li, Dai, Peng's network of agents (first_token='decode', "
                  "no KV-memory limit) by default in this release; the next release sizes "
                  "whole engines (size_fleet: first_token='prefill', each engine's KV cache). "
                  "Pass simulator='network' to keep this answer or simulator='fleet' for "
                  "the new one", FutureWarning, stacklevel=3)
    return "network"


def _check_network_settings(memory, percentiles, recorded, first_token) -> None:
    """Refuse, naming it, a setting the networks layer cannot run."""
    for name, given in (("memory", memory is not None),
                        ("percentiles", percentiles is not None),
                        ("workload", recorded)):
        if given:
            raise ValueError(f"{name} given with simulator='network': the networks layer has "
                             "no KV-memory limit, percentile targets or trace replay; use "
                             "simulator='fleet'")
    if first_token not in (None, "decode"):
        raise ValueError(f"first_token={first_token!r} with simulator='network': the "
                         "networks layer follows first_token='decode'; use simulator='fleet'")


def replicas(target_rate, workload, policy, time_model, *, slo=None, attainment: float = 0.9,
             router: str = "round_robin", token_budget=None, n_requests: int = 2000,
             warmup: float = 0.2, seeds=(0,), max_replicas: int = 64, memory=None,
             percentiles=None, first_token: str | None = None, simulator: str | None = None):
    """The fewest engines behind ``router`` that meet ``slo`` for ``attainment`` of the
    requests at the total rate ``target_rate``.

    Two simulators answer: ``simulator="network"``, Li, Dai, Peng's network of agents (the
    default of this release), and ``simulator="fleet"``, whole engines behind a router
    (:func:`~queuetheory.capacity.sizing.size_fleet`), the default of the next release. A
    call that names neither and would run the network warns (``FutureWarning``): pass
    ``simulator="network"`` to keep its answer.

    ``time_model`` may be a whole :class:`~queuetheory.engine.Server`: its settings then stand
    for ``token_budget``, ``memory`` and ``first_token`` (given again, they must agree).

    Engines run ``policy`` (copied per engine) in the networks layer
    (:func:`queuetheory.networks.simulate`), which follows Li, Dai, Peng's convention
    ``first_token="decode"`` (every output token takes a decode iteration, so the sizing
    is conservative by one iteration per request against real engines) and has no KV-memory
    limit. ``router``: ``random``, ``round_robin``, ``least_requests`` or ``least_tokens``.
    The count starts at the bound ``K ≥ target_rate / upper`` of :func:`bounds` (fewer
    engines are unstable), doubles until the targets are met, then bisects. Attainment is
    judged as in :func:`goodput`, over the arrivals after the first ``warmup`` share of
    ``n_requests·K`` requests.

    Fleets as users run them go to :func:`~queuetheory.capacity.sizing.size_fleet`, which
    simulates the engines whole (each with its own KV cache) and returns a
    :class:`~queuetheory.capacity.sizing.FleetSize`: give ``memory`` (KV tokens per
    engine), ``percentiles`` (targets per metric, ``{"p99_ttft": 2.0, "p99_tpot": 0.1}``),
    a recorded :class:`~queuetheory.workload.Trace` (replayed at ``target_rate``), the
    router ``"least_kv"`` or ``first_token="prefill"`` (the real engines' convention);
    ``n_requests`` is then per engine. A trace with prefix ids and a policy with a prefix
    cache (``VLLMV1``, any router including ``"cache_aware"``) is sized with the cache on:
    ``at_least`` comes from the proven bound at the trace's offline hit ratio
    (:mod:`~queuetheory.capacity.prefix`); with ``enable_prefix_caching=False``, off.

    Parameters
    ----------
    target_rate : float
        The total arrival rate, in requests per time unit (> 0).
    workload : Workload or Trace
        A :class:`~queuetheory.Workload` that draws arrivals, split among the engines; a
        recorded :class:`~queuetheory.workload.Trace` goes to :func:`size_fleet`.
    policy : Policy
        Each engine's scheduler (copied per engine).
    time_model : TimeModel or Server
        Each engine's batch-time model, or a whole :class:`~queuetheory.engine.Server`
        (its ``token_budget``, ``memory`` and ``first_token`` then stand for those
        arguments; given again, they must agree; its memory or first-token convention
        sends the call to :func:`size_fleet`).
    slo : dict, optional
        The latency targets, keys among :data:`SLO_KEYS`; default
        ``{"ttft": 1.0, "tbt": 0.1}``.
    attainment : float, default 0.9
        The share of the requests that must meet every target, in ``(0, 1]``.
    router : str, default "round_robin"
        ``random``, ``round_robin``, ``least_requests`` or ``least_tokens`` (the networks
        layer); another key of :data:`~queuetheory.networks.FLEET_ROUTERS` sends the call
        to :func:`size_fleet`.
    token_budget : int, optional
        ``b``, the most tokens one batch serves; default the policy's own.
    n_requests : int, default 2000
        The expected arrivals per engine of each run's window.
    warmup : float, default 0.2
        The share of the window left out at its start, in ``[0, 1)``.
    seeds : iterable of int, default (0,)
        The seeds, one run each, pooled per count.
    max_replicas : int, default 64
        The largest count tried.
    memory : int, optional
        KV-cache tokens per engine; given, the call goes to :func:`size_fleet`.
    percentiles : dict, optional
        Per-metric percentile targets (``{"p99_ttft": 2.0}``); given, the call goes to
        :func:`size_fleet`.
    first_token : {"prefill", "decode"}, optional
        Given, the call goes to :func:`size_fleet` with it (``"decode"`` may also run the
        network, with ``simulator="network"``); else the networks layer's ``"decode"``.
    simulator : {"network", "fleet"}, optional
        ``"network"``: the networks layer (slotted time under :class:`UnitTime`, one
        router per request class, no KV-memory limit, ``first_token="decode"``);
        ``"fleet"``: :func:`size_fleet` (whole engines, each with its own KV cache;
        ``first_token`` default ``"prefill"``). ``None`` (this release's default): the
        network unless a setting above needs the fleet, with a ``FutureWarning`` when it
        runs the network, since the next release's default is the fleet.

    Returns
    -------
    Replicas or FleetSize
        :class:`Replicas` from the networks layer, or :class:`FleetSize` where the call
        went to :func:`size_fleet`.

    Raises
    ------
    ValueError
        If ``target_rate`` is not a positive number, ``workload`` does not draw arrivals,
        ``router`` is not a known one, ``slo`` is not a valid dict of targets, an argument
        breaks its rule (``attainment`` in ``(0, 1]``, ``warmup`` in ``[0, 1)``,
        ``n_requests`` and ``max_replicas`` positive integers, ``seeds`` distinct integers
        >= 0), ``simulator`` is not ``"network"``, ``"fleet"`` or ``None``, a setting the
        network cannot run is given with ``simulator="network"``, a loose setting
        contradicts the :class:`~queuetheory.engine.Server`, no token budget is given, or
        the bracket refuses its inputs (:func:`bounds`); and what :func:`size_fleet` raises
        where the call goes there.
    UnsupportedSettingError
        If the policy refuses the settings (``Policy.supports``).
    """
    from ..networks.fleet import FLEET_ROUTERS
    from ..workload import Trace

    time_model, token_budget, memory, first_token = server_settings(
        time_model, token_budget, memory, first_token)
    if simulator is None:
        simulator = _default_simulator(memory, percentiles, isinstance(workload, Trace),
                                       first_token, router)
    elif simulator == "network":
        _check_network_settings(memory, percentiles, isinstance(workload, Trace),
                                first_token)
    elif simulator != "fleet":
        raise ValueError(f"simulator={simulator!r}: must be 'network', 'fleet' or None")
    if simulator == "fleet":
        from .sizing import size_fleet

        if router not in FLEET_ROUTERS:
            raise ValueError(f"router={router!r}: must be one of {sorted(FLEET_ROUTERS)}")
        return size_fleet(target_rate, workload, policy, time_model, memory=memory,
                          router=router, slo=slo, attainment=attainment,
                          percentiles=percentiles, token_budget=token_budget, seeds=seeds,
                          n_requests=n_requests, warmup=warmup, max_replicas=max_replicas,
                          first_token=first_token or "prefill")
    from ..networks.graph import ROUTERS
    from ..networks.simulate import simulate as simulate_network

    t0 = time.perf_counter()
    check_positive("target_rate", target_rate)
    if not isinstance(workload, Workload) or workload._trace is not None:
        raise ValueError(f"workload={workload!r}: replicas splits a Workload that draws "
                         "arrivals among engines; for a recorded trace give its length pairs "
                         "(Workload.from_lengths(trace.prompt, trace.output, rate=...))")
    if router not in ROUTERS:
        raise ValueError(f"router={router!r}: must be one of {ROUTERS}")
    slo = _check_slo({"ttft": 1.0, "tbt": 0.1} if slo is None else slo)
    attainment = check_between("attainment", attainment, 0, 1, high_closed=True)
    warmup = check_between("warmup", warmup, 0, 1, low_closed=True)
    check_positive("n_requests", n_requests, integer=True)
    check_positive("max_replicas", max_replicas, integer=True)
    _checked_settings("replicas", policy, time_model, token_budget, None, "decode")
    b = token_budget_for(policy, token_budget, required=True)
    seeds = check_seeds(seeds)
    br = bounds(workload, time_model, token_budget=b, policy=policy, first_token="decode")
    at_least = max(1, math.ceil(target_rate / br.upper * (1 - 1e-12)))
    lifetime = _lone_lifetime(workload, time_model)
    rows, tried = [], {}

    def meets(K):
        if K not in tried:
            H = n_requests * K / target_rate
            drain = cooldown_time(slo, lifetime, H)
            frames = []
            for s in seeds:
                res = simulate_network(_parallel(workload, policy, time_model, K, b, router,
                                                 target_rate), horizon=H + drain, seed=s)
                v = res.visits
                v["tbt_max"] = np.concatenate([e.table.column("tbt_max")
                                               for e in res.engines.values()])
                frames.append(v)
            out = slo_attainment(pd.concat(frames, ignore_index=True), slo, start=warmup * H,
                                 end=H, run_end=H + drain)
            out["meets"] = bool(out["attainment"] >= attainment)
            rows.append({"engines": K, **out})
            tried[K] = out["meets"]
        return tried[K]

    hi = smallest_count(meets, at_least, max_replicas)
    probes = pd.DataFrame(rows, columns=["engines", "requests", "met", "unfinished",
                                         "attainment", "p50_latency", "p99_latency",
                                         "undecided", "meets"] if not rows else None
                          ).sort_values("engines", ignore_index=True)
    return Replicas(hi, at_least, float(target_rate), router, slo, attainment, probes,
                    time.perf_counter() - t0)

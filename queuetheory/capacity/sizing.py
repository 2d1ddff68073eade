"""Fleet sizing (:func:`size_fleet`): the fewest engines, each with its KV limit, behind a
router, that meet latency targets per metric and percentile (and a joint attainment) at a
total rate of a drawn workload or a replayed trace."""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..engine.server import token_budget_for
from ..errors import CensoredRunWarning, check_positive
from ..networks.fleet import FLEET_ROUTERS, simulate_fleet
from .bounds import Bracket, bounds
from .counts import smallest_count
from .fleet import fleet_trace
from .inputs import _checked_settings
from .rescale import _length_law
from .slo import _check_slo, cooldown_time, slo_attainment
from .stats import MIN_LIFETIMES, _lone_lifetime
from .targets import check_percentiles, percentile_report

#: The resources whose use :func:`size_fleet` measures, and which one binds.
RESOURCES = ("compute", "KV memory", "batch cap")


@dataclass(frozen=True, eq=False)
class FleetSize:
    """The answer of :func:`size_fleet`.

    Attributes
    ----------
    count : int or None
        The fewest engines that meet every target (pooled over the seeds), ``None`` when
        even ``max_replicas`` miss.
    at_least : int
        Fewer engines cannot be stable: ``ceil(rate / upper)``, ``upper`` the bracket's
        upper bound of one engine (with its KV limit and batch cap).
    target_rate : float
        The total arrival rate, in requests per time unit.
    router : str
        The router in front of the engines (:data:`~queuetheory.networks.FLEET_ROUTERS`).
    memory : int or None
        KV-cache tokens per engine (``None``: unlimited).
    slo : dict or None
        The joint latency targets (:data:`SLO_KEYS`), ``None`` when only percentile
        targets are judged.
    attainment : float
        The share of requests that must meet every ``slo`` target.
    percentiles : dict or None
        The per-metric percentile targets as given, or ``None``.
    seeds_meeting : tuple of int
        ``(k, n)``: at ``count``, ``k`` of the ``n`` seeds (independent replications) meet
        every target on their own (at the largest count tried when ``count`` is None).
    below : tuple of int or None
        The same at ``count − 1``, ``None`` where it was not judged.
    binding : str or None
        The resource most used at ``count`` (:data:`RESOURCES`).
    use : dict
        All three resources' use (compute: the per-engine rate over the compute bound; KV
        memory: time-average KV over the limit; batch cap: time-average batch size over
        ``max_reqs``; NaN where there is no limit).
    bracket : Bracket
        One engine's analytic bracket (:func:`bounds`).
    probes : pandas.DataFrame
        One row per (count, seed): ``engines``, ``seed``, ``attainment``, ``requests``,
        ``unfinished``, each percentile target's ``value`` and ``meets``.
    report : dict
        The pooled percentile table (:func:`percentile_report`) per count tried, ``None``
        values without percentile targets.
    best : dict or None
        When ``count`` is None, the attainment and percentiles at the largest count tried.
    wall_s : float
        Wall-clock seconds the search took.
    """

    count: int | None
    at_least: int
    target_rate: float
    router: str
    memory: int | None
    slo: dict | None
    attainment: float
    percentiles: dict | None
    seeds_meeting: tuple
    below: tuple | None
    binding: str | None
    use: dict
    bracket: Bracket
    probes: pd.DataFrame
    report: dict = field(repr=False)
    best: dict | None
    wall_s: float

    def __repr__(self) -> str:
        what = f"{self.count} engines" if self.count else "no count up to the limit"
        return (f"FleetSize({what} behind {self.router!r} at {self.target_rate:.5g} requests "
                f"per time unit; ≥ {self.at_least} by the bounds; binding {self.binding}; "
                f"seeds meeting {self.seeds_meeting[0]}/{self.seeds_meeting[1]}; "
                f"{self.wall_s:.1f} s)")


def size_fleet(target_rate, workload, policy, time_model, *, memory=None,
               router: str = "round_robin", slo=None, attainment: float = 0.9,
               percentiles=None, token_budget=None, seeds=(0, 1, 2),
               n_requests: int = 600, warmup: float = 0.2, max_replicas: int = 64,
               first_token: str | None = None) -> FleetSize:
    """The fewest engines behind ``router`` that meet every target at ``target_rate``.

    ``time_model`` may be a whole :class:`~queuetheory.engine.Server`: its settings then stand
    for ``token_budget``, ``memory`` and ``first_token`` (given again, they must agree).

    Each engine runs ``policy`` with ``memory`` KV tokens (its own cache) under the
    ``first_token`` convention of the real engines; the fleet is simulated whole
    (:func:`~queuetheory.capacity.fleet.simulate_fleet`), so a join-the-shortest-queue or
    KV-aware router sees every engine's state. ``workload``: a Workload drawn at the
    target rate, or a recorded :class:`~queuetheory.workload.Trace` replayed at it with its
    burstiness kept (each seed from another offset into the trace). A count is judged per
    seed over the arrivals in ``[warmup·H, H]``, ``H`` the time of ``n_requests`` arrivals
    per engine (at least ``MIN_LIFETIMES`` lone lifetimes), the run going on past ``H`` as
    in :func:`~queuetheory.capacity.goodput`; the targets are ``slo`` (joint: at least
    ``attainment`` of the requests meet every one) and ``percentiles`` (each on its own:
    ``{"p99_ttft": 2.0, "p99_tpot": 0.1}``,
    :func:`~queuetheory.capacity.targets.check_percentiles`). A count meets the targets when
    the seeds' requests pooled do.

    The search starts at the stability bound ``at_least``, doubles until a count meets,
    then bisects; the counts one either side of the answer are judged too (below the bound
    a finite run still shows how far off the targets are, but never meets them: a count
    below the stability bound cannot sustain the rate however well a finite window looks).
    ``seeds_meeting`` and ``below`` give the spread across replications at the answer and
    one engine fewer.

    A trace with prefix ids under a policy that caches prefixes (``VLLMV1``) has the proven
    bound at its offline hit ratio (:mod:`~queuetheory.capacity.prefix`): every distinct
    block is computed at least once in the fleet, so ``at_least`` holds for any router
    (``"cache_aware"`` included) and any cache size; each seed's replay gives the trace's
    copies their own ids.

    Parameters
    ----------
    target_rate : float
        Total requests per time unit (> 0).
    workload : Workload or Trace
        A :class:`~queuetheory.Workload` or a recorded
        :class:`~queuetheory.workload.Trace`.
    policy : Policy
        Each engine's scheduler.
    time_model : TimeModel or Server
        Each engine's batch-time model, or a whole :class:`~queuetheory.engine.Server` (its
        ``token_budget``, ``memory`` and ``first_token`` then stand for those arguments;
        given again, they must agree).
    memory : int, optional
        KV-cache tokens per engine (``None``: unlimited).
    router : str, default "round_robin"
        A key of :data:`~queuetheory.networks.FLEET_ROUTERS`.
    slo : dict, optional
        Joint targets (:data:`~queuetheory.capacity.SLO_KEYS`); default
        ``{"ttft": 1.0, "tbt": 0.1}`` without ``percentiles``, none with them.
    attainment : float, default 0.9
        The share of requests that must meet every ``slo`` target, in ``(0, 1]``.
    percentiles : dict, optional
        Per-metric percentile targets (:func:`check_percentiles`).
    token_budget : int, optional
        The per-batch token budget ``b`` (default the policy's).
    seeds : iterable of int, default (0, 1, 2)
        Independent replications.
    n_requests : int, default 600
        Arrivals per engine in each run's window.
    warmup : float, default 0.2
        The share of the window discarded as warm-up, in ``[0, 1)``.
    max_replicas : int, default 64
        The largest count tried.
    first_token : {"prefill", "decode"}, optional
        Whether the prefill iteration emits the first output token; default
        ``"prefill"``.

    Returns
    -------
    FleetSize
        The count, its bound, the seeds' spread, the binding resource and the probes.

    Raises
    ------
    ValueError
        A bad rate, router, target, attainment, window or count, a loose setting that
        contradicts the :class:`~queuetheory.engine.Server`, no token budget, a bracket
        that refuses its inputs (:func:`bounds`), or an empty bracket (no count can be
        stable).
    UnsupportedSettingError
        For a setting the policy refuses (``Policy.supports``).
    """
    t0 = time.perf_counter()
    check_positive("target_rate", target_rate)
    if router not in FLEET_ROUTERS:
        raise ValueError(f"router={router!r}: must be one of {sorted(FLEET_ROUTERS)}")
    if slo is None and percentiles is None:
        slo = {"ttft": 1.0, "tbt": 0.1}
    slo = None if slo is None else _check_slo(slo)
    pct = None if percentiles is None else check_percentiles(percentiles)
    if not 0 < attainment <= 1:
        raise ValueError(f"attainment={attainment}: must lie in (0, 1]")
    if not 0 <= warmup < 1:
        raise ValueError(f"warmup={warmup}: must lie in [0, 1)")
    check_positive("n_requests", n_requests, integer=True)
    check_positive("max_replicas", max_replicas, integer=True)
    time_model, token_budget, memory, first_token = _checked_settings(
        "size_fleet", policy, time_model, token_budget, memory, first_token)
    b = token_budget_for(policy, token_budget, required=True)
    seeds = tuple(int(s) for s in np.atleast_1d(seeds))
    lengths = _length_law(workload)
    br = bounds(workload, time_model, token_budget=b, memory=memory, policy=policy,
                first_token=first_token)
    if br.empty:
        raise ValueError(f"no engine count can be stable: {br.violated}")
    at_least = max(1, math.ceil(target_rate / br.upper * (1 - 1e-12)))
    lifetime = _lone_lifetime(lengths, time_model)
    rows, report, judged, runs = [], {}, {}, {}

    def judge(K):
        if K in judged:
            return judged[K]
        H = max(n_requests * K / target_rate, MIN_LIFETIMES * lifetime)
        drain = cooldown_time({**(slo or {}), **_deadlines(pct)}, lifetime, H)
        frames = []
        for s in seeds:
            tr = fleet_trace(workload, target_rate, H + drain, s)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", CensoredRunWarning)
                run = simulate_fleet(tr, policy, time_model, K, router=router, memory=memory,
                                     token_budget=b, first_token=first_token,
                                     horizon=H + drain, seed=s)
            req = run.requests
            row = {"engines": K, "seed": s, **_judge(req, slo, pct, attainment, warmup * H,
                                                     H, H + drain)}
            row["meets"] = row["meets"] and K >= at_least    # below the bound: unstable
            rows.append(row)
            frames.append(req)
            runs[K] = run
        pooled = pd.concat(frames, ignore_index=True)
        out = _judge(pooled, slo, pct, attainment, warmup * H, H, H + drain)
        out["meets"] = out["meets"] and K >= at_least
        report[K] = (percentile_report(pooled, {k: v[2] for k, v in pct.items()},
                                       start=warmup * H, end=H) if pct else None)
        judged[K] = (out["meets"], out, warmup * H)
        return judged[K]

    hi = smallest_count(lambda K: judge(K)[0], at_least, max_replicas)
    if hi is not None:              # the neighbours: the seeds' spread one engine either side
        for K in (hi - 1, hi + 1):
            if 1 <= K <= max_replicas:
                judge(K)
    probes = pd.DataFrame(rows).sort_values(["engines", "seed"], ignore_index=True)
    top = hi if hi is not None else max(judged)
    per_seed = probes[probes["engines"] == top]
    meeting = (int(per_seed["meets"].sum()), len(seeds))
    below = None
    if hi is not None and hi - 1 in judged:
        fewer = probes[probes["engines"] == hi - 1]
        below = (int(fewer["meets"].sum()), len(seeds))
    use = _use(runs[top], judged[top][2], target_rate / top, br, policy)
    known = {k: v for k, v in use.items() if not np.isnan(v)}
    binding = max(known, key=known.get) if known else None
    best = None if hi is not None else judged[top][1]
    return FleetSize(hi, at_least, float(target_rate), router, memory, slo, attainment,
                     percentiles, meeting, below, binding, use, br, probes, report, best,
                     time.perf_counter() - t0)


def _deadlines(pct) -> dict:
    """The longest TTFT and latency targets among the percentile targets (the drain)."""
    out = {}
    for _q, metric, target in (pct or {}).values():
        if metric in ("ttft", "latency"):
            out[metric] = max(out.get(metric, 0.0), target)
    return out


def _judge(requests, slo, pct, attainment, start, end, run_end) -> dict:
    out = {"requests": 0, "unfinished": 0, "attainment": float("nan"), "meets": True}
    if slo is not None:
        a = slo_attainment(requests, slo, start=start, end=end, run_end=run_end)
        out.update(requests=a["requests"], unfinished=a["unfinished"],
                   attainment=a["attainment"])
        out["meets"] = bool(a["attainment"] >= attainment)
    if pct is not None:
        rep = percentile_report(requests, {k: v[2] for k, v in pct.items()}, start=start,
                                end=end)
        for key, r in rep.iterrows():
            out[key] = r["value"]
        out["meets"] = bool(out["meets"] and rep["meets"].all())
        if slo is None:
            window = requests[(requests["arrival"] >= start) & (requests["arrival"] < end)]
            out["requests"] = len(window)
            out["unfinished"] = int(window["finish"].isna().sum())
    return out


def _use(run, start, per_engine_rate, br, policy) -> dict:
    """The three resources' use at one count (:data:`RESOURCES`)."""
    u = run.utilisation(start, getattr(policy, "max_reqs", None))
    rates = br.table.set_index("name")["rate"]
    compute = rates.get("compute", rates.get("compute (full batch)", np.nan))
    return {"compute": float(per_engine_rate / compute), "KV memory": u["kv"],
            "batch cap": u["batch"]}

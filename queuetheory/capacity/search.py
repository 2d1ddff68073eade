"""The simulated boundary (:func:`max_rate`): a bisection on the arrival rate, each probe
judged by :func:`~queuetheory.stability`."""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..engine import simulate
from ..engine.server import token_budget_for
from ..errors import CensoredRunWarning, check_between, check_positive, check_seeds
from ..stability import default_horizon, growth_rate, run_longer, stability
from ..workload import Trace
from .bounds import Bracket, bounds
from .inputs import _checked_settings, _ProbeBar
from .loaded import backlog_size, loaded_verdict
from .relaxation import relaxation_time
from .rescale import _length_law, at_rate, replay
from .stats import MIN_LIFETIMES, _lone_lifetime

#: A probe of :func:`max_rate` spans at least this many relaxation times of the backlog
#: (:func:`relaxation_time`): its tail (the last half) then holds ten blocks of about two
#: relaxation times each, long enough for the batch means to be nearly independent.
RELAXATION_RUNS = 40
#: Where a rate judged unstable lies below this share of the analytic upper bound, the bound
#: is no guide to the time scale of the boundary, and :func:`max_rate` sizes its probes by
#: that rate instead (FasterTransformer on ShareGPT: 2 % of the compute bound).
FAR_BELOW = 0.5
#: The most expected arrivals one probe of :func:`max_rate` runs by default (about 136 MB
#: of request table, a few seconds for the bulk-rule schedulers on ShareGPT lengths).
MAX_PROBE_REQUESTS = 500_000
#: While a run settles nothing, the next run of a probe is this many times longer, up to
#: the probe's full length.
LADDER = 4
#: How a probe of :func:`max_rate` may start: from empty only, or also from a backlog.
STARTS = ("both", "empty")


def _combine(empty: str, empty_grows: bool, loaded: str, loaded_grows: bool,
             last: bool) -> tuple[str, str] | None:
    """One probe's verdict from one rung of empty-start and loaded-start runs, and which
    decided; ``None`` while the rung settles nothing and a longer one follows.

    A run from a backlog sized by the fluid model (:func:`backlog_size`) starts in the
    backlogged regime, so its drift is the fluid drift: from empty, a metastable
    low-backlog state reads as stable above the boundary and a slow fill-up as growth
    below it. So the loaded start decides when it is ``stable`` (a backlog that drains) or
    surely grows by more than the tolerance (``loaded_grows``); next an empty start that
    surely grows by more; on the last rung any conclusive loaded-start verdict, then an
    unstable empty start; else the probe is inconclusive (an empty start's ``stable`` alone
    never decides: it may be the metastable state)."""
    if loaded == "stable" or loaded_grows:
        return loaded, "loaded start"
    if empty_grows:
        return "unstable", "empty start"
    if not last:
        return None
    if loaded == "unstable":
        return loaded, "loaded start"
    if empty == "unstable":
        return empty, "empty start"
    return "inconclusive", "neither"


@dataclass(frozen=True, eq=False)
class MaxRate:
    """The answer of :func:`max_rate`.

    Attributes
    ----------
    rate : float
        The estimated largest stable rate: the geometric middle of the largest rate judged
        stable and the smallest judged unstable (or the analytic upper bound), in requests
        per time unit (0 when nothing was found stable).
    interval : tuple of float
        ``(low, high)``: ``high`` the smallest rate judged unstable (or the analytic upper
        bound), ``low`` the largest rate judged stable lowered by the verdict's
        ``tolerance`` (a "stable" verdict means the engine serves at least
        ``1 − tolerance`` of the offered work, so no less is certain).
    probes : pandas.DataFrame
        One row per probe: ``rate``, ``load`` (over the upper bound), ``verdict``,
        ``drift``/``drift_low``/``drift_high`` (relative to the offered work), ``horizon``,
        ``relaxation`` (:func:`relaxation_time` at that rate), ``rounds``, ``arrived`` and
        ``unfinished`` (requests, all seeds of the last round), ``wall_s``, ``decided_by``
        (``"loaded start"``, ``"empty start"`` or ``"neither"``) and ``loaded_drift`` (the
        loaded-start run's relative drift).
    bracket : Bracket
        The analytic :class:`Bracket`; ``binding`` its binding bound.
    efficiency : float
        ``rate`` over the analytic upper bound.
    converged : bool
        Whether the stable and unstable probes are within ``(1 + tol)/(1 − tol)``.
    tol : float
        The search's relative tolerance.
    tolerance : float
        The verdicts' drift tolerance, relative to the offered work.
    wall_s : float
        Wall-clock seconds the search took.
    note : str
        What the user should know (not converged, an inconclusive band, conflicting
        verdicts, an unstable verdict below a proven rate), or ``""``.
    """

    rate: float
    interval: tuple[float, float]
    probes: pd.DataFrame
    bracket: Bracket
    efficiency: float
    converged: bool
    tol: float
    tolerance: float
    wall_s: float
    note: str = ""

    @property
    def binding(self) -> str:
        """The name of the bracket's binding upper bound (:attr:`Bracket.binding`)."""
        return self.bracket.binding

    @property
    def inconclusive(self) -> int:
        """How many probes were inconclusive (treated as unknown)."""
        return int((self.probes["verdict"] == "inconclusive").sum())

    def __repr__(self) -> str:
        lo, hi = self.interval
        return (f"MaxRate({self.rate:.5g} [{lo:.5g}, {hi:.5g}] requests per time unit, "
                f"efficiency {self.efficiency:.3f} of {self.binding} "
                f"{self.bracket.upper:.5g}; {len(self.probes)} probes, {self.inconclusive} "
                f"inconclusive, {'converged' if self.converged else 'NOT converged'}, "
                f"{self.wall_s:.1f} s{'; ' + self.note if self.note else ''})")


def _trace_verdict(trace, rate, policy, time_model, H, cap, level, tolerance, kw,
                   most: float = MAX_PROBE_REQUESTS) -> dict:
    """One probe of :func:`max_rate` on a production trace: :func:`replay` at ``rate`` up to
    ``H``, judged by :func:`~queuetheory.stability.growth_rate` and run longer while
    inconclusive by :func:`~queuetheory.stability.run_longer` (whole doublings, up to
    ``cap``).

    The replay is periodic (period ``P = n / rate``, the trace's ``n`` requests at the mean
    rate), and so is a stable backlog: a tail cut mid-period reads the trace's own busy
    hours as growth. ``H`` is therefore rounded up to a whole number of ``2·blocks``
    periods, so that the tail (the last half) is a whole number of periods per block and
    the periodic part cancels from both tests.

    Parameters
    ----------
    trace : Trace
        The recorded trace, replayed.
    rate : float
        The arrival rate of the replay.
    policy, time_model
        The engine.
    H, cap : float
        The first and the longest horizon.
    level, tolerance : float
        The verdict's confidence and tolerance.
    kw : dict
        To :func:`~queuetheory.simulate` (``memory``, ``token_budget``, ``first_token``).
    most : float
        The most requests one probe may draw.

    Returns
    -------
    dict
        ``verdict``, ``drift``, ``drift_low``, ``drift_high`` (relative to the offered
        work), ``horizon``, ``rounds``, ``arrived``, ``unfinished``, ``wall_s``.

    Raises
    ------
    ValueError
        When ``2·blocks`` replays of the trace would draw more than ``most`` requests.
    """
    blocks = 10                         # growth_rate's blocks; its tail is the last half
    unit = 2 * blocks * len(trace) / rate
    if 2 * blocks * len(trace) > most:
        raise ValueError(
            f"trace: {len(trace)} requests; a probe needs {2 * blocks} replays of it "
            f"({2 * blocks * len(trace):.3g} requests), over max_probe_requests={most:.3g}: "
            "give a shorter stretch (trace.head(n) or read_trace(window=...)) or raise "
            "max_probe_requests")
    cap = max(cap, unit)        # the whole replays fit the request limit: run them
    H = unit * math.ceil(H / unit * (1 - 1e-12))
    t0 = time.perf_counter()

    def judge_at(h):
        with warnings.catch_warnings():     # an unstable run's backlog is the evidence here
            warnings.simplefilter("ignore", CensoredRunWarning)
            res = simulate(replay(trace, rate, h), policy, time_model, horizon=h, **kw)
        return res, growth_rate(res, level=level, tolerance=tolerance, blocks=blocks)

    (res, g), H, rounds = run_longer(judge_at, H, cap, longer=lambda h: 2 * h,
                                     settled=lambda judged: judged[1].verdict != "inconclusive")
    rel = g.offered if g.offered > 0 else 1.0
    return {"verdict": g.verdict, "drift": g.relative, "drift_low": g.ci_low / rel,
            "drift_high": g.ci_high / rel, "horizon": H, "rounds": rounds,
            "arrived": len(res.trace), "unfinished": int(res.live.size),
            "wall_s": time.perf_counter() - t0}


# long: one search whose probes, bracket and inconclusive band share state from probe to probe
def max_rate(workload, policy, time_model, *, token_budget=None, memory=None,
             tol: float = 0.01, seeds=(0,), first_token: str | None = None,
             n_requests: int | None = None, max_horizon_factor: float = 4.0,
             tolerance: float = 0.03, level: float = 0.99, max_probes: int = 24,
             max_probe_requests: float = MAX_PROBE_REQUESTS,
             bracket: Bracket | None = None, progress: bool = False,
             start: str = "both") -> MaxRate:
    """The largest arrival rate at which ``policy`` is stable, by bisection on the rate.

    ``time_model`` may be a whole :class:`~queuetheory.engine.Server`: its settings then stand
    for ``token_budget``, ``memory`` and ``first_token`` (given again, they must agree).

    The workload's length law is kept and its rate scaled (:func:`at_rate`); a recorded
    :class:`~queuetheory.workload.Trace` is replayed at each rate with its burstiness kept
    (:func:`replay`, the verdict of :func:`~queuetheory.stability.growth_rate` on the one replay:
    ``seeds`` then only seed the policy). Each probe is judged by :func:`~queuetheory.stability`
    over ``seeds``, with its ``tolerance`` (default 0.03, stability's own: a "stable" verdict at
    ``λ`` means the engine serves at least ``1 − tolerance`` of what arrives) and runs of
    stability's default horizon (4000 arrivals or 200 lifetimes of a lone request, whichever is
    longer), or of ``n_requests`` arrivals but at least ``MIN_LIFETIMES`` lone lifetimes (a
    shorter run is all warm-up and looks unstable); a run is doubled while inconclusive, up to
    ``max_horizon_factor`` times. That first run settles a probe when it is ``stable`` (the
    fill-up from empty only biases towards growth) or when the backlog surely grows faster than
    ``tolerance`` of the offered work (a lower bound of the drift or of the trend above it: a
    stable queue's fill-up rises at about ``σ/√H`` relative, ``σ² = λE[S]²(c_a² + c_s²)``, far
    less at these lengths). Otherwise the probe runs again, afresh and ``LADDER`` times longer
    each time, until a run settles it or it has run for ``RELAXATION_RUNS`` relaxation times of
    the backlog (:func:`relaxation_time`, ``σ²/(1 − ρ)²`` with ``ρ`` the rate over the bracket's
    upper bound, or over the smallest rate judged unstable where that lies below ``FAR_BELOW``
    of the bound (a scheduler far below it, as FasterTransformer is, would otherwise run probes
    that are all fill-up), and at least ``1 − tolerance`` (a first run that settled nothing lies
    within about ``tolerance`` of the boundary: sized by a loose bound alone, vanilla vLLM's
    searches read fill-up as growth up to 5 % below its boundary in 2 seeds of 10); ``c_s²`` the
    work's and ``c_a²`` the arrivals' variability: a bursty trace's probes run longer, a clock's
    shorter), so that stability's tail lies past the fill-up and its blocks are longer than the
    backlog's excursions; without it, ShareGPT's heavy-tailed lengths read as growth at 0.96 of
    a bound Theorem 1(a) of Li, Dai, Peng proves stable. Each run is a look: at a drift of
    ``tolerance`` or more, one says "stable" with probability at most ``(1 − level)/2``, a probe
    of ``k`` runs at most ``k`` times that. No probe draws more than ``max_probe_requests``
    expected arrivals (doublings included). A setting the policy refuses (``Policy.supports``)
    raises :class:`~queuetheory.errors.UnsupportedSettingError` before any probe.

    ``start="both"`` (the default) runs every rung of a probe twice: from empty, and from a
    loaded start, ``backlog_size`` requests queued at time 0 (Little's law at the bracket's
    upper bound: the requests a backlogged engine holds, four times over), judged by the
    same rule (:func:`~queuetheory.capacity.loaded.loaded_verdict`). A conclusive
    loaded-start verdict decides (its drift is the fluid drift of the backlogged engine: a
    metastable low-backlog state cannot pass for stability, and a slow fill-up cannot pass
    for growth); else an empty start that surely grows by more than ``tolerance``; else the
    probe is inconclusive. ``probes["decided_by"]`` says which. ``start="empty"``: from
    empty only. A recorded trace is judged from empty (its replay is periodic).
    ``progress=True`` shows a tqdm bar of the probes, each with its rate and verdict.

    The search first checks the analytic value: the bracket's ``start`` (:func:`bounds`)
    times ``1 − tol`` and, below the upper bound, ``1 + tol``; when the first is stable and
    the second unstable it is done in two probes. Otherwise an unstable probe's next guess
    is the rate it served, ``λ(1 − drift)``, where that lies inside the interval, else the
    geometric middle of the widest gap. Once the largest stable rate ``lo`` and the smallest
    unstable one ``hi`` are within ``step⁴`` (``step = (1 + tol)/(1 − tol)``), two probes
    settle the search whatever their verdicts, the first from anywhere in
    ``[hi/step², lo·step²]``, and within ``step²`` one, from anywhere in
    ``[hi/step, lo·step]``: the search takes the lowest, ``hi/step²`` or ``hi/step``, whose
    runs are the shortest (near the boundary every probe runs long, sized by ``ρ = x/hi``;
    FasterTransformer on ShareGPT, seeds 0–9: a sixth less time in all than with only the
    last probe so chosen, see ``benchmarks/README.md``). An inconclusive probe is unknown:
    it moves neither end, and the search goes on between the stable probes and the
    inconclusive ones, or between those and the unstable ones (probes inside an inconclusive
    band would be inconclusive too). It stops when the largest stable and the smallest
    unstable probe (or the analytic upper bound) are within a factor ``step``
    (``converged``: the rate is their geometric middle, within about ``±tol`` of both),
    when an inconclusive band is
    all that is left, or after ``max_probes``. Heavy-tailed lengths (ShareGPT's prompts
    reach 26k tokens) make the backlog jumpy: near the boundary the verdicts stay
    inconclusive unless the runs are long, and ``note`` says so.

    **Prefix caching**: a trace with prefix ids (:attr:`~queuetheory.workload.Trace.blocks`,
    e.g. ``qt.data.mooncake_trace("conversation").until(300.0)``) under a policy that caches
    prefixes (``VLLMV1``) is replayed with each copy's ids its own (:func:`replay`), and the
    bracket's compute bound is the proven one at the trace's offline ratio
    (:func:`bounds`, :mod:`~queuetheory.capacity.prefix`): the search may then go past the
    no-cache bound, never past that one. The capacity with the cache off is the same call
    with ``enable_prefix_caching=False``; ``MaxRate.bracket.prefix`` says which ratio the
    bound used.

    Parameters
    ----------
    workload : Workload or Trace
        A :class:`~queuetheory.Workload` (its rate scaled, :func:`at_rate`) or a recorded
        :class:`~queuetheory.workload.Trace` (replayed, :func:`replay`).
    policy : Policy
        The scheduler.
    time_model : TimeModel or Server
        The batch-time model, or a whole :class:`~queuetheory.engine.Server` (its
        ``token_budget``, ``memory`` and ``first_token`` then stand for those arguments;
        given again, they must agree).
    token_budget : int, optional
        ``b``, the most tokens one batch serves; default the policy's own.
    memory : int, optional
        The KV-cache capacity ``M``, in tokens; default unlimited (or the policy's own
        blocks).
    tol : float, default 0.01
        The search's relative tolerance, in ``(0, 0.5)``: it stops when the stable and
        unstable probes are within ``(1 + tol)/(1 − tol)``.
    seeds : iterable of int, default (0,)
        The seeds of each probe's runs (distinct integers >= 0).
    first_token : {"prefill", "decode"}, optional
        Whether the prefill iteration emits the first output token; default
        ``"prefill"``.
    n_requests : int, optional
        The expected arrivals of a probe's first run (at least ``MIN_LIFETIMES`` lone
        lifetimes); default stability's own horizon.
    max_horizon_factor : float, default 4.0
        How many times a run may be doubled while inconclusive (>= 1).
    tolerance : float, default 0.03
        The verdicts' drift tolerance, relative to the offered work, in ``(0, 1)``.
    level : float, default 0.99
        The verdicts' confidence level, in ``(0, 1)``.
    max_probes : int, default 24
        The most probes.
    max_probe_requests : float, default MAX_PROBE_REQUESTS
        The most expected arrivals one probe may draw.
    bracket : Bracket, optional
        The analytic bracket, if already computed; default :func:`bounds`.
    progress : bool, default False
        Whether to show a tqdm bar of the probes.
    start : {"both", "empty"}, default "both"
        Whether each rung of a probe also runs from a loaded start, or from empty only.

    Returns
    -------
    MaxRate
        The boundary, its interval, the probes and the bracket.

    Raises
    ------
    ValueError
        If an argument breaks its rule (``tol`` in ``(0, 0.5)``, ``tolerance`` and
        ``level`` in ``(0, 1)``, ``seeds`` distinct integers >= 0, ``max_probes`` and
        ``n_requests`` positive integers, ``max_horizon_factor`` >= 1,
        ``max_probe_requests`` positive, ``start`` one of ``STARTS``, ``first_token`` one of
        the two), a loose setting contradicts the :class:`~queuetheory.engine.Server`, no
        token budget is given, the bracket refuses its inputs (:func:`bounds`), or a trace
        replayed ``2·blocks`` times would draw more than ``max_probe_requests``.
    UnsupportedSettingError
        If the policy refuses the settings (``Policy.supports``), before any probe.
    """
    t0 = time.perf_counter()
    time_model, token_budget, memory, first_token = _checked_settings(
        "max_rate", policy, time_model, token_budget, memory, first_token)
    trace = workload if isinstance(workload, Trace) else None
    workload = _length_law(workload)
    b = token_budget_for(policy, token_budget, required=True)
    tol = check_between("tol", tol, 0, 0.5)
    tolerance = check_between("tolerance", tolerance, 0, 1)
    level = check_between("level", level, 0, 1)
    seeds = check_seeds(seeds)
    check_positive("max_probes", max_probes, integer=True)
    check_positive("max_horizon_factor", max_horizon_factor)
    if max_horizon_factor < 1:
        raise ValueError(f"max_horizon_factor={max_horizon_factor!r}: must be >= 1")
    check_positive("max_probe_requests", max_probe_requests)
    if n_requests is not None:
        check_positive("n_requests", n_requests, integer=True)
    if start not in STARTS:
        raise ValueError(f"start={start!r}: must be one of {STARTS}")
    br = bracket or bounds(workload if trace is None else trace, time_model, token_budget=b,
                           memory=memory, policy=policy, first_token=first_token)
    cols = ["rate", "load", "verdict", "drift", "drift_low", "drift_high", "horizon",
            "relaxation", "rounds", "arrived", "unfinished", "wall_s", "decided_by",
            "loaded_drift"]
    if br.empty:
        return MaxRate(0.0, (0.0, 0.0), pd.DataFrame(columns=cols), br, 0.0, True, tol,
                       tolerance, time.perf_counter() - t0, br.violated)
    rows = []

    lifetime = _lone_lifetime(workload, time_model)
    loaded = start == "both" and trace is None
    backlog = backlog_size(br, time_model, b) if loaded else 0

    def probe(x):
        wl = at_rate(workload, x)
        H = (default_horizon(wl, time_model) if n_requests is None
             else max(n_requests / x, MIN_LIFETIMES * lifetime))
        far = hi is not None and x < hi and hi < FAR_BELOW * br.upper
        # a first run that settles nothing puts x within about ``tolerance`` of the boundary
        capacity = min(hi if far else br.upper, x / (1 - tolerance))
        relax = relaxation_time(workload if trace is None else trace, x, capacity,
                                first_token)
        long = max(H, min(RELAXATION_RUNS * relax, max_probe_requests / x))
        cap = max(long, min(max_horizon_factor * long, max_probe_requests / x))
        kw = {"memory": memory, "token_budget": b, "first_token": first_token}
        if trace is None:
            def judge(h, most):
                return stability(wl, policy, time_model, horizon=h, max_horizon=most,
                                 seeds=seeds, level=level, tolerance=tolerance, **kw)

            spent = {"rounds": 0, "wall_s": 0.0}

            def rung(h):        # one rung of the ladder: from empty, and from a backlog
                v = judge(h, h if long > h else cap)
                spent["rounds"] += v.rounds
                spent["wall_s"] += v.wall_s
                grows = (v.verdict == "unstable"
                         and max(v.drift_interval[0], v.trend_interval[0]) > tolerance)
                out = {"v": v, "verdict": v.verdict, "by": "empty start", "lv": None,
                       "settled": v.verdict == "stable" or grows}
                if loaded:
                    lv = loaded_verdict(workload, x, policy, time_model, horizon=v.horizon,
                                        backlog=backlog, seeds=seeds, level=level,
                                        tolerance=tolerance, **kw)
                    spent["wall_s"] += lv["wall_s"]
                    settled = _combine(v.verdict, grows, lv["verdict"],
                                       lv["verdict"] == "unstable"
                                       and lv["drift_low"] > tolerance, h >= long)
                    out.update(lv=lv, settled=settled is not None)
                    if settled is not None:
                        out["verdict"], out["by"] = settled
                return out

            # H, LADDER·H, … up to ``long``, until a rung settles the probe
            out, _, _ = run_longer(rung, H, long, settled=lambda r: r["settled"],
                                   longer=lambda h: long if LADDER * h >= long / 2
                                   else LADDER * h)
            v, lv = out["v"], out["lv"]
            row = {"verdict": out["verdict"], "drift": v.drift,
                   "drift_low": v.drift_interval[0], "drift_high": v.drift_interval[1],
                   "horizon": v.horizon, "rounds": spent["rounds"],
                   "arrived": int(v.runs["arrived"].sum()),
                   "unfinished": int(v.runs["in_system_end"].sum()),
                   "wall_s": spent["wall_s"], "decided_by": out["by"],
                   "loaded_drift": np.nan if lv is None else lv["drift"]}
        else:
            H = long
            row = {**_trace_verdict(trace, x, policy, time_model, H, cap, level, tolerance,
                                    kw, max_probe_requests),
                   "decided_by": "empty start", "loaded_drift": np.nan}
        rows.append({"rate": x, "load": x / br.upper, "relaxation": relax, **row})
        bar.update(x, row["verdict"], row["wall_s"])
        return row

    bar = _ProbeBar(progress, "max_rate")
    lo, hi, unknown, served, note = None, None, [], None, ""
    step = (1 + tol) / (1 - tol)
    width = step * (1 + 1e-12)                # the widest stable/unstable pair accepted
    planned = [br.start * (1 - tol)]          # first check the analytic value itself
    if br.start * (1 + tol) < br.upper:
        planned.append(br.start * (1 + tol))
    while len(rows) < max_probes:
        x = planned.pop(0) if planned else None
        if x is None:
            top = hi if hi is not None else br.upper   # nothing is stable above the bound
            if lo is None:                             # walk down until a stable probe
                lowest = min(r["rate"] for r in rows)
                guess = served if served is not None and served < lowest else lowest / 2
                x, served = min(max(guess, lowest / 4), lowest * (1 - 2 * tol)), None
                if x < br.start * 1e-4:
                    note = f"not stable at any rate probed, down to {lowest:.3g}"
                    break
            elif lo >= top:
                note = (f"conflicting verdicts: stable at {lo:.5g} above unstable at "
                        f"{top:.5g}; give more seeds or a larger n_requests")
                break
            elif top / lo <= width:
                break
            else:
                inside = [u for u in unknown if lo < u < top]
                gaps = [(lo, min(inside)), (max(inside), top)] if inside else [(lo, top)]
                a, z = max(gaps, key=lambda g: g[1] / g[0])
                if z / a <= width:
                    note = (f"an inconclusive band [{min(inside):.5g}, {max(inside):.5g}] "
                            "remains between the stable and unstable probes: longer runs "
                            "(n_requests) or a larger tolerance narrow it")
                    break
                x = math.sqrt(a * z)
                if served is not None and a * (1 + tol) < served < z / (1 + tol):
                    x = served                       # the rate an overloaded run served
                for last in (1, 2):
                    if not inside and z / a <= step ** (2 * last - 1) * width:
                        # the last probes, stable or not, settle the search from anywhere
                        # in [z/step^last, a·step^last]: the lowest has the shortest runs
                        x = z / step ** last
                        break
                served = None
        v = probe(x)
        if v["verdict"] == "stable":
            lo = x if lo is None else max(lo, x)
        elif v["verdict"] == "unstable":
            hi = x if hi is None else min(hi, x)
            drift = v["loaded_drift"] if v["decided_by"] == "loaded start" else v["drift"]
            served = x * (1 - max(drift, 0.0)) * (1 - tol)
        else:
            unknown.append(x)
    bar.close()
    probes = pd.DataFrame(rows, columns=cols)
    high = hi if hi is not None else br.upper
    converged = lo is not None and high / lo <= width
    rate = math.sqrt(lo * high) if lo is not None else 0.0
    low = 0.0 if lo is None else lo * (1 - tolerance)
    if converged and hi is None:
        note = note or "stable just below the analytic upper bound"
    if hi is not None and hi < br.lower:
        note = (f"{note + '; ' if note else ''}unstable verdict at {hi:.5g}, below the rate "
                f"{br.lower:.5g} a theorem proves stable: near ρ = 1 the backlog's slow "
                "fill-up reads as growth; longer runs (n_requests) move the boundary up")
    if not converged and not note:
        note = f"stopped after {len(rows)} probes"
    return MaxRate(rate, (low, high), probes, br, rate / br.upper if br.upper else 0.0,
                   converged, tol, tolerance, time.perf_counter() - t0, note)

"""Goodput under latency targets (:func:`goodput`): the largest rate at which enough
requests meet every target."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from ..engine.server import token_budget_for
from ..errors import check_between, check_positive, check_seeds
from .bounds import Bracket, bounds
from .inputs import _checked_settings, _ProbeBar
from .rescale import _length_law
from .slo import _check_slo, _window_run

#: The seeds' spread (the interval's half-width over the rate) above which :func:`goodput`
#: says its answer is not settled.
SPREAD = 0.03


@dataclass(frozen=True, eq=False)
class Goodput:
    """The answer of :func:`goodput`.

    Attributes
    ----------
    rate : float
        The goodput: the mean over the seeds (independent replications) of each seed's own
        answer, the middle of its search's last bracket (0 when no rate meets), in requests
        per time unit.
    interval : tuple of float
        The Student-t sampling interval of that mean at ``level`` over the seeds (NaN with
        one seed), clipped to ``[0, stability limit]``: a physical bound is never crossed;
        ``per_seed`` the seeds' answers, ``spread`` the interval's half-width over the
        rate, ``note`` says when it exceeds ``SPREAD`` (±3 %).
    met : bool
        Whether every seed found a rate that meets the targets.
    best_attainment : float
        The highest attainment seen (what the user can get, when ``met`` is False).
    slo : dict
        The latency targets judged (:data:`SLO_KEYS`).
    attainment : float
        The share of requests that must meet every target.
    probes : pandas.DataFrame
        One row per probed rate and seed: ``seed``, ``rate``, ``attainment``, ``requests``
        in the steady-state window, ``met`` requests, ``unfinished`` (counted as misses),
        ``undecided`` (of those, the ones that had missed no target when the run stopped),
        ``p50_latency``, ``p99_latency``, ``drain`` (how long the run went on past the
        window), ``meets``.
    bracket : Bracket
        The analytic bracket the search started from.
    converged : bool
        Whether every seed's search closed to ``high / low − 1 ≤ tol``.
    wall_s : float
        Wall-clock seconds the search took.
    per_seed : tuple of float
        Each seed's answer.
    search : tuple of float
        ``(largest rate found to meet, smallest found to miss)`` pooled over the seeds'
        searches: the bisection's own tolerance, not an interval.
    level : float
        The confidence level of ``interval``.
    note : str
        What the user should know (a wide spread, one seed), or ``""``.
    """

    rate: float
    interval: tuple[float, float]
    met: bool
    best_attainment: float
    slo: dict
    attainment: float
    probes: pd.DataFrame
    bracket: Bracket
    converged: bool
    wall_s: float
    per_seed: tuple = ()
    search: tuple = (0.0, 0.0)
    level: float = 0.95
    note: str = ""

    @property
    def spread(self) -> float:
        """The interval's half-width over the rate (NaN with one seed or a zero rate)."""
        lo, hi = self.interval
        return (hi - lo) / 2 / self.rate if self.rate > 0 and hi == hi else float("nan")

    def __repr__(self) -> str:
        if not self.met:
            return (f"Goodput(no rate probed meets {self.slo} for {self.attainment:.0%} of "
                    f"requests; best attainment {self.best_attainment:.1%})")
        lo, hi = self.interval
        return (f"Goodput({self.rate:.5g} [{lo:.5g}, {hi:.5g}] requests per time unit meet "
                f"{self.slo} for ≥ {self.attainment:.0%} ({len(self.per_seed)} seeds, "
                f"{self.level:.0%} interval); {len(self.probes)} probes, {self.wall_s:.1f} s"
                f"{'; ' + self.note if self.note else ''})")


def goodput(workload, policy, time_model, *, slo=None, attainment: float = 0.9,
            token_budget=None, memory=None, tol: float = 0.02, seeds=(0, 1, 2, 3, 4),
            n_requests: int = 2000, warmup: float = 0.2, first_token: str | None = None,
            max_probes: int = 16, bracket: Bracket | None = None,
            stable_limit: float | None = None, progress: bool = False,
            level: float = 0.95) -> Goodput:
    """The largest arrival rate at which at least ``attainment`` of the requests meet every
    target of ``slo`` (DistServe's goodput, Zhong et al.), by bisection on the rate.

    ``time_model`` may be a whole :class:`~queuetheory.engine.Server`: its settings then stand
    for ``token_budget``, ``memory`` and ``first_token`` (given again, they must agree).

    ``slo`` maps keys of :data:`SLO_KEYS` to targets in the time model's unit (default
    ``{"ttft": 1.0, "tbt": 0.1}``): ``tbt`` bounds the request's largest gap between
    tokens (a stream that never stalls longer), ``tpot`` its mean gap. ``workload``: a
    Workload (its rate scaled) or a recorded Trace (replayed at each rate with its
    burstiness, :func:`replay`). Each probe simulates ``n_requests`` arrivals per seed
    (``simulate(warmup=...)`` at the window's start) and judges those that arrive after the
    first ``warmup`` share of them (:func:`slo_attainment`; unfinished requests are misses,
    counted in ``probes`` instead of a :class:`~queuetheory.errors.CensoredRunWarning`:
    the run is cut on purpose). The run goes on past the window, arrivals continuing, for
    the longest latency or TTFT target but at most the window's length
    (:func:`cooldown_time`): a huge target such as 10⁶ s does not
    make the run explode; a request still unfinished then counts as a miss (``undecided``
    in ``probes`` when it had missed no target yet), so a target longer than the window
    can only make the goodput err low. The search starts below the bracket's ``start``,
    walks up or down by halving, then bisects until ``high / low − 1 ≤ tol``. When no
    probed rate meets the targets (down to 1/64 of the first rate probed), the result says
    so with the best attainment seen.

    Goodput is a sustained rate: no rate at or above the stability limit counts, however
    well a finite window looks there. The limit is the bracket's upper bound, or
    ``stable_limit`` (e.g. the upper end of :func:`max_rate`'s interval) when lower; when
    the targets are met just below it, the interval's upper end is the limit itself.
    ``progress=True`` shows a tqdm bar of the probes, each with its rate and attainment.

    Each seed is an independent replication with a search of its own; the goodput is the
    mean of the seeds' answers and ``interval`` its Student-t interval at ``level`` — the
    spread across seeds, never the bisection's tolerance (that is ``search``). Where the
    interval's half-width exceeds ``SPREAD`` (±3 %) of the rate, ``note`` says so: more
    seeds or a larger ``n_requests`` narrow it.

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
    slo : dict, optional
        The latency targets, keys among :data:`SLO_KEYS`, in the time model's unit;
        default ``{"ttft": 1.0, "tbt": 0.1}``.
    attainment : float, default 0.9
        The share of the window's requests that must meet every target, in ``(0, 1]``.
    token_budget : int, optional
        ``b``, the most tokens one batch serves; default the policy's own.
    memory : int, optional
        The KV-cache capacity ``M``, in tokens; default unlimited (or the policy's own
        blocks, in the bracket).
    tol : float, default 0.02
        The bisection's relative tolerance: it stops at ``high / low − 1 ≤ tol``.
    seeds : iterable of int, default (0, 1, 2, 3, 4)
        The seeds, one independent search each.
    n_requests : int, default 2000
        The expected arrivals of each probe's window.
    warmup : float, default 0.2
        The share of the window left out at its start, in ``[0, 1)``.
    first_token : {"prefill", "decode"}, optional
        Whether the prefill iteration emits the first output token; default ``"prefill"``.
    max_probes : int, default 16
        The most probes of one seed's search.
    bracket : Bracket, optional
        The analytic bracket, if already computed; default :func:`bounds`.
    stable_limit : float, optional
        A stability limit lower than the bracket's upper bound (e.g. the upper end of
        :func:`max_rate`'s interval).
    progress : bool, default False
        Whether to show a tqdm bar of the probes.
    level : float, default 0.95
        The confidence level of the seeds' interval.

    Returns
    -------
    Goodput
        The goodput, its interval over the seeds and the probes.

    Raises
    ------
    ValueError
        If ``slo`` is not a valid dict of targets, an argument breaks its rule
        (``attainment`` in ``(0, 1]``, ``warmup`` in ``[0, 1)``, ``tol``,
        ``n_requests``, ``max_probes``, ``stable_limit`` positive, ``seeds`` distinct
        integers >= 0, ``first_token`` one of the two), a loose setting contradicts the
        :class:`~queuetheory.engine.Server`, no token budget is given, or the bracket
        refuses its inputs (:func:`bounds`).
    UnsupportedSettingError
        If the policy refuses the server's settings (``Policy.supports``), before any
        probe.
    """
    t0 = time.perf_counter()
    slo = _check_slo({"ttft": 1.0, "tbt": 0.1} if slo is None else slo)
    attainment = check_between("attainment", attainment, 0, 1, high_closed=True)
    warmup = check_between("warmup", warmup, 0, 1, low_closed=True)
    check_positive("tol", tol)
    check_positive("n_requests", n_requests, integer=True)
    check_positive("max_probes", max_probes, integer=True)
    if stable_limit is not None:
        check_positive("stable_limit", stable_limit)
    time_model, token_budget, memory, first_token = _checked_settings(
        "goodput", policy, time_model, token_budget, memory, first_token)
    b = token_budget_for(policy, token_budget, required=True)
    seeds = check_seeds(seeds)
    br = bracket or bounds(_length_law(workload), time_model, token_budget=b, memory=memory,
                           policy=policy, first_token=first_token)
    cols = ["rate", "attainment", "requests", "met", "unfinished", "undecided",
            "p50_latency", "p99_latency", "drain", "meets"]
    rows = []
    if br.empty:
        return Goodput(0.0, (0.0, 0.0), False, float("nan"), slo, attainment,
                       pd.DataFrame(columns=["seed", *cols]), br, True,
                       time.perf_counter() - t0)

    def probe(x, replication):
        started = time.perf_counter()
        out = _window_run(workload, policy, time_model, x, slo, n_requests=n_requests,
                          warmup=warmup, seeds=replication, b=b, memory=memory,
                          first_token=first_token)
        out["meets"] = bool(out["attainment"] >= attainment)
        rows.append({"seed": replication[0], "rate": x, **out})
        bar.update(x, f"attainment {out['attainment']:.1%}", time.perf_counter() - started)
        return out["meets"]

    ceiling = br.upper if stable_limit is None else min(br.upper, float(stable_limit))
    bar = _ProbeBar(progress, "goodput")
    first = 0.9 * min(br.start, ceiling)
    found = [_search(probe, (s,), first, ceiling, tol, max_probes) for s in seeds]
    bar.close()
    probes = pd.DataFrame(rows, columns=["seed", *cols])
    best = float(probes["attainment"].max())
    met = all(lo is not None for lo, _ in found)
    answers = np.array([0.0 if lo is None else math.sqrt(lo * (ceiling if hi is None else hi))
                        for lo, hi in found])
    rate = float(answers.mean())
    los = [lo for lo, _ in found if lo is not None]
    his = [hi for _, hi in found if hi is not None]
    search = (max(los) if los else 0.0, min(his) if his else ceiling)
    interval, note = (float("nan"), float("nan")), ""
    if len(seeds) > 1:
        half = float(stats.t.ppf((1 + level) / 2, len(seeds) - 1) * answers.std(ddof=1)
                     / math.sqrt(len(seeds)))
        interval = (max(0.0, rate - half), min(ceiling, rate + half))
        if rate > 0 and half / rate > SPREAD:
            note = (f"the seeds' answers spread ±{half / rate:.1%} (over ±{SPREAD:.0%}): "
                    "more seeds or a larger n_requests narrow it")
    else:
        note = "one seed: no sampling interval (give seeds=(0, 1, 2, 3, 4))"
    if not met:        # some seed met no rate probed: no goodput, the others' best as a ceiling
        interval = (0.0, float(answers.max()))
    converged = all(lo is not None and (hi if hi is not None else ceiling) / lo - 1 <= tol
                    for lo, hi in found)
    return Goodput(rate if met else 0.0, interval, met, best, slo, attainment, probes, br,
                   converged, time.perf_counter() - t0, tuple(float(a) for a in answers),
                   search, level, note)


def _search(probe, seeds, first, ceiling, tol, max_probes):
    """One seed's bisection from ``first``: ``(largest rate found to meet, smallest found
    to miss)``, either ``None`` when not found."""
    lo = hi = None
    x = first
    n = 0
    while n < max_probes:
        n += 1
        if probe(x, seeds):
            lo = x
        else:
            hi = x
        if lo is None:
            x /= 2
            if x < first / 64:
                break
        elif hi is None:
            if x >= ceiling * (1 - tol):
                break                   # met just below the stability limit: it binds
            x = min(2 * x, ceiling * (1 - tol / 2))
        elif hi / lo - 1 <= tol:
            break
        else:
            x = math.sqrt(lo * hi)
    return lo, hi

"""Goodput under latency targets (:func:`goodput`): the largest rate at which enough
requests meet every target."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import pandas as pd

from ..engine.conventions import check_first_token
from ..errors import check_between, check_positive, check_seeds
from .bounds import Bracket, bounds
from .inputs import _budget_of, _ProbeBar, _refuse_unsupported
from .rescale import _length_law
from .slo import _check_slo, _window_run


@dataclass(frozen=True, eq=False)
class Goodput:
    """The answer of :func:`goodput`.

    rate : the largest rate found to meet the targets (0 when none does); ``interval``:
        ``(rate, the smallest rate found to miss)``
    met : whether some probed rate met the targets; ``best_attainment`` the highest
        attainment seen (what the user can get, when ``met`` is False)
    probes : one row per probed rate: ``attainment``, ``requests`` in the steady-state
        window, ``met`` requests, ``unfinished`` (counted as misses), ``undecided`` (of
        those, the ones that had missed no target when the run stopped),
        ``p50_latency``, ``p99_latency``, ``drain`` (how long the run went on past the
        window), ``meets``
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

    def __repr__(self) -> str:
        if not self.met:
            return (f"Goodput(no rate probed meets {self.slo} for {self.attainment:.0%} of "
                    f"requests; best attainment {self.best_attainment:.1%})")
        lo, hi = self.interval
        return (f"Goodput({self.rate:.5g} [{lo:.5g}, {hi:.5g}] requests per time unit meet "
                f"{self.slo} for ≥ {self.attainment:.0%}; {len(self.probes)} probes, "
                f"{self.wall_s:.1f} s)")


def goodput(workload, policy, time_model, *, slo=None, attainment: float = 0.9,
            token_budget=None, memory=None, tol: float = 0.02, seeds=(0,),
            n_requests: int = 2000, warmup: float = 0.2, first_token: str = "prefill",
            max_probes: int = 16, bracket: Bracket | None = None,
            stable_limit: float | None = None, progress: bool = False) -> Goodput:
    """The largest arrival rate at which at least ``attainment`` of the requests meet every
    target of ``slo`` (DistServe's goodput, Zhong et al.), by bisection on the rate.

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
    (:func:`drain_time`): a huge target such as 10⁶ s does not
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
    _refuse_unsupported("goodput", policy, memory, check_first_token(first_token), token_budget)
    b = _budget_of(policy, token_budget)
    seeds = check_seeds(seeds)
    br = bracket or bounds(_length_law(workload), time_model, token_budget=b, memory=memory,
                           policy=policy, first_token=first_token)
    cols = ["rate", "attainment", "requests", "met", "unfinished", "undecided",
            "p50_latency", "p99_latency", "drain", "meets"]
    rows = []
    if br.empty:
        return Goodput(0.0, (0.0, 0.0), False, float("nan"), slo, attainment,
                       pd.DataFrame(columns=cols), br, True, time.perf_counter() - t0)

    def probe(x):
        started = time.perf_counter()
        out = _window_run(workload, policy, time_model, x, slo, n_requests=n_requests,
                          warmup=warmup, seeds=seeds, b=b, memory=memory,
                          first_token=first_token)
        out["meets"] = bool(out["attainment"] >= attainment)
        rows.append({"rate": x, **out})
        bar.update(x, f"attainment {out['attainment']:.1%}", time.perf_counter() - started)
        return out["meets"]

    ceiling = br.upper if stable_limit is None else min(br.upper, float(stable_limit))
    bar = _ProbeBar(progress, "goodput")
    lo = hi = None
    x = first = 0.9 * min(br.start, ceiling)
    while len(rows) < max_probes:
        if probe(x):
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
    bar.close()
    probes = pd.DataFrame(rows, columns=cols)
    best = float(probes["attainment"].max())
    if lo is None:
        return Goodput(0.0, (0.0, hi), False, best, slo, attainment, probes, br, False,
                       time.perf_counter() - t0)
    high = hi if hi is not None else ceiling
    return Goodput(lo, (lo, high), True, best, slo, attainment, probes, br,
                   high / lo - 1 <= tol, time.perf_counter() - t0)

"""Latency targets: the keys, the share of a window's requests that meets them, and one
steady-state window run."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from ..engine import simulate
from ..errors import CensoredRunWarning, check_positive
from ..workload import Trace
from .rescale import _length_law, at_rate, replay
from .stats import MIN_LIFETIMES, _lone_lifetime

#: The latency targets :func:`goodput` and :func:`replicas` accept (time units of the model).
SLO_KEYS = {
    "ttft": "time to first token: first token − arrival",
    "tbt": "time between tokens: the request's LARGEST gap between consecutive output tokens",
    "tpot": "time per output token: the request's MEAN gap after the first token "
            "((finish − first token) / (output − 1))",
    "latency": "end-to-end latency: finish − arrival",
}


def _check_slo(slo) -> dict:
    if not isinstance(slo, dict) or not slo:
        raise ValueError(f"slo={slo!r}: give a dict of targets, keys among {sorted(SLO_KEYS)}")
    bad = sorted(set(slo) - set(SLO_KEYS))
    if bad:
        raise ValueError(f"slo: unknown key(s) {bad}; the valid keys are "
                         + "; ".join(f"{k!r} ({v})" for k, v in SLO_KEYS.items()))
    for k, v in slo.items():
        check_positive(f"slo[{k!r}]", v)
    return {k: float(v) for k, v in slo.items()}


def slo_attainment(requests: pd.DataFrame, slo: dict, *, start: float, end: float,
                   run_end: float | None = None) -> dict:
    """The share of the requests arriving in ``[start, end)`` that met every target of
    ``slo`` (:data:`SLO_KEYS`); a request that did not finish is a miss (counted in
    ``unfinished``). ``requests`` needs ``arrival``, ``output``, ``first_token``,
    ``finish`` and ``tbt_max`` columns (:attr:`~queuetheory.Result.requests`). For each
    target, ``{key}_p90`` is its metric's 90th percentile over those requests (an unfinished
    one counted as ∞: the P90 is ∞ when more than a tenth did not finish).

    With ``run_end`` (when the run stopped) the answer also counts ``undecided``: the
    unfinished requests that had missed no target yet when the run stopped (latency and
    TTFT deadlines past ``run_end``, TTFT met or pending, no token gap over ``tbt``), which
    a longer run might have seen meet them all: misses here, so attainment is a lower
    bound by at most ``undecided / requests``.

    Parameters
    ----------
    requests : pandas.DataFrame
        One row per request, with ``arrival``, ``output``, ``first_token``, ``finish`` and
        ``tbt_max`` columns (:attr:`~queuetheory.Result.requests`; ``NaN`` where not yet
        reached).
    slo : dict
        The latency targets, ``{key: target}`` with keys among :data:`SLO_KEYS`, each
        target positive, in the time model's unit.
    start : float
        The window's start: requests arriving at or after it count.
    end : float
        The window's end: requests arriving before it count.
    run_end : float, optional
        When the run stopped; given, the answer also counts ``undecided``.

    Returns
    -------
    dict
        ``requests`` (in the window), ``met``, ``unfinished``, ``attainment`` (``met`` over
        ``requests``; ``NaN`` for an empty window), ``p50_latency`` and ``p99_latency``
        (completed requests), ``{key}_p90`` per target, and with ``run_end``,
        ``undecided``.

    Raises
    ------
    ValueError
        If ``slo`` is not a non-empty dict, has a key outside :data:`SLO_KEYS`, or a target
        that is not a positive number.
    """
    slo = _check_slo(slo)
    r = requests[(requests["arrival"] >= start) & (requests["arrival"] < end)]
    done = r["finish"].notna().to_numpy()
    ok = done.copy()
    ttft = (r["first_token"] - r["arrival"]).to_numpy()
    latency = (r["finish"] - r["arrival"]).to_numpy()
    gaps = np.maximum(r["output"].to_numpy() - 1, 1)
    tpot = np.where(r["output"].to_numpy() > 1, (r["finish"] - r["first_token"]).to_numpy()
                    / gaps, 0.0)
    tbt = np.nan_to_num(r["tbt_max"].to_numpy(dtype=float), nan=0.0)
    with np.errstate(invalid="ignore"):
        for key, value in (("ttft", ttft), ("latency", latency), ("tpot", tpot),
                           ("tbt", tbt)):
            if key in slo:
                ok &= value <= slo[key]
    n = len(r)
    lat = latency[done]
    out = {"requests": n, "met": int(ok.sum()), "unfinished": int((~done).sum()),
           "attainment": float(ok.mean()) if n else float("nan"),
           "p50_latency": float(np.percentile(lat, 50)) if lat.size else float("nan"),
           "p99_latency": float(np.percentile(lat, 99)) if lat.size else float("nan")}
    values = {"ttft": ttft, "latency": latency, "tpot": tpot, "tbt": tbt}
    for key in slo:             # each target's metric at P90, the unfinished counted as ∞
        v = np.where(done, values[key], np.inf) if key != "ttft" else np.where(
            np.isnan(ttft), np.inf, ttft)
        out[f"{key}_p90"] = (float(np.quantile(v, 0.9, method="inverted_cdf")) if n
                             else float("nan"))
    if run_end is not None:
        arrival, open_ = r["arrival"].to_numpy(), ~done
        if "latency" in slo:
            open_ &= arrival + slo["latency"] > run_end
        if "ttft" in slo:
            open_ &= np.where(np.isnan(ttft), arrival + slo["ttft"] > run_end,
                              ttft <= slo["ttft"])
        if "tbt" in slo:
            open_ &= tbt <= slo["tbt"]
        out["undecided"] = int(open_.sum())
    return out


def cooldown_time(slo: dict, lifetime: float, window: float) -> float:
    """How long a run goes on past the end of its window of arrivals ``[.., window]``, with
    arrivals continuing (the cool-down after the window, as the warm-up comes before it):
    the longest latency or TTFT target of ``slo``, so that the window's last requests can
    meet it, and at least 20 ``lifetime`` (a lone request's).

    Capped at the window's own length (or 20 lifetimes when longer), so that a huge target
    (a latency SLO of 10⁶ s) does not make a run explode. What the cap leaves out: a
    request still unfinished a whole window after the window closed is in a backlog that
    grew over the window, not one a sustainable rate leaves; it counts as a miss, though
    its target might still be met after the run stops (counted in ``undecided`` by
    :func:`slo_attainment`), so attainment, and the goodput built on it, err low.

    This was ``capacity.drain_time`` (kept for one release with a ``DeprecationWarning``);
    the time a fluid backlog takes to drain is :func:`queuetheory.fluid.drain_time`.

    Parameters
    ----------
    slo : dict
        The latency targets (:data:`SLO_KEYS`); only ``latency`` and ``ttft`` lengthen it.
    lifetime : float
        A lone request's time in the system, in the time model's unit.
    window : float
        The length of the window of arrivals, in the same unit.

    Returns
    -------
    float
        ``max(20·lifetime, min(longest target, window))``, in the same unit.
    """
    longest = max(slo.get("latency", 0.0), slo.get("ttft", 0.0))
    return max(20 * lifetime, min(longest, window))


def _window_run(workload, policy, time_model, rate, slo, *, n_requests, warmup, seeds, b,
                memory, first_token):
    """Attainment over the steady-state window: arrivals in ``[warmup·H, H]`` with
    ``H = n_requests / rate`` (at least ``MIN_LIFETIMES`` lone lifetimes); the run goes on
    to ``H + drain`` (:func:`cooldown_time`: the largest deadline of ``slo``, at least 20 lone
    lifetimes, at most ``H``) with arrivals continuing, so the window's last requests meet
    the load they would in steady state. Adds ``undecided`` and ``drain`` to
    :func:`slo_attainment`'s answer."""
    lengths = _length_law(workload)
    lifetime = _lone_lifetime(lengths, time_model)
    H = max(n_requests / rate, MIN_LIFETIMES * lifetime)
    drain = cooldown_time(slo, lifetime, H)
    wl = (replay(workload, rate, H + drain) if isinstance(workload, Trace)
          else at_rate(workload, rate))
    frames = []
    for s in seeds:
        with warnings.catch_warnings():    # cut on purpose: the unfinished are counted
            warnings.simplefilter("ignore", CensoredRunWarning)
            res = simulate(wl, policy, time_model, horizon=H + drain, seed=s, memory=memory,
                           token_budget=b, first_token=first_token, warmup=warmup * H)
        frames.append(res.requests)
    req = pd.concat(frames, ignore_index=True)
    return {**slo_attainment(req, slo, start=warmup * H, end=H, run_end=H + drain),
            "drain": drain}

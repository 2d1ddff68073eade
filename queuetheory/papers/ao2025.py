"""Ao, Luo, Simchi-Levi, Wang's instances and experiments: the instance of Props. 4–5, the
workloads of §6 and the scheduler sweep of §6.1 (Figs. 7-8 on model (1)).

The ledger (:mod:`queuetheory.claims.ao2025`) checks the paper's statements on these; they
lived there until this release (the old names warn until the next one).
"""

from __future__ import annotations

import math

import numpy as np

from .. import fluid
from ..engine import simulate
from ..policies.wait import WAIT
from ..timing import LinearMemoryTime
from ..workload import RequestClass, Workload

__all__ = ["D0", "D1", "PROP4", "LOW_DEMAND", "HIGH_DEMAND", "NESTED_LENGTHS", "NESTED_RATES",
           "PAPER_NESTED_THRESHOLDS", "demand", "scheduler_sweep", "steady_window"]

D0 = D1 = 0.1
PROP4 = (RequestClass(1, 1, 1.0), RequestClass(1, 2, 1.0))
"""The instance of Props. 4–5: types ``(l, l′, λ) = (1, 1, 1), (1, 2, 1)`` with
``d0 = d1 = 0.1`` in ``LinearMemoryTime(d0, d1)`` (``ΔT* = 1``, ``M* = 9``)."""

LOW_DEMAND = ((10, 10, 1.0), (10, 20, 1.0))                       # §6.1 (relative rates)
HIGH_DEMAND = ((20, 100, 6.0), (20, 200, 4.0), (20, 300, 2.0))    # §6.1


def demand(spec, qps: float) -> list[RequestClass]:
    """Classes ``(l, l', relative rate)`` scaled to a total arrival rate ``qps``.

    Parameters
    ----------
    spec : sequence of tuple
        ``(l, l', r)`` per type: prompt length, output length and relative arrival rate
        (:data:`LOW_DEMAND`, :data:`HIGH_DEMAND`).
    qps : float
        The total arrival rate, requests per time unit, shared in proportion to the ``r``.

    Returns
    -------
    list of RequestClass
        One fixed-length class per type, with rate ``qps · r / Σr``.
    """
    total = sum(r for _, _, r in spec)
    return [RequestClass(l, lp, qps * r / total) for l, lp, r in spec]


def scheduler_sweep(spec, rates, *, d0: float, d1: float, batch_limit: int,
                    memory: int | None = None, horizon: float, seed: int = 0,
                    policies=None) -> list[dict]:
    """Throughput and latency of WAIT (fluid-proportional thresholds filling ``batch_limit``)
    and vLLM-/Sarathi-style schedulers capped at the same batch size, under
    ``LinearMemoryTime(d0, d1)`` with KV capacity ``memory`` (Figs. 7-8 on model (1)).
    ``memory=None`` gives every scheduler WAIT's own need ``M^π``: the memory-bound regime
    ``C ≈ M*`` the paper studies, where the others must evict.

    Parameters
    ----------
    spec : sequence of tuple
        ``(l, l', r)`` per type: prompt and output lengths and relative rate
        (:data:`LOW_DEMAND`, :data:`HIGH_DEMAND`).
    rates : iterable of float
        The total arrival rates (requests per time unit) to run, one run per rate and
        scheduler.
    d0 : float
        The fixed overhead per iteration of ``LinearMemoryTime``.
    d1 : float
        The time per KV token of ``LinearMemoryTime``.
    batch_limit : int
        The batch size WAIT's thresholds fill and the others' ``max_reqs``.
    memory : int, optional
        KV capacity in tokens; ``None`` gives WAIT's own need ``M^π`` (eq. 9), rounded up.
    horizon : float
        The length of each run, in time units.
    seed : int, default 0
        The seed of every run (the same arrivals for each scheduler at a rate).
    policies : dict, optional
        ``{name: build}`` with ``build(classes)`` returning the policy for the classes at a
        rate; ``None`` runs WAIT, vLLM (:class:`~queuetheory.policies.VLLMVanilla` at 4096
        tokens) and Sarathi (512 tokens).

    Returns
    -------
    list of dict
        One row per rate and scheduler: ``qps``, ``policy``, ``throughput``, ``latency``
        (the mean), ``ttft`` (the mean), ``restarts`` and ``peak_memory``.
    """
    rel = demand(spec, 1.0)
    n = fluid.wait_thresholds(rel, d0, d1, batch_limit=batch_limit)
    if memory is None:
        memory = int(math.ceil(fluid.wait_memory(n, rel)))
    from ..policies.classic import Sarathi, VLLMVanilla

    make = policies or {
        "WAIT": lambda classes: WAIT(n, classes),
        "vLLM": lambda classes: VLLMVanilla(4096, max_reqs=batch_limit),
        "Sarathi": lambda classes: Sarathi(512, max_reqs=batch_limit),
    }
    rows = []
    for qps in rates:
        classes = demand(spec, qps)
        for name, build in make.items():
            res = simulate(Workload(classes), build(classes), LinearMemoryTime(d0, d1),
                           memory=memory, horizon=horizon, seed=seed, first_token="decode")
            m = res.metrics
            rows.append({"qps": qps, "policy": name, "throughput": m["throughput"],
                         "latency": m["mean_latency"], "ttft": m["mean_ttft"],
                         "restarts": m["restarts"], "peak_memory": m["peak_memory"]})
    return rows


def steady_window(res, start: float, end: float) -> dict:
    """Steady-state figures of one run over the window ``[start, end]`` (warm-up before
    ``start`` discarded): output tokens completed per time unit by requests finishing in the
    window, the mean latency of requests arriving in its first half (and how many of those
    did not finish by ``end``).

    Parameters
    ----------
    res : Result
        A run (:func:`~queuetheory.engine.simulate`) whose horizon reaches ``end``.
    start : float
        The window's start: requests finishing or arriving before it are warm-up.
    end : float
        The window's end, ``> start``.

    Returns
    -------
    dict
        ``throughput`` (output tokens of the requests finishing in the window, per time
        unit), ``latency`` (the mean latency of the finished requests of the cohort arriving
        in ``[start, (start + end) / 2)``), ``unfinished`` (the cohort's unfinished
        requests) and ``cohort`` (its size).
    """
    req = res.requests
    fin, arr = req["finish"].to_numpy(), req["arrival"].to_numpy()
    done = (fin >= start) & (fin <= end)
    cohort = (arr >= start) & (arr < (start + end) / 2)
    finished = cohort & ~np.isnan(fin)
    return {"throughput": float(req["output"].to_numpy()[done].sum() / (end - start)),
            "latency": float(req["latency"].to_numpy()[finished].mean()),
            "unfinished": int((cohort & np.isnan(fin)).sum()), "cohort": int(cohort.sum())}


NESTED_LENGTHS, NESTED_RATES = (20, 40, 80, 160), (20, 40, 80, 160)
PAPER_NESTED_THRESHOLDS = (15, 14, 12, 8)
"""§6.2's thresholds for lengths 20, 40, 80, 160 and rates 20:40:80:160."""

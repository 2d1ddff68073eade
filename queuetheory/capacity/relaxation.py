"""How long the backlog of a queue near capacity takes to forget its start."""

from __future__ import annotations

import math

import numpy as np

from ..errors import check_positive
from ..workload import TimeVarying, Trace, Workload
from .rescale import _length_law
from .stats import _classes, request_stats


def arrival_variability(workload, rate: float) -> float:
    """``c_a²``: the variability of the arrivals of ``workload`` run at the total ``rate``.

    The asymptotic index of dispersion of the arrival counts, ``Var N(t) / E N(t)`` as
    ``t → ∞`` (the ``c_a²`` of Kingman's and Whitt's heavy-traffic approximations; for a
    renewal process the squared coefficient of variation of the gaps):

    * ``"poisson"``, ``"poisson-slot"`` (Poisson counts per slot) and
      :class:`~queuetheory.workload.TimeVarying` (Poisson with a deterministic rate
      function, whose long-run count variance equals its mean): ``1``;
    * ``"deterministic"``: ``0`` (every class a clock, its count off by at most one);
    * ``"bernoulli"``: ``Σ_j λ_j (1 − λ_j s) / Σ_j λ_j`` at slot ``s`` (Bernoulli counts
      per slot, the class rates scaled to ``rate``);
    * a recorded :class:`~queuetheory.workload.Trace`: the squared coefficient of variation
      of its gaps, as if they were renewal (the correlation of successive gaps, part of a
      production trace's burstiness, is left out; the rate does not change it, since
      :func:`~queuetheory.capacity.replay` scales every gap by one factor).

    Parameters
    ----------
    workload : Workload or Trace
        A :class:`~queuetheory.Workload`, or a recorded
        :class:`~queuetheory.workload.Trace` (its gaps).
    rate : float
        The total arrival rate, in requests per time unit (> 0).

    Returns
    -------
    float
        ``c_a²``, dimensionless.

    Raises
    ------
    ValueError
        If ``rate`` is not a positive number, or ``workload`` is neither a Workload nor a
        Trace.
    """
    check_positive("rate", rate)
    if isinstance(workload, Trace):
        gaps = np.diff(workload.arrival)
        return float(gaps.var() / gaps.mean() ** 2)
    if not isinstance(workload, Workload):
        raise ValueError(f"workload={type(workload).__name__}: must be a qt.Workload or a "
                         "recorded qt.workload.Trace")
    arrivals = workload.arrivals
    if isinstance(arrivals, TimeVarying) or arrivals in ("poisson", "poisson-slot"):
        return 1.0
    if arrivals == "deterministic":
        return 0.0
    lam = np.array([c.rate for c in _classes(workload)], dtype=float)
    lam = lam * (rate / lam.sum())
    return float(np.sum(lam * (1 - lam * workload.slot)) / lam.sum())


def relaxation_time(workload, rate: float, capacity: float,
                    first_token: str = "prefill") -> float:
    """The time scale on which the backlog of a queue at ``rate`` forgets its start.

    Heavy-traffic approximation (Abate and Whitt, "Transient behavior of regulated Brownian
    motion", 1987): near ``ρ = rate/capacity = 1`` the work in the system is a reflected
    Brownian motion with drift ``μ = −(1 − ρ)`` and variance
    ``σ² = λ E[S]² (c_a² + c_s²)`` per unit time, ``S`` a request's service time at full
    capacity (its tokens of compute over the token rate ``capacity · E[work]``, so
    ``E[S] = 1/capacity``), ``c_s²`` its squared coefficient of variation and ``c_a²`` the
    arrivals' variability (:func:`arrival_variability`): the two terms of Kingman's formula.
    Its mean approaches steady state on the scale ``σ²/μ²``: what this returns, in the time
    unit of ``capacity``. With Poisson arrivals (``c_a² = 1``) it is
    ``λ E[S²] / (1 − ρ)²``; bursty arrivals lengthen it, clock-like ones shorten it (to 0
    for fixed lengths arriving like a clock, which never fluctuate). The stationary
    backlog, and the excursions that batch means must average over, live on the same
    scale, so a run of a few relaxation times is still filling up and reads as growth.
    Infinite at ``ρ ≥ 1``. ``workload``: a Workload, or a recorded Trace (its lengths and
    its gaps).

    Parameters
    ----------
    workload : Workload or Trace
        A :class:`~queuetheory.Workload`, or a recorded
        :class:`~queuetheory.workload.Trace` (its lengths and its gaps).
    rate : float
        The arrival rate ``λ``, in requests per time unit (> 0).
    capacity : float
        The capacity the load ``ρ = rate/capacity`` is taken against, in the same unit
        (> 0).
    first_token : {"prefill", "decode"}, default "prefill"
        Whether the prefill iteration emits the first output token; fixes the decode
        iterations of a request's work.

    Returns
    -------
    float
        ``σ²/μ²``, in the time unit of ``capacity``; ``inf`` at ``ρ ≥ 1``.

    Raises
    ------
    ValueError
        If ``rate`` or ``capacity`` is not a positive number, ``first_token`` is neither
        value, or ``workload`` is neither a Workload nor a Trace.
    """
    check_positive("rate", rate)
    check_positive("capacity", capacity)
    rho = rate / capacity
    if rho >= 1:
        return math.inf
    st = request_stats(_length_law(workload), first_token)
    service_scv = st.work2 / st.work ** 2 - 1
    variability = arrival_variability(workload, rate) + service_scv
    return rate * variability / capacity ** 2 / (1 - rho) ** 2

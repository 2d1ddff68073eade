"""How long the backlog of a queue near capacity takes to forget its start."""

from __future__ import annotations

import math

from ..errors import check_positive
from .stats import request_stats


def relaxation_time(workload, rate: float, capacity: float,
                    first_token: str = "prefill") -> float:
    """The time scale on which the backlog of a queue at ``rate`` forgets its start.

    Heavy-traffic approximation (Abate and Whitt, "Transient behavior of regulated Brownian
    motion", 1987): near ``ρ = rate/capacity = 1`` the work in the system is a reflected
    Brownian motion with drift ``−(1 − ρ)`` and variance ``λ E[S²]`` per unit time, ``S`` a
    request's service time at full capacity (its tokens of compute over the token rate
    ``capacity · E[work]``). Its mean approaches steady state on the scale
    ``σ²/μ² = λ E[S²] / (1 − ρ)²``: what this returns. The stationary backlog, and the
    excursions that batch means must average over, live on the same scale, so a run of a
    few relaxation times is still filling up and reads as growth. Infinite at ``ρ ≥ 1``.
    """
    check_positive("rate", rate)
    check_positive("capacity", capacity)
    rho = rate / capacity
    if rho >= 1:
        return math.inf
    st = request_stats(workload, first_token)
    mean_square = st.work2 / (st.work ** 2 * capacity ** 2)
    return rate * mean_square / (1 - rho) ** 2

"""The arrivals a fleet sees in a capacity search (:func:`fleet_trace`); the fleet itself is
:func:`queuetheory.networks.simulate_fleet`."""

from __future__ import annotations

import dataclasses

import numpy as np

from ..workload import Trace

__all__ = ["fleet_trace"]


def fleet_trace(workload, rate: float, horizon: float, seed: int) -> Trace:
    """The arrivals a fleet sees up to ``horizon``: ``workload`` drawn at the total
    ``rate`` (a :class:`~queuetheory.Workload`), or a recorded trace replayed at that mean
    rate with its burstiness kept (:func:`~queuetheory.capacity.replay`, started at a
    seeded random offset into the trace so that seeds are distinct replications).

    Parameters
    ----------
    workload : Workload or Trace
        A :class:`~queuetheory.Workload`, or a recorded
        :class:`~queuetheory.workload.Trace`.
    rate : float
        The fleet's total arrival rate, in requests per time unit (> 0).
    horizon : float
        Where the arrivals end, in the time unit (> 0).
    seed : int
        The seed of the draw, or of the replay's offset.

    Returns
    -------
    Trace
        The arrivals up to ``horizon``.

    Raises
    ------
    ValueError
        If ``rate`` or ``horizon`` is not a positive number, ``workload`` is a Workload
        whose total rate is 0, or the replay would hold more than ``MAX_REQUESTS``
        requests.
    """
    from .rescale import at_rate, replay

    if isinstance(workload, Trace):
        n = len(workload)
        shift = int(np.random.default_rng(seed).integers(n))
        t = workload.arrival - workload.arrival[0]
        period = float(t[-1]) + float(t[-1]) / max(n - 1, 1)
        arrival = np.r_[t[shift:], t[:shift] + period] - t[shift]
        rolled = dataclasses.replace(workload.take(np.r_[shift:n, 0:shift]), arrival=arrival)
        return replay(rolled, rate, horizon)
    return at_rate(workload, rate).sample(horizon=horizon, seed=seed)

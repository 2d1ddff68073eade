"""Tiny instances of the hindsight program solved by dynamic programming over rounds,
independently of the programs (:mod:`queuetheory.bounds.hindsight`)."""

from __future__ import annotations

import time
from functools import cache
from itertools import combinations

import numpy as np

from ...rounds import takes_first_token
from .model import HindsightResult, _inputs


@takes_first_token
def hindsight_brute_force(arrival, prompt, output, memory, *, first_token="prefill",
                          max_requests: int = 7) -> HindsightResult:
    """Exact optimum by dynamic programming over rounds, for tiny instances only.

    State: the round (while arrivals are pending), the waiting requests and the age of each
    running one. Each round any subset of the arrived waiting requests may start, provided
    memory holds in that round; every round costs the number of arrived unfinished
    requests. Idling with nothing running after the last arrival is never optimal (shifting
    the rest of the schedule earlier is feasible and cheaper), which keeps the state space
    finite.

    Parameters
    ----------
    arrival : array_like of int
        ``a_i``: each request's arrival round, ``>= 0``.
    prompt : array_like of int
        ``s_i``: each request's prompt length, in tokens, ``>= 0``.
    output : array_like of int
        ``o_i``: each request's output length, in tokens, ``>= 1``.
    memory : int
        The KV capacity ``M``, in tokens.
    first_token : {"prefill", "decode"}, default "prefill"
        As in :func:`hindsight_optimum`.
    max_requests : int, default 7
        The most requests accepted.

    Returns
    -------
    HindsightResult
        The optimal TEL (in rounds) and start rounds, ``solver="dynamic-program"``.

    Raises
    ------
    ValueError
        If the instance is malformed (as in :func:`hindsight_optimum`) or has more than
        ``max_requests`` requests.
    RuntimeError
        If no feasible schedule is found (a bug: every valid instance has one).
    """
    a, s, o, d, memory = _inputs(arrival, prompt, output, memory, first_token)
    n = a.size
    if n > max_requests:
        raise ValueError(f"arrival: {n} requests; the brute force takes at most "
                         f"max_requests={max_requests}")
    t0 = time.perf_counter()
    last_arrival = int(a.max()) if n else 0
    inf = float("inf")

    @cache
    def best(t, waiting, running):
        # waiting: frozenset of ids; running: tuple of (id, age) sorted; returns (cost, plan)
        if not waiting and not running:
            return 0.0, ()
        arrived = [i for i in waiting if a[i] <= t]
        base = sum(s[i] + age for i, age in running)
        present = len(running) + len(arrived)
        options = []
        for k in range(len(arrived) + 1):
            for group in combinations(sorted(arrived), k):
                if base + sum(int(s[i]) for i in group) > memory:
                    continue
                if not group and not running and t >= last_arrival:
                    continue
                nxt = tuple(sorted([(i, age + 1) for i, age in running if age + 1 < d[i]]
                                   + [(i, 1) for i in group if d[i] > 1]))
                cost, plan = best(min(t + 1, last_arrival), waiting - frozenset(group), nxt)
                options.append((cost, group, plan))
        if not options:
            return inf, ()
        cost, group, plan = min(options, key=lambda c: c[0])
        return present + cost, ((group,) + plan)

    cost, plan = best(int(a.min()) if n else 0, frozenset(range(n)), ())
    if cost == inf:
        raise RuntimeError("hindsight_brute_force: no feasible schedule (should not happen)")
    starts = _replay(plan, a, int(a.min()) if n else 0)
    return HindsightResult(float(cost), starts, "optimal", time.perf_counter() - t0,
                           starts + d, int((starts + d).max()) if n else 0, float("nan"),
                           "dynamic-program")


def _replay(plan, a, t0):
    """Start rounds from the DP's per-round start groups."""
    starts = np.full(a.size, -1, dtype=np.int64)
    for t, group in enumerate(plan, start=t0):
        for i in group:
            starts[i] = t
    return starts

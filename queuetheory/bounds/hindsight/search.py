"""Good feasible schedules for the hindsight problem of Jaillet et al. (App. B.1) by local search
over start orders.

A start order is turned into a schedule by serial schedule generation: the requests are placed
one after another in the order, each at the earliest round ``k ≥ a_i`` where its growing
profile ``s_i, s_i + 1, …, s_i + d_i − 1`` (rounds ``k … k + d_i − 1``) fits under the
capacity ``M`` beside the requests placed before it. Every decoded schedule is feasible (a
request placed after everything else always fits, as ``s_i + d_i − 1 ≤ M``), and no request
can start earlier without moving another: later placements only add memory, so a round that
was too full for a request when it was placed stays too full.

:func:`order_search` improves an order by first-improvement local search (swap two requests
or move one elsewhere; equal TEL is accepted, to cross plateaus) from the order of a given
schedule. It is the upper bound and the solvers' starting point in
:func:`queuetheory.bounds.hindsight_optimum`; on its own it proves nothing.
"""

from __future__ import annotations

import time

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

__all__ = ["place_in_order", "order_search"]


def place_in_order(order, arrival, prompt, d, memory) -> np.ndarray:
    """Start rounds of the serial schedule generation over ``order`` (see the module)."""
    a, s, d = (np.asarray(v, dtype=np.int64) for v in (arrival, prompt, d))
    used = np.zeros(int(a.max(initial=0) + d.sum() + 1), dtype=np.int64)
    starts = np.empty(a.size, dtype=np.int64)
    for j in np.asarray(order, dtype=np.int64):
        profile = s[j] + np.arange(d[j])
        fits = np.all(sliding_window_view(used[a[j]:], d[j]) + profile <= memory, axis=1)
        k = int(a[j] + np.argmax(fits))
        starts[j] = k
        used[k:k + d[j]] += profile
    return starts


def order_search(arrival, prompt, d, memory, schedule, *, patience=None, max_moves=None,
                 deadline=None, seed=0) -> np.ndarray:
    """Start rounds of the best schedule found from ``schedule``'s start order.

    Stops after ``patience`` moves without improvement (default ``20 n``), ``max_moves``
    moves in all (default ``100 n``) or at ``deadline`` (a ``time.perf_counter`` value);
    deterministic for a given ``seed`` unless the deadline stops it. Never worse than
    ``schedule`` itself, which is returned when no decoded order beats it.
    """
    a, s, d = (np.asarray(v, dtype=np.int64) for v in (arrival, prompt, d))
    schedule = np.asarray(schedule, dtype=np.int64)
    n = a.size
    if n < 2:
        return schedule
    patience = 20 * n if patience is None else patience
    max_moves = 100 * n if max_moves is None else max_moves
    rng = np.random.default_rng(seed)
    order = np.lexsort((np.arange(n), d, schedule))
    starts = place_in_order(order, a, s, d, memory)
    cost = int(starts.sum())
    since = 0
    for _ in range(max_moves):
        if since >= patience or (deadline is not None and time.perf_counter() > deadline):
            break
        i, j = rng.choice(n, 2, replace=False)
        trial = order.copy()
        if rng.random() < 0.5:
            trial[i], trial[j] = trial[j], trial[i]
        else:
            trial = np.insert(np.delete(trial, i), j, order[i])
        k = place_in_order(trial, a, s, d, memory)
        since = 0 if k.sum() < cost else since + 1
        if k.sum() <= cost:
            order, starts, cost = trial, k, int(k.sum())
    return starts if cost < schedule.sum() else schedule

"""Output tokens recorded per cohort instead of per token, for the rules whose requests in
decode are served in groups (``slo_slack``, ``cohorts``).

A group keeps the iterations it was served in (its *history*); a request keeps its
*memberships* ``(request, group, first, last, silent)``, one column of numbers each (a rule
may keep more columns of its own after them): it emitted a token at every entry of
its group's history from ``first`` to ``last`` (history indices), but at ``first`` when
``silent`` (it joined there by a prefill that emits nothing, ``first_token="decode"``). At the
end the memberships become the engine's records: first and last token times, the largest gap
(within a membership, between consecutive history entries; between two memberships of a
request, the stall) and the TBT histogram, in a few numpy operations.
"""

from __future__ import annotations

import numpy as np

from .common import add_inner_gaps, stamp_runs, write_log

__all__ = ["write_back"]


def write_back(engine, admitted, cols, hists, memberships, decoded, prefill_end, finish):
    """Write the batch log ``cols`` (:func:`~.common.write_log`), every admitted request's stamps
    and output counts (``decoded``, closed memberships), prefills (``prefill_end``: the
    iteration that finished each prompt, or −1) and completions (``finish``: iteration or −1)
    into the engine. ``memberships``: their columns, ``(request, group, first, last,
    silent)`` first (an array of five rows or more). Returns ``(ends, at, hist, rid, lo,
    hi)``: iteration end times, the end time and local iteration of every history entry
    (``hists`` laid end to end), and per membership its request and the first and last
    entries where it emitted (``lo > hi``: none)."""
    s0 = write_log(engine, admitted, cols)
    start, dur = cols[:2]
    tab = engine.table
    ends = start + dur                                   # t + τ, as the engine adds them
    ids = np.arange(admitted)
    pend = np.array(prefill_end[:admitted], dtype=np.int64) - s0
    has = pend >= 0
    tab.prefilled[ids[has]] = tab.prompt[ids[has]]
    tab.in_decode[ids[has]] = True
    tab.prefill_done[ids[has]] = ends[pend[has]]
    fin = np.array(finish[:admitted], dtype=np.int64) - s0
    over = fin >= 0
    tab.finish[ids[over]] = ends[fin[over]]
    tab.decoded[:admitted] = decoded[:admitted]
    engine.live = ids[~over]
    sizes = np.array([len(h) for h in hists], dtype=np.int64)
    off = np.concatenate([[0], sizes.cumsum()])
    hist = np.concatenate([np.zeros(0, np.int64)]
                          + [np.asarray(h, dtype=np.int64) for h in hists]) - s0
    at = ends[hist]                                      # the end of each history entry
    rid, gid, a, last, silent = memberships[:5]
    lo, hi = off[gid] + a + silent, off[gid] + last
    out = ends, at, hist, rid, lo, hi
    talked = hi >= lo
    rid, lo, hi = rid[talked], lo[talked], hi[talked]
    if not rid.size:
        return out
    gaps = np.zeros(at.size)                             # between consecutive entries
    gaps[1:] = at[1:] - at[:-1]
    gaps[off[:-1][sizes > 0]] = 0.0                      # (a group's first entry: none)
    timed = np.flatnonzero(hi > lo)   # within memberships (in the order given: the rules
    timed = timed[np.argsort(lo[timed], kind="stable")]   # list them by first entry)
    add_inner_gaps(engine, gaps, lo[timed] + 1, hi[timed] + 1, rid[timed])
    by_rid = np.argsort(rid, kind="stable")              # each request's in time order
    rid, lo, hi = rid[by_rid], lo[by_rid], hi[by_rid]
    stamp_runs(engine, rid, at[lo], at[hi])   # and from one membership's last token to the next
    return out

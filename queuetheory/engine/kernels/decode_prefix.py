"""What the rules ``prefill_first_fill`` (Orca), ``decode_priority`` (FasterTransformer) and
``prefill_batches`` (vanilla vLLM) share: under FCFS the requests that decode in an iteration
are the oldest requests in decode.

Prompts are prefilled in arrival order (the youngest resident alone may be part-way through
its prompt), so the requests in decode, taken in arrival order, form a list that grows at its
end; an iteration decodes its first ``m`` members. The loop keeps, for the members in that
order, numpy rows of each one's last token time, the tokens it has left and its largest
time between tokens, and stamps the prefix ``[:m]`` of an iteration in a few array
operations, as the step-by-step engine stamps a batch
(:meth:`~queuetheory.engine.core.Engine._stamp_tokens`): the members that also emitted in
the iteration before share its gap, only counted (and binned at the end from the batch
log); any other gap (a member that skipped iterations, or a preemption's stall) is held and
binned in bulk. A prefix that all emitted in the iteration before forms no gap per member,
and completions are read from the tokens left. Nothing is done in Python per request and
iteration, nor per run of consecutive iterations a request decodes in.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections import deque
from itertools import accumulate, islice, repeat
from math import frexp, ulp
from operator import sub

import numpy as np

from .common import RepeatedBatches, durations, log_columns, write_runs, write_states

__all__ = ["ORCA", "FT_ITERATION", "VLLM", "decode_priority", "largest_gap",
           "one_gap", "prefill_first_fill", "run_decode_prefix", "write_back"]

#: the decisions: Orca's prefill-first mixed batch; FasterTransformer's decode-only batch
#: whenever a request decodes, else a prefill-only batch; vanilla vLLM's prefill-only batch
#: whenever a prompt can start (its whole prefill fits in the memory neither held nor
#: promised), else a decode-only batch
ORCA, FT_ITERATION, VLLM = 0, 1, 2
#: how many arrays of gaps are held before they go to the TBT histogram
_HOLD = 1024
#: held gaps from this many on are counted by runs of equal values
_RUNS_FROM = 16


def one_gap(first, last, tau):
    """Whether the sums ``first + tau + tau + …`` up to ``last``, added one by one in floating
    point, all add the same gap. Within one binade ``[2^e, 2^(e+1))`` the numbers are the
    multiples of one spacing ``u``, so every sum rounds ``tau`` to the same multiple of
    ``u`` — unless ``tau/u`` is a half-integer (a tie, rounded to even: the gaps
    alternate)."""
    return first > 0 and frexp(first)[1] == frexp(last)[1] and (tau / ulp(first)) % 1 != 0.5


def largest_gap(times, k, tau):
    """``max(times[j + 1] − times[j] for j < k)`` for ``times[j + 1] = times[j] + tau`` in
    floating point: one gap stands for all where :func:`one_gap` says so; otherwise (across
    binades, or at a tie) the gaps are taken one by one."""
    if one_gap(times[0], times[k], tau):
        return times[1] - times[0]
    return max(map(sub, islice(times, 1, k + 1), times))


def prefill_first_fill(engine, t, stop, limit, *, chunk=True, max_reqs=None):
    """Orca under FCFS (Li, Dai, Peng §3): prompt tokens first, in arrival order up to the
    token budget ``b`` (the last one chunked; with ``chunk=False`` only whole prompts, a first
    one longer than the budget chunked alone), then one decode token for each of the oldest
    requests in decode that the rest of the budget and ``max_reqs`` allow. A decoder skips
    an iteration only when the prompts leave fewer tokens than there are decoders, and the
    decoders that decode are the oldest (the module docstring). With a KV-memory limit, new
    prompts start only while their whole prefills fit beside one token for every decoder,
    and the youngest residents are preempted (recompute) when the decodes do not fit
    (:func:`~queuetheory.policies.base.admissible`, :func:`~queuetheory.policies.base.
    fit_memory`)."""
    return run_decode_prefix(engine, t, stop, limit, ORCA, chunk=chunk, max_reqs=max_reqs)


def decode_priority(engine, t, stop, limit, *, max_reqs=None):
    """Iteration-level FasterTransformer under FCFS (Li, Dai, Peng §3): a decode-only batch
    of the oldest requests in decode (up to the budget and ``max_reqs``) whenever one
    decodes, else a prefill-only batch of prompts in arrival order up to the budget, the last
    one chunked (with a KV-memory limit: new prompts while their whole prefills fit, and the
    youngest residents preempted, recompute, when the decodes do not)."""
    return run_decode_prefix(engine, t, stop, limit, FT_ITERATION, max_reqs=max_reqs)


# long: bulk kernel, one pass per iteration in plain ints: helper calls per iteration cost its speed
def run_decode_prefix(engine, t, stop, limit, kind, *, chunk=True, max_reqs=None):  # noqa: C901
    """Run the decision ``kind`` from a fresh engine at ``t`` up to the horizon ``stop`` or
    ``limit`` iterations; return the time reached. ``chunk=False``: only whole prompts enter
    a batch, except a first one longer than the room left (Orca without chunking);
    ``max_reqs``: the policy's batch-size limit (``None``: none)."""
    tab = engine.table
    n = tab.n
    arrival = tab.column("arrival").tolist()
    prompt = tab.column("prompt").tolist()
    output = tab.column("output").tolist()
    cls_of = tab.column("cls").tolist()
    taus, new_tau = durations(engine.time_model)
    b, e = engine.token_budget, tab.emit_first
    inf, nan = float("inf"), float("nan")
    M = engine.memory if engine.memory is not None else inf
    R = n + 1 if max_reqs is None else max_reqs
    tbt = engine.tbt
    single = tbt.single
    length = prompt[:]             # current prefill: prompt plus recomputed output
    filled = [0] * n               # prefilled tokens of the current prefill
    recomputed = [0] * n
    restarts = [0] * n
    decoded = [0] * n              # output tokens emitted (of members: when they leave)
    prefill_end = [-1] * n
    finish = [-1] * n
    first_time = [nan] * n         # each request's first token, last token, largest gap:
    last_time = [nan] * n          # for the members of dec kept in ``rows_of`` below,
    worst = [nan] * n              # written here when they leave it
    # the members of dec, in its order: last token time (NaN: none yet), tokens left,
    # largest time between tokens (NaN: none yet), class
    rows_of = np.full((4, n + 1), nan)
    LAST, LEFT, WORST, CLS = rows_of
    fresh = 0                      # members of dec without a token yet (first_token decode)
    due = inf                      # no member emits its last token before this iteration
    other_gaps: list = []          # gaps held for the histogram, and their classes (one
    other_cls: list = []           # class: how many requests had each)
    n_classes = tbt.counts.shape[0]
    none = [0] * n_classes
    dec: list = []                 # requests in decode, in arrival order
    a = 0                          # dec[:a] emitted in the last iteration, at t
    p = -1                         # the resident part-way through its prefill
    waiting: deque = deque()       # requests without KV, in arrival order
    past = kind == FT_ITERATION    # runs go on past arrivals
    repeats = array("q")           # log rows that stand for k decode-only batches: (row, k)
    # per log row and class, the decoders that also emitted in the batch before: they
    # share its gap (its end less its start), binned at the end
    shared_col = array("q")
    times, counts = array("d"), array("q")   # the batch log (:func:`.common.log_columns`)
    admitted = 0
    work, used, peak = engine.work, engine.kv_total, engine.peak_memory
    s = engine.iteration

    def hold(gaps, classes):
        if single:         # decoders that emitted together stall alike: each run of equal
            if gaps.size < _RUNS_FROM:       # gaps is held once, with its count
                classes = np.ones(gaps.size, np.int64)
            else:
                first = np.flatnonzero(np.concatenate(([True], gaps[1:] != gaps[:-1])))
                gaps, classes = gaps[first], np.diff(np.append(first, gaps.size))
        other_gaps.append(gaps)
        other_cls.append(classes)
        if len(other_gaps) >= _HOLD:
            release()

    def complete(m, end, q):
        """The members of ``dec[:m]`` that emitted their last token in iteration ``q``
        (ending at ``end``) leave."""
        nonlocal a, used, due
        D = len(dec)
        gone = (LEFT[:m] == 0).nonzero()[0].tolist() if m > 1 else [0] if LEFT[0] == 0 else []
        for i in reversed(gone):
            v = dec.pop(i)
            finish[v] = q
            used -= prompt[v] + output[v] - e
            decoded[v] = output[v]
            last_time[v], worst[v] = end, float(WORST[i])
            if i < D - 1:
                rows_of[:, i:D - 1] = rows_of[:, i + 1:D]
            D -= 1
            a -= 1
        due = inf if not D else q + int(LEFT[0] if D == 1 else np.minimum.reduce(LEFT[:D]))

    def release():
        if other_gaps:
            gaps = np.concatenate(other_gaps)
            if single:
                tbt.add_counted(gaps, np.concatenate(other_cls))
            else:
                tbt.add(np.concatenate(other_cls).astype(np.int64), gaps)
            other_gaps.clear()
            other_cls.clear()

    while t < stop and s < limit:
        while admitted < n and arrival[admitted] <= t:
            work += prompt[admitted] + output[admitted]
            waiting.append(admitted)
            admitted += 1
        D = len(dec)
        live = D + (p >= 0) + len(waiting)
        if not live:
            if admitted == n:
                break
            t = arrival[admitted]
            continue
        promised = length[p] - filled[p] if p >= 0 else 0
        free = M - used - promised
        # the decision: prefill members (planned) and the number m of decodes
        plan = []
        chunk_sum = 0
        if kind == ORCA or (kind == FT_ITERATION and not D) or (
                kind == VLLM and (p >= 0 or (waiting and length[waiting[0]] <= free) or not D)):
            room, slots = b, R
            memory_left = free - D if kind != VLLM else free   # vLLM: no decode beside
            i = 0
            while room > 0 and slots > 0:
                if p >= 0 and not plan:
                    w = p
                elif i < len(waiting) and length[waiting[i]] <= memory_left:
                    w = waiting[i]
                    memory_left -= length[w]
                    i += 1
                else:
                    break
                left = length[w] - filled[w]
                if left <= room:
                    c = left
                elif chunk or not plan:
                    c = room
                else:
                    break
                plan.append((w, c))
                chunk_sum += c
                room -= c
                slots -= 1
            m = min(b - chunk_sum, D, R - len(plan)) if kind == ORCA else 0
        else:
            m = b if b < D else D
            if R < m:
                m = R
        if not m and not plan:     # an empty batch (not met while every request fits in M
            if admitted == n:      # alone): the engine waits for the next arrival
                break
            t = arrival[admitted]
            continue
        if m and not plan and a == m and m <= free:
            # a decode-only batch that repeats unchanged (no prompt can start before an
            # arrival: memory, which only shrinks, refuses the oldest waiting one) up to a
            # completion (its batch included), an arrival (FasterTransformer: none changes
            # its decision while a request decodes), the horizon, the cap or a preemption
            most = min(due - s + 1, limit - s,
                       (free - m) // m + 1 if free < inf else limit - s)
            if most > 1:
                bound = min(stop, arrival[admitted] if admitted < n and not past else inf)
                tau = taus.get((0, m)) or new_tau(0, m)
                if bound < inf:     # no more iterations than can start before it
                    most = min(most, int((bound - t) / tau) + 2)
                # the batches start at t, t + τ, … added one by one (t = t + τ); where
                # each sum adds the same gap (``one_gap``), a run all of whose batches
                # start before ``bound`` needs no list of its times
                gap = (t + tau) - t
                last = t + most * gap
                if last - gap < bound and one_gap(t, last, tau):
                    k, before = most, last - gap
                else:
                    starts = list(accumulate(repeat(tau, int(most)), initial=t))
                    k = bisect_left(starts, bound, 0, len(starts) - 1)
                    if k:
                        gap, last, before = largest_gap(starts, k, tau), starts[k], starts[k - 1]
                if k:         # one row of the log stands for the k batches
                    times.extend((t, tau))
                    counts.extend((0, 0, m, 0, used + m, live, work - m))
                    repeats.extend((len(times) // 2 - 1, k))
                    # every member of dec[:m] emitted in the batch before: each batch's
                    # gap is shared by all m
                    if single:
                        shared_col.append(m)
                    else:
                        shared_col.extend(np.bincount(CLS[:m].astype(np.int64),
                                                      minlength=n_classes).tolist())
                    if m == 1:               # one decoder: scalars cost less than slices
                        if not WORST[0] >= gap:          # NaN (no gap yet) or smaller
                            WORST[0] = gap
                        LAST[0] = last
                        LEFT[0] -= k
                    else:
                        np.fmax(WORST[:m], gap, out=WORST[:m])
                        LAST[:m] = last
                        LEFT[:m] -= k
                    t = last
                    used += m * k
                    work -= m * k
                    peak = used if used > peak else peak
                    s += k
                    while admitted < n and arrival[admitted] <= before:
                        work += prompt[admitted] + output[admitted]   # arrived during
                        waiting.append(admitted)                      # the run
                        admitted += 1
                    if s > due:                  # its last batch was the completion's
                        complete(m, t, s - 1)
                    continue
        members = done = 0
        out = []
        ended = []
        if m > free:
            # vLLM's preemption (fit_memory): the youngest residents go, the one part-way
            # through its prefill first, until the decodes fit; no prompt starts
            chunk_sum, need, saved = 0, m - free, 0
            while saved < need:
                if p >= 0:
                    v, p = p, -1
                    held, extra = filled[v], promised
                else:
                    v = dec.pop()
                    i = len(dec)
                    decoded[v] = output[v] - int(LEFT[i])
                    last_time[v], worst[v] = float(LAST[i]), float(WORST[i])
                    fresh -= last_time[v] != last_time[v]
                    tokens = decoded[v] - recomputed[v]
                    if i < a:
                        a = i
                    held = length[v] + (tokens - e if tokens > e else 0)
                    extra = 1 if i < m else 0
                    if i < m:
                        m = i
                work += filled[v] + decoded[v] - recomputed[v]
                saved += held + extra
                used -= held
                recomputed[v] = decoded[v]
                length[v] = prompt[v] + decoded[v]
                filled[v] = 0
                restarts[v] += 1
                out.append(v)
            waiting.extendleft(out)
            if not m:          # unreachable while every request fits in M alone
                raise RuntimeError("decode_prefix: a preemption emptied the batch")
        else:
            for w, c in plan:
                if w != p:
                    waiting.popleft()
                filled[w] += c
                members += 1
                if filled[w] == length[w]:       # the prefill ends in this iteration
                    prefill_end[w] = s
                    ended.append(w)
                    p = -1
                else:
                    p = w
            done = len(ended)
        tau = taus.get((chunk_sum, m)) or new_tau(chunk_sum, m)
        end = t + tau
        if not m:
            shared_col.extend(none)
        else:                                    # dec[:m] emit at ``end``
            shared = end - t                     # the gap of each that emitted at t
            if m <= a:                           # as each of them did
                np.fmax(WORST[:m], shared, out=WORST[:m])
                if single:
                    shared_col.append(m)
                else:
                    shared_col.extend(np.bincount(CLS[:m].astype(np.int64),
                                                  minlength=n_classes).tolist())
            else:
                gaps = end - LAST[:m]            # NaN for a first token
                np.fmax(WORST[:m], gaps, out=WORST[:m])
                other = gaps != shared           # skipped, stalled, or a first token
                odd = gaps[other]
                if single:
                    shared_col.append(m - odd.size)
                else:
                    shared_col.extend(np.bincount(CLS[:m][~other].astype(np.int64),
                                                  minlength=n_classes).tolist())
                if odd.size:
                    classes = None if single else CLS[:m][other]
                    if fresh:
                        first = (gaps != gaps).nonzero()[0].tolist()
                        for i in first:
                            first_time[dec[i]] = end
                        fresh -= len(first)
                        timed = odd == odd
                        odd = odd[timed]
                        classes = None if single else classes[timed]
                    hold(odd, classes)
            LAST[:m] = end
            LEFT[:m] -= 1
        a = m
        used += chunk_sum + m
        work -= chunk_sum + m + e * done
        times.extend((t, tau))
        counts.extend((members, chunk_sum, m, len(out), used, live, work))
        peak = used if used > peak else peak
        if m and s >= due:                       # members may emit their last token
            complete(m, end, s)
        for v in ended:                          # in arrival order, younger than dec
            before = last_time[v]
            if e:                                # the prefill iteration emits a token
                if before != before:
                    first_time[v] = end
                else:                            # after a preemption's stall
                    worst[v] = max(end - before, worst[v]) if worst[v] == worst[v] \
                        else end - before
                    hold(np.array([end - before]), None if single else np.array([cls_of[v]]))
                before = last_time[v] = end
                decoded[v] += 1
                if decoded[v] == output[v]:
                    finish[v] = s
                    used -= prompt[v] + output[v] - e
                    continue
                if a == len(dec):                # every other emitter of s is before it
                    a += 1
            D = len(dec)
            LAST[D], LEFT[D], WORST[D], CLS[D] = (before, output[v] - decoded[v], worst[v],
                                                  cls_of[v])
            fresh += before != before
            due = min(due, s + output[v] - decoded[v])
            dec.append(v)
        t = end
        s += 1
    D = len(dec)
    for v, left, last, gap in zip(dec, LEFT[:D].tolist(), LAST[:D].tolist(),
                                  WORST[:D].tolist(), strict=True):
        decoded[v] = output[v] - int(left)
        last_time[v], worst[v] = last, gap
    release()
    live_ids = dec + ([p] if p >= 0 else []) + list(waiting)
    runs = RepeatedBatches(log_columns(times, counts), repeats, arrivals=(
        tab.column("arrival")[:admitted], (tab.column("prompt") + tab.column("output"))[:admitted]
    ) if past else None)
    sharers = np.frombuffer(shared_col, np.int64).reshape(-1, n_classes)
    write_back(engine, admitted, runs, sharers, decoded, filled, recomputed, restarts,
               prefill_end, finish, first_time, last_time, worst, live_ids)
    engine.work, engine.kv_total, engine.peak_memory = work, used, peak
    if any(restarts):
        tab.recomputing = True
    return t


def write_back(engine, admitted, runs, sharers, decoded, filled, recomputed, restarts,
               prefill_end, finish, first_time, last_time, worst, live):
    """The engine's records and state after a bulk run, as if it had stepped. ``runs``: the
    batch log (:class:`~.common.RepeatedBatches`); ``sharers``: per log row (each of its
    batches) and class, the decoders that share the batch's gap (its end less its start,
    their last tokens at its start; the other gaps are in the histogram); ``decoded``:
    each request's output tokens emitted; ``prefill_end``, ``finish``: iterations (-1:
    none); ``first_time``, ``last_time``: token times, ``worst``: the largest time between
    tokens (NaN: none); ``live``: the requests left in the system."""
    s0 = write_runs(engine, admitted, runs)
    tab = engine.table
    gaps, rows, counts = runs.gaps()            # a row at a time: a run's gaps at once
    for c in range(sharers.shape[1]):
        engine.tbt.add_counted(gaps, sharers[rows, c] * counts, c)
    ids = np.arange(admitted)
    write_states(engine, admitted, s0, runs.ends_at, filled, recomputed, restarts, decoded,
                 prefill_end, finish)
    for column, times in ((tab.first_token, first_time), (tab.last_token, last_time)):
        times = np.array(times[:admitted])
        has = ~np.isnan(times)
        column[ids[has]] = times[has]
    tab.tbt_max[:admitted] = np.fmax(tab.tbt_max[:admitted], worst[:admitted])
    engine.live = np.sort(np.array(live, dtype=np.int64))

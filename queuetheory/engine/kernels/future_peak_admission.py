"""The rule ``future_peak_admission``: the paper schedulers that keep every running request
and admit waiting ones in a priority order while the future-peak check of Jaillet et al.
(eqs. (1)–(2), :class:`~queuetheory.policies.memory_check.FuturePeak`) holds, stopping at the
first that fails: MC-SF and its FCFS variant (Jaillet et al., Algorithm 2), and A_max,
A_min, H-SF and A_random (Chen, Ye, Zhou, Algorithms 1–4).

Every request prefills its whole prompt in its admission round ``p`` and then decodes one
token per round until it finishes in round ``T = p + o − e`` (``e = 1`` when the prefill
emits the first token), holding ``P + (τ − p)`` KV tokens after round ``τ``: its memory is
``base + τ`` with ``base = P − p`` fixed. The policy assumes it lasts until round
``L = p + ô − e`` (``ô``: the true length for MC-SF and H-SF, ``hi`` for A_max, the lower
bound ``lo`` for A_min). With ``G(τ) = Σ_{L_j ≥ τ} (base_j + τ)`` over the running
requests, a set ``A`` of candidates ending in round ``E`` fits in round ``s`` iff
``G(τ) + Σ_A (m_i − s + τ) ≤ M`` at every checkpoint ``τ ∈ {L_j} ∩ [s, E]`` and at ``E``
(between checkpoints the load only grows). The kernel keeps the running requests grouped
by ``L`` (a sorted list and their sums) and scans the checkpoints up to ``E`` only: the
candidates tried first are the shortest, so the scan is short.

Orders (the policies' own, ties as they break them): ``(o, id)`` for MC-SF, ``id`` for its
FCFS variant; ``(hi, σ, id)`` for A_max (``σ`` the uniform key each request draws when the
policy first sees it, in the policy's generator order), ``(σ, id)`` for its ``"random"``
order and A_random; ``(key, u, id)`` for A_min and H-SF, with ``u`` a fresh uniform for each
waiting request at every decision, drawn in id order. Those fresh draws matter only inside
the group of equal keys where admission stops part-way: if the whole group fits together,
all of it is admitted in any order; if its smallest prompt does not fit alone, none is
(the check is monotone in the set admitted). The kernel draws the block only there and
otherwise advances the PCG64 generator past it (``advance``: one 64-bit step per uniform),
so the generator ends in the policy's state.

The rule stops (and the engine steps on) where it would differ from these premises: a
running request outlives its assumed length (A_min with ``lo < o``: its estimate then
moves every round, and evictions may follow), or an empty system cannot admit its first
candidate (Chen et al.'s schedulers raise there).
"""

from __future__ import annotations

import heapq
from array import array
from bisect import bisect_left, insort

import numpy as np

from .common import durations
from .decode_first_fill import _write_back

__all__ = ["future_peak_admission_runner"]


def future_peak_admission_runner(engine, policy):
    """``run(engine, t, stop, limit)`` for the policy, or ``None`` outside the rule: an
    MC-SF whose admission goes on past a failure (``on_fail="skip"``), a scheduler of
    Chen et al. not listed above, a generator other than PCG64, lengths below one token."""
    from ...policies.kvcache import _FuturePeakPolicy
    from ...policies.robust import HSF, AMax, AMin, ARandom

    tab = engine.table
    if isinstance(policy, _FuturePeakPolicy):
        if policy.on_fail != "break":
            return None
        kind = "output" if policy._order == "output" else "arrival"
        est, cap = tab.column("output"), policy.max_starts
    elif type(policy) in (AMax, AMin, HSF, ARandom):
        if type(policy.rng.bit_generator) is not np.random.PCG64:
            return None
        cap = None
        if isinstance(policy, AMax):
            est, kind = tab.column("hi"), "hi_rank" if policy.order == "sorted" else "rank"
        elif isinstance(policy, ARandom):
            est, kind = tab.column("output"), "rank"
        else:
            est = tab.column("lo" if isinstance(policy, AMin) else "output")
            kind = "fresh"
        if tab.n and est.min() < 1:
            return None
    else:
        return None
    est = est.tolist()

    def run(engine, t, stop, limit):
        return _run(engine, policy, t, stop, limit, kind, est, cap)

    return run


def _run(engine, policy, t, stop, limit, kind, est, cap):
    tab = engine.table
    n = tab.n
    arrival = tab.column("arrival").tolist()
    prompt = tab.column("prompt").tolist()
    output = tab.column("output").tolist()
    taus, new_tau = durations(engine.time_model)
    e = tab.emit_first
    M = engine.memory
    rng = getattr(policy, "rng", None)
    prefill_end = [-1] * n
    leaving: dict = {}           # round -> requests that emit their last token in it
    ending: dict = {}            # assumed last round L -> [Σ base, count] of running requests
    checkpoints: list = []       # the keys of ``ending``, sorted
    B = C = 0                    # Σ base and count over every running request
    overdue = float("inf")       # first round in which a running request outlives L
    heap: list = []              # waiting requests by priority (unique keys) ...
    groups: dict = {}            # ... or, kind "fresh", key -> waiting ids (ascending),
    keys: list = []              # with a heap of the keys
    waiting = 0                  # requests seen and not admitted
    ranks: list = []             # kinds "rank", "hi_rank": σ per request id
    skip = 0                     # kind "fresh": uniforms owed to the generator
    rows = [array(code) for code in "ddqqqqqq"]
    start, dur, n_pre, chunks, decs, used_col, in_sys, work_col = rows
    admitted = seen = finished = running = 0
    work, kv, peak = engine.work, engine.kv_total, engine.peak_memory
    s = engine.iteration

    def fits(msum, k, last):
        """Do ``k`` candidates holding ``msum`` tokens now and ending in round ``last`` fit?"""
        thr = M - msum + k * s
        b, c = B, C + k
        for L in checkpoints:
            if L > last:
                break
            if b + c * L > thr:
                return False
            sb, cnt = ending[L]
            b -= sb
            c -= cnt
        return b + c * last <= thr

    while t < stop and s < limit:
        while admitted < n and arrival[admitted] <= t:
            work += prompt[admitted] + output[admitted]
            admitted += 1
        live = admitted - finished
        if not live:
            if admitted == n:
                break
            t = arrival[admitted]
            continue
        if s >= overdue:
            break
        # ---- the decision -------------------------------------------------------------
        saved = None
        if seen < admitted:                    # requests the policy sees for the first time
            if kind in ("rank", "hi_rank"):
                if not running:
                    saved = rng.bit_generator.state
                ranks.extend(rng.random(admitted - seen).tolist())
            waiting += admitted - seen
            for j in range(seen, admitted):
                if kind == "output":
                    heapq.heappush(heap, (output[j], j))
                elif kind == "arrival":
                    heapq.heappush(heap, (j,))
                elif kind == "hi_rank":
                    heapq.heappush(heap, (est[j], ranks[j], j))
                elif kind == "rank":
                    heapq.heappush(heap, (ranks[j], j))
                elif est[j] in groups:
                    groups[est[j]].append(j)
                else:
                    groups[est[j]] = [j]
                    heapq.heappush(keys, est[j])
        width = waiting                        # the uniforms A_min and H-SF draw now
        new = []
        if M is None:                          # MC-SF without a memory limit: admit all
            new = [item[-1] for item in heap]
            heap.clear()
        elif kind != "fresh":
            while heap and (cap is None or len(new) < cap):
                j = heap[0][-1]
                last = s + est[j] - e
                if not fits(prompt[j], 1, last):
                    break
                heapq.heappop(heap)
                new.append(j)
                _enter(ending, checkpoints, last, prompt[j] - s)
                B += prompt[j] - s
                C += 1
        else:
            block = None
            while keys:
                key = keys[0]
                g = groups[key]
                last = s + key - e
                if fits(sum(prompt[j] for j in g), len(g), last):
                    take = g                              # all of the group fits
                elif len(g) == 1 or not fits(min(prompt[j] for j in g), 1, last):
                    break                                 # none of it does
                else:                                     # the tie-break decides
                    if block is None:
                        rng.bit_generator.advance(skip)
                        skip = 0
                        block = rng.random(width)
                        order = sorted([*new, *(j for grp in groups.values() for j in grp)])
                    u = [block[bisect_left(order, j)] for j in g]
                    take = []
                    for _, j in sorted(zip(u, g, strict=True)):
                        if not fits(prompt[j], 1, last):
                            break
                        take.append(j)
                        _enter(ending, checkpoints, last, prompt[j] - s)
                        B += prompt[j] - s
                        C += 1
                    new.extend(take)
                    rest = set(take)
                    groups[key] = [j for j in g if j not in rest]
                    break
                for j in take:
                    _enter(ending, checkpoints, last, prompt[j] - s)
                    B += prompt[j] - s
                    C += 1
                new.extend(take)
                heapq.heappop(keys)
                del groups[key]
            if block is None and (new or running):
                skip += width
        if not new and not running:
            if saved is not None:              # hand the decision back untouched
                rng.bit_generator.state = saved
                del ranks[seen:]
            break
        seen = admitted
        waiting -= len(new)
        # ---- the iteration --------------------------------------------------------------
        chunk_sum = 0
        for j in new:
            chunk_sum += prompt[j]
            prefill_end[j] = s
            end = s + output[j] - e
            if end in leaving:
                leaving[end].append(j)
            else:
                leaving[end] = [j]
            if M is not None and end > s + est[j] - e and s + est[j] - e + 1 < overdue:
                overdue = s + est[j] - e + 1
        tau = taus.get((chunk_sum, running)) or new_tau(chunk_sum, running)
        used = kv + chunk_sum + running
        if M is not None and used > M:
            raise RuntimeError(f"future_peak_admission: memory {used} over M = {M} "
                               "(the check should have kept it within)")
        work -= chunk_sum + running + e * len(new)
        start.append(t)
        dur.append(tau)
        n_pre.append(len(new))
        chunks.append(chunk_sum)
        decs.append(running)
        used_col.append(used)
        in_sys.append(live)
        work_col.append(work)
        peak = used if used > peak else peak
        running += len(new)
        freed = 0
        for j in leaving.pop(s, ()):
            freed += prompt[j] + output[j] - e
            running -= 1
            finished += 1
            if M is not None:
                p = prefill_end[j]
                B -= prompt[j] - p
                C -= 1
                _leave(ending, checkpoints, p + est[j] - e, prompt[j] - p)
        kv = used - freed
        t = t + tau
        s += 1
    _write_back(engine, np.array(prefill_end[:admitted], dtype=np.int64), admitted, admitted,
                0, rows)
    engine.work, engine.kv_total, engine.peak_memory = work, kv, peak
    _hand_back(policy, kind, tab, seen, ranks, skip)
    return t


def _enter(ending, checkpoints, last, base):
    """A request that will be assumed to run until round ``last`` joins the profile."""
    slot = ending.get(last)
    if slot is None:
        ending[last] = [base, 1]
        insort(checkpoints, last)
    else:
        slot[0] += base
        slot[1] += 1


def _leave(ending, checkpoints, last, base):
    slot = ending[last]
    slot[0] -= base
    slot[1] -= 1
    if not slot[1]:
        del ending[last]
        del checkpoints[bisect_left(checkpoints, last)]


def _hand_back(policy, kind, tab, seen, ranks, skip):
    """The policy's own state as if it had made every decision of the run."""
    from ...policies.robust import AMin

    if kind in ("rank", "hi_rank"):
        policy._rank = np.array(ranks, dtype=float)
        policy._ranked = len(ranks)
    elif kind == "fresh":
        policy.rng.bit_generator.advance(skip)
        if isinstance(policy, AMin) and seen:     # õ = lo for every request seen
            policy._lb = tab.lo[:seen].copy()

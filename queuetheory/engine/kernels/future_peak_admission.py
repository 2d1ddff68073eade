"""The rule ``future_peak_admission``: the paper schedulers that keep every running request
and admit waiting ones in a priority order while the future-peak check of Jaillet et al.
(eqs. (1)–(2), :class:`~queuetheory.rounds.FuturePeak`) holds, stopping at the
first that fails: MC-SF and its FCFS variant (Jaillet et al., Algorithm 2), and A_max,
A_min, H-SF and A_random (Chen, Ye, Zhou, Algorithms 1–4), A_min with its evictions.

Every request prefills its whole prompt in its admission round ``p`` and then decodes one
token per round until it finishes in round ``T = p + o − e`` (``e = 1`` when the prefill
emits the first token), holding ``P + (τ − p)`` KV tokens after round ``τ``: its memory is
``base + τ`` with ``base = P − p`` fixed. The policy assumes it lasts until round
``L = p + ô − e`` (``ô``: the true length for MC-SF and H-SF, ``hi`` for A_max, the running
lower bound ``õ`` for A_min); a request still running after ``L`` (A_min only) is assumed
to end in the current round (Chen et al.'s ``max(õ, a + 1)``). With
``G(τ) = Σ_{L_j ≥ τ} (base_j + τ)`` over the running requests, a set ``A`` of candidates
ending in round ``E`` fits in round ``s`` iff ``G(τ) + Σ_A (m_i − s + τ) ≤ M`` at every
checkpoint ``τ ∈ {L_j} ∩ [s, E]`` and at ``E`` (between checkpoints the load only grows).
:class:`_Profile` keeps the running requests grouped by ``L`` and scans the checkpoints up
to ``E`` only: the candidates tried first are the shortest, so the scan is short.

Orders (the policies' own, ties as they break them): ``(o, id)`` for MC-SF, ``id`` for its
FCFS variant; ``(hi, σ, id)`` for A_max (``σ`` the uniform key each request draws when the
policy first sees it, in the policy's generator order), ``(σ, id)`` for its ``"random"``
order and A_random; ``(key, u, id)`` for A_min and H-SF, with ``u`` a fresh uniform for each
waiting request at every decision, drawn in id order. Those fresh draws matter only inside
the group of equal keys where admission stops part-way: if the whole group fits together,
all of it is admitted in any order; if its smallest prompt does not fit alone, none is
(the check is monotone in the set admitted). The kernel draws the block only there and
otherwise advances the PCG64 generator past it (``advance``: one 64-bit step per uniform),
so the generator ends in the policy's state. A_min's evictions (when next round's memory
would exceed ``M``) draw their uniforms as the policy does; an evicted request restarts
(the papers' preemption) with ``õ`` raised to the tokens it had generated.

The records are written back per residency (admission to completion, eviction or the end
of the run). The rule hands the run back to the engine, untouched, at a decision where an
empty system cannot admit its first candidate (Chen et al.'s schedulers raise there).
"""

from __future__ import annotations

import heapq
from array import array
from bisect import bisect_left, insort
from typing import NamedTuple

import numpy as np

from .common import add_inner_gaps, durations, log_columns, stamp_runs, tail_of, write_log

__all__ = ["future_peak_admission", "Books"]

_SHIFT = 6                       # ids per block of the waiting counts: 64 (8 words)
_BYTES = np.uint64(0x0101010101010101)   # a word's bytes, each 0 or 1, summed in its top one
_JUMP = 1 << 14                  # from this many uniforms on, jump to the few needed
_MUL = 0x2360ED051FC65DA44385DF649FCCF645     # numpy's PCG64: its LCG multiplier
_M64 = (1 << 64) - 1


class Books(NamedTuple):
    """What the policy would know after making every decision of the run itself: the
    requests it has seen, their estimates (A_min's ``õ``, raised at evictions), the uniform
    key ``σ`` of each (kinds ``"rank"``, ``"hi_rank"``) and the uniforms owed to its
    generator (kind ``"fresh"``: ``advance`` it by ``skip``)."""

    seen: int
    est: list
    ranks: list
    skip: int


def future_peak_admission(engine, t, stop, limit, *, kind, est, cap=None, evicts=None,
                          rng=None):
    """Run the rule from a fresh engine at ``t`` up to the horizon ``stop``, the iteration
    cap ``limit`` or a decision it does not cover; return the time reached and the policy's
    :class:`Books`.

    Parameters
    ----------
    engine : Engine
        A fresh engine with a KV-memory limit and the papers' restart preemption.
    t, stop, limit : float, float, float
        Start time, horizon and iteration cap.
    kind : {"output", "arrival", "rank", "hi_rank", "fresh"}
        The admission order (see the module docstring): shortest true output first
        (MC-SF), arrival (its FCFS variant), a uniform key per request (A_random, A_max's
        ``"random"`` order), ``(hi, σ)`` (A_max) or ``(est, fresh uniform)`` (A_min, H-SF).
    est : sequence of int
        Per request, the length the policy assumes (``o``, ``hi`` or ``lo``), at least 1.
    cap : int, optional
        At most this many admissions per round (MC-SF's ``max_starts``).
    evicts : tuple of (bool, int), optional
        A_min's evictions: whether the key is dynamic, and the ``+1`` of
        ``bound="generated+1"``; ``None``: the policy never evicts.
    rng : numpy.random.Generator, optional
        The policy's PCG64 generator (kinds ``"rank"``, ``"hi_rank"``, ``"fresh"``).
    """
    return _run(engine, rng, t, stop, limit, kind, list(est), cap, evicts)


class _Profile:
    """The running requests' memory from the current round on: those assumed to end in
    round ``L`` grouped (``ending[L] = [Σ base, count]``, ``checkpoints`` the sorted keys),
    totals ``B``, ``C`` over them, and ``OB``, ``OC`` over the overdue ones (past ``L``,
    assumed to end now)."""

    def __init__(self, memory):
        self.M = memory
        self.ending: dict = {}
        self.checkpoints: list = []
        self.B = self.C = self.OB = self.OC = 0

    def fits(self, msum, k, last, s):
        """Do ``k`` candidates holding ``msum`` tokens now and ending in round ``last`` fit?"""
        thr = self.M - msum + k * s
        b, c = self.B, self.C + k
        if self.OC and b + self.OB + (c + self.OC) * s > thr:
            return False
        ending = self.ending
        for L in self.checkpoints:
            if L > last:
                break
            if b + c * L > thr:
                return False
            sb, cnt = ending[L]
            b -= sb
            c -= cnt
        return b + c * last <= thr

    def enter(self, last, base):
        slot = self.ending.get(last)
        if slot is None:
            self.ending[last] = [base, 1]
            insort(self.checkpoints, last)
        else:
            slot[0] += base
            slot[1] += 1
        self.B += base
        self.C += 1

    def leave(self, last, base, s):
        """A request assumed to end in ``last`` leaves in round ``s``."""
        if last < s:
            self.OB -= base
            self.OC -= 1
            return
        slot = self.ending[last]
        slot[0] -= base
        slot[1] -= 1
        if not slot[1]:
            del self.ending[last]
            del self.checkpoints[bisect_left(self.checkpoints, last)]
        self.B -= base
        self.C -= 1

    def age(self, s):
        """Requests assumed to have ended before round ``s`` become overdue."""
        checkpoints = self.checkpoints
        while checkpoints and checkpoints[0] < s:
            sb, cnt = self.ending.pop(checkpoints.pop(0))
            self.B -= sb
            self.C -= cnt
            self.OB += sb
            self.OC += cnt

    def need(self, s):
        """Memory of every running request after round ``s``."""
        return self.B + self.OB + (self.C + self.OC) * s


# long: bulk kernel, one pass per iteration in plain ints: helper calls per iteration cost its speed
def _run(engine, rng, t, stop, limit, kind, est, cap, evicts):  # noqa: C901
    tab = engine.table
    n = tab.n
    arrival = tab.column("arrival").tolist()
    prompt = tab.column("prompt").tolist()
    output = tab.column("output").tolist()
    taus, new_tau = durations(engine.time_model)
    e = tab.emit_first
    M = engine.memory
    profile = _Profile(M)
    fits = profile.fits
    began = [-1] * n             # admission round of each running request's residency
    leaving: dict = {}           # round -> (request, admission round) ending in it
    residencies = array("q")     # (request, admission round, tokens, how it ended)
    running_ids: set = set()     # kept for A_min's evictions
    heap: list = []              # waiting requests by priority (unique keys) ...
    groups: dict = {}            # ... or, kind "fresh", key -> [ids (ascending), Σ P, min P],
    keys: list = []              # with a heap of the keys
    flags = bytearray(((n >> _SHIFT) + 1) << _SHIFT)   # kind "fresh": 1 for a waiting
    per_block = array("q", bytes(8 * ((n >> _SHIFT) + 1)))   # request; count per block
    jumps = _Jumps(rng.bit_generator.state["state"]["inc"]) if kind == "fresh" else None
    waiting = 0                  # requests seen and not admitted
    ranks: list = []             # kinds "rank", "hi_rank": σ per request id
    skip = 0                     # kind "fresh": uniforms owed to the generator
    times, counts = array("d"), array("q")   # the batch log (:func:`.common.log_columns`)
    admitted = seen = finished = running = 0
    work, kv, peak = engine.work, engine.kv_total, engine.peak_memory
    s = engine.iteration

    def wait(j, key):
        """Request ``j`` joins the waiting group of ``key``."""
        g = groups.get(key)
        if g is None:
            groups[key] = [[j], prompt[j], prompt[j]]
            heapq.heappush(keys, key)
            return
        if g[0][-1] < j:
            g[0].append(j)
        else:
            insort(g[0], j)
        g[1] += prompt[j]
        g[2] = min(g[2], prompt[j])

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
                else:
                    wait(j, est[j])
                    flags[j] = 1
                    per_block[j >> _SHIFT] += 1
        out = ()
        if M is not None:
            profile.age(s)
            if profile.need(s) > M:
                if evicts is None:
                    raise RuntimeError(f"future_peak_admission: memory over M = {M} "
                                       "(the check should have kept it within)")
                rng.bit_generator.advance(skip)
                skip = 0
                out = _evictions(sorted(running_ids), profile.need(s) - M, rng, est, began,
                                 prompt, s, e, evicts[0])
                for j in out:
                    p = began[j]
                    a = s - p - 1 + e                  # tokens generated so far
                    residencies.extend((j, p, a, 0))
                    base = prompt[j] - p
                    profile.leave(p + est[j] - e, base, s)
                    running_ids.discard(j)
                    began[j] = -1
                    kv -= base + s - 1
                    work += prompt[j] + a
                    est[j] = max(est[j], a + evicts[1])
                    wait(j, est[j])
                    flags[j] = 1
                    per_block[j >> _SHIFT] += 1
                running -= len(out)
                waiting += len(out)
        width = waiting                        # the uniforms A_min and H-SF draw now
        new = []
        if M is None:                          # MC-SF without a memory limit: admit all
            new = [item[-1] for item in heap]
            heap.clear()
        elif kind != "fresh":
            while heap and (cap is None or len(new) < cap):
                j = heap[0][-1]
                last = s + est[j] - e
                if not fits(prompt[j], 1, last, s):
                    break
                heapq.heappop(heap)
                new.append(j)
                profile.enter(last, prompt[j] - s)
        else:
            drawn = False
            while keys:
                key = keys[0]
                ids, total, least = g = groups[key]
                last = s + key - e
                if fits(total, len(ids), last, s):
                    take = ids                            # all of the group fits
                elif len(ids) == 1 or not fits(least, 1, last, s):
                    break                                 # none of it does
                else:                                     # the tie-break decides
                    rng.bit_generator.advance(skip)
                    skip = 0
                    drawn = True
                    take = []
                    for j in _in_draw_order(ids, width, rng, flags, per_block, jumps):
                        if not fits(prompt[j], 1, last, s):
                            break
                        take.append(j)
                        profile.enter(last, prompt[j] - s)
                    new.extend(take)
                    for j in take:                        # (a few: memory is short)
                        ids.remove(j)
                        g[1] -= prompt[j]
                    if any(prompt[j] == least for j in take):
                        g[2] = min(prompt[j] for j in ids)
                    break
                for j in take:
                    profile.enter(last, prompt[j] - s)
                new.extend(take)
                heapq.heappop(keys)
                del groups[key]
            for j in new:
                flags[j] = 0
                per_block[j >> _SHIFT] -= 1
            if not drawn and (new or running):
                skip += width
        if not new and not running:
            if out:
                raise RuntimeError("future_peak_admission: A_min evicted every running "
                                   "request and cannot start one (it always can)")
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
            began[j] = s
            end = s + output[j] - e
            if end in leaving:
                leaving[end].append((j, s))
            else:
                leaving[end] = [(j, s)]
        if evicts is not None:
            running_ids.update(new)
        tau = taus.get((chunk_sum, running)) or new_tau(chunk_sum, running)
        used = kv + chunk_sum + running
        work -= chunk_sum + running + e * len(new)
        times.extend((t, tau))
        counts.extend((len(new), chunk_sum, running, len(out), used, live, work))
        peak = used if used > peak else peak
        running += len(new)
        freed = 0
        for j, p in leaving.pop(s, ()):
            if began[j] != p:                  # evicted since
                continue
            freed += prompt[j] + output[j] - e
            running -= 1
            finished += 1
            residencies.extend((j, p, output[j], 1))
            began[j] = -1
            if M is not None:
                profile.leave(p + est[j] - e, prompt[j] - p, s)
            if evicts is not None:
                running_ids.discard(j)
        kv = used - freed
        t = t + tau
        s += 1
    for j in range(admitted):                  # residencies still open
        if began[j] >= 0:
            residencies.extend((j, began[j], max(0, s - began[j] - 1 + e), 2))
    _write_back(engine, admitted, log_columns(times, counts), residencies)
    engine.work, engine.kv_total, engine.peak_memory = work, kv, peak
    return t, Books(seen, est, ranks, skip)


def _in_draw_order(ids, width, rng, flags, per_block, jumps):
    """The waiting ``ids`` (ascending) in the order of the fresh uniforms the policy draws
    now, ``width`` of them for the waiting requests in id order (then by id); the
    generator ends past them. A request's draw is at its place among the waiting ids
    (``flags``, counted ``per_block``): below :data:`_JUMP` uniforms the block is drawn
    and the places counted one by one, from there on the places are counted in numpy and
    only the draws there are read (``jumps``, a :class:`_Jumps` of ``rng``)."""
    counts = np.frombuffer(per_block, np.int64, (ids[-1] >> _SHIFT) + 1)
    starts = np.cumsum(counts) - counts                           # waiting before a block
    if width < _JUMP:
        pos = [starts[i >> _SHIFT] + flags.count(1, i >> _SHIFT << _SHIFT, i) for i in ids]
        u = rng.random(width)[pos].tolist()
        return [i for _, i in sorted(zip(u, ids, strict=True))]
    j = np.array(ids, dtype=np.int64)
    blk = j >> _SHIFT
    words = np.frombuffer(flags, np.uint64).reshape(-1, 8)[blk]   # flags of j's block
    word, byte = (j >> 3) & 7, (j & 7) << 3
    full = ((words * _BYTES) >> np.uint64(56)) * (np.arange(8) < word[:, None])
    part = words[np.arange(j.size), word] & ((np.uint64(1) << byte.astype(np.uint64)) - 1)
    within = full.sum(1) + ((part * _BYTES) >> np.uint64(56))
    pos = starts[blk] + within.astype(np.int64)
    u = jumps.draws(rng.bit_generator.state["state"]["state"], pos)
    rng.bit_generator.advance(width)
    return j[np.lexsort((j, u))].tolist()


class _Jumps:
    """Numpy's PCG64 (XSL-RR 128/64) read at some places of a block of draws without
    drawing it: ``r + 1`` steps from the state ``x`` the state is ``A_r x + H_r`` (mod
    ``2^128``; ``A_r = m^(r+1)``, ``H_r = c (m^r + … + 1)``, ``m`` the multiplier and ``c``
    the generator's increment), the tables kept in 64-bit halves and grown as needed."""

    def __init__(self, inc):
        self.inc = inc
        self.tables = [np.zeros(0, np.uint64) for _ in range(4)]   # A hi, A lo, H hi, H lo
        self.a, self.h = 1, 0

    def _grow(self, size):
        a, h, inc, m128 = self.a, self.h, self.inc, (1 << 128) - 1
        rows = []
        for _ in range(size - self.tables[0].size):
            a, h = a * _MUL & m128, (h * _MUL + inc) & m128
            rows.append((a >> 64, a & _M64, h >> 64, h & _M64))
        self.a, self.h = a, h
        new = np.array(rows, dtype=np.uint64).reshape(-1, 4).T
        self.tables = [np.concatenate([old, part]) for old, part in zip(self.tables, new,
                                                                        strict=True)]

    def draws(self, state, pos):
        """The draws at places ``pos`` (ascending) from ``state``: the uniforms times
        ``2^53``, as unsigned integers (``out >> 11`` of each output)."""
        if pos[-1] >= self.tables[0].size:
            self._grow(max(int(pos[-1]) + 1, 2 * self.tables[0].size))
        ah, al, hh, hl = (t[pos] for t in self.tables)
        sh, sl = np.uint64(state >> 64), np.uint64(state & _M64)
        low = al * sl
        lo = low + hl
        hi = _high(al, sl) + ah * sl + al * sh + hh + (lo < low)
        x = hi ^ lo
        rot = hi >> np.uint64(58)
        out = (x >> rot) | (x << ((np.uint64(64) - rot) & np.uint64(63)))
        return out >> np.uint64(11)


def _high(a, b):
    """The high 64 bits of the 128-bit products ``a · b`` (unsigned 64-bit ``a``, ``b``)."""
    m32, k = np.uint64(0xFFFFFFFF), np.uint64(32)
    a0, a1, b0, b1 = a & m32, a >> k, b & m32, b >> k
    p01, p10 = a0 * b1, a1 * b0
    mid = ((a0 * b0) >> k) + (p01 & m32) + (p10 & m32)
    return a1 * b1 + (p01 >> k) + (p10 >> k) + (mid >> k)


def _evictions(running, excess, rng, est, began, prompt, s, e, dynamic):
    """A_min's victims (``AMin._evict``): the running requests (ascending ids) in the order
    of their key (``õ``, or ``max(õ, a)`` when ``dynamic``), ties by fresh uniforms, until
    their next-round memory covers ``excess``."""
    u = rng.random(len(running)).tolist()
    rows = []
    for i, j in enumerate(running):
        a = s - began[j] - 1 + e
        rows.append((max(est[j], a) if dynamic else est[j], u[i], i, j))
    rows.sort()
    out, freed = [], 0
    for *_, j in rows:
        out.append(j)
        freed += prompt[j] - began[j] + s
        if freed >= excess:
            break
    return out


def _write_back(engine, admitted, cols, residencies):
    """The engine's records and state after the bulk run, as if it had stepped: the batch
    log, and per request its residencies ``(request, admission round, tokens, end)`` (end
    0: evicted, 1: finished, 2: still running), whose tokens came out in consecutive
    iterations from the admission's (``first_token="prefill"``) or the next one."""
    s0 = write_log(engine, admitted, cols)
    start, dur = cols[:2]
    tab = engine.table
    ends = start + dur                                   # t + τ, as the engine adds them
    gaps = ends - start                                  # the gap each decode closes
    seg = np.frombuffer(residencies, dtype=np.int64).reshape(-1, 4)
    order = np.lexsort((seg[:, 1], seg[:, 0]))           # by request, then in time
    rid, p, count, how = seg[order].T
    p = p - s0
    first = p + 1 - tab.emit_first                       # iteration of the first token
    now = tail_of(rid)                                   # each request's latest residency
    on = how[now] > 0                                    # ... holding KV (or finished)
    latest = rid[now]
    tab.prefill_done[latest] = ends[p[now]]
    tab.prefilled[latest[on]] = tab.prompt[latest[on]]
    tab.in_decode[latest[on]] = True
    tab.decoded[latest] = np.where(on, count[now], 0)
    gone = how == 0
    np.add.at(tab.restarts, rid[gone], 1)
    np.add.at(tab.discarded, rid[gone], count[gone])
    done = how == 1
    tab.finish[rid[done]] = ends[(first + count - 1)[done]]
    talked = count > 0
    rid, first, count = rid[talked], first[talked], count[talked]
    final = first + count - 1
    stamp_runs(engine, rid, ends[first], ends[final])   # across a restart: the stall
    timed = count > 1                                    # gaps inside a residency
    add_inner_gaps(engine, gaps, (first + 1)[timed], (final + 1)[timed], rid[timed])
    ids = np.arange(admitted)
    engine.live = ids[np.isnan(tab.finish[:admitted])]

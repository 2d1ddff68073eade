"""Schedulers of Chen, Ye, Zhou: H-SF, A_max, A_random, A_min (Alg. 2 and 5), A_ℓ
(Alg. 6) and the A_min/A_ℓ switch, for outputs known only to lie in ``[lo, hi]``.

Round model. The paper's step ``t`` (§1.2 of the spec) admits jobs, then every active job
produces one token; a job started at ``p`` holds ``s + (t − p + 1)`` tokens after step ``t``
(eq. 1 counts the token just produced) and finishes at ``L = p + o``. The engine with
``UnitTime()`` and ``first_token="prefill"`` runs a job started in round ``p`` with prompt ``P`` for
rounds ``p … p+o−1`` holding ``P + (t − p)`` tokens, finishing at time ``p + o``. So **a paper
instance with prompt ``s`` is the engine instance with prompt ``s + 1``** (the KV of the token
being produced); :func:`~queuetheory.policies.robust_experiments.paper_trace` applies it. With
it Example 3.2 (TEL 5 vs 9) and Example 8.2 (TEL 12) come out exactly. Every request prefills
its whole prompt in its first round.

Memory look-ahead (eq. 3) is :class:`~queuetheory.rounds.FuturePeak` in round
units relative to now: a running job with ``a`` tokens and assumed length ``ô`` holds
``kv + 1`` after this round and runs ``ô − a − 1`` more rounds; a new one holds ``P`` after
this round and grows for ``ô − 1`` more (``ô`` under ``first_token="decode"``, where its
admission round emits no token), so no batch overflows ``M`` under either convention when
the lengths lie within the assumed ones. Every policy here needs a set ``memory``
(``simulate`` refuses ``memory=None``). Decisions of the spec (§5) are referenced by number
in the code.

Fast path: every decision of H-SF, A_random, A_max and A_min (its evictions included)
follows the bulk rule :mod:`~queuetheory.engine.kernels.future_peak_admission`, which draws
the same random numbers.
"""

from __future__ import annotations

from heapq import heappop, heappush

import numpy as np

from ..engine import Batch
from ..engine.kernels import future_peak_admission
from ..errors import QueueTheoryError
from ..rounds import FuturePeak
from .base import Policy, decides_as_shipped, round_model

__all__ = ["HSF", "AMax", "ARandom", "AMin", "AEll", "AdaptiveRobust"]


_NONE_WAITS = np.zeros(1, dtype=bool)     # one job handed over running: it does not wait


def _grown(a: np.ndarray, size: int, fill) -> np.ndarray:
    """``a`` with at least ``size`` entries, the new ones ``fill``: the length at least
    doubles, so that per-request arrays grown as requests arrive cost amortised O(1) per
    request (not a copy of the whole array at every arrival)."""
    if size <= a.size:
        return a
    wider = np.full(max(size, 2 * a.size), fill, dtype=a.dtype)
    wider[: a.size] = a
    return wider


class _RoundPolicy(Policy):
    """Shared loop: evict (hook), then admit waiting jobs in the hook's order while the
    future-peak check with the hook's length estimates passes; running jobs always decode."""

    no_token_budget = round_model("Chen, Ye, Zhou")

    on_fail = "break"

    def supports(self, *, memory, first_token) -> str | None:
        if memory is None:
            return "the round model's admission rule (eq. 3) needs a KV capacity M"
        return None

    #: whether ``_order`` draws a fresh uniform per waiting request at every decision
    _draws = False

    def _reset(self):
        self._rank = np.empty(0)           # one uniform key per request id (a permutation σ)
        self._ranked = 0                   # ... drawn for the ids below this
        self._blocked = False

    def steady(self, state, batch):
        """A decode-only decision whose first candidate failed the memory test (``now``, the
        memory after this round, plus its prompt over ``M``), or with none waiting, repeats
        while only the running jobs decode: ``now`` only grows and the order of the waiting
        jobs is kept (no arrival, so no new key; nothing drawn, which rules out the orders
        that draw fresh uniforms at each decision while a job waits); an eviction of A_min
        comes only with memory over ``M``, which the engine's check stops before."""
        blocked, self._blocked = self._blocked, False
        return (blocked and decides_as_shipped(self) and not batch.prefill.size
                and batch.decode.size > 0)

    def drains(self, state):
        """Every job running, none waiting: each decides the decode of all of them (no draw,
        no admission; A_min evicts only over ``M``, which the engine checks)."""
        return decides_as_shipped(self) and not np.count_nonzero(state.kv == 0)

    def _ranks(self, rid):
        if rid.size and rid.max() >= self._ranked:
            top = int(rid.max()) + 1
            self._rank = _grown(self._rank, top, 0.0)
            self._rank[self._ranked: top] = self.rng.random(top - self._ranked)
            self._ranked = top
        return self._rank[rid]

    def _schedule(self, state):
        self._see(state)
        started = state.started
        running = np.flatnonzero(started)
        evict = self._evict(state, running)
        if evict.size:              # masks, not set operations: both stay sorted
            started = started.copy()
            started[evict] = False
            running = np.flatnonzero(started)
        waiting = np.flatnonzero(~started)
        order = waiting[self._order(state, waiting)]
        est = self._estimate(state)
        a = state.decoded
        now = int(state.kv[running].sum()) + running.size      # memory after this round
        blocked = order.size == 0 or now + int(state.prompt[order[0]]) > state.memory
        # a blocked decode-only decision repeats (steady) unless it draws fresh uniforms
        self._blocked = blocked and not evict.size and not (self._draws and order.size)
        if blocked:
            admit = order[:0]                                  # the first candidate cannot fit
        else:
            est_run = np.maximum(est[running], a[running] + 1)          # spec §5 #5
            peak = FuturePeak(state.memory, 0, state.kv[running] + 1, est_run - a[running] - 1)
            # a new job emits its first token in its admission round under the paper's (and
            # the real engines') convention; under first_token="decode" every one of its
            # ô tokens takes a round after it, one more round of growth to foresee
            rounds = est[order] - int(state.emit_first)
            admit = order[peak.admit(state.prompt[order], rounds, on_fail=self.on_fail)]
        if admit.size == 0 and running.size == 0 and waiting.size:
            self._cannot_start(state, order[0], int(est[order[0]]))
        return Batch(admit, state.prompt[admit], running, evict)

    def _cannot_start(self, state, j, est=None):
        """Raise: an empty system cannot start its first candidate (position ``j``)."""
        if est is None:
            est = int(self._estimate(state)[j])
        raise QueueTheoryError(
            f"{type(self).__name__} cannot start request {int(state.rid[j])}: its prompt "
            f"{int(state.prompt[j])} plus assumed length {est} exceeds memory={state.memory}")

    def bulk(self, engine):
        """The rule ``future_peak_admission``
        (:func:`~queuetheory.engine.kernels.future_peak_admission`) for the schedulers that
        have a plan for it (:meth:`_bulk_plan`: H-SF, A_random, A_max, A_min) with NumPy's
        default PCG64 generator, whose draws the kernel reproduces; the policy's books are
        handed back as if it had decided every round."""
        plan = self._bulk_plan(engine.table)
        if (plan is None or not decides_as_shipped(self)
                or type(self.rng.bit_generator) is not np.random.PCG64):
            return None
        kind, est, evicts = plan
        if est.size and est.min() < 1:
            return None

        def run(t, stop, limit):
            t, books = future_peak_admission(engine, t, stop, limit, kind=kind,
                                             est=est.tolist(), evicts=evicts, rng=self.rng)
            self._hand_back(books)
            return t
        return run

    def _bulk_plan(self, table):
        """``(kind, estimates, evictions)`` of this scheduler's admission order in
        :func:`~queuetheory.engine.kernels.future_peak_admission`, or ``None``: no bulk
        rule (the engine steps)."""
        return None

    def _hand_back(self, books):
        """The policy's own state as if it had made every decision of the bulk run."""
        if books.ranks is not None and len(books.ranks):
            self._rank = np.array(books.ranks, dtype=float)
            self._ranked = len(books.ranks)
        self.rng.bit_generator.advance(books.skip)

    # hooks -------------------------------------------------------------------------------
    def _see(self, state):
        """Record per-request state for requests seen for the first time."""

    def _evict(self, state, running):
        return np.empty(0, dtype=np.int64)

    def _estimate(self, state):
        raise NotImplementedError

    def _order(self, state, waiting):
        raise NotImplementedError


class HSF(_RoundPolicy):
    """Hindsight shortest-first (Alg. 3): knows every ``o_i``; admits the shortest waiting jobs
    while eq. (3) holds with the true lengths; never evicts. The benchmark of Def. 3.1. With
    equal prompts the longest feasible shortest-first prefix is Alg. 3's largest feasible set;
    with unequal prompts it is the same greedy rule, not a knapsack optimum."""

    _draws = True

    def _estimate(self, state):
        return state.output

    def _order(self, state, waiting):
        return np.lexsort((self.rng.random(waiting.size), state.output[waiting]))

    def _bulk_plan(self, table):
        return "fresh", table.column("output"), None


class ARandom(_RoundPolicy):
    """A_random (Alg. 4, analysis only): true lengths, one random permutation drawn at the
    start, admission in that order stopping at the first job that does not fit."""

    def _estimate(self, state):
        return state.output

    def _order(self, state, waiting):
        return np.argsort(self._ranks(state.rid[waiting]))

    def _bulk_plan(self, table):
        return "rank", table.column("output"), None


class AMax(_RoundPolicy):
    """A_max (Alg. 1): assumes every job runs to its upper bound ``hi``; never overflows.

    Equal ``hi`` (the paper's single interval): both orders are Alg. 1.

    Parameters
    ----------
    order : {"sorted", "random"}, default "sorted"
        ``"sorted"`` admits by (``hi`` ascending, random permutation), the largest feasible
        set (spec §2.2); ``"random"`` follows the permutation only.

    Raises
    ------
    ValueError
        For an unknown ``order``.
    """

    def __init__(self, order="sorted"):
        if order not in ("sorted", "random"):
            raise ValueError(f"order={order!r}: must be 'sorted' or 'random'")
        self.order = order

    def _estimate(self, state):
        return state.hi

    def _order(self, state, waiting):
        rank = self._ranks(state.rid[waiting])
        if self.order == "random":
            return np.argsort(rank)
        return np.lexsort((rank, state.hi[waiting]))

    def _bulk_plan(self, table):
        return ("hi_rank" if self.order == "sorted" else "rank"), table.column("hi"), None


class _LowerBounds(_RoundPolicy):
    """Keeps the running lower bound ``õ_i`` per request id, initialised to ``lo_i``."""

    def _reset(self):
        super()._reset()
        self._lb = np.empty(0, dtype=np.int64)

    def _see(self, state):
        rid = state.rid
        if rid.size:
            self._lb = _grown(self._lb, int(rid.max()) + 1, 0)
        new = self._lb[rid] == 0
        self._lb[rid[new]] = state.lo[new]

    def _estimate(self, state):
        return self._lb[state.rid]


class AMin(_LowerBounds):
    """A_min (Alg. 2; Alg. 5 when ``lo`` is the class lower bound): starts from ``õ_i = lo_i``,
    admits shortest-``õ`` first while eq. (3) holds with ``õ``, and when next round's memory
    would overflow evicts smallest-key first until it fits. An evicted job returns to the
    waiting set with ``õ_i ← max(õ_i, a_i)`` (``a_i + 1`` with
    ``bound="generated+1"``, a job still unfinished after ``a_i`` tokens has ``o_i > a_i``).

    Parameters
    ----------
    evict_key : {"static", "dynamic"}, default "static"
        ``"static"`` sorts evictions by ``õ_i`` (literal Alg. 2); ``"dynamic"`` by
        ``max(õ_i, a_i)``, the certified lower bound (spec §5 #4). Ties at random.
    bound : {"generated", "generated+1"}, default "generated"
        The lower bound an evicted job keeps: ``max(õ_i, a_i)`` or ``max(õ_i, a_i + 1)``.

    Raises
    ------
    ValueError
        For an unknown ``evict_key`` or ``bound``.
    """

    def __init__(self, evict_key="static", bound="generated"):
        if evict_key not in ("static", "dynamic"):
            raise ValueError(f"evict_key={evict_key!r}: must be 'static' or 'dynamic'")
        if bound not in ("generated", "generated+1"):
            raise ValueError(f"bound={bound!r}: must be 'generated' or 'generated+1'")
        self.evict_key = evict_key
        self.bound = bound

    _draws = True

    def _evict(self, state, running):
        need = state.kv[running] + 1                       # projected memory at t+1 (§5 #6)
        excess = int(need.sum()) - state.memory
        if excess <= 0:
            return np.empty(0, dtype=np.int64)
        a = state.decoded[running]
        lb = self._lb[state.rid[running]]
        key = lb if self.evict_key == "static" else np.maximum(lb, a)
        order = np.lexsort((self.rng.random(running.size), key))
        k = int(np.searchsorted(np.cumsum(need[order]), excess, side="left")) + 1
        out = running[order[:k]]
        rid = state.rid[out]
        gained = state.decoded[out] + (self.bound == "generated+1")
        self._lb[rid] = np.maximum(self._lb[rid], gained)
        return np.sort(out)

    def _order(self, state, waiting):
        return np.lexsort((self.rng.random(waiting.size), self._lb[state.rid[waiting]]))

    def _bulk_plan(self, table):
        return "fresh", table.column("lo"), (self.evict_key == "dynamic",
                                             int(self.bound == "generated+1"))

    def _hand_back(self, books):
        super()._hand_back(books)
        if books.seen:                      # õ of every request seen
            self._lb = np.array(books.est[: books.seen], dtype=np.int64)


class AEll(_LowerBounds):
    """A_ℓ (Alg. 6, "promote-ℓ"), for two-point outputs ``o ∈ {lo, hi}``: a FIFO queue in a
    random initial order; jobs start with ``õ = lo``; a job still unfinished after ``õ_i``
    tokens is evicted, promoted to ``õ_i = hi_i`` and sent to the back of the queue. The
    trigger is ``a_i ≥ õ_i`` (Alg. 6's "more than ℓ tokens" would also fire on
    promoted jobs and never terminate). Admission from the front, stopping at the first job
    that does not fit (§5 #11)."""

    def _reset(self):
        super()._reset()
        self._queue = np.empty(0)
        self._tail = 0.0
        self._fast = decides_as_shipped(self) and self.on_fail == "break"
        self._last = None         # the running jobs of a decode-only decision (steady)
        # books of the decision (:meth:`_schedule`): the waiting jobs as a heap of
        # (queue key, id), the running ones (holding KV) as ascending ids, every id below
        # ``_seen`` seen in a state
        self._heap: list = []
        self._running = np.empty(0, dtype=np.int64)
        self._seen = 0
        # the running jobs' memory profile (eq. 3) as a book in rounds counted by
        # ``_clock``, per id the job's clock anchor (``clock − a`` while it runs), its
        # memory in round τ less τ and its last round; rebuilt from the state when
        # ``_rebuild`` (the first decision, a job handed over running)
        self._fast = self._fast and self.preemption == "restart"
        self._peak = FuturePeak(0, 0)
        self._clock = 0
        self._anchor = np.empty(0, dtype=np.int64)
        self._held = np.empty(0, dtype=np.int64)
        self._last_round = np.empty(0, dtype=np.int64)
        self._rebuild = True
        self._keep = None         # the last decision's, to repeat (:meth:`_again`)
        self._starts = None       # the batches of the last stretch (:meth:`repeated`)

    def _enqueue(self, rid, waits=None):
        """Queue keys for ``rid`` at the back of the queue, in a random order; with the
        books, those that wait (``waits``: a mask, default all) join the heap."""
        if rid.size == 1:               # a permutation of one draws no random number
            key, r = self._tail, int(rid[0])
            self._queue[r] = key
            self._tail += 1
            if self._fast and (waits is None or waits[0]):
                heappush(self._heap, (key, r))
        elif rid.size:
            keys = self._tail + self.rng.permutation(rid.size)
            self._queue[rid] = keys
            self._tail += rid.size
            if self._fast:
                if waits is not None:
                    keys, rid = keys[waits], rid[waits]
                for item in zip(keys.tolist(), rid.tolist(), strict=True):
                    heappush(self._heap, item)

    def _see(self, state):
        super()._see(state)
        rid = state.rid
        if rid.size:
            self._queue = _grown(self._queue, int(rid.max()) + 1, -1.0)
        self._enqueue(rid[self._queue[rid] < 0])

    def _evict(self, state, running):
        rid = state.rid[running]
        out = running[state.decoded[running] >= self._lb[rid]]
        self._lb[state.rid[out]] = state.hi[out]
        self._enqueue(state.rid[out])
        return out

    def _order(self, state, waiting):
        return np.argsort(self._queue[state.rid[waiting]])

    def _schedule(self, state):
        """The loop of :class:`_RoundPolicy` with what it reads cut to what the decision
        needs (the same batch, the same draws), kept as books so that no column of the
        whole queue is read: the waiting jobs in a heap by queue key (admission stops at the
        first candidate that fails, so the next one is the smallest key left,
        :meth:`_admit`; none is tried when the first one's prompt does not fit the memory
        after this round), the running jobs (:meth:`_books`), the estimates gathered for
        them and the candidates tried alone. A subclass that changes a hook runs the shared
        loop."""
        if not self._fast:
            return super()._schedule(state)
        keep, self._keep = self._keep, None
        if keep is not None:
            batch = self._again(state, *keep)
            if batch is not None:
                return batch
        tab = state._t
        rid, running, pos, gone = self._books(state)
        a = tab.decoded[running]
        lb = self._lb[running]
        self._tick(running, a, gone)
        out = a >= lb                     # past their last round: out of the profile
        evict = pos[:0]
        if out.any():
            gone = running[out]
            evict = pos[out]
            self._lb[gone] = tab.hi[gone]
            self._enqueue(gone)
            keep = ~out
            running, pos, a, lb = running[keep], pos[keep], a[keep], lb[keep]
        if self._rebuild:
            self._build(state, running, a, lb)
        now = self._peak.load_at(self._clock)                # memory after this round
        admit = []
        hold = True        # no candidate, or the first fails at this round and later
        if self._heap:
            head = self._heap[0][1]
            if now + int(tab.prompt[head]) <= state.memory:
                admit, hold = self._admit(state, running)
            elif not running.size:
                self._cannot_start(state, int(rid.searchsorted(head)))
        self._last = (pos, running, a, lb, hold) if not (admit or evict.size) else None
        if self._last is not None and self._heap and running.size:
            due = int((lb - a).min())         # the first round a job reaches õ, from now
            self._keep = (self._seen, rid.size, pos, running, a, lb, int(a[0]),
                          due - 1 if hold is True else min(due - 1, hold), hold)
        if admit:
            new = np.array(admit, dtype=np.int64)
            self._started(state, new)
            self._running = np.sort(np.concatenate((running, new)))
            return Batch(rid.searchsorted(new), tab.prompt[new], pos, evict)
        self._running = running
        return Batch(pos[:0], pos[:0], pos, evict)

    def _again(self, state, seen, n, pos, running, a, lb, first, window, hold):
        """The last decision's batch again, where it is provably the decision now: it
        admitted and evicted nothing with a job waiting, since then only arrivals came (the
        ``n`` jobs in the system then, the ids below ``seen``, are still there; the new
        ones join the back of the queue, the first candidate stays), and the ``j`` rounds
        since are within the ``window`` where no job reaches ``õ`` and the first candidate
        fails (its ``hold``, :meth:`_admit`; ``True``: ``now`` only grows). The arrivals
        join the books; ``None`` where it does not hold."""
        rid = state.rid
        j = int(state._t.decoded[running[0]]) - first
        if not 1 <= j <= window or int(rid.searchsorted(seen)) != n:
            return None
        if self._arrive(state):                  # one handed over running: decide afresh
            return None
        a = a + j
        self._last = (pos, running, a, lb, True if hold is True else hold - j)
        self._keep = (self._seen, rid.size, pos, running, a, lb, first + j, window - j,
                      self._last[4])
        return Batch(decode=pos)

    def _tick(self, running, a, gone):
        """The profile book moved on to this decision: the clock read off a running job
        (every running job decodes one token per round), the past rounds dropped, the
        jobs that finished before their last round taken out; emptied with no job left."""
        if not running.size:
            self._peak, self._clock = FuturePeak(self._peak.memory, 0), 0
            return
        if self._rebuild:
            return
        clock = int(a[0] + self._anchor[running[0]])
        self._peak.advance(clock)
        self._clock = clock
        for g in gone[self._last_round[gone] >= clock].tolist():
            self._peak.remove(int(self._held[g]) + clock, int(self._last_round[g]))

    def _build(self, state, running, a, lb):
        """The profile book from the state: the running jobs (every one has
        ``õ ≥ a + 1``: the others were just evicted, §5 #5) hold ``kv + 1`` after this
        round and run ``õ − a − 1`` more rounds."""
        self._rebuild = False
        kv = state._t.kv(running) + 1
        last = lb - a - 1
        self._clock = 0
        self._peak = FuturePeak(state.memory, 0, kv, last)
        self._grow_books(int(running.max()) + 1 if running.size else 0)
        self._anchor[running] = -a
        self._held[running] = kv
        self._last_round[running] = last

    def _grow_books(self, top):
        """The per-id arrays of the profile book with room for ids below ``top``."""
        self._anchor = _grown(self._anchor, top, 0)
        self._held = _grown(self._held, top, 0)
        self._last_round = _grown(self._last_round, top, 0)

    def _started(self, state, new):
        """The book's entries of the jobs admitted now (ids ``new``): a job starts with
        nothing decoded (``preemption="restart"``, even one evicted in this batch); in the
        round after this one it has decoded its first token when ``first_token="prefill"``
        (none otherwise); it holds its prompt after this round, until its last round."""
        tab, clock, emit = state._t, self._clock, int(state.emit_first)
        self._grow_books(int(new.max()) + 1)
        self._anchor[new] = clock + 1 - emit
        self._held[new] = tab.prompt[new] - clock
        self._last_round[new] = clock + self._lb[new] - emit

    def _books(self, state):
        """The ids in the system (``state.rid``), the running jobs' ids (ascending) and
        their positions, after the books took in what changed since the last decision:
        new arrivals (:meth:`_arrive`); running jobs that finished (no longer in the
        system) leave. A job runs from its admission (its whole prompt in that round) until it
        finishes or this policy evicts it: exactly the jobs holding KV. Also returns the
        running jobs that finished (their ids)."""
        rid = state.rid
        self._arrive(state)
        running = self._running
        pos = rid.searchsorted(running)
        there = rid.take(pos, mode="clip") == running if rid.size else pos < 0
        gone = running[:0]
        if not there.all():
            gone = running[~there]
            running, pos = running[there], pos[there]
        return rid, running, pos, gone

    def _arrive(self, state) -> bool:
        """New arrivals (the ids from ``_seen`` on, the tail of the ascending
        ``state.rid``) join the queue (a key each, as the shared loop draws them) or,
        holding KV already (handed over prefilled), run: then the profile book is rebuilt
        and ``True`` returned."""
        rid = state.rid
        starts, self._starts = self._starts, None
        if not (rid.size and rid[-1] >= self._seen):
            return False
        new = rid[int(rid.searchsorted(self._seen)):]
        top = int(rid[-1]) + 1
        if top > min(self._queue.size, self._lb.size):
            self._lb = _grown(self._lb, top, 0)
            self._queue = _grown(self._queue, top, -1.0)
        tab = state._t
        self._lb[new] = tab.lo[new]
        if new.size == 1:                # handed over running (Engine.add(ready=))?
            held = new if tab._kv_of(int(new[0])) > 0 else new[:0]
            self._enqueue(new, _NONE_WAITS if held.size else None)
        else:
            ready = tab.kv(new) > 0
            if starts is None:
                self._enqueue(new, ~ready)
            else:                        # the arrivals each call of the stretch would see
                seen_at = starts.searchsorted(tab.arrival[new], side="left")
                cuts = np.flatnonzero(np.diff(seen_at)) + 1
                for group, waits in zip(np.split(new, cuts), np.split(~ready, cuts),
                                        strict=True):
                    self._enqueue(group, waits)
            held = new[ready]
        self._seen = top
        if held.size:                        # younger than every id seen
            self._running = np.concatenate((self._running, held))
            self._rebuild = True
        return self._rebuild

    def steady(self, state, batch):
        """A decode-only batch with no job waiting repeats until a job finishes: nothing is
        admitted while nothing arrives, and no job reaches its eviction point ``õ`` first
        (checked: at the decisions of the stretch a job has ``a + 1 … a + k`` tokens,
        ``k + 1`` the fewest tokens a member still owes). With a job waiting,
        :meth:`decodes_through` promises the stretch, through arrivals and completions;
        where it declines, the candidate may start at the next decision, a job finishes in
        this batch or one reaches ``õ`` at the next, and no stretch is left to promise.

        Parameters
        ----------
        state : State
            The state the batch was built on.
        batch : Batch
            The batch :meth:`schedule` returned on it.

        Returns
        -------
        bool
            Whether the batch repeats until a job finishes.
        """
        last, self._last = self._last, None
        if last is None or self._heap or batch.prefill.size or not batch.decode.size:
            return False
        pos, running, a, lb, _ = last
        if pos.size != batch.decode.size:
            return False
        owed = state._t.output[running] - a              # >= 2: none finishes in this batch
        return bool((lb - a).min() >= owed.min())

    def decodes_through(self, state, batch):
        """A decode-only batch with a job waiting, the first candidate, which failed
        (:meth:`_schedule`), repeats less the jobs that finish, whatever arrives: arrivals
        join the back of the queue (their random order drawn per call as stepping draws
        it, :meth:`repeated`) and never become the first candidate. It lasts

        * while the candidate fails the memory test (``now``, the memory after the round,
          plus its prompt over ``M``): only a job that finishes lowers ``now``, so the test
          fails while the memory a batch leaves free is below the prompt (the ``need``:
          the running jobs hold all the KV);
        * or, where it failed the future-peak check, for the rounds counted by
          :meth:`_admit`: a job that finishes at its last round (``o = õ``) leaves the
          profile as it foresaw;

        and in both cases only until a job with ``õ ≠ o`` reaches ``õ`` (it is evicted) or,
        where the profile is read, finishes before its last round (the profile's later
        rounds fall).

        Parameters
        ----------
        state : State
            The state the batch was built on.
        batch : Batch
            The batch :meth:`schedule` returned on it.

        Returns
        -------
        tuple of int or int
            ``(need, n)``: the free memory at which the candidate passes the memory test
            (0: not that test) and the batches the promise lasts at most; 0: no promise.
        """
        last = self._last
        if not (self._fast and self._heap and last is not None
                and batch.decode.size == last[0].size):
            return 0
        _, running, a, lb, hold = last
        output = state._t.output[running]
        if hold is True:
            other, most = lb < output, np.inf
        else:
            other, most = lb != output, hold
        if np.count_nonzero(other):         # the batch before the decision that sees it
            most = min(most, int((np.minimum(lb, output) - a)[other].min()) - 1)
        if most < 1:
            return 0
        # (a prompt over the memory the round leaves free is at least 1 token)
        return (int(state._t.prompt[self._heap[0][1]]) if hold is True else 0), most

    def repeated(self, k, starts) -> None:
        """The starts of the stretch's batches, kept for the next decision: the arrivals
        on the way join the queue in the groups the skipped calls would have seen (each
        call the requests arrived since the last; a group of several in a random order).
        The profile book is kept per round and read at the next decision from the running
        jobs' tokens.

        Parameters
        ----------
        k : int
            The batches the engine ran.
        starts : numpy.ndarray
            Their start times.
        """
        self._starts = starts

    def drains(self, state):
        """Every job running and none waiting: all decode to the end unless one reaches
        its eviction point first (``õ < o``), which is checked; nothing is admitted.

        Parameters
        ----------
        state : State
            A state where every request in the system is in decode.

        Returns
        -------
        bool
            Whether every job decodes to its end without an eviction.
        """
        return (self._fast and state.n > 0
                and not np.count_nonzero(self._lb[state.rid] < state.output)
                and not np.count_nonzero(state.kv == 0))

    def _admit(self, state, running):
        """Admission in queue order (§5 #11), the future-peak check of the profile book
        candidate by candidate, the next in the queue the top of the heap (never the
        whole queue sorted: the check runs candidate by candidate either way). Returns the
        admitted ids, in queue order (added to the profile), and, when none is, the rounds
        after this one for which the first candidate still fails while nothing arrives or
        finishes: started ``j`` rounds later it holds ``j`` tokens less in every round and
        lasts ``j`` more, so it fails while ``j`` is below its excess at its worst round
        ``τ`` and ``τ`` is still to come."""
        peak, clock = self._peak, self._clock
        tab, heap, emit = state._t, self._heap, int(state.emit_first)
        prompt, bound = tab.prompt, self._lb
        admit = []
        while heap:
            c = heap[0][1]
            m, e = int(prompt[c]), clock + int(bound[c]) - emit
            if not peak.fits(m, e):
                if not admit:
                    if not running.size:
                        self._cannot_start(state, int(state.rid.searchsorted(c)))
                    over, at = peak.excess(m, e)
                    return admit, min(over - 1, at - clock)
                break
            peak.add(m, e)
            admit.append(c)
            heappop(heap)
        return admit, 0


def _as_float(value) -> float:
    """``float(value)``, NaN where it is no number."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")


class AdaptiveRobust(Policy):
    """The switch: A_ℓ when ``α = min lo / max hi`` (over the requests present at the
    first decision) is below ``threshold`` (default α* of :func:`two_point_threshold`), else
    A_min. ``chosen`` names the policy picked.

    Parameters
    ----------
    threshold : float, optional
        The ratio ``α`` from which A_min runs instead of A_ℓ; ``None``: α* of
        :func:`~queuetheory.bounds.competitive_closed_forms.two_point_threshold`.
    evict_key : {"static", "dynamic"}, default "static"
        ``"static"`` A_min sorts evictions by ``õ_i`` (literal Alg. 2); ``"dynamic"`` by
        ``max(õ_i, a_i)``, the certified lower bound (spec §5 #4). Ties at random.

    Raises
    ------
    ValueError
        For a ``threshold`` that is not a finite number, or an unknown ``evict_key``.
    """

    no_token_budget = round_model("Chen, Ye, Zhou")

    def __init__(self, threshold=None, evict_key="static"):
        from ..bounds.competitive_closed_forms import two_point_threshold

        if threshold is None:
            threshold = two_point_threshold()
        elif isinstance(threshold, str) or not np.isfinite(_as_float(threshold)):
            raise ValueError(f"threshold={threshold!r}: must be a finite number, the ratio "
                             "α = min lo / max hi from which A_min runs instead of A_ℓ")
        if evict_key not in ("static", "dynamic"):
            raise ValueError(f"evict_key={evict_key!r}: must be 'static' or 'dynamic'")
        self.threshold = float(threshold)
        self.evict_key = evict_key

    def supports(self, *, memory, first_token) -> str | None:
        return _RoundPolicy.supports(self, memory=memory, first_token=first_token)

    def _reset(self):
        self._inner = None
        self.chosen = None

    def _schedule(self, state):
        if self._inner is None:
            self._choose(state.lo, state.hi)
        return self._inner._schedule(state)

    def steady(self, state, batch):
        """The chosen scheduler's promise (:meth:`AEll.steady`, :meth:`_RoundPolicy.steady`).

        Parameters
        ----------
        state : State
            The state the batch was built on.
        batch : Batch
            The batch :meth:`schedule` returned on it.

        Returns
        -------
        bool
            The chosen scheduler's answer (``False`` before the first decision).
        """
        return (self._inner is not None and decides_as_shipped(self)
                and self._inner.steady(state, batch))

    def repeated(self, k, starts) -> None:
        """The chosen scheduler's books moved after a stretch (:meth:`AEll.repeated`).

        Parameters
        ----------
        k : int
            The batches the engine ran.
        starts : numpy.ndarray
            Their start times.
        """
        self._inner.repeated(k, starts)

    def decodes_through(self, state, batch):
        """The chosen scheduler's promise (:meth:`AEll.decodes_through`).

        Parameters
        ----------
        state : State
            The state the batch was built on.
        batch : Batch
            The batch :meth:`schedule` returned on it.

        Returns
        -------
        bool, int or tuple of int
            The chosen scheduler's answer (``False`` before the first decision).
        """
        return (self._inner is not None and decides_as_shipped(self)
                and self._inner.decodes_through(state, batch))

    def drains(self, state):
        """The chosen scheduler's promise.

        Parameters
        ----------
        state : State
            A state where every request in the system is in decode.

        Returns
        -------
        bool
            The chosen scheduler's answer (``False`` before the first decision).
        """
        return (self._inner is not None and decides_as_shipped(self)
                and self._inner.drains(state))

    def _choose(self, lo, hi):
        alpha = float(lo.min()) / float(hi.max())
        self._inner = AEll() if alpha < self.threshold else AMin(self.evict_key)
        self.chosen = type(self._inner).__name__
        self._inner.rng = self.rng
        self._inner._reset()

    def bulk(self, engine):
        """The chosen scheduler's runner (A_min's bulk rule; A_ℓ has none). ``simulate``'s
        first decision sees exactly the requests that arrive first (every arrival tied with
        the earliest), so the choice is made here as :meth:`schedule` would make it there,
        and kept only if that decision comes (the first arrival before the horizon).

        Parameters
        ----------
        engine : Engine
            The fresh engine of the run, its trace loaded.

        Returns
        -------
        callable or None
            The runner, or ``None`` (no request, A_ℓ chosen, or a subclass that decides
            otherwise).
        """
        tab = engine.table
        if not tab.n or not decides_as_shipped(self):
            return None
        arrival = tab.column("arrival")
        first = arrival == arrival[0]
        self._choose(tab.column("lo")[first], tab.column("hi")[first])
        inner = self._inner.bulk(engine)
        if inner is None:
            self._reset()
            return None

        def run(t, stop, limit):
            if not (arrival[0] < stop and limit >= 1):
                self._reset()            # no decision is made: nothing chosen
                return t
            return inner(t, stop, limit)
        return run

    def _params(self):
        return {"threshold": self.threshold, "evict_key": self.evict_key}

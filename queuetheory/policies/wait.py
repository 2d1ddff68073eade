"""WAIT and Nested WAIT (Ao et al., Algorithms 1–2) and the FCFS baseline of Props. 4–5.

Conventions of the paper mapped onto the engine (written down once, here)
-------------------------------------------------------------------------
* A type-``j`` prompt is a request with ``prompt = l_j`` and ``output = l'_j``, run with the
  engine's ``first_token="decode"``: stage 0 is the prefill iteration (the whole prompt
  as one chunk, KV ``l_j`` after it) and stages ``1..l'_j`` are the ``l'_j`` decode
  iterations (KV ``l_j + k`` after stage ``k``). A prompt thus takes ``l'_j + 1``
  iterations and completes at the end of stage ``l'_j``, as in the paper (§2.1, §3.1).
* Batch time: ``qt.LinearMemoryTime(d0, d1)`` charges ``d1`` per KV token of the batch
  members *after* the iteration, which is eq. (1)'s ``Σ (l_j + k_i)``.
* Memory: the engine's KV check counts every resident request, paused cohorts and entry
  queues included (spec §1.3 [DECIDE]): a paused prompt after stage ``k−1`` holds
  ``l_j + k − 1`` tokens; un-prefilled prompts hold none (they wait in CPU memory,
  Appendix C, proof of Theorem 2). ``memory=C``.
* TTFT: the engine stamps ``first_token`` at the end of stage 1 (§1, Fig. 1: the first
  output token is produced in stage 1); the vLLM convention, end of prefill, is the
  ``prefill_done`` column. Latency is ``finish − arrival`` (end of stage ``l'_j``).
* Throughput: ``metrics["throughput"]`` counts decode tokens (``l'_j`` per prompt, §2.3);
  eq. (8)'s ``l'_j + 1`` convention is ``(output + 1)`` summed over completed requests.
* Decision epochs are batch completions and arrivals to an idle GPU (spec §3.0): the
  engine asks the policy after every batch and, when the policy idles, at the next arrival.
* Leftovers: once no request will arrive any more in a run that drains
  (``State.arrivals_done``: ``simulate`` without a horizon — ``n_requests`` or a finite
  trace — has admitted its whole trace), a type or segment with fewer prompts waiting than
  its threshold is ready all the same, and its cohorts run to completion, as the authors'
  code does at the end of a trace. Without this a run that should drain strands its last
  partial cohorts. A run with a horizon keeps Algorithm 1 literal to the end: the system
  goes on past it, and what is left at the horizon is censored, not stranded.
* Memory: WAIT given ``classes`` refuses a ``memory`` below ``M^π`` (eq. 9); without
  ``classes``, and Nested WAIT with ``overflow="gate"``, keep every batch within ``memory``
  by leaving out the ready types (segments) whose step does not fit. When nothing fits, the
  resident requests decode alone, furthest along first, as many as fit — each finish frees
  its cache — and if not even one token fits, the most recently started request is evicted
  (its progress lost, recomputed later), as vLLM does; with nothing resident, the waiting
  prompts that fit start, in arrival order, below their threshold.
* Speed: without a memory limit and with a token-count time model, ``simulate`` runs both
  schedulers as the bulk rule ``cohorts`` (:mod:`queuetheory.engine.kernels.cohorts`), with
  the records of the step-by-step engine; the memory gates and ``LinearMemoryTime`` step.
  FCFSRestart without a memory limit is FCFS Sarathi without a token budget and runs as the
  bulk rule ``decode_first_fill``; with a limit it steps.
* Nested WAIT does not know types: it only reads a request's stage (``decoded``) and the
  segment boundaries; a request's ``output`` is used only by the engine to end it (EOS).
"""

from __future__ import annotations

from bisect import bisect_right, insort
from functools import partial

import numpy as np

from ..engine import Batch
from ..engine.kernels import cohorts, decode_first_fill
from .base import Policy, decides_as_shipped, round_model

__all__ = ["WAIT", "NestedWAIT", "FCFSRestart"]

_NONE = np.empty(0, dtype=np.int64)


def _first_per_group(positions: np.ndarray, group: np.ndarray, quota: np.ndarray) -> np.ndarray:
    """The first ``quota[g]`` of ``positions`` (already in FIFO order) of each group ``g``."""
    if positions.size == 0:
        return positions
    counts = np.bincount(group)
    present = counts.nonzero()[0]
    if present.size <= 8:               # a few groups: each one's first members, no sort
        keep = np.zeros(positions.size, dtype=bool)
        for g in present.tolist():
            keep[(group == g).nonzero()[0][: quota[g]]] = True
        return positions[keep]
    # a stable sort of small integers is a radix sort (the same order, in linear time)
    order = np.argsort(group.astype(np.int16) if counts.size < 1 << 15 else group,
                       kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size) - (np.cumsum(counts) - counts)[group[order]]
    return positions[rank < quota[group]]


def _relieve(state, resident=None) -> tuple[Batch, bool]:
    """The batch when no cohort step fits the memory: decodes of resident requests, furthest
    along first (most tokens decoded: the policy reads stages, never output lengths), as many
    as fit; or, if not one token fits, evict the last started. With nothing resident, the
    waiting prompts whose whole prefill fits, in arrival order (at least the first: a lone
    request always fits, ``simulate`` checks it). Also whether every resident request
    decodes (nothing evicted). ``resident``: the positions of the resident requests where
    the policy's books know them (else read from the whole state)."""
    if resident is None:
        resident = (state.in_decode & (state.kv > 0)).nonzero()[0]
    if resident.size == 0:
        waiting = (state.prefilled == 0).nonzero()[0]
        fits = np.cumsum(state.prompt[waiting]) <= state.memory_free
        new = waiting[: max(1, int(fits.sum()))] if waiting.size else waiting
        return Batch(new, state.prompt[new]), False
    tab, rid = state._t, state.rid[resident]
    room, evict = int(state.memory_free), resident[:0]
    if room < 1:                     # the engine idles on an eviction alone: decode too
        evict, resident, rid = resident[-1:], resident[:-1], rid[:-1]
        room += int(tab.kv(state.rid[evict])[0])
    if state.token_budget is not None:
        room = min(room, int(state.token_budget))
    if room >= resident.size and not evict.size:      # every resident request decodes
        return Batch(decode=resident), True
    order = resident[np.argsort(-tab.decoded[rid], kind="stable")]
    return Batch(decode=np.sort(order[:room]), evict=evict), False


class _Waiting:
    """The requests of one queue waiting for their prefill, in arrival order (ids
    ascending): those never started (``fresh``, appended as they arrive, the first
    ``head`` of them gone) merged with those evicted back to it (``back``)."""

    __slots__ = ("fresh", "head", "back")

    def __init__(self, rids=()):
        self.fresh, self.head, self.back = list(rids), 0, []

    def __len__(self) -> int:
        return len(self.fresh) - self.head + len(self.back)

    def first(self, k: int) -> list:
        """The first ``k`` ids (fewer if fewer wait)."""
        fresh = self.fresh[self.head: self.head + k]
        return sorted(self.back[:k] + fresh)[:k] if self.back else fresh

    def take(self, k: int) -> None:
        """Remove the first ``k``."""
        first = self.first(k)
        gone = bisect_right(self.back, first[-1]) if self.back else 0
        del self.back[:gone]
        self.head += len(first) - gone
        if self.head > 1024 and 2 * self.head > len(self.fresh):
            del self.fresh[: self.head]
            self.head = 0


class _Books:
    """What a gated scheduler keeps between decisions instead of reading every request:
    the waiting queues (one per group: WAIT's types, Nested WAIT's one entry queue), the
    started requests (ids ascending; every one resident, its prompt prefilled whole), the
    last id seen arrive, what the last batch started and evicted, and each queue's first
    ``quota[g]`` ids (its next cohort, :meth:`heads`) with their prompts' sum.

    :meth:`sync` brings them up to a new state from the last batch's members alone (who
    finished, who arrived); they hold only while the state is the one the engine reached
    by running this policy's batches (checked: the same table, the last batch applied, the
    count of requests), and :meth:`of` builds them afresh, from every request, wherever a
    state is not (``None`` where some request is part-way through a prefill or was put back
    by a recompute, which the books do not describe: the policy then reads the state)."""

    def __init__(self, table, queues, started, seen, quota):
        self.table, self.queues, self.started, self.seen = table, queues, started, seen
        self.waiting = np.array([len(q) for q in queues], dtype=np.int64)   # per queue
        self.admitted = self.evicted = _NONE
        self.quota = quota.tolist()
        self.offset = np.concatenate([[0], np.cumsum(quota)]).tolist()
        self.slots = np.full(self.offset[-1], -1, dtype=np.int64)   # the heads, -1: none
        self.slot_group = np.repeat(np.arange(quota.size), quota)
        self.head_need = np.zeros(quota.size, dtype=np.int64)     # the heads' prompts
        self.dirty = set(range(quota.size))     # the queues whose heads may have moved

    def heads(self) -> np.ndarray:
        """The slots: queue ``g``'s first ``quota[g]`` ids (ascending, ``-1`` past its
        end) at ``offset[g]``; ``head_need`` their prompts' sum. Refreshed where a queue's
        head moved since the last call (a take, an eviction back, an arrival to a queue
        shorter than its quota)."""
        for g in self.dirty:
            first, lo, k = self.queues[g].first(self.quota[g]), self.offset[g], self.quota[g]
            self.slots[lo: lo + k] = first + [-1] * (k - len(first))
            self.head_need[g] = int(self.table.prompt[first].sum()) if first else 0
        self.dirty.clear()
        return self.slots

    @classmethod
    def of(cls, state, policy):
        """The books of ``state`` built from every request, or ``None`` (see above)."""
        tab, live = state._t, state.rid
        if tab.recomputing or np.count_nonzero(live[1:] <= live[:-1]):
            return None
        prefilled, waiting = state.prefilled, state.prefilled == 0
        if (np.count_nonzero(~waiting & (prefilled != state.prompt))
                or np.count_nonzero(waiting & (state.in_decode | (state.decoded > 0)))):
            return None
        policy._arrived(tab, live)
        wait = live[waiting]
        group = policy._group(tab, wait)
        queues = [_Waiting(wait[group == g].tolist()) for g in range(policy._groups)]
        return cls(tab, queues, live[~waiting], int(live[-1]) if live.size else -1,
                   policy._quota)

    def sync(self, state, policy) -> bool:
        """Bring the books up to ``state``; whether they hold there."""
        tab, live = state._t, state.rid
        done, ev = self.admitted, self.evicted
        if (tab is not self.table or tab.recomputing
                or (done.size and np.count_nonzero(tab.prefilled[done] != tab.prompt[done]))
                or (ev.size and np.count_nonzero(tab.prefilled[ev]))):
            return False
        started = self.started
        if started.size:
            started = self.started = started[np.isnan(tab.finish[started])]
        new = live[int(live.searchsorted(self.seen, side="right")):]
        if new.size:
            policy._arrived(tab, new)
            group = policy._group(tab, new)
            if new.size == 1:
                g = int(group[0])
                self.queues[g].fresh.append(int(new[0]))
                if self.waiting[g] < self.quota[g]:
                    self.dirty.add(g)
            else:
                for g in np.unique(group).tolist():
                    self.queues[g].fresh.extend(new[group == g].tolist())
                    if self.waiting[g] < self.quota[g]:
                        self.dirty.add(g)
            self.waiting += np.bincount(group, minlength=self.waiting.size)
            self.seen = int(new[-1])
        return live.size == started.size + int(self.waiting.sum())

    def commit(self, state, batch, policy) -> None:
        """The batch decided on ``state``: its prefills leave their queues (the first of
        each) and start, its evicted request goes back to its queue."""
        tab, live = state._t, state.rid
        pre, ev = live[batch.prefill], live[batch.evict]
        started = self.started
        if pre.size:
            taken = np.bincount(policy._group(tab, pre), minlength=self.waiting.size)
            for g in taken.nonzero()[0].tolist():
                self.queues[g].take(int(taken[g]))
                self.dirty.add(g)
            self.waiting -= taken
            started = np.sort(np.concatenate([started, pre]))
        for r, g in zip(ev.tolist(), policy._group(tab, ev).tolist(), strict=True):
            started = started[started != r]
            insort(self.queues[g].back, r)
            self.waiting[g] += 1
            self.dirty.add(g)
        self.started, self.admitted, self.evicted = started, pre, ev


class _Gated(Policy):
    """Ao et al.'s schedulers with the memory gate of the module notes: the batches of
    :func:`_relieve` that decode every resident request repeat (:meth:`steady`), and so do
    WAIT's decode-only cohort steps (:meth:`WAIT._decide`). A shipped
    scheduler keeps books (:class:`_Books`) and decides from them, reading only the
    requests it starts, runs or relieves; a subclass that decides otherwise reads the
    state (``_decide_whole``)."""

    #: how many waiting queues the books keep
    _groups = 1

    @property
    def _quota(self) -> np.ndarray:
        """The prompts a queue's next cohort takes (its threshold)."""
        return self._n[: self._groups]

    def _reset(self):
        self._repeats = None      # the decodes of the last batch that repeats (steady)
        self._books = None
        self._kept = decides_as_shipped(self)

    def _relieve(self, state, resident=None) -> Batch:
        batch, whole = _relieve(state, resident)
        if whole:
            self._repeats = batch.decode
        return batch

    def schedule(self, state) -> Batch:
        self._repeats = None
        return super().schedule(state)

    def _schedule(self, state):
        books = self._books
        if not self._kept:
            return self._decide_whole(state)
        if books is None or not books.sync(state, self):
            books = self._books = _Books.of(state, self)
            if books is None:
                return self._decide_whole(state)
        batch = self._decide(state, books)
        books.commit(state, batch, self)
        return batch

    def _group(self, tab, rids) -> np.ndarray:
        """The waiting queue of each of ``rids`` (one queue: all 0)."""
        return np.zeros(rids.size, dtype=np.int64)

    def _repeating(self, batch) -> bool:
        """Whether ``batch`` is the one this policy as shipped just decided to repeat (a
        relieving batch of every resident, or WAIT's decode-only cohort step)."""
        repeats = self._repeats
        return (repeats is not None and decides_as_shipped(self)
                and batch.decode.size == repeats.size and not batch.prefill.size)

    def steady(self, state, batch):
        """A relieving batch that decodes every resident request repeats while only they
        decode: nothing arrives, so the ready types (segments) and their waiting prompts stay;
        a type's step that did not fit the memory left never fits less of it (Nested WAIT:
        a request that crosses out of segment 1 takes one token off its step, and the
        memory left falls by one for every resident request); and all residents decode
        again as long as their memory after the batch fits ``M``, which the engine checks.
        The policy keeps no other state (its books change only at a decision). WAIT's
        decode-only cohort steps repeat too (:meth:`WAIT._decide`)."""
        repeats = self._repeating(batch)
        self._repeats = None
        return repeats


def _fitting_groups(state, group: np.ndarray, need: np.ndarray, groups: int) -> np.ndarray:
    """Whether each of ``groups`` step groups (types or segments) joins the batch: in index
    order, a group joins while the tokens its members add (``need``) still fit ``memory``."""
    return _fitting(np.bincount(group, weights=need, minlength=groups), state.memory_free)


def _fitting(per: np.ndarray, room) -> np.ndarray:
    """:func:`_fitting_groups` from the tokens each group adds (``per``) and the memory
    left (``room``)."""
    if per.sum() <= room:                # all of them fit together
        return per > 0
    keep = np.zeros(per.size, dtype=bool)
    for g, x in enumerate(per.tolist()):
        if 0 < x <= room:
            keep[g] = True
            room -= x
    return keep


class WAIT(_Gated):
    """WAIT (Algorithm 1): type ``j`` joins a batch only when at least
    ``n_j = thresholds[j]`` type-``j`` prompts wait for prefill; it then prefills the first
    ``n_j`` of them and advances every in-progress type-``j`` cohort by one stage. Other
    types' cohorts pause with their KV caches kept. The GPU idles when no type is ready.

    Every cohort has exactly ``n_j`` prompts, so total KV memory never exceeds
    ``M^π = Σ_j n_j (l'_j+1)(l_j + l'_j/2)`` (:func:`~queuetheory.fluid.wait_memory`).
    Given ``classes`` (fixed lengths), the policy refuses to run with ``memory < M^π``;
    without them it keeps to ``memory`` with the gate of the module notes, which also says
    how leftovers finish once arrivals end.

    Parameters
    ----------
    thresholds : sequence of int
        ``n_j``: the prompts per stage of each type, integers ``>= 1``, one per class (a
        request's class is its type).
    classes : Workload, RequestClass or sequence of RequestClass, optional
        The fixed-length types ``(l_j, l'_j, λ_j)``, giving ``M^π`` (``memory_bound``);
        ``None``: no bound, the memory gate instead.

    Raises
    ------
    ValueError
        For thresholds that are not integers ``>= 1``, or not one per class of ``classes``.
    """

    no_token_budget = round_model("Ao et al.")

    def __init__(self, thresholds, classes=None):
        from ..fluid.equilibrium import class_arrays  # the fluid package loads cvxpy: lazily
        from ..fluid.thresholds import check_thresholds, wait_memory

        self.thresholds = tuple(int(x) for x in check_thresholds(thresholds))
        self._n = np.array(self.thresholds, dtype=np.int64)
        self.memory_bound = None
        if classes is not None:
            l, _, _ = class_arrays(classes)
            if l.size != self._n.size:
                raise ValueError(f"thresholds={self.thresholds}: need one per class ({l.size})")
            self.memory_bound = wait_memory(self._n, classes)

    def supports(self, *, memory, first_token) -> str | None:
        if self.memory_bound is not None and memory is not None and memory < self.memory_bound:
            return (f"memory={memory}: below WAIT's M^π = {self.memory_bound:g} for "
                    f"thresholds {self.thresholds}; it could overflow (Ao et al., eq. 9)")
        return None

    def bulk(self, engine):
        """The rule ``cohorts`` (:func:`~queuetheory.engine.kernels.cohorts`, a group per
        type): without a memory limit every decision follows it; the engine steps where
        memory is limited or a class has no threshold (which :meth:`schedule` refuses).

        Parameters
        ----------
        engine : Engine
            The fresh engine of the run, its trace loaded.

        Returns
        -------
        callable or None
            The runner, or ``None`` (the engine steps).
        """
        tab = engine.table
        if (engine.memory is not None or not decides_as_shipped(self)
                or (tab.n and tab.column("cls").max() >= len(self.thresholds))):
            return None
        return partial(cohorts, engine, thresholds=self.thresholds, bounds=None)

    @property
    def _groups(self) -> int:
        return self._n.size

    def _group(self, tab, rids) -> np.ndarray:
        return tab.cls[rids]

    def _arrived(self, tab, rids) -> None:
        """Refuse a request of a class without a threshold."""
        if rids.size and tab.cls[rids].max() >= self._n.size:
            self._no_threshold(int(tab.cls[rids].max()))

    def _no_threshold(self, cls):
        raise ValueError(f"WAIT: a request of class {cls} arrived but only "
                         f"{self._n.size} thresholds were given")

    def _check_memory(self, state):
        if (self.memory_bound is not None and state.memory is not None
                and state.memory < self.memory_bound):
            raise ValueError(f"memory={state.memory}: below WAIT's M^π = {self.memory_bound:g} "
                             f"for thresholds {self.thresholds}; it could overflow (eq. 9)")

    def _decide(self, state, books):
        """The decision of :meth:`_decide_whole` from the books: the ready types from the
        queues' lengths, their first prompts from the queues' heads, their cohorts from
        the started requests."""
        self._check_memory(state)
        tab, live, m = state._t, state.rid, self._n.size
        started, waiting, slots = books.started, books.waiting, books.heads()
        ready = waiting >= self._n
        cls = tab.cls[started]
        cohorts = np.bincount(cls, minlength=m)      # started prompts per type
        if state.arrivals_done:                      # leftovers: every type present runs
            ready |= (waiting > 0) | (cohorts > 0)
        if not ready.any():
            return Batch()
        keep = ready
        if state.memory is not None and self.memory_bound is None:
            keep = _fitting(np.where(ready, books.head_need + cohorts, 0), state.memory_free)
        prefill = slots[keep[books.slot_group]]
        prefill = np.sort(prefill[prefill >= 0])
        decode = started[keep[cls]]
        if prefill.size + decode.size == 0:
            return self._relieve(state, live.searchsorted(started))
        batch = Batch(live.searchsorted(prefill), tab.prompt[prefill], live.searchsorted(decode))
        if not prefill.size:
            # decode-only (every kept type has no prompt waiting): it repeats while only its
            # members decode. The ready types and their waiting prompts stay; the gate's
            # steps stay, only the memory left falls, by ``decode.size`` a batch; the
            # types left out never fit less of it, and the kept ones (whose steps sum to
            # ``decode.size``) fit while the next batch fits ``M``, which the engine checks
            self._repeats = batch.decode
        return batch

    def _decide_whole(self, state):
        cls = state.cls
        if cls.max() >= self._n.size:
            self._no_threshold(int(cls.max()))
        self._check_memory(state)
        waiting = state.prefilled == 0
        m = self._n.size
        ready = np.bincount(cls[waiting], minlength=m) >= self._n
        if state.arrivals_done:                      # leftovers: every type present runs
            ready |= np.bincount(cls, minlength=m) > 0
        if not ready.any():
            return Batch()
        mine = ready[cls]
        new = (waiting & mine).nonzero()[0]
        prefill = _first_per_group(new, cls[new], self._n)
        decode = (~waiting & mine).nonzero()[0]
        if state.memory is not None and self.memory_bound is None:
            members = np.concatenate([prefill, decode])
            need = np.concatenate([state.prompt[prefill], np.ones(decode.size, np.int64)])
            keep = _fitting_groups(state, cls[members], need, m)
            if not keep.all():
                prefill, decode = prefill[keep[cls[prefill]]], decode[keep[cls[decode]]]
                if prefill.size + decode.size == 0:
                    return self._relieve(state)
        return Batch(prefill, state.prompt[prefill], decode)


class NestedWAIT(_Gated):
    """Nested WAIT (Algorithm 2, stage indices corrected).

    ``segments``: the boundaries ``b_1 < … < b_L`` (last stage of each segment) or a
    :class:`~queuetheory.fluid.Segments`; ``thresholds``: ``n_i`` prompts per stage of
    segment ``i``. Segment 1 is stages ``0..b_1``, segment ``i`` stages ``b_{i−1}+1..b_i``.
    Its entry queue holds prompts that finished stage ``b_{i−1}`` and are still running
    (un-prefilled prompts for segment 1). With ``I*`` the longest prefix of segments whose
    entry queues hold ``≥ n_i`` prompts, a batch admits the first ``n_i`` of each entry
    queue ``i ≤ I*`` and advances all cohorts of those segments; later segments pause with
    their caches. Prompts whose output ends inside a segment complete there (§3.0.4).

    ``overflow``: ``"soft"`` ignores memory (run with ``memory=None`` and compare the peak
    with a bound, Theorem 2; ``simulate`` refuses a set ``memory``); ``"gate"`` shortens the
    prefix so the batch fits ``memory``, and when not even the first segment fits, lets the
    resident requests decode alone (module notes) — without it, paused later cohorts would
    hold the memory that segment 1 waits for, and the engine would idle for ever.
    Leftovers finish once arrivals end (module notes).

    Parameters
    ----------
    segments : array_like of int or Segments
        The boundaries ``b_1 < … < b_L``, increasing integers ``>= 1``, or a
        :class:`~queuetheory.fluid.Segments` whose ``bounds`` they are.
    thresholds : sequence of int
        ``n_i``: the prompts per stage of each segment, integers ``>= 1``, one per segment.
    overflow : {"soft", "gate"}, default "soft"
        Whether memory is ignored (``"soft"``) or kept by the gate (``"gate"``).

    Raises
    ------
    ValueError
        For boundaries that are not increasing integers ``>= 1``, thresholds that are not
        integers ``>= 1`` or not one per segment, or an unknown ``overflow``.
    """

    no_token_budget = round_model("Ao et al.")

    def __init__(self, segments, thresholds, *, overflow: str = "soft"):
        from ..fluid.nested import Segments  # the fluid package loads cvxpy: lazily
        from ..fluid.thresholds import check_thresholds

        b = segments.bounds if isinstance(segments, Segments) else np.asarray(segments)
        if b.ndim != 1 or b.size == 0 or np.any(b != np.round(b)) or np.any(b < 1) \
                or np.any(np.diff(b) <= 0):
            raise ValueError(f"segments={segments!r}: boundaries must be increasing integers >= 1")
        if overflow not in ("soft", "gate"):
            raise ValueError(f"overflow={overflow!r}: must be 'soft' or 'gate'")
        self.segments = tuple(int(x) for x in b)
        self.thresholds = tuple(int(x) for x in check_thresholds(thresholds, b.size))
        self.overflow = overflow
        self._b = np.array(self.segments, dtype=np.int64)
        self._n = np.array(self.thresholds, dtype=np.int64)

    def segment_of(self, state) -> tuple[np.ndarray, np.ndarray]:
        """Segment index (0-based) of each request's next stage, and whether it is at the
        segment's entry (waiting for prefill, or just past the previous boundary).

        Parameters
        ----------
        state : State
            The requests in the system.

        Returns
        -------
        segment : numpy.ndarray
            Per position, the 0-based segment of its next stage (0 before its prefill).
        entry : numpy.ndarray
            Per position, whether it waits in that segment's entry queue.

        Raises
        ------
        ValueError
            When an output length exceeds the last boundary ``b_L`` (:meth:`_arrived`).
        """
        self._arrived(state._t, state.rid)
        started = state.prefilled > 0
        seg, entry = self._stage(state.decoded)
        return np.where(started, seg, 0), ~started | entry

    def _stage(self, decoded):
        """The segment of a started request's next stage, from its decoded tokens, and
        whether it is at that segment's entry (just past the previous boundary)."""
        seg = np.searchsorted(self._b, decoded, side="right")
        return seg, (seg > 0) & (decoded == self._b[np.maximum(seg - 1, 0)])

    def _arrived(self, tab, rids) -> None:
        """Refuse an output longer than the last segment."""
        if rids.size and tab.output[rids].max() > self._b[-1]:
            raise ValueError(f"NestedWAIT: an output length {int(tab.output[rids].max())} "
                             f"exceeds the last segment boundary {int(self._b[-1])}")

    def bulk(self, engine):
        """The rule ``cohorts`` (:func:`~queuetheory.engine.kernels.cohorts`, a group per
        segment): without a memory limit every decision follows it; the engine steps where
        memory is limited or an output passes the last segment (which :meth:`schedule`
        refuses).

        Parameters
        ----------
        engine : Engine
            The fresh engine of the run, its trace loaded.

        Returns
        -------
        callable or None
            The runner, or ``None`` (the engine steps).
        """
        tab = engine.table
        if (engine.memory is not None or not decides_as_shipped(self)
                or (tab.n and tab.column("output").max() > self.segments[-1])):
            return None
        return partial(cohorts, engine, thresholds=self.thresholds, bounds=self.segments)

    def supports(self, *, memory, first_token) -> str | None:
        if memory is not None and self.overflow == "soft":
            return ("overflow='soft' ignores memory; use overflow='gate' to keep within it, "
                    "or memory=None to compare the peak with a bound")
        return None

    def _gated(self, state) -> bool:
        return self.overflow == "gate" and state.memory is not None

    def _decide(self, state, books):
        """The decision of :meth:`_decide_whole` from the books: segment 1's entry queue
        from the waiting queue's length and head, every later segment's from the started
        requests' stages."""
        tab, live, L = state._t, state.rid, self._n.size
        started, new = books.started, books.heads()
        if not (state.arrivals_done or books.waiting[0] >= self._n[0]):
            return Batch()          # segment 1's entry queue (the waiting one) is short: k = 0
        decoded = tab.decoded[started]
        gated = self._gated(state)
        if gated:
            # the memory after segment 1's step: its prompts and a token for each request
            # in it (none of them at an entry); where it does not fit, no segment joins
            used = (state.memory_used + int(books.head_need[0])
                    + int(np.count_nonzero(decoded < self._b[0])))
            if used > state.memory:
                return self._relieve(state, live.searchsorted(started))
        seg, entry = self._stage(decoded)
        count = np.bincount(seg[entry], minlength=L)       # (no entry in segment 1)
        count[0] += int(books.waiting[0])
        full = count >= self._n
        if state.arrivals_done:                     # leftovers: every segment runs
            full[:] = True
        k = L if full.all() else int(np.argmin(full))       # I*: longest ready prefix, >= 1
        new = new[new >= 0]
        ent = (entry & (seg < k)).nonzero()[0]
        chosen = ~entry & (seg < k)
        chosen[_first_per_group(ent, seg[ent], self._n)] = True
        if gated:                                   # segments 2 … k join while they fit
            fits = used + np.cumsum(np.bincount(seg[chosen], minlength=L)[1:k]) <= state.memory
            k = k if fits.all() else 1 + int(np.argmin(fits))
            chosen &= seg < k
        dec = started[chosen]
        return Batch(live.searchsorted(new), tab.prompt[new], live.searchsorted(dec))

    def _decide_whole(self, state):
        seg, entry = self.segment_of(state)
        L = self._n.size
        full = np.bincount(seg[entry], minlength=L) >= self._n
        if state.arrivals_done:                     # leftovers: every segment runs
            full[:] = True
        k = L if full.all() else int(np.argmin(full))       # I*: longest ready prefix
        if k == 0:
            return Batch()
        ent = (entry & (seg < k)).nonzero()[0]
        admitted = _first_per_group(ent, seg[ent], self._n)
        members = np.sort(np.concatenate([admitted, (~entry & (seg < k)).nonzero()[0]]))
        if self._gated(state):
            new = state.prefilled[members] == 0
            add = np.where(new, state.prompt[members], 1)
            per_seg = np.bincount(seg[members], weights=add, minlength=L)[:k]
            fits = state.memory_used + np.cumsum(per_seg) <= state.memory
            k = int(np.argmin(fits)) if not fits.all() else k
            if k == 0:
                return self._relieve(state)
            members = members[seg[members] < k]
        pre = members[state.prefilled[members] == 0]
        dec = members[state.prefilled[members] > 0]
        return Batch(pre, state.prompt[pre], dec)

    def decodes_through(self, state, batch):
        """A relieving batch of every resident (segment 1 ready, its step over the memory
        left, :meth:`_decide`) repeats, less the residents that finish, whatever arrives:
        segment 1's step holds its entry queue's first ``n_1`` prompts (arrivals join
        behind them), plus a token for each resident still in segment 1, and it does not
        fit while the memory in use plus that step exceeds ``M``; later segments wait
        behind it. The batch of the ``R`` residents leaves ``R`` tokens fewer free than
        the memory left before it, and ``R`` only falls, so the step does not fit while
        that batch leaves less than the prompts' sum less ``R`` (the ``need``); a resident
        that crosses into segment 2 or finishes only takes its token off the step.

        Parameters
        ----------
        state : State
            The state the batch was built on.
        batch : Batch
            The batch :meth:`schedule` returned on it.

        Returns
        -------
        int
            The free memory at which segment 1's step may fit (0: no promise — not such a
            batch, or the step could fit within the residents' own tokens).
        """
        books = self._books
        if books is None or not self._repeating(batch):
            return 0
        return max(int(books.head_need[0]) - batch.decode.size, 0)


class FCFSRestart(Policy):
    """FCFS with eviction and restart, the type-unaware baseline of Props. 4–5 (spec
    §3.5a): every resident request runs each iteration; if the next iteration would exceed
    memory, the most recently admitted residents are evicted (KV dropped, progress lost,
    back to the queue front); then waiting requests are admitted in arrival order while
    their prompts fit. Residents stay a prefix of the arrival order, so both rules amount
    to running the longest arrival-order prefix whose next-iteration memory fits."""

    no_token_budget = round_model("Ao et al.")

    def _reset(self):
        self._resident = _NONE    # the ids resident after the last decision (books)
        self._seen = 0            # every id below it has been seen in a state
        self._books = True        # False once a request arrived holding KV

    def _schedule(self, state):
        r = self._residents(state)
        if r is None:
            return self._schedule_all(state)
        rid, tab, n = state.rid, state._t, state.n
        k = n
        if state.memory is not None:
            k = self._fitting_prefix(state, r)
        self._resident = rid[:k]
        pre = np.arange(r, k)
        evict = np.arange(k, r) if k < r else _NONE
        return Batch(pre, tab.prompt[rid[r:k]], np.arange(min(k, r)), evict)

    def bulk(self, engine):
        """Without a KV-memory limit every request in the system runs each iteration, the
        new ones with their whole prompts: FCFS Sarathi without a token budget, the rule
        ``decode_first_fill`` (:func:`~queuetheory.engine.kernels.decode_first_fill`); with
        a limit, or in a subclass that decides otherwise, the engine steps.

        Parameters
        ----------
        engine : Engine
            The fresh engine of the run, its trace loaded.

        Returns
        -------
        callable or None
            The runner, or ``None`` (the engine steps).
        """
        if engine.memory is not None or not decides_as_shipped(self):
            return None
        return partial(decode_first_fill, engine)

    def _fitting_prefix(self, state, r) -> int:
        """The longest arrival-order prefix whose next-iteration memory fits: the first
        ``r`` (the residents) need their KV and one token each, the others their prompts.
        The residents hold every resident KV token (``memory_used`` less what is held
        outside the requests), so their need is read from it; only when it exceeds the
        memory are their prefix sums needed (an eviction). Past them, the prefix sums of a
        window of prompts, the whole queue only when the window fits entirely."""
        rid, tab, n, memory = state.rid, state._t, state.n, state.memory
        room = memory - (state.memory_used - state.outside_kv + r)
        if room < 0:
            return int((tab.kv(rid[:r]) + 1).cumsum().searchsorted(memory, side="right"))
        if r == n:
            return n
        w = min(n, r + 64)
        while True:
            need = tab.prompt[rid[r:w]].cumsum()
            if w == n or need[-1] > room:
                break
            w = n
        return r + int(need.searchsorted(room, side="right"))

    def _residents(self, state):
        """How many requests are resident: the first ``r`` in arrival order, the residents
        of the last decision still in the system (a resident leaves only by finishing, a
        request becomes one only by this policy's admission, and arrivals join the end),
        or ``None`` where the books cannot tell (a request arrived holding KV, handed over
        prefilled: from then on every decision reads the whole queue)."""
        rid = state.rid
        if self._books and rid[-1] >= self._seen:
            new = rid[int(rid.searchsorted(self._seen)):]
            self._seen = int(rid[-1]) + 1
            self._books = not state._t.prefilled[new].any()
        if not self._books:
            return None
        held = self._resident   # a prefix of the last decision's ids (arrivals join the end):
        # the ids here up to its last one are the residents still here
        return int(rid.searchsorted(held[-1], side="right")) if held.size else 0

    def _schedule_all(self, state):
        """The decision from the whole queue's columns (residents need not be a prefix)."""
        kv, prompt, n = state.kv, state.prompt, state.n
        started = kv > 0
        resident = int(np.count_nonzero(started))
        k = n
        if state.memory is not None:
            w = min(n, resident + 64)
            while True:
                need = np.where(started[:w], kv[:w] + 1, prompt[:w]).cumsum()
                if w == n or need[-1] > state.memory:
                    break
                w = n
            k = int(need.searchsorted(state.memory, side="right"))
        head = started[:k]
        pre = (~head).nonzero()[0]
        dec = head.nonzero()[0]
        evict = _NONE if dec.size == resident else k + started[k:].nonzero()[0]
        return Batch(pre, prompt[pre], dec, evict)

    def steady(self, state, batch):
        """A decode-only batch is the arrival-order prefix ``[0, k)`` of every resident
        request (nothing of it to prefill, nothing resident after it). While only its
        members decode, the prefix sum of next-iteration memory grows: the first waiting
        request (position ``k``), which did not fit, never fits, and the prefix is cut
        before ``k`` (an eviction) only once the members' memory after the batch exceeds
        ``M``, which the engine's check stops before. The policy's books (the residents)
        see only finished members leave.

        Parameters
        ----------
        state : State
            The state the batch was built on.
        batch : Batch
            The batch :meth:`schedule` returned on it.

        Returns
        -------
        bool
            Whether the batch repeats (a decode-only batch without eviction of this policy
            as shipped).
        """
        return (decides_as_shipped(self) and not batch.prefill.size
                and not batch.evict.size)

    def drains(self, state):
        """Every request prefilled and resident: all of them decode, each iteration, while
        their memory after the batch fits ``M`` (the engine's check), to the end.

        Parameters
        ----------
        state : State
            A state where every request in the system is in decode.

        Returns
        -------
        bool
            Whether every request is resident (none waits for its prefill).
        """
        return decides_as_shipped(self) and not np.count_nonzero(state.kv == 0)

    def decodes_through(self, state, batch):
        """A batch of every resident with a request waiting (the arrival-order prefix
        ``[0, k)``, its prompts whole, position ``k`` the first request without KV, evicted
        by this batch or waiting): the waiting request is admitted as soon as its prompt
        fits the memory the residents leave free after their next batch, and residents are
        evicted only where that batch would not fit ``M`` (the engine's check stops
        there); until then every later state decides the residents left again, whatever
        arrives (arrivals queue behind ``k``; a resident that finishes leaves the prefix,
        its KV freed, which the free memory counts).

        Parameters
        ----------
        state : State
            The state the batch was built on.
        batch : Batch
            The batch :meth:`schedule` returned on it.

        Returns
        -------
        int
            The free memory at which the waiting request is admitted: its prompt, less the
            KV the state holds outside its requests (0: no promise — no KV limit, nothing
            waiting, or the books of the residents lost to a request handed over with KV).
        """
        k = batch.decode.size + batch.prefill.size
        if not (decides_as_shipped(self) and self._books and state.memory is not None
                and k < state.n):
            return 0
        return max(int(state._t.prompt[state.rid[k]]) - state.outside_kv, 0)

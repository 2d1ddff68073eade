"""The classic iteration-level schedulers of Li, Dai, Peng §3.

| policy | mixes phases | priority | work-conserving |
|---|---|---|---|
| :class:`Sarathi` | yes | decode | yes (strictly) |
| :class:`Orca` (``chunk=True``) | yes | prefill | yes (strictly) |
| :class:`VLLMVanilla` | no | prefill | no |
| :class:`FasterTransformer` | no | decode | no |

Every policy takes an ``order`` (``"fcfs"``, ``"sjf_prompt"``, ``"sjf_decode"``,
``"sjf_total"``) and an optional batch-size limit ``max_reqs``. With a KV-memory limit they
trim prefills and preempt the most recent request, as vLLM does (:func:`fit_memory`;
:class:`StaticPriority` the most recent of its least important class, as vLLM's priority
scheduling); a
preempted request is recomputed, as in vLLM (``preemption="recompute"``, the default), or
restarted (``preemption="restart"``, the papers' model); see
:mod:`~queuetheory.engine.conventions`.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from ..engine import Batch
from ..engine.conventions import check_preemption
from ..engine.kernels import (
    class_priority_kernel,
    decode_first_fill,
    decode_first_fill_memory,
    decode_priority,
    prefill_batches_kernel,
    prefill_first_fill,
)
from .base import (
    Policy,
    admissible,
    admitted_head,
    check_budget,
    check_max_reqs,
    check_order,
    decides_as_shipped,
    fit_memory,
    ordered,
    take_decodes,
    take_prefills,
)

__all__ = ["Sarathi", "Orca", "VLLMVanilla", "FasterTransformer", "KFCFS", "StaticPriority"]


class _TokenBudgetPolicy(Policy):
    chunk = True

    def __init__(self, token_budget: int, *, order: str = "fcfs", max_reqs: int | None = None,
                 preemption: str = "recompute"):
        self.token_budget = check_budget(token_budget)
        self.order = check_order(order)
        self.max_reqs = check_max_reqs(max_reqs)
        self.preemption = check_preemption(preemption)

    def _candidates(self, state):
        """The admissible prefill candidates and the decode candidates, in order: the first
        ``token_budget`` of each at least (every use takes at most that many: one token
        each), all of them where the order is not FCFS."""
        if self.order == "fcfs":
            return self._fcfs_candidates(state)
        in_decode = state.in_decode
        dec = ordered(state, in_decode.nonzero()[0], self.order)
        pre = ordered(state, (~in_decode).nonzero()[0], self.order)
        return admissible(state, pre, self._decodes_beside_prefills(dec.size),
                          most=self.token_budget), dec

    def _fcfs_candidates(self, state):
        """:meth:`_candidates` in arrival order, read in growing prefixes of the queue until
        the first ``token_budget`` decode candidates (or all) are in it and
        :func:`~.base.admitted_head` says later prefill candidates change nothing."""
        n, most = state.n, self.token_budget
        decodes = self._decodes_beside_prefills(state.n_decode)
        want = min(state.n_decode, most)
        m = min(n, 256)
        while True:
            in_decode = state.of("in_decode", slice(0, m))
            dec = in_decode.nonzero()[0]
            if m == n:
                return admissible(state, (~in_decode).nonzero()[0], decodes, most), dec
            if dec.size >= want:
                pre, decided = admitted_head(state, (~in_decode).nonzero()[0], decodes, most)
                if decided:
                    return pre, dec
            m = min(n, 4 * m)

    def _decodes_beside_prefills(self, n_decode):
        """The decode tokens of a batch that takes prefills, given ``n_decode`` requests in
        decode (what the memory for new prefills must leave): all of them by default."""
        return n_decode

    def _prefills(self, state, pre, budget, max_reqs, chunk=None):
        pre = pre[: max(budget, 0)]     # every candidate owes at least one prompt token
        return take_prefills(pre, state.remaining_prefill_of(pre), budget, max_reqs,
                             self.chunk if chunk is None else chunk)

    def _finish(self, state, prefill, chunk, decode) -> Batch:
        if state.memory is None:
            return Batch(prefill, chunk, decode)
        return fit_memory(state, prefill, chunk, decode, rank=self._eviction_rank(state))

    def _eviction_rank(self, state):
        """Per request, how early :func:`fit_memory` evicts it (larger first, then the most
        recent), or ``None``: the most recent first, as vLLM under FCFS."""
        return None

    @staticmethod
    def _left(max_reqs, used):
        return None if max_reqs is None else max_reqs - used

    @staticmethod
    def _decode_only(batch) -> bool:
        return not batch.prefill.size and not batch.evict.size and bool(batch.decode.size)

    def _no_prefill_candidate(self, state) -> bool:
        """No prefill can start now or over a decode-only stretch: memory left only shrinks,
        so a new request that :func:`admissible` turns away stays turned away."""
        return not self._candidates(state)[0].size

    def bulk(self, engine):
        """Under FCFS, the policy's bulk rule (:meth:`_kernel`), with ``max_reqs`` and,
        under recompute preemption, a KV-memory limit; ``None`` for a subclass that decides
        otherwise (:func:`~.base.decides_as_shipped`)."""
        if (not decides_as_shipped(self) or self.order != "fcfs"
                or (engine.memory is not None and engine.preemption != "recompute")):
            return None
        return self._kernel(engine)

    def _kernel(self, engine):
        """The runner of this scheduler's FCFS rule on ``engine``, or ``None``."""
        return None

    def steady(self, state, batch):
        """A decode-only batch repeats while its members only decode: the ordered decode
        candidates keep their order under every ``order`` rule (members' keys all drop by one,
        non-members' do not change), so ``take_decodes`` picks the same members, and
        :func:`fit_memory` keeps them as long as they fit, which the engine checks — when no
        resident request is part-way through its prefill (whose promised KV the engine's
        check does not see)."""
        return (decides_as_shipped(self) and self._decode_only(batch)
                and (state.memory is None or not self._promised(state))
                and self._steady_prefills(state, batch))

    @staticmethod
    def _promised(state) -> bool:
        return state.promised > 0          # (each such request has prefill left)

    def drains(self, state):
        """With every request in decode and no more of them than the token budget and
        ``max_reqs`` allow, every policy here decodes them all (no prefill candidate, and
        ``take_decodes`` takes every candidate), as long as :func:`fit_memory` need not
        evict, which the engine checks. Request-level FasterTransformer's cohort holds
        them all: only its members ever enter decode."""
        return (decides_as_shipped(self) and state.n <= self.token_budget
                and (self.max_reqs is None or state.n <= self.max_reqs))

    def _steady_prefills(self, state, batch) -> bool:
        return self._no_prefill_candidate(state)


class Sarathi(_TokenBudgetPolicy):
    """Sarathi-Serve / vLLM with chunked prefill: decode-first, then chunked prefills up to
    the token budget (Li, Dai, Peng). Strictly work-conserving.

    Parameters
    ----------
    token_budget : int
        The per-batch token budget ``b`` (Li, Dai, Peng, 2.5d): prefill and decode tokens of
        a batch together.
    order : {"fcfs", "sjf_prompt", "sjf_decode", "sjf_total"}, default "fcfs"
        The order in which candidates are taken (:func:`~queuetheory.policies.ordered`).
    max_reqs : int, optional
        The most requests in a batch; ``None``: no cap.
    preemption : {"recompute", "restart"}, default "recompute"
        What the engine does with a request the policy evicts: vLLM's recompute or the
        papers' restart (:mod:`~queuetheory.engine.conventions`).

    Raises
    ------
    ValueError
        For a ``token_budget`` or ``max_reqs`` that is not a positive integer, or an
        unknown ``order`` or ``preemption``.
    """

    def _schedule(self, state):
        pre, dec = self._candidates(state)
        d = take_decodes(dec, self.token_budget, self.max_reqs)
        p, c = self._prefills(state, pre, self.token_budget - d.size,
                              self._left(self.max_reqs, d.size))
        return self._finish(state, p, c, d)

    def _decodes_beside_prefills(self, n_decode):
        return min(n_decode, self.token_budget,
                   n_decode if self.max_reqs is None else self.max_reqs)

    def _kernel(self, engine):
        """The rule ``decode_first_fill``; with ``max_reqs`` or a KV-memory limit,
        :func:`~queuetheory.engine.kernels.decode_first_fill_memory`."""
        if engine.memory is None and self.max_reqs is None:
            return partial(decode_first_fill, engine)
        return partial(decode_first_fill_memory, engine, max_reqs=self.max_reqs)

    def _steady_prefills(self, state, batch):
        d = batch.decode.size
        full = d >= self.token_budget or (self.max_reqs is not None and d >= self.max_reqs)
        return full or self._no_prefill_candidate(state)


class Orca(_TokenBudgetPolicy):
    """Orca: prefill-first with mixed batches (Li, Dai, Peng). With ``chunk=True`` (default)
    the last prompt is split at the budget, which makes it strictly work-conserving; with
    ``chunk=False`` only whole prompts enter and it is not.

    Parameters
    ----------
    token_budget : int
        The per-batch token budget ``b`` (Li, Dai, Peng, 2.5d): prefill and decode tokens of
        a batch together.
    order : {"fcfs", "sjf_prompt", "sjf_decode", "sjf_total"}, default "fcfs"
        The order in which candidates are taken (:func:`~queuetheory.policies.ordered`).
    max_reqs : int, optional
        The most requests in a batch; ``None``: no cap.
    chunk : bool, default True
        Whether the last prompt is split at the budget boundary.
    preemption : {"recompute", "restart"}, default "recompute"
        What the engine does with a request the policy evicts: vLLM's recompute or the
        papers' restart (:mod:`~queuetheory.engine.conventions`).

    Raises
    ------
    ValueError
        For a ``token_budget`` or ``max_reqs`` that is not a positive integer, or an
        unknown ``order`` or ``preemption``.
    """

    def __init__(self, token_budget, *, order="fcfs", max_reqs=None, chunk: bool = True,
                 preemption="recompute"):
        super().__init__(token_budget, order=order, max_reqs=max_reqs, preemption=preemption)
        self.chunk = bool(chunk)

    def _schedule(self, state):
        pre, dec = self._candidates(state)
        p, c = self._prefills(state, pre, self.token_budget, self.max_reqs)
        d = take_decodes(dec, self.token_budget - int(c.sum()), self._left(self.max_reqs, p.size))
        return self._finish(state, p, c, d)

    def _kernel(self, engine):
        """The rule ``prefill_first_fill`` (with or without chunking)."""
        return partial(prefill_first_fill, engine, chunk=self.chunk, max_reqs=self.max_reqs)


class VLLMVanilla(_TokenBudgetPolicy):
    """Vanilla vLLM: prefill-prioritised, no mixed batches (Li, Dai, Peng).

    A batch is prefill-only (whole prompts in order until the next does not fit; a prompt
    longer than the budget is chunked) whenever a prompt waits, otherwise decode-only.
    Not work-conserving.

    Parameters
    ----------
    token_budget : int
        The per-batch token budget ``b`` (Li, Dai, Peng, 2.5d): prefill and decode tokens of
        a batch together.
    order : {"fcfs", "sjf_prompt", "sjf_decode", "sjf_total"}, default "fcfs"
        The order in which candidates are taken (:func:`~queuetheory.policies.ordered`).
    max_reqs : int, optional
        The most requests in a batch; ``None``: no cap.
    preemption : {"recompute", "restart"}, default "recompute"
        What the engine does with a request the policy evicts: vLLM's recompute or the
        papers' restart (:mod:`~queuetheory.engine.conventions`).

    Raises
    ------
    ValueError
        For a ``token_budget`` or ``max_reqs`` that is not a positive integer, or an
        unknown ``order`` or ``preemption``.
    """

    chunk = False

    def _decodes_beside_prefills(self, n_decode):
        return 0        # a prefill batch carries no decode

    def _kernel(self, engine):
        """The rule ``prefill_batches``."""
        return partial(prefill_batches_kernel(engine, self.max_reqs), engine)

    def _schedule(self, state):
        pre, dec = self._candidates(state)
        if pre.size:
            p, c = self._prefills(state, pre, self.token_budget, self.max_reqs)
            return self._finish(state, p, c, [])
        return self._finish(state, [], [], take_decodes(dec, self.token_budget, self.max_reqs))

    def _steady_prefills(self, state, batch):
        return True     # a decode-only batch means no prefill candidate was admissible


class FasterTransformer(_TokenBudgetPolicy):
    """FasterTransformer: decode-prioritised, no mixed batches (Li, Dai, Peng).

    ``mode="iteration"`` (default, the paper's description): a decode-only batch whenever a
    request decodes, else a prefill-only batch (chunked). ``mode="request"``: request-level
    batching: a cohort of up to ``max_reqs`` waiting requests is prefilled, then decoded until
    every member finishes, while arrivals wait (spec §2 item 4, ``ft_static``).

    Parameters
    ----------
    token_budget : int
        The per-batch token budget ``b`` (Li, Dai, Peng, 2.5d): prefill and decode tokens of
        a batch together.
    order : {"fcfs", "sjf_prompt", "sjf_decode", "sjf_total"}, default "fcfs"
        The order in which candidates are taken (:func:`~queuetheory.policies.ordered`).
    max_reqs : int, optional
        The most requests in a batch (in request mode the cohort size, required); ``None``: no
        cap.
    mode : {"iteration", "request"}, default "iteration"
        Iteration-level or request-level batching.
    preemption : {"recompute", "restart"}, default "recompute"
        What the engine does with a request the policy evicts: vLLM's recompute or the
        papers' restart (:mod:`~queuetheory.engine.conventions`).

    Raises
    ------
    ValueError
        For a ``token_budget`` or ``max_reqs`` that is not a positive integer, an unknown
        ``order``, ``preemption`` or ``mode``, or request mode without ``max_reqs``.
    """

    def __init__(self, token_budget, *, order="fcfs", max_reqs=None, mode: str = "iteration",
                 preemption="recompute"):
        super().__init__(token_budget, order=order, max_reqs=max_reqs, preemption=preemption)
        if mode not in ("iteration", "request"):
            raise ValueError(f"mode={mode!r}: must be 'iteration' or 'request'")
        if mode == "request" and max_reqs is None:
            raise ValueError("max_reqs=None: request-level FasterTransformer needs a cohort size")
        self.mode = mode

    def supports(self, *, memory, first_token) -> str | None:
        if memory is not None and self.mode == "request":
            return "request-level batching keeps its cohort whole and has no KV-memory rule"
        return None

    def _reset(self):
        self._cohort = np.empty(0, dtype=np.int64)

    def _kernel(self, engine):
        """The rule ``decode_priority`` in iteration mode. Request mode steps: a cohort's
        decode phase runs in one stretch through arrivals (:meth:`decodes_through`), and a
        rule of its own bought 1.6–1.8× over that (``benchmarks/README.md``), under the ~3× a
        bulk rule must buy to be kept."""
        if self.mode == "request":
            return None
        return partial(decode_priority, engine, max_reqs=self.max_reqs)

    def _schedule(self, state):
        if self.mode == "iteration":
            pre, dec = self._candidates(state)
            if dec.size:
                return self._finish(state, [], [], take_decodes(dec, self.token_budget,
                                                                self.max_reqs))
            p, c = self._prefills(state, pre, self.token_budget, self.max_reqs)
            return self._finish(state, p, c, [])
        rid, cohort = state.rid, self._cohort       # (ids ascending: members by search)
        members = rid.searchsorted(cohort)
        members = members[rid.take(members, mode="clip") == cohort]   # those still here
        if members.size == 0:
            members = (np.arange(min(state.n, self.max_reqs)) if self.order == "fcfs" else
                       ordered(state, np.arange(state.n), self.order)[: self.max_reqs])
            self._cohort = state.rid[members]
        members = np.sort(members)
        pre = members[~state.of("in_decode", members)]
        if pre.size:
            p, c = self._prefills(state, pre, self.token_budget, None, chunk=True)
            return self._finish(state, p, c, [])
        return self._finish(state, [], [], take_decodes(members, self.token_budget))

    def _steady_prefills(self, state, batch):
        return True     # decode priority (and a fixed cohort in request mode)

    def decodes_through(self, state, batch):
        """A decode-only batch of every request in decode, none evicted. Iteration mode
        decodes while any request decodes, so an arrival waits until none does; request
        mode's batch is the whole cohort, every member prefilled, and an arrival joins no
        cohort until every member has finished (``_cohort`` is read against ``rid`` at the
        next call). Each call then decodes the members left, which all fit the budget and
        ``max_reqs``, whatever arrives; with a KV-memory limit :func:`fit_memory` keeps
        them while they fit, which the engine checks — when no resident is part-way
        through its prefill (its promised KV the check does not see), as :meth:`steady`
        requires.

        Parameters
        ----------
        state : State
            The state the batch was built on.
        batch : Batch
            The decode-only batch :meth:`schedule` returned on it.

        Returns
        -------
        bool
            Whether no resident is part-way through its prefill under a KV-memory limit
            (as shipped).
        """
        return decides_as_shipped(self) and not (batch.prefill.size or batch.evict.size) and (
            state.memory is None or not self._promised(state))


class StaticPriority(_TokenBudgetPolicy):
    """Work-conserving static priority between classes (Li, Dai, Peng §4.2).

    For each class in ``class_order`` (most important first): its decode tokens, then its
    prefill tokens with the remaining budget. Lower classes fill what is left, so tokens mix
    only when the higher classes cannot fill a batch. Within a class: ``order``.

    Parameters
    ----------
    token_budget : int
        The per-batch token budget ``b`` (Li, Dai, Peng, 2.5d): prefill and decode tokens of
        a batch together.
    class_order : sequence of int
        The class indices, most important first; a class present in the system but not
        listed is refused when the policy meets it (``ValueError`` from :meth:`schedule`).
    order : {"fcfs", "sjf_prompt", "sjf_decode", "sjf_total"}, default "fcfs"
        The order in which candidates are taken (:func:`~queuetheory.policies.ordered`).
    max_reqs : int, optional
        The most requests in a batch; ``None``: no cap.
    preemption : {"recompute", "restart"}, default "recompute"
        What the engine does with a request the policy evicts: vLLM's recompute or the
        papers' restart (:mod:`~queuetheory.engine.conventions`).

    Raises
    ------
    ValueError
        For a ``token_budget`` or ``max_reqs`` that is not a positive integer, an unknown
        ``order`` or ``preemption``, or a ``class_order`` that is empty, holds a
        non-integer or lists a class twice.
    """

    def __init__(self, token_budget, class_order, *, order="fcfs", max_reqs=None,
                 preemption="recompute"):
        super().__init__(token_budget, order=order, max_reqs=max_reqs, preemption=preemption)
        try:
            order_ = tuple(class_order)
        except TypeError:
            order_ = None
        if not order_ or not all(isinstance(c, int | np.integer) and not isinstance(c, bool)
                                 for c in order_):
            raise ValueError(f"class_order={class_order!r}: must be a non-empty sequence of "
                             "class indices (integers), most important first")
        self.class_order = tuple(int(c) for c in order_)
        if len(set(self.class_order)) != len(self.class_order):
            raise ValueError(f"class_order={class_order!r}: lists a class twice")
        index = [c for c in self.class_order if c >= 0]     # the engine's classes are >= 0
        self._known = np.zeros(max(index, default=-1) + 1, bool)
        self._known[index] = True
        self._rank = np.zeros(self._known.size, np.int64)     # class -> its place in the order
        self._rank[index] = [i for i, c in enumerate(self.class_order) if c >= 0]
        self._every_class = bool(self._known.all())

    def _schedule(self, state):
        budget, left = self.token_budget, self.max_reqs
        ps, cs, ds = [], [], []
        cls = state.cls
        self._check_classes(cls)
        # FCFS without a memory limit looks at no more candidates than the budget can take:
        # every prefill candidate owes at least one prompt token, every decode one token
        head = self.order == "fcfs" and state.memory is None
        in_decode = state.in_decode
        decoding = in_decode.nonzero()[0]
        decoding_cls = cls[decoding]
        for k in self.class_order:
            if budget <= 0 or left == 0:
                break           # the higher classes filled the batch
            dec = decoding[decoding_cls == k]
            if head:            # the first `budget` prefills lie among the first
                mine = np.flatnonzero(cls == k)[: budget + dec.size]   # budget + |dec|
                dec, pre = dec[:budget], mine[~in_decode[mine]][:budget]
            else:
                pre = np.flatnonzero((cls == k) & ~in_decode)
                dec = ordered(state, dec, self.order)
                pre = admissible(state, ordered(state, pre, self.order))
            d = take_decodes(dec, budget, left)
            budget -= d.size
            left = self._left(left, d.size)
            p, c = self._prefills(state, pre, budget, left)
            budget -= int(c.sum())
            left = self._left(left, p.size)
            ps.append(p), cs.append(c), ds.append(d)
        return self._finish(state, np.concatenate(ps), np.concatenate(cs), np.concatenate(ds))

    def _eviction_rank(self, state):
        """The residents of the least important class go first (the most recently arrived
        among them), as vLLM's priority scheduling evicts: a class-blind eviction can
        preempt a more important request for the promised KV of a less important one, again
        and again."""
        return self._rank[state.cls]

    def _kernel(self, engine):
        """The rule ``class_priority_fill``; FCFS Sarathi's when the requests are all of one
        class; ``None`` when a class present is missing from ``class_order`` (the engine
        steps, and :meth:`schedule` refuses it)."""
        kernel = class_priority_kernel(engine, self.class_order, self.max_reqs)
        return None if kernel is None else partial(kernel, engine)

    def _check_classes(self, cls):
        known = self._known
        if not cls.size or (self._every_class and cls.max() < known.size):
            return              # classes 0 … K-1 all listed, and the engine's are >= 0
        if cls.max() >= known.size or not known[cls].all():
            unknown = (cls >= known.size) | ~known[np.minimum(cls, known.size - 1)]
            raise ValueError(f"class_order={self.class_order}: misses classes "
                             f"{sorted(set(cls[unknown].tolist()))} present in the system")


class KFCFS(Policy):
    """``(K_p, K_d)``-FCFS (Li, Dai, Peng): the inner policy only sees the ``K_p`` oldest
    requests in prefill and the ``K_d`` oldest in decode. Work-conserving inner policies stay
    so only when ``K_p, K_d >= b``.

    **When the windows never bind.** Around FCFS :class:`Sarathi` with token budget ``b``
    (any ``max_reqs``, with or without a KV-memory limit), ``K_p >= b`` and ``K_d >= b``
    make every decision the inner policy's own on the whole state, so :meth:`bulk` is
    Sarathi's (``decode_first_fill``). Proof, by induction over iterations, in a state the
    inner rule reaches (:mod:`~queuetheory.engine.kernels.decode_first_fill`): at most ``b``
    requests are in decode, and the requests holding KV are the oldest in the system, all in
    decode but possibly the youngest of them, part-way through its prefill. (i) Decodes:
    Sarathi takes the first ``min(|decode|, b, max_reqs)`` requests in decode in arrival
    order, all of them among the ``K_d >= b`` oldest. (ii) Prefills: every candidate owes at
    least one prompt token, so Sarathi fills its room ``<= b`` from the first ``b``
    candidates in arrival order; the window holds the ``K_p >= b`` oldest requests not in
    decode, in the same order. Without a memory limit the candidates are those requests;
    with one, :func:`admissible` keeps the residents and the new ones up to the first whose
    cumulative prefill does not fit, after the same decodes: either every candidate in the
    window is kept, and there are ``K_p >= b`` of them, or a new one is refused there, and so
    is every later one; either way the window's first ``b`` admissible candidates are the
    whole state's. (iii) Memory: every resident is in the window (the one
    part-way through its prefill is the oldest request not in decode, since residents are
    older than every request that waits), and :meth:`State.subset` counts the memory of the
    requests outside it, so the window's free memory, promised prefills and eviction victims
    (:func:`fit_memory`) are the whole state's. Other windows and inner policies
    decide at every iteration.

    Parameters
    ----------
    inner : Policy
        The scheduler the windows wrap (its token budget and preemption are this policy's).
    Kp : int
        ``K_p``: how many of the oldest requests not in decode the inner policy sees.
    Kd : int
        ``K_d``: how many of the oldest requests in decode it sees.

    Raises
    ------
    ValueError
        For an ``inner`` that is no :class:`Policy`, or a window that is not a positive
        integer.
    """

    def __init__(self, inner: Policy, Kp: int, Kd: int):
        from ..errors import check_positive

        if not isinstance(inner, Policy):
            raise ValueError(f"inner={inner!r}: must be a queuetheory Policy (the scheduler "
                             "the windows wrap)")
        check_positive("Kp", Kp, integer=True)
        check_positive("Kd", Kd, integer=True)
        self.inner, self.Kp, self.Kd = inner, int(Kp), int(Kd)
        self.token_budget = getattr(inner, "token_budget", None)

    @property
    def preemption(self) -> str:
        """The inner policy's: its evictions are its own."""
        return self.inner.preemption

    @property
    def max_reqs(self):
        """The inner policy's batch-size limit, which every batch keeps."""
        return getattr(self.inner, "max_reqs", None)

    def bulk(self, engine):
        """The inner policy's bulk rule where the windows never bind (see the class
        docstring): FCFS Sarathi with ``K_p, K_d >= b``.

        Parameters
        ----------
        engine : Engine
            The fresh engine of the run.

        Returns
        -------
        callable or None
            The inner policy's runner, or ``None`` (the engine steps).
        """
        b = self.token_budget
        if (decides_as_shipped(self) and isinstance(self.inner, Sarathi)
                and self.Kp >= b and self.Kd >= b):
            return self.inner.bulk(engine)
        return None

    def reset(self, seed=0):
        super().reset(seed)
        self.inner.reset(seed)

    def _schedule(self, state):
        dec = state.in_decode
        window = np.sort(np.concatenate([np.flatnonzero(~dec)[: self.Kp],
                                         np.flatnonzero(dec)[: self.Kd]]))
        sub = state.subset(window)
        b = self.inner.schedule(sub)
        return Batch(window[b.prefill], b.chunk, window[b.decode], window[b.evict], b.until)

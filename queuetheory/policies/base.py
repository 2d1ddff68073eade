"""The one Policy contract, and the vectorised building blocks every scheduler uses.

A policy receives a read-only :class:`~queuetheory.engine.State` and returns a
:class:`~queuetheory.engine.Batch`; subclasses override ``_schedule`` (and ``_reset``
when they keep state between iterations). The engine checks every batch.
"""

from __future__ import annotations

import numpy as np

from ..engine import Batch
from ..errors import check_positive

__all__ = ["Policy", "ORDERS", "ordered", "take_decodes", "take_prefills", "fit_memory",
           "admissible", "decides_as_shipped", "NOT_DECISIONS"]

_EMPTY = np.empty(0, dtype=np.int64)

ORDERS = ("fcfs", "sjf_prompt", "sjf_decode", "sjf_total")


def round_model(paper: str, model: str = "round model") -> str:
    """The ``no_token_budget`` reason of a policy of ``paper``'s ``model`` (whole prompts,
    no budget)."""
    return (f"{paper}'s {model} serves whole prompts and has no token budget; run it "
            "with token_budget=None, or with one of at least the KV memory, which no batch "
            "can exceed")


class Policy:
    """Base class of every scheduler. Public behaviour is defined here once.

    ``preemption`` says what the engine does with a request this policy evicts
    (:mod:`~queuetheory.engine.conventions`): ``"restart"`` here, the papers' model, which
    every paper's scheduler keeps; the classic schedulers default to vLLM's ``"recompute"``.
    """

    token_budget: int | None = None
    preemption: str = "restart"

    def reset(self, seed=0) -> None:
        """Forget everything from an earlier run; called by ``simulate`` before it starts.

        Parameters
        ----------
        seed : int, default 0
            Seeds the policy's own generator ``rng`` (randomised policies draw from it).
        """
        self.rng = np.random.default_rng(seed)
        self._reset()

    def _reset(self) -> None:
        pass

    #: Why this policy's batches ignore an engine's token budget (the round models of Ao et
    #: al., Jaillet et al. and Chen, Ye, Zhou prefill whole prompts and have none), or ``None``
    #: when they keep one; ``simulate(token_budget=...)`` refuses such a policy before it
    #: starts, with this reason, instead of failing mid-run on an infeasible batch
    no_token_budget: str | None = None

    def supports(self, *, memory, first_token) -> str | None:
        """Why this policy cannot run with KV ``memory`` (None: unlimited) under the
        ``first_token`` convention, or ``None`` when it builds feasible batches there.
        ``simulate`` asks before it starts and refuses the setting with the reason.

        Parameters
        ----------
        memory : int or None
            The engine's KV capacity in tokens; ``None``: unlimited.
        first_token : {"prefill", "decode"}
            The engine's first-token convention (:mod:`~queuetheory.engine.conventions`).

        Returns
        -------
        str or None
            The reason, or ``None`` (the default: every setting is supported).
        """
        return None

    def schedule(self, state) -> Batch:
        """The batch of the next iteration: an empty one when no request is in the system,
        else the subclass's decision (``_schedule``).

        Parameters
        ----------
        state : State
            The read-only view of the requests in the system
            (:class:`~queuetheory.engine.State`).

        Returns
        -------
        Batch
            Positions in ``state`` to prefill, decode and evict; the engine checks it
            (:func:`~queuetheory.engine.check_batch`).
        """
        if state.n == 0:
            return Batch()
        return self._schedule(state)

    def _schedule(self, state) -> Batch:
        raise NotImplementedError

    def steady(self, state, batch) -> bool:
        """May the engine repeat ``batch`` without asking again? (the engine's fast path)

        ``True`` promises: while nothing arrives, no request finishes, and only the decode
        members of ``batch`` (a decode-only batch) gain one output token per iteration — time
        advancing and KV memory growing by one token per member, as long as it stays within
        ``M`` — ``schedule`` would return this same batch at every iteration, and calling it
        would change no state of the policy. The engine then runs the stretch in closed form,
        checking it analytically. The default, ``False``, decides every iteration one by one:
        override only where the promise is proved.

        A policy whose own books move while the batch repeats (vLLM's block ledger, which
        allocates a block whenever a request's length starts one) returns instead an integer
        ``n``: the batch repeats at most ``n`` more times (0: none), ``schedule`` returning
        it each time until the first iteration where anything it decides would change (a
        block allocation that would fail, the first member's last token). The engine then
        runs ``k <= n`` of them and calls the policy's ``repeated(k, starts)`` with their
        start times; ``repeated`` must leave every state of the policy exactly as ``k``
        calls to ``schedule`` would have (the same allocations in the same order). A stretch
        that the engine cut at the next arrival or its iteration cap alone goes on at the
        next call without asking again, unless a request arrived at this engine: the
        promise is about the states reached while nothing arrives.

        The engine asks only after a decode-only batch; after a batch of one prefill chunk
        it asks :meth:`steady_chunk`.

        Parameters
        ----------
        state : State
            The state the batch was built on.
        batch : Batch
            The batch :meth:`schedule` returned on it.

        Returns
        -------
        bool or int
            ``True`` (repeat until the first member finishes), ``False`` (ask every
            iteration), or the count ``n`` of further repeats promised.
        """
        return False

    def repeated(self, k, starts) -> None:
        """The engine ran ``k`` batches of a stretch this policy promised without asking
        (a count from :meth:`steady` or :meth:`steady_chunk`, :meth:`decodes_through`):
        move the books those ``k`` calls to ``schedule`` would have moved. The default
        keeps none.

        Parameters
        ----------
        k : int
            The batches the engine ran.
        starts : numpy.ndarray
            Their start times, in order.
        """

    def steady_chunk(self, state, batch) -> int:
        """How many more times may the engine repeat a ``batch`` of decodes and **one
        prefill chunk** without asking again? (the engine's fast path for chunked prefill)

        The engine asks where the chunk leaves some of the prompt, nothing was evicted and
        nothing finished. A count ``n`` promises: the same batch — the same decodes, the
        same request with a chunk of the same size, without the prefix-cache credit a first
        chunk may carry — repeats at most ``n`` more times while more than a chunk of its
        prompt is left, ``schedule`` returning it each time; the engine runs ``k <= n`` of
        them (stopping before the last chunk, after the first finish, or where KV memory
        would overflow) and calls ``repeated(k, starts)`` as :meth:`steady`'s counts do. The
        default, 0, asks every iteration. A pair ``(n, True)`` promises moreover the batch
        after them, once no more than a chunk is left: the same decodes and the rest of the
        prompt as the chunk; the engine runs it where the stretch reached it with no member
        finished, it starts before the next arrival and fits ``M`` (``repeated(1, ...)``
        after it).

        Parameters
        ----------
        state : State
            The state the batch was built on.
        batch : Batch
            The batch :meth:`schedule` returned on it, with one prefill member.

        Returns
        -------
        int or tuple of (int, bool)
            The count ``n`` of further repeats promised (0: none), or ``(n, True)``: those
            and the last chunk.
        """
        return 0

    def drains(self, state) -> bool:
        """May the engine run every request to completion without asking? (fast path)

        Asked only in a state where every request in the system has its prompt prefilled.
        ``True`` promises: in this state, and in every state it leads to while nothing
        arrives and each request gains one output token per iteration until it finishes
        (KV memory growing as long as it stays within ``M``), ``schedule`` would return
        the decode-only batch of every request in the system, and calling it would change
        no state of the policy. The default is ``False``.

        Parameters
        ----------
        state : State
            A state where every request in the system is in decode.

        Returns
        -------
        bool
            Whether the promise holds.
        """
        return False

    def decodes_through(self, state, batch) -> bool | int | tuple[int, int]:
        """May the engine run the members of ``batch`` to their last tokens without asking,
        whatever arrives? (the engine's fast path)

        Asked, before :meth:`drains` and :meth:`steady`, after every batch that leaves
        every request holding KV in decode and each of them a member: its decodes, and its
        prefills where each finished its prompt (evicted requests hold none). It is asked
        once the batch ran: the request table behind ``state`` (read by request id) holds
        the batch's tokens, so a member that finished in it owes none. ``True``
        promises: in every state the batch leads to while each member left gains one
        output token per iteration (leaving the system at its last), requests arrive with
        prompts to prefill (none in decode) and nothing else changes, ``schedule`` would
        return the decode-only batch of the members left, and calling it would change no
        state of the policy that the next call after the stretch, told of the stretch by
        :meth:`repeated`, would not change the same way (books that read arrivals and
        completions lazily). The engine then runs the members to completion in closed form
        (KV memory growing as long as it stays within ``M``), admitting the arrivals on the
        way, and calls ``repeated(k, starts)`` with the starts of the ``k`` batches it ran.
        The default is ``False``.

        A policy that decodes its members only while memory is short (a waiting request
        that does not fit) returns instead an integer ``need >= 1``: the promise holds in
        those states where the batch of the members left would leave less than ``need``
        tokens free, ``state.memory - state.memory_used`` less its members; the engine stops
        before the first batch that leaves ``need`` free (with no KV limit, none runs).
        A policy whose books tell how long its decision stays put returns the pair
        ``(need, n)``: the promise holds for at most ``n`` more batches (``need`` 0: no
        condition on memory).

        Parameters
        ----------
        state : State
            The state the batch was built on.
        batch : Batch
            The batch :meth:`schedule` returned on it.

        Returns
        -------
        bool, int or tuple of int
            Whether the promise holds, the free memory ``need`` up to which it holds, or
            ``(need, n)``.
        """
        return False

    def idles_through(self, state) -> bool:
        """May the engine let the requests wait to the end of the run without asking,
        whatever arrives? (the engine's fast path)

        Asked when :meth:`schedule` idles without a time to wake at (an empty batch with
        ``until=inf``). ``True`` promises: in the state it idled on, and in every state the
        arrivals lead to (requests join, nothing is processed), ``schedule`` would idle
        with ``until=inf`` again, and calling it would change no state of the policy that
        a user reads. ``simulate`` then admits the requests that arrive before its horizon,
        each as stepping would, and ends where stepping ends (the last of them, or the
        first arrival at or after the horizon). The default is ``False``.

        Parameters
        ----------
        state : State
            The state the policy idled on.

        Returns
        -------
        bool
            Whether the promise holds.
        """
        return False

    def bulk(self, engine):
        """A runner ``run(t, stop, limit) -> t`` that makes this policy's decisions in bulk
        on ``engine``, or ``None`` (the default): the engine asks :meth:`schedule` at every
        iteration.

        Asked once by ``simulate``, before the first iteration, and only where
        :func:`~queuetheory.engine.kernels.bulk_ready` holds (a fresh engine, a token-count
        time model, the policy's own token budget, prompts and outputs of at least one
        token). The runner calls a kernel of :mod:`queuetheory.engine.kernels` with plain
        parameters, runs from ``t`` until the horizon ``stop``, the iteration cap ``limit``
        or a state its kernel does not cover, writes the engine's records as stepping
        would have, and returns the time reached; the engine steps on from there. A policy
        that returns a runner promises the records are those of ``fast_path=False``
        (the tests prove it, record for record).

        Parameters
        ----------
        engine : Engine
            The fresh engine of the run, its trace loaded.

        Returns
        -------
        callable or None
            The runner, or ``None``.
        """
        return None

    def _params(self) -> dict:
        return {k: v for k, v in vars(self).items() if not k.startswith("_") and k != "rng"}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self._params().items())
        return f"{type(self).__name__}({args})"


#: Attributes a subclass may define and still decide as the scheduler it extends: they
#: build, name or describe a policy but choose no batch (:func:`decides_as_shipped`)
NOT_DECISIONS = frozenset({"__module__", "__qualname__", "__doc__", "__dict__", "__weakref__",
                           "__annotations__", "__firstlineno__", "__static_attributes__",
                           "__init__", "__repr__", "__str__", "_params"})


def decides_as_shipped(policy) -> bool:
    """Does ``policy`` decide every batch as the scheduler of this package it extends?

    True for the package's own classes, and for a subclass defined elsewhere that adds no
    attribute but those of :data:`NOT_DECISIONS` (a new ``__repr__``, an ``__init__`` that
    sets the parameters its ancestor reads). A subclass that overrides a decision (its
    ``_schedule``, a helper the decision calls, a class constant such as an order) is
    ``False``: the fast paths its ancestor proved (:meth:`Policy.bulk`,
    :meth:`Policy.steady`, :meth:`Policy.drains`) do not cover it, and the engine asks it at
    every iteration.

    Parameters
    ----------
    policy : Policy
        The policy to judge.

    Returns
    -------
    bool
        Whether the first class of its ancestry that defines more than
        :data:`NOT_DECISIONS` is one of this package's.
    """
    for cls in type(policy).__mro__:
        if cls.__module__.startswith(__package__ + "."):
            return True
        if set(vars(cls)) - NOT_DECISIONS:
            return False
    return False


def check_order(order: str) -> str:
    if order not in ORDERS:
        raise ValueError(f"order={order!r}: must be one of {ORDERS}")
    return order


def check_budget(token_budget) -> int:
    check_positive("token_budget", token_budget, integer=True)
    return int(token_budget)


def check_max_reqs(max_reqs):
    if max_reqs is not None:
        check_positive("max_reqs", max_reqs, integer=True)
    return max_reqs


def ordered(state, positions: np.ndarray, order: str) -> np.ndarray:
    """``positions`` sorted by the ordering rule (ties by arrival: the sort is stable).

    Parameters
    ----------
    state : State
        The view the positions index.
    positions : numpy.ndarray
        Positions in ``state``, in arrival order.
    order : {"fcfs", "sjf_prompt", "sjf_decode", "sjf_total"}
        One of :data:`ORDERS`: arrival order, or shortest remaining prefill, remaining
        output, or both together first.

    Returns
    -------
    numpy.ndarray
        The positions in that order (``positions`` itself under ``"fcfs"``).
    """
    if order == "fcfs" or positions.size < 2:
        return positions
    if order == "sjf_prompt":
        key = state.remaining_prefill[positions]
    elif order == "sjf_decode":
        key = state.remaining_output[positions]
    else:
        key = state.remaining_prefill[positions] + state.remaining_output[positions]
    return positions[np.argsort(key, kind="stable")]


def take_decodes(cands: np.ndarray, budget: int, max_reqs=None) -> np.ndarray:
    """The first candidates that fit: one decode token each (Li, Dai, Peng, rule 2.5c).

    Parameters
    ----------
    cands : numpy.ndarray
        Positions of requests in decode, in priority order.
    budget : int
        The tokens left in the batch.
    max_reqs : int, optional
        The most requests to take; ``None``: no cap.

    Returns
    -------
    numpy.ndarray
        The first ``min(len(cands), budget, max_reqs)`` candidates.
    """
    k = min(cands.size, budget, np.inf if max_reqs is None else max_reqs)
    return cands[: int(k)]


def take_prefills(cands: np.ndarray, remaining: np.ndarray, budget: int, max_reqs=None,
                  chunk: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Fill ``budget`` with prompt tokens of ``cands`` in order.

    ``chunk=True`` splits the last prompt at the budget boundary (Sarathi, Orca);
    ``chunk=False`` takes whole prompts until the next one does not fit, except that a
    first prompt longer than the whole budget is chunked (vanilla vLLM, spec §6 item 18).
    ``remaining`` holds the remaining prompt tokens of ``cands``.

    Parameters
    ----------
    cands : numpy.ndarray
        Positions of requests waiting for prefill, in priority order.
    remaining : numpy.ndarray
        The prefill tokens each has left.
    budget : int
        The tokens left in the batch (none taken at ``<= 0``).
    max_reqs : int, optional
        The most requests to take (only the first ``max_reqs`` candidates are considered);
        ``None``: no cap.
    chunk : bool, default True
        Whether the last prompt is split at the budget boundary.

    Returns
    -------
    prefill : numpy.ndarray
        The positions taken, a prefix of ``cands``.
    chunk : numpy.ndarray
        The tokens each gets.
    """
    if budget <= 0 or cands.size == 0:
        return _EMPTY, _EMPTY
    if max_reqs is not None:
        cands, remaining = cands[:max_reqs], remaining[:max_reqs]
    cum = remaining.cumsum()
    k = int(cum.searchsorted(budget, side="right"))          # whole prompts that fit
    sizes = remaining[:k]
    if k < cands.size and (chunk or k == 0):
        left = budget - (int(cum[k - 1]) if k else 0)
        if left > 0:
            return cands[: k + 1], np.concatenate((sizes, [left]))
    return cands[:k], sizes


def admissible(state, cands: np.ndarray, decodes: int | None = None,
               most: int | None = None) -> np.ndarray:
    """Prefill candidates that memory allows to run: every request already holding KV, and
    new requests, in order, while their whole prefills fit in the memory left after the
    batch's ``decodes`` decode tokens (default: one for each request in decode) and the
    unfinished prefills of resident ones (see :func:`fit_memory`).

    Whether a candidate is kept depends only on those before it, so with ``most`` the
    candidates are read in growing prefixes, until ``most`` are kept, or until a new one
    has not fitted (no later new one does) and every resident not in decode
    (``State.n_prefilling``) has been met.

    Parameters
    ----------
    state : State
        The view the candidates index.
    cands : numpy.ndarray
        Prefill candidates, positions in priority order (with ``most``: requests not in
        decode, as every prefill candidate).
    decodes : int, optional
        The decode tokens of the batch; ``None``: one per request in decode.
    most : int, optional
        Only the first ``most`` candidates kept are wanted; ``None``: all of them.

    Returns
    -------
    numpy.ndarray
        The candidates kept, in their order (all of them without a memory limit), at most
        ``most``.
    """
    if state.memory is None or cands.size == 0:
        return cands if most is None else cands[:most]
    size = cands.size if most is None else min(cands.size, 64)
    while True:
        kept, decided = admitted_head(state, cands[:size], decodes, most)
        if decided or size == cands.size:
            return kept
        size = min(cands.size, 4 * size)


def admitted_head(state, head: np.ndarray, decodes: int | None, most: int | None):
    """:func:`admissible` of the first prefill candidates ``head`` (requests not in
    decode), and whether later candidates can change the first ``most`` it keeps.

    Parameters
    ----------
    state : State
        The view the candidates index.
    head : numpy.ndarray
        The first prefill candidates, positions in priority order.
    decodes : int or None
        As :func:`admissible`'s.
    most : int or None
        Only the first ``most`` kept are wanted; ``None``: all (never decided).

    Returns
    -------
    kept : numpy.ndarray
        The first ``most`` of ``head`` that :func:`admissible` keeps.
    decided : bool
        ``most`` are kept, or a new request did not fit (no later new one does) and every
        resident not in decode (``State.n_prefilling``) is in ``head``.
    """
    if state.memory is None:
        return (head, False) if most is None else (head[:most], head.size >= most)
    if decodes is None:
        decodes = state.n_decode
    room = state.memory_free - decodes - state.promised
    new = state.of("kv", head) == 0
    fits = np.cumsum(np.where(new, state.of("remaining_prefill", head), 0)) <= room
    kept = head[~new | fits]
    if most is None:
        return kept, False
    return kept[:most], bool(kept.size >= most or (
        head.size and not fits[-1] and head.size - np.count_nonzero(new) == state.n_prefilling))


def _among(x: np.ndarray, ascending: np.ndarray) -> np.ndarray:
    """Which of ``x`` are in the ascending array ``ascending`` (``np.isin`` without its
    generic machinery)."""
    if not ascending.size:
        return np.zeros(x.size, dtype=bool)
    return ascending.take(ascending.searchsorted(x), mode="clip") == x


def _residents(state):
    """The positions of the requests holding KV, ascending, and their KV, read from the
    front of the queue only as far as the last of them: a prefix holds them all once it
    holds ``n_decode + n_prefilling`` requests that hold KV or decode (an empty prompt
    decodes holding none), so the prefix read doubles until it does."""
    need = state.n_decode + state.n_prefilling
    width = min(state.n, max(64, 2 * need))
    while True:
        kv = state.of("kv", slice(0, width))
        held = kv > 0
        if width == state.n or np.count_nonzero(
                held | state.of("in_decode", slice(0, width))) >= need:
            return np.flatnonzero(held), kv[held]
        width = min(state.n, 2 * width)


def fit_memory(state, prefill, chunk, decode, rank=None) -> Batch:
    """Make a batch respect KV memory the way vLLM does.

    As vLLM's block manager, a request that has started its prefill holds KV for its whole
    prefill (prompt, plus the tokens a recompute put back) from then on: the unwritten part
    is promised. If the decode tokens overflow the memory neither written nor promised, the
    most recently arrived resident requests are evicted — each frees what it holds and what
    it was promised — until the rest fit (KV dropped; recomputed or restarted later, by the
    policy's ``preemption``), and no new request starts. With ``rank`` (one number per
    request, larger = less important) the least important residents go first, the most
    recently arrived among equals, as vLLM's priority scheduling picks its victim
    (``max(running, key=(priority, arrival_time))``). Otherwise a new request starts only
    if its whole prefill fits in the memory left after the decode tokens and the promises,
    in batch order, stopping at the first that does not fit.

    Parameters
    ----------
    state : State
        The view the batch's positions index (its ``memory`` set).
    prefill : array_like of int
        Prefill positions of the batch as built without memory in mind.
    chunk : array_like of int
        Their chunks.
    decode : array_like of int
        Decode positions.
    rank : numpy.ndarray, optional
        One number per position in ``state``, larger = less important: the eviction
        order; ``None``: the most recently arrived first.

    Returns
    -------
    Batch
        The batch that fits: with evictions (and no new request) when the decodes
        overflow, else the residents' chunks and the new requests that fit.
    """
    prefill, chunk, decode = (np.asarray(a, dtype=np.int64) for a in (prefill, chunk, decode))
    free = state.memory_free - state.promised
    if decode.size > free:
        if rank is None:
            victims, held = _residents(state)
            victims, held = victims[::-1], held[::-1]
        else:
            kv = state.kv
            victims = np.flatnonzero(kv > 0)[::-1]
            victims = victims[np.argsort(-rank[victims], kind="stable")]
            held = kv[victims]
        promise = np.where(state.of("in_decode", victims), 0,
                           state.of("remaining_prefill", victims))
        saving = np.cumsum(held + promise + _among(victims, np.sort(decode)))
        evict = victims[: int(np.searchsorted(saving, decode.size - free, side="left")) + 1]
        out = np.sort(evict)
        keep = (state.of("kv", prefill) > 0) & ~_among(prefill, out)
        return Batch(prefill[keep], chunk[keep], decode[~_among(decode, out)], evict)
    if not prefill.size:
        return Batch(prefill, chunk, decode)
    room = free - decode.size
    resident = state.of("kv", prefill) > 0
    new = np.flatnonzero(~resident)
    admitted = new[np.cumsum(state.of("remaining_prefill", prefill[new])) <= room]
    keep = resident.copy()
    keep[admitted] = True
    return Batch(prefill[keep], chunk[keep], decode)

"""One LLM engine: a request table, a policy, a time model, and the iteration step."""

from __future__ import annotations

import numpy as np

from ..errors import InfeasibleBatchError, renamed_attribute, renamed_keywords
from ..timing import BatchLoad, TimeModel
from .batch import Batch, _check_every_rule, _quick_check, _total
from .conventions import check_first_token, check_preemption
from .log import ColumnLog, TBTHistogram
from .state import RequestTable, State

__all__ = ["Engine"]

_NONE = np.empty(0, dtype=np.int64)
_FEW = 8         # members handled one by one in plain integers (cheaper than arrays)
_SHORT = 3       # stretches this long at most are stepped: the closed form costs ~4 batches

_BATCH_COLUMNS = {
    "start": float, "duration": float, "prefill_requests": np.int64, "prefill_tokens": np.int64,
    "decode_requests": np.int64, "token_load": np.int64, "evicted": np.int64,
    "memory": np.int64, "in_system": np.int64, "unfinished_tokens": np.int64,
}


def _pair(policy, method: str, promise: tuple, names: str) -> tuple:
    """A promise ``policy.method`` returned as a tuple: its two values ``names``, or a
    ``TypeError`` that says what it returned."""
    if len(promise) != 2:
        raise TypeError(f"{policy!r}.{method} returned {promise!r}: a tuple promise is "
                        f"{names}, two values")
    return promise


def _cumsum_from(start, steps: np.ndarray) -> np.ndarray:
    """``start`` and its running sums with ``steps`` (``len(steps) + 1`` values), summed in
    order as ``np.concatenate([[start], steps]).cumsum()`` sums them."""
    out = np.empty(steps.size + 1, dtype=np.result_type(start, steps))
    out[0] = start
    out[1:] = steps
    return out.cumsum(out=out)


class Engine:
    """Runs a policy's batches on a time model and keeps the books.

    ``step(t)`` asks the policy for one batch over the requests in the system at time ``t``,
    checks it (:func:`check_batch`), applies it and returns its duration, or ``None`` when
    the policy idles. The driver (:func:`~queuetheory.engine.simulate` or a network) admits
    arrivals and advances time.

    ``first_token`` (see :data:`FIRST_TOKEN`): ``"prefill"``, the default, is the real
    engines' convention (vLLM, Sarathi-Serve, Vidur): the iteration that finishes a prompt
    also emits the first output token, and a request's output length counts that token, so
    it runs ``output − 1`` decode iterations afterwards. ``"decode"`` is the model of Li, Dai,
    Peng (and Ao et al.): the prefill iteration emits nothing and each of the ``output``
    tokens takes a decode iteration of its own.

    What an eviction does is the policy's ``preemption`` (:data:`PREEMPTION`):
    ``"recompute"`` (vLLM's) keeps the generated tokens and prefills them again with the
    prompt; ``"restart"`` (the papers' model) discards them.

    The keyword ``budget=`` keeps working for one release as ``token_budget=``, with a
    ``DeprecationWarning`` (:func:`~queuetheory.errors.renamed_keywords`).

    Parameters
    ----------
    policy : Policy
        The scheduler (its ``preemption`` is the engine's).
    time_model : TimeModel
        The batch time.
    memory : int, optional
        KV-cache tokens (None: unlimited).
    token_budget : int, optional
        The per-batch token budget ``b`` the batches are checked against (None: none),
        kept as the attribute ``budget``.
    first_token : {"prefill", "decode"}, default "prefill"
        The first-token convention (above).
    n_classes : int, default 1
        Request classes, for the TBT histogram.
    capacity : int, default 1024
        The request table's first allocation, in rows (it grows as needed).

    Raises
    ------
    ValueError
        If ``first_token`` or the policy's ``preemption`` is not a known one.
    """

    budget = renamed_attribute("token_budget")

    @renamed_keywords(budget="token_budget")
    def __init__(self, policy, time_model, *, memory=None, token_budget=None,
                 first_token: str = "prefill", n_classes: int = 1, capacity: int = 1024):
        self.policy = policy
        self.time_model = time_model
        # no closed form for repeated decodes (durations read each member's context): the
        # decode stretches are stepped batch by batch (:meth:`_step_stretch`)
        self._decodes_stepped = (
            type(time_model).decode_durations is TimeModel.decode_durations
            and not time_model.counts_only)
        self.memory = memory
        self.token_budget = token_budget
        self.first_token = check_first_token(first_token)
        self.preemption = check_preemption(getattr(policy, "preemption", "restart"))
        self.table = RequestTable(first_token == "prefill", capacity)
        self.live = self._spare = np.empty(0, dtype=np.int64)   # _spare: live's buffer,
        self._live_at = 0                                         # where live starts in it
        self._counted = self.live      # the live requests the ledger below counts
        self.iteration = 0
        self.work = 0          # unprocessed tokens of the requests in the system, |X(n)|
        self.peak_memory = 0
        self.kv_total = 0      # resident KV tokens of the requests in the system
        self.promised = 0      # unwritten prefill tokens of residents not in decode
        self.n_prefilling = 0  # residents not in decode (their prefills under way)
        self.n_decode = 0      # requests in decode
        self.log = ColumnLog(_BATCH_COLUMNS)
        self.tbt = TBTHistogram(n_classes)
        self._pending = 0      # first table row not yet admitted (pre-loaded traces)
        self._arrival = np.empty(0)          # the pre-loaded rows' arrivals, and before
        self._owed = self._decoding = np.zeros(1, dtype=np.int64)   # each row: tokens owed,
        # requests in decode (:meth:`load`)
        self._final = False    # the pre-loaded trace is all that arrives (a run that drains)
        self._resume = None    # a promised stretch cut by time alone, to go on with (_repeat)
        self._fresh_at = None  # the last batch's end, and _fresh: how many requests in decode
        self._fresh = 0        # emitted there (:meth:`_fresh_decodes`)

    # ---- arrivals -----------------------------------------------------------------------------
    def load(self, trace, final: bool = False) -> None:
        """Pre-load a whole trace; rows are admitted by :meth:`admit_until` as time passes.
        ``final``: nothing arrives after it (a run that drains), so once it is all admitted
        policies see ``State.arrivals_done``.

        Parameters
        ----------
        trace : Trace
            The requests, in arrival order.
        final : bool, default False
            Whether nothing arrives after the trace.
        """
        self.table.append(trace)
        self._arrival = self.table.column("arrival")
        owed = self.table.column("prompt") + self.table.column("output")
        self._owed = np.concatenate(([0], owed.cumsum()))   # tokens owed by rows before
        self._decoding = np.concatenate(([0], self.table.column("in_decode").cumsum()))
        self._final = bool(final)

    def admit_until(self, t: float) -> None:
        """Admit the pre-loaded requests that arrived at or before ``t``.

        Parameters
        ----------
        t : float
            The current time.
        """
        stop = int(self._arrival.searchsorted(t, side="right"))
        if stop > self._pending:
            self._admit(np.arange(self._pending, stop),
                        int(self._owed[stop] - self._owed[self._pending]),
                        int(self._decoding[stop] - self._decoding[self._pending]))
            self._pending = stop

    def admit_before(self, stop: float) -> float | None:
        """Admit the pre-loaded requests that arrive before ``stop``.

        Parameters
        ----------
        stop : float
            The first time not admitted.

        Returns
        -------
        float or None
            The arrival time of the last request admitted (``None``: none was pending
            before ``stop``).

        Raises
        ------
        ValueError
            For a ``stop`` that is NaN.
        """
        if stop != stop:
            raise ValueError(f"stop={stop!r}: must be a time, not NaN")
        last = int(self._arrival.searchsorted(stop, side="left")) - 1
        if last < self._pending:
            return None
        t = float(self._arrival[last])
        self.admit_until(t)
        return t

    def _arrival_in_decode(self) -> float:
        """The arrival time of the next pre-loaded request not yet admitted that arrives in
        decode (an empty prompt), or ``inf``."""
        decoding = self._decoding
        row = int(decoding.searchsorted(decoding[self._pending] + 1)) - 1
        return float(self._arrival[row]) if row < self._arrival.size else np.inf

    def next_arrival(self) -> float:
        """The arrival time of the next pre-loaded request not yet admitted.

        Returns
        -------
        float
            That time, or ``inf`` when every pre-loaded request is admitted.
        """
        return float(self._arrival[self._pending]) if self._pending < self.table.n else np.inf

    def add(self, trace, ready=None, *, rows: slice | None = None) -> np.ndarray:
        """Admit new requests now (networks); returns their ids.

        With ``ready`` (one time per request) they arrive with their prompt prefilled and
        their first output token out at those times, KV cache and all: the decode node of a
        disaggregated server, whose engine emits the first token with the prefill
        (``first_token="prefill"``).

        Parameters
        ----------
        trace : Trace
            The requests to admit.
        ready : array_like of float, optional
            Per request, the time its prompt was prefilled and its first token emitted
            elsewhere; ``None``: they arrive with nothing done.
        rows : slice, optional
            Only these rows of ``trace`` (default all).

        Returns
        -------
        numpy.ndarray
            Their request ids (rows of :attr:`table`).

        Raises
        ------
        ValueError
            For ``ready`` on an engine with ``first_token="decode"``, or a trace whose prefix
            blocks have another size than the engine's requests'
            (:meth:`RequestTable.append`).
        """
        ids = self.table.append(trace, rows)
        self._admit(ids)
        self._fresh_at = None                # (requests handed over with their last token)
        if ready is not None:
            tab = self.table
            if not tab.emit_first:
                raise ValueError("ready: requests handed over with their first token need "
                                 "an engine with first_token='prefill'")
            self.n_decode += ids.size - int(np.count_nonzero(tab.in_decode[ids]))
            tab.set_progress(ids, tab.prompt[ids], 1)
            tab.first_token[ids] = tab.last_token[ids] = tab.prefill_done[ids] = ready
            self.work -= int(tab.prompt[ids].sum()) + ids.size
            self.kv_total += int(tab.kv(ids).sum())
        return ids

    def _admit(self, ids, owed=None, decoding=None):
        """Admit ``ids`` (``owed``: their prompt and output tokens, ``decoding``: how many
        are in decode (empty prompts), when known)."""
        t = self.table
        self._resume = None                  # an arrival ends any promise
        if owed is None:
            owed = int(t.prompt[ids].sum()) + int(t.output[ids].sum())
            decoding = int(np.count_nonzero(t.in_decode[ids]))
        self.work += owed
        self.n_decode += decoding
        self.live = self._counted = self._extended(ids)

    def _extended(self, ids):
        """``live`` and then ``ids``, written in place after ``live`` where ``live`` is a
        view of its buffer ``_spare`` (from ``_live_at`` on) and the buffer has room (every
        ``live`` handed out before ends at or before this one's end, or lies in a buffer no
        longer written), else in a new buffer with room to grow."""
        live, spare, at = self.live, self._spare, self._live_at
        n, k = live.size, len(ids)
        if (live.base is not spare or at + n + k > spare.size
                or not np.shares_memory(live[:1], spare[at: at + 1])):
            spare = self._spare = np.empty(max(2 * (n + k), 64), dtype=np.int64)
            spare[:n] = live
            at = self._live_at = 0
        spare[at + n: at + n + k] = ids
        return spare[at: at + n + k]

    # ---- one iteration ----------------------------------------------------------------------
    def state(self, t: float) -> State:
        """The view a policy gets of the requests in the system at ``t``.

        Parameters
        ----------
        t : float
            The decision epoch.

        Returns
        -------
        State
            The live requests, with the engine's budget, memory and resident KV.
        """
        if self.live is not self._counted:   # a bulk runner (or a network) moved the table
            self.recount()
        return State(self.table, self.live, t, self.token_budget, self.memory,
                     kv_total=self.kv_total, promised=self.promised, n_decode=self.n_decode,
                     n_prefilling=self.n_prefilling,
                     arrivals_done=self._final and self._pending >= self.table.n)

    def step(self, t: float):
        """Run one batch starting at ``t``. Returns ``(duration, finished_ids)`` or the
        policy's empty :class:`Batch` when it idles.

        Parameters
        ----------
        t : float
            The batch's start.

        Returns
        -------
        tuple or Batch
            ``(duration, finished_ids)``: the batch's duration and the ids of the requests
            it finished (sorted); or the empty batch when the policy idles (its ``until``
            says how long).

        Raises
        ------
        TypeError
            When the policy's ``schedule`` returns no :class:`Batch`.
        InfeasibleBatchError
            When the batch breaks a rule (:func:`check_batch`).
        ValueError
            When the time model returns a duration that is not positive.
        """
        out = self._iterate(t)
        return out if isinstance(out, Batch) else out[:2]

    def advance(self, t: float, until: float = np.inf, max_iterations: int = 1, *,
                horizon: float | None = None):
        """One decision of the policy at ``t``, then — when the policy declares the batch
        steady (:meth:`Policy.steady`) and the time model has a closed form for repeating it
        (:meth:`TimeModel.repeat_decode`) — the same batch again and again, at most
        ``max_iterations`` in all, while every repeat starts before ``until`` (the next
        arrival or the horizon) and no member finishes before the last one. Where the
        policy promises that the batch's members decode to their last tokens whatever
        arrives (:meth:`Policy.decodes_through`), the stretch runs on past ``until`` up to
        ``horizon`` (also after a first batch that ends past ``until``), members leaving as
        they finish, and the pre-loaded requests (:meth:`load`) arriving on the way are
        admitted as stepping admits them: before the first batch that starts at or after
        their arrival.

        Every skipped iteration is checked analytically (output lengths, token budget and
        KV memory over the whole stretch) and recorded exactly as :meth:`step` would, row
        by row in the batch log. Returns ``(end_time, finished_ids)`` or the idle Batch.

        Parameters
        ----------
        t : float
            The first batch's start.
        until : float, default inf
            No repeat starts at or after this time.
        max_iterations : int, default 1
            The most batches to run (1: :meth:`step`, ending at the batch's end).
        horizon : float, optional
            No repeat of a stretch promised through arrivals starts at or after this time
            (``None``: ``until``); give it only where the pre-loaded trace is all that
            arrives before it.

        Returns
        -------
        tuple or Batch
            ``(end_time, finished_ids)``: the end of the last batch run and the ids of the
            requests finished on the way (sorted); or the empty batch when the policy idles.

        Raises
        ------
        TypeError
            When the policy's ``schedule`` returns no :class:`Batch`.
        InfeasibleBatchError
            When the batch breaks a rule (:func:`check_batch`), or a promised decode of
            every request exceeds the token budget.
        ValueError
            When the time model returns a duration that is not positive.
        """
        out = self._iterate(t, until, max_iterations, horizon)
        return out if isinstance(out, Batch) else (out[2], out[1])

    def _iterate(self, t, until=np.inf, max_iterations=1, horizon=None):
        resume, self._resume = self._resume, None
        if resume is not None and max_iterations > 1 and resume[0] == t:
            # the stretch an earlier call cut at ``until`` goes on: nothing arrived since,
            # so the policy's promise still holds and asking it again would change nothing
            end, finished = resume[1](*resume[2], t, until, max_iterations)
            if end > t:
                return end - t, finished, end
        state = self.state(t)
        batch = self.policy.schedule(state)
        if not isinstance(batch, Batch):
            raise TypeError(f"{self.policy!r}.schedule returned {type(batch).__name__}, not Batch")
        fresh = self._fresh_decodes(t)
        # check_batch, keeping what its quick check read (the members' ids and counts)
        quick = _quick_check(state, batch, self.token_budget, self.memory,
                             self.preemption == "recompute", fresh)
        if quick is None:
            used = _check_every_rule(state, batch, policy=self.policy, iteration=self.iteration,
                                     budget=self.token_budget, memory=self.memory,
                                     emit_first=bool(self.table.emit_first),
                                     recompute=self.preemption == "recompute")
            pre, dec, seen = state.rid[batch.prefill], state.rid[batch.decode], None
        else:                                # evicted requests are no decode members there
            used, pre, dec, seen = quick[0], quick[1], quick[2], quick[3:]
        if batch.evict.size:
            self._evict(state.rid[batch.evict])
        if batch.empty:
            return batch
        chunk = batch.chunk
        chunk_sum = _total(chunk)
        if batch.cached.size:
            self._credit_cached(pre, batch.cached)
        duration, finished, end = self._run(t, pre, chunk, chunk_sum, dec, used, state.n,
                                            batch.evict.size, seen, fresh)
        reach = until if horizon is None else max(until, horizon)   # through arrivals
        if max_iterations > 1 and end < reach:
            stretch = self._stretch(state, batch, pre, dec, finished, end, end >= until)
            if stretch is not None:
                runner, args, arrivals = stretch
                end, more = runner(*args, end, reach if arrivals else until,
                                   max_iterations - 1)
                if more.size:
                    finished = np.union1d(finished, more) if finished.size else more
        return duration, finished, end

    def _run(self, t, pre, chunk, chunk_sum, dec, used, n, evicted, seen=None, fresh=False):
        """Apply a checked batch (request ids ``pre`` with their ``chunk``, ``dec``) that
        starts at ``t`` with ``n`` requests in the system and leaves ``used`` KV tokens:
        the books, the stamps and the log row. ``seen``: the decode members' output tokens
        done and output lengths, where the check read them; ``fresh``: every request in
        decode emitted its last token at ``t`` (:meth:`_fresh_decodes`). Returns
        ``(duration, finished, end)``."""
        tab = self.table
        duration = self._duration(pre, chunk, chunk_sum, dec)
        end = t + duration
        before, output = (tab.decoded[dec], tab.output[dec]) if seen is None else seen
        decoded = before + 1
        tab.decoded[dec] = decoded
        # (a fresh decode has emitted a token since its prefill: its KV grows by the one before)
        grown = dec.size if fresh else self._writes(dec, before)
        self.kv_total += chunk_sum + grown
        self.work -= chunk_sum + dec.size
        done = self._prefill(pre, chunk, end) if pre.size else _NONE
        if done.size > _FEW:
            emitted = np.concatenate([dec, done])
            self._stamp_tokens(emitted, t, end)
            finished = self._finish(emitted, end)
        else:
            finished = self._emit(dec, decoded >= output, done, t, end, fresh)
        # every request emitting here that stays is in decode (not a prompt ending without
        # a token: _prefill returns those only where they emit one)
        self._fresh_at, self._fresh = end, dec.size + done.size - finished.size
        self.peak_memory = max(self.peak_memory, used)
        self.log.append(t, duration, pre.size, chunk_sum, dec.size,
                        chunk_sum + dec.size, evicted, used, n, self.work)
        self.iteration += 1
        return duration, finished, end

    def _stretch(self, state, batch, pre, dec, finished, end, arrived=False):
        """The stretch the policy promises after this batch, if any: ``(runner, args,
        arrivals)``, the runner :meth:`_repeat` (decode-only: :meth:`Policy.decodes_through`,
        :meth:`Policy.drains` and :meth:`Policy.steady`) or
        :meth:`_repeat_chunk` (one prefill chunk beside the decodes:
        :meth:`Policy.steady_chunk`); ``arrivals``: the promise holds whatever arrives.
        ``arrived``: the batch ended at or after the next arrival, so only a promise
        through arrivals may go on."""
        if (dec.size + pre.size - finished.size == self.n_decode
                and not (pre.size and self.n_prefilling)):  # its members left: all in decode
            promise = self.policy.decodes_through(state, batch)
            if promise:
                need, limit = (_pair(self.policy, "decodes_through", promise,
                                     "(need, limit)") if isinstance(promise, tuple) else
                               (0 if isinstance(promise, bool | np.bool_) else promise, np.inf))
                if limit < 1:
                    return None
                first = self.kv_total + self.n_decode    # memory after the members' batch
                if (need and self.memory is None) or self.memory is not None and (
                        first > self.memory or need and first <= self.memory - need):
                    return None          # (no stretch: that batch is over M or leaves
                    #                       ``need`` free, or there is no M to fill)
                members = np.sort(np.concatenate([dec, pre]) if pre.size else dec)
                if finished.size:                # (they are members: ids sorted as both)
                    keep = np.ones(members.size, dtype=bool)
                    keep[members.searchsorted(finished)] = False
                    members = members[keep]
                if not members.size or pre.size and (
                        self._writes(members, self.table.decoded[members]) < members.size):
                    return None
                return self._repeat, (members, True, limit, True, True, int(need)), True
        if arrived:
            return None
        live, in_decode = self.live, self.table.in_decode
        prefilling = pre.size and not in_decode[pre[-1]]   # a member still in its prefill
        if (live.size and not prefilling and self.n_decode == live.size
                and self.policy.drains(self.state(end))
                and self._writes(live, self.table.decoded[live]) == live.size):
            if self.token_budget is not None and live.size > self.token_budget:
                raise InfeasibleBatchError(self.policy, self.iteration, "2.5d",
                                           f"promised to decode all {live.size} requests, "
                                           f"over the budget {self.token_budget}")
            return self._repeat, (None, True, np.inf, False, False, 0), False
        if batch.evict.size or finished.size:
            return None
        if not batch.prefill.size:
            promise = self.policy.steady(state, batch)
            if isinstance(promise, bool | np.bool_):
                limit, books = np.inf, False
            else:                    # a bounded stretch over which the policy's books move
                limit, books = int(promise), True
            if not promise or limit <= 0:
                return None
            return self._repeat, (dec, False, limit, books, False, 0), False
        if pre.size == 1 and not self.table.in_decode[pre[0]]:   # (a cache credit is once)
            promise = self.policy.steady_chunk(state, batch)
            limit, last = (_pair(self.policy, "steady_chunk", promise, "(n, last)")
                           if isinstance(promise, tuple) else (promise, False))
            if int(limit) > 0 or last:
                return self._repeat_chunk, (pre, batch.chunk, dec, int(limit), bool(last)), False
        return None

    def _writes(self, rid, decoded) -> int:
        """How many of ``rid`` (requests in decode, ``decoded`` output tokens each) write one
        token of KV at their next decode, as :meth:`_repeat`'s closed form takes of every
        member: all, but under ``first_token="prefill"`` one that has emitted nothing since
        its prefill (its newest token's KV is written by the decode after it; an empty prompt
        has none) writes none there."""
        tab = self.table
        if not tab.emit_first:
            return rid.size
        if tab.recomputing:
            return int(np.count_nonzero(decoded > tab.recomputed[rid]))
        return int(np.count_nonzero(decoded))

    def _repeat_chunk(self, pre, chunk, dec, limit, last, t, until, most):
        """The fast path of a batch with one prefill chunk: from ``t``, the request ``pre``
        (one id) gets the same ``chunk`` again and again beside the decodes ``dec``, at
        most ``limit`` times (the policy's bound, :meth:`Policy.steady_chunk`), then, where
        ``last`` was promised too, the rest of its prompt (:meth:`_last_chunk`); the
        policy's books moved by its ``repeated(k, starts)``. Returns the end of the stretch
        and the requests it finished.

        Each batch is applied as :meth:`step` applies it (a prefix-cache credit of the
        first one is not repeated: it comes with a request's first chunk only), without
        asking the policy; what
        the check of a batch would see is checked here: the chunk leaves some of the prompt
        (the stretch stops before the last chunk), the decodes have output to emit (it
        stops after the first batch that finishes a request), the token load is the one
        checked, KV memory stays within ``M``. It stops before the first batch that would
        start at or after ``until``, after ``most`` batches or at ``limit``; stopped by
        ``until`` or ``most`` alone, it is kept to go on with (:meth:`_iterate`) unless a
        request arrives first."""
        tab = self.table
        c = int(chunk[0])
        length = int(tab.prefill_length(pre)[0])
        before = self.iteration
        run = (self._repeat_chunk_closed if self.time_model.counts_only else
               self._repeat_chunk_stepped)
        t, finished = run(pre, chunk, c, length, dec, limit, last, t, until, most)
        if last and not finished.size:
            return self._last_chunk(pre, c, length, dec, t, until,
                                    most - (self.iteration - before))
        return t, finished

    def _last_chunk(self, pre, c, length, dec, t, until, most):
        """The batch with the last chunk of ``pre``'s prompt (the rest, at most ``c``
        tokens) beside the decodes ``dec``, which the policy promised after a stretch of
        chunks of ``c`` (:meth:`Policy.steady_chunk`'s ``(n, True)``): run as :meth:`step`
        runs a batch where the stretch before it reached it (no more than ``c`` left) with
        no member finished, it starts before ``until``, ``most`` allows a batch and KV
        memory stays within ``M``. Returns the end and the requests finished."""
        tab = self.table
        rest = length - int(tab.prefilled[pre[0]])
        if not (0 < rest <= c and t < until and most >= 1):
            return t, _NONE
        fresh = self._fresh_decodes(t)
        used = self.kv_total + rest + (dec.size if fresh else self._writes(dec, tab.decoded[dec]))
        if self.memory is not None and used > self.memory:
            return t, _NONE
        _, finished, end = self._run(t, pre, np.array([rest]), rest, dec, used, self.live.size,
                                     0, None, fresh)
        self.policy.repeated(1, np.array([t]))
        return end, finished

    def _repeat_chunk_stepped(self, pre, chunk, c, length, dec, limit, last, t, until, most):
        """:meth:`_repeat_chunk`'s batches of ``c`` applied one by one, as :meth:`step` applies
        them, where the durations depend on more than the token counts."""
        tab = self.table
        starts, finished, cut = [], _NONE, False
        while len(starts) < min(most, limit) and t < until:
            if int(tab.prefilled[pre[0]]) + c >= length:
                cut = True                   # the last chunk: the policy is asked
                break
            used = self.kv_total + c + dec.size
            if self.memory is not None and used > self.memory:
                cut = True
                break
            starts.append(t)
            _, finished, t = self._run(t, pre, chunk, c, dec, used, self.live.size, 0, None,
                                       self._fresh_decodes(t))
            if finished.size:
                cut = True
                break
        k = len(starts)
        if k:
            self.policy.repeated(k, np.array(starts))
        if k and k < limit and not cut:      # stopped by `until` or `most` alone
            self._resume = (t, self._repeat_chunk, (pre, chunk, dec, limit - k, last))
        return t, finished

    def _repeat_chunk_closed(self, pre, chunk, c, length, dec, limit, last, t, until, most):
        """:meth:`_repeat_chunk` in closed form, where the duration is the token counts'
        alone (the same for every batch of the stretch): the stretch's batches, their
        ends, KV loads and stamps computed at once, the same as batch after batch."""
        tab = self.table
        self._fresh_at = None                # (it stamps the decodes itself)
        duration = self.time_model.count_duration(c, dec.size)
        if not duration > 0:
            raise ValueError(f"{self.time_model!r} returned a non-positive duration {duration}")
        d = dec.size
        p0 = int(tab.prefilled[pre[0]])
        bound = min(most, limit)                          # the loop's own count
        short = max((length - p0 - 1) // c, 0)            # batches whose chunk leaves some
        if d:
            decoded = tab.decoded[dec]
            first = int((tab.output[dec] - decoded).min())   # the batch finishing a member
        else:
            first = bound + short + 1
        n = min(bound, short, first)
        ends = np.full(n + 1, duration)
        ends[0] = t
        ends = ends.cumsum()                              # sequential, as t += duration
        within = int(ends.searchsorted(until, side="left"))   # batches starting before
        if tab.emit_first and d:                          # KV written by the j-th batch
            base = decoded - tab.recomputed[dec] if tab.recomputing else decoded
            steps = np.arange(1, n + 1)
            grown = c + (base[None, :] + steps[:, None] > 1).sum(axis=1)
        else:
            grown = np.full(n, c + d)
        before = self.kv_total + np.concatenate([[0], grown[:-1].cumsum()]) if n else grown
        used = before + (c + d)
        fits = n
        if self.memory is not None:
            over = (used > self.memory).nonzero()[0]
            if over.size:
                fits = int(over[0])
        run = min(bound, within)
        k = min(run, short, fits, first)
        if k < 1:
            return t, _NONE
        cut = not (run <= short and run <= fits and run < first)
        ends = ends[: k + 1]
        starts, used = ends[:-1], used[:k]
        if d:
            tab.decoded[dec] = decoded + k
        self.kv_total += int(grown[:k].sum())
        self.work -= k * (c + d)
        tab.prefilled[pre] += k * c
        self.promised -= k * c               # begun, and not ended by the stretch
        if d:
            self._stamp_tokens(dec, t, ends[1])           # gaps of any length, first tokens
            if k > 1:
                gaps = ends[2:] - ends[1:-1]
                tab.tbt_max[dec] = np.fmax(tab.tbt_max[dec], gaps.max())
                tab.last_token[dec] = ends[k]
                if self.tbt.single:
                    self.tbt.add_counted(gaps, np.full(k - 1, d))
                else:
                    self.tbt.add_intervals(gaps, np.zeros(d, np.int64),
                                           np.full(d, k - 1, np.int64), tab.cls[dec])
        live = self.live.size
        finished = self._finish(dec, ends[k]) if k == first else _NONE
        self.peak_memory = max(self.peak_memory, int(used.max()))
        self.log.extend(k, starts, duration, 1, c, d, c + d, 0, used, live,
                        self.work + (c + d) * np.arange(k - 1, -1, -1))
        self.iteration += k
        self.policy.repeated(k, starts)
        if k < limit and not cut:            # stopped by `until` or `most` alone
            self._resume = (float(ends[k]), self._repeat_chunk,
                            (pre, chunk, dec, limit - k, last))
        return float(ends[k]), finished

    def _duration(self, pre, chunk, chunk_sum, dec) -> float:
        """The batch's duration, from the token counts alone where the model allows."""
        tm = self.time_model
        if tm.counts_only:
            duration = tm.count_duration(chunk_sum, dec.size)
        else:
            tab = self.table
            duration = float(tm.duration(BatchLoad(chunk, tab.prefilled[pre], tab.kv(dec))))
        if not duration > 0:
            raise ValueError(f"{tm!r} returned a non-positive duration {duration}")
        return duration

    def _credit_cached(self, pre, cached):
        """Prompt tokens of ``pre`` found in a prefix cache: prefilled now, never computed;
        their KV is resident (shared blocks are the policy's to count)."""
        tab = self.table
        total = int(cached.sum())
        fresh = pre[(tab.prefilled[pre] == 0) & (cached > 0)]   # they promise from now on
        self.promised += int(tab.prefill_length(fresh).sum()) - total
        self.n_prefilling += fresh.size
        tab.prefilled[pre] += cached
        tab.cached[pre] += cached
        self.work -= total
        self.kv_total += total

    def _prefill(self, pre, chunk, end):
        """Give ``pre`` their chunks; return those whose prefill ends here and that emit a
        token at ``end`` (the real engines' convention)."""
        tab = self.table
        if pre.size == 1:    # one member, plain integers (_prefill_few's loop costs RAD more)
            r, c = int(pre[0]), int(chunk[0])
            prefilled = int(tab.prefilled[r]) + c
            tab.prefilled[r] = prefilled
            left = int(tab.prompt[r]) + (int(tab.recomputed[r]) if tab.recomputing else 0
                                         ) - prefilled
            # the promise: what is left of a begun prefill (none before its first chunk)
            begun = prefilled > c
            self.promised += max(left, 0) - (left + c if begun else 0)
            if left > 0:
                self.n_prefilling += not begun
                return _NONE
            self.n_prefilling -= begun
            done = pre
        elif pre.size <= _FEW:
            done = self._prefill_few(pre, chunk)
            if not done.size:
                return _NONE
        else:
            prefilled = tab.prefilled[pre] + chunk
            tab.prefilled[pre] = prefilled
            left = tab.prefill_length(pre) - prefilled
            done = left <= 0
            begun = prefilled > chunk
            self.promised += int(np.where(done, 0, left).sum()) - int(
                np.where(begun, left + chunk, 0).sum())
            self.n_prefilling += int(np.count_nonzero(~done & ~begun)) - int(
                np.count_nonzero(done & begun))
            if not np.count_nonzero(done):
                return _NONE
            done = pre[done]
        self.n_decode += done.size
        tab.prefill_done[done] = end
        tab.in_decode[done] = True
        if not tab.emit_first:
            return _NONE
        tab.decoded[done] += 1          # the iteration that ends the prompt emits a token
        self.work -= done.size
        return done

    def _prefill_few(self, pre, chunk):
        """:meth:`_prefill`'s chunks and ledger for a few members (two or more), in plain
        integers; the ids of those whose prefill ends (an array)."""
        tab = self.table
        prefilled, prompt = tab.prefilled, tab.prompt
        again = tab.recomputed if tab.recomputing else None
        done = []
        for r, c in zip(pre.tolist(), chunk.tolist(), strict=True):
            begun = int(prefilled[r])        # a begun prefill's promise is what is left
            prefilled[r] = begun + c
            left = int(prompt[r]) + (int(again[r]) if again is not None else 0) - begun - c
            self.promised += max(left, 0) - (left + c if begun else 0)
            if left > 0:
                self.n_prefilling += not begun
            else:
                self.n_prefilling -= begun > 0
                done.append(r)
        return np.array(done, dtype=np.int64) if done else _NONE

    def _emit(self, dec, over, done, t, end, fresh=False):
        """The tokens of a batch's decode members ``dec`` (``over``: those that now have all
        their output) and of a few requests ``done`` whose prefill ended, all emitted at
        ``end``: stamped, and the requests with all their output finished, as
        :meth:`_stamp_tokens` and :meth:`_finish` do for them together (``fresh``: every
        decode member emitted its last token at ``t``)."""
        tab = self.table
        if dec.size:
            self._stamp_tokens(dec, t, end, fresh)
        last = []
        for r in done.tolist():
            self._stamp_one(r, t, end)
            if tab.decoded[r] >= tab.output[r]:
                last.append(r)
        if not (dec.size and np.count_nonzero(over)):
            if not last:
                return _NONE
            finished = np.array(last, dtype=np.int64)
        else:
            finished = np.concatenate([dec[over], last]) if last else dec[over]
        return self._leave(np.sort(finished) if finished.size > 1 else finished, end)

    def _finish(self, emitted, end):
        """Stamp and remove the requests of ``emitted`` that now have all their output."""
        tab = self.table
        done = tab.decoded[emitted] >= tab.output[emitted]
        if not np.count_nonzero(done):
            return _NONE
        return self._leave(np.sort(emitted[done]), end)

    def _leave(self, finished, end):
        """Stamp the sorted ids ``finished`` finished at ``end`` and remove them."""
        tab = self.table
        self.kv_total -= tab._kv_of(int(finished[0])) if finished.size == 1 else int(
            tab.kv(finished).sum())
        self.n_decode -= finished.size       # a request finishes in decode
        tab.finish[finished] = end
        self._drop(finished)
        return finished

    def _drop(self, finished):
        """Remove the sorted ids ``finished`` from ``live`` (sorted too: ids are given in
        arrival order). The oldest requests leave by a view of the rest (no copy: a queue
        that grows costs nothing where its head finishes)."""
        live = self.live
        rest = live.size - finished.size
        if finished.size and live[finished.size - 1] == finished[-1]:   # live's head
            self.live = self._counted = live[finished.size:]
            self._live_at += finished.size
            return
        spare = self._spare = np.empty(max(2 * rest, 64), dtype=np.int64)   # room to grow
        self._live_at = 0
        if finished.size > 8:
            keep = np.ones(live.size, dtype=bool)
            keep[live.searchsorted(finished)] = False
            self.live = self._counted = np.compress(keep, live, out=spare[:rest])
            return
        parts, start = [], 0                 # a few: the runs between them, copied once
        for at in live.searchsorted(finished).tolist():
            parts.append(live[start:at])
            start = at + 1
        parts.append(live[start:])
        self.live = self._counted = np.concatenate(parts, out=spare[:rest])

    def _stamp_one(self, r, t, end):
        """:meth:`_stamp_tokens` of the one request ``r``, in plain floats."""
        tab = self.table
        gap = end - float(tab.last_token[r])        # NaN for a first token
        shared = end - t
        if gap > tab.tbt_max[r]:
            tab.tbt_max[r] = gap
        if gap == shared:
            self.tbt.add_shared(shared, 1, None if self.tbt.single else tab.cls[r: r + 1])
        elif gap != gap:
            tab.first_token[r] = end
        else:
            self.tbt.add(tab.cls[r: r + 1], np.array([gap]))
        tab.last_token[r] = end

    def _stamp_tokens(self, rid, t, end, fresh=False):
        """Time stamps of the tokens ``rid`` emit at ``end``: first tokens, and the gaps
        since each request's previous token (TBT). ``fresh``: every one of them emitted its
        previous token at ``t`` (known without reading ``last_token``)."""
        tab = self.table
        shared = end - t                        # the gap of each request that emitted at t
        if fresh:
            last, regular, count = None, None, rid.size
        else:
            last = tab.last_token[rid]          # NaN before a first token
            regular = last == t
            count = np.count_nonzero(regular)
        if count and count == rid.size:         # every gap is the shared one
            tab.tbt_max[rid] = np.fmax(tab.tbt_max[rid], shared)
            self.tbt.add_shared(shared, count, None if self.tbt.single else tab.cls[rid])
            tab.last_token[rid] = end
            return
        gaps = end - last
        tab.tbt_max[rid] = np.fmax(tab.tbt_max[rid], gaps)
        if count:
            self.tbt.add_shared(shared, count, None if self.tbt.single else tab.cls[
                rid[regular]])
        first = np.isnan(gaps)
        firsts = np.count_nonzero(first)
        if firsts:
            tab.first_token[rid[first]] = end
        if count + firsts < rid.size:           # (a gap that rounds to the shared one too)
            other = ~(first | regular)
            gaps, rid_other = gaps[other], rid[other]
            common = gaps == gaps[0]            # those that emitted together before (RAD's
            alike = np.count_nonzero(common)    # decodes after a prefill): held once
            if alike > 1:
                self.tbt.add_shared(float(gaps[0]), alike,
                                    None if self.tbt.single else tab.cls[rid_other[common]])
                gaps, rid_other = gaps[~common], rid_other[~common]
            if gaps.size:
                self.tbt.add(tab.cls[rid_other], gaps)
        tab.last_token[rid] = end

    def _repeat(self, dec, through, limit, books, arrivals, need, t, until, most):
        """The fast path: from ``t``, run the decode-only batch ``dec`` again and again in
        closed form, less each member once it has finished when ``through`` is set
        (:meth:`Policy.drains`, ``dec`` ``None``: every request in the system;
        :meth:`Policy.decodes_through`; else until the first member finishes,
        :meth:`Policy.steady`), at most ``limit`` times (the policy's bound). Returns the
        end of the stretch and the requests it finished. ``books``: the policy keeps books
        over the stretch, told of the ``k`` batches run (their starts) by its
        ``repeated(k, starts)``. ``arrivals``: the promise holds whatever arrives, so the
        pre-loaded requests that arrive on the way are admitted as stepping admits them
        (each before the first batch starting at or after its arrival: the log's
        population and work count it from there), up to the first that arrives in decode
        (an empty prompt would join the decodes), where the stretch stops.

        A stretch of at most :data:`_SHORT` batches is stepped instead, with the same
        records, books and stretch to go on with (:meth:`_short_length`,
        :meth:`_step_stretch`).

        The stretch is checked analytically: members stay in decode (no prefill, no
        eviction); the token load only falls from the checked one; no member decodes past
        its output (2.5c: batch ``j`` holds the members owing at least ``j`` tokens);
        memory after batch ``j`` stays within ``M``. It stops before the first batch that
        would start at or after ``until``, after ``most`` batches, or at the end of the
        promise (the first completion, or the last, or ``limit``). Stopped by ``until`` or
        ``most`` alone, it is kept to go on with (:meth:`_iterate`) unless a request
        arrives first. ``need``: the promise holds only while the memory left free after a
        batch, ``M`` less its memory, is below ``need`` (0: always); the stretch stops
        before the first batch that leaves ``need`` free.
        """
        tab = self.table
        if dec is None:
            dec = self.live
        if self.memory is not None and self.kv_total + dec.size > self.memory:
            return t, _NONE                  # the first batch's memory is over M: none runs
        if arrivals:
            until = min(until, self._arrival_in_decode())
        left = tab.output[dec] - tab.decoded[dec]          # >= 1 for every member
        if self._decodes_stepped:
            return self._step_stretch(dec, through, limit, books, arrivals, t, None, False,
                                    (left, need, until, most))
        short = self._short_length(dec, left, through, limit, need, t, until, most)
        if short is not None:
            return self._step_stretch(dec, through, limit, books, arrivals, t, *short)
        if left.size > 1:
            order = left.argsort(kind="stable")
            left = left[order]
        else:
            order = None
        promised = min(int(left[-1] if through else left[0]), limit)
        k = min(most, promised)
        context = tab.kv(dec) if order is None else tab.kv(dec)[order]
        held = None if self.time_model.counts_only else _cumsum_from(0, context)
        freed = _cumsum_from(0, context + left)              # KV of finished members
        stop = None             # the first batch over M, or leaving ``need`` free
        n = min(k, 32)          # durations in blocks, four times longer each, up to `until`
        while True:
            steps = np.arange(1, n + 1)
            gone = left.searchsorted(steps, side="left")   # members finished before batch j
            decodes = dec.size - gone
            durations = self.time_model.decode_durations(   # (Σ context + j over batch j)
                decodes, None if held is None else held[-1] - held[gone] + steps * decodes)
            if durations is None:
                return t, _NONE
            ends = _cumsum_from(t, durations)                 # sequential, as t += τ
            written = decodes.cumsum()
            memory = self.kv_total + written - freed[gone]
            if self.memory is not None:
                stops = memory > self.memory
                if need:                     # where the memory left free reaches ``need``
                    stops |= memory <= self.memory - need
                if np.count_nonzero(stops):
                    stop = int(stops.argmax())
            if n == k or ends[n] >= until or stop is not None:
                break
            n = min(k, 4 * n)
        k = min(n, int(ends[:n].searchsorted(until, side="left")))
        cut = stop is not None and stop < k
        if cut:
            k = stop
        if k < 1:
            return t, _NONE
        ends, durations, decodes, gone, memory, written = (
            ends[: k + 1], durations[:k], decodes[:k], gone[:k], memory[:k], written[:k])
        if not durations.min() > 0:
            raise ValueError(f"{self.time_model!r} returned a non-positive duration")

        emitted = np.minimum(left, k)                      # tokens each member emits
        members = dec if order is None else dec[order]
        tab.decoded[members] += emitted
        # the first batch's tokens close gaps of any length (or are first tokens), but the
        # one each member's token at `t` leaves where every request in decode emitted one
        # there; every later gap is the last batch's duration
        self._stamp_tokens(members, t, ends[1], self._fresh_decodes(t))
        if k > 1:
            gaps = ends[2:] - ends[1:-1]
            longest = np.concatenate([[0.0], np.maximum.accumulate(gaps)])
            tab.tbt_max[members] = np.maximum(tab.tbt_max[members], longest[emitted - 1])
            tab.last_token[members] = ends[emitted]
            # member i closes the gaps of batches 2 … emitted[i]: gaps[0 : emitted[i] - 1]
            if self.tbt.single:     # emitted ascends: gap g is closed by those with more
                closed = emitted.size - (emitted - 1).searchsorted(steps[: k - 1] - 1, "right")
                self.tbt.add_counted(gaps, closed)
            else:
                self.tbt.add_intervals(gaps, np.zeros_like(emitted), emitted - 1,
                                       tab.cls[members])
        work = self.work - written
        population, logged = self.live.size - gone, work
        if arrivals:                         # the rows arrived by each batch's start
            came = self._arrival[self._pending:].searchsorted(ends[:-1], side="right")
            population = population + came
            logged = work + (self._owed[came + self._pending] - self._owed[self._pending])
        self.log.extend(k, ends[:-1], durations, 0, 0, decodes, decodes, 0, memory,
                        population, logged)
        self.work = int(work[-1])
        self.peak_memory = max(self.peak_memory, int(memory.max()))
        self.iteration += k
        self.kv_total += int(written[-1])
        if books:
            self.policy.repeated(k, ends[:-1])
        end = float(ends[-1])
        if arrivals:
            self.admit_until(float(ends[-2]))
        elif k < promised and not cut:      # stopped by `until` or `most` alone
            self._resume = (end, self._repeat,
                            (None if through else dec, through, limit - k, books, False, 0))
        done = int(left.searchsorted(k, side="right"))     # members with left <= k
        # the members left emitted their last tokens at `end` (:meth:`_fresh_decodes`)
        self._fresh_at, self._fresh = end, members.size - done
        if not done:
            return end, _NONE
        finished = members[:done]
        tab.finish[finished] = ends[left[:done]]
        self.kv_total -= int(freed[done])
        self.n_decode -= done
        finished = np.sort(finished)
        self._drop(finished)
        return end, finished

    def _short_length(self, dec, left, through, limit, need, t, until, most):
        """The length of the stretch :meth:`_repeat` would run from ``t``, where it is at
        most :data:`_SHORT` batches, as ``(k, by_time)``; else ``None`` (or where the time
        model's durations depend on more than the token counts: the closed form runs it, or
        without one :meth:`_step_stretch` checks these rules batch by batch).

        Batch ``j`` runs by the stretch's rules (``left``: each member's output left) while
        its members owe it a token — every member where not ``through`` (the batch with a
        member's last token ends the promise), else those with ``left >= j`` — within
        ``limit``; within ``most`` and starting before ``until`` (``by_time``: the stretch
        stops there alone, and is kept to go on with); and while the memory after it stays
        within ``M`` and leaves less than ``need`` free."""
        model = self.time_model
        if not model.counts_only:
            return None
        owed = min(int(left.max() if through else left.min()), limit)
        memory, kv, members, start = self.memory, self.kv_total, dec.size, t
        for j in range(1, _SHORT + 2):
            if j > owed:
                return j - 1, False
            if j > most or not start < until:
                return j - 1, True
            if j > 1 and through:                        # members past their last token
                last = left == j - 1
                gone = int(np.count_nonzero(last))
                if gone:
                    members -= gone
                    kv -= int(self.table.kv(dec[last]).sum()) + (j - 1) * gone
            kv += members
            if memory is not None and (kv > memory or need and kv <= memory - need):
                return j - 1, False
            start += model.count_duration(0, members)
        return None

    def _step_stretch(self, dec, through, limit, books, arrivals, t, k, by_time, rules=None):
        """:meth:`_repeat`'s stretch of ``k`` batches (:meth:`_short_length`), each applied
        as :meth:`step` applies a batch (a few array operations each, where the closed form
        sets up a few dozen), members leaving as they finish, the pre-loaded requests
        arriving on the way admitted before the first batch that starts at or after them
        (``arrivals``), the policy's books told (``books``); ``by_time``: stopped by time
        alone, it is kept to go on with, as the closed form keeps it.

        ``k`` ``None``: a time model with no closed form (:meth:`TimeModel.decode_durations`)
        whose durations read the members' contexts; the stretch's rules (``rules``: each
        member's output left, ``need``, ``until``, ``most``; :meth:`_short_length`'s) are
        checked before each batch on the engine's books, which the batches before it
        moved."""
        if rules is not None:
            left, need, until, most = rules
            k = min(int(left.max() if through else left.min()), limit)
        if not k:
            return t, _NONE
        starts, done, members = [], [], dec
        for j in range(k):
            if rules is not None:
                if j >= most or not t < until:
                    k, by_time = j, True
                    break
                used = self.kv_total + members.size
                if self.memory is not None and (
                        used > self.memory or need and used <= self.memory - need):
                    k = j
                    break
            if arrivals:      # (the first batch too: it may start past an arrival)
                self.admit_until(t)
            starts.append(t)
            _, finished, t = self._run(t, _NONE, _NONE, 0, members, self.kv_total + members.size,
                                       self.live.size, 0, None, self._fresh_decodes(t))
            if finished.size:
                done.append(finished)
                if j + 1 < k:                # (through: the members are sorted ids)
                    keep = np.ones(members.size, dtype=bool)
                    keep[members.searchsorted(finished)] = False
                    members = members[keep]
        if not k:                            # (the rules stopped it before its first batch)
            return t, _NONE
        if books:
            self.policy.repeated(k, np.array(starts))
        if by_time and not arrivals:
            self._resume = (t, self._repeat,
                            (None if through else dec, through, limit - k, books, False, 0))
        if not done:
            return t, _NONE
        return t, done[0] if len(done) == 1 else np.sort(np.concatenate(done))

    def _fresh_decodes(self, t):
        """Whether every request in decode emitted its last token at ``t`` and has output
        left: the requests that emitted at the end of the last batch (:meth:`_run`) and did
        not finish number ``_fresh``, all still in decode, and they are all
        (``n_decode``). Admissions only add to ``n_decode``; evictions, stretches and
        :meth:`recount` forget the count."""
        return self._fresh_at == t and self._fresh == self.n_decode

    def _forget(self, rid, kv):
        """Take the requests ``rid``, holding ``kv``, out of the ledger (:meth:`recount`)."""
        n_decode, promised, n_prefilling = self._ledger_of(rid, kv)
        self.n_decode -= n_decode
        self.promised -= promised
        self.n_prefilling -= n_prefilling

    def _ledger_of(self, rid, kv):
        """The ledger's three counts over the requests ``rid`` holding ``kv``: how many are
        in decode, the prefill tokens not yet written of those holding KV and not in decode,
        and how many those are."""
        tab = self.table
        in_decode = tab.in_decode[rid]
        begun = rid[(kv > 0) & ~in_decode]
        promised = (int((tab.prefill_length(begun) - tab.prefilled[begun]).sum())
                    if begun.size else 0)
        return int(np.count_nonzero(in_decode)), promised, int(begun.size)

    def recount(self) -> None:
        """Count the engine's ledger again from the request table: :attr:`promised` (the
        prefill tokens not yet written of the requests that hold KV and are not in decode:
        the KV their prefills will take), :attr:`n_prefilling` (how many they are) and
        :attr:`n_decode` (the requests in decode).

        The engine keeps them by deltas as it admits, prefills, finishes and evicts, and
        recounts them at the next decision (:meth:`state`) when ``live`` was replaced from
        outside: a bulk runner (:meth:`Policy.bulk`) or a network's fast path moves the
        table, and sets ``live``, without them.
        """
        live = self.live
        self._counted = live
        self._fresh_at = None                # the table was moved from outside
        self.n_decode, self.promised, self.n_prefilling = self._ledger_of(
            live, self.table.kv(live))

    def _evict(self, rid):
        """Drop the KV cache of ``rid`` (:mod:`~queuetheory.engine.conventions`)."""
        tab = self.table
        self._resume = self._fresh_at = None
        kv = tab.kv(rid)
        self.kv_total -= int(kv.sum())
        self._forget(rid, kv)
        tab.restarts[rid] += 1
        if self.preemption == "restart":
            self.work += int(tab.prefilled[rid].sum() + tab.decoded[rid].sum())
            tab.discarded[rid] += tab.decoded[rid]
            tab.set_progress(rid, 0, 0)
            self.n_decode += int(np.count_nonzero(tab.in_decode[rid]))   # empty prompts
            return
        # recompute: the generated tokens join the prompt in a prefill to come
        decoded = tab.decoded[rid]
        self.work += int((tab.prefilled[rid] + decoded - tab.recomputed[rid]).sum())
        tab.recomputing = True
        tab.recomputed[rid] = decoded
        tab.prefilled[rid] = 0
        tab.in_decode[rid] = False

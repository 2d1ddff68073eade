"""Schedulers of Bari, Hegde and de Veciana: RAD (Alg. 1), the cycle scheduler
(Alg. 2), request-level batching (Alg. 3), DistServe's prefill and decode nodes (Alg. 5) and
SLAI (§6). Sarathi-Serve (Alg. 4) is :class:`~queuetheory.policies.Sarathi`
(``order="sjf_prompt"`` is SPF), or :meth:`SLAI.sarathi` with an active cap.

What is not a scheduler lives in the room of its question: the disaggregated system
:class:`queuetheory.networks.DistServe`, the random-router fleet
:func:`queuetheory.networks.simulate_fleet` (``router="random"``), and the per-class latency
figures and capacity :func:`queuetheory.capacity.slo_metrics` and
:func:`queuetheory.capacity.slo_capacity`. Their old names here (``DistServe``,
``simulate_nodes``, ``slo_metrics``, ``slo_capacity``) warn until the next release.

Conventions (spec ``rad_slai.md`` §4.0): run the engine with ``first_token="prefill"`` and output
``L^D + 1``; the last prefill chunk emits the first token (TTFT), every decode iteration one
more, so a request has ``L^D`` TBT gaps (the stop token counted). Chunk sizes are
``min(t_lcm, L^P − i + 1)`` (the printed ``L^P − i`` is off by one, I-2); Alg. 3 branches on
``mode = Decode`` (printed ``Prefill``, I-3); Alg. 4 gives one chunk per request per batch
(I-4); RAD's busy wait is an idle batch (I-21).
"""

from __future__ import annotations

from bisect import insort
from functools import partial
from itertools import islice
from math import lcm

import numpy as np
import pandas as pd

from ..engine import Batch
from ..engine.kernels import slo_slack
from ..errors import check_positive, moved_names
from .base import (
    Policy,
    _among,
    check_budget,
    decides_as_shipped,
    fit_memory,
    round_model,
    take_prefills,
)

__all__ = ["RAD", "CycleScheduler", "RequestLevel", "SLAI", "PrefillOnly", "DecodeOnly"]

_EMPTY = np.empty(0, dtype=np.int64)
#: a count no stretch reaches
_NO_BUDGET = 1 << 62


def _check_tile(tile):
    try:
        ok = len(tile) == 3 and all(
            isinstance(x, int | np.integer) and not isinstance(x, bool) and x >= 1
            for x in tile)
    except TypeError:
        ok = False
    if not ok:
        raise ValueError(f"tile={tile!r}: must be (t_row, t_col, t_red), three integers >= 1")
    return tuple(int(x) for x in tile)


def _check_n(n):
    if n is not None:
        check_positive("n", n, integer=True)
    return n


class _TiledPolicy(Policy):
    """Common parts of RAD and Alg. 2: the optimal tile, ``t_lcm`` chunks, cycle records."""

    no_token_budget = round_model("Bari, Hegde, de Veciana", "tile model")

    def __init__(self, tile, n=None):
        self.tile = _check_tile(tile)
        self.n = _check_n(n)

    @property
    def t_col(self) -> int:
        return self.tile[1]

    @property
    def t_lcm(self) -> int:
        return lcm(*self.tile)

    def supports(self, *, memory, first_token) -> str | None:
        if memory is not None:
            return ("Bari, Hegde, de Veciana's model has no KV memory and this schedule has "
                    "no memory rule; run it with memory=None")
        return None

    def _reset(self):
        self._lcm = self.t_lcm
        self._ric = 0
        self._cycles = []
        self._dec = _EMPTY        # ids of the requests in decode, ascending (books)
        self._joined = []         # ids that entered decode since, for the books
        self._top = -1            # the youngest id in the books
        self._partial = -1        # the id whose prefill is under way
        self._parked = _EMPTY     # ids that arrived part-way through their prompt, ascending
        self._seen = 0            # every id below it has been seen in a state

    def _split(self, state):
        """The count ``d = |D|`` of requests in decode, the position of the request whose
        prefill is under way (``None``: none) and, when none is, the position of the oldest
        waiting request (``None``: none waits); ``d`` is ``None`` while a prefill is under
        way (it goes on whatever decodes). ``D``'s positions, where a batch needs them, are
        :meth:`_decoding`'s.

        Kept as books, so that no column of the whole queue is read: a request enters
        decode when the prefill under way ends (prefills are never interleaved with other
        work, nothing is evicted: there is no memory limit), or arrives there (a prompt of
        no tokens, or handed over prefilled, ``Engine.add(ready=...)``: the new ids are the
        tail of the ascending ``state.rid``); it leaves when it finishes (its id is no
        longer in the system). One that arrives part-way through its prompt waits to go on
        in arrival order once the prefill under way has ended, as the first part-way
        request of the queue would. The books hold every request in decode and those of
        them that finished, so they hold none that finished where their count is the
        state's ``n_decode``; and ``D`` is the oldest ``d`` requests where the ``d``-th
        oldest is its youngest."""
        rid, tab = state.rid, state._t
        partial = self._partial
        if partial >= 0:
            if not tab.in_decode[partial]:
                return None, int(rid.searchsorted(partial)), None
            self._partial = -1                             # its last chunk ran
            self._joined.append(partial)
            self._top = max(self._top, partial)
        if rid[-1] >= self._seen:
            new = rid[int(rid.searchsorted(self._seen)):]
            ready = tab.in_decode[new]
            if np.count_nonzero(ready):                    # younger than every id seen
                self._joined.extend(new[ready].tolist())
                self._top = max(self._top, int(new[ready][-1]))
            if np.count_nonzero(tab.prefilled[new]):       # (a state built by hand)
                begun = ~ready & (tab.prefilled[new] > 0)
                self._parked = np.concatenate((self._parked, new[begun]))
            self._seen = int(rid[-1]) + 1
        if self._parked.size:                              # the oldest goes on first
            self._partial = int(self._parked[0])
            self._parked = self._parked[1:]
            return None, int(rid.searchsorted(self._partial)), None
        d = self._dec.size + len(self._joined)
        if d != state.n_decode:                            # finished: left the system
            d = self._decoding(state).size
        if d >= rid.size:
            return d, None, None
        if not d or rid[d - 1] == self._top:               # D is the oldest requests
            return d, None, d
        pos = self._decoding(state)
        gaps = (pos != np.arange(d)).nonzero()[0]
        return d, None, int(gaps[0]) if gaps.size else d   # the first not in D

    def _decoding(self, state):
        """``D``: the positions of the requests in decode, ascending (the books brought up
        to date, the finished ones dropped)."""
        dec = self._dec
        if self._joined:
            dec = np.concatenate((dec, self._joined))
            if dec.size > 1 and np.count_nonzero(dec[1:] < dec[:-1]):   # (one parked)
                dec.sort()
            self._joined = []
        rid, left = state.rid, state.n_decode
        if dec.size != left:                               # drop those with a finish time
            there = np.isnan(state._t.finish[dec])
            if np.count_nonzero(there) == left:
                dec = dec[there]
        d = dec.size
        if d == left and (not d or rid[d - 1] == dec[-1]):
            pos = np.arange(d)                             # the oldest d requests
        else:
            pos = rid.searchsorted(dec)
            there = rid.take(pos, mode="clip") == dec
            if np.count_nonzero(there) < d:                # (left otherwise)
                dec, pos = dec[there], pos[there]
        self._dec = dec
        self._top = int(dec[-1]) if dec.size else -1
        return pos

    def _continue_prefill(self, state, j):
        """The next chunk of the request at position ``j`` whose prefill is under way, or
        None (prefills are never interleaved with other work in RAD and Alg. 2)."""
        if j is None:
            return None
        j = np.array([j])
        return Batch(j, np.array([min(self._lcm, int(state.remaining_prefill_of(j)[0]))]))

    def _start_prefill(self, state, first):
        """Start the prefill of the oldest waiting request (position ``first``)."""
        r = int(state.rid[first])
        if self._ric == 0:
            self._cycles.append({"start": state.time, "pending": state.n, "rids": []})
        self._ric += 1
        self._partial = r
        self._cycles[-1]["rids"].append(r)
        return Batch(np.array([first]), np.array([min(self._lcm, int(state._t.prompt[r]))]))

    def _full(self):
        return self.n is not None and self._ric >= self.n

    def steady_chunk(self, state, batch):
        """The promise after a batch of one prefill chunk (prefills run alone): a count no
        stretch reaches, and the last chunk. The engine asks only where the chunk left some
        of the prompt, so it was ``t_lcm`` tokens; while nothing arrives the next call finds
        that prefill still under way and returns its next chunk alone, ``min(t_lcm, left)``
        tokens: ``t_lcm`` while more than that is left, then the rest — the last chunk — and
        changes nothing: the books see no request enter or leave decode (the request whose
        prefill ends joins ``D`` at the call after its last chunk), and the cycle count
        moves only when a prefill starts.

        Parameters
        ----------
        state : State
            The state the batch was built on.
        batch : Batch
            The batch of one prefill chunk :meth:`schedule` returned on it.

        Returns
        -------
        tuple of (int, bool) or int
            The further repeats promised and the last chunk after them; 0 for a subclass
            that decides otherwise.
        """
        if decides_as_shipped(self) and not batch.decode.size:
            return _NO_BUDGET, True
        return 0

    def cycles(self, result) -> pd.DataFrame:
        """One row per cycle of the run: start, pending requests ``X[c]`` at its start,
        requests started, end (last finish of its requests) and ``Σ T*^R`` is left to
        :func:`~queuetheory.bounds.rad_capacity.request_time` (``rids`` are given)."""
        fin = result.requests["finish"].to_numpy()
        rows = []
        for c in self._cycles:
            rids = np.asarray(c["rids"], dtype=np.int64)
            ends = fin[rids]
            rows.append({"start": c["start"], "pending": c["pending"], "started": rids.size,
                         "end": float(np.max(ends)) if np.all(np.isfinite(ends)) else np.nan,
                         "rids": rids})
        return pd.DataFrame(rows)


class RAD(_TiledPolicy):
    """Resource-Aware Dynamic scheduler (§4.2, Alg. 1).

    Pure batches only: either one decode iteration for every decode-phase request (when
    ``t*_col`` of them decode, nothing waits, or ``n`` requests were started this cycle), or
    the whole prefill of the oldest waiting request, alone, in ``t_lcm`` chunks. A cycle ends
    when the decode set empties after a decode batch (line 9); ``strict_cycles=True`` ends it
    only when ``n`` were started or nothing waits (I-28). ``n=None`` is ``n = ∞``.

    Parameters
    ----------
    tile : tuple of int
        The optimal tile ``t* = (t*_row, t*_col, t*_red)`` of Assumption 1, three integers
        ``>= 1``: a decode batch takes ``t*_col`` requests, a prefill chunk
        ``t_lcm = lcm(t*_row, t*_col, t*_red)`` tokens.
    n : int, optional
        The most requests started per cycle; ``None``: no limit.
    strict_cycles : bool, default False
        End a cycle only when ``n`` were started or nothing waits (I-28), not whenever the
        decode set empties.

    Raises
    ------
    ValueError
        For a ``tile`` that is not three integers ``>= 1``, or an ``n`` that is not a
        positive integer.
    """

    def __init__(self, tile, n: int | None = None, *, strict_cycles: bool = False):
        super().__init__(tile, n)
        self.strict_cycles = bool(strict_cycles)

    def _reset(self):
        super()._reset()
        self._last_decode = False

    def _schedule(self, state):
        d, under_way, first = self._split(state)
        batch = self._continue_prefill(state, under_way)
        if batch is not None:
            return batch
        if self._last_decode and d == 0 and (
                not self.strict_cycles or self._full() or first is None):
            self._ric = 0                                    # line 9: end of cycle
        self._last_decode = False
        if d >= self.t_col or first is None or self._full():
            self._last_decode = True
            return Batch(decode=self._decoding(state))
        return self._start_prefill(state, first)

    def steady(self, state, batch):
        """A decode-only batch of RAD is line 4's ``Batch(decode=D)`` (an idle batch is never
        repeated): no prefill was under way, and one of ``|D| >= t*_col``, ``P = ∅``, ``n``
        started holds, with ``_last_decode`` set. While nothing arrives, nothing finishes and
        only ``D`` decodes, no request leaves or enters ``D`` or ``P``, none starts a prefill
        and the cycle count does not move: the same branch returns the same ``D`` (line 9's
        cycle end needs ``D = ∅``), and ``_last_decode`` stays set.

        Parameters
        ----------
        state : State
            The state the batch was built on.
        batch : Batch
            The batch :meth:`schedule` returned on it.

        Returns
        -------
        bool
            Whether the batch repeats (``True`` for a decode batch of this policy as
            shipped).
        """
        return decides_as_shipped(self) and bool(batch.decode.size)

    def decodes_through(self, state, batch):
        """A decode batch of all of ``D`` (line 4) repeats, less the members that finish,
        whatever arrives — an arrival with a prompt joins no ``D``, and line 9's cycle end
        needs ``D = ∅`` — as long as line 4's branch is taken on a test arrivals do not
        undo:

        - once ``n`` requests were started this cycle (its third test): the cycle count
          cannot fall before ``D`` empties, so to the members' last tokens;
        - while at least ``t*_col`` members are left (its first test): with ``r`` the
          ``t*_col``-th largest count of output tokens the members owe after the batch
          (the engine asks once it ran: the table holds its tokens), the ``r`` batches
          after it (before the ``j``-th of them, the members owing at least ``j`` are
          left).

        ``_last_decode`` stays set, and the books read arrivals and completions at the next
        call.

        Parameters
        ----------
        state : State
            The state the batch was built on.
        batch : Batch
            The decode-only batch :meth:`schedule` returned on it.

        Returns
        -------
        bool or tuple of int
            ``True`` once ``n`` requests were started this cycle, ``(0, r)`` where at
            least ``t*_col`` members decode, else ``False`` (as shipped).
        """
        if not decides_as_shipped(self) or batch.prefill.size:
            return False
        if self._full():
            return True
        members, t_col = self._dec, self.t_col        # D's ids, as the decision left them
        if members.size < t_col:
            return False
        tab = state._t
        owed = tab.output[members] - tab.decoded[members]
        r = int(np.partition(owed, members.size - t_col)[members.size - t_col])
        return (0, r) if r else False

    def drains(self, state):
        """Every request in decode (``P = ∅``, none part-way through its prefill) and
        ``_last_decode`` already set: each call returns ``Batch(decode=D)`` for the requests
        left, sets nothing new, and the cycle end of line 9 waits for the next call after the
        system empties, which the engine makes as stepping would.

        Parameters
        ----------
        state : State
            A state where every request in the system is in decode.

        Returns
        -------
        bool
            Whether the policy, as shipped, decodes them all to completion (after a
            decode batch).
        """
        return decides_as_shipped(self) and self._last_decode


class CycleScheduler(_TiledPolicy):
    """Algorithm 2 (Appendix D): prefill up to ``n`` waiting requests (each alone, ``t_lcm``
    chunks), then decode them ``t*_col`` at a time (FCFS refill) until all finish; repeat.

    Parameters
    ----------
    tile : tuple of int
        The optimal tile ``t* = (t*_row, t*_col, t*_red)`` of Assumption 1, three integers
        ``>= 1``: a decode batch takes ``t*_col`` requests, a prefill chunk
        ``t_lcm = lcm(t*_row, t*_col, t*_red)`` tokens.
    n : int, optional
        The most requests prefilled per cycle; ``None``: every waiting one.

    Raises
    ------
    ValueError
        For a ``tile`` that is not three integers ``>= 1``, or an ``n`` that is not a
        positive integer.
    """

    def _reset(self):
        super()._reset()
        self._mode = "prefill"

    def _schedule(self, state):
        d, under_way, first = self._split(state)
        batch = self._continue_prefill(state, under_way)
        if batch is not None:
            return batch
        if self._mode == "prefill":
            if first is not None and not self._full():
                return self._start_prefill(state, first)
            self._mode = "decode"
        if d:
            return Batch(decode=self._decoding(state)[: self.t_col])
        self._mode, self._ric = "prefill", 0
        return self._start_prefill(state, first)

    def steady(self, state, batch):
        """A decode-only batch is ``D[:t*_col]`` in decode mode (the call that returned it
        left ``_mode = "decode"``, and no prefill was under way). While nothing arrives,
        nothing finishes and only its members decode, ``D`` keeps its positions, no prefill
        starts and the mode stays: the same ``t*_col`` oldest decodes, no state changed.

        Parameters
        ----------
        state : State
            The state the batch was built on.
        batch : Batch
            The batch :meth:`schedule` returned on it.

        Returns
        -------
        bool
            Whether the batch repeats (``True`` for a decode batch of this policy as
            shipped).
        """
        return decides_as_shipped(self) and bool(batch.decode.size)

    def decodes_through(self, state, batch):
        """A decode batch of all of ``D`` (no more than ``t*_col`` requests in decode) in
        decode mode: each call returns ``D[:t*_col] = D`` for the members left whatever
        arrives — an arrival with a prompt joins no ``D`` and waits (a prefill starts only
        back in prefill mode, and the switch needs ``D = ∅``: the next call after the last
        member finishes); the books read arrivals and completions at the next call (ids
        from ``_seen`` on, ``D`` filtered by ``rid``) and nothing else changes.

        Parameters
        ----------
        state : State
            The state the batch was built on.
        batch : Batch
            The decode-only batch :meth:`schedule` returned on it.

        Returns
        -------
        bool
            Whether the batch was made in decode mode (as shipped).
        """
        return (decides_as_shipped(self) and not batch.prefill.size
                and self._mode == "decode")

    def drains(self, state):
        """Every request in decode, in decode mode and no more of them than ``t*_col``: each
        call returns ``D[:t*_col] = D`` for the requests left and changes nothing (the switch
        back to prefill mode needs ``D = ∅``: the next call after the system empties).

        Parameters
        ----------
        state : State
            A state where every request in the system is in decode.

        Returns
        -------
        bool
            Whether the policy, as shipped, decodes them all to completion (in decode
            mode, at most ``t*_col`` of them).
        """
        return (decides_as_shipped(self) and self._mode == "decode"
                and state.n <= self.t_col)


class RequestLevel(Policy):
    """Request-level batching (Alg. 3, FasterTransformer style, mode test fixed, I-3): up to
    ``batch_size`` waiting requests are prefilled whole in one batch, then decoded together
    until all finish; arrivals wait.

    The engine steps it; each cohort's decode phase runs in one stretch, arrivals admitted
    on the way (:meth:`decodes_through`).

    Parameters
    ----------
    batch_size : int
        The most requests prefilled (and then decoded) together.

    Raises
    ------
    ValueError
        For a ``batch_size`` that is not a positive integer.
    """

    no_token_budget = round_model("Bari, Hegde, de Veciana", "tile model")

    def __init__(self, batch_size: int):
        check_positive("batch_size", batch_size, integer=True)
        self.batch_size = int(batch_size)

    def supports(self, *, memory, first_token) -> str | None:
        if memory is not None:
            return ("Bari, Hegde, de Veciana's model has no KV memory and this schedule has "
                    "no memory rule; run it with memory=None")
        return None

    def _schedule(self, state):
        m = state.n_decode
        if not m:                          # every request waits: the oldest form a cohort
            S = np.arange(min(state.n, self.batch_size))
            return Batch(S, state.remaining_prefill_of(S))
        D = np.arange(m)                   # a cohort is the oldest requests, all prefilled
        if not state.of("in_decode", D).all():      # (or empty prompts elsewhere)
            D = state.in_decode.nonzero()[0]
        return Batch(decode=D)

    def decodes_through(self, state, batch):
        """A decode-only batch is every request in decode (``D ≠ ∅``); the policy keeps no
        state. Each call decodes the members left whatever arrives: an arrival with a prompt
        waits until ``D`` empties (the next call after the last member finishes).

        Parameters
        ----------
        state : State
            The state the batch was built on.
        batch : Batch
            The decode-only batch :meth:`schedule` returned on it.

        Returns
        -------
        bool
            ``True`` for a decode-only batch of this policy as shipped.
        """
        return decides_as_shipped(self) and not batch.prefill.size


class PrefillOnly(Policy):
    """A DistServe prefill node (Alg. 5): the oldest prompt alone, in chunks of ``chunk``
    tokens (None: whole).

    Parameters
    ----------
    chunk : int, optional
        The most prompt tokens per batch; ``None``: the whole prompt at once.

    Raises
    ------
    ValueError
        For a ``chunk`` that is not a positive integer.
    """

    no_token_budget = round_model("Bari, Hegde, de Veciana", "tile model")

    def __init__(self, chunk: int | None = None):
        if chunk is not None:
            check_positive("chunk", chunk, integer=True)
        self.chunk = chunk

    def supports(self, *, memory, first_token) -> str | None:
        if first_token != "prefill":
            return ("a prefill node hands requests over with their first token "
                    "(first_token='prefill')")
        if memory is not None:
            return "a prefill node hands requests over after their prompt and has no memory rule"
        return None

    def _schedule(self, state):
        j = np.flatnonzero(~state.in_decode)[:1]
        c = state.remaining_prefill[j]
        return Batch(j, c if self.chunk is None else np.minimum(c, self.chunk))


class DecodeOnly(Policy):
    """A DistServe decode node (Alg. 5): one decode iteration for every request (or the
    oldest ``cap``, e.g. ``t*_col`` for optimal tiling).

    Parameters
    ----------
    cap : int, optional
        The most requests per decode batch, the oldest first; ``None``: every request.

    Raises
    ------
    ValueError
        For a ``cap`` that is not a positive integer.
    """

    no_token_budget = round_model("Bari, Hegde, de Veciana", "tile model")

    def __init__(self, cap: int | None = None):
        if cap is not None:
            check_positive("cap", cap, integer=True)
        self.cap = cap

    def supports(self, *, memory, first_token) -> str | None:
        return ("a decode node serves requests handed over prefilled (DistServe, "
                "Engine.add(ready=...)); simulate would never prefill them")

    def _schedule(self, state):
        return Batch(decode=np.flatnonzero(state.in_decode)[: self.cap])


class _SlaiBooks:
    """What SLAI keeps between decisions instead of reading every request: the requests in
    decode (``dec``) and those holding KV part-way through their prefill (``partial``), ids
    ascending, and the waiting queue (no KV) as a sorted list of keys, queue order
    (:meth:`SLAI._key`), with what the last batch admitted and evicted.

    :meth:`sync` brings them up to a new state from their own members (who finished, who
    finished a prefill, who arrived); they hold only while the state is the one the engine
    reached by running SLAI's batches (checked: the same table, the last batch applied, the
    count of requests), and :meth:`of` builds them afresh, from every request, wherever a
    state is not (``None`` where a request has an empty prompt or was put back by a
    recompute, which the books do not describe: SLAI then reads the state)."""

    def __init__(self, table, dec, partial, keys, seen):
        self.table, self.dec, self.partial, self.keys, self.seen = (
            table, dec, partial, keys, seen)
        self.admitted = self.evicted = _EMPTY

    @classmethod
    def of(cls, state, policy):
        """The books of ``state`` built from every request, or ``None`` (see above)."""
        tab, live = state._t, state.rid
        if (tab.recomputing or np.count_nonzero(live[1:] <= live[:-1])
                or np.count_nonzero(state.prompt < 1)):
            return None
        in_decode, holds = state.in_decode, state.kv > 0
        if np.count_nonzero(in_decode & ~holds):
            return None
        keys = sorted(policy._key(tab, r) for r in live[~in_decode & ~holds].tolist())
        return cls(tab, live[in_decode], live[~in_decode & holds], keys,
                   int(live[-1]) if live.size else -1)

    def sync(self, state, policy) -> bool:
        """Bring the books up to ``state``; whether they hold there."""
        tab, live = state._t, state.rid
        adm, ev = self.admitted, self.evicted
        if (tab is not self.table or tab.recomputing
                or (adm.size and np.count_nonzero(tab.prefilled[adm] == 0))
                or (ev.size and np.count_nonzero(tab.prefilled[ev]))):
            return False
        dec, partial = self.dec, self.partial
        if dec.size:
            dec = dec[np.isnan(tab.finish[dec])]
        if partial.size:
            partial = partial[np.isnan(tab.finish[partial])]
            done = tab.in_decode[partial]
            if np.count_nonzero(done):
                dec = np.concatenate([dec, partial[done]])
                dec.sort()
                partial = partial[~done]
        self.dec, self.partial = dec, partial
        if live.size and live[-1] > self.seen:
            new = live[int(live.searchsorted(self.seen, side="right")):]
            if np.count_nonzero(tab.prompt[new] < 1):
                return False
            for r in new.tolist():
                insort(self.keys, policy._key(tab, r))
            self.seen = int(new[-1])
        return live.size == dec.size + partial.size + len(self.keys)

    def first(self, k: int) -> np.ndarray:
        """The ids of the first ``k`` waiting requests, in queue order."""
        return np.array([key[-1] for key in self.keys[:k]], dtype=np.int64)

    def first_fitting(self, k: int, room: int, prompt: np.ndarray) -> np.ndarray:
        """The ids of the first waiting requests, at most ``k``, whose prompts (``prompt``
        by id) together fit in ``room`` tokens: the prefix of :meth:`first` that the
        running sum of the prompts keeps (prompts are positive), read key by key."""
        keys = self.keys
        if k < 1 or not keys or prompt[keys[0][-1]] > room:      # (the usual answer)
            return _EMPTY
        ids, total = [], 0
        for key in islice(keys, k):
            r = key[-1]
            total += int(prompt[r])
            if total > room:
                break
            ids.append(r)
        return np.array(ids, dtype=np.int64)

    def fit(self, state, prefill, chunk, decode, free) -> Batch:
        """:func:`~queuetheory.policies.base.fit_memory` where the decodes overflow the
        ``free`` memory (neither written nor promised): the same evictions, the youngest
        holders of KV first until what they free (their KV, the prompt a part-way prefill
        was promised, their decode token) covers the overflow, read one by one from the
        books (a few, as a rule). ``decode`` is some of the books' decodes, or all of them
        in ascending positions (as :meth:`SLAI._decide` takes them all)."""
        tab, rid = state._t, state.rid
        need = decode.size - free
        every = decode.size == self.dec.size
        members = None if every else set(rid[decode].tolist())
        dec, partial = self.dec.tolist(), self.partial.tolist()
        out, saving = [], 0
        while saving < need and (dec or partial):       # the youngest of the two first
            if dec and (not partial or dec[-1] > partial[-1]):
                r = dec.pop()
                saving += tab._kv_of(r) + (every or r in members)
            else:
                r = partial.pop()
                saving += tab._kv_of(r) + int(tab.prompt[r]) - int(tab.prefilled[r])
            out.append(r)
        evict = rid.searchsorted(out)                   # descending, as the ids
        among = evict[::-1]
        if every:                                       # the youngest decodes leave
            decode = decode[: len(dec)]
        else:
            decode = decode[~_among(decode, among)]
        if prefill.size:                                # residents not evicted go on
            keep = (tab.prefilled[rid[prefill]] > 0) & ~_among(prefill, among)
            prefill, chunk = prefill[keep], chunk[keep]
        return Batch(prefill, chunk, decode, evict)

    def commit(self, state, batch, policy) -> None:
        """The batch decided on ``state``: the requests it admits (the queue's first) now
        hold KV, the ones it evicts wait again."""
        tab, live = state._t, state.rid
        ev = live[batch.evict] if batch.evict.size else _EMPTY
        adm = _EMPTY
        if batch.prefill.size:
            pre = live[batch.prefill]
            adm = pre[tab.prefilled[pre] == 0]
        if adm.size:
            del self.keys[: adm.size]
            self.partial = np.concatenate([self.partial, adm])
            self.partial.sort()
        if ev.size:
            out = ev[::-1]                   # fit evicts the youngest first: ascending
            self.dec = self.dec[~_among(self.dec, out)]
            if self.partial.size:
                self.partial = self.partial[~_among(self.partial, out)]
            for r in ev.tolist():
                insort(self.keys, policy._key(tab, r))
        self.admitted, self.evicted = adm, ev


class SLAI(Policy):
    """SLO-Aware LLM Inference (§6).

    Each decode-phase request j has a last schedulable time (Eq. 8)
    ``C_j = e_j + TBT_j − δ t̄_batch`` (``e_j`` its last token's time, ``t̄_batch`` the running
    mean batch duration). A batch takes (1) critical decodes (``t ≥ C_j``, by ``C_j``) up to
    ``β`` and the budget, (2) one chunk for every started prefill, (3) new prefills by SPF or
    FCFS (paying first with ``paying_first``) while fewer than ``α`` requests hold KV and
    memory admits their whole prompt, (4) non-critical decodes by ``C_j`` into what is left.

    ``tbt``: TBT target per class, in the time model's unit (default free 0.5, paying 0.1:
    the paper's seconds, §7; with a millisecond model give ``tbt=(500, 100)``); ``offset``:
    ``"fixed"`` (``δ = delta``) or ``"dynamic"`` (``δ = 5`` below 96 % KV-memory use, else 10;
    §7; without a memory limit use is 0). ``beta=None`` removes the decode limit.

    Without a memory limit and with a token-count time model, ``simulate`` runs SLAI as the
    bulk rule ``slo_slack`` (:mod:`queuetheory.engine.kernels.slo_slack`), with the records
    of the step-by-step engine.

    Parameters
    ----------
    token_budget : int, default 512
        The per-batch token budget.
    alpha : int, default 128
        ``α``: new prefills start only while fewer requests hold KV (the active cap).
    beta : int or None, default 128
        ``β``: the most decodes per batch (``None``: no limit but the budget).
    delta : float, default 10.0
        ``δ`` of Eq. 8 with ``offset="fixed"``, ``>= 0``, in mean batch durations.
    offset : {"fixed", "dynamic"}, default "fixed"
        ``δ = delta``, or ``δ`` from ``dynamic`` by KV-memory use.
    order : {"spf", "fcfs"}, default "spf"
        The order of new prefills: shortest prompt first, or arrival.
    paying_first : bool, default False
        Whether paying requests (higher ``priority``) start their prefill before free ones.
    tbt : sequence of float, default (0.5, 0.1)
        The TBT target of each class, ``>= 0``, in the time model's unit (a class past the
        last takes the last).
    dynamic : tuple of float, default (5.0, 10.0, 0.96)
        ``(δ_low, δ_high, use)``: the dynamic offset is ``δ_low`` below that KV-memory use,
        else ``δ_high``.

    Raises
    ------
    ValueError
        For a ``token_budget``, ``alpha`` or ``beta`` that is not a positive integer, a
        negative ``delta``, an unknown ``offset`` or ``order``, or an empty or negative
        ``tbt``.
    """

    def __init__(self, token_budget: int = 512, *, alpha: int = 128, beta: int | None = 128,
                 delta: float = 10.0, offset: str = "fixed", order: str = "spf",
                 paying_first: bool = False, tbt=(0.5, 0.1), dynamic=(5.0, 10.0, 0.96)):
        self.token_budget = check_budget(token_budget)
        self.alpha = int(check_positive("alpha", alpha, integer=True))
        self.beta = None if beta is None else int(check_positive("beta", beta, integer=True))
        self.delta = float(check_positive("delta", delta, allow_zero=True))
        if offset not in ("fixed", "dynamic"):
            raise ValueError(f"offset={offset!r}: must be 'fixed' or 'dynamic'")
        if order not in ("spf", "fcfs"):
            raise ValueError(f"order={order!r}: must be 'spf' or 'fcfs'")
        self.offset, self.order, self.paying_first = offset, order, bool(paying_first)
        self.tbt = np.asarray(tbt, dtype=float).reshape(-1)
        if self.tbt.size == 0 or self.tbt.min() < 0:
            raise ValueError(f"tbt={tbt!r}: one non-negative target per class")
        self.dynamic = tuple(float(x) for x in dynamic)

    @classmethod
    def sarathi(cls, token_budget: int = 512, *, alpha: int = 128, order: str = "fcfs"):
        """Sarathi-Serve (Alg. 4) with an active cap (I-19): every decode critical, no β.

        Parameters
        ----------
        token_budget : int, default 512
            The per-batch token budget.
        alpha : int, default 128
            The active cap ``α``.
        order : {"fcfs", "spf"}, default "fcfs"
            The order of new prefills (``"spf"``: SPF).

        Returns
        -------
        SLAI
            The policy with ``beta=None``, ``delta=0`` and a TBT target of 0.
        """
        return cls(token_budget, alpha=alpha, beta=None, delta=0.0, order=order, tbt=(0.0,))

    def bulk(self, engine):
        """The rule ``slo_slack`` (:func:`~queuetheory.engine.kernels.slo_slack`): without a
        memory limit every decision follows it; the engine steps where memory is limited.

        Parameters
        ----------
        engine : Engine
            The fresh engine of the run.

        Returns
        -------
        callable or None
            The runner, or ``None`` with a memory limit or for a subclass that decides
            otherwise.
        """
        if engine.memory is not None or not decides_as_shipped(self):
            return None
        delta = self.delta
        if self.offset == "dynamic":        # no memory limit: KV use is 0
            delta = self.dynamic[0] if 0.0 < self.dynamic[2] else self.dynamic[1]

        def run(t, stop, limit):
            t, books = slo_slack(engine, t, stop, limit, tbt=self.tbt.tolist(),
                                 alpha=self.alpha, beta=self.beta, delta=delta,
                                 spf=self.order == "spf", paying_first=self.paying_first)
            self._mean, self._count, self._prev_time = books.mean, books.count, books.prev_time
            if books.e is not None:
                self._e = books.e
            self._prev_rids = books.prev_rids
            return t
        return run

    def _reset(self):
        self._e = np.full(1024, np.nan)
        self._mean, self._count = 0.0, 0
        self._prev_time, self._prev_rids = None, _EMPTY
        self._repeatable = (None, False)
        self._books = None
        self._kept = decides_as_shipped(self)

    def _observe(self, state):
        """Book the previous (non-empty) batch: its duration — the engine calls again at its
        end unless the system emptied — and the token times ``e_j`` of its members."""
        rid, rows = state.rid, state._t.prompt.size     # every id is a row of the table
        if rows > self._e.size:
            self._e = np.concatenate([self._e, np.full(rows - self._e.size, np.nan)])
        if self._prev_rids.size:
            arrival, prev = state._t.arrival, self._prev_time
            if rid.size and (arrival[rid[0]] <= prev or (arrival[rid] <= prev).any()):
                self._book(state.time)

    def _book(self, time):
        """The previous batch ended at ``time``: its duration, its members' token times."""
        d = time - self._prev_time
        self._count += 1
        self._mean += (d - self._mean) / self._count
        self._e[self._prev_rids] = time

    def _schedule(self, state):
        self._observe(state)
        books = self._books
        if self._kept and (books is None or not books.sync(state, self)):
            books = self._books = _SlaiBooks.of(state, self)
        batch = self._decide(state, books)
        if books is not None:
            books.commit(state, batch, self)
        return batch

    def _decide(self, state, books):
        """The batch (class notes), from the books where kept (:class:`_SlaiBooks`), else
        from every request of the state."""
        tab, rid, time = state._t, state.rid, state.time
        budget = self.token_budget
        beta = budget if self.beta is None else min(self.beta, budget)
        delta = self.delta
        if self.offset == "dynamic":
            use = 0.0 if state.memory is None else state.memory_used / state.memory
            delta = self.dynamic[0] if use < self.dynamic[2] else self.dynamic[1]
        # the requests in decode, and those holding KV part-way through their prefill
        if books is None:
            in_decode = state.in_decode
            dec = in_decode.nonzero()[0]
            other = (~in_decode).nonzero()[0]
            rother = rid[other]
            remaining = tab.prefill_length(rother) - tab.prefilled[rother]
            holds = tab.kv(rother) > 0
            partial, partial_left = other[holds], remaining[holds]
        else:
            dec, partial, partial_left = rid.searchsorted(books.dec), _EMPTY, _EMPTY
            if books.partial.size:
                partial = rid.searchsorted(books.partial)
                partial_left = tab.prompt[books.partial] - tab.prefilled[books.partial]
        rdec = rid[dec] if books is None else books.dec
        e = self._e[rdec]
        e = np.where(np.isnan(e), time, e)
        target = self.tbt[0] if self.tbt.size == 1 else \
            self.tbt[np.minimum(tab.cls[rdec], self.tbt.size - 1)]
        C = e + target - delta * self._mean
        n1 = tau = min(int(np.count_nonzero(C <= time)), beta)   # the critical lead the order
        promised, p1, c1 = 0, _EMPTY, _EMPTY
        if partial.size:
            promised = int(partial_left.sum())
            p1, c1 = take_prefills(partial, partial_left, budget - tau)
            tau += int(c1.sum())
        dec_holds = None if books is not None else tab.kv(rdec) > 0
        started = partial.size + (dec.size if books is not None
                                  else int(np.count_nonzero(dec_holds)))
        room = self.alpha - started
        p2 = c2 = _EMPTY
        if room > 0:
            if books is None:
                waiting, left = other[~holds], remaining[~holds]
                if started < dec.size + partial.size:      # decodes holding no KV wait too
                    waiting = np.concatenate([waiting, dec[~dec_holds]])
                    back = waiting.argsort(kind="stable")
                    waiting = waiting[back]
                    left = (tab.prefill_length(rid[waiting]) - tab.prefilled[rid[waiting]])
                first = self._first_waiting(tab, rid, waiting, room)
                waiting, left = waiting[first], left[first]
            elif state.memory is not None:   # those whose whole prompts fit (below)
                waiting = books.first_fitting(room, state.memory_free - dec.size - promised,
                                              tab.prompt)
                if waiting.size:
                    left, waiting = tab.prompt[waiting], rid.searchsorted(waiting)
            else:
                waiting = books.first(room)
                left, waiting = tab.prompt[waiting], rid.searchsorted(waiting)
            if books is None and state.memory is not None and waiting.size:
                mem_room = state.memory_free - dec.size - promised
                fits = np.cumsum(left) <= mem_room          # none holds KV: each is new
                waiting, left = waiting[fits], left[fits]
            if waiting.size:
                p2, c2 = take_prefills(waiting, left, budget - tau)
                tau += int(c2.sum())
        take = n1 + max(0, min(budget - tau, beta - n1))     # critical, then others by C
        decode = dec if take >= dec.size else dec[np.argsort(C, kind="stable")[:take]]
        prefill, chunk = (p1, c1) if not p2.size else (p2, c2) if not p1.size else (
            np.concatenate([p1, p2]), np.concatenate([c1, c2]))
        if state.memory is not None:
            free = state.memory_free - promised
            if decode.size > free:
                batch = (fit_memory(state, prefill, chunk, decode) if books is None
                         else books.fit(state, prefill, chunk, decode, free))
            elif p2.size and books is None:   # fit_memory: new requests while they fit
                # (the books admit only whole prompts that fit beside every decode)
                whole = np.cumsum(tab.prefill_length(rid[p2]) - tab.prefilled[rid[p2]])
                keep = np.concatenate([np.ones(p1.size, dtype=bool),
                                       whole <= free - decode.size])
                batch = Batch(prefill[keep], chunk[keep], decode)
            else:
                batch = Batch(prefill, chunk, decode)
        else:
            batch = Batch(prefill, chunk, decode)
        self._prev_time = time
        self._prev_rids = rid[batch.decode if not batch.prefill.size else np.concatenate(
            [batch.decode, batch.prefill])]
        # a decode-only batch of every decode, no prefill under way (see steady)
        self._repeatable = (state, not partial.size and batch.decode.size == dec.size
                            and dec.size < budget)
        return batch

    def _key(self, tab, rid: int) -> tuple:
        """The place of a waiting request in the queue (:meth:`_first_waiting`'s order)."""
        key = (tab.prompt[rid].item(), rid) if self.order == "spf" else (rid,)
        return (-tab.priority[rid].item(), *key) if self.paying_first else key

    def _first_waiting(self, tab, rid, waiting, k):
        """Indices into ``waiting`` (ascending positions) of its first ``k`` in the order of
        the waiting queue: SPF by prompt or FCFS, paying first with ``paying_first``, ties by
        arrival (the stable ``lexsort`` of every waiting request, cut at ``k``)."""
        w = waiting.size
        if self.order == "fcfs" and not self.paying_first:
            return slice(0, k)
        keys = ()
        if self.order == "spf":
            keys = (tab.prompt[rid[waiting]],)
        if self.paying_first:
            keys = keys + (-tab.priority[rid[waiting]],)
        if k >= w or len(keys) > 1:
            return np.lexsort(keys)[:k]
        key = keys[0]
        lo, hi = int(key.min()), int(key.max())
        if (hi - lo + 1) * w >= 1 << 62:
            return np.lexsort(keys)[:k]
        # one key: (key, index) as one unique integer, so the k smallest are the stable order
        unique = (key - lo) * w + np.arange(w)
        first = np.argpartition(unique, k - 1)[:k]
        return first[unique[first].argsort()]

    def steady(self, state, batch):
        """The decode-only batch of every request in decode repeats while nothing arrives,
        nothing finishes and only its members decode, when no prefill is under way and fewer
        requests decode than the token budget; the books move (:meth:`repeated`).

        Proof. Every decode is taken whatever the order ``C_j``: ``|D| <= min(β, budget)``
        puts all critical ones in step (1) and leaves room for every other in step (4), and
        with no prefill ``τ`` is step (1)'s count. No prefill starts: none is under way, and
        a waiting request was not admitted now because ``α`` requests hold KV (the count
        stays), or memory left no room for its whole prompt (the room only shrinks: each
        repeat adds one token per decode; the queue's order stays), or nothing waits; the
        budget was no reason, ``τ < budget``. With no part-way prefill promised memory is 0,
        so :func:`fit_memory` evicts exactly where the batch overflows ``M``, which the
        engine checks. The dynamic offset and the running mean change only ``C_j``.

        Parameters
        ----------
        state : State
            The state the batch was built on (the one :meth:`schedule` last saw).
        batch : Batch
            The batch :meth:`schedule` returned on it.

        Returns
        -------
        bool or int
            ``False``, or a count (``2**62``: no bound but the stretch's) of repeats.
        """
        if not decides_as_shipped(self):
            return False
        seen, repeatable = self._repeatable
        if seen is not state or not repeatable:
            return False
        return 1 << 62

    def repeated(self, k, starts) -> None:
        """The books of ``k`` calls at ``starts`` that each returned the same batch: each
        books the one before (its duration and its members' token times) and sets itself
        as the previous batch.

        Parameters
        ----------
        k : int
            The number of repeats the engine ran.
        starts : numpy.ndarray
            Their start times, in order.
        """
        for t in starts.tolist():
            self._book(t)
            self._prev_time = t


# ---- moved: old names kept for one release -------------------------------------------------------
def _disaggregated(name: str):
    """The object ``name`` of :mod:`queuetheory.networks.disaggregated`."""
    # a deprecated upward import, listed in tests/test_layers.py's DEPRECATED
    from ..networks import disaggregated

    return getattr(disaggregated, name)


def _slo_scan(name: str):
    """The object ``name`` of :mod:`queuetheory.capacity.slo_scan`."""
    # a deprecated upward import, listed in tests/test_layers.py's DEPRECATED
    from ..capacity import slo_scan

    return getattr(slo_scan, name)


#: Names that moved out of the schedulers: name -> (a function giving the object, what to use
#: instead), for :func:`queuetheory.errors.moved_names` (here and in :mod:`queuetheory.policies`).
MOVED = {
    "DistServe": (partial(_disaggregated, "DistServe"),
                  "queuetheory.networks.DistServe"),
    "simulate_nodes": (partial(_disaggregated, "_random_nodes"),
                       'queuetheory.networks.simulate_fleet(trace, policy, time_model, r, '
                       'router="random")'),
    "slo_metrics": (partial(_slo_scan, "slo_metrics"),
                    "queuetheory.capacity.slo_metrics"),
    "slo_capacity": (partial(_slo_scan, "slo_capacity"),
                     "queuetheory.capacity.slo_capacity"),
}
__getattr__ = moved_names(__name__, MOVED)

"""The engine's state as a structure of numpy arrays, and the read-only view policies get."""

from __future__ import annotations

import numpy as np

from ..errors import renamed_attribute

__all__ = ["RequestTable", "State"]

_STATIC = ("arrival", "prompt", "output", "cls", "lo", "hi", "priority")
_INT_DYNAMIC = ("prefilled", "decoded", "recomputed", "restarts", "discarded", "cached")
_FLOAT_DYNAMIC = ("prefill_done", "first_token", "last_token", "finish", "tbt_max")


class RequestTable:
    """Every request the engine has seen, one array per field, indexed by request id.

    Grows by doubling so that networks can add requests while they run. ``blocks`` holds,
    per request, the ids of its prompt's full prefix blocks when its trace carries them
    (``Trace.blocks``, equal ids = equal prefix up to that block), else ``None``; ``cached``
    counts the prompt tokens a prefix cache gave it (:attr:`Batch.cached`). Besides the
    progress counts (``prefilled``, ``decoded``) the engine keeps ``in_decode`` (the prompt
    is fully prefilled), ``discarded`` (output tokens lost to restarts) and ``recomputed``
    (output tokens a recompute preemption put back into the prefill: the request's prefill
    is ``prompt + recomputed`` tokens long, see :mod:`~queuetheory.engine.conventions`) up
    to date.

    Parameters
    ----------
    emit_first : bool
        Whether the prefill iteration emits the first output token
        (``first_token="prefill"``); kept as the int ``emit_first`` (1 or 0).
    capacity : int, default 1024
        Rows allocated at the start (at least 16).
    """

    def __init__(self, emit_first: bool, capacity: int = 1024):
        self.emit_first = int(emit_first)
        self.recomputing = False     # some request has been preempted by recompute
        self.block_size = None       # tokens per prefix block of the requests' ``blocks``
        self.n = 0
        self._cap = 0
        self._grow(max(capacity, 16))

    def _grow(self, cap: int):
        def widen(name, dtype, fill):
            new = np.full(cap, fill, dtype=dtype)
            if self._cap:
                new[: self.n] = getattr(self, name)[: self.n]
            setattr(self, name, new)

        for f in _STATIC:
            widen(f, float if f == "arrival" else np.int64, 0)
        for f in _INT_DYNAMIC:
            widen(f, np.int64, 0)
        for f in _FLOAT_DYNAMIC:
            widen(f, float, 0.0 if f.startswith("tbt") else np.nan)
        widen("in_decode", bool, False)
        widen("blocks", object, None)
        self._cap = cap

    def append(self, trace, rows: slice | None = None) -> np.ndarray:
        """Add the requests of a :class:`~queuetheory.workload.Trace`; return their ids.

        Parameters
        ----------
        trace : Trace
            The requests, with their prefix blocks when it carries them.
        rows : slice, optional
            Only these rows of ``trace`` (default all): one arrival of a long trace without
            building a trace of it.

        Returns
        -------
        numpy.ndarray
            The new rows' request ids, consecutive.

        Raises
        ------
        ValueError
            When the trace's prefix blocks have another size than those of the requests
            already in the table.
        """
        rows = slice(None) if rows is None else rows
        k = len(range(*rows.indices(len(trace))))
        if self.n + k > self._cap:
            self._grow(max(2 * self._cap, self.n + k))
        new = slice(self.n, self.n + k)
        for f in _STATIC:
            getattr(self, f)[new] = getattr(trace, f)[rows]
        self.in_decode[new] = self.prompt[new] <= 0
        if trace.blocks is not None:
            if self.block_size not in (None, trace.block_size):
                raise ValueError(f"trace.block_size={trace.block_size}: the engine's requests "
                                 f"already carry prefix blocks of {self.block_size} tokens")
            self.block_size = trace.block_size
            self.blocks[new] = trace.blocks[rows]
        self.n += k
        return np.arange(new.start, new.stop)

    def set_progress(self, ids, prefilled, decoded=0) -> None:
        """Place requests part-way through: ``prefilled`` prompt and ``decoded`` output
        tokens done (states built by hand, requests handed over with their KV).

        Parameters
        ----------
        ids : array_like of int
            The request ids.
        prefilled : int or array_like of int
            Prompt tokens prefilled, per request or for all (``>= prompt``: in decode).
        decoded : int or array_like of int, default 0
            Output tokens emitted, per request or for all (none recomputed).
        """
        self.prefilled[ids] = prefilled
        self.decoded[ids] = decoded
        self.recomputed[ids] = 0
        self.in_decode[ids] = self.prefilled[ids] >= self.prompt[ids]

    def prefill_length(self, rid: np.ndarray) -> np.ndarray:
        """Tokens of each request's current prefill: its prompt, plus the output tokens a
        recompute preemption put back (``recomputed``).

        Parameters
        ----------
        rid : numpy.ndarray
            Request ids.

        Returns
        -------
        numpy.ndarray
            The prefill length of each, in tokens.
        """
        if not self.recomputing:
            return self.prompt[rid]
        return self.prompt[rid] + self.recomputed[rid]

    def kv(self, rid: np.ndarray) -> np.ndarray:
        """Resident KV tokens: prefill tokens (prompt and recomputed output) plus the output
        tokens written back since.

        Parameters
        ----------
        rid : numpy.ndarray
            Request ids.

        Returns
        -------
        numpy.ndarray
            The KV tokens each holds (under ``first_token="prefill"`` the newest output
            token's KV is not written yet).
        """
        if self.recomputing:
            return self.prefilled[rid] + np.maximum(
                self.decoded[rid] - self.recomputed[rid] - self.emit_first, 0)
        if not self.emit_first:
            return self.prefilled[rid] + self.decoded[rid]
        return self.prefilled[rid] + np.maximum(self.decoded[rid] - self.emit_first, 0)

    def _kv_of(self, r: int) -> int:
        """:meth:`kv` of the one request ``r``, in plain integers."""
        decoded = int(self.decoded[r]) - self.emit_first
        if self.recomputing:
            decoded -= int(self.recomputed[r])
        return int(self.prefilled[r]) + (max(decoded, 0) if self.emit_first or self.recomputing
                                         else decoded)

    def column(self, name: str) -> np.ndarray:
        """One field over the requests seen so far (a view, not a copy).

        Parameters
        ----------
        name : str
            The field (``"arrival"``, ``"prompt"``, ``"decoded"``, ``"finish"``, ...).

        Returns
        -------
        numpy.ndarray
            Its first :attr:`n` entries, indexed by request id.
        """
        return getattr(self, name)[: self.n]

    def timed_gaps(self) -> tuple[np.ndarray, np.ndarray]:
        """Per request: the number of time-between-tokens gaps and their sum.

        Every output token after a request's first one closes a gap, tokens emitted again
        after an eviction included; the gaps chain from token to token, so their sum
        telescopes to the time between the first and the last token.

        Returns
        -------
        count : numpy.ndarray
            Gaps of each request (0 before its first token).
        total : numpy.ndarray
            Their summed length, in time units.
        """
        first, last = self.column("first_token"), self.column("last_token")
        emitted = self.column("decoded") + self.column("discarded")
        started = ~np.isnan(first)
        count = np.where(started, emitted - 1, 0)
        return count, np.where(started, last - first, 0.0)


class _lazy:
    """Computed on first use, then an ordinary instance attribute (``functools.
    cached_property`` without its lock: State is built every iteration, on the hot path)."""

    def __init__(self, fn):
        self.fn, self.name, self.__doc__ = fn, fn.__name__, fn.__doc__

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        value = obj.__dict__[self.name] = self.fn(obj)
        return value


class _Column:
    """A per-request column of the table, gathered for the live requests on first use."""

    def __init__(self, name):
        self.name = name

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        value = getattr(obj._t, self.name)[obj.rid]
        value.setflags(write=False)
        obj.__dict__[self.name] = value
        return value


class State:
    """Read-only view of the requests in the system at a decision epoch.

    Positions ``0 … n-1`` are in arrival order (FCFS order). Array attributes are computed
    on first use: ``rid``, ``arrival``, ``prompt``, ``output``, ``cls``, ``lo``, ``hi``,
    ``priority``, ``prefilled``, ``decoded``, ``recomputed``, ``restarts``, ``discarded``,
    ``kv``, ``prefill_length`` (prompt plus recomputed output), ``remaining_prefill``,
    ``remaining_output``, ``in_decode`` (true once the prefill is complete, ``p_i = 0`` in
    Li, Dai, Peng's notation), ``started``. Scalars: ``time``, ``token_budget``, ``memory``,
    ``memory_used`` and ``memory_free``; ``n_decode``, the number of requests in decode;
    ``promised``, the prefill tokens not yet written of the requests that hold KV and are
    not in decode (the KV their prefills will still take, as vLLM's block manager reserves
    it: ``remaining_prefill[started & ~in_decode].sum()``), and ``n_prefilling``, how many
    those requests are; ``arrivals_done`` is true when no request will arrive any more in a
    run that drains (``simulate`` without a horizon, once the whole trace is admitted), so
    that a policy waiting for cohorts finishes its leftovers.

    The engine keeps ``memory_used``, ``n_decode``, ``promised`` and ``n_prefilling`` by
    deltas and hands them over, so reading them costs nothing; a view built otherwise sums
    its columns on first use. :meth:`of` reads a column at a few positions without
    gathering it whole.

    Parameters
    ----------
    table : RequestTable
        The engine's request table.
    live : numpy.ndarray
        Ids of the requests in the system, in arrival order (position ``i`` is
        ``live[i]``, kept as ``rid``).
    time : float
        The decision epoch.
    token_budget : int or None
        The per-batch token budget ``b``; ``None``: none.
    memory : int or None
        The KV capacity ``M`` in tokens; ``None``: unlimited.
    outside_kv : int, default 0
        KV tokens held by requests outside the view (a :meth:`subset`'s others), counted
        in ``memory_used``.
    kv_total : int, optional
        The resident KV tokens of the live requests when the caller keeps the sum (the
        engine); ``None``: summed from ``kv`` on first use.
    arrivals_done : bool, default False
        Whether no request will arrive any more.
    promised : int, optional
        ``promised`` when the caller keeps it (the engine); ``None``: summed from the
        columns on first use.
    n_decode : int, optional
        ``n_decode`` when the caller keeps it (the engine); ``None``: counted from
        ``in_decode`` on first use.
    n_prefilling : int, optional
        ``n_prefilling`` when the caller keeps it (the engine); ``None``: counted from the
        columns on first use.
    """

    budget = renamed_attribute("token_budget")

    def __init__(self, table: RequestTable, live: np.ndarray, time: float, token_budget, memory,
                 outside_kv: int = 0, kv_total: int | None = None, arrivals_done: bool = False,
                 promised: int | None = None, n_decode: int | None = None,
                 n_prefilling: int | None = None):
        self._t = table
        self.arrivals_done = bool(arrivals_done)
        self.rid = live
        self.n = int(live.size)
        self.time = float(time)
        self.token_budget = token_budget
        self.memory = memory
        self.outside_kv = int(outside_kv)
        if kv_total is not None:     # the engine keeps the sum of resident KV up to date
            self.__dict__["memory_used"] = int(kv_total) + self.outside_kv
        if promised is not None:
            self.__dict__["promised"] = promised
        if n_decode is not None:
            self.__dict__["n_decode"] = n_decode
        if n_prefilling is not None:
            self.__dict__["n_prefilling"] = n_prefilling

    @property
    def emit_first(self) -> bool:
        """Whether the engine's prefill iteration also emits the first output token."""
        return bool(self._t.emit_first)

    @_lazy
    def kv(self) -> np.ndarray:
        return self._t.kv(self.rid)

    @_lazy
    def prefill_length(self) -> np.ndarray:
        if not self._t.recomputing:
            return self.prompt
        return self.prompt + self.recomputed

    @_lazy
    def remaining_prefill(self) -> np.ndarray:
        return self.prefill_length - self.prefilled

    def remaining_prefill_of(self, positions: np.ndarray) -> np.ndarray:
        """``remaining_prefill[positions]``, gathering only those requests unless the whole
        column is already at hand.

        Parameters
        ----------
        positions : numpy.ndarray
            Positions in the view.

        Returns
        -------
        numpy.ndarray
            The prefill tokens each has left.
        """
        return self.of("remaining_prefill", positions)

    def of(self, name: str, positions: np.ndarray) -> np.ndarray:
        """The column ``name`` at ``positions`` (``getattr(self, name)[positions]``),
        gathering only those requests unless the whole column is already at hand: a decision
        that looks at a few candidates need not read every request in the system.

        Parameters
        ----------
        name : str
            A per-request column of the view: a table field (``"prompt"``, ``"decoded"``,
            ``"in_decode"``, ...) or ``"kv"``, ``"prefill_length"``,
            ``"remaining_prefill"``, ``"remaining_output"``, ``"started"``.
        positions : numpy.ndarray
            Positions in the view (integers, or a slice).

        Returns
        -------
        numpy.ndarray
            The values, one per position.

        Raises
        ------
        ValueError
            For a name that is no per-request column.
        """
        derived = _DERIVED.get(name)
        if derived is None and name not in _GATHERED:
            raise ValueError(f"name={name!r}: not a per-request column of the state")
        whole = self.__dict__.get(name)
        if whole is not None:
            return whole[positions]
        rid = self.rid[positions]
        return getattr(self._t, name)[rid] if derived is None else derived(self._t, rid)

    @_lazy
    def remaining_output(self) -> np.ndarray:
        return self.output - self.decoded

    @_lazy
    def started(self) -> np.ndarray:
        """True for requests holding KV cache (running or paused)."""
        return self.kv > 0

    @_lazy
    def memory_used(self) -> int:
        return int(self.kv.sum()) + self.outside_kv

    @_lazy
    def promised(self) -> int:
        return int(self.remaining_prefill[self.started & ~self.in_decode].sum())

    @_lazy
    def n_decode(self) -> int:
        return int(np.count_nonzero(self.in_decode))

    @_lazy
    def n_prefilling(self) -> int:
        return int(np.count_nonzero(self.started & ~self.in_decode))

    @property
    def memory_free(self) -> float:
        """KV tokens free: ``memory − memory_used`` (``inf`` without a memory limit)."""
        return np.inf if self.memory is None else self.memory - self.memory_used

    def subset(self, positions: np.ndarray) -> State:
        """The view restricted to ``positions`` (sorted); memory of the others still counts.

        Parameters
        ----------
        positions : array_like of int
            Positions in this view, in any order.

        Returns
        -------
        State
            The view of those requests, in arrival order, whose ``outside_kv`` is the others'
            KV (so ``memory_used`` is unchanged).
        """
        positions = np.sort(np.asarray(positions, dtype=np.int64))
        rest = self.memory_used - int(self.kv[positions].sum())
        return State(self._t, self.rid[positions], self.time, self.token_budget, self.memory, rest,
                     arrivals_done=self.arrivals_done)

    def __repr__(self) -> str:
        return f"State(t={self.time:.6g}, n={self.n}, memory_used={self.memory_used})"


_GATHERED = _STATIC + _INT_DYNAMIC + ("in_decode",)
for _name in _GATHERED:
    setattr(State, _name, _Column(_name))

_DERIVED = {   # State.of's columns computed from the table's, per request id
    "kv": RequestTable.kv,
    "prefill_length": RequestTable.prefill_length,
    "remaining_prefill": lambda t, rid: t.prefill_length(rid) - t.prefilled[rid],
    "remaining_output": lambda t, rid: t.output[rid] - t.decoded[rid],
    "started": lambda t, rid: t.kv(rid) > 0,
}

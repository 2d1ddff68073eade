"""Jaillet, Jiang, Podimata, Zhou: memory-constrained shortest-first (MC-SF) and
the vLLM-like α-protection benchmarks of its Section 7.

Model (Jaillet et al., Section 3). One request per prompt of size ``s_i`` and output ``o_i``
(known on arrival); one batch per round (``qt.UnitTime()``); a request started in round ``p`` runs
``d_i`` consecutive rounds and holds ``s_i + k`` KV tokens in its ``k``-th one
(``k = 0`` is the prefill round); capacity ``M``; no pausing, no eviction for MC-SF.

Timing conventions
------------------
The two conventions (``"ip"``, ``"eq1"``), the durations ``d_i`` and the future-peak check
live in :mod:`queuetheory.rounds`, below both the schedulers and the bounds; the policies
read the engine's convention from ``State.emit_first``, so the same policy object serves
both.

Algorithms
----------
:class:`MCSF` is Algorithm 2 (Section 5.1): every round, the running requests continue and
the arrived waiting ones are tried in ascending ``o_i`` (ties: arrival, then index), each
admitted if the future-peak check (eqs. (1)–(2), :class:`~queuetheory.rounds.FuturePeak`, own
completion included) holds. With all arrivals at 0 it is Algorithm 1 (Section 4).
:class:`FCFS` is the same check in arrival order. :class:`AlphaProtection` is the
α-protection greedy benchmark of Section 7 and, with ``beta``, its α-protection β-clearing
variant (Section 7).

Fast path: every decision of :class:`MCSF` and :class:`FCFS` (``on_fail="break"``) follows
the bulk rule :mod:`~queuetheory.engine.kernels.future_peak_admission` (:meth:`MCSF.bulk`).
"""

from __future__ import annotations

import functools
from fractions import Fraction

import numpy as np

from .. import rounds
from ..engine import Batch
from ..engine.kernels import future_peak_admission
from ..errors import check_between, check_positive, moved_names
from ..rounds import FuturePeak, admit, check_max_starts, check_on_fail
from .base import Policy, decides_as_shipped, round_model

__all__ = ["MCSF", "FCFS", "AlphaProtection", "kv_token_limit"]

#: Names that moved to :mod:`queuetheory.rounds` (the round model below both the schedulers
#: and the bounds); importing them from here warns until the next release
_MOVED = ("CONVENTIONS", "durations", "mcsf_schedule")
__getattr__ = moved_names(__name__, {name: (functools.partial(getattr, rounds, name),
                                            f"queuetheory.rounds.{name}") for name in _MOVED})


def kv_token_limit(params: float, layers: int, hidden: int, dtype_bytes: int, n_gpus: int,
                   gpu_bytes: float) -> Fraction:
    """Jaillet et al.'s KV capacity formula: ``(total memory − model size) / KV bytes
    per token`` with model size ``P·D`` and ``2·L·H·D`` bytes per token, exact.

    For Llama2-70B on two A100s (``P = 70e9, L = 80, H = 8192, D = 2``, 80 GB each) it gives
    7,629.39 tokens (8,192 if memory and model are both counted in GiB), not the 16,492 the
    paper states.

    Parameters
    ----------
    params : float
        ``P``: the model's parameters.
    layers : int
        ``L``: its layers.
    hidden : int
        ``H``: its hidden size.
    dtype_bytes : int
        ``D``: bytes per parameter and per KV value.
    n_gpus : int
        The GPUs holding the model and the cache.
    gpu_bytes : float
        Memory of each GPU, in bytes.

    Returns
    -------
    fractions.Fraction
        The KV capacity in tokens, exact (not rounded).

    Raises
    ------
    ValueError
        For an argument that is not a positive number, or GPUs that cannot hold the model.
    """
    for name, v in (("params", params), ("layers", layers), ("hidden", hidden),
                    ("dtype_bytes", dtype_bytes), ("n_gpus", n_gpus), ("gpu_bytes", gpu_bytes)):
        check_positive(name, v)
    free = Fraction(n_gpus) * Fraction(gpu_bytes) - Fraction(params) * dtype_bytes
    if free <= 0:
        raise ValueError(f"gpu_bytes={gpu_bytes!r}: {n_gpus} GPUs cannot hold the model "
                         f"({params} parameters × {dtype_bytes} bytes)")
    return free / (2 * layers * hidden * dtype_bytes)


class _FuturePeakPolicy(Policy):
    """Continue every running request; admit waiting ones in ``_order`` while they pass the
    future-peak check. Subclasses fix the order."""

    no_token_budget = round_model("Jaillet et al.")

    _order = "output"

    def __init__(self, on_fail: str = "break", max_starts=None):
        self.on_fail = check_on_fail(on_fail)
        self.max_starts = check_max_starts(max_starts)

    def bulk(self, engine):
        """The rule ``future_peak_admission``
        (:func:`~queuetheory.engine.kernels.future_peak_admission`) in the policy's order,
        where admission stops at the first candidate that fails (``on_fail="break"``)."""
        if self.on_fail != "break" or not decides_as_shipped(self):
            return None
        est = engine.table.column("output").tolist()

        def run(t, stop, limit):
            return future_peak_admission(engine, t, stop, limit, kind=self._order, est=est,
                                         cap=self.max_starts)[0]
        return run

    def _schedule(self, state) -> Batch:
        run = np.flatnonzero(state.started)
        wait = np.flatnonzero(~state.started)
        if self._order == "output":
            wait = wait[np.argsort(state.output[wait], kind="stable")]
        if state.memory is None:
            ok = np.ones(wait.size, dtype=bool)
        else:
            # rounds are counted from the current one (0); a running request holds kv + 1
            # tokens after this round's token and runs remaining_output more rounds
            peak = FuturePeak(state.memory, 0, state.kv[run] + 1, state.remaining_output[run] - 1)
            d = state.output[wait] + (0 if state.emit_first else 1)
            ok = admit(peak, state.prompt[wait], d - 1, self.on_fail, self.max_starts)
        new = wait[ok]
        return Batch(prefill=new, chunk=state.prompt[new], decode=run)


class MCSF(_FuturePeakPolicy):
    """Memory-constrained shortest-first: Jaillet et al.'s Algorithm 2 (Algorithm 1 when every
    request arrives at 0).

    Parameters
    ----------
    on_fail : {"break", "skip"}, default "break"
        ``"break"`` stops admitting at the first request that fails the check (the
        paper's Algorithms 1 and 2); ``"skip"`` tries the longer ones too (differs only with
        unequal prompt sizes, spec D6).
    max_starts : int, optional
        At most this many admissions per round (``None``: the paper's algorithm;
        a cap gives the staggered comparators that refute Theorems 4.2 and 5.3).

    Raises
    ------
    ValueError
        For an unknown ``on_fail``, or a ``max_starts`` that is not a positive integer.
    """


class FCFS(_FuturePeakPolicy):
    """The future-peak check of MC-SF applied in arrival order instead of shortest first.

    Parameters
    ----------
    on_fail : {"break", "skip"}, default "break"
        ``"break"`` stops admitting at the first request that fails the check (as
        :class:`MCSF`); ``"skip"`` tries the later ones too.
    max_starts : int, optional
        At most this many admissions per round (``None``: no cap).

    Raises
    ------
    ValueError
        For an unknown ``on_fail``, or a ``max_starts`` that is not a positive integer.
    """

    _order = "arrival"


class AlphaProtection(Policy):
    """Jaillet et al.'s vLLM-like benchmarks: FCFS, running requests first, new
    prompts admitted while memory stays within ``(1 − alpha)·M``.

    Each round the running requests need ``Σ (s_j + k_j)`` tokens. If that exceeds ``M``
    the running requests are cleared (KV and progress lost, FCFS place kept): all of them
    (``beta=None``, the α-protection greedy B1) or each independently with probability
    ``beta`` (α-protection β-clearing B2). If one clearing pass leaves the memory over
    ``M``, the round is a stall: nothing is processed (spec decision D8) for one time unit
    (one round in the round model, ``UnitTime``).

    Loops (spec D7, the "infinite processing loops" of Section 7): the run is declared
    looping when the same running set is fully cleared twice with no completion in between,
    or when nothing completes for ``10 × (longest output in the system)`` rounds (decisions
    of this policy, not units of time: the verdict is the same in seconds, milliseconds or
    rounds). From then
    on the policy idles, so ``simulate`` returns with the looping requests unfinished;
    ``loop_at`` is the time of detection (``None`` if none) and ``clearings`` counts
    clearing passes.

    Parameters
    ----------
    alpha : float
        The protected share of memory, in ``[0, 1)``: new prompts are admitted, in arrival
        order, while they and the running requests' KV after the round stay within
        ``(1 − alpha)·M``.
    beta : float, optional
        The clearing probability of each running request, in ``(0, 1]`` (B2); ``None``:
        every running request is cleared (B1).

    Raises
    ------
    ValueError
        For an ``alpha`` or ``beta`` outside its interval.
    """

    no_token_budget = round_model("Jaillet et al.")

    def __init__(self, alpha: float, beta: float | None = None):
        alpha = check_between("alpha", alpha, 0, 1, low_closed=True)
        if beta is not None:
            beta = check_between("beta", beta, 0, 1, high_closed=True)
        self.alpha, self.beta = alpha, beta

    def _reset(self) -> None:
        self.loop_at = None
        self.clearings = 0
        self._last_clear = None
        self._live = np.empty(0, dtype=np.int64)
        self._done_at = None
        self._rounds = 0            # rounds decided since the last completion

    def supports(self, *, memory, first_token) -> str | None:
        return "α-protection needs a KV capacity M" if memory is None else None

    def _schedule(self, state) -> Batch:
        if self._watch(state):
            return Batch(until=np.inf)
        run = np.flatnonzero(state.started)
        need = int((state.kv[run] + 1).sum())
        evict = run[:0]
        if need > state.memory:
            self.clearings += 1
            if self.beta is None:
                evict = run
                self._check_repeat(state, run)
            else:
                evict = run[self.rng.random(run.size) < self.beta]
            run = np.setdiff1d(run, evict)
            need = int((state.kv[run] + 1).sum())
            if need > state.memory:
                return Batch(evict=evict, until=state.time + 1)
        waiting = ~state.started
        waiting[evict] = True
        wait = np.flatnonzero(waiting)
        room = (1 - self.alpha) * state.memory - need
        fits = np.cumsum(state.prompt[wait]) <= room
        new = wait[: int(np.argmin(fits)) if not fits.all() else wait.size]
        return Batch(prefill=new, chunk=state.prompt[new], decode=run, evict=evict)

    def steady(self, state, batch) -> int:
        """A decode-only batch (no clearing, no prompt admitted) repeats while nothing
        arrives and no request finishes: the running requests' need ``Σ (s_j + k_j)``
        grows by one per request each round, so the room for new prompts only shrinks and
        the first waiting one never fits, and the need passes ``M`` (a clearing) exactly
        when the memory after the batch would, which the engine checks (no member has an
        empty prompt: one waits, never fits a chunk and fails the batch). The loop rule
        counts decisions: the batch repeats until the round at which it would declare
        a loop, and :meth:`repeated` counts the rounds run.

        Parameters
        ----------
        state : State
            The state the batch was built on.
        batch : Batch
            The batch :meth:`schedule` returned on it.

        Returns
        -------
        int
            How many more times the batch repeats.
        """
        dec = batch.decode
        if (not decides_as_shipped(self) or self.loop_at is not None or batch.prefill.size
                or batch.evict.size or not dec.size):
            return 0
        return max(0, 10 * int(state.output.max()) + 1 - self._rounds)

    def repeated(self, k, starts) -> None:
        """The loop rule's count of rounds without a completion moved on by ``k``
        (:meth:`steady`).

        Parameters
        ----------
        k : int
            The batches the engine ran.
        starts : numpy.ndarray
            Their start times.
        """
        self._rounds += k

    def idles_through(self, state) -> bool:
        """Once a loop is declared the policy idles at every later decision, whatever
        arrives (:meth:`_watch` reads arrivals and completions, and none comes while it
        idles): the engine may let the requests wait to the end.

        Parameters
        ----------
        state : State
            The state the policy idled on.

        Returns
        -------
        bool
            Whether a loop was declared (this policy as shipped).
        """
        return decides_as_shipped(self) and self.loop_at is not None

    def _watch(self, state) -> bool:
        """Track completions; True once a loop has been declared."""
        # ids enter in increasing order and leave only by finishing, so some request
        # finished iff fewer are live than were before plus those that arrived since
        rid = state.rid
        prev = self._live
        arrived = rid.size - int(np.searchsorted(rid, prev[-1], side="right")) if prev.size \
            else rid.size
        if self._done_at is None or prev.size + arrived > rid.size:
            self._done_at, self._rounds = state.time, 0
        self._live = rid
        self._rounds += 1
        if self.loop_at is None and self._rounds > 10 * int(state.output.max()) + 1:
            self.loop_at = state.time
        return self.loop_at is not None

    def _check_repeat(self, state, run) -> None:
        cleared = frozenset(state.rid[run].tolist())
        if self._last_clear == (cleared, self._done_at):
            self.loop_at = state.time
        self._last_clear = (cleared, self._done_at)

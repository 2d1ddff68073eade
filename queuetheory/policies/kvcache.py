"""Jaillet, Jiang, Podimata, Zhou: memory-constrained shortest-first (MC-SF) and
the vLLM-like α-protection benchmarks of its Section 7.

Model (Jaillet et al., Section 3). One request per prompt of size ``s_i`` and output ``o_i``
(known on arrival); one batch per round (``qt.UnitTime()``); a request started in round ``p`` runs
``d_i`` consecutive rounds and holds ``s_i + k`` KV tokens in its ``k``-th one
(``k = 0`` is the prefill round); capacity ``M``; no pausing, no eviction for MC-SF.

Timing conventions — the one place where they are mapped
--------------------------------------------------------
=========  ===================================  ================  ==========================
name       paper                                duration ``d_i``  engine
=========  ===================================  ================  ==========================
``"ip"``   App. B.1 (hindsight IP), default     ``o_i``           ``first_token="prefill"``
``"eq1"``  Eq. (1), Section 3 (the token phase)  ``o_i + 1``       ``first_token="decode"``
=========  ===================================  ================  ==========================

With ``"ip"`` the prefill round emits the first token, memory runs ``s_i … s_i + o_i − 1``
and the request completes at ``p_i + o_i``; with ``"eq1"`` memory peaks at ``s_i + o_i``
(Section 3, the token phase) and it completes at ``p_i + o_i + 1``. :data:`CONVENTIONS` maps
the name to the engine's ``first_token`` and :func:`durations` to ``d_i``; the policies read
the engine's convention from ``State.emit_first``, so the same policy object serves both.

Algorithms
----------
:class:`MCSF` is Algorithm 2 (Section 5.1): every round, the running requests continue and
the arrived waiting ones are tried in ascending ``o_i`` (ties: arrival, then index), each
admitted if the future-peak check (eqs. (1)–(2), :class:`~.memory_check.FuturePeak`, own
completion included) holds. With all arrivals at 0 it is Algorithm 1 (Section 4).
:class:`FCFS` is the same check in arrival order. :class:`AlphaProtection` is the
α-protection greedy benchmark of Section 7 and, with ``beta``, its α-protection β-clearing
variant (Section 7).

Fast path: every decision of :class:`MCSF` and :class:`FCFS` (``on_fail="break"``) follows
the bulk rule :mod:`~queuetheory.engine.kernels.future_peak_admission`.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..engine import Batch
from ..errors import check_between, check_positive
from .base import Policy, round_model
from .memory_check import FuturePeak

__all__ = ["CONVENTIONS", "durations", "mcsf_schedule", "MCSF", "FCFS", "AlphaProtection",
           "kv_token_limit"]

CONVENTIONS = {"ip": "prefill", "eq1": "decode"}
"""Timing convention name → the engine's ``first_token`` (see the module docstring)."""

_ORDERS = ("output", "arrival")


def check_convention(convention: str) -> str:
    if convention not in CONVENTIONS:
        raise ValueError(f"convention={convention!r}: must be one of {tuple(CONVENTIONS)}")
    return convention


def durations(output, convention: str = "ip") -> np.ndarray:
    """Rounds ``d_i`` a request occupies: ``o_i`` (``"ip"``) or ``o_i + 1`` (``"eq1"``)."""
    prefill_emits = CONVENTIONS[check_convention(convention)] == "prefill"
    return np.asarray(output, dtype=np.int64) + (0 if prefill_emits else 1)


def kv_token_limit(params: float, layers: int, hidden: int, dtype_bytes: int, n_gpus: int,
                   gpu_bytes: float) -> Fraction:
    """Jaillet et al.'s KV capacity formula: ``(total memory − model size) / KV bytes
    per token`` with model size ``P·D`` and ``2·L·H·D`` bytes per token, exact.

    For Llama2-70B on two A100s (``P = 70e9, L = 80, H = 8192, D = 2``, 80 GB each) it gives
    7,629.39 tokens (8,192 if memory and model are both counted in GiB), not the 16,492 the
    paper states.
    """
    for name, v in (("params", params), ("layers", layers), ("hidden", hidden),
                    ("dtype_bytes", dtype_bytes), ("n_gpus", n_gpus), ("gpu_bytes", gpu_bytes)):
        check_positive(name, v)
    free = Fraction(n_gpus) * Fraction(gpu_bytes) - Fraction(params) * dtype_bytes
    if free <= 0:
        raise ValueError(f"gpu_bytes={gpu_bytes!r}: {n_gpus} GPUs cannot hold the model "
                         f"({params} parameters × {dtype_bytes} bytes)")
    return free / (2 * layers * hidden * dtype_bytes)


def _check_on_fail(on_fail: str) -> str:
    if on_fail not in ("break", "skip"):
        raise ValueError(f"on_fail={on_fail!r}: must be 'break' or 'skip'")
    return on_fail


def _check_max_starts(max_starts):
    if max_starts is not None:
        check_positive("max_starts", max_starts, integer=True)
    return max_starts


def _admit(peak: FuturePeak, m, e, on_fail: str, max_starts) -> np.ndarray:
    """Admission mask of the candidates (already in priority order) at the current round."""
    ok = peak.admit(m, e, on_fail)
    if max_starts is not None:
        ok[np.flatnonzero(ok)[max_starts:]] = False
    return ok


def mcsf_schedule(arrival, prompt, output, memory, *, convention="ip", on_fail="break",
                  max_starts=None, order="output") -> np.ndarray:
    """Start rounds of MC-SF (Algorithm 2; Algorithm 1 when all arrivals are 0) computed
    round by round without the engine: the reference the :class:`MCSF` policy is tested
    against, and the fast path of the counterexample searches.

    ``max_starts`` caps admissions per round (the capped comparators of spec §3.2/§3.4);
    ``order="arrival"`` gives :class:`FCFS`. Arrival rounds must be integers.
    """
    a = np.asarray(arrival, dtype=np.int64)
    s = np.asarray(prompt, dtype=np.int64)
    d = durations(output, convention)
    _check_on_fail(on_fail)
    _check_max_starts(max_starts)
    if order not in _ORDERS:
        raise ValueError(f"order={order!r}: must be one of {_ORDERS}")
    if np.any(s + d - 1 > memory):
        i = int(np.argmax(s + d - 1))
        raise ValueError(f"memory={memory}: below the peak {int(s[i] + d[i] - 1)} of request {i}")
    n = a.size
    key = np.lexsort((np.arange(n), a, d)) if order == "output" else np.lexsort((np.arange(n), a))
    start = np.full(n, -1, dtype=np.int64)
    t = int(a.min()) if n else 0
    while np.any(start < 0):
        run = (start >= 0) & (start + d > t)
        wait = key[(start[key] < 0) & (a[key] <= t)]
        if wait.size:
            peak = FuturePeak(memory, t, s[run] + t - start[run], start[run] + d[run] - 1)
            ok = _admit(peak, s[wait], t + d[wait] - 1, on_fail, max_starts)
            start[wait[ok]] = t
        if not run.any() and not wait.size:
            t = int(a[start < 0].min())
        else:
            t += 1
    return start


class _FuturePeakPolicy(Policy):
    """Continue every running request; admit waiting ones in ``_order`` while they pass the
    future-peak check. Subclasses fix the order."""

    no_token_budget = round_model("Jaillet et al.")

    _order = "output"

    def __init__(self, on_fail: str = "break", max_starts=None):
        self.on_fail = _check_on_fail(on_fail)
        self.max_starts = _check_max_starts(max_starts)

    def rule(self) -> str | None:
        return "future_peak_admission" if self.on_fail == "break" else None

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
            ok = _admit(peak, state.prompt[wait], d - 1, self.on_fail, self.max_starts)
        new = wait[ok]
        return Batch(prefill=new, chunk=state.prompt[new], decode=run)


class MCSF(_FuturePeakPolicy):
    """Memory-constrained shortest-first: Jaillet et al.'s Algorithm 2 (Algorithm 1 when every
    request arrives at 0).

    Parameters
    ----------
    on_fail : ``"break"`` stops admitting at the first request that fails the check (the
        paper's Algorithms 1 and 2); ``"skip"`` tries the longer ones too (differs only with unequal
        prompt sizes, spec D6).
    max_starts : at most this many admissions per round (``None``: the paper's algorithm;
        a cap gives the staggered comparators that refute Theorems 4.2 and 5.3).
    """


class FCFS(_FuturePeakPolicy):
    """The future-peak check of MC-SF applied in arrival order instead of shortest first."""

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

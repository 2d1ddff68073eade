"""WAIT and Nested WAIT (Ao et al., Algorithms 1–2) and the FCFS baseline of Props. 4–5.

Conventions of the paper mapped onto the engine (written down once, here)
-------------------------------------------------------------------------
* A type-``j`` prompt is a request with ``prompt = l_j`` and ``output = l'_j``, run with the
  engine's ``first_token="decode"``: stage 0 is the prefill iteration (the whole prompt
  as one chunk, KV ``l_j`` after it) and stages ``1..l'_j`` are the ``l'_j`` decode
  iterations (KV ``l_j + k`` after stage ``k``). A prompt thus takes ``l'_j + 1``
  iterations and completes at the end of stage ``l'_j``, as in the paper (L85, L144).
* Batch time: ``qt.LinearMemoryTime(d0, d1)`` charges ``d1`` per KV token of the batch
  members *after* the iteration, which is eq. (1)'s ``Σ (l_j + k_i)``.
* Memory: the engine's KV check counts every resident request, paused cohorts and entry
  queues included (spec §1.3 [DECIDE]): a paused prompt after stage ``k−1`` holds
  ``l_j + k − 1`` tokens; un-prefilled prompts hold none (CPU, L961). ``memory=C``.
* TTFT: the engine stamps ``first_token`` at the end of stage 1 (Fig. 1, L30: the first
  output token is produced in stage 1); the vLLM convention, end of prefill, is the
  ``prefill_done`` column. Latency is ``finish − arrival`` (end of stage ``l'_j``).
* Throughput: ``metrics["throughput"]`` counts decode tokens (``l'_j`` per prompt, L122);
  eq. (8)'s ``l'_j + 1`` convention is ``(output + 1)`` summed over completed requests.
* Decision epochs are batch completions and arrivals to an idle GPU (spec §3.0): the
  engine asks the policy after every batch and, when the policy idles, at the next arrival.
* Nested WAIT does not know types: it only reads a request's stage (``decoded``) and the
  segment boundaries; a request's ``output`` is used only by the engine to end it (EOS).
"""

from __future__ import annotations

import numpy as np

from ..engine import Batch
from .base import Policy

__all__ = ["WAIT", "NestedWAIT", "FCFSRestart"]


def _first_per_group(positions: np.ndarray, group: np.ndarray, quota: np.ndarray) -> np.ndarray:
    """The first ``quota[g]`` of ``positions`` (already in FIFO order) of each group ``g``."""
    if positions.size == 0:
        return positions
    order = np.argsort(group, kind="stable")
    g = group[order]
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size) - np.searchsorted(g, g, side="left")
    return positions[rank < quota[group]]


class WAIT(Policy):
    """WAIT (Algorithm 1): type ``j`` joins a batch only when at least
    ``n_j = thresholds[j]`` type-``j`` prompts wait for prefill; it then prefills the first
    ``n_j`` of them and advances every in-progress type-``j`` cohort by one stage. Other
    types' cohorts pause with their KV caches kept. The GPU idles when no type is ready.

    Every cohort has exactly ``n_j`` prompts, so total KV memory never exceeds
    ``M^π = Σ_j n_j (l'_j+1)(l_j + l'_j/2)`` (:func:`~queuetheory.fluid.wait_memory`).
    Given ``classes`` (fixed lengths), the policy refuses to run with ``memory < M^π``.
    """

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

    def _schedule(self, state):
        cls = state.cls
        if cls.max() >= self._n.size:
            raise ValueError(f"WAIT: a request of class {int(cls.max())} arrived but only "
                             f"{self._n.size} thresholds were given")
        if (self.memory_bound is not None and state.memory is not None
                and state.memory < self.memory_bound):
            raise ValueError(f"memory={state.memory}: below WAIT's M^π = {self.memory_bound:g} "
                             f"for thresholds {self.thresholds}; it could overflow (eq. 9)")
        waiting = state.prefilled == 0
        ready = np.bincount(cls[waiting], minlength=self._n.size) >= self._n
        if not ready.any():
            return Batch()
        mine = ready[cls]
        new = np.flatnonzero(waiting & mine)
        prefill = _first_per_group(new, cls[new], self._n)
        decode = np.flatnonzero(~waiting & mine)
        return Batch(prefill, state.prompt[prefill], decode)


class NestedWAIT(Policy):
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
    with a bound, Theorem 2); ``"gate"`` shortens the prefix so the batch fits ``memory``.
    """

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
        segment's entry (waiting for prefill, or just past the previous boundary)."""
        if state.output.max() > self._b[-1]:
            raise ValueError(f"NestedWAIT: an output length {int(state.output.max())} exceeds "
                             f"the last segment boundary {int(self._b[-1])}")
        started = state.prefilled > 0
        d = state.decoded
        seg = np.where(started, np.searchsorted(self._b, d, side="right"), 0)
        entry = ~started | ((seg > 0) & (d == self._b[np.maximum(seg - 1, 0)]))
        return seg, entry

    def _schedule(self, state):
        seg, entry = self.segment_of(state)
        L = self._n.size
        full = np.bincount(seg[entry], minlength=L) >= self._n
        k = L if full.all() else int(np.argmin(full))       # I*: longest ready prefix
        if k == 0:
            return Batch()
        ent = np.flatnonzero(entry & (seg < k))
        admitted = _first_per_group(ent, seg[ent], self._n)
        members = np.sort(np.concatenate([admitted, np.flatnonzero(~entry & (seg < k))]))
        if self.overflow == "gate" and state.memory is not None:
            new = state.prefilled[members] == 0
            add = np.where(new, state.prompt[members], 1)
            per_seg = np.bincount(seg[members], weights=add, minlength=L)[:k]
            fits = state.memory_used + np.cumsum(per_seg) <= state.memory
            k = int(np.argmin(fits)) if not fits.all() else k
            if k == 0:
                return Batch()
            members = members[seg[members] < k]
        pre = members[state.prefilled[members] == 0]
        dec = members[state.prefilled[members] > 0]
        return Batch(pre, state.prompt[pre], dec)


class FCFSRestart(Policy):
    """FCFS with eviction and restart, the type-unaware baseline of Props. 4–5 (spec
    §3.5a): every resident request runs each iteration; if the next iteration would exceed
    memory, the most recently admitted residents are evicted (KV dropped, progress lost,
    back to the queue front); then waiting requests are admitted in arrival order while
    their prompts fit. Residents stay a prefix of the arrival order, so both rules amount
    to running the longest arrival-order prefix whose next-iteration memory fits."""

    def _schedule(self, state):
        started = state.kv > 0
        need = np.where(started, state.kv + 1, state.prompt)
        k = state.n if state.memory is None else int(
            np.searchsorted(np.cumsum(need), state.memory, side="right"))
        pos = np.arange(state.n)
        run = pos < k
        pre = np.flatnonzero(run & ~started)
        return Batch(pre, state.prompt[pre], np.flatnonzero(run & started),
                     np.flatnonzero(~run & started))

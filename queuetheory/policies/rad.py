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

import warnings
from math import lcm

import numpy as np
import pandas as pd

from ..engine import Batch
from ..engine.kernels import slo_slack
from ..errors import check_positive
from .base import (
    Policy,
    admissible,
    check_budget,
    decides_as_shipped,
    fit_memory,
    round_model,
    take_prefills,
)

__all__ = ["RAD", "CycleScheduler", "RequestLevel", "SLAI", "PrefillOnly", "DecodeOnly"]

_EMPTY = np.empty(0, dtype=np.int64)


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
        self._ric = 0
        self._cycles = []

    def _continue_prefill(self, state):
        """The one request whose prefill is under way, or None (prefills are never
        interleaved with other work in RAD and Alg. 2)."""
        partial = np.flatnonzero(~state.in_decode & (state.prefilled > 0))
        if partial.size == 0:
            return None
        j = partial[:1]
        return Batch(j, np.minimum(self.t_lcm, state.remaining_prefill[j]))

    def _start_prefill(self, state, P):
        if self._ric == 0:
            self._cycles.append({"start": state.time, "pending": state.n, "rids": []})
        self._ric += 1
        self._cycles[-1]["rids"].append(int(state.rid[P[0]]))
        return Batch(P[:1], np.minimum(self.t_lcm, state.prompt[P[:1]]))

    def _full(self):
        return self.n is not None and self._ric >= self.n

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
    """

    def __init__(self, tile, n: int | None = None, *, strict_cycles: bool = False):
        super().__init__(tile, n)
        self.strict_cycles = bool(strict_cycles)

    def _reset(self):
        super()._reset()
        self._last_decode = False

    def _schedule(self, state):
        batch = self._continue_prefill(state)
        if batch is not None:
            return batch
        D = np.flatnonzero(state.in_decode)
        P = np.flatnonzero(~state.in_decode)
        if self._last_decode and D.size == 0 and (
                not self.strict_cycles or self._full() or P.size == 0):
            self._ric = 0                                    # line 9: end of cycle
        self._last_decode = False
        if D.size >= self.t_col or P.size == 0 or self._full():
            self._last_decode = True
            return Batch(decode=D)
        return self._start_prefill(state, P)


class CycleScheduler(_TiledPolicy):
    """Algorithm 2 (Appendix D): prefill up to ``n`` waiting requests (each alone, ``t_lcm``
    chunks), then decode them ``t*_col`` at a time (FCFS refill) until all finish; repeat."""

    def _reset(self):
        super()._reset()
        self._mode = "prefill"

    def _schedule(self, state):
        batch = self._continue_prefill(state)
        if batch is not None:
            return batch
        D = np.flatnonzero(state.in_decode)
        P = np.flatnonzero(~state.in_decode)
        if self._mode == "prefill":
            if P.size and not self._full():
                return self._start_prefill(state, P)
            self._mode = "decode"
        if D.size:
            return Batch(decode=D[: self.t_col])
        self._mode, self._ric = "prefill", 0
        return self._start_prefill(state, P)


class RequestLevel(Policy):
    """Request-level batching (Alg. 3, FasterTransformer style, mode test fixed, I-3): up to
    ``batch_size`` waiting requests are prefilled whole in one batch, then decoded together
    until all finish; arrivals wait."""

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
        D = np.flatnonzero(state.in_decode)
        if D.size:
            return Batch(decode=D)
        S = np.flatnonzero(~state.in_decode)[: self.batch_size]
        return Batch(S, state.remaining_prefill[S])


class PrefillOnly(Policy):
    """A DistServe prefill node (Alg. 5): the oldest prompt alone, in chunks of ``chunk``
    tokens (None: whole)."""

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
    oldest ``cap``, e.g. ``t*_col`` for optimal tiling)."""

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
        """Sarathi-Serve (Alg. 4) with an active cap (I-19): every decode critical, no β."""
        return cls(token_budget, alpha=alpha, beta=None, delta=0.0, order=order, tbt=(0.0,))

    def bulk(self, engine):
        """The rule ``slo_slack`` (:func:`~queuetheory.engine.kernels.slo_slack`): without a
        memory limit every decision follows it; the engine steps where memory is limited."""
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

    def _observe(self, state):
        """Book the previous (non-empty) batch: its duration — the engine calls again at its
        end unless the system emptied — and the token times ``e_j`` of its members."""
        rid = state.rid
        if rid.size and rid.max() >= self._e.size:
            self._e = np.concatenate([self._e, np.full(max(self._e.size, rid.max() + 1),
                                                       np.nan)])
        if self._prev_rids.size and (state.arrival <= self._prev_time).any():
            d = state.time - self._prev_time
            self._count += 1
            self._mean += (d - self._mean) / self._count
            self._e[self._prev_rids] = state.time

    def _schedule(self, state):
        self._observe(state)
        budget = self.token_budget
        beta = budget if self.beta is None else min(self.beta, budget)
        delta = self.delta
        if self.offset == "dynamic":
            use = 0.0 if state.memory is None else state.memory_used / state.memory
            delta = self.dynamic[0] if use < self.dynamic[2] else self.dynamic[1]
        dec = np.flatnonzero(state.in_decode)
        e = self._e[state.rid[dec]]
        e = np.where(np.isnan(e), state.time, e)
        target = self.tbt[np.minimum(state.cls[dec], self.tbt.size - 1)]
        C = e + target - delta * self._mean
        by_c = dec[np.argsort(C, kind="stable")]
        crit = state.time >= np.sort(C, kind="stable")
        d1 = by_c[crit][:beta]
        tau = d1.size
        started = state.started & ~state.in_decode
        p1, c1 = take_prefills(np.flatnonzero(started), state.remaining_prefill[started],
                               budget - tau)
        tau += int(c1.sum())
        waiting = np.flatnonzero(~state.started)
        if self.order == "spf":
            keys = (state.prompt[waiting],)
        else:
            keys = ()
        if self.paying_first:
            keys = keys + (-state.priority[waiting],)
        if keys:
            waiting = waiting[np.lexsort(keys)]          # stable: ties by arrival
        room = self.alpha - int(state.started.sum())
        waiting = admissible(state, waiting[: max(room, 0)])
        p2, c2 = take_prefills(waiting, state.remaining_prefill[waiting], budget - tau)
        tau += int(c2.sum())
        d2 = by_c[~crit][: max(0, min(budget - tau, beta - d1.size))]
        prefill, chunk = np.concatenate([p1, p2]), np.concatenate([c1, c2])
        decode = np.concatenate([d1, d2])
        batch = Batch(prefill, chunk, decode)
        if state.memory is not None:
            batch = fit_memory(state, batch.prefill, batch.chunk, batch.decode)
        self._prev_time = state.time
        self._prev_rids = state.rid[np.concatenate([batch.decode, batch.prefill])] \
            if not batch.empty else _EMPTY
        return batch


# ---- moved: old names kept for one release -------------------------------------------------------
#: name -> what to call instead (each warns until the next release).
MOVED = {
    "DistServe": "queuetheory.networks.DistServe",
    "simulate_nodes": 'queuetheory.networks.simulate_fleet(trace, policy, time_model, r, '
                      'router="random")',
    "slo_metrics": "queuetheory.capacity.slo_metrics",
    "slo_capacity": "queuetheory.capacity.slo_capacity",
}


def moved(name: str, where: str = "queuetheory.policies.rad"):
    """The object a moved name stands for, after a ``DeprecationWarning`` that names the new
    one (attributed to the caller's caller: the user's line)."""
    # deprecated upward imports, listed in tests/test_layers.py's DEPRECATED
    if name in ("DistServe", "simulate_nodes"):
        from ..networks import disaggregated as room
    else:
        from ..capacity import slo_scan as room
    warnings.warn(f"{where}.{name} is deprecated and goes in the next release: use "
                  f"{MOVED[name]}", DeprecationWarning, stacklevel=3)
    return getattr(room, "_random_nodes" if name == "simulate_nodes" else name)


def __getattr__(name):
    if name in MOVED:
        return moved(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

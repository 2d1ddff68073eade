"""Disaggregated serving (DistServe, Zhong et al.; Bari, Hegde, de Veciana, Appendix E.3,
Alg. 5): prefill engines and decode engines behind uniformly random routers.

A system of several engines, so it lives with the other multi-engine systems (a fleet of
identical engines behind a router is :func:`~queuetheory.networks.simulate_fleet`); the
node schedulers are policies (:class:`~queuetheory.policies.PrefillOnly`,
:class:`~queuetheory.policies.DecodeOnly`). Moved from ``queuetheory.policies.rad``, where
``DistServe`` keeps working for one release with a ``DeprecationWarning``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..engine import Engine, simulate
from ..errors import check_positive
from ..policies.rad import DecodeOnly, PrefillOnly
from ..workload import Trace, Workload

__all__ = ["DistServe"]


def _trace(workload, horizon, n_requests, seed) -> Trace:
    """``workload`` as a trace: a :class:`~queuetheory.workload.Trace` as it is, a
    :class:`~queuetheory.workload.Workload` sampled up to ``horizon`` or ``n_requests``."""
    if isinstance(workload, Trace):
        return workload
    if not isinstance(workload, Workload):
        raise ValueError(f"workload={workload!r}: must be a Workload or a Trace")
    return workload.sample(horizon=horizon, n_requests=n_requests, seed=seed)


def _random_nodes(workload, make_policy, time_model, r: int, *, horizon=None,
                  n_requests=None, seed=0, **kwargs) -> list:
    """``r`` independent engines behind a uniformly random router, one
    :class:`~queuetheory.engine.Result` per engine (the records of the deprecated
    ``policies.simulate_nodes``, kept for one release).

    A random router reads no engine, so the routed system splits into ``r`` independent
    streams (thinning) and each engine runs alone: node ``j`` gets the requests with
    ``default_rng([seed, 2]).integers(0, r, n) == j`` and runs ``make_policy()`` with
    ``seed + j`` (``first_token="prefill"`` by default). The one random-router fleet is
    :func:`~queuetheory.networks.simulate_fleet` (``router="random"``): given the same
    routes it keeps the same records, engine for engine (``tests/test_capacity_fleet.py``);
    this split leaves with ``simulate_nodes``, its only caller."""
    check_positive("r", r, integer=True)
    trace = _trace(workload, horizon, n_requests, seed)
    node = np.random.default_rng([seed, 2]).integers(0, r, len(trace))
    kwargs.setdefault("first_token", "prefill")
    return [simulate(trace.take(node == j), make_policy(), time_model, horizon=horizon,
                     seed=seed + j, **kwargs) for j in range(r)]


class DistServe:
    """Disaggregated serving (Appendix E.3, Alg. 5): ``r_prefill`` prefill nodes, ``r_decode``
    decode nodes, KV transfer free (§4.1).

    Arrivals go uniformly at random to a prefill node (oldest prompt alone, ``chunk`` tokens
    at a time); a finished prompt emits its first token and moves uniformly at random to a
    decode node, which decodes all (or the oldest ``decode_cap``) of its requests each batch.

    Parameters
    ----------
    r_prefill : int
        Prefill nodes, at least 1.
    r_decode : int
        Decode nodes, at least 1.
    chunk : int, optional
        Prefill chunk in tokens (None: the whole prompt at once).
    decode_cap : int, optional
        The most requests a decode batch takes, oldest first (None: all).

    Raises
    ------
    ValueError
        If ``r_prefill`` or ``r_decode`` is not a positive integer.
    """

    def __init__(self, r_prefill: int, r_decode: int, *, chunk: int | None = None,
                 decode_cap: int | None = None):
        check_positive("r_prefill", r_prefill, integer=True)
        check_positive("r_decode", r_decode, integer=True)
        self.r_prefill, self.r_decode = int(r_prefill), int(r_decode)
        self.chunk, self.decode_cap = chunk, decode_cap

    def __repr__(self):
        return (f"DistServe(r_prefill={self.r_prefill}, r_decode={self.r_decode}, "
                f"chunk={self.chunk}, decode_cap={self.decode_cap})")

    def run(self, workload, time_model, *, horizon: float, seed=0) -> pd.DataFrame:
        """Simulate up to ``horizon``: one row per request with ``ttft`` and ``finish``.

        Parameters
        ----------
        workload : Workload or Trace
            The arrivals (a workload is sampled up to ``horizon`` with ``seed``).
        time_model : TimeModel
            The batch time of every node.
        horizon : float
            The end of the run, in the time model's unit.
        seed : int, default 0
            Seeds the sample and both random routers.

        Returns
        -------
        pandas.DataFrame
            ``arrival``, ``prompt``, ``output``, ``cls``, ``ttft`` and ``finish`` (NaN if not
            done by ``horizon``); ``DataFrame.attrs["completion_rate"]`` is the requests
            finished per time unit.

        Raises
        ------
        ValueError
            If ``horizon`` is not positive or ``workload`` is neither a Workload nor a Trace.
        """
        check_positive("horizon", horizon)
        trace = _trace(workload, horizon, None, seed)
        rng = np.random.default_rng([seed, 5])
        n = len(trace)
        first = np.full(n, np.nan)
        node = rng.integers(0, self.r_prefill, n)
        for j in range(self.r_prefill):
            idx = np.flatnonzero(node == j)
            sub = Trace(trace.arrival[idx], trace.prompt[idx], np.ones(idx.size, np.int64),
                        trace.cls[idx], np.ones(idx.size, np.int64),
                        np.ones(idx.size, np.int64), trace.priority[idx])
            res = simulate(sub, PrefillOnly(self.chunk), time_model, horizon=horizon,
                           first_token="prefill", seed=seed)
            first[idx] = res.requests["finish"].to_numpy()
        finish = np.full(n, np.nan)
        moved = np.flatnonzero(np.isfinite(first))
        dnode = rng.integers(0, self.r_decode, moved.size)
        for j in range(self.r_decode):
            idx = moved[dnode == j]
            idx = idx[np.argsort(first[idx], kind="stable")]
            finish[idx] = self._decode_node(trace, idx, first[idx], time_model, horizon)
        df = pd.DataFrame({"arrival": trace.arrival, "prompt": trace.prompt,
                           "output": trace.output, "cls": trace.cls,
                           "ttft": first - trace.arrival, "finish": finish})
        df.attrs["completion_rate"] = float(np.isfinite(finish).sum() / horizon)
        return df

    def _decode_node(self, trace, idx, ready, time_model, horizon):
        """Drive one decode engine: requests arrive with their KV (prompt prefilled, first
        token out) at ``ready``."""
        eng = Engine(DecodeOnly(self.decode_cap), time_model, first_token="prefill",
                     capacity=max(16, idx.size))
        eng.policy.reset(0)
        tab = eng.table
        rid = np.empty(idx.size, dtype=np.int64)
        k, t = 0, 0.0
        while t < horizon:
            stop = int(np.searchsorted(ready, t, side="right"))
            if stop > k:
                sel = idx[k:stop]
                sub = Trace(ready[k:stop], trace.prompt[sel], trace.output[sel], trace.cls[sel],
                            trace.lo[sel], trace.hi[sel], trace.priority[sel])
                rid[k:stop] = eng.add(sub, ready=ready[k:stop])
                k = stop
            if eng.live.size == 0:
                if k == idx.size:
                    break
                t = float(ready[k])
                continue
            t += eng.step(t)[0]
        out = np.full(idx.size, np.nan)
        out[:k] = tab.finish[rid[:k]]
        return np.where(out <= horizon, out, np.nan)

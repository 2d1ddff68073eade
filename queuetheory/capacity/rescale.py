"""A workload at another rate: its classes rescaled, or a recorded trace replayed."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ..errors import check_positive
from ..workload import Trace, Workload
from ..workload.core import MAX_REQUESTS
from ..workload.traces import mean_rate, with_rate


def at_rate(workload: Workload, rate: float) -> Workload:
    """``workload`` with its total arrival rate set to ``rate``: every class's rate scaled by
    the same factor, its length laws, arrival process, predictor and slot kept.

    Parameters
    ----------
    workload : Workload
        A workload that draws arrivals (not a recorded trace).
    rate : float
        The new total arrival rate, in requests per time unit of the time model (> 0).

    Returns
    -------
    Workload
        The rescaled workload.

    Raises
    ------
    ValueError
        If ``rate`` is not a positive number, ``workload`` is a recorded trace (it has its
        own arrival times: use :func:`replay`), or its total rate is 0 (no length mix to
        rescale).
    """
    check_positive("rate", rate)
    if workload._trace is not None:
        raise ValueError("workload: a recorded trace has its own arrival times; capacity "
                         "planning rescales a Workload that draws arrivals")
    total = workload.total_rate
    if total <= 0:
        raise ValueError(f"workload={workload!r}: total rate 0, no length mix to rescale")
    f = float(rate) / total
    classes = [dataclasses.replace(c, rate=c.rate * f) for c in workload.classes]
    return Workload(classes, arrivals=workload.arrivals, predictor=workload.predictor,
                    slot=workload.slot)


def replay(trace: Trace, rate: float, horizon: float) -> Trace:
    """``trace`` at the mean rate ``rate`` (:func:`~queuetheory.workload.traces.with_rate`:
    every gap scaled by one factor, the burstiness kept), replayed end to end — copies one
    mean gap apart — until ``horizon``: a production trace as long as a probe needs.

    A trace with prefix ids (:attr:`~queuetheory.workload.Trace.blocks`) gives each copy its
    own ids (copy ``c`` shifts the trace's ids, numbered densely ``0 … D − 1``, by ``c·D``):
    the copies stand for other users, and a prefix cache reuses within a copy what it would
    in the trace, never a whole earlier copy (eq. P1 of :mod:`~queuetheory.capacity.prefix`
    then holds per copy).

    Parameters
    ----------
    trace : Trace
        The recorded trace (:class:`~queuetheory.workload.Trace`), not empty.
    rate : float
        The mean arrival rate of the replay, in requests per time unit (> 0).
    horizon : float
        Where the replay ends, in the trace's time unit (> 0).

    Returns
    -------
    Trace
        The rescaled copies, end to end, cut at ``horizon``.

    Raises
    ------
    ValueError
        If ``rate`` or ``horizon`` is not a positive number, the trace is empty, or the
        replay would hold more than ``MAX_REQUESTS`` requests.
    """
    check_positive("horizon", horizon)
    check_positive("rate", rate)
    if not len(trace):
        raise ValueError("trace: empty, nothing to replay")
    want = float(rate) * float(horizon) + len(trace)
    if want > MAX_REQUESTS:
        raise ValueError(f"rate={rate!r}, horizon={horizon!r}: about {want:.3g} requests to "
                         f"replay, more than MAX_REQUESTS = {MAX_REQUESTS:,} (about "
                         f"{want * 800 / 2**30:.3g} GiB once simulated); lower one of them")
    tr = with_rate(trace, rate)
    t = tr.arrival - tr.arrival[0]
    period = float(t[-1]) + 1 / float(rate)
    copies = max(1, math.ceil(horizon / period))
    tiled = tr.take(np.tile(np.arange(len(tr)), copies))
    arrival = (t[None, :] + period * np.arange(copies)[:, None]).ravel()
    fresh = {} if tr.blocks is None else {"blocks": _fresh_ids(tr.blocks, copies)}
    return dataclasses.replace(tiled, arrival=arrival, **fresh).until(horizon)


def _fresh_ids(blocks, copies: int) -> np.ndarray:
    """``blocks`` repeated ``copies`` times, each copy's ids its own: the ids numbered
    densely ``0 … D − 1`` in sorted order, copy ``c``'s shifted by ``c·D``."""
    sizes = np.array([len(b) for b in blocks], dtype=np.int64)
    flat = (np.concatenate([np.asarray(b, dtype=np.int64) for b in blocks]) if len(blocks)
            else np.empty(0, np.int64))
    _, dense = np.unique(flat, return_inverse=True)
    distinct = int(dense.max()) + 1 if dense.size else 0
    parts = np.split(dense.astype(np.int64), np.cumsum(sizes)[:-1])
    out = np.empty(len(blocks) * copies, dtype=object)
    for c in range(copies):
        for i, ids in enumerate(parts):
            out[c * len(blocks) + i] = ids + c * distinct
    return out


def _length_law(workload):
    """The workload whose length law and rate the bounds read: a trace's (prompt, output)
    pairs at its mean rate, or the workload itself."""
    if isinstance(workload, Trace):
        return Workload.from_lengths(workload.prompt, workload.output,
                                     rate=mean_rate(workload))
    return workload

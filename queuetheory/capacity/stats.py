"""A workload's per-request figures: means, KV area, the second moment of the work, and the
lifetime of a lone request."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..engine.conventions import check_first_token
from ..stability import lone_lifetime
from ..workload import Workload
from ..workload.core import _PairedClass

#: The shortest probe of :func:`~queuetheory.capacity.max_rate` (and the shortest window of
#: :func:`~queuetheory.capacity.goodput`), in lifetimes of a lone mean request.
MIN_LIFETIMES = 50


@dataclass(frozen=True)
class RequestStats:
    """Means per request, under a ``first_token`` convention.

    Attributes
    ----------
    prompt : float
        Mean prompt tokens (Li, Dai, Peng's ``m_p``).
    output : float
        Mean output tokens.
    decode : float
        Mean decode iterations (``output − 1`` when prefill emits the first token; Li, Dai,
        Peng's ``m_d``).
    work : float
        Mean tokens of compute, ``prompt + decode`` (Li, Dai, Peng's ``m_p + m_d``).
    kv_area : float
        Mean KV-token-iterations ``E[a]``: the KV tokens a request holds after each of its
        iterations, summed (Ao et al.'s memory work ``(l'+1)(l + l'/2)`` under
        ``"decode"``; ``o·p + o(o−1)/2`` under ``"prefill"``).
    peak : int
        The largest KV footprint a request of the workload reaches (``p + o − 1`` under
        ``"prefill"``), over the law's support (quantile grid for distributions), in tokens.
    work2 : float
        The second moment ``E[(p + d)²]`` of a request's tokens of compute (prompt and
        output independent within a class unless the class draws them as pairs).
    """

    prompt: float
    output: float
    decode: float
    work: float
    kv_area: float
    peak: int
    work2: float


def request_stats(workload, first_token: str = "prefill") -> RequestStats:
    """The :class:`RequestStats` of ``workload`` (class means weighted by rate).

    Parameters
    ----------
    workload : Workload
        The workload (a :class:`~queuetheory.Workload`; a recorded trace goes through its
        length law first).
    first_token : {"prefill", "decode"}, default "prefill"
        Whether the prefill iteration emits the first output token (the real engines'
        convention) or every output token takes a decode iteration (Li, Dai, Peng's).

    Returns
    -------
    RequestStats
        The per-request means, KV area, peak and second moment of the work.

    Raises
    ------
    ValueError
        If ``first_token`` is neither value, or ``workload`` is not a
        :class:`~queuetheory.Workload`.
    """
    emit = int(check_first_token(first_token) == "prefill")
    classes = _classes(workload)
    w = np.array([c.rate for c in classes], dtype=float)
    if w.sum() <= 0:
        w = np.ones(len(classes))
    w = w / w.sum()
    area, square, peak = [], [], 0
    for c in classes:
        if isinstance(c, _PairedClass):
            p, o = c._prompt.spec.astype(float), c._output.spec.astype(float)
            d = o - emit
            area.append(float(np.mean((d + 1) * p + d * (d + 1) / 2)))
            square.append(float(np.mean((p + d) ** 2)))
            peak = max(peak, int((p + o).max()) - emit)
        else:
            mp, mo, mo2 = c.mean_prompt, c.mean_output, c.output_moment(2)
            md, md2 = mo - emit, mo2 - 2 * emit * mo + emit
            area.append((md + 1) * mp + (md2 + md) / 2)
            square.append(c._prompt.moment(2) + 2 * mp * md + md2)
            peak = max(peak, c.max_prompt + c.max_output - emit)
    mp = float(w @ [c.mean_prompt for c in classes])
    mo = float(w @ [c.mean_output for c in classes])
    return RequestStats(mp, mo, mo - emit, mp + mo - emit, float(w @ area), int(peak),
                        float(w @ square))


def _classes(workload):
    if not isinstance(workload, Workload):
        raise ValueError(f"workload={workload!r}: must be a queuetheory Workload")
    return workload.classes


def _lone_lifetime(workload, time_model) -> float:
    """The time a lone mean request spends in an empty engine
    (:func:`~queuetheory.stability.lone_lifetime`)."""
    return lone_lifetime(workload, time_model)

"""Token capacity of one LLM engine and the load condition of Theorem 1 (Li, Dai, Peng §2,
eq. 2.3, 2.7).

A full batch of ``b`` tokens takes ``t_b`` time units, so an engine processes at most
``b/t_b`` tokens per unit. A workload with ``λ`` requests per unit and mean sizes
``(m_p, m_d)`` is stable under every work-conserving policy iff ``λ(m_p + m_d) < b/t_b``
(Theorem 1, eq. 2.7/2.8). Under the piecewise-linear law (2.3)
``t_b = c + a·max(0, b − b0)`` the smallest stable budget has the closed form::

    b_min = Λc                           if Λc ≤ b0
    b_min = Λ(c − a·b0) / (1 − aΛ)       otherwise (needs aΛ < 1),      Λ = λ(m_p + m_d).

``b/t_b`` is the *maximal* rate only if no smaller load is faster
(:func:`max_token_rate`, in tokens per time unit): true iff ``c ≥ a·b0`` for (2.3), and to be
checked numerically once durations are rounded to slots.

This module was ``queuetheory.bounds.capacity`` (beside :mod:`queuetheory.capacity.bounds`,
the bracket of the simulated boundary); that path, ``bounds.max_rate`` and ``bounds.MaxRate``
keep working for one release with a ``DeprecationWarning``.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import UnstableError, check_positive, renamed_keywords
from ..timing import PiecewiseLinearTime, TimeModel, UnitTime
from ..workload import Workload

__all__ = ["token_capacity", "max_token_rate", "MaxTokenRate", "MAX_LOADS", "max_stable_rate",
           "min_token_budget",
           "smallest_stable_budget", "capacity_table", "LLAMA3_70B", "llama3_70b_table"]

#: The only fit the paper reports (§2.1, Eq. 2.3): Llama-3-70B on 2×A100-80GB, NVLink,
#: tensor parallel.
#: Time unit: milliseconds (c = 45.5 ms, a = 0.30 ms/token, b0 = 64 tokens).
LLAMA3_70B = PiecewiseLinearTime(c=45.5, a=0.30, b0=64)


def _check_model(time_model) -> TimeModel:
    if not isinstance(time_model, TimeModel):
        raise ValueError(f"time_model={time_model!r}: must be a queuetheory TimeModel")
    return time_model


def _budget(b) -> int:
    check_positive("b", b, integer=True)
    return int(b)


@renamed_keywords(b="token_budget")
def token_capacity(time_model, token_budget, *, mix: float | None = None) -> float:
    """``b / t_b``: tokens per time unit of back-to-back full batches (Li, Dai, Peng).

    A model whose batch time depends on the mix of prefill and decode tokens
    (:class:`~queuetheory.AffineTokenTime`) needs ``mix``, the prefill share
    ``m_p / (m_p + m_d)`` of the tokens: the rate is then that of full batches of this mix,
    ``b / full_batch_time(mix·b, (1 − mix)·b, b)``. For the other models ``mix`` changes
    nothing (their ``t_b`` depends on the token load alone).

    Parameters
    ----------
    time_model : TimeModel
        The batch time ``t_{b'}`` (e.g. eq. 2.3's :class:`~queuetheory.timing.PiecewiseLinearTime`),
        in the model's time unit.
    token_budget : int
        ``b``: the token budget per batch, a positive integer.
    mix : float, optional
        The prefill share ``m_p / (m_p + m_d)`` in ``[0, 1]``, for a mix-dependent model.

    Returns
    -------
    float
        ``b / t_b``, in tokens per time unit.

    Raises
    ------
    ValueError
        If ``time_model`` is not a TimeModel, ``b`` is not a positive integer, ``mix`` is
        outside ``[0, 1]``, or the model needs ``mix`` and none is given.
    """
    b = token_budget                 # the paper's b
    _check_model(time_model)
    b = _budget(b)
    if mix is None:
        try:
            return b / float(time_model.token_time(b))
        except TypeError:
            raise ValueError(f"mix=None: {time_model!r} depends on the mix of prefill and "
                             "decode tokens; give mix = m_p / (m_p + m_d)") from None
    if not 0 <= float(mix) <= 1:
        raise ValueError(f"mix={mix!r}: the prefill share of the tokens must lie in [0, 1]")
    return b / float(time_model.full_batch_time(float(mix) * b, (1 - float(mix)) * b, b))


@dataclass(frozen=True)
class MaxTokenRate:
    """``max_{1≤b'≤b} b'/t_{b'}`` and where it is attained; ``at_budget`` iff it is at ``b' = b``
    (Theorem 1(b)'s premise that ``b/t_b`` is the maximal processing rate).

    Attributes
    ----------
    b : int
        ``b``: the token budget.
    full_rate : float
        ``b / t_b``, in tokens per time unit.
    rate : float
        ``max_{1≤b'≤b} b'/t_{b'}``, in tokens per time unit.
    argmax : int
        The load ``b'`` where the best rate is attained.
    """

    b: int
    full_rate: float
    rate: float
    argmax: int

    @property
    def at_budget(self) -> bool:
        """Whether the best rate is the full-batch rate ``b/t_b`` (up to rounding)."""
        return self.rate <= self.full_rate * (1 + 1e-12)


#: Most loads ``1 … b`` evaluated one by one (about a second of Python calls); larger
#: searches are refused with the estimate, except where a closed form exists.
MAX_LOADS = 1_000_000


def _piecewise_candidates(time_model, b: int) -> np.ndarray | None:
    """The loads where ``b'/t_{b'}`` can peak for an unslotted (2.3) or unit model.

    ``b'/c`` increases up to ``b0``, and beyond it ``b'/(c + a(b' − b0))`` is monotone (its
    derivative has the sign of ``c − a·b0``), so the maximum over ``1 … b`` is at ``⌊b0⌋``,
    ``⌊b0⌋ + 1`` or ``b``.
    """
    if time_model.slot is not None:
        return None
    if isinstance(time_model, UnitTime):
        return np.array([b])
    if isinstance(time_model, PiecewiseLinearTime):
        k = min(int(time_model.b0), b)
        return np.unique(np.clip([1, k, k + 1, b], 1, b))
    return None


def _check_loads(name: str, b: int):
    if b > MAX_LOADS:
        raise ValueError(f"{name}={b}: evaluating the time model at {b:,} loads one by one "
                         f"would take about {b * 1e-6:.3g} s and {b * 16 / 1e9:.3g} GB; the limit "
                         f"is MAX_LOADS = {MAX_LOADS:,} (unslotted PiecewiseLinearTime and "
                         "UnitTime have a closed form at any size)")


@renamed_keywords(b="token_budget")
def max_token_rate(time_model, token_budget, *, warn: bool = True) -> MaxTokenRate:
    """The best token rate ``max_{1≤b'≤b} b'/t_{b'}`` in tokens per time unit (not requests:
    :func:`queuetheory.capacity.max_rate` is the simulated request rate); warns if it is not
    ``b/t_b``.

    Closed form for unslotted :class:`~queuetheory.timing.PiecewiseLinearTime` and
    :class:`~queuetheory.timing.UnitTime`; other models are evaluated at every load, up to
    ``b = MAX_LOADS``.

    Parameters
    ----------
    time_model : TimeModel
        The batch time ``t_{b'}``, in the model's time unit.
    token_budget : int
        ``b``: the token budget per batch, a positive integer (at most ``MAX_LOADS`` without a
        closed form).
    warn : bool, default True
        Warn when the best rate is not at ``b' = b``.

    Returns
    -------
    MaxTokenRate
        The full-batch rate, the best rate and where it is attained.

    Raises
    ------
    ValueError
        If ``time_model`` is not a TimeModel, ``b`` is not a positive integer, or ``b`` exceeds
        ``MAX_LOADS`` for a model without a closed form.

    Warns
    -----
    UserWarning
        If ``warn`` and the best rate is at a load below ``b``.
    """
    b = token_budget                 # the paper's b
    _check_model(time_model)
    b = _budget(b)
    loads = _piecewise_candidates(time_model, b)
    if loads is None:
        _check_loads("b", b)
        loads = np.arange(1, b + 1)
    times = np.array([float(time_model.token_time(int(k))) for k in loads])
    rates = loads / times
    best = int(np.argmax(rates))
    out = MaxTokenRate(b, float(rates[-1]), float(rates[best]), int(loads[best]))
    if warn and not out.at_budget:
        warnings.warn(f"{time_model!r}: the best token rate {out.rate:.6g} is at load "
                      f"{out.argmax} < b = {b}, above the full-batch rate {out.full_rate:.6g}; "
                      "Theorem 1(b)'s capacity b/t_b is not the maximal rate here",
                      stacklevel=2)
    return out


def _means(workload) -> tuple[float, float]:
    if isinstance(workload, Workload):
        return workload.mean_prompt, workload.mean_output
    try:
        mp, md = workload
    except (TypeError, ValueError):
        raise ValueError(f"workload={workload!r}: must be a Workload or a pair (m_p, m_d)"
                         ) from None
    return _mean_length("m_p", mp), _mean_length("m_d", md)


def _mean_length(name: str, value) -> float:
    """A mean prompt or output length: every request has at least one token of each."""
    check_positive(name, value)
    if float(value) < 1:
        raise ValueError(f"{name}={value!r}: a mean token length is at least 1")
    return float(value)


@renamed_keywords(b="token_budget")
def max_stable_rate(workload, time_model, token_budget) -> float:
    """Largest arrival rate ``λ`` (requests per time unit) with ``λ(m_p + m_d) < b/t_b``.

    ``workload`` is a :class:`~queuetheory.workload.Workload` (its class mix is kept) or the
    pair of mean sizes ``(m_p, m_d)``. Stability needs a rate strictly below the value returned.

    Parameters
    ----------
    workload : Workload or tuple of (float, float)
        The workload, or its mean sizes ``(m_p, m_d)`` in tokens (each ``>= 1``).
    time_model : TimeModel
        The batch time ``t_{b'}``, in the model's time unit.
    token_budget : int
        ``b``: the token budget per batch, a positive integer.

    Returns
    -------
    float
        ``(b/t_b) / (m_p + m_d)``, in requests per time unit.

    Raises
    ------
    ValueError
        If ``workload`` is neither a Workload nor a pair of means ``>= 1``, ``time_model`` is
        not a TimeModel, or ``b`` is not a positive integer.
    """
    b = token_budget                 # the paper's b
    mp, md = _means(workload)
    return token_capacity(time_model, b) / (mp + md)


def min_token_budget(lam, mp, md, time_model) -> float:
    """The budget threshold ``b_min``: every budget ``b > b_min`` gives ``λ(m_p+m_d) < b/t_b``.

    Closed form for :class:`~queuetheory.timing.PiecewiseLinearTime` without slot rounding
    (if ``c < a·b0`` the stable budgets form a bounded interval above it) and for
    :class:`~queuetheory.timing.UnitTime` (``b_min = Λ``). Raises :class:`UnstableError` when no
    budget is stable (``aΛ ≥ 1``, or ``Λ ≥ b0/c`` when ``c < a·b0``). For other models use
    :func:`smallest_stable_budget`.

    Parameters
    ----------
    lam : float
        ``λ``: the arrival rate, in requests per time unit, ``> 0``.
    mp : float
        ``m_p``: the mean prompt size, in tokens, ``>= 1``.
    md : float
        ``m_d``: the mean decode size, in tokens, ``>= 1``.
    time_model : PiecewiseLinearTime or UnitTime
        The batch time (eq. 2.3), without slot rounding.

    Returns
    -------
    float
        ``b_min``, in tokens (not rounded to an integer).

    Raises
    ------
    ValueError
        If ``lam``, ``mp`` or ``md`` is out of range, or ``time_model`` is not an unslotted
        PiecewiseLinearTime or UnitTime.
    UnstableError
        If no budget is stable.
    """
    check_positive("lam", lam)
    load = float(lam) * (_mean_length("mp", mp) + _mean_length("md", md))
    _check_model(time_model)
    if isinstance(time_model, UnitTime) and time_model.slot is None:
        return load
    if not isinstance(time_model, PiecewiseLinearTime) or time_model.slot is not None:
        raise ValueError(f"time_model={time_model!r}: the closed form needs PiecewiseLinearTime "
                         "or UnitTime without slot rounding; use smallest_stable_budget")
    c, a, b0 = time_model.c, time_model.a, time_model.b0
    if load * c <= b0:
        return load * c
    if c < a * b0:
        raise UnstableError("λ(m_p+m_d) against the best rate b0/c", load, b0 / c)
    if a * load >= 1:
        raise UnstableError("a·λ(m_p+m_d) (no budget reaches the limit rate 1/a)", a * load, 1.0)
    return load * (c - a * b0) / (1 - a * load)


def smallest_stable_budget(lam, mp, md, time_model, *, b_max: int = 1 << 16) -> int:
    """The smallest integer ``b ≤ b_max`` with ``λ(m_p+m_d) < b/t_b``, by search (any model).

    Parameters
    ----------
    lam : float
        ``λ``: the arrival rate, in requests per time unit, ``> 0``.
    mp : float
        ``m_p``: the mean prompt size, in tokens, ``>= 1``.
    md : float
        ``m_d``: the mean decode size, in tokens, ``>= 1``.
    time_model : TimeModel
        The batch time ``t_{b'}``, in the model's time unit.
    b_max : int, default 65536
        The largest budget searched, at most ``MAX_LOADS``.

    Returns
    -------
    int
        The smallest stable budget ``b``, in tokens.

    Raises
    ------
    ValueError
        If ``lam``, ``mp``, ``md`` or ``b_max`` is out of range, or ``time_model`` is not a
        TimeModel.
    UnstableError
        If no budget up to ``b_max`` is stable.
    """
    check_positive("lam", lam)
    load = float(lam) * (_mean_length("mp", mp) + _mean_length("md", md))
    _check_model(time_model)
    check_positive("b_max", b_max, integer=True)
    _check_loads("b_max", int(b_max))
    b = np.arange(1, int(b_max) + 1)
    rates = b / np.array([float(time_model.token_time(int(k))) for k in b])
    ok = np.flatnonzero(rates > load)
    if ok.size == 0:
        raise UnstableError(f"λ(m_p+m_d) against the best rate for b ≤ {b_max}", load,
                            float(rates.max()))
    return int(b[ok[0]])


def capacity_table(time_model, budgets, *, per: float = 1.0) -> pd.DataFrame:
    """``t_b``, ``b/t_b`` and the best rate ``max_{b'≤b} b'/t_{b'}`` for each budget.

    Rates are multiplied by ``per`` (``per=1000`` turns tokens/ms into tokens/s).

    Parameters
    ----------
    time_model : TimeModel
        The batch time ``t_{b'}``, in the model's time unit.
    budgets : iterable of int
        The budgets ``b``, positive integers.
    per : float, default 1.0
        The factor applied to the rates (a change of time unit).

    Returns
    -------
    pandas.DataFrame
        Indexed by ``b``: ``t_b``, ``capacity`` (``b/t_b``), ``max_rate``, ``max_rate_at`` and
        ``at_budget``.

    Raises
    ------
    ValueError
        If ``time_model`` is not a TimeModel, or a budget is not a positive integer or exceeds
        ``MAX_LOADS`` for a model without a closed form.
    """
    rows = []
    for b in budgets:
        m = max_token_rate(time_model, b, warn=False)
        rows.append({"b": int(b), "t_b": float(time_model.token_time(int(b))),
                     "capacity": m.full_rate * per, "max_rate": m.rate * per,
                     "max_rate_at": m.argmax, "at_budget": m.at_budget})
    return pd.DataFrame(rows).set_index("b")


def llama3_70b_table(budgets=(64, 128, 256, 512, 768, 1024, 2048)) -> pd.DataFrame:
    """Capacity against budget for the paper's Llama-3-70B fit, in tokens per second.

    The limit as ``b → ∞`` is ``1/a`` = 3333.3 tokens/s (row ``inf``) because ``c > a·b0``.

    Parameters
    ----------
    budgets : iterable of int, default (64, 128, 256, 512, 768, 1024, 2048)
        The budgets ``b``, in tokens.

    Returns
    -------
    pandas.DataFrame
        As :func:`capacity_table` with ``per=1000`` (rates in tokens per second, ``t_b`` in
        ms), plus the row ``inf``.
    """
    table = capacity_table(LLAMA3_70B, budgets, per=1000.0)
    limit = pd.DataFrame([{"t_b": math.inf, "capacity": 1000.0 / LLAMA3_70B.a,
                           "max_rate": 1000.0 / LLAMA3_70B.a, "max_rate_at": -1,
                           "at_budget": True}], index=pd.Index([math.inf], name="b"))
    return pd.concat([table, limit])

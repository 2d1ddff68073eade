"""Fluid model of one token-budget engine and its workload function (Li, Dai, Peng App. C).

Fluid equations (C.10)–(C.14), ``μ = b/t_b``::

    Z_p(t) = Z_p(0) + λt − F_p(t),   Z_d(t) = Z_d(0) + F_p(t) − F_d(t),
    F_f = B_f/m_f,   0 ≤ Ḃ_p + Ḃ_d ≤ μ,   and (C.17) Ḃ_p + Ḃ_d = μ while work remains.

The paper's workload function (C.19) ``m_p Z_p + (m_p+m_d) Z_d`` has its coefficients
swapped: only ``f = (m_p+m_d) Z_p + m_d Z_d`` (:func:`engine_workload`) satisfies the identity
``ḟ = λ(m_p+m_d) − Ḃ_p − Ḃ_d`` used (:func:`workload_identity_residual` proves it with
sympy). With it, work-conserving fluid paths drain linearly, ``f(t) = max(0, f(0) − δt)``
with ``δ = μ − λ(m_p+m_d)`` (Prop. 2(a)), and grow at ``−δ`` when ``δ < 0`` (Prop. 2(b)).

:func:`fluid_path` gives the policy-specific paths of ``(Z_p, Z_d)`` and
:func:`scaled_run` the fluid-scaled queue of a simulation started from ``N`` requests
(``Ẑ(t) = Z(Nt)/N``), which converges to the fluid path as ``N`` grows (App. C.3).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import sympy as sp

from ..errors import UnstableError, check_positive, renamed_keywords
from ..workload import RequestClass, Workload

__all__ = ["engine_workload", "printed_c19_workload", "workload_identity_residual",
           "drain_rate", "drain_time", "FluidPath", "fluid_phases", "fluid_path", "ScaledRun",
           "scaled_run", "fluid_convergence"]

FLUID_POLICIES = ("sarathi", "orca")


def engine_workload(Zp, Zd, mp, md):
    """``f = (m_p + m_d)·Z_p + m_d·Z_d``: the corrected total workload (C.19).

    A request in prefill still owes ``m_p + m_d`` tokens, one in decode ``m_d``. Numbers,
    numpy arrays or sympy expressions.

    Parameters
    ----------
    Zp : float, numpy.ndarray or sympy.Expr
        ``Z_p``: requests in prefill.
    Zd : float, numpy.ndarray or sympy.Expr
        ``Z_d``: requests in decode.
    mp : float or sympy.Expr
        ``m_p``: mean prompt tokens.
    md : float or sympy.Expr
        ``m_d``: mean output tokens.

    Returns
    -------
    float, numpy.ndarray or sympy.Expr
        ``f``, in tokens.
    """
    return (mp + md) * Zp + md * Zd


def printed_c19_workload(Zp, Zd, mp, md):
    """``m_p·Z_p + (m_p + m_d)·Z_d``: (C.19) as printed (kept to show it fails).

    Parameters
    ----------
    Zp : float, numpy.ndarray or sympy.Expr
        ``Z_p``: requests in prefill.
    Zd : float, numpy.ndarray or sympy.Expr
        ``Z_d``: requests in decode.
    mp : float or sympy.Expr
        ``m_p``: mean prompt tokens.
    md : float or sympy.Expr
        ``m_d``: mean output tokens.

    Returns
    -------
    float, numpy.ndarray or sympy.Expr
        The printed form, in tokens.
    """
    return mp * Zp + (mp + md) * Zd


def workload_identity_residual(form=engine_workload) -> sp.Expr:
    """``ḟ − [λ(m_p+m_d) − Ḃ_p − Ḃ_d]`` along the fluid equations, simplified with sympy.

    Zero for :func:`engine_workload`; a nonzero expression in ``λ, m_p, m_d, Ḃ_p, Ḃ_d`` for
    :func:`printed_c19_workload`. The symbols are ``t, lam, m_p, m_d`` and the functions
    ``B_p(t), B_d(t)``.

    Parameters
    ----------
    form : callable, default engine_workload
        ``form(Zp, Zd, mp, md)``, a candidate workload function.

    Returns
    -------
    sympy.Expr
        The residual, simplified (``0`` when the identity holds).
    """
    t, lam, mp, md, zp0, zd0 = sp.symbols("t lam m_p m_d Z_p0 Z_d0", positive=True)
    Bp, Bd = sp.Function("B_p")(t), sp.Function("B_d")(t)
    Fp, Fd = Bp / mp, Bd / md                                    # (C.13)
    Zp = zp0 + lam * t - Fp                                      # (C.10)
    Zd = zd0 + Fp - Fd                                           # (C.11)
    f = form(Zp, Zd, mp, md)
    target = lam * (mp + md) - sp.diff(Bp, t) - sp.diff(Bd, t)
    return sp.simplify(sp.expand(sp.diff(f, t) - target))


def _mu(b, t_b) -> float:
    check_positive("b", b)
    check_positive("t_b", t_b)
    return float(b) / float(t_b)


@renamed_keywords(b="token_budget")
def drain_rate(lam, mp, md, token_budget, t_b) -> float:
    """``δ = b/t_b − λ(m_p + m_d)``: how fast the workload of a work-conserving fluid path falls;
    negative above capacity.

    Parameters
    ----------
    lam : float
        ``λ``: the arrival rate (requests per time unit), ``>= 0``.
    mp : float
        ``m_p``: mean prompt tokens, ``> 0``.
    md : float
        ``m_d``: mean output tokens, ``> 0``.
    token_budget : float
        The token budget ``b``.
    t_b : float
        ``t_b``: the time of a full batch of ``b`` tokens.

    Returns
    -------
    float
        ``δ``, in tokens per time unit.

    Raises
    ------
    ValueError
        If a rate or size is negative, or ``b``, ``t_b``, ``m_p``, ``m_d`` not positive.
    """
    b = token_budget                 # the paper's b
    check_positive("lam", lam, allow_zero=True)
    check_positive("mp", mp)
    check_positive("md", md)
    return _mu(b, t_b) - float(lam) * (float(mp) + float(md))


@renamed_keywords(b="token_budget")
def drain_time(f0, lam, mp, md, token_budget, t_b) -> float:
    """``f(0)/δ``: when a work-conserving fluid path empties (Prop. 2(a), Dai–Harrison Lemma 8.5).

    Raises :class:`UnstableError` when ``λ(m_p+m_d) ≥ b/t_b`` (it never empties).

    Parameters
    ----------
    f0 : float
        ``f(0)``: the initial workload in tokens, ``>= 0``.
    lam : float
        ``λ``: the arrival rate (requests per time unit), ``>= 0``.
    mp : float
        ``m_p``: mean prompt tokens, ``> 0``.
    md : float
        ``m_d``: mean output tokens, ``> 0``.
    token_budget : float
        The token budget ``b``.
    t_b : float
        ``t_b``: the time of a full batch of ``b`` tokens.

    Returns
    -------
    float
        The time at which the path empties.

    Raises
    ------
    UnstableError
        If ``δ <= 0`` (a ``ValueError``).
    ValueError
        If a rate or size is negative, or ``b``, ``t_b``, ``m_p``, ``m_d`` not positive.
    """
    b = token_budget                 # the paper's b
    check_positive("f0", f0, allow_zero=True)
    delta = drain_rate(lam, mp, md, b, t_b)
    if delta <= 0:
        raise UnstableError("λ(m_p+m_d) against b/t_b", float(lam) * (mp + md), _mu(b, t_b))
    return float(f0) / delta


@dataclass(frozen=True)
class FluidPath:
    """A fluid path sampled at times ``t``: ``zp``, ``zd`` and the workload ``f``.

    ``breaks`` are the times where the path changes slope; ``empty_at`` when it empties
    (``inf`` if never).

    Attributes
    ----------
    policy : str
        ``"sarathi"`` or ``"orca"``.
    t : numpy.ndarray
        The sample times.
    zp : numpy.ndarray
        ``Z_p(t)``: requests in prefill.
    zd : numpy.ndarray
        ``Z_d(t)``: requests in decode.
    f : numpy.ndarray
        The workload ``f(t)`` (:func:`engine_workload`), in tokens.
    breaks : tuple of float
        The times where the path changes slope.
    empty_at : float
        When it empties (``inf`` if never).
    """

    policy: str
    t: np.ndarray
    zp: np.ndarray
    zd: np.ndarray
    f: np.ndarray
    breaks: tuple[float, ...]
    empty_at: float


def fluid_phases(policy, zp0, zd0, lam, mp, md, mu):
    """Piecewise-linear phases ``(duration, ż_p, ż_d)`` of the fluid paths, ``μ = b/t_b``.

    Plain arithmetic, so exact with ``fractions.Fraction`` inputs; the last phase may last
    ``math.inf`` (a path that never empties).

    Parameters
    ----------
    policy : str
        ``"sarathi"`` (decode priority) or ``"orca"`` (prefill priority).
    zp0, zd0 : float or fractions.Fraction
        ``Z_p(0)``, ``Z_d(0)``.
    lam : float or fractions.Fraction
        ``λ``, the arrival rate.
    mp, md : float or fractions.Fraction
        ``m_p``, ``m_d``: mean prompt and output tokens.
    mu : float or fractions.Fraction
        ``μ = b/t_b``: tokens served per time unit.

    Returns
    -------
    list of tuple
        ``(duration, ż_p, ż_d)`` per phase, in order.
    """
    phases = []
    if policy == "sarathi":          # decode priority: decoders take the whole budget
        if zd0 > 0:
            phases.append((zd0 * md / mu, lam, -mu / md))
            zp0 += lam * phases[-1][0]
        rate = lam - mu / (mp + md)  # prefill and decode share μ as m_p : m_d
        if zp0 > 0 or rate > 0:
            phases.append((zp0 / -rate if rate < 0 else math.inf, rate, 0))
    else:                            # orca: prefill priority
        rate = lam - mu / mp
        if zp0 > 0 and rate < 0:
            phases.append((zp0 / -rate, rate, mu / mp))
            zd0 += mu / mp * phases[-1][0]
        elif zp0 > 0 or rate > 0:
            return [(math.inf, rate, mu / mp)]
        rate_d = lam - (mu - lam * mp) / md
        if zd0 > 0 or rate_d > 0:
            phases.append((zd0 / -rate_d if rate_d < 0 else math.inf, 0, rate_d))
    return phases


@renamed_keywords(b="token_budget")
def fluid_path(policy, zp0, zd0, lam, mp, md, token_budget, t_b, t) -> FluidPath:
    """The fluid path of ``policy`` (``"sarathi"`` or ``"orca"``) from ``(Z_p(0), Z_d(0))``.

    Sarathi (decode priority): while ``Z_d > 0`` all of ``μ`` decodes (``Ż_p = λ``,
    ``Ż_d = −μ/m_d``); then ``Z_d ≡ 0`` and ``Ż_p = λ − μ/(m_p+m_d)``. Orca (prefill
    priority): while ``Z_p > 0`` all of ``μ`` prefills (``Ż_p = λ − μ/m_p``, ``Ż_d = μ/m_p``);
    then ``Ż_d = λ − (μ − λm_p)/m_d``. Both have ``ḟ = −δ`` until empty.

    Parameters
    ----------
    policy : str
        ``"sarathi"`` or ``"orca"``.
    zp0, zd0 : float
        ``Z_p(0)``, ``Z_d(0)``, ``>= 0``.
    lam : float
        ``λ``: the arrival rate (requests per time unit), ``>= 0``.
    mp : float
        ``m_p``: mean prompt tokens, ``> 0``.
    md : float
        ``m_d``: mean output tokens, ``> 0``.
    token_budget : float
        The token budget ``b``.
    t_b : float
        ``t_b``: the time of a full batch of ``b`` tokens.
    t : array_like
        The times at which to sample the path.

    Returns
    -------
    FluidPath
        The path at ``t``, its breakpoints and when it empties.

    Raises
    ------
    ValueError
        If ``policy`` is neither, or an initial state, rate or size is out of range.
    """
    b = token_budget                 # the paper's b
    if policy not in FLUID_POLICIES:
        raise ValueError(f"policy={policy!r}: must be one of {FLUID_POLICIES}")
    check_positive("zp0", zp0, allow_zero=True)
    check_positive("zd0", zd0, allow_zero=True)
    check_positive("lam", lam, allow_zero=True)
    mu = _mu(b, t_b)
    t = np.asarray(t, dtype=float)
    zp = np.full(t.shape, float(zp0))
    zd = np.full(t.shape, float(zd0))
    start, breaks = 0.0, []
    for duration, rp, rd in fluid_phases(policy, float(zp0), float(zd0), float(lam), float(mp),
                                    float(md), mu):
        inside = np.clip(t - start, 0.0, duration)
        zp += rp * inside
        zd += rd * inside
        start += duration
        breaks.append(start)
    zp, zd = np.maximum(zp, 0.0), np.maximum(zd, 0.0)
    empty = start if (breaks and math.isfinite(start)) or not breaks else math.inf
    return FluidPath(policy, t, zp, zd, engine_workload(zp, zd, mp, md), tuple(breaks), empty)


@dataclass(frozen=True)
class ScaledRun:
    """Fluid-scaled queue of a simulation from ``N`` initial requests: ``Ẑ(t) = Z(Nt)/N``.

    ``f`` is :func:`engine_workload` of ``(Ẑ_p, Ẑ_d)`` with the workload's mean sizes.

    Attributes
    ----------
    N : int
        The scale: requests waiting at time 0.
    t : numpy.ndarray
        The scaled times.
    zp, zd : numpy.ndarray
        ``Ẑ_p(t)``, ``Ẑ_d(t)``.
    f : numpy.ndarray
        ``f̂(t)``.
    result : Result
        The simulation.
    """

    N: int
    t: np.ndarray
    zp: np.ndarray
    zd: np.ndarray
    f: np.ndarray
    result: object


def _one_class(workload) -> tuple[RequestClass, Workload]:
    if isinstance(workload, RequestClass):
        workload = Workload([workload])
    if not isinstance(workload, Workload) or len(workload.classes) != 1:
        raise ValueError(f"workload={workload!r}: need a Workload with one RequestClass")
    return workload.classes[0], workload


def scaled_run(policy, workload, time_model, N: int, t, *, seed: int = 0) -> ScaledRun:
    """Simulate ``policy`` from ``N`` requests waiting at time 0 (sizes i.i.d. from the
    workload's class) plus the workload's arrivals, and return the queue
    in fluid scale on the scaled times ``t``.

    Parameters
    ----------
    policy : Policy
        The scheduler simulated.
    workload : Workload or RequestClass
        One request class: its arrivals and sizes.
    time_model : TimeModel
        The batch-time model.
    N : int
        The scale, ``> 0``.
    t : array_like
        The scaled times (the run lasts ``N · max(t)``).
    seed : int, default 0
        The seed.

    Returns
    -------
    ScaledRun
        The fluid-scaled queue and the run.

    Raises
    ------
    ValueError
        If ``N`` is not a positive integer or the workload has not exactly one class.
    """
    from ..engine import simulate

    check_positive("N", N, integer=True)
    cls, wl = _one_class(workload)
    t = np.asarray(t, dtype=float)
    horizon = float(N) * float(t.max())
    rng = np.random.default_rng([seed, 1])
    p0, d0 = cls.sample_lengths(rng, int(N))
    later = wl.sample(horizon=horizon, seed=seed)
    trace = Workload.from_arrays(np.concatenate([np.zeros(int(N)), later.arrival]),
                                 np.concatenate([p0, later.prompt]),
                                 np.concatenate([d0, later.output]))
    res = simulate(trace, policy, time_model, horizon=horizon, seed=seed, first_token="decode")
    req = res.requests
    arrive = np.sort(req["arrival"].to_numpy())
    done_p = np.sort(req["prefill_done"].fillna(np.inf).to_numpy())
    done = np.sort(req["finish"].fillna(np.inf).to_numpy())
    real = float(N) * t

    def count(times):
        return np.searchsorted(times, real, side="right")

    zp = (count(arrive) - count(done_p)) / N
    zd = (count(done_p) - count(done)) / N
    return ScaledRun(int(N), t, zp, zd, engine_workload(zp, zd, cls.mean_prompt,
                                                        cls.mean_output), res)


@renamed_keywords(b="token_budget")
def fluid_convergence(policy, fluid_policy, workload, time_model, token_budget, *,
                      scales=(10, 100, 1000), points: int = 200, seed: int = 0) -> pd.DataFrame:
    """Sup-norm distance between fluid-scaled runs and the fluid path, one row per ``N``.

    Starts from ``Ẑ_p(0) = 1, Ẑ_d(0) = 0``; times span ``[0, 1.5·f(0)/δ]``. Columns: ``N``,
    ``sup_f`` and ``sup_z`` (errors of ``f̂`` and of ``(Ẑ_p, Ẑ_d)``, relative to ``f(0)`` and
    1), ``drain_ratio``: ``f̂(0)/δ̂`` over ``f(0)/δ``, where ``δ̂`` is the least-squares slope of
    ``−f̂`` on ``[0.1, 0.7]·f(0)/δ`` (a prelimit queue never empties for good: it settles at
    ``O(1)`` requests, ``O(1/N)`` in fluid scale).

    Parameters
    ----------
    policy : Policy
        The scheduler simulated.
    fluid_policy : str
        Its fluid model, ``"sarathi"`` or ``"orca"``.
    workload : Workload or RequestClass
        One request class.
    time_model : TimeModel
        The batch-time model (with :meth:`~queuetheory.timing.TimeModel.token_time`).
    token_budget : int
        The token budget; ``t_b = time_model.token_time(b)``.
    scales : sequence of int, default (10, 100, 1000)
        The ``N`` compared.
    points : int, default 200
        The sample times.
    seed : int, default 0
        The seed.

    Returns
    -------
    pandas.DataFrame
        Indexed by ``N``: ``sup_f``, ``sup_z``, ``drain_ratio``.

    Raises
    ------
    UnstableError
        If the fluid path never empties (``δ <= 0``).
    """
    b = token_budget                 # the paper's b
    cls, _ = _one_class(workload)
    mp, md, lam = cls.mean_prompt, cls.mean_output, cls.rate
    t_b = float(time_model.token_time(int(b)))
    f0 = engine_workload(1.0, 0.0, mp, md)
    T = drain_time(f0, lam, mp, md, b, t_b)
    t = np.linspace(0.0, 1.5 * T, points)
    fluid = fluid_path(fluid_policy, 1.0, 0.0, lam, mp, md, b, t_b, t)
    fit = (t >= 0.1 * T) & (t <= 0.7 * T)
    rows = []
    for N in scales:
        run = scaled_run(policy, workload, time_model, N, t, seed=seed)
        slope = np.polyfit(t[fit], run.f[fit], 1)[0]
        rows.append({"N": int(N),
                     "sup_f": float(np.max(np.abs(run.f - fluid.f)) / f0),
                     "sup_z": float(max(np.max(np.abs(run.zp - fluid.zp)),
                                        np.max(np.abs(run.zd - fluid.zd)))),
                     "drain_ratio": float(run.f[0] / -slope / T) if slope < 0 else math.inf})
    return pd.DataFrame(rows).set_index("N")

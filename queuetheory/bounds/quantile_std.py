"""The smallest standard deviation a length distribution can have given some of its
quantiles — an exact linear programme over distributions on an integer support (HiGHS
through cvxpy). Used to test whether a published (median, P90, std) triple is consistent
(Table 1 of Bari, Hegde, de Veciana).

For a fixed centre ``μ`` the smallest ``E[(X − μ)²]`` over distributions meeting the
quantile constraints is a linear programme in the probabilities; since
``Var X = min_μ E[(X − μ)²]``, the smallest variance is the minimum over ``μ`` of the LP's
value (a bounded one-dimensional search, refined around the best point of a grid).
"""

from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass

import numpy as np
from scipy import optimize

__all__ = ["QuantileStd", "min_std_given_quantiles"]


@dataclass(frozen=True)
class QuantileStd:
    """The smallest std, the centre ``μ`` (the minimiser's mean) and its distribution
    (``support``, ``pmf``; only the atoms with positive mass).

    Attributes
    ----------
    std : float
        The smallest standard deviation, in the support's unit (tokens).
    mean : float
        ``μ``: the minimising distribution's mean.
    support : numpy.ndarray
        The atoms with positive mass.
    pmf : numpy.ndarray
        Their probabilities.
    """

    std: float
    mean: float
    support: np.ndarray
    pmf: np.ndarray


@contextlib.contextmanager
def _quiet():
    """Silence the solver's banner, which HiGHS writes to the C-level stdout."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def min_std_given_quantiles(quantiles: dict, support_max: int, *,
                            support_min: int = 1) -> QuantileStd:
    """Smallest std of a distribution on the integers ``support_min … support_max`` whose
    ``q``-quantile is ``v`` for every ``{q: v}`` in ``quantiles`` (``v`` is a
    ``q``-quantile when ``P(X ≤ v) ≥ q`` and ``P(X ≥ v) ≥ 1 − q``).

    Parameters
    ----------
    quantiles : dict of float to int
        ``{q: v}``: each ``q`` in ``(0, 1)``, each ``v`` in the support (e.g.
        ``{0.5: median, 0.9: p90}``).
    support_max : int
        The largest value of the support, in tokens.
    support_min : int, default 1
        The smallest value of the support, in tokens.

    Returns
    -------
    QuantileStd
        The smallest std, its centre and its distribution.

    Raises
    ------
    ValueError
        If ``quantiles`` is empty, or a ``q`` is outside ``(0, 1)`` or a ``v`` outside
        ``[support_min, support_max]``.
    RuntimeError
        If the LP solver does not report an optimum.
    """
    import cvxpy as cp

    if not quantiles:
        raise ValueError("quantiles: give at least one {q: value}")
    for q, v in quantiles.items():
        if not 0 < q < 1 or not support_min <= v <= support_max:
            raise ValueError(f"quantiles={quantiles!r}: need 0 < q < 1 and values within "
                             f"[support_min, support_max] = [{support_min}, {support_max}]")
    x = np.arange(int(support_min), int(support_max) + 1, dtype=float)
    p = cp.Variable(x.size)
    cost = cp.Parameter(x.size)
    cons = [p >= 0, cp.sum(p) == 1]
    for q, v in quantiles.items():
        cons += [cp.sum(p[np.flatnonzero(x <= v)]) >= q,
                 cp.sum(p[np.flatnonzero(x >= v)]) >= 1 - q]
    prob = cp.Problem(cp.Minimize(cost @ p), cons)

    def value(m: float) -> float:
        cost.value = (x - m) ** 2
        with _quiet():
            prob.solve(solver=cp.HIGHS, verbose=False)
        if prob.status != "optimal":
            raise RuntimeError(f"min_std_given_quantiles: LP status {prob.status}")
        return float(prob.value)

    lo, hi = min(quantiles.values()), max(quantiles.values())
    grid = np.linspace(lo, hi, 41) if hi > lo else np.array([lo])
    vals = [value(m) for m in grid]
    k = int(np.argmin(vals))
    a, b = grid[max(k - 1, 0)], grid[min(k + 1, grid.size - 1)]
    if b > a:
        res = optimize.minimize_scalar(value, bounds=(a, b), method="bounded",
                                       options={"xatol": 1e-6})
        m, var = float(res.x), float(res.fun)
    else:
        m, var = float(grid[k]), float(vals[k])
    value(m)
    pmf = np.clip(np.asarray(p.value, dtype=float), 0, None)
    keep = pmf > 1e-9
    return QuantileStd(float(np.sqrt(var)), float(np.dot(x, pmf)), x[keep], pmf[keep])

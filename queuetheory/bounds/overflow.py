"""The overflow probability of Proposition 4 of Ao, Luo, Simchi-Levi, Wang (App. A.3): how
likely FCFS at capacity ``C = M*`` is to overflow the KV cache within a few iterations of the
fluid equilibrium, exactly (sympy)."""

from __future__ import annotations

import numpy as np
import sympy as sp

from ..fluid.equilibrium import class_arrays, equilibrium

__all__ = ["prop4_overflow_probability"]


def prop4_overflow_probability(classes, d0: float, d1: float, capacity: int = 9,
                               horizon: int = 4, reach: int = 6):
    """Prop. 4's overflow chance (A.3), computed: start from the fluid equilibrium batch
    (one prompt per stage when ``ΔT* = 1``), let ``(X_1, X_2)`` prompts arrive in the next
    iteration and the equilibrium one prompt per type per iteration after it; FCFS admits
    all. The pairs whose memory stays ``≤ C`` for ``horizon`` iterations are safe; the
    answer is ``1 − Σ_safe P(X_1)P(X_2)`` with ``X_j ~ Poisson(λ_j)``, exact in sympy.

    Parameters
    ----------
    classes : Workload, RequestClass or sequence of RequestClass
        Fixed-length types: prompt ``l_j``, output ``l'_j``, rate ``λ_j`` (per iteration).
    d0 : float
        ``d0``: the fixed time per iteration (Ao et al., eq. 1), ``> 0``.
    d1 : float
        ``d1``: the time per KV token of the batch, ``>= 0``.
    capacity : int, default 9
        ``C``: the KV cache, in tokens (the default is the ``M* = 9`` of Prop. 4's instance).
    horizon : int, default 4
        The number of iterations watched.
    reach : int, default 6
        Each ``X_j`` is enumerated on ``0 … reach−1``; larger counts count as overflowing.

    Returns
    -------
    probability : sympy.Expr
        The overflow probability, exact.
    safe : list of tuple of int
        The arrival counts ``(X_1, X_2, …)`` that do not overflow.

    Raises
    ------
    UnstableError
        If ``d1·W >= 1`` (no fluid equilibrium).
    ValueError
        If ``d0 <= 0``, ``d1 < 0``, or ``classes`` is empty or holds a class without fixed
        lengths.
    """
    l, lo, lam = class_arrays(classes)
    per_stage = np.rint(equilibrium(classes, d0, d1).per_stage).astype(int)
    safe = []
    for x in np.ndindex(*(reach,) * len(lo)):
        # counts[j][k] = type-j prompts at stage k in the current batch
        counts = [np.full(o + 1, x_j) for o, x_j in zip(lo, per_stage, strict=True)]
        peak = 0
        for it in range(horizon):
            arrivals = x if it == 0 else per_stage
            counts = [np.concatenate([[a], c[:-1]]) for a, c in zip(arrivals, counts,
                                                                    strict=True)]
            peak = max(peak, sum(int(np.dot(c, lj + np.arange(c.size)))
                                 for c, lj in zip(counts, l, strict=True)))
        if peak <= capacity:
            safe.append(x)
    pmf = [[sp.exp(-sp.nsimplify(lj)) * sp.nsimplify(lj) ** k / sp.factorial(k)
            for k in range(reach)] for lj in lam]
    p = 1 - sum(sp.Mul(*(pmf[j][k] for j, k in enumerate(x))) for x in safe)
    return sp.simplify(p), safe

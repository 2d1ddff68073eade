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
    answer is ``1 − Σ_safe P(X_1)P(X_2)`` with ``X_j ~ Poisson(λ_j)``, exact in sympy."""
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

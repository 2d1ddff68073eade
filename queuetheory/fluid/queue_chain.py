"""WAIT's stage-0 queues (Ao, Luo, Simchi-Levi, Wang, Algorithm 1) as an exact embedded
Markov chain, simulated on many sample paths at once: the T-scaling of Theorem 1 needs
thousands of paths, which the engine would take far longer to run."""

from __future__ import annotations

import numpy as np

from .equilibrium import class_arrays

__all__ = ["wait_queue_chain"]


def wait_queue_chain(classes, thresholds, d0: float, d1: float, horizons, *, paths: int,
                     seed: int = 0, per_type: bool = False) -> np.ndarray:
    """WAIT's stage-0 queues as an exact embedded chain, many sample paths at once.

    Between decision epochs WAIT's state is, per type, the queue ``Q_j`` and the number
    ``b_j`` of type-``j`` batches so far: a type-``j`` batch holds cohorts of ``n_j`` in
    stages ``0..min(b_j, l'_j)``, so its memory is ``n_j Σ_{k ≤ min(b_j, l'_j)} (l_j + k)``
    and Poisson arrivals over the batch time follow. When no type is ready the GPU idles
    until the next arrival. Returns the queued tokens ``Σ_j Q_j (l_j + l'_j)`` at each
    horizon (rows) for every path (columns), or with ``per_type`` the queues ``Q_j``
    (horizons × paths × types). Used for the T-scaling of Theorem 1, which needs thousands
    of paths; the engine runs the same policy in the other checks.

    Parameters
    ----------
    classes : Workload, RequestClass or sequence of RequestClass
        Fixed-length types: prompt ``l_j``, output ``l'_j``, rate ``λ_j``.
    thresholds : array_like of int
        WAIT's ``n_j``.
    d0, d1 : float
        The batch time ``d0 + d1·M`` (Ao et al., eq. 1).
    horizons : array_like of float
        The times ``T`` to read, increasing.
    paths : int
        The number of sample paths.
    seed : int, default 0
        The seed.
    per_type : bool, default False
        Return the queues per type instead of the queued tokens.

    Returns
    -------
    numpy.ndarray
        ``(horizons, paths)`` queued tokens, or ``(horizons, paths, types)`` queues.
    """
    l, lo, lam = class_arrays(classes)
    n = np.asarray(thresholds, dtype=np.int64)
    rng = np.random.default_rng(seed)
    m = l.size
    cum = [n[j] * np.cumsum(l[j] + np.arange(lo[j] + 1)) for j in range(m)]
    Q = np.zeros((paths, m), dtype=np.int64)
    b = np.zeros((paths, m), dtype=np.int64)
    t = np.zeros(paths)
    Ts = np.asarray(horizons, dtype=float)
    out = np.full((Ts.size, paths, m) if per_type else (Ts.size, paths), np.nan)
    total = lam.sum()
    pick = np.cumsum(lam) / total
    while t.min() < Ts[-1]:
        ready = Q >= n
        busy = ready.any(axis=1)
        mem = np.zeros(paths)
        for j in range(m):
            mem += ready[:, j] * cum[j][np.minimum(b[:, j], lo[j])]
        dt = np.where(busy, d0 + d1 * mem, rng.exponential(1 / total, paths))
        U = Q if per_type else Q @ (l + lo)
        for i, T in enumerate(Ts):
            hit = (t < T) & (t + dt >= T)
            out[i, hit] = U[hit]
        arr = rng.poisson(np.where(busy, dt, 0.0)[:, None] * lam)
        kind = np.minimum(np.searchsorted(pick, rng.random(paths)), m - 1)
        arr[np.arange(paths), kind] += ~busy
        Q += arr - ready * n
        b += ready
        t += dt
    return out

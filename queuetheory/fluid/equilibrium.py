"""Fluid equilibrium of the KV-memory model (Ao, Luo, Simchi-Levi, Wang, §3).

A type-``j`` prompt has prompt length ``l_j``, output length ``l'_j`` and Poisson rate
``λ_j``. It passes through ``l'_j + 1`` iterations (stage 0 = prefill, stages 1..l'_j =
decode) and holds ``l_j + k`` KV tokens in stage ``k``. An iteration whose batch holds
``M`` KV tokens takes ``d0 + d1·M`` (eq. 1). With ``a_j = (l'_j+1)(l_j + l'_j/2)`` (the
memory-work of one prompt) and ``W = Σ_j λ_j a_j`` the fluid equilibrium is

* ``ΔT* = d0 / (1 − d1 W)``                    (eq. 7)
* ``M*  = d0 W / (1 − d1 W)``                  (eq. 6), the unique root of ``M = W (d0 + d1 M)``
* ``n_j* = ΔT* λ_j (l'_j+1)`` active prompts, ``x_j* = ΔT* λ_j`` per stage (eq. 5, A.2)
* ``Throughput* = Σ_j λ_j (l'_j+1)``            (eq. 8; ``Σ_j λ_j l'_j`` counting decode only)

Corrections to the printed paper : the stability condition is
``d1 W < 1`` (the paper prints ``d0``), and the multi-type balance is
``(d0 + d1 M*) λ_j = n_j*/(l'_j+1)``. The fluid is stable under capacity ``C`` iff
``W < C/(d0 + d1 C)``, i.e. ``d1 W < 1`` and ``C > M*`` (``M*/(d0 + d1 M*) = W``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import sympy as sp

from ..errors import UnstableError, check_positive
from ..workload import RequestClass, Workload

__all__ = ["Equilibrium", "equilibrium", "equilibrium_symbolic", "class_arrays", "memory_work"]


def class_arrays(classes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(l, l', λ)`` as arrays from fixed-length :class:`RequestClass` es (or a Workload)."""
    if isinstance(classes, Workload):
        classes = classes.classes
    if isinstance(classes, RequestClass):
        classes = [classes]
    classes = list(classes)
    if not classes or not all(isinstance(c, RequestClass) for c in classes):
        raise ValueError("classes: expected a non-empty sequence of RequestClass")
    for j, c in enumerate(classes):
        if not c.fixed:
            raise ValueError(f"classes[{j}]: the fluid model needs fixed prompt and output "
                             "lengths (ints); got a distribution")
    l = np.array([int(c.prompt) for c in classes], dtype=np.int64)
    lo = np.array([int(c.output) for c in classes], dtype=np.int64)
    lam = np.array([float(c.rate) for c in classes])
    return l, lo, lam


def memory_work(prompt, output):
    """``a_j = Σ_{k=0}^{l'_j} (l_j + k) = (l'_j+1)(l_j + l'_j/2)``: KV-token·iterations of one
    prompt over its life.

    Parameters
    ----------
    prompt : int or array_like
        ``l_j``: prompt tokens.
    output : int or array_like
        ``l'_j``: output tokens.

    Returns
    -------
    numpy.ndarray
        ``a_j``, in KV tokens × iterations.
    """
    prompt, output = np.asarray(prompt), np.asarray(output)
    return (output + 1) * (prompt + output / 2)


@dataclass(frozen=True)
class Equilibrium:
    """The fluid equilibrium of eqs. (5)–(8) of Ao et al.

    Attributes
    ----------
    iteration_time : float
        ``ΔT*``: time per batch (eq. 7).
    memory : float
        ``M*``: KV tokens in a batch (eq. 6).
    active : numpy.ndarray
        ``n_j*``: type-``j`` prompts in a batch (eq. 5).
    per_stage : numpy.ndarray
        ``x_j* = n_j*/(l'_j+1)``: type-``j`` prompts in each stage.
    throughput : float
        ``Σ λ_j (l'_j+1)``: tokens per time counting the prefill iteration (eq. 8).
    decode_throughput : float
        ``Σ λ_j l'_j``: decode tokens only.
    load : float
        ``d1·W``, which must be ``< 1``.
    work_rate : float
        ``W = Σ λ_j a_j``: memory-work per unit time.
    """

    iteration_time: float
    memory: float
    active: np.ndarray
    per_stage: np.ndarray
    throughput: float
    decode_throughput: float
    load: float
    work_rate: float

    def stable_under(self, capacity: float) -> bool:
        """Fluid stability under KV capacity ``C``: ``C > M*``.

        Parameters
        ----------
        capacity : float
            ``C``: the KV capacity in tokens.

        Returns
        -------
        bool
            Whether ``C > M*``.
        """
        return float(capacity) > self.memory


def equilibrium(classes, d0: float, d1: float) -> Equilibrium:
    """The fluid equilibrium (eqs. 5–8) of fixed-length ``classes`` under ``τ = d0 + d1·M``.

    Raises :class:`~queuetheory.errors.UnstableError` when ``d1·W ≥ 1`` (no finite
    equilibrium: the memory-work arrives faster than ``1/d1``, Prop. 1 with ``d1``).

    Parameters
    ----------
    classes : Workload, RequestClass or sequence of RequestClass
        Fixed-length types: prompt ``l_j``, output ``l'_j``, rate ``λ_j``.
    d0 : float
        ``d0``: the fixed time per iteration (eq. 1), ``> 0``.
    d1 : float
        ``d1``: the time per KV token of the batch, ``>= 0``.

    Returns
    -------
    Equilibrium
        ``ΔT*``, ``M*``, ``n_j*``, ``x_j*``, the throughputs and the load.

    Raises
    ------
    UnstableError
        If ``d1·W >= 1``.
    ValueError
        If ``d0 <= 0``, ``d1 < 0``, or ``classes`` is empty or holds a class without fixed
        lengths.
    """
    check_positive("d0", d0)
    check_positive("d1", d1, allow_zero=True)
    l, lo, lam = class_arrays(classes)
    W = float(np.dot(lam, memory_work(l, lo)))
    load = d1 * W
    if load >= 1:
        raise UnstableError("d1·W (memory-work load, eq. 6–7)", load, 1.0)
    dT = d0 / (1 - load)
    per_stage = dT * lam
    return Equilibrium(
        iteration_time=dT,
        memory=d0 * W / (1 - load),
        active=per_stage * (lo + 1),
        per_stage=per_stage,
        throughput=float(np.dot(lam, lo + 1)),
        decode_throughput=float(np.dot(lam, lo)),
        load=load,
        work_rate=W,
    )


def equilibrium_symbolic(m: int) -> dict:
    """Eqs. (5)–(8) for ``m`` types as sympy expressions.

    Returns a dict with the symbols (``lam``, ``l``, ``lp`` tuples, ``d0``, ``d1``) and the
    expressions ``W``, ``iteration_time``, ``memory``, ``active``, ``per_stage``,
    ``throughput``, ``decode_throughput`` and ``load``. The expressions are derived, not
    typed: ``M*`` is solved from the balance ``(d0 + d1 M) λ_j = n_j/(l'_j+1)`` and the
    memory identity (5), so a test can check them against the closed forms (6)–(7).

    Parameters
    ----------
    m : int
        The number of types, ``> 0``.

    Returns
    -------
    dict
        The symbols and the expressions listed above.
    """
    check_positive("m", m, integer=True)
    m = int(m)
    lam = sp.symbols(f"lambda_1:{m + 1}", positive=True)
    l = sp.symbols(f"l_1:{m + 1}", positive=True)
    lp = sp.symbols(f"lp_1:{m + 1}", positive=True)
    d0, d1 = sp.symbols("d0 d1", positive=True)
    M = sp.Symbol("M", positive=True)
    # balance: n_j = (d0 + d1 M) λ_j (l'_j + 1); memory (5): M = Σ n_j (l_j + l'_j/2)
    n = [(d0 + d1 * M) * lam[j] * (lp[j] + 1) for j in range(m)]
    memory = sp.solve(sp.Eq(M, sum(n[j] * (l[j] + lp[j] / 2) for j in range(m))), M)[0]
    dT = sp.simplify(d0 + d1 * memory)
    active = tuple(sp.simplify(nj.subs(M, memory)) for nj in n)
    W = sum(lam[j] * (lp[j] + 1) * (l[j] + lp[j] / 2) for j in range(m))
    return {
        "lam": lam, "l": l, "lp": lp, "d0": d0, "d1": d1,
        "W": W,
        "iteration_time": dT,
        "memory": sp.simplify(memory),
        "active": active,
        "per_stage": tuple(sp.simplify(a / (lp[j] + 1)) for j, a in enumerate(active)),
        "throughput": sp.simplify(sum(a / dT for a in active)),
        "decode_throughput": sum(lam[j] * lp[j] for j in range(m)),
        "load": d1 * W,
    }

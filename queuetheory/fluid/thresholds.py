"""WAIT thresholds: condition (9), the memory ``M^π`` and threshold design (Ao et al. §4).

WAIT with thresholds ``n_j`` (type-``j`` prompts per stage) runs, whenever a type is in a
batch, exactly ``n_j`` prompts in each of its ``l'_j + 1`` stages. Its batch memory is at
most ``M^π = Σ_j n_j a_j`` with ``a_j = (l'_j+1)(l_j + l'_j/2)``, and condition (9) reads

    ``ΔT(n) := d0 + d1 M^π ≤ n_j / λ_j``  for every type ``j``.

Equality for some ``j`` is the *critical* case of Theorem 1 (gap ``O(T^{-1/2})``, latency
``O(T^{1/2})``); strict inequality for all ``j`` gives gap ``O(1/T)`` and latency ``O(1)``.

Threshold design. The feasible set ``{n ≥ 0 : d0 + d1 a·n ≤ (1−ε) n_j/λ_j}``
is a polyhedron; ``min a·n`` over it is ``n = c λ`` with ``c = d0/(1 − ε − d1 W)``, i.e.
``ΔT* λ`` and ``M^π = M*`` at ``ε = 0``. :func:`threshold_problem` states it as a cvxpy
problem (integer or relaxed); :func:`wait_thresholds` solves it with HiGHS. With a batch
limit ``B`` the paper's §6 rule ``n_j = Bρ_j/(l'_j+1)`` (``rule="paper"``) and the
fluid-proportional rule ``n_j = Bλ_j/Σ_k λ_k(l'_k+1)`` (``rule="fluid"``, the authors'
code) fill a batch of ``B`` prompts; both are floored and kept ``≥ 1``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .._quiet import solve_highs
from ..errors import UnstableError, check_positive
from .equilibrium import class_arrays, memory_work

if TYPE_CHECKING:
    import cvxpy as cp

__all__ = ["WaitCondition", "wait_condition", "wait_memory", "wait_thresholds",
           "threshold_problem", "check_thresholds"]

_TOL = 1e-9

#: Largest threshold (prompts per stage) the MILP is asked for; beyond it HiGHS's doubles no
#: longer hold the integers exactly.
MAX_THRESHOLD = 1e9


def check_thresholds(n, m: int | None = None, name: str = "thresholds", *,
                     integer: bool = True) -> np.ndarray:
    """Thresholds as an array; ``ValueError`` unless they are integers ``>= 1`` (or, with
    ``integer=False``, real numbers ``> 0``: fluid thresholds for the formulas)."""
    arr = np.asarray(n)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name}={n!r}: must be a non-empty 1-d sequence")
    if not np.issubdtype(arr.dtype, np.number) or not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}={n!r}: must be finite numbers")
    if m is not None and arr.size != m:
        raise ValueError(f"{name}={n!r}: need one threshold per type ({m}), got {arr.size}")
    if not integer:
        if np.any(arr <= 0):
            raise ValueError(f"{name}={n!r}: every threshold must be > 0")
        return arr.astype(float)
    if np.any(arr != np.round(arr)):
        raise ValueError(f"{name}={n!r}: must be integers (prompts per stage)")
    if np.any(arr < 1):
        raise ValueError(f"{name}={n!r}: every threshold must be >= 1")
    return arr.astype(np.int64)


def wait_memory(n, classes) -> float:
    """``M^π = Σ_j n_j (l'_j+1)(l_j + l'_j/2)``: WAIT's largest batch memory (eq. 9) and,
    paused cohorts included, its largest total KV memory.

    Parameters
    ----------
    n : array_like of int
        ``n_j``: thresholds, integers ``>= 1``, one per type.
    classes : Workload, RequestClass or sequence of RequestClass
        Fixed-length types: prompt ``l_j``, output ``l'_j``, rate ``λ_j``.

    Returns
    -------
    float
        ``M^π``, in KV tokens.

    Raises
    ------
    ValueError
        If the thresholds are not one integer ``>= 1`` per type.
    """
    l, lo, _ = class_arrays(classes)
    n = check_thresholds(n, l.size)
    return float(np.dot(n, memory_work(l, lo)))


class ConditionStatus:
    """``holds`` and ``strict`` read off a ``status`` tuple of "strict" / "critical" /
    "violated" entries (conditions (9), (10) and (14))."""

    status: tuple[str, ...]

    @property
    def holds(self) -> bool:
        return "violated" not in self.status

    @property
    def strict(self) -> bool:
        return all(s == "strict" for s in self.status)


@dataclass(frozen=True)
class WaitCondition(ConditionStatus):
    """Condition (9) of Ao et al. for given thresholds.

    ``holds`` and ``strict`` say whether every type meets it, and strictly.

    Attributes
    ----------
    thresholds : numpy.ndarray
        ``n_j``: prompts per stage.
    iteration_time : float
        ``ΔT(n) = d0 + d1 M^π``.
    memory : float
        ``M^π``.
    slack : numpy.ndarray
        ``n_j/λ_j − ΔT(n)`` per type (``>= 0`` required).
    status : tuple of str
        Per type, ``"strict"``, ``"critical"`` (equality) or ``"violated"``.
    """

    thresholds: np.ndarray
    iteration_time: float
    memory: float
    slack: np.ndarray
    status: tuple[str, ...]

    @property
    def critical(self) -> bool:
        """Whether (9) holds with equality for some type (Theorem 1's critical case)."""
        return self.holds and not self.strict


def wait_condition(n, classes, d0: float, d1: float, *, require: str | None = None
                   ) -> WaitCondition:
    """Evaluate (9) for thresholds ``n``. ``require="holds"`` or ``"strict"`` raises a
    ``ValueError`` naming the failing types instead of returning a violated condition.

    Parameters
    ----------
    n : array_like of int
        ``n_j``: thresholds, integers ``>= 1``, one per type.
    classes : Workload, RequestClass or sequence of RequestClass
        Fixed-length types: prompt ``l_j``, output ``l'_j``, rate ``λ_j``.
    d0 : float
        ``d0``: the fixed time per iteration (Ao et al., eq. 1).
    d1 : float
        ``d1``: the time per KV token of the batch.
    require : {None, "holds", "strict"}, optional
        Raise unless (9) holds (strictly).

    Returns
    -------
    WaitCondition
        ``ΔT(n)``, ``M^π``, the slacks and the status per type.

    Raises
    ------
    ValueError
        If ``require`` is not one of those, ``d0`` or ``d1`` is negative, the thresholds are
        malformed, or (with ``require``) the condition fails, naming the failing types.
    """
    check_positive("d0", d0, allow_zero=True)
    check_positive("d1", d1, allow_zero=True)
    if require not in (None, "holds", "strict"):
        raise ValueError(f"require={require!r}: must be None, 'holds' or 'strict'")
    l, lo, lam = class_arrays(classes)
    n = check_thresholds(n, l.size)
    M = float(np.dot(n, memory_work(l, lo)))
    dT = d0 + d1 * M
    with np.errstate(divide="ignore", over="ignore"):     # a tiny λ_j leaves endless room
        room = np.where(lam > 0, n / np.where(lam > 0, lam, 1), np.inf)
    slack = room - dT
    tol = _TOL * max(1.0, dT)
    status = tuple("strict" if s > tol else "critical" if s >= -tol else "violated"
                   for s in slack)
    out = WaitCondition(n, dT, M, slack, status)
    bad = [j for j, s in enumerate(status)
           if s == "violated" or (require == "strict" and s == "critical")]
    if require is not None and bad:
        rule = "<" if require == "strict" else "<="
        raise ValueError(f"thresholds={n.tolist()}: condition (9) d0 + d1·M^π {rule} n_j/λ_j "
                         f"fails for types {bad} (ΔT = {dT:.6g}, n_j/λ_j = "
                         f"{[float(room[j]) for j in bad]})")
    return out


def threshold_problem(classes, d0: float, d1: float, *, margin: float = 0.0,
                      integer: bool = True) -> tuple[cp.Problem, cp.Variable]:
    """The threshold design of condition (9) as a cvxpy problem (data, not yet solved):
    ``min a·n`` s.t. ``d0 + d1 a·n ≤ (1 − margin) n_j/λ_j``, ``n ≥ 1`` (integer if asked).

    Parameters
    ----------
    classes : Workload, RequestClass or sequence of RequestClass
        Fixed-length types: prompt ``l_j``, output ``l'_j``, rate ``λ_j``.
    d0 : float
        ``d0``: the fixed time per iteration (Ao et al., eq. 1).
    d1 : float
        ``d1``: the time per KV token of the batch.
    margin : float, default 0.0
        ``ε`` in ``[0, 1)``: the slack asked of (9).
    integer : bool, default True
        Integer thresholds (a MILP), else the relaxation.

    Returns
    -------
    tuple of (cvxpy.Problem, cvxpy.Variable)
        The problem and its variable ``n``.

    Raises
    ------
    ValueError
        If ``margin`` is not in ``[0, 1)``.
    """
    if not 0 <= margin < 1:
        raise ValueError(f"margin={margin}: must satisfy 0 <= margin < 1")
    import cvxpy as cp  # 0.5 s to import: only when a program is built

    l, lo, lam = class_arrays(classes)
    a = memory_work(l, lo)
    n = cp.Variable(l.size, integer=integer)
    rows = lam > 0
    cons = [n >= 1]
    if rows.any():
        cons.append(cp.multiply(lam[rows], d0 + d1 * (a @ n)) <= (1 - margin) * n[rows])
    return cp.Problem(cp.Minimize(a @ n), cons), n


def wait_thresholds(classes, d0: float, d1: float, *, margin: float = 0.0, rule: str = "fluid",
                    batch_limit: int | None = None) -> np.ndarray:
    """Integer WAIT thresholds ``n_j`` (prompts per stage).

    ``rule="fluid"`` without ``batch_limit``: the smallest-memory integer thresholds meeting
    (9) with ``margin`` (``margin > 0`` makes it strict), solved as a MILP with HiGHS.
    With ``batch_limit=B``: ``rule="fluid"`` gives ``max(1, ⌊Bλ_j/Σλ_k(l'_k+1)⌋)`` and
    ``rule="paper"`` the §6 rule ``max(1, ⌊Bρ_j/(l'_j+1)⌋)``, ``ρ_j = λ_j/Σλ``.
    Raises :class:`UnstableError` when ``d1·W ≥ 1 − margin`` (no thresholds exist).

    Parameters
    ----------
    classes : Workload, RequestClass or sequence of RequestClass
        Fixed-length types: prompt ``l_j``, output ``l'_j``, rate ``λ_j``.
    d0 : float
        ``d0``: the fixed time per iteration (Ao et al., eq. 1).
    d1 : float
        ``d1``: the time per KV token of the batch.
    margin : float, default 0.0
        ``ε`` in ``[0, 1)``: the slack asked of (9) (MILP only).
    rule : {"fluid", "paper"}, default "fluid"
        The rule (``"paper"`` needs ``batch_limit``).
    batch_limit : int, optional
        ``B``: prompts in a batch, for the proportional rules.

    Returns
    -------
    numpy.ndarray
        ``n_j``, integers ``>= 1``.

    Raises
    ------
    UnstableError
        If ``d1·W >= 1 − margin``.
    ValueError
        If ``rule`` is unknown, ``"paper"`` lacks ``batch_limit``, ``margin`` is out of range,
        ``d0``/``d1``/``batch_limit`` are out of range, or the thresholds would exceed
        ``MAX_THRESHOLD``.
    SolverError
        If HiGHS finds no optimum.
    """
    if rule not in ("fluid", "paper"):
        raise ValueError(f"rule={rule!r}: must be 'fluid' or 'paper'")
    l, lo, lam = class_arrays(classes)
    if batch_limit is not None:
        check_positive("batch_limit", batch_limit, integer=True)
        if rule == "paper":
            raw = batch_limit * lam / lam.sum() / (lo + 1)
        else:
            raw = batch_limit * lam / float(np.dot(lam, lo + 1))
        return np.maximum(1, np.floor(raw + 1e-9)).astype(np.int64)
    if rule == "paper":
        raise ValueError("rule='paper' needs batch_limit (the paper's B)")
    check_positive("d0", d0)
    check_positive("d1", d1, allow_zero=True)
    if not 0 <= margin < 1:
        raise ValueError(f"margin={margin}: must satisfy 0 <= margin < 1")
    load = d1 * float(np.dot(lam, memory_work(l, lo)))
    if load >= 1 - margin:
        raise UnstableError(f"d1·W with margin {margin} (condition 9 needs d1·W < 1 − margin)",
                            load, 1 - margin)
    fluid = d0 * lam / (1 - margin - load)      # the relaxed optimum c·λ (module docstring)
    if fluid.max() > MAX_THRESHOLD:
        raise ValueError(f"d0={d0}, d1={d1}: the thresholds would be about {fluid.max():.3g} "
                         f"prompts per stage (d0·λ_j/(1 − margin − d1·W)), more than "
                         f"MAX_THRESHOLD = {MAX_THRESHOLD:.0e}; rescale the time unit or rates")
    prob, n = threshold_problem(classes, d0, d1, margin=margin, integer=True)
    solve_highs(prob, "threshold MILP")
    return np.rint(n.value).astype(np.int64)

"""Work-conservation as a checkable property of a batch (Li, Dai, Peng §2.3, eq. 2.6; App. B).

A state of Li, Dai, Peng's DTMC (§2.2) is the ordered list of ``(p'_i, d'_i)``: remaining
prefill and decode tokens of every request in the system. The largest feasible token load
under rules (2.5a–d) is ``avail(x) = Σ_i p'_i + #{i : p'_i = 0}`` (spec §1.2).

* **weak** (the paper's Definition 2.6, §2.3): ``b' = b`` whenever ``avail(x) ≥ b``;
* **strict** (what the Lyapunov proof of App. B uses): ``b' = min(b, avail(x))``, so
  that when the budget is not binding every request finishes its prefill or gets a decode token.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..engine.batch import check_batch
from ..engine.state import RequestTable, State
from ..errors import check_positive, renamed_keywords
from ..workload import Trace

__all__ = ["dtmc_state", "available_tokens", "is_work_conserving", "WorkConservation",
           "work_conservation_witness"]


def dtmc_state(prefill_left, decode_left, *, time: float = 0.0) -> State:
    """A :class:`~queuetheory.engine.State` holding requests with ``p'_i`` prefill tokens and
    ``d'_i ≥ 1`` decode tokens left, in arrival (FCFS) order (Li, Dai, Peng, state 2.4 with R = 0).

    A request with ``p'_i = 0`` is in decode: its prompt (one token) is already prefilled.

    Parameters
    ----------
    prefill_left : array_like of int
        ``p'_i >= 0``: the prefill tokens each request has left.
    decode_left : array_like of int
        ``d'_i >= 1``: the decode tokens each request has left, one per ``prefill_left``.
    time : float, default 0.0
        The state's clock.

    Returns
    -------
    State
        The engine state, requests in the given order.

    Raises
    ------
    ValueError
        If the two arrays differ in length, a ``p'_i`` is negative or a ``d'_i`` is below 1.
    """
    p = np.asarray(prefill_left, dtype=np.int64).reshape(-1)
    d = np.asarray(decode_left, dtype=np.int64).reshape(-1)
    if p.shape != d.shape:
        raise ValueError(f"prefill_left has {p.size} entries but decode_left has {d.size}")
    if p.size and p.min() < 0:
        raise ValueError(f"prefill_left={p.tolist()}: must be >= 0")
    if d.size and d.min() < 1:
        raise ValueError(f"decode_left={d.tolist()}: every request owes >= 1 decode token")
    n = p.size
    prompt = np.maximum(p, 1)
    zeros = np.zeros(n, dtype=np.int64)
    table = RequestTable(emit_first=False, capacity=max(n, 16))
    table.append(Trace(np.arange(n, dtype=float) * 1e-9, prompt, d, zeros, d, d, zeros))
    table.set_progress(np.arange(n), np.where(p == 0, 1, 0))
    return State(table, np.arange(n), time, None, None)


def available_tokens(state) -> int:
    """``avail(x) = Σ_i p'_i + #{i : p'_i = 0}``: the largest load rules (2.5a–d) allow.

    Parameters
    ----------
    state : State
        The engine state (e.g. from :func:`dtmc_state`).

    Returns
    -------
    int
        ``avail(x)``, in tokens.
    """
    rem = state.remaining_prefill
    return int(rem.sum() + np.count_nonzero(rem == 0))


@renamed_keywords(b="token_budget")
def is_work_conserving(state, batch, token_budget: int, strict: bool = True) -> bool:
    """Whether ``batch`` is work-conserving in ``state`` for token budget ``b``.

    ``strict=False`` checks the paper's (2.6): a full batch whenever ``avail(x) ≥ b``.
    ``strict=True`` checks ``b' = min(b, avail(x))`` (App. B). The batch must be
    feasible (rules 2.5a–d and the budget); an infeasible one raises
    :class:`~queuetheory.errors.InfeasibleBatchError`.

    Parameters
    ----------
    state : State
        The engine state the batch is scheduled in.
    batch : Batch
        The policy's batch.
    token_budget : int
        ``b``: the token budget, a positive integer.
    strict : bool, default True
        Check ``b' = min(b, avail(x))`` (App. B) rather than the paper's (2.6).

    Returns
    -------
    bool
        Whether the batch is work-conserving.

    Raises
    ------
    ValueError
        If ``b`` is not a positive integer.
    InfeasibleBatchError
        If the batch breaks rules 2.5a–d or the budget.
    """
    b = token_budget                 # the paper's b
    check_positive("b", b, integer=True)
    check_batch(state, batch, policy="is_work_conserving", iteration=0, token_budget=int(b),
                memory=None, emit_first=False)
    avail = available_tokens(state)
    load = batch.token_load
    if strict:
        return load == min(int(b), avail)
    return avail < b or load == b


@dataclass(frozen=True)
class WorkConservation:
    """Outcome of a random search for a state where ``policy`` is not work-conserving.

    ``witness`` is ``(p', d')`` of the smallest violating state found (after shrinking) or
    ``None``; ``load`` and ``avail`` are its batch's token load and ``avail(x)``.

    Attributes
    ----------
    policy : str
        The policy's ``repr``.
    strict : bool
        Whether the strict definition was checked.
    states_tried : int
        The number of random states tried.
    witness : tuple of (tuple of int, tuple of int) or None
        ``(p', d')`` of the shrunk violating state, or None if none was found.
    load : int or None
        The witness's batch token load ``b'``.
    avail : int or None
        The witness's ``avail(x)``.
    """

    policy: str
    strict: bool
    states_tried: int
    witness: tuple[tuple[int, ...], tuple[int, ...]] | None
    load: int | None
    avail: int | None

    @property
    def work_conserving(self) -> bool:
        """Whether no violating state was found."""
        return self.witness is None


def _violates(policy, p, d, b, strict) -> bool:
    state = dtmc_state(p, d)
    policy.reset(0)
    return not is_work_conserving(state, policy.schedule(state), b, strict)


def _shrink(policy, p, d, b, strict):
    """Greedy shrinking: drop requests, then lower each count, while the violation persists."""
    p, d = list(p), list(d)

    def bad():
        return _violates(policy, p, d, b, strict)

    changed = True
    while changed:
        changed = False
        for i in reversed(range(len(p))):
            if len(p) > 1:
                kept = p.pop(i), d.pop(i)
                if bad():
                    changed = True
                    continue
                p.insert(i, kept[0])
                d.insert(i, kept[1])
        for arr, low in ((p, 0), (d, 1)):
            for i in range(len(arr)):
                old = arr[i]
                for v in sorted({low, (low + old) // 2, old - 1}):
                    if low <= v < old:
                        arr[i] = v
                        if bad():
                            changed = True
                            break
                        arr[i] = old
    return p, d


@renamed_keywords(b="token_budget")
def work_conservation_witness(policy, token_budget: int, *, strict: bool = True,
                              n_states: int = 400, max_requests: int | None = None,
                              max_prompt: int | None = None, max_decode: int = 8,
                              seed: int = 0) -> WorkConservation:
    """Search random states for one where ``policy`` breaks work-conservation; shrink it.

    States hold up to ``max_requests`` (default ``2b``) requests, each in prefill with
    probability 1/2 (``p'`` uniform on ``1..max_prompt``, default ``b``) and ``d'`` uniform
    on ``1..max_decode``. The first violating state is shrunk greedily to a small witness.

    Parameters
    ----------
    policy : Policy
        The scheduling policy (a :mod:`queuetheory.policies` object).
    token_budget : int
        ``b``: the token budget, a positive integer.
    strict : bool, default True
        Check the strict definition (App. B) rather than the paper's (2.6).
    n_states : int, default 400
        The number of random states tried.
    max_requests : int, optional
        The most requests per state; default ``2b``.
    max_prompt : int, optional
        The largest ``p'``, in tokens; default ``b``.
    max_decode : int, default 8
        The largest ``d'``, in tokens.
    seed : int, default 0
        The random seed.

    Returns
    -------
    WorkConservation
        The number of states tried and the shrunk witness, if any.

    Raises
    ------
    ValueError
        If ``b`` or ``n_states`` is not a positive integer.
    InfeasibleBatchError
        If the policy schedules an infeasible batch.
    """
    b = token_budget                 # the paper's b
    check_positive("b", b, integer=True)
    check_positive("n_states", n_states, integer=True)
    max_requests = int(max_requests or 2 * b)
    max_prompt = int(max_prompt or b)
    rng = np.random.default_rng(seed)
    for k in range(int(n_states)):
        n = int(rng.integers(1, max_requests + 1))
        p = np.where(rng.random(n) < 0.5, 0, rng.integers(1, max_prompt + 1, n))
        d = rng.integers(1, max_decode + 1, n)
        if _violates(policy, p, d, b, strict):
            p, d = _shrink(policy, p.tolist(), d.tolist(), b, strict)
            state = dtmc_state(p, d)
            policy.reset(0)
            load = policy.schedule(state).token_load
            return WorkConservation(repr(policy), strict, k + 1, (tuple(p), tuple(d)), load,
                                    available_tokens(state))
    return WorkConservation(repr(policy), strict, int(n_states), None, None, None)

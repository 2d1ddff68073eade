"""The round model of Jaillet et al. and Chen, Ye, Zhou, apart from any scheduler.

One batch per round (``qt.UnitTime()``); a request started in round ``p`` runs ``d_i``
consecutive rounds and holds ``s_i + k`` KV tokens in its ``k``-th one (``k = 0`` is the
prefill round); capacity ``M``. Here live what both the schedulers
(:mod:`queuetheory.policies.kvcache`, :mod:`queuetheory.policies.robust`) and the bounds
(:mod:`queuetheory.bounds`) use: the timing conventions, the future-peak KV check
(Jaillet et al., eqs. (1)–(2)) and the MC-SF reference schedule. It sits above the engine
only for the engine's first-token convention (:mod:`queuetheory.engine.conventions`), which
its two timing conventions are.

Timing conventions — the one place where they are mapped
--------------------------------------------------------
=========  ====================================  ================  ==========================
name       paper                                 duration ``d_i``  engine
=========  ====================================  ================  ==========================
``"ip"``   App. B.1 (hindsight IP), default      ``o_i``           ``first_token="prefill"``
``"eq1"``  Eq. (1), Section 3 (the token phase)  ``o_i + 1``       ``first_token="decode"``
=========  ====================================  ================  ==========================

With ``"ip"`` the prefill round emits the first token, memory runs ``s_i … s_i + o_i − 1``
and the request completes at ``p_i + o_i``; with ``"eq1"`` memory peaks at ``s_i + o_i``
(Section 3, the token phase) and it completes at ``p_i + o_i + 1``. :data:`CONVENTIONS` maps
the name to the engine's ``first_token`` and :func:`durations` to ``d_i``; the policies read
the engine's convention from ``State.emit_first``, so the same policy object serves both.

The future-peak check
---------------------
A job that is in memory at round ``t`` with ``m`` tokens grows by one token per round until
its last round ``e``, then frees everything. The total of a fixed set of jobs rises linearly
between completions and drops at them, so checking the completion rounds (checkpoints) is
enough (Jaillet et al., §4) — the candidate's own completion included (spec §2.1's fix).
"""

from __future__ import annotations

import warnings

import numpy as np

from .engine.conventions import check_first_token
from .errors import check_positive, renamed_keywords

__all__ = ["CONVENTIONS", "first_token_of", "takes_first_token", "durations", "FuturePeak",
           "mcsf_schedule", "check_on_fail", "check_max_starts", "admit"]

CONVENTIONS = {"ip": "prefill", "eq1": "decode"}
"""Timing convention name → the engine's ``first_token`` (see the module docstring)."""

_ORDERS = ("output", "arrival")


def first_token_of(first_token) -> str:
    """The first-token convention, checked: ``"prefill"`` or ``"decode"``.

    Jaillet et al.'s names of the same two conventions, ``"ip"`` and ``"eq1"``
    (:data:`CONVENTIONS`), keep working for one release with a ``DeprecationWarning``.

    Parameters
    ----------
    first_token : {"prefill", "decode"}
        The convention (see the module docstring).

    Returns
    -------
    str
        ``"prefill"`` or ``"decode"``.

    Raises
    ------
    ValueError
        If ``first_token`` names neither convention.
    """
    if isinstance(first_token, str) and first_token in CONVENTIONS:
        warnings.warn(f'the convention name "{first_token}" is deprecated and goes in the next '
                      f'release: use first_token="{CONVENTIONS[first_token]}"',
                      DeprecationWarning, stacklevel=3)
        return CONVENTIONS[first_token]
    return check_first_token(first_token)


takes_first_token = renamed_keywords(convention=("first_token", CONVENTIONS))
"""Decorator: the keyword ``convention="ip"|"eq1"`` keeps working for one release as
``first_token="prefill"|"decode"``, with a ``DeprecationWarning``
(:func:`~queuetheory.errors.renamed_keywords`)."""


@takes_first_token
def durations(output, first_token: str = "prefill") -> np.ndarray:
    """Rounds ``d_i`` a request occupies: ``o_i`` (``"prefill"``, Jaillet et al.'s ``"ip"``)
    or ``o_i + 1`` (``"decode"``, their ``"eq1"``).

    Parameters
    ----------
    output : array_like of int
        Output lengths ``o_i`` in tokens (the first token included), one per request.
    first_token : {"prefill", "decode"}, default "prefill"
        The timing convention (see the module docstring).

    Returns
    -------
    numpy.ndarray of int64
        ``d_i``, the number of consecutive rounds each request runs, prefill round included.

    Raises
    ------
    ValueError
        If ``first_token`` names neither convention.
    """
    prefill_emits = first_token_of(first_token) == "prefill"
    return np.asarray(output, dtype=np.int64) + (0 if prefill_emits else 1)


class FuturePeak:
    """Memory profile of the running jobs from round ``t`` on, with incremental admission.

    Parameters
    ----------
    memory : int
        The KV capacity ``M`` in tokens (Jaillet et al.).
    t : int
        The current round.
    m0 : array_like of int, default ()
        Memory of each running job in round ``t``, in tokens (``s_i + t − p_i``).
    last : array_like of int, default ()
        Last round of each running job (``≥ t``), aligned with ``m0``.

    Raises
    ------
    ValueError
        If a running job's last round precedes ``t``.
    """

    def __init__(self, memory, t, m0=(), last=()):
        self.memory, self.t = memory, t
        m0 = np.asarray(m0, dtype=np.int64)
        last = np.asarray(last, dtype=np.int64)
        if last.size and last.min() < t:
            raise ValueError("last: every running job must still be running in round t")
        # load(τ) = Σ_{k: last_k ≥ τ} (m0_k + τ − t);  count(τ) = #{k: last_k ≥ τ}: the jobs
        # alive at τ are a suffix of the jobs sorted by last round, so suffix sums give both
        order = np.argsort(last, kind="stable")
        last, m0 = last[order], m0[order]
        if last.size:                 # the first of each run of equal last rounds
            first = np.flatnonzero(np.concatenate(([True], last[1:] != last[:-1])))
        else:
            first = np.empty(0, dtype=np.int64)
        self.taus = last[first]
        held = np.concatenate([m0[::-1].cumsum()[::-1], [0]])     # Σ m0 over k ≥ i
        self.count = last.size - first
        self.load = held[first] + self.count * (self.taus - t)

    def peak(self) -> int:
        """The running jobs' highest total memory from round ``t`` on.

        Returns
        -------
        int
            The peak in tokens over the checkpoints (0 with no running job).
        """
        return int(self.load.max()) if self.load.size else 0

    def load_at(self, tau: int) -> int:
        """The running jobs' total memory in round ``tau``.

        Parameters
        ----------
        tau : int
            A round (``≥ t``).

        Returns
        -------
        int
            The memory in tokens of the jobs still running in round ``tau``.
        """
        return self._load_from(int(self.taus.searchsorted(tau, side="left")), tau)

    def _load_from(self, k: int, tau: int) -> int:
        """:meth:`load_at` from ``k``, the first checkpoint at or after round ``tau``."""
        if k == self.taus.size:
            return 0
        # the jobs alive at τ are those alive at the next checkpoint
        return int(self.load[k]) - int(self.count[k]) * (int(self.taus[k]) - tau)

    def advance(self, t: int) -> None:
        """Move the profile on to round ``t`` (``≥`` the current round): the checkpoints
        before it go; what is left is unchanged (it holds the memory of each round, not
        of each round relative to the current one).

        Parameters
        ----------
        t : int
            The new current round.
        """
        k = int(self.taus.searchsorted(t, side="left"))
        if k:
            self.taus, self.load, self.count = self.taus[k:], self.load[k:], self.count[k:]
        self.t = t

    def remove(self, m: int, e: int) -> None:
        """Take out a job added with :meth:`add` (or given at construction) that leaves
        before its last round ``e``; keeps the profile exact. Its checkpoint stays: one
        with no job ending there changes no answer of :meth:`fits` (the memory grows with
        the round between two job ends, so the later one dominates it).

        Parameters
        ----------
        m : int
            The job's memory in the current round ``t``, in tokens.
        e : int
            The job's last round (``≥ t``), a checkpoint of the profile.
        """
        k = int(self.taus.searchsorted(e, side="right"))       # the checkpoints τ <= e
        self.load[:k] -= m - self.t + self.taus[:k]
        self.count[:k] -= 1

    def _check_last(self, e: int) -> None:
        if e < self.t:
            raise ValueError(f"e={e}: a job's last round cannot precede t={self.t}")

    def fits(self, m: int, e: int) -> bool:
        """Would a job using ``m`` tokens in round ``t`` and lasting until round ``e`` fit?

        The job's memory grows by one token per round, so it holds ``m + τ − t`` tokens in
        round ``τ``; it fits when the total stays ``≤ M`` at every checkpoint up to ``e``
        (Jaillet et al., eqs. (1)–(2)), its own completion round ``e`` included.

        Parameters
        ----------
        m : int
            The job's memory in round ``t``, in tokens (its prompt ``s_i`` for a job started
            now).
        e : int
            The job's last round (``≥ t``).

        Returns
        -------
        bool
            Whether admitting the job keeps every future round within ``M``.

        Raises
        ------
        ValueError
            If ``e < t``.
        """
        self._check_last(e)
        taus = self.taus
        k = int(taus.searchsorted(e, side="right"))            # the checkpoints τ <= e
        room = self.memory - m + self.t
        if k:
            if int((self.load[:k] + taus[:k]).max()) > room:
                return False
            if taus[k - 1] == e:                                # round e: checked above
                return True
        return self._load_from(k, e) + e <= room                # (k: the first τ > e)

    def excess(self, m: int, e: int) -> tuple[int, int]:
        """By how much would a job (as in :meth:`fits`) overflow ``M`` at its worst round,
        and which round is that? It fits exactly when the excess is at most 0. The total
        plus the round grows between two job ends, so the worst round is a checkpoint or
        ``e``; of equal ones the latest.

        Parameters
        ----------
        m : int
            The job's memory in round ``t``, in tokens.
        e : int
            The job's last round (``≥ t``).

        Returns
        -------
        tuple of int
            ``(excess, round)``: the total memory less ``M`` at the worst round ``τ`` of
            ``t … e`` and ``τ``.

        Raises
        ------
        ValueError
            If ``e < t``.
        """
        self._check_last(e)
        k = int(self.taus.searchsorted(e, side="right"))       # the checkpoints τ <= e
        room = self.memory - m + self.t
        worst, at = self.load_at(e) + e, e
        if k:
            ends = self.load[:k] + self.taus[:k]
            i = k - 1 - int(ends[::-1].argmax())                # the latest of the highest
            if int(ends[i]) > worst:
                worst, at = int(ends[i]), int(self.taus[i])
        return worst - room, at

    def add(self, m: int, e: int) -> None:
        """Admit a job (without checking); keeps the profile exact.

        Parameters
        ----------
        m : int
            The job's memory in round ``t``, in tokens.
        e : int
            The job's last round (``≥ t``).
        """
        k = int(self.taus.searchsorted(e, side="left"))
        if k == self.taus.size or self.taus[k] != e:
            load = self._load_from(k, e)        # the jobs alive in round e
            count = int(self.count[k]) if k < self.taus.size else 0
            self.taus = _insert(self.taus, k, e)
            self.load = _insert(self.load, k, load)
            self.count = _insert(self.count, k, count)
        k += 1                                                  # the checkpoints τ <= e
        self.load[:k] += m - self.t + self.taus[:k]
        self.count[:k] += 1

    def admit(self, m, e, on_fail: str = "break") -> np.ndarray:
        """Greedy admission of candidates in the given order; returns the admitted mask.

        ``on_fail="break"`` stops at the first candidate that does not fit (the paper's
        Algorithms 1–2); ``"skip"`` tries the later ones too.

        Parameters
        ----------
        m : array_like of int
            Each candidate's memory in round ``t``, in tokens, in priority order.
        e : array_like of int
            Each candidate's last round (``≥ t``), aligned with ``m``.
        on_fail : {"break", "skip"}, default "break"
            What to do at a candidate that does not fit.

        Returns
        -------
        numpy.ndarray of bool
            The admitted mask, aligned with ``m``; the admitted jobs are added to the profile.

        Raises
        ------
        ValueError
            If ``on_fail`` is not ``"break"`` or ``"skip"``, or a candidate's ``e < t``.
        """
        if on_fail not in ("break", "skip"):
            raise ValueError(f"on_fail={on_fail!r}: must be 'break' or 'skip'")
        m = np.asarray(m, dtype=np.int64).tolist()
        e = np.asarray(e, dtype=np.int64).tolist()
        ok = np.zeros(len(m), dtype=bool)
        for i, (mi, ei) in enumerate(zip(m, e, strict=True)):
            if self.fits(mi, ei):
                self.add(mi, ei)
                ok[i] = True
            elif on_fail == "break":
                break
        return ok


def _insert(a: np.ndarray, k: int, value) -> np.ndarray:
    """``np.insert(a, k, value)`` for a 1-d array, without its generic machinery."""
    out = np.empty(a.size + 1, dtype=a.dtype)
    out[:k] = a[:k]
    out[k] = value
    out[k + 1:] = a[k:]
    return out


def check_on_fail(on_fail: str) -> str:
    """The admission rule at a candidate that does not fit, checked.

    Parameters
    ----------
    on_fail : str
        ``"break"`` (stop at the first candidate that does not fit, Jaillet et al.'s
        Algorithms 1–2) or ``"skip"`` (try the later ones too).

    Returns
    -------
    str
        ``on_fail`` itself, unchanged.

    Raises
    ------
    ValueError
        If ``on_fail`` is not ``"break"`` or ``"skip"``.
    """
    if on_fail not in ("break", "skip"):
        raise ValueError(f"on_fail={on_fail!r}: must be 'break' or 'skip'")
    return on_fail


def check_max_starts(max_starts):
    """The cap on admissions per round, checked.

    Parameters
    ----------
    max_starts : int or None
        The most requests started in one round, or ``None`` for no cap.

    Returns
    -------
    int or None
        ``max_starts`` itself, unchanged.

    Raises
    ------
    ValueError
        If ``max_starts`` is not ``None`` and not a positive integer.
    """
    if max_starts is not None:
        check_positive("max_starts", max_starts, integer=True)
    return max_starts


def admit(peak: FuturePeak, m, e, on_fail: str, max_starts) -> np.ndarray:
    """Admission mask of the candidates (already in priority order) at the current round.

    Parameters
    ----------
    peak : FuturePeak
        The running jobs' memory profile at the current round; the admitted candidates are
        added to it.
    m : array_like of int
        Each candidate's memory in the current round, in tokens, in priority order.
    e : array_like of int
        Each candidate's last round, aligned with ``m``.
    on_fail : {"break", "skip"}
        What to do at a candidate that does not fit (see :meth:`FuturePeak.admit`).
    max_starts : int or None
        The most candidates admitted in this round (the first ones admitted are kept), or
        ``None`` for no cap.

    Returns
    -------
    numpy.ndarray of bool
        The admitted mask, aligned with ``m``.

    Raises
    ------
    ValueError
        If ``on_fail`` is not ``"break"`` or ``"skip"``, or a candidate's last round precedes
        the current round.
    """
    ok = peak.admit(m, e, on_fail)
    if max_starts is not None:
        ok[np.flatnonzero(ok)[max_starts:]] = False
    return ok


@takes_first_token
def mcsf_schedule(arrival, prompt, output, memory, *, first_token="prefill", on_fail="break",
                  max_starts=None, order="output") -> np.ndarray:
    """Start rounds of MC-SF (Algorithm 2; Algorithm 1 when all arrivals are 0) computed
    round by round without the engine: the reference the :class:`MCSF` policy is tested
    against, and the fast path of the counterexample searches.

    ``max_starts`` caps admissions per round (the capped comparators of spec §3.2/§3.4);
    ``order="arrival"`` gives :class:`FCFS`. Arrival rounds must be integers.

    Parameters
    ----------
    arrival : array_like of int
        Arrival rounds ``a_i`` (all 0 for Algorithm 1).
    prompt : array_like of int
        Prompt lengths ``s_i`` in tokens.
    output : array_like of int
        Output lengths ``o_i`` in tokens; the rounds ``d_i`` follow from ``first_token``.
    memory : int
        The KV capacity ``M`` in tokens.
    first_token : {"prefill", "decode"}, default "prefill"
        The timing convention (see the module docstring).
    on_fail : {"break", "skip"}, default "break"
        What to do at a waiting request that does not fit (see :meth:`FuturePeak.admit`).
    max_starts : int, optional
        The most requests started in one round; ``None`` for no cap.
    order : {"output", "arrival"}, default "output"
        The priority among waiting requests: shortest ``d_i`` first (MC-SF), ties by
        arrival then index; or by arrival then index (FCFS).

    Returns
    -------
    numpy.ndarray of int64
        The start round ``p_i`` of each request; it completes at ``p_i + d_i``.

    Raises
    ------
    ValueError
        If ``first_token``, ``on_fail``, ``max_starts`` or ``order`` is invalid, or a single
        request's peak ``s_i + d_i − 1`` exceeds ``memory`` (it could never start).
    """
    a = np.asarray(arrival, dtype=np.int64)
    s = np.asarray(prompt, dtype=np.int64)
    d = durations(output, first_token)
    check_on_fail(on_fail)
    check_max_starts(max_starts)
    if order not in _ORDERS:
        raise ValueError(f"order={order!r}: must be one of {_ORDERS}")
    if np.any(s + d - 1 > memory):
        i = int(np.argmax(s + d - 1))
        raise ValueError(f"memory={memory}: below the peak {int(s[i] + d[i] - 1)} of request {i}")
    n = a.size
    key = np.lexsort((np.arange(n), a, d)) if order == "output" else np.lexsort((np.arange(n), a))
    start = np.full(n, -1, dtype=np.int64)
    t = int(a.min()) if n else 0
    while np.any(start < 0):
        run = (start >= 0) & (start + d > t)
        wait = key[(start[key] < 0) & (a[key] <= t)]
        if wait.size:
            peak = FuturePeak(memory, t, s[run] + t - start[run], start[run] + d[run] - 1)
            ok = admit(peak, s[wait], t + d[wait] - 1, on_fail, max_starts)
            start[wait[ok]] = t
        if not run.any() and not wait.size:
            t = int(a[start < 0].min())
        else:
            t += 1
    return start

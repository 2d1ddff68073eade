"""The future-peak KV-memory check of Jaillet et al., eqs. (1)–(2), shared by every policy that
admits a request only if the memory of all running requests stays within ``M`` until they
finish (MC-SF of Jaillet et al.; A_max, A_min of Chen et al.).

A job that is in memory at round ``t`` with ``m`` tokens grows by one token per round until
its last round ``e``, then frees everything. The total of a fixed set of jobs rises linearly
between completions and drops at them, so checking the completion rounds (checkpoints) is
enough (Jaillet et al., §4) — the candidate's own completion included (spec §2.1's fix).
"""

from __future__ import annotations

import numpy as np

__all__ = ["FuturePeak"]


class FuturePeak:
    """Memory profile of the running jobs from round ``t`` on, with incremental admission.

    Parameters
    ----------
    memory : capacity ``M`` in tokens
    t : the current round
    m0 : memory of each running job in round ``t``
    last : last round of each running job (``≥ t``)
    """

    def __init__(self, memory, t, m0=(), last=()):
        self.memory, self.t = memory, t
        m0 = np.asarray(m0, dtype=np.int64)
        last = np.asarray(last, dtype=np.int64)
        if np.any(last < t):
            raise ValueError("last: every running job must still be running in round t")
        # load(τ) = Σ_{k: last_k ≥ τ} (m0_k + τ − t);  count(τ) = #{k: last_k ≥ τ}: the jobs
        # alive at τ are a suffix of the jobs sorted by last round, so suffix sums give both
        order = np.argsort(last, kind="stable")
        last, m0 = last[order], m0[order]
        self.taus, first = np.unique(last, return_index=True)
        held = np.concatenate([m0[::-1].cumsum()[::-1], [0]])     # Σ m0 over k ≥ i
        self.count = last.size - first
        self.load = held[first] + self.count * (self.taus - t)

    def peak(self) -> int:
        return int(self.load.max()) if self.load.size else 0

    def _load_at(self, tau: int) -> int:
        k = int(np.searchsorted(self.taus, tau, side="left"))
        if k == self.taus.size:
            return 0
        # the jobs alive at τ are those alive at the next checkpoint
        return int(self.load[k] - self.count[k] * (self.taus[k] - tau))

    def fits(self, m: int, e: int) -> bool:
        """Would a job using ``m`` tokens in round ``t`` and lasting until round ``e`` fit?"""
        if e < self.t:
            raise ValueError(f"e={e}: a job's last round cannot precede t={self.t}")
        before = self.taus <= e
        if np.count_nonzero(self.load[before] + m + self.taus[before] - self.t > self.memory):
            return False
        return bool(self._load_at(e) + m + e - self.t <= self.memory)

    def add(self, m: int, e: int) -> None:
        """Admit a job (without checking); keeps the profile exact."""
        k = int(np.searchsorted(self.taus, e, side="left"))
        if k == self.taus.size or self.taus[k] != e:
            load, count = self._load_at(e), (int(self.count[k]) if k < self.taus.size else 0)
            self.taus = _insert(self.taus, k, e)
            self.load = _insert(self.load, k, load)
            self.count = _insert(self.count, k, count)
        before = self.taus <= e
        self.load[before] += m + self.taus[before] - self.t
        self.count[before] += 1

    def admit(self, m, e, on_fail: str = "break") -> np.ndarray:
        """Greedy admission of candidates in the given order; returns the admitted mask.

        ``on_fail="break"`` stops at the first candidate that does not fit (the paper's
        Algorithms 1–2); ``"skip"`` tries the later ones too.
        """
        if on_fail not in ("break", "skip"):
            raise ValueError(f"on_fail={on_fail!r}: must be 'break' or 'skip'")
        m = np.asarray(m, dtype=np.int64)
        e = np.asarray(e, dtype=np.int64)
        ok = np.zeros(m.size, dtype=bool)
        for i in range(m.size):
            if self.fits(int(m[i]), int(e[i])):
                self.add(int(m[i]), int(e[i]))
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

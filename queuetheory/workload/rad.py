"""The SLAI evaluation workload of Bari et al. (Table 1).

Prompt and decode lengths are lognormal, each fitted to Table 1's median and P90
(``σ_ln = ln(P90/median)/z_0.9``), drawn independently; ``L^D ≥ 1`` and the prompt is
clipped so that ``L^P + L^D ≤ 8192`` (decision I-14). Table 1's decode std of 101 cannot
hold together with its median and P90 (:func:`table1_decode_std_bound`, I-12).

Engine convention (written down once): a request with ``L^D`` decode iterations emits
``L^D + 1`` tokens — the first at the end of its last prefill chunk — so the engine runs with
``first_token="prefill"`` and ``output = L^D + 1``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from ..errors import check_between, check_positive
from .core import RequestClass, Workload

__all__ = ["TABLE1", "table1_lengths", "table1_workload", "table1_decode_std_bound",
           "FREE", "PAYING"]

TABLE1 = {"prompt": {"median": 1730, "p90": 5696, "std": 2088},
          "decode": {"median": 415, "p90": 834, "std": 101}}
FREE, PAYING = 0, 1
_Z90 = float(stats.norm.ppf(0.9))


def lognormal_fit(median: float, p90: float):
    """``(μ_ln, σ_ln)`` of the lognormal with the given median and 90th percentile."""
    check_positive("median", median)
    if not p90 > median:
        raise ValueError(f"p90={p90}: must exceed median={median}")
    return float(np.log(median)), float(np.log(p90 / median) / _Z90)


def table1_lengths(n: int, *, seed=0, cap: int = 8192, round_to: int | None = None):
    """``n`` pairs ``(L^P, L^D)`` from the Table 1 model; ``round_to`` rounds prompts up to
    a multiple (Assumption 3, decision I-24) after capping."""
    check_positive("n", n, integer=True)
    check_positive("cap", cap, integer=True)
    rng = np.random.default_rng(seed)
    (mp, sp_), (md, sd) = (lognormal_fit(TABLE1[k]["median"], TABLE1[k]["p90"])
                           for k in ("prompt", "decode"))
    decode = np.maximum(1, np.rint(np.exp(rng.normal(md, sd, n)))).astype(np.int64)
    decode = np.minimum(decode, cap - 1)
    prompt = np.maximum(1, np.rint(np.exp(rng.normal(mp, sp_, n)))).astype(np.int64)
    prompt = np.minimum(prompt, cap - decode)
    if round_to is not None:
        check_positive("round_to", round_to, integer=True)
        prompt = -(-prompt // round_to) * round_to
    return prompt, decode


def table1_workload(rate: float, *, p_paying: float = 0.05, pool: int = 1 << 16, seed=0,
                    cap: int = 8192, round_to: int | None = None) -> Workload:
    """Poisson(``rate``) requests from the Table 1 model, each paying with probability
    ``p_paying`` (class ``PAYING = 1``, priority 1; free = class 0). Lengths are drawn from a
    pool of ``pool`` paired samples; the engine output is ``L^D + 1`` (module docstring)."""
    check_positive("rate", rate)
    check_between("p_paying", p_paying, 0, 1, low_closed=True, high_closed=True)
    prompt, decode = table1_lengths(pool, seed=seed, cap=cap, round_to=round_to)
    free = RequestClass.from_samples(prompt, decode + 1, rate * (1 - p_paying), name="free")
    paying = RequestClass.from_samples(prompt, decode + 1, rate * p_paying, name="paying",
                                       priority=1)
    return Workload([free, paying])


@dataclass(frozen=True)
class StdBound:
    """Largest std compatible with a median and a P90 (Cantelli), and the reported one."""

    max_mean: float
    tail_bound_at_reported_std: float
    reported_std: float
    possible: bool


def table1_decode_std_bound(median: float = 415, p90: float = 834, std: float = 101):
    """Can a law have this median, P90 and std? ``|mean − median| ≤ σ`` bounds the mean by
    ``median + σ``; Cantelli then gives ``P(X ≥ p90) ≤ σ²/(σ² + (p90 − mean)²)``, which must be
    at least 0.10 (I-12)."""
    mean = median + std
    gap = p90 - mean
    tail = 1.0 if gap <= 0 else std**2 / (std**2 + gap**2)
    return StdBound(mean, float(tail), std, bool(tail >= 0.1))

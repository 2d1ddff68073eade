"""Li, Dai, Peng's instances: the Llama-3-70B fit scaled in time (the simulation claims of
Theorem 1 and Fig. 1), every shipped classic scheduler at a budget (Fig. 5's
work-conservation table) and the bounded workload of the exact drift certificates.

The unscaled fit is :data:`queuetheory.bounds.LLAMA3_70B`; vanilla vLLM's unit-time rate
``λ*`` is :func:`queuetheory.capacity.vllm_unit_time_rate`. The ledger
(:mod:`queuetheory.claims.li2025`, :mod:`queuetheory.claims.li2025_theory`) checks the
paper's statements on these; they lived there until this release (the old names warn until
the next one).
"""

from __future__ import annotations

from scipy import stats

from .. import policies
from ..errors import renamed_keywords
from ..timing import PiecewiseLinearTime
from ..workload import RequestClass, Workload

__all__ = ["llama_time", "classic_policies", "certificate_workload"]


def llama_time(s: float = 1.0) -> PiecewiseLinearTime:
    """Li, Dai, Peng's Llama-3-70B fit (ms, Eq. 2.3), time scaled by ``s``.

    Parameters
    ----------
    s : float, default 1.0
        The time scale (spec §5.6: with ``s = 1`` the Fig. 1 workload exceeds ``1/a``).

    Returns
    -------
    PiecewiseLinearTime
        ``c = 45.5·s`` ms, ``a = 0.30·s`` ms/token, ``b0 = 64``.
    """
    return PiecewiseLinearTime(c=45.5 * s, a=0.30 * s, b0=64)


@renamed_keywords(b="token_budget")
def classic_policies(token_budget: int) -> dict:
    """Every shipped classic scheduler at budget ``b``, with its paper status.

    Parameters
    ----------
    token_budget : int
        The paper's ``b``: tokens per batch (``b=`` is the old name, which warns).

    Returns
    -------
    dict
        ``{name: policy}``: Sarathi (FCFS and SJF), Orca (chunked or not), vanilla vLLM,
        FasterTransformer (token and request mode), a static priority and two K-FCFS
        wrappers of Sarathi.
    """
    b = token_budget                 # the paper's b
    return {
        "Sarathi": policies.Sarathi(b),
        "Sarathi-SJF": policies.Sarathi(b, order="sjf_total"),
        "Orca(chunk=True)": policies.Orca(b),
        "Orca(chunk=False)": policies.Orca(b, chunk=False),
        "VLLMVanilla": policies.VLLMVanilla(b),
        "FasterTransformer": policies.FasterTransformer(b),
        "FasterTransformer(request)": policies.FasterTransformer(b, mode="request", max_reqs=b),
        "StaticPriority": policies.StaticPriority(b, [0]),
        "KFCFS(Sarathi, b, b)": policies.KFCFS(policies.Sarathi(b), b, b),
        "KFCFS(Sarathi, 2, 2)": policies.KFCFS(policies.Sarathi(b), 2, 2),
    }


def certificate_workload(lam: float = 1.0) -> Workload:
    """Bounded laws for exact drift: prompts 1 + Bin(6, ½) (mean 4), outputs 1 + Bin(14, ½)
    (mean 8), Poisson(λ) arrivals per slot; with b = 16, ε' = 16 − 12λ.

    Parameters
    ----------
    lam : float, default 1.0
        ``λ``: the mean arrivals per slot.

    Returns
    -------
    Workload
        One class with those laws and ``arrivals="poisson-slot"``.
    """
    return Workload([RequestClass(stats.binom(6, 0.5, loc=1), stats.binom(14, 0.5, loc=1), lam)],
                    arrivals="poisson-slot")

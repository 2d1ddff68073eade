"""The ledger: every claim of the five papers (and of the Mooncake traces' paper, on the
data it released) as a runnable check with a verdict.

``qt.claims.all()`` lists them, ``qt.claims.get("li2025.theorem1a").check()`` runs one.
Each paper module registers its claims when imported.
"""

from . import (  # noqa: F401
    ao2025,
    bari2025,
    chen2025,
    jaillet2025,
    li2025,
    li2025_networks,
    li2025_theory,
    qin2025,
    real_gpu,
)
from .base import VERDICTS, Claim, Outcome, all, claim, get, papers

__all__ = ["Claim", "Outcome", "VERDICTS", "all", "get", "claim", "papers"]

"""The ledger: every claim of the five papers as a runnable check with a verdict.

``qt.claims.all()`` lists them, ``qt.claims.get("li2025.theorem1a").check()`` runs one.
"""

from . import ao2025, li2025  # noqa: F401  (registers the claims)
from .base import VERDICTS, Claim, Outcome, all, claim, get, papers

__all__ = ["Claim", "Outcome", "VERDICTS", "all", "get", "claim", "papers"]

from . import chen2025  # noqa: E402, F401  (registers the claims)

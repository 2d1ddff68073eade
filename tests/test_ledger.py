"""The ledger: every registered claim's quick check still reaches its recorded verdict."""

import pytest

import queuetheory as qt
from queuetheory.claims import VERDICTS, Outcome


def test_registry_is_well_formed():
    claims = qt.claims.all()
    assert len({c.id for c in claims}) == len(claims)
    for c in claims:
        assert c.paper in qt.claims.papers()
        assert c.id.startswith(c.paper + ".")
        assert c.expected in VERDICTS and c.statement
    with pytest.raises(KeyError, match="no claim"):
        qt.claims.get("li2025.nonexistent")
    with pytest.raises(ValueError, match="verdict"):
        Outcome("plausible", "")


@pytest.mark.parametrize("claim", qt.claims.all(), ids=lambda c: c.id)
def test_claim_reaches_its_recorded_verdict(claim):
    outcome = claim.check(quick=True)
    assert outcome.verdict == claim.expected, outcome.figure
    assert outcome.figure

"""The bari2025 ledger: every claim's quick check reaches its recorded verdict."""

import pytest

import queuetheory as qt

CLAIMS = qt.claims.all("bari2025")


def test_ledger_has_the_paper_claims():
    ids = {c.id for c in CLAIMS}
    assert {"bari2025.theorem1", "bari2025.theorem2", "bari2025.proposition1",
            "bari2025.lcm_chunking_optimal", "bari2025.slai_ttft"} <= ids


@pytest.mark.parametrize("c", CLAIMS, ids=[c.id for c in CLAIMS])
def test_claim_verdict(c):
    out = c.check(quick=True)
    assert out.verdict == c.expected, out.figure

"""Every chen2025 claim in the ledger reaches its recorded verdict (quick checks)."""

import pytest

import queuetheory as qt

CLAIMS = qt.claims.all("chen2025")


def test_ledger_has_the_papers_claims():
    ids = {c.id for c in CLAIMS}
    for name in ("example3_2", "example8_2", "lemma4_9", "corollary4_8", "trace_identity",
                 "theorem4_3", "figure1", "theorem3_3", "theorem3_4", "theorem8_6_part1",
                 "theorem8_6_part2", "theorem5_1", "theorem5_2", "alpha_star", "geometric",
                 "theorem5_3", "experiment1", "experiment2", "experiment3"):
        assert f"chen2025.{name}" in ids


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: c.id)
def test_claim_reaches_expected_verdict(claim):
    out = claim.check(quick=True)
    assert out.verdict == claim.expected, out.figure
    assert out.figure

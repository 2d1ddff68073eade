"""Every li2025.network claim reaches the verdict the ledger records (quick checks)."""

import pytest

import queuetheory as qt

NETWORK_CLAIMS = [c for c in qt.claims.all("li2025") if c.id.startswith("li2025.network.")]


def test_the_network_claims_are_registered():
    ids = {c.id for c in NETWORK_CLAIMS}
    assert {"li2025.network.prop1", "li2025.network.two_types",
            "li2025.network.fork_join_conjecture1", "li2025.network.rs_figure8",
            "li2025.network.rs_virtual_station", "li2025.network.rs_classic"} <= ids


@pytest.mark.parametrize("claim", NETWORK_CLAIMS, ids=lambda c: c.id)
def test_claim_reaches_its_recorded_verdict(claim):
    out = claim.check(quick=True)
    assert out.verdict == claim.expected, out.figure

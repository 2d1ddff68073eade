"""The li2025.network claims are in the ledger (tests/test_ledger.py runs their quick checks)."""

import queuetheory as qt

NETWORK_CLAIMS = [c for c in qt.claims.all("li2025") if c.id.startswith("li2025.network.")]


def test_the_network_claims_are_registered():
    ids = {c.id for c in NETWORK_CLAIMS}
    assert {"li2025.network.prop1", "li2025.network.two_types",
            "li2025.network.fork_join_conjecture1", "li2025.network.rs_figure8",
            "li2025.network.rs_virtual_station", "li2025.network.rs_classic"} <= ids


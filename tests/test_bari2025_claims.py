"""The bari2025 ledger entries (their verdicts are asserted once, in tests/test_ledger.py)."""

import queuetheory as qt


def test_ledger_has_the_paper_claims():
    ids = {c.id for c in qt.claims.all("bari2025")}
    assert {"bari2025.theorem1", "bari2025.theorem2", "bari2025.proposition1",
            "bari2025.lemma3_cycle_bounds", "bari2025.lcm_chunking_optimal",
            "bari2025.design_principles", "bari2025.table1_decode_std",
            "bari2025.slai_ttft", "bari2025.slai_free_tbt", "bari2025.slai_paying_share",
            "bari2025.slai_paying_priority"} <= ids


def test_fast_claims_report_their_numbers():
    out = qt.claims.get("bari2025.lcm_chunking_optimal").check(quick=True)
    assert out.data["ratio_6"] < 1 and "(256, 128, 32)" in out.data["broken"]
    out = qt.claims.get("bari2025.eq12_closed_form").check(quick=True)
    assert abs(out.data["z"]) < 4 and out.data["lambda_star"] > 0

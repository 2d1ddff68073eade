"""The chen2025 part of the ledger: every claim of the issue is registered with the verdict the
code reaches (``tests/test_ledger.py`` runs each quick check against its recorded verdict)."""

import queuetheory as qt

EXPECTED = {
    "example3_2": "confirmed", "example8_2": "confirmed", "lemma4_9": "confirmed",
    "corollary4_8": "confirmed", "trace_identity": "confirmed", "theorem4_3": "confirmed",
    "figure1": "qualified", "theorem3_3": "confirmed", "theorem3_4": "qualified",
    "theorem8_6_part1": "refuted", "theorem8_6_part2": "confirmed", "theorem5_1": "confirmed",
    "theorem5_2": "confirmed", "alpha_star": "confirmed", "geometric": "confirmed",
    "theorem5_3": "confirmed", "experiment1": "qualified", "experiment2": "confirmed",
    "experiment3": "qualified", "lemma8_8": "confirmed", "theorem4_2": "qualified",
    "lemma4_6_rounds": "refuted", "theorem5_1_rounds": "refuted",
    "theorem5_3_rounds": "qualified",
}


def test_ledger_records_the_papers_claims():
    recorded = {c.id.split(".", 1)[1]: c.expected for c in qt.claims.all("chen2025")}
    assert recorded == EXPECTED


def test_refuted_claims_carry_their_counterexample():
    for name in ("theorem5_1_rounds", "theorem8_6_part1"):
        out = qt.claims.get(f"chen2025.{name}").check(quick=True)
        assert out.verdict == "refuted" and out.note and out.data


def test_theorem3_4_says_what_fails_the_proof_not_the_statement():
    from queuetheory.bounds import competitive_closed_forms as cf

    out = qt.claims.get("chen2025.theorem3_4").check(quick=True)
    d = out.data
    # instances reach the printed bound at large α, none tried at small α
    assert d["reached"] and d["not_reached"] and max(d["reached"]) < min(d["not_reached"])
    for u in d["reached"]:
        assert 2 * u - 1 >= cf.thm34_claimed(1 / u)
    # the proof's own model falls short of the claim everywhere, so it proves less
    assert all(v["construction"] <= v["worst"] < v["claimed"] for v in d["limit"].values())
    assert d["proof_step_at_sqrt_alpha"][4] < cf.thm34_claimed(1 / 4)


def test_period_model_claims_name_their_scope():
    for name in ("theorem4_3", "theorem5_1", "theorem5_3"):
        c = qt.claims.get(f"chen2025.{name}")
        assert "period model" in c.statement and "not A_min in rounds" in c.scope, name


def test_random_order_expectation_is_exact_on_a_hand_case():
    from fractions import Fraction

    from queuetheory.bounds import hsf_tel, random_order_tel

    # s = 0 (engine prompt 1), M = 3, o = (2, 3): H-SF starts the short job at 0 and the long
    # at 1 (TEL 2 + 4); the order (3, 2) delays the short job to round 3 (TEL 3 + 5)
    assert hsf_tel([2, 3], 1, 3) == 6
    assert random_order_tel([2, 3], 1, 3) == Fraction(7)
    assert random_order_tel([3, 3], 1, 3) == hsf_tel([3, 3], 1, 3)


def test_random_order_refuses_what_it_cannot_enumerate():
    import pytest

    from queuetheory.bounds import random_order_tel

    with pytest.raises(ValueError, match="at most 8"):
        random_order_tel([1] * 9, 1, 20)
    with pytest.raises(ValueError, match="memory=2"):
        random_order_tel([3], 1, 2)

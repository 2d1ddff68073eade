"""The ao2025 ledger. Every claim's quick check is asserted against its recorded verdict
by tests/test_ledger.py (one run per claim); here: coverage and Prop. 4's constant."""

import sympy as sp

import queuetheory as qt
from queuetheory.bounds import prop4_overflow_probability
from queuetheory.papers.ao2025 import D0, D1, PROP4

CLAIMS = qt.claims.all("ao2025")


def test_ao2025_ledger_covers_the_spec():
    ids = {c.id for c in CLAIMS}
    for name in ("fluid_equilibrium", "proposition1", "proposition2", "proposition3",
                 "proposition4", "proposition5", "theorem1", "theorem2", "theorem3",
                 "theorem4", "theorem1_per_type", "lemma1", "lemma4", "lemma6", "lemma8",
                 "memory_decomposition", "scheduler_comparison", "nested_comparison"):
        assert f"ao2025.{name}" in ids


def test_proposition4_overflow_constant_is_computed():
    p, safe = prop4_overflow_probability(PROP4, D0, D1)
    assert sp.simplify(p - (1 - sp.Rational(9, 2) * sp.exp(-2))) == 0
    assert sorted(safe) == [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0)]
    # a larger capacity leaves more pairs safe, so the overflow chance drops
    p12, safe12 = prop4_overflow_probability(PROP4, D0, D1, capacity=12)
    assert set(safe) < set(safe12) and float(p12) < float(p)


def test_eq11_is_an_erratum_because_the_corrected_bound_holds():
    out = qt.claims.get("ao2025.eq11_memory").check(quick=True)
    # the misprint: (11) differs from the engine's full batch, which the exact sum gives
    assert out.data["printed"] != out.data["exact"] == out.data["engine_peak"]
    # the results stand with the correction, and fail without it
    exceeded = out.data["bound12_exceeded"]
    assert exceeded["exact"] <= 0.1 < exceeded["paper"]


def test_theorem2_names_its_memory_and_rejects_11_as_printed():
    c = qt.claims.get("ao2025.theorem2")
    assert "eq11_memory" in c.statement and "corrected" in c.convention
    out = c.check(quick=True)
    # negative control: the same check, with (11) as printed in (12), rejects the theorem
    assert out.data["holds"] == {"exact": True, "paper": False}
    assert out.data["m_pi"]["paper"] < out.data["m_pi"]["exact"]


def test_kingman_check_rejects_half_the_bound():
    from queuetheory.claims.ao2025 import kingman_holds

    out = qt.claims.get("ao2025.kingman").check(quick=True)
    rows = out.data["rows"]
    assert kingman_holds(rows) and out.verdict == "confirmed"
    # negative control: the altered statement E[sup S_n] ≤ σ²/(4μ) is rejected
    assert not kingman_holds(rows, 0.5) and out.data["half_bound_holds"] is False

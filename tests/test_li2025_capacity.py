"""Capacity law of seed 004 (eq. 2.3, 2.7; spec §1.3): b/t_b, b_min, the max-rate premise."""

import math
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import queuetheory as qt
from queuetheory.bounds import (
    LLAMA3_70B,
    capacity_table,
    llama3_70b_table,
    max_stable_rate,
    max_token_rate,
    min_token_budget,
    smallest_stable_budget,
    token_capacity,
)
from queuetheory.errors import UnstableError


def test_token_capacity_is_b_over_tb_for_the_llama_fit():
    for b in (64, 128, 256, 512, 1024, 2048):
        assert token_capacity(LLAMA3_70B, b) == pytest.approx(b / (45.5 + 0.30 * (b - 64)))
    table = llama3_70b_table()
    rates = table["capacity"].to_numpy()
    assert all(rates[:-1] < rates[-1])                       # increasing towards 1/a
    assert table.loc[math.inf, "capacity"] == pytest.approx(1000 / 0.30)
    assert table["at_budget"].all()                          # c > a·b0: b/t_b is maximal


def test_public_names_on_the_package():
    assert qt.bounds.token_capacity(qt.UnitTime(), 8) == 8
    assert qt.bounds.min_token_budget(1.0, 2, 3, qt.UnitTime()) == 5


@settings(max_examples=60, deadline=None)
@given(c=st.floats(1, 50), a=st.floats(0.001, 0.5), b0=st.integers(0, 128),
       load=st.floats(0.01, 5.0))
def test_b_min_closed_form_matches_search(c, a, b0, load):
    tm = qt.PiecewiseLinearTime(c=c, a=a, b0=b0)
    lam, mp, md = load / 10, 4.0, 6.0
    try:
        b_min = min_token_budget(lam, mp, md, tm)
    except UnstableError:
        with pytest.raises(UnstableError):
            smallest_stable_budget(lam, mp, md, tm, b_max=4096)
        return
    if b_min > 4000 or abs(b_min - round(b_min)) < 1e-6:
        return                                    # out of the searched range, or a float tie
    found = smallest_stable_budget(lam, mp, md, tm, b_max=4096)
    if c >= a * b0 or b_min < b0:
        assert found == math.floor(b_min) + 1
    assert token_capacity(tm, found) > load


def test_b_min_second_case_for_the_calibrated_fig1_workload():
    tm = qt.PiecewiseLinearTime(c=45.5 * 0.6, a=0.30 * 0.6, b0=64)
    lam = 14.3 / 1000                            # requests per ms
    b_min = min_token_budget(lam, 129, 112, tm)
    Lam = lam * 241
    assert Lam * tm.c > tm.b0
    assert b_min == pytest.approx(Lam * (tm.c - tm.a * tm.b0) / (1 - tm.a * Lam))
    assert token_capacity(tm, math.ceil(b_min)) > Lam > token_capacity(tm, math.floor(b_min))


def test_no_stable_budget_raises_unstable_error():
    with pytest.raises(UnstableError, match="exceeds the limit"):
        min_token_budget(14.3 / 1000, 129, 112, LLAMA3_70B)      # Fig. 1 load above 1/a


def test_max_stable_rate_of_a_workload_and_of_means():
    wl = qt.Workload([qt.RequestClass(100, 50, 1.0)])
    assert max_stable_rate(wl, LLAMA3_70B, 512) == pytest.approx(
        token_capacity(LLAMA3_70B, 512) / 150)
    assert max_stable_rate((100, 50), LLAMA3_70B, 512) == max_stable_rate(wl, LLAMA3_70B, 512)


def test_max_rate_premise_fails_when_c_below_a_b0_and_with_slots():
    with pytest.warns(UserWarning, match="not the maximal rate"):
        m = max_token_rate(qt.PiecewiseLinearTime(c=10, a=0.3, b0=64), 100)
    assert m.argmax == 64 and m.rate == pytest.approx(6.4) and not m.at_budget
    slotted = qt.PiecewiseLinearTime(c=45.5, a=0.3, b0=64, slot=50)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = capacity_table(slotted, [64, 80, 100, 300])
    assert not table["at_budget"].all()


@pytest.mark.parametrize("bad", [0, -3, 2.5, float("nan")])
def test_bad_budget_is_rejected(bad):
    with pytest.raises(ValueError, match="b="):
        token_capacity(LLAMA3_70B, bad)


def test_bad_inputs_name_the_parameter():
    with pytest.raises(ValueError, match="time_model"):
        token_capacity("fast", 8)
    with pytest.raises(ValueError, match="lam"):
        min_token_budget(0, 1, 1, LLAMA3_70B)
    with pytest.raises(ValueError, match="closed form"):
        min_token_budget(0.01, 1, 1, qt.PiecewiseLinearTime(c=1, a=0.1, b0=4, slot=1))


def test_capacity_law_claim_decides_by_growth_rate():
    """The ledger's verdict (tests/test_ledger.py) rests on growth_rate on both sides of b_min."""
    out = qt.claims.get("li2025.capacity_law").check(quick=True)
    runs = out.data["runs"]
    assert {r["verdict"] for r in runs.values()} == {"stable", "unstable"}
    for b, r in runs.items():
        assert (r["rho"] < 1) == (b > out.data["b_min"]) == (r["verdict"] == "stable")

"""Seed 000 §4-7: WAIT condition (9), threshold design, Nested WAIT (10)-(16), memory bounds."""

import itertools
from fractions import Fraction

import numpy as np
import pytest
import sympy as sp

import queuetheory as qt
from queuetheory.errors import UnstableError

PROP4 = [qt.RequestClass(1, 1, 1.0), qt.RequestClass(1, 2, 1.0)]
SEG = qt.fluid.segments(1, [1, 2], [1.0, 1.0])


def test_wait_memory_is_sum_n_a():
    # a = (l'+1)(l + l'/2): 3 and 6
    assert qt.fluid.wait_memory([1, 1], PROP4) == 9
    assert qt.fluid.wait_memory([2, 5], PROP4) == 2 * 3 + 5 * 6


def test_theorem1_condition_critical_strict_violated():
    c = qt.fluid.wait_condition([1, 1], PROP4, 0.1, 0.1)
    assert c.status == ("critical", "critical") and c.critical and c.holds
    s = qt.fluid.wait_condition([2, 2], PROP4, 0.1, 0.1)
    assert s.strict and s.iteration_time == pytest.approx(1.9)
    assert np.allclose(s.slack, [0.1, 0.1])
    v = qt.fluid.wait_condition([1, 2], PROP4, 0.1, 0.1)
    assert v.status[0] == "violated" and not v.holds
    with pytest.raises(ValueError, match=r"types \[0, 1\]"):
        qt.fluid.wait_condition([1, 1], PROP4, 0.1, 0.1, require="strict")
    with pytest.raises(ValueError, match="condition \\(9\\)"):
        qt.fluid.wait_condition([1, 2], PROP4, 0.1, 0.1, require="holds")


@pytest.mark.parametrize("bad", [[1.5, 2], [0, 1], [-1, 2], [1], [[1, 2]], ["a", "b"]])
def test_bad_thresholds_raise(bad):
    with pytest.raises(ValueError, match="thresholds"):
        qt.fluid.wait_condition(bad, PROP4, 0.1, 0.1)


def _brute_force_min(classes, d0, d1, margin, top=8):
    best = None
    for n in itertools.product(range(1, top + 1), repeat=len(classes)):
        c = qt.fluid.wait_condition(n, classes, d0, d1)
        lam = np.array([k.rate for k in classes])
        if np.all(c.iteration_time <= (1 - margin) * np.array(n) / lam + 1e-12):
            if best is None or c.memory < best[0]:
                best = (c.memory, n)
    return best


@pytest.mark.parametrize("margin", [0.0, 0.02, 0.05])
def test_wait_thresholds_milp_is_the_smallest_memory(margin):
    n = qt.fluid.wait_thresholds(PROP4, 0.1, 0.1, margin=margin)
    best = _brute_force_min(PROP4, 0.1, 0.1, margin)
    assert qt.fluid.wait_memory(n, PROP4) == best[0]
    assert qt.fluid.wait_condition(n, PROP4, 0.1, 0.1).holds


def test_wait_threshold_lp_relaxation_is_fluid_equilibrium():
    """min a·n over (9) is n = ΔT* λ with M^π = M* (spec §3.1)."""
    classes = [qt.RequestClass(3, 4, 0.3), qt.RequestClass(2, 9, 0.1)]
    prob, n = qt.fluid.threshold_problem(classes, 0.5, 0.01, integer=False)
    prob.solve()
    prob_lb = np.maximum(n.value, 0)
    eq = qt.fluid.equilibrium(classes, 0.5, 0.01)
    # lower bound n ≥ 1 is not binding when ΔT* λ_j ≥ 1; scale λ so it is not
    if np.all(eq.per_stage >= 1):
        assert np.allclose(prob_lb, eq.per_stage, rtol=1e-5)
        assert prob.value == pytest.approx(eq.memory, rel=1e-5)


def test_wait_thresholds_batch_limit_rules():
    low = [qt.RequestClass(10, 10, 1000.0), qt.RequestClass(10, 20, 1000.0)]
    B = 256
    paper = qt.fluid.wait_thresholds(low, 0.1, 0.0, rule="paper", batch_limit=B)
    fluid_rule = qt.fluid.wait_thresholds(low, 0.1, 0.0, batch_limit=B)
    assert paper.tolist() == [int(Fraction(B, 2) / 11), int(Fraction(B, 2) / 21)]
    assert fluid_rule.tolist() == [int(Fraction(B * 1000, 32000))] * 2
    with pytest.raises(ValueError, match="batch_limit"):
        qt.fluid.wait_thresholds(low, 0.1, 0.0, rule="paper")


def test_wait_thresholds_unstable():
    with pytest.raises(UnstableError):
        qt.fluid.wait_thresholds(PROP4, 0.1, 0.1, margin=0.2)    # d1 W = 0.9 ≥ 0.8


def test_eq11_memory_printed_vs_exact():
    """(11) gives 1.5 n1 + 2.5 n2 on the Prop-4 types; the segments hold 3 n1 + 3 n2."""
    for n in [(1, 1), (10, 6), (3, 7)]:
        assert qt.fluid.nested_memory(n, SEG, form="paper") == 1.5 * n[0] + 2.5 * n[1]
        assert qt.fluid.nested_memory(n, SEG) == 3 * n[0] + 3 * n[1]


def test_segment_design_memory_formula_for_equal_segments():
    """§7.2's Σ n_i (l + iΔ/2)Δ for lengths 1..m in L equal segments undercounts the exact
    memory by n_1·l (stage 0) plus n_i·Δ((i−1)Δ + 1)/2 (wrong mean stage of segment i)."""
    seg = qt.fluid.segment_design(5, np.arange(1, 13), np.ones(12), 4)      # Δ = 3
    n = np.array([7, 5, 3, 2])
    printed = qt.fluid.nested_memory(n, seg, form="segment_design")
    assert printed == sum(n[i] * (5 + (i + 1) * 3 / 2) * 3 for i in range(4))
    gap = 7 * 5 + sum(n[i] * 3 * (i * 3 + 1) / 2 for i in range(4))
    assert qt.fluid.nested_memory(n, seg) - printed == pytest.approx(gap)


def test_nested_memory_exact_is_sum_over_stages():
    seg = qt.fluid.segments(7, [3, 8, 20], [1, 2, 3])
    n = (5, 4, 2)
    stages = [range(0, 4), range(4, 9), range(9, 21)]
    brute = sum(n[i] * sum(7 + k for k in stages[i]) for i in range(3))
    assert qt.fluid.nested_memory(n, seg) == brute


def test_theorem2_condition_10():
    c = qt.fluid.nested_condition((10, 6), SEG, 0.1, 0.1)
    assert c.strict and c.iteration_time == pytest.approx(4.9) and c.arrivals == pytest.approx(9.8)
    tail = qt.fluid.nested_condition((2, 1), SEG, 0.1, 0.1)        # tail sums: ratio = p
    assert tail.status[1] == "critical"
    with pytest.raises(ValueError, match="condition \\(10\\)"):
        qt.fluid.nested_condition((2, 1), SEG, 0.1, 0.1, require="strict")


@pytest.mark.parametrize("n_prev,n,p", [(10, 6, 0.5), (10, 9, 0.5), (100, 60, 0.5), (7, 2, 0.2)])
def test_lemma8_theta_is_the_root_of_16(n_prev, n, p):
    th = qt.fluid.theta(n_prev, n, p)
    x = sp.Float(th, 30)
    val = sp.exp(-x * n) * (1 - p + p * sp.exp(x)) ** n_prev
    assert abs(float(val) - 1) < 1e-9 and th > 0
    assert th >= qt.fluid.theta_bound(n_prev, n, p)                       # (18), proved


def test_theorem2_printed_theta_bound_fails():
    th = qt.fluid.theta(10, 6, 0.5)
    assert th < qt.fluid.theta_bound(10, 6, 0.5, printed=True)


def test_theta_edge_cases():
    assert qt.fluid.theta(5, 5, 0.5) == np.inf
    with pytest.raises(ValueError, match="no positive root"):
        qt.fluid.theta(10, 5, 0.5)
    with pytest.raises(ValueError, match="p="):
        qt.fluid.theta(10, 5, 1.0)


def test_nested_memory_bound_terms():
    mb = qt.fluid.nested_memory_bound((10, 6), SEG, delta=0.1, iterations=1000)
    th = qt.fluid.theta(10, 6, 0.5)
    assert mb.batch == 48 and mb.queue == 6 * (1 + 1)
    assert mb.tail == pytest.approx(2 / th * np.log(1 * 1000 / 0.1))
    assert mb.total == pytest.approx(mb.batch + mb.queue + mb.tail)
    fig = qt.fluid.nested_memory_bound((10, 6), SEG, delta=0.1, horizon=200, log="figure")
    assert fig.log_term == pytest.approx(np.log(201 / 0.1))
    thm = qt.fluid.nested_memory_bound((10, 6), SEG, delta=0.1, horizon=100, d0=0.1, log="theorem")
    assert thm.log_term == pytest.approx(np.log(2 * 1000 / 0.1))


def test_segment_design_groups_types():
    lengths, rates = np.arange(1, 11), np.arange(1, 11, dtype=float)
    seg = qt.fluid.segment_design(2, lengths, rates, 3)
    assert seg.bounds.tolist() == [4, 7, 10]
    assert seg.rates.tolist() == [10.0, 18.0, 27.0]
    assert np.allclose(seg.p, [45 / 55, 27 / 45])
    same = qt.fluid.segment_design(2, lengths, rates, 10)
    assert same.bounds.tolist() == lengths.tolist()
    with pytest.raises(ValueError, match="L=11"):
        qt.fluid.segment_design(2, lengths, rates, 11)


def test_nested_thresholds_rules():
    n = qt.fluid.nested_thresholds(SEG, 0.1, 0.1, margin=0.05)
    assert qt.fluid.nested_condition(n, SEG, 0.1, 0.1).strict
    tails = qt.fluid.nested_thresholds(qt.fluid.segments(10, [20, 40, 80, 160], [20, 40, 80, 160]),
                                       0, 0, rule="tail_sum", batch_limit=1000)
    assert tails.tolist() == [int(np.ceil(1000 * r / (20 * 300 + 20 * 280 + 40 * 240 + 80 * 160)))
                              for r in (300, 280, 240, 160)]


def test_time_varying_condition_with_constant_rates_is_condition_10():
    tv = qt.fluid.time_varying_condition((10, 6), SEG, lambda t: np.ones(2), 0.1, 0.1,
                                         horizon=20)
    assert tv.arrivals == pytest.approx(2 * 4.9, rel=1e-6)
    assert np.allclose(tv.p_star, [0.5])
    assert tv.holds


def test_memory_decomposition_marks_infeasible_L():
    lengths = np.arange(1, 21)
    rates = np.full(20, 0.05)
    out = qt.fluid.memory_decomposition(1, lengths, rates, [1, 4, 20], 0.1, 0.006, delta=0.1,
                                        horizon=100)
    assert np.isinf(out["total"][0])               # one segment: (14) has no solution
    assert np.all(np.isfinite(out["total"][1:]))
    assert np.allclose(out["total"], out["batch"] + out["queue"] + out["tail"])

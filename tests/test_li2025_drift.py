"""Lyapunov drift of seed 004: the linear sketch (L206), App. B's function with the corrected
constant L, exact one-step drift, and the drift certificate (spec §3.2–§3.3, §6 item 2)."""

import itertools
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

import queuetheory as qt
from queuetheory.bounds import (
    LinearLyapunov,
    QuadraticLyapunov,
    appendix_b_constant,
    certificate_states,
    drift_certificate,
    length_pmf,
    one_step_drift,
)
from queuetheory.errors import UnstableError
from queuetheory.papers.li2025 import certificate_workload

B = 16
WL = certificate_workload()          # prompts 1 + Bin(6, ½), outputs 1 + Bin(14, ½), λ = 1
L_FIX = appendix_b_constant(WL)
LYAP = QuadraticLyapunov(1.0, WL.mean_prompt, WL.mean_output, B, L_FIX)


def test_printed_moment_inequality_fails_for_short_outputs():
    """E[(d+1)²] ≤ 2E[d²] (L426): false for d ≡ 1 and d ≡ 2, true pointwise from d = 3."""
    for k, holds in ((1, False), (2, False), (3, True), (10, True)):
        assert ((k + 1) ** 2 <= 2 * k**2) is holds
        assert (appendix_b_constant(k) == k**2) is holds      # corrected L = max(...)
    assert appendix_b_constant(1) == 2 and appendix_b_constant(1, printed=True) == 1
    pmf = {1: 0.5, 2: 0.5}
    assert appendix_b_constant(pmf) == pytest.approx(float(Fraction(13, 4)))


def test_corrected_constant_bounds_the_arrival_term():
    for law in (1, 2, {1: 0.3, 5: 0.7}, stats.binom(14, 0.5, loc=1), np.array([1, 1, 2, 9])):
        v, p = length_pmf(law)
        L = appendix_b_constant(law)
        assert np.dot(p, (v + 1.0) ** 2) <= 2 * L + 1e-12 and np.dot(p, v**2.0) <= L + 1e-12


def test_appendix_b_constants():
    assert LYAP.eps_prime == pytest.approx(16 - 12)
    assert LYAP.eps == min(LYAP.eps_prime, L_FIX)
    assert LYAP.B == pytest.approx(2 * B * (4 * L_FIX * B / LYAP.eps) ** 2 + B)
    with pytest.raises(UnstableError, match="ε'"):
        QuadraticLyapunov(2.0, 4, 8, B, L_FIX)               # λ(m_p+m_d) = 24 > b


small_states = st.lists(st.tuples(st.integers(0, 40), st.integers(1, 40)), min_size=1,
                        max_size=40)


@settings(max_examples=100, deadline=None)
@given(reqs=small_states, name=st.sampled_from(["Sarathi", "Orca", "VLLMVanilla",
                                                "FasterTransformer"]))
def test_service_change_is_delta_of_L424(reqs, name):
    """f(post-decision state) − f(x) equals −Δ(X) of L424, departures included."""
    p, d = (np.array(x) for x in zip(*reqs, strict=True))
    policy = getattr(qt.policies, name)(B)
    batch = policy.schedule(qt.bounds.dtmc_state(p, d))
    chunk = np.zeros_like(p)
    dec = np.zeros_like(d)
    chunk[batch.prefill] = batch.chunk
    dec[batch.decode] = 1
    p2, d2 = p - chunk, d - dec
    stay = d2 > 0
    direct = LYAP(p2[stay], d2[stay]) - LYAP(p, d)
    assert LYAP.service_change(p, d, chunk, dec).sum() == pytest.approx(direct, abs=1e-9)


def test_exact_drift_equals_brute_force_enumeration():
    """Bernoulli arrivals, tiny length laws: enumerate every outcome of the slot."""
    prompt, output, lam = {1: 0.25, 3: 0.75}, {1: 0.5, 2: 0.3, 4: 0.2}, 0.4
    wl = qt.Workload([qt.RequestClass(np.array([1, 3, 3, 3]),
                                      np.array([1] * 5 + [2] * 3 + [4] * 2), lam)],
                     arrivals="bernoulli")
    lyap = QuadraticLyapunov(lam, 2.5, 1.9, 4, appendix_b_constant(output))
    policy = qt.policies.Sarathi(4)
    state = ([2, 0, 5], [3, 1, 2])
    post_p, post_d = np.array([0, 0, 4]), np.array([3, 0, 2])    # Sarathi: decode, then 2 + 1
    keep = post_d > 0
    expected = (1 - lam) * lyap(post_p[keep], post_d[keep])
    for (vp, pp), (vd, pd) in itertools.product(prompt.items(), output.items()):
        expected += lam * pp * pd * lyap(np.r_[post_p[keep], vp], np.r_[post_d[keep], vd])
    expected -= lyap(*state)
    got = one_step_drift(policy, state, lyap, wl, method="exact")
    assert got.exact and got.stderr == 0
    assert got.value == pytest.approx(expected, rel=1e-12)


def test_monte_carlo_drift_agrees_within_four_standard_errors():
    state = ([1] + [0] * 40, [5] * 41)
    for policy in (qt.policies.Sarathi(B), qt.policies.VLLMVanilla(B)):
        exact = one_step_drift(policy, state, LYAP, WL, method="exact")
        mc = one_step_drift(policy, state, LYAP, WL, method="mc", n_samples=20_000, seed=3)
        assert not mc.exact and mc.stderr > 0
        assert abs(mc.value - exact.value) < 4 * mc.stderr


def test_unbounded_support_refuses_exact_drift():
    wl = qt.Workload([qt.RequestClass(stats.poisson(3, loc=1), stats.poisson(7, loc=1), 1.0)],
                     arrivals="poisson-slot")
    lyap = QuadraticLyapunov(1.0, 4, 8, B, 100.0)
    with pytest.raises(ValueError, match="unbounded support"):
        one_step_drift(qt.policies.Sarathi(B), ([0], [3]), lyap, wl, method="exact")
    auto = one_step_drift(qt.policies.Sarathi(B), ([0], [3]), lyap, wl, method="auto")
    assert not auto.exact and auto.stderr > 0


def test_policy_budget_must_match():
    with pytest.raises(ValueError, match="token_budget"):
        one_step_drift(qt.policies.Sarathi(8), ([0], [3]), LYAP, WL)


def test_certificate_states_lie_beyond_B_and_case_two_needs_a_long_output():
    """App. B step (iii): with avail < b and f ≥ B some d' ≥ 4Lλb/ε."""
    bound = 4 * LYAP.L * LYAP.lam * B / LYAP.eps
    seen = set()
    for family, p, d in certificate_states(LYAP, n_random=30):
        seen.add(family)
        assert LYAP(p, d) >= LYAP.B
        if p.sum() + np.count_nonzero(p == 0) < B:
            assert d.max() >= bound
    assert seen == {"random", "few", "prefill+decoders", "giant-prefill", "boundary"}


@pytest.mark.parametrize("policy", [qt.policies.Sarathi(B), qt.policies.Orca(B),
                                    qt.policies.Sarathi(B, order="sjf_decode"),
                                    qt.policies.StaticPriority(B, [0])])
def test_strictly_work_conserving_policies_are_certified(policy):
    cert = drift_certificate(policy, WL, B, n_random=60)
    assert cert.certified and cert.worst_drift <= -cert.epsilon / 2 + 1e-9


@pytest.mark.parametrize("policy", [qt.policies.VLLMVanilla(B), qt.policies.FasterTransformer(B)])
def test_non_work_conserving_policies_have_positive_drift_beyond_B(policy):
    cert = drift_certificate(policy, WL, B, n_random=60)
    assert cert.worst_drift > 0 and not cert.certified
    p, d = cert.worst_state
    assert LYAP(np.array(p), np.array(d)) >= LYAP.B
    again = one_step_drift(policy, (p, d), LYAP, WL)
    assert again.value == pytest.approx(cert.worst_drift)


def test_printed_constant_breaks_B1_and_corrected_one_holds():
    wl = qt.Workload([qt.RequestClass(stats.binom(6, 0.5, loc=1), np.array([1, 2]), 1.0)],
                     arrivals="poisson-slot")
    printed = drift_certificate(qt.policies.Sarathi(8), wl, 8, printed_constant=True,
                                n_random=30)
    fixed = drift_certificate(qt.policies.Sarathi(8), wl, 8, n_random=30)
    assert not printed.certified and printed.worst_drift > printed.threshold
    assert fixed.certified


def test_user_states_are_lifted_and_checked():
    cert = drift_certificate(qt.policies.VLLMVanilla(B), WL, B, states=[([1, 0], [5, 5])])
    assert cert.states_checked == 1 and cert.worst_family == "given" and cert.worst_drift > 0


def test_linear_lyapunov_drift_per_slot():
    """L206: a full batch gives λ(m_p+m_d) − b/t_b per slot; a partial one can be positive."""
    tm = qt.PiecewiseLinearTime(c=3, a=0.25, b0=8, slot=1)
    t_b = tm.token_time(B)
    lyap = LinearLyapunov(B, t_b)
    full = one_step_drift(qt.policies.Sarathi(B), ([40], [5]), lyap, WL, time_model=tm)
    assert full.load == B
    assert full.value == pytest.approx(12 - B / t_b)
    lone = one_step_drift(qt.policies.Sarathi(B), ([0], [10**6]), lyap, WL, time_model=tm)
    assert lone.load == 1 and lone.value == pytest.approx(12 - 1 + (tm.token_time(1) - 1) * B / t_b)
    assert lone.value > 0

"""Claims of Chen, Ye, Zhou — Adaptively robust LLM inference under prediction uncertainty.
Fluid-model claims are checked on the matrices of Lemma 4.6 / Cor. 4.8 and the
closed forms of :mod:`queuetheory.bounds.competitive_closed_forms`; policy claims run the
schedulers of :mod:`queuetheory.policies.robust` on the engine (round model, unit time)."""

from __future__ import annotations

import functools
from fractions import Fraction

import numpy as np
import pandas as pd
import scipy.linalg
import sympy as sp

from ..bounds import competitive as cp
from ..bounds import competitive_closed_forms as cf
from ..policies.robust import HSF, AEll, AMax, AMin, ARandom
from ..policies.robust_experiments import (
    corresponding_order,
    input_sequence,
    is_delayed,
    latency_experiment,
    paper_trace,
    run_rounds,
    tel,
)
from .base import Outcome, claim


def _verdict(ok: bool, bad: str = "refuted") -> str:
    return "confirmed" if ok else bad


# ---- worked examples ---------------------------------------------------------------------------
@claim("chen2025.example3_2", statement="""Example 3.2: n=5, s=1, o_i ∈ [1,4] with true o_i = 1,
       M=10: TEL(H-SF) = 5 and TEL(A_max) = 9.""", expected="confirmed")
def _example32(quick):
    tr = paper_trace([1] * 5, 1, 1, 4)
    seeds = range(3 if quick else 20)
    h = {tel(run_rounds(HSF(), tr, 10, seed=s)) for s in seeds}
    m = {tel(run_rounds(AMax(), tr, 10, seed=s)) for s in seeds}
    ok = h == {5.0} and m == {9.0}
    return Outcome(_verdict(ok), f"TEL(H-SF) = {sorted(h)}, TEL(A_max) = {sorted(m)} over seeds",
                   {"hsf": sorted(h), "amax": sorted(m)})


@claim("chen2025.example8_2", statement="""Example 8.2: M=7, s=1, o=(1,2,3,4): H-SF produces
       I_3 = ({1,2,3},∅,{4}) with TEL 12; I_1 = ({1,3},∅,{2},{4}), I_2 = ({3},{1,2},∅,{4}) and
       I_3 preserve corresponding order pairwise, I_3 ≤ I_1, I_3 ≤ I_2 (Def. 8.1).""",
       expected="confirmed")
def _example82(quick):
    res = run_rounds(HSF(), paper_trace([1, 2, 3, 4], 1), 7)
    i3 = input_sequence(res)
    i1 = [{1, 3}, set(), {2}, {4}]
    i2 = [{3}, {1, 2}, set(), {4}]
    checks = {
        "I_3": i3 == [{1, 2, 3}, set(), {4}],
        "TEL=12": tel(res) == 12,
        "order(1,2)": corresponding_order(i1, i2),
        "order(1,3)": corresponding_order(i1, i3),
        "order(2,3)": corresponding_order(i2, i3),
        "I3<=I1": is_delayed(i3, i1),
        "I3<=I2": is_delayed(i3, i2),
    }
    return Outcome(_verdict(all(checks.values())),
                   f"H-SF gives {[sorted(s) for s in i3]}, TEL {tel(res):g}", checks)


# ---- the Rayleigh quotient ----------------------------------------------------------------------
@claim("chen2025.lemma4_9", statement="""Lemma 4.9: A_u and B_u of Cor. 4.8 are positive definite
       for every u ≥ 1 (checked for u ≤ 1000).""", expected="confirmed")
def _lemma49(quick):
    us = list(range(1, 61)) + ([200, 500, 1000] if quick else list(range(70, 1001, 10)))
    chol = True
    for u in us:                       # Cholesky succeeds iff the matrix is positive definite
        for M in cp.amin_matrices(u):
            try:
                scipy.linalg.cholesky(M, lower=True)
            except np.linalg.LinAlgError:
                chol = False
    lam = {u: [float(np.linalg.eigvalsh(M)[0]) for M in cp.amin_matrices(u)] for u in (10, 60)}
    d = sp.symbols("d", positive=True)
    xi = sp.symbols("xi", real=True)
    g_hat = 2 * sp.integrate(sp.cos(xi * d) * (2 * sp.exp(-d) - sp.exp(-2 * d)), (d, 0, sp.oo),
                             conds="none")
    fourier = sp.simplify(g_hat - 12 / ((1 + xi**2) * (4 + xi**2))) == 0
    ok = chol and fourier and min(min(v) for v in lam.values()) > 0
    return Outcome(_verdict(ok), f"Cholesky of A_u and B_u succeeds for {len(us)} sizes up to "
                   f"u={max(us)}: {chol}; λ_min(A_60) = {lam[60][0]:.3g}, λ_min(B_60) = "
                   f"{lam[60][1]:.4f}; ĝ(ξ) = 12/((1+ξ²)(4+ξ²)): {fourier}",
                   {"us": us, "cholesky": chol, "lambda_min": lam, "fourier": fourier})


@claim("chen2025.corollary4_8", statement="""Corollary 4.8: at s=0, ℓ=1 the A_min ratio of Lemma
       4.6 is xᵀA_u x/xᵀB_u x with a_ij = min²/(ij)(½(i+j)² − min²), b_ij = min(i,j)².""",
       expected="confirmed")
def _cor48(quick):
    exact = True
    for u in range(1, 13):
        A, B = cp.amin_matrices(u, exact=True)
        for (a, b), v in np.ndenumerate(A):
            i, j = Fraction(a + 1), Fraction(b + 1)
            m = min(i, j)
            exact &= v == m * m / (i * j) * ((i + j) ** 2 / 2 - m * m) and B[a, b] == m * m
    rng = np.random.default_rng(3)
    gap = 0.0
    for s, ell, u in [(0, 1, 10), (0, 2, 9), (1, 1, 12), (2.5, 3, 15), (20, 5, 30)]:
        for _ in range(5):
            x = rng.random(u - ell + 1)
            A, B = cp.amin_matrices(u, ell, s)
            gap = max(gap, abs(cp.lemma46_ratio(x, ell, s) - x @ A @ x / (x @ B @ x)),
                      abs(cp.rayleigh(x, ell, s) - cp.lemma46_ratio(x, ell, s)))
    ok = exact and gap < 1e-10
    return Outcome(_verdict(ok), f"exact match of Cor. 4.8 for u ≤ 12: {exact}; Lemma 4.6 "
                   f"vs matrix form (any s, ℓ, u): max gap {gap:.1e}", {"exact": exact, "gap": gap})


@claim("chen2025.trace_identity", statement="""L338–L370: B_u⁻¹ is tridiagonal with the printed
       entries, and tr(B_u⁻¹A_u) = T_1 + 2T_2 = H_u, the u-th harmonic number.""",
       expected="confirmed")
def _trace(quick):
    us = [2, 3, 5, 10, 40] if quick else [2, 3, 5, 10, 40, 80]
    results = {u: cp.trace_identity(u).holds for u in us}
    printed = True
    for u in (2, 5, 8):
        Bi = cp.b_inverse(u, exact=True)
        for i in range(1, u + 1):
            want = Fraction(1, 2 * u - 1) if i == u else Fraction(4 * i, 4 * i * i - 1)
            printed &= Bi[i - 1, i - 1] == want
            if i < u:
                printed &= Bi[i - 1, i] == Bi[i, i - 1] == Fraction(-1, 2 * i + 1)
    ok = all(results.values()) and printed
    return Outcome(_verdict(ok), f"tr(B⁻¹A) = H_u exactly for u ∈ {us}; printed B⁻¹: {printed}",
                   {"holds": results, "printed_b_inverse": printed})


@claim("chen2025.theorem4_3", statement="""Theorem 4.3 / Cor. 4.8 (the period model of Lemma 4.6):
       as M→∞, CR(A_min) = ρ(C_u),
       C_u = B_u⁻¹A_u, and ρ(C_u) ≤ tr(C_u) = H_u = O(log α⁻¹); the worst case is attained by a
       histogram (the top eigenvector is positive).""", expected="confirmed")
def _thm43(quick):
    us = list(range(1, 101)) + list(range(150, 1001, 50 if quick else 10))
    rows = [(u, cp.amin_ratio(u)) for u in us]
    harm = np.cumsum(1 / np.arange(1, max(us) + 1))
    below = all(r.value <= harm[u - 1] + 1e-12 for u, r in rows)
    positive = all(r.one_signed for _, r in rows)
    vals = {u: r.value for u, r in rows}
    ok = below and positive and abs(vals[2] - 1.25) < 1e-12
    return Outcome(_verdict(ok), f"ρ(C_2) = {vals[2]:.6f}, ρ(C_10) = {vals[10]:.6f}, ρ(C_100) = "
                   f"{vals[100]:.6f}, ρ(C_1000) = {vals[1000]:.6f} ≤ H_1000 = {harm[999]:.4f}; "
                   f"eigenvector positive for all {len(us)} u: {positive}",
                   {"rho": vals, "below_harmonic": below, "one_signed": positive})


@claim("chen2025.figure1", statement="""Figure 1: ρ(C_u) (s=0, ℓ=1) is fitted by
       0.2555 ln(u+0.2793) + 1.1587 with R² > 0.9999.""", expected="qualified")
def _figure1(quick):
    us = np.arange(10, 1001, 20 if quick else 1)
    rho = np.array([cp.amin_ratio(int(u)).value for u in us])
    paper = 0.2555 * np.log(us + 0.2793) + 1.1587
    gap = np.abs(rho - paper)
    fit = cp.fit_log_curve(us, rho)
    ok_a_c = 0.25 <= fit.a <= 0.26 and 1.14 <= fit.c <= 1.17 and fit.r2 > 0.9999
    b_ok = abs(fit.b - 0.2793) < 0.1
    verdict = "confirmed" if ok_a_c and b_ok else ("qualified" if ok_a_c else "refuted")
    return Outcome(verdict, f"refit a={fit.a:.4f}, b={fit.b:.3f}, c={fit.c:.4f}, R²={fit.r2:.7f}; "
                   f"paper's curve within {gap.max():.4f} (u ≥ 10), "
                   f"{gap[us >= 100].max():.4f} (u ≥ 100)",
                   {"a": fit.a, "b": fit.b, "c": fit.c, "r2": fit.r2,
                    "max_gap": float(gap.max()), "max_gap_100": float(gap[us >= 100].max())},
                   note="The log law, a and c reproduce; the shift b is not identified by the "
                        "data (the refit's b differs from 0.2793 while R² stays > 0.9999), so "
                        "the curve is one of many equally good fits.")


# ---- A_max, A_random --------------------------------------------------------------------------
def _sim_ratio(policy, trace, memory, seeds):
    h = tel(run_rounds(HSF(), trace, memory))
    return float(np.mean([tel(run_rounds(policy, trace, memory, seed=s)) for s in seeds])) / h


@claim("chen2025.theorem3_3", statement="""Theorem 3.3: CR(A_max) ≤ α⁻¹(1+α⁻¹)/2 + O(1/M).""",
       expected="confirmed")
def _thm33(quick):
    rng = np.random.default_rng(7)
    worst = {}
    for ell, u in [(2, 10), (5, 20), (1, 4)]:
        bound = float(cf.amax_upper_bound(ell / u))
        ratios = []
        for shape in ("two-point", "uniform"):
            for _ in range(2 if quick else 6):
                n = 120
                o = (np.where(rng.random(n) < rng.random(), ell, u) if shape == "two-point"
                     else rng.integers(ell, u + 1, n))
                ratios.append(_sim_ratio(AMax(), paper_trace(o, 1, ell, u), 4 * u,
                                         range(2 if quick else 5)))
        fluid = cf.amax_worst_case(u, ell)[0]
        worst[(ell, u)] = (max(ratios), fluid, bound)
    ok = all(m <= b and f <= b for m, f, b in worst.values())
    txt = "; ".join(f"α={e}/{u}: sim max {m:.2f}, fluid sup {f:.2f} ≤ {b:.2f}"
                    for (e, u), (m, f, b) in worst.items())
    return Outcome(_verdict(ok), txt, {str(k): v for k, v in worst.items()})


@claim("chen2025.theorem3_4", statement="""Theorem 3.4: CR(A_max) ≥ α⁻¹(1+α^{-1/2})/2.""",
       expected="refuted")
def _thm34(quick):
    alphas = [(1, 4), (1, 10), (2, 20), (1, 100)] if quick else [(1, 2), (1, 4), (1, 10),
                                                                 (2, 20), (1, 100), (1, 400)]
    rows = {}
    for ell, u in alphas:
        a = ell / u
        rows[f"{ell}/{u}"] = {"claimed": float(cf.thm34_claimed(a)),
                              "construction_sup": float(cf.thm34_construction_sup(a)),
                              "fluid_worst": cf.amax_worst_case(u, ell)[0]}
    # the proof's own construction, maximised numerically over r, for a grid of α
    grid = np.linspace(0.01, 0.99, 99)
    r = np.logspace(-3, 3, 4001)
    sup_num = np.array([cf.thm34_construction(a, r).max() for a in grid])
    below = bool(np.all(sup_num < cf.thm34_claimed(grid)))
    fluid_below = all(v["fluid_worst"] < v["claimed"] for v in rows.values())
    refuted = below and fluid_below
    k = next(iter(rows))
    return Outcome("refuted" if refuted else "confirmed",
                   f"α=1/4: claimed ≥ {rows[k]['claimed']:.3f}, the proof's construction gives "
                   f"{rows[k]['construction_sup']:.3f}, A_max's fluid worst case over all "
                   f"histograms {rows[k]['fluid_worst']:.3f}",
                   {"rows": rows, "construction_below_claim_all_alpha": below},
                   note="Counterexample: at α=1/4 (ℓ=1, u=4, s=0) the largest fluid ratio of A_max "
                        "over all length histograms is below the claimed lower bound; the proof's "
                        "construction reaches only (1/(2α))(1+√(2/(1+α))) ≈ 1.21/α. The supported "
                        "rate is Θ(α⁻¹) from below, O(α⁻²) from above.")


@claim("chen2025.theorem8_6_part2", statement="""Theorem 8.6 Part 2: CR(A_random) ≤ (1+α⁻¹)/2 +
       O(1/M).""", expected="confirmed")
def _thm86b(quick):
    a, t = sp.symbols("alpha t", positive=True)
    # s = 0, u = 1, ℓ = α: the ratio 1 + r(w_u − w_ℓ)/(w_ℓ r² + 2 w_ℓ r + w_u) at r = 1/α
    expr = 1 + t * (1 - a**2) / (a**2 * t**2 + 2 * a**2 * t + 1)
    tight = sp.simplify(expr.subs(t, 1 / a) - (1 + 1 / a) / 2) == 0
    worst = {f"{ell}/{u}": (cf.arandom_worst_case(u, ell)[0], float((1 + u / ell) / 2))
             for ell, u in [(1, 2), (1, 4), (2, 10), (1, 30)]}
    rng = np.random.default_rng(11)
    sims = []
    for ell, u in [(2, 10), (5, 20)]:
        o = np.where(rng.random(150) < 0.8, ell, u)
        sims.append((_sim_ratio(ARandom(), paper_trace(o, 1, ell, u), 4 * u, range(3)),
                     (1 + u / ell) / 2))
    ok = (tight and all(w <= b + 1e-9 for w, b in worst.values())
          and all(r <= b for r, b in sims))
    return Outcome(_verdict(ok), f"fluid sup over all histograms = (1+α⁻¹)/2 (e.g. α=1/4: "
                   f"{worst['1/4'][0]:.4f}), tight at N_ℓ/N_u = 1/α: {tight}; simulated "
                   f"{', '.join(f'{r:.2f} ≤ {b:.1f}' for r, b in sims)}",
                   {"worst": worst, "sims": sims, "tight": tight})


@claim("chen2025.theorem8_6_part1", statement="""Theorem 8.6 Part 1: for any feasible policy,
       the worst case over o ∈ [ℓ,u]^n equals the worst case over o ∈ {ℓ,u}^n.""",
       expected="refuted")
def _thm86a(quick):
    found = {}
    for u in range(3, 12):
        rho = cp.amin_ratio(u).value
        two = float(cf.amin_two_point_sup(1 / u))
        amax_all, _ = cf.amax_worst_case(u, 1)
        amax_two = float(cf.thm34_construction_sup(1 / u))
        if "A_min" not in found and rho > two + 1e-9:
            found["A_min"] = {"u": u, "all": rho, "two_point": two}
        if "A_max" not in found and amax_all > amax_two + 1e-9:
            found["A_max"] = {"u": u, "all": amax_all, "two_point": amax_two}
    big = {"rho_1000": cp.amin_ratio(1000).value, "two_point_sup": 1.5}
    c = found.get("A_min")
    return Outcome("refuted" if found else "confirmed",
                   (f"smallest counterexample ℓ=1, u={c['u']}, s=0: A_min's worst case "
                    f"{c['all']:.4f} over [ℓ,u] vs {c['two_point']:.4f} over {{ℓ,u}}; ρ(C_1000) "
                    f"= {big['rho_1000']:.3f} > 1.5" if c else "no counterexample found"),
                   {**found, **big},
                   note="Part 1 contradicts Thm 4.3 with Thm 5.1 (A_min's two-point ratio is "
                        "≤ 1.5, its interval ratio grows like ln u). It fails in the fluid model "
                        "for A_max as well (full-support worst histogram); it holds for A_random, "
                        "whose worst histogram is two-point.")


# ---- two-point, geometric, LG -------------------------------------------------------------------
@claim("chen2025.theorem5_1", statement="""Theorem 5.1: with two-point outputs, CR(A_min) ≤
       (3−α)/2 + O(1/M) ≤ 3/2.""", expected="confirmed")
def _thm51(quick):
    a, t = sp.symbols("alpha t", positive=True)
    ell, u = a, 1
    num = ell * (ell * t + u) * (t + a + 2 * (u - ell) / u) + u**2 * ((u - ell) / u) ** 2
    den = ell**2 * t**2 + 2 * ell**2 * t + u**2
    closed = 1 + a * (1 - a**2) * t / (a**2 * t**2 + 2 * a**2 * t + 1)
    symbolic = sp.simplify(num / den - closed) == 0
    tight = sp.simplify(closed.subs(t, 1 / a) - (3 - a) / 2) == 0
    numeric = abs(float(cf.amin_two_point(0.3, 1 / 0.3)) - 1.35) < 1e-12
    gap = 0.0
    for ell_, u_ in [(1, 2), (1, 4), (2, 8), (10, 100), (3, 5)]:
        A, B = cp.amin_matrices(u_, ell_)
        idx = [0, u_ - ell_]
        w = np.linalg.eigvals(np.linalg.solve(B[np.ix_(idx, idx)], A[np.ix_(idx, idx)])).real.max()
        gap = max(gap, abs(w - (3 - ell_ / u_) / 2))
    ok = symbolic and tight and numeric and gap < 1e-10
    return Outcome(_verdict(ok), f"Lemma 4.6 on {{ℓ,u}} = 1 + α(1−α²)t/(α²t²+2α²t+1): {symbolic}; "
                   f"= (3−α)/2 at t = 1/α: {tight}; restricted eigenvalue gap {gap:.1e}",
                   {"symbolic": symbolic, "tight": tight, "gap": gap})


@claim("chen2025.theorem5_2", statement="""Theorem 5.2: with two-point outputs, CR(A_ℓ) ≤
       1 + α/(2(1−α)) for α ≤ ½ and ≤ 1 + 2α² for α ≥ ½ (+O(1/M)).""", expected="confirmed")
def _thm52(quick):
    alphas = np.linspace(0.01, 0.99, 99)
    t = np.concatenate([[0.0], np.logspace(-4, 4, 20001)])
    sup = np.array([cf.aell_two_point(a, t).max() for a in alphas])
    bound = cf.aell_two_point_sup(alphas)
    analytic = bool(np.all(sup <= bound + 1e-9) and np.all(bound - sup < 1e-3))
    ell, u = 5, 50
    rng = np.random.default_rng(5)
    o = rng.permutation(np.repeat([ell, u], [400, 40]))
    sim = _sim_ratio(AEll(), paper_trace(o, 0, ell, u), 600, range(2 if quick else 5))
    fluid = float(cf.aell_two_point(ell / u, 10.0))
    ok = analytic and sim <= float(cf.aell_two_point_sup(ell / u)) + 0.02
    return Outcome(_verdict(ok), f"sup_t on a grid meets the bound for 99 α: {analytic}; simulated "
                   f"A_ℓ at α=0.1, N_ℓ/N_u=10: {sim:.4f} (fluid {fluid:.4f}, bound "
                   f"{float(cf.aell_two_point_sup(ell / u)):.4f})",
                   {"analytic": analytic, "sim": sim, "fluid": fluid})


@claim("chen2025.alpha_star", statement="""L431–L439: A_ℓ's two-point bound beats A_min's iff
       α < α* = (3−√5)/2 ≈ 0.382.""", expected="confirmed")
def _alpha_star(quick):
    root = cf.two_point_threshold(exact=True)
    exact = sp.simplify(root - (3 - sp.sqrt(5)) / 2) == 0
    grid = np.linspace(0.005, 0.995, 199)
    better = cf.aell_two_point_sup(grid) < cf.amin_two_point_sup(grid)
    consistent = bool(np.all(better == (grid < float(root))))
    ok = exact and consistent
    return Outcome(_verdict(ok), f"α* = {sp.nsimplify(root)} = {float(root):.6f}; the switch "
                   f"point on a grid agrees: {consistent}", {"alpha_star": float(root)},
                   note="The paper's 'α² − 3α + 1 = 0' is the boundary of α² − 3α + 1 > 0.")


@claim("chen2025.geometric", statement="""§5.2, Fig. 3 (left): under geometric outputs the CR of
       A_min increases in q and is bounded by 1.7.""", expected="confirmed")
def _geometric(quick):
    qs = np.array([0.1, 0.3, 0.5, 0.7, 0.8, 0.9, 0.95, 0.97, 0.98, 0.99]
                  + ([] if quick else [0.995, 0.998]))
    vals = np.array([cf.geometric_ratio(q) for q in qs])
    limit = cf.geometric_limit(exact=True)
    ok = bool(np.all(np.diff(vals) > 0) and vals.max() < 1.7 and float(limit) < 1.7
              and abs(vals[qs == 0.99][0] - float(limit)) < 1e-3)
    return Outcome(_verdict(ok), f"CR_G(0.5) = {vals[2]:.4f}, CR_G(0.99) = {vals[9]:.5f}, limit "
                   f"q→1: {limit} = {float(limit):.6f} < 1.7", {"q": qs.tolist(),
                                                                 "cr": vals.tolist()})


@claim("chen2025.theorem5_3", statement="""Theorem 5.3: under LG(p) outputs, CR(A_min) =
       (1+q)²(1+3q+6q²+3q³+q⁴)/(1+2q+11q²+8q³+11q⁴+2q⁵+q⁶) ≤ 14/9.""", expected="confirmed")
def _thm53(quick):
    qs = [0.1, 0.3, 0.5, 0.7, 0.9, 0.95] + ([] if quick else [0.98, 0.99])
    gap = max(abs(cf.lg_ratio(q) - float(cf.lg_ratio_closed(q))) for q in qs)
    q = sp.symbols("q")
    f = ((1 + q) ** 2 * (1 + 3 * q + 6 * q**2 + 3 * q**3 + q**4)
         / (1 + 2 * q + 11 * q**2 + 8 * q**3 + 11 * q**4 + 2 * q**5 + q**6))
    dnum = sp.factor(sp.numer(sp.together(sp.diff(f, q))))
    increasing = all(dnum.subs(q, v) > 0 for v in np.linspace(0.01, 0.99, 99))
    limit = cf.lg_limit(exact=True)
    ok = gap < 1e-9 and increasing and limit == sp.Rational(14, 9)
    return Outcome(_verdict(ok), f"closed form vs matrix: max gap {gap:.1e}; increasing in q; "
                   f"sup = {limit}", {"gap": gap, "limit": str(limit)})


# ---- experiments (model form) ------------------------------------------------------------
_POLICIES = {"H-SF": HSF, "A_min": AMin, "A_min dynamic": lambda: AMin("dynamic"),
             "A_max": AMax, "A_max random": lambda: AMax("random")}


@functools.lru_cache(maxsize=64)
def _latency(setup, name, quick):
    n, memory = (200, 4000) if quick else (1000, 16000)
    df = latency_experiment({name: _POLICIES[name]()}, (setup,), n=n, memory=memory,
                            reps=1 if quick else 3)
    return float(df.iloc[0, 0])


def _exp(setups, names, quick):
    """Average latencies (rows: setups, columns: policies); runs shared between claims."""
    return pd.DataFrame({name: [_latency(s, name, quick) for s in setups] for name in names},
                        index=[str(s) for s in setups])


@claim("chen2025.experiment1", statement="""Exp. 1 (Fig. 5): with the interval [1,1000] A_max's
       average latency is far above A_min's, and A_min is nearly identical to H-SF.""",
       expected="qualified")
def _exp1(quick):
    df = _exp(("rough",), ("H-SF", "A_min", "A_max"), quick)
    r = df.loc["rough"]
    gap_max, gap_hsf = r["A_max"] / r["A_min"], r["A_min"] / r["H-SF"]
    verdict = ("confirmed" if gap_max > 3 and gap_hsf < 1.15
               else "qualified" if gap_max > 3 else "refuted")
    return Outcome(verdict, f"avg latency H-SF {r['H-SF']:.1f}, A_min {r['A_min']:.1f}, A_max "
                   f"{r['A_max']:.1f} rounds: A_max/A_min = {gap_max:.1f}, A_min/H-SF = "
                   f"{gap_hsf:.2f}", df.to_dict(),
                   note="A_min ≪ A_max reproduces; 'nearly identical to H-SF' does not in the "
                        "unit-time round model on LMSYS-like lengths (the paper's M and Vidur "
                        "time model are not given).")


@claim("chen2025.experiment2", statement="""Exp. 2 (Fig. 6): with bucketed intervals [1,100], …,
       A_max's latency is about halved relative to Exp. 1, and A_min (Alg. 5) approaches H-SF.""",
       expected="confirmed")
def _exp2(quick):
    df = _exp(("rough", "buckets"), ("H-SF", "A_min", "A_max"), quick)
    halved = df.loc["buckets", "A_max"] <= 0.5 * df.loc["rough", "A_max"]
    closer = (df.loc["buckets", "A_min"] / df.loc["buckets", "H-SF"]
              < df.loc["rough", "A_min"] / df.loc["rough", "H-SF"])
    return Outcome(_verdict(bool(halved and closer)),
                   f"A_max {df.loc['rough', 'A_max']:.1f} → {df.loc['buckets', 'A_max']:.1f}; "
                   f"A_min/H-SF {df.loc['rough', 'A_min'] / df.loc['rough', 'H-SF']:.2f} → "
                   f"{df.loc['buckets', 'A_min'] / df.loc['buckets', 'H-SF']:.2f}",
                   df.to_dict(), note="A_max falls by far more than half.")


@claim("chen2025.experiment3", statement="""Exp. 3 (Fig. 7): with [(1−x)o, (1+x)o], both A_max and
       A_min do well at x=0.1; at x ∈ {0.95, 0.99} A_max deteriorates while A_min stays close to
       H-SF.""", expected="qualified")
def _exp3(quick):
    names = ("H-SF", "A_min", "A_min dynamic", "A_max") + (() if quick else ("A_max random",))
    df = _exp((0.1, 0.95, 0.99), names, quick)
    rel = df.div(df["H-SF"], axis=0)
    good01 = rel.loc["0.1", ["A_min", "A_max"]].max() < 1.25
    amax_worse = min(rel.loc[x, "A_max"] / rel.loc["0.1", "A_max"] for x in ("0.95", "0.99")) > 1.2
    static_close = rel.loc[["0.95", "0.99"], "A_min"].max() < 1.25
    dynamic_close = rel.loc[["0.95", "0.99"], "A_min dynamic"].max() < 1.25
    verdict = ("confirmed" if good01 and amax_worse and static_close
               else "qualified" if good01 and amax_worse and dynamic_close else "refuted")
    return Outcome(verdict, "latency / H-SF at x=0.1, 0.95, 0.99 — A_min "
                   + ", ".join(f"{v:.2f}" for v in rel["A_min"]) + "; A_min dynamic "
                   + ", ".join(f"{v:.2f}" for v in rel["A_min dynamic"]) + "; A_max "
                   + ", ".join(f"{v:.2f}" for v in rel["A_max"]), rel.to_dict(),
                   note="Holds with the dynamic eviction key max(õ, a); with the "
                        "literal static key A_min is not close to H-SF at x = 0.95, 0.99.")


# ---- proof steps ---------------------------------------------------------------------------------
@claim("chen2025.lemma8_8", statement="""Lemma 8.8: E[TEL(o; A_max)] ≤ E[TEL(o; A_random(αM))]
       under the shared-permutation coupling (Def. 8.7).""", expected="confirmed")
def _lemma88(quick):
    rng = np.random.default_rng(8)
    pairs, rows = [], []
    for k in range(3 if quick else 12):
        ell, u = [(2, 10), (3, 12), (1, 5)][k % 3]
        a = ell / u
        o = np.where(rng.random(80) < rng.random(), ell, u)
        tr = paper_trace(o, 1, ell, u)
        memory = int(np.ceil(4 * (u + 2) / a))
        seeds = range(3 if quick else 8)      # equal seeds: both policies draw the same σ
        amax = [tel(run_rounds(AMax("random"), tr, memory, seed=s)) for s in seeds]
        arand = [tel(run_rounds(ARandom(), tr, int(a * memory), seed=s)) for s in seeds]
        pairs += list(zip(amax, arand, strict=True))
        rows.append((float(np.mean(amax)), float(np.mean(arand))))
    violations = float(np.mean([x > y for x, y in pairs]))
    ok = all(m <= r for m, r in rows)
    return Outcome(_verdict(ok, "qualified"), f"{len(rows)} instances: mean TEL(A_max) ≤ mean "
                   f"TEL(A_random(αM)) on all: {ok}; per-realisation violation rate "
                   f"{violations:.2f}; largest ratio {max(m / r for m, r in rows):.2f}",
                   {"means": rows, "violation_rate": violations})


@claim("chen2025.theorem4_2", statement="""Theorem 4.2: as M→∞ no feasible policy without full
       information of o has a smaller competitive ratio than A_min.""", expected="qualified")
def _thm42(quick):
    alphas = np.linspace(0.02, 0.98, 49)
    beats = alphas[cf.aell_two_point_sup(alphas) < cf.amin_two_point_sup(alphas)]
    ell, u = 5, 50
    o = np.random.default_rng(2).permutation(np.repeat([ell, u], [400, 40]))
    tr = paper_trace(o, 0, ell, u)
    seeds = range(2 if quick else 5)
    t_ell = np.mean([tel(run_rounds(AEll(), tr, 600, seed=s)) for s in seeds])
    t_min = np.mean([tel(run_rounds(AMin(), tr, 600, seed=s)) for s in seeds])
    found = beats.size > 0 and t_ell < t_min
    return Outcome("qualified" if found else "confirmed",
                   f"on two-point outputs A_ℓ's fluid ratio is below A_min's for α < "
                   f"{beats.max() if beats.size else 0:.2f} (α=0.1: "
                   f"{float(cf.aell_two_point_sup(0.1)):.4f} vs "
                   f"{float(cf.amin_two_point_sup(0.1)):.2f}); "
                   f"simulated TEL A_ℓ {t_ell:.0f} vs A_min {t_min:.0f} (ℓ=5, u=50)",
                   {"alphas_where_aell_better": beats.tolist(), "tel_aell": t_ell,
                    "tel_amin": t_min},
                   note="Holds at best over the whole interval class [ℓ,u]^n; A_ℓ uses no more "
                        "information than A_min yet has a strictly smaller worst case on the "
                        "two-point subclass for α < α*. The exchange proof is informal.")


@claim("chen2025.lemma4_6_rounds", statement="""Lemma 4.6 / Cor. 4.8 in the paper's own slotted
       model (§2, eqs. 1–3): E TEL(A_min)/TEL(H-SF) = xᵀAx/xᵀBx + O(1/M), with n/M large.""",
       expected="refuted")
def _lemma46_rounds(quick):
    u = 10
    worst = cp.amin_ratio(u)
    rows = []
    for memory, per in ([(200, 10), (400, 10)] if quick else [(200, 10), (400, 10), (800, 10),
                                                               (1600, 10), (400, 40)]):
        n = memory * per
        counts = np.round(worst.histogram * n).astype(int)
        o = np.random.default_rng(0).permutation(np.repeat(worst.lengths, counts))
        tr = paper_trace(o, 0, 1, u)
        fluid = cp.rayleigh(counts.astype(float))
        h = tel(run_rounds(HSF(), tr, memory))
        runs = [run_rounds(AMin(key), tr, memory, seed=1) for key in ("static", "dynamic")]
        rows.append({"M": memory, "n": int(counts.sum()), "fluid": fluid,
                     "static": tel(runs[0]) / h, "dynamic": tel(runs[1]) / h,
                     "a_random": tel(run_rounds(ARandom(), tr, memory, seed=1)) / h,
                     "restarts": int(runs[0].requests["restarts"].sum())})
    gaps = [min(r["static"], r["dynamic"]) - r["fluid"] for r in rows]
    refuted = min(gaps) > 0.2 and gaps[-1] > 0.5 * gaps[0]      # large and not shrinking in M
    last = rows[-1]
    return Outcome("refuted" if refuted else "confirmed",
                   f"u={u}, s=0, worst histogram, M={last['M']}, n={last['n']}: simulated "
                   f"A_min/H-SF {last['static']:.3f} (static key), {last['dynamic']:.3f} "
                   f"(dynamic) vs ρ(C_10) = {worst.value:.4f}; gap over M: "
                   + ", ".join(f"{g:.2f}" for g in gaps)
                   + f"; restarts {[r['restarts'] for r in rows]}", {"rows": rows},
                   note="The period model (Lemma 4.4) assumes that in period i a fraction "
                        "1 − (s+i)/(s+j) of the length-j jobs started with õ = i is deleted, so "
                        "short jobs overtake long ones. In the slotted model the completions of "
                        "short jobs free memory faster than the survivors grow: the one-step "
                        "overflow check almost never fires (restarts above), long jobs started at "
                        "õ = ℓ keep running, and A_min performs like random-order packing "
                        "(A_random's ratio in the data). ρ(C_u) is the fluid value, not A_min's "
                        "ratio in the round model; the gap does not shrink as M grows.")

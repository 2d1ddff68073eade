"""Claims of Chen, Ye, Zhou — Adaptively robust LLM inference under prediction uncertainty.
Fluid-model claims are checked on the matrices of Lemma 4.6 / Cor. 4.8 and the
closed forms of :mod:`queuetheory.bounds.competitive_closed_forms`; policy claims run the
schedulers of :mod:`queuetheory.policies.robust` on the engine (round model, unit time)."""

from __future__ import annotations

import functools
import itertools
from fractions import Fraction

import numpy as np
import pandas as pd
import scipy.linalg
import sympy as sp

from ..bounds import competitive as cp
from ..bounds import competitive_closed_forms as cf
from ..bounds import random_order as rorder
from ..plotting import bars, finish, gantt, lines, reference, reference_curve, series_style
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

ROUNDS = ("discrete rounds (§2, eqs. 1–3), unit time; a job holds s+1 … s+o KV tokens over "
          "its o rounds (peak s + o, Example 3.2): the engine with prompt s + 1 and "
          'first_token="prefill"')
PERIOD = "period model of Lemmas 4.4–4.6 (fluid, M → ∞), exact matrices"
FLUID_M = "fluid model, M → ∞ (closed forms of §3, §5, §8)"


def _verdict(ok: bool, bad: str = "refuted") -> str:
    return "confirmed" if ok else bad


# ---- worked examples ---------------------------------------------------------------------------
@claim("chen2025.example3_2", statement="""Example 3.2: n=5, s=1, o_i ∈ [1,4] with true o_i = 1,
       M=10: TEL(H-SF) = 5 and TEL(A_max) = 9.""", expected="confirmed",
       convention=ROUNDS,
       scope="the paper's finite instance")
def _example32(quick):
    tr = paper_trace([1] * 5, 1, 1, 4)
    seeds = range(3 if quick else 20)
    h = {tel(run_rounds(HSF(), tr, 10, seed=s)) for s in seeds}
    m = {tel(run_rounds(AMax(), tr, 10, seed=s)) for s in seeds}
    ok = h == {5.0} and m == {9.0}
    runs = {"H-SF": run_rounds(HSF(), tr, 10), "A_max": run_rounds(AMax(), tr, 10)}
    return Outcome(_verdict(ok), f"TEL(H-SF) = {sorted(h)}, TEL(A_max) = {sorted(m)} over seeds",
                   {"hsf": sorted(h), "amax": sorted(m)},
                   plot=lambda ax: _gantt_runs(ax, runs, "Example 3.2: n=5, s=1, o=1, "
                                               "o ∈ [1,4], M=10"))


def _gantt_runs(ax, runs: dict, title: str):
    """The runs' schedules (last start to finish of every job) as one Gantt chart."""
    starts, lengths, labels, colors = [], [], [], []
    for i, (name, res) in enumerate(runs.items()):
        req = res.requests
        st = (req["finish"] - req["output"]).to_numpy()
        starts += st.tolist()
        lengths += req["output"].tolist()
        labels += [f"{name}: job {j + 1} (o={o})" for j, o in enumerate(req["output"])]
        colors += [f"C{i}"] * len(st)
    gantt(ax, starts, lengths, labels=labels, colors=colors,
          title=title + " — " + ", ".join(f"{k} TEL {tel(r):g}" for k, r in runs.items()),
          xlabel="round", ylabel="job")


@claim("chen2025.example8_2", statement="""Example 8.2: M=7, s=1, o=(1,2,3,4): H-SF produces
       I_3 = ({1,2,3},∅,{4}) with TEL 12; I_1 = ({1,3},∅,{2},{4}), I_2 = ({3},{1,2},∅,{4}) and
       I_3 preserve corresponding order pairwise, I_3 ≤ I_1, I_3 ≤ I_2 (Def. 8.1).""",
       expected="confirmed",
       convention=ROUNDS,
       scope="the paper's finite instance")
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
                   f"H-SF gives {[sorted(s) for s in i3]}, TEL {tel(res):g}", checks,
                   plot=lambda ax: _gantt_runs(ax, {"H-SF": res},
                                               "Example 8.2: M=7, s=1, o=(1,2,3,4)"))


# ---- the Rayleigh quotient ----------------------------------------------------------------------
@claim("chen2025.lemma4_9", statement="""Lemma 4.9: A_u and B_u of Cor. 4.8 are positive definite
       for every u ≥ 1 (checked for u ≤ 1000).""", expected="confirmed",
       convention=PERIOD,
       scope="u ≤ 1000 (Cholesky), exact Fourier transform")
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
    small = list(range(1, 61, 3))
    eig = {name: [float(np.linalg.eigvalsh(cp.amin_matrices(u)[k])[0]) for u in small]
           for k, name in enumerate(("λ_min(A_u)", "λ_min(B_u)"))}
    return Outcome(_verdict(ok), f"Cholesky of A_u and B_u succeeds for {len(us)} sizes up to "
                   f"u={max(us)}: {chol}; λ_min(A_60) = {lam[60][0]:.3g}, λ_min(B_60) = "
                   f"{lam[60][1]:.4f}; ĝ(ξ) = 12/((1+ξ²)(4+ξ²)): {fourier}",
                   {"us": us, "cholesky": chol, "lambda_min": lam, "fourier": fourier},
                   plot=lambda ax: lines(ax, small, eig, title="Lemma 4.9: the smallest "
                                         "eigenvalues of A_u and B_u stay positive",
                                         xlabel="u", ylabel="smallest eigenvalue", logy=True))


@claim("chen2025.corollary4_8", statement="""Corollary 4.8: at s=0, ℓ=1 the A_min ratio of Lemma
       4.6 is xᵀA_u x/xᵀB_u x with a_ij = min²/(ij)(½(i+j)² − min²), b_ij = min(i,j)².""",
       expected="confirmed",
       convention=PERIOD,
       scope="exact for u ≤ 12; numerically for several (s, ℓ, u)")
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
    pairs = []
    for s, ell, u in [(0, 1, 10), (0, 2, 9), (1, 1, 12), (2.5, 3, 15), (20, 5, 30)]:
        for _ in range(5):
            x = rng.random(u - ell + 1)
            A, B = cp.amin_matrices(u, ell, s)
            direct, matrix = cp.lemma46_ratio(x, ell, s), x @ A @ x / (x @ B @ x)
            pairs.append((direct, matrix))
            gap = max(gap, abs(direct - matrix),
                      abs(cp.rayleigh(x, ell, s) - cp.lemma46_ratio(x, ell, s)))
    ok = exact and gap < 1e-10
    return Outcome(_verdict(ok), f"exact match of Cor. 4.8 for u ≤ 12: {exact}; Lemma 4.6 "
                   f"vs matrix form (any s, ℓ, u): max gap {gap:.1e}", {"exact": exact, "gap": gap},
                   plot=lambda ax: _plot_identity(ax, pairs, "Corollary 4.8: Lemma 4.6's ratio "
                                                  "against the matrix form xᵀAx/xᵀBx",
                                                  "Lemma 4.6, direct sum", "xᵀA_u x / xᵀB_u x"))


def _plot_identity(ax, pairs, title, xlabel, ylabel):
    a, b = np.array(pairs, dtype=float).T
    ax.plot(a, b, "o", ms=4, mfc="none", label="random histograms x")
    lo, hi = min(a.min(), b.min()), max(a.max(), b.max())
    ax.plot([lo, hi], [lo, hi], color="0.25", ls="--", lw=1, label="equality")
    finish(ax, title=title, xlabel=xlabel, ylabel=ylabel, logx=False, logy=False)


@claim("chen2025.trace_identity", statement="""B_u⁻¹ is tridiagonal with the printed
       entries, and tr(B_u⁻¹A_u) = T_1 + 2T_2 = H_u, the u-th harmonic number.""",
       expected="confirmed",
       convention=PERIOD,
       scope="exact (Fractions) for the listed u")
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
    grid = np.arange(1, 41)
    traces = [float(np.trace(np.linalg.solve(*cp.amin_matrices(int(u))[::-1]))) for u in grid]
    harmonic = np.cumsum(1 / grid)
    return Outcome(_verdict(ok), f"tr(B⁻¹A) = H_u exactly for u ∈ {us}; printed B⁻¹: {printed}",
                   {"holds": results, "printed_b_inverse": printed},
                   plot=lambda ax: lines(ax, grid, {"tr(B_u⁻¹A_u), numeric": traces,
                                                    "H_u = Σ 1/k": harmonic},
                                         title="The trace of C_u is the harmonic "
                                               "number", xlabel="u", ylabel="value"))


@claim("chen2025.theorem4_3", statement="""Theorem 4.3 / Cor. 4.8 in the period model of
       Lemmas 4.4–4.6 (the proof's model of A_min; A_min in the paper's round model:
       chen2025.lemma4_6_rounds): as M→∞, CR(A_min) = ρ(C_u),
       C_u = B_u⁻¹A_u, and ρ(C_u) ≤ tr(C_u) = H_u = O(log α⁻¹); the worst case is attained by a
       histogram (the top eigenvector is positive).""", expected="confirmed",
       convention=PERIOD,
       scope="asymptotic (M → ∞), u ≤ 1000: the Rayleigh-quotient formula, not A_min in "
             "rounds, where its ratio is not ρ(C_u) (chen2025.lemma4_6_rounds); whether A_min's "
             "round-model ratio is O(log α⁻¹) is not settled by any check here")
def _thm43(quick):
    us = list(range(1, 101)) + list(range(150, 1001, 50 if quick else 10))
    rows = [(u, cp.amin_ratio(u)) for u in us]
    harm = np.cumsum(1 / np.arange(1, max(us) + 1))
    below = all(r.value <= harm[u - 1] + 1e-12 for u, r in rows)
    positive = all(r.one_signed for _, r in rows)
    vals = {u: r.value for u, r in rows}
    ok = below and positive and abs(vals[2] - 1.25) < 1e-12
    u_arr = np.array(us)
    return Outcome(_verdict(ok), f"ρ(C_2) = {vals[2]:.6f}, ρ(C_10) = {vals[10]:.6f}, ρ(C_100) = "
                   f"{vals[100]:.6f}, ρ(C_1000) = {vals[1000]:.6f} ≤ H_1000 = {harm[999]:.4f}; "
                   f"eigenvector positive for all {len(us)} u: {positive}",
                   {"rho": vals, "below_harmonic": below, "one_signed": positive},
                   note="What this certifies is the formula: the Rayleigh quotient of Cor. 4.8 "
                        "(the period model of Lemma 4.6) is ρ(C_u) ≤ tr C_u = H_u, with a "
                        "positive top eigenvector. It does not certify the algorithm: "
                        "chen2025.lemma4_6_rounds finds A_min's ratio in the paper's round "
                        "model above ρ(C_u), by a gap that does not shrink with M.",
                   plot=lambda ax: lines(ax, u_arr, {"ρ(C_u) (Cor. 4.8)": [vals[u] for u in us],
                                                     "H_u (the bound)": harm[u_arr - 1]},
                                         title="Theorem 4.3: the Rayleigh-quotient ratio "
                                               "against H_u", xlabel="u = 1/α (ℓ = 1)",
                                         ylabel="competitive ratio", logx=True, markers=False))


@claim("chen2025.figure1", statement="""Figure 1: ρ(C_u) (s=0, ℓ=1) is fitted by
       0.2555 ln(u+0.2793) + 1.1587 with R² > 0.9999.""", expected="qualified",
       convention=PERIOD,
       scope="u = 10 … 1000")
def _figure1(quick):
    us = np.arange(10, 1001, 20 if quick else 1)
    rho = np.array([cp.amin_ratio(int(u)).value for u in us])
    paper = 0.2555 * np.log(us + 0.2793) + 1.1587
    gap = np.abs(rho - paper)
    fit = cp.fit_log_curve(us, rho)
    ok_a_c = 0.25 <= fit.a <= 0.26 and 1.14 <= fit.c <= 1.17 and fit.r2 > 0.9999
    b_ok = abs(fit.b - 0.2793) < 0.1
    verdict = "confirmed" if ok_a_c and b_ok else ("qualified" if ok_a_c else "refuted")
    refit = fit.a * np.log(us + fit.b) + fit.c
    return Outcome(verdict, f"refit a={fit.a:.4f}, b={fit.b:.3f}, c={fit.c:.4f}, R²={fit.r2:.7f}; "
                   f"paper's curve within {gap.max():.4f} (u ≥ 10), "
                   f"{gap[us >= 100].max():.4f} (u ≥ 100)",
                   {"a": fit.a, "b": fit.b, "c": fit.c, "r2": fit.r2,
                    "max_gap": float(gap.max()), "max_gap_100": float(gap[us >= 100].max())},
                   note="The log law, a and c reproduce; the shift b is not identified by the "
                        "data (the refit's b differs from 0.2793 while R² stays > 0.9999), so "
                        "the curve is one of many equally good fits.",
                   plot=lambda ax: lines(ax, us, {"ρ(C_u)": rho,
                                                  "paper: 0.2555 ln(u+0.2793) + 1.1587": paper,
                                                  f"refit: {fit.a:.4f} ln(u+{fit.b:.3f}) + "
                                                  f"{fit.c:.4f}": refit},
                                         title="Figure 1: ρ(C_u) and its logarithmic fits",
                                         xlabel="u", ylabel="ρ(C_u)", logx=True,
                                         markers=False))


# ---- A_max, A_random --------------------------------------------------------------------------
def _sim_ratio(policy, trace, memory, seeds):
    h = tel(run_rounds(HSF(), trace, memory))
    return float(np.mean([tel(run_rounds(policy, trace, memory, seed=s)) for s in seeds])) / h


def _amin_rounds(lengths, counts, u, memory, seeds) -> dict:
    """A_min's mean TEL over H-SF's in the round model (s = 0, interval [1, u], every job at
    round 0 in a random order), under both readings of its eviction key."""
    o = np.random.default_rng(0).permutation(np.repeat(lengths, counts))
    tr = paper_trace(o, 0, 1, u)
    return {key: _sim_ratio(AMin(key), tr, memory, seeds) for key in ("static", "dynamic")}


@claim("chen2025.theorem3_3", statement="""Theorem 3.3: CR(A_max) ≤ α⁻¹(1+α⁻¹)/2 + O(1/M).""",
       expected="confirmed",
       convention=ROUNDS,
       scope="finite instances (n = 120) and the M → ∞ fluid supremum")
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
    table = {"simulated max": {}, "fluid sup": {}, "Theorem 3.3 bound": {}}
    for (e, u), (m, f, b) in worst.items():
        for name, v in zip(table, (m, f, b), strict=True):
            table[name][f"α={e}/{u}"] = v
    return Outcome(_verdict(ok), txt, {str(k): v for k, v in worst.items()},
                   plot=lambda ax: bars(ax, table, title="Theorem 3.3: A_max's ratio against "
                                        "its upper bound", ylabel="E TEL(A_max) / TEL(H-SF)",
                                        logy=True))


@claim("chen2025.theorem3_4", statement="""Theorem 3.4: CR(A_max) ≥ α⁻¹(1+α^{-1/2})/2, CR being
       sup over o ∈ [ℓ,u]^n of E TEL(A_max)/TEL(H-SF) (§3; the proof takes s = 0 and
       M = ℓu).""",
       expected="qualified",
       convention=ROUNDS + "; the proof's model of A_max: M/u parallel slots, each job in a "
                           "random order (fluid, closed forms)",
       scope="a lower bound, so only instances can support it and only an upper bound on "
             "A_max's ratio over every instance could refute it (none is computed here). "
             "Instances: the round model at finite M (s = 0, o ≡ ℓ = 1, M = 2u − 1, n = 20M), "
             "u = 2…10 (full also 100); the proof's construction and every histogram in its "
             "slot model (M → ∞), u = 2…12, 100; the engine's A_max at large M on that "
             "histogram (n/M = 10 quick, 20 full)")
def _thm34(quick):
    # (1) the proof's slot model: its construction, and the worst histogram over all
    us = list(range(2, 13)) + [100]
    limit = {u: (cf.amax_worst_case(u, 1)[0], float(cf.thm34_claimed(1 / u)),
                 float(cf.thm34_construction_sup(1 / u))) for u in us}
    slot_short = [u for u in us if limit[u][0] < limit[u][1]]
    # the proof's last step: at a/b = α^(1/2) its expression is not the claim
    proof_step = {u: float(cf.thm34_construction(1 / u, (1 / u) ** 0.5)) for u in (4, 100)}
    # (2) the engine's A_max (future-peak packing, not slots) on that histogram, large M
    per = 10 if quick else 20
    engine = {}
    for u, memory in ((4, 400), (10, 1000)) + (() if quick else ((100, 2000),)):
        hist = cf.amax_worst_case(u, 1)[1]
        counts = np.round(hist * per * memory).astype(int)
        o = np.random.default_rng(0).permutation(np.repeat(np.arange(1, u + 1), counts))
        engine[u] = (memory, _sim_ratio(AMax(), paper_trace(o, 0, 1, u), memory,
                                        range(2 if quick else 4)))
    # (3) finite M in rounds: s = 0, every o = ℓ = 1, M = k = 2u − 1. H-SF runs k jobs a
    # round, A_max one (it reserves u), so with n = mk jobs the ratio is (n+1)k/(n+k) → k
    finite, closed = {}, {}
    for u in tuple(range(2, 11)) + (() if quick else (100,)):
        k = 2 * u - 1
        n = 20 * k
        finite[u] = _sim_ratio(AMax(), paper_trace([1] * n, 0, 1, u), k, range(1))
        closed[u] = (n + 1) * k / (n + k)
    engine_matches = all(abs(finite[u] - closed[u]) < 1e-9 for u in finite)
    # the family's supremum over n is its closed form's limit 2u − 1, where the engine
    # agrees with the closed form
    reached = [u for u in finite
               if engine_matches and 2 * u - 1 >= float(cf.thm34_claimed(1 / u))]
    not_reached = [u for u in finite if u not in reached]
    verdict = ("confirmed" if not not_reached else "qualified" if reached
               else "not-reproducible")
    u_eng = max(engine)
    return Outcome(
        verdict,
        f"reached (instances whose E TEL ratio tends to 2u − 1 ≥ the claim) for α = 1/u, u in "
        f"{reached}: finite M = 2u − 1, o ≡ 1, n = 20M gives "
        + ", ".join(f"α=1/{u} {finite[u]:.2f} vs {float(cf.thm34_claimed(1 / u)):.2f}"
                    for u in finite)
        + f" (= the closed form (n+1)k/(n+k): {engine_matches}); not reached for u in "
        f"{not_reached}. The proof's slot model (M → ∞) falls short of the claim for u in "
        f"{slot_short} (α = 1/4: worst histogram {limit[4][0]:.3f}, construction "
        f"{limit[4][2]:.3f} < 6; α = 1/100: {limit[100][0]:.1f}, {limit[100][2]:.1f} < "
        f"{limit[100][1]:.0f}); the engine's A_max at large M on that histogram: "
        + ", ".join(f"α=1/{u} (M={m}, n/M={per}) {r:.2f}" for u, (m, r) in engine.items()),
        {"limit": {u: {"worst": w, "claimed": c, "construction": k}
                   for u, (w, c, k) in limit.items()},
         "proof_step_at_sqrt_alpha": proof_step, "engine_large_M": engine,
         "finite_M": finite, "finite_M_closed_form": closed, "reached": reached,
         "not_reached": not_reached, "slot_model_short": slot_short},
        note="What fails is the proof, not (as far as this check can tell) the statement. "
             "The proof's construction (M = ℓu, M/u parallel slots, N_ℓ/N_u ≈ α^{1/2}u/ℓ) "
             "gives (u/ℓ)(au+bℓ)(a+b)/(ua²+2ℓab+ub²), which at a/b = α^{1/2} is "
             f"{proof_step[4]:.2f} at α = 1/4 (not 6) and at most (1+√(2/(1+α)))/(2α) over "
             "all a/b; no histogram in that slot model reaches the claim at any α tried, "
             "so the proof's model gives Θ(α⁻¹), not the printed α^(−3/2) rate. The "
             "statement itself, a lower bound over all instances, holds where an instance "
             "reaches it: with s = 0, o ≡ ℓ = 1 and M = 2u − 1, H-SF runs 2u − 1 jobs a "
             "round and A_max one, a ratio → 2α⁻¹ − 1 ≥ the claim exactly for α ≥ 1/7. So "
             "the corrected statement is CR(A_max) ≥ max(2α⁻¹ − 1, (1+√(2/(1+α)))/(2α)) "
             "(ℓ = 1), which is the printed bound for α ≥ 1/7. For α ≤ 1/8 no instance tried "
             f"reaches it (the engine's A_max at large M, α = 1/{u_eng}: "
             f"{engine[u_eng][1]:.2f}); refuting it there would need an upper bound on "
             "A_max's ratio over every instance below the claim, which Theorem 3.3's bound "
             "is not.",
        plot=lambda ax: _plot_thm34(ax, limit, engine, finite))


def _plot_thm34(ax, limit, engine, finite):
    u = np.array(sorted(limit))
    grid = np.geomspace(2, 100, 60)
    ax.plot(grid, cf.thm34_claimed(1 / grid), color="k", lw=1.2, label="Theorem 3.4 claim")
    reference_curve(ax, grid, [float(cf.amax_upper_bound(1 / g)) for g in grid],
                    "Theorem 3.3 upper bound")
    ax.plot(u, [limit[k][0] for k in u], **series_style(0), label="worst histogram, M → ∞")
    ax.plot(u, [limit[k][2] for k in u], **series_style(1), label="the proof's construction")
    ax.plot(list(engine), [r for _, r in engine.values()], **series_style(2),
            label="engine A_max, large M")
    ax.plot(list(finite), list(finite.values()), **series_style(3),
            label="engine, M = 2u − 1, o ≡ 1 (finite M)")
    finish(ax, title="Theorem 3.4: A_max's competitive ratio against the claimed lower bound",
           xlabel="u = 1/α (ℓ = 1)", ylabel="E TEL(A_max) / TEL(H-SF)", logx=True, logy=True)


@claim("chen2025.theorem8_6_part2", statement="""Theorem 8.6 Part 2: CR(A_random) ≤ (1+α⁻¹)/2 +
       O(1/M).""", expected="confirmed",
       convention=FLUID_M,
       scope="M → ∞ (symbolic) and finite simulated instances")
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
    table = {"worst histogram (fluid)": {k: v[0] for k, v in worst.items()},
             "bound (1+α⁻¹)/2": {k: v[1] for k, v in worst.items()}}
    return Outcome(_verdict(ok), f"fluid sup over all histograms = (1+α⁻¹)/2 (e.g. α=1/4: "
                   f"{worst['1/4'][0]:.4f}), tight at N_ℓ/N_u = 1/α: {tight}; simulated "
                   f"{', '.join(f'{r:.2f} ≤ {b:.1f}' for r, b in sims)}",
                   {"worst": worst, "sims": sims, "tight": tight},
                   plot=lambda ax: bars(ax, table, title="Theorem 8.6 Part 2: A_random's worst "
                                        "case against (1+α⁻¹)/2", xlabel="α = ℓ/u",
                                        ylabel="competitive ratio", logy=False))


@claim("chen2025.theorem8_6_part1", statement="""Theorem 8.6 Part 1: for any feasible policy,
       the worst case over o ∈ [ℓ,u]^n equals the worst case over o ∈ {ℓ,u}^n.""",
       expected="refuted",
       convention=ROUNDS,
       scope="finite instances: exact enumeration of all orders of A_random, every length "
             "vector, in order of size; both memory conventions")
def _thm86a(quick):
    # Chen et al.'s rounds (peak s + o over o rounds) are kvcache's "ip" with prompt s + 1;
    # eq. (3) read literally (s … s + o over o + 1 rounds) is "eq1" with prompt s
    found = {"ip": rorder.smallest_two_point_counterexample(prompts=(1, 2),
                                                              first_token="prefill"),
             "eq1": rorder.smallest_two_point_counterexample(prompts=(0, 1),
                                                               first_token="decode")}
    ce = found["ip"]
    if ce is None:
        return Outcome("confirmed", "no instance with n ≤ 5, u ≤ 5 where A_random's worst case "
                       "over [ℓ,u]^n exceeds that over {ℓ,u}^n", {})
    # the engine's A_random and H-SF (separate code) on the counterexample, many seeds
    tr = paper_trace(list(ce.interval_output), ce.prompt - 1, ce.lo, ce.hi)
    seeds = range(40 if quick else 200)
    runs = np.array([tel(run_rounds(ARandom(), tr, ce.memory, seed=k)) for k in seeds])
    h = tel(run_rounds(HSF(), tr, ce.memory))
    exact = float(rorder.random_order_tel(ce.interval_output, ce.prompt, ce.memory))
    se = runs.std(ddof=1) / np.sqrt(runs.size)
    engine_agrees = (h == rorder.hsf_tel(ce.interval_output, ce.prompt, ce.memory)
                     and abs(runs.mean() - exact) <= 4 * max(se, 1e-12))
    # a larger instance, every multiset, for the figure
    big = rorder.random_order_worst_case(4, 1, 3, 1, 3)
    table = {o: float(rorder.random_order_tel(o, 1, 3) / rorder.hsf_tel(o, 1, 3))
             for o in itertools.combinations_with_replacement(range(1, 4), 4)}
    e1 = found["eq1"]
    return Outcome(
        "refuted" if engine_agrees else "not-reproducible",
        f"smallest (peak s + o over o rounds, as the engine): n={ce.n}, ℓ={ce.lo}, u={ce.hi}, "
        f"s={ce.prompt - 1}, M={ce.memory}: E TEL(A_random)/TEL(H-SF) = {ce.interval} = "
        f"{float(ce.interval):.4f} at o={ce.interval_output} against {ce.two_point} over "
        f"{{ℓ,u}}^n (the engine's A_random, {len(seeds)} seeds: E TEL {runs.mean():.3f} ± "
        f"{se:.3f} vs exact {exact:g}); with eq. (3)'s memory (s … s+o): n={e1.n}, u={e1.hi}, "
        f"s={e1.prompt}, M={e1.memory}: {float(e1.interval):.4f} at o={e1.interval_output} "
        f"vs {float(e1.two_point):.4f}; n=4, u=3, s=0, M=3: {float(big.interval):.4f} at "
        f"{big.interval_output} vs {float(big.two_point):.4f}",
        {"ip": ce.__dict__, "eq1": e1.__dict__, "engine_mean": float(runs.mean()),
         "engine_se": float(se), "exact": exact, "n4_table": {str(k): v for k, v in
                                                             table.items()}},
        note="A_random, the policy the proof treats, is a counterexample to 'for any feasible "
             "policy': its exact expected ratio (every order enumerated, ratios as fractions) "
             "is larger at an interior length than at any two-point vector. The proof's step "
             "'decreasing o_i never increases others' latency' fails because a shorter job "
             "changes which later jobs fit beside it. The engine's A_random and H-SF, "
             "separate code, agree with the enumeration on the counterexample.",
        plot=lambda ax: _plot_thm86a(ax, table, big))


def _plot_thm86a(ax, table, big):
    labels = ["".join(map(str, o)) for o in table]
    two = np.array([set(o) <= {1, 3} for o in table])
    x, y = np.arange(len(table)), np.array(list(table.values()))
    ax.bar(x[two], y[two], color="C0", label="o ∈ {1, 3}^4")
    ax.bar(x[~two], y[~two], color="C3", label="o with an interior length")
    ax.set_xticks(x, labels, rotation=60)
    reference(ax, float(big.two_point), "worst case over {1, 3}^4")
    finish(ax, title="Theorem 8.6 Part 1: A_random's exact ratio, n=4, ℓ=1, u=3, s=0, M=3",
           xlabel="output lengths o (sorted)", ylabel="E TEL(A_random) / TEL(H-SF)",
           logy=False)
    ax.set_ylim(0.95, 1.05 * max(table.values()))


# ---- two-point, geometric, LG -------------------------------------------------------------------
@claim("chen2025.theorem5_1", statement="""Theorem 5.1 in the period model of Lemmas 4.4–4.6
       (the proof's model of A_min): with two-point outputs, the ratio of Lemma 4.6 is ≤
       (3−α)/2 + O(1/M) ≤ 3/2. A_min in the paper's round model: chen2025.theorem5_1_rounds.""",
       expected="confirmed",
       convention=PERIOD,
       scope="M → ∞, symbolic in α; the period model's formula, not A_min in rounds (which "
             "chen2025.lemma4_6_rounds shows it does not describe)")
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
    ts = np.logspace(-1, 3, 200)
    curves = {f"α = {al}": cf.amin_two_point(al, ts) for al in (0.05, 0.2, 0.5)}
    return Outcome(_verdict(ok), f"Lemma 4.6 on {{ℓ,u}} = 1 + α(1−α²)t/(α²t²+2α²t+1): {symbolic}; "
                   f"= (3−α)/2 at t = 1/α: {tight}; restricted eigenvalue gap {gap:.1e}",
                   {"symbolic": symbolic, "tight": tight, "gap": gap},
                   plot=lambda ax: lines(ax, ts, curves, references={
                       f"(3−α)/2, α = {al}": (3 - al) / 2 for al in (0.05, 0.2, 0.5)},
                       title="Theorem 5.1: A_min's two-point ratio and its bound",
                       xlabel="t = x_ℓ / x_u", ylabel="competitive ratio", logx=True,
                       logy=False, markers=False))


@claim("chen2025.theorem5_2", statement="""Theorem 5.2: with two-point outputs, CR(A_ℓ) ≤
       1 + α/(2(1−α)) for α ≤ ½ and ≤ 1 + 2α² for α ≥ ½ (+O(1/M)).""", expected="confirmed",
       convention=FLUID_M,
       scope="M → ∞ on a grid of 99 α, and one simulated instance")
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
    curves = {"sup over t on a grid": sup, "Theorem 5.2 bound": bound,
              "simulated, α = 0.1": ([ell / u], [sim])}
    return Outcome(_verdict(ok), f"sup_t on a grid meets the bound for 99 α: {analytic}; simulated "
                   f"A_ℓ at α=0.1, N_ℓ/N_u=10: {sim:.4f} (fluid {fluid:.4f}, bound "
                   f"{float(cf.aell_two_point_sup(ell / u)):.4f})",
                   {"analytic": analytic, "sim": sim, "fluid": fluid},
                   plot=lambda ax: lines(ax, alphas, curves, title="Theorem 5.2: A_ℓ's "
                                         "two-point ratio against its bound", xlabel="α = ℓ/u",
                                         ylabel="competitive ratio", logy=False))


@claim("chen2025.alpha_star", statement="""A_ℓ's two-point bound beats A_min's iff
       α < α* = (3−√5)/2 ≈ 0.382.""", expected="confirmed",
       convention=FLUID_M,
       scope="exact (sympy) and a grid of α")
def _alpha_star(quick):
    root = cf.two_point_threshold(exact=True)
    exact = sp.simplify(root - (3 - sp.sqrt(5)) / 2) == 0
    grid = np.linspace(0.005, 0.995, 199)
    better = cf.aell_two_point_sup(grid) < cf.amin_two_point_sup(grid)
    consistent = bool(np.all(better == (grid < float(root))))
    # independent of both closed-form suprema: maximise the two ratios over t numerically
    ts = np.concatenate([[0.0], np.logspace(-4, 4, 8001)])
    coarse = grid[::6]
    num = np.array([cf.aell_two_point(a, ts).max() < cf.amin_two_point(a, ts).max()
                    for a in coarse])
    numeric = bool(np.all(num == (coarse < float(root))))
    ok = exact and consistent and numeric
    curves = {"A_ℓ: Theorem 5.2": cf.aell_two_point_sup(grid),
              "A_min: (3−α)/2 (Theorem 5.1)": cf.amin_two_point_sup(grid),
              "A_ℓ: numeric sup over t": [cf.aell_two_point(a, np.logspace(-3, 4, 4001)).max()
                                         for a in grid[::9]]}
    curves["A_ℓ: numeric sup over t"] = (grid[::9], curves["A_ℓ: numeric sup over t"])
    return Outcome(_verdict(ok), f"α* = {sp.nsimplify(root)} = {float(root):.6f}; the switch "
                   f"point of the closed-form bounds agrees on a grid: {consistent}; of the "
                   f"ratios maximised numerically over t: {numeric}", {"alpha_star": float(root)},
                   note="The paper's 'α² − 3α + 1 = 0' is the boundary of α² − 3α + 1 > 0.",
                   plot=lambda ax: _plot_alpha_star(ax, grid, curves, float(root)))


def _plot_alpha_star(ax, grid, curves, root):
    reference(ax, root, f"α* = (3−√5)/2 = {root:.3f}", axis="x", color="C3", linestyle=":")
    lines(ax, grid, curves, title="Where A_ℓ's two-point bound beats A_min's",
          xlabel="α = ℓ/u", ylabel="two-point competitive ratio", logy=False, markers=False)


@claim("chen2025.geometric", statement="""§5.2, Fig. 3 (left): under geometric outputs the CR of
       A_min increases in q and is bounded by 1.7.""", expected="confirmed",
       convention=PERIOD,
       scope="M → ∞, q on a grid up to 0.99 (0.998 full)")
def _geometric(quick):
    qs = np.array([0.1, 0.3, 0.5, 0.7, 0.8, 0.9, 0.95, 0.97, 0.98, 0.99]
                  + ([] if quick else [0.995, 0.998]))
    vals = np.array([cf.geometric_ratio(q) for q in qs])
    limit = cf.geometric_limit(exact=True)
    ok = bool(np.all(np.diff(vals) > 0) and vals.max() < 1.7 and float(limit) < 1.7
              and abs(vals[qs == 0.99][0] - float(limit)) < 1e-3)
    return Outcome(_verdict(ok), f"CR_G(0.5) = {vals[2]:.4f}, CR_G(0.99) = {vals[9]:.5f}, limit "
                   f"q→1: {limit} = {float(limit):.6f} < 1.7", {"q": qs.tolist(),
                                                                 "cr": vals.tolist()},
                   plot=lambda ax: lines(ax, qs, {"CR_G(q), matrix form": vals},
                                         references={"the paper's bound 1.7": 1.7,
                                                     f"limit q → 1: {float(limit):.4f}":
                                                     float(limit)},
                                         title="§5.2: A_min under geometric outputs",
                                         xlabel="q", ylabel="competitive ratio", logy=False))


@claim("chen2025.theorem5_3", statement="""Theorem 5.3 in the period model of Lemmas 4.4–4.6
       (the proof's model of A_min): under LG(p) outputs, the ratio of Lemma 4.6 is
       (1+q)²(1+3q+6q²+3q³+q⁴)/(1+2q+11q²+8q³+11q⁴+2q⁵+q⁶) ≤ 14/9. A_min in the paper's
       round model: chen2025.theorem5_3_rounds.""", expected="confirmed",
       convention=PERIOD,
       scope="M → ∞, symbolic in q; the period model's formula, not A_min in rounds")
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
    qgrid = np.linspace(0.02, 0.98, 49)
    closed = [float(cf.lg_ratio_closed(v)) for v in qgrid]
    matrix = ([float(v) for v in qs], [cf.lg_ratio(v) for v in qs])
    return Outcome(_verdict(ok), f"closed form vs matrix: max gap {gap:.1e}; increasing in q; "
                   f"sup = {limit}", {"gap": gap, "limit": str(limit)},
                   plot=lambda ax: lines(ax, qgrid, {"closed form": closed,
                                                     "matrix form": matrix},
                                         references={"sup = 14/9": 14 / 9},
                                         title="Theorem 5.3: A_min under LG(p) outputs",
                                         xlabel="q", ylabel="competitive ratio", logy=False))


@claim("chen2025.theorem5_1_rounds", statement="""Theorem 5.1 for A_min in the paper's round
       model (§2, eqs. 1–3): with two-point outputs o ∈ {ℓ, u}, CR(A_min) ≤ (3−α)/2 + O(1/M)
       ≤ 3/2.""", expected="refuted",
       convention=ROUNDS + "; A_min under both readings of its eviction key (static õ, dynamic "
                           "max(õ, a)), the better one counted",
       scope="finite M = 200, 400 (quick) / 200, 400, 800 (full), n = 10M jobs at round 0, "
             "s = 0, ℓ = 1, u = 2…6 (quick) / 2…10 (full), x_ℓ/x_u = 1/α (the fluid worst "
             "case)")
def _thm51_rounds(quick):
    memories = (200, 400) if quick else (200, 400, 800)
    us = range(2, 7 if quick else 11)
    seeds = (1, 2) if quick else (1, 2, 3)
    table, gaps = {}, {}
    for u in us:
        bound = (3 - 1 / u) / 2
        for memory in memories:
            n = 10 * memory
            n_ell = round(n * u / (1 + u))                 # x_ℓ / x_u = t = 1/α = u
            r = _amin_rounds([1, u], [n_ell, n - n_ell], u, memory, seeds)
            table[u, memory] = min(r.values())
        gaps[u] = [table[u, m] - bound for m in memories]
    # a counterexample: above the bound by 0.1 at every M, the gap not shrinking with M
    # (u = 2, 3 are 0.05 above at n = 10M, a margin that shrinks as n/M grows)
    found = [u for u in us if min(gaps[u]) > 0.1 and gaps[u][-1] > 0.5 * gaps[u][0]]
    u0 = min(found) if found else None
    above_half = [u for u in us if table[u, memories[-1]] > 1.5]
    grid = np.array(list(us))
    return Outcome(
        "refuted" if found else "confirmed",
        (f"smallest counterexample α = 1/{u0}: A_min/H-SF "
         + ", ".join(f"{table[u0, m]:.3f} (M = {m})" for m in memories)
         + f" against (3−α)/2 = {(3 - 1 / u0) / 2:.3f}; " if found else
         "A_min within (3−α)/2 + 0.1 for every α tried; ")
        + f"above 3/2 at M = {memories[-1]} for α = 1/u, u in {above_half}; gap over M per u: "
        + "; ".join(f"u={u}: " + ", ".join(f"{g:+.2f}" for g in gaps[u]) for u in us),
        {"ratio": {f"u={u},M={m}": v for (u, m), v in table.items()}, "gaps": gaps,
         "counterexample_u": u0, "above_three_halves": above_half},
        note="The period model (Lemma 4.4) lets short jobs overtake long ones period by "
             "period; in rounds the long jobs started at õ = ℓ keep running (the overflow "
             "check seldom fires, chen2025.lemma4_6_rounds), so A_min does worse than the "
             "period model's (3−α)/2 and the gap does not shrink as M grows at fixed n/M. "
             "The better of the two eviction keys is counted, so the counterexample holds "
             "for either reading of A_min.",
        plot=lambda ax: _plot_thm51_rounds(ax, grid, table, memories))


def _plot_thm51_rounds(ax, grid, table, memories):
    reference_curve(ax, grid, (3 - 1 / grid) / 2, "Theorem 5.1: (3 − α)/2")
    lines(ax, grid, {f"A_min in rounds, M = {m}": [table[u, m] for u in grid]
                     for m in memories}, references={"3/2": 1.5},
          title="Theorem 5.1 in rounds: A_min on two-point outputs (x_ℓ/x_u = 1/α)",
          xlabel="u = 1/α (ℓ = 1)", ylabel="E TEL(A_min) / TEL(H-SF)", logy=False)


@claim("chen2025.theorem5_3_rounds", statement="""Theorem 5.3 for A_min in the paper's round
       model (§2, eqs. 1–3): under LG(p) outputs (P(o = k) ∝ k q^(k−1)), CR(A_min) equals the
       closed form (1+q)²(1+3q+6q²+3q³+q⁴)/(1+2q+11q²+8q³+11q⁴+2q⁵+q⁶) + O(1/M) and is at
       most 14/9.""", expected="qualified",
       convention=ROUNDS + "; A_min under both readings of its eviction key, each reported",
       scope="finite M = 400, n = 10M (quick) and 40M (full) jobs at round 0, s = 0, ℓ = 1, "
             "u where the LG tail is below e^(−50), q = 0.5, 0.8 (full also 0.9)")
def _thm53_rounds(quick):
    qs = (0.5, 0.8) if quick else (0.5, 0.8, 0.9)
    memory, per = 400, (10 if quick else 40)
    seeds = (1, 2)
    rows = {}
    for q in qs:
        u = int(np.ceil(50 / -np.log(q))) + 50
        k = np.arange(1, u + 1)
        p = k * q ** (k - 1)
        r = _amin_rounds(k, np.round(p / p.sum() * memory * per).astype(int), u, memory, seeds)
        rows[q] = {**r, "closed": float(cf.lg_ratio_closed(q))}
    worst = max(max(r["static"], r["dynamic"]) for r in rows.values())
    off = max(min(abs(r["static"] - r["closed"]), abs(r["dynamic"] - r["closed"]))
              for r in rows.values())
    bound = 14 / 9
    verdict = ("refuted" if min(min(r["static"], r["dynamic"]) for r in rows.values()) > bound
               + 0.05 else "confirmed" if off <= 0.05 else "qualified")
    return Outcome(verdict,
                   "; ".join(f"q = {q}: A_min/H-SF {r['static']:.3f} (static key), "
                             f"{r['dynamic']:.3f} (dynamic) against the closed form "
                             f"{r['closed']:.3f}" for q, r in rows.items())
                   + f"; largest {worst:.3f} ≤ 14/9 = {bound:.3f}: {worst <= bound}",
                   {"rows": {str(q): r for q, r in rows.items()}, "largest": worst,
                    "off_closed_form": off},
                   note="In rounds the ratio is not the period model's closed form (it is "
                        f"off by up to {off:.2f} on these instances, mostly below it), so "
                        "the equality of Theorem 5.3 describes the period model, not A_min "
                        "in rounds; the bound 14/9 holds on the instances run (finite n/M: "
                        "the ratio grows with n/M on two-point outputs, "
                        "chen2025.theorem5_1_rounds, so larger n/M may come closer).",
                   plot=lambda ax: bars(ax, {
                       "A_min, static key": {f"q={q}": r["static"] for q, r in rows.items()},
                       "A_min, dynamic key": {f"q={q}": r["dynamic"] for q, r in rows.items()},
                       "closed form (period model)": {f"q={q}": r["closed"]
                                                      for q, r in rows.items()}},
                       title="Theorem 5.3 in rounds: A_min under LG(p) outputs",
                       ylabel="E TEL(A_min) / TEL(H-SF)", reference_value=bound,
                       reference_label="14/9", logy=False))


# ---- experiments (model form) ------------------------------------------------------------
_POLICIES = {"H-SF": HSF, "A_min": AMin, "A_min dynamic": lambda: AMin("dynamic"),
             "A_max": AMax, "A_max random": lambda: AMax("random")}


@functools.lru_cache(maxsize=64)
def _latency(setup, name, quick):
    n, memory = (200, 4000) if quick else (1000, 16000)
    df = latency_experiment({name: _POLICIES[name]()}, (setup,), n=n, memory=memory,
                            reps=2 if quick else 3)
    return float(df.iloc[0, 0])


def _exp(setups, names, quick):
    """Average latencies (rows: setups, columns: policies); runs shared between claims."""
    return pd.DataFrame({name: [_latency(s, name, quick) for s in setups] for name in names},
                        index=[str(s) for s in setups])


@claim("chen2025.experiment1", statement="""Exp. 1 (Fig. 5): with the interval [1,1000] A_max's
       average latency is far above A_min's, and A_min is nearly identical to H-SF.""",
       expected="qualified",
       convention=ROUNDS,
       scope="finite-horizon experiment on LMSYS-like lengths (unit time)")
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
                        "time model are not given).",
                   plot=lambda ax: _plot_latency(ax, df, "Experiment 1 (Fig. 5): interval "
                                                 "[1, 1000]"))


def _plot_latency(ax, df, title, ylabel="average latency (rounds)"):
    bars(ax, {name: df[name].to_dict() for name in df.columns}, title=title, ylabel=ylabel,
         xlabel="prediction setting")


@claim("chen2025.experiment2", statement="""Exp. 2 (Fig. 6): with bucketed intervals [1,100], …,
       A_max's latency is about halved relative to Exp. 1, and A_min (Alg. 5) approaches H-SF.""",
       expected="confirmed",
       convention=ROUNDS,
       scope="finite-horizon experiment on LMSYS-like lengths (unit time)")
def _exp2(quick):
    df = _exp(("rough", "buckets"), ("H-SF", "A_min", "A_max"), quick)
    halved = df.loc["buckets", "A_max"] <= 0.5 * df.loc["rough", "A_max"]
    closer = (df.loc["buckets", "A_min"] / df.loc["buckets", "H-SF"]
              < df.loc["rough", "A_min"] / df.loc["rough", "H-SF"])
    return Outcome(_verdict(bool(halved and closer)),
                   f"A_max {df.loc['rough', 'A_max']:.1f} → {df.loc['buckets', 'A_max']:.1f}; "
                   f"A_min/H-SF {df.loc['rough', 'A_min'] / df.loc['rough', 'H-SF']:.2f} → "
                   f"{df.loc['buckets', 'A_min'] / df.loc['buckets', 'H-SF']:.2f}",
                   df.to_dict(), note="A_max falls by far more than half.",
                   plot=lambda ax: _plot_latency(ax, df, "Experiment 2 (Fig. 6): one interval "
                                                 "against ten bucketed intervals"))


@claim("chen2025.experiment3", statement="""Exp. 3 (Fig. 7): with [(1−x)o, (1+x)o], both A_max and
       A_min do well at x=0.1; at x ∈ {0.95, 0.99} A_max deteriorates while A_min stays close to
       H-SF.""", expected="qualified",
       convention=ROUNDS,
       scope="finite-horizon experiment on LMSYS-like lengths (unit time); quick n = 200, "
             "M = 4000, full n = 1000, M = 16000",
       expected_full="not-reproducible",
       full_differs="""On the full instance (n = 1000, M = 16000, three repetitions) A_min
       is not close to H-SF at x = 0.99 even with the dynamic eviction key (about 1.36× H-SF,
       against 1.25 allowed), and with the literal static key it is worse than A_max at
       x = 0.95; the small quick instance does not show this. In the unit-time round model the
       claim is reproduced only in the narrower form the quick check records.""")
def _exp3(quick):
    names = ("H-SF", "A_min", "A_min dynamic", "A_max") + (() if quick else ("A_max random",))
    df = _exp((0.1, 0.95, 0.99), names, quick)
    rel = df.div(df["H-SF"], axis=0)
    good01 = rel.loc["0.1", ["A_min", "A_max"]].max() < 1.25
    amax_worse = min(rel.loc[x, "A_max"] / rel.loc["0.1", "A_max"] for x in ("0.95", "0.99")) > 1.2
    static_close = rel.loc[["0.95", "0.99"], "A_min"].max() < 1.25
    dynamic_close = rel.loc[["0.95", "0.99"], "A_min dynamic"].max() < 1.25
    verdict = ("confirmed" if good01 and amax_worse and static_close
               else "qualified" if good01 and amax_worse and dynamic_close
               else "not-reproducible")
    return Outcome(verdict, "latency / H-SF at x=0.1, 0.95, 0.99 — A_min "
                   + ", ".join(f"{v:.2f}" for v in rel["A_min"]) + "; A_min dynamic "
                   + ", ".join(f"{v:.2f}" for v in rel["A_min dynamic"]) + "; A_max "
                   + ", ".join(f"{v:.2f}" for v in rel["A_max"]), rel.to_dict(),
                   note=("Holds with the dynamic eviction key max(õ, a); with the "
                         "literal static key A_min is not close to H-SF at x = 0.95, 0.99."
                         if verdict == "qualified" else
                         "A_min is not within 1.25× H-SF at x = 0.95, 0.99 with either "
                         "eviction key (static, or the dynamic max(õ, a))"
                         if verdict == "not-reproducible" else "As stated."),
                   plot=lambda ax: _plot_latency(ax, rel, "Experiment 3 (Fig. 7): intervals "
                                                 "[(1−x)o, (1+x)o]",
                                                 ylabel="average latency / H-SF's"))


# ---- proof steps ---------------------------------------------------------------------------------
@claim("chen2025.lemma8_8", statement="""Lemma 8.8: E[TEL(o; A_max)] ≤ E[TEL(o; A_random(αM))]
       under the shared-permutation coupling (Def. 8.7).""", expected="confirmed",
       convention=ROUNDS,
       scope="finite instances, shared-permutation coupling, several seeds")
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
                   {"means": rows, "violation_rate": violations},
                   plot=lambda ax: _plot_identity(ax, [(r, m) for m, r in rows],
                                                  "Lemma 8.8: E TEL(A_max) against "
                                                  "E TEL(A_random(αM)), per instance",
                                                  "mean TEL of A_random(αM) (rounds)",
                                                  "mean TEL of A_max (rounds)"))


@claim("chen2025.theorem4_2", statement="""Theorem 4.2: as M→∞ no feasible policy without full
       information of o has a smaller competitive ratio than A_min.""", expected="qualified",
       convention=FLUID_M,
       scope="M → ∞ on the two-point subclass, and one simulated instance")
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
                   plot=lambda ax: lines(ax, alphas, {
                       "A_ℓ (Theorem 5.2)": cf.aell_two_point_sup(alphas),
                       "A_min (Theorem 5.1)": cf.amin_two_point_sup(alphas)},
                       title="Theorem 4.2: A_ℓ's two-point worst case is below A_min's",
                       xlabel="α = ℓ/u", ylabel="two-point competitive ratio (M → ∞)",
                       logy=False, markers=False),
                   note="Holds at best over the whole interval class [ℓ,u]^n; A_ℓ uses no more "
                        "information than A_min yet has a strictly smaller worst case on the "
                        "two-point subclass for α < α*. The exchange proof is informal.")


@claim("chen2025.lemma4_6_rounds", statement="""Lemma 4.6 / Cor. 4.8 in the paper's own slotted
       model (§2, eqs. 1–3): E TEL(A_min)/TEL(H-SF) = xᵀAx/xᵀBx + O(1/M), with n/M large.""",
       expected="refuted",
       convention=ROUNDS,
       scope="finite M up to 400 (quick) / 1600 (full), the worst histogram of u = 10")
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
        seeds = (1, 2) if quick else (1, 2, 3)
        runs = [[run_rounds(AMin(key), tr, memory, seed=k) for k in seeds]
                for key in ("static", "dynamic")]
        rows.append({"M": memory, "n": int(counts.sum()), "fluid": fluid,
                     "static": float(np.mean([tel(r) for r in runs[0]])) / h,
                     "dynamic": float(np.mean([tel(r) for r in runs[1]])) / h,
                     "a_random": float(np.mean([tel(run_rounds(ARandom(), tr, memory, seed=k))
                                                for k in seeds])) / h,
                     "restarts": int(runs[0][0].requests["restarts"].sum())})
    gaps = [min(r["static"], r["dynamic"]) - r["fluid"] for r in rows]
    refuted = min(gaps) > 0.2 and gaps[-1] > 0.5 * gaps[0]      # large and not shrinking in M
    last = rows[-1]
    return Outcome("refuted" if refuted else "confirmed",
                   f"u={u}, s=0, worst histogram, M={last['M']}, n={last['n']}, {len(seeds)} "
                   f"seeds: simulated "
                   f"A_min/H-SF {last['static']:.3f} (static key), {last['dynamic']:.3f} "
                   f"(dynamic) vs ρ(C_10) = {worst.value:.4f}; gap over M: "
                   + ", ".join(f"{g:.2f}" for g in gaps)
                   + f"; restarts {[r['restarts'] for r in rows]}", {"rows": rows},
                   plot=lambda ax: lines(ax, [r["M"] for r in rows], {
                       name: [r[key] for r in rows] for name, key in (
                           ("A_min, static key", "static"), ("A_min, dynamic key", "dynamic"),
                           ("A_random", "a_random"))},
                       references={f"ρ(C_{u}) (Lemma 4.6, fluid)": worst.value},
                       title="Lemma 4.6 in the round model: A_min's ratio against ρ(C_u)",
                       xlabel="memory M (tokens)", ylabel="TEL / TEL(H-SF)", logx=True,
                       logy=False),
                   note="The period model (Lemma 4.4) assumes that in period i a fraction "
                        "1 − (s+i)/(s+j) of the length-j jobs started with õ = i is deleted, so "
                        "short jobs overtake long ones. In the slotted model the completions of "
                        "short jobs free memory faster than the survivors grow: the one-step "
                        "overflow check almost never fires (restarts above), long jobs started at "
                        "õ = ℓ keep running, and A_min performs like random-order packing "
                        "(A_random's ratio in the data). ρ(C_u) is the fluid value, not A_min's "
                        "ratio in the round model; the gap does not shrink as M grows.")

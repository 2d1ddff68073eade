"""Claims of Bari, Hegde and de Veciana.

Every number comes from the illustrative parameter set of spec §9 (a Mistral-7B-like model
on a 142-SM GPU at 150 TFLOP/s with tile t* = (128, 256, 32)) — a toolkit assumption, NOT
from the paper, which gives no μ values. The theory simulations use a small exact pmf
(prompts 256/512/1024/2048, decodes uniform on 1..128; also illustrative) so that runs stay
short; the SLAI studies use the Table 1 workload with a per-batch overhead ``c0 = 5 ms`` and
a 200 000-token KV pool (calibration choices, spec §6.7, §9).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import sympy as sp
from scipy import stats

from ..bounds.quantile_std import min_std_given_quantiles
from ..bounds.rad_capacity import (
    distserve_split,
    lcm_chunking_counterexample,
    optimal_chunking,
    rad_capacity,
    rad_n_min,
    request_time,
    request_time_sym,
    t_max,
    uniform_chunk_bracket,
)
from ..capacity.slo_scan import slo_capacity, slo_metrics
from ..engine import simulate
from ..errors import moved_names
from ..networks import DistServe
from ..papers import bari2025 as paper
from ..plotting import (
    bars,
    finish,
    lines,
    plot_paths,
    reference,
    reference_curve,
    series_style,
)
from ..policies import Sarathi
from ..policies.rad import RAD, SLAI, CycleScheduler, RequestLevel
from ..stability import growth_rate, stability
from ..timing import BatchLoad, GPUModel, TiledGPUTime
from ..workload.rad import table1_decode_std_bound, table1_workload
from .base import Outcome, claim

TILED = ("Eq. 7 tiled batch-time model (the package's illustrative parameters); engine "
         'first_token="prefill" (Def. 1: the last prefill chunk emits the first token)')
CLOSED = ("Eqs. 6–12 in closed form (sympy, exact integers) with the package's illustrative "
          "parameters")
SLAI_MODEL = ('calibrated Eq. 7 model (c0 = 5 ms), Table 1 workload, 200 000-token KV pool, '
              'first_token="prefill"')
# The paper's instances (queuetheory.papers.bari2025), under the short names the checks use.
_tm = paper.tiled_model
_pmf = paper.theory_pmf
_capacity = paper.theory_capacity
_workload = paper.theory_workload
_work_rate = paper.work_rate
PROMPTS, MAX_DECODE = paper.PROMPTS, paper.MAX_DECODE


def _run(policy, rho, n_requests, seed=1):
    cap = _capacity()
    tr = _workload(rho * cap.lambda_star).sample(n_requests=n_requests, seed=seed)
    return simulate(tr, policy, _tm(), horizon=float(tr.arrival[-1]), first_token="prefill",
                    seed=seed)


# ---- the batch-time model ----------------------------------------------------------------------
@claim("bari2025.eq7_staircase",
       statement="The batch time (Eq. 7) is a staircase in the token count: its linear part "
                 "jumps by 1/μ_Lin at every multiple of t*_col and is flat in between "
                 ", while each decode adds GeMV attention that grows with context.",
       expected="confirmed",
       convention=TILED,
       scope="exact evaluation of the batch-time model")
def _staircase(quick: bool) -> Outcome:
    tm = _tm()
    tc = tm.tile[1]
    tokens = np.arange(1, 4 * tc + 1)
    lin = np.array([tm.components(BatchLoad.of_tokens(decodes=int(b), context=0))["linear"]
                    for b in tokens])
    jumps = np.flatnonzero(np.diff(lin) > 0) + 1          # index of the first token after a jump
    at = [int(x) for x in tokens[jumps] - 1]
    steps_ok = at == [tc, 2 * tc, 3 * tc]
    heights = np.diff(lin)[jumps - 1]
    height_ok = bool(np.allclose(heights, tm.inv_mu_lin, rtol=1e-12))
    dec = [tm.duration(BatchLoad.of_tokens(prefill=512 - k, decodes=k, context=512))
           for k in (0, 32, 64, 128)]
    grows = bool(np.all(np.diff(dec) > 0))
    ok = steps_ok and height_ok and grows
    return Outcome("confirmed" if ok else "refuted",
                   f"linear term steps at {at} tokens by "
                   f"{heights[0] * 1e3:.3f} ms; 512-token batch with 0/32/64/128 decodes at "
                   f"position 513: {', '.join(f'{x * 1e3:.2f}' for x in dec)} ms (Fig. 5c shape)",
                   {"steps": at, "fig5c_s": dec},
                   plot=lambda ax: lines(
                       ax, tokens, {"linear term of Eq. 7": lin * 1e3},
                       title="Eq. 7: the linear term is a staircase in the token count",
                       xlabel="tokens in the batch", ylabel="time (ms)", logx=False,
                       logy=False, markers=False))


@claim("bari2025.eq12_closed_form",
       statement="T*^R (Eq. 12) equals the sum of RAD's batch times for one request's prefill in "
                 "t*_lcm chunks plus t*_col-wide decode batches, in closed form with ceilings "
                 "(sympy) and numerically; the Monte Carlo mean of T*^R converges to the exact "
                 "T̄^R (Proposition 2).",
       expected="confirmed",
       convention=CLOSED,
       scope="exact (sympy) and Monte Carlo over the illustrative length pmf")
def _closed_form(quick: bool) -> Outcome:
    tm = _tm()
    tl = tm.t_lcm
    worst = 0.0
    for L in (tl, 2 * tl, 6 * tl):
        starts = np.arange(0, L, tl)
        batches = sum(tm.batch_time(chunks=[(s + 1, tl)]) for s in starts)
        closed = request_time(L, 1, tm, variant="paper", parts=True)
        prefill = (L * tm.inv_mu_lin / tm.tile[1] + L * tm.gpu.inv_mu_nlin
                   + closed["prefill_attention"][0])
        worst = max(worst, abs(batches - prefill) / prefill)
    expr, LP, LD = request_time_sym(tm)
    pairs = [(256, 1), (512, 77), (2048, 415), (4096, 1000)]
    sym_err = max(abs(float(expr.subs({LP: a, LD: b})) - request_time(a, b, tm)[0])
                  / request_time(a, b, tm)[0] for a, b in pairs)
    bracket = int(tm.prefill_bracket(np.arange(8) * tl + 1, tl).sum())
    closed_bracket = sp.Rational(tm.model.d * 2048 * (2048 + tl),
                                 tm.tile[0] * tm.tile[1] * tm.tile[2])
    exact = _capacity()
    p, d, _ = _pmf()
    rng = np.random.default_rng(7)
    k = rng.integers(0, p.size, 20_000 if quick else 400_000)
    mc = rad_capacity(p[k], d[k], tm)
    z = (mc.T_R - exact.T_R) / mc.stderr
    ok = worst < 1e-12 and sym_err < 1e-12 and bracket == closed_bracket and abs(z) < 4
    return Outcome("confirmed" if ok else "refuted",
                   f"RAD prefill batches vs closed form: rel. err {worst:.1e}; sympy vs numpy "
                   f"{sym_err:.1e}; Eq. 6 bracket over 8 chunks {bracket} = {closed_bracket}; "
                   f"T̄^R exact {exact.T_R:.6f} s vs MC {mc.T_R:.6f} ± {mc.stderr:.1e} (z={z:.2f})",
                   {"T_R": exact.T_R, "T_R_mc": mc.T_R, "z": z, "lambda_star": exact.lambda_star},
                   plot=lambda ax: bars(
                       ax, {"Monte Carlo (± 4 s.e. below)": mc.T_R, "exact T̄^R": exact.T_R},
                       title=f"Proposition 2: T̄^R exact against Monte Carlo (s.e. "
                             f"{mc.stderr:.1e} s)",
                       ylabel="mean request time T̄^R (s)", logy=False))


@claim("bari2025.lcm_chunking_optimal",
       statement="Prefilling in chunks of t*_lcm = LCM(t*_row, t*_col, t*_red) minimises the "
                 "prefill time (Eq. 10 step (c)), so T*^R of Eq. 12 lower-bounds "
                 "every schedule (Proposition 1).",
       expected="refuted",
       convention=CLOSED,
       scope="finite instances: exhaustive over chunkings of prompts up to k·t_lcm, six tiles")
def _lcm_chunking(quick: bool) -> Outcome:
    tiles = [(128, 256, 32), (128, 128, 32), (64, 256, 64), (256, 128, 32), (256, 64, 32),
             (128, 64, 64)]
    k_max = 4 if quick else 6
    found = {}
    for t in tiles:
        res = lcm_chunking_counterexample(_tm(t), k_max)
        found[t] = None if res is None else (res.prompt, res.ratio, res.chunks)
    optimal = [t for t, v in found.items() if v is None]
    broken = {t: v for t, v in found.items() if v is not None}
    t_bad = (256, 128, 32)
    full = optimal_chunking(6 * lcm_of(t_bad), _tm(t_bad))
    total = optimal_chunking(lcm_of(t_bad) * (2 if quick else 6), _tm(t_bad), objective="time")
    # the proof's own objective: after step (a) drops the ceilings, one-token chunks are
    # cheapest for every tile, so "t_lcm chunks are optimal" does not follow as proved
    tm0 = _tm()
    L = 8 * tm0.t_lcm
    free = {c: uniform_chunk_bracket(L, c, tm0, ceilings=False) for c in (1, tm0.t_lcm)}
    free_ok = free[1] == Fraction(tm0.model.d * L * (L + 1), int(np.prod(tm0.tile)))
    cap = _capacity()
    gap = 1 - cap.T_R_LB / cap.T_R
    verdict = "refuted" if broken and free[1] < free[tm0.t_lcm] and free_ok else "confirmed"
    first = broken.get(t_bad)
    sizes = [2 ** k for k in range(0, 12) if L % 2 ** k == 0]
    curves = {f"Eq. 6 with ceilings, t*={t}": [float(uniform_chunk_bracket(
        L2, c, _tm(t)) / uniform_chunk_bracket(L2, _tm(t).t_lcm, _tm(t))) for c in sizes]
        for t, L2 in (((128, 256, 32), L), (t_bad, 8 * lcm_of(t_bad)))}
    curves["without ceilings (the proof's step (a))"] = [
        float(uniform_chunk_bracket(L, c, tm0, ceilings=False) / free[tm0.t_lcm]) for c in sizes]
    return Outcome(verdict,
                   f"with ceilings: t_lcm chunks optimal for {optimal}, beaten for "
                   f"{sorted(broken)}; t*={t_bad}: smallest L^P={first[0] if first else '-'} "
                   f"(ratio {float(first[1]) if first else 1:.4f}); L^P=6·t_lcm attention "
                   f"{full.cost} vs {full.lcm_cost} (ratio {float(full.ratio):.4f}), whole "
                   f"prefill time ratio {total.ratio:.6f}. Without ceilings (the cost the proof "
                   f"minimises), L^P = {L}: one-token chunks {float(free[1]):g} < t_lcm "
                   f"chunks {float(free[tm0.t_lcm]):g}; T̄^R_LB = (1 − {gap:.2e}) T̄^R",
                   {"broken": {str(t): (v[0], str(v[1])) for t, v in broken.items()},
                    "ratio_6": full.ratio, "time_ratio": total.ratio,
                    "ceiling_free": {str(k): str(v) for k, v in free.items()},
                    "lb_gap": gap},
                   note="Two failures. With the batch time's ceilings, chunks of t*_col beat "
                        "t*_lcm chunks whenever t*_lcm > t*_col, so T*^R is then not a lower "
                        "bound. And the proof itself drops the ceilings (step (a)) before "
                        "claiming t_lcm chunks minimise the cost: the ceiling-free cost "
                        "Σ c(i + c − 1) is smallest for one-token chunks, giving d L(L+1) "
                        "instead of d L(L + t_lcm). The valid bound is T*^R_LB; "
                        "the difference is small for the paper's tile (the relative gap above).",
                   plot=lambda ax: _plot_chunks(ax, sizes, curves, tm0.t_lcm))


def _plot_chunks(ax, sizes, curves, t_lcm):
    for i, (name, y) in enumerate(curves.items()):
        ax.plot(sizes, y, label=name, **series_style(i))
    reference(ax, 1.0, "t*_lcm chunks (RAD)")
    ax.set_xscale("log", base=2)
    finish(ax, title="Prefill attention cost of equal chunks, relative to t*_lcm chunks",
           xlabel="chunk size (tokens)", ylabel="Eq. 6 bracket / bracket at t*_lcm",
           logx=False, logy=True)


def lcm_of(t):
    return _tm(t).t_lcm


# ---- Proposition 1, Theorem 1, Lemma 1 -----------------------------------------------------------
def _random_schedule(rng, tm_choices, prompts, decodes):
    """A random feasible batch sequence completing every request: random chunk sizes,
    random mixing of prefill chunks and decodes, a random tile per batch."""
    k = prompts.size
    pre = np.zeros(k, dtype=np.int64)
    dec = np.zeros(k, dtype=np.int64)
    total = 0.0
    while np.any(dec < decodes):
        prefill = np.flatnonzero(pre < prompts)
        decode = np.flatnonzero((pre >= prompts) & (dec < decodes))
        take_p = prefill[rng.random(prefill.size) < 0.5]
        take_d = decode[rng.random(decode.size) < 0.7]
        if take_p.size + take_d.size == 0:
            if prefill.size:
                take_p = prefill[:1]
            else:
                take_d = decode[:1]
        rem = prompts[take_p] - pre[take_p]
        chunk = np.minimum(rem, rng.integers(1, 2 * 256 + 1, take_p.size))
        tm = tm_choices[rng.integers(len(tm_choices))]
        total += tm.duration(BatchLoad(chunk, pre[take_p], prompts[take_d] + dec[take_d]))
        pre[take_p] += chunk
        dec[take_d] += 1
    return total


@claim("bari2025.proposition1",
       statement="Any batches that complete requests R_1..R_k take at least Σ_j T*^R(j) "
                 "(Proposition 1, Eq. 9–10).",
       expected="qualified",
       convention=TILED,
       scope="finite instances: random schedules and an exact chunking search")
def _proposition1(quick: bool) -> Outcome:
    rng = np.random.default_rng(11)
    tm = _tm()
    eff = {(128, 256, 32): 1.0, (128, 128, 32): 0.95, (64, 64, 32): 0.9}
    gpu = GPUModel.from_efficiency(efficiency=eff)
    mixed = [TiledGPUTime(tm.model, gpu, t, check=False) for t in eff]
    n = 30 if quick else 300
    worst_paper, worst_lb, worst_mixed = np.inf, np.inf, np.inf
    for _ in range(n):
        k = int(rng.integers(1, 5))
        prompts = rng.choice(np.array(PROMPTS[:3]), k)
        decodes = rng.integers(1, 9, k)
        paper = request_time(prompts, decodes, tm).sum()
        lb = request_time(prompts, decodes, tm, variant="lb").sum()
        t1 = _random_schedule(rng, [tm], prompts, decodes)
        t2 = _random_schedule(rng, mixed, prompts, decodes)
        worst_paper = min(worst_paper, t1 / paper)
        worst_lb = min(worst_lb, t1 / lb, t2 / lb)
        worst_mixed = min(worst_mixed, t2 / paper)
    bad = lcm_chunking_counterexample(_tm((256, 128, 32)), 2)
    per_tile = optimal_chunking(2048, TiledGPUTime(tm.model, gpu), objective="time",
                                tiles=list(eff))
    ok_lb = worst_lb >= 1 - 1e-12 and worst_paper >= 1 - 1e-12
    paper_fails = bad is not None or per_tile.ratio < 1
    verdict = ("qualified" if ok_lb and paper_fails else "confirmed" if ok_lb else "refuted")
    return Outcome(verdict,
                   f"{n} random schedules: min Σ T_B / Σ T*^R_LB = {worst_lb:.4f}; with t* "
                   f"only, min Σ T_B / Σ T*^R = {worst_paper:.4f}; with per-batch tiles "
                   f"{worst_mixed:.4f}; exact search: t*=(256,128,32) "
                   f"L^P={bad.prompt if bad else '-'} ratio "
                   f"{float(bad.ratio) if bad else 1:.4f}; per-chunk tiles at L^P=2048 "
                   f"ratio {per_tile.ratio:.6f}",
                   {"min_lb": worst_lb, "min_paper": worst_paper, "per_tile": per_tile.ratio},
                   note="Holds with the ceiling-free T*^R_LB for every schedule; "
                        "with the paper's T*^R only when every batch uses t* and t*_lcm = "
                        "t*_col.",
                   plot=lambda ax: bars(
                       ax, {"any schedule / Σ T*^R_LB": worst_lb,
                            "t* only / Σ T*^R": worst_paper,
                            "per-batch tiles / Σ T*^R": worst_mixed,
                            "per-chunk tiles (L^P=2048) / t_lcm": float(per_tile.ratio)},
                       title="Proposition 1: the smallest schedule time over its lower bound",
                       ylabel="ratio (≥ 1 where the bound holds)", reference_value=1.0,
                       reference_label="bound", logy=False))


@claim("bari2025.theorem1",
       statement="If λ T̄^R > r, every planner and scheduler is unstable: Q(t)/t stays above "
                 "α = (λT̄^R/r − 1)/T^max (Theorem 1, Lemma 1).",
       expected="qualified",
       convention=TILED,
       scope="finite-horizon growth at one overload; Lemma 1 at every batch")
def _theorem1(quick: bool) -> Outcome:
    cap = _capacity()
    tm = _tm()
    rho = 1.3 * cap.T_R / cap.T_R_LB
    n = 1500 if quick else 6000
    T_max = t_max(tm, max(PROMPTS) + MAX_DECODE, safe=True)
    rows, results = {}, {}
    lemma1 = True
    for name, pol in (("RAD", RAD(tm.tile)), ("Sarathi", Sarathi(512)),
                      ("Sarathi-SPF", Sarathi(512, order="sjf_prompt"))):
        res = results[name] = _run(pol, rho, n)
        g = growth_rate(res)
        req = res.requests
        lb = request_time(req["prompt"].to_numpy(), req["output"].to_numpy() - 1, tm,
                          variant="lb")
        b = res.batches
        t = b["start"].to_numpy()
        cum = np.concatenate([[0.0], np.cumsum(lb)])
        arrived = cum[np.searchsorted(req["arrival"].to_numpy(), t, side="right")]
        lemma1 &= bool(np.all(b["in_system"].to_numpy() >= (arrived - t) / T_max - 1e-9))
        rows[name] = (g.verdict, g.relative)
    all_unstable = all(v[0] == "unstable" for v in rows.values())
    gap = lcm_chunking_counterexample(_tm((256, 128, 32)), 2) is not None
    verdict = "qualified" if all_unstable and lemma1 and gap else (
        "confirmed" if all_unstable and lemma1 else "refuted")
    return Outcome(verdict,
                   f"λ = 1.3 r/T̄^R_LB ({rho:.3f} λ*): "
                   + ", ".join(f"{k} {v[0]} (growth {v[1]:.3f} of offered tokens)"
                              for k, v in rows.items())
                   + f"; Lemma 1 with T̄^R_LB held at every batch: {lemma1}",
                   {"rows": rows, "lambda_star": cap.lambda_star, "lambda_lb": cap.lambda_lb},
                   note="Valid with T̄^R_LB (λ > r/T̄^R_LB ⇒ unstable); with the paper's T̄^R "
                        "the proof's step (c) fails when t*_lcm > t*_col (see "
                        "bari2025.lcm_chunking_optimal). Proof also needs Assumption 3 and "
                        "bounded lengths.",
                   plot=lambda ax: plot_paths(
                       results, ax, quantity="in_system", time_label="time (s)",
                       title=f"Theorem 1: requests in system at λ = {rho:.2f} λ*"))


# ---- Theorem 2, Lemmas 3-4, design principles ----------------------------------------------------
BOUNDARY = (0.95, 1.05)
"""The loads ρ = λ/(rλ*) on either side of RAD's capacity where Theorem 2 is checked."""


def node_stability(make_policy, rho: float, n: int, seeds, level: float = 0.99):
    """:func:`queuetheory.stability` of one node fed at ``ρ λ*`` (Poisson). Uniform random
    routing of Poisson arrivals to ``r`` nodes feeds each an independent Poisson stream of
    rate ``λ/r`` (thinning), so this is the verdict of every node of the routed system at
    ``λ = ρ r λ*``."""
    return stability(_workload(rho * _capacity().lambda_star), make_policy(), _tm(),
                     n_requests=n, seeds=seeds, level=level, first_token="prefill",
                     max_horizon=4 * n / (rho * _capacity().lambda_star))


def reaches_capacity(work) -> bool:
    """The work-rate leg: every node does between 95 % and 100 % of λ*'s optimal work a
    second. The upper end holds by construction for RAD (its tokens are priced at its own
    optimal costs, so 1 means no time lost); the lower end fails for a scheduler that loses
    capacity, such as request-level batching (Alg. 3)."""
    return all(0.95 < w <= 1 for w in work)


@claim("bari2025.theorem2",
       statement="Uniformly random routing with RAD on every node is stable whenever "
                 "λ T̄^R ≤ r(1 − ε) (n large enough), so λ* = r/T̄^R is the capacity. Checked "
                 "on both sides of λ*, 5 % away, on one system (RAD nodes behind random "
                 "routing): at ρ = λ/(rλ*) = 0.95 every node is 'stable' and at ρ = 1.05 "
                 "'unstable' (qt.stability), the backlog growing at the rate λ* predicts, "
                 "(ρ − 1)/ρ of the offered work, within 4 standard errors; and every node of "
                 "r = 2 at ρ = 1.05 does 95–100 % of λ*'s optimal work a second (the "
                 "work-rate leg, which rejects Alg. 3's request-level batching on the same "
                 "system).",
       expected="confirmed",
       convention=TILED,
       scope="finite-horizon growth (n = ∞ in simulation), ρ = 0.95 and 1.05; stability of "
             "one node (each node of the routed system by Poisson thinning), quick 3 seeds × "
             "10 000 requests, full 4 × 20 000, horizons doubled while inconclusive; the work "
             "leg on r = 2 routed nodes")
def _theorem2(quick: bool) -> Outcome:
    n, seeds = (10_000, range(3)) if quick else (20_000, range(4))
    rad = lambda: RAD(_tm().tile)  # noqa: E731 - one factory for every run
    below, above = (node_stability(rad, rho, n, seeds) for rho in BOUNDARY)
    predicted = (BOUNDARY[1] - 1) / BOUNDARY[1]
    lo, hi = above.drift_interval
    se = (hi - lo) / (2 * stats.norm.ppf(0.5 + above.level / 2))
    grows = above.verdict == "unstable" and abs(above.drift - predicted) <= 4 * se
    work = paper.routed_work(rad, BOUNDARY[1], n // 2)
    ok = below.verdict == "stable" and grows and reaches_capacity(work)
    cap = _capacity()
    return Outcome("confirmed" if ok else "refuted",
                   f"λ* = {cap.lambda_star:.3f}/s a node; ρ = 0.95: {below.verdict}, backlog "
                   f"drift {below.drift:+.1%} of the offered work [{below.drift_interval[0]:+.1%}"
                   f", {below.drift_interval[1]:+.1%}]; ρ = 1.05: {above.verdict}, "
                   f"{above.drift:+.1%} [{lo:+.1%}, {hi:+.1%}] against (ρ − 1)/ρ = "
                   f"{predicted:.1%}; r = 2 at ρ = 1.05: optimal work per second "
                   + ", ".join(f"{w:.4f}" for w in work) + " of λ*",
                   {"below": _verdict_data(below), "above": _verdict_data(above),
                    "predicted_drift": predicted, "drift_se": se, "work": work},
                   note="n = ∞ in simulation; Theorem 2's sufficient n is far larger "
                        "(see rad_n_min), I-25. Both sides of λ* on the same system and "
                        "workload: below, the backlog does not grow (within 3 % of the "
                        "offered work at 99 %); above, it grows at the rate the capacity λ* "
                        "predicts, and RAD does λ*'s work. The work rate cannot exceed 1 for "
                        "RAD by construction, so that leg tests its lower end: no capacity "
                        "lost.",
                   plot=lambda ax: _plot_boundary(ax, below, above))


def _verdict_data(v) -> dict:
    return {"verdict": v.verdict, "drift": v.drift, "drift_interval": list(v.drift_interval),
            "horizon": v.horizon, "rounds": v.rounds}


def _plot_boundary(ax, below, above):
    for i, (rho, v) in enumerate(zip(BOUNDARY, (below, above), strict=True)):
        lo, hi = v.drift_interval
        ax.errorbar([rho], [v.drift], yerr=[[v.drift - lo], [hi - v.drift]], fmt="o",
                    capsize=4, label=f"ρ = {rho}: {v.verdict} (99 % interval)",
                    **{k: x for k, x in series_style(i).items() if k == "color"})
    grid = np.linspace(*BOUNDARY, 50)
    reference_curve(ax, grid, np.maximum(0, (grid - 1) / grid), "(ρ − 1)/ρ above λ*, 0 below")
    finish(ax, title="Theorem 2: RAD on both sides of λ* (one node of the routed system)",
           xlabel="ρ = λ / (r λ*)", ylabel="backlog drift / offered work", logy=False)


@claim("bari2025.lemma3_cycle_bounds",
       statement="A RAD cycle started with ≥ n pending requests lasts between Σ T*^R of its "
                 "requests and that plus (t*_col − 1) T^max (Eq. 23–25); mean cycle length "
                 "≤ r/λ + n T^max (Lemma 4).",
       expected="confirmed",
       convention=TILED,
       scope="finite instances: every backlogged cycle of one run")
def _lemma3(quick: bool) -> Outcome:
    tm = _tm()
    n_cyc = 64
    pol = RAD(tm.tile, n=n_cyc)
    res = _run(pol, 1.2, 1200 if quick else 5000)
    cyc = pol.cycles(res).dropna(subset=["end"])
    back = cyc[cyc["pending"] >= n_cyc]
    req = res.requests
    T_max = t_max(tm, max(PROMPTS) + MAX_DECODE)
    lo_ok = hi_ok = True
    excess = []
    for _, c in back.iterrows():
        rid = c["rids"]
        opt = request_time(req["prompt"].to_numpy()[rid], req["output"].to_numpy()[rid] - 1,
                           tm).sum()
        length = c["end"] - c["start"]
        lo_ok &= bool(length >= opt * (1 - 1e-9))
        hi_ok &= bool(length <= opt + (tm.tile[1] - 1) * T_max)
        excess.append(length - opt)
    cap = _capacity()
    lam = 1.2 * cap.lambda_star
    lemma4 = float((cyc["end"] - cyc["start"]).mean()) <= 1 / lam + n_cyc * T_max
    ok = len(back) >= 3 and lo_ok and hi_ok and lemma4
    # a backlogged cycle serves n requests in n T̄^R + excess: RAD(n)'s own capacity
    own = n_cyc / (n_cyc * cap.T_R + float(np.mean(excess))) / cap.lambda_star
    return Outcome("confirmed" if ok else "refuted",
                   f"{len(back)} backlogged cycles (n={n_cyc}): excess over Σ T*^R "
                   f"{np.min(excess):.3f}…{np.max(excess):.3f} s vs allowance "
                   f"{(tm.tile[1] - 1) * T_max:.0f} s; Lemma 4 holds: {lemma4}; so RAD with "
                   f"n={n_cyc} sustains only ≈ {own:.2f} λ* (Theorem 2 asks n > "
                   f"{rad_n_min(0.1, cap.T_R, T_max, tm.tile[1]):.2g} for ε = 0.1)",
                   {"excess": excess, "cycles": len(back), "rad_n_capacity": own},
                   note="The excess per cycle is the decode tail with fewer than t*_col "
                        "requests; it is roughly constant in n, so RAD's capacity n/(n T̄^R + "
                        "excess) reaches λ* only as n grows (n = ∞ in the other claims).",
                   plot=lambda ax: lines(
                       ax, np.arange(1, len(excess) + 1),
                       {"cycle length − Σ T*^R of its requests": excess},
                       references={"allowance (t*_col − 1) T^max": (tm.tile[1] - 1) * T_max},
                       title=f"Lemma 3: excess of {len(excess)} backlogged RAD cycles, n = {n_cyc}",
                       xlabel="cycle", ylabel="time (s)", logy=True))


@claim("bari2025.design_principles",
       statement="Optimal tiling plus dynamic allocation matter: capacity(RAD) ≈ "
                 "capacity(Alg. 2) ≥ capacity(Sarathi-Serve) and ≥ capacity(DistServe, best "
                 "static split) (§5); request-level batching (Alg. 3) is lowest; RAD pays "
                 "with a higher TBT tail than Sarathi-Serve.",
       expected="confirmed",
       convention=TILED,
       scope="finite-horizon experiment at ρ = 1.2; quick 1200 requests, full 5000",
       expected_full="qualified",
       full_differs="""With 5000 requests Alg. 2 (cycles of n = 256) does about 5 % less optimal
       work per second than RAD (0.95 against 1.00 of λ*): its per-cycle decode tail costs
       capacity at finite n, as Lemma 3 predicts for RAD(n). 'capacity(RAD) ≈ capacity(Alg. 2)'
       then holds only within 10 %; the shorter quick run does not resolve the gap.""")
def _design(quick: bool) -> Outcome:
    tm = _tm()
    cap = _capacity()
    n = 1200 if quick else 5000
    work, tbt = {}, {}
    for name, pol in (("RAD", RAD(tm.tile)), ("Alg2", CycleScheduler(tm.tile, n=256)),
                      ("Sarathi", Sarathi(512)), ("Alg3", RequestLevel(tm.tile[1]))):
        res = _run(pol, 1.2, n)
        work[name] = _work_rate(res)
        tbt[name] = res.metrics["p99_tbt"]
    split = distserve_split(cap.T_P, cap.T_D, 2)
    tr = _workload(1.2 * 2 * cap.lambda_star).sample(n_requests=n, seed=1)
    ds = DistServe(split.r_prefill, 2 - split.r_prefill, chunk=tm.t_lcm).run(
        tr, tm, horizon=float(tr.arrival[-1]), seed=1)
    ds_rate = ds.attrs["completion_rate"] / (2 * cap.lambda_star)
    rest = (work["RAD"] >= work["Sarathi"] and work["RAD"] > split.share
            and tbt["RAD"] > tbt["Sarathi"]
            and work["Alg3"] < min(work["RAD"], work["Alg2"], work["Sarathi"]))
    gap = abs(work["RAD"] - work["Alg2"])
    verdict = ("confirmed" if rest and gap < 0.05 else "qualified" if rest and gap < 0.1
               else "refuted")
    return Outcome(verdict,
                   "optimal work per second at ρ=1.2 (1 = λ*): "
                   + ", ".join(f"{k} {v:.3f}" for k, v in work.items())
                   + f"; DistServe best static split r=2 (r_p={split.r_prefill}): "
                   f"{split.share:.3f} of 2λ* (simulated completions {ds_rate:.3f}); P99 TBT "
                   + ", ".join(f"{k} {1e3 * v:.0f} ms" for k, v in tbt.items()),
                   {"work": work, "distserve_share": split.share, "distserve_sim": ds_rate,
                    "p99_tbt": tbt},
                   note="RAD trades TBT for throughput: a whole prefill runs between two "
                        "decode batches. Alg. 2 decodes back to back, but "
                        "with the first token emitted by the last prefill chunk (Def. 1) its "
                        "first gap spans the rest of the prefill phase, so its P99 TBT is the "
                        "largest; its 'low TBT' holds only for the later gaps.",
                   plot=lambda ax: bars(
                       ax, work, title="§5: optimal work done per second at ρ = 1.2 (1 = λ*)",
                       ylabel="work rate / λ*", reference_value=split.share,
                       reference_label=f"DistServe best static split ({split.share:.3f})",
                       logy=False))


@claim("bari2025.table1_decode_std",
       statement="Table 1: decode lengths with median 415, P90 834 and std 101.",
       expected="refuted",
       convention="Table 1 read as median / P90 / std of the decode length (tokens ≥ 1)",
       scope="every distribution on the integers (exact LP)")
def _table1(quick: bool) -> Outcome:
    b = table1_decode_std_bound(415, 834, 101)
    lp = min_std_given_quantiles({0.5: 415, 0.9: 834}, 2048 if quick else 8192)
    impossible = not b.possible and lp.std > 101
    atoms = ", ".join(f"{int(x)}: {w:.2f}" for x, w in zip(lp.support, lp.pmf, strict=True))
    return Outcome("refuted" if impossible else "confirmed",
                   f"exact LP over distributions on 1…{2048 if quick else 8192} "
                   f"with median 415 and P90 834: smallest std {lp.std:.2f} > 101 (attained by "
                   f"{{{atoms}}}, mean {lp.mean:.1f}); Cantelli: mean ≤ {b.max_mean}, so "
                   f"P(L^D ≥ 834) ≤ {b.tail_bound_at_reported_std:.4f} < 0.10",
                   {"tail_bound": b.tail_bound_at_reported_std, "min_std": lp.std,
                    "min_std_law": {"support": lp.support, "pmf": lp.pmf}},
                   note="No distribution has these three figures: two independent arguments "
                        "(Cantelli's inequality, and the exact minimum of the std over all "
                        "integer laws with that median and P90, a linear programme for each "
                        "centre solved with HiGHS) both exclude std 101. One of the columns is "
                        "misprinted, but which cannot be told, so no correction is given; the "
                        "lognormal fitted to median and P90 has std ≈ 283. The SLAI "
                        "claims here use the median and P90 only.",
                   plot=lambda ax: _plot_table1(ax, lp))


def _plot_table1(ax, lp):
    ax.bar(lp.support, lp.pmf, width=12, color="C0", label=f"smallest-std law (std "
           f"{lp.std:.1f})")
    for v, name in ((415, "median 415"), (834, "P90 834")):
        reference(ax, v, name, axis="x", color="C1" if v == 415 else "C2")
    ax.axvspan(lp.mean - 101, lp.mean + 101, color="0.85", label="mean ± 101 (printed std)")
    finish(ax, title="Table 1: the least-spread decode-length law with median 415 and P90 834",
           xlabel="decode length (tokens)", ylabel="probability", logy=False)


# ---- SLAI (qualitative, calibrated model) --------------------------------------------------------
MEMORY = paper.MEMORY


def _slai_run(policy, rate, horizon, p_paying=0.05, seed=1):
    tm = _tm(c0=0.005)
    res = simulate(table1_workload(rate, p_paying=p_paying), policy, tm, horizon=horizon,
                   first_token="prefill", seed=seed, memory=MEMORY)
    return res, slo_metrics(res)


def _variants():
    return {"Sarathi (FCFS)": SLAI.sarathi(512, order="fcfs"),
            "Sarathi (SPF)": SLAI.sarathi(512, order="spf"),
            "SLAI (SPF, fixed)": SLAI(512, order="spf"),
            "SLAI (SPF, dynamic)": SLAI(512, order="spf", offset="dynamic")}


@claim("bari2025.slai_ttft",
       statement="At high load the median TTFT orders SLAI (SPF, dynamic) < SLAI (SPF, fixed) "
                 "< Sarathi (SPF) < Sarathi (FCFS); paper: 1.5 s → 0.7 s (−53 %).",
       expected="confirmed",
       convention=SLAI_MODEL,
       scope="finite-horizon experiment, calibrated model")
def _slai_ttft(quick: bool) -> Outcome:
    horizon = 150 if quick else 1200
    seeds = (1, 2) if quick else (1, 2, 3)
    med = {}
    for name in _variants():
        med[name] = float(np.mean([_slai_run(_variants()[name], 2.4, horizon, seed=k)[0]
                                   .requests["ttft"].median() for k in seeds]))
    v = list(med.values())
    ok = all(a > b for a, b in zip(v, v[1:], strict=False))
    cut = 1 - med["SLAI (SPF, dynamic)"] / med["Sarathi (FCFS)"]
    return Outcome("confirmed" if ok else "refuted",
                   f"median TTFT at 2.4 req/s (mean over {len(seeds)} seeds): "
                   + ", ".join(f"{k} {x:.2f} s" for k, x in med.items())
                   + f"; reduction {100 * cut:.0f} % (paper 53 % on a real GPU)",
                   {"median_ttft": med, "reduction": cut},
                   note="Calibrated Eq. 7 model (c0 = 5 ms, illustrative parameters, not the "
                        "paper's GPU); the ordering, not the number, is the claim.",
                   plot=lambda ax: bars(
                       ax, med, title="SLAI: median TTFT at 2.4 requests/s",
                       ylabel="median TTFT (s)", logy=False))


@claim("bari2025.slai_free_tbt",
       statement="SLAI's free-tier P99 TBT is non-monotone in load (rise, drop, rise) while "
                 "Sarathi's rises monotonically.",
       expected="confirmed",
       convention=SLAI_MODEL,
       scope="finite-horizon experiment, calibrated model")
def _slai_tbt(quick: bool) -> Outcome:
    horizon = 60 if quick else 800
    rates = (0.4, 1.8, 3.0) if quick else (0.4, 1.0, 1.8, 2.6, 3.4, 4.2)
    slai, sar = [], []
    for rate in rates:
        slai.append(float(_slai_run(SLAI(512, order="spf"), rate, horizon)[1]["p99_tbt"][0]))
        if not quick or rate in (rates[0], rates[-1]):
            sar.append(float(_slai_run(SLAI.sarathi(512), rate, horizon)[1]["p99_tbt"][0]))
    d = np.sign(np.diff(slai))
    nonmono = bool(np.any(d > 0) and np.any(d < 0))
    sar_up = bool(np.all(np.diff(sar) >= -1e-3) and sar[-1] > sar[0])   # non-decreasing
    ok = nonmono and sar_up
    return Outcome("confirmed" if ok else "refuted",
                   "free P99 TBT, SLAI (SPF, fixed): "
                   + ", ".join(f"{r}: {x:.3f} s" for r, x in zip(rates, slai, strict=True))
                   + "; Sarathi: " + ", ".join(f"{x:.3f}" for x in sar),
                   {"rates": rates, "slai": slai, "sarathi": sar},
                   plot=lambda ax: lines(
                       ax, rates, {"SLAI (SPF, fixed)": slai,
                                   "Sarathi": (rates if len(sar) == len(rates)
                                               else [rates[0], rates[-1]], sar)},
                       title="SLAI: the free tier's P99 TBT against the load",
                       xlabel="arrival rate (requests/s)", ylabel="P99 TBT (s)", logy=False))


@claim("bari2025.slai_paying_share",
       statement="SLAI's gain over Sarathi-Serve (FCFS) shrinks as the paying share grows "
                 "5 % → 50 % → 95 % (paper: capacity +26 %, +22 %, +9 %), because fewer "
                 "decodes can be deferred.",
       expected="confirmed",
       convention=SLAI_MODEL,
       scope="finite-horizon experiment, calibrated model")
def _slai_share(quick: bool) -> Outcome:
    shares = (0.05, 0.5, 0.95)
    if not quick:
        return _slai_share_capacity(shares)
    horizon = 100
    gain = []
    for p in shares:
        sar = _slai_run(SLAI.sarathi(512), 2.4, horizon, p_paying=p)[0]
        sl = _slai_run(SLAI(512, order="spf", offset="dynamic"), 2.4, horizon,
                       p_paying=p)[0]
        gain.append(1 - float(sl.requests["ttft"].median()) / float(
            sar.requests["ttft"].median()))
    ok = gain[0] > gain[1] > gain[2]
    return Outcome("confirmed" if ok else "refuted",
                   "median-TTFT reduction at 2.4 req/s for 5/50/95 % paying: "
                   + ", ".join(f"{100 * g:.0f} %" for g in gain)
                   + " (paper capacity gains 26/22/9 %, TTFT cuts 53/51/62 %)",
                   {"gain": gain},
                   note="quick=True measures the median-TTFT reduction at one high load; "
                        "quick=False measures the capacity at median TTFT ≤ 0.5 s and P99 TBT "
                        "targets (slo_capacity) for each share.",
                   plot=lambda ax: bars(
                       ax, {f"{int(100 * s)} % paying": 100 * g
                            for s, g in zip(shares, gain, strict=True)},
                       title="SLAI's median-TTFT reduction over Sarathi (FCFS), 2.4 req/s",
                       ylabel="reduction (%)", logy=False))


def _slai_share_capacity(shares):
    """The paper's figure: capacity at median TTFT ≤ 0.5 s and P99 TBT targets, per share."""
    tm = _tm(c0=0.005)
    rates = np.round(np.arange(0.6, 4.01, 0.2), 2)
    gain, caps = [], []
    for p in shares:
        def wl(rate, p=p):
            return table1_workload(rate, p_paying=p)
        sar = slo_capacity(lambda: SLAI.sarathi(512), wl, tm, rates, horizon=600,
                           memory=MEMORY, seed=1)[0]
        sl = slo_capacity(lambda: SLAI(512, order="spf", offset="dynamic"), wl, tm, rates,
                          horizon=600, memory=MEMORY, seed=1)[0]
        caps.append((sar, sl))
        gain.append(np.nan if not sar or not sl else sl / sar - 1)
    ok = gain[0] >= gain[1] >= gain[2] and gain[0] > gain[2]     # at the grid's 0.2 req/s
    return Outcome("confirmed" if ok else "refuted",
                   "capacity (req/s) Sarathi FCFS → SLAI SPF dynamic for 5/50/95 % paying: "
                   + ", ".join(f"{a} → {b}" for a, b in caps)
                   + " on a 0.2 req/s grid (paper 1.15 → 1.45, 1.4, 1.25: +26/22/9 %)",
                   {"capacity": caps, "gain": gain},
                   plot=lambda ax: bars(
                       ax, {"Sarathi (FCFS)": {f"{int(100 * s)} %": c[0]
                                               for s, c in zip(shares, caps, strict=True)},
                            "SLAI (SPF, dynamic)": {f"{int(100 * s)} %": c[1]
                                                    for s, c in zip(shares, caps, strict=True)}},
                       title="SLAI: capacity at the latency targets, by paying share",
                       xlabel="paying share", ylabel="capacity (requests/s)", logy=False))



@claim("bari2025.slai_paying_priority",
       statement="SLAI (SPF with priority, dynamic offset) gives paying users a lower mean TTFT "
                 "than free users, with a small gain (Appendix F.2).",
       expected="qualified",
       convention=SLAI_MODEL,
       scope="finite-horizon experiment, calibrated model")
def _slai_priority(quick: bool) -> Outcome:
    horizon = 100 if quick else 800
    res, s = _slai_run(SLAI(512, order="spf", offset="dynamic", paying_first=True), 2.4,
                       horizon)
    base, s0 = _slai_run(SLAI(512, order="spf", offset="dynamic"), 2.4, horizon)
    paying, free = float(s.loc[1, "mean_ttft"]), float(s.loc[0, "mean_ttft"])
    gain = 1 - paying / float(s0.loc[1, "mean_ttft"])
    verdict = "refuted" if paying >= free else "confirmed" if gain < 0.25 else "qualified"
    return Outcome(verdict,
                   f"mean TTFT with paying priority: paying {paying:.2f} s, free {free:.2f} s "
                   f"(without priority: paying {float(s0.loc[1, 'mean_ttft']):.2f} s, free "
                   f"{float(s0.loc[0, 'mean_ttft']):.2f} s) at 2.4 req/s, 5 % paying",
                   {"paying": paying, "free": free, "paying_gain": gain},
                   note=f"Paying users do get the lower mean TTFT, but in the calibrated model "
                        f"priority cuts it by {100 * gain:.0f} % at this load, not the paper's "
                        "'small' gain; the direction holds, the size does not carry over.",
                   plot=lambda ax: bars(
                       ax, {"with paying priority": {"paying": paying, "free": free},
                            "without": {"paying": float(s0.loc[1, "mean_ttft"]),
                                        "free": float(s0.loc[0, "mean_ttft"])}},
                       title="SLAI: mean TTFT by tier, 2.4 requests/s, 5 % paying",
                       ylabel="mean TTFT (s)", logy=False))


#: Names that moved to :mod:`queuetheory.papers.bari2025` (they warn until the next release).
__getattr__ = moved_names(__name__, {"routed_work": (lambda: paper.routed_work,
                                                     "queuetheory.papers.bari2025.routed_work")})

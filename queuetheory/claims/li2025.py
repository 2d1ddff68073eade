"""Claims of Li, Dai, Peng: Theorem 1 and the instability of non-work-conserving
schedulers.

Time model: the paper's only fitted coefficients (Llama-3-70B, Eq. 2.3: ``c = 45.5`` ms,
``a = 0.30`` ms/token, ``b0 = 64``) scaled by ``s`` (spec §5.6), since with ``s = 1`` the
Fig. 1 workload (14.3 qps, prompts 129, outputs 112) exceeds ``1/a`` and no policy could be
stable. Loads are ``ρ = λ(m_p + m_d) t_b / b``.
"""

from __future__ import annotations

import itertools

from scipy import stats

from .. import policies
from ..capacity.bounds import vllm_unit_time_rate
from ..engine import simulate
from ..errors import moved_names
from ..papers import li2025 as paper
from ..plotting import plot_paths
from ..stability import growth_rate
from ..timing import UnitTime
from ..workload import RequestClass, Workload
from .base import Outcome, claim

ENGINE = ('engine, first_token="decode" (every output token takes a decode iteration), '
          "token budget b, batch time t_b = c + a·max(0, b′ − b0) (2.3)")
DTMC = "the unit-time slotted DTMC of App. B (Poisson arrivals per slot), exact drift"

BUDGET = 512
SEEDS = {True: (0,), False: (0, 1, 2)}
"""Seeds per growth verdict: one in quick mode (a long run, judged with a 99 % interval),
three in full mode."""


def _workload_at(rho, time_model, budget, prompt, output, poisson_sizes=True):
    """Poisson arrivals whose token load is ``rho`` times the full-batch rate ``b/t_b``."""
    capacity = budget / time_model.token_time(budget)
    mp = prompt if not poisson_sizes else stats.poisson(prompt - 1, loc=1)
    md = output if not poisson_sizes else stats.poisson(output - 1, loc=1)
    rate = rho * capacity / (prompt + output)
    return Workload([RequestClass(mp, md, rate)]), capacity


def _run(policy, rho, s, horizon, prompt=129, output=112, seed=0):
    tm = paper.llama_time(s)
    wl, capacity = _workload_at(rho, tm, BUDGET, prompt, output)
    res = simulate(wl, policy, tm, horizon=horizon, seed=seed, first_token="decode")
    return res, growth_rate(res), wl.token_rate - capacity


def _classic(order="fcfs"):
    return {
        f"Sarathi-{order}": policies.Sarathi(BUDGET, order=order),
        f"Orca-{order}": policies.Orca(BUDGET, order=order),
    }


@claim("li2025.theorem1a",
       statement="""Theorem 1(a): if λ(m_p+m_d) < b/t_b, every work-conserving (K_p,K_d)-FCFS
       policy is positive recurrent — Sarathi-Serve and Orca (FCFS and SJF) are stable at every
       load below capacity.""",
       expected="confirmed",
       convention=ENGINE,
       scope="finite-horizon growth verdicts (99 % interval); one seed quick, three full")
def _theorem1a(quick: bool) -> Outcome:
    horizon = 1.5e6 if quick else 6e6
    rhos = (0.9,) if quick else (0.5, 0.8, 0.9, 0.95)
    rows, paths = {}, {}
    for rho in rhos:
        for order in ("fcfs",) if quick else ("fcfs", "sjf_prompt"):
            for name, pol in _classic(order).items():
                for seed in SEEDS[quick]:
                    res, g, _ = _run(pol, rho, 0.8, horizon, seed=seed)
                    key = f"{name}@{rho}" + (f" seed {seed}" if seed else "")
                    rows[key] = (g.verdict, g.relative, g.ci_low, g.ci_high)
                    if seed == 0:
                        paths[f"{name}@{rho}"] = res.paths
    bad = {k: v for k, v in rows.items() if v[0] != "stable"}
    worst = max(rows.items(), key=lambda kv: kv[1][1])
    return Outcome(
        "confirmed" if not bad else "refuted",
        f"{len(rows) - len(bad)}/{len(rows)} runs stable; largest relative growth "
        f"{worst[1][1]:+.4f} ({worst[0]})",
        data={k: {"verdict": v[0], "relative_slope": v[1]} for k, v in rows.items()},
        note="Llama-3-70B fit scaled by s = 0.8, b = 512, Poisson sizes with means (129, 112).",
        plot=lambda ax: plot_paths(paths, ax, time_scale=1000, time_label="time (s)",
                                   title="Theorem 1(a): unfinished work below capacity"))


@claim("li2025.theorem1b",
       statement="""Theorem 1(b): if λ(m_p+m_d) > b/t_b, |X(n)| → ∞ under every policy, and the
       unfinished work of a work-conserving policy grows at rate λ(m_p+m_d) − b/t_b.""",
       expected="confirmed",
       convention=ENGINE,
       scope="finite-horizon growth slopes against the predicted rate; one seed quick, "
             "three full")
def _theorem1b(quick: bool) -> Outcome:
    horizon = 6e5 if quick else 3e6
    pols = {"Sarathi": policies.Sarathi(BUDGET), "Orca": policies.Orca(BUDGET),
            "VLLMVanilla": policies.VLLMVanilla(BUDGET),
            "FasterTransformer": policies.FasterTransformer(BUDGET)}
    rows, ok, paths = {}, True, {}
    for rho, name, seed in itertools.product((1.2,) if quick else (1.05, 1.2), pols,
                                             SEEDS[quick]):
        res, g, excess = _run(pols[name], rho, 0.8, horizon, seed=seed)
        if rho == 1.2 and seed == 0:
            paths[name], predicted = res.paths, excess
        work_conserving = name in ("Sarathi", "Orca")
        if work_conserving:   # the predicted rate lies in the slope's confidence interval
            holds = g.ci_low <= excess <= g.ci_high or abs(g.slope / excess - 1) < 0.02
        else:                 # at least the predicted rate
            holds = g.ci_high >= excess
        # contradicted by a conclusive "stable" or a slope off the prediction; a run too close
        # to capacity for its horizon ("inconclusive") contradicts nothing
        ok &= holds and g.verdict != "stable"
        rows[f"{name}@{rho}" + (f" seed {seed}" if seed else "")] = {
            "slope": g.slope, "predicted": excess, "ci": (g.ci_low, g.ci_high),
            "holds": holds, "verdict": g.verdict}
    s = rows[f"Sarathi@{1.2}"]
    return Outcome(
        "confirmed" if ok else "refuted",
        f"Sarathi at ρ=1.2: slope {s['slope']:.4f} tok/ms vs λ(m_p+m_d) − b/t_b = "
        f"{s['predicted']:.4f}; "
        + ", ".join(f"{sum(r['verdict'] == v for r in rows.values())} {v}"
                    for v in ("unstable", "inconclusive", "stable"))
        + f" of {len(rows)} runs; slope within its prediction: "
        f"{sum(r['holds'] for r in rows.values())}",
        data=rows, plot=lambda ax: plot_paths(paths, ax, predicted_slope=predicted, time_scale=1000,
                                               time_label="time (s)",
                                               title="Theorem 1(b): unfinished work at ρ = 1.2 "
                                                     "against the predicted growth"))


@claim("li2025.vllm_unstable",
       statement="""Vanilla vLLM (prefill-prioritised, no mixed batches) is not work-conserving
       and becomes unstable at a load below capacity where Sarathi-Serve is stable.""",
       expected="confirmed",
       convention=ENGINE,
       scope="finite-horizon growth verdicts, unit-time and piecewise-linear")
def _vllm_unstable(quick: bool) -> Outcome:
    # (1) unit-time model, b = 768, Poisson sizes (32, 32): heuristic threshold λ*
    b, md = 768, 32
    lam_star = vllm_unit_time_rate(b, md)
    lam = 2.6
    sizes = stats.poisson(31, loc=1)
    wl = Workload([RequestClass(sizes, sizes, lam)], arrivals="poisson-slot")
    slots = 8000 if quick else 40000
    verdicts, paths = {}, {}
    for name, pol in (("VLLMVanilla", policies.VLLMVanilla(b)), ("Sarathi", policies.Sarathi(b))):
        res = paths[name] = simulate(wl, pol, UnitTime(), horizon=slots, seed=1,
                                     first_token="decode")
        verdicts[f"unit:{name}"] = growth_rate(res).verdict
    rho_unit = lam * 64 / b
    # (2) piecewise-linear model, short requests at high rate (spec §5.6 stress test)
    tm = paper.llama_time(0.6)
    wl2 = Workload([RequestClass(stats.poisson(19, loc=1), stats.poisson(49, loc=1), 0.05)])
    rho_pl = wl2.token_rate / (BUDGET / tm.token_time(BUDGET))
    for name, pol in (("VLLMVanilla", policies.VLLMVanilla(BUDGET)),
                      ("Sarathi", policies.Sarathi(BUDGET))):
        res = simulate(wl2, pol, tm, horizon=6e5 if quick else 1.8e6, seed=2, first_token="decode")
        verdicts[f"pl:{name}"] = growth_rate(res).verdict
    ok = (verdicts["unit:VLLMVanilla"] == "unstable" and verdicts["unit:Sarathi"] == "stable"
          and verdicts["pl:VLLMVanilla"] == "unstable" and verdicts["pl:Sarathi"] == "stable")
    return Outcome(
        "confirmed" if ok else "refuted",
        f"unit time ρ={rho_unit:.3f} (λ={lam} > λ*={lam_star:.3f}): vLLM "
        f"{verdicts['unit:VLLMVanilla']}, Sarathi {verdicts['unit:Sarathi']}; piecewise-linear "
        f"ρ={rho_pl:.3f}: vLLM {verdicts['pl:VLLMVanilla']}, Sarathi {verdicts['pl:Sarathi']}",
        data={"verdicts": verdicts, "lambda_star": lam_star, "rho_unit": rho_unit,
              "rho_piecewise": rho_pl},
        plot=lambda ax: plot_paths(paths, ax, time_label="time (slots)",
                                   title=f"Vanilla vLLM against Sarathi, unit time, ρ = "
                                         f"{rho_unit:.3f}"))


@claim("li2025.fastertransformer_unstable",
       statement="""FasterTransformer (decode-prioritised, no mixed batches) is not
       work-conserving and becomes unstable at a moderate load where Sarathi-Serve is stable.""",
       expected="confirmed",
       convention=ENGINE,
       scope="finite-horizon growth verdicts; one seed quick, three full")
def _ft_unstable(quick: bool) -> Outcome:
    horizon = 3e5 if quick else 9e5
    rho = 0.727
    verdicts, completed, paths = {}, {}, {}
    seen = {"FasterTransformer": set(), "Sarathi": set()}
    for name, pol in (("FasterTransformer", policies.FasterTransformer(BUDGET)),
                      ("Sarathi", policies.Sarathi(BUDGET))):
        for seed in SEEDS[quick]:
            res, g, _ = _run(pol, rho, 0.6, horizon, seed=seed)
            seen[name].add(g.verdict)
            if seed == 0:
                paths[name] = res
                verdicts[name] = g.verdict
                completed[name] = res.metrics["completed"]
    ok = seen["FasterTransformer"] == {"unstable"} and seen["Sarathi"] == {"stable"}
    return Outcome(
        "confirmed" if ok else "refuted",
        f"ρ={rho}: FasterTransformer {verdicts['FasterTransformer']} "
        f"({completed['FasterTransformer']} completed), Sarathi {verdicts['Sarathi']} "
        f"({completed['Sarathi']} completed)",
        data={"verdicts": verdicts, "completed": completed},
        plot=lambda ax: plot_paths(paths, ax, time_scale=1000, time_label="time (s)",
                                   title=f"FasterTransformer against Sarathi at ρ = {rho}"))


#: Old names (they warn until the next release).
__getattr__ = moved_names(__name__, {
    "llama_time": (lambda: paper.llama_time, "queuetheory.papers.li2025.llama_time"),
    "vllm_unit_time_threshold": (lambda: vllm_unit_time_rate,
                                 "queuetheory.capacity.vllm_unit_time_rate"),
})

"""Claims of Li, Dai, Peng §4 on networks of LLM agents.

Each check builds the network with :mod:`queuetheory.networks`, simulates it with one shared
engine per agent and judges stability by the block-means growth rate of the network's
total-token (or total-request) path with a 99 % confidence interval.
"""

from __future__ import annotations

from ..networks import (
    fork_join,
    parallel,
    rybko_stolyar,
    rybko_stolyar_classic,
    simulate,
    simulate_classic,
    stability_report,
    two_type_engine,
)
from ..policies import Orca
from .base import Outcome, claim

NETWORK = ('networks of engines (queuetheory.networks), first_token="decode", unit-time or '
           "piecewise-linear batches")


def _verdict(net, horizon, seed=0, quantity="tokens"):
    return simulate(net, horizon=horizon, seed=seed).growth_rate(quantity)


@claim("li2025.network.prop1",
       statement="""Proposition 1 (§4.1, eq. 4.1): K identical engines running a work-conserving
       (K_p,K_d)-FCFS policy behind a random, join-least-requests or join-least-tokens load
       balancer are stable when λ(m_p+m_d) < K·b/t_b; above it the work grows.""",
       expected="confirmed",
       convention=NETWORK,
       scope="finite-horizon growth verdicts")
def _prop1(quick: bool) -> Outcome:
    Ks = (2,) if quick else (2, 4, 8)
    rhos = (0.9, 1.1) if quick else (0.8, 0.95, 1.05)
    horizon = 4000 if quick else 20000
    runs, ok = [], True
    for K in Ks:
        for router in ("random", "least_requests", "least_tokens"):
            for rho in rhos:
                g = _verdict(parallel(K, router, rho=rho), horizon)
                want = "stable" if rho < 1 else "unstable"
                ok &= g.verdict == want
                runs.append({"K": K, "router": router, "rho": rho, "verdict": g.verdict,
                             "relative_slope": g.relative})
    worst = [r for r in runs if (r["verdict"] == "stable") != (r["rho"] < 1)]
    return Outcome("confirmed" if ok else "refuted",
                   figure=f"{len(runs) - len(worst)}/{len(runs)} runs match ρ_K<1 ⇔ stable "
                          f"(K∈{Ks}, ρ_K∈{rhos}, Sarathi, b=768, t≡1, {horizon} slots)",
                   data={"runs": runs, "mismatches": worst},
                   note="Stability: block-means slope of total unprocessed tokens, 99 % CI.")


@claim("li2025.network.two_types",
       statement="""§4.2, eq. (4.2): one engine serving two request types is stable under any
       work-conserving policy when Σ_j λ^j(m_p^j+m_d^j) < b/t_b, so in particular under either
       static priority between the types (types (32,32) and (512,32), b=768, t≡1, ρ=0.9).""",
       expected="confirmed",
       convention=NETWORK,
       scope="finite-horizon growth verdicts")
def _two_types(quick: bool) -> Outcome:
    horizon = 20000 if quick else 100000
    runs = {}
    for prio in (("short", "long"), ("long", "short"), None):
        net = two_type_engine(prio, rho=0.9)
        res = simulate(net, horizon=horizon, seed=1)
        g = res.growth_rate("tokens")
        runs[str(prio)] = {"verdict": g.verdict, "relative_slope": g.relative,
                           "mean_requests": res.metrics["mean_requests"]}
    ok = all(r["verdict"] == "stable" for r in runs.values())
    return Outcome("confirmed" if ok else "refuted",
                   figure="ρ=0.9: " + ", ".join(f"{k}: {v['verdict']} (mean "
                                                f"{v['mean_requests']:.0f} requests)"
                                                for k, v in runs.items()),
                   data=runs)


@claim("li2025.network.fork_join_conjecture1",
       statement="""Conjecture 1 (§4.3, eq. 4.3): the fork-join network of four agents (agent 0,
       fork to agents 1 and 2, join, agent 3) is positive recurrent under any work-conserving
       (K_p,K_d)-FCFS policy at each agent whenever λ(m_p^j+m_d^j) < b^j/t_b^j for every
       agent j.""",
       expected="qualified",
       convention=NETWORK,
       scope="finite-horizon growth verdicts")
def _fork_join(quick: bool) -> Outcome:
    horizon = 20000 if quick else 100000
    cases = [("Sarathi", 0.95, None)] if quick else [
        ("Sarathi", rho, None) for rho in (0.8, 0.9, 0.95)] + [("Orca", 0.95, Orca(768))]
    if not quick:
        balanced = ((128, 32),) * 4
        cases.append(("Sarathi balanced", 0.9, balanced))
    runs = []
    for name, rho, extra in cases:
        if isinstance(extra, tuple):
            net = fork_join(rho, sizes=extra)
        else:
            net = fork_join(rho, policy=extra)
        # Orca has no per-slot kernel: the general path steps it, some 20 times slower
        H = 20000 if isinstance(extra, Orca) else horizon
        res = simulate(net, horizon=H, seed=2)
        g = res.growth_rate("tokens")
        runs.append({"policy": name, "max_rho": rho, "verdict": g.verdict, "horizon": H,
                     "relative_slope": g.relative, "ci": (g.ci_low, g.ci_high),
                     "tolerance": g.tolerance,
                     "mean_join_waiting": res.time_average("join_waiting")})
    verdicts = {r["verdict"] for r in runs}
    verdict = ("refuted" if "unstable" in verdicts else
               "qualified" if verdicts == {"stable"} else "not-reproducible")
    return Outcome(verdict,
                   figure="evidence, not proof: " + "; ".join(
                       f"{r['policy']} max ρ_j={r['max_rho']}: {r['verdict']}" for r in runs),
                   data={"runs": runs},
                   note="Qualified: a conjecture cannot be confirmed by simulation. Monte Carlo "
                        "evidence (bounded total tokens and join buffer over the horizon) "
                        "supports it at the loads tested; the paper gives no parameters, the "
                        "sizes are this package's choice (queuetheory.networks.fork_join).")


@claim("li2025.network.rs_figure8",
       statement="""Figure 8 (§4.3): in the Rybko–Stolyar network of two LLM agents at
       ρ = 0.9 (b = 768, t ≡ 1, Poisson sizes (32,32) and (512,32)), the work-conserving 'up'
       priorities (each agent favours the exiting long task) are unstable: the number of
       requests grows without bound; the reversed 'down' priorities are stable.""",
       expected="confirmed",
       convention=NETWORK,
       scope="finite-horizon growth verdicts")
def _rs_figure8(quick: bool) -> Outcome:
    # the stable side needs the longer run for a clear margin
    horizons = {"up": 20000, "down": 40000} if quick else {"up": 100000, "down": 100000}
    out = {}
    for prio, horizon in horizons.items():
        res = simulate(rybko_stolyar(prio, 0.9), horizon=horizon, seed=0)
        g = res.growth_rate("requests", tail=0.8)
        out[prio] = {"verdict": g.verdict, "slope": g.slope, "ci": (g.ci_low, g.ci_high),
                     "tolerance": g.tolerance, "horizon": horizon,
                     "requests_end": res.metrics["requests_end"],
                     "max_tokens": int(res.paths["tokens"].max())}
    ok = out["up"]["verdict"] == "unstable" and out["down"]["verdict"] == "stable"
    up, down = out["up"], out["down"]
    return Outcome("confirmed" if ok else "refuted",
                   figure=f"ρ=0.9: up grows {up['slope']:.3f} requests/slot "
                          f"({up['requests_end']} at the end, {up['verdict']}); down "
                          f"{down['requests_end']} at the end ({down['verdict']})",
                   data=out)


@claim("li2025.network.rs_virtual_station",
       statement="""Derived (not in the paper): the 'up' priorities of the LLM
       Rybko–Stolyar network are unstable exactly when the virtual station of the two exiting
       long classes is overloaded, ρ_v = ρ(A2) + ρ(B2) > 1, although each agent's load ρ < 1;
       the threshold ρ* solves ρ_v(ρ*) = 1.""",
       expected="confirmed",
       convention=NETWORK,
       scope="finite-horizon growth verdicts")
def _rs_virtual(quick: bool) -> Outcome:
    report = stability_report(rybko_stolyar("up", 0.9))
    rho_v = float(report.virtual_station_loads["load"].max())
    rho_star = 0.9 * report.scale("virtual")
    factors = (0.8, 0.9, 1.1, 1.25)
    runs = []
    for f in factors:
        horizon = 30000 if quick else 100000
        res = simulate(rybko_stolyar("up", f * rho_star), horizon=horizon, seed=3)
        g = res.growth_rate("requests", tail=0.8)
        runs.append({"rho": f * rho_star, "rho_v": f, "verdict": g.verdict, "slope": g.slope,
                     "ci": (g.ci_low, g.ci_high), "tolerance": g.tolerance, "horizon": horizon})
    ok = all(r["verdict"] == ("stable" if r["rho_v"] < 1 else "unstable") for r in runs)
    down = stability_report(rybko_stolyar("down", 0.9)).virtual_station_loads
    return Outcome("confirmed" if ok else "refuted",
                   figure=f"ρ_v = {rho_v:.4f} at ρ = 0.9; threshold ρ* = {rho_star:.4f}; "
                          + ", ".join(f"ρ={r['rho']:.3f} (ρ_v={r['rho_v']}): {r['verdict']}"
                                      for r in runs),
                   data={"rho_v_at_0.9": rho_v, "rho_star": rho_star, "runs": runs,
                         "down_virtual_stations": len(down)},
                   note="The 'down' priorities have no virtual station. Carrying the classical "
                        "fluid condition over to token-budget batching is a heuristic; the "
                        "simulation checks it on both sides of ρ*.")


@claim("li2025.network.rs_classic",
       statement="""The instability is the classical Rybko–Stolyar phenomenon: in the
       exponential two-station, four-class network with priority to the exiting classes, the
       network is unstable when λ(m_2+m_4) > 1 although both station loads are below 1, and
       stable when λ(m_2+m_4) < 1.""",
       expected="confirmed",
       convention=NETWORK,
       scope="finite-horizon growth verdicts (exponential network)")
def _rs_classic(quick: bool) -> Outcome:
    horizon = 4000 if quick else 40000
    runs = []
    for means in ((0.1, 0.6, 0.1, 0.6), (0.1, 0.4, 0.1, 0.4)):
        model = rybko_stolyar_classic("up", 1.0, means)
        rep = model.stability_report()
        g = simulate_classic(model, horizon, seed=4).growth_rate()
        runs.append({"means": means, "virtual": float(rep.loc["virtual[2+4] < 1", "load"]),
                     "station_max": float(rep[rep["kind"] == "agent"]["load"].max()),
                     "verdict": g.verdict})
    ok = all(r["verdict"] == ("unstable" if r["virtual"] > 1 else "stable") for r in runs)
    return Outcome("confirmed" if ok else "refuted",
                   figure="; ".join(f"ρ_v={r['virtual']:.2f}, max station load "
                                    f"{r['station_max']:.2f}: {r['verdict']}" for r in runs),
                   data={"runs": runs})


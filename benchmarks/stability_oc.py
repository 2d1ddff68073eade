"""The operating characteristic of ``qt.stability``: how often it is right, wrong or unsure
on systems whose stability theory settles.

Every configuration runs ``--seeds`` independent trials; a trial is one call
``qt.stability(..., seeds=(s,))`` at the default run length (first horizon and budget from
:func:`queuetheory.stability.default_horizon`), so the rates are those of a user's single
call. The families and the theory that gives their truth:

* Sarathi and Orca (chunked), Li, Dai, Peng's token-capacity law (Theorem 1): stable iff
  ``ρ = λ(m_p + m_d) / (b / t_b) < 1``; the README tour's workload shape and time model.
* vanilla vLLM in unit time (b = 768, Poisson sizes of mean 32, slotted Poisson arrivals):
  unstable above ``λ*`` solving ``λ m_d = e^{−λ} b``; ``ρ = λ / λ*``.
* a single-server queue (``max_reqs=1``, unit time): M/G/1 with service ``1 + output``
  rounds; Pollaczek–Khinchine: stable iff ``ρ = λ E[S] < 1``.
* the classical Rybko–Stolyar network (exponential, priority to the exiting classes):
  stable iff the virtual station's load ``ρ_v = λ(m_2 + m_4) < 1`` (station loads ≤ 0.73).
  Networks are judged by their own growth test (``ClassicResult.growth_rate``, the same
  verdict rule) on the number in system, from 2,000 arrivals of each class, doubled while
  inconclusive up to 8×, as ``qt.stability`` does.
* WAIT (Ao et al.) on the two types of their Props. 4–5 with ``LinearMemoryTime(0.1,
  0.1)``: ``ρ = max_j λ_j ΔT(n) / n_j`` from condition (9); thresholds (2, 2) are strict
  at ``λ = 1`` (ρ = 0.95), (1, 1) critical (ρ = 1, reported, no truth claimed), and (1, 1)
  at ``λ = 0.8, 1.25``.

Run: ``python benchmarks/stability_oc.py [--seeds 5] [--only FAMILY]``; prints a markdown
table per configuration and the summary rates.
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np
from scipy import stats

import queuetheory as qt
from queuetheory.capacity import vllm_unit_time_rate
from queuetheory.networks import rybko_stolyar_classic, simulate_classic
from queuetheory.stability import BUDGET_FACTOR, START_ARRIVALS

RHOS = (0.8, 0.9, 0.95, 1.05, 1.1, 1.25)


def engine_trial(workload, make_policy, time_model, **kwargs):
    def trial(seed):
        v = qt.stability(workload, make_policy(), time_model, seeds=(seed,), **kwargs)
        return v.verdict, v.horizon, v.rounds
    return trial


def network_trial(lam, means):
    def trial(seed):
        horizon = START_ARRIVALS / (2 * lam)
        cap, rounds = BUDGET_FACTOR * horizon, 0
        while True:
            rounds += 1
            g = simulate_classic(rybko_stolyar_classic("up", lam, means), horizon,
                                 seed=seed).growth_rate()
            if g.verdict != "inconclusive" or horizon >= cap:
                return g.verdict, horizon, rounds
            horizon = min(2 * horizon, cap)
    return trial


def configurations(families):
    out = []
    if "li" in families:
        tm = qt.PiecewiseLinearTime(c=27.3, a=0.18, b0=64)          # the README tour's, ms
        capacity = qt.bounds.token_capacity(tm, 512)
        sizes = stats.poisson(19, loc=1), stats.poisson(49, loc=1)  # means 20 and 50
        for name, make in (("Sarathi", lambda: qt.policies.Sarathi(512)),
                           ("Orca", lambda: qt.policies.Orca(512))):
            for rho in RHOS:
                wl = qt.Workload([qt.RequestClass(*sizes, rho * capacity / 70)])
                out.append(("token capacity", name, rho,
                            engine_trial(wl, make, tm, first_token="decode")))
    if "vllm" in families:
        lam_star = vllm_unit_time_rate(768, 32)
        sizes = stats.poisson(31, loc=1)
        for f in (0.8, 0.9, 1.1, 1.25):
            wl = qt.Workload([qt.RequestClass(sizes, sizes, f * lam_star)],
                             arrivals="poisson-slot")
            out.append(("vLLM λ*", f"vLLM, λ*={lam_star:.3f}", f,
                        engine_trial(wl, lambda: qt.policies.VLLMVanilla(768), qt.UnitTime(),
                                     first_token="decode")))
    if "mg1" in families:
        sizes = stats.poisson(3, loc=1)                              # mean 4: E[S] = 5 rounds
        for rho in RHOS:
            wl = qt.Workload([qt.RequestClass(sizes, sizes, rho / 5)])
            out.append(("M/G/1 (P–K)", "Sarathi max_reqs=1", rho,
                        engine_trial(wl, lambda: qt.policies.Sarathi(64, max_reqs=1),
                                     qt.UnitTime(), first_token="decode")))
    if "rs" in families:
        for rho_v in (0.8, 0.9, 1.1, 1.25):
            m = rho_v / 2
            out.append(("Rybko–Stolyar", f"classic, means (0.1, {m:.3g})×2", rho_v,
                        network_trial(1.0, (0.1, m, 0.1, m))))
    if "wait" in families:
        d = 0.1
        for n, lam in (((2, 2), 1.0), ((1, 1), 1.0), ((1, 1), 0.8), ((1, 1), 1.25)):
            classes = (qt.RequestClass(1, 1, lam), qt.RequestClass(1, 2, lam))
            cond = qt.fluid.wait_condition(n, classes, d, d)
            rho = float(max(c.rate for c in classes) * cond.iteration_time / min(n))
            label = f"WAIT n={n}" + (" critical" if n == (1, 1) and lam == 1 else "")
            out.append(("WAIT (9)", label, rho,
                        engine_trial(qt.Workload(list(classes)),
                                     lambda n=n, c=classes: qt.policies.WAIT(n, c),
                                     qt.LinearMemoryTime(d, d), first_token="decode")))
    return out


def reference_seconds() -> float:
    """The anchor workload of ``benchmarks/anchor.py`` (10⁴ requests, Sarathi), timed in the
    same run as a yardstick of the shared machine's speed."""
    tm = qt.AffineTokenTime(c=16.1e-3, per_prefill=57.8e-6, per_decode=39.5e-6)
    wl = qt.Workload([qt.RequestClass(512, 256, 4.0)])
    t0 = time.perf_counter()
    res = qt.simulate(wl, qt.policies.Sarathi(512), tm, n_requests=10_000, seed=0)
    assert res.metrics["unfinished"] == 0
    return time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--only", nargs="+", default=["li", "vllm", "mg1", "rs", "wait"],
                    choices=["li", "vllm", "mg1", "rs", "wait"])
    a = ap.parse_args(argv)
    ref = reference_seconds()
    started = time.perf_counter()
    rows = []
    print("| family | configuration | ρ | truth | stable | unstable | inconclusive | wrong "
          "| mean horizon | mean rounds | wall s |")
    print("|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for family, label, rho, trial in configurations(a.only):
        truth = "stable" if rho < 1 - 1e-9 else "unstable" if rho > 1 + 1e-9 else "critical"
        t0 = time.perf_counter()
        got = [trial(s) for s in range(a.seeds)]
        wall = time.perf_counter() - t0
        verdicts = [g[0] for g in got]
        count = {v: verdicts.count(v) for v in ("stable", "unstable", "inconclusive")}
        wrong = 0 if truth == "critical" else count["unstable" if truth == "stable" else "stable"]
        rows.append((rho, truth, count, wrong))
        print(f"| {family} | {label} | {rho:.3g} | {truth} | {count['stable']} | "
              f"{count['unstable']} | {count['inconclusive']} | {wrong} | "
              f"{np.mean([g[1] for g in got]):.4g} | {np.mean([g[2] for g in got]):.2g} | "
              f"{wall:.1f} |", flush=True)

    def rates(select):
        part = [r for r in rows if select(abs(r[0] - 1)) and r[1] != "critical"]
        n = sum(sum(r[2].values()) for r in part)
        wrong = sum(r[3] for r in part)
        unsure = sum(r[2]["inconclusive"] for r in part)
        return len(part), n, wrong, unsure

    print()
    for name, select in (("|ρ − 1| ≥ 0.1", lambda x: x >= 0.1 - 1e-9),
                         ("|ρ − 1| = 0.05", lambda x: abs(x - 0.05) < 0.01)):
        k, n, wrong, unsure = rates(select)
        if n:
            print(f"- {name}: {k} configurations, {n} trials: {wrong} wrong "
                  f"({100 * wrong / n:.1f} %), {unsure} inconclusive ({100 * unsure / n:.1f} %)")
    wall = time.perf_counter() - started
    print(f"- {len(rows)} configurations × {a.seeds} seeds in {wall:.0f} s wall; reference "
          f"(anchor, 10⁴ requests) {ref:.2f} s in the same run; Python "
          f"{platform.python_version()}, numpy {np.__version__}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

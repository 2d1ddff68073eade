"""``queuetheory capacity --rate R ...``: how many engines for a total rate, on a real GPU
and model by name, with the KV limit from the GPU's memory, a shipped or user trace, a
router and latency targets per metric and percentile."""

from __future__ import annotations

import re
import time

SHIPPED_TRACES = ("azure-conv", "azure-code")
EXAMPLE = ("queuetheory capacity --gpu h100 --model llama-2-7b --policy sarathi --budget 512 "
           "--trace azure-conv --rate 30 --p99-ttft 2 --p99-tpot 0.1")


def _parser():
    """``queuetheory capacity``'s parser with the fleet-sizing options."""
    from ..networks.fleet import FLEET_ROUTERS
    from ..timing.catalog import GPU_MEMORY_GIB, MODEL_SHAPES
    from .cli import _cli_parser

    p = _cli_parser()
    p.prog = "queuetheory capacity --rate R"
    p.description = ("How many engines for a total rate: the count, the per-engine boundary, "
                     "the binding resource and a figure. Percentile targets: --p<q>-<metric> "
                     "VALUE, e.g. --p99-ttft 2 --p99-tpot 0.1 (metrics ttft, tbt, tpot, "
                     f"latency). Example: {EXAMPLE}")
    p.add_argument("--rate", type=float, required=True,
                   help="total arrival rate to serve (requests per time unit)")
    p.add_argument("--gpu", type=str.lower, choices=sorted(GPU_MEMORY_GIB),
                   help="a shipped GPU: its batch time replaces --time, and its memory sets "
                        "the KV cache unless --memory is given")
    p.add_argument("--model", type=str.lower, choices=sorted(MODEL_SHAPES),
                   default="llama-2-7b", help="the model on --gpu (default llama-2-7b)")
    p.add_argument("--tp", type=int, default=1, help="tensor parallel GPUs per engine")
    p.add_argument("--gpu-utilization", type=float, default=0.9,
                   help="share of GPU memory for weights and KV cache (vLLM's, default 0.9)")
    p.add_argument("--router", choices=sorted(FLEET_ROUTERS), default="least_kv",
                   help="how requests are spread over the engines (default least_kv)")
    p.add_argument("--seeds", type=int, default=3,
                   help="independent replications per count (default 3)")
    p.add_argument("--max-engines", type=int, default=64,
                   help="the largest fleet tried (default 64)")
    p.add_argument("--requests-per-engine", type=int, default=600,
                   help="arrivals per engine in each run (default 600)")
    return p


def _percentiles(argv) -> tuple[list, dict]:
    """Pull ``--p<q>-<metric> VALUE`` pairs out of ``argv`` (any percentile, any metric)."""
    rest, out, i = [], {}, 0
    pat = re.compile(r"^--p(\d+(?:\.\d+)?)-(ttft|tbt|tpot|latency)$")
    while i < len(argv):
        m = pat.match(argv[i])
        if m is None:
            rest.append(argv[i])
            i += 1
            continue
        if i + 1 >= len(argv):
            raise ValueError(f"{argv[i]}: needs a target value")
        try:
            out[f"p{m.group(1)}_{m.group(2)}"] = float(argv[i + 1])
        except ValueError:
            raise ValueError(f"{argv[i]} {argv[i + 1]!r}: the target must be a number") from None
        i += 2
    return rest, out


def _workload(a):
    from .. import data
    from ..workload import RequestClass, Workload

    if a.trace in SHIPPED_TRACES:
        return data.azure_trace(a.trace.split("-")[1]), f"the shipped Azure {a.trace[6:]} trace"
    if a.trace is not None:
        return data.open_trace(a.trace, format=a.format), f"the trace {a.trace}"
    if a.lengths == "fixed":
        return (Workload([RequestClass(a.prompt, a.output, 1.0)]),
                f"fixed lengths ({a.prompt}, {a.output}), Poisson")
    prompt, output = data.sharegpt_lengths()
    return Workload.from_lengths(prompt, output, rate=1.0), "ShareGPT lengths, Poisson"


def sizing_main(argv) -> int:
    """Print the engine count, the per-engine boundary, the binding resource and draw the
    figure; ``argv`` as for ``queuetheory capacity`` with ``--rate``."""
    from pathlib import Path

    from ..timing.catalog import gpu_engine
    from .cli import _cli_policy, _cli_time_model
    from .loaded import saturated_rate
    from .rescale import _length_law
    from .sizing import size_fleet
    from .slo import SLO_KEYS

    t0 = time.process_time()
    argv, pct = _percentiles(list(argv))
    a = _parser().parse_args(argv)
    if a.hit_ratio is not None:
        raise ValueError(f"--hit-ratio {a.hit_ratio}: an estimate row of one engine's bounds "
                         "(queuetheory capacity without --rate); the fleet sizing simulates "
                         "the engines' caches on a trace with prefix ids instead")
    if a.gpu is not None:
        eng = gpu_engine(a.gpu, a.model, a.tp, utilization=a.gpu_utilization)
        eng.check(a.budget)
        tm, unit = eng.time_model, "s"
        memory = a.memory if a.memory is not None else eng.kv_tokens
        hw = (f"{a.gpu.upper()} × {a.model} (tp {a.tp}; {eng.source}); KV cache "
              f"{memory:,} tokens per engine" + (" (from the GPU's memory)"
                                                 if a.memory is None else ""))
    else:
        tm, unit = _cli_time_model(a.time)
        memory = a.memory
        hw = f"{tm!r}; KV cache {memory or 'unlimited'}"
    wl, what = _workload(a)
    policy, memory = _cli_policy(a.policy, a.budget, memory)
    slo = {k: getattr(a, k) for k in SLO_KEYS if getattr(a, k) is not None} or None
    if slo is None and not pct:
        slo = {"ttft": 1.0, "tbt": 0.1}
    seeds = tuple(range(a.seed, a.seed + a.seeds))
    print(f"engine: {type(policy).__name__}(b={a.budget}) on {hw}")
    st = _length_law(wl)
    print(f"workload: {what}, mean prompt {st.mean_prompt:.0f}, output "
          f"{st.mean_output:.0f} tokens, at {a.rate:g} requests/{unit}")
    targets = [f"p{k[1:].replace('_', ' ')} ≤ {v:g} {unit}" for k, v in pct.items()]
    if slo:
        targets.append(f"{a.attainment:.0%} of requests meet {slo}")
    print("targets: " + "; ".join(targets))
    f = size_fleet(a.rate, wl, policy, tm, memory=memory, router=a.router, slo=slo,
                   attainment=a.attainment, percentiles=pct or None, seeds=seeds,
                   n_requests=a.requests_per_engine, token_budget=a.budget,
                   max_replicas=a.max_engines)
    br = f.bracket
    print("per-engine bounds: " + ", ".join(
        f"{r['name']} {r['rate']:.4g} [{r['kind']}]" for r in br.table.to_dict("records")))
    sat = saturated_rate(st, policy, tm, bracket=br, token_budget=a.budget, memory=memory,
                         seeds=seeds)
    lo, hi = sat["interval"]
    print(f"per-engine boundary: {sat['rate']:.4g} requests/{unit} [{lo:.4g}, {hi:.4g}] "
          f"(backlogged throughput from a loaded start, {len(seeds)} seeds; the analytic "
          f"{br.binding} bound {br.upper:.4g}); at least {f.at_least} engines to be stable")
    for K, rep in sorted(f.report.items()):
        row = f.probes[f.probes["engines"] == K]
        got = "" if rep is None else ", ".join(
            f"{k} {r['value']:.3g} ({r['share']:.1%} within)" for k, r in rep.iterrows())
        att = "" if slo is None else f" attainment {row['attainment'].mean():.1%}"
        print(f"  {K:3d} engines: {got}{att}; seeds meeting "
              f"{int(row['meets'].sum())}/{len(seeds)}")
    use = ", ".join(f"{k} {v:.0%}" for k, v in f.use.items() if v == v)
    if f.count is None:
        best = f.best or {}
        shown = ", ".join(f"{k} {v:.3g}" for k, v in best.items()
                          if k.startswith("p") and isinstance(v, float))
        print(f"no count up to {max(f.report)} engines meets the targets; the best found, at "
              f"{max(f.report)} engines: {shown or best}")
        return 1
    fewer = "" if f.below is None else (f"; with {f.count - 1}: {f.below[0]}/{f.below[1]} "
                                        "seeds meet")
    if f.count - 1 < f.at_least:
        fewer += (f"; {f.count - 1} cannot be stable: {f.count - 1} × {br.upper:.4g} < "
                  f"{a.rate:g}")
    print(f"answer: {f.count} engines behind {a.router} (seeds meeting "
          f"{f.seeds_meeting[0]}/{f.seeds_meeting[1]}{fewer}); binding resource: "
          f"{f.binding} ({use})")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "fleet_sizing.png"
    _figure(f, pct, unit, path)
    print(f"figure: {path}")
    print(f"CPU time: {time.process_time() - t0:.1f} s")
    return 0


def _figure(f, pct, unit, path) -> None:
    """The achieved percentile (or the attainment) against the engine count, per seed and
    pooled, with the targets and the answer as reference lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from ..plotting import finish, reference, series_style

    keys = list(pct) if pct else ["attainment"]
    fig, axes = plt.subplots(1, len(keys), figsize=(5.5 * len(keys), 4), layout="constrained",
                             squeeze=False)
    for ax, key in zip(axes[0], keys, strict=True):
        p = f.probes.groupby("engines")[key]
        x = list(p.groups)
        for i, (label, y) in enumerate((("median over seeds", p.median()),
                                        ("worst seed", p.max() if pct else p.min()))):
            y = y.to_numpy(dtype=float)
            ax.plot(x, np.where(np.isfinite(y), y, np.nan), label=label, **series_style(i))
        ax.xaxis.get_major_locator().set_params(integer=True)
        target = pct[key] if pct else f.attainment
        reference(ax, target, f"target {target:g}")
        if f.count is not None:
            reference(ax, f.count, f"answer: {f.count} engines", axis="x", color="C3")
        finish(ax, title=f"{key} against the fleet size", xlabel="engines",
               ylabel=f"{key} ({unit})" if pct else "share meeting every target",
               logy=False if not pct else None,
               y=[v for v in f.probes[key].to_numpy() if v == v and v != float("inf")]
               + [target])
    fig.savefig(path, dpi=120)
    plt.close(fig)

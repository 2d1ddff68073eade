"""``queuetheory capacity``: the bracket, the simulated boundary, the goodput and the figure
for one engine, from the command line."""

from __future__ import annotations

from .._argparse import OneLineParser
from ..timing import AffineTokenTime, LinearMemoryTime, PiecewiseLinearTime, UnitTime
from ..workload import Workload
from .bounds import bounds
from .curve import curve_rates, load_curve, plot_capacity
from .goodput import goodput
from .search import max_rate
from .slo import SLO_KEYS, _check_slo

_ANCHOR = "affine:16.1e-3,57.8e-6,39.5e-6"
POLICIES = ("sarathi", "orca", "vllm", "vllm-v1", "fastertransformer", "slai")


def _cli_policy(name: str, budget: int, memory: int | None):
    """The scheduler ``name`` with token budget ``budget``, and the memory the searches pass
    beside it: ``vllm-v1`` (vLLM V1 with its prefix cache, 16-token blocks) keeps ``memory``
    as its own KV blocks, so none is passed."""
    from .. import policies as P

    if name == "vllm-v1":
        return P.VLLMV1.with_kv_tokens(budget, memory), None
    if name == "slai":
        return P.SLAI(budget), memory
    return {"sarathi": P.Sarathi, "orca": P.Orca, "vllm": P.VLLMVanilla,
            "fastertransformer": P.FasterTransformer}[name](budget), memory


def _cli_time_model(spec: str):
    kind, _, args = spec.partition(":")
    try:
        values = [float(v) for v in args.split(",")] if args else []
        if kind == "unit" and not values:
            return UnitTime(), "round"
        if kind == "affine" and len(values) == 3:
            return AffineTokenTime(*values), "s"
        if kind == "piecewise" and len(values) == 3:
            return PiecewiseLinearTime(*values), "ms"
        if kind == "linear" and len(values) == 2:
            return LinearMemoryTime(*values), "time unit"
    except ValueError:
        pass
    raise ValueError(f"--time {spec!r}: expected 'affine:C,PER_PREFILL,PER_DECODE' (seconds), "
                     "'piecewise:C,A,B0' (ms), 'linear:D0,D1' or 'unit'")


def _cli_parser():
    p = OneLineParser(
        prog="queuetheory capacity",
        description="Capacity planning for one engine: the analytic bracket of the largest "
                    "stable rate, the simulated boundary, the SLO goodput, and a figure of "
                    "latency and SLO attainment against load.")
    p.add_argument("--lengths", choices=("sharegpt", "fixed"),
                   help="request lengths: the shipped ShareGPT V3 pairs (the default) or "
                        "fixed (the default when --prompt or --output is given)")
    p.add_argument("--trace", metavar="FILE",
                   help="a production trace (.csv, .jsonl, .parquet; "
                        "queuetheory.workload.read_trace; a Mooncake file's hash_ids kept "
                        "as prefix blocks), 'conv' / 'code' (also 'azure-conv' / "
                        "'azure-code') for the shipped Azure 2023 traces, or "
                        "'mooncake:conversation' / 'mooncake:synthetic', "
                        "instead: replayed at each rate searched with its arrival gaps "
                        "scaled by one factor, so its burstiness is kept")
    p.add_argument("--format", help="the trace's format: azure, burstgpt, mooncake "
                   "(default: detected from its columns)")
    p.add_argument("--prompt", type=int, help="fixed prompt tokens (default 256)")
    p.add_argument("--output", type=int, help="fixed output tokens, the first included "
                   "(default 256)")
    p.add_argument("--time", default=_ANCHOR,
                   help=f"time model: 'affine:C,PER_PREFILL,PER_DECODE' (seconds), "
                        f"'piecewise:C,A,B0' (ms), 'linear:D0,D1' or 'unit' (rounds); "
                        f"default {_ANCHOR}. Rates, SLO targets and the figure are in its unit")
    p.add_argument("--budget", type=int, default=512,
                   help="token budget b: the most tokens one batch serves (default 512)")
    p.add_argument("--memory", type=int, help="KV-cache capacity M in tokens (default: "
                   "unlimited)")
    p.add_argument("--policy", choices=POLICIES, default="sarathi", help="scheduler "
                   "(default sarathi); vllm-v1 caches prefixes: on a trace with prefix "
                   "blocks the bounds gain the proven prefix-cache rows")
    p.add_argument("--bounds-only", action="store_true", dest="bounds_only",
                   help="print the analytic bounds and stop (no simulated search)")
    for key in SLO_KEYS:
        p.add_argument(f"--{key}", type=float, help=f"SLO target, in the time model's unit "
                       f"(seconds for affine): {SLO_KEYS[key]}")
    p.add_argument("--hit-ratio", type=float, dest="hit_ratio",
                   help="a prefix-cache hit ratio in [0, 1): adds the compute bound at "
                        "(1 - H) of the prompt tokens as an estimate row (a realised or "
                        "assumed ratio: not a proven bound)")
    p.add_argument("--attainment", type=float, default=0.9,
                   help="share of requests that must meet every target (default 0.9)")
    p.add_argument("--tol", type=float, default=0.02, help="relative precision (default 0.02)")
    p.add_argument("--requests", type=int, default=2000,
                   help="requests per probe of the goodput search and the curve")
    p.add_argument("--points", type=int, default=8, help="rates on the curve (default 8)")
    p.add_argument("--seed", type=int, default=0, help="seed of the arrivals and lengths "
                   "drawn (default 0)")
    p.add_argument("--out", default="capacity", help="folder for the figure (default capacity)")
    p.add_argument("--progress", action="store_true",
                   help="show a bar of each search's probes on stderr")
    return p


def capacity_main(argv) -> int:
    """``queuetheory capacity``: print the bracket, the boundary and the goodput; draw the
    latency and attainment curves into ``--out``.

    With ``--rate`` the command sizes a fleet instead (``sizing_cli.sizing_main``:
    :func:`size_fleet`).

    Parameters
    ----------
    argv : list of str
        The command-line arguments after ``capacity`` (``queuetheory capacity --help``
        lists them).

    Returns
    -------
    int
        The exit status: 0, or 1 when the bracket is empty (no rate is stable).

    Raises
    ------
    ValueError
        For ``--prompt``/``--output`` given with ShareGPT's or a trace's lengths, a count
        (``--budget``, ``--requests``, ``--points``, ``--prompt``, ``--output``,
        ``--memory``) below 1, a negative ``--seed``, an unreadable ``--time`` spec, or
        arguments the searches refuse.
    SystemExit
        From :mod:`argparse`, for arguments it cannot parse (and for ``--help``).
    """
    from pathlib import Path

    if any(arg == "--rate" or arg.startswith("--rate=") for arg in argv):
        from .sizing_cli import sizing_main  # the fleet question: how many engines

        return sizing_main(argv)
    a = _cli_parser().parse_args(argv)
    tm, unit = _cli_time_model(a.time)
    fixed = a.prompt is not None or a.output is not None
    if a.lengths is None:
        a.lengths = "fixed" if fixed else "sharegpt"
    if fixed and (a.lengths == "sharegpt" or a.trace is not None):
        raise ValueError("--prompt/--output: fixed lengths; drop them to use "
                         f"{'the trace' if a.trace is not None else 'ShareGPT'}'s lengths")
    for name in ("budget", "requests", "points", "prompt", "output", "memory"):
        value = getattr(a, name)
        if value is not None and value < 1:
            raise ValueError(f"--{name} {value}: must be >= 1")
    if a.seed < 0:
        raise ValueError(f"--seed {a.seed}: must be >= 0")
    if a.trace is not None:
        from ..data import open_trace

        wl = open_trace(a.trace, format=a.format, time_unit=unit if unit in ("s", "ms") else "s")
        print(f"trace: {a.trace}, {len(wl)} requests")
    elif a.lengths == "sharegpt":
        from ..data import sharegpt_lengths

        prompt, output = sharegpt_lengths()
        wl = Workload.from_lengths(prompt, output, rate=1.0)
    else:
        from ..workload import RequestClass

        wl = Workload([RequestClass(a.prompt or 256, a.output or 256, 1.0)])
    policy, memory = _cli_policy(a.policy, a.budget, a.memory)
    slo = {k: getattr(a, k) for k in SLO_KEYS if getattr(a, k) is not None} or None
    slo = _check_slo({"ttft": 1.0, "tbt": 0.1} if slo is None else slo)
    per = f"requests/{unit}"
    br = bounds(wl, tm, token_budget=a.budget, memory=memory, policy=policy,
                hit_ratio=a.hit_ratio)
    st = br.stats
    print(f"lengths: {a.trace or a.lengths}; SLO targets {slo} in {unit}")
    print(f"workload: mean prompt {st.prompt:.1f}, output {st.output:.1f} tokens; "
          f"{type(policy).__name__}(b={a.budget}), {tm!r}, memory {a.memory or 'unlimited'}")
    print("analytic bounds on the largest stable rate:")
    for r in br.table.to_dict("records"):
        print(f"  {r['name']:<22} {r['rate']:10.4g} {per}  [{r['kind']}] {r['source']}: "
              f"{r['formula']}")
    if br.empty:
        print(f"empty bracket: {br.violated}")
        return 1
    print(f"bracket: [{br.lower:.4g}, {br.upper:.4g}] {per}; {br.binding} binds")
    if a.bounds_only:
        return 0
    m = max_rate(wl, policy, tm, memory=memory, tol=a.tol, seeds=(a.seed,), bracket=br,
                 progress=a.progress)
    lo, hi = m.interval
    print(f"simulated boundary: {m.rate:.4g} {per} [{lo:.4g}, {hi:.4g}], efficiency "
          f"{m.efficiency:.3f} of the {m.binding} bound; {len(m.probes)} probes "
          f"({m.inconclusive} inconclusive){'; ' + m.note if m.note else ''}")
    g = goodput(wl, policy, tm, slo=slo, attainment=a.attainment, memory=memory,
                tol=a.tol, seeds=tuple(range(a.seed, a.seed + 5)), n_requests=a.requests,
                bracket=br,
                stable_limit=m.interval[1], progress=a.progress)
    if g.met:
        print(f"goodput: {g.rate:.4g} {per} [{g.interval[0]:.4g}, {g.interval[1]:.4g}] meet "
              f"{slo} ({unit}) for ≥ {a.attainment:.0%} of requests (95 % interval over "
              f"5 seeds){'; ' + g.note if g.note else ''}")
    else:
        print(f"goodput: no rate meets {slo} ({unit}) for {a.attainment:.0%} of requests; the "
              f"best attainment found is {g.best_attainment:.1%}")
    top = m.interval[1] if m.rate > 0 else br.upper   # the curve spans the boundary found
    rates = curve_rates(top, max(2, a.points), goodput=g.rate if g.met else None)
    curve = load_curve(wl, policy, tm, rates, slo=slo, memory=memory,
                       n_requests=a.requests, seeds=(a.seed,))
    import matplotlib

    matplotlib.use("Agg")
    axes = plot_capacity(curve, br, max_rate_result=m, goodput_result=g,
                         attainment=a.attainment, unit=unit, title=type(policy).__name__,
                         slo=slo)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"capacity_{a.policy}.png"
    axes[0].figure.savefig(path, dpi=120)
    print(f"figure: {path}")
    return 0

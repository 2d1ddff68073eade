"""The ``queuetheory`` command: ``reproduce`` the ledger, ``simulate`` one engine,
``validate`` a prediction against a measured vLLM run."""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import warnings
from pathlib import Path

from ._argparse import OneLineParser, time_model_option

__all__ = ["main"]


CLASSIC_POLICIES = ("sarathi", "orca", "vllm", "fastertransformer")
#: every scheduler of queuetheory.compare.paper_schedulers, by its command-line name
POLICIES = CLASSIC_POLICIES + ("nested-wait", "mc-sf", "a-max", "a-min", "slai")


def cli_name(name: str) -> str:
    """A scheduler's command-line name: ``"Nested WAIT"`` -> ``"nested-wait"``."""
    return name.lower().replace(" ", "-").replace("_", "-")


def _policy(name: str, budget: int, order: str, setting=None, prefix_cache: bool = True):
    from . import policies

    if name == "vllm-v1":          # its own KV blocks (16 tokens) from the setting's memory
        if order != "fcfs":
            raise ValueError(f"--order {order}: vllm-v1 serves its requests first come, "
                             "first served")
        return policies.VLLMV1.with_kv_tokens(budget, None if setting is None else setting.memory,
                                              enable_prefix_caching=prefix_cache)
    if name in CLASSIC_POLICIES:
        cls = {"sarathi": policies.Sarathi, "orca": policies.Orca,
               "vllm": policies.VLLMVanilla, "fastertransformer": policies.FasterTransformer}
        return cls[name](budget, order=order)
    from .compare import paper_schedulers

    entry = next(s for s in paper_schedulers() if cli_name(s.name) == name)
    return entry.factory(setting)


def _parser() -> OneLineParser:
    p = OneLineParser(prog="queuetheory", description="Queueing theory of LLM inference.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=OneLineParser)

    r = sub.add_parser("reproduce", help="check every claim of the papers and write a report")
    r.add_argument("--quick", action="store_true", help="short runs (under 5 minutes in all)")
    r.add_argument("--only", metavar="PAPER", help="one paper: ao2025, jaillet2025, bari2025, "
                   "chen2025 or li2025")
    r.add_argument("--out", metavar="DIR", default="report", help="report folder (default report)")
    r.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    r.add_argument("--fresh", action="store_true", help="full mode: recompute every claim "
                   "instead of resuming from the report folder's cache")

    s = sub.add_parser("simulate", help="simulate one engine and print its metrics")
    s.add_argument("--policy", choices=POLICIES + ("vllm-v1",), default="sarathi",
                   help="scheduler (nested-wait … slai are the papers', see queuetheory "
                        "compare; vllm-v1 is vLLM V1's scheduler with its prefix cache, "
                        "--memory as its 16-token KV blocks)")
    s.add_argument("--no-prefix-cache", action="store_true",
                   help="vllm-v1 without its prefix cache")
    s.add_argument("--order", default="fcfs", help="fcfs, sjf_prompt, sjf_decode or sjf_total "
                   "(the four classic schedulers)")
    s.add_argument("--trace", metavar="FILE", help="replay a production trace (.csv, .jsonl, "
                   ".parquet; queuetheory.workload.read_trace; a Mooncake file's hash_ids "
                   "kept as prefix blocks), 'conv' / 'code' for the shipped Azure 2023 "
                   "traces, or 'mooncake:conversation' / 'mooncake:synthetic', instead of "
                   "fixed lengths")
    s.add_argument("--format", help="the trace's format: azure, burstgpt, mooncake (default: "
                   "detected from its columns)")
    s.add_argument("--rate", type=float, help="arrival rate per time unit (with --trace: "
                   "rescale the trace to this mean rate, keeping its burstiness)")
    s.add_argument("--prompt", type=int, help="prompt tokens (fixed; without --trace)")
    s.add_argument("--output", type=int, help="output tokens, the first included (fixed; "
                   "without --trace)")
    s.add_argument("--budget", type=int, default=512, help="token budget b: the most tokens "
                   "one batch serves (default 512)")
    s.add_argument("--horizon", type=float, help="simulated time (without --trace: required; "
                   "with it: default the whole trace, drained)")
    s.add_argument("--memory", type=int, help="KV-cache capacity M in tokens (default: "
                   "unlimited)")
    s.add_argument("--time", default="45.5,0.30,64", metavar="C,A,B0",
                   help="piecewise-linear batch time c + a·max(0, b'−b0) in --time-unit "
                        "(default Llama-3-70B, ms), 'unit', or 'a100' / 'h100' (the tiled GPU "
                        "model fitted to real timings, seconds)")
    s.add_argument("--time-unit", choices=("ms", "s"), default="ms",
                   help="unit of --time, --rate, --horizon, the trace and the results "
                        "(default ms)")
    s.add_argument("--seed", type=int, default=0, help="seed of the arrivals and lengths "
                   "drawn, and of a randomised scheduler (default 0)")
    s.add_argument("--json", action="store_true", help="print the metrics as JSON")

    v = sub.add_parser("validate", help="replay a measured vLLM run on its settings and its "
                       "GPU's profile, and score the prediction per request")
    v.add_argument("run", metavar="RUN_DIR", help="the run's folder (vllm_meta.json, "
                   "workload.csv, the GPU profile; see queuetheory.validate.runs), or a "
                   "shipped run: rtxpro6000 (measured) or rtx4090 (held out: a prediction)")
    v.add_argument("--out", metavar="DIR", default="validation",
                   help="folder for predicted_per_request.csv, the error table and the "
                        "figures (default validation)")
    v.add_argument("--profile", metavar="DIR", help="the GPU's operator profile, where the "
                   "run folder does not lead to it (an LLMServingSim profile bundle)")
    v.add_argument("--outside", choices=("warn", "error", "allow"), default="warn",
                   help="a batch outside the profiled grid: extrapolate with a warning "
                        "(default), refuse, or extrapolate silently")

    f = sub.add_parser("fleet", help="replay a trace with prefix blocks on a fleet of vLLM "
                       "engines behind each router: prefix hit ratio, TTFT, load imbalance")
    f.add_argument("--trace", default="mooncake:conversation",
                   help="mooncake:conversation (default), mooncake:synthetic, or the workload "
                        "of a shipped vLLM run, vllm:rtxpro6000")
    f.add_argument("--until", type=float, default=600.0, metavar="SECONDS",
                   help="replay the requests arriving in the trace's first SECONDS "
                        "(default 600)")
    f.add_argument("--engines", type=int, default=8, help="engines in the fleet (default 8)")
    f.add_argument("--router", default="all", help="round_robin, least_requests, least_kv, "
                   "cache_aware, or all (default: each in turn)")
    f.add_argument("--max-num-seqs", type=int, default=128, help="vLLM's max_num_seqs")
    f.add_argument("--max-num-batched-tokens", type=int, default=2048,
                   help="vLLM's max_num_batched_tokens (the token budget)")
    f.add_argument("--num-gpu-blocks", type=int, default=30000,
                   help="KV cache of each engine, in blocks (default 30,000)")
    f.add_argument("--block-size", type=int, default=16, help="tokens per KV block")
    f.add_argument("--no-prefix-cache", action="store_true", help="turn prefix caching off")
    f.add_argument("--time", default="0.01,5e-5,4e-5", metavar="C,P,D",
                   help="batch time in seconds: C + P per prefill token + D per decode token "
                        "(default 0.01,5e-5,4e-5)")
    f.add_argument("--out", metavar="DIR", help="write fleet.csv (one row per router) and "
                   "per_engine_<router>.csv here")

    sub.add_parser("compare", help="every paper's schedulers on one ShareGPT workload "
                   "(see queuetheory compare --help)", add_help=False)
    sub.add_parser("capacity", help="largest stable rate, SLO goodput and a load figure "
                   "for one engine (see queuetheory capacity --help)", add_help=False)
    return p


def _reproduce(a) -> int:
    from .claims import papers
    from .report import format_table, run_ledger, write_report

    if a.only is not None and a.only not in papers():
        raise SystemExit(f"queuetheory: error: --only {a.only!r}: must be one of "
                         f"{', '.join(sorted(papers()))}")
    for flag, path in (("--json", a.json and Path(a.json).parent), ("--out", Path(a.out))):
        _check_writable(flag, path)
    print(f"checking claims ({'quick' if a.quick else 'full'} mode)...", flush=True)
    with _censored_quietly() as censored:
        rows = run_ledger(quick=a.quick, only=a.only, out=Path(a.out),
                          resume=not a.quick and not a.fresh,
                          on_row=lambda r: print(f"  {r.claim.id}: {r.verdict}", flush=True))
    if censored:
        print(f"({len(censored)} runs inside the checks left requests unfinished, as their "
              "claims need; their CensoredRunWarnings are not shown)")
    print(format_table(rows))
    report = write_report(rows, Path(a.out), a.quick)
    print(f"report: {report}")
    if a.json:
        Path(a.json).write_text(json.dumps([r.as_dict() for r in rows], indent=2))
        print(f"json: {a.json}")
    return 0 if all(r.as_expected for r in rows) else 1


def _validate(a) -> int:
    from .validate import format_errors, replay

    with warnings.catch_warnings():       # printed below as notes, once each
        warnings.simplefilter("ignore")
        v = replay(a.run, profile=a.profile, outside=a.outside)
    run = v.run
    print(f"run: {run.folder} ({len(v.predicted)} requests, {run.model}, GPU {run.hardware})")
    print(f"scheduler: {v.policy!r}")
    print(f"batch time: {v.time_model!r}, from {run.profile_root}")
    print(f"replay: {v.cpu_seconds:.2f} s of CPU")
    for note in v.notes:
        print(f"note: {note}")
    paths = v.write(a.out)
    if v.has_measurements:
        print("errors against the measured run (signed: predicted / measured - 1):")
        print(format_errors(v.errors()))
    else:
        print(f"{run.name}: no measurements in this folder: a prediction only (ms)")
        s = v.summary()
        print("| metric | mean | p50 | p90 | p99 |\n|---|---|---|---|---|")
        for m, name in (("ttft_ms", "TTFT"), ("tpot_ms", "TPOT"), ("e2e_ms", "E2E")):
            q = s[m]
            print(f"| {name} | {q['mean']:,.1f} | {q['median']:,.1f} | {q['p90']:,.1f} | "
                  f"{q['p99']:,.1f} |")
    for what, path in paths.items():
        print(f"{what}: {path}")
    return 0


def _fleet(a) -> int:
    import pandas as pd

    from . import data, policies
    from .networks import FLEET_ROUTERS, simulate_fleet
    from .timing import AffineTokenTime

    kind, _, name = a.trace.partition(":")
    if kind == "mooncake":
        trace = data.mooncake_trace(name or "conversation")
    elif kind == "vllm":
        from .validate import load_run

        trace = load_run(name).trace()
    else:
        raise ValueError(f"--trace {a.trace!r}: must be mooncake:NAME or vllm:RUN")
    trace = trace.until(a.until)
    routers = FLEET_ROUTERS if a.router == "all" else (a.router,)
    try:
        c, p, d = (float(x) for x in a.time.split(","))
    except ValueError:
        raise ValueError(f"--time {a.time!r}: must be three numbers C,P,D") from None
    tm = AffineTokenTime(c, p, d)
    pol = policies.VLLMV1(a.max_num_seqs, a.max_num_batched_tokens,
                          num_gpu_blocks=a.num_gpu_blocks, block_size=a.block_size,
                          enable_prefix_caching=not a.no_prefix_cache)
    print(f"trace: {a.trace}, {len(trace)} requests in the first {a.until:g} s; "
          f"{a.engines} engines of {pol!r}; batch time {tm!r} (s)")
    rows = []
    for router in routers:
        res = simulate_fleet(trace, pol, tm, engines=a.engines, router=router)
        m = res.metrics
        rows.append({"router": router, **m})
        print(f"{router:>15}: prefix hit ratio {100 * m['prefix_hit_ratio']:5.1f} %, TTFT mean "
              f"{m['mean_ttft']:.3f} s p99 {m['p99_ttft']:.3f} s, latency mean "
              f"{m['mean_latency']:.2f} s, busiest engine {m['request_imbalance']:.2f}x its "
              f"share of requests, {m['prefill_imbalance']:.2f}x of prefill tokens"
              + (f", {m['unfinished']} unfinished" if m["unfinished"] else ""))
        if a.out:
            Path(a.out).mkdir(parents=True, exist_ok=True)
            res.per_engine().to_csv(Path(a.out) / f"per_engine_{router}.csv")
    if a.out:
        pd.DataFrame(rows).to_csv(Path(a.out) / "fleet.csv", index=False)
        print(f"written: {Path(a.out) / 'fleet.csv'}")
    return 0


def _check_writable(flag: str, folder) -> None:
    """Refuse, before a long run, an output whose folder cannot be made or written."""
    if not folder:
        return
    folder = Path(folder)
    existing = next((p for p in (folder, *folder.parents) if p.exists()), None)
    if existing is None or not existing.is_dir() or not os.access(existing, os.W_OK):
        raise ValueError(f"{flag}: cannot write under {str(folder)!r} (nearest existing "
                         f"folder: {str(existing) if existing else 'none'})")
    if folder != existing and flag == "--json":
        raise ValueError(f"{flag}: the folder {str(folder)!r} does not exist")


@contextlib.contextmanager
def _censored_quietly():
    """Collect the CensoredRunWarnings raised inside (a claim's runs are cut on purpose) and
    let every other warning through."""
    from .errors import CensoredRunWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        censored = []
        yield censored
    for w in caught:
        if issubclass(w.category, CensoredRunWarning):
            censored.append(w)
        else:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)


def _time_model(spec: str, unit: str):
    from .timing import PiecewiseLinearTime, TiledGPUTime, UnitTime

    if spec in ("a100", "h100") and unit != "s":
        raise ValueError(f"--time {spec}: the fitted GPU model is in seconds; add "
                         "--time-unit s")
    return time_model_option(spec, {"unit": UnitTime,
                                    "a100": lambda: TiledGPUTime.fitted("a100"),
                                    "h100": lambda: TiledGPUTime.fitted("h100")},
                             PiecewiseLinearTime, "C,A,B0")


def _units(time_unit: str) -> dict:
    """The unit of every metric of :func:`queuetheory.metrics.summarize`."""
    t = time_unit
    return {"time": t, "arrived": "requests", "completed": "requests",
            "throughput": f"output tokens/{t}", "completion_rate": f"requests/{t}",
            "decode_rate": f"tokens/{t}", "mean_latency": t, "p50_latency": t,
            "p99_latency": t, "mean_ttft": t, "p99_ttft": t, "mean_tbt": t, "p99_tbt": t,
            "peak_memory": "tokens", "restarts": "evictions", "iterations": "batches",
            "unfinished": "requests", "mean_in_system": "requests", "in_system_end": "requests",
            "unfinished_tokens_end": "tokens", "growth_relative": "fraction",
            "prefix_tokens_saved": "tokens", "prefix_hit_ratio": "fraction"}


def _json_safe(v):
    """NaN and infinities as null: the JSON standard has no NaN."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def _workload(a):
    """(what simulate runs, the Workload a scheduler factory may read)."""
    from .workload import RequestClass, Workload, mean_rate

    if a.trace is None:
        missing = [f"--{n}" for n in ("rate", "prompt", "output", "horizon")
                   if getattr(a, n) is None]
        if missing:
            raise ValueError(f"{', '.join(missing)}: required without --trace")
        wl = Workload([RequestClass(a.prompt, a.output, a.rate)])
        return wl, wl
    if a.prompt is not None or a.output is not None:
        raise ValueError("--prompt/--output: the trace gives the lengths; drop them")
    from .data import open_trace

    trace = open_trace(a.trace, format=a.format, time_unit=a.time_unit, rate=a.rate)
    law = Workload.from_lengths(trace.prompt, trace.output, rate=mean_rate(trace))
    return trace, law


def _simulate(a) -> int:
    from .compare import Setting
    from .engine import simulate
    from .stability import growth_rate

    run_on, law = _workload(a)
    tm = _time_model(a.time, a.time_unit)
    if a.no_prefix_cache and a.policy != "vllm-v1":
        raise ValueError(f"--no-prefix-cache: only vllm-v1 keeps a prefix cache, not "
                         f"{a.policy}")
    policy = _policy(a.policy, a.budget, a.order,
                     Setting(a.budget, a.memory, tm, law, float("nan")),
                     prefix_cache=not a.no_prefix_cache)
    memory = None if a.policy == "vllm-v1" else a.memory    # vllm-v1 keeps its own blocks
    res = simulate(run_on, policy, tm, memory=memory, horizon=a.horizon, seed=a.seed,
                   first_token="prefill")
    m = res.metrics
    try:
        g = growth_rate(res)     # a drained run: judged over its arrivals' window
        m.update(growth_verdict=g.verdict, growth_relative=g.relative,
                 growth_window=f"[{g.window[0]:.6g}, {g.window[1]:.6g}]")
    except ValueError as e:
        m.update(growth_verdict="too-short", growth_note=str(e))
    unit = "round" if a.time == "unit" else a.time_unit      # UnitTime counts rounds
    units = {k: u for k, u in _units(unit).items() if k in m}
    ran = {"policy": repr(policy), "time_model": repr(tm),
           "workload": (f"trace {a.trace}: {len(run_on)} requests" if a.trace is not None
                        else f"Poisson, rate {a.rate:g}/{unit}, prompt {a.prompt}, output "
                             f"{a.output}"),
           "memory": a.memory, "horizon": a.horizon, "seed": a.seed}
    if a.json:
        out = {k: _json_safe(v) for k, v in m.items()}
        print(json.dumps({**out, "time_unit": a.time_unit, "units": units, "setting": ran},
                         indent=2, allow_nan=False))
    else:
        for k in ("workload", "policy", "time_model"):
            print(f"# {k}: {ran[k]}")
        print(f"# memory: {a.memory or 'unlimited'}; horizon: "
              f"{a.horizon if a.horizon is not None else 'none (the trace drains)'}; "
              f"seed {a.seed}")
        width = max(map(len, m))
        for k, v in m.items():
            shown = f"{v:.6g}" if isinstance(v, float) else f"{v}"
            print(f"{k:<{width}}  {shown}  {units.get(k, '')}".rstrip())
    return 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["compare"]:     # its own parser: queuetheory.compare.compare_main
        from .compare import compare_main

        try:
            return compare_main(argv[1:])
        except ValueError as e:
            raise SystemExit(f"queuetheory compare: error: {e}") from None
    if argv[:1] == ["capacity"]:    # its own parser: queuetheory.capacity.capacity_main
        from .capacity import capacity_main

        try:
            return capacity_main(argv[1:])
        except ValueError as e:
            raise SystemExit(f"queuetheory capacity: error: {e}") from None
    a = _parser().parse_args(argv)
    try:
        return {"reproduce": _reproduce, "simulate": _simulate, "validate": _validate,
                "fleet": _fleet}[a.command](a)
    except ValueError as e:
        raise SystemExit(f"queuetheory: error: {e}") from None


if __name__ == "__main__":
    sys.exit(main())

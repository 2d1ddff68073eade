"""The ``queuetheory`` command: ``reproduce`` the ledger, ``simulate`` one engine."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

__all__ = ["main"]


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage dump
        raise SystemExit(f"{self.prog}: error: {message}")


POLICIES = ("sarathi", "orca", "vllm", "fastertransformer")


def _policy(name: str, budget: int, order: str):
    from . import policies

    cls = {"sarathi": policies.Sarathi, "orca": policies.Orca,
           "vllm": policies.VLLMVanilla, "fastertransformer": policies.FasterTransformer}[name]
    return cls(budget, order=order)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="queuetheory", description="Queueing theory of LLM inference.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    r = sub.add_parser("reproduce", help="check every claim of the papers and write a report")
    r.add_argument("--quick", action="store_true", help="short runs (under 5 minutes in all)")
    r.add_argument("--only", metavar="PAPER", help="one paper: ao2025, jaillet2025, bari2025, "
                   "chen2025 or li2025")
    r.add_argument("--out", metavar="DIR", default="report", help="report folder (default report)")
    r.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    r.add_argument("--fresh", action="store_true", help="full mode: recompute every claim "
                   "instead of resuming from the report folder's cache")

    s = sub.add_parser("simulate", help="simulate one engine and print its metrics")
    s.add_argument("--policy", choices=POLICIES, default="sarathi")
    s.add_argument("--order", default="fcfs", help="fcfs, sjf_prompt, sjf_decode or sjf_total")
    s.add_argument("--rate", type=float, required=True, help="arrival rate per time unit")
    s.add_argument("--prompt", type=int, required=True, help="prompt tokens (fixed)")
    s.add_argument("--output", type=int, required=True, help="output tokens (fixed)")
    s.add_argument("--budget", type=int, default=512, help="token budget b (default 512)")
    s.add_argument("--horizon", type=float, required=True, help="simulated time")
    s.add_argument("--memory", type=int, help="KV-cache capacity in tokens")
    s.add_argument("--time", default="45.5,0.30,64", metavar="C,A,B0",
                   help="piecewise-linear batch time c + a·max(0, b'−b0) (default Llama-3-70B, "
                        "ms), or 'unit'")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--json", action="store_true", help="print the metrics as JSON")

    sub.add_parser("compare", help="every paper's schedulers on one ShareGPT workload "
                   "(see queuetheory compare --help)", add_help=False)
    return p


def _reproduce(a) -> int:
    from .claims import papers
    from .report import format_table, run_ledger, write_report

    if a.only is not None and a.only not in papers():
        raise SystemExit(f"queuetheory: error: --only {a.only!r}: must be one of "
                         f"{', '.join(sorted(papers()))}")
    print(f"checking claims ({'quick' if a.quick else 'full'} mode)...", flush=True)
    rows = run_ledger(quick=a.quick, only=a.only, out=Path(a.out),
                      resume=not a.quick and not a.fresh,
                      on_row=lambda r: print(f"  {r.claim.id}: {r.verdict}", flush=True))
    print(format_table(rows))
    report = write_report(rows, Path(a.out), a.quick)
    print(f"report: {report}")
    if a.json:
        Path(a.json).write_text(json.dumps([r.as_dict() for r in rows], indent=2))
        print(f"json: {a.json}")
    return 0 if all(r.as_expected for r in rows) else 1


def _time_model(spec: str):
    from .timing import PiecewiseLinearTime, UnitTime

    if spec == "unit":
        return UnitTime()
    try:
        c, a, b0 = (float(x) for x in spec.split(","))
    except ValueError:
        raise ValueError(f"--time {spec!r}: expected 'C,A,B0' or 'unit'") from None
    return PiecewiseLinearTime(c, a, b0)


def _simulate(a) -> int:
    from .engine import simulate
    from .metrics import growth_rate
    from .workload import RequestClass, Workload

    wl = Workload([RequestClass(a.prompt, a.output, a.rate)])
    res = simulate(wl, _policy(a.policy, a.budget, a.order), _time_model(a.time),
                   memory=a.memory, horizon=a.horizon, seed=a.seed)
    m = res.metrics
    try:
        g = growth_rate(res)
        m.update(growth_verdict=g.verdict, growth_relative=g.relative)
    except ValueError as e:
        m.update(growth_verdict="too-short", growth_note=str(e))
    if a.json:
        print(json.dumps(m, indent=2))
    else:
        width = max(map(len, m))
        for k, v in m.items():
            print(f"{k:<{width}}  {v:.6g}" if isinstance(v, float) else f"{k:<{width}}  {v}")
    return 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["compare"]:     # its own parser: queuetheory.compare.compare_main
        from .compare import compare_main

        try:
            return compare_main(argv[1:])
        except ValueError as e:
            raise SystemExit(f"queuetheory compare: error: {e}") from None
    a = _parser().parse_args(argv)
    try:
        return {"reproduce": _reproduce, "simulate": _simulate}[a.command](a)
    except ValueError as e:
        raise SystemExit(f"queuetheory: error: {e}") from None


if __name__ == "__main__":
    sys.exit(main())

"""Write the tables of the accuracy page from a replay of the shipped runs, at build time.

``_generated/accuracy_rtxpro6000.md``: the error table of the RTX PRO 6000 run beside
LLMServingSim's; ``_generated/accuracy_rtx4090.md``: the prediction of the held-out RTX 4090
run. Both are computed here by :func:`queuetheory.validate.replay` (a few seconds).
"""

from __future__ import annotations

import warnings
from pathlib import Path


def _write(path: Path, text: str) -> None:
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


def write_accuracy_tables(folder: Path) -> None:
    from queuetheory.validate import format_errors, replay

    folder.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pro, rtx = replay("rtxpro6000"), replay("rtx4090")
    s = pro.summary()
    text = (format_errors(pro.errors()) + "\n\n"
            f"Replayed in {pro.cpu_seconds:.2f} s of CPU; {s['prefix_cached_tokens']:,} prompt "
            f"tokens found in the prefix cache, {s['preemptions']} preemptions, at most "
            f"{s['peak_kv_blocks']:,} KV blocks held.\n")
    _write(folder / "accuracy_rtxpro6000.md", text)
    s = rtx.summary()
    lines = ["| metric | mean (ms) | p50 (ms) | p90 (ms) | p99 (ms) |", "|---|---|---|---|---|"]
    for key, name in (("ttft_ms", "TTFT"), ("tpot_ms", "TPOT"), ("e2e_ms", "E2E")):
        q = s[key]
        lines.append(f"| {name} | {q['mean']:,.1f} | {q['median']:,.1f} | {q['p90']:,.1f} | "
                     f"{q['p99']:,.1f} |")
    text = ("\n".join(lines) + "\n\n"
            f"Replayed in {rtx.cpu_seconds:.2f} s of CPU; {s['preemptions']} recompute "
            f"preemptions, {s['prefix_cached_tokens']:,} prompt tokens found in the prefix "
            f"cache, at most {s['peak_kv_blocks']:,} of the 2,587 usable KV blocks held, the "
            f"last request done at {s['makespan_s']:.1f} s.\n")
    _write(folder / "accuracy_rtx4090.md", text)

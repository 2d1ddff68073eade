"""Run the claims ledger and write the report: a table, a markdown file and figures."""

from __future__ import annotations

import json
import traceback
from dataclasses import dataclass
from pathlib import Path

from . import claims as ledger
from .claims import Outcome

__all__ = ["run_ledger", "LedgerRow", "write_report", "format_table"]


@dataclass
class LedgerRow:
    claim: ledger.Claim
    outcome: Outcome | None
    error: str = ""

    @property
    def verdict(self) -> str:
        return self.outcome.verdict if self.outcome else "error"

    @property
    def as_expected(self) -> bool:
        return self.outcome is not None and self.outcome.verdict == self.claim.expected

    def as_dict(self) -> dict:
        o = self.outcome
        return {
            "id": self.claim.id, "paper": self.claim.paper, "statement": self.claim.statement,
            "expected": self.claim.expected, "verdict": self.verdict,
            "figure": o.figure if o else self.error.splitlines()[-1] if self.error else "",
            "note": o.note if o else "", "seconds": o.seconds if o else None,
            "data": _jsonable(o.data) if o else {},
        }


def _jsonable(x):
    try:
        json.dumps(x)
        return x
    except TypeError:
        if isinstance(x, dict):
            return {str(k): _jsonable(v) for k, v in x.items()}
        if isinstance(x, list | tuple):
            return [_jsonable(v) for v in x]
        if hasattr(x, "tolist"):
            return x.tolist()
        return repr(x)


def run_ledger(quick: bool = True, only: str | None = None, on_row=None) -> list[LedgerRow]:
    """Check every claim (of paper ``only`` if given); a crashing check is reported, not raised."""
    rows = []
    for c in ledger.all(only):
        try:
            row = LedgerRow(c, c.check(quick))
        except Exception:  # noqa: BLE001 - the report must show every failure
            row = LedgerRow(c, None, traceback.format_exc())
        rows.append(row)
        if on_row is not None:
            on_row(row)
    return rows


def format_table(rows: list[LedgerRow]) -> str:
    head = f"{'claim':<42} {'verdict':<17} {'seconds':>8}  figure"
    lines = [head, "-" * len(head)]
    for r in rows:
        d = r.as_dict()
        mark = "" if r.as_expected else f" (expected {r.claim.expected})"
        sec = f"{d['seconds']:.1f}" if d["seconds"] is not None else "-"
        lines.append(f"{r.claim.id:<42} {r.verdict + mark:<17} {sec:>8}  {d['figure']}")
    return "\n".join(lines)


def write_report(rows: list[LedgerRow], out: Path, quick: bool) -> Path:
    """Write ``out/report.md`` and ``out/figures/<claim>.png``; return the report's path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    figdir = out / "figures"
    lines = ["# queuetheory — claims ledger", "",
             f"Mode: {'quick' if quick else 'full'}. {len(rows)} claims; "
             f"{sum(r.as_expected for r in rows)} reach the ledger's recorded verdict.", "",
             "| claim | paper | verdict | figure | seconds |", "|---|---|---|---|---|"]
    for r in rows:
        d = r.as_dict()
        sec = f"{d['seconds']:.1f}" if d["seconds"] is not None else "–"
        lines.append(f"| `{r.claim.id}` | {r.claim.paper} | **{r.verdict}** | "
                     f"{d['figure'].replace('|', '/')} | {sec} |")
    lines.append("")
    for r in rows:
        lines += [f"## `{r.claim.id}` — {r.verdict}", "", f"> {r.claim.statement}", ""]
        if r.outcome is None:
            lines += ["```", r.error.strip(), "```", ""]
            continue
        lines += [r.outcome.figure, ""]
        if r.outcome.note:
            lines += [r.outcome.note, ""]
        if r.outcome.plot is not None:
            figdir.mkdir(exist_ok=True)
            fig, ax = plt.subplots(figsize=(6.4, 4))
            r.outcome.plot(ax)
            ax.set_title(r.claim.id, fontsize=9)
            fig.tight_layout()
            name = f"{r.claim.id}.png"
            fig.savefig(figdir / name, dpi=110)
            plt.close(fig)
            lines += [f"![{r.claim.id}](figures/{name})", ""]
    path = out / "report.md"
    path.write_text("\n".join(lines))
    return path

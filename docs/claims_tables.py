"""Write the claims tables of the paper pages from the ledger, at build time.

One Markdown file per paper, ``_generated/claims_<paper>.md``: every registered claim with
its statement and the verdict the ledger records (``Claim.expected``), which the test suite
checks the computation still reaches. The checks themselves are not run here.
"""

from __future__ import annotations

from pathlib import Path


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def write_claims_tables(folder: Path) -> None:
    from queuetheory import claims

    folder.mkdir(parents=True, exist_ok=True)
    for paper, title in claims.papers().items():
        rows = claims.all(paper)
        counts = {v: sum(c.expected == v for c in rows) for v in claims.VERDICTS}
        summary = ", ".join(f"{n} {v}" for v, n in counts.items() if n)
        lines = [f"{len(rows)} claims of *{_cell(title)}* in the ledger: {summary}.", "",
                 "| claim | statement | verdict |", "|---|---|---|"]
        lines += [f"| `{c.id}` | {_cell(c.statement)} | **{c.expected}** |" for c in rows]
        text = "\n".join(lines) + "\n"
        path = folder / f"claims_{paper}.md"
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")

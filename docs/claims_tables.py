"""Write the claims tables of the paper pages from the ledger, at build time.

One Markdown file per paper, ``_generated/claims_<paper>.md``: every registered claim with
its statement and the verdict the ledger records for the quick check (``Claim.expected``),
and beside it the full check's (``Claim.expected_full``) where the two differ, with the
reason; the test suite checks the computation still reaches both. The counts are of the quick
verdicts. The checks themselves are not run here.
"""

from __future__ import annotations

from pathlib import Path


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _counts(verdicts) -> str:
    from queuetheory import claims

    verdicts = list(verdicts)
    return ", ".join(f"{verdicts.count(v)} {v}" for v in claims.VERDICTS if v in verdicts)


def _verdict(c) -> str:
    if c.expected_full == c.expected:
        return f"**{c.expected}**"
    return (f"**{c.expected}** (quick); **{c.expected_full}** (full): "
            f"{_cell(c.full_differs)}")


def write_claims_tables(folder: Path) -> None:
    from queuetheory import claims

    folder.mkdir(parents=True, exist_ok=True)
    for paper, title in claims.papers().items():
        rows = claims.all(paper)
        lines = [f"{len(rows)} claims of *{_cell(title)}* in the ledger: "
                 f"{_counts(c.expected for c in rows)} (the quick checks' verdicts, which "
                 "`queuetheory reproduce --quick` and the test suite reach)."]
        differ = [c for c in rows if c.expected_full != c.expected]
        if differ:
            full = _counts(c.expected_full for c in rows)
            names = ", ".join(f"`{c.id}`" for c in differ)
            lines[0] += f" The full checks (longer runs) give {full}: they differ on {names}."
        lines += ["", "| claim | statement | verdict |", "|---|---|---|"]
        lines += [f"| `{c.id}` | {_cell(c.statement)} | {_verdict(c)} |" for c in rows]
        text = "\n".join(lines) + "\n"
        path = folder / f"claims_{paper}.md"
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")

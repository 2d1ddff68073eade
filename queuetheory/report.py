"""Run the claims ledger and write the report: a table, ``report.md``, ``report.html`` and
one PNG figure per claim that draws one.

A run is checkpointed per claim: each outcome is written to ``<out>/cache/<mode>/<id>.json``
(and its figure to ``<out>/figures/<id>.png``) as soon as it is computed, so an interrupted
full run resumes where it stopped (``run_ledger(..., resume=True)``). The report shows the
quick and the full verdict side by side wherever both modes have been run into the same
folder, next to the verdicts the ledger records.
"""

from __future__ import annotations

import html
import json
import math
import traceback
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from . import claims as ledger
from .claims import VERDICTS, Outcome

__all__ = ["run_ledger", "LedgerRow", "write_report", "format_table", "load_rows", "full_runs",
           "record_full_runs"]

FULL_RUNS = Path(__file__).parent / "claims" / "full_runs.json"
"""The full checks computed so far: ``{claim id: {"verdict", "seconds"}}`` (see
:func:`full_runs`)."""


def full_runs() -> dict:
    """The record of full-mode checks run to completion: verdict and seconds per claim.

    Returns
    -------
    dict
        ``{claim id: {"verdict": str, "seconds": float}}``; empty when no record exists.
    """
    return json.loads(FULL_RUNS.read_text()) if FULL_RUNS.exists() else {}


def record_full_runs(out: Path, path: Path = FULL_RUNS) -> dict:
    """Merge the full-mode outcomes cached in the report folder ``out`` (verdict and
    seconds per claim; crashed checks are left out) into the record at ``path``, and return
    the record. A maintainer runs this after a full ``queuetheory reproduce``.

    Parameters
    ----------
    out : pathlib.Path
        The report folder of a full run (its ``cache/full/``).
    path : pathlib.Path, default FULL_RUNS
        The record to merge into (written in the ledger's order).

    Returns
    -------
    dict
        The merged record, ``{claim id: {"verdict": str, "seconds": float}}``.
    """
    record = json.loads(Path(path).read_text()) if Path(path).exists() else {}
    for row in load_rows(Path(out), quick=False).values():
        if row.outcome is not None:
            record[row.claim.id] = {"verdict": row.verdict,
                                    "seconds": round(float(row.outcome.seconds), 1)}
    ordered = {c.id: record[c.id] for c in ledger.all() if c.id in record}
    Path(path).write_text(json.dumps(ordered, indent=1) + "\n")
    return ordered


@dataclass
class LedgerRow:
    """One claim checked: the row of the report.

    Attributes
    ----------
    claim : Claim
        The ledger's claim.
    outcome : Outcome or None
        What its check returned (``None`` when the check crashed).
    error : str, default ""
        The traceback of a crashed check, or of a figure that could not be drawn.
    quick : bool, default True
        Whether the quick check ran (else the full one).
    figure_file : str, default ""
        The figure's file name inside the report's ``figures/`` folder ('' when none).
    """

    claim: ledger.Claim
    outcome: Outcome | None
    error: str = ""
    quick: bool = True
    figure_file: str = ""

    @property
    def verdict(self) -> str:
        """The check's verdict, or ``"error"`` when it crashed."""
        return self.outcome.verdict if self.outcome else "error"

    @property
    def as_expected(self) -> bool:
        """Whether the verdict is the one the ledger records for this mode."""
        return self.outcome is not None and self.outcome.verdict == self.claim.expected_for(
            self.quick)

    def as_dict(self) -> dict:
        """The row as JSON-ready data (what the report's cache stores).

        Returns
        -------
        dict
            ``id``, ``paper``, ``statement``, ``convention``, ``scope``, ``mode``,
            ``expected``, ``verdict``, ``figure``, ``note``, ``seconds``, ``data``, ``error``
            and ``figure_file``.
        """
        o = self.outcome
        return {
            "id": self.claim.id, "paper": self.claim.paper, "statement": self.claim.statement,
            "convention": self.claim.convention, "scope": self.claim.scope,
            "mode": "quick" if self.quick else "full",
            "expected": self.claim.expected_for(self.quick), "verdict": self.verdict,
            "figure": o.figure if o else self.error.splitlines()[-1] if self.error else "",
            "note": o.note if o else "", "seconds": o.seconds if o else None,
            "data": _jsonable(o.data) if o else {}, "error": self.error,
            "figure_file": self.figure_file,
        }


def _jsonable(x):
    if isinstance(x, float) and not math.isfinite(x):
        return repr(x)
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_jsonable(v) for v in x]
    if hasattr(x, "tolist"):
        return _jsonable(x.tolist())
    try:
        json.dumps(x)
        return x
    except TypeError:
        return repr(x)


def _mode(quick: bool) -> str:
    return "quick" if quick else "full"


def _cache_path(out: Path, claim_id: str, quick: bool) -> Path:
    return out / "cache" / _mode(quick) / f"{claim_id}.json"


def _row_from_json(c: ledger.Claim, d: dict, quick: bool) -> LedgerRow:
    if d["verdict"] == "error":
        return LedgerRow(c, None, d.get("error", ""), quick)
    o = Outcome(d["verdict"], d["figure"], d.get("data", {}), d.get("note", ""),
                d["seconds"] if d["seconds"] is not None else float("nan"))
    return LedgerRow(c, o, "", quick, d.get("figure_file", ""))


def render_figure(row: LedgerRow, figdir: Path) -> str:
    """Draw ``row``'s figure into ``figdir/<id>.png`` (Agg backend); its file name, or ''."""
    if row.outcome is None or row.outcome.plot is None:
        return ""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figdir.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7.2, 4.2), layout="constrained")
    try:
        row.outcome.plot(ax)
        if not ax.get_title():
            ax.set_title(row.claim.id, fontsize=10)
        name = f"{row.claim.id}.png"
        fig.savefig(figdir / name, dpi=110)
    finally:
        plt.close(fig)
    row.figure_file = name
    return name


def run_ledger(quick: bool = True, only: str | None = None, on_row=None, *,
               out: Path | None = None, resume: bool = False,
               ids: list[str] | None = None) -> list[LedgerRow]:
    """Check every claim (of paper ``only``, or the claims ``ids``, if given); a crashing
    check is reported, not raised.

    With ``out``, every row is written to ``out/cache/<mode>/<id>.json`` and its figure to
    ``out/figures/`` as soon as it is computed; with ``resume`` as well, claims already in
    that cache are read back instead of re-run (an interrupted full run picks up where it
    stopped).

    Parameters
    ----------
    quick : bool, default True
        Run the quick checks (else the full ones).
    only : str, optional
        A paper's key: check its claims only.
    on_row : callable, optional
        Called with each :class:`LedgerRow` as soon as it is done (progress).
    out : pathlib.Path, optional
        The report folder to cache rows and figures in.
    resume : bool, default False
        Read back the rows already cached in ``out`` instead of re-running them.
    ids : list of str, optional
        Check only these claims.

    Returns
    -------
    list of LedgerRow
        One row per claim checked, in the ledger's order.
    """
    rows = []
    claims = ledger.all(only)
    if ids is not None:
        claims = [c for c in claims if c.id in set(ids)]
    for c in claims:
        path = None if out is None else _cache_path(Path(out), c.id, quick)
        if resume and path is not None and path.exists():
            row = _row_from_json(c, json.loads(path.read_text()), quick)
        else:
            try:
                row = LedgerRow(c, c.check(quick), quick=quick)
            except Exception:  # noqa: BLE001 - the report must show every failure
                row = LedgerRow(c, None, traceback.format_exc(), quick)
            if path is not None:
                try:
                    render_figure(row, Path(out) / "figures")
                except Exception:  # noqa: BLE001 - a broken figure must not lose the verdict
                    row.error = "figure: " + traceback.format_exc().strip().splitlines()[-1]
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps(row.as_dict(), indent=1))
        rows.append(row)
        if on_row is not None:
            on_row(row)
    return rows


def load_rows(out: Path, quick: bool) -> dict[str, LedgerRow]:
    """The rows of one mode cached in the report folder ``out``, by claim id.

    Parameters
    ----------
    out : pathlib.Path
        The report folder.
    quick : bool
        The mode: the quick rows, else the full ones.

    Returns
    -------
    dict of str to LedgerRow
        The cached rows by claim id (claims not cached are left out).
    """
    found = {}
    for c in ledger.all():
        path = _cache_path(Path(out), c.id, quick)
        if path.exists():
            found[c.id] = _row_from_json(c, json.loads(path.read_text()), quick)
    return found


def format_table(rows: list[LedgerRow]) -> str:
    """The rows as a plain-text table: claim, verdict (with the expected one where they
    differ), seconds and the check's figure.

    Parameters
    ----------
    rows : list of LedgerRow
        The rows, in the order shown.

    Returns
    -------
    str
        The table, a header line and one line per row.
    """
    head = f"{'claim':<42} {'verdict':<17} {'seconds':>8}  figure"
    lines = [head, "-" * len(head)]
    for r in rows:
        d = r.as_dict()
        mark = "" if r.as_expected else f" (expected {d['expected']})"
        sec = f"{d['seconds']:.1f}" if d["seconds"] is not None else "-"
        lines.append(f"{r.claim.id:<42} {r.verdict + mark:<17} {sec:>8}  {d['figure']}")
    return "\n".join(lines)


# ---- the report ------------------------------------------------------------------------------
def _counts(verdicts) -> str:
    c = Counter(verdicts)
    return ", ".join(f"{c[v]} {v}" for v in (*VERDICTS, "error") if c[v])


def _cell(row: LedgerRow | None, expected: str) -> str:
    if row is None:
        return "–"
    return row.verdict + ("" if row.verdict == expected else " ≠ recorded")


def _sections(rows: list[LedgerRow], out: Path, quick: bool):
    """The report as plain data: a header and, per paper, a table and one entry per claim."""
    other = load_rows(out, not quick)
    runs = full_runs()
    by_paper: dict[str, list[LedgerRow]] = {}
    for r in rows:
        by_paper.setdefault(r.claim.paper, []).append(r)
    head = {
        "mode": _mode(quick), "n": len(rows), "as_expected": sum(r.as_expected for r in rows),
        "counts": _counts(r.verdict for r in rows),
        "recorded": _counts(r.claim.expected for r in rows),
        "recorded_full": _counts(r.claim.expected_full for r in rows),
        "differ": [r.claim.id for r in rows if r.claim.expected_full != r.claim.expected],
        "figures": sum(bool(r.figure_file) for r in rows),
        "full_computed": sum(c.id in runs for c in ledger.all()),
    }
    papers = []
    for paper, prs in by_paper.items():
        table, entries = [], []
        for r in prs:
            c = r.claim
            q_row, f_row = (r, other.get(c.id)) if quick else (other.get(c.id), r)
            full_rec = c.expected_full + ("" if c.id in runs else " (not yet computed)")
            sec = r.outcome.seconds if r.outcome else None
            table.append([c.id, c.expected, full_rec, _cell(q_row, c.expected),
                          _cell(f_row, c.expected_full),
                          "–" if sec is None or sec != sec else f"{sec:.1f}"])
            entries.append({"row": r, "full_recorded": full_rec})
        papers.append({"paper": paper, "title": ledger.papers()[paper],
                       "counts": _counts(r.verdict for r in prs), "table": table,
                       "entries": entries})
    return head, papers


def _differ(head) -> str:
    """Which verdicts the counts are, and the claims whose quick and full verdicts differ."""
    text = (f"The recorded counts above are the quick checks' verdicts; the full checks' "
            f"recorded verdicts are: {head['recorded_full']}.")
    if head["differ"]:
        text += (" Quick and full differ on " + ", ".join(head["differ"])
                 + " (both are in the table; the reason is under each claim).")
    return text


TABLE_HEAD = ["claim", "recorded quick", "recorded full", "quick run", "full run", "seconds"]


def _markdown(head, papers) -> str:
    lines = ["# queuetheory — claims ledger", "",
             f"Mode of this run: {head['mode']}. {head['n']} claims: {head['counts']}; "
             f"{head['as_expected']} reach the ledger's recorded verdict "
             f"(recorded: {head['recorded']}). {head['figures']} figures. Full verdicts "
             f"computed so far for {head['full_computed']} claims.", "", _differ(head), "",
             "Verdicts: *confirmed* holds as printed; *refuted* a stated result is false as "
             "printed, under the paper's own convention and hypotheses (smallest counterexample "
             "found); *erratum* a misprint whose results stand once corrected; *qualified* "
             "holds in a corrected or narrower scope; *not-reproducible* cannot be re-derived "
             "here.", ""]
    for p in papers:
        lines += [f"## {p['title']}", "", f"Verdicts: {p['counts']}.", "",
                  "| " + " | ".join(TABLE_HEAD) + " |", "|" + "---|" * len(TABLE_HEAD)]
        lines += ["| " + " | ".join([f"`{t[0]}`", *t[1:]]) + " |" for t in p["table"]]
        lines.append("")
        for e in p["entries"]:
            r, c = e["row"], e["row"].claim
            lines += [f"### `{c.id}` — {r.verdict}", "", f"> {c.statement}", "",
                      f"*Convention:* {c.convention}  ", f"*Scope:* {c.scope}  ",
                      f"*Recorded:* quick {c.expected}, full {e['full_recorded']}", ""]
            if c.full_differs:
                lines += [f"*Quick and full differ:* {c.full_differs}", ""]
            if r.outcome is None:
                lines += ["```", r.error.strip(), "```", ""]
                continue
            lines += [r.outcome.figure, ""]
            if r.outcome.note:
                lines += [r.outcome.note, ""]
            if r.figure_file:
                lines += [f"![{c.id}](figures/{r.figure_file})", ""]
    return "\n".join(lines)


def _html(head, papers) -> str:
    e = html.escape
    parts = ["<!doctype html><html><head><meta charset='utf-8'>",
             "<title>queuetheory — claims ledger</title><style>",
             "body{font-family:sans-serif;max-width:1100px;margin:auto;padding:1em}"
             "table{border-collapse:collapse;font-size:90%}td,th{border:1px solid #ccc;"
             "padding:2px 6px}blockquote{color:#444}.meta{color:#555;font-size:90%}"
             "img{max-width:100%}pre{white-space:pre-wrap;background:#f6f6f6}",
             "</style></head><body><h1>queuetheory — claims ledger</h1>",
             f"<p>Mode of this run: {e(head['mode'])}. {head['n']} claims: "
             f"{e(head['counts'])}; {head['as_expected']} reach the recorded verdict "
             f"(recorded: {e(head['recorded'])}). {head['figures']} figures. Full verdicts "
             f"computed so far for {head['full_computed']} claims.</p>",
             f"<p>{e(_differ(head))}</p>"]
    for p in papers:
        parts += [f"<h2>{e(p['title'])}</h2><p>Verdicts: {e(p['counts'])}.</p><table><tr>"
                  + "".join(f"<th>{e(h)}</th>" for h in TABLE_HEAD) + "</tr>"]
        for t in p["table"]:
            parts.append(f"<tr><td><a href='#{e(t[0])}'><code>{e(t[0])}</code></a></td>"
                         + "".join(f"<td>{e(x)}</td>" for x in t[1:]) + "</tr>")
        parts.append("</table>")
        for ent in p["entries"]:
            r, c = ent["row"], ent["row"].claim
            parts += [f"<h3 id='{e(c.id)}'><code>{e(c.id)}</code> — {e(r.verdict)}</h3>",
                      f"<blockquote>{e(c.statement)}</blockquote>",
                      f"<p class='meta'><b>Convention:</b> {e(c.convention)}<br>"
                      f"<b>Scope:</b> {e(c.scope)}<br><b>Recorded:</b> quick "
                      f"{e(c.expected)}, full {e(ent['full_recorded'])}</p>"]
            if c.full_differs:
                parts.append(f"<p><b>Quick and full differ:</b> {e(c.full_differs)}</p>")
            if r.outcome is None:
                parts.append(f"<pre>{e(r.error.strip())}</pre>")
                continue
            parts.append(f"<p>{e(r.outcome.figure)}</p>")
            if r.outcome.note:
                parts.append(f"<p>{e(r.outcome.note)}</p>")
            if r.figure_file:
                parts.append(f"<img src='figures/{e(r.figure_file)}' alt='{e(c.id)}'>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(rows: list[LedgerRow], out: Path, quick: bool) -> Path:
    """Write ``out/report.md``, ``out/report.html`` and ``out/figures/<claim>.png`` (figures
    not drawn yet are drawn now); return the markdown report's path.

    Parameters
    ----------
    rows : list of LedgerRow
        The rows of this run.
    out : pathlib.Path
        The report folder (created if missing); rows of the other mode cached there are shown
        beside these.
    quick : bool
        The mode of ``rows``.

    Returns
    -------
    pathlib.Path
        The path of ``report.md``.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for r in rows:
        if not r.figure_file:
            render_figure(r, out / "figures")
    head, papers = _sections(rows, out, quick)
    (out / "report.html").write_text(_html(head, papers))
    path = out / "report.md"
    path.write_text(_markdown(head, papers))
    return path

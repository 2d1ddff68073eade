"""The ledger: every registered claim's quick check still reaches its recorded verdict and
draws its figure; the full checks recorded as computed (and cheap enough) reach their full
verdict; the report shows both side by side."""

import json

import matplotlib
import pytest

import queuetheory as qt
from queuetheory.claims import VERDICTS, Outcome
from queuetheory.claims.base import claim
from queuetheory.report import full_runs

matplotlib.use("Agg")

# no figure: an algebraic identity, and a claim the data cannot test (nothing to draw)
NO_FIGURE = {"li2025.c19_workload", "ao2025.linear_memory_vidur"}
"""Claims without a figure: a symbolic identity has nothing to draw. The network claims are
drawn by their own module (or not at all)."""

FULL_CHEAP_SECONDS = 20.0
"""Full checks recorded as taking at most this long run in the slow test below."""


def _draws(c) -> bool:
    return c.id not in NO_FIGURE and not c.id.startswith("li2025.network.")


def test_registry_is_well_formed():
    claims = qt.claims.all()
    assert len({c.id for c in claims}) == len(claims)
    for c in claims:
        assert c.paper in qt.claims.papers()
        assert c.id.startswith(c.paper + ".")
        assert c.expected in VERDICTS and c.expected_full in VERDICTS and c.statement
        assert c.convention and c.scope, c.id
        assert (c.expected_full != c.expected) == bool(c.full_differs), c.id
    with pytest.raises(KeyError, match="no claim"):
        qt.claims.get("li2025.nonexistent")
    with pytest.raises(ValueError, match="verdict"):
        Outcome("plausible", "")
    with pytest.raises(ValueError, match="convention and scope"):
        claim("li2025.demo", "s", "confirmed", convention=" ", scope="finite instances")
    with pytest.raises(ValueError, match="full_differs"):
        claim("li2025.demo", "s", "confirmed", convention="c", scope="s",
              expected_full="qualified")


def test_at_least_75_claims_draw_a_figure():
    assert sum(_draws(c) for c in qt.claims.all()) >= 75


def test_recorded_full_runs_agree_with_the_claims():
    runs = full_runs()
    for cid, run in runs.items():
        c = qt.claims.get(cid)
        assert run["verdict"] == c.expected_full, cid
        assert run["seconds"] >= 0


@pytest.mark.parametrize("claim", qt.claims.all(), ids=lambda c: c.id)
def test_claim_reaches_its_recorded_verdict(claim):
    outcome = claim.check(quick=True)
    assert outcome.verdict == claim.expected, outcome.figure
    assert outcome.figure
    if _draws(claim):
        import matplotlib.pyplot as plt

        assert outcome.plot is not None, claim.id
        fig, ax = plt.subplots()
        try:
            outcome.plot(ax)
            assert ax.get_title() and ax.get_xlabel() and ax.get_ylabel(), claim.id
        finally:
            plt.close(fig)


@pytest.mark.slow
@pytest.mark.parametrize("claim", [c for c in qt.claims.all()
                                   if full_runs().get(c.id, {}).get("seconds", 1e9)
                                   <= FULL_CHEAP_SECONDS], ids=lambda c: c.id)
def test_cheap_full_checks_reach_their_recorded_verdict(claim):
    assert claim.check(quick=False).verdict == claim.expected_full


def test_report_shows_quick_and_full_side_by_side(tmp_path):
    from queuetheory.report import run_ledger, write_report

    ids = ["ao2025.theorem2_theta_bound", "chen2025.alpha_star"]
    run_ledger(quick=False, out=tmp_path, ids=ids)
    rows = run_ledger(quick=True, out=tmp_path, ids=ids)
    write_report(rows, tmp_path, quick=True)
    md = (tmp_path / "report.md").read_text()
    html = (tmp_path / "report.html").read_text()
    assert "| quick run | full run |" in md.replace("recorded quick | recorded full | ", "")
    assert "the quick checks' verdicts" in md and "recorded verdicts are" in html
    for cid in ids:
        c = qt.claims.get(cid)
        assert f"`{cid}` — {c.expected}" in md and c.convention in md and c.scope in md
        assert f"figures/{cid}.png" in md and f"figures/{cid}.png" in html
        assert (tmp_path / "figures" / f"{cid}.png").stat().st_size > 0
        cached = json.loads((tmp_path / "cache" / "full" / f"{cid}.json").read_text())
        assert cached["verdict"] == c.expected_full
    # a resumed run reads the cache instead of re-running
    again = run_ledger(quick=False, out=tmp_path, ids=ids, resume=True)
    assert [r.verdict for r in again] == [qt.claims.get(i).expected_full for i in ids]


def test_quick_and_full_verdicts_are_shown_where_they_differ(tmp_path):
    import importlib.util
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    spec = importlib.util.spec_from_file_location("claims_tables", root / "docs" /
                                                  "claims_tables.py")
    tables = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tables)
    tables.write_claims_tables(tmp_path)
    readme = " ".join((root / "README.md").read_text(encoding="utf-8").split())
    differ = [c for c in qt.claims.all() if c.expected_full != c.expected]
    assert differ
    for c in differ:
        page = (tmp_path / f"claims_{c.paper}.md").read_text(encoding="utf-8")
        assert f"**{c.expected}** (quick); **{c.expected_full}** (full)" in page, c.id
        assert f"`{c.id}` ({c.expected} quick, {c.expected_full} full)" in readme, c.id
    for c in qt.claims.all():
        if c.expected_full == c.expected:
            page = (tmp_path / f"claims_{c.paper}.md").read_text(encoding="utf-8")
            assert f"| `{c.id}` |" in page and "(quick); " not in page.split(
                f"| `{c.id}` |")[1].split("\n")[0], c.id

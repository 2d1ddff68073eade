"""The cross-paper comparison: one-line scheduler entries, seed CIs, table, figures, CLI."""

import re

import matplotlib
import numpy as np
import pytest
from scipy import stats

from queuetheory import Batch
from queuetheory.compare import CLASSIC, METRICS, Budgeted, Plain, compare, compare_main
from queuetheory.policies import Policy, Sarathi

matplotlib.use("Agg")
SMALL = {"loads": [0.6], "seeds": 5, "n_requests": 60}


class _Idle(Policy):
    """Never schedules: every request is left unfinished."""

    def _schedule(self, state):
        return Batch()


def test_one_line_entries_run_on_the_same_workload_with_seed_intervals():
    entries = [CLASSIC[2], ("Sarathi SJF (knows outputs)",
                            Budgeted(Sarathi, order="sjf_decode"), "output lengths")]
    result = compare(entries, **SMALL)
    runs, table = result.runs, result.table
    assert (runs["completed"] == 60).all() and len(runs) == 10
    assert list(table["needs"]) == ["none", "output lengths"]
    assert (table["completion"] == 1).all() and (table["note"] == "").all()
    for name in ("Sarathi", "Sarathi SJF (knows outputs)"):
        x = runs.loc[runs["scheduler"] == name, "mean_latency"].to_numpy()
        row = table.loc[(name, 0.6)]
        assert row["mean_latency"] == pytest.approx(x.mean())
        # Student's t on the log scale: mean · exp(± t·se/mean), inside (0, ∞)
        spread = np.exp(stats.t.ppf(0.975, 4) * x.std(ddof=1) / np.sqrt(5) / x.mean())
        assert row["mean_latency_lo"] == pytest.approx(x.mean() / spread)
        assert row["mean_latency_hi"] == pytest.approx(x.mean() * spread)
        assert row["restarts_lo"] == row["restarts_hi"] == 0         # no memory pressure
    # same seeds, same arrivals: the schedulers differ only in their decisions
    a = runs[runs["scheduler"] == "Sarathi"].set_index("seed")
    b = runs[runs["scheduler"] == "Sarathi SJF (knows outputs)"].set_index("seed")
    assert np.allclose(a["throughput"] * a["time"], b["throughput"] * b["time"])
    figs = result.figures()
    assert set(figs) == set(METRICS)


def test_a_row_that_left_work_unfinished_is_marked_and_few_seeds_give_no_interval():
    result = compare([CLASSIC[2], ("Idle", Plain(_Idle), "none")], loads=[0.6], seeds=2,
                     n_requests=30)
    table = result.table.droplevel(1)
    assert table.loc["Idle", "completion"] == 0
    assert "100.0 % unfinished" in table.loc["Idle", "note"]
    assert table.loc["Sarathi", "completion"] == 1
    assert table.loc["Sarathi", "note"] == "no interval: 2 seeds (< 5)"
    assert np.isnan(table.loc["Sarathi", "throughput_lo"])
    lo = result.table[[f"{m}_lo" for m in METRICS]].to_numpy()
    assert not (lo < 0).any()


def test_quick_keeps_explicit_loads_and_seeds(capsys):
    assert compare_main(["--quick", "--classic", "--loads", "0.6", "--seeds", "1"]) == 0
    out = capsys.readouterr().out
    loads = re.findall(r"^\S+\s+(\d\.\d+)\s+(?:steady|grows|unclear|too-short)", out, re.M)
    assert loads and set(loads) == {"0.6"}
    assert "no interval: 1 seed (< 5)" in out


def test_bad_entries_are_refused():
    with pytest.raises(ValueError, match="unique"):
        compare([CLASSIC[0], CLASSIC[0]], **SMALL)
    with pytest.raises(ValueError, match="memory"):
        compare(CLASSIC[:1], memory=100, **SMALL)
    with pytest.raises(ValueError, match="scheduler"):
        compare(["Sarathi"], **SMALL)


def test_compare_main_writes_table_and_figures(tmp_path, capsys):
    assert compare_main(["--loads", "0.5", "--seeds", "5", "--requests", "40",
                         "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "FasterTransformer" in out and "Sarathi" in out
    assert (tmp_path / "compare_table.csv").exists()
    assert len(list(tmp_path.glob("compare_*.png"))) == len(METRICS)


def test_every_papers_scheduler_runs_on_the_shared_engine():
    """Nested WAIT, MC-SF, A_max, A_min and SLAI run beside the classic schedulers; the
    table says what each one needs to know; the engine accepts every batch."""
    from queuetheory import RelativeInterval
    from queuetheory.compare import paper_schedulers

    entries = paper_schedulers()
    result = compare(entries, loads=[0.6], seeds=1, n_requests=80,
                     predictor=RelativeInterval(0.5))
    runs = result.runs.set_index("scheduler")
    assert set(runs.index) == {e.name for e in entries}
    needs = result.table["needs"].droplevel(1)
    assert "exact output lengths" in needs["MC-SF"] and "intervals" in needs["A_min"]
    # Nested WAIT finishes its leftover cohorts once arrivals end: every scheduler drains
    assert (runs["completed"] == 80).all()


def test_cli_compare_subcommand(tmp_path, capsys):
    from queuetheory.cli import main

    assert main(["compare", "--classic", "--loads", "0.5", "--seeds", "1", "--requests",
                 "30"]) == 0
    assert "Orca" in capsys.readouterr().out

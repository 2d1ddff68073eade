"""``benchmarks/context_time.py``: schedulers under the tiled GPU model, fast path against
stepping with the records checked equal, and the cost of Eq. 7 per batch."""

import pytest

from benchmarks import context_time


def test_the_table_compares_equal_runs_and_counts_fewer_decisions(capsys):
    context_time.main(["-n", "120", "--repeat", "1", "rad", "sarathi:kv"])
    out = capsys.readouterr().out
    rows = [line.split("|")[1:-1] for line in out.splitlines()
            if line.startswith("| rad ") or line.startswith("| sarathi ")]
    assert [r[0].strip() for r in rows] == ["rad", "sarathi"]
    for row in rows:
        iterations, fast, stepping = (int(c.replace(",", "")) for c in row[2:5])
        assert fast < stepping <= iterations + 1        # the stretches skipped decisions
    assert "Eq. 7 on " in out and "µs per batch" in out


def test_a_run_whose_records_differ_is_refused(monkeypatch):
    monkeypatch.setattr(context_time, "same", lambda a, b: False)
    with pytest.raises(AssertionError, match="records differ"):
        context_time.main(["-n", "60", "--repeat", "1", "rad"])


@pytest.mark.parametrize("args", [["nosuch"], ["rad:mem"], ["-n", "0", "rad"]])
def test_a_bad_argument_is_named(args, capsys):
    with pytest.raises(SystemExit):
        context_time.main(args)
    err = capsys.readouterr().err
    assert "names: " in err or "-n=0" in err

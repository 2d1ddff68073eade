"""``benchmarks/instructions.py``: the program it counts runs in a tree, and the count is read
from cachegrind's summary (valgrind itself is not needed here)."""

import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import instructions

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("skip", ["0", "1"])
def test_the_counted_program_runs_in_the_tree(skip):
    out = subprocess.run([sys.executable, "-c", instructions.CHILD, "fcfs-restart", "30000",
                          "40", skip], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]


def _fake_valgrind(stderr):
    def run(args, **kwargs):
        assert "valgrind" in args and "--tool=cachegrind" in args
        assert kwargs["env"]["PYTHONHASHSEED"] == "0"     # the same count every time
        return subprocess.CompletedProcess(args, 0, "", stderr)
    return run


def test_the_count_is_read_from_cachegrinds_summary(monkeypatch):
    monkeypatch.setattr(instructions.subprocess, "run", _fake_valgrind(
        "==1== Cachegrind, a high-precision tracing profiler\n==1== I   refs:      "
        "1,234,567,890\n"))
    assert instructions.count(ROOT, "fcfs-restart", "none", 10, False) == 1_234_567_890


def test_a_summary_without_a_count_is_an_error(monkeypatch):
    monkeypatch.setattr(instructions.subprocess, "run", _fake_valgrind("==1== error\n"))
    with pytest.raises(RuntimeError, match="no instruction count"):
        instructions.count(ROOT, "fcfs-restart", "none", 10, False)


@pytest.mark.parametrize("argv, says", [(["nope"], "'nope' is not a scheduler"),
                                        (["wait:-5"], "KV limit must be a positive integer"),
                                        (["-n", "0", "wait"], "-n=0")])
def test_a_bad_row_or_size_is_refused_by_name(monkeypatch, capsys, argv, says):
    monkeypatch.setattr(sys, "argv", ["instructions", *argv])
    with pytest.raises(SystemExit):
        instructions.main()
    assert says in capsys.readouterr().err

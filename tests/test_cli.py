"""The command line: one-line errors, simulate, reproduce with a report."""

import json
import subprocess
import sys

import pytest

from queuetheory.cli import main


def test_simulate_prints_metrics(capsys):
    assert main(["simulate", "--rate", "0.005", "--prompt", "100", "--output", "20",
                 "--horizon", "50000", "--json"]) == 0
    m = json.loads(capsys.readouterr().out)
    assert m["completed"] > 0 and "growth_verdict" in m


def test_simulate_json_writes_null_for_undefined_figures(capsys):
    """A zero arrival rate: time 0, no latency to average; JSON has null, never NaN."""
    assert main(["simulate", "--rate", "0", "--prompt", "10", "--output", "5", "--horizon",
                 "100", "--json"]) == 0
    text = capsys.readouterr().out
    assert "NaN" not in text
    m = json.loads(text)
    assert m["time"] == 0 and m["mean_latency"] is None and m["throughput"] == 0


@pytest.mark.parametrize("argv,needle", [
    (["simulate", "--rate", "-1", "--prompt", "1", "--output", "1", "--horizon", "10"], "rate"),
    (["simulate", "--policy", "magic", "--rate", "1", "--prompt", "1", "--output", "1",
      "--horizon", "10"], "--policy"),
    (["simulate", "--rate", "1", "--prompt", "1", "--output", "1", "--horizon", "10",
      "--time", "1,2"], "--time"),
    (["reproduce", "--only", "nobody2030"], "--only"),
    (["frobnicate"], "invalid choice"),
])
def test_bad_flags_give_one_line(argv, needle):
    proc = subprocess.run([sys.executable, "-m", "queuetheory", *argv], capture_output=True,
                          text=True)
    assert proc.returncode != 0
    err = proc.stderr.strip()
    assert needle in err and "\n" not in err and "Traceback" not in err


def test_reproduce_writes_report(tmp_path, monkeypatch):
    from queuetheory import report
    from queuetheory.claims import Outcome
    from queuetheory.claims.base import Claim

    def fake(quick):
        return Outcome("confirmed", "1 = 1", plot=lambda ax: ax.plot([0, 1], [0, 1]))

    demo = Claim("li2025.demo", "li2025", "a demo statement", "confirmed", fake)
    monkeypatch.setattr(report.ledger, "all", lambda only=None: [demo])
    out = tmp_path / "rep"
    assert main(["reproduce", "--quick", "--out", str(out), "--json",
                 str(tmp_path / "r.json")]) == 0
    text = (out / "report.md").read_text()
    assert "li2025.demo" in text and "figures/li2025.demo.png" in text
    assert (out / "figures" / "li2025.demo.png").stat().st_size > 0
    assert json.loads((tmp_path / "r.json").read_text())[0]["verdict"] == "confirmed"


def test_simulate_prints_units(capsys):
    from queuetheory.cli import main

    main(["simulate", "--rate", "0.5", "--prompt", "3", "--output", "4", "--horizon", "200",
          "--time", "unit"])
    lines = dict(line.split(None, 1) for line in capsys.readouterr().out.splitlines())
    assert lines["mean_latency"].endswith("round")
    assert lines["throughput"].endswith("output tokens/round")
    assert lines["peak_memory"].endswith("tokens")

"""The solvers print nothing: no HiGHS banner, no solver log (checked at the file descriptors)."""

import subprocess
import sys
import textwrap


def _run(code: str) -> subprocess.CompletedProcess:
    """A fresh interpreter, since HiGHS prints its banner only once per process."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=120)


def test_wait_thresholds_prints_nothing():
    out = _run("""
        import queuetheory as qt
        cls = [qt.RequestClass(1, 1, 1.0), qt.RequestClass(1, 2, 1.0)]
        n = qt.fluid.wait_thresholds(cls, 0.1, 0.1, margin=0.02)
        assert n.tolist() == [int(v) for v in n] and min(n) >= 1
    """)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "" and out.stderr == ""


def test_hindsight_optimum_prints_nothing():
    out = _run("""
        import queuetheory as qt
        opt = qt.bounds.hindsight_optimum([0, 0, 1], [2, 1, 1], [2, 3, 1], 6)
        assert opt.status.startswith("optimal")
    """)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "" and out.stderr == ""


def test_solves_in_this_process_print_nothing(capfd):
    import queuetheory as qt

    cls = [qt.RequestClass(1, 1, 1.0), qt.RequestClass(1, 3, 0.5)]
    qt.fluid.wait_thresholds(cls, 0.1, 0.05, margin=0.1)
    qt.bounds.hindsight_lower_bound([0, 1], [1, 2], [2, 1], 5)
    out, err = capfd.readouterr()
    assert out == "" and err == ""


def test_progress_has_a_total(capsys):
    import queuetheory as qt

    wl = qt.Workload([qt.RequestClass(4, 6, 0.05)])
    tm = qt.PiecewiseLinearTime(1.0, 0.01, 8)
    res = qt.simulate(wl, qt.policies.VLLMVanilla(64), tm, n_requests=300, progress=True)
    err = capsys.readouterr().err
    assert "300/300" in err and "requests completed" in err
    assert res.metrics["completed"] == 300
    qt.simulate(wl, qt.policies.VLLMVanilla(64), tm, horizon=2000, progress=True)
    err = capsys.readouterr().err
    assert "simulated time" in err and "/2.00k" in err

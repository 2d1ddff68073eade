"""Metrics and the growth-rate stability test."""

import numpy as np
import pytest
from scipy import stats

import queuetheory as qt
from queuetheory.metrics import drift_interval


def test_drift_interval_recovers_a_random_walk_drift():
    rng = np.random.default_rng(0)
    covered = 0
    for _ in range(200):
        t = np.arange(20000.0)
        y = np.cumsum(0.3 + rng.normal(0, 2, t.size))
        _, lo, hi = drift_interval(t, y, 10000, 19999, level=0.99)
        covered += lo <= 0.3 <= hi
    assert covered >= 190          # 99 % intervals: at most a few misses in 200


def test_growth_rate_separates_stable_from_overloaded(llama):
    sizes = stats.poisson(99, loc=1)
    for rho, want in ((0.6, "stable"), (1.3, "unstable")):
        rate = rho * (512 / llama.token_time(512)) / 200
        wl = qt.Workload([qt.RequestClass(sizes, sizes, rate)])
        res = qt.simulate(wl, qt.policies.Sarathi(512), llama, horizon=4e5, seed=1)
        assert qt.metrics.growth_rate(res).verdict == want


def test_summary_figures(llama):
    wl = qt.Workload([qt.RequestClass(100, 20, 0.005)])
    m = qt.simulate(wl, qt.policies.Sarathi(512), llama, horizon=1e5, seed=0).metrics
    assert m["completed"] > 0.9 * m["arrived"]
    assert m["throughput"] == pytest.approx(20 * m["completion_rate"])
    # a lone decode batch takes c = 45.5 ms, so the TBT sits at or just above it
    assert 45.5 <= m["mean_tbt"] < 60 and m["p99_tbt"] >= 45.5
    assert m["mean_ttft"] >= 45.5 + 0.3 * 36
    with pytest.raises(ValueError, match="quantity"):
        qt.metrics.growth_rate(qt.simulate(wl, qt.policies.Sarathi(512), llama, horizon=1e4),
                               quantity="latency")

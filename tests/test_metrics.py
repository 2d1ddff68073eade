"""Metrics and the growth-rate stability test."""

import numpy as np
import pytest
from scipy import stats

import queuetheory as qt
from queuetheory.stability import drift_interval


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
        assert qt.growth_rate(res).verdict == want


def test_summary_figures(llama):
    wl = qt.Workload([qt.RequestClass(100, 20, 0.005)])
    m = qt.simulate(wl, qt.policies.Sarathi(512), llama, horizon=1e5, seed=0).metrics
    assert m["completed"] > 0.9 * m["arrived"]
    assert m["throughput"] == pytest.approx(20 * m["completion_rate"])
    # a lone decode batch takes c = 45.5 ms, so the TBT sits at or just above it
    assert 45.5 <= m["mean_tbt"] < 60 and m["p99_tbt"] >= 45.5
    assert m["mean_ttft"] >= 45.5 + 0.3 * 36
    with pytest.raises(ValueError, match="quantity"):
        qt.growth_rate(qt.simulate(wl, qt.policies.Sarathi(512), llama, horizon=1e4),
                               quantity="latency")


class _Idle(qt.policies.Policy):
    """A policy that never schedules anything: every request is stranded."""

    def _schedule(self, state):
        return qt.Batch()


def test_every_result_counts_what_it_leaves_out():
    wl = qt.Workload([qt.RequestClass(10, 5, 0.2)])
    m = qt.simulate(wl, qt.policies.Sarathi(64), qt.UnitTime(), n_requests=50, seed=0).metrics
    assert (m["arrived"], m["completed"], m["unfinished"]) == (50, 50, 0)
    with pytest.warns(qt.CensoredRunWarning, match=r"50 of 50 requests .*idled with work"):
        m = qt.simulate(wl, _Idle(), qt.UnitTime(), n_requests=50).metrics
    assert m["completed"] == 0 and m["unfinished"] == 50 and np.isnan(m["mean_latency"])
    with pytest.warns(qt.CensoredRunWarning, match="max_iterations=10 stopped"):
        qt.simulate(wl, qt.policies.Sarathi(64), qt.UnitTime(), n_requests=50, max_iterations=10)


def test_a_horizon_warns_only_above_one_percent_unfinished():
    over = qt.Workload([qt.RequestClass(10, 5, 1.0)])              # 15 tokens/round offered
    with pytest.warns(qt.CensoredRunWarning, match="the horizon 500 cut the run"):
        m = qt.simulate(over, qt.policies.Sarathi(8), qt.UnitTime(), horizon=500).metrics
    assert m["unfinished"] > 0.01 * m["arrived"]
    light = qt.Workload([qt.RequestClass(10, 5, 0.01)])
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", qt.CensoredRunWarning)
        m = qt.simulate(light, qt.policies.Sarathi(64), qt.UnitTime(), horizon=2e4).metrics
    assert m["unfinished"] <= 0.01 * m["arrived"]


def test_a_workload_without_arrivals_gives_a_clean_result():
    for wl, kw in ((qt.Workload([qt.RequestClass(4, 4, 0.0)]), {"horizon": 100}),
                   (qt.Workload.from_arrays([], [], []), {})):
        m = qt.simulate(wl, qt.policies.Sarathi(64), qt.UnitTime(), **kw).metrics
        assert m["time"] == 0 and m["arrived"] == m["completed"] == m["unfinished"] == 0
        assert m["throughput"] == m["completion_rate"] == m["mean_in_system"] == 0


def test_warmup_and_window_measure_the_steady_state(llama):
    wl = qt.Workload([qt.RequestClass(100, 20, 0.005)])
    res = qt.simulate(wl, qt.policies.Sarathi(512), llama, n_requests=400, seed=2, warmup=2e4)
    whole, steady = qt.metrics.summarize(res), res.metrics
    w = res.window(2e4)
    assert steady["warmup"] == 2e4 and steady["window_arrived"] == w["arrived"]
    arrivals = res.requests["arrival"]
    assert w["arrived"] == int((arrivals >= 2e4).sum()) < whole["arrived"]
    assert steady["mean_latency"] == w["mean_latency"]
    lat = res.requests["latency"][arrivals >= 2e4]
    assert w["mean_latency"] == pytest.approx(lat.mean())
    # tokens emitted over the whole run: every output token of every request, once
    full = res.window(0)
    assert full["throughput"] * full["t1"] == pytest.approx(res.requests["output"].sum())
    assert steady["arrived"] == whole["arrived"] == 400
    with pytest.raises(ValueError, match="window"):
        res.window(5.0, 1.0)


def test_the_steady_state_window_matches_pollaczek_khinchine():
    """One request at a time in unit time is an M/G/1 queue with service S = 1 + output
    rounds (one prefill round, then one round per token): the time-average number in
    system over the window after warm-up is L = ρ + λ²E[S²] / (2(1 − ρ))."""
    sizes = stats.poisson(3, loc=1)                        # output: E = 4, Var = 3
    lam, es, es2 = 0.16, 5.0, 3.0 + 25.0                   # ρ = 0.8, E[S²] = Var + E²
    rho = lam * es
    L = rho + lam ** 2 * es2 / (2 * (1 - rho))
    wl = qt.Workload([qt.RequestClass(sizes, sizes, lam)])
    res = qt.simulate(wl, qt.policies.Sarathi(64, max_reqs=1), qt.UnitTime(), horizon=3e4,
                      seed=5, first_token="decode", warmup=5e3)
    edges = np.linspace(5e3, res.end_time, 21)             # batch means for the error
    parts = [res.window(a, b)["mean_in_system"] for a, b in zip(edges, edges[1:], strict=False)]
    se = np.std(parts, ddof=1) / np.sqrt(len(parts))
    assert abs(res.metrics["mean_in_system"] - L) < 4 * se
    assert res.metrics["mean_in_system"] == pytest.approx(np.mean(parts), rel=1e-6)


def test_t_quantile_is_scipy_stats_t_ppf():
    """The verdicts' t quantile, taken without importing scipy.stats, is ``t.ppf``."""
    from queuetheory.stability import _t_quantile

    for df in (1, 2, 8, 9, 18, 98, 1000):
        for level in (0.5, 0.9, 0.95, 0.99, 0.999):
            assert _t_quantile(level, df) == pytest.approx(stats.t.ppf(0.5 + level / 2, df),
                                                           rel=1e-12)

"""qt.stability: verdicts on systems whose truth theory knows, and the evidence it returns."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import queuetheory as qt
from queuetheory.stability import judge, path_growth_rate


@pytest.fixture
def tour():
    """The README tour: Poisson lengths (20, 50 on average), 0.05 requests per ms."""
    wl = qt.Workload([qt.RequestClass(stats.poisson(19, loc=1), stats.poisson(49, loc=1), 0.05)])
    return wl, qt.PiecewiseLinearTime(c=27.3, a=0.18, b0=64)


def test_the_tour_calls_vanilla_vllm_unstable_and_sarathi_stable(tour):
    wl, tm = tour
    # Sarathi's token capacity b / t_b is 4.74 tokens per ms against 3.5 offered (ρ ≈ 0.74)
    assert wl.token_rate / qt.bounds.token_capacity(tm, 512) < 0.8
    v = qt.stability(wl, qt.policies.Sarathi(512), tm, seeds=(0, 1))
    assert v.verdict == "stable" and v.drift_interval[1] < v.tolerance
    assert v.rounds == 1 and set(v.per_seed) == {0, 1}
    u = qt.stability(wl, qt.policies.VLLMVanilla(512), tm, seeds=(0,))
    assert u.verdict == "unstable"
    assert max(u.drift_interval[0], u.trend_interval[0]) > 0
    # the evidence: a backlog path that ends far above where it started, and the run's size
    path = u.backlog[u.backlog["seed"] == 0]
    assert path["backlog"].iloc[-1] > 4 * path["backlog"].iloc[: len(path) // 10].mean()
    row = u.runs.iloc[0]
    assert row["horizon"] == u.horizon and row["iterations"] > 1000 and row["wall_s"] > 0
    assert row["completed"] < row["arrived"]


def test_the_tour_run_itself_is_called_unstable_by_growth_rate(tour):
    wl, tm = tour
    res = qt.simulate(wl, qt.policies.VLLMVanilla(512), tm, horizon=2e5, seed=0)
    assert qt.growth_rate(res).verdict == "unstable"


def test_single_server_queue_around_pollaczek_khinchine():
    """max_reqs=1 in unit time: one request at a time, service = prompt chunks + output
    rounds, so ρ = λ E[S]; stable below 1 and unstable above, whatever the variance."""
    sizes = stats.poisson(3, loc=1)                      # mean 4
    svc = 1 + 4                                          # one prefill round + 4 decode rounds
    for rho, want in ((0.8, "stable"), (1.25, "unstable")):
        wl = qt.Workload([qt.RequestClass(sizes, sizes, rho / svc)])
        pol = qt.policies.Sarathi(64, max_reqs=1)
        v = qt.stability(wl, pol, qt.UnitTime(), horizon=8000, seeds=(0, 1),
                         first_token="decode")
        assert v.verdict == want, v


def test_an_unclear_case_doubles_the_horizon_and_says_how_much_longer():
    """A tolerance far below what the run can resolve keeps a stable queue inconclusive:
    the horizon doubles up to the budget, and the verdict says how long would be needed."""
    sizes = stats.poisson(3, loc=1)
    wl = qt.Workload([qt.RequestClass(sizes, sizes, 0.5 / 5)])           # ρ = 0.5
    v = qt.stability(wl, qt.policies.Sarathi(64, max_reqs=1), qt.UnitTime(), horizon=500,
                     max_horizon=2000, tolerance=1e-4, first_token="decode")
    assert v.verdict == "inconclusive"
    assert v.rounds == 3 and v.horizon == 2000 == v.max_horizon
    assert v.needed_horizon > v.horizon
    assert v.drift_interval[0] <= 0 <= v.drift_interval[1]


def test_a_workload_without_arrivals_is_stable_at_once():
    wl = qt.Workload([qt.RequestClass(4, 4, 0.0)])
    v = qt.stability(wl, qt.policies.Sarathi(64), qt.UnitTime())
    assert v.verdict == "stable" and v.drift == 0 and v.horizon == 0 and v.backlog.empty


@pytest.mark.parametrize("kwargs, match", [
    ({"seeds": ()}, "seeds"), ({"level": 1.0}, "level"), ({"tolerance": 0}, "tolerance"),
    ({"horizon": 100, "max_horizon": 50}, "max_horizon"), ({"seed": 3}, "seeds"),
    ({"horizon": 10, "n_requests": 5}, "at most one"),
    ({"horizon": 10, "max_horizon": 1e12}, "GiB"),
])
def test_bad_arguments_are_refused(kwargs, match):
    wl = qt.Workload([qt.RequestClass(4, 4, 0.1)])
    with pytest.raises(ValueError, match=match):
        qt.stability(wl, qt.policies.Sarathi(64), qt.UnitTime(), **kwargs)
    with pytest.raises(ValueError, match="Workload"):
        qt.stability(wl.sample(horizon=10), qt.policies.Sarathi(64), qt.UnitTime())


def test_the_verdict_rule_on_plain_paths():
    """A path that surely grows, and not surely by less than the tolerance, is unstable
    even when the lower end of its interval lies below the tolerance (the README tour's
    case); a drift surely below the tolerance is within the resolution: stable."""
    rng = np.random.default_rng(0)
    t = np.arange(20000.0)
    y = 0.05 * t + rng.normal(0, 40, t.size)            # 5 % of an offered rate of 1
    g = path_growth_rate(t, y, end=20000, offered=1.0)
    assert 0 < g.ci_low < g.tolerance < g.ci_high
    assert g.verdict == "unstable"
    small = path_growth_rate(t, 0.005 * t + rng.normal(0, 1, t.size), end=20000, offered=1.0)
    assert small.ci_low > 0 and small.ci_high < small.tolerance and small.verdict == "stable"
    assert judge((-1, -1), (0.5, 2.0), 1.0) == "inconclusive"
    assert judge((-1, 0.1), (0.5, 2.0), 1.0) == "unstable"


def test_wait_on_both_sides_of_condition_9():
    """Ao et al.'s two types with thresholds (1, 1): ΔT = 1, so ρ = λ; stable at 0.8,
    unstable at 1.25 (both types always ready, one prompt each per unit time)."""
    for lam, want in ((0.8, "stable"), (1.25, "unstable")):
        classes = (qt.RequestClass(1, 1, lam), qt.RequestClass(1, 2, lam))
        assert qt.fluid.wait_condition((1, 1), classes, 0.1, 0.1).iteration_time == 1
        v = qt.stability(qt.Workload(list(classes)), qt.policies.WAIT((1, 1), classes),
                         qt.LinearMemoryTime(0.1, 0.1), seeds=(0, 1), first_token="decode")
        assert v.verdict == want, v


def test_rybko_stolyar_on_both_sides_of_its_virtual_station():
    """The classical network is judged by its own growth test (the same verdict rule)."""
    from queuetheory.networks import rybko_stolyar_classic, simulate_classic

    for rho_v, want in ((0.8, "stable"), (1.25, "unstable")):
        m = rho_v / 2
        res = simulate_classic(rybko_stolyar_classic("up", 1.0, (0.1, m, 0.1, m)), 4000, seed=0)
        assert res.growth_rate().verdict == want


@pytest.mark.parametrize("make_policy, rate", [
    (lambda: qt.policies.FasterTransformer(512), 0.62), (lambda: qt.policies.Orca(512), 25.0)],
    ids=["ft: runs past arrivals", "orca"])
def test_a_bulk_runs_verdict_equals_the_stepping_engines(make_policy, rate):
    """The verdict read from a bulk run's rows (the backlog at the block edges, its integrals
    a row at a time) equals the one read from the stepping engine's full log: the same drift
    interval, the trend interval to rounding, the same thinned path."""
    prompt, output = qt.data.sharegpt_lengths()
    wl = qt.Workload.from_lengths(prompt, output, rate=rate)
    time_model = qt.AffineTokenTime(c=16.1e-3, per_prefill=57.8e-6, per_decode=39.5e-6)
    runs = [qt.stability(wl, make_policy(), time_model, n_requests=1500,
                         max_horizon=1500 / rate, token_budget=512, fast_path=fast)
            for fast in (True, False)]
    bulk, stepped = runs
    assert bulk.drift_interval == stepped.drift_interval
    np.testing.assert_allclose(bulk.trend_interval, stepped.trend_interval, rtol=1e-9)
    assert bulk.verdict == stepped.verdict
    pd.testing.assert_frame_equal(bulk.backlog, stepped.backlog)

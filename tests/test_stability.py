"""qt.stability: verdicts on systems whose truth theory knows, and the evidence it returns."""

import numpy as np
import pytest
from scipy import stats

import queuetheory as qt
from queuetheory.metrics import judge, path_growth_rate


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
    assert qt.metrics.growth_rate(res).verdict == "unstable"


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
    sizes = stats.poisson(3, loc=1)
    wl = qt.Workload([qt.RequestClass(sizes, sizes, 1.0 / 5)])          # ρ = 1 exactly
    v = qt.stability(wl, qt.policies.Sarathi(64, max_reqs=1), qt.UnitTime(), horizon=400,
                     max_horizon=1600, first_token="decode")
    if v.verdict == "inconclusive":
        assert v.rounds == 3 and v.horizon == 1600
        assert v.needed_horizon > v.horizon
    else:
        assert v.needed_horizon is None
    assert v.max_horizon == 1600


def test_a_workload_without_arrivals_is_stable_at_once():
    wl = qt.Workload([qt.RequestClass(4, 4, 0.0)])
    v = qt.stability(wl, qt.policies.Sarathi(64), qt.UnitTime())
    assert v.verdict == "stable" and v.drift == 0 and v.horizon == 0 and v.backlog.empty


@pytest.mark.parametrize("kwargs, match", [
    ({"seeds": ()}, "seeds"), ({"level": 1.0}, "level"), ({"tolerance": 0}, "tolerance"),
    ({"horizon": 100, "max_horizon": 50}, "max_horizon"), ({"seed": 3}, "seeds"),
    ({"horizon": 10, "n_requests": 5}, "at most one"),
])
def test_bad_arguments_are_refused(kwargs, match):
    wl = qt.Workload([qt.RequestClass(4, 4, 0.1)])
    with pytest.raises(ValueError, match=match):
        qt.stability(wl, qt.policies.Sarathi(64), qt.UnitTime(), **kwargs)
    with pytest.raises(ValueError, match="Workload"):
        qt.stability(wl.sample(horizon=10), qt.policies.Sarathi(64), qt.UnitTime())


def test_a_significant_drift_below_the_tolerance_is_growth_not_stability():
    """A path that surely grows, if by less than the tolerance, is not called stable."""
    rng = np.random.default_rng(0)
    t = np.arange(20000.0)
    y = 0.01 * t + rng.normal(0, 1, t.size)             # 1 % of an offered rate of 1
    g = path_growth_rate(t, y, end=20000, offered=1.0)
    assert g.ci_low > 0 and g.ci_high < g.tolerance
    assert g.verdict == "unstable"
    assert judge((-1, -1), (0.5, 0.5), 1.0) == "stable"
    assert judge((-1, -1), (0.5, 2.0), 1.0) == "inconclusive"

"""Bad input raises a ValueError that names the parameter."""

import math

import pytest

import queuetheory as qt


@pytest.mark.parametrize("rate", [-1.0, math.nan, math.inf, "fast"])
def test_bad_rate(rate):
    with pytest.raises(ValueError, match="rate"):
        qt.RequestClass(10, 10, rate)


@pytest.mark.parametrize("length,name", [(0, "prompt"), (-3, "prompt"), ([0, 5], "prompt"),
                                         ("x", "prompt")])
def test_bad_lengths(length, name):
    with pytest.raises(ValueError, match=name):
        qt.RequestClass(length, 10, 1.0)
    with pytest.raises(ValueError, match="output"):
        qt.RequestClass(10, length, 1.0)


@pytest.mark.parametrize("budget", [0, -5, 2.5])
def test_bad_budget(budget):
    with pytest.raises(ValueError, match="token_budget"):
        qt.policies.Sarathi(budget)


def test_memory_smaller_than_a_prompt(llama):
    wl = qt.Workload([qt.RequestClass(500, 10, 0.01)])
    with pytest.raises(ValueError, match="memory=300"):
        qt.simulate(wl, qt.policies.Sarathi(256), llama, horizon=1e4, memory=300)


@pytest.mark.parametrize("make,param", [
    (lambda: qt.policies.Sarathi(256, order="random"), "order"),
    (lambda: qt.policies.FasterTransformer(256, mode="cohort"), "mode"),
    (lambda: qt.Workload([qt.RequestClass(1, 1, 1.0)], arrivals="gamma"), "arrivals"),
    (lambda: qt.PiecewiseLinearTime(c=-1, a=0.3), "c"),
    (lambda: qt.LinearMemoryTime(d0=1, d1=math.nan), "d1"),
    (lambda: qt.RelativeInterval(1.5), "alpha"),
    (lambda: qt.policies.KFCFS(qt.policies.Sarathi(8), 0, 8), "Kp"),
    (lambda: qt.policies.StaticPriority(8, [0, 0]), "class_order"),
])
def test_unknown_or_invalid_options(make, param):
    with pytest.raises(ValueError, match=param):
        make()


def test_simulate_arguments(llama):
    wl = qt.Workload([qt.RequestClass(10, 10, 0.01)])
    with pytest.raises(ValueError, match="horizon"):
        qt.simulate(wl, qt.policies.Sarathi(64), llama, horizon=-1)
    with pytest.raises(ValueError, match="memory"):
        qt.simulate(wl, qt.policies.Sarathi(64), llama, horizon=10, memory=0)
    with pytest.raises(ValueError, match="time_model"):
        qt.simulate(wl, qt.policies.Sarathi(64), "fast", horizon=10)
    with pytest.raises(ValueError, match="horizon or n_requests"):
        qt.simulate(wl, qt.policies.Sarathi(64), llama)
    with pytest.raises(ValueError, match="Bernoulli"):
        qt.Workload([qt.RequestClass(1, 1, 2.0)], arrivals="bernoulli")


def test_unstable_error_says_by_how_much():
    e = qt.UnstableError("d1·W", 1.25)
    assert isinstance(e, ValueError)
    assert e.excess == pytest.approx(0.25)
    assert "0.25" in str(e)

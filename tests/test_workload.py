"""Arrival processes and length laws."""

import numpy as np
import pytest
from scipy import stats

import queuetheory as qt


def test_poisson_counts_within_four_standard_errors():
    wl = qt.Workload([qt.RequestClass(10, 10, 2.0), qt.RequestClass(5, 5, 0.5)])
    counts = np.array([len(wl.sample(horizon=1000, seed=s)) for s in range(20)])
    mean, se = counts.mean(), np.sqrt(2.5 * 1000 / counts.size)
    assert abs(mean - 2500) < 4 * se


def test_trace_is_sorted_and_classes_mix():
    tr = qt.Workload([qt.RequestClass(10, 10, 2.0), qt.RequestClass(5, 5, 0.5)]).sample(
        horizon=200, seed=1)
    assert np.all(np.diff(tr.arrival) >= 0)
    assert set(np.unique(tr.cls)) == {0, 1}
    assert np.all(tr.prompt[tr.cls == 1] == 5)


def test_deterministic_and_slotted_arrivals():
    det = qt.Workload([qt.RequestClass(1, 1, 0.25)], arrivals="deterministic").sample(horizon=10)
    assert det.arrival.tolist() == [4.0, 8.0]
    slot = qt.Workload([qt.RequestClass(1, 1, 3.0)], arrivals="poisson-slot").sample(horizon=50)
    assert np.all(slot.arrival == np.round(slot.arrival))
    bern = qt.Workload([qt.RequestClass(1, 1, 0.3)], arrivals="bernoulli").sample(horizon=2000)
    assert np.all(np.diff(bern.arrival) >= 1)          # at most one per slot
    assert abs(len(bern) - 0.3 * 2001) < 4 * np.sqrt(2001 * 0.3 * 0.7)


def test_time_varying_poisson_by_thinning():
    tv = qt.TimeVarying(lambda t: 1 + np.sin(2 * np.pi * t / 100), peak=2.0)
    wl = qt.Workload([qt.RequestClass(1, 1, 3.0)], arrivals=tv)
    counts = [len(wl.sample(horizon=100, seed=s)) for s in range(30)]
    # ∫_0^100 3 (1 + sin) dt = 300 over a whole period
    assert abs(np.mean(counts) - 300) < 4 * np.sqrt(300 / 30)
    tr = wl.sample(horizon=100, seed=0)
    first_half = np.sum(tr.arrival < 50)
    assert first_half > len(tr) - first_half       # the sine is positive on the first half


def test_lengths_from_distributions_and_samples():
    c = qt.RequestClass(stats.lognorm(s=1.0, scale=100), np.array([3, 7, 7]), 1.0)
    rng = np.random.default_rng(0)
    p, o = c.sample_lengths(rng, 5000)
    assert p.min() >= 1 and p.dtype.kind == "i"
    assert set(np.unique(o)) <= {3, 7}
    assert c.mean_output == pytest.approx(17 / 3)
    assert abs(p.mean() - c.mean_prompt) < 4 * p.std() / np.sqrt(p.size)
    geo = qt.RequestClass(10, stats.geom(0.25), 1.0)
    assert geo.mean_output == pytest.approx(4.0, rel=1e-3)
    assert geo.output_moment(2) == pytest.approx(0.75 / 0.25**2 + 16, rel=1e-2)


def test_from_samples_keeps_pairs():
    c = qt.RequestClass.from_samples(np.array([10, 20, 30]), np.array([1, 2, 3]), 1.0)
    p, o = c.sample_lengths(np.random.default_rng(0), 100)
    assert np.all(p == 10 * o)


def test_from_arrays_replays_a_trace_in_arrival_order():
    wl = qt.Workload.from_arrays([3.0, 1.0, 2.0], [10, 20, 30], [1, 2, 3], [0, 1, 0])
    tr = wl.sample(horizon=10)
    assert tr.arrival.tolist() == [1.0, 2.0, 3.0]
    assert tr.prompt.tolist() == [20, 30, 10]
    assert tr.cls.tolist() == [1, 0, 0]
    assert len(wl.sample(horizon=2.5)) == 2
    with pytest.raises(ValueError, match="lo <= output <= hi"):
        qt.Workload.from_arrays([0.0], [1], [5], lo=[6], hi=[9])


def test_prediction_intervals_contain_the_truth():
    wl = qt.Workload([qt.RequestClass(10, stats.geom(0.05), 1.0)],
                     predictor=qt.RelativeInterval(0.3))
    tr = wl.sample(horizon=500, seed=2)
    assert np.all(tr.lo <= tr.output) and np.all(tr.output <= tr.hi)
    assert np.any(tr.lo < tr.hi)
    exact = qt.Workload([qt.RequestClass(10, 7, 1.0)]).sample(horizon=20)
    assert np.all(exact.lo == 7) and np.all(exact.hi == 7)


def test_token_rate():
    wl = qt.Workload([qt.RequestClass(100, 20, 0.5), qt.RequestClass(10, 10, 1.0)])
    assert wl.token_rate == pytest.approx(0.5 * 120 + 20)

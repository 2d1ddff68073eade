"""One stability room (issue 31): the rule, the tests and the one run-longer loop live in
``queuetheory.stability``; the old names in ``queuetheory.metrics`` warn and still work."""

import types

import numpy as np
import pytest

import queuetheory as qt
import queuetheory.metrics as metrics
from queuetheory import stability as stab_function
from queuetheory.stability import run_longer

stab = __import__("sys").modules["queuetheory.stability"]


@pytest.mark.parametrize("name", sorted(metrics.MOVED_TO_STABILITY))
def test_names_moved_out_of_metrics_warn_and_are_the_same_objects(name):
    with pytest.warns(DeprecationWarning, match=f"queuetheory.stability.{name}"):
        old = getattr(metrics, name)
    assert old is getattr(stab, name)


def test_metrics_keeps_its_own_names_and_refuses_unknown_ones():
    assert metrics.summarize and metrics.window and metrics.step_path_at
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        metrics.nothing  # noqa: B018


def test_growth_rate_is_at_the_top_level():
    assert qt.growth_rate is stab.growth_rate and qt.GrowthRate is stab.GrowthRate
    assert qt.stability is stab_function is stab.stability


def _judged(verdicts):
    """A judge that answers ``verdicts`` in turn and records the horizons it ran."""
    seen = []

    def judge_at(h):
        seen.append(h)
        return types.SimpleNamespace(verdict=verdicts[len(seen) - 1])

    return judge_at, seen


def test_run_longer_doubles_to_the_cap_and_stops_at_a_verdict():
    judge_at, seen = _judged(["inconclusive"] * 9)
    out, H, rounds = run_longer(judge_at, 10.0, 50.0)
    assert seen == [10.0, 20.0, 40.0, 50.0] and (H, rounds) == (50.0, 4)
    judge_at, seen = _judged(["inconclusive", "stable"])
    out, H, rounds = run_longer(judge_at, 10.0, 50.0)
    assert out.verdict == "stable" and seen == [10.0, 20.0] and rounds == 2


def test_run_longer_in_whole_steps_stops_before_passing_the_cap():
    judge_at, seen = _judged(["inconclusive"] * 9)
    run_longer(judge_at, 10.0, 50.0, longer=lambda h: 2 * h)
    assert seen == [10.0, 20.0, 40.0]


def test_run_longer_with_its_own_ladder_and_rule():
    seen = []

    def judge_at(h):
        seen.append(h)
        return {"done": h >= 160}

    out, H, rounds = run_longer(judge_at, 10.0, 1000.0, longer=lambda h: 4 * h,
                                settled=lambda r: r["done"])
    assert seen == [10.0, 40.0, 160.0] and out["done"] and rounds == 3


def test_stability_reports_the_rounds_of_the_loop():
    wl = qt.Workload([qt.RequestClass(prompt=8, output=8, rate=0.5)])
    v = qt.stability(wl, qt.policies.Sarathi(16), qt.UnitTime(), horizon=400.0,
                     max_horizon=400.0, first_token="decode")
    assert v.rounds == 1 and v.horizon == 400.0 and np.isfinite(v.drift)

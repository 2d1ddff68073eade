"""One public vocabulary: ``token_budget`` for the paper's ``b``, ``first_token`` for Jaillet
et al.'s ``convention="ip"|"eq1"``. The old names keep working for one release, with a
DeprecationWarning naming the new one, and give the same answers."""

import numpy as np
import pytest

import queuetheory as qt
from queuetheory.bounds import random_order, token_rate
from queuetheory.fluid import engine as fluid_engine
from queuetheory.rounds import durations, first_token_of, mcsf_schedule

LLAMA = qt.PiecewiseLinearTime(c=45.5, a=0.30, b0=64)


def test_b_is_token_budget_and_the_old_keyword_warns():
    new = token_rate.token_capacity(LLAMA, token_budget=512)
    assert new == token_rate.token_capacity(LLAMA, 512)
    with pytest.warns(DeprecationWarning, match="use token_budget="):
        assert token_rate.token_capacity(LLAMA, b=512) == new
    with pytest.warns(DeprecationWarning, match="token_budget"):
        old = fluid_engine.drain_time(100.0, 1.0, 10.0, 10.0, b=512, t_b=6.0)
    assert old == fluid_engine.drain_time(100.0, 1.0, 10.0, 10.0, token_budget=512, t_b=6.0)
    with pytest.raises(TypeError, match="give token_budget= only"):
        token_rate.token_capacity(LLAMA, b=512, token_budget=512)


def test_convention_is_first_token_and_the_old_names_warn():
    o = np.array([3, 1, 4])
    np.testing.assert_array_equal(durations(o, "decode"), o + 1)
    with pytest.warns(DeprecationWarning, match='first_token="decode"'):
        np.testing.assert_array_equal(durations(o, convention="eq1"), o + 1)
    with pytest.warns(DeprecationWarning, match='first_token="prefill"'):
        np.testing.assert_array_equal(durations(o, "ip"), o)       # the old name, positional
    a, s = np.zeros(3, int), np.ones(3, int)
    with pytest.warns(DeprecationWarning):
        old = mcsf_schedule(a, s, o, 8, convention="eq1")
    np.testing.assert_array_equal(old, mcsf_schedule(a, s, o, 8, first_token="decode"))
    with pytest.warns(DeprecationWarning):
        assert random_order.hsf_tel(o, 1, 8, convention="ip") == random_order.hsf_tel(o, 1, 8)
    with pytest.raises(TypeError, match="give first_token= only"):
        durations(o, convention="ip", first_token="prefill")
    with pytest.raises(ValueError, match="convention='ab'"):
        durations(o, convention="ab")
    with pytest.raises(ValueError, match="first_token='ab'"):
        first_token_of("ab")


def test_engine_budget_is_token_budget_and_the_old_keyword_warns():
    from queuetheory.engine import Engine

    sarathi = qt.policies.Sarathi(64)
    with pytest.warns(DeprecationWarning, match=r"Engine\(budget=\.\.\.\).*use token_budget=") \
            as caught:
        old = Engine(sarathi, qt.UnitTime(), budget=32)
    assert caught[0].filename == __file__              # the warning names the caller's line
    assert old.token_budget == Engine(sarathi, qt.UnitTime(), token_budget=32).token_budget == 32
    with pytest.raises(TypeError, match="give token_budget= only"):
        Engine(sarathi, qt.UnitTime(), budget=32, token_budget=32)


def test_the_budget_attributes_are_token_budget_and_the_old_names_warn():
    from queuetheory.engine import Engine
    from queuetheory.engine.batch import Batch, check_batch

    engine = Engine(qt.policies.Sarathi(64), qt.UnitTime(), token_budget=32)
    with pytest.warns(DeprecationWarning, match=r"Engine\.budget is deprecated.*"
                      r"use Engine\.token_budget") as caught:
        assert engine.budget == 32
    assert caught[0].filename == __file__
    with pytest.warns(DeprecationWarning, match=r"Engine\.budget"):
        engine.budget = 16                             # setting the old name sets the new
    assert engine.token_budget == 16
    engine.add(qt.Workload.from_arrays([0.0, 0.0], [4, 5], [2, 3]).sample())
    state = engine.state(0.0)
    assert state.token_budget == 16
    with pytest.warns(DeprecationWarning, match=r"State\.budget is deprecated.*"
                      r"use State\.token_budget"):
        assert state.budget == 16
    batch = Batch(np.array([0, 1]), np.array([4, 5]), np.array([], dtype=np.int64))
    with pytest.warns(DeprecationWarning, match=r"check_batch\(budget=\.\.\.\)"):
        old = check_batch(state, batch, policy=None, iteration=0, budget=16, memory=None,
                          emit_first=True)
    assert old == check_batch(state, batch, policy=None, iteration=0, token_budget=16,
                              memory=None, emit_first=True) == 9
    with pytest.raises(qt.errors.InfeasibleBatchError, match="budget"):
        check_batch(state, batch, policy=None, iteration=0, token_budget=8, memory=None,
                    emit_first=True)


"""Batch-time models and their units."""

import numpy as np
import pytest

import queuetheory as qt
from queuetheory.timing import BatchLoad


def test_piecewise_linear_eq_2_3(llama):
    assert llama.token_time(64) == pytest.approx(45.5)
    assert llama.token_time(10) == pytest.approx(45.5)
    assert llama.token_time(512) == pytest.approx(45.5 + 0.3 * 448)
    load = BatchLoad(np.array([100, 50]), np.array([0, 200]), np.array([30, 40, 50]))
    assert load.token_load == 153
    assert llama.duration(load) == pytest.approx(45.5 + 0.3 * (153 - 64))


def test_linear_memory_eq_1():
    """τ = d0 + d1 Σ (l_j + k): a prefill of 100 plus two decodes at stages 3 and 5."""
    tm = qt.LinearMemoryTime(d0=2.0, d1=0.01)
    load = BatchLoad(np.array([100]), np.array([0]), np.array([52, 74]))  # l=50,k=3; l=70,k=5
    assert load.kv_tokens == 100 + 53 + 75
    assert tm.duration(load) == pytest.approx(2.0 + 0.01 * 228)


def test_slots_round_up():
    tm = qt.PiecewiseLinearTime(c=45.5, a=0.3, b0=64, slot=10)
    assert tm.token_time(64) == 50
    assert tm.token_time(1000) == 10 * np.ceil((45.5 + 0.3 * 936) / 10)
    assert qt.UnitTime().duration(BatchLoad.of_tokens(prefill=5)) == 1.0
    with pytest.raises(TypeError):
        qt.LinearMemoryTime(1, 1).token_time(10)

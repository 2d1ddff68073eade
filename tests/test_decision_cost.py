"""The replay of ``benchmarks/decision_cost.py`` (issue 33): a policy's recorded answers,
handed back in order, drive the engine to the same records, so the replay's CPU is the
engine's own share of the run."""

import pytest

import queuetheory as qt
from benchmarks import decision_cost
from benchmarks.engine_speed import trace


@pytest.mark.parametrize("name, memory", [("fcfs-restart", 30_000), ("nested-wait", 30_000),
                                          ("aell", 30_000), ("vllm-v1", None),
                                          ("rad", None), ("alpha", 30_000)])
def test_a_replay_of_the_answers_gives_the_same_records(name, memory):
    arrival, prompt, output = trace(300, True, 0.8)
    out = decision_cost.row(name, arrival, prompt, output, memory, repeat=1)
    assert out is not None, name               # these step: one decision per few iterations
    assert 0 < out["decisions"] <= out["iterations"] + 1
    assert out["budget µs / decision"] == pytest.approx(
        20 * out["iterations"] / out["decisions"])


def test_a_replay_that_answers_differently_is_caught(monkeypatch):
    """A replay whose promises are withheld steps where the run stretched: its batches fall
    out of step with the engine's states (an infeasible batch, answers run out, or records
    that differ), and the row fails."""
    arrival, prompt, output = trace(300, True, 0.8)
    monkeypatch.setattr(decision_cost.Replay, "decodes_through", lambda self, state, batch: (
        self._left["decodes_through"].popleft() and False))
    with pytest.raises((AssertionError, IndexError, qt.InfeasibleBatchError)):
        decision_cost.row("fcfs-restart", arrival, prompt, output, 30_000, repeat=1)


@pytest.mark.parametrize("name", ["sarathi", "fcfs-restart"])
def test_a_bulk_rule_is_left_out(name):
    arrival, prompt, output = trace(300, True, 0.8)
    assert decision_cost.row(name, arrival, prompt, output, None, repeat=1) is None

"""Work-conservation of every shipped classic scheduler (seed 004 eq. 2.6, L214, L229, L444)."""

import numpy as np
import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st

import queuetheory as qt
from queuetheory.bounds import (
    available_tokens,
    dtmc_state,
    is_work_conserving,
    work_conservation_witness,
)
from queuetheory.errors import InfeasibleBatchError
from queuetheory.papers.li2025 import classic_policies

B = 16
STRICT = ("Sarathi", "Sarathi-SJF", "Orca(chunk=True)", "StaticPriority", "KFCFS(Sarathi, b, b)")
NOT_WC = ("Orca(chunk=False)", "VLLMVanilla", "FasterTransformer", "FasterTransformer(request)",
          "KFCFS(Sarathi, 2, 2)")

requests = st.tuples(st.one_of(st.just(0), st.integers(1, 2 * B)), st.integers(1, 10))
states = st.lists(requests, min_size=1, max_size=3 * B)


def _wc(policy, reqs, strict=True):
    p, d = zip(*reqs, strict=True)
    state = dtmc_state(p, d)
    policy.reset(0)
    return is_work_conserving(state, policy.schedule(state), B, strict=strict)


def test_every_classic_scheduler_is_classified():
    assert set(STRICT) | set(NOT_WC) == set(classic_policies(B))


@pytest.mark.parametrize("name", STRICT)
@settings(max_examples=150, deadline=None)
@given(reqs=states)
def test_strictly_work_conserving_schedulers(name, reqs):
    policy = classic_policies(B)[name]
    assert _wc(policy, reqs, strict=True) and _wc(policy, reqs, strict=False)


@pytest.mark.parametrize("name", NOT_WC)
def test_non_work_conserving_schedulers_have_a_witness(name):
    policy = classic_policies(B)[name]
    witness = find(states, lambda reqs: not _wc(policy, reqs),
                   settings=settings(max_examples=2000, deadline=None, database=None))
    p, d = zip(*witness, strict=True)
    state = dtmc_state(p, d)
    policy.reset(0)
    batch = policy.schedule(state)
    assert batch.token_load < min(B, available_tokens(state))
    print(f"{name}: witness p'={p}, d'={d}, load {batch.token_load}, "
          f"avail {available_tokens(state)}")


@pytest.mark.parametrize("name", ["VLLMVanilla", "FasterTransformer", "Orca(chunk=False)"])
def test_weak_definition_is_also_broken(name):
    """The paper's own (2.6): a partial batch although avail(x) ≥ b."""
    res = work_conservation_witness(classic_policies(B)[name], B, strict=False)
    assert not res.work_conserving
    assert res.avail >= B > res.load


def test_vllm_fig5_mechanism():
    """Fig. 5, 2nd batch: a short prompt waits, decodes are blocked (vLLM); FT the reverse."""
    state = dtmc_state([3, 0, 0, 0], [5, 9, 9, 9])
    vllm, ft = qt.policies.VLLMVanilla(B), qt.policies.FasterTransformer(B)
    assert vllm.schedule(state).token_load == 3
    assert ft.schedule(state).token_load == 3
    assert qt.policies.Sarathi(B).schedule(state).token_load == 6 == available_tokens(state)


def test_strict_and_weak_differ_below_the_budget():
    state = dtmc_state([0, 1], [1, 1])
    batch = qt.policies.VLLMVanilla(B).schedule(state)
    assert not is_work_conserving(state, batch, B, strict=True)
    assert is_work_conserving(state, batch, B, strict=False)


def test_infeasible_batch_and_bad_budget_raise():
    state = dtmc_state([4, 0], [2, 3])
    with pytest.raises(InfeasibleBatchError, match="2.5a"):
        is_work_conserving(state, qt.Batch(decode=[0]), B)
    with pytest.raises(ValueError, match="b="):
        is_work_conserving(state, qt.Batch(), 0)
    with pytest.raises(ValueError, match="decode_left"):
        dtmc_state([1], [0])


def test_dtmc_state_encodes_phases():
    state = dtmc_state([0, 5], [3, 2])
    assert np.array_equal(state.remaining_prefill, [0, 5])
    assert np.array_equal(state.remaining_output, [3, 2])
    assert np.array_equal(state.in_decode, [True, False])


def test_work_conservation_claim():
    c = qt.claims.get("li2025.work_conservation")
    out = c.check(quick=True)
    assert out.verdict == c.expected
    assert out.data["Sarathi"]["strict"] and not out.data["VLLMVanilla"]["strict"]

"""Hypothesis: shipped policies never build an infeasible batch on the states they can meet."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import classic_policies
from queuetheory.engine import State, check_batch
from queuetheory.engine.state import RequestTable
from queuetheory.workload import Trace


@st.composite
def states(draw):
    n = draw(st.integers(1, 25))
    prompt = np.array(draw(st.lists(st.integers(1, 300), min_size=n, max_size=n)))
    output = np.array(draw(st.lists(st.integers(1, 40), min_size=n, max_size=n)))
    cls = np.array(draw(st.lists(st.integers(0, 1), min_size=n, max_size=n)))
    frac = np.array(draw(st.lists(st.floats(0, 1), min_size=n, max_size=n)))
    prefilled = np.floor(frac * prompt).astype(int)
    dec_frac = np.array(draw(st.lists(st.floats(0, 1), min_size=n, max_size=n)))
    decoded = np.where(prefilled == prompt, np.floor(dec_frac * (output - 1)), 0).astype(int)
    emit_first = draw(st.booleans())
    if emit_first:
        decoded = np.where(prefilled == prompt, np.maximum(decoded, 1), 0)
        decoded = np.minimum(decoded, output - 1)
        prefilled = np.where((decoded == 0) & (prefilled == prompt), prompt - 1, prefilled)
        keep = prompt > 1
        prefilled = np.where(keep, prefilled, 0)
        decoded = np.where(keep, decoded, 0)
    table = RequestTable(emit_first)
    trace = Trace(np.zeros(n), prompt, output, cls, output, output, np.zeros(n, int))
    table.append(trace)
    table.set_progress(np.arange(n), prefilled, decoded)
    used = int(table.kv(np.arange(n)).sum())
    peak = int((prompt + output).max())
    memory = draw(st.one_of(st.none(), st.integers(max(used, peak), max(used, peak) + 2000)))
    budget = draw(st.integers(1, 600))
    return table, memory, budget


@settings(max_examples=150, deadline=None)
@given(states(), st.integers(0, len(classic_policies()) - 1))
def test_no_shipped_policy_builds_an_infeasible_batch(spec, which):
    table, memory, budget = spec
    policy = classic_policies(budget)[which]
    policy.reset(0)
    state = State(table, np.arange(table.n), 0.0, budget, memory)
    batch = policy.schedule(state)
    check_batch(state, batch, policy=policy, iteration=0, token_budget=budget, memory=memory,
                emit_first=bool(table.emit_first))
    # a policy that can run something does so when memory is not binding
    if memory is None:
        assert not batch.empty


def _whole_prompts_with_memory(spec):
    """The states the round-model schedulers (seeds 001, 002, 003) can reach: prompts are
    prefilled whole, in one round, and a KV capacity is always set."""
    table, memory, budget = spec
    n = table.n
    prefilled, decoded = table.prefilled[:n].copy(), table.decoded[:n].copy()
    prefilled[prefilled < table.prompt[:n]] = 0
    decoded[prefilled == 0] = 0
    table.set_progress(np.arange(n), prefilled, decoded)
    if memory is None:
        memory = int((table.prompt[:n] + table.output[:n]).max() + table.kv(np.arange(n)).sum())
    return table, memory, budget


def round_policies(budget):
    from queuetheory import policies as p

    return [p.MCSF(), p.MCSF(on_fail="skip"), p.FCFS(), p.AMax(), p.AMin(),
            p.AMin(evict_key="dynamic"), p.HSF(), p.ARandom(), p.AEll(), p.SLAI(max(budget, 16))]


@settings(max_examples=200, deadline=None)
@given(states().map(_whole_prompts_with_memory), st.integers(0, len(round_policies(16)) - 1))
def test_round_model_policies_build_feasible_batches(spec, which):
    table, memory, budget = spec
    policy = round_policies(budget)[which]
    policy.reset(0)
    b = getattr(policy, "token_budget", None)
    state = State(table, np.arange(table.n), 0.0, b, memory)
    check_batch(state, policy.schedule(state), policy=policy, iteration=0, token_budget=b,
                memory=memory, emit_first=bool(table.emit_first))

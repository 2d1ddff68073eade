"""Decisions that keep their state (issue 33): A_ℓ's queue sorted only as far as admission
reaches, its steady, draining and through-completion stretches, AdaptiveRobust's bulk rule
through the scheduler it picks, FCFSRestart's stretches, Nested WAIT's relieving
stretches, WAIT's quota without a sort and the future-peak check without its second sort —
each the same records as deciding every iteration (``fast_path=False``), and the check the
same as counting every round."""

from __future__ import annotations

import numpy as np
import pytest
from test_fast_path import _same_records, stepping

import queuetheory as qt
from queuetheory.rounds import FuturePeak

P = qt.policies
TM = qt.AffineTokenTime(16.1e3, 57.8, 39.5)


def _arrays(n=600, seed=3):
    rng = np.random.default_rng(seed)
    prompt = rng.integers(1, 400, n)
    output = rng.integers(1, 300, n)
    return np.cumsum(rng.exponential(2.0e4, n)), prompt, output


def _workload(n=600, interval=False, seed=3):
    arrival, prompt, output = _arrays(n, seed)
    if interval:
        return qt.Workload.from_arrays(arrival, prompt, output, lo=np.maximum(1, output // 2),
                                       hi=output + output // 2 + 1)
    return qt.Workload.from_arrays(arrival, prompt, output)


@pytest.mark.parametrize("first_token", ["prefill", "decode"])
@pytest.mark.parametrize("interval", [False, True])
@pytest.mark.parametrize("memory", [1500, 6000])
def test_aell_stretches_same_records(first_token, interval, memory):
    slow, n_slow, n_fast = _same_records(_workload(interval=interval), P.AEll, TM,
                                         memory=memory, first_token=first_token)
    assert n_fast < n_slow           # the stretches are taken
    if interval:
        assert slow.metrics["restarts"] > 0       # promotions happen, and are kept


def _aell_workload(kind):
    """Arrivals in groups (several per iteration, whose random order A_ℓ draws per group)
    with output intervals ``[o/2, 3o/2]``, or two-point outputs ``o ∈ {lo, 2 lo}`` (Chen et
    al.'s A_ℓ setting), arrivals grouped or not."""
    arrival, prompt, output = _arrays()
    if kind != "two-point":
        arrival = np.round(arrival / 6e4) * 6e4
    if kind == "interval":
        return qt.Workload.from_arrays(arrival, prompt, output, lo=np.maximum(1, output // 2),
                                       hi=output + output // 2 + 1)
    lo = output
    output = np.where(np.random.default_rng(7).random(lo.size) < 0.3, 2 * lo, lo)
    return qt.Workload.from_arrays(arrival, prompt, output, lo=lo, hi=2 * lo)


@pytest.mark.parametrize("first_token", ["prefill", "decode"])
@pytest.mark.parametrize("make", [P.AEll, lambda: P.AdaptiveRobust(threshold=2.0)],
                         ids=["aell", "adaptive"])
@pytest.mark.parametrize("kind", ["interval", "two-point", "two-point grouped"])
def test_aell_decodes_through_while_its_first_candidate_fails(make, first_token, kind):
    """With a job waiting, A_ℓ's decode-only batches run through completions and arrivals
    (:meth:`AEll.decodes_through`) while its first candidate fails: the memory test until
    the memory a batch leaves free takes its prompt (the ``need``), the future-peak check
    for the rounds counted, until a job with ``õ ≠ o`` is evicted or leaves the profile.
    Arrivals join the queue as each skipped call would have taken them. The records of
    stepping, in fewer decisions than with the promise masked."""
    from test_fast_path import _counting

    wl = _aell_workload(kind)
    _, _, n_fast = _same_records(wl, make, TM, memory=3000, first_token=first_token)
    policy = make()
    policy.decodes_through = lambda state, batch: 0
    calls = _counting(policy)
    qt.simulate(wl, policy, TM, memory=3000, first_token=first_token)
    assert n_fast < calls["n"]


@pytest.mark.parametrize("threshold", [0.0, 2.0, None])
@pytest.mark.parametrize("interval", [False, True])
def test_adaptive_runs_the_chosen_rule_same_records(threshold, interval):
    slow, *_ = _same_records(_workload(interval=interval),
                             lambda: P.AdaptiveRobust(threshold=threshold), TM, memory=3000)
    chosen = []
    for fast in (False, True):
        pol = P.AdaptiveRobust(threshold=threshold)
        qt.simulate(_workload(interval=interval), pol, TM, memory=3000, fast_path=fast)
        chosen.append(pol.chosen)
    assert chosen[0] == chosen[1] is not None


def test_adaptive_chooses_nothing_before_its_first_decision():
    wl = _workload()
    first = float(_arrays()[0][0])
    for fast in (False, True):
        pol = P.AdaptiveRobust(threshold=0.0)
        qt.simulate(wl, pol, TM, memory=3000, horizon=first / 2, fast_path=fast)
        assert pol.chosen is None


@pytest.mark.parametrize("memory", [None, 1500, 6000])
@pytest.mark.parametrize("first_token", ["prefill", "decode"])
def test_fcfs_restart_stretches_same_records(memory, first_token):
    """The stretches of the step loop (without a limit, FCFSRestart's bulk rule masked)."""
    _, n_slow, n_fast = _same_records(_workload(), stepping(P.FCFSRestart), TM, memory=memory,
                                      first_token=first_token)
    assert n_fast < n_slow


@pytest.mark.parametrize("memory", [1500, 6000])
@pytest.mark.parametrize("first_token", ["prefill", "decode"])
def test_fcfs_restart_decodes_until_the_waiting_prompt_fits(memory, first_token):
    """With a request waiting, FCFSRestart's decode-only batches (after an eviction too)
    run through completions and arrivals until the memory a batch leaves free fits the
    waiting prompt (:meth:`FCFSRestart.decodes_through`'s ``need``): the records of
    stepping, in fewer decisions than with the promise masked."""
    from test_fast_path import _counting

    _, _, n_fast = _same_records(_workload(), P.FCFSRestart, TM, memory=memory,
                                 first_token=first_token)
    policy = P.FCFSRestart()
    policy.decodes_through = lambda state, batch: 0
    calls = _counting(policy)
    qt.simulate(_workload(), policy, TM, memory=memory, first_token=first_token)
    assert n_fast < calls["n"]


@pytest.mark.parametrize("memory", [None, 6000])
def test_wait_and_nested_wait_gate_same_records(memory):
    arrival, prompt, output = _arrays(n=400)
    wl = qt.Workload.from_arrays(arrival, prompt, output)
    typed = qt.Workload.from_arrays(arrival, prompt, output, np.minimum((output - 1) // 50, 5))
    _same_records(typed, lambda: P.WAIT([3, 2, 2, 1, 1, 1]), TM, memory=memory,
                  first_token="decode")
    _, n_slow, n_fast = _same_records(
        wl, lambda: P.NestedWAIT([50, 100, 200, 300], [3, 2, 1, 1],
                                 overflow="soft" if memory is None else "gate"),
        TM, memory=memory, first_token="decode")
    if memory is not None:
        assert n_fast < n_slow           # relieving stretches are taken


@pytest.mark.parametrize("memory", [3000, 6000])
@pytest.mark.parametrize("thresholds", [[3, 2, 1, 1], [8, 4, 2, 1]])
@pytest.mark.parametrize("first_token", ["decode", "prefill"])
def test_nested_wait_relieves_until_segment_one_may_fit(memory, thresholds, first_token):
    """Nested WAIT's gate: where segment 1's step does not fit, every resident decodes,
    through completions and arrivals, until the memory a batch leaves free reaches the
    step's prompts less the residents (:meth:`NestedWAIT.decodes_through`'s ``need``):
    the records of stepping, in fewer decisions than with the promise masked."""
    from test_fast_path import _counting

    arrival, prompt, output = _arrays(n=400)
    wl = qt.Workload.from_arrays(arrival / 4, prompt, output)

    def make():
        return P.NestedWAIT([50, 100, 200, 300], thresholds, overflow="gate")
    _, _, n_fast = _same_records(wl, make, TM, memory=memory, first_token=first_token)
    policy = make()
    policy.decodes_through = lambda state, batch: 0
    calls = _counting(policy)
    qt.simulate(wl, policy, TM, memory=memory, first_token=first_token)
    assert n_fast < calls["n"]


@pytest.mark.parametrize("memory", [None, 3000, 6000])
@pytest.mark.parametrize("thresholds", [[1] * 6, [3, 2, 2, 1, 1, 1]])
def test_wait_decode_only_cohort_steps_repeat(memory, thresholds):
    """WAIT's decode-only cohort steps (leftovers once arrivals end: every type with
    started prompts and none waiting, or none whose step fits) are taken as stretches:
    the same records as deciding every iteration. Without a memory limit, under the
    linear memory time (which steps), they are the only batches that repeat."""
    arrival, prompt, output = _arrays(n=400)
    typed = qt.Workload.from_arrays(arrival / 50, prompt, output,
                                    np.minimum((output - 1) // 50, 5))
    tm = qt.LinearMemoryTime(16.1e3, 0.05) if memory is None else TM
    slow, n_slow, n_fast = _same_records(typed, lambda: P.WAIT(thresholds), tm,
                                         memory=memory, first_token="decode")
    assert slow.metrics["completed"] == 400
    assert n_fast < n_slow - 50


def _brute_fits(memory, t, m0, last, cands):
    """Admission by counting every round's memory: the reference of the checkpoints."""
    m0, last = list(m0), list(last)
    ok = []
    for m, e in cands:
        fits = all(sum(a + tau - t for a, b in zip(m0, last, strict=True) if b >= tau)
                   + m + tau - t <= memory for tau in range(t, e + 1))
        ok.append(fits)
        if fits:
            m0.append(m)
            last.append(e)
    return ok


@pytest.mark.parametrize("seed", range(40))
def test_future_peak_is_counting_every_round(seed):
    rng = np.random.default_rng(seed)
    t = int(rng.integers(0, 5))
    r = int(rng.integers(0, 8))
    m0 = rng.integers(1, 30, r)
    last = t + rng.integers(0, 12, r)
    cands = [(int(rng.integers(1, 30)), t + int(rng.integers(0, 15))) for _ in range(8)]
    memory = int(rng.integers(20, 200))
    ok = FuturePeak(memory, t, m0, last).admit([c[0] for c in cands], [c[1] for c in cands],
                                               on_fail="skip")
    assert ok.tolist() == _brute_fits(memory, t, m0, last, cands)


@pytest.mark.parametrize("make_policy", [P.HSF, P.AMax, P.ARandom, P.AMin,
                                         lambda: P.AMin("dynamic", "generated+1"),
                                         P.AdaptiveRobust, lambda: P.AdaptiveRobust(2.0)])
@pytest.mark.parametrize("first_token", ["prefill", "decode"])
def test_round_schedulers_stepping_stretches_same_records(make_policy, first_token):
    """A time model that reads the KV contexts: no bulk rule, the schedulers step, and
    their blocked decode-only decisions and drains repeat."""
    _, n_slow, n_fast = _same_records(_workload(interval=True), make_policy,
                                      qt.LinearMemoryTime(16.1e3, 0.05), memory=3000,
                                      first_token=first_token)
    assert n_fast < n_slow


def _checked(base):
    """``base`` deciding from its books (as shipped) and asserting at every decision that
    the whole-state rule returns the same batch; counts the decisions and relieving
    batches."""

    class Checked(base):
        def _reset(self):
            super()._reset()
            self._kept = True            # a subclass reads the state; this one its books
            self.decided = self.relieved = 0

        def _decide(self, state, books):
            batch = super()._decide(state, books)
            whole = self._decide_whole(state)
            for part in ("prefill", "chunk", "decode", "evict"):
                np.testing.assert_array_equal(getattr(batch, part), getattr(whole, part))
            self.decided += 1
            self.relieved += not batch.prefill.size and batch.decode.size > 0
            return batch

    return Checked


@pytest.mark.parametrize("first_token", ["prefill", "decode"])
@pytest.mark.parametrize("memory", [2500, 6000])
def test_wait_books_decide_as_the_whole_state(first_token, memory):
    """WAIT and Nested WAIT keep their queues and cohorts between decisions (arrivals at
    the tail, admissions from the heads, evictions back, finishes dropped): every batch
    the one the whole state gives, in runs that relieve and evict, and drain (leftovers);
    the shipped schedulers' records the same as stepping."""
    arrival, prompt, output = _arrays(n=500, seed=7)
    typed = qt.Workload.from_arrays(arrival / 3, prompt, output,
                                    np.minimum((output - 1) // 50, 5))
    plain = qt.Workload.from_arrays(arrival / 3, prompt, output)
    gate = {"overflow": "gate"}
    runs = [(typed, P.WAIT, ([3, 2, 2, 1, 1, 1],), {}), (typed, P.WAIT, ([1] * 6,), {}),
            (plain, P.NestedWAIT, ([50, 100, 200, 300], [3, 2, 1, 1]), gate),
            (plain, P.NestedWAIT, ([100, 300], [1, 4]), gate)]
    for wl, cls, args, kw in runs:
        policy = _checked(cls)(*args, **kw)
        res = qt.simulate(wl, policy, TM, memory=memory, first_token=first_token,
                          fast_path=False)
        assert policy.decided >= res.iterations // 2 and policy.relieved > 0
        assert res.metrics["restarts"] > 0 and res.metrics["completed"] == 500
        _same_records(wl, lambda cls=cls, args=args, kw=kw: cls(*args, **kw), TM,
                      memory=memory, first_token=first_token)


@pytest.mark.parametrize("first_token", ["prefill", "decode"])
@pytest.mark.parametrize("seed", [0, 1])
def test_nested_wait_gate_counts_segment_one_to_the_token(first_token, seed):
    """Nested WAIT's gate on segments of 2 tokens, prompts of 1–4 and a KV limit of 30:
    requests stand at segment boundaries at most decisions, and whether segment 1's step
    fits turns on the token each of its requests adds (those at the boundary belong to
    segment 2). Every batch from the books is the whole state's."""
    rng = np.random.default_rng(seed)
    n = 300
    wl = qt.Workload.from_arrays(np.cumsum(rng.exponential(3.0e4, n)),
                                 rng.integers(1, 5, n), rng.integers(1, 9, n))
    policy = _checked(P.NestedWAIT)([2, 4, 6, 8], [2, 1, 1, 1], overflow="gate")
    res = qt.simulate(wl, policy, TM, memory=30, first_token=first_token, fast_path=False)
    assert policy.decided >= res.iterations // 2 and policy.relieved > 0
    assert res.metrics["completed"] == n


def test_wait_books_only_for_the_states_their_batches_reach():
    """Asked twice about one state (the first batch never ran), or about a state with a
    prompt part-way through its prefill, the schedulers decide from the whole state."""
    from queuetheory.engine import State
    from queuetheory.engine.state import RequestTable
    from queuetheory.workload import Trace

    n = 6
    prompt, output = np.array([5, 7, 3, 9, 4, 6]), np.array([40, 60, 120, 30, 80, 70])
    table = RequestTable(False)
    table.append(Trace(np.zeros(n), prompt, output, np.minimum((output - 1) // 50, 1),
                       output, output, np.zeros(n, int)))
    table.set_progress(np.arange(2), prompt[:2], 10)
    state = State(table, np.arange(n), 0.0, None, 200)
    for policy in (P.WAIT([1, 1]), P.NestedWAIT([50, 150], [1, 1], overflow="gate")):
        policy.reset(0)
        first = policy.schedule(state)
        assert first.prefill.size and policy._books is not None
        again = policy.schedule(state)
        assert again.prefill.tolist() == first.prefill.tolist()
        assert again.decode.tolist() == first.decode.tolist()
    table.set_progress(np.array([2]), 1, 0)           # part-way: no books
    state = State(table, np.arange(n), 0.0, None, 200)
    for policy in (P.WAIT([1, 1]), P.NestedWAIT([50, 150], [1, 1], overflow="gate")):
        policy.reset(0)
        batch = policy.schedule(state)
        assert policy._books is None
        assert batch.decode.tolist() == policy._decide_whole(state).decode.tolist()

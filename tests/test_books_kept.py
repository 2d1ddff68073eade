"""Schedulers that keep books instead of reading the whole queue at every decision (issue
33): A_ℓ (a heap of waiting jobs by queue key, the running jobs' ids), FCFSRestart (the
resident prefix), RAD and the cycle scheduler (the ids in decode, the prefill under way).
At every decision of a run the books are checked against the whole queue's columns, as
the decision read them before; and the records are those of stepping."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from test_fast_path import _same_records, stepping

import queuetheory as qt
from queuetheory.engine import Engine, State, check_batch
from queuetheory.engine.state import RequestTable
from queuetheory.rounds import FuturePeak
from queuetheory.workload import Trace

P = qt.policies
TM = qt.AffineTokenTime(16.1e3, 57.8, 39.5)


def _workload(n=500, interval=False, seed=4, gap=2.0e4):
    rng = np.random.default_rng(seed)
    prompt, output = rng.integers(1, 700, n), rng.integers(1, 300, n)
    arrival = np.cumsum(rng.exponential(gap, n))
    if interval:
        return qt.Workload.from_arrays(arrival, prompt, output, lo=np.maximum(1, output // 2),
                                       hi=output + output // 2 + 1)
    return qt.Workload.from_arrays(arrival, prompt, output)


@pytest.mark.parametrize("first_token", ["prefill", "decode"])
@pytest.mark.parametrize("interval", [False, True])
@pytest.mark.parametrize("memory", [2000, 8000])
def test_aell_books_are_the_queue(first_token, interval, memory):
    """Before each decision the heap holds exactly the waiting jobs, in the order of their
    queue keys, and the running ids are exactly the jobs holding KV; the memory profile
    book, moved on to the decision, is the profile of the running jobs built afresh."""
    seen, now = [], []
    pol = P.AEll()
    decide, tick = pol._schedule, pol._tick

    def moved_on(running, a, gone):
        """The profile book moved on equals the profile of the jobs still running."""
        tick(running, a, gone)
        if pol._rebuild:
            return
        state = now[-1]
        keep = running[a < pol._lb[running]]
        a = state._t.decoded[keep]
        fresh = FuturePeak(memory, 0, state._t.kv(keep) + 1, pol._lb[keep] - a - 1)
        for e in range(0, 400, 7):
            assert pol._peak.load_at(pol._clock + e) == fresh.load_at(e)

    def schedule(state):
        now.append(state)
        if pol._seen:                            # books of the last decision, updated
            rid, running, pos, _ = pol._books(state)
            started = state.kv > 0
            np.testing.assert_array_equal(pos, started.nonzero()[0])
            np.testing.assert_array_equal(running, rid[started])
            waiting = rid[~started]
            order = waiting[np.argsort(pol._queue[waiting], kind="stable")]
            assert [c for _, c in sorted(pol._heap)] == order.tolist()
            seen.append(len(pol._heap))
        return decide(state)
    pol._schedule, pol._tick = schedule, moved_on
    res = qt.simulate(_workload(interval=interval), pol, TM, memory=memory,
                      first_token=first_token)
    assert res.metrics["completed"] == 500 and max(seen) > 16     # a queue formed
    assert len(now) > 500
    _same_records(_workload(interval=interval), P.AEll, TM, memory=memory,
                  first_token=first_token)


@pytest.mark.parametrize("first_token", ["prefill", "decode"])
@pytest.mark.parametrize("interval", [False, True])
def test_aell_decision_again_is_the_decision(first_token, interval):
    """Where A_ℓ gives its last batch again after arrivals alone (:meth:`AEll._again`), a
    copy of the policy deciding afresh on the same state returns the same batch and leaves
    the same queue (heap, keys, random state)."""
    pol, hits = P.AEll(), []
    again = pol._again

    def checked(state, *keep):
        fresh = copy.deepcopy(pol)
        batch = again(state, *keep)
        if batch is not None:
            other = fresh._schedule(state)
            for part in ("prefill", "chunk", "decode", "evict"):
                np.testing.assert_array_equal(getattr(batch, part), getattr(other, part))
            assert sorted(pol._heap) == sorted(fresh._heap) and pol._tail == fresh._tail
            np.testing.assert_array_equal(pol._queue, fresh._queue)
            assert pol.rng.bit_generator.state == fresh.rng.bit_generator.state
            hits.append(state.n)
        return batch
    pol._again = checked
    pol.decodes_through = lambda state, batch: 0    # (its stretches skip those calls)
    res = qt.simulate(_workload(interval=interval, gap=1.0e4), pol, TM, memory=4000,
                      first_token=first_token)
    assert res.metrics["completed"] == 500 and len(hits) > 100


@pytest.mark.parametrize("first_token", ["prefill", "decode"])
@pytest.mark.parametrize("make", [P.AEll, P.AdaptiveRobust])
def test_aell_counted_stretches_are_the_steps(make, first_token):
    """Where A_ℓ's first candidate fails the future-peak check, the decode batch repeats a
    counted number of times (:meth:`AEll.decodes_through`); the records are those of
    stepping, and the counted stretches replace decisions (AdaptiveRobust choosing A_ℓ on
    intervals)."""
    stretches = []

    def made():
        pol = make()
        repeated = pol.repeated

        def counted(k, starts):
            stretches.append(k)
            repeated(k, starts)
        pol.repeated = counted
        return pol
    work = _workload(interval=True, gap=1.0e4)
    slow, n_slow, n_fast = _same_records(work, made, TM, memory=4000, first_token=first_token)
    assert slow.metrics["completed"] == 500
    assert len(stretches) > 50 and sum(stretches) > 2 * len(stretches)
    assert n_fast + sum(stretches) <= n_slow


@pytest.mark.parametrize("first_token", ["prefill", "decode"])
@pytest.mark.parametrize("memory", [None, 2000, 8000])
def test_fcfs_restart_residents_are_a_prefix(first_token, memory):
    """The books' resident count is the number of requests holding KV, and they are the
    first in arrival order, before every decision (the step loop: without a limit the
    bulk rule masked)."""
    pol = stepping(P.FCFSRestart)()
    decide = pol._schedule
    counts = []

    def schedule(state):
        started = state.kv > 0
        r = int(started.sum())
        assert started[:r].all()
        batch = decide(state)
        counts.append(r)
        return batch
    pol._schedule = schedule
    residents = pol._residents

    def checked(state):
        r = residents(state)
        assert r == int(np.count_nonzero(state.kv > 0))
        return r
    pol._residents = checked
    fitting, cuts = pol._fitting_prefix, []

    def prefix(state, r):        # the whole queue's prefix sums of next-iteration memory
        k = fitting(state, r)
        need = np.where(np.arange(state.n) < r, state.kv + 1, state.prompt).cumsum()
        assert k == int(need.searchsorted(state.memory, side="right"))
        cuts.append(k < r)
        return k
    pol._fitting_prefix = prefix
    res = qt.simulate(_workload(), pol, TM, memory=memory, first_token=first_token)
    assert res.metrics["completed"] == 500 and max(counts) > 1
    if memory is not None:
        assert len(cuts) > 100 and (memory == 8000 or any(cuts))   # evictions read too
    if memory == 2000:
        assert res.metrics["restarts"] > 0
    _same_records(_workload(), stepping(P.FCFSRestart), TM, memory=memory,
                  first_token=first_token)


def test_fcfs_restart_reads_the_queue_once_a_request_arrives_with_kv():
    """A request handed over prefilled (``Engine.add(ready=...)``) may hold KV out of
    arrival order: from then on the decision reads the whole queue, as before."""
    wl = _workload(n=40)
    trace = wl.sample()
    pol = P.FCFSRestart()
    pol.reset()
    eng = Engine(pol, TM, memory=4000)
    eng.add(trace.head(20))
    t = 0.0
    for _ in range(5):
        t += eng.step(t)[0]
    assert pol._books
    eng.add(trace.head(3), ready=np.full(3, t))
    decide, chosen = pol._schedule, []
    pol._schedule = lambda state: chosen.append(decide(state)) or chosen[-1]
    for _ in range(30):
        expected = pol._schedule_all(eng.state(t))
        out = eng.step(t)
        assert not pol._books
        for field in ("prefill", "chunk", "decode", "evict"):
            np.testing.assert_array_equal(getattr(chosen[-1], field),
                                          getattr(expected, field))
        if not isinstance(out, tuple):
            break
        t += out[0]


class _SharedLoopAEll(P.AEll):
    """A_ℓ deciding through the shared loop (a hook overridden, so no books)."""

    def _order(self, state, waiting):
        return super()._order(state, waiting)


def test_aell_takes_jobs_handed_over_running():
    """Jobs handed over prefilled (``Engine.add(ready=...)``), one and then two at once,
    run at once and rebuild the profile book: every decision is the shared loop's."""
    rng = np.random.default_rng(2)
    trace = qt.Workload.from_arrays(np.cumsum(rng.exponential(1.0e2, 60)),
                                    rng.integers(1, 50, 60), rng.integers(50, 300, 60)).sample()
    engines = []
    for make in (P.AEll, _SharedLoopAEll):
        pol = make()
        pol.reset()
        eng = Engine(pol, TM, memory=6000)
        eng.add(trace.head(40))
        decide, chosen = pol._schedule, []
        pol._schedule = lambda state, d=decide, c=chosen: c.append(d(state)) or c[-1]
        engines.append((eng, chosen))
    t = [0.0, 0.0]
    for step in range(400):
        if step in (1, 3):
            for eng, _ in engines:
                eng.add(trace.head(1 if step == 1 else 2), ready=np.full(1 if step == 1 else 2,
                                                                         t[0]))
        outs = [eng.step(t[i]) for i, (eng, _) in enumerate(engines)]
        (_, mine), (_, shared) = engines
        for field in ("prefill", "chunk", "decode", "evict"):
            np.testing.assert_array_equal(getattr(mine[-1], field), getattr(shared[-1], field))
        if not isinstance(outs[0], tuple):
            break
        t = [t[i] + out[0] for i, out in enumerate(outs)]
    assert step > 100
    assert engines[0][0].policy._fast and not engines[1][0].policy._fast


@pytest.mark.parametrize("make", [
    lambda: P.RAD((64, 128, 32)),
    lambda: P.RAD((64, 128, 32), n=5, strict_cycles=True),
    lambda: P.CycleScheduler((64, 128, 32), n=12),
    lambda: P.CycleScheduler((32, 16, 32)),
], ids=["rad", "rad-strict", "cycle", "cycle-small-tile"])
@pytest.mark.parametrize("first_token", ["prefill", "decode"])
def test_tiled_books_are_the_decode_set(make, first_token):
    """Before each decision the books count the requests in decode and ``D`` is their set,
    the prefill under way the one request part-way through its prompt, the oldest waiting
    the first other; and the prefill chunk stretches are taken (the same records)."""
    pol = make()
    decide = pol._schedule
    checked = []

    def schedule(state):
        d, under_way, first = pol._split(state)
        in_decode = state.in_decode
        partial = ((state.prefilled > 0) & ~in_decode).nonzero()[0]
        waiting = ((state.prefilled == 0) & ~in_decode).nonzero()[0]
        if under_way is None:
            assert d == np.count_nonzero(in_decode)
            np.testing.assert_array_equal(pol._decoding(state), in_decode.nonzero()[0])
            assert partial.size == 0
            assert first == (waiting[0] if waiting.size else None)
        else:
            assert partial.tolist() == [under_way]
        checked.append(under_way is None)
        return decide(state)
    pol._schedule = schedule
    res = qt.simulate(_workload(gap=3.0e4), pol, TM, first_token=first_token)
    assert res.metrics["completed"] == 500 and any(checked) and not all(checked)
    slow, n_slow, n_fast = _same_records(_workload(gap=3.0e4), make, TM,
                                         first_token=first_token)
    chunked = slow.batches["prefill_tokens"] == pol.t_lcm
    assert chunked.any() and n_fast < n_slow


@pytest.mark.parametrize("make", [lambda: P.RAD((8, 16, 8)), lambda: P.CycleScheduler((8, 16, 8))],
                         ids=["rad", "cycle"])
def test_tiled_books_go_on_with_prefills_begun_before(make):
    """A state whose requests are part-way through their prompts at the first decision
    (built by hand): the oldest of them goes on, chunk by chunk, then the next, then a new
    prefill starts — as reading the whole queue would have it."""
    table = RequestTable(True)
    n = 5
    table.append(Trace(np.zeros(n), np.array([40, 40, 40, 40, 40]), np.full(n, 5),
                       np.zeros(n, int), np.full(n, 5), np.full(n, 5), np.zeros(n, int)))
    table.set_progress(np.arange(n), np.array([40, 0, 10, 30, 0]), np.array([2, 0, 0, 0, 0]))
    pol = make()
    pol.reset(0)
    order = []
    for _ in range(8):
        state = State(table, np.arange(n), 0.0, None, None)
        batch = pol.schedule(state)
        check_batch(state, batch, policy=pol, iteration=0, token_budget=None, memory=None,
                    emit_first=True)
        if not batch.prefill.size:
            break
        (j,), (c,) = batch.prefill, batch.chunk
        order.append(int(j))
        table.prefilled[j] += c
        table.in_decode[j] = table.prefilled[j] >= table.prompt[j]
    assert order[:4] == [2, 2, 3, 1]          # 30 tokens left: 16 + 14; then 10; then new

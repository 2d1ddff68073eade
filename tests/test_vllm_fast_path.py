"""VLLMV1's decode-only stretches in closed form change nothing.

Between two decisions that change anything (an arrival it sees, a finish, an admission, a
preemption) vLLM's scheduler repeats the same decode-only step, while its block ledger moves:
a block allocated each time a request's length starts one, a block registered in the prefix
cache each time one fills. The engine runs such stretches in closed form and the policy
replays its books (:meth:`VLLMV1.steady`, :meth:`VLLMV1.repeated`). Every run here is made
with ``fast_path=False`` too; the records (request stamps, the batch log row by row, the TBT
histogram, the prefix hits) and the scheduler's own books (the queue log, each request's
block ids, the free queue's order, the cache's keys) must be identical.
"""

import copy
import dataclasses

import numpy as np
import pandas as pd
import pytest

import queuetheory as qt
import queuetheory.networks.fleet as fleet_module

TIME = qt.AffineTokenTime(0.01, 5e-5, 4e-5)


@pytest.fixture(scope="module")
def crowded():
    """A Mooncake conversation slice squeezed in time: requests of at most 10,000 tokens,
    arriving ten times faster than recorded, so that 2,000 blocks run out (preemptions)."""
    tr = qt.data.mooncake_trace("conversation")
    keep = np.flatnonzero(tr.prompt + tr.output <= 10_000)[:90]
    tr = tr.take(keep)
    return dataclasses.replace(tr, arrival=(tr.arrival - tr.arrival[0]) / 10)


def _books(policy) -> dict:
    """Everything VLLMV1 keeps between steps that a later decision can read."""
    pool = policy.pool
    return {"queue": list(pool._queue.items()), "cached": dict(pool._cached),
            "key": dict(pool._key), "refs": dict(pool._refs), "next": pool._next,
            "fresh": pool._fresh, "used": pool.used, "blocks": copy.deepcopy(policy.blocks),
            "keyed": dict(policy.keyed), "running": list(policy.running),
            "waiting": list(policy.waiting), "queued": list(policy._queued),
            "queue_log": list(policy._queue_log)}


def _fleet(monkeypatch, trace, policy, router, fast, engines=2):
    made = []

    class Recorded(fleet_module.Engine):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            made.append(self)

    monkeypatch.setattr(fleet_module, "Engine", Recorded)
    calls = [0]
    schedule = qt.policies.VLLMV1._schedule

    def counted(self, state):
        calls[0] += 1
        return schedule(self, state)

    monkeypatch.setattr(qt.policies.VLLMV1, "_schedule", counted)
    res = qt.networks.simulate_fleet(trace, policy, TIME, engines, router=router,
                                     fast_path=fast)
    monkeypatch.undo()
    return res, made, calls[0]


@pytest.mark.parametrize("router", ["cache_aware", "round_robin"])
@pytest.mark.parametrize("async_scheduling, caching", [(True, True), (False, True),
                                                       (True, False)])
def test_vllm_fleet_fast_path_same_records_and_books(monkeypatch, crowded, router,
                                                     async_scheduling, caching):
    runs = []
    for fast in (False, True):
        policy = qt.policies.VLLMV1(32, 1024, num_gpu_blocks=2000, enable_prefix_caching=caching,
                                    async_scheduling=async_scheduling,
                                    reserve_full_sequence=False)
        runs.append(_fleet(monkeypatch, crowded, policy, router, fast))
    (slow, slow_engines, n_slow), (fast, fast_engines, n_fast) = runs
    pd.testing.assert_frame_equal(slow.requests, fast.requests, check_exact=True)
    pd.testing.assert_frame_equal(slow.batches, fast.batches, check_exact=True)
    assert slow.metrics == fast.metrics
    assert slow.batches["evicted"].sum() > 10                 # preemptions were replayed
    assert (slow.requests["cached"].sum() > 0) == caching      # and so were prefix hits
    for a, b in zip(slow_engines, fast_engines, strict=True):
        np.testing.assert_array_equal(a.tbt.counts, b.tbt.counts)
        assert a.iteration == b.iteration
        assert _books(a.policy) == _books(b.policy)
    assert n_slow == len(slow.batches)
    assert n_fast < 0.7 * n_slow                               # many steps were not asked


def test_vllm_simulate_fast_path_same_records_and_books(crowded):
    runs = []
    for fast in (False, True):
        policy = qt.policies.VLLMV1(32, 1024, num_gpu_blocks=1500, reserve_full_sequence=False)
        res = qt.simulate(crowded, policy, TIME, fast_path=fast)
        runs.append((res, policy))
    (slow, p_slow), (fast, p_fast) = runs
    for records in ("requests", "batches"):
        pd.testing.assert_frame_equal(getattr(slow, records), getattr(fast, records),
                                      check_exact=True)
    np.testing.assert_array_equal(slow.engine.tbt.counts, fast.engine.tbt.counts)
    ms, mf = slow.metrics, fast.metrics
    assert all(ms[k] == mf[k] or (np.isnan(ms[k]) and np.isnan(mf[k])) for k in ms)
    assert slow.metrics["restarts"] > 0
    assert _books(p_slow) == _books(p_fast)
    np.testing.assert_array_equal(p_slow.queued, p_fast.queued)


def test_a_vllm_subclass_that_decides_otherwise_is_asked_every_step(crowded):
    class Mine(qt.policies.VLLMV1):
        def _admit_waiting(self, state, budget, scheduled, cached):
            return super()._admit_waiting(state, budget, scheduled, cached)

    policy = Mine(32, 1024, num_gpu_blocks=1500)
    res = qt.simulate(crowded.take(slice(0, 20)), policy, TIME)
    assert len(policy.queue_log) == res.engine.iteration

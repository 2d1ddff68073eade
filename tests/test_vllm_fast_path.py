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
from collections import OrderedDict
from itertools import islice

import numpy as np
import pandas as pd
import pytest

import queuetheory as qt
import queuetheory.networks.fleet as fleet_module
from queuetheory.policies.vllm import BlockPool

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
    assert all(policy.held[r] == len(b) for r, b in policy.blocks.items())
    return {**policy.pool.snapshot(), "blocks": copy.deepcopy(policy.blocks),
            "keyed": {r: int(policy.keyed[r]) for r in policy.blocks},
            "running": list(policy.running),
            "waiting": list(policy.waiting), "queued": list(policy._queued),
            "queue_log": list(policy._queue_rows())}


def _fleet(monkeypatch, trace, policy, router, fast, engines=2):
    made = []

    class Recorded(fleet_module.Engine):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            made.append(self)

        def _repeat_chunk(self, *a):
            chunks[0] += 1
            return super()._repeat_chunk(*a)

    chunks = [0]
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
    for engine in made:
        engine.chunk_stretches = chunks[0]
    return res, made, calls[0]


@pytest.mark.parametrize("router", ["cache_aware", "round_robin"])
@pytest.mark.parametrize("async_scheduling, caching, bulk", [
    (True, True, True), (False, True, True), (True, False, True), (True, True, False)])
def test_vllm_fleet_fast_path_same_records_and_books(monkeypatch, crowded, router,
                                                     async_scheduling, caching, bulk):
    runs = []
    for fast in (False, True):
        policy = qt.policies.VLLMV1(32, 1024, num_gpu_blocks=2000, enable_prefix_caching=caching,
                                    async_scheduling=async_scheduling,
                                    reserve_full_sequence=False)
        policy._bulk_replay = bulk        # off: each step's allocations and keys in turn
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
    assert fast_engines[0].chunk_stretches > 10       # prefill chunks repeated in closed form


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
    np.testing.assert_array_equal(slow.tbt.counts, fast.tbt.counts)
    ms, mf = slow.metrics, fast.metrics
    assert all(ms[k] == mf[k] or (np.isnan(ms[k]) and np.isnan(mf[k])) for k in ms)
    assert slow.metrics["restarts"] > 0
    assert _books(p_slow) == _books(p_fast)
    np.testing.assert_array_equal(p_slow.queued, p_fast.queued)


@pytest.mark.parametrize("time_model", ["affine", "memory"])
@pytest.mark.parametrize("threshold, async_scheduling, seqs", [
    (0, True, 32), (0, False, 32), (300, True, 32), (0, True, 3)])
def test_vllm_prefill_chunk_stretches_same_records_and_books(monkeypatch, crowded, time_model,
                                                             threshold, async_scheduling, seqs):
    """A request prefilling in chunks beside the decodes repeats the same batch; with a
    time model that reads each member's context (the chunk's grows), with a prefill
    threshold (a chunk that leaves budget: no stretch), with few sequences at once."""
    time = TIME if time_model == "affine" else qt.LinearMemoryTime(0.01, 2e-6)
    chunks = [0]
    engine_repeat = qt.engine.Engine._repeat_chunk

    def counted(self, *a):
        chunks[0] += 1
        return engine_repeat(self, *a)

    monkeypatch.setattr(qt.engine.Engine, "_repeat_chunk", counted)
    runs = []
    for fast in (False, True):
        policy = qt.policies.VLLMV1(seqs, 1024, num_gpu_blocks=1500,
                                    reserve_full_sequence=False,
                                    long_prefill_token_threshold=threshold,
                                    async_scheduling=async_scheduling)
        runs.append((qt.simulate(crowded, policy, time, fast_path=fast), policy))
    (slow, p_slow), (fast, p_fast) = runs
    for records in ("requests", "batches"):
        pd.testing.assert_frame_equal(getattr(slow, records), getattr(fast, records),
                                      check_exact=True)
    np.testing.assert_array_equal(slow.tbt.counts, fast.tbt.counts)
    assert _books(p_slow) == _books(p_fast)
    np.testing.assert_array_equal(p_slow.queued, p_fast.queued)
    assert (slow.metrics["restarts"] > 0) == (seqs > 3)      # preemptions replayed too
    assert (chunks[0] > 5) == (threshold == 0)


@pytest.mark.parametrize("async_scheduling, caching", [(True, True), (False, True),
                                                      (True, False)])
def test_vllm_block_books_match_every_request_at_every_step(monkeypatch, crowded,
                                                           async_scheduling, caching):
    """The blocks a running request holds (:attr:`VLLMV1.held`) and has registered
    (:attr:`VLLMV1.keyed`), kept by request id so that a step reads them for every running
    request at once, are its block list's length and its full blocks before every step of
    a run that preempts (the engine's KV tokens: its computed tokens)."""
    schedule = qt.policies.VLLMV1._schedule
    steps = [0]

    def checked(self, state):
        run = np.array(self.running, dtype=np.int64)
        kv = state._t.kv(run)
        assert self.held[run].tolist() == [len(self.blocks[r]) for r in self.running]
        assert (self.held[run] == -(-kv // self.block_size)).all()
        assert (self.keyed[run] == kv // self.block_size).all()
        steps[0] += 1
        return schedule(self, state)

    monkeypatch.setattr(qt.policies.VLLMV1, "_schedule", checked)
    policy = qt.policies.VLLMV1(32, 1024, num_gpu_blocks=1500, reserve_full_sequence=False,
                                async_scheduling=async_scheduling,
                                enable_prefix_caching=caching)
    res = qt.simulate(crowded, policy, TIME, fast_path=False)
    assert res.metrics["restarts"] > 0 and steps[0] == len(res.batches)


def test_a_vllm_subclass_that_decides_otherwise_is_asked_every_step(crowded):
    class Mine(qt.policies.VLLMV1):
        def _admit_waiting(self, state, budget, scheduled, cached):
            return super()._admit_waiting(state, budget, scheduled, cached)

    policy = Mine(32, 1024, num_gpu_blocks=1500)
    res = qt.simulate(crowded.take(slice(0, 20)), policy, TIME)
    assert len(policy.queue_log) == res.iterations


class _ReferencePool:
    """The block pool as first written, one block at a time (vLLM's ``BlockPool`` with an
    ordered dict for its free queue): the bulk pool must do exactly what it does."""

    def __init__(self, num_blocks, caching=True):
        self._fresh = num_blocks - 1
        self._queue = OrderedDict()
        self._key, self._cached, self._refs = {}, {}, {}
        self._next, self.caching, self.used = 0, caching, 0

    @property
    def num_free(self):
        return self._fresh + len(self._queue)

    def hits(self, keys, most):
        found = []
        if self.caching:
            for k in islice(keys, most):
                b = self._cached.get(k)
                if b is None:
                    break
                found.append(b)
        return found

    def evictable(self, blocks):
        return sum(1 for b in blocks if b in self._queue)

    def touch(self, blocks):
        for b in blocks:
            if b in self._queue:
                del self._queue[b]
                self.used += 1
            self._refs[b] = self._refs.get(b, 0) + 1

    def allocate(self, n):
        out = []
        for _ in range(n):
            if self._fresh > 0:
                self._fresh -= 1
                b, self._next = self._next, self._next + 1
            else:
                b, key = self._queue.popitem(last=False)
                if key is not None:
                    del self._cached[key]
                    del self._key[b]
            self._refs[b] = 1
            out.append(b)
        self.used += n
        return out

    def free(self, blocks):
        for b in reversed(blocks):
            self._refs[b] -= 1
            if self._refs[b] == 0:
                del self._refs[b]
                self._queue[b] = self._key.get(b)
                self.used -= 1

    def cache(self, block, key):
        if self.caching and key not in self._cached and block not in self._key:
            self._cached[key] = block
            self._key[block] = key

    def snapshot(self):
        return {"queue": list(self._queue.items()), "cached": dict(self._cached),
                "key": dict(self._key), "refs": dict(self._refs), "next": self._next,
                "fresh": self._fresh, "used": self.used}


@pytest.mark.parametrize("seed", range(6))
def test_the_bulk_block_pool_does_what_the_block_by_block_one_does(seed):
    """Random requests taking their cached prefix, allocating, registering and freeing
    blocks on both pools: every answer and the whole state stay the same."""
    rng = np.random.default_rng(seed)
    caching = seed != 5
    pools = [BlockPool(60, caching), _ReferencePool(60, caching)]
    held = [{}, {}]
    for step in range(400):
        r = int(rng.integers(12))
        keys = [(r % 4, j) if j < 6 else ("own", r, j) for j in range(12)]
        most, need = int(rng.integers(0, 12)), int(rng.integers(1, 5))
        for pool, mine in zip(pools, held, strict=True):
            if r in mine:
                pool.free(mine.pop(r))
                continue
            hit = pool.hits(keys, most)
            if need + pool.evictable(hit) > pool.num_free:
                continue
            pool.touch(hit)
            mine[r] = hit + pool.allocate(need)
            full = min(len(mine[r]), len(keys))
            if isinstance(pool, BlockPool) and step % 2:
                pool.cache_many(mine[r][len(hit):full], keys[len(hit):full])
            else:
                for b in range(len(hit), full):
                    pool.cache(mine[r][b], keys[b])
        assert held[0] == held[1]
        assert pools[0].snapshot() == pools[1].snapshot(), step

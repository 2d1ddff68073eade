"""The engine's fast path (steady decode-only stretches in closed form) changes nothing.

Every run is made twice, with ``fast_path=False`` (one decision per iteration) and with the
fast path; request stamps, the batch log row by row, the TBT histogram and every metric must
be identical to the last bit, and the fast path must really have skipped decisions.
"""

import collections
import contextlib
import dataclasses

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import queuetheory as qt
from queuetheory.engine import State
from queuetheory.policies import FasterTransformer, Orca, Sarathi, StaticPriority, VLLMVanilla

ANCHOR_TIME = qt.AffineTokenTime(c=16.1e-3, per_prefill=57.8e-6, per_decode=39.5e-6)


def _lognormal(median, sigma=0.8):
    return stats.lognorm(s=sigma, scale=median)


def _counting(policy):
    calls = {"n": 0}
    schedule = policy.schedule

    def counted(state):
        calls["n"] += 1
        return schedule(state)

    policy.schedule = counted
    return calls


def _same_records(workload, make_policy, time_model, **kw):
    """Run with ``fast_path=False`` and with the fast path: request stamps, the batch log
    row by row, the paths, the TBT histogram, every metric and the end time identical.
    Returns the step-by-step result and both runs' numbers of calls to ``schedule``."""
    runs = []
    for fast in (False, True):
        policy = make_policy()
        calls = _counting(policy)
        res = qt.simulate(workload, policy, time_model, fast_path=fast, **kw)
        runs.append((res, calls["n"]))
    (slow, n_slow), (fast, n_fast) = runs
    for records in ("requests", "batches", "paths"):
        pd.testing.assert_frame_equal(getattr(slow, records), getattr(fast, records),
                                      check_exact=True)
    np.testing.assert_array_equal(slow.tbt.counts, fast.tbt.counts)
    ms, mf = slow.metrics, fast.metrics
    assert ms.keys() == mf.keys()
    for k in ms:
        assert ms[k] == mf[k] or (np.isnan(ms[k]) and np.isnan(mf[k])), k
    assert slow.end_time == fast.end_time
    return slow, n_slow, n_fast


def stepping(make_policy):
    """``make_policy`` with its bulk rule masked on the instance: the engine steps and takes
    the policy's stretches, the path a policy without a bulk rule runs on."""
    def made():
        policy = make_policy()
        policy.bulk = lambda engine: None
        return policy
    return made


def _same_run(workload, make_policy, time_model, **kw):
    """:func:`_same_records` for policies that never idle with requests waiting: the
    step-by-step run makes one decision per iteration."""
    slow, n_slow, n_fast = _same_records(workload, make_policy, time_model, **kw)
    assert n_slow == slow.iterations
    return slow, n_slow, n_fast


def test_fast_path_anchor_workload_same_records():
    wl = qt.Workload([qt.RequestClass(prompt=512, output=256, rate=4.0)])
    res, n_slow, n_fast = _same_run(wl, lambda: Sarathi(512), ANCHOR_TIME, n_requests=150)
    assert res.metrics["completed"] == 150
    assert n_fast < n_slow / 2                         # the fast path did skip decisions


SHAREGPT_LIKE = qt.Workload([qt.RequestClass(_lognormal(256), _lognormal(256), rate=2.0)])


@pytest.mark.parametrize("make_policy", [
    lambda: Sarathi(512),
    lambda: Sarathi(256, order="sjf_decode", max_reqs=24),
    lambda: Orca(512),
    lambda: VLLMVanilla(1024),
    lambda: FasterTransformer(512),
    lambda: FasterTransformer(512, mode="request", max_reqs=8),
], ids=["sarathi", "sarathi-sjf-maxreqs", "orca", "vllm", "ft-iteration", "ft-request"])
@pytest.mark.parametrize("memory", [None, 9000], ids=["no-memory-limit", "memory-9000"])
def test_fast_path_same_records_lognormal_lengths(make_policy, memory):
    refused = make_policy().supports(memory=memory, first_token="prefill")
    if refused:
        pytest.skip(f"the policy refuses this setting: {refused}")
    res, n_slow, n_fast = _same_run(SHAREGPT_LIKE, make_policy, ANCHOR_TIME, n_requests=120,
                                    memory=memory)
    assert n_fast < n_slow
    if memory is not None and make_policy().__class__ is Sarathi:
        assert res.metrics["peak_memory"] <= memory


@pytest.mark.parametrize("time_model", [
    qt.LinearMemoryTime(d0=1.0, d1=0.01),
    qt.LinearMemoryTime(d0=1.0, d1=0.013, slot=2.0),
    qt.PiecewiseLinearTime(c=45.5, a=0.30, b0=64),
    qt.UnitTime(),
], ids=["linear-memory", "linear-memory-slotted", "piecewise", "unit"])
def test_fast_path_same_records_every_time_model(time_model):
    rate = 0.2 if isinstance(time_model, qt.UnitTime) else 0.01
    wl = qt.Workload([qt.RequestClass(_lognormal(64), _lognormal(48), rate=rate)])
    _, n_slow, n_fast = _same_run(wl, lambda: Sarathi(128), time_model, n_requests=80,
                                  first_token="prefill" if isinstance(time_model, qt.UnitTime)
                                  else "decode")
    assert n_fast < n_slow


@pytest.mark.parametrize(("make_policy", "memory", "first_token"), [
    (lambda: Sarathi(512), 9000, "prefill"),
    (lambda: VLLMVanilla(512), None, "prefill"),
    (lambda: FasterTransformer(512), None, "prefill"),
    (lambda: qt.policies.SLAI(512, tbt=(0.5, 0.1), beta=24), 6000, "prefill"),
    (lambda: qt.policies.RAD((128, 256, 32)), None, "prefill"),
    (lambda: qt.policies.AMin(), 6000, "prefill"),
    (lambda: qt.policies.VLLMV1(64, 512, num_gpu_blocks=500), None, "prefill"),
    (stepping(qt.policies.FCFSRestart), None, "decode"),
    (lambda: qt.policies.FCFSRestart(), 6000, "decode"),
], ids=["sarathi-kv", "vllm", "ft", "slai-kv", "rad", "amin-kv", "vllm-v1", "fcfs-restart",
        "fcfs-restart-kv"])
@pytest.mark.parametrize("horizon", [None, 12.0])
def test_decode_stretches_of_a_model_without_closed_form_are_stepped(
        make_policy, memory, first_token, horizon):
    """A time model whose durations read each decode member's context, with no closed form
    for repeated decodes (Bari et al.'s tiled GPU model, Eq. 7, fitted to the A100), still
    runs the decode stretches the policies promise: batch by batch, without asking the
    policy (``Engine._step_stretch`` checking the stretch's rules before each batch). The
    records are those of stepping every iteration, and the decisions fewer: prompts of 64
    tokens are never chunked, so every decision skipped is a decode batch's."""
    time_model = qt.TiledGPUTime.fitted("a100")
    assert not time_model.counts_only
    assert time_model.decode_durations(np.array([1]), np.array([1])) is None
    wl = qt.Workload([qt.RequestClass(64, _lognormal(120), rate=rate, priority=c)
                      for c, rate in enumerate((6.0, 3.0))])
    refused = make_policy().supports(memory=memory, first_token=first_token)
    assert not refused, refused
    _, n_slow, n_fast = _same_records(wl, make_policy, time_model, n_requests=150,
                                      memory=memory, first_token=first_token,
                                      horizon=horizon, seed=3)
    assert n_fast < n_slow


def test_fast_path_same_records_with_evictions_and_horizon_and_iteration_cap():
    wl = qt.Workload([qt.RequestClass(_lognormal(200), _lognormal(300), rate=3.0)])
    res, _, _ = _same_run(wl, lambda: Sarathi(512), ANCHOR_TIME, horizon=60.0, memory=6000)
    assert res.metrics["restarts"] > 0                 # memory pressure forced evictions
    _same_run(wl, lambda: Orca(512), ANCHOR_TIME, horizon=60.0, max_iterations=777)


def test_fast_path_same_records_two_classes_static_priority():
    wl = qt.Workload([qt.RequestClass(_lognormal(100), _lognormal(150), rate=1.0),
                      qt.RequestClass(_lognormal(300), _lognormal(60), rate=1.0, priority=1)])
    _same_run(wl, lambda: StaticPriority(256, class_order=(1, 0)), ANCHOR_TIME, n_requests=100)


def test_policy_without_declaration_is_stepped_one_by_one():
    class Plain(qt.policies.Policy):          # the base class promises nothing
        token_budget = 512

        def _schedule(self, state):
            return Sarathi(512).schedule(state)

    wl = qt.Workload([qt.RequestClass(prompt=512, output=256, rate=4.0)])
    res, n_slow, n_fast = _same_run(wl, Plain, ANCHOR_TIME, n_requests=30)
    assert n_fast == n_slow == res.iterations


def test_decode_durations_match_duration_batch_by_batch():
    context = np.array([5, 17, 300, 41])
    left = np.array([7, 3, 7, 1])              # members leave the batch as they finish
    models = [ANCHOR_TIME, qt.LinearMemoryTime(0.5, 0.001, slot=0.25),
              qt.PiecewiseLinearTime(c=3.0, a=0.1, b0=1), qt.UnitTime(slot=2.0)]
    empty = np.empty(0, np.int64)
    loads = [qt.BatchLoad(empty, empty, (context + j)[left > j]) for j in range(7)]
    decodes = np.array([load.decode_context.size for load in loads])
    kv_tokens = np.array([load.kv_tokens for load in loads])
    for tm in models:
        one = [tm.duration(load) for load in loads]
        np.testing.assert_array_equal(tm.decode_durations(decodes, kv_tokens), np.array(one))


@pytest.mark.parametrize("first_token", ["decode", "prefill"])
def test_engine_running_kv_total_equals_recomputed_kv(first_token):
    wl = qt.Workload([qt.RequestClass(_lognormal(200), _lognormal(300), rate=3.0)])
    res = qt.simulate(wl, Sarathi(512), ANCHOR_TIME, horizon=30.0, memory=6000,
                      first_token=first_token)
    assert res.metrics["restarts"] > 0
    assert res.kv_left == int(res.table.kv(res.live).sum())
    memory = res.batches["memory"].to_numpy()
    assert memory.max() == res.metrics["peak_memory"] <= 6000


@pytest.mark.parametrize("first_token", ["decode", "prefill"])
def test_engine_kv_total_is_the_tables_at_every_decision(first_token):
    """The sum the engine keeps batch by batch (decodes writing KV, prompts ending with
    their first token, requests of one output token finishing with their prompt, several
    prompts ending in one batch, evictions) is the table's at every decision."""
    class Checked(Sarathi):
        def _schedule(self, state):
            assert state.memory_used == int(state.kv.sum())
            return super()._schedule(state)

    rng = np.random.default_rng(5)
    n = 400
    output = np.where(rng.random(n) < 0.2, 1, rng.integers(1, 300, n))
    wl = qt.Workload.from_arrays(np.cumsum(rng.exponential(0.03, n)), rng.integers(1, 200, n),
                                 output)
    res = qt.simulate(wl, Checked(512), ANCHOR_TIME, memory=5000, first_token=first_token,
                      fast_path=False)
    assert res.metrics["restarts"] > 0 and res.metrics["completed"] == n
    assert (res.batches["prefill_requests"] > 1).sum() > 10


@pytest.mark.parametrize("emit_first", [False, True])
@pytest.mark.parametrize("recomputing", [False, True])
def test_one_requests_kv_in_plain_integers_is_the_tables(emit_first, recomputing):
    from queuetheory.engine.state import RequestTable

    rng = np.random.default_rng(3)
    tab = RequestTable(emit_first, 64)
    n = 50
    tab.append(qt.Workload.from_arrays(np.arange(n, dtype=float), rng.integers(1, 90, n),
                                       rng.integers(1, 40, n)).sample(n_requests=n))
    tab.prefilled[:n] = rng.integers(0, 90, n)
    tab.decoded[:n] = rng.integers(0, 40, n)
    tab.recomputed[:n] = np.minimum(rng.integers(0, 30, n), tab.decoded[:n])
    tab.recomputing = recomputing
    kv = tab.kv(np.arange(n))
    assert [tab._kv_of(r) for r in range(n)] == kv.tolist()
    assert np.count_nonzero(kv == tab.prefilled[:n]) < n       # output tokens counted too


def test_quick_batch_check_accepts_only_what_the_complete_check_accepts():
    from queuetheory.engine.batch import Batch, _check_every_rule, _feasible_used
    from queuetheory.errors import InfeasibleBatchError

    wl = qt.Workload([qt.RequestClass(_lognormal(60), _lognormal(40), rate=40.0)])
    res = qt.simulate(wl, Sarathi(512), ANCHOR_TIME, n_requests=400, max_iterations=150)
    res.table.set_progress(res.live[-6:], 0, 0)   # some not begun: a cache may credit them
    res.table.set_progress(res.live[-7:-6], 5, 0)  # and one part-way: it may not
    state = State(res.table, res.live, 1.0, 512, None,
                  kv_total=int(res.table.kv(res.live).sum()))
    rng, erng = np.random.default_rng(7), np.random.default_rng(8)
    accepted = refused = unsorted = credited = evicting = again = 0
    for _ in range(4000):
        pre = rng.choice(state.n + 2, rng.integers(0, 4), replace=bool(rng.random() < 0.1)) - 1
        dec = rng.choice(state.n + 2, rng.integers(0, state.n), replace=False) - 1
        if rng.random() < 0.7:
            pre, dec = np.sort(pre), np.sort(dec)
        chunk = rng.integers(0, 80, pre.size)
        cached = np.empty(0, np.int64)         # a prefix-cache credit (vLLM's hits)
        if rng.random() < 0.3:          # the requests not yet begun, and two others
            pre = np.sort(rng.choice(np.arange(state.n - 8, state.n + 1),
                                     rng.integers(1, 3), replace=False))
            chunk = rng.integers(0, 80, pre.size)
            dec = dec[dec < state.n - 8]
            cached = rng.integers(-1, 60, pre.size + int(rng.random() < 0.05))
        evict = np.empty(0, np.int64)
        if not cached.size and erng.random() < 0.4:   # evictions: mostly of requests
            holding = np.flatnonzero(state.kv > 0) if erng.random() < 0.8 else np.arange(-1, 3)
            evict = erng.choice(holding, erng.integers(1, 4), replace=erng.random() < 0.1)
            if erng.random() < 0.7:                     # holding KV, not members
                keep = ~np.isin(pre, evict)
                pre, chunk, dec = pre[keep], chunk[keep], dec[~np.isin(dec, evict)]
            elif erng.random() < 0.8:           # a prefill member evicted first: anew
                pre, dec = np.union1d(pre, evict[:1]), dec[~np.isin(dec, evict)]
                chunk = erng.integers(0, 80, pre.size)
        batch = Batch(pre, chunk, dec, evict, cached=cached)
        budget, memory = rng.choice([None, 512, 200]), rng.choice([None, 20000, 10**6])
        recompute = bool(erng.random() < 0.5)
        quick = _feasible_used(state, batch, budget, memory,
                               None if erng.random() < 0.2 else recompute)
        try:
            full = _check_every_rule(state, batch, policy=None, iteration=0, budget=budget,
                                     memory=memory, emit_first=True, recompute=recompute)
        except InfeasibleBatchError:
            full = None
        assert quick is None or quick == full
        accepted += quick is not None
        refused += full is None
        credited += quick is not None and bool(np.count_nonzero(cached))
        evicting += quick is not None and bool(evict.size)
        again += quick is not None and bool(np.isin(pre, evict).any())   # prefilled anew
        # positions in another order (a policy listing its classes one after another)
        unsorted += quick is not None and bool(np.count_nonzero(np.diff(dec) < 0))
    assert accepted > 100 and refused > 100 and unsorted > 10 and credited > 30
    assert evicting > 15 and again > 5


@pytest.mark.parametrize("n_classes", [1, 3])
def test_tbt_histogram_shared_and_counted_gaps_count_like_one_by_one(n_classes):
    from queuetheory.engine.log import TBTHistogram

    rng = np.random.default_rng(n_classes)
    held, reference = TBTHistogram(n_classes), TBTHistogram(n_classes)

    def one_by_one(cls, gaps):
        np.add.at(reference._counts, (cls, reference._bins(gaps)), 1)

    for _ in range(2000):
        n = int(rng.integers(1, 60))
        cls = rng.integers(0, n_classes, n)
        gaps = rng.lognormal(-3, 1, n)
        shared = int(rng.integers(0, n + 1))
        gaps[:shared] = rng.lognormal(-3, 1)
        if shared:
            held.add_shared(float(gaps[0]), shared, cls[:shared])
        held.add(cls[shared:], gaps[shared:])
        one_by_one(cls, gaps)
        if rng.random() < 0.2:
            repeats = rng.lognormal(-3, 1, int(rng.integers(1, 6)))
            counts = rng.integers(0, 9, repeats.size)
            c = int(rng.integers(0, n_classes))
            held.add_counted(repeats, counts, c)
            one_by_one(np.full(counts.sum(), c), np.repeat(repeats, counts))
    np.testing.assert_array_equal(held.counts, reference._counts)
    assert held.quantile(0.99) == reference.quantile(0.99)


def test_subclass_that_changes_the_decision_is_not_repeated():
    class EveryOther(Sarathi):      # decodes only on even iterations: not steady
        def _reset(self):
            self.calls = 0

        def _schedule(self, state):
            self.calls += 1
            batch = super()._schedule(state)
            if self.calls % 2 or not batch.decode.size or batch.prefill.size:
                return batch
            return qt.Batch(decode=batch.decode[:1])

    wl = qt.Workload([qt.RequestClass(prompt=64, output=64, rate=2.0)])
    res, n_slow, n_fast = _same_run(wl, lambda: EveryOther(512), ANCHOR_TIME, n_requests=20)
    assert n_fast == n_slow == res.iterations


class _Renamed(Sarathi):
    """A user's subclass that changes how the policy prints, not what it decides."""

    def __repr__(self):
        return "MySarathi()"


class _Tweaked(Sarathi):
    """A user's subclass that overrides the decision (here with the same batches)."""

    def _schedule(self, state):
        return super()._schedule(state)


def test_a_subclass_that_keeps_the_decision_keeps_the_fast_path():
    """Speed follows what a class decides, not the module it is defined in: the renamed
    Sarathi runs the bulk rule (no call to ``schedule``) with the records of stepping."""
    wl = qt.Workload([qt.RequestClass(prompt=512, output=256, rate=4.0)])
    res, n_slow, n_fast = _same_run(wl, lambda: _Renamed(512), ANCHOR_TIME,
                                    n_requests=150)
    assert n_slow == res.iterations > 0 and n_fast == 0
    base = qt.simulate(wl, Sarathi(512), ANCHOR_TIME, n_requests=150)
    pd.testing.assert_frame_equal(base.requests, res.requests, check_exact=True)


def test_a_subclass_that_overrides_the_decision_steps():
    """A subclass overriding ``_schedule`` is asked at every iteration: no inherited fast
    path (bulk rule, steady stretch or drain) speaks for it."""
    wl = qt.Workload([qt.RequestClass(prompt=512, output=256, rate=4.0)])
    res, n_slow, n_fast = _same_run(wl, lambda: _Tweaked(512), ANCHOR_TIME, n_requests=150)
    assert n_fast == n_slow == res.iterations > 0
    assert not qt.policies.decides_as_shipped(_Tweaked(512))
    assert qt.policies.decides_as_shipped(_Renamed(512))


@pytest.mark.parametrize("seed", [0, 2, 3, 4])
def test_no_drain_over_a_request_yet_to_write_kv(seed):
    """Under ``first_token="prefill"`` an empty prompt in decode writes no KV at its first
    decode (it has emitted nothing to write back), while a stretch's closed form takes one
    token per member and batch: a drain that began with such a request in the system
    counted a token too many in the memory column and changed the stamps. Request-level
    FasterTransformer drains after each cohort's prefill; a tenth of the prompts are empty
    (a trace allows them)."""
    workload = qt.Workload([qt.RequestClass(_lognormal(200), _lognormal(150), rate=1.0)])
    trace = workload.sample(n_requests=200, seed=seed)
    empty = np.random.default_rng(seed).random(200) < 0.1
    trace = dataclasses.replace(trace, prompt=np.where(empty, 0, trace.prompt))
    res, n_slow, n_fast = _same_records(
        trace, lambda: FasterTransformer(512, mode="request", max_reqs=4), ANCHOR_TIME,
        first_token="prefill")
    assert n_fast < n_slow and res.metrics["completed"] == 200


@pytest.mark.parametrize("memory", [None, 20000])
@pytest.mark.parametrize("order, time_model", [
    ("sjf_decode", ANCHOR_TIME), ("fcfs", qt.LinearMemoryTime(d0=16.1e-3, d1=2e-7))],
    ids=["sjf-decode", "context-time"])
def test_faster_transformer_decode_phases_run_through_arrivals(order, time_model, memory):
    """Iteration-level FasterTransformer decodes every request in decode while any does,
    arrivals waiting: where it steps (no bulk rule for a non-FCFS order or a time model that
    reads the context) each such decode phase is one stretch through the arrivals
    (``decodes_through``), the records those of stepping, with fewer decisions than with
    the promise masked. With a KV limit a prefill part-way (the last prompt of a batch,
    chunked) holds promised KV that the engine's check does not see, which withholds the
    promise as it does :meth:`steady`'s: the records stay stepping's."""
    workload = qt.Workload([qt.RequestClass(_lognormal(150), _lognormal(60), rate=3.0)])
    make = lambda: FasterTransformer(512, order=order)          # noqa: E731
    res, n_slow, n_fast = _same_records(workload, make, time_model, n_requests=200,
                                        memory=memory)
    masked = make()
    masked.decodes_through = lambda state, batch: False
    calls = _counting(masked)
    qt.simulate(workload, masked, time_model, n_requests=200, memory=memory)
    assert res.metrics["completed"] == 200
    assert n_fast < (0.8 if memory is None else 1.0) * calls["n"]


@pytest.mark.parametrize("horizon", [None, 20.5, 30.0, 500.0])
@pytest.mark.parametrize("beta", [None, 0.5])
def test_a_policy_that_idles_for_good_is_not_asked_at_every_arrival(horizon, beta):
    """α-protection (Jaillet et al.) idles once it declares a loop (two requests of prompt
    1 and output 10 need 20 tokens of ``M = 12`` before either finishes): it promises
    :meth:`idles_through`, and ``simulate`` admits the later arrivals without asking it,
    ending where stepping ends (the last arrival, or the first at or after the horizon).
    The fast run makes exactly the decisions stepping makes up to its first idle one after
    the loop. Greedy clearing loops; β-clearing may not, and then it never promises."""
    a = np.concatenate([np.zeros(2), np.arange(10.0, 60.0, 0.5)])
    s = np.ones(a.size, np.int64)
    o = np.concatenate([[10, 10], np.full(a.size - 2, 3)])
    wl = qt.Workload.from_arrays(a, s, o)
    def make():
        policy = qt.policies.AlphaProtection(0.0, beta)
        policy.steady = lambda state, batch: 0       # (its decode stretches: tested below)
        return policy

    kw = dict(memory=12, n_requests=a.size, first_token="prefill", horizon=horizon, seed=1)
    slow, n_slow, n_fast = _same_records(wl, make, qt.UnitTime(), **kw)
    stepped, idled = make(), []
    schedule = stepped.schedule
    stepped.schedule = lambda state: idled.append(
        (state.time, (batch := schedule(state)).empty and stepped.loop_at is not None)
    ) or batch
    qt.simulate(wl, stepped, qt.UnitTime(), fast_path=False, **kw)
    np.testing.assert_array_equal(slow.live, qt.simulate(wl, make(), qt.UnitTime(), **kw).live)
    if stepped.loop_at is None:
        assert n_fast == n_slow
    else:
        first_idle = [k for k, (_, idle) in enumerate(idled) if idle][0]
        assert n_fast == first_idle + 1 < n_slow
        assert slow.metrics["unfinished"] > 0
    assert beta is not None or stepped.loop_at is not None


def test_admit_before_admits_as_stepping_admits():
    """``Engine.admit_before(stop)`` admits the pre-loaded requests arriving before
    ``stop`` (not at it) and returns the last one's arrival time; ``None`` when none is
    pending before ``stop``."""
    one = np.ones(5, np.int64)
    engine = qt.engine.Engine(Sarathi(8), qt.UnitTime())
    engine.load(qt.workload.Trace(np.array([0.0, 1.0, 1.0, 2.0, 5.0]), one, one, 0 * one, one,
                                  one, 0 * one), final=True)
    assert engine.admit_before(1.0) == 0.0 and engine.live.tolist() == [0]
    assert engine.admit_before(1.0) is None
    assert engine.admit_before(5.0) == 2.0 and engine.live.tolist() == [0, 1, 2, 3]
    assert engine.next_arrival() == 5.0
    assert engine.admit_before(np.inf) == 5.0 and engine.next_arrival() == np.inf
    with pytest.raises(ValueError, match="stop=nan"):
        engine.admit_before(float("nan"))


@pytest.mark.parametrize("alpha, beta, memory", [(0.3, None, 60), (0.05, None, 60),
                                                 (0.1, 0.5, 60), (0.1, None, 2000)])
def test_alpha_protection_decode_stretches_count_the_loop_rounds(alpha, beta, memory):
    """α-protection (Jaillet et al.) repeats a decode-only batch (:meth:`steady`) until the
    round its loop rule would declare a loop, the rounds counted by ``repeated``: the same
    records, clearings and loop time as deciding every round, with fewer decisions, and
    at every decision the fast run makes the loop rule's count of rounds is stepping's."""
    rng = np.random.default_rng(3)
    a = np.sort(rng.integers(0, 200, 80)).astype(float)
    s, o = rng.integers(1, 5, 80), rng.integers(5, 60, 80)
    wl = qt.Workload.from_arrays(a, s, o)
    kw = dict(memory=memory, n_requests=80, first_token="prefill", seed=2)
    make = lambda: qt.policies.AlphaProtection(alpha, beta)          # noqa: E731
    _, n_slow, n_fast = _same_records(wl, make, qt.UnitTime(), **kw)
    runs = []
    for fast in (False, True):
        policy, rounds = make(), {}
        schedule = policy.schedule

        def counted(state, schedule=schedule, policy=policy, rounds=rounds):
            batch = schedule(state)
            rounds[state.time] = policy._rounds
            return batch

        policy.schedule = counted
        qt.simulate(wl, policy, qt.UnitTime(), fast_path=fast, **kw)
        runs.append((policy.loop_at, policy.clearings, rounds))
    (loop, clearings, stepped), (loop_fast, clearings_fast, fast) = runs
    assert (loop, clearings) == (loop_fast, clearings_fast)
    assert {t: stepped[t] for t in fast} == fast
    assert n_fast < n_slow
    assert (loop is None) == (memory == 2000)     # the roomy memory completes every one


@contextlib.contextmanager
def _short_counted(closed_form_only):
    """Count the short stretches stepped batch by batch (``Engine._step_stretch``) while the
    block runs, by length; with ``closed_form_only``, none: every stretch runs in closed
    form."""
    from queuetheory.engine import Engine

    stepped, step_short = collections.Counter(), Engine._step_stretch

    def counted(self, dec, through, limit, books, arrivals, t, k, by_time, rules=None):
        stepped[k] += 1
        return step_short(self, dec, through, limit, books, arrivals, t, k, by_time, rules)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Engine, "_step_stretch", counted)
        if closed_form_only:
            mp.setattr(Engine, "_short_length", lambda self, *args: None)
        yield stepped


def _stretch_runs(workload, make_policy, time_model, closed_form_only, **kw):
    """A fast-path run, with the short stretches stepped (as shipped) or, with
    ``closed_form_only``, every stretch in closed form; returns the result, the number of
    decisions and the short stretches stepped by length."""
    policy = make_policy()
    calls = _counting(policy)
    with _short_counted(closed_form_only) as stepped:
        res = qt.simulate(workload, policy, time_model, **kw)
    return res, calls["n"], stepped


@pytest.mark.parametrize(("make_policy", "memory", "first_token"), [
    (lambda: qt.policies.FCFSRestart(), 6000, "decode"),
    (stepping(qt.policies.FCFSRestart), None, "decode"),     # (its bulk rule masked)
    (lambda: qt.policies.SLAI(512, tbt=(0.5, 0.1), beta=24), 6000, "prefill"),
    (lambda: qt.policies.RAD((128, 256, 32)), None, "prefill"),
], ids=["fcfs-restart-kv", "fcfs-restart", "slai-kv", "rad"])
@pytest.mark.parametrize("horizon", [None, 40.0])
def test_a_short_stretch_is_stepped_as_its_closed_form_runs_it(
        make_policy, memory, first_token, horizon):
    """A promised stretch of at most three batches (the promise ends, time runs out, or the
    memory after the next would leave its window) is stepped batch by batch
    (``Engine._step_stretch``): the records are those of the closed form and of stepping
    every iteration, and the policy is asked exactly as often as when the closed form runs
    every stretch (the same stretches kept to go on with)."""
    wl = qt.Workload([qt.RequestClass(_lognormal(200), _lognormal(150), rate=rate,
                                      priority=c) for c, rate in enumerate((3.0, 1.5))])
    kw = dict(n_requests=200, memory=memory, first_token=first_token, horizon=horizon,
              seed=3)
    shipped, asked, stepped = _stretch_runs(wl, make_policy, ANCHOR_TIME, False, **kw)
    closed, asked_closed, none = _stretch_runs(wl, make_policy, ANCHOR_TIME, True, **kw)
    assert stepped[1] and sum(stepped[k] for k in (2, 3)) and not none
    assert set(stepped) <= {0, 1, 2, 3}
    assert asked == asked_closed
    stepping = qt.simulate(wl, make_policy(), ANCHOR_TIME, fast_path=False, **kw)
    for other in (closed, stepping):
        for records in ("requests", "batches"):
            pd.testing.assert_frame_equal(getattr(shipped, records), getattr(other, records),
                                          check_exact=True)
        np.testing.assert_array_equal(shipped.tbt.counts, other.tbt.counts)
        assert shipped.end_time == other.end_time


def _driven(make_policy, trace, closed_form_only, cut, memory, time_model=ANCHOR_TIME,
            most=1 << 62):
    """Drive one engine as a fleet drives it between arrivals routed elsewhere: each call
    of ``advance`` may run batches only up to ``cut`` after its start (and at most
    ``most``: 1 decides every batch), so stretches are cut by time and go on at the next
    call. Returns the engine, the policy's decisions and the stretches stepped by length
    (``None``: as they came, a time model without a closed form)."""
    policy = make_policy()
    calls = _counting(policy)
    engine = qt.engine.Engine(policy, time_model, memory=memory,
                              token_budget=policy.token_budget)
    policy.reset(seed=0)
    engine.load(trace, final=True)
    t, nxt = 0.0, engine.next_arrival()
    with _short_counted(closed_form_only) as stepped:
        while engine.live.size or nxt < np.inf:
            if t >= nxt:
                engine.admit_until(t)
                nxt = engine.next_arrival()
            if not engine.live.size:
                t = nxt
                continue
            out = engine.advance(t, min(nxt, t + cut), most)
            t = out[0] if isinstance(out, tuple) else min(out.until or nxt, nxt)
    return engine, calls["n"], stepped


@pytest.mark.parametrize(("make_policy", "memory"), [
    (lambda: qt.policies.RAD((128, 256, 32)), None),
    (lambda: qt.policies.SLAI(512, tbt=(0.5, 0.1), beta=24), 6000),
], ids=["rad", "slai-kv"])
@pytest.mark.parametrize("cut", [0.03, 0.07])
def test_a_short_stretch_cut_by_time_goes_on_as_the_closed_forms_does(
        make_policy, memory, cut):
    """Short stretches cut by ``until`` (a fleet's next arrival routed to another engine)
    are kept and go on at the next call without asking the policy, as the closed form's
    are: the same decisions, the same batch log and request stamps."""
    wl = qt.Workload([qt.RequestClass(_lognormal(200), _lognormal(150), rate=rate,
                                      priority=c) for c, rate in enumerate((3.0, 1.5))])
    trace = wl.sample(n_requests=150, seed=5)
    shipped, asked, stepped = _driven(make_policy, trace, False, cut, memory)
    closed, asked_closed, _ = _driven(make_policy, trace, True, cut, memory)
    assert stepped[1] and stepped[2] and asked == asked_closed
    for name in ("start", "duration", "decode_requests", "memory", "in_system"):
        np.testing.assert_array_equal(shipped.log.column(name), closed.log.column(name))
    for name in ("first_token", "last_token", "finish", "tbt_max"):
        np.testing.assert_array_equal(getattr(shipped.table, name), getattr(closed.table, name))


@pytest.mark.parametrize(("make_policy", "memory"), [
    (lambda: qt.policies.RAD((128, 256, 32)), None),
    (lambda: qt.policies.SLAI(512, tbt=(0.5, 0.1), beta=24), 6000),
    (lambda: VLLMVanilla(512), None),
], ids=["rad", "slai-kv", "vllm"])
def test_a_stretch_stepped_for_want_of_a_closed_form_goes_on_after_a_cut(make_policy, memory):
    """Under Bari et al.'s GPU model (no closed form: the stretches are stepped as they
    come), stretches cut by ``until`` go on at the next call without asking the policy:
    the batch log and the request stamps of deciding every batch, with fewer decisions."""
    wl = qt.Workload([qt.RequestClass(64, _lognormal(120), rate=rate, priority=c)
                      for c, rate in enumerate((6.0, 3.0))])
    trace = wl.sample(n_requests=120, seed=5)
    time_model = qt.TiledGPUTime.fitted("a100")
    shipped, asked, stepped = _driven(make_policy, trace, False, 0.05, memory, time_model)
    every, asked_every, _ = _driven(make_policy, trace, False, 0.05, memory, time_model, 1)
    assert set(stepped) == {None} and asked < asked_every
    for name in ("start", "duration", "decode_requests", "memory", "in_system"):
        np.testing.assert_array_equal(shipped.log.column(name), every.log.column(name))
    for name in ("first_token", "last_token", "finish", "tbt_max"):
        np.testing.assert_array_equal(getattr(shipped.table, name), getattr(every.table, name))


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("memory", [12, 16])
def test_a_short_stretch_through_completions_counts_their_memory_to_the_token(seed, memory):
    """FCFSRestart's residents decode through completions until the waiting prompt fits
    (``need``): on prompts and outputs of 1–5 tokens and a KV limit of a dozen, a stretch's
    length turns on the KV each finishing member frees, to the token. The short stretches
    stepped give the records and the decisions of the closed form."""
    rng = np.random.default_rng(seed)
    wl = qt.Workload.from_arrays(np.sort(rng.uniform(0, 0.4, 60)), rng.integers(1, 6, 60),
                                 rng.integers(1, 6, 60))
    kw = dict(memory=memory, first_token="decode")
    shipped, asked, stepped = _stretch_runs(wl, qt.policies.FCFSRestart, ANCHOR_TIME, False,
                                            **kw)
    closed, asked_closed, _ = _stretch_runs(wl, qt.policies.FCFSRestart, ANCHOR_TIME, True,
                                            **kw)
    assert sum(stepped.values()) and asked == asked_closed
    for records in ("requests", "batches"):
        pd.testing.assert_frame_equal(getattr(shipped, records), getattr(closed, records),
                                      check_exact=True)

"""The stepper: conservation, Little's law, determinism, feasibility checks."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

import queuetheory as qt
from conftest import classic_policies
from queuetheory.engine import Batch, Engine
from queuetheory.engine.log import ColumnLog, TBTHistogram
from queuetheory.workload import Trace


def two_class_workload(rate=0.004):
    return qt.Workload([
        qt.RequestClass(stats.poisson(60, loc=1), stats.geom(1 / 40), rate, name="a"),
        qt.RequestClass(stats.poisson(200, loc=1), stats.poisson(20, loc=1), rate / 2,
                        name="b", priority=1),
    ])


@pytest.mark.parametrize("policy", classic_policies(), ids=repr)
@pytest.mark.parametrize("memory", [None, 4000])
@pytest.mark.parametrize("first_token", ["prefill", "decode"])
def test_token_conservation(policy, memory, first_token, llama):
    """Every token served is progress of a request (the first output token is free under
    ``first_token="prefill"``) or progress later lost to preemption, and the engine's
    unfinished-work counter equals what the requests still need."""
    refused = policy.supports(memory=memory, first_token=first_token)
    if refused:
        pytest.skip(f"the policy refuses this setting: {refused}")
    res = qt.simulate(two_class_workload(), policy, llama, horizon=1.5e5, memory=memory, seed=3,
                      first_token=first_token)
    req = res.requests
    served = int(res.batches["token_load"].sum())
    free = int((req["decoded"] > 0).sum()) if first_token == "prefill" else 0
    progress = int(req["prefilled"].sum() + req["decoded"].sum()) - free
    assert served >= progress
    assert (served == progress) == (req["restarts"].sum() == 0)
    length = req["prompt"] + req["recomputed"]
    done = req["finish"].notna()
    assert (req.loc[done, "decoded"] == req.loc[done, "output"]).all()
    assert (req.loc[done, "prefilled"] == length[done]).all()
    admitted = req[req["admitted"]]
    remaining = (length[req["admitted"]] - admitted["prefilled"] + admitted["output"]
                 - admitted["decoded"]).sum()
    assert res.work_left == remaining
    if memory is not None:
        assert res.batches["memory"].max() <= memory


@pytest.mark.parametrize("policy", classic_policies(), ids=repr)
def test_littles_law(policy, llama):
    """L = λW: the time-average number in system equals the arrival rate times the mean
    sojourn, within four standard errors over independent seeds."""
    wl = qt.Workload([qt.RequestClass(stats.poisson(80, loc=1), stats.geom(1 / 30), 0.003)])
    if isinstance(policy, qt.policies.FasterTransformer):
        wl = qt.Workload([qt.RequestClass(stats.poisson(80, loc=1), stats.geom(1 / 30), 0.0005)])
    if isinstance(policy, qt.policies.StaticPriority):
        policy = qt.policies.StaticPriority(256, [0])
    gaps = []
    for seed in range(5):
        res = qt.simulate(wl, policy, llama, horizon=1.2e5, seed=seed)
        m = res.metrics
        lam_w = wl.total_rate * m["mean_latency"]
        gaps.append(m["mean_in_system"] - lam_w)
    gaps = np.array(gaps)
    se = gaps.std(ddof=1) / np.sqrt(gaps.size)
    assert abs(gaps.mean()) <= 4 * se + 1e-9


def test_same_seed_same_result(llama):
    a = qt.simulate(two_class_workload(), qt.policies.Sarathi(256), llama, horizon=1e5, seed=7)
    b = qt.simulate(two_class_workload(), qt.policies.Sarathi(256), llama, horizon=1e5, seed=7)
    c = qt.simulate(two_class_workload(), qt.policies.Sarathi(256), llama, horizon=1e5, seed=8)
    pd.testing.assert_frame_equal(a.requests, b.requests)
    pd.testing.assert_frame_equal(a.batches, b.batches)
    assert not a.requests["arrival"].equals(c.requests["arrival"])


def test_sarathi_is_decode_first_and_fills_the_budget(llama):
    trace = Trace(np.zeros(3), np.array([300, 10, 500]), np.array([3, 2, 4]),
                  np.zeros(3, int), np.array([3, 2, 4]), np.array([3, 2, 4]), np.zeros(3, int))
    res = qt.simulate(trace, qt.policies.Sarathi(256), llama)
    b = res.batches
    assert b["token_load"].iloc[0] == 256                  # chunked prefill fills b
    assert (b["token_load"] <= 256).all()
    assert res.metrics["completed"] == 3
    # batch 2 finishes prompt 0 (44 left) and prompt 1 (10), then chunks prompt 2 (202)
    assert b["prefill_requests"].iloc[1] == 3 and b["token_load"].iloc[1] == 256
    req = res.requests
    assert req.loc[0, "prefill_done"] == req.loc[1, "prefill_done"] < req.loc[2, "prefill_done"]


class _Greedy(qt.policies.Policy):
    """A broken policy: decodes requests whose prefill is unfinished."""

    def _schedule(self, state):
        return Batch(decode=np.arange(state.n))


class _Hog(qt.policies.Policy):
    """A broken policy: prefills everything at once, ignoring memory."""

    def _schedule(self, state):
        pre = np.flatnonzero(~state.in_decode)
        return Batch(pre, state.remaining_prefill[pre], np.flatnonzero(state.in_decode))


def test_infeasible_batches_are_caught(llama):
    wl = qt.Workload([qt.RequestClass(50, 5, 0.01)])
    with pytest.raises(qt.InfeasibleBatchError, match="2.5a"):
        qt.simulate(wl, _Greedy(), llama, horizon=1e4)
    with pytest.raises(qt.InfeasibleBatchError, match="memory"):
        qt.simulate(wl, _Hog(), llama, horizon=1e5, memory=120)
    with pytest.raises(qt.InfeasibleBatchError, match="2.5d"):
        qt.simulate(wl, _Hog(), llama, horizon=1e5, token_budget=60)


@pytest.mark.parametrize("method, promise", [
    ("steady_chunk", (1, True, 0)), ("steady_chunk", (1,)),
    ("decodes_through", (0, 5, 1)), ("decodes_through", (3,)),
])
def test_a_malformed_promise_is_named(method, promise):
    """A promise tuple that is not two values gets a ``TypeError`` naming the policy's
    method and what it returned, not Python's unpacking error."""
    class Promising(qt.policies.Sarathi):
        pass

    setattr(Promising, method, lambda self, state, batch: promise)
    trace = qt.Workload.from_arrays(np.zeros(4), np.full(4, 300), np.full(4, 20))
    with pytest.raises(TypeError, match=rf"\.{method} returned \("):
        qt.simulate(trace, Promising(64), qt.UnitTime())


@pytest.mark.parametrize("preemption", ["recompute", "restart"])
def test_eviction_restarts_and_recomputes(preemption, llama):
    """A tight memory forces vLLM-style preemption; evicted work is done again: the prompt
    with the generated tokens (recompute) or the prompt, then the tokens again (restart)."""
    wl = qt.Workload([qt.RequestClass(100, stats.geom(1 / 60), 0.02)])
    res = qt.simulate(wl, qt.policies.Sarathi(512, preemption=preemption), llama, horizon=2e5,
                      memory=1500, seed=1)
    req = res.requests
    assert req["restarts"].sum() > 0
    assert res.batches["memory"].max() <= 1500
    assert res.batches["token_load"].sum() > (req["prefilled"] + req["decoded"]).sum()
    if preemption == "recompute":
        assert req["recomputed"].sum() > 0 and res.table.discarded.sum() == 0
    else:
        assert req["recomputed"].sum() == 0 and res.table.discarded.sum() > 0


def _assert_same_records(a, b):
    """The two runs' request tables and batch logs are equal exactly, and their TBT counts."""
    for records in ("requests", "batches"):
        pd.testing.assert_frame_equal(getattr(a, records), getattr(b, records),
                                      check_exact=True)
    np.testing.assert_array_equal(a.tbt.counts, b.tbt.counts)


def _short_outputs_workload(n, seed, classes=1):
    """``n`` requests arriving fast, a fifth with one output token (prompts up to 149)."""
    rng = np.random.default_rng(seed)
    output = np.where(rng.random(n) < 0.2, 1, rng.integers(1, 200, n))
    return qt.Workload.from_arrays(np.cumsum(rng.exponential(0.005, n)),
                                   rng.integers(1, 150, n), output, rng.integers(0, classes, n))


def _runs_patched(monkeypatch, owner, name, values, workload, make, **kw):
    """One run of ``workload`` under ``make()`` per value of ``owner.name``."""
    runs = []
    for value in values:
        monkeypatch.setattr(owner, name, value)
        runs.append(qt.simulate(workload, make(), qt.AffineTokenTime(0.01, 5e-5, 4e-5), **kw))
    return runs


def _two_requests():
    return Trace(np.zeros(2), np.array([10, 10]), np.array([20, 20]), np.zeros(2, int),
                 np.array([20, 20]), np.array([20, 20]), np.zeros(2, int))


def test_recompute_preemption_by_hand():
    """Two requests (prompt 10, output 20) in 40 KV tokens, one iteration per time unit.
    Both prefill in iteration 0 (token 1 each); each decode adds a KV token, so iteration 11
    would need 42: the younger request B is preempted holding 10 + 10 tokens, with 11 tokens
    out. A finishes at t = 20; only then do B's prompt and 11 tokens (21) fit: one prefill of
    21 tokens in iteration 20 emits token 12 at t = 21, and tokens 13 … 20 follow to t = 29."""
    res = qt.simulate(_two_requests(), qt.policies.Sarathi(64), qt.UnitTime(), memory=40,
                      first_token="prefill")
    a, b = res.requests.iloc[0], res.requests.iloc[1]
    assert (a["finish"], a["restarts"]) == (20, 0)
    assert (b["restarts"], b["recomputed"], b["decoded"], b["prefilled"]) == (1, 11, 20, 21)
    assert (b["first_token"], b["finish"], b["tbt_max"]) == (1, 29, 10)
    assert b["tbt_mean"] == (29 - 1) / 19                     # 19 gaps: no token twice
    batches = res.batches
    assert batches.loc[11, "evicted"] == 1 and batches.loc[11, "decode_requests"] == 1
    assert batches.loc[20, ["prefill_tokens", "decode_requests"]].tolist() == [21, 0]
    assert batches["memory"].max() == 40
    assert res.table.discarded.sum() == 0


def test_restart_preemption_by_hand():
    """The same run under restart: B's 11 tokens are discarded, its prompt alone is
    prefilled again as soon as it fits, and its tokens are emitted again."""
    res = qt.simulate(_two_requests(), qt.policies.Sarathi(64, preemption="restart"),
                      qt.UnitTime(), memory=40, first_token="prefill")
    b = res.requests.iloc[1]
    assert b["restarts"] >= 1 and b["recomputed"] == 0 and b["first_token"] == 1
    assert res.table.discarded[1] >= 11
    assert res.batches["prefill_tokens"].max() == 20        # never more than the prompts
    assert b["decoded"] == 20 and b["prefilled"] == 10


def test_preemption_is_checked_and_pinned_by_the_papers():
    with pytest.raises(ValueError, match="preemption='swap'"):
        qt.policies.Sarathi(64, preemption="swap")
    assert qt.policies.Orca(64).preemption == "recompute"
    assert qt.policies.KFCFS(qt.policies.Sarathi(64, preemption="restart"), 2, 2).preemption \
        == "restart"
    from queuetheory.policies.kvcache import MCSF
    from queuetheory.policies.robust import AMin
    assert MCSF().preemption == AMin().preemption == "restart"


def test_engine_can_be_driven_directly():
    """Networks drive Engine with add() and step(): requests enter while it runs."""
    eng = Engine(qt.policies.Sarathi(16), qt.UnitTime(), first_token="decode")
    one = Trace(np.zeros(1), np.array([20]), np.array([3]), np.zeros(1, int), np.array([3]),
                np.array([3]), np.zeros(1, int))
    eng.add(one)
    t, finished = 0.0, []
    while eng.live.size:
        dur, fin = eng.step(t)
        t += dur
        finished += fin.tolist()
        if t == 1:
            eng.add(one)
    assert finished == [0, 1]
    assert eng.table.finish[0] == 5          # two prefill rounds, three decode rounds
    assert eng.work == 0


def test_first_token_prefill_convention():
    """With emit_first the prefill iteration emits token 1 (seed 001's rounds)."""
    trace = Trace(np.zeros(1), np.array([5]), np.array([4]), np.zeros(1, int), np.array([4]),
                  np.array([4]), np.zeros(1, int))
    res = qt.simulate(trace, qt.policies.Sarathi(64), qt.UnitTime(), first_token="prefill")
    r = res.requests.iloc[0]
    assert r["finish"] == 4 and r["first_token"] == 1
    # memory in rounds 0..3: s + (t - p) = 5, 6, 7, 8
    assert res.batches["memory"].tolist() == [5, 6, 7, 8]


def test_policy_idles_until_next_arrival():
    class Lazy(qt.policies.Policy):
        def _schedule(self, state):
            if state.n < 2:
                return Batch()
            return qt.policies.Sarathi(100).schedule(state)

    wl = qt.Workload.from_arrays([0.0, 10.0], [4, 4], [2, 2])
    res = qt.simulate(wl, Lazy(), qt.UnitTime())
    assert res.batches["start"].iloc[0] == 10.0
    assert res.metrics["completed"] == 2


@pytest.mark.parametrize("n_gaps", [1000, TBTHistogram.FLUSH + 5])
def test_histogram_intervals_count_each_request_gap(n_gaps):
    """``add_intervals`` (binned at once when there are many gaps) counts gap ``g`` once for
    every request ``i`` with ``lo[i] <= g < hi[i]``, in its class: the same counts as the
    gaps added one by one."""
    rng = np.random.default_rng(3)
    gaps = rng.lognormal(-3, 1, n_gaps)
    lo = rng.integers(0, n_gaps, 400)
    hi = np.minimum(lo + rng.integers(0, 3000, 400), n_gaps)
    cls = rng.integers(0, 3, 400)
    bulk, one_by_one = TBTHistogram(3), TBTHistogram(3)
    bulk.add_intervals(gaps, lo, hi, cls)
    for a, b, c in zip(lo, hi, cls, strict=True):
        one_by_one.add(np.full(b - a, c), gaps[a:b])
    assert bulk.counts.sum() == (hi - lo).sum() > 0
    np.testing.assert_array_equal(bulk.counts, one_by_one.counts)


def test_column_log_first_bulk_write_then_rows():
    log = ColumnLog({"x": float, "k": np.int64}, capacity=4)
    log.extend(6, np.arange(6.0), 7)
    log.append(6.5, 8)
    log.extend(2, np.array([7.0, 8.0]), np.array([9, 10]))
    np.testing.assert_array_equal(log.column("x"), [0, 1, 2, 3, 4, 5, 6.5, 7, 8])
    np.testing.assert_array_equal(log.column("k"), [7] * 6 + [8, 9, 10])
    assert log.column("k").dtype == np.int64


@settings(max_examples=60, deadline=None)
@given(flush=st.integers(1, 9),
       ops=st.lists(st.tuples(st.integers(0, 3), st.integers(1, 5)), min_size=1, max_size=40))
def test_column_log_writes_every_row_in_order(flush, ops):
    """Any mix of rows and blocks (arrays or scalars, several blocks between two rows)
    reads back in the order written, whatever the flush size."""
    ColumnLog.FLUSH, saved = flush, ColumnLog.FLUSH
    try:
        log = ColumnLog({"x": float, "k": np.int64}, capacity=2)
        want_x, want_k, v = [], [], 0
        for kind, k in ops:
            if kind == 0:
                log.append(v + 0.5, v)
                want_x.append(v + 0.5)
                want_k.append(v)
            elif kind == 1:                          # arrays
                log.extend(k, np.arange(v, v + k) + 0.25, np.arange(v, v + k))
                want_x += [x + 0.25 for x in range(v, v + k)]
                want_k += list(range(v, v + k))
            else:                                    # a scalar column, or both
                log.extend(k, np.arange(v, v + k) * 1.0 if kind == 2 else float(v), v)
                want_x += [float(x) for x in range(v, v + k)] if kind == 2 else [float(v)] * k
                want_k += [v] * k
            v += k
        assert log.column("x").tolist() == want_x
        assert log.column("k").tolist() == want_k and log.column("k").dtype == np.int64
    finally:
        ColumnLog.FLUSH = saved


def test_static_priority_refuses_a_class_it_does_not_order():
    wl = qt.Workload([qt.RequestClass(prompt=20, output=5, rate=1.0),
                      qt.RequestClass(prompt=20, output=5, rate=1.0)])
    with pytest.raises(ValueError, match=r"misses classes \[1\]"):
        qt.simulate(wl, qt.policies.StaticPriority(64, [0]), qt.UnitTime(), n_requests=20)


def test_column_log_rows_held_then_written_in_order(monkeypatch):
    """Rows appended one by one (held, then written by column) and bulk writes interleave
    in order, through several flushes and a growth of the columns."""
    monkeypatch.setattr(ColumnLog, "FLUSH", 3)
    log = ColumnLog({"x": float, "k": np.int64}, capacity=4)
    want_x, want_k = [], []
    for i in range(11):
        if i % 4 == 3:
            log.extend(2, np.array([i + 0.5, i + 0.25]), i)
            want_x += [i + 0.5, i + 0.25]
            want_k += [i, i]
        else:
            log.append(i / 3, i * 7)
            want_x.append(i / 3)
            want_k.append(i * 7)
        assert log.n == len(want_x)
    assert log.column("x").tolist() == want_x
    assert log.column("k").dtype == np.int64 and log.column("k").tolist() == want_k
    log.append(1e-300, 2**62)
    frame = log.frame()
    assert frame["x"].iloc[-1] == 1e-300 and frame["k"].iloc[-1] == 2**62
    assert len(frame) == len(want_x) + 1


def test_column_log_interleaved_writes_against_a_plain_list(monkeypatch):
    """Random interleavings of rows and bulk writes (scalars and arrays, blocks before,
    between and after rows, reads in between) store what a plain list of rows would."""
    monkeypatch.setattr(ColumnLog, "FLUSH", 7)
    rng = np.random.default_rng(3)
    log = ColumnLog({"x": float, "k": np.int64}, capacity=5)
    want = []
    for _ in range(300):
        u = rng.random()
        if u < 0.6:
            row = (float(rng.random()), int(rng.integers(1 << 40)))
            log.append(*row)
            want.append(row)
        elif u < 0.95:
            k = int(rng.integers(1, 6))
            x, c = rng.random(k), int(rng.integers(100))
            log.extend(k, x, c)
            want += [(float(v), c) for v in x]
        else:
            assert log.column("k").tolist() == [r[1] for r in want]
        assert log.n == len(want)
    assert log.column("x").tolist() == [r[0] for r in want]
    assert log.column("k").tolist() == [r[1] for r in want]


@pytest.mark.parametrize("class_order", [(0, 2), (2, 0, -1)])
def test_static_priority_refuses_a_missing_class_when_it_lists_others(class_order):
    wl = qt.Workload([qt.RequestClass(prompt=20, output=5, rate=1.0),
                      qt.RequestClass(prompt=20, output=5, rate=1.0)])
    with pytest.raises(ValueError, match=r"misses classes \[1\]"):
        qt.simulate(wl, qt.policies.StaticPriority(64, class_order), qt.UnitTime(),
                    n_requests=20)


@pytest.mark.parametrize("finished", [[], [0], [0, 1, 2], list(range(12)), [3, 4, 9],
                                      [0, 17, 19], list(range(0, 20, 2))])
def test_engine_drops_finished_requests_from_live(finished):
    """A few finished requests (removed run by run), many (by a mask) or the oldest (a
    view of the rest) leave the others in order."""
    eng = Engine(qt.policies.Sarathi(8), qt.UnitTime())
    eng.live = np.arange(20) * 3
    gone = np.array(finished, dtype=np.int64) * 3
    eng._drop(gone)
    assert eng.live.tolist() == [i for i in range(0, 60, 3) if i not in set(gone.tolist())]


def test_live_grows_after_its_head_left_without_touching_older_views():
    """After the oldest requests leave (``live`` becomes a view of the rest), admissions are
    written after it in its buffer while it has room, and in a new one when not; every
    ``live`` handed out before keeps its values."""
    eng = Engine(qt.policies.Sarathi(8), qt.UnitTime())
    eng.live = eng._extended(np.arange(5))
    handed = [(eng.live, eng.live.tolist())]            # each live and its values then
    for step in range(40):
        eng._drop(eng.live[:2])                          # the two oldest leave
        handed.append((eng.live, eng.live.tolist()))
        eng.live = eng._extended(np.arange(5 + 3 * step, 8 + 3 * step))
        handed.append((eng.live, eng.live.tolist()))
    assert eng.live.tolist() == list(range(80, 125))
    assert all(live.tolist() == then for live, then in handed)
    assert sum(live.base is eng._spare for live, _ in handed) > 10   # written in place


def test_result_holds_records_and_its_engine_only_behind_a_deprecation():
    """``simulate``'s Result holds the run's records (request table, batch log, TBT
    histogram, end state); ``res.engine`` still returns the engine, with a warning, for one
    release, and a Result built from records alone has none."""
    import dataclasses

    wl = two_class_workload(rate=0.01)
    res = qt.simulate(wl, qt.policies.Sarathi(256), qt.UnitTime(), horizon=3000.0,
                      memory=4000, seed=2)
    assert isinstance(res.log, ColumnLog) and isinstance(res.tbt, TBTHistogram)
    assert res.iterations == len(res.batches) > 0
    assert res.admitted == int(res.requests["admitted"].sum())
    assert res.metrics["in_system_end"] == res.live.size
    assert res.metrics["unfinished_tokens_end"] == res.work_left
    assert res.kv_left == int(res.table.kv(res.live).sum())
    assert res.metrics["peak_memory"] == res.peak_memory == res.batches["memory"].max()
    with pytest.warns(DeprecationWarning, match="Result.engine"):
        eng = res.engine
    assert isinstance(eng, Engine) and eng.table is res.table and eng.log is res.log
    bare = dataclasses.replace(res, _engine=None)
    assert bare.metrics == res.metrics
    with pytest.warns(DeprecationWarning), pytest.raises(AttributeError, match="records only"):
        bare.engine  # noqa: B018


def test_engine_add_rows_admits_the_same_requests_as_a_taken_trace():
    """``Engine.add(trace, rows=...)`` (the fleet's per-arrival path) admits what
    ``add(trace.take(rows))`` does, prefix blocks included."""
    blocks = np.empty(5, object)
    for i in range(5):
        blocks[i] = np.arange(i + 1, dtype=np.int64)
    z = np.zeros(5, np.int64)
    prompt = np.arange(1, 6) * 16 + 3
    output = np.arange(2, 7)
    tr = qt.Trace(np.arange(5.0), prompt, output, z, output.copy(), output.copy(), z,
                  blocks=blocks, block_size=16)
    a, b = (qt.engine.Engine(qt.policies.VLLMV1(8, 64), qt.AffineTokenTime(0.01, 1e-4, 1e-4))
            for _ in range(2))
    ids_a = a.add(tr, rows=slice(2, 4))
    ids_b = b.add(tr.take(slice(2, 4)))
    assert ids_a.tolist() == ids_b.tolist() == [0, 1]
    for f in ("arrival", "prompt", "output", "cls"):
        assert np.array_equal(a.table.column(f), b.table.column(f))
    assert [x.tolist() for x in a.table.column("blocks")] == [[0, 1, 2], [0, 1, 2, 3]]
    assert a.table.block_size == 16 and a.work == b.work and a.live.tolist() == [0, 1]


@pytest.mark.parametrize("first_token", ["prefill", "decode"])
@pytest.mark.parametrize("make, memory, chunked", [
    (lambda: qt.policies.VLLMVanilla(2048, preemption="restart"), 6000, False),
    (lambda: qt.policies.Sarathi(512), 5000, True),
    (lambda: qt.policies.Orca(1024), None, True),
])
def test_few_members_in_plain_integers_are_the_array_path(monkeypatch, make, memory, chunked,
                                                          first_token):
    """The prefill members of a batch, and the requests whose prefill ends in it, are taken
    one by one in plain integers when they are few (``core._FEW``), else as arrays: the
    two ways give the same records (request stamps, batch log, TBT histogram) and the same
    ledger (checked at every decision against the columns' sums) through
    chunked and whole prompts, several prompts ending in one batch, outputs of one token and
    evictions."""
    from queuetheory.engine import core

    n = 400
    workload = _short_outputs_workload(n, seed=11)
    state_of, decisions = Engine.state, []

    def ledger_checked(engine, t):      # the ledger the two ways keep, at every decision
        state = state_of(engine, t)
        whole = qt.engine.State(engine.table, engine.live, t, engine.token_budget,
                                engine.memory)
        assert state.__dict__["promised"] == whole.promised
        assert state.__dict__["n_prefilling"] == whole.n_prefilling
        decisions.append(whole.n_prefilling)
        return state

    monkeypatch.setattr(Engine, "state", ledger_checked)
    arrays, one_by_one = _runs_patched(monkeypatch, core, "_FEW", (0, 10**9), workload, make,
                                       memory=memory, first_token=first_token, fast_path=False)
    _assert_same_records(arrays, one_by_one)
    assert arrays.metrics["completed"] == n
    assert (arrays.batches["prefill_requests"] > 8).sum() > 2    # many members, both ways
    assert (sum(k > 0 for k in decisions) > 20) == chunked      # prefills under way
    if memory is not None:
        assert arrays.metrics["restarts"] > 0


@pytest.mark.parametrize("first_token", ["prefill", "decode"])
@pytest.mark.parametrize("make, memory, fast_path, classes", [
    (lambda: qt.policies.VLLMVanilla(2048, preemption="restart"), 6000, False, 1),
    (lambda: qt.policies.Sarathi(512), 5000, False, 1),
    (lambda: qt.policies.StaticPriority(512, (1, 0)), 5000, False, 2),
    (lambda: qt.policies.Orca(1024), None, False, 1),
    (lambda: qt.policies.Sarathi(512), None, True, 1),
    (lambda: qt.policies.Sarathi(512), 5000, True, 1),
])
def test_fresh_decodes_are_what_the_columns_say(monkeypatch, make, memory, fast_path,
                                                classes, first_token):
    """Where the engine's books say every request in decode emitted its last token at the
    batch's start and has output left (``Engine._fresh_decodes``, which spares the check,
    the KV count and the stamps a read of the columns), the columns say so too, at every
    decision; and runs that never trust the books give the same records."""
    n = 400
    workload = _short_outputs_workload(n, seed=5, classes=classes)
    books, claims = Engine._fresh_decodes, []

    def checked(engine, t):
        fresh = books(engine, t)
        if fresh:
            live, tab = engine.live, engine.table
            dec = live[tab.in_decode[live]]
            assert (tab.last_token[dec] == t).all() and (tab.decoded[dec] < tab.output[dec]).all()
            assert (tab.decoded[dec] > tab.recomputed[dec]).all()    # a token since prefill
            claims.append(dec.size)
        return fresh

    trusted, read = _runs_patched(monkeypatch, Engine, "_fresh_decodes",
                                  (checked, lambda engine, t: False), workload, make,
                                  memory=memory, first_token=first_token, fast_path=fast_path)
    _assert_same_records(trusted, read)
    assert trusted.metrics["completed"] == n
    if not fast_path:                   # (the fast path's stretches and bulk runs reset it)
        assert sum(k > 0 for k in claims) > 0.2 * trusted.iterations
        assert (trusted.metrics["restarts"] > 0) == (memory is not None)


def test_fresh_decodes_are_forgotten_when_the_table_moves_outside():
    """A bulk runner or a network that moves the table and hands ``live`` back makes the
    engine recount its books at the next decision, and forget which requests emitted at
    the last batch's end (``Engine._fresh_decodes``)."""
    z = np.zeros(6, np.int64)
    output = np.full(6, 50)
    engine = Engine(qt.policies.Sarathi(512), qt.AffineTokenTime(0.01, 5e-5, 4e-5))
    engine.add(Trace(np.zeros(6), np.full(6, 30), output, z, output.copy(), output.copy(), z))
    t, fresh = 0.0, []
    for _ in range(4):
        t += engine.step(t)[0]
        fresh.append(engine._fresh_decodes(t))
    assert fresh[-1]                      # six decodes, every one emitted at t
    engine.table.last_token[engine.live[0]] = t / 2    # as a runner would move it
    engine.live = engine.live.copy()
    engine.state(t)
    assert not engine._fresh_decodes(t)

"""The steady stretches of Bari, Hegde and de Veciana's stepped schedulers change nothing.

RAD and the cycle scheduler (Alg. 2) promise ``steady`` and ``drains``, both and request-level
batching (Alg. 3) ``decodes_through``; SLAI with a KV-memory limit (no bulk
rule there) promises ``steady`` with books (:meth:`SLAI.repeated`). Each run is made with
``fast_path=False`` and with the fast path: request stamps, the batch log row by row, the TBT
histogram, every metric and the policy's own books identical, and the fast path must have
skipped decisions.
"""

import dataclasses

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from test_fast_path import ANCHOR_TIME, _counting, _same_records

import queuetheory as qt
from queuetheory.engine import Engine
from queuetheory.policies import RAD, SLAI, CycleScheduler, RequestLevel


def _lognormal(median, sigma=0.8):
    return stats.lognorm(s=sigma, scale=median)


def _workload(rate, classes=1):
    return qt.Workload([qt.RequestClass(_lognormal(200), _lognormal(150), rate=rate / classes,
                                        priority=c) for c in range(classes)])


def _same_books(workload, make_policy, time_model, **kw):
    policies = []

    def made():
        policies.append(make_policy())
        return policies[-1]

    slow, n_slow, n_fast = _same_records(workload, made, time_model, **kw)
    assert 0 < n_fast < n_slow                           # decisions were skipped
    return slow, policies


@pytest.mark.parametrize("first_token", ["prefill", "decode"])
@pytest.mark.parametrize("make_policy", [
    lambda: SLAI(512, tbt=(0.5,)),
    lambda: SLAI(512, tbt=(0.5, 0.1), paying_first=True, offset="dynamic", beta=24),
    lambda: SLAI(256, alpha=12, beta=None, order="fcfs", tbt=(0.05,)),
    lambda: SLAI.sarathi(512),
], ids=["paper", "two-classes-dynamic", "alpha-fcfs", "sarathi"])
def test_slai_with_memory_same_records_and_books(make_policy, first_token):
    res, (slow, fast) = _same_books(_workload(6.0, classes=2), make_policy, ANCHOR_TIME,
                                    n_requests=160, memory=6000, first_token=first_token)
    assert res.metrics["completed"] == 160
    assert (fast._mean, fast._count, fast._prev_time) == (slow._mean, slow._count,
                                                          slow._prev_time)
    np.testing.assert_array_equal(np.sort(slow._prev_rids), np.sort(fast._prev_rids))
    np.testing.assert_array_equal(slow._e, fast._e)


@pytest.mark.parametrize("cut", [{"horizon": 15.0}, {"max_iterations": 900}],
                         ids=["horizon", "iteration-cap"])
def test_slai_with_memory_stops_mid_stretch_the_same(cut):
    _same_books(_workload(8.0), lambda: SLAI(512, tbt=(0.5,)), ANCHOR_TIME, n_requests=300,
                memory=5000, **cut)


TILE = (64, 128, 32)
#: a time model that reads the context (not the token counts alone): the stretches' batch
#: times depend on their members' KV
CONTEXT_TIME = qt.LinearMemoryTime(d0=16.1e-3, d1=2e-7)


def _model(make_policy):
    """RequestLevel's stretches through arrivals are tested under a time model that reads
    the context here (under the anchor's token counts below)."""
    return CONTEXT_TIME if isinstance(make_policy(), RequestLevel) else ANCHOR_TIME


@pytest.mark.parametrize("make_policy", [
    lambda: RAD(TILE),
    lambda: RAD(TILE, n=6),
    lambda: RAD(TILE, n=4, strict_cycles=True),
    lambda: CycleScheduler(TILE, n=12),
    lambda: CycleScheduler((32, 16, 32)),
    lambda: RequestLevel(16),
], ids=["rad", "rad-n", "rad-strict", "cycle", "cycle-small-tile", "request-level"])
@pytest.mark.parametrize("rate", [1.0, 4.0], ids=["light", "heavy"])
def test_tiled_schedulers_same_records_and_cycles(make_policy, rate):
    res, (slow, fast) = _same_books(_workload(rate), make_policy, _model(make_policy),
                                    n_requests=150, first_token="prefill")
    if hasattr(slow, "cycles"):
        pd.testing.assert_frame_equal(slow.cycles(res), fast.cycles(res))


@pytest.mark.parametrize("cut", [{"horizon": 20.0}, {"max_iterations": 700}],
                         ids=["horizon", "iteration-cap"])
@pytest.mark.parametrize("make_policy", [lambda: RAD(TILE), lambda: CycleScheduler(TILE, n=8),
                                         lambda: RequestLevel(8)],
                         ids=["rad", "cycle", "request-level"])
def test_tiled_schedulers_stop_mid_stretch_the_same(make_policy, cut):
    _same_books(_workload(4.0), make_policy, _model(make_policy), n_requests=400, **cut)


@pytest.mark.parametrize("cut", [{}, {"horizon": 20.0}, {"max_iterations": 700}],
                         ids=["drained", "horizon", "iteration-cap"])
@pytest.mark.parametrize("first_token", ["prefill", "decode"])
@pytest.mark.parametrize("batch_size", [1, 8, 64])
def test_request_level_cohorts_decode_through_arrivals(batch_size, first_token, cut):
    """Request-level batching steps under a token-count model too (no bulk rule): a
    cohort's prefill is one decision, its decode phase another and one stretch through the
    arrivals (``decodes_through``), and the records are those of stepping."""
    res, n_slow, n_fast = _same_records(_workload(4.0), lambda: RequestLevel(batch_size),
                                        ANCHOR_TIME, n_requests=400, first_token=first_token,
                                        **cut)
    batches = res.batches
    cohorts = int((batches["prefill_requests"] > 0).sum())
    assert n_fast <= 3 * cohorts < n_slow
    cohort = batches["prefill_requests"].max()          # whole cohorts in one batch
    assert cohort <= batch_size and (cohort > 1 or batch_size == 1)
    assert (batches["prefill_requests"] * batches["decode_requests"] == 0).all()


def _decisions_without_through(workload, make_policy, **kw):
    """Decisions of the fast run with :meth:`decodes_through` masked on the instance."""
    policy = make_policy()
    policy.decodes_through = lambda state, batch: False
    calls = _counting(policy)
    qt.simulate(workload, policy, ANCHOR_TIME, **kw)
    return calls["n"]


@pytest.mark.parametrize("empty", [False, True], ids=["prompts", "some-empty-prompts"])
@pytest.mark.parametrize("first_token", ["prefill", "decode"])
@pytest.mark.parametrize("make", [lambda: CycleScheduler(TILE), lambda: CycleScheduler(TILE, n=12),
                                  lambda: RAD(TILE, n=4)], ids=["cycle", "cycle-n", "rad-n"])
def test_decode_phases_run_through_arrivals(make, first_token, empty):
    """In decode mode, with every request in decode in its batch, the cycle scheduler
    promises that the members decode to their last tokens whatever arrives
    (``decodes_through``), as RAD does once ``n`` requests started in its cycle: the engine
    runs them in one stretch, admitting the arrivals on the way (and stopping before one that
    arrives in decode: an empty prompt joins ``D``). The records are stepping's, and the
    promise saves decisions over the stretches that end at each completion or arrival."""
    workload = _workload(4.0)
    kw = {"n_requests": 300}
    if empty:        # a trace allows empty prompts (a workload does not)
        trace = workload.sample(n_requests=300, seed=2)
        prompt = trace.prompt * (np.random.default_rng(4).random(300) > 0.1)
        workload, kw = dataclasses.replace(trace, prompt=prompt), {}
    res, n_slow, n_fast = _same_records(workload, make, ANCHOR_TIME, first_token=first_token,
                                        **kw)
    assert res.metrics["completed"] == 300
    assert n_fast < 0.8 * _decisions_without_through(workload, make, first_token=first_token,
                                                     **kw)


@pytest.mark.parametrize("first_token", ["prefill", "decode"])
@pytest.mark.parametrize("cut", [{}, {"horizon": 12.0}], ids=["drained", "horizon"])
@pytest.mark.parametrize("t_col", [4, 16])
def test_rad_decodes_through_while_t_col_members_are_left(t_col, cut, first_token):
    """RAD's decode batch of all of ``D`` with at least ``t*_col`` members repeats, less
    those that finish, whatever arrives, until fewer than ``t*_col`` are left
    (:meth:`RAD.decodes_through`'s ``(0, r)``): on a load where ``D`` holds ``t*_col`` or
    more, the records are stepping's, and the promise saves decisions over stretches that
    end at each completion or arrival — also after a batch that ends past the next
    arrival, where only a promise through arrivals may go on."""
    make = lambda: RAD((8, t_col, 8))                     # noqa: E731
    workload = _workload(12.0)
    res, n_slow, n_fast = _same_records(workload, make, ANCHOR_TIME, n_requests=300,
                                        first_token=first_token, **cut)
    assert (res.batches["decode_requests"] >= t_col).sum() > 100
    assert n_fast < 0.95 * _decisions_without_through(workload, make, n_requests=300,
                                                      first_token=first_token, **cut)


def _decisions_without_last_chunk(workload, make_policy, time_model, **kw):
    """Decisions of the fast run with :meth:`steady_chunk`'s last chunk masked on the
    instance (its count alone: the engine stops before the last chunk)."""
    policy = make_policy()
    promise = policy.steady_chunk
    policy.steady_chunk = lambda state, batch: np.atleast_1d(promise(state, batch))[0]
    calls = _counting(policy)
    qt.simulate(workload, policy, time_model, **kw)
    return calls["n"]


@pytest.mark.parametrize("first_token", ["prefill", "decode"])
@pytest.mark.parametrize("time_model", [ANCHOR_TIME, CONTEXT_TIME], ids=["counts", "context"])
@pytest.mark.parametrize("cut", [{}, {"horizon": 150.0}, {"max_iterations": 6000}],
                         ids=["drained", "horizon", "iteration-cap"])
@pytest.mark.parametrize("make", [lambda: RAD(TILE), lambda: CycleScheduler(TILE, n=8)],
                         ids=["rad", "cycle"])
def test_prefills_run_to_their_last_chunk(make, cut, time_model, first_token):
    """A prefill under way goes on alone in chunks of ``t_lcm`` and then the rest of its
    prompt (:meth:`steady_chunk`'s ``(n, True)``): the engine runs the last chunk in the
    stretch, in closed form and batch by batch, cut by a horizon or an iteration cap. The
    records are stepping's, and the last chunk saves decisions over stretches that stop
    before it (prompts of median 200 tokens, chunks of 128)."""
    workload = _workload(1.0)
    kw = {"n_requests": 300, "first_token": first_token, **cut}
    res, n_slow, n_fast = _same_records(workload, make, time_model, **kw)
    chunked = res.requests["prompt"] > TILE[1]
    assert chunked.sum() > 50
    masked = _decisions_without_last_chunk(workload, make, time_model, **kw)
    assert n_fast < 0.9 * masked


@pytest.mark.parametrize("time_model", [ANCHOR_TIME, CONTEXT_TIME], ids=["counts", "context"])
@pytest.mark.parametrize("cap", range(1, 9))
def test_last_chunk_within_the_iteration_cap(cap, time_model):
    """One prompt of five chunks of ``t_lcm`` and a rest of 50 tokens, then three tokens:
    under an iteration cap, the stretch after the first chunk runs the last chunk only
    where the cap leaves it a batch, as stepping does."""
    trace = _workload(1.0).sample(n_requests=1, seed=0)
    trace = dataclasses.replace(trace, prompt=np.array([5 * TILE[1] + 50]),
                                output=np.array([3]))
    res, _, _ = _same_records(trace, lambda: RAD(TILE), time_model, max_iterations=cap)
    assert res.iterations == min(cap, 8)
    assert (res.batches["prefill_tokens"] == TILE[1]).sum() == min(cap, 5)


def test_a_stretch_through_arrivals_admits_them():
    """``Engine.advance(t, until, most, horizon=)``: a stretch the policy promises through
    arrivals runs past ``until`` (the next arrival) and returns with every pre-loaded request
    that arrived before its last batch's start admitted, as stepping admits them; driven this
    way the engine keeps the records of ``simulate`` without a fast path."""
    trace = _workload(4.0).sample(n_requests=200, seed=1)
    policy = CycleScheduler(TILE, n=12)
    policy.reset()
    engine = Engine(policy, ANCHOR_TIME, first_token="prefill")
    engine.load(trace, final=True)
    t, past = 0.0, 0
    while engine.live.size or engine.next_arrival() < np.inf:
        engine.admit_until(t)
        if not engine.live.size:
            t = engine.next_arrival()
            continue
        until = engine.next_arrival()
        out = engine.advance(t, until, 1 << 62, horizon=np.inf)
        t = out[0] if isinstance(out, tuple) else until
        last_start = engine.log.column("start")[-1]
        assert engine.next_arrival() > last_start        # admitted before its last batch
        past += t > until
    assert past > 5                                       # stretches ran through arrivals
    steps = qt.simulate(trace, CycleScheduler(TILE, n=12), ANCHOR_TIME, fast_path=False)
    pd.testing.assert_frame_equal(engine.log.frame(), steps.batches, check_exact=True)


def test_a_subclass_that_decides_otherwise_steps():
    class Mine(RAD):
        def _schedule(self, state):
            return super()._schedule(state)

    class Slai(SLAI):
        def _schedule(self, state):
            return super()._schedule(state)

    class Cycle(CycleScheduler):
        def _schedule(self, state):
            return super()._schedule(state)

    for make, kw in ((lambda: Mine(TILE), {}), (lambda: Mine(TILE, n=4), {}),
                     (lambda: Slai(512), {"memory": 6000}), (lambda: Cycle(TILE, n=12), {})):
        res, n_slow, n_fast = _same_records(_workload(4.0), make, ANCHOR_TIME,
                                            n_requests=80, **kw)
        assert n_fast == n_slow == res.iterations


class _Checked(SLAI):
    """SLAI deciding from its books (as shipped) and asserting at every decision that the
    whole state gives the same batch; counts decisions, admissions and evictions."""

    def _reset(self):
        super()._reset()
        self._kept = True            # a subclass reads the state; this one its books
        self.seen = {"decided": 0, "admitted": 0, "evicted": 0, "evicted_prefilling": 0,
                     "evicted_every_decode": 0, "evicted_some_decodes": 0}

    def _decide(self, state, books):
        batch = super()._decide(state, books)
        if books is not None:
            whole = super()._decide(state, None)
            for part in ("prefill", "chunk", "decode", "evict"):
                np.testing.assert_array_equal(getattr(batch, part), getattr(whole, part))
            self.seen["decided"] += 1
            self.seen["admitted"] += int(np.count_nonzero(state.kv[batch.prefill] == 0))
            self.seen["evicted"] += batch.evict.size
            if batch.evict.size:             # which of the books' eviction paths was taken
                decoding = np.count_nonzero(state.in_decode[batch.evict])
                self.seen["evicted_prefilling"] += batch.evict.size - decoding
                every = batch.decode.size + decoding == books.dec.size
                self.seen["evicted_every_decode" if every else "evicted_some_decodes"] += 1
        return batch


@pytest.mark.parametrize("first_token", ["prefill", "decode"])
@pytest.mark.parametrize(("kw", "path"), [
    ({"tbt": (0.5,)}, "evicted_every_decode"),
    ({"tbt": (0.5, 0.1), "paying_first": True, "offset": "dynamic", "beta": 24},
     "evicted_some_decodes"),
    ({"alpha": 12, "beta": None, "order": "fcfs", "tbt": (0.05,)}, "evicted_prefilling"),
    ({"order": "fcfs", "paying_first": True, "tbt": (0.2, 0.1)}, "evicted_every_decode"),
], ids=["paper", "two-classes-dynamic", "alpha-fcfs", "fcfs-paying"])
def test_slai_books_decide_as_the_whole_state(kw, path, first_token):
    """SLAI keeps its decodes, part-way prefills and waiting queue between decisions
    (arrivals, admissions, finished prefills, finishes and evictions): every batch the one
    the whole state gives, through admissions and evictions — by each path of the books'
    evictions (``path``: with every decode in the batch, with some of them under ``β``, a
    part-way prefill evicted)."""
    policy = _Checked(512, **kw)
    res = qt.simulate(_workload(9.0, classes=2), policy, ANCHOR_TIME, n_requests=300,
                      memory=4000, first_token=first_token, fast_path=False)
    assert res.metrics["completed"] == 300
    assert policy.seen["decided"] == res.iterations
    assert policy.seen["admitted"] == 300 + policy.seen["evicted"] and policy.seen["evicted"]
    assert policy.seen[path] > 0


def test_slai_books_only_for_the_states_its_batches_reach():
    """Asked twice about one state (the first batch never ran), or about a state with an
    empty prompt, SLAI decides from the whole state."""
    from queuetheory.engine import State
    from queuetheory.engine.state import RequestTable
    from queuetheory.workload import Trace

    n = 5
    prompt, output = np.array([50, 70, 30, 90, 40]), np.full(5, 20)
    table = RequestTable(True)
    table.append(Trace(np.zeros(n), prompt, output, np.zeros(n, int), output, output,
                       np.zeros(n, int)))
    table.set_progress(np.arange(2), np.array([50, 20]), np.array([3, 0]))
    state = State(table, np.arange(n), 0.0, 64, 1000)
    policy = SLAI(64)
    policy.reset(0)
    first = policy.schedule(state)
    assert policy._books is not None and first.prefill.tolist() == [1, 2]  # 2 admitted
    again = policy.schedule(State(table, np.arange(n), 0.0, 64, 1000))
    assert again.prefill.tolist() == first.prefill.tolist()
    assert again.chunk.tolist() == first.chunk.tolist()
    table.prompt[4] = 0                                # an empty prompt: no books
    table.in_decode[4] = True
    policy.reset(0)
    policy.schedule(State(table, np.arange(n), 0.0, 64, 1000))
    assert policy._books is None


def test_slai_books_evict_a_decode_member_once():
    """An evicted request that the batch decodes frees its decode token too: the youngest
    holder of KV (one token, decoded first under ``β = 2`` as its last token is the oldest)
    alone covers an overflow of two tokens, read from the books as from the whole state."""
    from queuetheory.engine import State
    from queuetheory.engine.state import RequestTable
    from queuetheory.workload import Trace

    prompt, output = np.array([10, 10, 10, 1]), np.full(4, 20)
    table = RequestTable(True)
    table.append(Trace(np.zeros(4), prompt, output, np.zeros(4, int), output, output,
                       np.zeros(4, int)))
    table.set_progress(np.arange(4), prompt, 1)      # in decode, 31 KV tokens in all
    policy = SLAI(64, beta=2, tbt=(0.5,))
    policy.reset(0)
    policy._e[3] = -1.0
    batch = policy.schedule(State(table, np.arange(4), 0.0, 64, 31))
    assert policy._books is not None
    assert batch.evict.tolist() == [3] and batch.decode.tolist() == [0]
    whole = policy._decide(State(table, np.arange(4), 0.0, 64, 31), None)
    for part in ("prefill", "chunk", "decode", "evict"):
        np.testing.assert_array_equal(getattr(batch, part), getattr(whole, part))

"""The engine's memory ledger (``State.promised``, ``n_prefilling``, ``n_decode``,
``memory_used``) kept by deltas equals the sums of the whole columns at every decision.

The engine hands a policy the ledger's sums; a view built without them sums its columns.
Each run here checks, at every decision the engine asks for (its ``state``), that the two
agree, through admissions, chunked and whole prefills, several prompts ending in one batch,
finishes (outputs of one token too), evictions under recompute and restart preemption, both
first-token conventions, the fast path on and off, a prefix cache's credits, and a bulk
runner handing the engine back part-way. Each run must also reach the states the ledger is
about (part-way prefills promising KV, evictions), or it would prove nothing.
"""

import dataclasses

import numpy as np
import pytest

import queuetheory as qt
from queuetheory.engine import Engine, State
from queuetheory.engine.kernels import bulk_runner
from queuetheory.policies import AMin, FCFSRestart, Orca, Sarathi, VLLMVanilla
from queuetheory.policies.base import admissible

ANCHOR_TIME = qt.AffineTokenTime(c=16.1e-3, per_prefill=57.8e-6, per_decode=39.5e-6)
MEMORY_TIME = qt.LinearMemoryTime(0.01, 1e-6)


@pytest.fixture
def seen(monkeypatch):
    """Check the ledger at every decision (every ``Engine.state``); count what was seen."""
    counts = {"decisions": 0, "promised": 0, "decoding": 0}
    state_of = Engine.state

    def checked(engine, t):
        state = state_of(engine, t)
        whole = State(engine.table, engine.live, t, engine.token_budget, engine.memory)
        assert state.__dict__["promised"] == whole.promised, (engine.iteration, t)
        assert state.__dict__["n_decode"] == whole.n_decode, (engine.iteration, t)
        assert state.__dict__["n_prefilling"] == whole.n_prefilling, (engine.iteration, t)
        assert state.memory_used == int(whole.kv.sum())
        counts["decisions"] += 1
        counts["promised"] += whole.promised > 0
        counts["decoding"] += whole.n_decode > 0
        return state

    monkeypatch.setattr(Engine, "state", checked)
    return counts


def _workload(n=400, seed=5, intervals=False, empty=False):
    """Prompts of up to 900 tokens, outputs of up to 300 (a fifth of one token); with
    ``intervals`` the output lengths are known only to within ``[o/2, 1.5o + 1]``; with
    ``empty`` a tenth of the prompts are empty (in decode from their arrival; a trace
    allows them, a workload does not)."""
    rng = np.random.default_rng(seed)
    output = np.where(rng.random(n) < 0.2, 1, rng.integers(1, 300, n))
    prompt = rng.integers(1, 900, n)
    if empty:
        trace = _workload(n, seed, intervals).sample(n_requests=n, seed=0)
        return dataclasses.replace(trace, prompt=prompt * (rng.random(n) > 0.1))
    lo, hi = (np.maximum(1, output // 2), output + output // 2 + 1) if intervals else (None,
                                                                                       None)
    return qt.Workload.from_arrays(np.cumsum(rng.exponential(0.03, n)), prompt, output,
                                   lo=lo, hi=hi)


CASES = {
    "sarathi-recompute": (lambda: Sarathi(512, order="sjf_total"), ANCHOR_TIME, 5000),
    "sarathi-restart": (lambda: Sarathi(512, preemption="restart"), ANCHOR_TIME, 5000),
    "sarathi-restart-empty-prompts": (lambda: Sarathi(512, preemption="restart"), ANCHOR_TIME,
                                      5000),
    "sarathi-memory-time": (lambda: Sarathi(256), MEMORY_TIME, 4000),
    "orca-recompute": (lambda: Orca(256), MEMORY_TIME, 5000),
    "vllm-whole-prompts": (lambda: VLLMVanilla(2048, preemption="restart"), ANCHOR_TIME, 5000),
    "fcfs-restart": (lambda: FCFSRestart(), ANCHOR_TIME, 5000),
    "a-min": (lambda: AMin(), MEMORY_TIME, 5000),
}


@pytest.mark.parametrize("first_token", ["prefill", "decode"])
@pytest.mark.parametrize("fast_path", [False, True])
@pytest.mark.parametrize("case", sorted(CASES))
def test_ledger_is_the_columns_sums_at_every_decision(seen, case, fast_path, first_token):
    make, time_model, memory = CASES[case]
    policy = make()
    if policy.supports(memory=memory, first_token=first_token) is not None:
        pytest.skip("the policy refuses this setting")
    res = qt.simulate(_workload(intervals=case == "a-min", empty=case.endswith("empty-prompts")),
                      policy, time_model, memory=memory,
                      first_token=first_token, fast_path=fast_path)
    assert res.metrics["completed"] == 400
    assert seen["decisions"] > 100 and seen["decoding"] > 100
    if case.startswith(("sarathi", "orca")):     # the others prefill whole prompts
        assert seen["promised"] > 20
    assert res.metrics["restarts"] > 0


@pytest.mark.parametrize("fast_path", [False, True])
@pytest.mark.parametrize("time_model", [ANCHOR_TIME, MEMORY_TIME])
@pytest.mark.parametrize("caching", [False, True])
def test_ledger_with_a_prefix_cache(seen, caching, time_model, fast_path):
    """VLLMV1 (its own block books; preempts by recompute) on conversations that share
    prefixes: cached tokens are credited to a prefill's first chunk."""
    trace = qt.data.mooncake_trace("conversation")
    trace = trace.take(np.flatnonzero(trace.prompt + trace.output <= 10_000)[:150])
    policy = qt.policies.VLLMV1(32, 1024, num_gpu_blocks=1500, enable_prefix_caching=caching)
    res = qt.simulate(trace, policy, time_model, fast_path=fast_path)
    assert seen["decisions"] > 100 and seen["promised"] > 20
    assert (res.requests["cached"].sum() > 0) == caching


@pytest.mark.parametrize("first_token", ["prefill", "decode"])
def test_ledger_recounted_where_a_bulk_runner_hands_the_engine_back(seen, first_token):
    trace = _workload().sample(n_requests=400, seed=0)
    policy = Sarathi(512)
    engine = Engine(policy, ANCHOR_TIME, memory=5000, token_budget=512,
                    first_token=first_token, capacity=len(trace))
    engine.load(trace, final=True)
    policy.reset()
    t = bulk_runner(engine, policy)(0.0, 3.0, np.inf)   # part-way: requests in the system
    assert seen["decisions"] == 0 and engine.live.size > 50 and engine.iteration > 100
    while engine.live.size or engine.next_arrival() < np.inf:
        engine.admit_until(t)
        t = engine.advance(t, engine.next_arrival())[0] if engine.live.size else (
            engine.next_arrival())
    assert seen["decisions"] > 100 and seen["promised"] > 20


def test_ledger_of_requests_added_with_and_without_their_prefill(seen):
    """``Engine.add``: arrivals with nothing done, and arrivals handed over in decode with
    their KV (a disaggregated decode node), some with empty prompts."""
    trace = _workload(empty=True)
    trace = dataclasses.replace(trace, output=trace.output + 1)   # none done when handed over
    engine = Engine(Sarathi(512), ANCHOR_TIME, memory=20000, token_budget=512)
    t = 0.0
    for start in range(0, 400, 20):
        rows = slice(start, start + 20)
        ready = None if start % 40 else trace.arrival[rows]
        engine.add(trace, ready, rows=rows)
        for _ in range(10):
            if engine.live.size:
                t = engine.advance(t)[0]
    while engine.live.size:
        t = engine.advance(t)[0]
    assert seen["decisions"] > 200 and seen["promised"] > 20


def test_admissible_read_in_prefixes_keeps_what_the_whole_read_keeps():
    """``admissible(..., most=m)`` is the first ``m`` of what reading every candidate keeps,
    for candidates in arrival order and shuffled (residents part-way through their prefill
    anywhere among them), and it often stops reading before the last candidate."""
    from queuetheory.policies.base import admissible

    res = qt.simulate(_workload(n=2000), Sarathi(128), ANCHOR_TIME, memory=6000,
                      fast_path=False, max_iterations=900)
    tab, live = res.table, res.live
    rng = np.random.default_rng(3)
    waiting = live[(tab.kv(live) == 0) & (tab.prompt[live] > 1)]
    begun = np.sort(np.concatenate([rng.choice(waiting[:50], 5, replace=False),
                                    rng.choice(waiting[200:240], 1)]))   # part-way
    tab.set_progress(begun, tab.prompt[begun] // 2)
    early = cut = 0
    for _ in range(300):
        state = State(tab, live, 0.0, 128, int(rng.integers(2000, 40000)))
        pre = np.flatnonzero(~state.in_decode)
        cands = rng.permutation(pre) if rng.random() < 0.5 else pre
        cands = cands[: int(rng.integers(1, cands.size + 1))]
        most = int(rng.integers(0, 12 if rng.random() < 0.5 else 300))
        whole = admissible(State(tab, live, 0.0, 128, state.memory), cands)
        read = []
        state.of = lambda name, at, state=state, read=read: (read.append(len(at))
                                                              or State.of(state, name, at))
        part = admissible(state, cands, most=most)
        np.testing.assert_array_equal(part, whole[:most])
        early += max(read) < cands.size
        cut += whole.size > most
    assert state.n_prefilling == 6 and early > 50 and cut > 50


def test_live_ids_handed_out_stay_as_they_were(monkeypatch):
    """The engine appends arrivals to ``live`` in place, after its end: a view's ids
    (``State.rid``) handed out at an earlier decision never change."""
    kept, state_of = [], Engine.state

    def keep(engine, t):
        state = state_of(engine, t)
        kept.append((state.rid, state.rid.copy()))
        return state

    monkeypatch.setattr(Engine, "state", keep)
    res = qt.simulate(_workload(), Sarathi(512, preemption="restart"), ANCHOR_TIME,
                      memory=5000, fast_path=False)
    assert res.metrics["completed"] == 400 and len(kept) > 1000
    bases = [rid.base for rid, _ in kept]
    assert sum(a is b for a, b in zip(bases, bases[1:], strict=False)) > 100   # in place
    for rid, ids in kept:
        np.testing.assert_array_equal(rid, ids)


def _record_prefix_reads(state, read):
    """Make ``state.of`` note how far each read of a prefix (a slice) reaches, in ``read``."""
    state.of = lambda name, at, state=state, read=read: (
        read.append(at.stop) if isinstance(at, slice) else None) or State.of(state, name, at)


def _run_overloaded(make, memory):
    """3,000 requests at four times the rate (a long queue), stepped for 3,000 iterations."""
    trace = _workload(n=3000).sample(n_requests=3000, seed=0)
    trace = dataclasses.replace(trace, arrival=trace.arrival / 4)
    qt.simulate(trace, make(), ANCHOR_TIME, memory=memory, fast_path=False, max_iterations=3000)


@pytest.mark.parametrize("make", [lambda: Sarathi(512), lambda: Sarathi(512, max_reqs=40),
                                  lambda: Orca(256), lambda: VLLMVanilla(512),
                                  lambda: qt.policies.FasterTransformer(512)])
@pytest.mark.parametrize("memory", [None, 6000])
def test_fcfs_candidates_read_in_prefixes_are_the_whole_reads(monkeypatch, make, memory):
    """FCFS candidates read in prefixes of a long queue: the first ``token_budget`` decode
    candidates and the admissible prefill candidates of the whole read, at every decision,
    and the read stops early at most of them."""
    from queuetheory.policies.base import ordered
    from queuetheory.policies.classic import _TokenBudgetPolicy

    fcfs, seen = _TokenBudgetPolicy._fcfs_candidates, {"early": 0, "all": 0}

    def checked(policy, state):
        read = []
        _record_prefix_reads(state, read)
        pre, dec = fcfs(policy, state)
        in_decode = state._t.in_decode[state.rid]
        whole = admissible(state, ordered(state, np.flatnonzero(~in_decode), "fcfs"),
                           policy._decodes_beside_prefills(int(in_decode.sum())))
        most = policy.token_budget
        np.testing.assert_array_equal(pre, whole[:most])
        np.testing.assert_array_equal(dec[:most], np.flatnonzero(in_decode)[:most])
        seen["all"] += 1
        seen["early"] += max(read) < state.n
        return pre, dec

    monkeypatch.setattr(_TokenBudgetPolicy, "_fcfs_candidates", checked)
    _run_overloaded(make, memory)
    assert seen["all"] > 1000 and seen["early"] > 300


def test_fcfs_candidates_with_decodes_and_residents_late_in_the_queue():
    """Hand-built queues where requests in decode and part-way prefills sit anywhere (a
    network's handed-over requests, a user's state): the prefix read still returns the
    whole read's first ``token_budget`` of each."""
    res = qt.simulate(_workload(n=2000), Sarathi(128), ANCHOR_TIME, memory=6000,
                      fast_path=False, max_iterations=900)
    tab, live = res.table, res.live
    rng = np.random.default_rng(4)
    waiting = live[(tab.kv(live) == 0) & (tab.prompt[live] > 1)]
    late = rng.choice(waiting[100:], 40, replace=False)
    tab.set_progress(late[:30], tab.prompt[late[:30]], 1)                 # in decode
    tab.set_progress(late[30:], tab.prompt[late[30:]] // 2)               # part-way
    early, edge = 0, int(np.count_nonzero(tab.in_decode[live[:256]])) + 1   # one past 256
    for _ in range(200):
        policy = Sarathi(edge if rng.random() < 0.3 else int(rng.integers(1, 600)))
        memory = None if rng.random() < 0.2 else int(rng.integers(6000, 60000))
        state = State(tab, live, 0.0, policy.token_budget, memory)
        fresh = State(tab, live, 0.0, policy.token_budget, memory)
        in_decode = fresh.in_decode
        whole = admissible(fresh, np.flatnonzero(~in_decode),
                           policy._decodes_beside_prefills(int(in_decode.sum())))
        ledger = {"n_decode": fresh.n_decode, "n_prefilling": fresh.n_prefilling,
                  "promised": fresh.promised}
        state.__dict__.update(ledger)                    # as the engine hands them over
        pre, dec = policy._fcfs_candidates(state)
        most = policy.token_budget
        np.testing.assert_array_equal(pre, whole[:most])
        np.testing.assert_array_equal(dec[:most], np.flatnonzero(in_decode)[:most])
        early += "in_decode" not in state.__dict__ and dec.size + pre.size < state.n
    assert early > 20


def _whole_residents(state):
    """The residents as the whole read found them (the reference)."""
    kv = state._t.kv(state.rid)
    return np.flatnonzero(kv > 0), kv[kv > 0]


@pytest.mark.parametrize("make", [lambda: Sarathi(512), lambda: Orca(256),
                                  lambda: VLLMVanilla(512)])
def test_eviction_victims_read_in_prefixes_are_the_whole_reads(monkeypatch, make):
    """``fit_memory``'s eviction path reads the residents in a prefix of a long queue: the
    residents and their KV of the whole read at every eviction, the read stopping early at
    most of them."""
    import queuetheory.policies.base as base

    residents, seen = base._residents, {"early": 0, "all": 0}

    def checked(state):
        read = [0]
        _record_prefix_reads(state, read)
        pos, kv = residents(state)
        del state.of
        whole = _whole_residents(state)
        np.testing.assert_array_equal(pos, whole[0])
        np.testing.assert_array_equal(kv, whole[1])
        seen["all"] += 1
        seen["early"] += max(read) < state.n
        return pos, kv

    monkeypatch.setattr(base, "_residents", checked)
    _run_overloaded(make, 6000)
    assert seen["all"] > 20 and seen["early"] > 0.8 * seen["all"]


def test_residents_late_in_the_queue_and_empty_prompts_in_decode():
    """Hand-built queues with residents anywhere, and requests in decode holding no KV
    (empty prompts): the prefix read returns every resident of the whole read, and reads
    less than the whole queue when the residents sit at its front."""
    from queuetheory.policies.base import _residents

    res = qt.simulate(_workload(n=2000), Sarathi(128), ANCHOR_TIME, memory=6000,
                      fast_path=False, max_iterations=900)
    tab, live = res.table, res.live
    rng = np.random.default_rng(4)
    early = 0
    for trial in range(60):
        waiting = live[(tab.kv(live) == 0) & (tab.prompt[live] > 1)]
        if trial % 3 == 0:                                # a resident late in the queue
            tab.set_progress(waiting[-rng.integers(1, 50):][:1], 1)
        elif trial % 3 == 1:                              # in decode holding nothing
            tab.set_progress(waiting[-rng.integers(1, 50):][:1], 0, 1)
        state = State(tab, live, 0.0, 128, 10**6)
        fresh = State(tab, live, 0.0, 128, 10**6)
        state.__dict__.update(n_decode=fresh.n_decode, n_prefilling=fresh.n_prefilling)
        pos, kv = _residents(state)
        whole = _whole_residents(fresh)
        np.testing.assert_array_equal(pos, whole[0])
        np.testing.assert_array_equal(kv, whole[1])
        early += "kv" not in state.__dict__ and trial == 0
    assert early == 1


@pytest.mark.parametrize("first_token", ["prefill", "decode"])
def test_evictions_by_rank_with_decodes_in_class_order(first_token):
    """Static priority evicts by rank, its decodes in class order (not by position): the
    stepped records equal the bulk rule's, which evicts as vLLM's priority scheduling
    does, and evictions happen."""
    from test_fast_path import _same_records

    prompt, output = qt.data.sharegpt_lengths()
    tr = qt.Workload.from_lengths(prompt, output, load=0.8, time_model=ANCHOR_TIME,
                                  token_budget=512).sample(n_requests=1500, seed=0)
    classes = np.random.default_rng(1).integers(0, 2, 1500)
    work = qt.Workload.from_arrays(tr.arrival, tr.prompt, tr.output, classes)
    slow = _same_records(work, lambda: qt.policies.StaticPriority(512, (1, 0)),
                            ANCHOR_TIME, memory=30000,
                            first_token=first_token)
    assert slow[0].batches["evicted"].sum() > 10

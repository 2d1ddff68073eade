"""WAIT, Nested WAIT and the FCFS-restart baseline on the engine (seed 000 §3-5)."""

import functools
import warnings

import numpy as np
import pytest

import queuetheory as qt
from queuetheory.fluid import wait_queue_chain

PROP4 = [qt.RequestClass(1, 1, 1.0), qt.RequestClass(1, 2, 1.0)]
# Ao et al.'s convention: every output token takes a decode iteration (module notes of wait.py)
simulate = functools.partial(qt.simulate, first_token="decode")
TM = qt.LinearMemoryTime(0.1, 0.1)


class _Recorder:
    """Wraps a policy's _schedule and keeps (state view, batch) for every batch."""

    def __init__(self, policy):
        self.policy, self.seen = policy, []
        inner = policy._schedule

        def spy(state):
            batch = inner(state)
            if not batch.empty:
                self.seen.append((state.cls.copy(), state.decoded.copy(), state.prefilled.copy(),
                                  batch))
            return batch

        policy._schedule = spy


@pytest.mark.parametrize("n", [(1, 1), (2, 2), (3, 1)])
def test_wait_cohorts_have_exactly_n_per_stage_and_memory_is_m_pi(n):
    pol = qt.policies.WAIT(n, PROP4)
    rec = _Recorder(pol)
    m_pi = qt.fluid.wait_memory(n, PROP4)
    res = simulate(qt.Workload(PROP4), pol, TM, memory=int(m_pi), horizon=300, seed=3)
    assert res.metrics["peak_memory"] <= m_pi
    for cls, decoded, prefilled, b in rec.seen:
        for j in np.unique(cls[np.concatenate([b.prefill, b.decode])]):
            pre = b.prefill[cls[b.prefill] == j]
            assert pre.size == n[j]                                  # a fresh cohort of n_j
            stages = decoded[b.decode[cls[b.decode] == j]]
            assert np.all(np.bincount(stages)[np.unique(stages)] == n[j])
        waiting = prefilled == 0
        # every type that has a full stage-0 inventory is in the batch (L268-L273)
        ready = np.bincount(cls[waiting], minlength=2) >= np.array(n)
        assert set(np.flatnonzero(ready)) == set(np.unique(cls[b.prefill]))


def test_wait_refuses_memory_below_m_pi():
    with pytest.raises(ValueError, match="memory=17: below WAIT's M"):
        simulate(qt.Workload(PROP4), qt.policies.WAIT((2, 2), PROP4), TM, memory=17,
                    horizon=50)


@pytest.mark.parametrize("bad", [(1.5, 1), (0, 1), (-2, 1)])
def test_wait_rejects_bad_thresholds(bad):
    with pytest.raises(ValueError, match="thresholds"):
        qt.policies.WAIT(bad)


def test_wait_without_classes_keeps_to_a_set_memory():
    """Below M^π = 18 and without classes to refuse it, WAIT gates types by memory (and
    decodes residents alone when no type's step fits) instead of overflowing."""
    for first_token in ("prefill", "decode"):
        res = simulate(qt.Workload(PROP4), qt.policies.WAIT((2, 2)), TM, memory=10,
                          horizon=100, first_token=first_token)
        m = res.metrics
        assert m["peak_memory"] <= 10 and m["completed"] > 0.9 * m["arrived"]


def test_wait_stalls_an_underfull_type_while_arrivals_go_on():
    """A type below its threshold is never prefilled, and a cohort advances only with a
    fresh cohort of its type (literal Algorithm 1, spec §6 item 7) — while more requests
    are still to arrive (a run with a horizon: the system goes on past it)."""
    wl = qt.Workload.from_arrays([0.0, 0.5, 1.0], [1, 1, 1], [1, 2, 1], [0, 1, 0])
    with pytest.warns(qt.CensoredRunWarning, match="3 of 3 requests"):
        res = simulate(wl, qt.policies.WAIT((2, 2)), TM, horizon=50)
    req = res.requests
    assert req.loc[[0, 2], "prefill_done"].notna().all()            # one type-0 batch ran
    assert req["finish"].isna().all()                               # then everything waits
    assert req.loc[1, "prefilled"] == 0 and res.metrics["iterations"] == 1


@pytest.mark.parametrize("policy", [qt.policies.WAIT((2, 2)),
                                    qt.policies.NestedWAIT((1, 2), (10, 6)),
                                    qt.policies.NestedWAIT((1, 2), (10, 6), overflow="gate")])
def test_cohort_policies_finish_their_leftovers_once_arrivals_end(policy):
    """The issue's example: three prompts under a threshold of 2 (or 10) all complete once no
    request is left to arrive, with no CensoredRunWarning."""
    wl = qt.Workload.from_arrays([0, 0, 0], [8, 8, 8], [2, 2, 2])
    with warnings.catch_warnings():
        warnings.simplefilter("error", qt.CensoredRunWarning)
        m = simulate(wl, policy, TM, memory=None).metrics
    assert m["completed"] == 3 and m["unfinished"] == 0


def test_nested_wait_prefix_rule_and_full_cohorts():
    pol = qt.policies.NestedWAIT((1, 2), (10, 6))
    rec = _Recorder(pol)
    simulate(qt.Workload(PROP4), pol, TM, horizon=600, seed=2)
    seen_two = False
    for _, decoded, _, b in rec.seen:
        prefill_n = b.prefill.size
        stage1 = np.sum(decoded[b.decode] == 0)          # advancing to stage 1 (segment 1)
        stage2 = np.sum(decoded[b.decode] == 1)          # entering stage 2 (segment 2)
        assert prefill_n == 10 and stage1 in (0, 10)    # segment 1 is always in the batch
        assert stage2 in (0, 6)
        seen_two |= stage2 == 6
    assert seen_two


def test_nested_wait_does_not_use_types():
    """Nested WAIT reads stages only: relabelling classes changes nothing."""
    tr = qt.Workload(PROP4).sample(horizon=300, seed=5)
    relabelled = qt.Workload.from_arrays(tr.arrival, tr.prompt, tr.output, np.zeros(len(tr), int))
    a = simulate(tr, qt.policies.NestedWAIT((1, 2), (10, 6)), TM, horizon=300)
    b = simulate(relabelled, qt.policies.NestedWAIT((1, 2), (10, 6)), TM, horizon=300)
    assert np.array_equal(a.requests["finish"].fillna(-1), b.requests["finish"].fillna(-1))


def test_nested_wait_gate_respects_memory_and_soft_exceeds_it():
    soft = simulate(qt.Workload(PROP4), qt.policies.NestedWAIT((1, 2), (3, 2)), TM,
                       horizon=500, seed=1)
    assert soft.metrics["peak_memory"] > 15
    gate = simulate(qt.Workload(PROP4), qt.policies.NestedWAIT((1, 2), (3, 2), overflow="gate"),
                       TM, memory=15, horizon=500, seed=1)
    assert gate.metrics["peak_memory"] <= 15


def test_nested_wait_rejects_outputs_past_the_last_boundary():
    with pytest.raises(ValueError, match="exceeds the last segment boundary"):
        simulate(qt.Workload(PROP4), qt.policies.NestedWAIT((1,), (2,)), TM, horizon=20)
    with pytest.raises(ValueError, match="thresholds"):
        qt.policies.NestedWAIT((1, 2), (2,))
    with pytest.raises(ValueError, match="segments"):
        qt.policies.NestedWAIT((2, 1), (2, 2))


def test_nested_wait_clustered_segments_complete_inside():
    classes = [qt.RequestClass(1, o, 0.1) for o in range(1, 9)]
    seg = qt.fluid.segment_design(1, np.arange(1, 9), np.full(8, 0.1), 2)
    res = simulate(qt.Workload(classes), qt.policies.NestedWAIT(seg, (6, 3)), TM,
                      horizon=400, seed=0)
    done = res.requests.dropna(subset=["finish"])
    assert set(done["output"]) == set(range(1, 9))
    assert (done["decoded"] == done["output"]).all()


def test_fcfs_restart_evicts_at_m_star_and_never_overflows():
    res = simulate(qt.Workload(PROP4), qt.policies.FCFSRestart(), TM, memory=9, horizon=400,
                      seed=0)
    assert res.metrics["restarts"] > 0 and res.metrics["peak_memory"] <= 9
    free = simulate(qt.Workload(PROP4), qt.policies.FCFSRestart(), TM, horizon=400, seed=0)
    assert free.metrics["restarts"] == 0


@pytest.mark.parametrize("policy", [qt.policies.Sarathi(64, max_reqs=8),
                                    qt.policies.VLLMVanilla(64, max_reqs=8)])
def test_classic_baselines_run_under_the_linear_memory_time(policy):
    res = simulate(qt.Workload(PROP4), policy, TM, memory=12, horizon=200, seed=0)
    assert res.metrics["completed"] > 0 and res.metrics["peak_memory"] <= 12


def test_wait_queue_chain_matches_the_engine():
    """The embedded chain used for Theorem 1's T-scaling agrees with WAIT on the engine."""
    T = 400.0
    chain = wait_queue_chain(PROP4, (1, 1), 0.1, 0.1, [T], paths=2000, seed=0)[0]
    engine = []
    for seed in range(8):
        res = simulate(qt.Workload(PROP4), qt.policies.WAIT((1, 1)), TM, horizon=T, seed=seed)
        tr, tab = res.trace, res.table
        queued = (tr.arrival <= T) & (tab.column("prefilled")[: len(tr)] == 0)
        engine.append(float((tr.prompt + tr.output)[queued].sum()))
    se = np.std(engine, ddof=1) / np.sqrt(len(engine))
    assert abs(np.mean(engine) - chain.mean()) < 4 * np.hypot(se, chain.std() / np.sqrt(2000))

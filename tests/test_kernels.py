"""The bulk decision rules of ``engine.kernels`` change nothing.

Each run is made with ``fast_path=False`` (the policy decides every iteration) and with the
fast path, where FCFS Sarathi runs as the rule ``decode_first_fill`` without calling
``schedule``; request stamps, the batch log, the TBT histogram and every metric must be
identical to the last bit.
"""

import numpy as np
import pytest
from scipy import stats
from test_fast_path import ANCHOR_TIME, _same_run

import queuetheory as qt
from queuetheory.engine import Engine
from queuetheory.engine.kernels import bulk_runner
from queuetheory.engine.kernels.decode_prefix import largest_gap
from queuetheory.engine.kernels.prefill_batches import (
    prefill_batches,
    prefill_batches_kernel,
    residencies_or_oldest,
    vllm_decode_prefix,
)
from queuetheory.policies import FasterTransformer, Orca, Sarathi, VLLMVanilla
from queuetheory.workload import Trace


def _lognormal(median, sigma=0.8):
    return stats.lognorm(s=sigma, scale=median)


def test_anchor_workload_runs_in_bulk_with_the_same_records():
    wl = qt.Workload([qt.RequestClass(prompt=512, output=256, rate=4.0)])
    res, n_slow, n_fast = _same_run(wl, lambda: Sarathi(512), ANCHOR_TIME, n_requests=300)
    assert res.metrics["completed"] == 300
    assert n_fast == 0                       # not one call to schedule


SLOTTED = qt.AffineTokenTime(c=0.02, per_prefill=1e-4, per_decode=5e-5, slot=0.025)


@pytest.mark.parametrize("time_model", [
    ANCHOR_TIME, qt.PiecewiseLinearTime(c=45.5, a=0.30, b0=64), qt.UnitTime(), SLOTTED,
], ids=["affine", "piecewise", "unit", "affine-slotted"])
@pytest.mark.parametrize("load", [0.3, 0.9])
@pytest.mark.parametrize("first_token", ["prefill", "decode"])
def test_sharegpt_lengths_same_records(time_model, load, first_token):
    prompt, output = qt.data.sharegpt_lengths()
    rate_model = ANCHOR_TIME if time_model is SLOTTED else time_model
    wl = qt.Workload.from_lengths(prompt, output, load=load, time_model=rate_model,
                                  token_budget=512)
    _, _, n_fast = _same_run(wl, lambda: Sarathi(512), time_model, n_requests=400,
                             first_token=first_token)
    assert n_fast == 0


def test_two_classes_same_records():
    wl = qt.Workload([qt.RequestClass(_lognormal(100), _lognormal(150), rate=1.0),
                      qt.RequestClass(_lognormal(300), _lognormal(60), rate=1.5)])
    _same_run(wl, lambda: Sarathi(256), ANCHOR_TIME, n_requests=300)


def test_decodes_that_fill_the_budget_starve_prefills_alike():
    # budget 16 and long outputs: 16 requests decode at once and the prompts wait
    wl = qt.Workload([qt.RequestClass(_lognormal(20), _lognormal(200), rate=30.0)])
    res, _, n_fast = _same_run(wl, lambda: Sarathi(16), ANCHOR_TIME, n_requests=200)
    assert n_fast == 0
    load = res.batches["token_load"]
    assert load.max() == 16 and (res.batches["decode_requests"] == 16).sum() > 100


@pytest.mark.parametrize("cut", [{"horizon": 7.5}, {"max_iterations": 333},
                                 {"horizon": 40.0, "max_iterations": 2000}])
@pytest.mark.parametrize("first_token", ["prefill", "decode"])
def test_stops_mid_run_with_the_same_state(cut, first_token):
    wl = qt.Workload([qt.RequestClass(_lognormal(400), _lognormal(300), rate=3.0)])
    kw = cut if "horizon" in cut else {**cut, "n_requests": 300}
    kw = {**kw, "first_token": first_token}
    res, _, n_fast = _same_run(wl, lambda: Sarathi(512), ANCHOR_TIME, **kw)
    assert n_fast == 0
    assert res.requests["finish"].isna().any()          # cut with requests in flight
    assert (res.requests["prefilled"] % 1 == 0).all()


@pytest.mark.parametrize("first_token", ["prefill", "decode"])
def test_idle_periods_and_simultaneous_arrivals_same_records(first_token):
    """Idle gaps, ties, and outputs of one token (which finish in their prefill iteration
    under ``first_token="prefill"``)."""
    arrival = np.repeat(np.array([0.0, 0.0, 3.0, 50.0, 50.0, 50.0, 400.0]), 3)
    n = arrival.size
    rng = np.random.default_rng(3)
    trace = qt.Workload.from_arrays(arrival, rng.integers(1, 900, n), rng.integers(1, 40, n))
    res, _, n_fast = _same_run(trace, lambda: Sarathi(128), qt.UnitTime(),
                               first_token=first_token)
    assert n_fast == 0
    assert (res.requests["output"] == 1).any()


def test_rule_only_where_it_is_the_policy():
    wl = qt.Workload([qt.RequestClass(prompt=64, output=64, rate=2.0)])
    tm = ANCHOR_TIME
    for policy, kw in [(Sarathi(512, order="sjf_decode"), {}), (Orca(512, order="sjf_prompt"), {}),
                       (Sarathi(512, preemption="restart"), {"memory": 10_000}),
                       (Sarathi(512), {"token_budget": 256})]:
        engine = Engine(policy, tm, memory=kw.get("memory"),
                        token_budget=kw.get("token_budget", 512),
                        first_token=kw.get("first_token", "decode"))
        assert bulk_runner(engine, policy) is None, (policy, kw)
    linear = Engine(Sarathi(512), qt.LinearMemoryTime(1.0, 0.01), token_budget=512)
    assert bulk_runner(linear, Sarathi(512)) is None
    for first_token in ("prefill", "decode"):
        plain = Engine(Sarathi(512), tm, token_budget=512, first_token=first_token)
        assert bulk_runner(plain, Sarathi(512)) is not None
    for policy, memory in [(Sarathi(512, max_reqs=8), None), (Sarathi(512), 10_000)]:
        engine = Engine(policy, tm, token_budget=512, memory=memory)
        assert bulk_runner(engine, policy) is not None
    empty_prompt = Engine(Sarathi(512), tm, token_budget=512)
    empty_prompt.load(Trace(np.zeros(1), np.array([0]), np.array([3]), np.zeros(1, int),
                            np.array([3]), np.array([3]), np.zeros(1, int)))
    assert bulk_runner(empty_prompt, Sarathi(512)) is None
    res, _, n_fast = _same_run(wl, lambda: Sarathi(512, order="sjf_decode"), tm, n_requests=50)
    assert n_fast > 0


@pytest.mark.parametrize("first_token", ["prefill", "decode"])
@pytest.mark.parametrize("memory, max_reqs", [(6000, None), (6000, 8), (None, 8), (None, 1),
                                              (3500, 3)])
def test_memory_limit_and_batch_size_limit_same_records(first_token, memory, max_reqs):
    """The rule with vLLM's KV accounting and recompute preemption, and with ``max_reqs``:
    admissions, preemptions in decode and part-way through a prefill, readmissions."""
    wl = qt.Workload([qt.RequestClass(_lognormal(200), _lognormal(300), rate=3.0)])
    n = 250 if max_reqs is None or max_reqs >= 8 else 60     # one at a time: long runs
    res, _, n_fast = _same_run(wl, lambda: Sarathi(512, max_reqs=max_reqs), ANCHOR_TIME,
                               n_requests=n, memory=memory, first_token=first_token)
    assert n_fast == 0
    if memory is not None and max_reqs is None:
        assert res.metrics["restarts"] > 20
        assert res.requests["recomputed"].sum() > 0


@pytest.mark.parametrize("cut", [{"horizon": 30.0}, {"max_iterations": 1500}])
def test_memory_limit_stops_mid_run_with_the_same_state(cut):
    wl = qt.Workload([qt.RequestClass(_lognormal(400), _lognormal(300), rate=3.0)])
    kw = cut if "horizon" in cut else {**cut, "n_requests": 300}
    res, _, n_fast = _same_run(wl, lambda: Sarathi(512), ANCHOR_TIME, memory=5000, **kw)
    assert n_fast == 0
    assert res.requests["finish"].isna().any() and res.metrics["restarts"] > 0


@pytest.mark.parametrize("cut", [{}, {"horizon": 60.0}, {"max_iterations": 4321}])
def test_single_server_stretches_same_records(cut):
    """``max_reqs=1``: a request decodes alone in one repeated batch, which the rule logs
    as one row for many batches (``kernels._expand``); arrivals, idle periods, the horizon
    and the iteration cap cut the stretches at every length."""
    rng = np.random.default_rng(8)
    n = 120
    arrival = np.cumsum(rng.exponential(0.6, n))
    trace = qt.Workload.from_arrays(arrival, rng.integers(1, 700, n), rng.geometric(1 / 40, n))
    kw = cut if "horizon" in cut else {**cut, "n_requests": n}
    res, _, n_fast = _same_run(trace, lambda: Sarathi(512, max_reqs=1), ANCHOR_TIME, **kw)
    assert n_fast == 0
    batches = res.batches
    assert (batches["decode_requests"] == 1).sum() > 10 * n // 2


def test_memory_limit_unit_time_ties_and_short_outputs():
    arrival = np.repeat(np.array([0.0, 0.0, 3.0, 50.0, 50.0, 50.0, 400.0]), 4)
    n = arrival.size
    rng = np.random.default_rng(4)
    trace = qt.Workload.from_arrays(arrival, rng.integers(1, 300, n), rng.integers(1, 40, n))
    res, _, n_fast = _same_run(trace, lambda: Sarathi(64), qt.UnitTime(), memory=400)
    assert n_fast == 0 and res.metrics["restarts"] > 0


@pytest.mark.parametrize("first_token", ["prefill", "decode"])
@pytest.mark.parametrize("memory, max_reqs, budget, follows", [
    (None, None, 2048, "residencies"), (6000, None, 2048, "residencies"),
    (6000, None, 256, "residencies"), (20000, 8, 2048, "oldest"), (None, 8, 256, "oldest"),
    (None, None, 40, "oldest"), (4000, None, 16, "oldest"),
], ids=["plain", "memory", "memory-chunked-prompts", "memory-maxreqs", "maxreqs-chunked",
        "decoders-over-budget", "memory-decoders-over-budget"])
def test_vllm_prefill_batches_same_records(first_token, memory, max_reqs, budget, follows):
    """Vanilla vLLM's rule ``prefill_batches``: prefill-only batches of whole prompts (a long
    one chunked alone), decode-only batches, preemption and readmission. Where more requests
    can be in decode than a batch takes (``max_reqs``, a small budget), the oldest decode
    (the decision ``VLLM`` of ``decode_prefix``) and the others wait a turn."""
    wl = qt.Workload([qt.RequestClass(_lognormal(200), _lognormal(300), rate=3.0)])
    res, n_slow, n_fast = _same_run(wl, lambda: VLLMVanilla(budget, max_reqs=max_reqs),
                                    ANCHOR_TIME, n_requests=250, memory=memory,
                                    first_token=first_token)
    engine = Engine(res.policy, res.time_model, memory=memory, token_budget=budget,
                    first_token=first_token)
    engine.load(res.trace)
    assert prefill_batches_kernel(engine, max_reqs).func is residencies_or_oldest
    before = engine.table.column("decoded").copy(), engine.work, engine.kv_total
    reached = prefill_batches(engine, 0.0, np.inf, np.inf, max_reqs=max_reqs)
    assert (reached is None) == (follows == "oldest")
    if reached is None:          # it stopped part-way and wrote nothing into the engine
        assert engine.iteration == 0 and not engine.live.size
        assert (engine.table.column("decoded") == before[0]).all()
        assert (engine.work, engine.kv_total) == before[1:]
        assert vllm_decode_prefix(engine, 0.0, np.inf, np.inf, max_reqs=max_reqs) > 0
    assert n_fast == 0 and n_slow > 0
    if memory is not None:
        assert res.metrics["restarts"] > 20
    if follows == "oldest":       # batches the cap filled, with more requests in the system
        cap = min(budget, max_reqs or budget)
        log = res.batches
        assert ((log["decode_requests"] == cap) & (log["in_system"] > cap)).sum() > 5


def test_vllm_prefill_batches_idle_periods_ties_and_horizon():
    arrival = np.repeat(np.array([0.0, 0.0, 3.0, 50.0, 50.0, 50.0, 400.0]), 4)
    n = arrival.size
    rng = np.random.default_rng(5)
    trace = qt.Workload.from_arrays(arrival, rng.integers(1, 300, n), rng.integers(1, 40, n))
    for kw in ({"memory": 400}, {"memory": 400, "horizon": 200.0}, {"max_iterations": 150}):
        _, _, n_fast = _same_run(trace, lambda: VLLMVanilla(128), qt.UnitTime(), **kw)
        assert n_fast == 0


@pytest.mark.parametrize("time_model", [
    SLOTTED, qt.PiecewiseLinearTime(c=45.5e-3, a=0.30e-3, b0=64), qt.UnitTime(),
], ids=["affine-slotted", "piecewise", "unit"])
@pytest.mark.parametrize("make_policy", [lambda: Sarathi(256), lambda: VLLMVanilla(4096)],
                         ids=["sarathi", "vllm"])
def test_memory_rules_two_classes_every_time_model(time_model, make_policy):
    wl = qt.Workload([qt.RequestClass(_lognormal(100), _lognormal(150), rate=1.5),
                      qt.RequestClass(_lognormal(300), _lognormal(60), rate=1.5)])
    res, _, n_fast = _same_run(wl, make_policy, time_model, n_requests=150, memory=5000)
    assert n_fast == 0 and res.metrics["restarts"] > 0


def test_largest_gap_of_a_run_is_the_gaps_taken_one_by_one():
    """A run of equal batch times, added one by one in floating point: the shortcut (one gap
    within a binade) equals the gaps' maximum, also for ties (tau an odd multiple of half
    the spacing, where the gaps alternate), across binades and from time 0."""
    from itertools import accumulate, repeat
    from math import ulp

    rng = np.random.default_rng(7)
    cases = []
    for _ in range(3000):
        t = float(rng.choice([0.0, rng.uniform(0, 1), 10 ** rng.uniform(-3, 7)]))
        tau = float(10 ** rng.uniform(-6, 1))
        if t > 0 and rng.random() < 0.3:            # a tie at t's spacing
            tau = (int(rng.integers(1, 1 << 20)) + 0.5) * ulp(t)
        cases.append((t, tau, int(rng.integers(1, 400))))
    cases.append((1.0 - 3 * ulp(1.0), ulp(1.0) / 2 * 3, 10))    # crosses 1.0, ties below
    ties = 0
    for t, tau, k in cases:
        times = list(accumulate(repeat(tau, k), initial=t))
        gaps = np.diff(times)
        ties += t > 0 and (tau / ulp(t)) % 1 == 0.5
        assert largest_gap(times, k, tau) == gaps.max(), (t, tau, k)
    assert ties > 500


def test_repeated_batches_read_a_row_at_a_time_equal_the_expanded_log():
    """Starts and ends at chosen iterations, and the gaps a row at a time, equal those of
    the log expanded one batch after another: for runs within one binade, runs that cross
    one, runs from time 0 and runs whose τ is a tie at their spacing."""
    from array import array
    from math import ulp

    from queuetheory.engine.kernels.common import RepeatedBatches

    rng = np.random.default_rng(11)
    for trial in range(40):
        n = int(rng.integers(1, 60))
        start = np.sort(rng.choice([0.0, 1.0, 1e3, 3e5], n) * rng.uniform(0.5, 2.0, n))
        tau = 10 ** rng.uniform(-4, 1, n)
        tie = (start > 0) & (rng.random(n) < 0.3)
        tau[tie] = [(int(rng.integers(1, 1 << 20)) + 0.5) * ulp(t) for t in start[tie]]
        repeated = np.flatnonzero(rng.random(n) < 0.6)
        k = rng.integers(2, 300, repeated.size)
        if trial == 0:       # a run just below a power of two, crossing it
            start[0], tau[0], repeated, k = 2.0 - 5 * ulp(1.0), 3 * ulp(1.0), np.array([0]), \
                np.array([10])
        cols = [start, tau] + [np.zeros(n, np.int64) for _ in range(7)]
        repeats = array("q", np.column_stack([repeated, k]).ravel().tolist())
        lazy, full = RepeatedBatches(cols, repeats), RepeatedBatches(cols, repeats)
        starts = full.start
        ends = starts + full.column("duration")
        at = rng.integers(0, full.size, 50)
        assert np.array_equal(lazy.starts_at(at), starts[at])
        assert np.array_equal(lazy.ends_at(at), ends[at])
        gaps, of_row, counts = lazy.gaps()
        assert np.array_equal(np.bincount(of_row, weights=counts, minlength=n),
                              np.bincount(full._row_of(np.arange(full.size)), minlength=n))
        assert sorted(np.repeat(gaps, counts).tolist()) == sorted((ends - starts).tolist())
        assert np.array_equal(lazy.start, starts)


@pytest.mark.parametrize("make_policy, memory", [
    (lambda: FasterTransformer(512), None), (lambda: Orca(512), None),
    (lambda: Sarathi(512), 20_000)], ids=["ft: runs past arrivals", "orca", "sarathi, memory"])
@pytest.mark.parametrize("seed", [3, 4])
def test_log_path_read_a_row_at_a_time_equals_the_expanded_path(make_policy, memory, seed):
    """``ColumnLog.path_at`` on a bulk run's log (a row at a time, what ``stability``
    reads): the values at any times equal those of the expanded columns, and the integrals
    equal theirs to rounding — before the first batch, inside runs, at their ends and past
    the last batch, for the columns that move within a run and those that take in the
    arrivals during one."""
    from queuetheory.metrics import step_path_at

    wl = qt.Workload([qt.RequestClass(stats.lognorm(1.0, scale=200),
                                      stats.lognorm(1.0, scale=200), rate=0.5)])
    res = qt.simulate(wl, make_policy(), ANCHOR_TIME, n_requests=400, seed=seed, memory=memory)
    log = res.log
    assert log._lazy is not None and log._lazy._reps is not None
    rng = np.random.default_rng(seed)
    ends = log.column("start") + log.column("duration")
    edges = np.sort(np.concatenate([rng.uniform(-1, ends[-1] + 5, 200), ends[:: 97],
                                    [ends[0] - 1, ends[-1], ends[-1] + 3]]))
    for name in ("unfinished_tokens", "in_system", "memory", "decode_requests"):
        values, integrals = log.path_at(name, edges)
        want_values, want_integrals = step_path_at(ends, log.column(name).astype(float), edges)
        np.testing.assert_array_equal(values, want_values, err_msg=name)
        np.testing.assert_allclose(integrals, want_integrals, rtol=1e-9,
                                   atol=1e-9 * np.abs(want_integrals).max(), err_msg=name)
    np.testing.assert_array_equal(log.ends(np.arange(0, log.n, 13)), ends[::13])


@pytest.mark.parametrize("make_policy", [lambda: FasterTransformer(512), lambda: Orca(512)],
                         ids=["ft: runs past arrivals", "orca"])
def test_log_columns_read_at_a_few_iterations_equal_the_full_columns(make_policy):
    """A bulk run's log read at a few iterations (``column(name, at=...)``, as
    ``stability`` reads its thinned path) without expanding the column: the values of the
    full column there, for every column (FasterTransformer's repeated batches take in the
    arrivals during them, which ``in_system`` and ``unfinished_tokens`` count)."""
    wl = qt.Workload([qt.RequestClass(stats.lognorm(1.0, scale=200),
                                      stats.lognorm(1.0, scale=200), rate=0.5)])
    res = qt.simulate(wl, make_policy(), ANCHOR_TIME, n_requests=400, seed=3)
    log = res.log
    at = np.unique(np.random.default_rng(0).integers(0, log.n, 300))
    expanded = set(log._cols)                     # what the run itself read in full
    few = {name: log.column(name, at=at) for name in log._names}
    assert log._lazy is not None and set(log._cols) == expanded   # nothing more expanded
    for name, values in few.items():
        np.testing.assert_array_equal(values, log.column(name)[at], err_msg=name)
    rows = log._lazy
    arrived_in_runs = log.column("in_system") != rows.per_iteration(rows._rows["in_system"])
    assert arrived_in_runs.any() == isinstance(res.policy, FasterTransformer)

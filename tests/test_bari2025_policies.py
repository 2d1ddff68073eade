"""Seed 002's schedulers on the engine: RAD, Alg. 2, Alg. 3, SLAI, DistServe, routing."""

import numpy as np
import pytest

import queuetheory as qt
from queuetheory.capacity import slo_metrics
from queuetheory.networks import DistServe, simulate_fleet
from queuetheory.policies import RAD, SLAI, CycleScheduler, RequestLevel
from queuetheory.workload.rad import table1_decode_std_bound, table1_lengths, table1_workload

TM = qt.TiledGPUTime.illustrative()


def _trace(n=120, rate=8.0, seed=0):
    rng = np.random.default_rng(seed)
    p = rng.choice([256, 512, 1024], n)
    d = rng.integers(1, 60, n)
    return qt.Workload([qt.RequestClass.from_samples(p, d + 1, rate)]).sample(n_requests=n,
                                                                               seed=seed)


class Spy(qt.policies.Policy):
    """Records every batch of the wrapped policy with the state it saw."""

    def __init__(self, inner):
        self.inner, self.log = inner, []
        self.token_budget = inner.token_budget

    def reset(self, seed=0):
        super().reset(seed)
        self.inner.reset(seed)
        self.log = []

    def _schedule(self, state):
        # the columns the tests read, gathered now (a view gathers on first use: later
        # they would show the table after the batch)
        for column in ("remaining_prefill", "in_decode", "started"):
            getattr(state, column)
        b = self.inner.schedule(state)
        self.log.append((state, b))
        return b


def test_rad_batches_are_pure_tiled_and_cap_decodes():
    spy = Spy(RAD(TM.tile, n=40))
    res = qt.simulate(_trace(), spy, TM, first_token="prefill")
    assert res.metrics["completed"] == 120
    for state, b in spy.log:
        assert b.prefill.size == 0 or b.decode.size == 0            # never mixed
        assert b.prefill.size <= 1                                  # one prompt at a time
        if b.prefill.size:
            assert b.chunk[0] == min(TM.t_lcm, state.remaining_prefill[b.prefill[0]])
        assert int(state.in_decode.sum()) <= TM.tile[1]              # Assumption 4 sizing
        if b.decode.size:
            assert np.array_equal(np.sort(b.decode), np.flatnonzero(state.in_decode))
    cyc = spy.inner.cycles(res)
    assert cyc["started"].sum() == 120 and cyc["started"].max() <= 40


def test_rad_tbt_tail_exceeds_sarathi():
    tr = _trace(200, 10.0)
    rad = qt.simulate(tr, RAD(TM.tile), TM, first_token="prefill")
    sar = qt.simulate(tr, qt.policies.Sarathi(512), TM, first_token="prefill")
    assert rad.metrics["p99_tbt"] > sar.metrics["p99_tbt"]


def test_cycle_scheduler_prefills_n_then_decodes_t_col_at_a_time():
    spy = Spy(CycleScheduler((64, 64, 32), n=10))
    tm = qt.TiledGPUTime(qt.ModelDims.mistral_like(),
                         qt.GPUModel.from_efficiency(efficiency={(64, 64, 32): 1.0}))
    res = qt.simulate(_trace(60, 50.0), spy, tm, first_token="prefill")
    assert res.metrics["completed"] == 60
    assert max(b.decode.size for _, b in spy.log) <= 64
    assert spy.inner.cycles(res)["started"].max() <= 10


def test_request_level_waits_for_the_whole_group():
    spy = Spy(RequestLevel(8))
    res = qt.simulate(_trace(40, 50.0), spy, TM, first_token="prefill")
    assert res.metrics["completed"] == 40
    for state, b in spy.log:
        if b.prefill.size:
            assert not state.in_decode.any() and b.prefill.size <= 8
            assert np.array_equal(b.chunk, state.prompt[b.prefill])


def test_slai_respects_budget_alpha_beta():
    spy = Spy(SLAI(256, alpha=12, beta=5, order="spf"))
    wl = table1_workload(2.0, p_paying=0.3)
    res = qt.simulate(wl, spy, TM, horizon=40, first_token="prefill", memory=200_000)
    assert res.metrics["completed"] > 0
    for state, b in spy.log:
        assert b.token_load <= 256 and b.decode.size <= 5
        started = state.started.copy()
        started[b.prefill] = True
        assert started.sum() <= 12


def test_slai_sarathi_decodes_everyone_each_batch():
    spy = Spy(SLAI.sarathi(512, alpha=64))
    qt.simulate(_trace(), spy, TM, first_token="prefill")
    for state, b in spy.log:
        assert b.decode.size == min(int(state.in_decode.sum()), 512)


def test_slai_spf_admits_the_shortest_waiting_prompt_first():
    wl = qt.Workload.from_arrays([0.0, 0.0, 0.0], [900, 300, 600], [3, 3, 3])
    spy = Spy(SLAI(300, order="spf"))
    qt.simulate(wl, spy, TM, n_requests=3, first_token="prefill")
    state, b = spy.log[0]
    assert state.prompt[b.prefill].tolist() == [300]


def test_slai_defers_free_decodes_but_not_paying_ones():
    tr = _trace(150, 9.0)
    cls = (np.arange(len(tr)) % 2).astype(np.int64)
    wl = qt.Workload.from_arrays(tr.arrival, tr.prompt, tr.output, cls)
    res = qt.simulate(wl, SLAI(512, delta=1.0, tbt=(5.0, 0.0)), TM, n_requests=len(tr),
                      first_token="prefill")
    s = slo_metrics(res, tbt=(5.0, 0.0))
    assert s.loc[0, "p99_tbt"] > s.loc[1, "p99_tbt"]
    assert set(s.columns) >= {"median_ttft", "p99_tbt", "request_miss", "token_miss"}


def test_distserve_nodes_and_random_routing():
    tr = _trace(100, 6.0)
    ds = DistServe(1, 1, chunk=TM.t_lcm).run(tr, TM, horizon=float(tr.arrival[-1]) + 60)
    assert ds["finish"].notna().all() and (ds["ttft"] > 0).all()
    assert (ds["finish"] - ds["arrival"] > ds["ttft"]).all()
    fleet = simulate_fleet(tr, RAD(TM.tile), TM, 3, router="random")
    assert len(fleet.requests) == 100 and fleet.requests["engine"].nunique() == 3
    assert fleet.metrics["completed"] == 100


def test_bad_parameters_are_named():
    with pytest.raises(ValueError, match="offset"):
        SLAI(offset="sometimes")
    with pytest.raises(ValueError, match="tile"):
        RAD((128, 256))
    with pytest.raises(ValueError, match="n="):
        RAD(TM.tile, n=0)
    with pytest.raises(ValueError, match="r_prefill"):
        DistServe(0, 1)


def test_table1_length_model_fits_median_and_p90():
    p, d = table1_lengths(200_000, seed=3)
    assert abs(np.median(d) - 415) <= 2 and abs(np.percentile(d, 90) - 834) <= 6
    assert abs(np.percentile(p, 90) - 5696) <= 40
    assert (p + d).max() <= 8192 and d.min() >= 1


def test_table1_decode_std_is_impossible_but_a_larger_one_is_not():
    assert not table1_decode_std_bound(415, 834, 101).possible
    assert table1_decode_std_bound(415, 834, 283).possible


@pytest.mark.parametrize("strict, sizes", [(False, [64, 10]), (True, [74])])
def test_rad_cycle_reset_when_all_active_finish_together(strict, sizes):
    """I-28: the printed line 9 ends a cycle when all t*_col decodes finish in one batch,
    even though fewer than n were started and requests wait; strict_cycles does not."""
    tm = qt.TiledGPUTime(qt.ModelDims.mistral_like(),
                         qt.GPUModel.from_efficiency(efficiency={(64, 64, 32): 1.0}))
    wl = qt.Workload.from_arrays(np.zeros(74), np.full(74, 64), np.full(74, 4))
    pol = RAD(tm.tile, n=100, strict_cycles=strict)
    res = qt.simulate(wl, pol, tm, n_requests=74, first_token="prefill")
    assert res.metrics["completed"] == 74
    assert pol.cycles(res)["started"].tolist() == sizes


def test_distserve_decode_cap_limits_decode_batches():
    tr = _trace(60, 20.0)
    full = DistServe(1, 1).run(tr, TM, horizon=400.0)
    capped = DistServe(1, 1, decode_cap=4).run(tr, TM, horizon=400.0)
    assert full["finish"].notna().all() and capped["finish"].notna().all()
    assert np.array_equal(full["ttft"].to_numpy(), capped["ttft"].to_numpy())
    assert capped["finish"].max() > full["finish"].max()


def test_slo_capacity_stops_at_the_first_rate_that_misses():
    tmc = qt.TiledGPUTime(qt.ModelDims.mistral_like(), qt.GPUModel.from_efficiency(c0=0.005))
    rate, table = qt.capacity.slo_capacity(lambda: SLAI.sarathi(512), table1_workload, tmc,
                                           [0.5, 6.0, 1.0], horizon=30, memory=200_000)
    assert table["rate"].tolist() == [0.5, 1.0, 6.0]
    assert rate == 1.0 and not table["ok"].iloc[-1]
    none, _ = qt.capacity.slo_capacity(lambda: SLAI.sarathi(512), table1_workload, tmc, [1.0],
                                       horizon=30, ttft=1e-6, memory=200_000)
    assert none is None

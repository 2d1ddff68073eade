"""qt.capacity: the analytic bracket, the simulated boundary, goodput, replicas and the CLI."""

import re

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import queuetheory as qt
from queuetheory import capacity as cap
from queuetheory.capacity.rescale import at_rate
from queuetheory.capacity.search import FAR_BELOW, LADDER, RELAXATION_RUNS
from queuetheory.cli import main
from queuetheory.stability import default_horizon

AFFINE = qt.AffineTokenTime(c=16.1e-3, per_prefill=57.8e-6, per_decode=39.5e-6)


def fixed(prompt=32, output=32, rate=1.0, **kw):
    return qt.Workload([qt.RequestClass(prompt, output, rate)], **kw)


# ---- token capacity and the compute bound ----------------------------------------------------
def test_token_capacity_of_the_affine_model_is_the_full_batch_rate_of_the_mix():
    b, mix = 512, 0.25
    by_hand = b / (AFFINE.c + AFFINE.per_prefill * mix * b + AFFINE.per_decode * (1 - mix) * b)
    assert qt.bounds.token_capacity(AFFINE, b, mix=mix) == pytest.approx(by_hand, rel=1e-12)
    with pytest.raises(ValueError, match="mix=None"):
        qt.bounds.token_capacity(AFFINE, b)
    with pytest.raises(ValueError, match="mix=1.5"):
        qt.bounds.token_capacity(AFFINE, b, mix=1.5)
    # a model whose t_b depends on the load alone ignores the mix
    assert qt.bounds.token_capacity(qt.UnitTime(), 8, mix=0.3) == 8


@pytest.mark.parametrize("first_token", ["prefill", "decode"])
def test_affine_compute_bound_is_one_over_the_full_batch_time_per_request(first_token):
    wl = fixed(100, 50)
    decode = 50 - (first_token == "prefill")
    br = cap.bounds(wl, AFFINE, token_budget=256, first_token=first_token)
    per_request = (AFFINE.c * (100 + decode) / 256 + AFFINE.per_prefill * 100
                   + AFFINE.per_decode * decode)
    assert br.rate("compute") == pytest.approx(1 / per_request, rel=1e-12)
    assert br.binding == "compute" and br.lower == 0.0


def test_kv_area_is_the_sum_of_kv_after_each_iteration():
    p, o = 7, 5
    prefill = sum(p + k for k in range(o))            # prefill, then o − 1 decodes
    decode = sum(p + k for k in range(o + 1))         # prefill, then o decodes
    assert cap.request_stats(fixed(p, o), "prefill").kv_area == prefill
    assert cap.request_stats(fixed(p, o), "decode").kv_area == decode
    assert decode == qt.fluid.memory_work(p, o)       # Ao et al.'s a_j
    # paired samples keep their correlation: the mean of the per-pair sums
    prompts, outputs = np.array([3, 40]), np.array([30, 2])
    wl = qt.Workload.from_lengths(prompts, outputs, rate=1.0)
    by_pair = np.mean([sum(q + k for k in range(u)) for q, u in zip(prompts, outputs, strict=True)])
    st = cap.request_stats(wl, "prefill")
    assert st.kv_area == pytest.approx(by_pair)
    assert st.peak == 41


def test_at_rate_scales_every_class_and_keeps_the_lengths():
    wl = qt.Workload([qt.RequestClass(10, 5, 1.0), qt.RequestClass(3, 9, 3.0)])
    out = cap.at_rate(wl, 8.0)
    assert out.total_rate == pytest.approx(8.0)
    assert out.rates == pytest.approx([2.0, 6.0])
    assert out.mean_prompt == wl.mean_prompt and out.mean_output == wl.mean_output


def test_work_second_moment_keeps_the_pairs():
    """Paired lengths (10, 1) and (1, 10) under "decode": work 11 each, E[S²] = 121, which
    independent prompt and output laws (E[S²] = 130.5 by hand) would overstate."""
    paired = qt.Workload.from_lengths(np.array([10, 1]), np.array([1, 10]), rate=1.0)
    assert cap.request_stats(paired, "decode").work2 == pytest.approx(121.0)
    assert cap.request_stats(fixed(100, 50), "prefill").work2 == 149.0 ** 2


def test_relaxation_time_is_the_heavy_traffic_scale():
    """Fixed lengths: every request takes 1/capacity at full capacity, so the scale is
    λ (1/c)² / (1 − λ/c)²; it grows without bound at ρ → 1."""
    wl, c = fixed(100, 50), 30.0
    for rho in (0.5, 0.9, 0.99):
        lam = rho * c
        assert cap.relaxation_time(wl, lam, c) == pytest.approx(lam / c**2 / (1 - rho) ** 2)
    assert cap.relaxation_time(wl, c, c) == np.inf
    with pytest.raises(ValueError, match="capacity"):
        cap.relaxation_time(wl, 1.0, 0.0)


def test_relaxation_time_scales_with_the_arrivals_and_the_work_variability():
    """Kingman's c_a² + c_s²: paired lengths (10, 1) and (30, 1) under "decode" bring work
    11 and 31 (c_s² = 100/441 by hand); Poisson arrivals add c_a² = 1, a clock 0, Bernoulli
    slots 1 − λ·slot."""
    lengths = qt.Workload.from_lengths(np.array([10, 30]), np.array([1, 1]), rate=0.2)
    c, lam = 1.0, 0.8
    scale = lam / c**2 / (1 - lam / c) ** 2
    cs2 = 100 / 441
    for arrivals, ca2 in (("poisson", 1.0), ("poisson-slot", 1.0), ("deterministic", 0.0),
                          ("bernoulli", 1 - lam)):
        wl = qt.Workload(lengths.classes, arrivals=arrivals)
        assert cap.arrival_variability(wl, lam) == pytest.approx(ca2)
        assert cap.relaxation_time(wl, lam, c, "decode") == pytest.approx((ca2 + cs2) * scale)
    # Poisson: the M/G/1 scale λE[S²]/(1 − ρ)², E[S] = 1/c
    poisson = cap.relaxation_time(lengths, lam, c, "decode")
    assert poisson == pytest.approx(lam * (121 + 961) / 2 / 21**2 / c**2 / (1 - lam) ** 2)
    with pytest.raises(ValueError, match="workload=str"):
        cap.arrival_variability("poisson", lam)


def test_a_bursty_trace_relaxes_more_slowly_than_poisson_arrivals():
    """Clumps of 8 simultaneous requests every 8 units: of n − 1 gaps, k are 8 and the rest
    0, so the gaps' squared coefficient of variation is (n − 1)/k − 1 at any replay rate;
    with fixed lengths (c_s² = 0) the relaxation time is c_a² times Poisson's."""
    tr = clumped_trace()
    gaps = len(tr) - 1
    k = np.count_nonzero(np.diff(tr.arrival))
    ca2 = gaps / k - 1
    assert ca2 > 6
    for rate in (0.5, 2.0):
        assert cap.arrival_variability(tr, rate) == pytest.approx(ca2)
    poisson = cap.relaxation_time(fixed(32, 32), 0.9, 1.0, "decode")
    assert cap.relaxation_time(tr, 0.9, 1.0, "decode") == pytest.approx(ca2 * poisson)


# ---- the simulated boundary against the papers' closed forms ---------------------------------
def test_sarathi_boundary_is_li_dai_peng_capacity():
    """Unit time, b = 64, (32, 32) tokens: b/t_b/(m_p + m_d) = 1 request per round."""
    wl, pol = fixed(), qt.policies.Sarathi(64)
    br = cap.bounds(wl, qt.UnitTime(), token_budget=64, policy=pol, first_token="decode")
    closed = 64 / (32 + 32)
    assert br.upper == closed and br.lower == closed          # Theorem 1(a)
    m = cap.max_rate(wl, pol, qt.UnitTime(), first_token="decode", tol=0.01,
                     n_requests=8000, bracket=br)
    assert m.converged
    assert m.rate == pytest.approx(closed, rel=0.02)
    assert m.interval[0] < closed <= m.interval[1]
    assert (m.probes["verdict"] == "stable").any()


def test_sarathi_on_sharegpt_reaches_its_compute_bound():
    """Li, Dai, Peng's Theorem 1(a): Sarathi is stable below its token capacity whatever
    the length law. On ShareGPT's heavy-tailed lengths a probe of the default length at
    0.99 of the bound settles nothing; the next run of the ladder, ``LADDER`` times longer,
    judges it stable, long before the ``RELAXATION_RUNS`` relaxation times a probe may run
    (a stable verdict is safe early: the fill-up only biases towards growth). The boundary
    found lies within 2 % of the bound and its interval holds it."""
    prompt, output = qt.data.sharegpt_lengths()
    wl = qt.Workload.from_lengths(prompt, output, rate=1.0)
    m = cap.max_rate(wl, qt.policies.Sarathi(512), AFFINE)
    upper = m.bracket.rate("compute")
    assert m.rate == pytest.approx(upper, rel=0.02)
    assert m.interval[0] < upper <= m.interval[1]
    assert (m.probes["verdict"] != "unstable").all()
    first = m.probes.iloc[0]
    H = default_horizon(at_rate(wl, first["rate"]), AFFINE)
    assert first["rounds"] == 2 and first["verdict"] == "stable"
    assert first["horizon"] == pytest.approx(LADDER * H)
    assert first["horizon"] < RELAXATION_RUNS * first["relaxation"] / 2


def test_a_policy_refused_by_supports_is_named_before_any_probe():
    wl, pol = fixed(), qt.policies.FasterTransformer(64, max_reqs=2, mode="request")
    with pytest.raises(qt.errors.UnsupportedSettingError, match="qt.capacity.max_rate"):
        cap.max_rate(wl, pol, qt.UnitTime(), memory=256)
    with pytest.raises(qt.errors.UnsupportedSettingError, match="qt.capacity.goodput"):
        cap.goodput(wl, pol, qt.UnitTime(), memory=256)


def test_vanilla_vllm_boundary_is_lambda_star_in_unit_time():
    b, sizes = 768, stats.poisson(31, loc=1)
    wl = qt.Workload([qt.RequestClass(sizes, sizes, 1.0)], arrivals="poisson-slot")
    lam_star = cap.vllm_unit_time_rate(b, 32)
    assert lam_star * 32 == pytest.approx(np.exp(-lam_star) * b, rel=1e-9)   # λ m_d = e^{−λ} b
    pol = qt.policies.VLLMVanilla(b)
    br = cap.bounds(wl, qt.UnitTime(), token_budget=b, policy=pol, first_token="decode")
    assert br.start == pytest.approx(lam_star, rel=1e-5)  # m_d by quadrature of the law
    assert br.upper > 5 * lam_star
    m = cap.max_rate(wl, pol, qt.UnitTime(), first_token="decode", tol=0.02,
                     n_requests=20000, bracket=br)
    assert m.converged, m.probes
    assert m.rate == pytest.approx(lam_star, rel=0.02)
    assert m.efficiency < 0.2                         # far below the token capacity


def test_fastertransformer_boundary_is_its_bulk_service_capacity():
    """Iteration-level FasterTransformer decodes whenever anything decodes, so with fixed
    lengths in unit time it is a bulk-service queue: a cycle prefills up to ``b // prompt``
    waiting requests in one round and decodes them for ``output`` rounds, stable iff
    ``λ (1 + output) < b // prompt`` — 6 % of the compute bound. Once a rate below half
    the bound is judged unstable, the probes are sized by it, not by the bound, so the
    search converges."""
    b, prompt, output = 64, 32, 32
    bulk = (b // prompt) / (1 + output)
    m = cap.max_rate(fixed(prompt, output), qt.policies.FasterTransformer(b), qt.UnitTime(),
                     first_token="decode", tol=0.02, max_probe_requests=100_000)
    assert m.converged, m.probes
    assert m.interval[0] < bulk <= m.interval[1]
    assert m.rate == pytest.approx(bulk, rel=0.02) and m.efficiency < 0.1
    unstable = m.probes["rate"].where(m.probes["verdict"] == "unstable").cummin().ffill().shift()
    for x, hi, relax in zip(m.probes["rate"], unstable, m.probes["relaxation"], strict=True):
        far = hi == hi and x < hi < FAR_BELOW * m.bracket.upper
        capacity = min(hi if far else m.bracket.upper, x / (1 - m.tolerance))
        assert relax == pytest.approx(cap.relaxation_time(fixed(prompt, output), x, capacity,
                                                          "decode"))


def test_the_last_probes_are_the_lowest_rates_that_settle_the_search():
    """Once the largest stable and the smallest unstable rate lie within ``step⁴`` of each
    other (``step = (1 + tol)/(1 − tol)``), two probes settle the search whatever their
    verdicts, the first from anywhere in ``[hi/step², lo·step²]``, and within ``step²``,
    one, from ``[hi/step, lo·step]``; the search takes the lowest (``hi/step²``, ``hi/step``),
    whose runs are the shortest (they are sized by ``ρ = x/hi``), and converges."""
    b, prompt, output, tol = 64, 32, 32, 0.01
    m = cap.max_rate(fixed(prompt, output), qt.policies.FasterTransformer(b), qt.UnitTime(),
                     first_token="decode", tol=tol, max_probe_requests=100_000)
    step = (1 + tol) / (1 - tol)
    p = m.probes
    assert m.converged and (p["verdict"] != "inconclusive").all(), p
    lo = p["rate"].where(p["verdict"] == "stable").cummax().ffill().shift()
    hi = p["rate"].where(p["verdict"] == "unstable").cummin().ffill().shift()
    last = {}
    for i in p.index[2:]:                         # after the two analytic checks
        ratio = hi[i] / lo[i]
        if ratio <= step ** 4 * (1 + 1e-9):
            last[i] = 1 if ratio <= step ** 2 * (1 + 1e-9) else 2
            assert p["rate"][i] == pytest.approx(hi[i] / step ** last[i], rel=1e-12), (i, p)
    assert set(last.values()) == {1, 2} and last[p.index[-1]] == 1


def test_memory_bound_holds_and_binds():
    """Unit time, (32, 32) tokens, M = 2000, b = 512: the KV-area bound M/E[a] = 1.32 is
    far below the compute bound 8.1; Sarathi (recompute preemption) reaches about 78 % of it."""
    wl, pol, tm = fixed(), qt.policies.Sarathi(512), qt.UnitTime()
    br = cap.bounds(wl, tm, token_budget=512, memory=2000, policy=pol)
    area = 32 * 32 + 32 * 31 / 2
    assert br.rate("memory") == pytest.approx(2000 / area)
    assert br.binding == "memory" and br.rate("compute") > 5 * br.upper
    assert br.lower == 0.0                            # Theorem 1(a) assumes no memory limit
    m = cap.max_rate(wl, pol, tm, memory=2000, tol=0.02, n_requests=3000, bracket=br)
    assert m.interval[0] <= br.upper                  # nothing stable above the bound
    assert 0.6 < m.efficiency <= 1.0
    assert m.binding == "memory"


def test_an_empty_bracket_names_the_bound_broken_at_every_rate():
    br = cap.bounds(fixed(600, 600), qt.UnitTime(), token_budget=64, memory=1000)
    assert br.empty and "memory" in br.violated and "1199" in br.violated
    m = cap.max_rate(fixed(600, 600), qt.policies.Sarathi(64), qt.UnitTime(), memory=1000)
    assert m.rate == 0 and len(m.probes) == 0 and "1199" in m.note


def test_wait_fluid_condition_scales_to_the_largest_rate():
    tm = qt.LinearMemoryTime(d0=1.0, d1=1e-4)
    wl = qt.Workload([qt.RequestClass(20, 10, 0.5), qt.RequestClass(5, 40, 0.5)])
    pol = qt.policies.WAIT([4, 4], classes=wl.classes)
    br = cap.bounds(wl, tm, token_budget=512, policy=pol)
    lam = br.rate("WAIT fluid")
    cond = qt.fluid.wait_condition([4, 4], cap.at_rate(wl, lam).classes, tm.d0, tm.d1)
    assert cond.holds and not cond.strict                  # critical exactly at the rate
    with pytest.raises(ValueError):
        qt.fluid.wait_condition([4, 4], cap.at_rate(wl, 1.01 * lam).classes, tm.d0, tm.d1,
                                require="holds")
    eq_limit = 1 / (tm.d1 * cap.request_stats(wl, "decode").kv_area)
    assert br.rate("compute") > 0 and eq_limit > 0


# ---- goodput ---------------------------------------------------------------------------------
def test_goodput_meets_the_target_at_its_rate_and_misses_above():
    wl, pol, tm = fixed(), qt.policies.Sarathi(64), qt.UnitTime()
    g = cap.goodput(wl, pol, tm, slo={"latency": 120.0}, attainment=0.9, tol=0.05,
                    n_requests=1500, first_token="decode")
    assert g.met and 0 < g.rate < 1.0
    lo, hi = g.search
    assert g.probes.set_index("rate").loc[lo, "attainment"].max() >= 0.9
    assert lo <= g.rate * 1.1 and hi / lo - 1 <= 0.25        # the seeds' searches
    assert g.interval[0] <= g.rate <= g.interval[1] and len(g.per_seed) == 5
    assert (g.probes.loc[g.probes["rate"] >= hi, "attainment"] < 0.9).all()


def test_an_unknown_slo_key_lists_the_valid_ones():
    with pytest.raises(ValueError, match="'ttft'.*'tbt'.*'tpot'.*'latency'"):
        cap.goodput(fixed(), qt.policies.Sarathi(64), qt.UnitTime(), slo={"ttfb": 1.0})


def test_an_slo_no_rate_meets_says_so_with_the_best_attainment():
    g = cap.goodput(fixed(), qt.policies.Sarathi(64), qt.UnitTime(), slo={"latency": 5.0},
                    n_requests=300, first_token="decode")
    assert not g.met and g.rate == 0.0
    assert g.best_attainment == pytest.approx(g.probes["attainment"].max())
    assert "best attainment" in repr(g)


def test_goodput_walks_down_from_a_stability_limit_far_below_the_bracket():
    """FasterTransformer at 6 % of the compute bound: the search starts below the stability
    limit and halves from there, not from the compute bound, until the targets are met (a
    floor tied to the bound stopped it after two probes, none met)."""
    wl, pol = fixed(), qt.policies.FasterTransformer(64)
    bulk = 2 / 33                                  # b // prompt per (1 + output) rounds
    g = cap.goodput(wl, pol, qt.UnitTime(), slo={"latency": 70}, first_token="decode",
                    n_requests=400, stable_limit=bulk)
    assert g.met and 0 < g.rate < bulk
    assert g.probes["rate"].max() < bulk and g.interval[1] <= bulk   # never past the limit
    assert "spread" in g.note                     # 400 requests a probe: the seeds disagree
    per = g.probes.groupby("seed")
    assert (per.apply(lambda p: p.loc[p["meets"], "rate"].max()) > 0).all()


def test_unfinished_requests_count_as_misses():
    import pandas as pd

    req = pd.DataFrame({"arrival": [0.0, 1.0, 2.0], "output": [3, 3, 3],
                        "first_token": [1.0, 2.0, np.nan], "finish": [3.0, 9.0, np.nan],
                        "tbt_max": [1.0, 4.0, np.nan]})
    out = cap.slo_attainment(req, {"latency": 5.0}, start=0.0, end=10.0)
    assert out == pytest.approx({"requests": 3, "met": 1, "unfinished": 1,
                                 "attainment": 1 / 3, "p50_latency": 5.5,
                                 "p99_latency": 7.95, "latency_p90": np.inf})
    assert cap.slo_attainment(req, {"tbt": 2.0}, start=0.0, end=10.0)["met"] == 1
    assert cap.slo_attainment(req, {"tpot": 3.5}, start=0.0, end=10.0)["met"] == 2
    # the unfinished request (arrival 2, no first token) stopped at 10: undecided only
    # while every deadline of it lies past the stop
    for slo, undecided in (({"latency": 5.0}, 0), ({"latency": 50.0}, 1), ({"ttft": 5.0}, 0),
                           ({"ttft": 20.0, "latency": 50.0}, 1),
                           ({"ttft": 20.0, "latency": 5.0}, 0)):
        out = cap.slo_attainment(req, slo, start=0.0, end=10.0, run_end=10.0)
        assert out["undecided"] == undecided, slo


def test_an_overloaded_probe_counts_its_unfinished_instead_of_warning():
    import warnings

    wl, pol = fixed(), qt.policies.Sarathi(64)
    with warnings.catch_warnings():
        warnings.simplefilter("error", qt.errors.CensoredRunWarning)
        curve = cap.load_curve(wl, pol, qt.UnitTime(), [1.5], slo={"latency": 1e2},
                               n_requests=500, first_token="decode")
    row = curve.iloc[0]
    assert row["unfinished"] > 0
    assert row["met"] + row["unfinished"] <= row["requests"]


def test_the_drain_is_the_longest_deadline_capped_at_the_window():
    assert cap.cooldown_time({"latency": 30.0, "ttft": 5.0}, 1.0, 400.0) == 30.0
    assert cap.cooldown_time({"tbt": 0.1}, 1.0, 400.0) == 20.0          # 20 lone lifetimes
    assert cap.cooldown_time({"latency": 1e6}, 1.0, 400.0) == 400.0      # the window's length
    assert cap.cooldown_time({"latency": 1e6}, 50.0, 400.0) == 1000.0    # 20 lifetimes if longer


def test_a_huge_latency_target_keeps_the_runs_short_and_counts_the_undecided():
    """A latency SLO of 10⁶ rounds: every probe's run stops one window after the window
    (not 10⁶ rounds later); below capacity every request of the window is met, above it
    the requests still queued when the run stops had missed no target yet: undecided,
    counted as misses. With a target shorter than the window nothing is undecided."""
    wl, pol, tm = fixed(), qt.policies.Sarathi(64), qt.UnitTime()
    g = cap.goodput(wl, pol, tm, slo={"latency": 1e6}, tol=0.05, n_requests=400,
                    first_token="decode")
    lifetime = 1 + 32                             # a lone (32, 32) request: prefill, decodes
    window = np.maximum(400 / g.probes["rate"], cap.MIN_LIFETIMES * lifetime)
    assert (g.probes["drain"] == window).all()
    assert g.met and g.rate >= 0.9
    over = cap.load_curve(wl, pol, tm, [3.0], slo={"latency": 1e6}, n_requests=400,
                          first_token="decode").iloc[0]
    assert over["drain"] == cap.MIN_LIFETIMES * lifetime
    assert over["unfinished"] > 0 and over["undecided"] == over["unfinished"]
    short = cap.load_curve(wl, pol, tm, [3.0], slo={"latency": 100.0}, n_requests=400,
                           first_token="decode").iloc[0]
    assert short["drain"] == 20 * lifetime
    assert short["unfinished"] > 0 and short["undecided"] == 0


# ---- replicas --------------------------------------------------------------------------------
def test_replicas_needs_at_least_the_bound_and_meets_the_slo():
    wl, pol, tm = fixed(16, 16), qt.policies.Sarathi(64), qt.UnitTime()
    r = cap.replicas(5.0, wl, pol, tm, slo={"latency": 200.0}, router="least_tokens",
                     n_requests=300, simulator="network")
    assert r.at_least == 3                    # one engine serves at most 64/32 = 2 per round
    assert r.count is not None and r.count >= r.at_least
    row = r.probes.set_index("engines").loc[r.count]
    assert row["meets"] and row["attainment"] >= 0.9
    with pytest.raises(ValueError, match="router='nearest'"):
        cap.replicas(5.0, wl, pol, tm, router="nearest")


def test_replicas_default_warns_that_the_fleet_becomes_the_default():
    wl, pol, tm = fixed(16, 16), qt.policies.Sarathi(64), qt.UnitTime()
    kw = dict(slo={"latency": 200.0}, router="round_robin", n_requests=300)
    with pytest.warns(FutureWarning, match="simulator='network'") as caught:
        default = cap.replicas(5.0, wl, pol, tm, **kw)
    assert caught[0].filename == __file__              # the warning points at the call
    network = cap.replicas(5.0, wl, pol, tm, simulator="network", **kw)
    assert isinstance(default, cap.Replicas)
    assert default.count == network.count
    pd.testing.assert_frame_equal(default.probes, network.probes)
    fleet = cap.replicas(5.0, wl, pol, tm, simulator="fleet", **kw)
    assert isinstance(fleet, cap.FleetSize) and fleet.router == "round_robin"
    assert fleet.at_least == network.at_least == 3


@pytest.mark.parametrize("router", ["random", "round_robin"])
def test_replicas_network_and_fleet_agree_on_a_count(router):
    """Two independent simulators of engines behind a router (Li, Dai, Peng's network of
    agents and whole engines under the other first-token convention) size the same fleet."""
    wl = qt.Workload([qt.RequestClass(200, 50, 1.0)])
    tm = qt.AffineTokenTime(16.1e-3, 57.8e-6, 39.5e-6)
    kw = dict(slo={"ttft": 0.5, "tbt": 0.05}, router=router, n_requests=500)
    network = cap.replicas(40.0, wl, qt.policies.Sarathi(256), tm, simulator="network", **kw)
    fleet = cap.replicas(40.0, wl, qt.policies.Sarathi(256), tm, simulator="fleet", **kw)
    assert network.count == fleet.count and network.count >= network.at_least


@pytest.mark.parametrize("bad, match", [
    ({"simulator": "engines"}, "simulator='engines'"),
    ({"simulator": "network", "memory": 1000}, "memory given with simulator='network'"),
    ({"simulator": "network", "percentiles": {"p99_ttft": 9.0}}, "percentiles given"),
    ({"simulator": "network", "first_token": "prefill"}, "first_token='prefill'"),
])
def test_replicas_refuses_what_its_simulator_cannot_run(bad, match):
    with pytest.raises(ValueError, match=match):
        cap.replicas(5.0, fixed(16, 16), qt.policies.Sarathi(64), qt.UnitTime(), **bad)


# ---- the command line ------------------------------------------------------------------------
def test_cli_prints_the_bracket_the_boundary_and_the_goodput(tmp_path, capsys):
    rc = main(["capacity", "--lengths", "fixed", "--prompt", "16", "--output", "16",
               "--time", "unit", "--budget", "64", "--latency", "200", "--tol", "0.05",
               "--requests", "300", "--points", "3", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0
    assert "compute" in out and "requests/round" in out
    assert "simulated boundary" in out and "goodput" in out
    assert (tmp_path / "capacity_sarathi.png").stat().st_size > 0


def test_capacity_figure_spans_a_boundary_far_below_the_bound_on_a_log_axis():
    """A scheduler at 6 % of the compute bound: the curve's rates, the bound and the
    simulated boundary span more than 10×, so both panels put the rate on a log axis."""
    import matplotlib

    matplotlib.use("Agg")
    wl, pol = fixed(), qt.policies.FasterTransformer(64)
    br = cap.bounds(wl, qt.UnitTime(), token_budget=64, policy=pol, first_token="decode")
    rates = np.linspace(0.3, 1.1, 3) * (2 / 33)           # the bulk-service capacity
    curve = cap.load_curve(wl, pol, qt.UnitTime(), rates, slo={"latency": 400},
                           n_requests=300, first_token="decode")
    axes = cap.plot_capacity(curve, br, title="FasterTransformer")
    assert [ax.get_xscale() for ax in axes] == ["log", "log"]
    assert curve["p50_latency"].notna().all()             # the rates lie where it is stable


def test_curve_rates_reach_below_the_goodput_on_a_geometric_grid():
    """0.3 to 1.1 of the boundary, evenly spaced; a goodput below that pulls the low end
    down to half of it, and a span of more than 10× spaces the rates geometrically."""
    assert cap.curve_rates(10.0, 5) == pytest.approx(np.linspace(3.0, 11.0, 5))
    assert cap.curve_rates(10.0, 5, goodput=8.0) == pytest.approx(np.linspace(3.0, 11.0, 5))
    wide = cap.curve_rates(30.0, 6, goodput=1.7)
    assert wide[0] == pytest.approx(0.85) and wide[-1] == pytest.approx(33.0)
    assert np.diff(np.log(wide)) == pytest.approx(np.full(5, np.log(33 / 0.85) / 5))
    for bad, match in (({"boundary": 0.0, "points": 5}, "boundary=0.0"),
                       ({"boundary": 1.0, "points": 1}, "points=1"),
                       ({"boundary": 1.0, "points": 2.5}, "points=2.5")):
        with pytest.raises(ValueError, match=match):
            cap.curve_rates(**bad)


def test_the_goodput_line_counts_towards_the_rate_axis_scale():
    """A goodput 20× below the curve's rates is drawn, so the rate axis goes log."""
    from types import SimpleNamespace

    import matplotlib

    matplotlib.use("Agg")
    wl, pol = fixed(16, 16), qt.policies.Sarathi(64)
    br = cap.bounds(wl, qt.UnitTime(), token_budget=64, policy=pol, first_token="decode")
    curve = cap.load_curve(wl, pol, qt.UnitTime(), [1.0, 1.5], slo={"latency": 400},
                           n_requests=200, first_token="decode")
    axes = cap.plot_capacity(curve, br, title="Sarathi")
    assert [ax.get_xscale() for ax in axes] == ["linear", "linear"]
    axes = cap.plot_capacity(curve, br, title="Sarathi",
                             goodput_result=SimpleNamespace(met=True, rate=0.05))
    assert [ax.get_xscale() for ax in axes] == ["log", "log"]


def test_progress_shows_a_bar_of_the_probes(tmp_path, capsys):
    """``--progress``: each search's probes counted on a tqdm bar on stderr, the last one
    with its rate; nothing on stderr without it."""
    args = ["capacity", "--lengths", "fixed", "--prompt", "16", "--output", "16", "--time",
            "unit", "--budget", "64", "--latency", "200", "--tol", "0.05", "--requests", "300",
            "--points", "2", "--out", str(tmp_path)]
    assert main(args) == 0
    assert "probe" not in capsys.readouterr().err
    assert main([*args, "--progress"]) == 0
    err = capsys.readouterr().err
    for search in ("max_rate", "goodput"):
        assert re.search(rf"{search}: [1-9]\d* ?probe", err), err
    assert "rate " in err and "attainment " in err


def test_cli_rejects_a_bad_time_model():
    with pytest.raises(SystemExit, match="--time 'cubic'"):
        main(["capacity", "--time", "cubic"])


def test_tiled_and_linear_memory_bounds_are_the_papers_capacities():
    tm = qt.TiledGPUTime.illustrative()
    wl = fixed(4 * tm.t_lcm, 64)
    br = cap.bounds(wl, tm, token_budget=512, policy=qt.policies.RAD(tm.tile, n=50))
    rad = qt.bounds.rad_capacity([4 * tm.t_lcm], [63], tm)   # L^D = output − 1 decodes
    assert br.rate("compute") == pytest.approx(rad.lambda_lb)     # the converse
    assert br.rate("RAD λ*") == pytest.approx(rad.lambda_star)
    assert br.rate("RAD λ*") <= br.upper
    lm = qt.LinearMemoryTime(d0=1.0, d1=1e-4)
    br = cap.bounds(wl, lm, token_budget=512, memory=5000)
    area = sum(4 * tm.t_lcm + k for k in range(64))
    assert br.rate("compute") == pytest.approx(1 / (1e-4 * area))          # d1 W < 1
    assert br.rate("memory") == pytest.approx(5000 / ((1.0 + 1e-4 * 5000) * area))
    assert br.binding == "memory"


def test_cli_replays_a_trace(tmp_path, capsys):
    trace = tmp_path / "mooncake.jsonl"
    trace.write_text("".join(f'{{"timestamp": {100 * k}, "input_length": {12 + k % 3}, '
                             f'"output_length": {10 + k % 5}}}\n' for k in range(40)))
    rc = main(["capacity", "--trace", str(trace), "--time", "unit", "--budget", "64",
               "--latency", "200", "--tol", "0.05", "--requests", "300", "--points", "2",
               "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0 and "mean prompt 13.0" in out


# ---- production traces -----------------------------------------------------------------------
def clumped_trace(n=400, clump=8, gap=8.0, prompt=32, output=32):
    """Clumps of ``clump`` simultaneous requests every ``gap`` time units."""
    arrival = np.repeat(np.arange(n // clump) * gap, clump)
    k = arrival.size
    return qt.workload.Trace(arrival, np.full(k, prompt), np.full(k, output),
                             np.zeros(k, np.int64), np.full(k, output), np.full(k, output),
                             np.zeros(k, np.int64))


def test_replay_keeps_the_burstiness_and_the_pairs():
    tr = qt.data.azure_trace("conv").head(500)
    out = cap.replay(tr, 4.0, 400.0)
    gaps, gaps0 = np.diff(out.arrival[:500]), np.diff(tr.arrival)
    assert gaps / gaps0 == pytest.approx(np.full(499, gaps[0] / gaps0[0]))   # one factor
    assert qt.workload.mean_rate(out.head(500)) == pytest.approx(4.0)
    assert len(out) > 500 and out.arrival[-1] <= 400.0 and np.all(np.diff(out.arrival) >= 0)
    assert np.array_equal(out.prompt[500:1000], tr.prompt[:len(out) - 500][:500])


def test_max_rate_on_a_bursty_trace_reaches_the_token_capacity():
    """Theorem 1(a) of Li, Dai, Peng holds for any arrivals of the right rate: clumps of 8
    requests still reach b/t_b/(m_p + m_d) = 1 per round; goodput on the replay is below
    it and its probes count the requests of the window."""
    tr = clumped_trace()
    pol, tm = qt.policies.Sarathi(64), qt.UnitTime()
    br = cap.bounds(tr, tm, token_budget=64, policy=pol, first_token="decode")
    assert br.upper == 1.0
    m = cap.max_rate(tr, pol, tm, first_token="decode", tol=0.02, bracket=br)
    assert m.rate == pytest.approx(1.0, rel=0.02) and m.interval[1] == 1.0
    assert (m.probes["arrived"] > 0).all()
    # the probes ran for the trace's own relaxation time, its clumps' c_a² in it
    assert m.probes["relaxation"].tolist() == pytest.approx(
        [cap.relaxation_time(tr, x, br.upper, "decode") for x in m.probes["rate"]])
    g = cap.goodput(tr, pol, tm, slo={"latency": 300.0}, first_token="decode", tol=0.05,
                    n_requests=400, bracket=br)
    assert g.met and g.rate <= 1.0
    assert (g.probes["requests"] > 0).all()


def test_a_trace_too_long_for_the_probe_budget_is_refused_with_the_way_out():
    tr = clumped_trace()
    with pytest.raises(ValueError, match="max_probe_requests=1e"):
        cap.max_rate(tr, qt.policies.Sarathi(64), qt.UnitTime(), first_token="decode",
                     max_probe_requests=1000)

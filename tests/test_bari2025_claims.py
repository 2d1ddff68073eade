"""The bari2025 ledger entries (their verdicts are asserted once, in tests/test_ledger.py)."""

import queuetheory as qt


def test_ledger_has_the_paper_claims():
    ids = {c.id for c in qt.claims.all("bari2025")}
    assert {"bari2025.theorem1", "bari2025.theorem2", "bari2025.proposition1",
            "bari2025.lemma3_cycle_bounds", "bari2025.lcm_chunking_optimal",
            "bari2025.design_principles", "bari2025.table1_decode_std",
            "bari2025.slai_ttft", "bari2025.slai_free_tbt", "bari2025.slai_paying_share",
            "bari2025.slai_paying_priority"} <= ids


def test_fast_claims_report_their_numbers():
    out = qt.claims.get("bari2025.lcm_chunking_optimal").check(quick=True)
    assert out.data["ratio_6"] < 1 and "(256, 128, 32)" in out.data["broken"]
    out = qt.claims.get("bari2025.eq12_closed_form").check(quick=True)
    assert abs(out.data["z"]) < 4 and out.data["lambda_star"] > 0


def test_smallest_std_given_quantiles_matches_a_grid_search():
    import itertools

    import numpy as np
    import pytest

    from queuetheory.bounds import min_std_given_quantiles

    res = min_std_given_quantiles({0.5: 1, 0.9: 3}, 3)
    x = np.arange(1, 4)
    best = np.inf
    for a, b in itertools.product(range(11), repeat=2):     # every pmf on a 0.1 grid
        p = np.array([a, b, 10 - a - b]) / 10
        if p[2] < 0 or p[0] < 0.5 or p[2] < 0.1:
            continue
        m = p @ x
        best = min(best, float(np.sqrt(p @ (x - m) ** 2)))
    assert res.std <= best + 1e-9 and res.std > best - 0.05
    assert min_std_given_quantiles({0.5: 2}, 3).std == pytest.approx(0, abs=1e-6)
    with pytest.raises(ValueError, match="quantiles"):
        min_std_given_quantiles({1.5: 2}, 3)


def test_theorem2_work_leg_runs_the_fleet_on_its_old_split():
    """routed_work on the one random-router fleet gives, bit for bit, the work rates of the
    nodes it ran by hand before: qt.simulate on the requests SeedSequence([seed, 2]) drew to
    each node."""
    import numpy as np

    from queuetheory.engine import simulate
    from queuetheory.papers.bari2025 import (
        routed_work,
        theory_capacity,
        theory_workload,
        tiled_model,
        work_rate,
    )
    from queuetheory.policies import RAD

    tm, r, n, seed = tiled_model(), 3, 200, 5
    tr = theory_workload(1.05 * r * theory_capacity().lambda_star).sample(n_requests=r * n,
                                                                         seed=seed)
    split = np.random.default_rng([seed, 2]).integers(0, r, len(tr))
    horizon = float(tr.arrival[-1])
    old = [work_rate(simulate(tr.take(split == j), RAD(tm.tile), tm, horizon=horizon,
                              seed=seed + j, first_token="prefill")) for j in range(r)]
    assert routed_work(lambda: RAD(tm.tile), 1.05, n, r=r, seed=seed) == old


def test_theorem2_work_leg_rejects_request_level_batching():
    from queuetheory.claims.bari2025 import reaches_capacity
    from queuetheory.papers.bari2025 import routed_work
    from queuetheory.papers.bari2025 import tiled_model as _tm
    from queuetheory.policies import RequestLevel

    # negative control: the same leg, on the same routed system at ρ = 1.05, rejects Alg. 3
    # (request-level batching), which loses capacity
    work = routed_work(lambda: RequestLevel(_tm().tile[1]), 1.05, 2500)
    assert not reaches_capacity(work) and max(work) < 0.95


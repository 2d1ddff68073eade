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


def test_theorem2_work_leg_rejects_request_level_batching():
    from queuetheory.claims.bari2025 import reaches_capacity
    from queuetheory.papers.bari2025 import routed_work
    from queuetheory.papers.bari2025 import tiled_model as _tm
    from queuetheory.policies import RequestLevel

    # negative control: the same leg, on the same routed system at ρ = 1.05, rejects Alg. 3
    # (request-level batching), which loses capacity
    work = routed_work(lambda: RequestLevel(_tm().tile[1]), 1.05, 2500)
    assert not reaches_capacity(work) and max(work) < 0.95


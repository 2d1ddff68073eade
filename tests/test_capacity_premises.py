"""qt.capacity.bounds: every bound returned holds under the setting it is given.

Over a grid of settings that includes batch caps (``max_reqs``), memory limits and a
piecewise-linear time whose best load is below the budget (``c < a·b0``), the simulator is
run at 0.9× every rate a theorem proves stable (kind ``lower``: it must not be judged
unstable there) and at 1.1× every rate no schedule can sustain (kind ``upper``: it must not
be judged stable there)."""

import pytest
from scipy import stats

import queuetheory as qt
from queuetheory import capacity as cap
from queuetheory.capacity.rescale import at_rate

AFFINE = qt.AffineTokenTime(c=16.1e-3, per_prefill=57.8e-6, per_decode=39.5e-6)
GEOM64 = stats.geom(1 / 64)


def _wl(prompt, output):
    return qt.Workload([qt.RequestClass(prompt, output, 1.0)])


GRID = {
    "sarathi unit": (_wl(32, 32), qt.policies.Sarathi(64), qt.UnitTime(), None, "decode"),
    "sarathi max_reqs=1 affine": (_wl(700, GEOM64), qt.policies.Sarathi(512, max_reqs=1),
                                  AFFINE, None, "prefill"),
    "sarathi max_reqs=1 uniform": (_wl(stats.randint(1, 1025), GEOM64),
                                   qt.policies.Sarathi(512, max_reqs=1), AFFINE, None,
                                   "prefill"),
    "sarathi max_reqs=4 memory": (_wl(32, 32), qt.policies.Sarathi(256, max_reqs=4),
                                  qt.UnitTime(), 4000, "prefill"),
    "sarathi piecewise c<a·b0": (_wl(700, GEOM64), qt.policies.Sarathi(512),
                                 qt.PiecewiseLinearTime(10, 0.3, 128), None, "prefill"),
    "sarathi memory": (_wl(32, 32), qt.policies.Sarathi(512), qt.UnitTime(), 2000, "prefill"),
    "orca max_reqs=1 unit": (_wl(16, 8), qt.policies.Orca(64, max_reqs=1), qt.UnitTime(),
                             None, "decode"),
    "vllm unit": (_wl(32, 32), qt.policies.VLLMVanilla(256), qt.UnitTime(), None, "decode"),
    "sarathi linear memory": (_wl(64, 16), qt.policies.Sarathi(128),
                              qt.LinearMemoryTime(1.0, 0.01), None, "decode"),
}


def test_a_capped_batch_gets_no_work_conserving_bound_but_its_m_g_1_rate():
    """Theorem 1(a) does not cover a batch cap: with ``max_reqs=1`` the engine is an M/G/1
    queue, and the bracket is its ``1/E[S]``, far below the token capacity."""
    wl, pol, tm, _, ft = GRID["sarathi max_reqs=1 affine"]
    br = cap.bounds(wl, tm, token_budget=512, policy=pol, first_token=ft)
    assert "work-conserving" not in set(br.table["name"])
    S = float(tm.duration(qt.timing.BatchLoad.of_tokens(prefill=512))
              + tm.duration(qt.timing.BatchLoad.of_tokens(prefill=700 - 512))
              + (64 - 1) * tm.duration(qt.timing.BatchLoad.of_tokens(decodes=1)))
    assert br.lower == pytest.approx(1 / S, rel=1e-3)       # the law's quadrature grid
    assert br.binding == "M/G/1 (max_reqs=1)" and br.rate("compute") > 10 * br.upper
    assert (br.table["premises"].str.len() > 0).all()


def test_affine_time_gets_a_fluid_rate_not_a_theorem():
    br = cap.bounds(_wl(100, 50), AFFINE, token_budget=256, policy=qt.policies.Sarathi(256))
    row = br.table.set_index("name").loc["work-conserving (fluid)"]
    assert row["kind"] == "scheduler" and "heuristic" in row["premises"]
    assert br.lower == 0.0


@pytest.mark.parametrize("name", sorted(GRID))
def test_no_proven_bound_is_violated(name):
    wl, pol, tm, memory, ft = GRID[name]
    br = cap.bounds(wl, tm, token_budget=pol.token_budget, memory=memory, policy=pol,
                    first_token=ft)
    checked = 0
    for row in br.table.to_dict("records"):
        if row["kind"] not in ("lower", "upper"):
            continue
        factor = 0.9 if row["kind"] == "lower" else 1.1
        v = qt.stability(at_rate(wl, factor * row["rate"]), pol, tm, n_requests=3000,
                         seeds=(0,), memory=memory, first_token=ft)
        wrong = "unstable" if row["kind"] == "lower" else "stable"
        assert v.verdict != wrong, (name, row, v)
        checked += 1
    assert checked >= 1

"""AgentNetwork validation, traffic equations, virtual stations and the stability report."""

from fractions import Fraction

import numpy as np
import pytest

import queuetheory as qt
from queuetheory.networks import (
    AgentNetwork,
    class_rates,
    fork_join,
    parallel,
    rybko_stolyar,
    rybko_stolyar_classic,
    stability_report,
    traffic,
    two_type_engine,
    virtual_station_loads,
)


def _tiny():
    net = AgentNetwork(slot=1.0)
    net.add_agent("E", qt.UnitTime(), 64)
    net.add_class("c", "E", 4, 4)
    net.add_source("src", 1.0, "c")
    return net


def test_valid_network_passes():
    assert _tiny().validate() is not None


@pytest.mark.parametrize("breakage, match", [
    (lambda n: n.add_class("d", "nowhere", 4, 4), "agent='nowhere'"),
    (lambda n: n.add_source("s2", 0.0, "c"), "rate"),
    (lambda n: n.add_source("s2", 1.0, "ghost"), "ghost.*never added"),
    (lambda n: n.add_agent("F", qt.UnitTime(), 0), "token_budget"),
    (lambda n: n.add_agent("F", qt.UnitTime(), 8), "serves no class"),
    (lambda n: n.add_class("d", "E", 4, 4, to="d"), "successor|loop"),
])
def test_invalid_networks_raise_naming_the_rule(breakage, match):
    net = _tiny()
    with pytest.raises(ValueError, match=match):
        breakage(net)
        net.validate()


def test_class_without_rate_and_priority_mismatch_are_rejected():
    net = _tiny()
    net.add_class("orphan", "E", 4, 4)
    with pytest.raises(ValueError, match="positive rate"):
        net.validate()
    net = AgentNetwork()
    net.add_agent("E", qt.UnitTime(), 64, priority=("a",))
    net.add_route("x", 1.0, [("E", 4, 4)])
    with pytest.raises(ValueError, match="priority"):
        net.validate()


def test_join_must_close_its_fork():
    net = AgentNetwork()
    for a in "ABC":
        net.add_agent(a, qt.UnitTime(), 64)
    net.add_class("a", "A", 4, 4, to="fork")
    net.add_fork("fork", ["b", "c"])
    net.add_class("b", "B", 4, 4, to="join")
    net.add_class("c", "C", 4, 4)
    net.add_join("join", "fork")
    net.add_source("src", 1.0, "a")
    with pytest.raises(ValueError, match="join 'join'"):
        net.validate()


def test_traffic_equations_fork_join_and_router_are_exact():
    fj = fork_join(0.9, lengths="fixed")
    rates = class_rates(fj)
    lam = fj.nodes["src"]["rate"]
    for k in ("c0", "c1", "c2", "c3", "join"):
        assert rates[k] == pytest.approx(lam, rel=1e-12)
    loads = traffic(fj)["load"]
    assert loads.max() == pytest.approx(0.9, rel=1e-12)     # the builder's target
    # ρ_j = λ (m_p + m_d) / b for t ≡ 1, eq. (4.3)
    assert loads["c1"] == pytest.approx(lam * (256 + 64) / 768, rel=1e-12)
    par = parallel(4, "random", rho=0.8, lengths="fixed")
    r = class_rates(par)
    assert all(r[f"c{k}"] == pytest.approx(par.nodes["src"]["rate"] / 4) for k in range(1, 5))
    rep = stability_report(par)
    assert rep.conditions.loc["pool[router] < 1", "load"] == pytest.approx(0.8, rel=1e-12)


def test_rs_virtual_station_threshold_is_exact_with_fixed_sizes():
    """ρ_v = λ (w_long + w_long)/b and ρ = λ (w_short + w_long)/b, so ρ* = (w_s + w_l)/(2 w_l)."""
    ws, wl = 32 + 32, 512 + 32
    exact = Fraction(ws + wl, 2 * wl)
    rep = stability_report(rybko_stolyar("up", 0.9, lengths="fixed"))
    vs = rep.virtual_station_loads
    assert len(vs) == 1 and set(vs.iloc[0]["members"]) == {"A2", "B2"}
    assert 0.9 * rep.scale("virtual") == pytest.approx(float(exact), rel=1e-12)
    assert vs.iloc[0]["load"] == pytest.approx(0.9 / float(exact), rel=1e-12)
    assert not rep.all_hold and rep.binding == "virtual[A2+B2] < 1"
    assert rep.conditions[rep.conditions["kind"] == "agent"]["holds"].all()


def test_down_priorities_and_type_blind_policies_have_no_virtual_station():
    assert virtual_station_loads(rybko_stolyar("down", 0.9)).empty
    assert virtual_station_loads(two_type_engine(("long", "short"))).empty
    assert stability_report(rybko_stolyar("down", 0.9)).all_hold


def test_classic_virtual_station_is_lambda_m2_plus_m4():
    means = (0.1, 0.55, 0.2, 0.35)
    m = rybko_stolyar_classic("up", 1.3, means)
    rep = m.stability_report()
    assert rep.loc["virtual[2+4] < 1", "load"] == pytest.approx(1.3 * (0.55 + 0.35))
    assert rep.loc["rho[station1] < 1", "load"] == pytest.approx(1.3 * (0.1 + 0.35))
    assert "virtual" not in set(rybko_stolyar_classic("down", 1.3, means)
                                .stability_report()["kind"])


def test_agent_graph_draws_the_rs_cycle():
    g = rybko_stolyar("up").agent_graph()
    assert set(g.edges) == {("agent1", "agent2"), ("agent2", "agent1")}
    assert np.isclose(rybko_stolyar("up").agents["agent1"].capacity, 768)

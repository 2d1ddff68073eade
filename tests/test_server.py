"""One ``Server`` value: validated once, accepted wherever a time model is, the same records
as the loose settings, and a setting given twice refused unless both agree."""

import numpy as np
import pandas as pd
import pytest

import queuetheory as qt
from queuetheory.engine import Server, as_server
from queuetheory.errors import UnsupportedSettingError

WL = qt.Workload.from_lengths(64, 32, rate=2.0)


def test_validated_once_with_the_parameter_named():
    with pytest.raises(ValueError, match="time_model="):
        Server("not a model")
    with pytest.raises(ValueError, match="token_budget"):
        Server(qt.UnitTime(), token_budget=0)
    with pytest.raises(ValueError, match="memory"):
        Server(qt.UnitTime(), memory=2.5)
    with pytest.raises(ValueError, match="first_token"):
        Server(qt.UnitTime(), first_token="first")
    with pytest.raises(ValueError, match="preemption"):
        Server(qt.UnitTime(), preemption="swap")
    s = Server(qt.UnitTime(), token_budget=np.int64(256))
    assert type(s.token_budget) is int and s.replace(memory=900).memory == 900
    with pytest.raises(ValueError, match="memory"):
        s.replace(memory=-1)


def test_one_rule_for_the_token_budget():
    """The server's budget, else the policy's own: Server.budget_for and the capacity
    searches ask the same rule, which refuses a missing budget where one is required."""
    from queuetheory.engine.server import token_budget_for

    sarathi, mcsf = qt.policies.Sarathi(128), qt.policies.MCSF()
    assert Server(qt.UnitTime()).budget_for(sarathi) == token_budget_for(sarathi) == 128
    assert Server(qt.UnitTime(), token_budget=64).budget_for(sarathi) == 64
    assert Server(qt.UnitTime()).budget_for(mcsf) is None
    assert token_budget_for(sarathi, np.int64(32), required=True) == 32
    with pytest.raises(ValueError, match="has no token_budget of its own"):
        token_budget_for(mcsf, required=True)
    with pytest.raises(ValueError, match="has no token_budget of its own"):
        qt.capacity.max_rate(WL, mcsf, qt.UnitTime())


def test_simulate_with_a_server_gives_the_records_of_the_loose_settings():
    server = Server(qt.UnitTime(), token_budget=128, memory=3000, first_token="decode")
    a = qt.simulate(WL, qt.policies.Sarathi(128), server, n_requests=150)
    b = qt.simulate(WL, qt.policies.Sarathi(128), qt.UnitTime(), token_budget=128,
                    memory=3000, first_token="decode", n_requests=150)
    pd.testing.assert_frame_equal(a.requests, b.requests, check_exact=True)
    pd.testing.assert_frame_equal(a.batches, b.batches, check_exact=True)
    # a setting given again must agree; agreeing is fine
    qt.simulate(WL, qt.policies.Sarathi(128), server, memory=3000, n_requests=5)
    with pytest.raises(ValueError, match="memory=2000: the Server given has memory=3000"):
        qt.simulate(WL, qt.policies.Sarathi(128), server, memory=2000, n_requests=5)
    with pytest.raises(ValueError, match="first_token"):
        as_server(server, first_token="prefill")


def test_one_refusal_for_every_entry():
    """The round model's budget refusal, a memory a policy cannot keep, a preemption other
    than the policy's: the same reason from simulate, capacity and the fleet."""
    cases = [(qt.policies.MCSF(), Server(qt.UnitTime(), token_budget=64, memory=5000)),
             (qt.policies.AlphaProtection(0.1), Server(qt.UnitTime())),
             (qt.policies.Sarathi(64),
              Server(qt.UnitTime(), memory=5000, preemption="restart"))]
    for policy, server in cases:
        reason = server.refusal(policy)
        assert reason
        with pytest.raises(UnsupportedSettingError):
            qt.simulate(WL, policy, server, n_requests=5)
        with pytest.raises(UnsupportedSettingError, match="qt.networks.simulate_fleet"):
            qt.networks.simulate_fleet(WL.sample(n_requests=5), policy, server, 2)
    with pytest.raises(UnsupportedSettingError, match="qt.capacity.max_rate"):
        qt.capacity.max_rate(WL, cases[2][0], cases[2][1])
    assert Server(qt.UnitTime(), memory=5000, preemption="recompute").refusal(
        qt.policies.Sarathi(64)) is None


def test_questions_take_a_server():
    server = Server(qt.UnitTime(), token_budget=128, memory=4000)
    policy = qt.policies.Sarathi(128)
    assert qt.stability(WL, policy, server).verdict == qt.stability(
        WL, policy, qt.UnitTime(), token_budget=128, memory=4000).verdict
    br = qt.capacity.bounds(WL, server, policy=policy)
    loose = qt.capacity.bounds(WL, qt.UnitTime(), token_budget=128, memory=4000,
                               policy=policy)
    assert (br.lower, br.upper) == (loose.lower, loose.upper)
    fleet = qt.networks.simulate_fleet(WL.sample(n_requests=40), policy, server, 2)
    same = qt.networks.simulate_fleet(WL.sample(n_requests=40), policy, qt.UnitTime(), 2,
                                      token_budget=128, memory=4000)
    pd.testing.assert_frame_equal(fleet.requests, same.requests, check_exact=True)


def test_an_agent_network_takes_a_server_of_its_model():
    net = qt.networks.AgentNetwork(slot=1.0)
    agent = net.add_agent("E", Server(qt.UnitTime(), token_budget=256, first_token="decode"))
    assert agent.token_budget == 256
    with pytest.raises(ValueError, match="first_token='decode'"):
        net.add_agent("F", Server(qt.UnitTime(), token_budget=256))
    with pytest.raises(ValueError, match="token_budget=None"):
        net.add_agent("G", qt.UnitTime())

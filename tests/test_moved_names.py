"""Issue 31, item 4: one name per concept, each in the room of its question. Every old name
keeps working for one release, with a DeprecationWarning that names the new one."""

import importlib
import re
import sys
import types

import numpy as np
import pytest

import queuetheory as qt

MOVED = [
    ("queuetheory.bounds", "max_rate", "queuetheory.bounds", "max_token_rate"),
    ("queuetheory.bounds", "MaxRate", "queuetheory.bounds", "MaxTokenRate"),
    ("queuetheory.capacity", "drain_time", "queuetheory.capacity", "cooldown_time"),
    ("queuetheory.policies", "DistServe", "queuetheory.networks", "DistServe"),
    ("queuetheory.policies.rad", "DistServe", "queuetheory.networks", "DistServe"),
    ("queuetheory.policies", "slo_metrics", "queuetheory.capacity", "slo_metrics"),
    ("queuetheory.policies.rad", "slo_capacity", "queuetheory.capacity", "slo_capacity"),
    ("queuetheory.claims.ao2025", "scheduler_sweep", "queuetheory.papers.ao2025",
     "scheduler_sweep"),
    ("queuetheory.claims.ao2025", "PROP4", "queuetheory.papers.ao2025", "PROP4"),
    ("queuetheory.claims.bari2025", "routed_work", "queuetheory.papers.bari2025",
     "routed_work"),
    ("queuetheory.claims.jaillet2025", "section7_run", "queuetheory.papers.jaillet2025",
     "section7_run"),
    ("queuetheory.claims.li2025", "llama_time", "queuetheory.papers.li2025", "llama_time"),
    ("queuetheory.claims.li2025", "vllm_unit_time_threshold", "queuetheory.capacity",
     "vllm_unit_time_rate"),
    ("queuetheory.claims.li2025_theory", "classic_policies", "queuetheory.papers.li2025",
     "classic_policies"),
    ("queuetheory.policies.kvcache", "durations", "queuetheory.rounds", "durations"),
    ("queuetheory.metrics", "judge", "queuetheory.stability", "judge"),
]


@pytest.mark.parametrize("old_module, old, new_module, new", MOVED)
def test_an_old_name_warns_and_is_the_new_one(old_module, old, new_module, new):
    module = importlib.import_module(old_module)
    said = re.escape(f"{old_module}.{old} is deprecated and goes in the next release: use "
                     f"{new_module}.{new}")
    with pytest.warns(DeprecationWarning, match=said) as caught:
        got = getattr(module, old)
    assert got is getattr(importlib.import_module(new_module), new)
    assert [w.filename for w in caught] == [__file__]           # the user's line, not the shim


def test_from_import_of_an_old_name_warns_at_the_users_line():
    with pytest.warns(DeprecationWarning, match="use queuetheory.bounds.max_token_rate") as caught:
        from queuetheory.bounds import max_rate
    assert max_rate is qt.bounds.max_token_rate
    assert {w.filename for w in caught} == {__file__}


def test_the_hints_stay_in_the_messages():
    with pytest.warns(DeprecationWarning, match=r"MaxTokenRate \(the best token rate, .*"
                      r"queuetheory.capacity.max_rate is the simulated request rate\)$"):
        qt.bounds.MaxRate  # noqa: B018
    with pytest.warns(DeprecationWarning, match=r"cooldown_time \(queuetheory.fluid.drain_time "
                      "is the time a fluid backlog takes to drain\\)$"):
        qt.capacity.drain_time  # noqa: B018
    with pytest.warns(DeprecationWarning, match=r"stability.growth_rate \(or qt.growth_rate\)$"):
        qt.metrics.growth_rate  # noqa: B018
    with pytest.warns(DeprecationWarning, match=r"use queuetheory.papers.ao2025.PROP4$"):
        qt.claims.ao2025.PROP4  # noqa: B018


def test_moved_names_refuses_other_names_and_reads_lazily():
    loads = []
    getattr_ = qt.errors.moved_names("pkg.old", {"a": (lambda: loads.append(1) or 7, "pkg.b")})
    assert loads == []                                    # nothing is read until asked for
    with pytest.warns(DeprecationWarning, match=r"^pkg.old.a is deprecated and goes in the "
                      r"next release: use pkg.b$"):
        assert getattr_("a") == 7
    assert loads == [1]
    with pytest.raises(AttributeError, match="module 'pkg.old' has no attribute 'b'"):
        getattr_("b")
    with pytest.raises(AttributeError, match="has no attribute 'capacity'"):
        qt.capacity.capacity  # noqa: B018


def test_the_bounds_capacity_attribute_loads_the_old_module_which_warns(monkeypatch):
    monkeypatch.delitem(sys.modules, "queuetheory.bounds.capacity", raising=False)
    if "capacity" in vars(qt.bounds):
        monkeypatch.delitem(vars(qt.bounds), "capacity")
    with pytest.warns(DeprecationWarning) as caught:
        old = qt.bounds.capacity
    assert isinstance(old, types.ModuleType) and old.max_token_rate is qt.bounds.max_token_rate
    assert [str(w.message) for w in caught] == [         # the module's own warning, once
        "queuetheory.bounds.capacity is deprecated: import queuetheory.bounds.token_rate "
        "(max_rate is max_token_rate, MaxRate is MaxTokenRate there)"]


def test_the_old_bounds_capacity_module_warns_and_keeps_its_names():
    sys.modules.pop("queuetheory.bounds.capacity", None)
    with pytest.warns(DeprecationWarning, match="token_rate"):
        old = importlib.import_module("queuetheory.bounds.capacity")
    assert old.max_rate is qt.bounds.max_token_rate and old.MaxRate is qt.bounds.MaxTokenRate
    assert old.token_capacity is qt.bounds.token_capacity


def test_simulate_nodes_warns_and_keeps_its_records():
    tm = qt.TiledGPUTime.illustrative()
    tr = qt.Workload([qt.RequestClass(64, 8, 2.0)]).sample(n_requests=60, seed=1)
    with pytest.warns(DeprecationWarning, match='simulate_fleet.*router="random"'):
        simulate_nodes = qt.policies.simulate_nodes
    nodes = simulate_nodes(tr, lambda: qt.policies.RAD(tm.tile), tm, 3)
    routed = np.random.default_rng([0, 2]).integers(0, 3, 60)       # the old router's draw
    assert [len(r.trace) for r in nodes] == np.bincount(routed, minlength=3).tolist()
    assert sum(r.metrics["completed"] for r in nodes) == 60


def test_the_moved_names_are_gone_from_the_old_all():
    assert not {"DistServe", "simulate_nodes", "slo_metrics", "slo_capacity"} & set(
        qt.policies.__all__)
    assert not {"max_rate", "MaxRate"} & set(qt.bounds.__all__)
    assert "drain_time" not in qt.capacity.__all__

"""Issue 31, item 4: one name per concept, each in the room of its question. Every old name
keeps working for one release, with a DeprecationWarning that names the new one."""

import importlib
import sys

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
]


@pytest.mark.parametrize("old_module, old, new_module, new", MOVED)
def test_an_old_name_warns_and_is_the_new_one(old_module, old, new_module, new):
    with pytest.warns(DeprecationWarning, match=new):
        got = getattr(importlib.import_module(old_module), old)
    assert got is getattr(importlib.import_module(new_module), new)


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

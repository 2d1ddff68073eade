"""The package's import graph: imports run down the layers only, and no cycle crosses a package.

Read with ``ast`` from the source (function-level imports included), so a deferred import
that runs up the layers is caught as well as a top-level one. The layers are the design's
(``docs/design.md``); a module's room is its top-level module or subpackage of
``queuetheory``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parent.parent / "queuetheory"

#: Lowest first. A room may import rooms of lower layers only (and itself).
LAYERS = [
    {"errors"},
    {"plotting", "_argparse", "metrics", "sweep"},
    {"_quiet", "timing"},
    {"workload"},
    {"data"},
    {"engine"},
    {"fluid", "rounds"},
    {"bounds"},
    {"policies"},
    {"stability"},
    {"networks", "validate"},
    {"compare", "capacity"},
    {"papers"},
    {"claims"},
    {"report"},
    {"cli"},
    {"__main__"},
]

#: Upward imports kept for one release as a deprecation path, each with its reason.
DEPRECATED = {
    ("queuetheory.workload.trace_stats", "queuetheory.data"):
        'trace_stats(reference="sharegpt"), deprecated for reference=sharegpt_lengths(...)',
    ("queuetheory.metrics", "queuetheory.stability"):
        "qt.metrics.growth_rate and the other names of the growth test, moved to "
        "queuetheory.stability (issue 31)",
    ("queuetheory.policies.rad", "queuetheory.networks.disaggregated"):
        "policies.rad.DistServe and simulate_nodes, deprecated for networks.DistServe and "
        'networks.simulate_fleet(router="random")',
    ("queuetheory.policies.rad", "queuetheory.capacity.slo_scan"):
        "policies.rad.slo_metrics and slo_capacity, deprecated for capacity.slo_metrics and "
        "capacity.slo_capacity",
}

#: Import cycles inside one package, as they stand; a new one fails.
KNOWN_CYCLES = [
    {"queuetheory.timing.fitting", "queuetheory.timing.gpu", "queuetheory.timing.vidur"},
    {"queuetheory.workload.core", "queuetheory.workload.traces"},
    {"queuetheory.capacity.cli", "queuetheory.capacity.sizing_cli"},
]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_graph() -> nx.DiGraph:
    """Module -> module imports within the package, one edge per importing module."""
    modules = {_module_name(p): p for p in ROOT.rglob("*.py")}
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                candidates = [f"{target}.{a.name}" for a in node.names] + [target]
            elif isinstance(node, ast.Import):
                candidates = [a.name for a in node.names]
            else:
                continue
            for candidate in candidates:
                if candidate in modules and candidate != name:
                    graph.add_edge(name, candidate)
                    break
    return graph


def room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def layer_of(module: str) -> int:
    r = room(module)
    for i, rooms in enumerate(LAYERS):
        if r in rooms:
            return i
    raise AssertionError(f"{module}: room {r!r} is in no layer of tests/test_layers.py")


def test_every_room_has_a_layer():
    for module in import_graph():
        if module != "queuetheory":
            layer_of(module)


def test_imports_run_down_the_layers():
    upward = []
    for a, b in import_graph().edges:
        if a == "queuetheory" or room(a) == room(b):
            continue
        if b == "queuetheory" or layer_of(b) >= layer_of(a):
            if (a, b) not in DEPRECATED:
                upward.append(f"{a} -> {b}")
    assert not upward, "imports that run up the layers:\n" + "\n".join(sorted(upward))


def test_no_cycle_crosses_a_package_and_none_is_new():
    graph = import_graph()
    graph.remove_edges_from(DEPRECATED)
    cycles = [c for c in nx.strongly_connected_components(graph) if len(c) > 1]
    crossing = [sorted(c) for c in cycles if len({room(m) for m in c}) > 1]
    assert not crossing, f"import cycles across packages: {crossing}"
    new = [sorted(c) for c in cycles if c not in KNOWN_CYCLES]
    assert not new, f"new import cycles: {new}"


def test_the_check_sees_an_upward_import(tmp_path, monkeypatch):
    """The graph reader finds a deferred relative import (what the checks rely on)."""
    pkg = tmp_path / "queuetheory"
    (pkg / "engine").mkdir(parents=True)
    (pkg / "policies").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "policies" / "__init__.py").write_text("")
    (pkg / "engine" / "__init__.py").write_text("def f():\n    from ..policies import x\n")
    monkeypatch.setattr(__import__(__name__), "ROOT", pkg)
    assert ("queuetheory.engine", "queuetheory.policies") in import_graph().edges

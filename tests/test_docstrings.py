"""The docstrings a user reads: every public function, class and method of the covered modules
has a numpydoc summary, Parameters, Returns and Raises section, checked by
``numpydoc.validate``.

A dataclass or named tuple with a generated constructor (a result type) may document its
fields in an Attributes section instead of Parameters (``_Validator``).

The public API of a module is what its ``__all__`` exports (a subpackage's ``__init__``
included, its lazily loaded names too), the exported submodules' own ``__all__``, and the
public methods and properties each exported class defines itself. Constants are not checked.

``COVERED`` and ``CHECKS`` are the one place to change: add a module to ``COVERED`` once its
docstrings pass. Run ``python tests/test_docstrings.py`` to print every error of every module,
covered or not, with counts per module.

Codes enforced (``CHECKS``), from numpydoc's list (``numpydoc.validate.ERROR_MSGS``):

- GL08 / SS01: a docstring, and a summary at its start;
- PR01 / PR02 / PR03: the Parameters section documents every parameter of the signature (a
  class: its constructor's), no phantom one, in the signature's order;
- PR04 / PR05 / PR06 / PR07 / PR10: each parameter as ``name : type`` with a description
  (``int``, not ``integer``; no period after the type);
- RT01 / RT03 / YD01: a Returns section where the function returns a value, each value
  described; a Yields section for a generator;
- GL05 / GL06 / GL07 / GL09 / GL10: the sections are numpydoc's, in numpydoc's order (napoleon
  would render an unknown "Section\\n-------" as a stray title, which the ``-W`` docs build
  refuses), no tabs, directives well formed;
- QT-RS01 (this project's): a function whose own body raises an exception (a ``raise`` of a
  named exception, not a bare re-raise) has a Raises section.

Left out, as noise for this project's voice (and not what a user needs to call a function):
ES01 (an extended summary: a one-line summary is often all there is to say), SA01 / SA02 /
SA03 / SA04 (See Also), EX01 (Examples: the notebooks and docs pages are the examples),
SS05 (an infinitive verb: the summaries here name what a function returns, "The run's
length", which reads better in the API reference than "Return the run's length"), SS06 (a
one-line summary: the opening sentence often wraps), SS02 / SS03 / SS04 / PR08 / PR09 / RT04
/ RT05 (capitals and final periods: descriptions start with a symbol, a unit or code as
often as with a word), GL01 / GL02 / GL03 (where the quotes and blank lines sit: the
project writes the summary on the opening line and closes the quotes after the text, which
PEP 257 allows and ruff checks), RT02 (a named single return, ``name : type``, is allowed:
the name is often the paper's symbol).
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import sys
import textwrap
from collections import defaultdict
from pathlib import Path

import pytest

numpydoc_validate = pytest.importorskip("numpydoc.validate")
numpydoc_docscrape = pytest.importorskip("numpydoc.docscrape")

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

#: The modules whose public API must pass ``CHECKS``. Add a module once its docstrings pass;
#: ``ALL_MODULES`` lists the rest, which the report below prints but does not enforce.
COVERED = [
    "queuetheory.errors",
    "queuetheory.metrics",
    "queuetheory.stability",
    "queuetheory.sweep",
    "queuetheory.plotting",
    "queuetheory.report",
    "queuetheory.compare",
    "queuetheory.timing",
    "queuetheory.fluid",
    "queuetheory.bounds",
    "queuetheory.rounds",
    "queuetheory.data",
    "queuetheory.validate",
    "queuetheory.timing.profile",
    "queuetheory.workload",
    "queuetheory.capacity",
    "queuetheory.networks",
    "queuetheory.claims",
    "queuetheory.papers",
    "queuetheory.policies",
    "queuetheory.policies.base",
    "queuetheory.policies.kvcache",
    "queuetheory.policies.robust_experiments",
    "queuetheory.policies.vllm",
    "queuetheory.engine",
    "queuetheory.engine.batch",
    "queuetheory.engine.conventions",
    "queuetheory.engine.log",
    "queuetheory.engine.server",
    "queuetheory.engine.simulate",
    "queuetheory.engine.state",
]

#: Every module with a public API, covered or not (for the report only).
#: (``queuetheory`` itself only re-exports names of these.)
ALL_MODULES = COVERED + [
    "queuetheory.bounds",
    "queuetheory.fluid",
    "queuetheory.timing",
    "queuetheory.metrics",
    "queuetheory.stability",
    "queuetheory.compare",
    "queuetheory.sweep",
    "queuetheory.report",
    "queuetheory.plotting",
    "queuetheory.errors",
    "queuetheory.policies",
    "queuetheory.engine",
    "queuetheory.timing.profile",
    "queuetheory.validate",
    "queuetheory.capacity",
    "queuetheory.workload",
    "queuetheory.data",
    "queuetheory.networks",
    "queuetheory.claims",
]

#: The numpydoc codes enforced, and this project's own (see the module docstring for why).
CHECKS = frozenset({
    "GL05", "GL06", "GL07", "GL08", "GL09", "GL10",
    "SS01",
    "PR01", "PR02", "PR03", "PR04", "PR05", "PR06", "PR07", "PR10",
    "RT01", "RT03", "YD01",
    "QT-RS01",
})

#: Objects that are not checked, with the reason (keep this short).
EXEMPT: dict[str, str] = {}


def _own_raises(func) -> bool:
    """Whether ``func``'s own body (not a nested function's) raises a named exception."""
    try:
        source = textwrap.dedent(inspect.getsource(func))
    except (OSError, TypeError):
        return False
    tree = ast.parse(source).body
    if not tree:
        return False

    def walk(node):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
                          | ast.ClassDef):
                continue
            if isinstance(child, ast.Raise) and child.exc is not None:
                return True
            if walk(child):
                return True
        return False

    return walk(tree[0])


def _record_fields(obj) -> tuple[str, ...]:
    """The fields of a dataclass or named tuple whose constructor is generated (a result
    type), else ``()``."""
    if not inspect.isclass(obj):
        return ()
    init = vars(obj).get("__init__")
    if dataclasses.is_dataclass(obj) and init is not None and \
            getattr(getattr(init, "__code__", None), "co_filename", "") == "<string>":
        return tuple(f.name for f in dataclasses.fields(obj) if f.init)
    if issubclass(obj, tuple) and hasattr(obj, "_fields"):
        return tuple(obj._fields)
    return ()


class _Validator(numpydoc_validate.Validator):
    """numpydoc's validator, reading a record's Attributes section as its Parameters.

    A dataclass or named tuple that a function returns documents its fields as Attributes
    (what the user reads off the result); its generated constructor takes the same names, so
    a field documented under Attributes counts for PR01-PR07 as a documented parameter."""

    def __init__(self, obj_name):
        super().__init__(numpydoc_docscrape.get_doc_object(obj_name))
        self._fields = _record_fields(obj_name)

    @property
    def doc_all_parameters(self):
        params = self._doc_parameters(["Parameters", "Other Parameters"])
        if self._fields:
            for name, value in self._doc_parameters(["Attributes"]).items():
                if name in self._fields:
                    params.setdefault(name, value)
            order = {name: i for i, name in enumerate(self.signature_parameters)}
            params = dict(sorted(params.items(), key=lambda kv: order.get(kv[0], len(order))))
        return params


def _validate(obj) -> list[tuple[str, str]]:
    """numpydoc's errors for ``obj``, and this project's QT-RS01."""
    result = numpydoc_validate.validate(obj, validator_cls=_Validator)
    errors = list(result["errors"])
    if inspect.isfunction(obj) and obj.__doc__ and _own_raises(obj):
        doc = numpydoc_docscrape.get_doc_object(obj)
        if not doc["Raises"]:
            errors.append(("QT-RS01", "The function raises but has no Raises section"))
    return errors


def _methods(cls):
    """The public methods and properties ``cls`` defines itself: (name, object to validate).

    A property is validated as an attribute (a summary; no Parameters or Returns). An
    override without a docstring of its own inherits its base's, which is checked there."""
    out = []
    for name, member in vars(cls).items():
        if name.startswith("_"):
            continue
        if isinstance(member, staticmethod | classmethod):
            member = member.__func__
        func = member.fget if isinstance(member, property) else member
        if not (inspect.isfunction(func) and func.__module__.startswith("queuetheory")):
            continue
        if func.__doc__ is None and any(getattr(getattr(base, name, None), "__doc__", None)
                                        for base in cls.__mro__[1:]):
            continue        # inherits its base's docstring (autodoc shows that one)
        out.append((name, member))
    return out


def public_objects(module_name: str) -> list[tuple[str, object]]:
    """The public objects of ``module_name``: (qualified name, object), each object once."""
    module = importlib.import_module(module_name)
    seen: set[int] = set()
    out: list[tuple[str, object]] = []

    def add_module(mod, prefix):
        for name in getattr(mod, "__all__", []):
            qualname = f"{prefix}.{name}"
            if qualname in EXEMPT:
                continue
            obj = getattr(mod, name)
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            if inspect.ismodule(obj):
                if obj.__name__.startswith(module_name + "."):
                    add_module(obj, qualname)
            elif inspect.isclass(obj):
                if not obj.__module__.startswith("queuetheory"):
                    continue
                out.append((qualname, obj))
                for mname, method in _methods(obj):
                    if id(method) not in seen:
                        seen.add(id(method))
                        out.append((f"{qualname}.{mname}", method))
            elif inspect.isfunction(obj):
                out.append((qualname, obj))

    add_module(module, module_name)
    return out


def errors_of(module_name: str, checks=CHECKS) -> dict[str, list[tuple[str, str]]]:
    """``{object: [(code, message), ...]}`` for the public objects of ``module_name`` that fail
    ``checks``."""
    failing = {}
    for qualname, obj in public_objects(module_name):
        errs = [(c, m) for c, m in _validate(obj) if checks is None or c in checks]
        if errs:
            failing[qualname] = errs
    return failing


@pytest.mark.parametrize("module_name", COVERED)
def test_public_docstrings(module_name):
    failing = errors_of(module_name)
    lines = [f"{name}: {code} {msg}" for name, errs in failing.items() for code, msg in errs]
    assert not lines, (f"{len(failing)} public objects of {module_name} fail the docstring "
                       "check:\n" + "\n".join(lines))


def test_covered_modules_have_public_objects():
    for module_name in COVERED:
        assert public_objects(module_name), module_name


if __name__ == "__main__":
    totals = defaultdict(int)
    for module_name in dict.fromkeys(ALL_MODULES):
        objects = public_objects(module_name)
        failing = errors_of(module_name)
        status = "covered" if module_name in COVERED else "not covered"
        print(f"{module_name} ({status}): {len(objects) - len(failing)}/{len(objects)} pass")
        for name, errs in failing.items():
            for code, msg in errs:
                print(f"    {name}: {code} {msg}")
                totals[code] += 1
    print(dict(sorted(totals.items())))

"""No function in the package runs past ~150 lines of code (its docstring aside) without a
comment that says why.

Complexity is ruff's rule C901 (max 40, ``pyproject.toml``), where a ``noqa`` needs the
same ``# long:`` comment above the function; length is checked here with ``ast``.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "queuetheory"
MAX_LINES = 150


def long_functions_without_a_reason():
    out = []
    for path in sorted(ROOT.rglob("*.py")):
        lines = path.read_text().splitlines()
        for node in ast.walk(ast.parse("\n".join(lines))):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            body = node.body
            if (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                    and isinstance(body[0].value.value, str)):
                body = body[1:]                     # the docstring is prose, not code
            length = node.end_lineno - body[0].lineno + 1 if body else 0
            above = lines[first - 2].strip() if first >= 2 else ""
            if length > MAX_LINES and not above.startswith("# long:"):
                out.append(f"{path.relative_to(ROOT.parent)}:{node.lineno} {node.name} "
                           f"({length} lines)")
    return out


def test_long_functions_say_why():
    assert not long_functions_without_a_reason(), (
        "functions over ~150 lines need a '# long: <why>' comment above them:\n"
        + "\n".join(long_functions_without_a_reason()))


def test_every_complexity_exemption_says_why():
    missing = []
    for path in sorted(ROOT.rglob("*.py")):
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            if "noqa: C901" in line:
                j = i - 1
                if not (j >= 0 and lines[j].strip().startswith("# long:")):
                    missing.append(f"{path.relative_to(ROOT.parent)}:{i + 1}")
    assert not missing, f"'noqa: C901' without a '# long:' reason above: {missing}"

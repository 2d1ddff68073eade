"""The README runs as written: every ```python block, in order, in one namespace."""

import re
import time
from pathlib import Path

import matplotlib
import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"^```python\n(.*?)^```", README.read_text(encoding="utf-8"),
                    flags=re.DOTALL | re.MULTILINE)


def test_readme_has_python_blocks():
    assert len(BLOCKS) >= 7


def test_readme_blocks_run_in_order(tmp_path, monkeypatch):
    matplotlib.use("Agg")
    monkeypatch.chdir(tmp_path)          # files the examples write (a sweep checkpoint) land here
    namespace: dict = {"__name__": "__readme__"}
    for i, block in enumerate(BLOCKS):
        start = time.perf_counter()
        try:
            exec(compile(block, f"README.md block {i + 1}", "exec"), namespace)
        except Exception as err:  # noqa: BLE001 - re-raised with the block that failed
            pytest.fail(f"README block {i + 1} failed: {type(err).__name__}: {err}\n{block}")
        print(f"block {i + 1}: {time.perf_counter() - start:.2f} s")


def test_namespace_holds_only_the_toolkit():
    import queuetheory as qt

    assert not hasattr(qt, "importlib")
    assert set(qt.__all__) <= set(dir(qt))

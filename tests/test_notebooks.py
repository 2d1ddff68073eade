"""Every notebook runs top to bottom, and is stored in git without outputs.

Each is executed once, here, with the checkout's ``queuetheory``; the executed copy is left in
``docs/_generated/notebooks`` (git-ignored), where the documentation build renders it
instead of executing the notebook a second time.
"""

import os
from pathlib import Path

import nbclient  # with nbconvert, in the [test] extra
import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
EXECUTED = ROOT / "docs" / "_generated" / "notebooks"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path, monkeypatch):
    nb = nbformat.read(path, as_version=4)
    stored = [i for i, c in enumerate(nb.cells)
              if c.cell_type == "code" and (c.get("outputs") or c.get("execution_count"))]
    assert not stored, f"{path.name}: cells {stored} are stored with outputs"
    path_env = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    monkeypatch.setenv("PYTHONPATH", path_env)         # the kernel imports this checkout
    client = nbclient.NotebookClient(nb, timeout=900, kernel_name="python3",
                                     resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    EXECUTED.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, EXECUTED / path.name)

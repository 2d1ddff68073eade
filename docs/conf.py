"""Sphinx configuration of the queuetheory documentation site.

Built in CI with warnings as errors::

    sphinx-build -W -b html docs docs/_build/html

At build time the claims tables of the paper pages are generated from the ledger
(``qt.claims.all()``) and the notebooks are copied next to the pages; a notebook the test
suite has already executed (``tests/test_notebooks.py`` leaves executed copies in
``docs/_generated/notebooks``) is rendered as it is, any other is executed here.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(DOCS))
# the notebooks' kernels import this checkout too
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)

from accuracy_tables import write_accuracy_tables  # noqa: E402
from claims_tables import write_claims_tables  # noqa: E402

import queuetheory  # noqa: E402

project = "queuetheory"
author = "the queuetheory authors"
copyright = "the queuetheory authors, MIT licence"  # noqa: A001 - Sphinx's name
release = queuetheory.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "myst_nb",
]
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build", "_generated/claims_*", "_generated/accuracy_*",
                    "**.ipynb_checkpoints"]
myst_enable_extensions = ["dollarmath", "colon_fence"]
myst_heading_anchors = 3

html_theme = "furo"
html_title = f"queuetheory {release}"

autodoc_default_options = {"members": True, "undoc-members": False, "show-inheritance": True}
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_preserve_defaults = True
napoleon_numpy_docstring = True
napoleon_google_docstring = False
napoleon_use_rtype = False
napoleon_use_ivar = True        # an "Attributes" section is a field list, not new objects
napoleon_use_param = False      # "name : what it is" lines are prose, not types to link

# notebooks: executed once (by the test suite, else here), never stored with outputs in git;
# _generate lists the copies the test suite executed in nb_execution_excludepatterns
nb_execution_mode = "force"
nb_execution_excludepatterns: list[str] = []
nb_execution_timeout = 900
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_merge_streams = True
nb_output_stderr = "remove"   # progress bars; warnings are asserted in the tests

GENERATED = DOCS / "_generated"


def _executed(path: Path) -> bool:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return any(c.get("execution_count") for c in cells if c["cell_type"] == "code")


def _copy_notebooks() -> list[str]:
    """Each notebook beside the pages, unless an executed copy at least as new is there;
    returns the executed copies, which the build renders without executing again."""
    target = GENERATED / "notebooks"
    target.mkdir(parents=True, exist_ok=True)
    done = []
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        dest = target / nb.name
        if not dest.exists() or dest.stat().st_mtime < nb.stat().st_mtime:
            shutil.copy2(nb, dest)
        elif _executed(dest):
            done.append(f"_generated/notebooks/{nb.name}")
    return done


def _generate(app, config) -> None:
    config.nb_execution_excludepatterns = _copy_notebooks()
    write_claims_tables(GENERATED)
    write_accuracy_tables(GENERATED)


def setup(app):
    app.connect("config-inited", _generate)    # before myst-nb reads its configuration

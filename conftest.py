"""Notebooks run in a kernel of their own: let it import this checkout's package."""

import os
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parent)
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (_ROOT, os.environ.get("PYTHONPATH", "")) if p)

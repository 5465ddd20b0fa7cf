"""Load a benchmark or tool script under ``bench/`` as a module, for the tests of its
record-keeping, rendering and checks.

Why a loader: the scripts are run as files (``python bench/bench_audit.py``), not
installed, so a test cannot import them by name. One loader for every test keeps the two
things they need in one place: the module is registered in ``sys.modules`` before it runs
(a dataclass looks its module up by name there), and ``bench/`` and ``bench/tools/`` are
on the path, as they are for the script run from the repository (``bench_*.py`` import
their siblings and ``stamp``)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def load_script(relpath: str, name: str | None = None) -> ModuleType:
    """The script at ``ROOT / relpath`` (e.g. ``"bench/tools/headline.py"``), executed as a
    fresh module named ``name`` (default ``crowdrank_`` and the file's stem)."""
    path = ROOT / relpath
    for folder in (ROOT / "bench", ROOT / "bench" / "tools"):
        if str(folder) not in sys.path:
            sys.path.insert(0, str(folder))
    name = name or f"crowdrank_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod

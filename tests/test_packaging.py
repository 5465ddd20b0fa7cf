"""The installed namespace: ``crowdrank`` and nothing else at top level.

The repository root is the package (``package-dir = {"crowdrank" = "."}``), so a folder that
gains an ``__init__.py`` must also be listed in ``pyproject.toml``'s ``packages`` or a
wheel would silently leave it out; and code that still imported a bare ``models`` or
``reports`` would load a second copy of a module (two registries, two classes).
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOP = ("models", "inference", "validation", "reports")


def test_every_package_folder_is_listed_in_pyproject():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
                 ["packages"])
    found = {"crowdrank"} | {
        "crowdrank." + ".".join(p.parent.relative_to(ROOT).parts)
        for top in TOP for p in (ROOT / top).rglob("__init__.py")
        if "__pycache__" not in p.parts}
    assert listed == found


def test_the_cli_loads_only_the_crowdrank_namespace(tmp_path):
    # run outside the checkout, so the folders cannot be found through the current directory
    code = ("import sys\nfrom crowdrank.reports import cli\n"
            "cli.build_parser()\n"
            f"print(sorted(m for m in sys.modules if m.split('.')[0] in {TOP!r}))\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                       text=True, check=True)
    assert r.stdout.strip() == "[]"


def test_no_product_module_imports_a_bare_top_level_package():
    bad = []
    for top in TOP:
        for p in (ROOT / top).rglob("*.py"):
            for n, line in enumerate(p.read_text().splitlines(), 1):
                s = line.strip()
                if s.startswith(tuple(f"{kw} {t}" for kw in ("from", "import") for t in TOP)):
                    bad.append(f"{p.relative_to(ROOT)}:{n}: {s}")
    assert not bad, bad

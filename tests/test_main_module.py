"""``python -m crowdrank``: the repository root is the package, and its ``__main__.py``
runs the ``crowdrank`` console script's entry point (``[project.scripts]``)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(tmp_path, *args):
    # outside the checkout, so the package is found as installed, not through the cwd
    return subprocess.run([sys.executable, "-m", "crowdrank", *args], check=False,
                          cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)


def test_python_m_crowdrank_help_lists_the_commands(tmp_path):
    r = _run(tmp_path, "--help")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("usage: crowdrank "), r.stdout
    for command in ("fit", "audit", "sbc"):
        assert f"\n    {command} " in r.stdout, command


def test_python_m_crowdrank_fit_help(tmp_path):
    r = _run(tmp_path, "fit", "--help")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("usage: crowdrank fit "), r.stdout


def test_main_module_calls_the_console_scripts_entry_point():
    script = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, func = script["crowdrank"].split(":")
    assert f"from {module} import {func}" in (ROOT / "__main__.py").read_text()

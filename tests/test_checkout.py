"""The package's edges (issue 44, item 3): the checkout the tests and tools sit in is the
``crowdrank`` they run, in-process and in every process they start, with no manual
``crowdrank -> .`` link (a planted change in a temporary copy is seen); the subpackages
cannot be imported by their bare names (a second copy, a second registry); the editable
install offers no ``crowdrank.tests``/``bench``/``docs`` (no wheel has them:
``bench/tools/wheel_check.py`` builds one, installs it in a fresh environment and runs
the default audit there)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import crowdrank

ROOT = Path(__file__).resolve().parents[1]
SUBPACKAGES = ("models", "inference", "validation", "reports")


def _user_env() -> dict:
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "XLA_FLAGS")}


def test_these_tests_run_this_checkout():
    assert Path(crowdrank.__file__).resolve().parent == ROOT
    first = os.environ["PYTHONPATH"].split(os.pathsep)[0]
    assert (Path(first) / "crowdrank").resolve() == ROOT


@pytest.mark.parametrize("name", SUBPACKAGES)
def test_a_bare_subpackage_name_is_refused_from_the_root(name):
    r = subprocess.run([sys.executable, "-c", f"import {name}"], cwd=ROOT, env=_user_env(),
                       capture_output=True, text=True, check=False)
    assert r.returncode != 0
    assert f"ImportError: import crowdrank.{name}, not {name}:" in r.stderr


def test_the_editable_install_offers_only_the_listed_packages():
    # the checkout's folders that are not packages (out/ exists only after a run made it)
    folders = tuple(n for n in ("tests", "bench", "docs", "out") if (ROOT / n).is_dir())
    code = ("import importlib, json, pkgutil, crowdrank\n"
            "pk = ['crowdrank'] + [m.name for m in pkgutil.walk_packages(crowdrank.__path__, "
            "'crowdrank.') if m.ispkg]\n"
            "bad = []\n"
            f"for n in {folders!r}:\n"
            "    try:\n"
            "        importlib.import_module('crowdrank.' + n); bad.append(n)\n"
            "    except ModuleNotFoundError as e:\n"
            "        assert 'is a folder of the checkout' in str(e), e\n"
            "print(json.dumps([sorted(pk), bad]))\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=_user_env(),
                       capture_output=True, text=True, check=True)
    import json

    packages, imported = json.loads(r.stdout.strip().splitlines()[-1])
    listed = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "packages"]
    assert imported == []
    assert packages == sorted(listed)


PLANTED_TEST = '''
import os, subprocess, sys
import crowdrank
from crowdrank.reports import cli


def test_the_copy_is_what_runs():
    assert crowdrank.PLANTED == "planted"
    # a child as the tests start them: the interpreter, and the installed entry point
    child = subprocess.run([sys.executable, "-c", "import crowdrank; print(crowdrank.PLANTED)"],
                           capture_output=True, text=True, check=True)
    assert child.stdout.strip() == "planted"
    exe = os.path.join(os.path.dirname(sys.executable), "crowdrank")
    out = subprocess.run([exe, "--help"], capture_output=True, text=True, check=True)
    assert "PLANTED" in out.stdout
'''


def _copy(dst: Path) -> Path:
    """The package, its tests' conftest and the tools' checkout module, copied (no link)."""
    for name in ("__init__.py", "__main__.py", "pyproject.toml"):
        shutil.copy2(ROOT / name, dst / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.nbi", "*.nbc")
    for name in SUBPACKAGES:
        shutil.copytree(ROOT / name, dst / name, ignore=ignore)
    (dst / "tests").mkdir()
    shutil.copy2(ROOT / "tests" / "conftest.py", dst / "tests" / "conftest.py")
    (dst / "bench" / "tools").mkdir(parents=True)
    shutil.copy2(ROOT / "bench" / "tools" / "checkout.py", dst / "bench" / "tools")
    return dst


def test_a_copy_runs_its_own_code_in_tests_tools_and_their_children(tmp_path):
    """A copy of the checkout (as a clone or a worktree would be, sharing this virtual
    environment whose editable install points here) with a planted change: its tests, the
    processes they start, the ``crowdrank`` entry point among them, and its tools all see
    the change; nothing was linked by hand."""
    copy = tmp_path / "clone"
    copy.mkdir()
    _copy(copy)
    with open(copy / "__init__.py", "a") as fh:
        fh.write('\nPLANTED = "planted"\n')
    cli_py = copy / "reports" / "cli.py"
    cli_py.write_text(cli_py.read_text().replace("Noisy crowdsourced preferences",
                                                 "PLANTED crowdsourced preferences", 1))
    (copy / "tests" / "test_planted.py").write_text(PLANTED_TEST)
    env = dict(_user_env(), CROWDRANK_TEST_XLA_O0="0")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "tests/test_planted.py"], cwd=copy, env=env, capture_output=True,
                       text=True, check=False, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    # a tool of the copy (run as a file, as the tools are)
    t = subprocess.run([sys.executable, str(copy / "bench" / "tools" / "checkout.py")],
                       cwd=tmp_path, env=_user_env(), capture_output=True, text=True,
                       check=True)
    assert Path(t.stdout.strip()).resolve() == (copy / "__init__.py").resolve()
    # and without the mechanism, the installed (editable) checkout is what a child gets
    plain = subprocess.run([sys.executable, "-c", "import crowdrank; print(crowdrank.__file__)"],
                           cwd=copy, env=_user_env(), capture_output=True, text=True,
                           check=True)
    assert Path(plain.stdout.strip()).resolve().parent != copy.resolve()

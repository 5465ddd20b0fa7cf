"""The wheel a user would install: built by ``python -m build`` from this checkout,
installed into a fresh virtual environment, and run there as ``crowdrank audit`` (the
default audit), with a JSON record of what was checked (issue 44, item 3).

    .venv/bin/python bench/tools/wheel_check.py [--out RECORD.json] [--keep DIR]
        [--registry] [--no-audit] [--no-isolation]

Checks, each a field of the record:

The wheel is built from the working tree (the record's ``commit`` says ``+dirty`` when it
differs from ``HEAD``); run the script of a clean ``git worktree`` to check a commit.

- ``wheel``: the wheel's name and size, and its top-level entries (``crowdrank/`` and
  its ``dist-info`` only: no ``tests/``, ``bench/``, ``docs/``);
- ``modules``: the ``crowdrank`` packages the fresh environment imports (every
  ``__init__.py`` found by :func:`pkgutil.walk_packages`), equal to pyproject.toml's
  ``packages`` and to what this checkout's editable install offers; ``crowdrank.tests``,
  ``crowdrank.bench`` and ``crowdrank.docs`` are refused in both;
- ``audit``: ``crowdrank audit --out DIR`` run by the fresh environment's entry point
  outside the checkout (no ``PYTHONPATH``), its exit status, wall time, the last lines
  it printed, and that ``report.html`` and ``metrics.json`` were written; ``crowdrank``
  loaded from the fresh environment's site-packages, not from this checkout.

The fresh environment gets its dependencies (JAX, PyMC, ...: about 2 GB) from this
checkout's ``.venv`` through a ``.pth`` line, which adds that folder to ``sys.path``
without running its ``.pth`` files, so the editable install of ``crowdrank`` is not
seen; only ``crowdrank`` itself comes from the wheel. ``--registry`` installs the wheel
with its dependencies from the package registry instead (slow, several GB of downloads).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: run by the fresh environment's interpreter: where crowdrank comes from, its packages,
#: and whether the checkout's folders import
_PROBE = """
import importlib, json, pkgutil, crowdrank
pk = sorted(["crowdrank"] + [m.name for m in pkgutil.walk_packages(crowdrank.__path__,
                                                                  "crowdrank.") if m.ispkg])
refused = {}
for name in ("crowdrank.tests", "crowdrank.bench", "crowdrank.docs"):
    try:
        importlib.import_module(name)
        refused[name] = False
    except ImportError:
        refused[name] = True
print(json.dumps({"file": crowdrank.__file__, "packages": pk, "refused": refused}))
"""


def run(cmd, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, check=False, **kw)


def user_env() -> dict:
    """The environment of a user's shell: no ``PYTHONPATH`` and none of the tests' knobs."""
    return {k: v for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "XLA_FLAGS", "CROWDRANK_DEBUG")}


def build_wheel(dist: Path, isolation: bool = True) -> Path:
    """``python -m build --wheel``: by default in build's own isolated environment (it
    installs pyproject.toml's build requirements from the registry), as a user's build."""
    had_build = (ROOT / "build").exists()
    r = run([sys.executable, "-m", "build", "--wheel", "--outdir", str(dist), str(ROOT),
             *([] if isolation else ["--no-isolation"])])
    if not had_build:            # setuptools' scratch folder, in the checkout
        shutil.rmtree(ROOT / "build", ignore_errors=True)
    if r.returncode != 0:
        raise SystemExit(f"python -m build failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    (wheel,) = dist.glob("crowdrank-*.whl")
    return wheel


def fresh_venv(where: Path, wheel: Path, registry: bool) -> Path:
    run([sys.executable, "-m", "venv", str(where)]).check_returncode()
    py = where / "bin" / "python"
    if not registry:      # dependencies from this checkout's environment, not crowdrank
        code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
        site = Path(run([str(py), "-c", code]).stdout.strip())
        (site / "crowdrank_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    r = run([str(py), "-m", "pip", "install", "--quiet",
             *([] if registry else ["--no-deps"]), str(wheel)])
    if r.returncode != 0:
        raise SystemExit(f"pip install of the wheel failed:\n{r.stderr[-3000:]}")
    return where


def editable_packages() -> list[str]:
    """The packages this checkout's install offers (the same probe, run here)."""
    r = run([sys.executable, "-c", _PROBE], cwd=tempfile.gettempdir(), env=user_env())
    return json.loads(r.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="also write the JSON record here")
    ap.add_argument("--keep", default=None, metavar="DIR",
                    help="build, install and audit in DIR (kept) instead of a temporary one")
    ap.add_argument("--registry", action="store_true",
                    help="install the wheel's dependencies from the package registry")
    ap.add_argument("--no-audit", action="store_true", help="skip crowdrank audit")
    ap.add_argument("--no-isolation", action="store_true",
                    help="build with this environment's setuptools (no registry)")
    a = ap.parse_args(argv)
    tmp = None if a.keep else tempfile.TemporaryDirectory(prefix="crowdrank-wheel-")
    work = Path(a.keep or tmp.name)
    work.mkdir(parents=True, exist_ok=True)
    from stamp import commit  # bench/tools/stamp.py (this script's folder is on sys.path)

    rec: dict = {"checkout": str(ROOT), "commit": commit(ROOT),
                 "command": " ".join(["bench/tools/wheel_check.py", *sys.argv[1:]])}
    t0 = time.perf_counter()
    wheel = build_wheel(work / "dist", isolation=not a.no_isolation)
    with zipfile.ZipFile(wheel) as z:
        top = sorted({n.split("/", 1)[0] for n in z.namelist()})
    rec["wheel"] = {"name": wheel.name, "bytes": wheel.stat().st_size, "top_level": top,
                    "build_seconds": round(time.perf_counter() - t0, 1)}
    venv = fresh_venv(work / "venv", wheel, a.registry)
    probe = json.loads(run([str(venv / "bin" / "python"), "-c", _PROBE], cwd=work,
                           env=user_env()).stdout.strip().splitlines()[-1])
    listed = sorted(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]
                    ["setuptools"]["packages"])
    editable = editable_packages()
    rec["modules"] = {
        "from_wheel": probe["file"].startswith(str(venv)),
        "file": probe["file"],
        "packages": len(probe["packages"]),
        "same_as_pyproject": probe["packages"] == listed,
        "same_as_editable": probe["packages"] == editable["packages"],
        "refused_in_wheel": probe["refused"],
        "refused_in_editable": editable["refused"],
    }
    if not a.no_audit:
        out = work / "audit-out"
        t1 = time.perf_counter()
        r = run([str(venv / "bin" / "crowdrank"), "audit", "--out", str(out)], cwd=work,
                env=user_env())
        rec["audit"] = {"command": "crowdrank audit --out DIR", "returncode": r.returncode,
                        "wall_seconds": round(time.perf_counter() - t1, 1),
                        "stdout_tail": r.stdout.strip().splitlines()[-4:],
                        "stderr_tail": r.stderr.strip().splitlines()[-3:] if r.returncode
                        else [],
                        "report_html": (out / "report.html").is_file(),
                        "metrics_json": (out / "metrics.json").is_file()}
    m = rec["modules"]
    rec["ok"] = bool(top == sorted(["crowdrank", wheel.name.split("-py3")[0] + ".dist-info"])
                     and m["from_wheel"] and m["same_as_pyproject"] and m["same_as_editable"]
                     and all(m["refused_in_wheel"].values())
                     and all(m["refused_in_editable"].values())
                     and (a.no_audit or (rec["audit"]["returncode"] == 0
                                         and rec["audit"]["report_html"])))
    rec["date"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    rec["load_1min"] = os.getloadavg()[0]
    text = json.dumps(rec, indent=1)
    print(text)
    if a.out:
        Path(a.out).write_text(text + "\n")
    if tmp is not None:
        tmp.cleanup()
    return 0 if rec["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())

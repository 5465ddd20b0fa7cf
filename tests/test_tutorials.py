"""The tutorial notebooks (docs/tutorials/) run from top to bottom, so they never go stale.

Each notebook is executed in a fresh kernel with ``nbclient`` in a temporary folder (the
files it writes land there). They are stored without outputs and are built from
``docs/tutorials/make_notebooks.py``; a test checks that the stored files are what the
script writes. The BabyFace notebook needs the shared data sets (``realdata``).
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
import time
from pathlib import Path

import nbformat
import pytest
from readme_checks import VERDICT, _check_prior_predictive, _check_story

ROOT = Path(__file__).resolve().parents[1]
TUTORIALS = ROOT / "docs" / "tutorials"
sys.path.insert(0, str(TUTORIALS))
import make_notebooks

sys.path.remove(str(TUTORIALS))


#: the notebooks executed in this session, for the site's pages (the last test)
EXECUTED: dict[str, nbformat.NotebookNode] = {}


def _execute(name: str, cwd: Path, timeout: int = 600) -> tuple[nbformat.NotebookNode, float]:
    from nbclient import NotebookClient

    nb = nbformat.read(TUTORIALS / name, as_version=4)
    env_before = os.environ.get("MPLBACKEND")
    # the kernel inherits the environment: without MPLBACKEND its inline backend puts each
    # figure in the cell's output (no display needed), as the site's build does
    # (docs/conf.py), so the last test renders the pages a reader sees from these runs
    os.environ.pop("MPLBACKEND", None)
    try:
        t = time.perf_counter()
        NotebookClient(nb, timeout=timeout, kernel_name="python3",
                       resources={"metadata": {"path": str(cwd)}}).execute()
        EXECUTED[name] = nb
        return nb, time.perf_counter() - t
    finally:
        if env_before is None:
            os.environ.pop("MPLBACKEND", None)
        else:
            os.environ["MPLBACKEND"] = env_before


def _outputs(nb) -> str:
    text = []
    for c in nb.cells:
        for o in c.get("outputs", []):
            text.append(o.get("text", ""))
            text.append(json.dumps(o.get("data", {}).get("text/plain", "")))
    return "\n".join(text)


def test_stored_notebooks_are_what_the_script_writes(tmp_path):
    make_notebooks.main([str(tmp_path)])
    for name in make_notebooks.NOTEBOOKS:
        stored = nbformat.read(TUTORIALS / name, as_version=4)
        fresh = nbformat.read(tmp_path / name, as_version=4)
        assert stored == fresh, f"{name} is stale: run docs/tutorials/make_notebooks.py"
        assert all(not c.get("outputs") for c in stored.cells if c.cell_type == "code"), \
            f"{name} is stored with outputs"
        nbformat.validate(stored)


@pytest.mark.slow
def test_generative_story_notebook(tmp_path):
    """What the notebook shows a student: Eq. 4 sums to 1 over the k! orderings for pairs
    only (the pitfall of docs/design.md), the sampler's largest gap below its bound, and
    the story files with the numbers the page tells (tests/readme_checks.py)."""
    nb, _ = _execute("01-generative-story.ipynb", tmp_path)
    out = _outputs(nb)
    z = {int(k): (int(n), float(v)) for k, n, v in re.findall(
        r"k = (\d): Z = sum over the (\d+) orderings of Eq. 4 = ([\d.]+)", out)}
    assert z and z[2] == (2, 1.0), z
    for k, (n, v) in z.items():
        assert n == math.factorial(k)
        assert (abs(v - 1) < 5e-5) is (k == 2), z          # k >= 3: not normalised
    gap = float(re.search(r"largest gap: ([\d.e-]+)", out).group(1))
    assert 0 <= gap < 0.01
    s = json.loads((tmp_path / "story-out" / "story.json").read_text())
    _check_story("story-out", s["model"], s["setting"], s["seed"])(tmp_path, {})


@pytest.mark.slow
def test_prior_predictive_notebook(tmp_path):
    nb, _ = _execute("02-prior-predictive.ipynb", tmp_path)
    assert "stage 1 (m=4)" in _outputs(nb)
    # the geometric α from its spec, the stage-1 rate near α1/Σα for every prior
    _check_prior_predictive(tmp_path / "prior-out")


@pytest.mark.slow
def test_two_ways_to_infer_notebook(tmp_path):
    """Both PPLs' verdicts are printed in full (parsed exactly, "NOT trusted" is not
    "trusted") and the report says what the NumPyro verdict says."""
    nb, _ = _execute("03-two-ways-to-infer.ipynb", tmp_path)
    out = _outputs(nb)
    page = (tmp_path / "audit-tutorial" / "report.html").read_text(encoding="utf-8")
    assert "<figure>" in page and "pymc" in page.lower()
    verdicts = {}
    for ppl in ("NumPyro", "PyMC"):
        line = re.search(rf"^{ppl}: +(reference .*)$", out, re.MULTILINE)
        assert line, out
        v = VERDICT.findall(line.group(1))
        assert len(v) == 1, line.group(1)
        verdicts[ppl] = v[0][0] == "TRUSTED"
    assert ("couple: reference trusted" in page) is verdicts["NumPyro"]
    # the notebook's draws are chosen so that the gate trusts both references, and only
    # then does "agree" (differences against Monte Carlo errors) mean something
    assert verdicts == {"NumPyro": True, "PyMC": True}, verdicts
    assert re.search(r"^reference trusted: True$", out, re.MULTILINE), out
    # the notebook's question "do the two PPLs agree?": yes, on every parameter
    assert re.search(r"^\w+ and \w+ agree on all [1-9]\d* parameters", out, re.MULTILINE), out


@pytest.mark.slow
@pytest.mark.realdata
def test_real_data_notebook(tmp_path, shared_datasets):
    """The notebook's claim: COUPLE's accuracy is around 92 % before and after removing
    the six noisiest workers (Table 6); both figures printed, parsed and checked."""
    nb, _ = _execute("04-real-data-babyface.ipynb", tmp_path)
    out = _outputs(nb).replace("\\n", "\n")        # tables' text/plain, JSON-quoted
    acc_all = float(re.search(r"COUPLE online, all workers: accuracy ([\d.]+) ±", out).group(1))
    row = re.search(r"^cleaned\s+(\d+)\s+([\d.]+)\s+([\d.]+)", out, re.MULTILINE)
    assert row, out
    assert int(row.group(1)) < 3068 and abs(float(row.group(2)) - acc_all) < 0.02
    assert abs(acc_all - 0.92) < 0.02 and abs(float(row.group(2)) - 0.92) < 0.02
    removed = re.search(r"removed: \[([^\]]*)\]", out)
    assert removed and len(re.findall(r"'[^']*'", removed.group(1))) == 6, out


@pytest.mark.slow
def test_site_pages_show_the_executed_tutorials_figures(tmp_path):
    """The site's tutorial pages, rendered by its Sphinx configuration from the notebooks
    the tests above executed (no second run): every page holds a figure and every image
    decodes in headless Chromium (tests/site_checks.py; ``make docs`` checks the same on
    its own executed build). Last in this file, which runs on one worker in order."""
    import site_checks

    if not EXECUTED:
        pytest.skip("no tutorial was executed in this session (the notebook tests above)")
    site = site_checks.render_tutorials(EXECUTED, tmp_path)
    names = [n.removesuffix(".ipynb") for n in EXECUTED]
    assert site_checks.tutorial_page_errors(site, names) == []
    exe = site_checks.check_site.chromium()
    if exe is None:
        pytest.skip("chromium not installed (apt-get install -y chromium): the tutorial "
                    "pages have their figures, but they were not decoded in a browser")
    errors = site_checks.check_site.image_errors(site, exe)
    assert errors == [], errors
    pages = {p.relative_to(site).as_posix() for p in site.glob("tutorials/*.html")}
    assert {f"tutorials/{n}.html" for n in names} <= pages

"""The tutorial notebooks (docs/tutorials/) run from top to bottom, so they never go stale.

Each notebook is executed in a fresh kernel with ``nbclient`` in a temporary folder (the
files it writes land there). They are stored without outputs and are built from
``docs/tutorials/make_notebooks.py``; a test checks that the stored files are what the
script writes. The BabyFace notebook needs the shared data sets (``realdata``).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
TUTORIALS = ROOT / "docs" / "tutorials"
sys.path.insert(0, str(TUTORIALS))
import make_notebooks

sys.path.remove(str(TUTORIALS))


def _execute(name: str, cwd: Path, timeout: int = 600) -> tuple[nbformat.NotebookNode, float]:
    from nbclient import NotebookClient

    nb = nbformat.read(TUTORIALS / name, as_version=4)
    env_before = os.environ.get("MPLBACKEND")
    os.environ["MPLBACKEND"] = "Agg"              # the kernel inherits it: no display needed
    try:
        t = time.perf_counter()
        NotebookClient(nb, timeout=timeout, kernel_name="python3",
                       resources={"metadata": {"path": str(cwd)}}).execute()
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
    nb, _ = _execute("01-generative-story.ipynb", tmp_path)
    out = _outputs(nb)
    assert "k = 2: Z = sum over the 2 orderings of Eq. 4 = 1.0000" in out
    assert (tmp_path / "story-out" / "story.html").is_file()


@pytest.mark.slow
def test_prior_predictive_notebook(tmp_path):
    nb, _ = _execute("02-prior-predictive.ipynb", tmp_path)
    assert "stage 1 (m=4)" in _outputs(nb)
    assert (tmp_path / "prior-out" / "prior_predictive.json").is_file()


@pytest.mark.slow
def test_two_ways_to_infer_notebook(tmp_path):
    nb, _ = _execute("03-two-ways-to-infer.ipynb", tmp_path)
    page = (tmp_path / "audit-tutorial" / "report.html").read_text(encoding="utf-8")
    assert "<figure>" in page and "pymc" in page.lower()
    assert "NumPyro:" in _outputs(nb)


@pytest.mark.slow
@pytest.mark.realdata
def test_real_data_notebook(tmp_path, shared_datasets):
    nb, _ = _execute("04-real-data-babyface.ipynb", tmp_path)
    assert "cleaned" in _outputs(nb)

"""``crowdrank fit --state-in``, through the installed command: continuing from a saved
state with the second half of the data gives the numbers of one pass over both halves
concatenated, bit for bit (floats round-trip exactly through ``posterior.json``), and
both equal the Python API on the concatenated data.

The second half has a worker and an item that the first half never saw (they start at
their prior) and lists its items in another order (the state is matched by id).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from crowdrank.inference.online import fit_online
from crowdrank.models.io import read_rankings
from crowdrank.models.priors import build_priors


def crowdrank_exe() -> str:
    """The installed entry point: next to this interpreter, else on PATH."""
    here = Path(sys.executable).parent / "crowdrank"
    exe = str(here) if here.exists() else shutil.which("crowdrank")
    if exe is None:
        pytest.skip("the crowdrank entry point is not installed (pip install -e .)")
    return exe


def run(args, cwd):
    env = dict(os.environ)     # PYTHONPATH: this checkout (conftest, bench/tools/checkout.py)
    out = subprocess.run([crowdrank_exe(), *args], cwd=cwd, capture_output=True, text=True,
                         timeout=300, env=env, check=False)
    assert out.returncode == 0, f"crowdrank {' '.join(args)}\n{out.stdout}\n{out.stderr}"
    return out


def halves(tmp_path: Path):
    rng = np.random.default_rng(4)
    items = [f"i{r}" for r in range(9)]
    rows = []
    for n in range(50):
        k = 4 if n in (0, 30) else int(rng.integers(2, 5))   # K = 4 in both halves
        w = f"u{int(rng.integers(3))}" if n < 30 else f"u{int(rng.integers(4))}"
        pool = items[:8] if n < 30 else items
        rows.append((w, ">".join(rng.permutation(pool)[:k])))
    rows[45] = ("u3", "i8>i0>i5")                            # a new worker and item
    first, second = rows[:30], rows[30:]
    for name, part in (("first.csv", first), ("more.csv", second), ("all.csv", rows)):
        (tmp_path / name).write_text("worker,ranking\n" + "".join(f"{w},{r}\n"
                                                                 for w, r in part))
    return tmp_path


def posterior(path: Path) -> dict:
    return json.loads(path.read_text())


@pytest.mark.parametrize("model", ["couple", "crowdbt"])
def test_state_in_equals_one_pass_over_both_files(tmp_path, model):
    d = halves(tmp_path)
    run(["fit", "first.csv", "--model", model, "--method", "online", "--out", "fit-1"], d)
    run(["fit", "more.csv", "--model", model, "--method", "online", "--state-in",
         "fit-1/posterior.json", "--out", "fit-2"], d)
    run(["fit", "all.csv", "--model", model, "--method", "online", "--out", "fit-all"], d)
    resumed, whole = posterior(d / "fit-2/posterior.json"), posterior(d / "fit-all/posterior.json")
    assert resumed["n_rankings"] == whole["n_rankings"] == 50
    assert resumed["items"].keys() == whole["items"].keys()
    for it, v in whole["items"].items():
        assert resumed["items"][it] == v, it                  # exact: same floats
    assert resumed["workers"] == whole["workers"]
    assert resumed["clamped"] == whole["clamped"]
    # and both are the Python API's one pass over the concatenated file
    data = read_rankings(d / "all.csv")
    post = fit_online(data, model, build_priors(data), progress=False)
    for r, it in enumerate(post.items):
        assert whole["items"][it]["mu"] == pytest.approx(post.mu[r], rel=1e-12)
        assert whole["items"][it]["sigma2"] == pytest.approx(post.sigma2[r], rel=1e-12)
    for w, wid in enumerate(post.workers):
        np.testing.assert_allclose(whole["workers"][wid]["alpha"], post.alpha[w], rtol=1e-12)

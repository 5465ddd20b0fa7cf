"""``bench/bench_approx_diagnose.py``: the per-parameter split of the study's medians.

Known answers, no fit: thirds by rank with ties kept in order; the box at its bounds; the
farthest parameters ordered by their excess over the box (a parameter inside it has none);
groups' medians and shares counted by hand; docs/fidelity.md holds what the record
renders.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from bench_scripts import load_script

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def diag():
    return load_script("bench/bench_approx_diagnose.py", "bench_approx_diagnose")


def test_terciles_split_by_rank(diag):
    assert diag.terciles(np.array([5, 1, 9, 3, 7, 2])).tolist() == [1, 0, 2, 1, 2, 0]
    assert diag.terciles(np.array([4, 4, 4])).tolist() == [0, 1, 2]      # ties: in order
    assert np.bincount(diag.terciles(np.arange(10.0))).tolist() == [4, 3, 3]


def test_box_groups_and_farthest_by_hand(diag):
    z = np.array([0.1, -0.1001, 0.0, 0.5, 0.05, -0.3])
    sd = np.array([0.9, 1.0, 1.1001, 1.0, 0.5, 1.0])
    assert diag.in_box(z, sd).tolist() == [True, False, False, False, False, False]
    g = np.array([0, 0, 1, 1, 2, 2])
    got = diag.by_group(z, sd, g)
    assert got["low"] == {"n": 2, "median_abs_z": 0.1, "median_sd_ratio": 0.95,
                          "share_in_box": 0.5}
    assert got["high"]["median_abs_z"] == pytest.approx(0.175, abs=1e-3)
    far = diag.worst(["a", "b", "c", "d", "e", "f"], z, sd, [1, 2, 3, 4, 5, 6], k=3)
    # excesses: d 0.4, e 0.4 (sd 0.5 below 0.9), f 0.2; a is inside (0)
    assert [w["name"] for w in far] == ["d", "e", "f"]
    assert far[0] == {"name": "d", "z": 0.5, "sd_ratio": 1.0, "evidence": 4}


def test_a_run_keeps_the_other_subjects_with_their_own_provenance(diag, tmp_path):
    """Re-running one subject leaves the earlier record's others in place, in the study's
    order, each with the date, commit and command that made it (and the page says so); a
    subject without a cached reference is reported as not run, never dropped."""
    import json

    path = tmp_path / "approx_diagnose.json"
    old_subject = {"name": "medium-expert", "status": "done", "model": "couple",
                   "items": {"evidence_by_group": {g: [1, 2] for g in diag.GROUPS}},
                   "methods": {}}
    path.write_text(json.dumps({"date": "2026-01-01T00:00:00Z", "commit": "abc1234",
                                "command": "python bench/bench_approx_diagnose.py run",
                                "subjects": [old_subject,
                                             {"name": "medium-spammer", "status": "x"}]}))
    rec = diag.run(["medium-spammer", "medium-amateur"], ["advi"], tmp_path / "no-cache",
                   path, ["run"])
    assert [s["name"] for s in rec["subjects"]] == ["medium-expert", "medium-amateur",
                                                   "medium-spammer"]
    kept = rec["subjects"][0]
    assert kept["commit"] == "abc1234" and kept["date"].startswith("2026-01-01")
    assert all(s["status"].startswith("not run: no cached reference")
               for s in rec["subjects"][1:])
    assert json.loads(path.read_text()) == rec
    page = diag.render_section(rec)
    assert "medium-expert on 2026-01-01T00:00:00Z at commit abc1234" in page

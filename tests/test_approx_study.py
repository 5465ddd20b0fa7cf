"""``bench/bench_approx_study.py``: the figures it derives and the page it renders.

Synthetic draws with known answers (no fit, no JAX): figures of a draw-based approximation
come from its draws, so a common shift of every score (which the data cannot see) leaves
the centred figures exactly at the reference's while the raw z equals the shift in sds;
the box and its distance at the bounds; the 2×2 table of k̂ against the box counted by
hand; docs/fidelity.md's section is what the record renders.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from bench_scripts import load_script

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def study():
    return load_script("bench/bench_approx_study.py", "bench_approx_study")


def _tree(lam, eta=None):
    from arviz_base import from_dict

    post = {"lambda": lam}
    coords = {"item": [f"i{k}" for k in range(lam.shape[-1])]}
    dims = {"lambda": ["item"]}
    if eta is not None:
        post["eta"] = eta
        coords["worker"] = [f"w{k}" for k in range(eta.shape[-1])]
        dims["eta"] = ["worker"]
    return from_dict({"posterior": post}, coords=coords, dims=dims)


def test_draw_figures_are_centred_per_draw(study):
    """A posterior whose every draw is the reference's shifted by one common level draw
    (sd 3, far wider than any score's): centred |z| 0 and sd ratio 1 exactly, raw |z| the
    mean shift over each score's sd. Centring independent marginals instead would read the
    level's variance as the centred scores' (sd ratio far above 1)."""
    from crowdrank.inference.posterior import Posterior

    rng = np.random.default_rng(0)
    L, C, S = 8, 2, 400
    lam = rng.normal(np.linspace(-1, 1, L), 0.3, (C, S, L))
    eta = rng.beta(6, 3, (C, S, 3))
    ref = study.fid.Reference(_tree(lam, eta))
    shift = rng.normal(0.5, 3.0, (C, S, 1))
    post = Posterior.from_draws("crowdbt", "test", draws={"lambda": lam + shift, "eta": eta},
                                items=[f"i{k}" for k in range(L)],
                                workers=[f"w{k}" for k in range(3)])
    r = study.compare_draws(post, ref)
    assert r["centred"]["median_abs_z"] == pytest.approx(0.0, abs=1e-12)
    assert r["centred"]["median_sd_ratio"] == pytest.approx(1.0, abs=1e-12)
    assert r["eta1"]["median_abs_z"] == pytest.approx(0.0, abs=1e-12)
    flat = lam.reshape(-1, L)
    expect = np.median(np.abs(shift.mean()) / flat.std(0, ddof=1))
    assert r["raw"]["median_abs_z"] == pytest.approx(expect, rel=1e-9)
    assert r["raw"]["median_sd_ratio"] > 5


def test_box_and_distance_at_the_bounds(study):
    inside = {"centred": {"median_abs_z": 0.1, "median_sd_ratio": 0.9},
              "eta1": {"median_abs_z": 0.05, "median_sd_ratio": 1.1}}
    assert study.box_figures(inside) == {"inside_box": True, "box_distance": 0.0}
    out = {"centred": {"median_abs_z": 0.13, "median_sd_ratio": 1.0},
           "eta1": {"median_abs_z": 0.02, "median_sd_ratio": 0.85}}
    assert study.box_figures(out) == {"inside_box": False, "box_distance": 0.05}
    # BT/PL: no worker parameters, the centred scores alone
    assert study.box_figures({"centred": {"median_abs_z": 0.02, "median_sd_ratio": 1.0},
                              "eta1": {}})["inside_box"] is True


def _row(label, khat, inside, cpu, dist=None):
    return {"label": label, "status": "done", "khat": khat, "inside_box": inside,
            "box_distance": 0.0 if inside else (dist or 0.2), "cpu_s": cpu,
            "centred": {"median_abs_z": 0.05, "median_sd_ratio": 1.0}, "eta1": {},
            "grad_evals": None, "grad_evals_kind": "not reported"}


def test_khat_table_and_advice_count_by_hand(study):
    rec = {"subjects": [
        {"name": "a", "trusted": True, "reference": {"cpu_s": 100.0}, "methods": [
            _row("x", 0.5, True, 30.0), _row("y", 0.9, True, 10.0),
            _row("z", 0.9, False, 1.0, 0.05), _row("n", None, False, 2.0),
            {"label": "late", "status": "not run: the study's deadline came first"}]},
        {"name": "b", "trusted": False, "reference": {"cpu_s": 50.0}, "methods": [
            _row("x", 0.3, True, 1.0)]}]}
    t = study.khat_table(rec)
    assert t == {"ok_in": 1, "ok_out": 0, "bad_in": 1, "bad_out": 1, "untrusted": 1,
                 "no_khat": 1}
    a = study.advice(rec["subjects"][0])
    assert a["best"]["label"] == "y" and a["goal"] is True       # 10 CPU s ≤ 100 / 5
    assert a["within_cost"] == ["y"]                             # x: 30 > 20
    assert a["closest"]["label"] == "y"                          # distance 0, cheaper
    slow = {"reference": {"cpu_s": 40.0}, "methods": [_row("x", 0.5, True, 9.0)]}
    assert study.advice(slow)["goal"] is False                   # 9 > 40 / 5


def test_headline_row_leaves_the_goal_open_until_every_setting_ran(tmp_path):
    hl = load_script("bench/tools/headline.py", "crowdrank_bench_headline")

    def subj(name, trusted, rows, ref=100.0):
        return {"name": f"medium-{name}", "trusted": trusted, "reference": {"cpu_s": ref},
                "methods": rows}
    rec = {"date": "2030-01-01", "commit": "abc1234", "subjects": [
        subj("expert", True, [_row("advi", 1.0, True, 20.0)]),        # 20 ≤ 100 / 5
        subj("amateur", True, [_row("advi", 1.0, True, 21.0)]),       # 21 > 100 / 5
        subj("spammer", False, [_row("advi", 1.0, True, 1.0)]),       # untrusted
        {"name": "medium-malicious", "status": "not run", "methods": []}]}
    (tmp_path / "approx_study.json").write_text(json.dumps(rec))
    [row] = hl.approx_study_rows(tmp_path)
    assert row.detail.endswith("1 of 2 settings measured have one (expert); not run or "
                               "untrusted: spammer, malicious")
    assert (row.figure, row.met) == ("1 of 4, 2 open", "–")
    for s in rec["subjects"][2:]:
        s.update(subj(s["name"].removeprefix("medium-"), True,
                      [_row("advi", 1.0, True, 1.0)]))
    (tmp_path / "approx_study.json").write_text(json.dumps(rec))
    assert hl.approx_study_rows(tmp_path)[0].met == "no"          # amateur misses the cost
    # a diagnosis of why amateur has none, made afterwards, does not meet the goal
    (tmp_path / "approx_diagnose.json").write_text(json.dumps({"subjects": [
        {"name": "medium-amateur", "status": "done"}]}))
    [row] = hl.approx_study_rows(tmp_path)
    assert (row.figure, row.met) == ("3 of 4", "no")
    assert row.source == "approx_study.json"
    rec["subjects"][1]["methods"][0]["cpu_s"] = 20.0
    (tmp_path / "approx_study.json").write_text(json.dumps(rec))
    assert hl.approx_study_rows(tmp_path)[0].met == "yes"


def test_an_interrupted_record_says_what_did_not_run(study):
    rec = {"subjects": [
        {"name": "a", "model": "bt", "status": "running", "trusted": True,
         "reference": {"cpu_s": 1.0, "backend": "numpyro", "tune": 1, "draws": 1,
                       "gate": "g", "wall_s": 1.0},
         "methods": [_row("x", 0.5, True, 1.0), {"label": "y", "status": "not run"}]},
        {"name": "b", "model": "bt", "status": "running", "methods": [{"label": "x", "status": "not run"}]},
        {"name": "c", "model": "bt", "status": "not run", "methods": [{"label": "x", "status": "not run"}]}]}
    a, b, c = study.close_record(rec)["subjects"]
    assert a["status"] == "partial (1 of 2 methods; stopped at the deadline)"
    assert a["methods"][1]["status"] == "not run: stopped at the deadline"
    assert b["status"] == "not run: stopped at the deadline before its NUTS reference finished"
    assert c["status"] == "not run: stopped at the deadline"
    assert "not run" in study.render_section(
        {"date": "d", "commit": "c", "command": "x", "load_before": [1.0], **rec})

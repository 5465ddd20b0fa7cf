"""``bench/bench_approx_paper.py``: the approximations at paper scale judged by k̂ — its
orchestration (a fit that ends in its budget gets a k̂ computed as ``fit --khat`` does; a
fit still running at the budget is stopped and recorded as not fitting), the page it
renders and the README's row."""

from __future__ import annotations

import json

import pytest
from bench_scripts import load_script


@pytest.fixture(scope="module")
def bap():
    return load_script("bench/bench_approx_paper.py", "bench_approx_paper")


@pytest.fixture(scope="module")
def hl():
    return load_script("bench/tools/headline.py", "headline")


@pytest.mark.slow
def test_a_fit_in_budget_gets_the_khat_of_fit_khat_and_a_late_one_is_stopped(bap, tmp_path):
    """At the tiny scale, the one-pass update ends in its budget and its k̂ is the one
    ``posterior_khat`` gives the same fit in this process; with no
    budget at all the child is stopped before its fit ends and the row says so."""
    from crowdrank.inference.approx.psis import posterior_khat
    from crowdrank.validation.pipelines.variants import fit_variant

    out = tmp_path / "rec.json"
    rec = bap.run(["one-pass"], 600, 300, 20.0, out, ["run"], scale="tiny")
    [row] = rec["methods"]
    assert row["status"] == "done", row
    d, pri = bap._data("tiny")
    want = posterior_khat(fit_variant(d, "couple", pri, {}), d, "couple", pri,
                          seed=0)["psis_khat"]
    assert row["khat"] == pytest.approx(round(want, 3))
    assert row["rankings"] == d.n_rankings and json.loads(out.read_text()) == rec
    late = bap.run(["advi elbo_tol=1e-05"], 0, 300, 20.0, out, ["run"], scale="tiny",
                   setup_s=0.5, append=True)
    first, row = late["methods"]                 # appended: the first row is kept
    assert first["khat"] == rec["methods"][0]["khat"] and late["appended"]
    assert row["label"] == "advi elbo_tol=1e-05"
    assert row["status"].startswith("did not fit: stopped after"), row
    assert "khat" not in row


def test_labels_name_the_study_plan_or_a_method_with_options(bap):
    assert bap.options_of("ep5 damping=0") == {"method": "ep", "ep_passes": "5",
                                               "damping": 0.0}
    assert bap.options_of("advi elbo_tol=1e-05,max_steps=20000") == {
        "method": "advi", "elbo_tol": 1e-05, "max_steps": 20000}


def _rec(*rows):
    return {"date": "2026-12-02T10:00:00Z", "commit": "abc1234", "command": "x",
            "prior": "geometric:a0=10,a=6", "budget_s": 1200, "methods": list(rows)}


def test_headline_row_is_met_only_by_a_reliable_method(hl, tmp_path):
    """Every method having run is not the goal: a method whose draws are reliable (k̂ ≤
    0.7) is; the best k̂ and how many fit are the detail."""
    done = {"label": "advi", "status": "done", "khat": 3.2}
    late = {"label": "fullrank-advi", "status": "did not fit: stopped after 1380 s wall"}
    (tmp_path / "approx_paper.json").write_text(json.dumps(_rec(done, late)))
    [row] = hl.approx_paper_row(tmp_path)
    assert (row.figure, row.met) == ("none reliable", "no")
    assert row.detail.startswith("1 of 2 methods fit") and "best k̂ 3.20 (advi)" in row.detail
    good = {"label": "ep5", "status": "done", "khat": 0.7}
    (tmp_path / "approx_paper.json").write_text(json.dumps(_rec(done, good, late)))
    [row] = hl.approx_paper_row(tmp_path)
    assert (row.figure, row.met) == ("1 of 3 reliable", "yes")
    # a k̂ without a fit in the budget counts for nothing
    (tmp_path / "approx_paper.json").write_text(json.dumps(_rec(
        dict(good, status="did not fit: the fit took 1300 s > 1200 s"))))
    assert (hl.approx_paper_row(tmp_path)[0].figure, hl.approx_paper_row(tmp_path)[0].met) \
        == ("none fit", "no")


def test_headline_row_of_the_approx_audit_says_over_budget(hl, tmp_path):
    rec = {"date": "2026-12-02T06:23:56+00:00", "commit": "41db168", "rc": 0,
           "command": "crowdrank audit --approx advi,laplace --out DIR", "wall_s": 184.7,
           "budget_s": 180.0, "models": {"couple": {"reference_trusted": True},
                                         "crowdbt": {"reference_trusted": True}}}
    (tmp_path / "approx.json").write_text(json.dumps(rec))
    [row] = hl.approx_audit_row(tmp_path)
    assert (row.figure, row.met) == ("185 s", "no")
    rec["wall_s"] = 170.0
    rec["models"]["crowdbt"]["reference_trusted"] = False
    (tmp_path / "approx.json").write_text(json.dumps(rec))
    row = hl.approx_audit_row(tmp_path)[0]
    assert (row.figure, row.goal, row.met) == ("170 s, NOT trusted", "≤ 180 s, trusted", "no")

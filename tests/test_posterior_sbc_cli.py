"""What users type for posterior SBC: ``crowdrank sbc --posterior DATA --method M``; the
files' contents and the printed verdict, and the refusals."""

from __future__ import annotations

import csv
import html
import json

import pytest

from crowdrank.reports.cli import main


@pytest.fixture(scope="module")
def rankings(tmp_path_factory):
    out = tmp_path_factory.mktemp("sim")
    assert main(["simulate", "--model", "crowdbt", "--items", "8", "--workers", "3",
                 "--tasks", "30", "--seed", "3", "--out", str(out)]) == 0
    return out / "rankings.csv"


def test_posterior_sbc_of_the_online_update_writes_its_verdict(rankings, tmp_path, capsys):
    out = tmp_path / "psbc"
    capsys.readouterr()
    rc = main(["sbc", "--posterior", str(rankings), "--model", "crowdbt", "--method",
               "online", "--sims", "12", "--augment", "0.5", "--processes", "1",
               "--no-progress", "--check", "--out", str(out)])
    printed = capsys.readouterr().out
    summary = json.loads((out / "posterior_sbc.json").read_text())
    assert rc == (0 if summary["calibrated"] else 3)
    assert summary["replicates"] == 12 and summary["method"] == "online"
    assert summary["timing"]["rankings_added"] == 45          # 0.5 x 90 rankings
    assert f"verdict: {summary['verdict']}" in printed
    rows = list(csv.reader((out / "ranks.csv").open(newline="")))
    assert rows[0][1:] == summary["names"] and len(rows) == 13
    assert set(summary["families"]) == {"lambda_centred", "eta"}
    page = (out / "posterior_sbc.html").read_text()
    assert html.escape(summary["verdict"]) in page and "cannot see" in page
    assert (out / "posterior_sbc_ecdf.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("argv, says", [
    (["--method", "em", "--model", "couple"], "--method em fits models crowdbt"),
    (["--method", "online", "--model", "crowdbt", "--method-option", "bogus=1"],
     "has no option bogus"),
    (["--method", "online", "--model", "crowdbt", "--augment", "0"], "--augment must be > 0"),
])
def test_posterior_sbc_refuses_what_it_cannot_check(rankings, tmp_path, capsys, argv, says):
    rc = main(["sbc", "--posterior", str(rankings), *argv, "--out", str(tmp_path / "x")])
    assert rc == 2 and says in capsys.readouterr().err


def test_prior_sbc_names_its_models_when_given_another(tmp_path, capsys):
    rc = main(["sbc", "--model", "couple-stagewise-typo", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 2 and "prior SBC has an exact simulator for" in err and "--posterior" in err


def test_an_audit_over_its_posterior_sbc_budget_says_what_it_skipped(rankings, tmp_path,
                                                                      capsys):
    out = tmp_path / "audit"
    rc = main(["audit", str(rankings), "--model", "crowdbt", "--no-checks",
               "--permutations", "0", "--max-nuts-minutes", "1e-6",
               "--posterior-sbc-minutes", "0", "--quiet", "--out", str(out)])
    printed = capsys.readouterr().out
    metrics = json.loads((out / "metrics.json").read_text())
    ps = metrics["models"]["crowdbt"]["variants"][0]["posterior_sbc"]
    assert rc == 0 and ps["skipped"].startswith("estimated")
    assert f"posterior SBC: not checked: {ps['skipped']}" in printed
    assert html.escape(f"not checked: {ps['skipped']}") in (out / "report.html").read_text()
    assert not (out / "posterior_sbc" / "crowdbt" / "default" / "ranks.csv").exists()


def test_the_recommendation_names_a_calibrated_method_or_says_none_is():
    from crowdrank.reports.posterior_sbc_html import recommendation

    def r(method, ok, secs, groups=("lambda_centred", "eta"), bad=()):
        return {"method": method, "variant": "default", "calibrated": ok, "seconds": secs,
                "groups": {g: {"calibrated": g not in bad} for g in groups}}

    two_ok = {"couple": [r("online", True, 9.0), r("ep", True, 3.0), r("advi", False, 1.0,
                                                                        bad=("eta",))]}
    assert recommendation(two_ok) == "couple: use ep (default), calibrated by posterior SBC."
    none = {"crowdbt": [r("online", False, 2.0, bad=("eta",)),
                        {"method": "ep", "variant": "method=ep", "skipped": "estimated 9 min"}]}
    text = recommendation(none)
    assert text.startswith("crowdbt: no checked method is calibrated")
    assert "online (eta)" in text and "not checked (over the time budget): ep" in text

"""Checks shared by the README tests (tests/test_readme_commands.py, the commands of
the code blocks; tests/test_readme_python.py, the Python quickstart and the make targets
named in the text): what a user relies on in each command's output, read independently of
the code that wrote it (csv, json, regular expressions, closed forms)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _last(results: dict):
    return list(results.values())[-1]


def _exists(*paths):
    def check(d, results):
        for p in paths:
            assert (d / p).exists(), f"{p} was not written"
    return check


def _csv(path: Path) -> list[dict]:
    import csv

    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def _rankings(path: Path) -> list[tuple[str, list[str]]]:
    """``(worker, items best first)`` of a rankings CSV, read here with :mod:`csv`."""
    return [(r["worker"], r["ranking"].split(">")) for r in _csv(path)]


#: the gate's verdict line: "reference TRUSTED (...)" or "reference NOT trusted: ... (...)"
VERDICT = re.compile(r"^reference (TRUSTED|NOT trusted)(?:: (.*))? \(R-hat max ([\d.]+|nan), "
                     r"ESS bulk min ([\d.]+|nan), ESS tail min ([\d.]+|nan), "
                     r"divergences (\d+), E-BFMI min ([\d.]+|nan)\)$", re.MULTILINE)


def _gate_ok(rhat, ess_bulk, ess_tail, div, ebfmi) -> bool:
    """The gate as README.md states it: R-hat < 1.01, ESS ≥ 400, no divergence (and
    E-BFMI ≥ 0.3, docs/design.md)."""
    return rhat < 1.01 and ess_bulk >= 400 and ess_tail >= 400 and div == 0 and ebfmi >= 0.3


def _check_audit(out, models=("couple", "crowdbt"), trusted=None):
    """An audit's outputs: the report's every cell equals metrics.json
    (tests/test_pinned_report.py), the verdict printed for each model equals the one in
    metrics.json, in the report and in the NUTS posterior's own record, and follows from
    the gate's figures; the printed λ median |z| is the median over parameters.csv's λ
    rows. ``trusted``: the verdict every model must have (None: not asserted)."""
    def check(d, results):
        import numpy as np
        from test_pinned_report import check_audit_dir

        from crowdrank.inference.nuts import read_nuts

        stdout = _last(results).stdout
        m = json.loads((d / out / "metrics.json").read_text())
        assert sorted(m["models"]) == sorted(models)
        assert f"report: {out}/report.html" in stdout
        assert check_audit_dir(d / out) > 0
        page = (d / out / "report.html").read_text()
        rows = _csv(d / out / "parameters.csv")
        printed = dict(re.findall(r"^(\S+): reference (trusted|NOT trusted);", stdout, re.MULTILINE))
        assert sorted(printed) == sorted(models), stdout
        for model in models:
            mm = m["models"][model]
            g = mm["gate"]
            verdict = mm["reference_trusted"]
            assert verdict is g["trusted"] is (printed[model] == "trusted")
            assert verdict == _gate_ok(g["rhat_max"], g["ess_bulk_min"], g["ess_tail_min"],
                                       g["divergences"], g["ebfmi_min"]), g
            assert (f"{model}: reference trusted" in page) is verdict
            assert int(read_nuts(d / out / model / "nuts").attrs["gate_trusted"]) == verdict
            if trusted is not None:
                assert verdict is trusted, f"{model}: {g}"
            lam = [r for r in rows if r["model"] == model and r["variant"] == "default"
                   and r["kind"] == "lambda"]
            assert lam and {r["reference_trusted"] for r in lam} == {str(verdict)}
            mz = float(np.median([abs(float(r["z"])) for r in lam]))
            assert mm["aggregates"]["lambda"]["median_abs_z"] == pytest.approx(mz, rel=1e-9)
            assert re.search(rf"^{re.escape(model)}: .*λ median \|z\| {mz:.3f},", stdout, re.MULTILINE)
    return check


def _check_story(out, model="couple", setting="amateur", seed=0):
    """The story's page names its command and tells the numbers of story.json: the λ
    table, E[η] = α0/Σα0 of the worker types, the Gumbel-trick frequencies against
    softmax(λ) of the task computed here, and the normaliser (Z = 1 for pairs and for
    normalised COUPLE, not for Eq. 4 at k = 4)."""
    def check(d, results):
        import numpy as np

        md = (d / out / "story.md").read_text()
        s = json.loads((d / out / "story.json").read_text())
        assert (s["model"], s["setting"], s["seed"]) == (model, setting, seed)
        assert (f"`crowdrank story --model {model} --setting {setting} --seed {seed}`"
                in md)
        types = 0
        for rank, (item, lam) in enumerate(sorted(s["lambda"].items(), key=lambda x: -x[1])):
            assert f"| {rank + 1} | {item} | {lam:.3f} |" in md
        for row in re.findall(r"^\| \**(expert|amateur|spammer|malicious)\** \| ([\d., ]+) \| "
                              r"([\d., ]+) \|$", md, re.MULTILINE):
            a0 = np.array([float(x) for x in row[1].split(",")])
            assert [float(x) for x in row[2].split(",")] == pytest.approx(
                a0 / a0.sum(), abs=0.0051), row
            types += 1
        assert types == 4, "the worker types' E[η] table is missing"
        g = s["gumbel_check"]
        lam = np.array([s["lambda"][i] for i in s["task"]])
        p = np.exp(lam - lam.max())
        p /= p.sum()
        np.testing.assert_allclose(g["softmax"], p, rtol=1e-9)
        se = np.sqrt(p * (1 - p) / g["n"])
        assert np.all(np.abs(np.array(g["simulated"]) - p) < 5 * se)
        z = s["normalizer"]
        assert z["Z_pair"] == pytest.approx(1) and z["pl_sum"] == pytest.approx(1)
        assert z["normalized_sum"] == pytest.approx(1) and z["story_sum"] == pytest.approx(1)
        assert z["k"] == 4 and abs(z["Z"] - 1) > 1e-3 and z["Z"] == pytest.approx(z["eq4_sum"])
        html = (d / out / "story.html").read_text()
        assert html.count("data:image/png;base64,") >= 3
    return check


def _check_prior_predictive(out, stdout=None):
    """prior_predictive.json: the geometric prior's α_t = a0 a^-t from its spec, the
    stage-1 first-choice rate near α1/Σα (closed form) and the lines the command prints."""
    import numpy as np

    pp = json.loads((Path(out) / "prior_predictive.json").read_text())
    if stdout is None:          # not printed (the tutorial notebook): the JSON only
        stdout = "".join(f"prior predictive, {n}: first-choice accuracy "
                         f"{pr['first_choice_mean']}, {100 * pr['worse_than_random']} % of "
                         "workers worse than random\n" for n, pr in pp["priors"].items())
    printed = {n: (float(a), float(w)) for n, a, w in re.findall(
        r"^prior predictive, (\w+): first-choice accuracy ([\d.]+), ([\d.]+) % of workers "
        r"worse than random$", stdout, re.MULTILINE)}
    assert sorted(printed) == sorted(pp["priors"]), stdout
    for name, pr in pp["priors"].items():
        assert printed[name] == pytest.approx((pr["first_choice_mean"],
                                               100 * pr["worse_than_random"]), abs=0.051)
    geo = pp["priors"]["geometric"]
    a0, a = (float(v) for v in re.findall(r"a0=([\d.]+),a=([\d.]+)", geo["spec"])[0])
    alpha = a0 * a ** -np.arange(1, pp["K"] + 1)
    np.testing.assert_allclose(geo["alpha_first_worker"], alpha, rtol=1e-12)
    for pr in pp["priors"].values():          # stage 1 over K items: α1/Σα, ±5 se
        al = np.array(pr["alpha_mean"])
        n = pr["draws"] * pr["workers_per_draw"] * pp["tasks_per_worker"]
        e1 = al[0] / al.sum()
        assert abs(pr["stage_rates"][0] - e1) < 0.05 + 5 * np.sqrt(e1 * (1 - e1) / n), pr

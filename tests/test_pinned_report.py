"""Every number in the audit report's tables is the one in ``metrics.json``, under the
right label.

The page is parsed as HTML (tables, their headers and the model heading above them) and
each cell is compared with the value that ``metrics.json`` holds for its label, to the
three significant digits the page prints. A label the mapping below does not know is a
failure too: a new column must say where its number comes from.

The fast test renders the page from synthetic results (no NUTS run) in which the online
accuracy clearly differs from NUTS', so that swapped labels show; the README test of
``crowdrank audit`` (``tests/test_readme_commands.py``) runs the same check on a real
audit's files.
"""

from __future__ import annotations

import json
import math
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from crowdrank.inference.gate import Gate

# ---------------------------------------------------------------- column → metrics.json key
SUMMARY = {
    "reference trusted": ("reference_trusted",),
    "λ median |z|": ("aggregates", "lambda", "median_abs_z"),
    "λ p90 |z|": ("aggregates", "lambda", "p90_abs_z"),
    "λ median sd ratio": ("aggregates", "lambda", "median_sd_ratio"),
    "share close (all)": ("aggregates", "all", "share_close"),
    "coverage 50 %": ("aggregates", "all", "mean_coverage_50"),
    "coverage 90 %": ("aggregates", "all", "mean_coverage_90"),
    "Kendall τ (means)": ("ranking", "kendall_tau"),
    "accuracy online": ("ranking", "accuracy_online"),
    "accuracy NUTS": ("ranking", "accuracy_nuts"),
    "NUTS s": ("timings", "nuts", "total"),
    "online s": ("timings", "online", "default", "wall"),
}
AGGREGATES = {
    "n": "n", "median |z|": "median_abs_z", "p90 |z|": "p90_abs_z",
    "median e/s": "median_noise_floor", "median sd ratio": "median_sd_ratio",
    "share close": "share_close", "coverage 50 %": "mean_coverage_50",
    "coverage 90 %": "mean_coverage_90", "median KL": "median_kl", "median W1/s": "median_w1",
}
RANKING = {
    "Kendall τ online vs NUTS": "kendall_tau", "top-10 overlap": "top10_overlap",
    "accuracy online": "accuracy_online", "accuracy NUTS": "accuracy_nuts",
    "τ truth–online": "kendall_tau_truth_online", "τ truth–NUTS": "kendall_tau_truth_nuts",
}
IDENTIFIED = dict(AGGREGATES)
ORDER = {"pairs": "n", "median |Δp|": "median_abs_diff", "p90 |Δp|": "p90_abs_diff",
         "max |Δp|": "max_abs_diff", "over-confidence": "mean_overconfidence",
         "share flipped": "share_flipped", "median iid se": "median_iid_se"}
VARIANTS_IDENTIFIED = {"centred λ median |z|": ("centred", "median_abs_z"),
                       "centred λ median sd ratio": ("centred", "median_sd_ratio")}
VARIANTS = {
    "λ median |z|": ("lambda", "median_abs_z"), "λ median sd ratio": ("lambda", "median_sd_ratio"),
    "η median |z|": ("eta", "median_abs_z"), "η median sd ratio": ("eta", "median_sd_ratio"),
    "share close": ("all", "share_close"),
}


class Tables(HTMLParser):
    """Tables of a page with the ``h2`` section and last ``h3`` heading above each."""

    def __init__(self):
        super().__init__()
        self.tables, self.section, self.heading = [], None, None
        self._text, self._cur, self._row, self._tag = None, None, None, None

    def handle_starttag(self, tag, attrs):
        if tag in ("h2", "h3", "th", "td"):
            self._text, self._tag = [], tag
        elif tag == "table":
            self._cur = {"section": self.section, "heading": self.heading, "head": [],
                         "rows": []}
        elif tag == "tr" and self._cur is not None:
            self._row = []

    def handle_data(self, data):
        if self._text is not None:
            self._text.append(data)

    def handle_endtag(self, tag):
        if tag in ("h2", "h3", "th", "td") and self._text is not None:
            text = "".join(self._text).strip()
            self._text = None
            if tag == "h2":
                self.section, self.heading = text, None
            elif tag == "h3":
                self.heading = text
            elif self._row is not None:
                self._row.append((tag, text))
        elif tag == "tr" and self._cur is not None and self._row is not None:
            if self._row and all(t == "th" for t, _ in self._row):
                self._cur["head"] = [x for _, x in self._row]
            elif self._row:
                self._cur["rows"].append([x for _, x in self._row])
            self._row = None
        elif tag == "table" and self._cur is not None:
            self.tables.append(self._cur)
            self._cur = None


def parse_tables(html_text: str) -> list[dict]:
    p = Tables()
    p.feed(html_text)
    return p.tables


def dig(d, path):
    for k in path:
        d = d[k]
    return d


def same(cell: str, value, where: str):
    """The printed cell shows ``value`` (None/NaN as a dash, booleans as yes/no, numbers to
    three significant digits, thousands with separators)."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        assert cell == "—", f"{where}: page {cell!r}, metrics.json {value!r}"
        return
    if isinstance(value, bool):
        assert cell == ("yes" if value else "no"), f"{where}: page {cell!r}, json {value!r}"
        return
    got = float(cell.replace(",", ""))
    v = float(value)
    tol = 0.5 if abs(v) >= 1000 else 0.005 * abs(v) + 1e-12
    assert abs(got - v) <= tol, f"{where}: page {cell!r}, metrics.json {value!r}"


def check_report(html_text: str, metrics: dict) -> int:
    """Compare the summary, aggregate, ranking and variant tables with ``metrics``;
    returns the number of cells compared."""
    models = metrics["models"]
    tables = parse_tables(html_text)
    n = 0
    summary = [t for t in tables if t["section"] == "Summary" and "accuracy online" in t["head"]]
    assert len(summary) == 1, "the summary table is missing"
    t = summary[0]
    assert sorted(r[0] for r in t["rows"]) == sorted(models)
    for row in t["rows"]:
        m = models[row[0]]
        for h, cell in zip(t["head"][1:], row[1:]):
            assert h in SUMMARY, f"summary column {h!r} has no metrics.json key here"
            same(cell, dig(m, SUMMARY[h]), f"summary {row[0]} / {h}")
            n += 1
    aggs = [t for t in tables if t["section"] == "Approximation vs MCMC"
            and t["head"] and t["head"][0] == "parameters"]
    assert len(aggs) == len(models)
    for t in aggs:
        model = t["heading"].split(":")[0]
        for row in t["rows"]:
            agg = models[model]["aggregates"][row[0]]
            for h, cell in zip(t["head"][1:], row[1:]):
                assert h in AGGREGATES, f"aggregate column {h!r} has no metrics.json key"
                same(cell, agg.get(AGGREGATES[h]), f"aggregates {model}/{row[0]} / {h}")
                n += 1
    ident = [t for t in tables if t["section"] == "Approximation vs MCMC"
             and t["head"] and t["head"][0] == "quantity"]
    assert len(ident) == len(models), "the identified-quantities table is missing"
    for t in ident:
        model = t["heading"].split(":")[0]
        assert [r[0] for r in t["rows"]] == [k for k in ("raw", "raw_level_corrected",
                                                         "centred", "contrast", "level")
                                             if k in models[model]["identified"]]
        for row in t["rows"]:
            agg = models[model]["identified"][row[0]]
            for h, cell in zip(t["head"][1:], row[1:]):
                assert h in IDENTIFIED, f"identified column {h!r} has no metrics.json key"
                same(cell, agg.get(IDENTIFIED[h]), f"identified {model}/{row[0]} / {h}")
                n += 1
    orders = [t for t in tables if t["section"] == "Approximation vs MCMC"
              and t["head"] and t["head"][0] == "order probabilities"]
    assert len(orders) == len(models), "the order-probability table is missing"
    for t in orders:
        model = t["heading"].split(":")[0]
        (row,) = t["rows"]
        op = models[model]["identified"]["order_probability"]
        for h, cell in zip(t["head"][1:], row[1:]):
            assert h in ORDER, f"order-probability column {h!r} has no metrics.json key"
            same(cell, op.get(ORDER[h]), f"order probabilities {model} / {h}")
            n += 1
    rank = [t for t in tables if t["section"] == "Ranking agreement and accuracy"]
    assert len(rank) == 1
    t = rank[0]
    for row in t["rows"]:
        model, variant = row[0], row[1]
        (v,) = [v for v in models[model]["variants"] if v["variant"] == variant]
        for h, cell in zip(t["head"][2:], row[2:]):
            assert h in RANKING, f"ranking column {h!r} has no metrics.json key"
            same(cell, v["ranking"].get(RANKING[h]), f"ranking {model}/{variant} / {h}")
            n += 1
    var = [t for t in tables if t["section"] == "Variants compared"]
    assert len(var) == 1
    t = var[0]
    expected = [(m, v) for m in models for v in models[m]["variants"]]
    assert len(t["rows"]) == len(expected)
    for row, (model, v) in zip(t["rows"], expected):
        assert row[0].startswith(model)
        for h, cell in zip(t["head"][2:], row[2:]):
            if h == "accuracy":
                same(cell, v["ranking"].get("accuracy_online"), f"variants {row[0]} / {h}")
            elif h == "PSIS k̂":       # "k̂ (label)" from the variant's entry, or n/a
                k = v.get("psis_khat")
                assert cell == ("n/a" if k is None else f"{k:.2f} ({v['psis_label']})"), \
                    f"variants {row[0]} / {h}: {cell!r} vs metrics {k!r}"
            elif h in VARIANTS_IDENTIFIED:
                k1, k2 = VARIANTS_IDENTIFIED[h]
                same(cell, (v.get("identified") or {}).get(k1, {}).get(k2),
                     f"variants {row[0]} / {h}")
            else:
                assert h in VARIANTS, f"variants column {h!r} has no metrics.json key"
                same(cell, v["aggregates"].get(VARIANTS[h][0], {}).get(VARIANTS[h][1]),
                     f"variants {row[0]} / {h}")
            n += 1
    return n


def check_audit_dir(out: Path) -> int:
    """The check on an audit's output folder (``report.html`` + ``metrics.json``)."""
    metrics = json.loads((out / "metrics.json").read_text())
    return check_report((out / "report.html").read_text(), metrics)


# ---------------------------------------------------------------- a synthetic audit
def synthetic_audit(tmp_path: Path):
    """Both models from iid synthetic draws; the online means are *noisy* (accuracy well
    below NUTS'), the second variant less so, and CrowdBT's gate fails."""
    from test_compare import ALPHA, WORKERS, make_idata, online_stub

    from crowdrank.models.simulate import simulate
    from crowdrank.reports.audit import (
        AuditConfig,
        ModelAudit,
        Subject,
        build_metrics,
        jsonable,
        make_priors,
    )
    from crowdrank.reports.audit_html import write_audit_report
    from crowdrank.validation.compare import compare, order_sensitivity

    sim = simulate("couple", n_items=30, n_workers=3, tasks_per_worker=20, seed=1)
    items = list(sim.rankings.items)
    truth = np.sort(sim.lam)
    sd = np.full(30, 0.3)
    rng = np.random.default_rng(7)
    subject = Subject(sim.rankings, truth=truth, truth_eta1=ALPHA[:, 0] / ALPHA.sum(1),
                      description="synthetic")
    cfg = AuditConfig(chains=4, draws=400)
    audits = []
    for model, alpha in (("couple", ALPHA), ("crowdbt", ALPHA[:, :2])):
        dt = make_idata(truth, sd, alpha, model=model, draws=400, items=items,
                        workers=WORKERS)
        trusted = model == "couple"
        gate = Gate(trusted=trusted, reasons=[] if trusted else ["bulk ESS 120 < 400"])
        nuts = SimpleNamespace(idata=dt, gate=gate,
                               timings={"warmup": 3.0, "sampling": 4.0, "total": 8.25})
        comps, opts = [], [{"taylor": "paper"}, {"taylor": "full"}]
        for i, o in enumerate(opts):
            noise = rng.normal(0, 1.2 / (i + 1), 30)
            on = online_stub(model, items, truth + noise, sd * (0.7 + 0.2 * i), WORKERS,
                             alpha * (1 + 0.3 * i))
            on.options = {"mu0": 0.0, "sigma0": 1.0}     # the level-corrected row too
            comps.append(compare(on, dt, gate=gate, truth=truth, model=model,
                                 variant="default" if i == 0 else "taylor=full",
                                 truth_eta1=ALPHA[:, 0] / ALPHA.sum(1)))
        order = order_sensitivity(truth + rng.normal(0, 0.05, (3, 30)), truth + 0.02, truth,
                                  sd, items)
        audits.append(ModelAudit(model, nuts, on, comps, opts, order,
                                 [{"label": f"{model} NUTS total", "seconds": 8.25},
                                  {"label": f"{model} online (wall)", "seconds": 0.0123}],
                                 {"default": {"wall": 0.0123, "updates": 0.005}}))
    priors = make_priors(sim.rankings, cfg)
    metrics = build_metrics(subject, cfg, priors, audits, 1.0)
    write_audit_report(tmp_path / "report.html", subject, cfg, priors, audits, metrics)
    (tmp_path / "metrics.json").write_text(json.dumps(jsonable(metrics), indent=1))
    return tmp_path


@pytest.fixture(scope="module")
def audit_dir(tmp_path_factory):
    return synthetic_audit(tmp_path_factory.mktemp("pinned-report"))


def test_accuracies_differ_in_the_synthetic_audit(audit_dir):
    # the premise of the label check: online and NUTS accuracies are far apart
    m = json.loads((audit_dir / "metrics.json").read_text())["models"]
    for model in ("couple", "crowdbt"):
        r = m[model]["ranking"]
        assert r["accuracy_nuts"] - r["accuracy_online"] > 0.05


def test_report_tail_visits_lines_equal_metrics_json(audit_dir):
    """The MCMC diagnostics' informational tail-visits line of each model carries
    metrics.json's ``tail_visits`` numbers (read back from the page's text)."""
    import html as _html
    import re

    text = _html.unescape((audit_dir / "report.html").read_text())
    m = json.loads((audit_dir / "metrics.json").read_text())["models"]
    for model in ("couple", "crowdbt"):
        tv = m[model]["tail_visits"]
        hit = re.search(rf"{model}: E\[η\] of the (\d+) prior-dominated simplex entries "
                        rf"\(α < 0\.5\) rests on (\d+) to (\d+) \(fewest, median\)", text)
        assert hit, model
        assert int(hit[1]) == tv["entries"]
        assert (int(hit[2]), int(hit[3])) == (round(tv["effective_min"]),
                                             round(tv["effective_median"]))


def test_report_tables_equal_metrics_json(audit_dir):
    n = check_audit_dir(audit_dir)
    assert n >= 2 * 12 + 6 * 10 + 4 * 6 + 4 * 8 + 2 * 5 * 10 + 2 * 7


def test_the_check_notices_a_wrong_centred_number(audit_dir):
    text = (audit_dir / "report.html").read_text()
    metrics = json.loads((audit_dir / "metrics.json").read_text())
    c = metrics["models"]["couple"]["identified"]["centred"]
    c["median_sd_ratio"] = 2 * c["median_sd_ratio"] + 1
    with pytest.raises(AssertionError, match="identified couple/centred"):
        check_report(text, metrics)


def test_the_check_notices_swapped_labels(audit_dir):
    text = (audit_dir / "report.html").read_text()
    metrics = json.loads((audit_dir / "metrics.json").read_text())
    for m in metrics["models"].values():
        r = m["ranking"]
        r["accuracy_online"], r["accuracy_nuts"] = r["accuracy_nuts"], r["accuracy_online"]
    with pytest.raises(AssertionError, match="accuracy"):
        check_report(text, metrics)

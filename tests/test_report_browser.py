"""The audit page: assembled from synthetic results (no NUTS run needed), then opened once
in headless Chromium to check that every embedded image decodes.

Chromium comes from the Debian packages (``apt-get install -y chromium``); without it the
browser test is skipped with a message, the offline checks still run.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from test_compare import ALPHA, WORKERS, make_idata, online_stub

from crowdrank.inference.gate import Gate

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"]


def synthetic_audit(tmp_path: Path):
    """ModelAudit objects for COUPLE and CrowdBT built from iid synthetic draws, in the
    shapes the real pipeline produces; returns the report path and the metrics."""
    from crowdrank.models.simulate import simulate
    from crowdrank.reports.audit import AuditConfig, ModelAudit, Subject, build_metrics, make_priors
    from crowdrank.reports.audit_html import write_audit_report
    from crowdrank.validation.compare import compare, order_sensitivity

    sim = simulate("couple", n_items=30, n_workers=3, tasks_per_worker=20, seed=1)
    items = list(sim.rankings.items)
    mu, sd = np.sort(sim.lam), np.full(30, 0.3)
    subject = Subject(sim.rankings, truth=mu, truth_eta1=ALPHA[:, 0] / ALPHA.sum(1),
                      description="synthetic")
    cfg = AuditConfig(chains=4, draws=400)
    audits = []
    for model, alpha in (("couple", ALPHA), ("crowdbt", ALPHA[:, :2])):
        dt = make_idata(mu, sd, alpha, model=model, draws=400, items=items, workers=WORKERS)
        gate = Gate(trusted=model == "couple",
                    reasons=[] if model == "couple" else ["min bulk ESS 120 < 400"])
        nuts = SimpleNamespace(idata=dt, gate=gate, timings={"warmup": 3.0, "sampling": 4.0,
                                                             "total": 8.0})
        comps, opts = [], [{"taylor": "paper"}, {"taylor": "full"}]
        for i, o in enumerate(opts):
            on = online_stub(model, items, mu + 0.02 * (i + 1), sd * (0.9 + 0.1 * i), WORKERS,
                             alpha)
            comps.append(compare(on, dt, gate=gate, truth=mu, model=model,
                                 variant="default" if i == 0 else "taylor=full",
                                 truth_eta1=ALPHA[:, 0] / ALPHA.sum(1)))
        rng = np.random.default_rng(0)
        order = order_sensitivity(mu + rng.normal(0, 0.01, (3, 30)), mu + 0.02, mu, sd, items)
        audits.append(ModelAudit(model, nuts, on, comps, opts, order,
                                 [{"label": f"{model} NUTS total", "seconds": 8.0},
                                  {"label": f"{model} online (wall)", "seconds": 0.01}],
                                 {"default": {"wall": 0.01, "updates": 0.005}}))
    priors = make_priors(sim.rankings, cfg)
    metrics = build_metrics(subject, cfg, priors, audits, 1.0)
    path = write_audit_report(tmp_path / "report.html", subject, cfg, priors, audits, metrics)
    return path, metrics


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    return synthetic_audit(tmp_path_factory.mktemp("report"))


def test_report_is_self_contained(report):
    path, metrics = report
    text = path.read_text()
    srcs = re.findall(r'src="([^"]*)"', text)
    assert len(srcs) >= 15
    assert all(s.startswith("data:image/png;base64,") for s in srcs)
    # no external resource of any kind: no link, script or url() loads
    assert not re.search(r"<(script|link)\b", text)
    assert "url(" not in text and "@import" not in text
    for section in ("Data", "MCMC diagnostics", "Approximation vs MCMC", "Worker quality",
                    "Ranking agreement and accuracy", "Order sensitivity", "Timings",
                    "Variants compared"):
        assert f">{section}</h2>" in text
    assert "reference not trusted" in text.lower()        # crowdbt's gate failed
    assert metrics["models"]["crowdbt"]["reference_trusted"] is False


@pytest.mark.parametrize("broken", [False, True])
def test_images_load_in_headless_chromium(report, tmp_path, broken):
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("chromium not installed (apt-get install -y chromium): the report's "
                    "images were not checked in a browser")
    path, _ = report
    n_img = len(re.findall(r"<img\b", path.read_text()))
    # A copy with a probe: after 'load', count images that decoded to a real bitmap.
    probe = ("<script>window.addEventListener('load',function(){var im=[...document.images];"
             "var ok=im.filter(function(i){return i.complete&&i.naturalWidth>0}).length;"
             "var d=document.createElement('div');d.id='probe';d.textContent='IMAGES '+ok+'/'+"
             "im.length;document.body.appendChild(d);});</script>")
    text = path.read_text()
    if broken:   # the probe must notice an image that does not decode
        text = re.sub(r'src="data:image/png;base64,[^"]*"', 'src="data:image/png;base64,AAAA"',
                      text, count=1)
    page = tmp_path / "probe.html"
    page.write_text(text.replace("</body>", probe + "</body>"))
    out = subprocess.run([exe, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}",
                          "--virtual-time-budget=20000", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120, check=False)
    m = re.search(r"IMAGES (\d+)/(\d+)", out.stdout)
    assert m, f"probe did not run; chromium stderr: {out.stderr[-800:]}"
    assert int(m.group(2)) == n_img
    assert int(m.group(1)) == n_img - broken, f"{m.group(1)} of {n_img} images decoded"

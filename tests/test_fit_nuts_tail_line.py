"""``crowdrank fit --method nuts`` prints the audit's informational tail-visits line for a
model with a worker simplex, and nothing for one without.

The sampler is replaced by iid draws (fast, and their tail-visit count is known: about
``n · 1 %`` effective visits), so the test checks the command's wiring and the sentence, not
NUTS; the real sampler goes through the same line in tests/test_nuts.py's slow CLI test.
"""

from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np

from crowdrank.models.simulate import simulate


def _fake_nuts(monkeypatch, eta):
    """Replace the sampler and the writer by iid ``eta`` draws and no files."""
    from arviz_base import from_dict

    from crowdrank.inference import nuts

    idata = from_dict({"posterior": {"eta": eta}}, dims={"eta": ["worker"]})
    gate = SimpleNamespace(verdict=lambda: "gate: reference trusted (fake draws)")
    monkeypatch.setattr(nuts, "fit_nuts", lambda *a, **k: SimpleNamespace(
        idata=idata, gate=gate, timings={"total": 0.0}))
    monkeypatch.setattr(nuts, "write_nuts", lambda result, out: {
        "posterior": f"{out}/posterior.nc", "summary": f"{out}/summary.csv"})


def test_fit_nuts_prints_tail_visits_line_only_with_a_worker_simplex(tmp_path, capsys,
                                                                     monkeypatch):
    from crowdrank.models.io import write_rankings
    from crowdrank.reports.cli import main

    sim = simulate("crowdbt", n_items=4, n_workers=3, tasks_per_worker=6, seed=3)
    f = tmp_path / "pairs.csv"
    write_rankings(sim.rankings, f)
    W = sim.rankings.n_workers
    # the default worker prior's CrowdBT Beta(a, b) = (1.67, 0.28): the 1 − η entry of every
    # worker is prior-dominated (b < 0.5), η's is not
    eta = np.random.default_rng(0).beta(1.67, 0.28, size=(4, 1000, W))
    _fake_nuts(monkeypatch, eta)
    args = ["fit", str(f), "--method", "nuts", "--chains", "4", "--draws", "1000",
            "--out", str(tmp_path / "o"), "--no-progress"]
    assert main(args + ["--model", "crowdbt"]) == 0
    out = capsys.readouterr().out
    lines = [ln for ln in out.splitlines() if "prior-dominated" in ln]
    assert len(lines) == 1 and lines[0].startswith("crowdbt: ")
    assert f"the {W} prior-dominated simplex entries (α < 0.5)" in lines[0]
    assert "(40 for iid draws" in lines[0] and "not part of the gate" in lines[0]
    lo, med = map(float, re.search(r"rests on (\d+) to (\d+)", lines[0]).groups())
    assert 20 <= lo <= med <= 60                      # iid: ~ 4000 · 1 % = 40 each
    assert out.index("gate:") < out.index("prior-dominated") < out.index("wrote ")
    # BT has no worker simplex: the gate and the files, no tail line
    assert main(args + ["--model", "bt"]) == 0
    out = capsys.readouterr().out
    assert "gate:" in out and "prior-dominated" not in out

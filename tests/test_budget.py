"""The audit's run sizing and cost estimate (crowdrank.validation.pipelines.budget).

Oracles: simulated iid chains (the draws rule's R-hat distribution), hand arithmetic (the
estimate), and a tiny audit whose budget cannot hold its NUTS run (the refusal path, with
NUTS itself replaced by a function that fails the test if called).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from crowdrank.validation.pipelines import budget


def _iid_rhat(draws: int, n_params: int, seed: int) -> np.ndarray:
    import arviz_stats as azs

    x = np.random.default_rng(seed).standard_normal((4, draws, n_params))
    return np.asarray(azs.rhat(x, method="rank", chain_axis=0, draw_axis=1))


def test_rhat_exceedance_matches_iid_simulation():
    """Per parameter, P(rank R-hat >= r) of 4 iid chains is 1 - (1 - p)^2 with p the F
    tail of :func:`budget.rhat_exceed_prob` (bulk and folded R-hat); 4,000 simulated
    parameters at 100 draws, where the rate is large enough to measure."""
    n, draws = 4000, 100
    r = _iid_rhat(draws, n, seed=11)
    for t in (1.01, 1.02):
        p = budget.rhat_exceed_prob(draws // 2, 8, t)
        want = 1 - (1 - p) ** 2
        sd = np.sqrt(want * (1 - want) / n)
        assert abs((r >= t).mean() - want) < 4 * sd + 1e-4, (t, (r >= t).mean(), want)
    # the gate's maximum over 20 parameters: 200 groups of 20 simulated parameters
    groups = (r.reshape(200, 20) < 1.01).all(axis=1).mean()
    want = budget.gate_pass_prob(draws, 20)
    assert abs(groups - want) < 4 * np.sqrt(want * (1 - want) / 200), (groups, want)


@pytest.mark.parametrize("n_params", [10, 300, 2400, 100_000])
def test_draws_rule_is_the_smallest_passing_length(n_params):
    d = budget.draws_for_gate(n_params)
    assert budget.gate_pass_prob(d, n_params) >= budget.PASS_PROB
    floor = np.ceil(400 / budget.ESS_RATIO_FLOOR / 4)
    if d - budget.DRAWS_STEP >= floor:
        assert budget.gate_pass_prob(d - budget.DRAWS_STEP, n_params) < budget.PASS_PROB
    # the failing real case: 2,400 parameters need more than the 300-parameter rule
    assert budget.draws_for_gate(2400) > budget.draws_for_gate(300)


def test_draws_rule_passes_the_gate_on_iid_chains():
    """The whole gate (R-hat, bulk and tail ESS) on iid chains of the rule's length: 40
    seeded replicates of 50 parameters pass at least 36 times (the rule's 95 %, less
    binomial noise: P(fewer than 36 of 40 | 0.95) < 5 %)."""
    from arviz_base import from_dict

    from crowdrank.inference.gate import check

    P = 50
    d = budget.draws_for_gate(P)
    rng = np.random.default_rng(5)
    passed = 0
    for _ in range(40):
        post = {"lambda": rng.standard_normal((4, d, P))}
        stats = {"diverging": np.zeros((4, d), bool), "energy": rng.standard_normal((4, d))}
        passed += check(from_dict({"posterior": post, "sample_stats": stats})).trusted
    assert passed >= 36, passed


def test_estimate_arithmetic():
    # (2 ms + 0.7 ms) × 31 steps × (1.45 × 500 + 1000) iterations × 2 waves of 2 chains
    one = 0.0027 * 31 * (725 + 1000)
    assert budget.estimate_seconds(2.0, 4, 500, 1000, cpus=2) == pytest.approx(2 * one)
    assert budget.estimate_seconds(2.0, 4, 500, 1000, cpus=8) == pytest.approx(one)
    assert budget.estimate_seconds(2.0, 4, 500, 1000, cpus=2, overhead_ms=0,
                                   warmup_factor=1) == pytest.approx(0.002 * 31 * 1500 * 2)
    g = {"gradient_ms": 2.3, "compile": 1.0}
    # 3 ms a step: the run 3e-3 × 31 × 1725 × 2 = 320.85 s; a round of 1000 draws 186 s
    run, rnd = 0.003 * 31 * 1725 * 2, 0.003 * 31 * 1000 * 2
    p = budget.plan_model(None, "bt", None, chains=4, tune=500, draws=1000, n_params=10,
                          budget_minutes=6, gradient=g, cpus=2)       # 360 s: no round more
    assert p.within_budget and p.estimate_minutes == pytest.approx(run / 60)
    assert p.max_draws is None
    # 15 min = 900 s: (900 - 320.85) // 186 = 3 rounds more, as the 4 × cap allows
    p = budget.plan_model(None, "bt", None, chains=4, tune=500, draws=1000, n_params=10,
                          budget_minutes=15, gradient=g, cpus=2)
    assert p.max_draws == 1000 * (1 + int((900 - run) // rnd)) == 4000
    p = budget.plan_model(None, "bt", None, chains=4, tune=500, draws=1000, n_params=10,
                          budget_minutes=5, gradient=g, cpus=2)
    assert not p.within_budget


def test_gradient_timing_on_data():
    from crowdrank.models.priors import Priors
    from crowdrank.models.simulate import simulate

    data = simulate("bt", n_items=8, n_workers=3, tasks_per_worker=10, seed=1).rankings
    g = budget.time_gradient(data, "bt", Priors.geometric(data.workers, K=2, a0=10, a=3))
    assert g["gradient_ms"] > 0 and g["compile"] > 0


def test_over_budget_audit_refuses_nuts(tmp_path, monkeypatch, capsys):
    """A tiny BT audit under a budget of 1e-6 minutes: no NUTS call, the approximation's
    PSIS k̂ printed and in metrics.json with the estimate."""
    import crowdrank.inference.method_fits as mf
    from crowdrank.inference import nuts
    from crowdrank.models.io import write_rankings
    from crowdrank.models.simulate import simulate
    from crowdrank.reports import cli

    def no_nuts(*a, **k):
        raise AssertionError("NUTS ran beyond the budget")

    monkeypatch.setattr(nuts, "fit_nuts", no_nuts)
    monkeypatch.setattr(mf, "fit_nuts_method", no_nuts)
    data = simulate("bt", n_items=8, n_workers=3, tasks_per_worker=10, seed=1).rankings
    f = tmp_path / "r.csv"
    write_rankings(data, f)
    out = tmp_path / "out"
    rc = cli.main(["audit", str(f), "--model", "bt", "--approx", "laplace", "--no-checks",
                   "--permutations", "0", "--max-nuts-minutes", "1e-6", "--out", str(out),
                   "--quiet"])
    assert rc == 0
    text = capsys.readouterr().out
    assert "bt: NUTS not run: estimated" in text and "PSIS k̂" in text
    m = json.loads((out / "metrics.json").read_text())
    assert m["budget"]["verdict"] == "refused"
    plan = m["budget"]["models"]["bt"]
    assert plan["within_budget"] is False and plan["gradient_ms"] > 0
    assert plan["estimate_minutes"] > plan["budget_minutes"] == 1e-6
    rows = m["models"]["bt"]["variants"]
    assert [r["variant"]["method"] for r in rows] == ["online", "laplace"]
    # the online (Weng–Lin) posterior has a density: its k̂ is a number; C's hook labels
    # batch Laplace n/a on BT (its k̂ None), which the refusal carries as it is
    assert rows[0]["psis_khat"] is not None and rows[1]["psis_label"]
    assert not (out / "bt" / "nuts").exists()
    # the verdict without a reference: posterior SBC of each approximation, printed, in
    # metrics.json and on the page
    page = (out / "report.html").read_text()
    assert "Verdict without a reference" in page and "NUTS was not run" in page
    for r in rows:
        ps = r["posterior_sbc"]
        assert "replicates" in ps, ps
        assert ps["replicates"] == 200 and set(ps["groups"]) == {"lambda_centred"}
        assert f"posterior SBC: {ps['verdict']}" in text
        assert (out / ps["folder"] / "posterior_sbc.html").is_file()


@pytest.mark.slow
def test_within_budget_audit_extends_in_rounds(tmp_path):
    """A tiny BT audit with 100 draws per chain: the plan allows rounds up to 4 × 100, the
    sampler extends while the gate fails, and metrics.json says how it ended, in agreement
    with the draws kept in posterior.nc (85 s on 2 loaded cores)."""
    import xarray as xr

    from crowdrank.models.io import write_rankings
    from crowdrank.models.simulate import simulate
    from crowdrank.reports import cli

    data = simulate("bt", n_items=8, n_workers=3, tasks_per_worker=20, kmax=2, seed=1).rankings
    f = tmp_path / "r.csv"
    write_rankings(data, f)
    out = tmp_path / "out"
    assert cli.main(["audit", str(f), "--model", "bt", "--no-checks", "--permutations", "0",
                     "--chains", "2", "--tune", "200", "--draws", "100", "--out", str(out),
                     "--quiet", "--max-nuts-minutes", "30", "--posterior-sbc", "0"]) == 0
    m = json.loads((out / "metrics.json").read_text())
    plan = m["budget"]["models"]["bt"]
    assert m["budget"]["verdict"] == "within budget" and plan["max_draws"] == 400
    kept = xr.open_datatree(out / "bt" / "nuts" / "posterior.nc", engine="h5netcdf")[
        "posterior"].sizes["draw"]
    assert 100 <= kept <= 400 and kept % 100 == 0
    gate = m["models"]["bt"]["gate"]
    if gate["trusted"]:
        assert plan["stopped"] == f"gate passed after {kept // 100} round(s) of 100 draws"
    else:
        assert kept == 400 and plan["stopped"].startswith(("budget ended", "gate failed for"))

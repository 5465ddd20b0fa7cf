"""The batch point methods (Laplace, bootstrap) inside the audit pipeline."""

from __future__ import annotations

import numpy as np
import pytest

from crowdrank.models.data import DataError


def _idata(draws, items):
    import arviz_base as ab

    rng = np.random.default_rng(1)
    C, D = draws.shape[:2]
    stats_ = {"diverging": np.zeros((C, D), bool), "energy": rng.normal(size=(C, D))}
    return ab.from_dict({"posterior": {"lambda": draws}, "sample_stats": stats_},
                        dims={"lambda": ["item"]}, coords={"item": list(items)})


class _Approx:
    """A point method's result as the validation layer reads it."""

    def __init__(self, items, mu, sigma2, draws):
        self.model, self.items, self.mu, self.sigma2 = "bt", list(items), mu, sigma2
        self.workers, self.alpha, self.draws = [], None, draws


def test_percentile_coverage_is_nominal_when_the_bootstrap_is_the_posterior():
    """Bootstrap refits drawn from the same skewed law as the NUTS draws: the percentile
    intervals hold their nominal share of the draws, whereas the Gaussian reading of the
    same refits (what compare() does by default) does not for a skewed law."""
    from crowdrank.validation.compare import compare
    from crowdrank.validation.intervals import percentile_coverage

    rng = np.random.default_rng(0)
    items = ["a", "b", "c"]
    nuts = rng.gamma(1.0, size=(2, 4000, 3))          # strongly skewed marginals
    boot = rng.gamma(1.0, size=(20000, 3))
    approx = _Approx(items, boot.mean(0), boot.var(0, ddof=1), boot)
    c = compare(approx, _idata(nuts, items), model="bt", variant="method=bootstrap",
                identified=False)
    gaussian90 = c.parameters.coverage_90.to_numpy().copy()
    percentile_coverage(c, boot, items, _idata(nuts, items))
    cov90 = c.parameters.coverage_90.to_numpy()
    np.testing.assert_allclose(cov90, 0.9, atol=0.015)
    np.testing.assert_allclose(c.parameters.coverage_50.to_numpy(), 0.5, atol=0.02)
    assert np.all(np.abs(gaussian90 - 0.9) > np.abs(cov90 - 0.9))
    assert c.aggregates["lambda"]["mean_coverage_90"] == pytest.approx(cov90.mean())


def test_batch_methods_only_for_bt_and_pl():
    from crowdrank.validation.pipelines.audit import model_variants, parse_variants

    v = parse_variants(["method=online,laplace,bootstrap"])
    assert [o.get("method") for o in model_variants("bt", v)] == ["online", "laplace",
                                                                  "bootstrap"]
    # the bootstrap is BT/PL's only; "laplace" on COUPLE is the PPL's Laplace (test_methods)
    with pytest.raises(DataError, match="method=bootstrap fits models bt, pl, not couple"):
        model_variants("couple", v)
    lap = parse_variants(["method=online,laplace"])
    assert [o.get("method") for o in model_variants("couple", lap)] == ["online",
                                                                      "laplace-ppl"]


@pytest.mark.slow
def test_audit_laplace_and_bootstrap_against_nuts(tmp_path):
    """On a small BT data set with plenty of comparisons per item the posterior is close to
    Gaussian: Laplace's mean and sd must match NUTS (|z| and sd ratio); the bootstrap of
    the MAP carries no prior uncertainty, so its sd can only be smaller."""
    from crowdrank.models.simulate import simulate
    from crowdrank.validation.pipelines.audit import AuditConfig, Subject, run_audit

    sim = simulate("bt", n_items=8, n_workers=4, tasks_per_worker=60, seed=5)
    cfg = AuditConfig(models=("bt",), chains=2, tune=300, draws=600, permutations=0,
                      variants={"method": ["online", "laplace", "bootstrap"]},
                      bootstrap=200, processes=1, checks=False,  # approximations vs NUTS only
                      posterior_sbc=0)                           # (tested in test_budget)
    m = run_audit(Subject(sim.rankings, truth=sim.lam), tmp_path, cfg, log=lambda _: None)
    variants = {v["variant"]: v["aggregates"]["lambda"] for v in m["models"]["bt"]["variants"]}
    lap, boot = variants["method=laplace"], variants["method=bootstrap"]
    assert lap["median_abs_z"] < 0.15
    assert 0.85 < lap["median_sd_ratio"] < 1.15
    assert 0.8 < lap["mean_coverage_90"] < 0.97
    assert boot["median_sd_ratio"] < 1.05
    assert (tmp_path / "bt" / "online" / "variants" / "method-bootstrap.json").exists()


@pytest.mark.slow
def test_audit_crowdbt_em_and_trueskill_run_as_approximations(tmp_path):
    """CrowdBT's EM MAP (gold priors: Beta(1 + correct, 1 + wrong), a, b >= 1) and TrueSkill
    appear in the audit as variants with λ rows (and η rows for EM) compared with NUTS."""
    import pandas as pd

    from crowdrank.models.simulate import simulate
    from crowdrank.validation.pipelines.audit import AuditConfig, Subject, run_audit

    sim = simulate("crowdbt", n_items=8, n_workers=3, tasks_per_worker=60, seed=6,
                   setting="expert", gold_per_worker=10)
    subject = Subject(sim.rankings, truth=sim.lam, gold=(sim.gold, sim.gold_true_order))
    # approximations against NUTS only: no model checks (their LOO-only NUTS fits of PL
    # and BT cost more than the audit itself; tests/test_audit.py runs the checks)
    cfg = AuditConfig(models=("crowdbt",), chains=2, tune=300, draws=500, permutations=0,
                      variants={"method": ["online", "em"]}, checks=False, posterior_sbc=0)
    m = run_audit(subject, tmp_path / "c", cfg, log=lambda _: None)
    v = {x["variant"]: x["aggregates"] for x in m["models"]["crowdbt"]["variants"]}
    assert v["method=em"]["lambda"]["median_abs_z"] < 0.5
    assert v["method=em"]["eta"]["n"] == 3
    params = pd.read_csv(tmp_path / "c" / "parameters.csv")
    assert set(params[params.variant == "method=em"].kind) == {"lambda", "eta"}

    # the data and NUTS settings of the Laplace/bootstrap audit above: the same reference
    # program, which the run's compilation cache then loads instead of compiling again
    sim = simulate("bt", n_items=8, n_workers=4, tasks_per_worker=60, seed=5)
    cfg = AuditConfig(models=("bt",), chains=2, tune=300, draws=600, permutations=0,
                      variants={"method": ["online", "trueskill"]}, checks=False,
                      posterior_sbc=0)
    m = run_audit(Subject(sim.rankings, truth=sim.lam), tmp_path / "b", cfg,
                  log=lambda _: None)
    names = [x["variant"] for x in m["models"]["bt"]["variants"]]
    assert names == ["default", "method=trueskill"]

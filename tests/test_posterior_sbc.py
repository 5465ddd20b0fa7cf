"""Posterior SBC (validation/pipelines/posterior_sbc.py): the augmentation keeps the data's
design, the verdict passes the exact posterior and flags the planted over-confident and
prior-only fits, a planted error in the simulator is seen, and a run resumes from its
cache. The exact posterior is importance resampling on tiny PL data
(validation/pipelines/posterior_sbc_planted.py, checked here against models.likelihood)."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from crowdrank.models.likelihood import loglik
from crowdrank.models.simulate import simulate
from crowdrank.validation.pipelines import posterior_sbc as psbc
from crowdrank.validation.pipelines import posterior_sbc_planted as planted
from crowdrank.validation.pipelines.posterior_sbc import PosteriorSbcConfig, run_posterior_sbc


@pytest.fixture(scope="module")
def planted_methods():
    with planted.registered() as names:
        yield names


def test_the_planted_likelihood_is_the_models():
    data, _ = planted.tiny_pl(3)
    lam = np.random.default_rng(0).normal(size=(4, data.n_items))
    want = [loglik("pl", data, row) for row in lam]
    np.testing.assert_allclose(planted.pl_loglik_draws(data.order, data.lengths, lam), want,
                               rtol=1e-12)


@pytest.mark.parametrize("model", ["couple", "crowdbt"])
def test_the_augmentation_keeps_the_design(model):
    sim = simulate(model, n_items=9, n_workers=3, tasks_per_worker=20, seed=1)
    data = sim.rankings
    rng = np.random.default_rng(5)
    eta = sim.eta if model == "couple" else sim.eta[:, 0]
    extra = psbc.augmentation(model, data, sim.lam, eta, 50, rng)
    assert extra.n_rankings == 50 and extra.items == data.items
    tasks = {(int(w), frozenset(data.ranking(n).tolist()))
             for n, w in enumerate(data.worker)}
    for n in range(extra.n_rankings):
        r = extra.ranking(n)
        assert len(set(r.tolist())) == len(r) == extra.lengths[n]
        assert (int(extra.worker[n]), frozenset(r.tolist())) in tasks
    both = psbc.joined(data, extra)
    assert both.n_rankings == data.n_rankings + 50
    np.testing.assert_array_equal(both.ranking(data.n_rankings + 7), extra.ranking(7))
    np.testing.assert_array_equal(both.worker[: data.n_rankings], data.worker)


def _run(method, seed, tmp_path, sims=60, predictive_draws=60, **kw):
    data, pri = planted.tiny_pl(seed)
    cfg = PosteriorSbcConfig(method=method, model="pl", sims=sims, seed=seed,
                             predictive_draws=predictive_draws, **kw)
    return run_posterior_sbc(data, pri, cfg, tmp_path / f"{method}-{seed}", processes=1,
                             progress=False)


def test_the_prior_passes_the_ranks_and_the_companion_checks_flag_it(planted_methods,
                                                                     tmp_path):
    s = _run("planted-prior", 0, tmp_path, sims=40)
    # the blind spot: the ranks of a fit that ignores the data are uniform
    assert s["ranks"]["calibrated"]
    assert not s["calibrated"]
    assert s["checks"]["contraction"]["flag"] and s["checks"]["predictive"]["flag"]
    assert s["verdict"].startswith("NOT calibrated")


def test_a_wrong_simulator_is_seen(planted_methods, tmp_path, monkeypatch):
    """y' simulated at the mirror image of θ' (a planted error in the augmentation) must
    make the exact posterior fail; the same run without it passes."""
    good = _run("planted-exact", 1, tmp_path / "good", sims=30)
    assert good["calibrated"], good["verdict"]
    real = psbc.augmentation
    monkeypatch.setattr(psbc, "augmentation",
                        lambda model, data, lam, eta, m, rng: real(model, data, -lam, eta, m,
                                                                   rng))
    bad = _run("planted-exact", 1, tmp_path / "bad", sims=30)
    assert not bad["ranks"]["calibrated"]


@pytest.mark.slow
def test_the_verdict_flags_the_overconfident_fit_and_passes_the_exact_one(planted_methods,
                                                                          tmp_path):
    """The power goal's setting at one seed (bench_posterior_sbc.py power: ten seeds, with
    100,000 importance draws). Here the planted methods' default 12,000 draws: the strict
    test flags the over-confident fit, and the tolerance verdict's estimate of its sd ratio
    is near 1/√2; its bound is not asserted, because at 12,000 draws the importance
    sampler's outliers give z heavy tails that widen it past 0.9 in this seed (the
    benchmark's 100,000 draws flag it in 10 of 10)."""
    exact = _run("planted-exact", 2, tmp_path, sims=200, predictive_draws=200)
    over = _run("planted-overconfident", 2, tmp_path, sims=200, predictive_draws=200)
    assert exact["calibrated"], exact["verdict"]
    assert exact["tolerance"]["groups"]["lambda_centred"]["sd_ratio"] > 0.9
    assert not over["strict_calibrated"] and not over["ranks"]["calibrated"]
    assert 0.6 < over["tolerance"]["groups"]["lambda_centred"]["sd_ratio"] < 0.85


def test_a_run_resumes_and_extends_from_its_cache(planted_methods, tmp_path):
    first = _run("planted-prior", 4, tmp_path, sims=10)
    cache = tmp_path / "planted-prior-4" / "cache"
    before = {p.name: p.stat().st_mtime_ns for p in cache.glob("*.json")}
    second = _run("planted-prior", 4, tmp_path, sims=14)
    after = {p.name: p.stat().st_mtime_ns for p in cache.glob("*.json")}
    assert len(before) == 10 and len(after) == 14
    assert all(after[k] == v for k, v in before.items())      # none recomputed
    assert second["replicates"] == 14 and first["replicates"] == 10
    rows = list(csv.reader((tmp_path / "planted-prior-4" / "ranks.csv").open(newline="")))
    assert rows[0][1:] == second["names"] and len(rows) == 15
    ranks = np.array([[int(v) for v in r[1:]] for r in rows[1:11]])
    again = json.loads((tmp_path / "planted-prior-4" / "posterior_sbc.json").read_text())
    assert again["replicates"] == 14
    assert ranks.min() >= 0 and ranks.max() <= again["config"]["ranks"]


@pytest.mark.parametrize("model", ["couple", "crowdbt", "pl"])
def test_the_online_refit_continues_the_state_and_equals_a_pass_over_both(model):
    """The one-pass update's refit resumes its saved state with y' only: the same posterior
    as one pass over (y, y') in file order, bit for bit."""
    from crowdrank.inference import methods
    from crowdrank.models.priors import build_priors

    sim = simulate(model, n_items=9, n_workers=3, tasks_per_worker=20, seed=1)
    data, pri = sim.rankings, build_priors(sim.rankings)
    base = methods.get("online").run(data, model, pri)
    eta = None if model == "pl" else (sim.eta if model == "couple" else sim.eta[:, 0])
    extra = psbc.augmentation(model, data, sim.lam, eta, 30, np.random.default_rng(2))
    cont = psbc.refit(base, data, extra, model, "online", pri, 0)
    full = methods.get("online").run(psbc.joined(data, extra), model, pri)
    assert cont.native.n_rankings == data.n_rankings + 30
    assert base.native.n_rankings == data.n_rankings          # the base is not modified
    np.testing.assert_array_equal(cont.mu, full.mu)
    np.testing.assert_array_equal(cont.sigma2, full.sigma2)
    if model != "pl":
        np.testing.assert_array_equal(cont.alpha, full.alpha)


def test_draws_of_a_closed_form_fit_are_those_its_datatree_holds():
    """The replicates draw from the marginals without building a DataTree: the same
    numbers, bit for bit, as Posterior.datatree's."""
    from crowdrank.inference import methods
    from crowdrank.models.priors import build_priors
    from crowdrank.validation.pipelines.posterior_sbc_draws import draws_of

    for model in ("couple", "crowdbt", "pl"):
        sim = simulate(model, n_items=7, n_workers=3, tasks_per_worker=10, seed=2)
        post = methods.get("online").run(sim.rankings, model, build_priors(sim.rankings))
        lam, eta = draws_of(post, 9, 3)
        tree = post.datatree(draws=9, seed=3)["posterior"]
        np.testing.assert_array_equal(lam, np.asarray(tree["lambda"])[0])
        if model == "pl":
            assert eta is None
        else:
            np.testing.assert_array_equal(eta, np.asarray(tree["eta"])[0])


def test_replicates_in_spawned_processes_see_the_planted_methods_and_their_option(
        planted_methods, tmp_path):
    """A spawned process starts with the built-in registry: the run's setup registers the
    planted methods there, and their option reaches them (the replicates' ranks equal those
    of the same run in this process; other importance draws give other ranks)."""
    data, pri = planted.tiny_pl(5)

    def run(where, processes, draws):
        cfg = PosteriorSbcConfig(method="planted-exact", model="pl", sims=4, seed=5,
                                 predictive_draws=20, options={"prior_draws": draws})
        run_posterior_sbc(data, pri, cfg, tmp_path / where, processes=processes,
                          progress=False, setup=planted.SETUP)
        rows = list(csv.reader((tmp_path / where / "ranks.csv").open(newline="")))
        return [r[1:] for r in rows[1:]]

    here = run("here", 1, 12_000)
    assert run("spawned", 2, 12_000) == here
    assert run("other-draws", 1, 15_000) != here


def test_a_crowdbt_accuracy_of_one_simulates_pairs_in_the_scores_order_without_warning():
    """A Beta accuracy drawn as exactly 1.0 (float64 rounding of a sharp posterior): the
    worker never flips a pair, so y′ puts every pair in the order of the scores — with no
    divide-by-zero warning from log(1 − η) and no NaN."""
    import warnings

    sim = simulate("crowdbt", n_items=6, n_workers=2, tasks_per_worker=30, seed=3)
    lam = np.array([3.0, 2.0, 1.0, 0.0, -1.0, -2.0]) * 20     # no doubt left in the scores
    eta = np.array([1.0, 1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        extra = psbc.augmentation("crowdbt", sim.rankings, lam, eta, 200,
                                  np.random.default_rng(0))
    first, second = np.asarray(extra.order)[0], np.asarray(extra.order)[1]
    assert np.all(lam[first] > lam[second])


def test_a_fit_wider_than_its_prior_has_moved_and_the_prior_has_not():
    """Weak data that conflict with the prior can make an exact posterior wider than the
    prior (the Gibbs sampler's η on small amateur COUPLE data: contraction ≈ −1): the
    companion check must read that as moved, and still flag the prior itself."""
    from crowdrank.inference.posterior import Posterior
    from crowdrank.validation.pipelines.audit_config import AuditConfig, make_priors
    from crowdrank.validation.pipelines.posterior_sbc_checks import (
        contraction,
        prior_posterior,
    )
    from crowdrank.validation.pipelines.posterior_sbc_draws import checked_parameters

    data = simulate("couple", n_items=6, n_workers=3, tasks_per_worker=8, kmax=2,
                    seed=4).rankings
    pri = make_priors(data, AuditConfig())
    prior = prior_posterior("couple", data, pri)
    # η ~ Beta(0.7, 0.7): variance 0.10 against the prior Beta(1.67, 0.28)'s 0.042
    wide = Posterior.from_marginals("couple", "wide", items=data.items,
                                    mu=np.linspace(-1, 1, data.n_items),
                                    sigma2=np.full(data.n_items, 0.3), workers=data.workers,
                                    alpha=np.full((data.n_workers, 2), 0.7))
    _, fams, cols, _ = checked_parameters("couple", data, wide)
    moved = contraction(wide, data, pri, "couple", cols, fams)
    assert moved["eta"]["median"] < -1.0 and moved["eta"]["moved"]
    assert moved["lambda_centred"]["moved"]
    still = contraction(prior, data, pri, "couple", cols, fams, seed=3)
    assert not still["eta"]["moved"] and not still["lambda_centred"]["moved"]

"""The samplers against exact answers: prior-only runs against the Dirichlet's exact Beta
marginals, and the backend-agreement check.

Under the paper's geometric prior ``α = 10·6^-t`` (``α_4 ≈ 0.0077``) most of the prior mass
of ``log η_4`` lies below −20. A simplex transform that clips (NumPyro's stick-breaking
Dirichlet) inflated ``E[η_4]`` from 0.0039 to ~0.012 with zero divergences and a good ESS;
these tests must fail on it, and pass on the samplers' Gamma coordinates.
"""

from __future__ import annotations

import numpy as np
import pytest

from crowdrank.inference import nuts
from crowdrank.models.priors import Priors
from crowdrank.models.simulate import simulate
from crowdrank.validation.reference import backend_agreement, simplex_prior_check

jax = pytest.importorskip("jax")


@pytest.fixture(scope="module")
def tiny():
    d = simulate("couple", n_items=4, n_workers=2, tasks_per_worker=4, kmax=4, seed=1).rankings
    return d, Priors.geometric(d.workers, 4)


def _eta(result, w=0):
    return np.asarray(result.idata["posterior"]["eta"].values)[:, :, w, :]


def test_prior_check_oracle_on_exact_draws():
    """The check itself: exact Dirichlet draws pass, draws with the smallest component
    floored at 1e-6 (a clipping transform) fail, and so do draws shifted towards η_1."""
    from crowdrank.inference.nuts.starts import log_dirichlet_draws

    alpha = 10 * 6.0 ** -np.arange(1, 5)
    rng = np.random.default_rng(0)
    eta = np.exp(log_dirichlet_draws(rng, alpha[None], 4000))[:, 0, :].reshape(4, 1000, 4)
    assert simplex_prior_check(eta, alpha).passed
    clipped = np.maximum(eta, 1e-6)
    clipped /= clipped.sum(-1, keepdims=True)
    res = simplex_prior_check(clipped, alpha)
    assert not res.passed and any("η_4" in r for r in res.reasons)
    tilted = eta * np.array([1.5, 1, 1, 1])
    tilted /= tilted.sum(-1, keepdims=True)
    assert not simplex_prior_check(tilted, alpha).passed


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["float64", "float32"])
def test_numpyro_gamma_simplex_matches_exact_prior(tiny, precision):
    d, pr = tiny
    r = nuts.fit_nuts(d, "couple", pr, chains=2, tune=300, draws=1000, seed=3, progress=False,
                      prior_only=True, precision=precision, chain_method="sequential")
    for w in range(d.n_workers):
        res = simplex_prior_check(_eta(r, w), pr.alpha[w])
        assert res.passed, res.reasons
    assert int(r.idata["sample_stats"]["diverging"].sum()) == 0


@pytest.mark.slow
def test_numpyro_gamma_simplex_in_single_precision_jax(tiny):
    """Everything float32 (JAX without 64-bit types): η_4 underflows to 0 in float32 when
    log η_4 < −87, which the tail statistic still counts correctly."""
    from numpyro.infer import MCMC, NUTS

    from crowdrank.models import numpyro_models as npm
    from crowdrank.models.model_inputs import model_inputs

    d, pr = tiny
    inp = model_inputs("couple", d, pr)
    with jax.enable_x64(False):
        m = MCMC(NUTS(lambda: npm.model(inp, prior_only=True)), num_warmup=300,
                 num_samples=1000, num_chains=2, chain_method="sequential", progress_bar=False)
        m.run(jax.random.PRNGKey(1))
        eta = np.asarray(m.get_samples(group_by_chain=True)["eta"])
    assert eta.dtype == np.float32
    res = simplex_prior_check(eta[:, :, 0, :].astype(float), pr.alpha[0])
    assert res.passed, res.reasons


@pytest.mark.slow
def test_numpyro_stick_breaking_dirichlet_fails_the_prior_check(tiny):
    """The deliberately clipped simplex (NumPyro's own Dirichlet) must fail."""
    d, pr = tiny
    r = nuts.fit_nuts(d, "couple", pr, chains=2, tune=300, draws=1000, seed=3, progress=False,
                      prior_only=True, simplex="dirichlet", chain_method="sequential")
    res = simplex_prior_check(_eta(r), pr.alpha[0])
    assert not res.passed
    assert not res.rows[3]["passed"]           # η_4, the smallest concentration


@pytest.mark.slow
def test_pymc_gamma_simplex_matches_exact_prior(tiny):
    pytest.importorskip("pymc")
    d, pr = tiny
    r = nuts.fit_nuts(d, "couple", pr, backend="pymc", chains=2, tune=300, draws=1000,
                      seed=3, progress=False, prior_only=True)
    res = simplex_prior_check(_eta(r), pr.alpha[0])
    assert res.passed, res.reasons


@pytest.mark.slow
def test_crowdbt_beta_through_gamma_coordinates_matches_exact_prior():
    """CrowdBT's Beta(a, b) as a two-entry Gamma simplex: η ~ Beta(a, b) exactly."""
    d = simulate("crowdbt", n_items=4, n_workers=2, tasks_per_worker=4, seed=1).rankings
    pr = Priors.geometric(d.workers, 2)               # (a, b) = (1.67, 0.28)
    r = nuts.fit_nuts(d, "crowdbt", pr, chains=2, tune=300, draws=1000, seed=3,
                      progress=False, prior_only=True, chain_method="sequential")
    eta = np.asarray(r.idata["posterior"]["eta"].values)[:, :, 0]
    res = simplex_prior_check(np.stack([eta, 1 - eta], axis=-1), pr.beta()[0])
    assert res.passed, res.reasons


def _fake_posterior(lam, eta=None):
    from arviz_base import from_dict

    post = {"lambda": lam}
    dims = {"lambda": ["item"]}
    coords = {"item": [f"i{r}" for r in range(lam.shape[-1])]}
    if eta is not None:
        post["eta"] = eta
        dims["eta"] = ["worker"]
        coords["worker"] = [f"w{r}" for r in range(eta.shape[-1])]
    return from_dict({"posterior": post}, coords=coords, dims=dims)


def test_backend_agreement_on_exact_draws_and_a_shifted_one():
    """Independent exact draws of one posterior agree; shifting one parameter of one run by
    half a posterior sd (≈ 30 MCSE with 4 × 1000 draws) is caught and named."""
    rng = np.random.default_rng(5)
    mu, sd = rng.normal(size=12), rng.uniform(0.1, 0.5, size=12)
    a = _fake_posterior(mu + sd * rng.normal(size=(4, 1000, 12)),
                        rng.beta(5, 2, size=(4, 1000, 3)))
    b = _fake_posterior(mu + sd * rng.normal(size=(4, 1000, 12)),
                        rng.beta(5, 2, size=(4, 1000, 3)))
    ok = backend_agreement(a, b)
    assert ok.agree and ok.n_params == 15, ok.worst[:3]
    shifted_draws = mu + sd * rng.normal(size=(4, 1000, 12))
    shifted_draws[..., 7] += 0.5 * sd[7]
    bad = backend_agreement(a, _fake_posterior(shifted_draws,
                                               rng.beta(5, 2, size=(4, 1000, 3))))
    assert not bad.agree and bad.n_disagree == 1
    assert bad.worst[0]["param"] == "lambda[i7]"
    assert "DISAGREE" in bad.verdict()


@pytest.mark.slow
def test_numpyro_and_pymc_posteriors_agree_parameter_by_parameter():
    """Same data, same prior (the paper's geometric one), both PPLs: every λ_r and η_w,t
    agrees within the Bonferroni-corrected MCSE threshold."""
    pytest.importorskip("pymc")
    sim = simulate("couple", n_items=6, n_workers=3, tasks_per_worker=15, kmax=3, seed=4)
    d = sim.rankings
    pr = Priors.geometric(d.workers, d.K)
    # 300 + 500 draws a chain (was 500 + 1,000): the threshold comes from the MCSE, so fewer
    # draws widen it honestly; the last line shows it still catches half a posterior sd
    kw = {"chains": 2, "tune": 300, "draws": 500, "seed": 2, "progress": False}
    a = nuts.fit_nuts(d, "couple", pr, backend="numpyro", chain_method="sequential", **kw)
    b = nuts.fit_nuts(d, "couple", pr, backend="pymc", **kw)
    res = backend_agreement(a.idata, b.idata)
    assert res.agree, res.worst[:3]
    from test_nuts_adapt import _shift_first_score

    assert not backend_agreement(a.idata, _shift_first_score(b.idata)).agree


def test_boost_mask_boosts_only_small_prior_entries_the_data_do_not_pin():
    from crowdrank.models.model_inputs import boost_mask, boost_split

    prior = np.array([[1.67, 0.28, 0.046, 0.0077]])
    np.testing.assert_array_equal(boost_mask(prior), [[False, True, True, True]])
    approx = np.array([[40.0, 30.0, 3.0, 0.05]])     # η_2 pinned by the data, η_3/η_4 not
    np.testing.assert_array_equal(boost_mask(prior, approx), [[False, False, True, True]])
    big, small = boost_split(prior, boost_mask(prior, approx))
    assert big[1].tolist() == [0, 1] and small[1].tolist() == [2, 3]
    with pytest.raises(ValueError, match="boost mask"):
        boost_split(prior, np.ones((2, 4), bool))


def test_plain_and_boosted_coordinates_give_the_same_eta():
    """The same (λ, η) mapped to the sampler's coordinates under two boost masks comes back
    as the same η through the model's deterministic site: the choice is a reparametrisation."""
    from numpyro.infer.util import constrain_fn

    from crowdrank.models import numpyro_models as npm
    from crowdrank.models.model_inputs import model_inputs

    d = simulate("couple", n_items=5, n_workers=2, tasks_per_worker=5, kmax=4, seed=1).rankings
    inputs = model_inputs("couple", d, Priors.geometric(d.workers, d.K))
    eta = np.array([[0.6, 0.3, 0.07, 0.03], [0.5, 0.25, 0.2, 0.05]])
    init = {"lambda": np.linspace(-1, 1, 5), "eta": eta}
    for boost in (None, np.zeros((2, 4), bool), np.ones((2, 4), bool)):
        z = nuts.jittered_starts(inputs, init, chains=1, seed=0, jitter=0.0, boost=boost)
        with jax.enable_x64(True):
            back = constrain_fn(npm.model, (inputs,), {"prior_only": True, "boost": boost}, z,
                                return_deterministic=True)
        np.testing.assert_allclose(np.asarray(back["eta"]), eta, rtol=1e-10)

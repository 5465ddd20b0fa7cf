"""A new model is one :class:`~crowdrank.models.registry.ModelSpec` plus its functions.

The toy model "bt-tempered" is defined here only, in this file: Bradley–Terry on the rank-
broken pairs with a worker *temperature* ``η_w ∈ (0, 1)`` ~ ``Beta(a_w, b_w)``,

    P(i before j | λ, η_w) = σ(η_w (λ_i − λ_j)),

(``η_w → 0``: a worker who flips coins; ``η_w = 1``: plain BT). A fixture adds its spec to
the registry for one test; nothing else in the repository names it. The tests then check
that the layers find its functions through the spec — simulator, reference likelihood,
model inputs (Beta prior of length 2, rank-broken pairs), NumPyro and PyMC densities,
posterior predictive draws — against independent oracles: ``scipy.stats`` for the prior,
the closed form ``σ(η d)`` for the pair probabilities, a direct sum over pairs.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from scipy.special import expit, log_expit

from crowdrank.models import registry
from crowdrank.models.families import BETA
from crowdrank.models.priors import Priors
from crowdrank.models.registry import ModelSpec

NAME = "bt-tempered"


# ---------------------------------------------------------------- the toy model's functions
def tempered_loglik(lam, eta, ranking):
    """Reference: Σ over the ranking's rank-broken pairs of log σ(η (λ_i − λ_j))."""
    lam = np.asarray(lam, float)
    r = np.asarray(ranking)
    return float(sum(log_expit(eta * (lam[r[i]] - lam[r[j]]))
                     for i in range(len(r)) for j in range(i + 1, len(r))))


def tempered_report(rng, lam, subsets, true_order, eta_rows):
    """Pairs only (the spec is pairwise): PL on η·λ, i.e. first item with σ(η d)."""
    return tempered_redraw(rng, lam, subsets, eta_rows)


def tempered_redraw(rng, lam, items, eta_w):
    g = lam[items] * eta_w[:, :1] + rng.gumbel(size=items.shape)
    return np.take_along_axis(items, np.argsort(-g, axis=1, kind="stable"), axis=1)


def tempered_numpyro_columns(inputs, lam, log_eta):
    import jax.numpy as jnp

    from crowdrank.models.numpyro_models import pair_block

    return pair_block(lam[inputs.index] * jnp.exp(log_eta[inputs.worker, 0]))


def tempered_numpyro_draw(key, items, log_w, lam):
    import jax
    import jax.numpy as jnp

    x = lam[items] * jnp.exp(log_w[:, :1])
    g = x + jax.random.gumbel(key, x.shape, x.dtype)
    return jnp.take_along_axis(items, jnp.argsort(-g, axis=1), axis=1)


def tempered_pymc_columns(inputs, lam, log_eta):
    import pytensor.tensor as pt

    from crowdrank.models.pymc_models import pair_block

    return pair_block(lam[inputs.index] * pt.exp(log_eta[inputs.worker, 0]))


TOY = ModelSpec(name=NAME, title="BT with a Beta temperature per worker (test toy)",
                worker_prior="beta", pairwise=True, exact_simulator=True,
                reference=f"{__name__}:tempered_loglik", simulate_report=tempered_report,
                redraw=tempered_redraw,
                numpyro_columns=tempered_numpyro_columns, numpyro_draw=tempered_numpyro_draw,
                pymc_columns=tempered_pymc_columns,
                sbc_flatten="crowdrank.validation.pipelines.sbc:flatten_accuracy")


@pytest.fixture
def toy(monkeypatch):
    # the reference is named "module:function" (this module, imported under its name)
    monkeypatch.setitem(registry.REGISTRY, NAME, TOY)
    return TOY


@pytest.fixture
def sim(toy):
    from crowdrank.models.simulate import simulate

    return simulate(NAME, n_items=8, n_workers=3, tasks_per_worker=40, seed=4)


def _priors(data):
    rng = np.random.default_rng(2)
    alpha = rng.uniform(1.0, 4.0, size=(data.n_workers, 2))     # (a_w, b_w), unequal
    return Priors(data.workers, alpha, mu0=0.2, sigma0=1.3, spec="test")


# ---------------------------------------------------------------- tests
def test_registry_lists_and_resolves_the_toy(toy):
    assert registry.get(NAME) is TOY
    assert NAME in registry.names(pairwise=True, worker_prior=BETA)
    assert TOY.worker_prior is BETA          # the name "beta" is turned into the family
    assert TOY.fn("redraw") is tempered_redraw
    assert TOY.reference_loglik() is tempered_loglik
    assert TOY.prior_K(5) == 2
    with pytest.raises(Exception, match="unknown model"):
        registry.get("no-such-model")


def test_unregistered_after_the_fixture():
    assert NAME not in registry.REGISTRY


def test_simulator_pair_frequencies_match_closed_form(toy):
    """The simulator found through the spec draws pairs with probability σ(η d)."""
    from crowdrank.models.simulate import simulate

    lam = np.array([0.8, -0.4])
    eta = np.array([[0.3, 0.7], [0.9, 0.1]])
    s = simulate(NAME, n_items=2, n_workers=2, tasks_per_worker=20_000, lam=lam, eta=eta,
                 seed=1)
    data = s.rankings
    assert data.K == 2
    first0 = data.order[0] == 0
    for w in range(2):
        sel = data.worker == w
        p = expit(eta[w, 0] * (lam[0] - lam[1]))
        # 20 000 Bernoulli draws: sd ≤ 0.0036, so 5 sd is 0.018
        assert abs(first0[sel].mean() - p) < 0.018


def test_reference_loglik_through_registry(sim):
    from crowdrank.models.likelihood import loglik_pointwise

    data = sim.rankings
    lam = np.random.default_rng(0).normal(size=data.n_items)
    eta = np.array([0.2, 0.5, 0.9])
    got = loglik_pointwise(NAME, data, lam, eta)
    want = [log_expit(eta[data.worker[n]] * (lam[data.ranking(n)[0]] - lam[data.ranking(n)[1]]))
            for n in range(data.n_rankings)]
    np.testing.assert_allclose(got, want, rtol=1e-12)


def _point(data, priors, seed):
    """A random (λ, η) and the reference log joint: scipy priors + the direct pair sum."""
    rng = np.random.default_rng(seed)
    lam = rng.normal(0, 1.5, size=data.n_items)
    eta = rng.uniform(0.05, 0.95, size=data.n_workers)
    ab = priors.beta()
    ref = (stats.norm.logpdf(lam, priors.mu0, priors.sigma0).sum()
           + stats.beta.logpdf(eta, ab[:, 0], ab[:, 1]).sum())
    r = data.order
    ref += log_expit(eta[data.worker] * (lam[r[0]] - lam[r[1]])).sum()
    return lam, eta, float(ref)


def test_numpyro_density_and_draws(sim):
    jax = pytest.importorskip("jax")
    from numpyro.infer.util import log_density

    from crowdrank.models import numpyro_models as npm
    from crowdrank.models.model_inputs import model_inputs

    data = sim.rankings
    priors = _priors(data)
    inp = model_inputs(NAME, data, priors)
    assert inp.alpha.shape == (data.n_workers, 2)
    with jax.enable_x64(True):
        dens = jax.jit(lambda p: log_density(npm.model, (inp,),
                                             {"simplex": "dirichlet", "level": "iid"}, p)[0])
        for seed in (0, 1):
            lam, eta, ref = _point(data, priors, seed)
            assert float(dens({"lambda": lam, "eta": eta})) == pytest.approx(ref, rel=1e-10)
        d = npm.RankingLikelihood(inp, lam, npm.log_eta_table(inp, eta))
        draws = np.asarray(d.sample(jax.random.PRNGKey(0), (2,)))
    assert draws.shape == (2,) + inp.order.shape
    # every draw reorders each task's own items
    for dr in draws:
        np.testing.assert_array_equal(np.sort(dr, axis=1), np.sort(inp.order, axis=1))


@pytest.mark.slow
@pytest.mark.usefixtures("pytensor_without_c")
def test_pymc_density(sim):
    pytest.importorskip("pymc")
    from pymc.model.transform.conditioning import remove_value_transforms

    from crowdrank.models import pymc_models as pmm
    from crowdrank.models.model_inputs import model_inputs

    data = sim.rankings
    priors = _priors(data)
    inp = model_inputs(NAME, data, priors)
    m = remove_value_transforms(pmm.build_model(inp, data.items, data.workers,
                                                simplex="dirichlet", level="iid"))
    logp = m.compile_logp(jacobian=False, mode="FAST_COMPILE")
    lam, eta, ref = _point(data, priors, 3)
    assert float(logp({"lambda": lam, "eta": eta})) == pytest.approx(ref, rel=1e-10)


def test_redraw_orders_through_the_spec(toy):
    """PyMC's posterior predictive ``random`` (models.simulate.redraw_orders) finds the
    toy's redraw: pair frequencies σ(η d) again, each task's own items."""
    from crowdrank.models.simulate import redraw_orders

    lam = np.array([0.5, -0.5, 0.0])
    tasks = np.array([[0, 1]] * 20_000 + [[2, 1]] * 10)
    worker = np.array([0] * 10_000 + [1] * 10_000 + [0] * 10)
    log_eta = np.log([[0.4, 0.6], [0.95, 0.05]])
    out = redraw_orders(NAME, tasks, worker, lam, log_eta, seed=3)
    np.testing.assert_array_equal(np.sort(out, axis=1), np.sort(tasks, axis=1))
    for w in range(2):
        p = expit(np.exp(log_eta[w, 0]) * (lam[0] - lam[1]))
        assert abs((out[:20_000][worker[:20_000] == w, 0] == 0).mean() - p) < 0.025


def test_sbc_prior_oracle_runs_the_toy(toy):
    """SBC finds the toy (exact simulator, Beta prior) without being told: truth drawn
    from the Beta prior, one accuracy per worker flattened after λ; the prior oracle's ranks
    are in range."""
    from crowdrank.validation.pipelines.sbc import SbcConfig, sbc_job, sbc_models

    assert NAME in sbc_models()
    cfg = SbcConfig(model=NAME, backend="prior", sims=2, n_items=5, n_workers=3,
                    tasks_per_worker=4, n_ranks=20, online=False)
    out = sbc_job(cfg.spec(0))
    assert out["params"][-3:] == ["eta[w0]", "eta[w1]", "eta[w2]"]
    assert len(out["truth"]) == 2 * 5 + 3 and 0 < min(out["truth"][-3:]) < 1
    assert all(0 <= r <= 20 for r in out["rank"])


@pytest.mark.slow
def test_nuts_fits_the_toy(sim):
    """NUTS through the spec (model inputs, the worker site, warm-start values): a short
    run with a stored pointwise log-likelihood equal to the reference."""
    from crowdrank.inference.nuts import fit_nuts
    from crowdrank.models.likelihood import loglik_pointwise

    data = sim.rankings
    res = fit_nuts(data, NAME, _priors(data), chains=1, tune=60, draws=30, progress=False,
                   seed=2, pointwise=True, predictive=False)
    post = res.idata["posterior"]
    assert post["eta"].shape[-1] == data.n_workers
    lam, eta = post["lambda"].values[0, 5], post["eta"].values[0, 5]
    assert 0 < eta.min() and eta.max() < 1
    ll = res.idata["log_likelihood"]["rankings"].values[0, 5]
    np.testing.assert_allclose(ll, loglik_pointwise(NAME, data, lam, eta), rtol=1e-8)


def test_every_model_has_its_array_forms_and_the_toy_is_told_what_to_add(toy):
    """The exported functions of arrays are read from each model's entry: every built-in
    model has both PPLs' forms; a model whose spec names none (the toy) is refused with a
    message that says which field to add, never given another model's density."""
    pytest.importorskip("jax")
    from crowdrank.models.numpyro import arrays as A

    builtin = tuple(m for m in registry.MODELS)
    assert A.array_models() == builtin == A.ARRAY_MODELS
    assert NAME in registry.REGISTRY and NAME not in A.array_models()
    with pytest.raises(ValueError, match="names no array_loglik"):
        A.make_model(NAME)
    with pytest.raises(ValueError, match="no array form of model 'no-such-model'"):
        A.make_model("no-such-model")


@pytest.mark.usefixtures("pytensor_without_c")
def test_pymc_array_forms_come_from_the_entries(toy):
    pytest.importorskip("pymc")
    from crowdrank.models import pymc_arrays as PA

    assert PA.pymc_array_models() == registry.MODELS == PA.PYMC_ARRAY_MODELS
    with pytest.raises(ValueError, match="names no array_loglik"):
        PA.build_data_model(NAME, np.array([[0, 1]]), np.array([0]), 2, np.ones((1, 2)))


def test_the_approximations_take_the_toy_without_naming_it(toy):
    """The PPL approximations read the registry: a new model is accepted by
    ``--method laplace-ppl`` (and every other approximation) with no list to edit."""
    from crowdrank.inference import methods
    from crowdrank.inference.approx.entries import check_model
    from crowdrank.models.errors import UsageError

    for name in ("advi", "fullrank-advi", "lowrank-advi", "laplace-ppl", "pathfinder"):
        assert methods.get(name).fits(NAME) and NAME in methods.get(name).model_names()
    check_model(NAME)
    with pytest.raises(UsageError, match="the PPL approximations fit .*not 'crowdbt-bias'"):
        check_model("crowdbt-bias")

"""The NumPyro models as functions of arrays (crowdrank.models.numpyro.arrays) taken by
the ecosystem's tools as they are: data and observed rankings as arguments, every prior
site drawable by ``Predictive``, one compilation per data shape, and simuk's SBC run on
the exported model with no wrapper (docs/design.md §2.1, docs/contracts.md)."""

from __future__ import annotations

import time

import numpy as np
import pytest
from scipy import stats

from crowdrank.models.likelihood import loglik_pointwise
from crowdrank.models.model_inputs import model_inputs
from crowdrank.models.priors import Priors
from crowdrank.models.simulate import simulate

jax = pytest.importorskip("jax")
numpyro = pytest.importorskip("numpyro")

from numpyro.infer import MCMC, NUTS, Predictive
from numpyro.infer.util import log_density

from crowdrank.models.numpyro import arrays as A


@pytest.fixture(scope="module")
def data():
    # k = 2..4 mixed: padding, short rankings' dead stages and pairs all exercised
    return simulate("couple", n_items=9, n_workers=3, tasks_per_worker=12, kmax=4,
                    seed=11).rankings


@pytest.fixture(scope="module")
def priors(data):
    rng = np.random.default_rng(5)
    return Priors(data.workers, rng.uniform(0.3, 4.0, size=(data.n_workers, data.K)),
                  mu0=0.3, sigma0=1.4, spec="test",
                  gamma=rng.uniform(1.0, 5.0, size=(data.n_workers, 2)))


def _eta(model, rng, W, K):
    if model == "crowdbt":
        return rng.uniform(0.05, 0.95, W)
    if model == "peergrader":
        return rng.gamma(3.0, 0.4, W)
    if model == "couple":
        return rng.dirichlet(np.ones(K), W)
    return None


@pytest.mark.parametrize("model", A.ARRAY_MODELS)
def test_array_model_density_matches_reference(model, data, priors):
    """The exported model's observed site, through NumPyro's own log_density, equals the
    NumPy reference likelihood (one ranking, one stage at a time) per ranking."""
    inp = model_inputs(model, data, priors)
    rng = np.random.default_rng(3)
    lam = rng.normal(0, 1.5, data.n_items)
    eta = _eta(model, rng, data.n_workers, data.K)
    from crowdrank.models.numpyro_models import log_eta_table

    log_eta = None if eta is None else log_eta_table(inp, eta)
    got = np.asarray(A.masked_loglik(model, lam, inp.order, inp.obs_worker, log_eta))
    ref = loglik_pointwise(model, data, lam, eta)
    tol = 1e-9 if jax.config.jax_enable_x64 else 2e-5   # the session's JAX precision
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol)


def _pl_args(n_items=6, n_workers=3, n=20, seed=0):
    sim = simulate("pl", n_items=n_items, n_workers=n_workers,
                   tasks_per_worker=n // n_workers + 1, kmax=4, seed=seed).rankings
    sub = sim.subset(np.arange(n))
    order = np.ascontiguousarray(sub.order.T, dtype=np.int32)
    return {"items": order, "workers": np.asarray(sub.worker, np.int32),
            "n_items": n_items, "rankings": order}


def test_one_compilation_per_shape():
    """Two data sets of one shape share one compiled log density: the orders are traced
    arrays, not constants baked into the trace (a side-effect counter runs once per
    trace)."""
    a = _pl_args(seed=1)
    b = _pl_args(seed=2)
    assert a["rankings"].shape == b["rankings"].shape
    assert not np.array_equal(a["rankings"], b["rankings"])
    traces = []
    fixed = {k: v for k, v in a.items() if k not in ("rankings", "items")}

    @jax.jit
    def joint(params, items, rankings):
        traces.append(1)
        return log_density(A.pl_model, (), dict(fixed, items=items, rankings=rankings),
                           params)[0]

    params = {"lambda_mean": 0.2, "lambda_c": np.array([.5, -.3, .1, 0., -.1, -.2])}
    lam = params["lambda_mean"] + params["lambda_c"]
    for d in (a, b):
        val = float(joint(params, d["items"], d["rankings"]))
        want = float(A.masked_loglik("pl", lam, d["rankings"]).sum())
        prior = (stats.norm.logpdf(0.2, 0, 1 / np.sqrt(6))
                 + float(jax.numpy.sum(numpyro.distributions.ZeroSumNormal(
                     1.0, event_shape=(6,)).log_prob(params["lambda_c"]))))
        assert val == pytest.approx(want + prior, rel=1e-6)
    assert len(traces) == 1


def _crowdbt_prior_args(n_workers=3):
    ab = np.array([[1.7, 0.28], [3.0, 0.6], [0.4, 2.5]])[:n_workers]
    # no observations: the model as exported, with an empty (0, 2) table, is its prior
    empty = np.zeros((0, 2), np.int32)
    return {"items": empty, "workers": np.zeros(0, np.int32), "n_items": 4, "alpha": ab,
            "mu0": 0.3, "sigma0": 1.4}, ab


def _ks_ok(x, law):
    return stats.kstest(np.ravel(x), law.cdf).pvalue > 1e-3


def test_predictive_draws_every_site_from_its_prior():
    """Predictive on the exported CrowdBT model draws λ and every helper site of the
    Gamma construction from its prior, and η from Beta(a, b) (KS, fixed seeds)."""
    args, ab = _crowdbt_prior_args()
    draws = Predictive(A.crowdbt_model, num_samples=4000)(jax.random.PRNGKey(0), **args)
    from crowdrank.models.model_inputs import boost_split

    big, small = boost_split(ab)
    lam = np.asarray(draws["lambda"])
    assert _ks_ok(lam, stats.norm(0.3, 1.4))
    for j, a in enumerate(ab[big]):
        assert _ks_ok(draws["eta_g"][:, j], stats.gamma(a))
    for j, a in enumerate(ab[small]):
        assert _ks_ok(draws["eta_u"][:, j], stats.gamma(a + 1.0))
        assert _ks_ok(draws["eta_e"][:, j], stats.expon())
    for w, (a, b) in enumerate(ab):
        assert _ks_ok(draws["eta"][:, w], stats.beta(a, b))


def test_prior_nuts_matches_predictive():
    """Prior-only NUTS on the same exported model (no observations) matches the
    Predictive draws site by site (two-sample KS on thinned chains) and the known
    marginals."""
    args, ab = _crowdbt_prior_args()
    pred = Predictive(A.crowdbt_model, num_samples=2000)(jax.random.PRNGKey(1), **args)
    mcmc = MCMC(NUTS(A.crowdbt_model), num_warmup=300, num_samples=2000,
                progress_bar=False)
    mcmc.run(jax.random.PRNGKey(2), **args, rankings=args["items"])   # observed: none
    post = mcmc.get_samples()
    for site in ("lambda", "eta_g", "eta_u", "eta_e", "eta"):
        x = np.asarray(post[site])[::2]
        y = np.asarray(pred[site])
        for j in range(x.shape[1]):
            assert stats.ks_2samp(x[:, j], y[:, j]).pvalue > 1e-3, (site, j)
    for w, (a, b) in enumerate(ab):
        assert _ks_ok(np.asarray(post["eta"])[::2, w], stats.beta(a, b))


def test_crowdbt_draws_follow_the_pair_probability():
    """The site's sample is the generative process: a CrowdBT pair i>j reported with
    probability η σ(λ_i − λ_j) + (1 − η) σ(λ_j − λ_i) (closed form)."""
    lam = np.array([0.8, -0.4, 0.1])
    log_eta = np.log(np.array([[0.9, 0.1], [0.3, 0.7]]))
    items = np.tile(np.array([[0, 1], [2, 1]], np.int32), (4000, 1))
    workers = np.tile(np.array([0, 1], np.int32), 4000)
    site = A.ArrayRankings("crowdbt", items, workers, lam, log_eta)
    out = np.asarray(site.sample(jax.random.PRNGKey(4)))
    for r, (i, j, w) in enumerate([(0, 1, 0), (2, 1, 1)]):
        won = out[r::2, 0] == i
        s = 1 / (1 + np.exp(-(lam[i] - lam[j])))
        eta = np.exp(log_eta[w, 0])
        p = eta * s + (1 - eta) * (1 - s)
        assert abs(won.mean() - p) < 4 * np.sqrt(p * (1 - p) / won.size)


@pytest.mark.slow   # four NUTS fits, each compiled afresh by simuk: ~60 s on 2 busy cores
def test_simuk_sbc_runs_on_the_exported_model():
    """simuk's SBC takes the exported PL model as it is: the observed site is the
    keyword argument ``rankings``, every latent site is drawn by Predictive."""
    simuk = pytest.importorskip("simuk")
    args = _pl_args()
    t0 = time.perf_counter()
    sbc = simuk.SBC(NUTS(A.pl_model), data_dir=args, num_simulations=4, seed=7,
                    sample_kwargs={"num_warmup": 150, "num_samples": 100},
                    progress_bar=False)
    assert sbc.observed_model_vars == ["rankings"]
    assert sorted(sbc.var_names) == ["lambda_c", "lambda_mean"]
    sbc.run_simulations()
    ranks = sbc.simulations["prior_sbc"]
    lm = np.asarray(ranks["lambda_mean"]).ravel()
    assert lm.size == 4 and np.all((lm >= 0) & (lm <= 100))
    assert np.asarray(ranks["lambda_c"]).size == 4 * 6
    assert time.perf_counter() - t0 < 120


@pytest.mark.parametrize("model", ["crowdbt", "couple"])
def test_program_site_takes_traced_orders(model, data, priors):
    """The sampler's program (``numpyro_models.model``) scores traced orders through the
    masked form, with one compilation for two order tables of one shape, and the same
    values as its concrete path (the NumPy layout of the orders)."""
    from numpyro.handlers import condition

    from crowdrank.models import numpyro_models as nm
    from crowdrank.models.model_inputs import with_orders

    inp = model_inputs(model, data, priors)
    rng = np.random.default_rng(8)
    other = inp.order.copy()
    for r in range(len(other)):                      # a shuffled order of each task
        k = int((other[r] >= 0).sum())
        other[r, :k] = rng.permutation(other[r, :k])
    params = {"lambda": rng.normal(size=data.n_items)}
    eta = _eta(model, rng, data.n_workers, data.K)
    params["eta"] = eta
    kw = {"simplex": "dirichlet", "level": "iid", "predict": True}
    traces = []

    @jax.jit
    def joint(order):
        traces.append(1)
        return log_density(condition(nm.model, {"rankings": order}), (inp,), kw, params)[0]

    for order in (inp.order, other):
        concrete = log_density(nm.model, (with_orders(inp, order),),
                               {"simplex": "dirichlet", "level": "iid"}, params)[0]
        assert float(joint(order)) == pytest.approx(float(concrete), rel=1e-5)
    assert len(traces) == 1


@pytest.mark.parametrize("model", ["crowdbt", "couple", "pl"])
def test_array_model_log_joint_is_the_programs(model, data, priors):
    """With the sampler's magnitude reweighting (``level_sd``), the array model's log joint
    is the program's (``numpyro_models.model(inputs)``, default coordinates) at random
    points: the same sites, priors and likelihood."""
    from crowdrank.models import numpyro_models as nm
    from crowdrank.models.model_inputs import LEVEL_SD, boost_split

    inp = model_inputs(model, data, priors)
    f = A.make_model(model, level_sd=LEVEL_SD if inp.has_eta else None)
    rng = np.random.default_rng(12)
    for _ in range(3):
        c = rng.normal(size=data.n_items)
        params = {"lambda_mean": rng.normal(), "lambda_c": c - c.mean()}
        if inp.has_eta:
            big, small = boost_split(inp.alpha)
            if big[0].size:
                params["eta_g"] = rng.gamma(2.0, size=big[0].size)
            if small[0].size:
                params["eta_u"] = rng.gamma(2.0, size=small[0].size)
                params["eta_e"] = rng.exponential(size=small[0].size)
        got = log_density(f, (), A.model_arrays(inp), params)[0]
        want = log_density(nm.model, (inp,), {}, params)[0]
        assert float(got) == pytest.approx(float(want), rel=1e-5)


# ---------------------------------------------------------------- PyMC: the data in pm.Data
@pytest.mark.parametrize("model", ["pl", "crowdbt", "couple"])
def test_pymc_data_model_swaps_data_without_recompiling(model, data, priors):
    """The PyMC model's observed logp is a symbolic function of its ``pm.Data``: one
    compiled function scores a second data set of the same shape after ``pm.set_data``,
    and both equal the NumPy reference likelihood."""
    pytest.importorskip("pymc")
    import pymc as pm

    from crowdrank.models.pymc_arrays import build_data_model

    inp = model_inputs(model, data, priors)
    kw = A.model_arrays(inp)
    m = build_data_model(model, **kw)
    rng = np.random.default_rng(21)
    point = m.initial_point()
    point = {k: rng.normal(0, 0.5, np.shape(v)) for k, v in point.items()}

    def fn(out):   # a compiled function of the value variables (RVs replaced by them)
        out = m.replace_rvs_by_values([out])[0]
        return m.compile_fn(out, inputs=m.value_vars, on_unused_input="ignore")

    logp = fn(m.logp(vars=m.observed_RVs, sum=False)[0])
    lam = fn(m["lambda"])(point)
    eta = None
    if inp.has_eta:
        eta = fn(m["eta"])(point)
    other = inp.order.copy()
    for r in range(len(other)):
        k = int((other[r] >= 0).sum())
        other[r, :k] = rng.permutation(other[r, :k])
    for order in (inp.order, other):
        pm.set_data({"rankings_data": order}, model=m)
        got = np.asarray(logp(point))
        d = data.subset(np.arange(data.n_rankings))
        d = type(d)(items=d.items, workers=d.workers, order=order.T, lengths=d.lengths,
                    worker=d.worker, source="<test>")
        np.testing.assert_allclose(got, loglik_pointwise(model, d, lam, eta), rtol=1e-8,
                                   atol=1e-8)


def test_pymc_prior_predictive_draws_every_site_from_its_prior():
    """``pm.sample_prior_predictive`` on the PyMC CrowdBT data model draws λ, every helper
    site and η from their known marginals (no Potential left out of the draws)."""
    pytest.importorskip("pymc")
    import pymc as pm

    from crowdrank.models.model_inputs import boost_split
    from crowdrank.models.pymc_arrays import build_data_model

    ab = np.array([[1.7, 0.28], [3.0, 0.6], [0.4, 2.5]])
    items = np.array([[0, 1], [2, 3], [1, 3]], np.int32)
    m = build_data_model("crowdbt", items, np.array([0, 1, 2]), 4, ab, mu0=0.3, sigma0=1.4)
    # a Potential is a density term that prior predictive draws leave out
    assert not m.potentials
    with m:
        pri = pm.sample_prior_predictive(draws=4000, random_seed=3).prior
    big, small = boost_split(ab)

    def flat(name):
        return np.asarray(pri[name]).reshape(4000, -1)

    assert _ks_ok(flat("lambda"), stats.norm(0.3, 1.4))
    for j, a in enumerate(ab[big]):
        assert _ks_ok(flat("eta_g")[:, j], stats.gamma(a))
    for j, a in enumerate(ab[small]):
        assert _ks_ok(flat("eta_u")[:, j], stats.gamma(a + 1.0))
        assert _ks_ok(flat("eta_e")[:, j], stats.expon())
    for w, (a, b) in enumerate(ab):
        assert _ks_ok(flat("eta")[:, w], stats.beta(a, b))


def test_refit_reuses_the_compiled_sampler():
    """MCMC(jit_model_args=True) on the exported model refits a second data set of the
    same shape with the compiled sampler (its jit cache holds one program), while a
    traced n_items is refused with a clear error."""
    import functools

    a, b = _pl_args(seed=1), _pl_args(seed=2)
    for d in (a, b):
        d.pop("n_items")
    model = functools.partial(A.pl_model, n_items=6)
    mcmc = MCMC(NUTS(model), num_warmup=20, num_samples=20, progress_bar=False,
                jit_model_args=True)
    mcmc.run(jax.random.PRNGKey(0), **a)
    first = np.asarray(mcmc.get_samples()["lambda"])
    mcmc.run(jax.random.PRNGKey(0), **b)
    assert mcmc._cache and len(mcmc._cache) == 1
    assert not np.allclose(first, np.asarray(mcmc.get_samples()["lambda"]))
    bad = MCMC(NUTS(A.pl_model), num_warmup=5, num_samples=5, progress_bar=False,
               jit_model_args=True)
    with pytest.raises(TypeError, match="functools.partial"):
        bad.run(jax.random.PRNGKey(0), n_items=6, **a)

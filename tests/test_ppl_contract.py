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
    if model in ("couple", "couple-normalized"):
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


@pytest.mark.parametrize("name", ["crowd-bt", "plackett-luce"])
def test_array_model_names_an_unknown_model(name, data, priors):
    """A model without an array form is an error naming it, never another model's density
    (names on both sides of "peergrader", the last one tried)."""
    inp = model_inputs("pl", data, priors)
    with pytest.raises(ValueError, match=f"no array form of model '{name}'"):
        A.masked_loglik(name, np.zeros(data.n_items), inp.order)


def test_log_gamma_is_the_log_of_a_gamma_draw():
    """``LogGamma(α)`` (the worker table of ``simplex="gibbs"``) is SciPy's ``loggamma(α)``:
    the density at points and a KS test of its draws, shaped ``sample_shape + batch``.
    (The draws are JAX's ``random.loggamma``; what is ours is the shape and parameter
    plumbing. Over 40 keys the three columns' KS p-values were near uniform; key 0 gave
    p = 1e-4 for α = 4, one of the 120, so the test uses key 1.)"""
    from crowdrank.models.numpyro.dists import LogGamma

    alpha = np.array([0.05, 0.7, 4.0])
    d = LogGamma(alpha)
    y = np.array([-30.0, -1.0, 0.8])
    np.testing.assert_allclose(np.asarray(d.log_prob(y)), stats.loggamma.logpdf(y, alpha),
                               rtol=1e-5)
    x = np.asarray(d.sample(jax.random.PRNGKey(1), (3000,)))
    assert x.shape == (3000, 3)
    for j, a in enumerate(alpha):
        assert stats.kstest(x[:, j], stats.loggamma(a).cdf).pvalue > 1e-3, a


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


def _program_point(inp, rng):
    """A random point of the program's default sites, and the same point for the array
    model with ``level_sd`` (the helpers concatenated into ``eta_aux``)."""
    from crowdrank.models.model_inputs import boost_split

    c = rng.normal(size=inp.n_items)
    params = {"lambda_mean": rng.normal(), "lambda_c": c - c.mean()}
    arr = dict(params)
    if inp.has_eta:
        big, small = boost_split(inp.alpha)
        params["eta_g"] = rng.gamma(2.0, size=big[0].size)
        params["eta_u"] = rng.gamma(2.0, size=small[0].size)
        params["eta_e"] = rng.exponential(size=small[0].size)
        params = {k: v for k, v in params.items() if np.size(v)}
        arr["eta_aux"] = np.concatenate([params[k] for k in ("eta_g", "eta_u", "eta_e")
                                         if k in params])
    return params, arr


@pytest.mark.parametrize("model", ["crowdbt", "couple", "couple-normalized", "pl"])
def test_array_model_log_joint_is_the_programs(model, data, priors):
    """With the sampler's magnitude reweighting (``level_sd``), the array model's log joint
    is the program's (``numpyro_models.model(inputs)``, default coordinates, its
    ``eta_level`` factor included) at random points, to 1e-10 in float64: the same priors
    and likelihood, normalised COUPLE's ``log Σ_orderings`` included."""
    from crowdrank.models import numpyro_models as nm
    from crowdrank.models.model_inputs import LEVEL_SD

    inp = model_inputs(model, data, priors)
    f = A.make_model(model, level_sd=LEVEL_SD if inp.has_eta else None)
    rng = np.random.default_rng(12)
    kw = A.model_arrays(inp)
    with jax.enable_x64(True):
        # one compilation each (op-by-op dispatch in float64 costs more than the values)
        mine = jax.jit(lambda p: log_density(f, (), kw, p)[0])
        program = jax.jit(lambda p: log_density(nm.model, (inp,), {}, p)[0])
        for _ in range(3):
            params, arr = _program_point(inp, rng)
            got, want = float(mine(arr)), float(program(params))
            assert abs(got - want) <= 1e-10 * max(1.0, abs(want)), (got, want)


def test_level_gammas_draws_its_density():
    """``LevelGammas`` (the reweighted helpers, one site): its ``log_prob`` is the
    definition of docs/design.md §5.1 written here with SciPy (independent Gammas and an
    exponential, times ``N(log S; 0, sd²) / (S · Gamma(S; Σα))``) to 1e-10, and the draws of
    ``Predictive`` on the exported CrowdBT model have that law: known marginals (KS: ``η ~
    Beta(a, b)``, ``log S ~ N(0, sd²)``, ``u − g ~ Exp(1)`` for a boosted entry) and
    expectations equal to importance-weighted ones under the independent helpers (the
    weight is the density ratio, written with SciPy)."""
    sd, ab = 0.3, np.array([[1.7, 0.28], [3.0, 0.6]])
    with pytest.raises(ValueError, match="level_sd must be positive"):
        A.LevelGammas(ab, [0.3, 0.0])

    def scipy_logp(v):
        g = np.array([v[0], v[3] * np.exp(-v[4] / 0.28)])
        S = np.array([g[0] + g[1], v[1] + v[2]])
        dens = (stats.gamma.logpdf(v[0], 1.7) + stats.gamma.logpdf(v[1], 3.0)
                + stats.gamma.logpdf(v[2], 0.6) + stats.gamma.logpdf(v[3], 1.28)
                + stats.expon.logpdf(v[4]))
        return dens + np.sum(stats.norm.logpdf(np.log(S), 0, sd) - np.log(S)
                             - stats.gamma.logpdf(S, ab.sum(axis=1)))

    rng = np.random.default_rng(4)
    with jax.enable_x64(True):
        site = A.LevelGammas(ab, sd)      # value: g of 1.7, 3.0, 0.6; u, e of 0.28
        for v in rng.gamma(2.0, size=(3, 5)):
            assert float(site.log_prob(v)) == pytest.approx(scipy_logp(v), abs=1e-10)
    args = {"items": np.zeros((0, 2), np.int32), "workers": np.zeros(0, np.int32),
            "n_items": 4, "alpha": ab}
    d = Predictive(A.make_model("crowdbt", level_sd=sd), num_samples=6000)(
        jax.random.PRNGKey(9), **args)
    v = np.asarray(d["eta_aux"], float)
    g_small = v[:, 3] * np.exp(-v[:, 4] / 0.28)
    for w, S in enumerate([v[:, 0] + g_small, v[:, 1] + v[:, 2]]):
        assert _ks_ok(np.log(S), stats.norm(0, sd))
        assert _ks_ok(np.asarray(d["eta"])[:, w], stats.beta(*ab[w]))
    assert _ks_ok(v[:, 3] - g_small, stats.expon())
    np.testing.assert_array_equal(np.asarray(d["eta_u"])[:, 0], v[:, 3])
    # the same expectations by importance weights on independent helper draws
    n = 200_000
    x = np.column_stack([rng.gamma(1.7, size=n), rng.gamma(3.0, size=n),
                         rng.gamma(0.6, size=n), rng.gamma(1.28, size=n),
                         rng.exponential(size=n)])
    gs = x[:, 3] * np.exp(-x[:, 4] / 0.28)
    S = np.column_stack([x[:, 0] + gs, x[:, 1] + x[:, 2]])
    lr = np.sum(stats.norm.logpdf(np.log(S), 0, sd) - np.log(S)
                - stats.gamma.logpdf(S, ab.sum(axis=1)), axis=1)   # target / independent
    wts = np.exp(lr)
    for j, f in ((0, np.log), (3, np.log), (4, np.log), (4, lambda e: e > 1.0)):
        fx, fv = f(x[:, j]).astype(float), f(v[:, j]).astype(float)
        is_mean = np.sum(wts * fx) / np.sum(wts)
        is_se = np.sqrt(np.mean((wts * (fx - is_mean)) ** 2)) / np.mean(wts) / np.sqrt(n)
        mc_se = fv.std() / np.sqrt(fv.size)
        assert abs(fv.mean() - is_mean) < 5 * np.hypot(is_se, mc_se), (j, fv.mean(), is_mean)


def test_normalised_couple_sums_to_one_and_draws_its_probabilities():
    """Normalised COUPLE as a function of arrays: for each task the probabilities of its
    ``k!`` orderings sum to 1 (1e-12; rows of k = 2, 3, 4 padded in one table), and the
    site's draws of a k = 3 task follow them (each ordering's count within 4 binomial
    SEs)."""
    from itertools import permutations

    lam = np.array([0.9, -0.3, 0.4, -1.1])
    log_eta = np.log(np.array([[0.55, 0.3, 0.1, 0.05], [0.2, 0.2, 0.3, 0.3]]))
    items = np.array([[0, 1, -1, -1], [2, 0, 3, -1], [3, 1, 0, 2]], np.int32)
    workers = np.array([0, 1, 0], np.int32)
    rows = [(r, list(p) + [-1] * (4 - k)) for r, k in enumerate((2, 3, 4))
            for p in permutations(items[r, :k])]              # every ordering of each task
    task = np.array([r for r, _ in rows])
    with jax.enable_x64(True):
        ll = jax.jit(A.masked_loglik, static_argnums=0)(
            "couple-normalized", lam, np.array([o for _, o in rows], np.int32),
            workers[task], log_eta)
    prob = np.exp(np.asarray(ll))
    np.testing.assert_allclose(np.bincount(task, prob), 1.0, rtol=0, atol=1e-12)
    n = 3000
    site = A.ArrayRankings("couple-normalized", np.tile(items[1:2], (n, 1)),
                           np.ones(n, np.int32), lam, log_eta)
    out = np.asarray(site.sample(jax.random.PRNGKey(6)))[:, :3]
    for (_, o), p in zip([rw for rw in rows if rw[0] == 1], prob[task == 1]):
        hits = np.mean(np.all(out == np.array(o[:3]), axis=1))
        assert abs(hits - p) < 4 * np.sqrt(p * (1 - p) / n), (o, hits, p)


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


@pytest.mark.slow   # two PyMC compilations of normalised COUPLE (3.8 CPU-s with a warm cache)
def test_pymc_level_sd_log_joint_is_the_programs(data, priors):
    """With ``level_sd`` the PyMC data model's log joint (Jacobians included) is the PyMC
    program's (``pymc_models.build_model``: the Gamma sites and the ``eta_level``
    Potential, normalised COUPLE's normaliser by its own layout) at random points of the
    unconstrained space, to 1e-10."""
    pytest.importorskip("pymc")
    from crowdrank.models import pymc_models as pmm
    from crowdrank.models.model_inputs import LEVEL_SD
    from crowdrank.models.pymc_arrays import build_data_model

    inp = model_inputs("couple-normalized", data, priors)
    m = build_data_model("couple-normalized", **A.model_arrays(inp), level_sd=LEVEL_SD)
    ref = pmm.build_model(inp)
    assert not m.potentials and ref.potentials
    f, f_ref = m.compile_logp(), ref.compile_logp()
    rng = np.random.default_rng(31)
    helpers = ("eta_g_log__", "eta_u_log__", "eta_e_log__")
    for _ in range(2):
        point = {k: rng.normal(0, 0.7, np.shape(v)) for k, v in ref.initial_point().items()}
        mine = {k: v for k, v in point.items() if k not in helpers}
        mine["eta_aux_log__"] = np.concatenate([point[k] for k in helpers if k in point])
        want = float(f_ref(point))
        assert float(f(mine)) == pytest.approx(want, abs=1e-10 * max(1.0, abs(want)))


def test_pymc_level_sd_prior_draws_the_reweighted_law():
    """``pm.sample_prior_predictive`` on the PyMC CrowdBT data model with ``level_sd``
    draws the reweighted helpers exactly: ``η ~ Beta(a, b)``, ``log S ~ N(0, sd²)`` per
    worker and ``u − g ~ Exp(1)`` for the boosted entry (KS), no Potential left out."""
    pytest.importorskip("pymc")
    import pymc as pm

    from crowdrank.models.pymc_arrays import build_data_model

    sd, ab = 0.3, np.array([[1.7, 0.28], [3.0, 0.6]])
    m = build_data_model("crowdbt", np.array([[0, 1], [2, 3]]), np.array([0, 1]), 4, ab,
                         level_sd=sd)
    assert not m.potentials
    with m:
        pri = pm.sample_prior_predictive(draws=3000, random_seed=5).prior
    v = np.asarray(pri["eta_aux"]).reshape(3000, -1)      # g of 1.7, 3.0, 0.6; u, e of 0.28
    g_small = v[:, 3] * np.exp(-v[:, 4] / 0.28)
    eta = np.asarray(pri["eta"]).reshape(3000, -1)
    for w, S in enumerate([v[:, 0] + g_small, v[:, 1] + v[:, 2]]):
        assert _ks_ok(np.log(S), stats.norm(0, sd))
        assert _ks_ok(eta[:, w], stats.beta(*ab[w]))
    assert _ks_ok(v[:, 3] - g_small, stats.expon())


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

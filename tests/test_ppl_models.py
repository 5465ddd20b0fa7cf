"""The NumPyro and PyMC models against the NumPy reference (no sampling here).

The reference is ``models.likelihood`` (one ranking, one stage at a time) plus the log
prior from ``scipy.stats``; both PPL densities are compared on the *constrained* scale
(no Jacobian), at random parameter points, for every model.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from crowdrank.models.data import Rankings
from crowdrank.models.likelihood import MODELS, loglik, loglik_pointwise
from crowdrank.models.model_inputs import model_inputs
from crowdrank.models.priors import Priors
from crowdrank.models.simulate import simulate

#: The PPLs' own (λ, η) sites, so densities can be evaluated at a point (λ, η); the default
#: Gamma/zero-sum coordinates are the same model, checked in tests/test_simplex_exact.py.
DIRECT = {"simplex": "dirichlet", "level": "iid"}

jax = pytest.importorskip("jax")
jnp = jax.numpy
numpyro = pytest.importorskip("numpyro")


@pytest.fixture(scope="module")
def data() -> Rankings:
    # k = 2..4 mixed, so padding, dead stages and the k! normaliser are all exercised
    return simulate("couple", n_items=9, n_workers=3, tasks_per_worker=12, kmax=4,
                    seed=11).rankings


@pytest.fixture(scope="module")
def priors(data) -> Priors:
    # unequal, non-geometric worker priors so that a row mix-up would show
    rng = np.random.default_rng(5)
    alpha = rng.uniform(0.3, 4.0, size=(data.n_workers, data.K))
    # PeerGrader's Gamma (shape, rate), unequal per worker too
    return Priors(data.workers, alpha, mu0=0.3, sigma0=1.4, spec="test",
                  gamma=rng.uniform(1.0, 5.0, size=(data.n_workers, 2)))


def random_point(model, data, priors, seed):
    """A random constrained point and the reference log joint at it."""
    rng = np.random.default_rng(seed)
    lam = rng.normal(0, 1.5, size=data.n_items)
    ref = stats.norm.logpdf(lam, priors.mu0, priors.sigma0).sum()
    params = {"lambda": lam}
    eta = None
    if model == "crowdbt":
        eta = rng.uniform(0.05, 0.95, size=data.n_workers)
        ab = priors.beta()
        ref += stats.beta.logpdf(eta, ab[:, 0], ab[:, 1]).sum()
    elif model == "peergrader":
        eta = rng.gamma(3.0, 0.4, size=data.n_workers)
        g = priors.gamma_params()
        ref += stats.gamma.logpdf(eta, g[:, 0], scale=1.0 / g[:, 1]).sum()
    elif model.startswith("couple"):
        eta = rng.dirichlet(np.full(data.K, 2.0), size=data.n_workers)
        ref += sum(stats.dirichlet.logpdf(eta[w], priors.alpha[w, : data.K])
                   for w in range(data.n_workers))
    if eta is not None:
        params["eta"] = eta
    ref += loglik(model, data, lam, eta)
    return params, float(ref), eta


# ---------------------------------------------------------------- NumPyro
@pytest.mark.parametrize("model", MODELS)
def test_numpyro_log_density_matches_reference(model, data, priors):
    from numpyro.infer.util import log_density

    from crowdrank.models import numpyro_models as npm

    inp = model_inputs(model, data, priors)
    with jax.enable_x64(True):
        # jitted: one compile instead of one per eager op
        dens = jax.jit(lambda p: log_density(npm.model, (inp,), DIRECT, p)[0])
        for seed in (0, 1):
            params, ref, _ = random_point(model, data, priors, seed)
            assert float(dens(params)) == pytest.approx(ref, rel=1e-10, abs=1e-9)


@pytest.mark.parametrize("model", MODELS)
def test_numpyro_pointwise_matches_reference(model, data, priors):
    from crowdrank.models import numpyro_models as npm

    inp = model_inputs(model, data, priors)
    with jax.enable_x64(True):
        params, _, eta = random_point(model, data, priors, 3)
        got = np.asarray(jax.jit(lambda l_, e_: npm.pointwise_loglik(inp, l_, e_))(
            params["lambda"], params.get("eta")))
    want = loglik_pointwise(model, data, params["lambda"], eta)
    assert got.shape == (data.n_rankings,)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


def test_numpyro_float32_close_to_reference(data, priors):
    """The float32 path (used for speed at scale) stays within single precision."""
    from crowdrank.models import numpyro_models as npm

    inp = model_inputs("couple", data, priors)
    params, _, eta = random_point("couple", data, priors, 4)
    with jax.enable_x64(False):
        got = np.asarray(npm.pointwise_loglik(
            inp, jax.numpy.asarray(params["lambda"], "float32"),
            jax.numpy.asarray(eta, "float32")))
    assert got.dtype == np.float32
    want = loglik_pointwise("couple", data, params["lambda"], eta)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)


def test_numpyro_couple_with_e1_is_pl(data, priors):
    """η_w = (1, 0, …, 0) reduces COUPLE to PL exactly (docs/design.md, Models), zeros included."""
    from crowdrank.models import numpyro_models as npm

    inp_c = model_inputs("couple", data, priors)
    inp_p = model_inputs("pl", data, priors)
    lam = np.random.default_rng(9).normal(size=data.n_items)
    e1 = np.zeros((data.n_workers, data.K))
    e1[:, 0] = 1.0
    with jax.enable_x64(True):
        c = np.asarray(npm.pointwise_loglik(inp_c, lam, e1))
        p = np.asarray(npm.pointwise_loglik(inp_p, lam))
        g = jax.grad(lambda l_: npm.pointwise_loglik(inp_c, l_, e1).sum())(lam)
    np.testing.assert_allclose(c, p, rtol=1e-12, atol=1e-12)
    assert np.all(np.isfinite(np.asarray(g)))


def test_numpyro_couple_on_pairs_equals_crowdbt(priors):
    """k = 2: COUPLE with ``Dir(α1, α2)`` is CrowdBT with ``Beta(α1, α2)`` — log joint equal."""
    from numpyro.infer.util import log_density

    from crowdrank.models import numpyro_models as npm

    pairs = simulate("crowdbt", n_items=7, n_workers=3, tasks_per_worker=15, seed=2).rankings
    pr = Priors(pairs.workers, priors.alpha[:, :2], priors.mu0, priors.sigma0, "test")
    rng = np.random.default_rng(1)
    lam = rng.normal(size=pairs.n_items)
    acc = rng.uniform(0.1, 0.9, size=pairs.n_workers)
    with jax.enable_x64(True):
        a, _ = log_density(npm.model, (model_inputs("crowdbt", pairs, pr),), DIRECT,
                           {"lambda": lam, "eta": acc})
        b, _ = log_density(npm.model, (model_inputs("couple", pairs, pr),), DIRECT,
                           {"lambda": lam, "eta": np.stack([acc, 1 - acc], axis=1)})
    assert float(a) == pytest.approx(float(b), rel=1e-12)


def test_numpyro_gradient_matches_finite_differences(data, priors):
    """Autodiff through the masked logsumexp stage mixture is correct (no -inf leaks)."""
    from crowdrank.models import numpyro_models as npm

    inp = model_inputs("couple-normalized", data, priors)
    params, _, eta = random_point("couple-normalized", data, priors, 6)
    lam = params["lambda"]
    with jax.enable_x64(True):
        g = np.asarray(jax.jit(jax.grad(
            lambda l_: npm.pointwise_loglik(inp, l_, eta).sum()))(lam))
    h = 1e-6
    for r in range(data.n_items):
        e = np.zeros_like(lam)
        e[r] = h
        fd = (loglik("couple-normalized", data, lam + e, eta)
              - loglik("couple-normalized", data, lam - e, eta)) / (2 * h)
        assert g[r] == pytest.approx(fd, rel=1e-5, abs=1e-6)


def test_numpyro_fast_couple_gradient_matches_finite_differences(data, priors):
    """The hand-written COUPLE gradient (``couple_total``'s ``custom_vjp``, the sampler's
    likelihood) against central differences of the NumPy reference, in λ and in η."""
    from crowdrank.models import numpyro_models as npm

    inp = model_inputs("couple", data, priors)
    params, _, eta = random_point("couple", data, priors, 8)
    lam = params["lambda"]
    with jax.enable_x64(True):
        val, (g_lam, g_eta) = jax.jit(jax.value_and_grad(
            lambda l_, e_: npm.couple_total(inp, l_, e_), argnums=(0, 1)))(lam, eta)
    assert float(val) == pytest.approx(loglik("couple", data, lam, eta), rel=1e-10)
    h = 1e-6
    for r in range(data.n_items):
        e = np.zeros_like(lam)
        e[r] = h
        fd = (loglik("couple", data, lam + e, eta) - loglik("couple", data, lam - e, eta)) / (2 * h)
        assert float(g_lam[r]) == pytest.approx(fd, rel=1e-5, abs=1e-6)
    # η enters unnormalised (η̄ renormalises the active entries), so each entry has its own
    # partial derivative
    for w in range(data.n_workers):
        for t in range(data.K):
            e = np.zeros_like(eta)
            e[w, t] = h
            fd = (loglik("couple", data, lam, eta + e)
                  - loglik("couple", data, lam, eta - e)) / (2 * h)
            assert float(g_eta[w, t]) == pytest.approx(fd, rel=1e-5, abs=1e-6)


def test_numpyro_fast_couple_columns_gradient_of_a_weighted_sum(data, priors):
    """The per-ranking values' own gradient path (``couple_columns``' ``custom_vjp`` with
    unequal cotangents, as LOO's and any weighted use differentiate them) against central
    differences of the NumPy reference's weighted sum. The largest weight is the one of the
    layout's first column (``inputs.origin[0]``, the ranking the backward pass compares the
    other cotangents with), so a test of "all cotangents equal" that only asked whether
    the others are not larger would take the sum's shortcut and scale the whole gradient."""
    from crowdrank.models import numpyro_models as npm

    inp = model_inputs("couple", data, priors)
    params, _, eta = random_point("couple", data, priors, 9)
    lam = params["lambda"]
    wts = np.linspace(0.5, 1.5, data.n_rankings)
    wts[inp.origin[0]] = 2.0

    def ref(lam_, eta_):
        return float(wts @ loglik_pointwise("couple", data, lam_, eta_))

    with jax.enable_x64(True):
        g_lam, g_eta = jax.jit(jax.grad(
            lambda l_, e_: jnp.dot(wts, npm.couple_columns(inp, l_, e_)), argnums=(0, 1)))(
            lam, eta)
    h = 1e-6
    for r in range(data.n_items):
        e = np.zeros_like(lam)
        e[r] = h
        fd = (ref(lam + e, eta) - ref(lam - e, eta)) / (2 * h)
        assert float(g_lam[r]) == pytest.approx(fd, rel=1e-5, abs=1e-6)
    for w in range(data.n_workers):
        for t in range(data.K):
            e = np.zeros_like(eta)
            e[w, t] = h
            fd = (ref(lam, eta + e) - ref(lam, eta - e)) / (2 * h)
            assert float(g_eta[w, t]) == pytest.approx(fd, rel=1e-5, abs=1e-6)


def test_numpyro_loglik_dtype_sets_the_likelihoods_precision(data, priors):
    """``model(..., loglik_dtype="float32")`` computes the likelihood's elementwise work in
    single precision from double-precision parameters (the mixed-precision option; the
    values are summed and returned in double): the per-ranking values then differ from
    the double-precision ones at single precision's rounding, neither more nor zero;
    ``None`` keeps the parameters' precision (the NumPy reference's values)."""
    from numpyro import handlers

    from crowdrank.models import numpyro_models as npm

    inp = model_inputs("couple", data, priors)
    vals = {}
    with jax.enable_x64(True):
        for dtype in (None, "float32"):
            tr = handlers.trace(handlers.seed(npm.model, 0)).get_trace(inp, loglik_dtype=dtype)
            site = tr["rankings"]
            assert tr["lambda"]["value"].dtype == jnp.float64
            vals[dtype] = np.asarray(site["fn"].log_prob(site["value"]))
            if dtype is None:
                lam = np.asarray(tr["lambda"]["value"])
                eta = np.asarray(tr["eta"]["value"])
    np.testing.assert_allclose(vals[None], loglik_pointwise("couple", data, lam, eta),
                               rtol=1e-10)
    diff = np.abs(vals["float32"] - vals[None])
    assert 0 < diff.max() < 1e-5 * np.abs(vals[None]).max()


def test_numpyro_array_rankings_refuse_a_value_of_another_length():
    """``ArrayRankings.log_prob`` scores orders of the tasks' own lengths; an order with an
    item where its task has padding (too long) or padding where its task has an item (too
    short) is refused with the reason, not scored."""
    from crowdrank.models.numpyro.arrays import ArrayRankings

    items = np.array([[0, 1, 2], [1, 2, -1]])
    site = ArrayRankings("pl", items, None, np.array([0.3, -0.2, 0.1]))
    ok = site.log_prob(np.array([[2, 0, 1], [2, 1, -1]]))
    assert ok.shape == (2,) and np.all(np.isfinite(ok))
    for bad in ([[2, 0, 1], [2, 1, 0]], [[2, 0, -1], [2, 1, -1]]):
        with pytest.raises(ValueError, match="each task's length"):
            site.log_prob(np.array(bad))


def test_numpyro_normalized_couple_is_invariant_to_a_large_common_shift(data, priors):
    """Normalised COUPLE depends on λ through differences within a task only: adding 400
    to every score leaves every ranking's value as it was (the normaliser's per-task shift
    keeps its terms in (0, 1]; without it exp(λ) overflows at this level)."""
    from crowdrank.models import numpyro_models as npm

    inp = model_inputs("couple-normalized", data, priors)
    params, _, eta = random_point("couple-normalized", data, priors, 10)
    lam = params["lambda"]
    with jax.enable_x64(True):
        at = np.asarray(npm.pointwise_loglik(inp, lam, eta))
        shifted = np.asarray(npm.pointwise_loglik(inp, lam + 400.0, eta))
    assert np.all(np.isfinite(at))
    np.testing.assert_allclose(shifted, at, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("model", MODELS)
def test_numpyro_samplers_form_sums_the_pointwise_values(model, data, priors):
    """``model(..., pointwise=False)``, the sampler's form, gives the site's density as one
    total: the sum of the per-ranking values of ``pointwise=True`` at the same parameters,
    for every model (COUPLE through its fused kernel, the others through their columns)."""
    from numpyro import handlers

    from crowdrank.models import numpyro_models as npm

    inp = model_inputs(model, data, priors)
    with jax.enable_x64(True):
        tr = handlers.trace(handlers.seed(npm.model, 0)).get_trace(inp)
        params = {k: v["value"] for k, v in tr.items()
                  if v["type"] == "sample" and not v["is_observed"]}
        per = tr["rankings"]["fn"].log_prob(tr["rankings"]["value"])
        tot = handlers.trace(handlers.substitute(handlers.seed(npm.model, 1), data=params)
                             ).get_trace(inp, pointwise=False)["rankings"]
        total = tot["fn"].log_prob(tot["value"])
    assert np.shape(per) == (data.n_rankings,) and np.shape(total) == ()
    assert float(total) == pytest.approx(float(np.sum(per)), rel=1e-6)   # float32 work


@pytest.mark.parametrize("backend", ["numpyro", "pymc"])
@pytest.mark.parametrize("n_items", [2, 9])
def test_level_chooses_the_item_sites(backend, n_items):
    """``level="centered"`` (the default) samples ``mean(λ)`` and a zero-sum part from two
    items on, ``level="iid"`` samples ``λ`` itself, in both PPLs: the sites a user's draws
    and the NUTS diagnostics are named by (the same model either way,
    tests/test_simplex_exact.py)."""
    d = simulate("pl", n_items=n_items, n_workers=2, tasks_per_worker=4, kmax=2,
                 seed=3).rankings
    inp = model_inputs("pl", d, Priors.geometric(d.workers, d.K))
    assert inp.n_items == n_items
    if backend == "pymc":
        pytest.importorskip("pymc")
        from crowdrank.models import pymc_models as pmm

        def free(**kw):
            return sorted(v.name for v in pmm.build_model(inp, **kw).free_RVs)
    else:
        from numpyro import handlers

        from crowdrank.models import numpyro_models as npm

        def free(**kw):
            tr = handlers.trace(handlers.seed(npm.model, 0)).get_trace(inp, **kw)
            return sorted(k for k, v in tr.items()
                          if v["type"] == "sample" and not v["is_observed"])

    assert free() == free(level="centered") == ["lambda_c", "lambda_mean"]
    assert free(level="iid") == ["lambda"]


# ---------------------------------------------------------------- PyMC
@pytest.mark.parametrize("model", MODELS)
@pytest.mark.usefixtures("pytensor_without_c")
def test_pymc_log_density_matches_reference(model, data, priors):
    pytest.importorskip("pymc")
    from pymc.model.transform.conditioning import remove_value_transforms

    from crowdrank.models import pymc_models as pmm

    inp = model_inputs(model, data, priors)
    m = remove_value_transforms(pmm.build_model(inp, data.items, data.workers, **DIRECT))
    # the Python linker compiles in a fraction of numba's time; values are identical
    logp = m.compile_logp(jacobian=False, mode="FAST_COMPILE")
    for seed in (0, 1):
        params, ref, _ = random_point(model, data, priors, seed)
        assert float(logp(params)) == pytest.approx(ref, rel=1e-10, abs=1e-9)


@pytest.mark.parametrize("model", ["crowdbt", "couple-normalized", "peergrader"])
@pytest.mark.usefixtures("pytensor_without_c")
def test_pymc_pointwise_matches_reference(model, data, priors):
    pytest.importorskip("pymc")
    import pytensor
    import pytensor.tensor as pt

    from crowdrank.models import pymc_models as pmm

    inp = model_inputs(model, data, priors)
    lam = pt.dvector("lam")
    eta = pt.dvector("eta") if model in ("crowdbt", "peergrader") else pt.dmatrix("eta")
    fn = pytensor.function([lam, eta], pmm.pointwise_loglik(inp, lam, eta),
                           mode="FAST_COMPILE")
    params, _, e = random_point(model, data, priors, 2)
    np.testing.assert_allclose(fn(params["lambda"], e),
                               loglik_pointwise(model, data, params["lambda"], e),
                               rtol=1e-10, atol=1e-10)


def test_model_inputs_reject_missing_worker_prior(data):
    from crowdrank.models.data import DataError

    pr = Priors(data.workers[:-1], np.ones((data.n_workers - 1, data.K)))
    with pytest.raises(DataError, match="no worker prior"):
        model_inputs("couple", data, pr)


@pytest.mark.usefixtures("pytensor_without_c")
def test_pymc_gradient_matches_finite_differences(data, priors):
    """PyTensor's gradient through the zero_grad-shifted logsumexp is the true one."""
    pytest.importorskip("pymc")
    import pytensor
    import pytensor.tensor as pt

    from crowdrank.models import pymc_models as pmm

    inp = model_inputs("couple-normalized", data, priors)
    params, _, eta = random_point("couple-normalized", data, priors, 6)
    lam_v = pt.dvector("lam")
    total = pt.sum(pmm.column_loglik(inp, lam_v, pt.as_tensor_variable(eta)))
    g = pytensor.function([lam_v], pt.grad(total, lam_v), mode="FAST_COMPILE")(
        params["lambda"])
    lam, h = params["lambda"], 1e-6
    for r in range(data.n_items):
        e = np.zeros_like(lam)
        e[r] = h
        fd = (loglik("couple-normalized", data, lam + e, eta)
              - loglik("couple-normalized", data, lam - e, eta)) / (2 * h)
        assert g[r] == pytest.approx(fd, rel=1e-5, abs=1e-6)

"""PSIS k̂ of approximate posteriors (inference/approx/psis.py).

Oracles: on a Gaussian target the exact Gaussian gives importance ratios that are constant,
k̂ well below 0.5; a Gaussian with its sds halved misses the target's tails, so the ratios
are heavy-tailed and k̂ exceeds 0.7 ([Yao18]: for q = N(0, s²) against p = N(0, 1) with
s < 1 the ratio p/q has a Pareto tail of shape k = 1 − s² ... per dimension, which in ten
dimensions is far above 0.7). The log joint used for the online posteriors' k̂ is checked
against the NumPy reference likelihood (models/likelihood.py) plus scipy's prior densities.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from crowdrank.inference.approx.psis import KHAT_RELIABLE, label, online_log_ratios, psis_diagnostic


def _gauss_ratios(scale, d=10, n=4000, seed=0):
    rng = np.random.default_rng(seed)
    z = scale * rng.standard_normal((n, d))
    log_p = stats.norm.logpdf(z).sum(1)
    log_q = stats.norm.logpdf(z, scale=scale).sum(1)
    return log_p, log_q


def test_exact_gaussian_is_reliable():
    khat, lw = psis_diagnostic(*_gauss_ratios(1.0))
    assert khat < 0.5
    assert label(khat) == "good"
    np.testing.assert_allclose(np.exp(lw).sum(), 1.0)


def test_shrunk_gaussian_is_not_reliable():
    khat, _ = psis_diagnostic(*_gauss_ratios(0.5))
    assert khat > KHAT_RELIABLE
    assert label(khat) == "not reliable"


def test_wider_gaussian_is_fine():
    # an over-dispersed q has bounded ratios (p/q ≤ const): the safe direction
    khat, _ = psis_diagnostic(*_gauss_ratios(1.3))
    assert khat < 0.5


def test_bad_ratios_are_an_error():
    with pytest.raises(ValueError):
        psis_diagnostic(np.zeros(5), np.zeros(5))
    lp, lq = _gauss_ratios(1.0, n=100)
    lq[3] = -np.inf
    with pytest.raises(ValueError):
        psis_diagnostic(lp, lq)


@pytest.mark.slow
def test_shrunk_laplace_on_a_model_is_not_reliable():
    """The same diagnosis on a model's own potential: Laplace's Gaussian on a BT posterior
    is reliable, the same Gaussian with a quarter of its covariance is not."""
    import jax  # noqa: F401

    from crowdrank.inference.approx import fit_approx
    from crowdrank.inference.approx.target import build_target, x64
    from crowdrank.models.priors import Priors
    from crowdrank.models.simulate import simulate

    data = simulate("bt", n_items=6, n_workers=2, tasks_per_worker=60, seed=5).rankings
    priors = Priors.geometric(data.workers, K=2, a0=10, a=3)
    fit = fit_approx(data, "bt", priors, "laplace-ppl", draws=4000)
    assert fit.khat < 0.5
    rng = np.random.default_rng(0)
    cov = 0.25 * fit.cov
    z = rng.multivariate_normal(fit.mode, cov, size=4000)
    with x64():
        target = build_target(data, "bt", priors, fast=False)
        log_p = target.log_p_draws(z)
    khat, _ = psis_diagnostic(log_p, stats.multivariate_normal(fit.mode, cov).logpdf(z))
    assert khat > KHAT_RELIABLE


@pytest.mark.parametrize("model", ["crowdbt", "couple"])
def test_online_log_joint_matches_the_reference_likelihood(model):
    from crowdrank.inference.online import fit_online
    from crowdrank.models.likelihood import loglik
    from crowdrank.models.priors import Priors
    from crowdrank.models.simulate import simulate

    sim = simulate(model, n_items=6, n_workers=2, tasks_per_worker=15,
                   kmax=2 if model == "crowdbt" else 3, seed=1)
    data = sim.rankings
    priors = Priors.geometric(data.workers, K=data.K, a0=10, a=3)
    post = fit_online(data, model, priors, progress=False)
    out = online_log_ratios(post, data, model, priors, n=40, seed=0)
    assert np.isfinite(out["khat"])
    alpha = priors.for_data(data, K=2 if model == "crowdbt" else data.K)
    alpha = alpha.beta() if model == "crowdbt" else alpha.alpha[:, :data.K]
    for s in (0, 17, 39):
        lam, eta = out["lambda"][s], out["eta"][s]
        ref = loglik(model, data, lam, eta) + stats.norm.logpdf(lam, priors.mu0,
                                                                priors.sigma0).sum()
        if model == "crowdbt":
            ref += stats.beta.logpdf(eta, alpha[:, 0], alpha[:, 1]).sum()
        else:
            ref += sum(stats.dirichlet.logpdf(e / e.sum(), a) for e, a in zip(eta, alpha))
        assert out["log_p"][s] == pytest.approx(ref, rel=1e-9, abs=1e-8)


def test_batched_densities_equal_the_whole_batch(monkeypatch):
    """The densities are evaluated a bounded number of draws at a time (so the paper's
    450,000 rankings fit in memory): with blocks of 3 draws (the last one padded) the
    online k̂'s COUPLE log joints equal the whole-batch values, and a target's log density
    and its Hessian by blocks of 3 columns equal their closed forms. The target's blocks
    are checked on ``log p(z) = −½ zᵀPz − c Σ log(1 + e^{z_i})`` (``∇² = −P −
    c diag(σ(z)(1 − σ(z)))``) over the COUPLE data's arrays, which set the block size:
    the blocks do not depend on the density, and COUPLE's own target compiles for ~25 s."""
    import jax.numpy as jnp

    from crowdrank.inference.approx import target as tg
    from crowdrank.inference.online import fit_online
    from crowdrank.models.model_inputs import model_inputs
    from crowdrank.models.priors import Priors
    from crowdrank.models.simulate import simulate

    data = simulate("couple", n_items=6, n_workers=2, tasks_per_worker=15, kmax=3,
                    seed=2).rankings
    priors = Priors.geometric(data.workers, K=data.K, a0=10, a=3)
    post = fit_online(data, "couple", priors, progress=False)
    whole = online_log_ratios(post, data, "couple", priors, n=40, seed=0)["log_p"]

    dim, c = 14, 0.7
    rng = np.random.default_rng(1)
    a = rng.normal(size=(dim, dim))
    P = a @ a.T / dim + np.eye(dim)
    z = rng.normal(0, 0.5, (40, dim))

    def log_p(x):
        return -0.5 * x @ jnp.asarray(P) @ x - c * jnp.sum(jnp.logaddexp(0.0, x))

    def exact_log_p(x):
        return -0.5 * np.einsum("si,ij,sj->s", x, P, x) - c * np.logaddexp(0, x).sum(1)

    def exact_hessian(x):
        s = 1.0 / (1.0 + np.exp(-x))
        return -P - c * np.diag(s * (1.0 - s))

    known = tg.Target(inputs=model_inputs("couple", data, priors), dim=dim,
                      z0=np.zeros(dim), log_p=log_p, constrain=None, unravel=None,
                      sites={}, param={"fast": False})
    cells = np.size(known.inputs.index)
    monkeypatch.setattr(tg, "BATCH_ELEMENTS", 3 * cells)
    assert tg.draws_per_batch(known.inputs) == 3 and dim % 3 != 0   # a partial last block
    part = online_log_ratios(post, data, "couple", priors, n=40, seed=0)["log_p"]
    np.testing.assert_allclose(part, whole, rtol=1e-12)
    with tg.x64():
        np.testing.assert_allclose(known.log_p_draws(z), exact_log_p(z), rtol=1e-12)
        for x in (z[5], z[17]):
            np.testing.assert_allclose(np.asarray(known.hessian()(x)), exact_hessian(x),
                                       rtol=1e-12, atol=1e-12)

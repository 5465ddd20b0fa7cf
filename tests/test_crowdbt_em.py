"""CrowdBT by EM (inference.batch.crowdbt_em): derivatives against finite differences, the
EM fixed point against a general-purpose optimiser of the same log posterior, monotone
ascent, the η → 1 reduction to Bradley–Terry (checked with choix), and the prior check."""

from __future__ import annotations

import numpy as np
import pytest

from crowdrank.inference.batch import crowdbt_em as em
from crowdrank.models.data import DataError
from crowdrank.models.priors import Priors
from crowdrank.models.simulate import simulate


@pytest.fixture(scope="module")
def sim():
    return simulate("crowdbt", n_items=8, n_workers=4, tasks_per_worker=50, seed=21,
                    setting=["expert", "expert", "amateur", "spammer"])


def _priors(data, a=5.0, b=1.5, mu0=0.2, sigma0=1.3):
    W = data.n_workers
    return Priors(data.workers, np.tile([a, b], (W, 1)), mu0=mu0, sigma0=sigma0)


def _fd(f, x, h=1e-6):
    out = np.empty_like(x)
    for i in range(len(x)):
        e = np.zeros_like(x)
        e[i] = h
        out[i] = (f(x + e) - f(x - e)) / (2 * h)
    return out


def test_gradient_and_hessian_match_finite_differences(sim):
    data = sim.rankings
    P = em.pairs_of(data)
    rng = np.random.default_rng(0)
    lam, eta = rng.normal(size=data.n_items), rng.uniform(0.2, 0.9, data.n_workers)
    ab = np.tile([5.0, 1.5], (data.n_workers, 1))
    gl, ge = em.gradient(P, lam, eta, ab, 0.2, 1.3)
    np.testing.assert_allclose(gl, _fd(lambda x: em.log_posterior(P, x, eta, ab, 0.2, 1.3),
                                       lam), atol=1e-5)
    np.testing.assert_allclose(ge, _fd(lambda x: em.log_posterior(P, lam, x, ab, 0.2, 1.3),
                                       eta), atol=1e-5)
    A = em.neg_hessian_lambda(P, lam, eta, 1.3)
    cols = [(_fd(lambda x, i=i: em.gradient(P, x, eta, ab, 0.2, 1.3)[0][i], lam))
            for i in range(data.n_items)]
    np.testing.assert_allclose(-A, np.stack(cols), atol=1e-5)


def test_em_increases_the_log_posterior(sim):
    data = sim.rankings
    P = em.pairs_of(data)
    ab = np.tile([5.0, 1.5], (data.n_workers, 1))
    lam, eta = em.em_init(P, ab, 0.2)
    from crowdrank.inference.batch.luce import Prior
    f = em.log_posterior(P, lam, eta, ab, 0.2, 1.3)
    for _ in range(15):
        lam, eta, _ = em.em_step(P, lam, eta, ab, Prior(0.2, 1.3))
        g = em.log_posterior(P, lam, eta, ab, 0.2, 1.3)
        assert g >= f - 1e-9
        f = g


def test_em_map_matches_a_general_optimiser(sim):
    from scipy.optimize import minimize

    data = sim.rankings
    fit = em.fit_crowdbt_em(data, _priors(data), tol=1e-7)
    assert fit.converged
    P = em.pairs_of(data)
    ab = np.tile([5.0, 1.5], (data.n_workers, 1))
    L = data.n_items

    def negF(x):
        return -em.log_posterior(P, x[:L], x[L:], ab, 0.2, 1.3)

    def negG(x):
        gl, ge = em.gradient(P, x[:L], x[L:], ab, 0.2, 1.3)
        return -np.concatenate([gl, ge])

    x0 = np.concatenate([np.zeros(L), np.full(data.n_workers, 0.7)])
    res = minimize(negF, x0, jac=negG, method="L-BFGS-B",
                   bounds=[(None, None)] * L + [(1e-9, 1 - 1e-9)] * data.n_workers,
                   options={"ftol": 1e-15, "gtol": 1e-10, "maxiter": 10_000})
    np.testing.assert_allclose(fit.mu, res.x[:L], atol=1e-4)
    np.testing.assert_allclose(fit.eta, res.x[L:], atol=1e-4)
    assert fit.objective >= -res.fun - 1e-8
    # the spammer is found: the lowest accuracy
    assert int(np.argmin(fit.eta)) == 3


def test_certain_workers_reduce_to_bradley_terry(sim):
    choix = pytest.importorskip("choix")
    data = sim.rankings
    fit = em.fit_crowdbt_em(data, _priors(data, a=1e9, b=1.0, mu0=0.0, sigma0=1.0),
                            tol=1e-6)
    assert np.all(fit.eta > 1 - 1e-5)
    pairs = [(int(w), int(l_)) for w, l_ in data.rank_break().order.T]
    ref = choix.opt_pairwise(data.n_items, pairs, alpha=0.5, method="BFGS", tol=1e-10)
    np.testing.assert_allclose(fit.mu, ref, atol=1e-4)


def test_beta_below_one_is_refused(sim):
    data = sim.rankings
    with pytest.raises(DataError, match="a, b >= 1"):
        em.fit_crowdbt_em(data, _priors(data, a=1.7, b=0.3))


def test_squarem_reaches_the_em_fixed_point_in_fewer_steps_and_never_descends(sim):
    """SQUAREM (the default) and plain EM stop at the same MAP; the accelerated cycles use
    fewer EM steps, and each cycle keeps the log posterior from falling."""
    from crowdrank.inference.batch.luce import Prior

    data = sim.rankings
    pri = _priors(data)
    plain = em.fit_crowdbt_em(data, pri, tol=1e-8, accelerate=False)
    fast = em.fit_crowdbt_em(data, pri, tol=1e-8)
    assert plain.converged and fast.converged
    np.testing.assert_allclose(fast.mu, plain.mu, atol=1e-6)
    np.testing.assert_allclose(fast.eta, plain.eta, atol=1e-6)
    assert fast.iterations < plain.iterations
    P = em.pairs_of(data)
    ab = np.tile([5.0, 1.5], (data.n_workers, 1))
    lam, eta = em.em_init(P, ab, 0.2)
    f = em.log_posterior(P, lam, eta, ab, 0.2, 1.3)
    for _ in range(10):
        lam, eta, _ = em.squarem_step(P, lam, eta, ab, Prior(0.2, 1.3))
        g = em.log_posterior(P, lam, eta, ab, 0.2, 1.3)
        assert g >= f - 1e-9
        f = g


def test_squarem_cycle_is_exact_on_a_scalar_linear_map():
    """For a linear EM map ``x → 0.9x + 1`` (fixed point 10) the extrapolation is exact:
    ``r = 1, v = −0.1, α = −10``, so ``x = 0 + 20 − 10 = 10`` after one cycle; a point the
    caller marks not admissible keeps ``x2``."""
    from crowdrank.inference.batch.squarem import squarem_cycle

    def em_map(x):
        return 0.9 * x + 1.0

    def objective(x):
        return -float((x[0] - 10.0) ** 2)

    x, k = squarem_cycle(em_map, objective, np.array([0.0]))
    assert k == 3 and x[0] == pytest.approx(10.0, abs=1e-12)
    x, k = squarem_cycle(em_map, objective, np.array([0.0]), admissible=lambda x: False)
    assert k == 2 and x[0] == pytest.approx(1.9)

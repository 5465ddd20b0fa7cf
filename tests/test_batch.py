"""Batch BT/PL fitting (inference.batch): derivatives against finite differences, the
likelihood against the reference of models.likelihood, estimates against ``choix`` (an
independent implementation), the three solvers against each other, ML's existence check,
and Laplace's covariance against an independently computed inverse."""

from __future__ import annotations

import numpy as np
import pytest

choix = pytest.importorskip("choix")

from inference.batch import fit_batch, luce, solvers  # noqa: E402
from inference.batch import laplace  # noqa: E402
from inference.batch.api import problem_for  # noqa: E402
from models.data import DataError, Rankings  # noqa: E402
from models.likelihood import loglik as ref_loglik  # noqa: E402
from models.simulate import simulate  # noqa: E402


class _P:
    def __init__(self, mu0, sigma0):
        self.mu0, self.sigma0 = mu0, sigma0


@pytest.fixture(scope="module")
def kary():
    """PL data with k = 2..4 over 12 items (seeded)."""
    return simulate("pl", n_items=12, n_workers=4, tasks_per_worker=40, kmax=4,
                    seed=11).rankings


@pytest.fixture(scope="module")
def pairs():
    return simulate("bt", n_items=10, n_workers=5, tasks_per_worker=40, seed=12).rankings


def _fd_grad(f, x, h=1e-6):
    g = np.empty_like(x)
    for i in range(len(x)):
        e = np.zeros_like(x)
        e[i] = h
        g[i] = (f(x + e) - f(x - e)) / (2 * h)
    return g


@pytest.mark.parametrize("model", ["pl", "bt"])
def test_loglik_matches_reference(kary, model):
    lam = np.random.default_rng(0).normal(size=kary.n_items)
    st = luce.stages(kary, model)
    assert luce.loglik(st, lam) == pytest.approx(ref_loglik(model, kary, lam), rel=1e-12)


@pytest.mark.parametrize("model", ["pl", "bt"])
@pytest.mark.parametrize("prior", [None, luce.Prior(0.4, 1.3)])
def test_gradient_and_hessian_match_finite_differences(kary, model, prior):
    rng = np.random.default_rng(1)
    lam = rng.normal(size=kary.n_items)
    st = luce.stages(kary, model)
    w = rng.integers(0, 3, size=st.n_units).astype(float)     # bootstrap-like weights
    f = lambda x: luce.objective(st, x, prior, w)             # noqa: E731
    g = luce.objective_gradient(st, lam, prior, w)
    np.testing.assert_allclose(g, _fd_grad(f, lam), atol=1e-6)
    H = luce.objective_hessian(st, lam, prior, w)
    Hfd = np.stack([_fd_grad(lambda x: luce.objective_gradient(st, x, prior, w)[i], lam)
                    for i in range(len(lam))])
    np.testing.assert_allclose(H, Hfd, atol=1e-6)
    np.testing.assert_allclose(H, H.T, atol=1e-12)


def test_pl_with_k2_is_bt(pairs):
    lam = np.random.default_rng(2).normal(size=pairs.n_items)
    a, b = luce.stages(pairs, "pl"), luce.stages(pairs, "bt")
    assert luce.loglik(a, lam) == pytest.approx(luce.loglik(b, lam), rel=1e-13)


def _choix_pairs(data):
    return [(int(w), int(l_)) for w, l_ in data.rank_break().order.T]


def _choix_rankings(data):
    return [tuple(int(i) for i in r) for r in data.as_lists()]


@pytest.mark.parametrize("solver", solvers.SOLVERS)
def test_bt_map_agrees_with_choix(pairs, solver):
    mu0, s0 = 0.5, 1.5
    fit = fit_batch(pairs, "bt", _P(mu0, s0), solver=solver, tol=1e-10)
    assert fit.converged
    # choix's penalty is alpha * Σθ², i.e. N(0, 1/(2 alpha)); BT is shift-invariant and the
    # isotropic prior centred at mu0 only shifts the optimum by mu0
    ref = choix.opt_pairwise(pairs.n_items, _choix_pairs(pairs), alpha=1 / (2 * s0**2),
                             method="BFGS", tol=1e-12)
    np.testing.assert_allclose(fit.mu, ref + mu0, atol=1e-6)


@pytest.mark.parametrize("solver", solvers.SOLVERS)
def test_bt_ml_agrees_with_choix(pairs, solver):
    fit = fit_batch(pairs, "bt", method="ml", solver=solver, tol=1e-10)
    assert fit.converged
    assert abs(fit.mu.sum()) < 1e-9
    ref = choix.mm_pairwise(pairs.n_items, _choix_pairs(pairs), tol=1e-13, max_iter=100_000)
    np.testing.assert_allclose(fit.mu, ref - ref.mean(), atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("solver", solvers.SOLVERS)
def test_pl_map_and_ml_agree_with_choix(kary, solver):
    mu0, s0 = -0.2, 0.8
    fit = fit_batch(kary, "pl", _P(mu0, s0), solver=solver, tol=1e-10)
    assert fit.converged
    ref = choix.opt_rankings(kary.n_items, _choix_rankings(kary), alpha=1 / (2 * s0**2),
                             method="BFGS", tol=1e-12)
    np.testing.assert_allclose(fit.mu, ref + mu0, atol=1e-6)
    ml = fit_batch(kary, "pl", method="ml", solver=solver, tol=1e-10)
    assert ml.converged
    ref = choix.mm_rankings(kary.n_items, _choix_rankings(kary), tol=1e-13, max_iter=100_000)
    np.testing.assert_allclose(ml.mu, ref - ref.mean(), atol=1e-6)


@pytest.mark.parametrize("model", ["pl", "bt"])
def test_three_solvers_agree(kary, model):
    fits = [fit_batch(kary, model, _P(0.0, 2.0), solver=s, tol=1e-10) for s in solvers.SOLVERS]
    assert all(f.converged for f in fits)
    for f in fits[1:]:
        np.testing.assert_allclose(f.mu, fits[0].mu, atol=1e-8)
    # Newton converges quadratically: a handful of iterations; the others need many more
    assert fits[0].iterations <= 15 < fits[1].iterations


def test_mm_never_decreases_the_objective(kary):
    problem = problem_for(kary, "pl", "map", 0.0, 0.5)
    state = solvers.init(problem)
    for _ in range(30):
        new = solvers.mm_step(problem, state)
        assert new.f >= state.f - 1e-12
        state = new


def test_wexp_is_lambert_w_of_exp():
    x = np.array([-30.0, -1.0, 0.0, 2.5, 40.0, 499.0, 501.0, 5000.0])
    w = solvers.wexp(x)
    # W(e^x) solves w + log w = x
    np.testing.assert_allclose(w + np.log(w), x, rtol=1e-12, atol=1e-12)


def test_ml_refuses_data_that_are_not_strongly_connected():
    # a beats b and c, b and c trade wins: a's ML score is +infinity
    data = Rankings.from_lists([["a", "b"], ["a", "c"], ["b", "c"], ["c", "b"]],
                               ["w"] * 4, source="toy.csv")
    with pytest.raises(DataError, match="toy.csv.*not strongly connected.*'a'"):
        fit_batch(data, "bt", method="ml")
    # with the prior the MAP exists and is finite
    fit = fit_batch(data, "bt", _P(0.0, 1.0))
    assert fit.converged and fit.mu[0] > fit.mu[1]


def test_ml_refuses_items_never_compared():
    data = Rankings.from_lists([["a", "b"], ["b", "a"]], ["w", "w"], items=["a", "b", "z"],
                               source="toy.csv")
    with pytest.raises(DataError, match="never are.*'z'"):
        fit_batch(data, "bt", method="ml")


def test_laplace_covariance(kary):
    fit = fit_batch(kary, "pl", _P(0.0, 1.0))
    problem = problem_for(kary, "pl", "map", 0.0, 1.0)
    Hfd = np.stack([_fd_grad(lambda x: problem.grad(x)[i], fit.mu)
                    for i in range(len(fit.mu))])
    np.testing.assert_allclose(fit.cov, np.linalg.inv(-Hfd), rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(fit.sigma2, np.diag(fit.cov))
    # ML under Σλ = 0: the Moore–Penrose pseudo-inverse, rows summing to zero
    ml = fit_batch(kary, "pl", method="ml")
    pml = problem_for(kary, "pl", "ml")
    np.testing.assert_allclose(ml.cov, np.linalg.pinv(-pml.hess(ml.mu)), atol=1e-9)
    np.testing.assert_allclose(ml.cov.sum(axis=1), 0.0, atol=1e-9)
    assert laplace.covariance(pml, ml.mu).shape == (kary.n_items,) * 2


def test_prior_only_item_sits_at_the_prior_mean():
    data = Rankings.from_lists([["a", "b"], ["b", "a"], ["a", "b"]], ["w"] * 3,
                               items=["a", "b", "z"])
    for s in solvers.SOLVERS:
        fit = fit_batch(data, "bt", _P(0.7, 1.0), solver=s, tol=1e-10)
        assert fit.mu[2] == pytest.approx(0.7, abs=1e-9)
        assert fit.sigma2[2] == pytest.approx(1.0, abs=1e-9)

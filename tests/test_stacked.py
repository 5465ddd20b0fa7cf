"""The stacked Newton-CG of the bootstrap (inference.batch.stacked): its Hessian products
and gradients against the dense formulas of inference.batch.luce (themselves checked by
finite differences in test_batch.py), its optimum against the dense damped Newton solver
row by row, each row's answer independent of the rows stacked with it, and the lazy
Newton fallback against the same solver."""

from __future__ import annotations

import numpy as np
import pytest

from crowdrank.inference.batch import bootstrap as boot
from crowdrank.inference.batch import luce, stacked
from crowdrank.inference.batch.solvers import Problem, solve
from crowdrank.models.simulate import simulate


@pytest.fixture(scope="module", params=["pl", "bt"])
def st(request):
    """PL stages with 2..4 candidates (the generic path, padded) or BT pairs (the
    two-candidate path)."""
    data = simulate("pl", n_items=12, n_workers=4, tasks_per_worker=40, kmax=4,
                    seed=11).rankings
    return luce.compress(luce.stages(data, request.param))[0]


def _weights(st, rows, seed):
    return np.random.default_rng(seed).poisson(1.0, size=(rows, st.n_units)).astype(float)


def test_hessian_products_and_gradient_match_the_dense_formulas(st):
    prior = luce.Prior(0.3, 1.5)
    P = stacked.Stacked(st, prior)
    rng = np.random.default_rng(0)
    w = _weights(st, 3, 1)
    lam = rng.normal(size=(3, st.n_items))
    v = rng.normal(size=(3, st.n_items))
    logp, p = P.probs(lam)
    op, diag = P.hess_op(w, p)
    for i in range(3):
        A = luce.objective_neg_hessian(st, lam[i], prior, w[i])
        np.testing.assert_allclose(op(v)[i], A @ v[i], atol=1e-10)
        np.testing.assert_allclose(diag[i], np.diag(A), atol=1e-10)
        np.testing.assert_allclose(P.gradient(lam, w, p)[i],
                                   luce.objective_gradient(st, lam[i], prior, w[i]), atol=1e-10)
        assert P.objective(lam, w, logp)[i] == pytest.approx(
            luce.objective(st, lam[i], prior, w[i]), rel=1e-12)


def test_stacked_optimum_equals_the_dense_newton_solver(st):
    prior = luce.Prior(0.0, 1.0)
    w = _weights(st, 6, 2)
    lam, ok, _ = stacked.solve_stacked(st, prior, w, np.zeros(st.n_items), tol=1e-9)
    assert ok.all()
    for i in range(6):
        ref = solve(Problem(st, prior, w[i]), "newton", tol=1e-11).lam
        np.testing.assert_allclose(lam[i], ref, atol=1e-8)


def test_a_row_does_not_depend_on_its_stack(st):
    prior = luce.Prior(0.0, 1.0)
    w = _weights(st, 5, 3)
    start = np.random.default_rng(4).normal(size=st.n_items)
    together = stacked.solve_stacked(st, prior, w, start)[0]
    for i in range(5):
        alone = stacked.solve_stacked(st, prior, w[i:i + 1], start)[0][0]
        np.testing.assert_array_equal(alone, together[i])


def test_lazy_newton_reaches_the_damped_newton_optimum(st):
    for prior in (luce.Prior(0.0, 1.0), None):
        w = np.ones(st.n_units) + _weights(st, 1, 5)[0]
        res = boot.lazy_newton(Problem(st, prior, w), np.zeros(st.n_items), 1e-10)
        ref = solve(Problem(st, prior, w), "newton", tol=1e-11).lam
        assert res.converged
        np.testing.assert_allclose(res.lam, ref, atol=1e-8)


def test_ml_is_refused():
    data = simulate("bt", n_items=5, n_workers=2, tasks_per_worker=10, seed=1).rankings
    small = luce.compress(luce.stages(data, "bt"))[0]
    with pytest.raises(ValueError, match="prior"):
        stacked.solve_stacked(small, None, np.ones((1, small.n_units)), np.zeros(5))


@pytest.mark.parametrize("model", ["pl", "bt"])
def test_bootstrap_draws_equal_fits_on_materialised_resamples(model):
    """The bootstrap end to end (stacked path, compressed stages) against brute force:
    resample ``b``'s draw equals the fit on the data with each input ranking repeated by
    its multinomial count, and its percentile interval equals numpy's percentiles of those
    fits."""
    from crowdrank.inference.batch import fit_batch
    from crowdrank.inference.batch.api import problem_for

    data = simulate("pl", n_items=7, n_workers=3, tasks_per_worker=25, kmax=3,
                    seed=31).rankings
    problem = problem_for(data, model, "map", 0.0, 1.0)
    lam = fit_batch(data, model, tol=1e-11, laplace_cov=False).mu
    b = boot.bootstrap(problem, lam, 12, seed=4, progress=False, tol=1e-10)
    children = np.random.SeedSequence(4).spawn(12)

    class P:
        mu0, sigma0 = 0.0, 1.0

    brute = []
    for child in children:
        w = boot.resample_weights(problem.stages.n_units, child).astype(int)
        idx = np.repeat(np.arange(data.n_rankings), w)
        brute.append(fit_batch(data.subset(idx), model, P(), tol=1e-11,
                               laplace_cov=False).mu)
    brute = np.array(brute)
    np.testing.assert_allclose(b.draws, brute, atol=1e-8)
    lo, hi = b.score_interval(0.9)
    np.testing.assert_allclose(lo, np.percentile(brute, 5, axis=0), atol=1e-8)
    np.testing.assert_allclose(hi, np.percentile(brute, 95, axis=0), atol=1e-8)

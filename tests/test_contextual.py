"""Contextual BT (inference.batch.contextual): the p = 0 reduction to BT (choix), the MAP
against a general-purpose optimiser, and recovery of simulated parameters."""

from __future__ import annotations

import numpy as np
import pytest

from crowdrank.inference.batch import contextual as cx


def test_without_covariates_it_is_bradley_terry():
    choix = pytest.importorskip("choix")
    win, lose, _x, _, _ = cx.simulate_contextual(6, 300, 1, seed=1)
    fit = cx.fit_contextual(win, lose, np.zeros((len(win), 0)), 6, sigma0=1.5)
    ref = choix.opt_pairwise(6, list(zip(win.tolist(), lose.tolist())),
                             alpha=1 / (2 * 1.5**2), method="BFGS", tol=1e-12)
    np.testing.assert_allclose(fit.lam, ref, atol=1e-6)


def test_map_matches_lbfgs_on_the_same_posterior():
    from scipy.optimize import minimize
    from scipy.special import expit, log_expit

    win, lose, X, _, _ = cx.simulate_contextual(5, 400, 2, seed=2)
    fit = cx.fit_contextual(win, lose, X, 5, mu0=0.3, sigma0=1.2, tau=0.7)
    assert fit.converged

    def unpack(th):
        return th[:5], th[5:].reshape(5, 2)

    def negf(th):     # written from the model, not from the design matrix
        lam, gam = unpack(th)
        d = lam[win] - lam[lose] + np.einsum("sk,sk->s", X, gam[win] - gam[lose])
        return -(np.sum(log_expit(d)) - np.sum((lam - 0.3) ** 2) / (2 * 1.2**2)
                 - np.sum(gam**2) / (2 * 0.7**2))

    def negg(th):
        lam, gam = unpack(th)
        d = lam[win] - lam[lose] + np.einsum("sk,sk->s", X, gam[win] - gam[lose])
        r = expit(-d)
        gl = np.bincount(win, r, 5) - np.bincount(lose, r, 5) - (lam - 0.3) / 1.2**2
        gg = np.zeros((5, 2))
        np.add.at(gg, win, r[:, None] * X)
        np.add.at(gg, lose, -r[:, None] * X)
        gg -= gam / 0.7**2
        return -np.concatenate([gl, gg.reshape(-1)])

    res = minimize(negf, np.zeros(15), jac=negg, method="L-BFGS-B",
                   options={"ftol": 1e-15, "gtol": 1e-10, "maxiter": 10_000})
    np.testing.assert_allclose(fit.lam, res.x[:5], atol=1e-5)
    np.testing.assert_allclose(fit.gamma.reshape(-1), res.x[5:], atol=1e-5)


def test_recovers_simulated_parameters():
    """Many comparisons of few items: the truth lies within 4 Laplace sds of the MAP
    (scores up to the common shift, which the data do not see: compare differences)."""
    win, lose, X, lam, gam = cx.simulate_contextual(5, 8000, 1, seed=3)
    fit = cx.fit_contextual(win, lose, X, 5, sigma0=3.0, tau=3.0)
    sl, sg = fit.sd()
    d_est, d_true = fit.lam - fit.lam[0], lam - lam[0]
    g_est, g_true = fit.gamma - fit.gamma[0], gam - gam[0]
    assert np.all(np.abs(d_est - d_true)[1:] < 4 * np.sqrt(2) * sl[1:])
    assert np.all(np.abs(g_est - g_true)[1:] < 4 * np.sqrt(2) * sg[1:])
    assert np.corrcoef(fit.gamma[:, 0], gam[:, 0])[0, 1] > 0.9

"""The joint worker factor of ``ep-exact workers=joint`` (inference.online.ep_joint).

Oracles, none of them the code under test: importance sampling from the Dirichlet prior
(seeded, large, its standard error from batch means) of one worker's η posterior given
point-mass scores, and of the product of the rankings' score-integrated likelihoods under
Gaussian scores (each ranking its own score draw: the product of expectations (J1) is an
expectation over independent copies); the exact posterior of tiny data by importance
sampling (tests/test_ep_exact.py's helper).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import softmax

from crowdrank.inference import methods
from crowdrank.inference.online import ep_exact as X
from crowdrank.inference.online import ep_joint as J
from crowdrank.models.data import Rankings
from crowdrank.models.errors import UsageError
from crowdrank.models.priors import build_priors
from crowdrank.models.registry import get as get_model


def _like(lam, eta, order):
    """One ranking's COUPLE likelihood ``Π_s Σ_t η̄_t softmax_t`` ([Pan18], Eq. 3-4) at
    draws ``lam`` ``(S, L)``, ``eta`` ``(S, K)``."""
    k = len(order)
    out = np.ones(eta.shape[0])
    for s in range(k - 1):
        p = softmax(lam[:, order[s:]], axis=1)
        e = eta[:, :k - s] / eta[:, :k - s].sum(1, keepdims=True)
        out *= (p * e).sum(1)
    return out


def _oracle(a0, mu, sd, rankings, draws=200_000, batches=10, seed=0):
    """E[η], E[η²] of Dir(a0) Π_n E_λ[like_n] by importance sampling; batch means, ses."""
    rng = np.random.default_rng(seed)
    est = []
    for _ in range(batches):
        eta = rng.dirichlet(a0, draws)
        logw = np.zeros(draws)
        for r in rankings:
            lam = mu + sd * rng.standard_normal((draws, len(mu)))
            logw += np.log(_like(lam, eta, r))
        w = np.exp(logw - logw.max())
        w /= w.sum()
        est.append(np.concatenate([w @ eta, w @ eta ** 2]))
    est = np.array(est)
    return est.mean(0), est.std(0, ddof=1) / np.sqrt(batches)


RANKINGS = [[0, 1, 2, 3], [3, 2, 1, 0], [1, 3, 0, 2], [2, 3], [0, 2, 1], [3, 1, 0, 2]]


@pytest.mark.parametrize("a0", [[1.2, 0.5, 0.3, 0.2], [0.9, 0.05, 0.05, 0.01]])
@pytest.mark.parametrize("sd", [0.0, 0.8])
def test_worker_factor_against_importance_sampling(a0, sd):
    """(J1) for one worker, K = 4, rankings of 2-4 items, with point-mass (sd 0) and
    Gaussian scores, against importance sampling; the second prior's spikes at the faces
    (a_t ≪ 1) are the medium data's."""
    a0 = np.array(a0)
    mu = np.array([1.0, 0.2, -0.5, -1.5])
    s2 = np.full(4, sd ** 2)
    M_by_k = {}
    for k in (2, 3, 4):
        rows = np.array([r for r in RANKINGS if len(r) == k])
        M_by_k[k] = J.ranking_moments(mu, s2, rows, "plugin" if sd == 0 else "gh")
    E1, E2 = J.worker_moments(a0, M_by_k)
    mean, se = _oracle(a0, mu, sd, RANKINGS)
    got = np.concatenate([E1, E2])
    assert np.all(np.abs(got - mean) < 5 * se + 2e-3), (got, mean, se)


def test_gh_and_plugin_agree_at_zero_variance():
    rows = np.array([r for r in RANKINGS if len(r) == 4])
    mu = np.array([1.0, 0.2, -0.5, -1.5])
    np.testing.assert_allclose(J.ranking_moments(mu, np.zeros(4), rows, "gh"),
                               J.ranking_moments(mu, np.zeros(4), rows, "plugin"), rtol=1e-12)


@pytest.mark.parametrize("sd", [0.7, 100.0])
def test_numba_score_integrals_equal_the_specification(sd):
    """ep_joint_kernel's Gauss–Hermite walk against the readable (N, n^k, k) arrays, for
    every ranking length; sd 100 spreads a ranking's λ nodes over ±330, so some stages'
    exponentials shifted by the ranking's top underflow and take their own shift."""
    rng = np.random.default_rng(2)
    mu, s2 = rng.normal(0, 1, 7), np.full(7, sd ** 2) * rng.uniform(0.5, 1.5, 7)
    for k in (2, 3, 4):
        items = np.array([rng.permutation(7)[:k] for _ in range(9)])
        np.testing.assert_allclose(J.ranking_moments(mu, s2, items),
                                   J.ranking_moments(mu, s2, items, python=True),
                                   rtol=1e-10, atol=1e-300)


@pytest.mark.parametrize("a0", [[1.2, 0.5, 0.3, 0.2], [0.9, 0.05, 0.05, 0.01]])
def test_numba_log_likelihood_equals_the_specification(a0):
    """The blocked product-then-log accumulation against ``Σ_n log(M W)`` on the coarse
    and a refined grid (rankings of 2-4 items; 300 of length 4, whose product of factors
    would underflow unflushed), and the two-stage moments of (J1) built on each."""
    rng = np.random.default_rng(3)
    a0 = np.array(a0)
    mu, s2 = rng.normal(0, 1, 6), rng.uniform(0.1, 0.5, 6)
    M_by_k = {k: J.ranking_moments(mu, s2, np.array([rng.permutation(6)[:k]
                                                      for _ in range(n)]))
              for k, n in ((2, 5), (3, 7), (4, 300))}
    edges = [np.union1d(J.COARSE, np.linspace(-3, 2, 9))] * 3
    eta, _, _ = J.simplex_grid(a0, edges)
    for k, M in M_by_k.items():
        lp = np.zeros(len(eta))
        J.add_log_likelihood(eta, M, lp, J.FLOOR)
        np.testing.assert_allclose(lp, J.log_likelihood_python(eta, M, k), rtol=1e-12)
    fast, slow = J.worker_moments(a0, M_by_k), J.worker_moments(a0, M_by_k, python=True)
    np.testing.assert_allclose(fast, slow, rtol=1e-10)


def test_stick_rule_weights_are_the_prior_masses():
    """The cell masses sum to one and reproduce the Beta's mean to the cells' resolution."""
    u, w = J.stick_rule(0.9, 0.01, J.COARSE)
    assert abs(w.sum() - 1.0) < 1e-12
    assert abs(w @ u - 0.9 / 0.91) < 5e-3


def test_tiny_fit_close_to_the_exact_posterior():
    """The tiny data of tests/test_ep_exact.py against the exact posterior: held to the
    bound ep-exact's sites are (E[η] within 0.07); measured 0.055 here (ep-exact's sites
    0.049): with three rankings a worker, the joint factor gains nothing."""
    from test_ep_exact import _exact_posterior

    d = Rankings.from_lists(
        [["a", "b", "c"], ["a", "c", "b"], ["b", "a"], ["c", "b", "a"], ["c", "a"],
         ["b", "c", "a"]], ["u", "u", "u", "v", "v", "v"], items=["a", "b", "c"])
    pri = get_model("couple").worker_priors(build_priors(d), d)
    post0 = X.ep_exact_init(d, "couple", pri).post
    mean, _ = _exact_posterior(d, post0)
    post = X.fit_ep_exact(d, "couple", pri, passes=50, tol=1e-8, workers="joint", sweeps=4)
    eta = post.alpha / post.alpha.sum(1, keepdims=True)
    err = np.max(np.abs(eta.ravel() - mean[6:]))
    assert err < ETA_MAX, (eta, mean[6:])
    z = (post.mu - post.mu.mean() - mean[:3]) / mean[3:6]
    assert np.max(np.abs(z)) < 0.6, z


ETA_MAX = 0.07


def test_joint_is_couple_only_and_refuses_long_rankings():
    d = Rankings.from_lists([["a", "b", "c", "d", "e"]], ["w"], items=list("abcde"))
    pri = get_model("couple").worker_priors(build_priors(d), d)
    with pytest.raises(UsageError, match="at most 4"):
        X.fit_ep_exact(d, "couple", pri, workers="joint")
    with pytest.raises(UsageError, match="workers must be"):
        X.fit_ep_exact(d, "crowdbt", pri, workers="joint")


def test_registry_entry_runs_the_joint_workers():
    d = Rankings.from_lists([["a", "b", "c"], ["c", "a", "b"], ["b", "c"]], ["u", "u", "v"],
                            items=["a", "b", "c"])
    pri = get_model("couple").worker_priors(build_priors(d), d)
    m = methods.get("ep-exact")
    post = m.run(d, "couple", pri, m.options(workers="joint", sweeps=1, lam="plugin",
                                              passes=3))
    assert post.method == "ep-exact"
    assert post.options["ep"]["workers"] == "joint" and post.options["ep"]["lam"] == "plugin"
    assert np.all(np.isfinite(post.mu)) and np.all(post.alpha > 0)

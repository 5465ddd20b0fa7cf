"""The worker-prior families (``crowdrank.models.families``) against independent oracles:
SciPy's Dirichlet and Beta moments, the registry's models, and the priors' own tables."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from crowdrank.models.errors import UsageError
from crowdrank.models.families import BETA, DIRICHLET, FAMILIES, GAMMA, family
from crowdrank.models.priors import Priors
from crowdrank.models.registry import ModelSpec, get, names


def _priors():
    alpha = np.array([[2.0, 1.0, 0.5, 0.01], [5.0, 4.0, 1.0, 0.1]])
    return Priors(("a", "b"), alpha, spec="test", ab=[[5.0, 1.0], [2.0, 3.0]],
                  gamma=[[10.0, 10.0], [4.0, 2.0]])


def test_registry_holds_family_objects_and_accepts_names():
    assert get("couple").worker_prior is DIRICHLET
    assert get("crowdbt").worker_prior is BETA
    assert get("peergrader").worker_prior is GAMMA
    assert get("pl").worker_prior is None
    assert set(names(worker_prior=BETA)) == {"crowdbt"}
    spec = ModelSpec(name="toy", title="toy", worker_prior="beta", pairwise=True,
                     exact_simulator=True, reference="bt_loglik")
    assert spec.worker_prior is BETA and spec.eta_scalar and spec.prior_K(5) == 2
    assert family(None) is None and family(GAMMA) is GAMMA
    with pytest.raises(UsageError, match="unknown worker prior family"):
        family("wishart")
    assert tuple(FAMILIES) == ("dirichlet", "beta", "gamma")
    # compared by identity; a name comparison is answered by name
    assert BETA != DIRICHLET and BETA == family("beta") and BETA == "beta" and BETA != "gamma"
    assert str(GAMMA) == "gamma" and len({DIRICHLET, BETA, GAMMA}) == 3
    # one object per family, also after pickling (specs sent to worker processes)
    import copy
    import pickle

    assert pickle.loads(pickle.dumps(get("couple"))).worker_prior is DIRICHLET
    assert copy.deepcopy(BETA) is BETA


def test_tables_read_the_priors_each_family_needs():
    pr = _priors()
    np.testing.assert_array_equal(DIRICHLET.table(pr, 3), pr.alpha[:, :3])
    np.testing.assert_array_equal(BETA.table(pr, 4), [[5.0, 1.0], [2.0, 3.0]])
    np.testing.assert_array_equal(GAMMA.table(pr), [[10.0, 10.0], [4.0, 2.0]])
    assert (DIRICHLET.prior_K(4), BETA.prior_K(4), GAMMA.prior_K(4)) == (4, 2, 2)
    assert not DIRICHLET.scalar and BETA.scalar and GAMMA.scalar
    assert DIRICHLET.simplex_coordinates and BETA.simplex_coordinates
    assert not GAMMA.simplex_coordinates


def test_exact_draws_match_the_known_moments():
    # the Marsaglia–Tsang draw against SciPy's Dirichlet mean and variance (tiny α included)
    rng = np.random.default_rng(0)
    alpha = np.array([2.0, 1.0, 0.5, 0.05])
    n = 40_000
    eta = DIRICHLET.draw(rng, np.tile(alpha, (n, 1)))
    se = np.sqrt(stats.dirichlet.var(alpha) / n)
    assert np.all(np.abs(eta.mean(0) - stats.dirichlet.mean(alpha)) < 5 * se)
    acc = BETA.draw(rng, np.tile([2.0, 3.0], (n, 1)))
    assert abs(acc.mean() - 0.4) < 5 * stats.beta(2, 3).std() / np.sqrt(n)
    np.testing.assert_allclose(BETA.simulator_eta(acc[:3], 4).sum(1), 1.0)


def test_marginals_and_simplexes():
    table = np.array([[2.0, 1.0, 0.5], [1.0, 1.0, 3.0]])
    a, b = DIRICHLET.beta_marginals(table)
    # η_t ~ Beta(α_t, Σα − α_t): its mean is SciPy's Dirichlet mean
    for w in range(2):
        np.testing.assert_allclose((a / (a + b)).reshape(2, 3)[w], stats.dirichlet.mean(table[w]))
    a, b = BETA.beta_marginals(np.array([[5.0, 1.0]]))
    assert (a[0], b[0]) == (5.0, 1.0)
    eta = np.array([[0.2, 0.9]])
    np.testing.assert_allclose(BETA.as_simplex(eta), [[[0.2, 0.8], [0.9, 0.1]]])
    assert GAMMA.as_simplex(eta) is None
    x = np.arange(2 * 3 * 2 * 4.0).reshape(2, 3, 2, 4)
    assert DIRICHLET.flatten(x).shape == (2, 3, 8)
    np.testing.assert_array_equal(DIRICHLET.flatten(x)[1, 2], x[1, 2].ravel())


def test_log_tables_and_point_values():
    eta = np.array([0.3, 0.999])
    np.testing.assert_allclose(BETA.log_table(eta, np, np.log),
                               np.log([[0.3, 0.7], [0.999, 0.001]]), rtol=1e-9)
    np.testing.assert_allclose(GAMMA.point_log_eta(np.array([[10.0, 5.0]])), [np.log(2.0)])
    np.testing.assert_allclose(DIRICHLET.point_log_eta(np.array([[1.0, 3.0]])),
                               np.log([[0.25, 0.75]]))
    assert DIRICHLET.direct_values(np.log([[0.5, 0.5]]), "gamma") is None
    np.testing.assert_allclose(BETA.direct_values(np.log([[0.5, 0.5]]), "dirichlet")["eta"],
                               [0.5])
    with pytest.raises(UsageError, match="COUPLE must be"):
        DIRICHLET.check_init(np.ones((2, 2)), 2, 3)
    np.testing.assert_allclose(BETA.check_init(np.array([[3.0, 1.0]]), 1, 2), [0.75])


def test_start_from_an_online_factor_is_its_mean():
    eta, ab = BETA.start_from_factor([np.array([3.0, 1.0, 9.0]), np.array([1.0, 4.0])], 4)
    np.testing.assert_allclose(eta, [stats.beta(3, 1).mean(), stats.beta(1, 4).mean()])
    np.testing.assert_array_equal(ab, [[3.0, 1.0], [1.0, 4.0]])
    eta, a = DIRICHLET.start_from_factor([np.array([2.0, 1.0, 1.0, 7.0])], 3)
    np.testing.assert_allclose(eta[0], stats.dirichlet.mean([2.0, 1.0, 1.0]))
    np.testing.assert_array_equal(a, [[2.0, 1.0, 1.0]])
    with pytest.raises(ValueError, match="need 3 alpha values"):
        DIRICHLET.start_from_factor([np.array([2.0, 1.0])], 3)
    with pytest.raises(ValueError, match="finite and > 0"):
        DIRICHLET.start_from_factor([np.array([2.0, 0.0, 1.0])], 3)
    assert DIRICHLET.online_factor and BETA.online_factor and not GAMMA.online_factor


def test_moment_matching_recovers_known_parameters():
    # draws of known Beta and Dirichlet factors: the matched tables are the parameters
    rng = np.random.default_rng(4)
    ab = np.array([[3.0, 1.5], [0.8, 2.0]])
    draws = np.stack([rng.beta(a, b, 200_000) for a, b in ab], axis=1)
    np.testing.assert_allclose(BETA.moment_match(draws), ab, rtol=0.03)
    alpha = np.array([[4.0, 2.0, 1.0], [1.0, 1.0, 6.0]])
    draws = np.stack([rng.dirichlet(a, 200_000) for a in alpha], axis=1)
    np.testing.assert_allclose(DIRICHLET.moment_match(draws), alpha, rtol=0.03)
    with pytest.raises(UsageError):
        GAMMA.moment_match(draws[:, :, 0])

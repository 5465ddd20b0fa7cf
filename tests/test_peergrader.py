"""PeerGrader [Raman14]: the batch MAP estimator against independent computations, and the
CrowdBT ``Beta(a, b)``-for-every-worker prior option ([Pan18], Sect. 5.1).

Oracles: the one-ranking NumPy reference (``models.likelihood.peergrader_loglik``) plus
``scipy.stats`` priors for the log posterior; central differences for its gradient;
``choix.opt_rankings`` (an external Plackett–Luce MAP) for the reduction ``η ≡ 1``; and
recovery of the truth on data simulated here by the Gumbel trick (not by our simulator).
The NumPyro/PyMC densities of the model are checked with the other models in
``tests/test_ppl_models.py`` and ``tests/test_gradients.py`` (they iterate the registry).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from crowdrank.inference.peergrader import fit_peergrader, init, log_posterior
from crowdrank.models.data import Rankings
from crowdrank.models.families import GAMMA
from crowdrank.models.likelihood import loglik
from crowdrank.models.model_inputs import model_inputs
from crowdrank.models.priors import PEERGRADER_GAMMA, Priors, build_priors
from crowdrank.models.registry import get


def gumbel_rankings(lam, eta, tasks_per_worker, k, seed):
    """Rankings drawn from ``PL(η_g·λ)``: sort ``η_g·λ + Gumbel`` (Yellott's theorem)."""
    rng = np.random.default_rng(seed)
    L, W = len(lam), len(eta)
    rows, workers = [], []
    for w in range(W):
        for _ in range(tasks_per_worker):
            sub = rng.choice(L, size=k, replace=False)
            u = eta[w] * lam[sub] + rng.gumbel(size=k)
            rows.append(sub[np.argsort(-u)])
            workers.append(w)
    order = np.array(rows, dtype=np.int32).T
    return Rankings(items=[f"i{r}" for r in range(L)], workers=[f"g{w}" for w in range(W)],
                    order=order, lengths=np.full(len(rows), k), worker=np.array(workers),
                    source="gumbel-test")


@pytest.fixture(scope="module")
def small():
    rng = np.random.default_rng(0)
    lam = rng.normal(size=8)
    eta = rng.uniform(0.3, 2.0, size=4)
    parts = [gumbel_rankings(lam, eta, 6, k, seed=k) for k in (2, 3, 4)]
    order = np.full((4, sum(p.n_rankings for p in parts)), -1, np.int32)
    col, lengths, worker = 0, [], []
    for p in parts:
        order[: p.order.shape[0], col:col + p.n_rankings] = p.order
        col += p.n_rankings
        lengths += list(p.lengths)
        worker += list(p.worker)
    data = Rankings(items=parts[0].items, workers=parts[0].workers, order=order,
                    lengths=np.array(lengths), worker=np.array(worker), source="mixed-k")
    gamma = rng.uniform(1.5, 6.0, size=(data.n_workers, 2))
    priors = Priors(data.workers, np.ones((data.n_workers, data.K)), mu0=0.2, sigma0=1.3,
                    spec="test", gamma=gamma)
    return data, priors


def reference_log_posterior(data, priors, lam, eta):
    g = priors.gamma_params()
    return (loglik("peergrader", data, lam, eta)
            + stats.norm.logpdf(lam, priors.mu0, priors.sigma0).sum()
            + stats.gamma.logpdf(eta, g[:, 0], scale=1.0 / g[:, 1]).sum())


def test_registry_entry():
    spec = get("peergrader")
    assert spec.worker_prior is GAMMA and not spec.pairwise and spec.online is None
    assert spec.prior_K(4) == 2 and spec.has_eta


def test_log_posterior_matches_reference_up_to_a_constant(small):
    data, priors = small
    inputs = model_inputs("peergrader", data, priors)
    rng = np.random.default_rng(1)
    points = [(rng.normal(0, 1.5, data.n_items), rng.gamma(3.0, 0.5, data.n_workers))
              for _ in range(3)]
    ours = [log_posterior(inputs, lam, eta, grad=False) for lam, eta in points]
    ref = [reference_log_posterior(data, priors, lam, eta) for lam, eta in points]
    # the normalising constants of the priors cancel in differences
    np.testing.assert_allclose(np.diff(ours), np.diff(ref), rtol=1e-10, atol=1e-9)


def test_gradient_matches_central_differences(small):
    data, priors = small
    inputs = model_inputs("peergrader", data, priors)
    rng = np.random.default_rng(2)
    lam, eta = rng.normal(0, 1.2, data.n_items), rng.gamma(3.0, 0.5, data.n_workers)
    _, dl, de = log_posterior(inputs, lam, eta)
    h = 1e-6
    for r in range(data.n_items):
        e = np.zeros_like(lam)
        e[r] = h
        fd = (log_posterior(inputs, lam + e, eta, grad=False)
              - log_posterior(inputs, lam - e, eta, grad=False)) / (2 * h)
        assert dl[r] == pytest.approx(fd, rel=1e-6, abs=1e-7)
    for w in range(data.n_workers):
        e = np.zeros_like(eta)
        e[w] = h
        fd = (log_posterior(inputs, lam, eta + e, grad=False)
              - log_posterior(inputs, lam, eta - e, grad=False)) / (2 * h)
        assert de[w] == pytest.approx(fd, rel=1e-6, abs=1e-7)


def test_fixed_unit_reliability_is_plackett_luce_map_as_choix(small):
    """With every ``η_g = 1`` held fixed PeerGrader is PL; its MAP under ``N(0, σ0²)``
    is choix's ``opt_rankings``, whose penalty is ``alpha·Σθ²`` (its code; the docstring's
    "variance 1/alpha" is off by the factor 2), so ``alpha = 1/(2σ0²)``."""
    choix = pytest.importorskip("choix")
    data, _ = small
    pri = Priors(data.workers, np.ones((data.n_workers, 2)), mu0=0.0, sigma0=1.3,
                 gamma=np.full((data.n_workers, 2), 7.0))          # prior mean 1: start η = 1
    fit = fit_peergrader(data, pri, fix_eta=True, tol=1e-14)
    assert np.all(fit.eta == 1.0)
    rankings = [list(map(int, data.ranking(n))) for n in range(data.n_rankings)]
    want = choix.opt_rankings(data.n_items, rankings, alpha=0.5 / 1.3 ** 2, tol=1e-12)
    np.testing.assert_allclose(fit.lam, want, atol=2e-5)


def test_map_is_a_stationary_point_and_beats_its_start(small):
    data, priors = small
    fit = fit_peergrader(data, priors)
    assert fit.converged and fit.passes >= 2
    inputs, lam0, eta0 = init(data, priors)
    _, dl, de = log_posterior(inputs, fit.lam, fit.eta)
    assert np.max(np.abs(dl)) < 1e-4 and np.max(np.abs(de * fit.eta)) < 1e-4
    assert fit.log_posterior > log_posterior(inputs, lam0, eta0, grad=False)


@pytest.mark.slow
def test_recovers_scores_and_finds_the_random_graders():
    rng = np.random.default_rng(3)
    lam = rng.normal(size=25)
    eta = np.full(30, 2.0)
    eta[:5] = 0.02                    # five graders who order (almost) at random
    data = gumbel_rankings(lam, eta, 40, 4, seed=4)
    priors = Priors(data.workers, np.ones((data.n_workers, 2)), spec="test")
    fit = fit_peergrader(data, priors)
    assert stats.spearmanr(fit.lam, lam).statistic > 0.9
    assert set(np.argsort(fit.eta)[:5]) == set(range(5))


def test_default_gamma_prior_and_validation():
    pri = Priors(("a", "b"), np.ones((2, 3)))
    np.testing.assert_array_equal(pri.gamma_params(), [PEERGRADER_GAMMA] * 2)
    with pytest.raises(Exception, match="gamma"):
        Priors(("a", "b"), np.ones((2, 3)), gamma=np.array([[1.0, 0.0], [1.0, 1.0]]))


# ------------------------------------------------------------------ CrowdBT Beta(a, b) option
def test_crowdbt_beta_for_every_worker(small):
    data, _ = small
    geo = Priors.geometric(data.workers, data.K)
    pri = geo.with_crowdbt_beta(5, 1)
    np.testing.assert_array_equal(pri.beta(), np.tile([5.0, 1.0], (data.n_workers, 1)))
    np.testing.assert_array_equal(pri.alpha, geo.alpha)       # COUPLE's prior unchanged
    assert "crowdbt=beta:5,1" in pri.spec
    # the models read it: the NUTS inputs and the online start
    assert np.all(model_inputs("crowdbt", data, pri).alpha == [5.0, 1.0])
    from crowdrank.inference.online.state import OnlinePosterior
    post = OnlinePosterior.from_priors("crowdbt", data.items, pri.for_data(data, K=2),
                                       workers=data.workers, K=2)
    np.testing.assert_array_equal(post.alpha[:, :2], np.tile([5.0, 1.0], (data.n_workers, 1)))
    # without it CrowdBT reads the first two geometric entries (10/6, 10/36)
    np.testing.assert_allclose(geo.beta()[0], [10 / 6, 10 / 36])
    built = build_priors(data, crowdbt_beta=(5.0, 1.0))
    np.testing.assert_array_equal(built.beta()[0], [5.0, 1.0])
    with pytest.raises(Exception, match="Beta"):
        geo.with_crowdbt_beta(0, 1)

"""Facts about the reference likelihoods (docs/design.md, Models), checked independently."""

from itertools import permutations

import numpy as np
import pytest
from scipy.special import expit

from crowdrank.models import likelihood as L
from crowdrank.models.data import Rankings


def rng_params(seed, n_items=6, K=4):
    rng = np.random.default_rng(seed)
    return rng.normal(size=n_items), rng.dirichlet(np.ones(K))


def test_pl_sums_to_one_over_orderings():
    lam, _ = rng_params(0)
    for k in (2, 3, 4):
        total = sum(np.exp(L.pl_loglik(lam, np.array(o))) for o in permutations(range(k)))
        assert total == pytest.approx(1.0, abs=1e-12)


def test_pl_matches_explicit_product():
    lam = np.array([0.3, -1.0, 2.0])
    e = np.exp(lam)
    # 2 > 0 > 1: e2/(e0+e1+e2) * e0/(e0+e1)
    want = np.log(e[2] / e.sum() * e[0] / (e[0] + e[1]))
    assert L.pl_loglik(lam, np.array([2, 0, 1])) == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("seed", range(5))
def test_couple_with_k2_is_crowdbt(seed):
    lam, eta = rng_params(seed, K=2)
    r = np.array([3, 1])
    # CrowdBT written out by hand: eta sigma(d) + (1-eta) sigma(-d)
    d = lam[3] - lam[1]
    want = np.log(eta[0] * expit(d) + eta[1] * expit(-d))
    assert L.couple_loglik(lam, eta, r) == pytest.approx(want, rel=1e-12)
    assert L.crowdbt_loglik(lam, eta[0], r) == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("k", [2, 3, 4, 5])
def test_couple_with_eta_e1_is_pl(k):
    lam, _ = rng_params(k, n_items=6)
    eta = np.zeros(6)
    eta[0] = 1.0
    r = np.random.default_rng(k).permutation(6)[:k]
    assert L.couple_loglik(lam, eta, r) == pytest.approx(L.pl_loglik(lam, r), rel=1e-12)


def test_couple_normalizer_differs_from_one_for_k_at_least_3():
    zs = {}
    for k in (2, 3, 4):
        zs[k] = [L.couple_normalizer(*rng_params(s, n_items=6, K=4), np.arange(k))
                 for s in range(20)]
    np.testing.assert_allclose(zs[2], 1.0, atol=1e-12)
    for k in (3, 4):
        dev = np.abs(np.array(zs[k]) - 1.0)
        assert dev.max() > 0.02, f"k={k}: normaliser unexpectedly ~1"


def test_normalized_couple_sums_to_one():
    lam, eta = rng_params(7, K=4)
    for k in (3, 4):
        tot = sum(np.exp(L.couple_normalized_loglik(lam, eta, np.array(o)))
                  for o in permutations(range(k)))
        assert tot == pytest.approx(1.0, abs=1e-12)


def test_bt_is_sum_of_pair_logits():
    lam, _ = rng_params(3)
    r = np.array([2, 0, 5])
    want = sum(np.log(expit(lam[a] - lam[b])) for a, b in [(2, 0), (2, 5), (0, 5)])
    assert L.bt_loglik(lam, r) == pytest.approx(want, rel=1e-12)
    assert L.bt_loglik(lam, r[:2]) == pytest.approx(L.pl_loglik(lam, r[:2]), rel=1e-12)


def test_pointwise_over_a_dataset_uses_each_workers_eta():
    d = Rankings.from_lists([["a", "b", "c"], ["b", "a"]], ["u", "v"])
    lam = np.array([0.1, 0.5, -0.2])
    eta = np.array([[0.7, 0.2, 0.1], [0.1, 0.6, 0.3]])
    pw = L.loglik_pointwise("couple", d, lam, eta)
    assert pw[0] == pytest.approx(L.couple_loglik(lam, eta[0], np.array([0, 1, 2])))
    assert pw[1] == pytest.approx(L.couple_loglik(lam, eta[1], np.array([1, 0])))
    assert L.loglik("couple", d, lam, eta) == pytest.approx(pw.sum())
    pw_c = L.loglik_pointwise("crowdbt", d, lam, eta[:, 0])
    assert pw_c[1] == pytest.approx(L.crowdbt_loglik(lam, 0.1, np.array([1, 0])))
    with pytest.raises(ValueError, match="unknown model"):
        L.loglik_pointwise("nope", d, lam)


def test_stable_mixture_equals_direct():
    lam, eta = rng_params(11, n_items=4, K=4)
    c = np.array([3, 0, 2])
    from scipy.special import log_softmax
    eb = eta[:3] / eta[:3].sum()
    assert L.stage_log_mixture(log_softmax(lam[c]), np.log(eb)) == pytest.approx(
        np.log(L.couple_stage_prob(lam, eta, c)), rel=1e-12)


def test_eq4_over_all_orderings_matches_the_single_ranking_reference():
    """The vectorised sum over the k! orderings (shared by the exact sampler and the story)
    against couple_loglik ranking by ranking, and its sum against couple_normalizer."""
    from itertools import permutations

    from crowdrank.models.likelihood import couple_loglik, couple_normalizer, eq4_all_orderings

    rng = np.random.default_rng(3)
    for k in (2, 3, 4):
        lam = rng.normal(size=(5, k))
        eta = rng.dirichlet(np.ones(k + 1), size=5)
        perms, logp = eq4_all_orderings(lam, eta)
        assert perms.shape == (len(list(permutations(range(k)))), k)
        assert (perms[0] == np.arange(k)).all()
        for j in range(5):
            for p, perm in enumerate(perms):
                want = couple_loglik(lam[j], eta[j], np.asarray(perm))
                assert logp[j, p] == pytest.approx(want, rel=1e-12, abs=1e-12)
            assert np.exp(logp[j]).sum() == pytest.approx(
                couple_normalizer(lam[j], eta[j], np.arange(k)), rel=1e-12)

"""The forward simulators against the reference likelihoods (chi-square tests that can fail)."""

from itertools import permutations

import numpy as np
import pytest
from scipy import stats

from crowdrank.models import likelihood as L
from crowdrank.models.simulate import WORKER_TYPES, simulate, simulate_paper_scale, worker_alpha0


def ordering_counts(sim):
    perms = list(permutations(range(sim.rankings.K)))
    index = {p: j for j, p in enumerate(perms)}
    counts = np.zeros(len(perms))
    for r in sim.rankings.as_lists():
        counts[index[tuple(r)]] += 1
    return perms, counts


def chi2_p(counts, probs):
    return stats.chisquare(counts, counts.sum() * np.asarray(probs)).pvalue


LAM = np.array([0.8, 0.0, -0.5, 0.3])
ETA = np.array([[0.5, 0.3, 0.15, 0.05]])


@pytest.mark.parametrize("k", [3, 4])
def test_exact_sampler_matches_normalized_couple(k):
    sim = simulate("couple-normalized", n_items=k, n_workers=1, tasks_per_worker=30000,
                   kmin=k, kmax=k, lam=LAM[:k], eta=ETA[:, :k], seed=1)
    perms, counts = ordering_counts(sim)
    probs = [np.exp(L.couple_normalized_loglik(LAM[:k], ETA[0, :k], np.array(p)))
             for p in perms]
    assert chi2_p(counts, probs) > 1e-3
    # the same counts are clearly *not* Plackett-Luce: the test has power
    pl = [np.exp(L.pl_loglik(LAM[:k], np.array(p))) for p in perms]
    assert chi2_p(counts, pl) < 1e-6


def test_pl_simulator_matches_pl_probabilities():
    sim = simulate("pl", n_items=3, n_workers=1, tasks_per_worker=20000, kmin=3, kmax=3,
                   lam=LAM[:3], seed=2)
    perms, counts = ordering_counts(sim)
    assert chi2_p(counts, [np.exp(L.pl_loglik(LAM[:3], np.array(p))) for p in perms]) > 1e-3


@pytest.mark.parametrize("model", ["crowdbt", "couple"])
def test_pairwise_story_is_crowdbt(model):
    eta = np.array([[0.7, 0.3]])
    sim = simulate(model, n_items=2, n_workers=1, tasks_per_worker=20000, kmax=2,
                   lam=LAM[:2], eta=eta, seed=3)
    perms, counts = ordering_counts(sim)
    probs = [np.exp(L.crowdbt_loglik(LAM[:2], 0.7, np.array(p))) for p in perms]
    assert chi2_p(counts, probs) > 1e-3


def test_same_seed_same_data_other_seed_other_data():
    a = simulate("couple", n_items=20, n_workers=5, tasks_per_worker=10, seed=9)
    b = simulate("couple", n_items=20, n_workers=5, tasks_per_worker=10, seed=9)
    c = simulate("couple", n_items=20, n_workers=5, tasks_per_worker=10, seed=10)
    np.testing.assert_array_equal(a.rankings.order, b.rankings.order)
    np.testing.assert_array_equal(a.eta, b.eta)
    assert not np.array_equal(a.rankings.order, c.rankings.order)


def test_protocol_shapes_and_gold():
    s = simulate("couple", n_items=30, n_workers=4, tasks_per_worker=25, kmax=4,
                 setting="expert", gold_per_worker=5, seed=0)
    d = s.rankings
    assert d.n_rankings == 100 and d.n_workers == 4 and set(d.k_counts()) <= {2, 3, 4}
    np.testing.assert_array_equal(d.rankings_per_worker(), 25)
    assert s.gold.n_rankings == 20
    assert s.eta.shape == (4, 4) and np.allclose(s.eta.sum(1), 1)
    # every reported ranking is a permutation of its task's true order
    for n in range(d.n_rankings):
        k = d.lengths[n]
        assert sorted(d.order[:k, n]) == sorted(s.true_order[:k, n])


def test_worker_types_shape_agreement_with_truth():
    """Experts report the true winner far more often than malicious workers (Sect. 5.2)."""
    agree = {}
    for t in WORKER_TYPES:
        s = simulate("couple", n_items=40, n_workers=30, tasks_per_worker=40, setting=t,
                     seed=4)
        agree[t] = np.mean(s.rankings.order[0] == s.true_order[0])
    assert agree["expert"] > agree["amateur"] > agree["spammer"] > agree["malicious"]


def test_bad_arguments():
    with pytest.raises(ValueError, match="pairwise"):
        simulate("crowdbt", kmax=3)
    with pytest.raises(ValueError, match="unknown worker type"):
        worker_alpha0("lazy", 4)
    with pytest.raises(ValueError, match="unknown model"):
        simulate("plackett")


@pytest.mark.slow
def test_paper_scale_preset():
    s = simulate_paper_scale("couple", seed=0)
    assert s.rankings.n_rankings == 450_000 and s.rankings.n_items == 1000
    assert s.rankings.n_workers == 500 and s.rankings.K == 4

"""CrowDC (inference.batch.crowdc): the cost formula against counting the compared pairs,
the paper's pivot example, exact recovery on noiseless data, and the conquer step's
interpolation."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest
from scipy.stats import kendalltau

from inference.batch import crowdc as dc


def test_pivot_orders_paper_example():
    assert (dc.pivot_orders(10, 4) + 1).tolist() == [1, 4, 7, 10]


@pytest.mark.parametrize("n,g,p", [(100, 2, 12), (60, 3, 4), (200, 5, 8)])
def test_cost_counts_the_distinct_pairs_compared(n, g, p):
    rng = np.random.default_rng(0)
    groups = rng.permutation(n).reshape(g, n // g)
    pairs = {frozenset(x) for grp in groups for x in combinations(grp.tolist(), 2)}
    piv = [grp[:p] for grp in groups]                  # any p per group: the count is the same
    pairs |= {frozenset(x) for x in combinations(np.concatenate(piv).tolist(), 2)}
    t = 5
    assert dc.cost(n, g, p, t) == (t * len(pairs), t * n * (n - 1) // 2)


def test_paper_saving_at_the_claimed_setting():
    ours, base = dc.cost(100, 2, 12, 5)
    assert 0.45 <= 1 - ours / base <= 0.50           # the paper's 45-50 %


def test_noiseless_data():
    """Without noise BTL orders every item and CrowDC every item within a group and every
    pivot; across groups non-pivots are only placed by proportion, so overall τ < 1 is
    allowed but it must stay high."""
    rng = np.random.default_rng(1)
    B = dc.simulate_outcomes(40, 3, 1.0, rng)
    assert kendalltau(dc.btl(B, 3), np.arange(40))[0] == pytest.approx(1.0)
    res = dc.crowdc(B, 3, 2, 4, np.random.default_rng(5))
    piv = np.sort(res.pivots)
    assert kendalltau(res.scores[piv], piv)[0] == pytest.approx(1.0)
    groups = np.random.default_rng(5).permutation(40).reshape(2, 20)
    for grp in groups:
        assert kendalltau(res.scores[grp], grp)[0] == pytest.approx(1.0)
    assert kendalltau(res.scores, np.arange(40))[0] > 0.9


def test_bt_scores_match_choix():
    choix = pytest.importorskip("choix")
    rng = np.random.default_rng(2)
    B = dc.simulate_outcomes(8, 4, 0.7, rng)
    data = []
    for a, b in combinations(range(8), 2):
        data += [(b, a)] * int(B[a, b]) + [(a, b)] * int(4 - B[a, b])
    ref = choix.opt_pairwise(8, data, alpha=1 / (2 * dc.SIGMA0**2), method="BFGS", tol=1e-12)
    np.testing.assert_allclose(dc.btl(B, 4), ref, atol=1e-6)


def test_non_pivots_are_interpolated_between_their_pivots():
    rng = np.random.default_rng(3)
    B = dc.simulate_outcomes(30, 5, 0.8, rng)
    res = dc.crowdc(B, 5, 3, 3, np.random.default_rng(4))
    assert len(res.pivots) == 9
    # every final score lies within the range of the out-of-group pivot scores
    assert res.scores.min() >= res.scores[res.pivots].min() - 1e-12
    assert res.scores.max() <= res.scores[res.pivots].max() + 1e-12

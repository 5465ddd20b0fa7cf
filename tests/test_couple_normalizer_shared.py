"""The stage product both PPLs' normalised-COUPLE normalisers share
(``models.couple_normalizer.ordering_stage_product``), run on plain NumPy rows: summed over
the ``k!`` orderings it gives the brute force of ``test_sbc_normalizer`` (plain Python,
log space, one stage at a time). Both back-ends' normalisers call it
(``tests/test_sbc_normalizer.py`` checks them against the same brute force)."""

from __future__ import annotations

import numpy as np
import pytest
from test_sbc_normalizer import _case

from crowdrank.models.couple_normalizer import ordering_stage_product


def _numpy_normalizer(lam, log_eta, index, worker, group):
    k = group.k
    x = lam[index[:k]]
    p = np.exp(x - x.max(axis=0))
    le = log_eta[worker, :k].T
    lc = np.logaddexp.accumulate(log_eta, axis=1)[worker, :k].T
    total = sum(ordering_stage_product([p[j] for j in perm],
                                       lambda m, t: np.exp(le[t] - lc[m - 1]), k)
                for perm in group.perms)
    return np.log(total)


@pytest.mark.parametrize("case", [{"k": 2}, {"k": 3, "tiny": True, "spread": 4.0},
                                  {"k": 4}, {"k": 4, "tiny": True}])
def test_shared_stage_product_matches_brute_force(case):
    lam, log_eta, index, worker, group, want = _case(3, **case)
    np.testing.assert_allclose(_numpy_normalizer(lam, log_eta, index, worker, group), want,
                               rtol=1e-11, atol=1e-11)


def test_shared_stage_product_can_fail():
    """A wrong weight (η_t instead of η_t / Σ_{v<m} η_v) is caught."""
    lam, log_eta, index, worker, group, want = _case(3, k=3)
    k = group.k
    p = np.exp(lam[index[:k]] - lam[index[:k]].max(axis=0))
    le = log_eta[worker, :k].T
    got = np.log(sum(ordering_stage_product([p[j] for j in perm],
                                            lambda m, t: np.exp(le[t]), k)
                     for perm in group.perms))
    assert np.max(np.abs(got - np.asarray(want))) > 1e-3


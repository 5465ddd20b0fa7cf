"""``crowdrank sbc --approx M``: the PIT of the truth under any registered approximation.

Oracle: on one replicate of BT, Laplace's approximation computed by hand — the MAP of the
BT log posterior by SciPy and the inverse of its analytic Hessian — and the PIT
``Φ((θ̃ − μ)/σ)`` of every true score (and centred score) under it.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import optimize, stats

from crowdrank.models.errors import UsageError
from crowdrank.validation.pipelines.sbc import SbcConfig, _finish, _prepare


def _laplace_by_hand(data, mu0, sigma0):
    L = data.n_items
    win, lose = data.order[0], data.order[1]

    def neg(lam):
        d = lam[win] - lam[lose]
        return np.sum(np.logaddexp(0.0, -d)) + np.sum((lam - mu0) ** 2) / (2 * sigma0 ** 2)

    def grad(lam):
        p = 1.0 / (1.0 + np.exp(lam[win] - lam[lose]))     # P(loser beats winner)
        g = (lam - mu0) / sigma0 ** 2
        np.add.at(g, win, -p)
        np.add.at(g, lose, p)
        return g

    res = optimize.minimize(neg, np.zeros(L), jac=grad, method="BFGS",
                            options={"gtol": 1e-10})
    lam = res.x
    p = 1.0 / (1.0 + np.exp(-(lam[win] - lam[lose])))
    H = np.eye(L) / sigma0 ** 2
    for i, j, w in zip(win, lose, p * (1 - p)):
        H[i, i] += w
        H[j, j] += w
        H[i, j] -= w
        H[j, i] -= w
    return lam, np.diag(np.linalg.inv(H))


def test_laplace_pit_equals_hand_computation():
    cfg = SbcConfig(model="bt", approx="laplace", sims=2, n_items=5, n_workers=2,
                    tasks_per_worker=15, chains=2, draws=100, n_ranks=50, seed=4)
    spec = cfg.spec(1)
    assert spec["approx"] == "laplace"
    prep = _prepare(spec)
    flat = np.tile(prep["truth"], (50, 1))        # draws do not matter for the PIT
    out = _finish(prep, flat, {"trusted": True, "reasons": []}, {})
    mu, s2 = _laplace_by_hand(prep["data"], cfg.mu0, cfg.sigma0)
    L = mu.size
    truth = np.asarray(prep["truth"])
    want_raw = stats.norm.cdf(truth[:L], mu, np.sqrt(s2))
    var_c = s2 * (1 - 2 / L) + s2.sum() / L ** 2
    want_c = stats.norm.cdf(truth[L:2 * L], mu - mu.mean(), np.sqrt(var_c))
    got = np.asarray(out["online_pit"])
    np.testing.assert_allclose(got[:L], want_raw, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(got[L:2 * L], want_c, rtol=1e-6, atol=1e-8)
    assert np.ptp(got[:L]) > 0.05                  # not a constant


def test_default_keeps_old_cache_keys_and_bad_choices_refused():
    assert "approx" not in SbcConfig(model="bt").spec(0)
    with pytest.raises(UsageError, match="fits models"):
        SbcConfig(model="bt", approx="em")
    with pytest.raises(UsageError, match="reference"):
        SbcConfig(model="bt", approx="nuts")
    with pytest.raises(UsageError, match="needs data"):
        SbcConfig(model="bt", approx="laplace", backend="prior")

"""Weng–Lin OnlinePL / OnlineBT equal openskill's PlackettLuce / BradleyTerryFull.

Same parameters (``mu = mu0``, ``sigma = sigma0``, ``beta``, ``kappa``, ``gamma``, ``tau``),
same order, one item per team, best first. openskill stores ``σ`` and we store ``σ²``, so
the two differ by rounding only.
"""

from __future__ import annotations

import numpy as np
import pytest

openskill = pytest.importorskip("openskill.models")

from crowdrank.inference.online import fit_online
from crowdrank.models.data import Rankings
from crowdrank.models.priors import Priors


def _random_rankings(seed, n=2500, L=40, kmax=6):
    rng = np.random.default_rng(seed)
    items = [f"it{i}" for i in range(L)]
    ranks = [list(rng.choice(items, size=int(rng.integers(2, kmax + 1)), replace=False))
             for _ in range(n)]
    return Rankings.from_lists(ranks, ["w"] * n, items=items)


def _openskill_pass(model, data):
    ratings = {it: model.rating() for it in data.items}
    for r in data.as_lists(ids=True):
        out = model.rate([[ratings[i]] for i in r])
        for i, team in zip(r, out):
            ratings[i] = team[0]
    mu = np.array([ratings[i].mu for i in data.items])
    s2 = np.array([ratings[i].sigma ** 2 for i in data.items])
    return mu, s2


@pytest.mark.parametrize("name,cls", [("pl", "PlackettLuce"), ("bt", "BradleyTerryFull")])
@pytest.mark.parametrize("params", [
    {"beta": 0.5, "kappa": 1e-4, "tau": 0.0, "gamma": "sigma/c"},     # the defaults, tau = 0
    {"beta": 1.3, "kappa": 0.05, "tau": 0.0, "gamma": "1/k"},
    {"beta": 0.25, "kappa": 1e-4, "tau": 0.02, "gamma": "sigma/c"},
])
def test_weng_lin_equals_openskill(name, cls, params):
    data = _random_rankings(seed=len(name) + int(params["beta"] * 10))
    mu0, sigma0 = 0.3, 1.7
    gamma_fn = {}
    if params["gamma"] == "1/k":
        gamma_fn = {"gamma": lambda c, k, *args: 1.0 / k}
    model = getattr(openskill, cls)(mu=mu0, sigma=sigma0, beta=params["beta"],
                                    kappa=params["kappa"], tau=params["tau"], **gamma_fn)
    mu_os, s2_os = _openskill_pass(model, data)
    pri = Priors.geometric(["w"], 2, mu0=mu0, sigma0=sigma0)
    post = fit_online(data, name, pri, wl_params=params, progress=False)
    assert post.items == list(data.items)
    np.testing.assert_allclose(post.mu, mu_os, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(post.sigma2, s2_os, rtol=1e-9)
    # not vacuous: the pass moved every ranked item
    assert np.all(np.abs(post.mu - mu0) > 1e-6)


def test_online_bt_pairs_equals_openskill_on_rank_broken_pairs():
    """``bt_breaking="pairs"``: each ranking's pairs as 2-player games, one after another."""
    data = _random_rankings(seed=9, n=600, kmax=5)
    model = openskill.BradleyTerryFull(mu=0.0, sigma=1.0, beta=0.5, kappa=1e-4, tau=0.0)
    mu_os, s2_os = _openskill_pass(model, data.rank_break())
    post = fit_online(data, "bt", Priors.geometric(["w"], 2), bt_breaking="pairs",
                      progress=False)
    np.testing.assert_allclose(post.mu, mu_os, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(post.sigma2, s2_os, rtol=1e-9)
    game = fit_online(data, "bt", Priors.geometric(["w"], 2), progress=False)
    assert np.max(np.abs(game.mu - post.mu)) > 1e-3     # the two breakings differ

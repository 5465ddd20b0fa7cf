"""TrueSkill (inference.online.trueskill) game by game against the ``trueskill`` package."""

from __future__ import annotations

import numpy as np
import pytest

trueskill = pytest.importorskip("trueskill")

from crowdrank.inference.online import trueskill as ts
from crowdrank.models.priors import Priors
from crowdrank.models.simulate import simulate


@pytest.mark.parametrize("draw_probability,tau", [(0.0, 0.0), (0.1, 0.05), (0.3, 0.0)])
def test_games_match_the_trueskill_package(draw_probability, tau):
    env = trueskill.TrueSkill(mu=0.0, sigma=1.0, beta=0.5, tau=tau,
                              draw_probability=draw_probability, backend="scipy")
    rng = np.random.default_rng(0)
    L = 6
    ref = [env.create_rating() for _ in range(L)]
    mu, s2 = ts.init(L, 0.0, 1.0)
    params = ts.TrueSkillParams(0.5, tau, draw_probability)
    for _ in range(200):
        i, j = rng.choice(L, 2, replace=False)
        drawn = bool(draw_probability > 0 and rng.random() < 0.2)
        ref[i], ref[j] = trueskill.rate_1vs1(ref[i], ref[j], drawn=drawn, min_delta=1e-12,
                                             env=env)
        ts.update(mu, s2, int(i), int(j), params, drawn=drawn)
        np.testing.assert_allclose(mu, [r.mu for r in ref], atol=1e-9, rtol=1e-9)
        np.testing.assert_allclose(np.sqrt(s2), [r.sigma for r in ref], atol=1e-9, rtol=1e-9)


def test_upsets_far_in_the_tail_stay_finite():
    mu, s2 = np.array([30.0, -30.0]), np.array([0.01, 0.01])
    ts.update(mu, s2, 1, 0, ts.TrueSkillParams(0.5))     # the weak item wins
    assert np.all(np.isfinite(mu)) and np.all(s2 > 0)


def test_fit_trueskill_on_data_matches_the_package():
    sim = simulate("bt", n_items=7, n_workers=3, tasks_per_worker=30, seed=4)
    data = sim.rankings
    pri = Priors(data.workers, np.ones((data.n_workers, 2)), mu0=0.3, sigma0=1.2)
    post = ts.fit_trueskill(data, pri)
    env = trueskill.TrueSkill(mu=0.3, sigma=1.2, beta=0.6, tau=0.0, draw_probability=0.0,
                              backend="scipy")
    ref = [env.create_rating() for _ in data.items]
    for i, j in data.rank_break().order.T:
        ref[i], ref[j] = trueskill.rate_1vs1(ref[i], ref[j], min_delta=1e-12, env=env)
    np.testing.assert_allclose(post.mu, [r.mu for r in ref], atol=1e-9)
    np.testing.assert_allclose(post.sigma2, [r.sigma**2 for r in ref], atol=1e-9)
    assert post.algorithm == "trueskill"
    assert list(post.items_table().columns) == ["rank", "item", "mu", "sigma2", "sd"]


def test_cli_fit_trueskill(tmp_path):
    import json

    import pandas as pd

    from crowdrank.models.io import write_rankings
    from crowdrank.reports.cli import main

    sim = simulate("bt", n_items=6, n_workers=2, tasks_per_worker=20, seed=8)
    src = tmp_path / "pairs.csv"
    write_rankings(sim.rankings, src)
    out = tmp_path / "ts"
    assert main(["fit", str(src), "--model", "bt", "--method", "trueskill", "--prior-mu",
                 "0.5", "--ts-beta", "0.4", "--no-progress", "--out", str(out)]) == 0
    items = pd.read_csv(out / "items.csv")
    env = trueskill.TrueSkill(mu=0.5, sigma=1.0, beta=0.4, tau=0.0, draw_probability=0.0,
                              backend="scipy")
    data = sim.rankings
    ref = [env.create_rating() for _ in data.items]
    for i, j in data.rank_break().order.T:
        ref[i], ref[j] = trueskill.rate_1vs1(ref[i], ref[j], min_delta=1e-12, env=env)
    got = items.set_index("item").loc[list(data.items), "mu"].to_numpy()
    np.testing.assert_allclose(got, [r.mu for r in ref], atol=1e-9)
    assert json.loads((out / "posterior.json").read_text())["algorithm"] == "trueskill"
    assert main(["fit", str(src), "--model", "pl", "--method", "trueskill", "--out",
                 str(out)]) == 2

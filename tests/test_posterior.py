"""The one posterior type (crowdrank.inference.posterior): adapters, moment matching, files.

Oracles: draws from known Beta/Dirichlet/Gaussian laws (moment matching must recover their
parameters within Monte Carlo error), the fitted objects themselves (an adapter must carry
their numbers unchanged), and exact float round trips through the files.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from crowdrank.inference.gate import Gate
from crowdrank.inference.posterior import Posterior, as_posterior, moment_marginals
from crowdrank.inference.posterior_io import read_posterior, write_posterior

ITEMS = ("a", "b", "c")
WORKERS = ("u", "v")


def _draws(model, seed=0, C=2, S=20_000):
    rng = np.random.default_rng(seed)
    lam = rng.normal([0.5, -1.0, 2.0], [0.3, 1.0, 0.1], size=(C, S, 3))
    if model == "couple":
        alpha = np.array([[5.0, 3.0, 2.0], [1.0, 1.0, 8.0]])
        eta = np.stack([rng.dirichlet(a, size=(C, S)) for a in alpha], axis=2)
    else:
        alpha = np.array([[9.0, 3.0], [2.0, 2.0]])
        eta = rng.beta(alpha[:, 0], alpha[:, 1], size=(C, S, 2))
    return {"lambda": lam, "eta": eta}, alpha


@pytest.mark.parametrize("model", ["couple", "crowdbt"])
def test_from_draws_moment_matches_the_generating_law(model):
    draws, alpha = _draws(model)
    p = Posterior.from_draws(model, "toy", draws=draws, items=ITEMS, workers=WORKERS)
    m = p.marginals
    assert m.moment_matched and m.family == ("dirichlet" if model == "couple" else "beta")
    np.testing.assert_allclose(m.mu, [0.5, -1.0, 2.0], atol=0.02)
    np.testing.assert_allclose(np.sqrt(m.sigma2), [0.3, 1.0, 0.1], rtol=0.02)
    # a Dirichlet/Beta row's concentration from 40,000 draws: within a few per cent
    np.testing.assert_allclose(m.alpha, alpha, rtol=0.05)
    assert p.tree["posterior"]["eta"].dims[:3] == ("chain", "draw", "worker")
    assert p.items == ITEMS and p.workers == WORKERS


def test_from_draws_refuses_bad_shapes():
    draws, _ = _draws("crowdbt", S=10)
    with pytest.raises(ValueError, match="lambda draws"):
        Posterior.from_draws("crowdbt", "toy", draws=draws, items=ITEMS[:2], workers=WORKERS)
    with pytest.raises(ValueError, match="eta draws"):
        Posterior.from_draws("crowdbt", "toy", draws=draws, items=ITEMS, workers=("u",))
    with pytest.raises(ValueError, match="'lambda'"):
        Posterior.from_draws("crowdbt", "toy", draws={"eta": draws["eta"]}, items=ITEMS)


def test_marginal_draws_follow_the_marginals():
    p = Posterior.from_marginals("crowdbt", "toy", items=ITEMS, mu=[0.0, 1.0, -2.0],
                                 sigma2=[1.0, 0.25, 4.0], workers=WORKERS,
                                 alpha=[[9.0, 3.0], [2.0, 2.0]])
    t = p.datatree(draws=20_000, seed=3, chains=2)
    lam = t["posterior"]["lambda"].values.reshape(-1, 3)
    np.testing.assert_allclose(lam.mean(0), [0.0, 1.0, -2.0], atol=0.05)
    np.testing.assert_allclose(lam.std(0), [1.0, 0.5, 2.0], rtol=0.03)
    eta = t["posterior"]["eta"].values.reshape(-1, 2)
    np.testing.assert_allclose(eta.mean(0), [0.75, 0.5], atol=0.01)
    same = p.datatree(draws=20_000, seed=3, chains=2)["posterior"]["lambda"].values
    np.testing.assert_array_equal(t["posterior"]["lambda"].values, same)   # seeded


def test_online_adapter_and_file_round_trip(tmp_path):
    from crowdrank.inference.online import fit_online
    from crowdrank.models.priors import Priors
    from crowdrank.models.simulate import simulate

    data = simulate("couple", n_items=8, n_workers=3, tasks_per_worker=10, seed=1).rankings
    pri = Priors.geometric(data.workers, K=data.K, a0=10, a=3)
    on = fit_online(data, "couple", pri, progress=False)
    p = as_posterior(on)
    assert (p.model, p.method, p.algorithm) == ("couple", "online", "online-gbmm")
    np.testing.assert_array_equal(p.mu, on.mu)
    np.testing.assert_array_equal(p.alpha, on.alpha)
    write_posterior(p, tmp_path / "fit")
    back = read_posterior(tmp_path / "fit")
    assert back.method == "online" and back.items == tuple(on.items)
    np.testing.assert_array_equal(back.sigma2, on.sigma2)
    np.testing.assert_array_equal(back.alpha, on.alpha)


def test_generic_json_and_tree_round_trip(tmp_path):
    draws, _ = _draws("couple", S=50)
    gate = Gate(False, ["R-hat 1.0200 >= 1.01"], 1.02, 380.0, 410.0, 0, 0.8)
    p = Posterior.from_draws("couple", "toy", draws=draws, items=ITEMS, workers=WORKERS,
                             diagnostics={"gate": gate, "iterations": 7}, seconds=1.5)
    paths = write_posterior(p, tmp_path)
    assert set(paths) == {"draws", "posterior"}
    back = read_posterior(tmp_path)
    assert back.method == "toy" and back.diagnostics["iterations"] == 7
    assert back.gate == gate
    np.testing.assert_array_equal(back.tree["posterior"]["lambda"].values, draws["lambda"])
    np.testing.assert_array_equal(back.alpha, p.alpha)
    assert back.marginals.moment_matched


def test_gate_attrs_round_trip_and_nuts_folder(tmp_path):
    import arviz_base as ab

    g = Gate(True, [], 1.003, 512.0, 640.0, 0, 0.9)
    assert Gate.from_attrs(g.to_attrs()) == g
    bad = Gate(False, ["a", "b; c"], math.nan, 1.0, 2.0, 3, math.nan)
    assert Gate.from_dict(bad.to_dict()).reasons == ["a", "b; c"]
    rng = np.random.default_rng(0)
    dt = ab.from_dict({"posterior": {"lambda": rng.normal(size=(2, 10, 3))}},
                      dims={"lambda": ["item"]}, coords={"item": list(ITEMS)})
    dt.attrs.update({"model": "pl", **g.to_attrs()})
    dt.to_netcdf(tmp_path / "posterior.nc", engine="h5netcdf")
    p = read_posterior(tmp_path)
    assert (p.model, p.method, p.gate) == ("pl", "nuts", g)
    np.testing.assert_allclose(p.mu, dt["posterior"]["lambda"].values.reshape(-1, 3).mean(0))


def test_batch_bootstrap_keeps_its_marginals_and_refits():
    from crowdrank.inference.batch.api import fit_with_intervals
    from crowdrank.models.simulate import simulate

    data = simulate("bt", n_items=5, n_workers=2, tasks_per_worker=40, seed=0).rankings
    fit = fit_with_intervals(data, "bt", None, intervals="bootstrap", resamples=20, seed=0)
    p = as_posterior(fit)
    assert p.method == "bootstrap" and not p.marginals.moment_matched
    np.testing.assert_array_equal(p.mu, fit.mu)
    np.testing.assert_array_equal(p.tree["posterior"]["lambda"].values[0], fit.draws)
    lap = as_posterior(fit_with_intervals(data, "bt", None))
    assert lap.method == "laplace" and lap.tree is None
    assert lap.diagnostics["converged"] is True


def test_as_posterior_refuses_unknown():
    with pytest.raises(TypeError, match="cannot read a dict"):
        as_posterior({})
    with pytest.raises(ValueError, match="draws .* or marginals"):
        Posterior("pl", "x")


def test_moment_marginals_of_a_tree_without_eta():
    draws, _ = _draws("couple", S=100)
    p = Posterior.from_draws("pl", "toy", draws={"lambda": draws["lambda"]}, items=ITEMS)
    m = moment_marginals(p.tree, "pl")
    assert m.alpha is None and m.workers == ()


def test_nuts_warm_start_from_a_file_of_means(tmp_path):
    """``--init-from`` a posterior.json without variances: a point start at the means
    (λ by id, CrowdBT's η = a/(a+b)); with variances: the posterior itself; a data item
    missing from the file: a DataError naming it."""
    import json
    from types import SimpleNamespace

    from crowdrank.inference.method_fits import warm_start
    from crowdrank.models.errors import DataError

    data = SimpleNamespace(items=("b", "a"), workers=("u",), K=2)
    f = tmp_path / "p.json"
    f.write_text(json.dumps({"model": "crowdbt", "method": "online",
                             "items": {"a": {"mu": 1.0}, "b": {"mu": -2.0}},
                             "workers": {"u": {"alpha": [6.0, 2.0]}}}))
    approx, init = warm_start(read_posterior(f), data, str(f), "crowdbt")
    assert approx is None
    np.testing.assert_array_equal(init["lambda"], [-2.0, 1.0])
    np.testing.assert_allclose(init["eta"], [0.75])
    with_var = Posterior.from_marginals("crowdbt", "online", items=("a", "b"), mu=[1.0, -2.0],
                                        sigma2=[0.5, 0.5], workers=("u",),
                                        alpha=[[6.0, 2.0]])
    assert warm_start(with_var, data, "x", "crowdbt") == (with_var, None)
    short = SimpleNamespace(items=("a", "b", "c"), workers=("u",), K=2)
    with pytest.raises(DataError, match=r"1 item\(s\) of the data are not in the posterior"):
        warm_start(with_var, short, "x", "crowdbt")

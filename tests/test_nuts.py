"""NUTS runners, the convergence gate and the ``fit --method nuts`` command.

Sampling tests are tiny (a handful of items, a few hundred rankings, short chains) and
marked slow; the gate is also checked on synthetic draws whose diagnostics are known.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from inference import nuts
from inference.gate import check
from models.priors import Priors
from models.simulate import simulate


# ---------------------------------------------------------------- gate on known draws
def _tree(post: dict, diverging=None, energy=None):
    from arviz_base import from_dict

    C, D = next(iter(post.values())).shape[:2]
    rng = np.random.default_rng(0)
    ss = {"diverging": np.zeros((C, D), bool) if diverging is None else diverging,
          "energy": rng.normal(size=(C, D)) if energy is None else energy}
    return from_dict({"posterior": post, "sample_stats": ss})


def test_gate_trusts_iid_draws():
    x = np.random.default_rng(1).normal(size=(4, 1000, 3))
    g = check(_tree({"lambda": x}))
    assert g.trusted, g.reasons
    assert g.rhat_max < 1.01 and g.ess_bulk_min > 400 and g.divergences == 0


def test_gate_flags_each_failure():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(4, 1000, 3))
    x[0] += 1.0                                   # one chain elsewhere: R-hat
    div = np.zeros((4, 1000), bool)
    div[1, 5] = True                              # one divergence
    energy = np.cumsum(rng.normal(size=(4, 1000)), axis=1)  # random walk: E-BFMI ~ 0
    g = check(_tree({"lambda": x}, diverging=div, energy=energy))
    assert not g.trusted
    text = " ".join(g.reasons)
    assert "R-hat" in text and "divergent" in text and "E-BFMI" in text
    assert g.divergences == 1 and g.ebfmi_min < 0.3


def test_gate_flags_low_ess_from_autocorrelated_draws():
    rng = np.random.default_rng(3)
    e = rng.normal(size=(4, 1000))
    x = np.zeros((4, 1000))
    for t in range(1, 1000):                      # AR(1), phi = 0.95: ESS ~ 100
        x[:, t] = 0.95 * x[:, t - 1] + e[:, t]
    g = check(_tree({"lambda": x[..., None]}))
    assert not g.trusted and any("ESS" in r for r in g.reasons)


# ---------------------------------------------------------------- sampling
@pytest.fixture(scope="module")
def pl_data():
    return simulate("pl", n_items=6, n_workers=2, tasks_per_worker=60, kmax=3, seed=4)


@pytest.mark.slow
def test_bad_run_is_not_trusted(pl_data):
    d = pl_data.rankings
    r = nuts.fit_nuts(d, "pl", Priors.geometric(d.workers, d.K), chains=1, tune=10,
                      draws=10, progress=False)
    assert not r.gate.trusted
    assert any("chain" in s for s in r.gate.reasons)
    assert any("ESS" in s for s in r.gate.reasons)


@pytest.mark.slow
def test_numpyro_layout_recovery_and_files(tmp_path):
    """Contract layout; true λ inside the central 90 % intervals at about the nominal rate."""
    sim = simulate("couple", n_items=20, n_workers=4, tasks_per_worker=100, kmax=4,
                   setting="expert", seed=7)
    d = sim.rankings
    pr = Priors.geometric(d.workers, d.K, a0=10, a=3)
    r = nuts.fit_nuts(d, "couple", pr, chains=2, tune=300, draws=300, seed=1, progress=False)
    post = r.idata["posterior"]
    assert post["lambda"].dims == ("chain", "draw", "item")
    assert list(post["item"].values) == list(d.items)
    assert post["eta"].dims == ("chain", "draw", "worker", "stage")
    assert list(post["stage"].values) == [1, 2, 3, 4]
    assert {"diverging", "energy", "tree_depth"} <= set(r.idata["sample_stats"].data_vars)
    ll = r.idata["log_likelihood"]["rankings"]
    assert ll.shape == (2, 300, d.n_rankings)
    assert r.idata.attrs["model"] == "couple" and r.idata.attrs["backend"] == "numpyro"
    assert r.idata.attrs["prior_spec"] == pr.spec
    assert {"compile", "warmup", "sampling", "total"} <= set(r.timings)
    # the stored pointwise log-lik is the reference one at a stored draw
    from models.likelihood import loglik_pointwise
    lam0 = post["lambda"].values[1, 7]
    eta0 = post["eta"].values[1, 7]
    np.testing.assert_allclose(ll.values[1, 7], loglik_pointwise("couple", d, lam0, eta0),
                               rtol=1e-8)
    lam = post["lambda"].values.reshape(-1, d.n_items)
    lo, hi = np.quantile(lam, [0.05, 0.95], axis=0)
    inside = np.mean((sim.lam >= lo) & (sim.lam <= hi))
    # Binomial(20, 0.9): P(share < 0.7) ~ 1 %
    assert inside >= 0.7, inside
    # posterior means track the truth
    assert np.corrcoef(lam.mean(0), sim.lam)[0, 1] > 0.8
    # files: posterior.nc round trip and summary rows named by real ids
    paths = nuts.write_nuts(r, tmp_path)
    back = nuts.read_nuts(tmp_path)
    np.testing.assert_array_equal(back["posterior"]["lambda"].values, post["lambda"].values)
    import pandas as pd
    summ = pd.read_csv(paths["summary"], index_col=0)
    assert f"lambda[{d.items[3]}]" in summ.index
    assert f"eta[{d.workers[1]}, 2]" in summ.index or f"eta[{d.workers[1]},2]" in summ.index


@pytest.mark.slow
def test_couple_on_pairs_has_the_crowdbt_posterior():
    """k = 2: COUPLE under Dir(α1, α2) and CrowdBT under Beta(α1, α2) are one model; NUTS
    with one seed gives the same posterior (identical potential; within MCSE at worst)."""
    import arviz_stats as azs

    sim = simulate("crowdbt", n_items=6, n_workers=3, tasks_per_worker=40, seed=5)
    d = sim.rankings
    pr = Priors.geometric(d.workers, 2, a0=4, a=2)
    kw = {"chains": 2, "tune": 200, "draws": 300, "seed": 3, "progress": False}
    a = nuts.fit_nuts(d, "crowdbt", pr, **kw).idata["posterior"]
    b = nuts.fit_nuts(d, "couple", pr, **kw).idata["posterior"]
    for va, vb in ((a["lambda"], b["lambda"]), (a["eta"], b["eta"].sel(stage=1))):
        diff = np.abs(va.mean(("chain", "draw")).values - vb.mean(("chain", "draw")).values)
        se = np.hypot(np.asarray(azs.mcse(va.to_dataset(name="x"))["x"]),
                      np.asarray(azs.mcse(vb.to_dataset(name="x"))["x"]))
        assert np.all(diff <= 4 * se + 1e-9), (diff, se)


@pytest.mark.slow
def test_numpyro_and_pymc_agree_within_mcse(pl_data):
    pytest.importorskip("pymc")
    import arviz_stats as azs

    d = pl_data.rankings
    pr = Priors.geometric(d.workers, d.K)
    kw = {"chains": 2, "tune": 300, "draws": 500, "seed": 2, "progress": False}
    a = nuts.fit_nuts(d, "pl", pr, backend="numpyro", **kw)
    b = nuts.fit_nuts(d, "pl", pr, backend="pymc", **kw)
    assert b.idata.attrs["backend"] == "pymc"
    assert list(b.idata["posterior"]["item"].values) == list(d.items)
    assert b.idata["log_likelihood"]["rankings"].shape == (2, 500, d.n_rankings)
    la, lb = a.idata["posterior"]["lambda"], b.idata["posterior"]["lambda"]
    diff = np.abs(la.mean(("chain", "draw")).values - lb.mean(("chain", "draw")).values)
    se = np.hypot(np.asarray(azs.mcse(la.to_dataset(name="x"))["x"]),
                  np.asarray(azs.mcse(lb.to_dataset(name="x"))["x"]))
    assert np.all(diff <= 4 * se), (diff, se)
    sd_a, sd_b = la.std(("chain", "draw")).values, lb.std(("chain", "draw")).values
    np.testing.assert_allclose(sd_a, sd_b, rtol=0.2)


# ---------------------------------------------------------------- init and CLI
def test_init_is_checked():
    sim = simulate("couple", n_items=5, n_workers=2, tasks_per_worker=5, kmax=3, seed=1)
    d = sim.rankings
    with pytest.raises(ValueError, match="lambda"):
        nuts.fit_nuts(d, "couple", Priors.geometric(d.workers, d.K),
                      init={"lambda": np.zeros(3)}, progress=False)
    with pytest.raises(ValueError, match="COUPLE"):
        nuts.fit_nuts(d, "couple", Priors.geometric(d.workers, d.K),
                      init={"lambda": np.zeros(5), "eta": np.ones((2, 1))}, progress=False)


def test_init_from_online_json_reads_means(tmp_path):
    from models.data import DataError
    from reports.commands.fit_nuts import init_from_online_json

    d = simulate("couple", n_items=4, n_workers=2, tasks_per_worker=5, kmax=3,
                 seed=1).rankings
    js = {"model": "couple", "method": "online",
          "items": {it: {"mu": float(i), "sigma2": 1.0} for i, it in enumerate(d.items)},
          "workers": {w: {"alpha": [3.0, 1.0, 0.5, 9.0]} for w in d.workers}}
    p = tmp_path / "posterior.json"
    p.write_text(json.dumps(js))
    init = init_from_online_json(p, d, "couple")
    np.testing.assert_array_equal(init["lambda"], np.arange(d.n_items, dtype=float))
    np.testing.assert_allclose(init["eta"][0], np.array([3.0, 1.0, 0.5]) / 4.5)
    del js["items"][d.items[0]]
    p.write_text(json.dumps(js))
    with pytest.raises(DataError, match="not in the posterior"):
        init_from_online_json(p, d, "couple")
    p.write_text("{not json")
    with pytest.raises(DataError, match="line 1"):
        init_from_online_json(p, d, "couple")


@pytest.mark.slow
def test_cli_fit_nuts_with_init(tmp_path, capsys):
    from models.io import write_rankings
    from reports.cli import main

    sim = simulate("crowdbt", n_items=5, n_workers=2, tasks_per_worker=40, seed=8)
    f = tmp_path / "pairs.csv"
    write_rankings(sim.rankings, f)
    d = sim.rankings
    js = {"model": "crowdbt", "method": "online",
          "items": {it: {"mu": float(sim.lam[i]), "sigma2": 0.5}
                    for i, it in enumerate(d.items)},
          "workers": {w: {"alpha": [8.0, 2.0]} for w in d.workers}}
    (tmp_path / "online.json").write_text(json.dumps(js))
    out = tmp_path / "out"
    rc = main(["fit", str(f), "--method", "nuts", "--model", "crowdbt", "--chains", "2",
               "--tune", "150", "--draws", "150", "--init-from", str(tmp_path / "online.json"),
               "--out", str(out), "--no-progress"])
    assert rc == 0
    text = capsys.readouterr().out
    assert "reference" in text and "trusted" in text.lower()
    assert (out / "posterior.nc").exists() and (out / "summary.csv").exists()
    back = nuts.read_nuts(out / "posterior.nc")
    assert back.attrs["init"] == "given"
    assert back["posterior"]["eta"].dims == ("chain", "draw", "worker")

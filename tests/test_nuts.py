"""NUTS runners, the convergence gate and the ``fit --method nuts`` command.

Sampling tests are tiny (a handful of items, a few hundred rankings, short chains) and
marked slow; the gate is also checked on synthetic draws whose diagnostics are known.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from crowdrank.inference import nuts
from crowdrank.inference.gate import check
from crowdrank.inference.nuts import pymc as nuts_pymc
from crowdrank.models.priors import Priors
from crowdrank.models.simulate import simulate


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
    from crowdrank.models.likelihood import loglik_pointwise
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
    """``fit --method nuts --init-from posterior.json``'s reading (read_posterior, then
    warm_start): a file without item variances gives a point start at the means, COUPLE's
    workers at the Dirichlet means cut to K; a missing item or bad JSON is a DataError."""
    from crowdrank.inference.method_fits import warm_start
    from crowdrank.inference.posterior_io import read_posterior
    from crowdrank.models.data import DataError

    d = simulate("couple", n_items=4, n_workers=2, tasks_per_worker=5, kmax=3,
                 seed=1).rankings
    js = {"model": "couple", "method": "online",
          "items": {it: {"mu": float(i), "sigma2": float("nan")} for i, it in enumerate(d.items)},
          "workers": {w: {"alpha": [3.0, 1.0, 0.5, 9.0]} for w in d.workers}}
    p = tmp_path / "posterior.json"
    p.write_text(json.dumps(js))
    approx, init = warm_start(read_posterior(p), d, str(p), "couple")
    assert approx is None
    np.testing.assert_array_equal(init["lambda"], np.arange(d.n_items, dtype=float))
    np.testing.assert_allclose(init["eta"][0], np.array([3.0, 1.0, 0.5]) / 4.5)
    del js["items"][d.items[0]]
    p.write_text(json.dumps(js))
    with pytest.raises(DataError, match="not in the posterior"):
        warm_start(read_posterior(p), d, str(p), "couple")
    p.write_text("{not json")
    with pytest.raises(DataError, match="line 1"):
        read_posterior(p)


@pytest.mark.slow
def test_cli_fit_nuts_with_init(tmp_path, capsys):
    from crowdrank.models.io import write_rankings
    from crowdrank.reports.cli import main

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
    # the informational tail-visits line: CrowdBT's default Beta(1.67, 0.28) has b < 0.5
    assert "crowdbt: E[η] of the 2 prior-dominated simplex entries" in text
    assert (out / "posterior.nc").exists() and (out / "summary.csv").exists()
    back = nuts.read_nuts(out / "posterior.nc")
    assert back.attrs["init"] == "approx"          # sigma2 given: draws of the approximation
    assert back["posterior"]["eta"].dims == ("chain", "draw", "worker")
    # every other NUTS option of the guide, through the CLI, with progress bars on
    def run(seed, folder):
        return main(["fit", str(f), "--method", "nuts", "--model", "crowdbt", "--chains", "2",
                     "--tune", "50", "--draws", "50", "--target-accept", "0.85", "--seed",
                     seed, "--prior-mu", "0", "--prior-sigma", "1", "--worker-prior",
                     "geometric:a0=4,a=2", "--precision", "float32", "--backend", "numpyro",
                     "--init-from", str(tmp_path / "online.json"),
                     "--out", str(tmp_path / folder)])
    assert run("1", "o2") == 0
    back = nuts.read_nuts(tmp_path / "o2" / "posterior.nc")
    assert back.attrs["precision"] == "float32" and back.attrs["target_accept"] == 0.85
    # seeded through the command: the same seed gives the same draws, another seed others
    assert run("1", "o3") == 0 and run("2", "o4") == 0
    lam = {d: nuts.read_nuts(tmp_path / d / "posterior.nc")["posterior"]["lambda"].values
           for d in ("o2", "o3", "o4")}
    np.testing.assert_array_equal(lam["o2"], lam["o3"])
    assert not np.array_equal(lam["o2"], lam["o4"])


# ---------------------------------------------------------------- jittered starts
def test_jittered_starts_disperse_around_init_and_are_seeded():
    """Each chain starts at init + its own Uniform(-j, j) offset on the unconstrained scale
    of the sampler's coordinates; with no jitter every chain maps back to init exactly
    (λ and η are functions of the coordinates); same seed → same starts."""
    import jax
    from numpyro.infer.util import constrain_fn

    from crowdrank.models import numpyro_models as npm
    from crowdrank.models.model_inputs import model_inputs

    d = simulate("couple", n_items=5, n_workers=2, tasks_per_worker=5, kmax=3, seed=1).rankings
    inputs = model_inputs("couple", d, Priors.geometric(d.workers, d.K))
    eta = np.array([[0.6, 0.3, 0.1], [0.5, 0.25, 0.25]])
    init = {"lambda": np.linspace(-1, 1, 5), "eta": eta}
    z = nuts.jittered_starts(inputs, init, chains=3, seed=4, jitter=0.5)
    assert z["lambda_c"].shape == (3, 4) and z["lambda_mean"].shape == (3,)   # zero-sum: L-1
    # geometric α = (1.67, 0.28, 0.05): the first entry is a plain Gamma, the rest boosted
    assert z["eta_g"].shape == (3, 2) and z["eta_u"].shape == (3, 4) \
        and z["eta_e"].shape == (3, 4)
    for k in z:                                   # every chain elsewhere
        flat = z[k].reshape(3, -1)
        assert not np.allclose(flat[0], flat[1]) and not np.allclose(flat[1], flat[2])
    z0 = nuts.jittered_starts(inputs, init, chains=3, seed=4, jitter=0.0)
    np.testing.assert_array_equal(z0["lambda_c"][0], z0["lambda_c"][2])  # jitter 0: one λ
    for k in ("lambda_c", "lambda_mean"):
        assert np.all(np.abs(z[k] - z0[k]) <= 0.5)
    assert np.abs(z["lambda_c"] - z0["lambda_c"]).max() > 0.2   # the jitter is not tiny
    with jax.enable_x64(True):
        for c in range(3):   # auxiliaries differ per chain, λ and η do not
            back = constrain_fn(npm.model, (inputs,), {"prior_only": True},
                                {k: v[c] for k, v in z0.items()}, return_deterministic=True)
            np.testing.assert_allclose(np.asarray(back["lambda"]), init["lambda"], atol=1e-12)
            np.testing.assert_allclose(np.asarray(back["eta"]), eta, rtol=1e-10)
    again = nuts.jittered_starts(inputs, init, chains=3, seed=4, jitter=0.5)
    other = nuts.jittered_starts(inputs, init, chains=3, seed=5, jitter=0.5)
    np.testing.assert_array_equal(again["lambda_c"], z["lambda_c"])
    assert not np.allclose(other["lambda_c"], z["lambda_c"])
    # CrowdBT without eta: starts at the prior mean a / (a + b)
    pairs = simulate("crowdbt", n_items=4, n_workers=2, tasks_per_worker=5, seed=1).rankings
    pr = Priors.geometric(pairs.workers, 2, a0=4, a=2)
    cin = model_inputs("crowdbt", pairs, pr)
    zc = nuts.jittered_starts(cin, {"lambda": np.zeros(4)}, chains=2, seed=0, jitter=0.0)
    a, b = pr.beta()[0]
    with jax.enable_x64(True):
        back = constrain_fn(npm.model, (cin,), {"prior_only": True},
                            {k: v[0] for k, v in zc.items()}, return_deterministic=True)
    np.testing.assert_allclose(np.asarray(back["eta"])[0], a / (a + b), rtol=1e-10)
    # the old coordinates are still available
    zd = nuts.jittered_starts(inputs, init, chains=2, seed=0, jitter=0.0, simplex="dirichlet",
                              level="iid")
    assert zd["lambda"].shape == (2, 5) and zd["eta"].shape == (2, 2, 2)   # stick-breaking


def test_auxiliary_conditionals_are_exact():
    """``augment`` draws (u, e) given η from their exact conditionals: under the prior
    η ~ Dir(α), the augmented (u, e) must have the prior's marginals u ~ Gamma(α + 1),
    e ~ Exp(1) — checked by a Kolmogorov–Smirnov test on 4,000 draws, for tiny α too."""
    from scipy import stats

    from crowdrank.inference.nuts.starts import augment, log_dirichlet_draws

    alpha = np.array([[1.67, 0.278, 0.0463, 0.0077]])
    rng = np.random.default_rng(3)
    leta = log_dirichlet_draws(rng, alpha, 4000)
    aux = augment(rng, leta, alpha)
    for t in range(4):   # boost_below = 0 by default: every entry boosted, row-major
        assert stats.kstest(aux["eta_u"][:, t], stats.gamma(alpha[0, t] + 1).cdf).pvalue \
            > 1e-3
        assert stats.kstest(aux["eta_e"][:, t], stats.expon().cdf).pvalue > 1e-3
    # and the map back is exact: log η = log_softmax(log u − e/α)
    lg = (np.log(aux["eta_u"]) - aux["eta_e"] / alpha[0])[:, None, :]
    back = lg - np.logaddexp.reduce(lg, axis=-1, keepdims=True)
    np.testing.assert_allclose(back, leta, rtol=1e-9, atol=1e-9)
    # a wrong conditional (u = g exactly) would put no mass above g: must be caught
    # and with a split, g itself is Gamma(α) for the entries above it
    mixed = augment(rng, leta, alpha, boost_below=0.5)
    assert mixed["eta_g"].shape == (4000, 1) and mixed["eta_u"].shape == (4000, 3)
    assert stats.kstest(mixed["eta_g"][:, 0], stats.gamma(alpha[0, 0]).cdf).pvalue > 1e-3
    wrong = np.exp(leta) * rng.gamma(alpha.sum(), size=(4000, 1, 1))
    assert stats.kstest(wrong[:, 0, 0], stats.gamma(alpha[0, 0] + 1).cdf).pvalue < 1e-3


@pytest.mark.slow
def test_numpyro_chains_from_init_start_apart_and_are_reproducible(monkeypatch):
    """fit_nuts(init=...) hands NumPyro one jittered start per chain; same seed, same draws."""
    from numpyro.infer import MCMC

    sim = simulate("crowdbt", n_items=5, n_workers=2, tasks_per_worker=30, seed=8)
    d = sim.rankings
    pr = Priors.geometric(d.workers, 2, a0=4, a=2)
    init = {"lambda": sim.lam, "eta": np.array([0.8, 0.7])}
    starts = []
    run = MCMC.run

    def spy(self, *a, **kw):
        starts.append(kw.get("init_params"))
        return run(self, *a, **kw)

    monkeypatch.setattr(MCMC, "run", spy)
    kw = {"chains": 2, "tune": 50, "draws": 30, "seed": 3, "init": init, "progress": False}
    a = nuts.fit_nuts(d, "crowdbt", pr, **kw)
    b = nuts.fit_nuts(d, "crowdbt", pr, **kw)
    assert starts[0] is not None
    z = {k: np.asarray(v) for k, v in starts[0].items()}
    assert z["lambda_c"].shape == (2, d.n_items - 1)
    assert np.abs(z["lambda_c"][0] - z["lambda_c"][1]).min() > 0      # chains start apart
    assert np.all(np.abs(z["lambda_mean"] - sim.lam.mean()) <= 1.0)    # ... around init
    lam_a = a.idata["posterior"]["lambda"].values
    assert not np.allclose(lam_a[0, 0], lam_a[1, 0])               # first draws differ
    np.testing.assert_array_equal(lam_a, b.idata["posterior"]["lambda"].values)
    np.testing.assert_array_equal(a.idata["posterior"]["eta"].values,
                                  b.idata["posterior"]["eta"].values)
    assert a.idata.attrs["init"] == "given" and a.idata.attrs["init_jitter"] == 1.0
    with pytest.raises(ValueError, match="init_jitter"):
        nuts.fit_nuts(d, "crowdbt", pr, **kw, init_jitter=-1.0)


@pytest.mark.slow
def test_one_program_draws_are_numpyros_warmup_then_run(monkeypatch):
    """fit_nuts runs warm-up and sampling as one NumPyro run collecting every iteration;
    the draws, divergences and warm-up gradients must be those of NumPyro's public
    ``warmup()`` then ``run()`` with the same kernel, key and starts, bit for bit."""
    import jax
    from numpyro.infer import MCMC

    d = simulate("pl", n_items=4, n_workers=2, tasks_per_worker=6, seed=5).rankings
    pr = Priors.geometric(d.workers, 3)
    seen = []
    run = MCMC.run

    def spy(self, *a, **kw):
        seen.append((self.sampler, kw.get("init_params")))
        return run(self, *a, **kw)

    monkeypatch.setattr(MCMC, "run", spy)
    r = nuts.fit_nuts(d, "pl", pr, chains=2, tune=40, draws=30, seed=7, progress=False,
                      pointwise=False, predictive=False)
    monkeypatch.setattr(MCMC, "run", run)
    kernel, init = seen[0]
    ref = MCMC(kernel, num_warmup=40, num_samples=30, num_chains=2, chain_method="parallel",
               progress_bar=False)
    with jax.enable_x64(True):
        ref.warmup(jax.random.PRNGKey(7), init_params=init, collect_warmup=True,
                   extra_fields=("num_steps",))
        warm_steps = float(np.asarray(ref.get_extra_fields()["num_steps"]).sum())
        ref.run(ref.post_warmup_state.rng_key, extra_fields=("num_steps",))
        lam = np.asarray(ref.get_samples(group_by_chain=True)["lambda"])
        steps = np.asarray(ref.get_extra_fields(group_by_chain=True)["num_steps"])
    np.testing.assert_array_equal(r.idata["posterior"]["lambda"].values, lam)
    np.testing.assert_array_equal(r.idata["sample_stats"]["n_steps"].values, steps)
    assert r.timings["warmup_gradients"] == warm_steps > 0
    assert r.timings["sampling_gradients"] == steps.sum()


@pytest.mark.slow
def test_couple_normalized_recovers_truth_at_the_nominal_rate():
    """Normalised COUPLE has an exact simulator: with λ and η drawn from the very prior the
    model uses, the true λ and η_w^1 fall in the central 90 % intervals at about the nominal
    rate, and the standardised errors (truth − mean) / sd have mean square ≈ 1, so both too
    narrow and too wide posteriors fail. The data must also be informative (posterior sd
    well below the prior's 1, means tracking the truth): a likelihood ignored altogether
    would otherwise pass a calibration check trivially. k = 3 keeps the k! groups small."""
    alpha = np.array([8.0, 2.0, 1.0])              # a reasonable worker, smooth geometry
    eta = np.random.default_rng(12).dirichlet(alpha, size=4)
    sim = simulate("couple-normalized", n_items=12, n_workers=4, tasks_per_worker=50, kmax=3,
                   eta=eta, seed=12)               # λ ~ N(0, 1) drawn inside
    d = sim.rankings
    pr = Priors.explicit({w: alpha for w in d.workers}, d.workers)
    r = nuts.fit_nuts(d, "couple-normalized", pr, chains=2, tune=200, draws=300, seed=2,
                      progress=False, pointwise=False)
    post = r.idata["posterior"]
    assert r.idata.attrs["model"] == "couple-normalized"
    assert post["eta"].dims == ("chain", "draw", "worker", "stage")
    lam = post["lambda"].values.reshape(-1, d.n_items)
    eta1 = post["eta"].values[..., 0].reshape(-1, d.n_workers)
    draws = np.concatenate([lam, eta1], axis=1)
    truth = np.concatenate([sim.lam, sim.eta[:, 0]])
    lo, hi = np.quantile(draws, [0.05, 0.95], axis=0)
    inside = np.mean((truth >= lo) & (truth <= hi))
    # 16 parameters, Binomial(16, 0.9): P(share < 0.7, i.e. <= 11 inside) ~ 2 %
    assert inside >= 0.7, inside
    z = (truth - draws.mean(0)) / draws.std(0)
    # sum of 16 squared standard normals: chi2(16) 0.5 % and 99.5 % points 5.1 and 34.3
    assert 5.1 < np.sum(z ** 2) < 34.3, z
    assert lam.std(0).mean() < 0.75                 # the rankings inform λ (prior sd 1)
    assert np.corrcoef(lam.mean(0), sim.lam)[0, 1] > 0.8


def test_pymc_mass_matrix_is_seeded_from_the_approximation_in_value_var_order():
    """The PyMC potential gets one variance per unconstrained coordinate, in the order of
    model.value_vars, computed from draws mapped through PyMC's own transforms."""
    pytest.importorskip("pymc")
    from crowdrank.models import pymc_models as pmm
    from crowdrank.models.model_inputs import model_inputs

    d = simulate("couple", n_items=6, n_workers=2, tasks_per_worker=10, kmax=3, seed=1).rankings
    inputs = model_inputs("couple", d, Priors.geometric(d.workers, d.K))
    model = pmm.build_model(inputs)
    rng = np.random.default_rng(0)
    lam = rng.normal(0.0, 2.0, size=(400, 6))
    leta = np.log(rng.dirichlet([5.0, 2.0, 1.0], size=(400, 2)))
    starts, values = nuts.pymc_initvals(inputs, (lam, leta), None, 2, rng,
                                        {"simplex": "gamma", "level": "centered"})
    assert len(starts) == 2 and values is not None
    pot = nuts_pymc._pymc_mass(model, values)
    sizes = [int(np.prod(model.initial_point()[v.name].shape)) for v in model.value_vars]
    assert pot._var.size == sum(sizes)
    # lambda_mean comes first: the variance of the draws' means (sd 2/√6)
    assert pot._var[0] == pytest.approx(np.var(lam.mean(axis=1)), rel=1e-9)

"""PSIS k̂ of the approximations whose density is their closed-form marginals — the batch
Laplace (the joint Gaussian at the MAP) and an external CSV of means and sds — and a
comparison against an approximation with a zero sd.

Oracles: on a BT posterior with plenty of data the posterior is close to the Gaussian at
its mode, so the batch Laplace's joint Gaussian gets k̂ < 0.5 (as the PPL's Laplace does,
test_approx_psis), while the same Gaussian with a quarter of its covariance misses the
tails and gets k̂ > 0.7 ([Yao18]); a CSV holding the Laplace means and sds is the product
of the marginals — a density too, which drops the joint's correlations (a higher k̂) — and
is reliable once wide enough to cover the posterior, "not reliable" with half the sds.
A zero sd is a point mass: the comparison scores it (``z`` exact, sd ratio and coverage 0)
instead of failing, and k̂ is "n/a" with the reason. No MCMC: the reference draws are iid
from a known Gaussian.
"""

from __future__ import annotations

import warnings
from types import SimpleNamespace

import numpy as np
import pytest

from crowdrank.inference.approx.psis import KHAT_RELIABLE, posterior_khat
from crowdrank.models.priors import Priors
from crowdrank.models.simulate import simulate


@pytest.fixture(scope="module")
def bt():
    data = simulate("bt", n_items=6, n_workers=2, tasks_per_worker=60, seed=5).rankings
    return data, Priors.geometric(data.workers, K=2, a0=10, a=3)


@pytest.fixture(scope="module")
def laplace(bt):
    from crowdrank.inference.batch.api import fit_with_intervals
    from crowdrank.inference.posterior import from_batch

    data, priors = bt
    return from_batch(fit_with_intervals(data, "bt", priors, intervals="laplace"))


def test_batch_laplace_gets_khat_from_its_joint_gaussian(bt, laplace):
    data, priors = bt
    good = posterior_khat(laplace, data, "bt", priors, n=2000, seed=0)
    assert good["psis_khat"] < 0.5 and good["psis_label"] == "good"
    shrunk = SimpleNamespace(**{k: getattr(laplace, k) for k in (
        "model", "method", "items", "workers", "mu", "alpha", "marginals", "tree")},
        diagnostics={}, sigma2=laplace.sigma2 / 4,
        native=SimpleNamespace(cov=laplace.native.cov / 4))
    bad = posterior_khat(shrunk, data, "bt", priors, n=2000, seed=0)
    assert bad["psis_khat"] > KHAT_RELIABLE and bad["psis_label"] == "not reliable"


def test_external_csv_gets_khat_from_its_gaussian_marginals(bt, laplace, tmp_path):
    """The CSV's density is the product of its marginals: with the Laplace sds it ignores
    the joint's correlations (a higher k̂ than the joint Gaussian's); 1.5 times wider it
    covers the posterior (ratios bounded: reliable); half as wide it is not reliable."""
    from crowdrank.validation.pipelines.external import read_external

    data, priors = bt
    sd = np.sqrt(laplace.sigma2)
    khat = {}
    for scale in (1.0, 1.5, 0.5):
        path = tmp_path / f"ratings{scale}.csv"
        path.write_text("item,mu,sigma\n" + "".join(
            f"{i},{float(m)!r},{float(s * scale)!r}\n"
            for i, m, s in zip(laplace.items, laplace.mu, sd)))
        post = read_external(f"file:{path}", data, "bt")
        khat[scale] = posterior_khat(post, data, "bt", priors, n=2000, seed=0)["psis_khat"]
    joint = posterior_khat(laplace, data, "bt", priors, n=2000, seed=0)["psis_khat"]
    assert khat[1.0] > joint + 0.1, (khat, joint)
    assert khat[1.5] < KHAT_RELIABLE < khat[0.5], khat


def test_zero_sd_is_scored_as_a_point_mass_not_an_error(bt, laplace):
    import arviz_base as ab

    from crowdrank.inference.posterior import Posterior
    from crowdrank.validation.compare import compare

    data, priors = bt
    rng = np.random.default_rng(0)
    mu, sd = np.asarray(laplace.mu), np.sqrt(laplace.sigma2)
    items = [str(i) for i in laplace.items]
    ref = ab.from_dict({"posterior": {"lambda": rng.normal(mu, sd, size=(4, 1000, len(mu)))},
                        "sample_stats": {"diverging": np.zeros((4, 1000), bool),
                                         "energy": rng.normal(size=(4, 1000))}},
                       dims={"lambda": ["item"]}, coords={"item": items})
    var = laplace.sigma2.copy()
    var[2] = 0.0
    point = Posterior.from_marginals("bt", "file:point.csv", items=items, mu=mu, sigma2=var)
    with pytest.warns(RuntimeWarning, match=f"sd 0 for 1 item.*{items[2]}"):
        c = compare(ref, point, model="bt")
    row = c.parameters[c.parameters.id == items[2]].iloc[0]
    exact_z = (mu[2] - row.mcmc_mean) / row.mcmc_sd
    assert row.z == pytest.approx(exact_z, rel=1e-6)
    assert row.sd_ratio < 1e-6 and row.coverage_90 == 0.0
    others = c.parameters[c.parameters.id != items[2]]
    assert np.all(np.abs(others.sd_ratio - 1) < 0.1)          # the rest scored as usual
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        k = posterior_khat(point, data, "bt", priors, n=200)
    assert k["psis_khat"] is None and "sd" in k["psis_label"]


def test_fit_khat_prints_and_writes_the_batch_laplace_khat(tmp_path, capsys):
    """``crowdrank fit --method laplace --khat`` prints and writes (psis.json) the k̂ that
    :func:`posterior_khat` gives the same fit (same data, priors, seed, 1,000 draws): a
    good one on plenty of BT data; without ``--khat`` nothing of it; with NUTS an error."""
    import json

    from crowdrank.inference import methods
    from crowdrank.models.io import read_data
    from crowdrank.reports.cli import main
    from crowdrank.reports.commands.fit import build_priors

    assert main(["simulate", "--model", "bt", "--items", "6", "--workers", "2", "--tasks",
                 "60", "--seed", "5", "--out", str(tmp_path / "sim")]) == 0
    csv = str(tmp_path / "sim" / "rankings.csv")
    capsys.readouterr()
    assert main(["fit", csv, "--model", "bt", "--method", "laplace", "--khat", "--out",
                 str(tmp_path / "k")]) == 0
    printed = capsys.readouterr().out
    rec = json.loads((tmp_path / "k" / "psis.json").read_text())
    data, _ = read_data(csv)
    priors = build_priors(data)
    post = methods.get("laplace").run(data, "bt", priors, methods.get("laplace").options(),
                                      seed=0, progress=False)
    want = posterior_khat(post, data, "bt", priors, n=1000, seed=0)
    assert rec["psis_khat"] == pytest.approx(want["psis_khat"], rel=1e-12)
    assert rec["psis_khat"] < 0.5 and rec["psis_label"] == want["psis_label"] == "good"
    assert f"PSIS k̂ = {rec['psis_khat']:.3f}: good" in printed
    assert main(["fit", csv, "--model", "bt", "--method", "laplace", "--out",
                 str(tmp_path / "n")]) == 0
    assert "PSIS" not in capsys.readouterr().out and not (tmp_path / "n" / "psis.json").exists()
    assert main(["fit", csv, "--model", "bt", "--method", "nuts", "--khat", "--out",
                 str(tmp_path / "x")]) == 2
    assert "--khat is the PSIS diagnostic of an approximation" in capsys.readouterr().err

"""``crowdrank simulate`` for the pair-table models, round-tripped through ``crowdrank fit``.

Oracle: the simulator's own truth files. The fit is a correctly specified Bayesian MAP
(the same priors the truth was drawn from), so ``z = (estimate − truth) / sd`` with
Laplace's sd — which shrinks as ``1/√(pairs per parameter)``, so the tolerance follows the
data size — is roughly standard Normal: every ``|z| ≤ 4.5`` and the mean ``z²`` within
``[0.1, 4]`` (an sd 3x too large or 2x too small fails). The accuracies ``η`` only get
``|z| ≤ 5``: Laplace's sd for them is rougher (the EM MAP trades the scale of ``λ`` against
``η``; with 4-8 accuracies the mean ``z²`` reached 6.5 on one of eight seeds). The bounds
were checked on seeds 0-7 of each extension at this size (largest ``|z|``: 3.6 for ``λ``,
4.3 for ``η``); the tests use seed 0, the CLI's default."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from crowdrank.reports import cli


def _sim(tmp_path, model, *extra, name="sim"):
    out = tmp_path / name
    rc = cli.main(["simulate", "--model", model, "--items", "10", "--workers", "4",
                   "--pairs", "1600", "--quiet", "--out", str(out), *extra])
    assert rc == 0
    return out


def _fit(tmp_path, sim, model, *extra):
    fit = tmp_path / "fit"
    rc = cli.main(["fit", str(sim / "pairs.csv"), "--model", model, "--method", "map",
                   "--out", str(fit), *extra])
    assert rc == 0
    assert json.loads((fit / "fit.json").read_text()).get("converged", True)
    return fit


def _check_z(est, truth, sd, what, bound=4.5, mean_z2=(0.1, 4.0)):
    z = (np.asarray(est, float) - np.asarray(truth, float)) / np.asarray(sd, float)
    assert np.all(np.abs(z) <= bound), (what, z)
    if mean_z2 is not None:
        assert mean_z2[0] <= float(np.mean(z**2)) <= mean_z2[1], (what, z)


def _items(fit, sim):
    it = pd.read_csv(fit / "items.csv").set_index("item")
    tr = pd.read_csv(sim / "truth.csv").set_index("item")
    assert set(it.index) == set(tr.index)
    return it.loc[tr.index], tr


def test_bias_model_round_trip(tmp_path):
    sim = _sim(tmp_path, "crowdbt-bias", "--bias-sd", "1.0", "--eta-beta", "8,2")
    meta = json.loads((sim / "simulation.json").read_text())
    assert meta["n_pairs"] == 1600 and "--model crowdbt-bias" in meta["fit_command"]
    fit = _fit(tmp_path, sim, "crowdbt-bias", "--eta-beta", "8,2", "--bias-sd", "1.0")
    it, tr = _items(fit, sim)
    _check_z(it["mu"], tr["score"], it["sd"], "lambda")
    g = pd.read_csv(fit / "groups.csv").set_index("group")
    w = pd.read_csv(sim / "workers.csv").set_index("worker").loc[g.index]
    _check_z(g["beta"], w["beta"], g["beta_sd"], "beta")
    _check_z(g["eta"], w["eta"], g["eta_sd_laplace"], "eta", 5.0, None)


def test_domain_model_round_trip(tmp_path):
    sim = _sim(tmp_path, "crowdbt-domain", "--categories", "2", "--eta-beta", "8,2")
    truth = pd.read_csv(sim / "groups.csv").set_index("group")
    assert len(truth) == 4 * 2 and truth["n_pairs"].sum() == 1600
    pairs = pd.read_csv(sim / "pairs.csv")
    assert sorted(pairs["category"].unique()) == ["c0", "c1"]
    fit = _fit(tmp_path, sim, "crowdbt-domain", "--category", "category", "--eta-beta", "8,2")
    it, tr = _items(fit, sim)
    _check_z(it["mu"], tr["score"], it["sd"], "lambda")
    g = pd.read_csv(fit / "groups.csv").set_index("group")
    _check_z(g["eta"], truth.loc[g.index, "eta"], g["eta_sd_laplace"], "eta", 5.0, None)


def test_contextual_round_trip(tmp_path):
    sim = _sim(tmp_path, "contextual-bt", "--n-covariates", "2", "--tau", "0.7")
    assert list(pd.read_csv(sim / "pairs.csv").columns) == ["worker", "left", "right",
                                                            "label", "x0", "x1"]
    fit = _fit(tmp_path, sim, "contextual-bt", "--covariates", "x0,x1", "--tau", "0.7")
    it, tr = _items(fit, sim)
    _check_z(it["mu"], tr["score"], it["sd"], "lambda")
    key = ["item", "covariate"]
    est = pd.read_csv(fit / "coefficients.csv").set_index(key)
    gam = pd.read_csv(sim / "coefficients.csv").set_index(key).loc[est.index]
    _check_z(est["mean"], gam["gamma"], est["sd"], "gamma")


def test_pair_simulation_is_seeded(tmp_path):
    a = _sim(tmp_path, "crowdbt-domain", name="a")
    b = _sim(tmp_path, "crowdbt-domain", name="b")
    c = _sim(tmp_path, "crowdbt-domain", "--seed", "4", name="c")
    for f in ("pairs.csv", "truth.csv", "groups.csv"):
        assert (a / f).read_bytes() == (b / f).read_bytes()
    assert (a / "pairs.csv").read_bytes() != (c / "pairs.csv").read_bytes()


@pytest.mark.parametrize("argv, needle", [
    (["--model", "crowdbt-bias", "--tau", "2"], "--tau does not apply to --model crowdbt-bias"),
    (["--model", "contextual-bt", "--categories", "2"], "--categories does not apply"),
    (["--model", "crowdbt-domain", "--tasks", "3"], "--tasks does not apply"),
    (["--model", "crowdbt-bias", "--setting", "expert"], "--setting does not apply"),
    (["--model", "couple", "--pairs", "10"], "--pairs is an option of the pair-table"),
    (["--model", "crowdbt-bias", "--eta-beta", "1"], "--eta-beta must be A,B"),
    (["--model", "crowdbt-domain", "--categories", "0"], "--categories must be >= 1"),
    (["--model", "contextual-bt", "--items", "1"], "--items must be >= 2"),
])
def test_inapplicable_or_bad_options_are_refused(tmp_path, capsys, argv, needle):
    rc = cli.main(["simulate", *argv, "--out", str(tmp_path / "x")])
    err = capsys.readouterr().err.strip()
    assert rc != 0 and len(err.splitlines()) == 1 and needle in err, err


def test_help_lists_the_pair_options_and_their_models(capsys):
    with pytest.raises(SystemExit):
        cli.main(["simulate", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    for model in ("crowdbt-bias", "crowdbt-domain", "contextual-bt"):
        assert model in out
    for opt, model in (("--categories", "crowdbt-domain:"), ("--bias-sd", "crowdbt-bias:"),
                       ("--n-covariates", "contextual-bt:"), ("--tau", "contextual-bt:"),
                       ("--eta-beta", "crowdbt-bias/domain:"), ("--pairs", "all three:")):
        assert opt in out and model in out

"""Contextual BT as a model (models.contextual): covariates read from the pairwise CSV, the
NumPy reference, the NumPyro and PyMC programs, and the CLI route.

Oracles: (C1) written out per comparison with plain floats, SciPy's Normal density for the
PPLs' priors, one-hot columns counted by hand, and (slow) NUTS against the MAP's Laplace
intervals and against the simulated truth. The MAP itself is tested in
tests/test_contextual.py (L-BFGS, choix, recovery)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from crowdrank.inference.batch.contextual import simulate_contextual
from crowdrank.models import contextual as cx
from crowdrank.models.errors import DataError, UsageError
from crowdrank.models.io import read_pair_table, write_pair_table


def _table(n_items=5, n=200, p=2, seed=0):
    win, lose, X, lam, gam = simulate_contextual(n_items, n, p, seed=seed)
    return cx.table_from_simulation(win, lose, X, seed=seed), X, lam, gam


def test_loglik_is_c1_written_out():
    t, X, _, _ = _table(n=30)
    rng = np.random.default_rng(1)
    lam, gam = rng.normal(size=5), rng.normal(size=(5, 2))
    got = cx.loglik(t, X, lam, gam)
    for s in range(t.n_pairs):
        f, o = t.first[s], t.second[s]
        u = lam[f] - lam[o] + sum(X[s, k] * (gam[f, k] - gam[o, k]) for k in range(2))
        want = -math.log1p(math.exp(-u if t.first_won[s] else u))
        assert got[s] == pytest.approx(want, rel=1e-12)


def test_simulation_table_keeps_the_outcomes():
    win, lose, X, _, _ = simulate_contextual(4, 50, 1, seed=2)
    t = cx.table_from_simulation(win, lose, X, seed=2)
    w, lo = t.winner_loser()
    np.testing.assert_array_equal(w, win)
    np.testing.assert_array_equal(lo, lose)
    cov = cx.encode_covariates(t, cx.parse_spec("x0"))
    np.testing.assert_array_equal(cov.X[:, 0], X[:, 0])     # repr round-trips exactly


def _write(tmp_path, rows, cols="diff,topic"):
    f = tmp_path / "ctx.csv"
    f.write_text(f"worker,left,right,label,{cols}\n" + "\n".join(rows) + "\n")
    return f


def test_covariates_numeric_categorical_and_baseline(tmp_path):
    f = _write(tmp_path, ["w,a,b,a,0.5,math", "w,b,c,c,-1,art", "w,c,a,a,2e-1,code",
                          "w,a,c,c,3,math"])
    t = read_pair_table(f, ("diff", "topic"))
    cov = cx.encode_covariates(t, cx.parse_spec("diff,topic"))
    assert cov.names == ("diff", "topic=code", "topic=math")
    assert cov.baselines == {"topic": "art"}
    assert cov.kinds == {"diff": "numeric", "topic": "categorical"}
    np.testing.assert_array_equal(cov.X, [[0.5, 0, 1], [-1, 0, 0], [0.2, 1, 0], [3, 0, 1]])
    # ":cat" forces a numeric-looking column to be categorical
    cov = cx.encode_covariates(t, cx.parse_spec("diff:cat"))
    assert cov.baselines == {"diff": "-1"} and len(cov.names) == 3


def test_covariate_errors_name_file_and_line(tmp_path):
    f = _write(tmp_path, ["w,a,b,a,0.5,x", "w,b,c,c,1,x", "w,c,a,a,high,x"])
    t = read_pair_table(f, ("diff", "topic"))
    with pytest.raises(DataError, match=r"ctx\.csv, line 4: non-numeric value 'high'"):
        cx.encode_covariates(t, cx.parse_spec("diff"))
    f = _write(tmp_path, ["w,a,b,a,0.5,x", "w,b,c,c,nan,x"])
    with pytest.raises(DataError, match="line 3: non-finite value 'nan'"):
        cx.encode_covariates(read_pair_table(f, ("diff",)), cx.parse_spec("diff"))
    f = _write(tmp_path, ["w,a,b,a,0.5,x", "w,b,c,c,,x"])
    with pytest.raises(DataError, match="line 3: empty cell"):
        cx.encode_covariates(read_pair_table(f, ("diff",)), cx.parse_spec("diff"))
    with pytest.raises(DataError, match="no column 'size'"):
        read_pair_table(f, ("size",))
    with pytest.raises(UsageError):
        cx.parse_spec("diff,,topic")


def _reference_joint(t, X, lam, gam, mu0, s0, tau):
    return (cx.loglik(t, X, lam, gam).sum() + stats.norm(mu0, s0).logpdf(lam).sum()
            + stats.norm(0, tau).logpdf(gam).sum())


def test_numpyro_log_density_is_the_reference():
    import jax
    from numpyro.infer.util import log_density

    t, X, _, _ = _table(n=60)
    rng = np.random.default_rng(3)
    lam, gam = rng.normal(size=5), rng.normal(size=(5, 2))
    with jax.enable_x64(True):
        got, _ = log_density(cx.numpyro_model(t, X, 0.2, 1.5, 0.8), (), {},
                             {"lambda": lam, "gamma": gam})
    assert float(got) == pytest.approx(_reference_joint(t, X, lam, gam, 0.2, 1.5, 0.8),
                                       rel=1e-10)


@pytest.mark.usefixtures("pytensor_without_c")
def test_pymc_log_density_is_the_reference():
    t, X, _, _ = _table(n=60)
    rng = np.random.default_rng(3)
    lam, gam = rng.normal(size=5), rng.normal(size=(5, 2))
    f = cx.pymc_model(t, X, 0.2, 1.5, 0.8).compile_logp(jacobian=False)
    # PyMC's Bernoulli(logit_p) goes through the probability: ~1e-10 relative rounding
    assert float(f({"lambda": lam, "gamma": gam})) == pytest.approx(
        _reference_joint(t, X, lam, gam, 0.2, 1.5, 0.8), rel=1e-8)


def test_without_covariates_the_ppls_are_bradley_terry():
    import jax
    from numpyro.infer.util import log_density

    t, _, _, _ = _table(n=40)
    X0 = np.zeros((t.n_pairs, 0))
    lam = np.random.default_rng(4).normal(size=5)
    w, lo = t.winner_loser()
    want = (np.sum(-np.log1p(np.exp(-(lam[w] - lam[lo])))) + stats.norm(0, 1).logpdf(lam).sum())
    with jax.enable_x64(True):
        got, _ = log_density(cx.numpyro_model(t, X0), (), {}, {"lambda": lam})
    assert float(got) == pytest.approx(want, rel=1e-10)
    f = cx.pymc_model(t, X0).compile_logp(jacobian=False)
    assert float(f({"lambda": lam})) == pytest.approx(want, rel=1e-8)


def test_cli_map_writes_items_coefficients_and_fit(tmp_path):
    import json

    import pandas as pd

    from crowdrank.reports.cli import main
    t, _, _, _ = _table(n=300, p=1, seed=5)
    rng = np.random.default_rng(5)
    topic = rng.choice(["art", "code", "math"], t.n_pairs)
    f = write_pair_table(t, tmp_path / "ctx.csv", {"difficulty": t.extra["x0"],
                                                   "topic": topic})
    out = tmp_path / "o"
    assert main(["fit", str(f), "--model", "contextual-bt", "--method", "map",
                 "--covariates", "difficulty,topic", "--out", str(out)]) == 0
    info = json.loads((out / "fit.json").read_text())
    assert info["baselines"] == {"topic": "art"} and info["converged"]
    assert info["covariates"] == ["difficulty", "topic=code", "topic=math"]
    coef = pd.read_csv(out / "coefficients.csv")
    assert len(coef) == 5 * 3 and set(coef.columns) == {"item", "covariate", "mean", "sd"}
    items = pd.read_csv(out / "items.csv")
    assert list(items["rank"]) == [1, 2, 3, 4, 5] and items["mu"].is_monotonic_decreasing
    # the CLI's γ for "difficulty" is the library MAP's on the same design
    from crowdrank.inference.batch.contextual import fit_contextual
    cov = cx.encode_covariates(read_pair_table(f, ("difficulty", "topic")),
                               cx.parse_spec("difficulty,topic"))
    w, lo = t.winner_loser()
    ref = fit_contextual(w, lo, cov.X, 5)
    got = coef[coef.covariate == "difficulty"].set_index("item")["mean"]
    np.testing.assert_allclose([got[i] for i in t.items], ref.gamma[:, 0], atol=1e-9)
    # a non-numeric cell in a numeric column: one line naming the file and the line
    bad = tmp_path / "bad.csv"
    lines = f.read_text().splitlines()
    parts = lines[7].split(",")
    parts[4] = "hard"
    lines[7] = ",".join(parts)
    bad.write_text("\n".join(lines) + "\n")
    assert main(["fit", str(bad), "--model", "contextual-bt", "--method", "map",
                 "--covariates", "difficulty", "--out", str(tmp_path / "b")]) == 2
    with pytest.raises(DataError, match=r"bad\.csv, line 8: non-numeric value 'hard'"):
        cx.encode_covariates(read_pair_table(bad, ("difficulty",)), cx.parse_spec("difficulty"))
    assert main(["fit", str(f), "--model", "contextual-bt", "--method", "online",
                 "--out", str(tmp_path / "c")]) == 2


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["numpyro", "pymc"])
def test_map_agrees_with_nuts(backend):
    """MAP vs NUTS on a small simulated set: every λ and γ within 0.3 posterior sds of the
    NUTS mean and Laplace's sd within 20 % of NUTS's (the posterior is log-concave and
    close to Normal with 600 comparisons of 5 items)."""
    from crowdrank.validation.pipelines.pair_audit import audit_contextual

    t, X, _, _ = _table(n=600, p=1, seed=6)
    rep = audit_contextual(t, X, backend=backend,
                           nuts_kw={"chains": 2, "tune": 400, "draws": 500, "seed": 2})
    assert rep["nuts"]["max_r_hat"] < 1.05
    for name in ("lambda", "gamma"):
        p = rep["families"][name]["parameters"]
        assert np.max(np.abs(p["z"])) < 0.3, (name, p["z"])
        assert 0.8 < np.min(p["sd_ratio"]) and np.max(p["sd_ratio"]) < 1.2, p["sd_ratio"]


@pytest.mark.slow
def test_nuts_recovers_simulated_parameters(tmp_path):
    """NUTS through the CLI on 1,500 comparisons: the true differences λ_i − λ_0 and
    γ_i − γ_0 lie within 3.5 (sd_i + sd_0), a bound on 3.5 posterior sds of the difference."""
    import pandas as pd

    from crowdrank.reports.cli import main
    win, lose, X, lam, gam = simulate_contextual(5, 1500, 1, seed=7)
    t = cx.table_from_simulation(win, lose, X, seed=7)
    f = write_pair_table(t, tmp_path / "ctx.csv", {"x0": t.extra["x0"]})
    out = tmp_path / "o"
    assert main(["fit", str(f), "--model", "contextual-bt", "--method", "nuts",
                 "--covariates", "x0", "--chains", "2", "--tune", "300", "--draws", "300",
                 "--prior-sigma", "3", "--tau", "3", "--no-progress", "--out", str(out)]) == 0
    items = pd.read_csv(out / "items.csv").set_index("item")
    coef = pd.read_csv(out / "coefficients.csv").set_index("item")
    idx = [f"i{r}" for r in range(5)]
    mu, sd = items.loc[idx, "mu"].to_numpy(), items.loc[idx, "sd"].to_numpy()
    gm, gs = coef.loc[idx, "mean"].to_numpy(), coef.loc[idx, "sd"].to_numpy()
    for est, s, true in ((mu, sd, lam), (gm, gs, gam[:, 0])):
        err = np.abs((est - est[0]) - (true - true[0]))[1:]
        assert np.all(err < 3.5 * (s[1:] + s[0])), (err, s)
    assert (out / "posterior.nc").exists()

"""What users type with the collapsed Gibbs sampler: ``crowdrank fit --method gibbs``,
``crowdrank audit --reference gibbs`` and ``crowdrank sbc --backend gibbs``; the files'
contents, not their existence."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from crowdrank.reports.cli import main


@pytest.fixture(scope="module")
def sim_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("sim")
    assert main(["simulate", "--model", "couple", "--setting", "expert", "--items", "8",
                 "--workers", "3", "--tasks", "30", "--seed", "4", "--out", str(out)]) == 0
    return out


def test_fit_gibbs_writes_its_draws_gate_and_item_table(sim_dir, tmp_path, capsys):
    out = tmp_path / "fit"
    assert main(["fit", str(sim_dir / "rankings.csv"), "--model", "couple", "--method",
                 "gibbs", "--draws", "600", "--warmup", "300", "--processes", "1",
                 "--no-progress", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    tree = xr.open_datatree(out / "posterior.nc", engine="h5netcdf")
    post = tree["posterior"]
    assert post["lambda"].shape == (2, 600, 8) and post["eta"].shape == (2, 600, 3, 4)
    assert tree.attrs["sampler"] == "gibbs" and tree.attrs["gate_kind"] == "gibbs"
    # the verdict printed is the one stored, and names no divergence (no trajectories)
    verdict = printed.splitlines()[-1] if "reference" in printed.splitlines()[-1] else \
        next(line for line in printed.splitlines() if line.startswith("reference "))
    trusted = bool(tree.attrs["gate_trusted"])
    assert verdict.startswith("reference TRUSTED" if trusted else "reference NOT trusted")
    assert "divergences" not in verdict
    items = pd.read_csv(out / "items.csv")
    lam = post["lambda"].values.reshape(-1, 8)
    means = dict(zip(post["item"].values.astype(str), lam.mean(axis=0)))
    for _, row in items.iterrows():
        assert abs(row["mu"] - means[str(row["item"])]) < 1e-9
    assert np.all(np.diff(items["mu"].to_numpy()) <= 0)       # best first


def test_fit_gibbs_refuses_a_model_it_does_not_fit(sim_dir, tmp_path, capsys):
    rc = main(["fit", str(sim_dir / "rankings.csv"), "--model", "couple-normalized",
               "--method", "gibbs", "--out", str(tmp_path / "x")])
    assert rc == 2
    assert "fits models couple, crowdbt, pl, bt" in capsys.readouterr().err


def test_audit_with_the_gibbs_reference(sim_dir, tmp_path):
    out = tmp_path / "audit"
    assert main(["audit", str(sim_dir / "rankings.csv"), "--model", "couple", "--reference",
                 "gibbs", "--no-checks", "--permutations", "0", "--posterior-sbc", "0",
                 "--quiet", "--out", str(out)]) == 0
    m = json.loads((out / "metrics.json").read_text())
    assert m["config"]["reference"] == "gibbs"
    gate = m["models"]["couple"]["gate"]
    assert gate["kind"] == "gibbs"
    tree = xr.open_datatree(out / "couple" / "gibbs" / "posterior.nc", engine="h5netcdf")
    assert tree.attrs["sampler"] == "gibbs"
    assert bool(tree.attrs["gate_trusted"]) == gate["trusted"]
    html = (out / "report.html").read_text()
    assert "the reference by collapsed Gibbs" in html
    assert ("collapsed Gibbs: reference TRUSTED" if gate["trusted"] else
            "collapsed Gibbs: reference NOT trusted") in html
    # the comparison reads the Gibbs draws: the reference means in parameters.csv are theirs
    par = pd.read_csv(out / "parameters.csv")
    lam = par[par.kind == "lambda"].set_index("param")
    means = tree["posterior"]["lambda"].mean(("chain", "draw"))
    for item, v in zip(means["item"].values.astype(str), means.values):
        row = [p for p in lam.index if item in p]
        assert row and abs(lam.loc[row[0], "mcmc_mean"] - v) < 1e-6


def test_audit_refuses_check_backends_with_the_gibbs_reference(sim_dir, tmp_path, capsys):
    rc = main(["audit", str(sim_dir / "rankings.csv"), "--model", "couple", "--reference",
               "gibbs", "--check-backends", "--quiet", "--out", str(tmp_path / "a")])
    assert rc == 2
    assert "--check-backends compares NUTS" in capsys.readouterr().err


def test_sbc_with_the_gibbs_backend_on_couple_pairs(tmp_path, capsys):
    out = tmp_path / "sbc"
    assert main(["sbc", "--model", "couple", "--kmax", "2", "--backend", "gibbs",
                 "--sims", "3", "--items", "5", "--workers", "2", "--tasks", "10",
                 "--no-online", "--processes", "1", "--out", str(out)]) == 0
    s = json.loads((out / "sbc.json").read_text())
    ranks = pd.read_csv(out / "ranks.csv")
    assert s["config"]["backend"] == "gibbs" and s["replicates"] == 3
    assert ranks["rank"].between(0, 100).all()
    assert "Gibbs ranks" in capsys.readouterr().out


def test_sbc_refuses_stagewise_couple_beyond_pairs(tmp_path, capsys):
    rc = main(["sbc", "--model", "couple", "--kmax", "3", "--backend", "gibbs",
               "--sims", "3", "--out", str(tmp_path / "s")])
    assert rc == 2
    assert "couple-normalized" in capsys.readouterr().err

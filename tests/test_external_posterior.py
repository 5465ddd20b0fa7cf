"""``crowdrank audit --approx file:PATH``: an approximation computed elsewhere.

The oracle is openskill itself (a dev dependency): its Bradley–Terry ratings of the data's
rankings, exported per item as ``item,mu,sigma``, must be read back exactly and audited
against a tiny NUTS run like any built-in method.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from crowdrank.models.data import DataError
from crowdrank.models.simulate import simulate
from crowdrank.validation.pipelines.external import CSV_FAMILY, read_external, read_marginals_csv

openskill = pytest.importorskip("openskill.models")


def _data():
    return simulate("bt", n_items=6, n_workers=2, tasks_per_worker=20, kmax=2,
                    seed=3).rankings


def _openskill_csv(data, path):
    # the prior N(0, 1) of the audit, openskill's β = σ/2 convention
    model = openskill.BradleyTerryFull(mu=0.0, sigma=1.0, beta=0.5, kappa=1e-4, tau=0.0)
    ratings = {it: model.rating(name=it) for it in data.items}
    for r in data.as_lists(ids=True):
        for i, team in zip(r, model.rate([[ratings[i]] for i in r])):
            ratings[i] = team[0]
    rows = [(it, ratings[it].mu, ratings[it].sigma) for it in data.items]
    pd.DataFrame(rows, columns=["item", "mu", "sigma"]).to_csv(path, index=False)
    return {it: (m, s) for it, m, s in rows}


def test_csv_reads_openskill_ratings_exactly(tmp_path):
    data = _data()
    want = _openskill_csv(data, tmp_path / "os.csv")
    post = read_external(f"file:{tmp_path / 'os.csv'}", data, "bt")
    assert post.items == tuple(data.items) or list(post.items) == list(data.items)
    np.testing.assert_array_equal(post.mu, [want[i][0] for i in data.items])
    np.testing.assert_array_equal(post.sigma2, [want[i][1] ** 2 for i in data.items])
    assert post.diagnostics["assumed_family"] == CSV_FAMILY
    # openskill moved every item away from its prior mean (not vacuous)
    assert np.all(np.abs(post.mu) > 1e-6)


def test_csv_unknown_and_missing_ids_fail_with_file_and_line(tmp_path):
    data = _data()
    f = tmp_path / "bad.csv"
    ids = list(data.items)
    f.write_text("parameter,mean,sd\n" + "".join(f"lambda[{i}],0.1,1\n" for i in ids[:2])
                 + "nope,0.0,1\n")
    with pytest.raises(DataError, match=r"bad\.csv, line 4: unknown id 'nope'"):
        read_marginals_csv(f, data.items)
    f.write_text("parameter,mean,sd\n" + "".join(f"{i},0.1,1\n" for i in ids[:-1]))
    with pytest.raises(DataError, match=rf"bad\.csv: 1 item\(s\) .*{ids[-1]}"):
        read_marginals_csv(f, data.items)
    f.write_text("who,mean,sd\n")
    with pytest.raises(DataError, match="bad.csv, line 1: no column parameter"):
        read_marginals_csv(f, data.items)
    with pytest.raises(DataError, match="cannot audit crowdbt"):
        f.write_text("item,mu,sigma\n")
        read_external(f"file:{f}", data, "crowdbt")


def test_audit_openskill_csv_against_nuts(tmp_path, capsys):
    from crowdrank.models.io import write_rankings
    from crowdrank.reports import cli

    data = _data()
    rfile = tmp_path / "r.csv"
    write_rankings(data, rfile)
    want = _openskill_csv(data, tmp_path / "os.csv")
    out = tmp_path / "out"
    rc = cli.main(["audit", str(rfile), "--model", "bt", "--approx",
                   f"file:{tmp_path / 'os.csv'}", "--no-checks", "--permutations", "0",
                   "--chains", "2", "--tune", "300", "--draws", "300", "--out", str(out),
                   "--quiet", "--max-nuts-minutes", "0"])
    assert rc == 0
    m = json.loads((out / "metrics.json").read_text())
    v = [r for r in m["models"]["bt"]["variants"]
         if r["options"].get("method", "").startswith("file:")]
    assert len(v) == 1 and v[0]["assumed_family"] == CSV_FAMILY
    agg = v[0]["aggregates"]["lambda"]
    assert np.isfinite(agg["median_abs_z"]) and np.isfinite(agg["median_sd_ratio"])
    p = pd.read_csv(out / "parameters.csv")
    p = p[p.variant.str.contains("file:") & (p.kind == "lambda")]
    got = dict(zip(p.id.astype(str), p.approx_mean))
    np.testing.assert_allclose([got[i] for i in data.items], [want[i][0] for i in data.items],
                               rtol=0, atol=1e-12)
    assert p.z.notna().all() and p.mcmc_mean.notna().all()

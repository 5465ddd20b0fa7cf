"""``crowdrank export``: a NUTS reference in posteriordb's layout.

The draws file is checked against the DataTree it came from value by value, the info file's
diagnostics against ArviZ's summary of the same tree, the data file against the rankings
and priors, the model code against the registry's own functions; an untrusted run is
refused unless asked for, and then is marked as not certified.
"""

from __future__ import annotations

import inspect
import json
import zipfile

import numpy as np
import pytest

from crowdrank.inference.gate import check
from crowdrank.models.errors import UsageError
from crowdrank.models.priors import build_priors
from crowdrank.models.registry import get as get_model
from crowdrank.models.simulate import simulate
from crowdrank.validation.pipelines.posteriordb import export_posteriordb, read_reference_draws


def _iid_tree(data, with_eta: bool, seed: int = 0):
    """A tree of iid draws in the NUTS layout (4 chains x 500): the gate passes on it."""
    from arviz_base import from_dict

    rng = np.random.default_rng(seed)
    C, S, L, W = 4, 500, data.n_items, data.n_workers
    post = {"lambda": rng.normal(size=(C, S, L))}
    dims = {"lambda": ["item"]}
    if with_eta:
        post["eta"] = rng.beta(4, 2, size=(C, S, W))
        dims["eta"] = ["worker"]
    stats = {"diverging": np.zeros((C, S), bool), "energy": rng.normal(size=(C, S))}
    return from_dict({"posterior": post, "sample_stats": stats},
                     coords={"item": list(data.items), "worker": list(data.workers)},
                     dims=dims)


@pytest.fixture(scope="module")
def crowdbt_case():
    sim = simulate("crowdbt", n_items=5, n_workers=3, tasks_per_worker=6, kmax=2, seed=3)
    data = sim.rankings
    priors = get_model("crowdbt").worker_priors(build_priors(data), data)
    tree = _iid_tree(data, with_eta=True)
    return data, priors, tree


def test_a_trusted_reference_is_written_as_posteriordb_reads_it(tmp_path, crowdbt_case):
    import arviz_stats as azs

    data, priors, tree = crowdbt_case
    gate = check(tree)
    assert gate.trusted, gate.verdict()
    paths = export_posteriordb(tmp_path, tree, gate, data, priors, "crowdbt", name="tiny",
                               settings={"chains": 4})
    chains = read_reference_draws(paths["draws"])
    assert len(chains) == 4
    lam = tree["posterior"]["lambda"].values
    eta = tree["posterior"]["eta"].values
    for c, chain in enumerate(chains):
        for i, item in enumerate(data.items):
            assert chain[f"lambda[{item}]"] == lam[c, :, i].tolist()
        for w, worker in enumerate(data.workers):
            assert chain[f"eta[{worker}]"] == eta[c, :, w].tolist()
    assert set(chains[0]) == {f"lambda[{i}]" for i in data.items} | {
        f"eta[{w}]" for w in data.workers}
    info = json.loads(paths["draws_info"].read_text())
    summ = azs.summary(tree, round_to="none")
    assert info["diagnostics"]["r_hat"] == summ["r_hat"].astype(float).tolist()
    assert info["diagnostics"]["effective_sample_size_bulk"] == pytest.approx(
        summ["ess_bulk"].astype(float).tolist())
    assert (info["diagnostics"]["nchains"], info["diagnostics"]["ndraws"]) == (4, 500)
    assert info["checks_made"]["trusted"] is True
    assert info["checks_made"]["verdict"] == gate.verdict()
    with zipfile.ZipFile(paths["data"]) as z:
        d = json.loads(z.read(z.namelist()[0]))
    assert d["rankings"] == data.as_lists()
    assert d["prior"]["worker_family"] == "beta"
    assert np.allclose(d["prior"]["worker_params"], priors.beta())
    post = json.loads(paths["posterior"].read_text())
    assert post["reference_posterior_name"] == "tiny-crowdbt"
    assert post["dimensions"] == {"lambda": data.n_items, "eta": data.n_workers}
    code = paths["numpyro"].read_text()
    assert inspect.getsource(get_model("crowdbt").fn("numpyro_columns")) in code
    assert inspect.getsource(get_model("crowdbt").fn("pymc_columns")) in \
        paths["pymc"].read_text()


def test_an_untrusted_run_is_refused_unless_asked_and_then_marked(tmp_path, crowdbt_case):
    data, priors, tree = crowdbt_case
    bad = tree.copy()
    bad["posterior"]["lambda"] = bad["posterior"]["lambda"] + np.arange(4)[:, None, None]
    gate = check(bad)
    assert not gate.trusted
    with pytest.raises(UsageError, match="NOT trusted"):
        export_posteriordb(tmp_path, bad, gate, data, priors, "crowdbt", name="tiny")
    paths = export_posteriordb(tmp_path, bad, gate, data, priors, "crowdbt", name="tiny",
                               allow_untrusted=True)
    info = json.loads(paths["draws_info"].read_text())
    assert info["checks_made"]["trusted"] is False and info["checks_made"]["reasons"]
    post = json.loads(paths["posterior"].read_text())
    assert post["reference_posterior_name"] is None
    assert "not certified" in post["keywords"]


def test_items_that_are_not_the_datas_are_refused(tmp_path, crowdbt_case):
    data, priors, tree = crowdbt_case
    other = simulate("crowdbt", n_items=6, n_workers=3, tasks_per_worker=6, kmax=2,
                     seed=4).rankings
    with pytest.raises(UsageError, match="items are not the data's"):
        export_posteriordb(tmp_path, _iid_tree(other, True), check(tree), data, priors,
                           "crowdbt", name="x")


@pytest.mark.slow
def test_the_command_samples_and_exports_or_refuses(tmp_path, capsys):
    from crowdrank.reports.cli import main

    sim = simulate("bt", n_items=4, n_workers=2, tasks_per_worker=10, kmax=2, seed=1)
    csv = tmp_path / "r.csv"
    csv.write_text("worker,ranking\n" + "".join(
        f"{sim.rankings.workers[w]},{'>'.join(r)}\n"
        for w, r in zip(sim.rankings.worker, sim.rankings.as_lists(ids=True))))
    args = ["export", str(csv), "--model", "bt", "--out", str(tmp_path / "db"),
            "--chains", "2", "--tune", "30", "--draws", "30", "--no-progress"]
    assert main(args) == 2                      # 2 x 30 draws cannot pass the ESS gate
    assert "NOT trusted" in capsys.readouterr().err
    assert main([*args, "--allow-untrusted"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("reference NOT trusted")
    draws = read_reference_draws(tmp_path / "db" / "reference_posteriors" / "draws"
                                 / "draws" / "r-bt.json.zip")
    assert len(draws) == 2 and len(draws[0]["lambda[" + sim.rankings.items[0] + "]"]) == 30

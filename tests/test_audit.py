"""The audit job end to end (tiny NUTS), its CLI, and the cached experiment grid."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from crowdrank.models.data import DataError
from crowdrank.reports.audit import parse_variants, variant_label, variant_list
from crowdrank.validation.runtime import grid as X


# ------------------------------------------------------------------ variants
def test_variants_parse_and_expand():
    v = parse_variants(["taylor=paper,full", "score_alpha=prior"])
    assert v == {"taylor": ["paper", "full"], "score_alpha": ["prior"]}
    combos = variant_list(v)
    assert combos[0] == {"taylor": "paper", "score_alpha": "updated"}     # default first
    assert {"taylor": "full", "score_alpha": "prior"} in combos
    assert len(combos) == 3
    assert [variant_label(c) for c in combos] == ["default", "score_alpha=prior",
                                                   "taylor=full,score_alpha=prior"]
    assert parse_variants(["taylor=paper,full;score-alpha=updated,prior"]) == {
        "taylor": ["paper", "full"], "score_alpha": ["updated", "prior"]}
    with pytest.raises(DataError, match="--variants.*bad variant 'kappa=1'"):
        parse_variants(["kappa=1"])
    with pytest.raises(DataError, match="taylor takes paper, full, plugin"):
        parse_variants(["taylor=exact"])


def test_ep_and_quadrature_variants_expand_per_model():
    from crowdrank.validation.pipelines.audit import fit_variant, model_variants

    v = parse_variants(["method=online,ep", "ep_passes=10,2", "taylor=paper,quadrature"])
    couple = model_variants("couple", v)
    assert couple[0] == {"taylor": "paper", "score_alpha": "updated", "method": "online",
                         "ep_passes": "10"}
    # online runs do not multiply by the EP passes
    labels = [variant_label(c) for c in couple]
    assert labels[0] == "default" and len(labels) == 6
    assert set(labels) == {"default", "method=ep", "method=ep,ep_passes=2", "taylor=quadrature",
                           "taylor=quadrature,method=ep",
                           "taylor=quadrature,method=ep,ep_passes=2"}
    crowdbt = model_variants("crowdbt", v)      # CrowdBT has paper and quadrature
    assert {variant_label(c) for c in crowdbt} == set(labels)
    assert model_variants("crowdbt", parse_variants(["method=online,ep"])) == [
        {"method": "online"}, {"method": "ep"}]
    assert model_variants("crowdbt", parse_variants(["taylor=full"])) == [{}]
    assert model_variants("bt", v) == [{"method": "online", "ep_passes": "10"},
                                       {"method": "ep", "ep_passes": "10"},
                                       {"method": "ep", "ep_passes": "2"}]
    assert parse_variants(["ep_passes=5"]) == {"ep_passes": ["5"], "method": ["ep"]}
    # fit_variant dispatches to fit_ep with the passes asked for, else to fit_online
    from crowdrank.inference.online import fit_online
    from crowdrank.models.priors import build_priors
    from crowdrank.models.simulate import simulate

    d = simulate("couple", n_items=6, n_workers=2, tasks_per_worker=8, seed=2).rankings
    pri = build_priors(d)
    by_label = dict(zip(labels, couple))
    ep = fit_variant(d, "couple", pri, by_label["method=ep,ep_passes=2"], progress=False)
    assert ep.algorithm == "ep-online-gbmm" and ep.options["ep"]["max_passes"] == 2
    on = fit_variant(d, "couple", pri, by_label["taylor=quadrature"], progress=False)
    ref = fit_online(d, "couple", pri, taylor="quadrature", progress=False)
    assert np.array_equal(on.mu, ref.mu)


def test_cli_rejects_bad_options(capsys, tmp_path):
    from crowdrank.reports.cli import main

    assert main(["audit", "--variants", "taylor=bogus", "--out", str(tmp_path)]) == 2
    assert "taylor takes" in capsys.readouterr().err
    assert main(["audit", "--truth", "t.csv", "--out", str(tmp_path)]) == 2
    assert "--truth needs DATA" in capsys.readouterr().err
    assert main(["audit", str(tmp_path / "missing.csv"), "--out", str(tmp_path)]) == 2
    assert "missing.csv" in capsys.readouterr().err


# ------------------------------------------------------------------ experiment grid
def test_grid_specs_and_keys():
    g = X.grid(["couple", "crowdbt"], ["amateur"], range(2), [{}, {"taylor": "full"}], n_items=5)
    assert len(g) == 8 and all(s["n_items"] == 5 for s in g)
    assert X.spec_key(g[0]) == X.spec_key(dict(reversed(list(g[0].items()))))   # order-free
    assert len({X.spec_key(s) for s in g}) == 8


def test_grid_caches_and_resumes_after_interruption(tmp_path):
    specs = X.grid(["m"], ["s"], range(5))
    calls = []

    def fn(spec):
        calls.append(spec["seed"])
        if spec["seed"] == 3 and len(calls) < 6:
            raise RuntimeError("boom")          # a failure mid-grid
        return {"value": spec["seed"] ** 2}

    with pytest.raises(X.GridError, match="1 experiment"):
        X.run_grid(specs, fn, tmp_path, processes=1, progress=False)
    assert calls == [0, 1, 2, 3, 4]             # the others still ran and were cached
    assert len(list(tmp_path.glob("*.json"))) == 4
    run = X.run_grid(specs, fn, tmp_path, processes=1, progress=False)
    assert calls[5:] == [3]                     # only the missing one re-ran
    assert [r["value"] for r in run.results] == [0, 1, 4, 9, 16]
    assert len(run.cached) == 4 and len(run.computed) == 1
    again = X.run_grid(specs, fn, tmp_path, processes=1, progress=False)
    assert calls[6:] == [] and again.computed == []

    # an interruption (Ctrl-C) leaves what finished cached, and no partial file
    specs2 = X.grid(["m2"], ["s"], range(3))

    def interrupted(spec):
        if spec["seed"] == 1:
            raise KeyboardInterrupt
        return {"ok": True}

    with pytest.raises(KeyboardInterrupt):
        X.run_grid(specs2, interrupted, tmp_path / "b", processes=1, progress=False)
    assert X.load_cached(tmp_path / "b", specs2[0]) == {"ok": True}
    assert X.load_cached(tmp_path / "b", specs2[1]) is None
    assert not list((tmp_path / "b").glob("*.tmp*"))


def test_grid_runs_in_parallel_processes(tmp_path):
    specs = X.grid(["a", "b"], ["s"], range(2))
    run = X.run_grid(specs, dict, tmp_path, processes=2, progress=False)   # dict: picklable
    assert [r["model"] for r in run.results] == ["a", "a", "b", "b"]
    assert len(run.computed) == 4


# ------------------------------------------------------------------ end to end
@pytest.fixture(scope="module")
def tiny_audit(tmp_path_factory):
    """One ``crowdrank audit FILE --truth FILE`` on a tiny simulated set, both models, tiny
    NUTS, online variants ``taylor=paper,plugin,quadrature`` × ``method=online,ep``: the
    two end-to-end tests below read it (one pair of NUTS fits instead of two). The model
    checks run (predictive checks, LOO of the audited models) without the NUTS fits of PL
    and BT made for LOO only (``tests/test_observed.py`` and the README audits fit them)."""
    from crowdrank.models.io import write_rankings, write_truth
    from crowdrank.models.simulate import simulate
    from crowdrank.reports.cli import main

    tmp_path = tmp_path_factory.mktemp("audit")
    sim = simulate("couple", n_items=8, n_workers=3, tasks_per_worker=8, kmax=3, seed=4)
    data_path = write_rankings(sim.rankings, tmp_path / "rk.csv")
    truth_path = write_truth(sim.rankings.items, sim.lam, tmp_path / "truth.csv")
    out = tmp_path / "audit"
    # --max-draws 60: one round; the gate's extension rounds (tested in test_budget.py)
    # would sample this untrustable reference up to 4 x 60 draws per chain
    rc = main(["audit", str(data_path), "--truth", str(truth_path), "--chains", "2",
               "--tune", "60", "--draws", "60", "--max-draws", "60", "--permutations", "2",
               "--quiet",
               "--variants", "taylor=paper,plugin,quadrature", "--variants", "method=online,ep",
               "--posterior-sbc", "40", "--out", str(out), "--loo-models", ""])
    return rc, sim, out


@pytest.mark.slow
def test_audit_end_to_end_tiny(tiny_audit):
    """crowdrank audit FILE --truth FILE on a tiny simulated set, both models, tiny NUTS."""
    from crowdrank.inference.nuts import read_nuts
    from crowdrank.inference.online import OnlinePosterior

    rc, sim, out = tiny_audit
    assert rc == 0
    for f in ("report.html", "metrics.json", "parameters.csv", "couple/nuts/posterior.nc",
              "couple/online/posterior.json", "crowdbt/nuts/posterior.nc",
              "crowdbt/online/posterior.json"):
        assert (out / f).is_file(), f
    metrics = json.loads((out / "metrics.json").read_text())
    t = pd.read_csv(out / "parameters.csv")
    items, workers = list(sim.rankings.items), list(sim.rankings.workers)
    for model, n_eta in (("couple", 3 * 3), ("crowdbt", 3)):
        m = metrics["models"][model]
        # 120 draws cannot pass the gate: everything computed, marked not trusted, with why
        assert m["reference_trusted"] is False and "ESS" in m["reference_note"]
        assert 0.0 <= m["ranking"]["accuracy_online"] <= 1.0
        rows = t[(t.model == model) & (t.variant == "default")]
        assert len(rows) == len(items) + n_eta
        assert set(rows[rows.kind == "lambda"].id) == set(items)
        assert set(rows[rows.kind == "eta"].id) == set(workers)
        # the table agrees with the written fits, recomputed independently here
        dt = read_nuts(out / model / "nuts")
        post = OnlinePosterior.from_json(out / model / "online" / "posterior.json")
        lam = rows[rows.kind == "lambda"].set_index("id")
        draws = dt["posterior"]["lambda"]
        for i, it in enumerate(post.items):
            assert lam.loc[it, "approx_mean"] == pytest.approx(post.mu[i])
            assert lam.loc[it, "mcmc_mean"] == pytest.approx(
                float(draws.sel(item=it).mean()), rel=1e-9, abs=1e-12)
        # the accuracy in metrics.json is the paper's formula on the written means
        truth = dict(zip(items, sim.lam))
        t_arr = np.array([truth[i] for i in post.items])
        pairs = t_arr[:, None] > t_arr[None, :]
        acc = np.sum(pairs & (post.mu[:, None] > post.mu[None, :])) / pairs.sum()
        assert m["ranking"]["accuracy_online"] == pytest.approx(acc)
        # the centred-score row of identified.csv, recomputed from the written fits
        ident = pd.read_csv(out / "identified.csv")
        cen = ident[(ident.model == model) & (ident.variant == "default")
                    & (ident.kind == "centred")].set_index("id")
        lam_all = draws.transpose("chain", "draw", "item").values
        c_draws = lam_all - lam_all.mean(axis=-1, keepdims=True)
        for i, it in enumerate(post.items):
            col = list(draws["item"].values).index(it)
            assert cen.loc[it, "approx_mean"] == pytest.approx(post.mu[i] - post.mu.mean())
            assert cen.loc[it, "mcmc_mean"] == pytest.approx(
                float(c_draws[..., col].mean()), rel=1e-9, abs=1e-12)
        assert set(m["identified"]) >= {"raw", "centred", "contrast", "level",
                                        "order_probability"}
        # the order probabilities of identified.csv, recomputed: P(λ_a > λ_b) as the share
        # of the written draws, and under the online posterior's independent normals
        from scipy.stats import norm

        con = ident[(ident.model == model) & (ident.variant == "default")
                    & (ident.kind == "contrast")]
        assert len(con) > 0
        mu_of = dict(zip(post.items, post.mu))
        sd_of = dict(zip(post.items, np.sqrt(post.sigma2)))
        for pair, p_mcmc, p_approx in zip(con.id, con.p_order_mcmc, con.p_order_approx):
            a, b = pair.split(">")
            diff = (draws.sel(item=a) - draws.sel(item=b)).values
            assert p_mcmc == pytest.approx(float(np.mean(diff > 0)), abs=1e-12), pair
            assert p_approx == pytest.approx(norm.cdf(
                (mu_of[a] - mu_of[b]) / np.hypot(sd_of[a], sd_of[b])), rel=1e-9), pair
        # order sensitivity over the 2 seeded permutations asked for: two orders give two
        # different fits, and the gap to NUTS is the written table's, in NUTS sds
        o = m["order_sensitivity"]
        assert o["permutations"] == 2 and o["median_spread"] > 0
        lam_rows = rows[rows.kind == "lambda"]
        assert o["median_gap"] == pytest.approx(float(np.median(
            np.abs(lam_rows.approx_mean - lam_rows.mcmc_mean) / lam_rows.mcmc_sd)), rel=1e-9)
    # the predictive checks ran for both audited models
    assert set(metrics["checks"]["ppc"]) >= {"couple", "crowdbt"}
    couple = [v["variant"] for v in metrics["models"]["couple"]["variants"]]
    assert couple[0] == "default" and "taylor=plugin" in couple
    assert (out / "couple/online/variants/taylor-plugin.json").is_file()
    assert set(t[t.model == "couple"].variant) == set(couple)
    html = (out / "report.html").read_text()
    assert html.count("<img ") >= 20 and "reference not trusted" in html.lower()
    # each model's verdict note says what metrics.json says, and no note says otherwise
    import html as htmllib

    page = htmllib.unescape(html)
    for model in ("couple", "crowdbt"):
        assert f"{model}: {metrics['models'][model]['reference_note']}" in page, model
        assert f"{model}: reference trusted" not in page, model
    # the verdict without a reference: posterior SBC of every audited variant, each one's
    # verdict on the page and its ranks written beside
    assert "Verdict without a reference" in page
    for model in ("couple", "crowdbt"):
        psbc = metrics["posterior_sbc"][model]
        labels = [v["variant"] for v in metrics["models"][model]["variants"]]
        assert [r["variant"] for r in psbc] == labels
        for r in psbc:
            assert r["replicates"] == 40 and r["verdict"] in page
            ranks = (out / r["folder"] / "ranks.csv").read_text().splitlines()
            assert len(ranks) == 41


def test_priors_from_spec_or_file(tmp_path):
    from crowdrank.models.simulate import simulate
    from crowdrank.reports.audit import AuditConfig, make_priors

    data = simulate("couple", n_items=5, n_workers=2, tasks_per_worker=3, kmax=3, seed=0).rankings
    p = make_priors(data, AuditConfig())
    np.testing.assert_allclose(p.alpha[0], 10 * 6.0 ** -np.arange(1, 4))     # a0 · a^-t
    f = tmp_path / "prior.csv"
    f.write_text("worker,a1,a2,a3\nw0,5,4,1\nw1,2,2,2\n")
    q = make_priors(data, AuditConfig(worker_prior_file=str(f)))
    np.testing.assert_allclose(q.for_data(data).alpha, [[5, 4, 1], [2, 2, 2]])
    f.write_text("worker,a1,a2,a3\nw0,5,4,1\n")
    with pytest.raises(DataError, match="no worker prior"):
        make_priors(data, AuditConfig(worker_prior_file=str(f))).for_data(data)


@pytest.mark.slow
def test_audit_with_the_pymc_backend(tmp_path):
    """crowdrank audit --backend pymc on a tiny set (CrowdBT only, short chains): the fits
    are PyMC's, and the written table is the comparison of the written fits."""
    pytest.importorskip("pymc")
    from crowdrank.inference.nuts import read_nuts
    from crowdrank.inference.online import OnlinePosterior
    from crowdrank.models.io import write_rankings
    from crowdrank.models.simulate import simulate
    from crowdrank.reports.cli import main

    sim = simulate("couple", n_items=6, n_workers=2, tasks_per_worker=10, kmax=3, seed=6)
    data_path = write_rankings(sim.rankings, tmp_path / "rk.csv")
    out = tmp_path / "audit"
    rc = main(["audit", str(data_path), "--model", "crowdbt", "--backend", "pymc",
               "--chains", "2", "--tune", "100", "--draws", "100", "--permutations", "2",
               "--posterior-sbc", "0", "--quiet", "--out", str(out)])
    assert rc == 0
    for f in ("report.html", "metrics.json", "parameters.csv", "crowdbt/nuts/posterior.nc",
              "crowdbt/online/posterior.json"):
        assert (out / f).is_file(), f
    assert not (out / "couple").exists()
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["config"]["backend"] == "pymc" and list(metrics["models"]) == ["crowdbt"]
    m = metrics["models"]["crowdbt"]
    assert m["reference_trusted"] is False and "ESS" in m["reference_note"]
    dt = read_nuts(out / "crowdbt" / "nuts")
    assert dt.attrs["backend"] == "pymc" and dt.attrs["model"] == "crowdbt"
    post = dt["posterior"]
    assert post["lambda"].shape == (2, 100, 6) and post["eta"].dims == ("chain", "draw", "worker")
    assert set(post["item"].values) == set(sim.rankings.items)   # ids of the file, any order
    assert dt.attrs["sampler"] in ("nutpie", "pymc")
    assert dt["log_likelihood"]["rankings"].shape == (2, 100, sim.rankings.n_rankings)
    assert dt["sample_stats"]["diverging"].dtype == bool
    t = pd.read_csv(out / "parameters.csv")
    assert set(t.model) == {"crowdbt"} and len(t) == 6 + 2
    online = OnlinePosterior.from_json(out / "crowdbt" / "online" / "posterior.json")
    lam = t[t.kind == "lambda"].set_index("id")
    eta = t[t.kind == "eta"].set_index("id")
    for i, it in enumerate(online.items):
        draws = post["lambda"].sel(item=it).values.ravel()
        assert lam.loc[it, "mcmc_mean"] == pytest.approx(draws.mean(), rel=1e-9)
        assert lam.loc[it, "mcmc_sd"] == pytest.approx(draws.std(ddof=1), rel=1e-6)
        assert lam.loc[it, "approx_mean"] == pytest.approx(online.mu[i])
        s = np.sqrt(online.sigma2[i])
        assert lam.loc[it, "z"] == pytest.approx((online.mu[i] - draws.mean()) / draws.std(ddof=1),
                                                 rel=1e-6)
        assert lam.loc[it, "approx_sd"] == pytest.approx(s)
    for w in online.workers:
        draws = post["eta"].sel(worker=w).values.ravel()
        assert eta.loc[w, "mcmc_mean"] == pytest.approx(draws.mean(), rel=1e-9)


@pytest.mark.slow
def test_audit_compares_ep_and_quadrature_variants(tiny_audit):
    """``--variants taylor=paper,plugin,quadrature --variants method=online,ep``: every
    variant is fitted, written and compared, CrowdBT gets its EP variant too, the EP fits
    carry their per-pass log, and every number on the page equals metrics.json."""
    from test_pinned_report import check_audit_dir

    from crowdrank.inference.online import OnlinePosterior

    rc, sim, out = tiny_audit
    assert rc == 0
    metrics = json.loads((out / "metrics.json").read_text())
    labels = {m: [v["variant"] for v in metrics["models"][m]["variants"]]
              for m in ("couple", "crowdbt")}
    assert set(labels["crowdbt"]) == {"default", "taylor=quadrature", "method=ep",
                                      "taylor=quadrature,method=ep"}
    assert set(labels["couple"]) == {"default", "taylor=plugin", "taylor=quadrature",
                                     "method=ep", "taylor=plugin,method=ep",
                                     "taylor=quadrature,method=ep"}
    assert len(labels["couple"]) == 6
    for label in labels["couple"][1:]:       # every variant written
        name = label.replace("=", "-").replace(",", "_")
        assert (out / "couple/online/variants" / f"{name}.json").is_file(), name
    ep = OnlinePosterior.from_json(out / "couple/online/variants/method-ep.json")
    assert ep.algorithm == "ep-online-gbmm" and ep.options["ep"]["per_pass"]
    for m in ("couple", "crowdbt"):
        for v in metrics["models"][m]["variants"]:
            assert v["identified"]["centred"]["n"] == len(sim.rankings.items)
    assert check_audit_dir(out) > 100

"""The pair-table audit (validation.pipelines.pair_audit, reports.pair_audit_html): pointwise
log-likelihood, PSIS-LOO, posterior predictive checks, the backend agreement, Dask.

Oracles: the PPL's own log density of the observed site (NumPyro's ``log_likelihood``)
for the pointwise values; CrowdBT's and BT's independent pair likelihoods
(:mod:`crowdrank.models.likelihood`) for the baselines' exact reductions; exact leave-one-out by
quadrature on a 2-item data set (1-D for BT, 3-D for the bias model) for PSIS-LOO; the
simulated truth for the predictive checks (calibrated at the truth, a missing bias
flagged); iid draws with a known shift for the agreement check.
"""

from __future__ import annotations

import json
import re
import socket

import numpy as np
import pytest
from scipy.special import log_expit, logsumexp

from crowdrank.inference.nuts.pair_nuts import PairNuts
from crowdrank.models import contextual as cx
from crowdrank.models import crowdbt_ext as m
from crowdrank.models.io import write_pair_table
from crowdrank.models.likelihood import pair_bt, pair_crowdbt
from crowdrank.models.pair_table import PairTable
from crowdrank.validation.pipelines import pair_audit as pa

PRIOR = {"mu0": 0.0, "sigma0": 1.0, "bias_sd": 1.0, "tau": 1.0}


def _ext(variant, n_items=5, n_workers=3, n_pairs=60, seed=3, **kw):
    t, truth = m.simulate(n_items, n_workers, n_pairs, variant, seed=seed, **kw)
    st = m.structure(t, variant, "category" if variant == "crowdbt-domain" else None)
    wab = np.tile([4.0, 1.5], (st.n_workers, 1))
    cats = t.extra.get("category")
    return t, st, truth, pa.ext_fit(variant, st, wab, PRIOR, "numpyro", {}, cats)


def _ctx(n=60, p=2, seed=4):
    from crowdrank.inference.batch.contextual import simulate_contextual
    win, lose, X, _, _ = simulate_contextual(5, n, p, seed=seed)
    t = cx.table_from_simulation(win, lose, X, seed=seed, n_workers=2)
    return t, X, pa.contextual_fit("contextual-bt", t, X, PRIOR, "numpyro", {},
                                   tuple(f"x{k}" for k in range(p)))


def _draws(fit, rng, n):
    """Random parameter draws ``(1, n, ...)`` per site, inside each support."""
    if fit.kind == "ext":
        st = fit.data
        out = {"lambda": rng.normal(size=(1, n, st.n_items)),
               "eta": rng.uniform(0.05, 0.95, (1, n, st.n_groups))}
        if st.bias:
            out["beta"] = rng.normal(size=(1, n, st.n_workers))
        return out
    t, X = fit.data
    out = {"lambda": rng.normal(size=(1, n, t.n_items))}
    if X.shape[1]:
        out["gamma"] = rng.normal(size=(1, n, t.n_items, X.shape[1]))
    return out


def _nuts(draws, backend="numpyro"):
    from crowdrank.inference.nuts.pair_nuts import _summarise
    return PairNuts(draws, _summarise(draws), backend, 0.0)


# ------------------------------------------------------------------ pointwise values
@pytest.mark.parametrize("which", ["crowdbt-bias", "crowdbt-domain", "contextual-bt"])
def test_pointwise_loglik_equals_the_ppl_log_density(which):
    """The reference log-likelihood per pair and draw is NumPyro's log density of the
    observed Bernoulli ``y`` at the same parameters."""
    import jax
    jax.config.update("jax_enable_x64", True)
    from numpyro.infer.util import log_likelihood

    fit = _ctx()[2] if which == "contextual-bt" else _ext(which)[3]
    d = _draws(fit, np.random.default_rng(5), 4)
    got = pa.pointwise_loglik(fit, _nuts(d))
    want = log_likelihood(fit.programs()[0](), {k: v[0] for k, v in d.items()})["y"]
    np.testing.assert_allclose(got[0], np.asarray(want), rtol=1e-10, atol=1e-12)


def test_baselines_are_crowdbt_and_bt_exactly():
    """Plain CrowdBT (the extension with β ≡ 0, one group per worker) and plain BT
    (contextual BT without covariates) give, per pair, CrowdBT's and BT's own pair
    likelihoods of the winner over the loser (models.likelihood)."""
    t, st, _, _ = _ext("crowdbt-bias", n_pairs=80)
    wab = np.tile([4.0, 1.5], (st.n_workers, 1))
    crowdbt, bt = pa.baseline_fits(st.first, st.second, st.y, st.worker, st.items,
                                   st.workers, wab, PRIOR, "numpyro", {})
    rng = np.random.default_rng(2)
    lam, eta = rng.normal(size=st.n_items), rng.uniform(0.1, 0.9, st.n_workers)
    win, lose = t.winner_loser()
    np.testing.assert_allclose(crowdbt.loglik({"lambda": lam, "eta": eta}),
                               pair_crowdbt(lam, eta, win, lose, t.worker), rtol=1e-12)
    np.testing.assert_allclose(bt.loglik({"lambda": lam}), pair_bt(lam, None, win, lose,
                                                                   t.worker), rtol=1e-12)
    with pytest.raises(ValueError, match="baseline"):
        pa.baseline_fits(st.first, st.second, st.y, st.worker, st.items, st.workers, wab,
                         PRIOR, "numpyro", {}, ("pl-ish",))


# ------------------------------------------------------------------ predictive checks
def _truth_params(st, truth, n):
    eta = m.true_group_eta(st, truth)
    return [{"lambda": truth["lambda"], "eta": eta, "beta": truth["beta"]}] * n


def test_ppc_is_calibrated_at_the_truth_and_flags_a_missing_bias():
    """Data simulated with strong worker biases: with the true parameters as 'draws' no
    first-choice rate is extreme (the observed rate is one draw of the replicated one),
    while plain CrowdBT at the true λ, η (β ≡ 0) cannot reproduce the biased workers'
    rates (ppp outside [0.001, 0.999] for the workers with |β| > 1.5)."""
    _, st, truth, fit = _ext("crowdbt-bias", n_items=6, n_workers=4, n_pairs=1600, seed=8,
                             bias_sd=2.0)
    chk = pa.ppc_pairs(fit, _truth_params(st, truth, 300), seed=1)
    rows = chk.rows
    assert set(rows.statistic) == {"worker_agreement", "first_choice_rate"}
    fc = rows[rows.statistic == "first_choice_rate"].set_index("group")
    assert fc.loc["all", "n"] == 1600
    assert np.all((fc.ppp > 0.005) & (fc.ppp < 0.995)), fc
    assert fc.loc["all", "observed"] == pytest.approx(np.mean(st.y))
    crowdbt, _ = pa.baseline_fits(st.first, st.second, st.y, st.worker, st.items,
                                  st.workers, fit.worker_ab, PRIOR, "numpyro", {})
    eta = truth["eta"]
    plain = pa.ppc_pairs(crowdbt, [{"lambda": truth["lambda"], "eta": eta}] * 300, seed=1)
    pf = plain.rows[plain.rows.statistic == "first_choice_rate"].set_index("group")
    biased = [st.workers[w] for w in range(st.n_workers) if abs(truth["beta"][w]) > 1.5]
    assert biased, truth["beta"]
    for w in biased:
        assert pf.loc[w, "ppp"] < 0.001 or pf.loc[w, "ppp"] > 0.999, (w, pf.loc[w])


def test_ppc_by_category_for_the_domain_model():
    _, st, truth, fit = _ext("crowdbt-domain", n_pairs=300, seed=6)
    chk = pa.ppc_pairs(fit, _truth_params(st, truth, 50), seed=0)
    cat = chk.rows[chk.rows.statistic == "category_agreement"]
    assert sorted(cat.group) == sorted(set(fit.categories))
    assert cat.n.sum() == 300
    assert np.all((cat.ppp > 0.005) & (cat.ppp < 0.995))


# ------------------------------------------------------------------ backend agreement
def test_agreement_passes_equal_posteriors_and_fails_a_shifted_one():
    """Two sets of iid draws from the same Normals agree; shifting one item's score by
    0.3 posterior sds in one of them (a tiny shift, 4,000 draws each: ~13 MCSE) fails the
    check, and the shifted parameter is the worst."""
    from crowdrank.validation.reference import backend_agreement

    _, st, _, fit = _ext("crowdbt-bias")
    rng = np.random.default_rng(0)
    mean = {"lambda": rng.normal(size=st.n_items), "eta": rng.uniform(0.6, 0.9, st.n_groups),
            "beta": rng.normal(size=st.n_workers)}

    def draws(seed, shift=0.0):
        r = np.random.default_rng(seed)
        d = {k: v + 0.05 * r.standard_normal((4, 1000, v.size)) for k, v in mean.items()}
        d["lambda"][..., 2] += shift * 0.05
        return d

    a = pa.datatree(fit, _nuts(draws(1)))
    same = backend_agreement(a, pa.datatree(fit, _nuts(draws(2), "pymc")),
                             labels=("numpyro", "pymc"), variables=("lambda", "eta", "beta"))
    assert same.agree and same.n_params == st.n_items + st.n_groups + st.n_workers
    bad = backend_agreement(a, pa.datatree(fit, _nuts(draws(2, shift=0.3), "pymc")),
                            labels=("numpyro", "pymc"), variables=("lambda", "eta", "beta"))
    assert not bad.agree and bad.n_disagree == 1
    assert bad.worst[0]["param"] == f"lambda[{st.items[2]}]"


# ------------------------------------------------------------------ the scheduler
def test_unreachable_scheduler_is_a_usage_error(tmp_path, monkeypatch, capsys):
    """``--scheduler`` naming a port where nothing listens: exit 2 with a message naming
    the address and what to do, before any NUTS fit, and no outputs."""
    import crowdrank.validation.runtime.grid as X
    from crowdrank.reports.cli import main

    t, _ = m.simulate(4, 2, 40, "crowdbt-bias", seed=1)
    f = write_pair_table(t, tmp_path / "p.csv")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    real = X.dask_client
    monkeypatch.setattr(X, "dask_client",
                        lambda sched, processes=None: real(sched, processes, timeout=2))
    rc = main(["audit", str(f), "--model", "crowdbt-bias", "--eta-beta", "4,1.5",
               "--scheduler", f"tcp://127.0.0.1:{port}", "--quiet",
               "--out", str(tmp_path / "a")])
    err = capsys.readouterr().err
    assert rc == 2
    assert re.search(rf"error: --scheduler: cannot reach the Dask scheduler at "
                     rf"'tcp://127\.0\.0\.1:{port}'.*dask scheduler", err), err
    assert not (tmp_path / "a" / "metrics.json").exists()


def test_loo_models_option():
    from crowdrank.models.errors import UsageError
    from crowdrank.reports.commands.audit_pairs import _baselines

    assert _baselines(None) == ("crowdbt", "bt")
    assert _baselines("pl,bt") == ("bt",)
    assert _baselines("") == ()
    with pytest.raises(UsageError, match="--loo-models.*couple"):
        _baselines("crowdbt,couple")


# ------------------------------------------------------------------ LOO against quadrature
def _two_item_pairs():
    """Six pairs of items a, b by one worker, shown in both orders."""
    first = np.array([0, 1, 0, 1, 0, 0])
    won = np.array([1, 0, 1, 1, 0, 1])        # first shown won?
    return first, 1 - first, won


def _exact_loo(logp):
    """``elpd_i = log ∫ p(y_i|θ) p(θ|y_-i) dθ`` from log p(y_s|θ) on a grid ``(S, G)``
    whose points carry the log prior (and log cell volume) in the last row."""
    ll, lprior = logp[:-1], logp[-1]
    full = ll.sum(axis=0) + lprior
    return np.array([logsumexp(full) - logsumexp(full - ll[s]) for s in range(len(ll))])


@pytest.mark.slow
@pytest.mark.parametrize("which", ["bt", "crowdbt-bias"])
def test_psis_loo_matches_exact_leave_one_out_by_quadrature(which):
    """PSIS-LOO of a NUTS fit (PyMC, 4 × 2000 draws) against the exact leave-one-out
    predictive density of each of 6 pairs of two items, by quadrature: BT depends on
    d = λ_a − λ_b ~ N(0, 2) only (1-D); the bias model on (d, η, β) (3-D grid).
    Tolerance 0.03 nats per pair and 0.08 for the sum; every Pareto k̂ below 0.7. The
    bias model's hardest pair (k̂ up to 0.42) carries the PSIS estimate's Monte Carlo
    error: over 13 seeds it was off by at most 0.019 with 8,000 draws (and by 0.030 with
    2,400). Errors this catches, by quadrature: for BT a prior sd of 1.2 instead of √2
    for d (0.07); for the bias model no bias (0.067), a bias towards item a instead of
    the item shown first (0.26), a prior sd of 1 for d (0.08)."""
    from scipy import stats

    first, second, won = _two_item_pairs()
    S = len(first)
    nuts_kw = {"chains": 4, "tune": 300, "draws": 2000, "seed": 3}
    if which == "bt":
        t = PairTable(("a", "b"), ("w",), first, second, won, np.zeros(S, np.int64))
        fit = pa.contextual_fit("bt", t, np.zeros((S, 0)), PRIOR, "pymc", nuts_kw)
        d = np.linspace(-10, 10, 4001)
        u = np.where(first == 0, 1.0, -1.0)[:, None] * d[None, :]   # λ_first − λ_second
        ll = log_expit(np.where(won[:, None] == 1, u, -u))
        lprior = stats.norm.logpdf(d, 0, np.sqrt(2))
        exact = _exact_loo(np.vstack([ll, lprior]))
    else:
        st = m.Structure("crowdbt-bias", ("a", "b"), ("w",), ("w",), first, second,
                         np.where(won == 1, 1, -1), np.zeros(S, np.int64),
                         np.zeros(S, np.int64), np.array([0]), True)
        wab = np.array([[4.0, 1.5]])
        fit = pa.ext_fit("crowdbt-bias", st, wab, PRIOR, "pymc", nuts_kw)
        d = np.linspace(-7, 7, 141)
        eta = (np.arange(150) + 0.5) / 150
        b = np.linspace(-5, 5, 101)
        D, E, B = np.meshgrid(d, eta, b, indexing="ij")
        D, E, B = D.ravel(), E.ravel(), B.ravel()
        ll = np.empty((S, D.size))
        for s in range(S):
            ds = D if first[s] == 0 else -D
            # (E1) written out: the judged comparison with probability η, its reverse
            # otherwise, both leaning by β towards the item shown first
            lp1 = np.logaddexp(np.log(E) + log_expit(ds + B), np.log1p(-E) + log_expit(B - ds))
            lp0 = np.logaddexp(np.log(E) + log_expit(-(ds + B)),
                               np.log1p(-E) + log_expit(ds - B))
            ll[s] = lp1 if won[s] == 1 else lp0
        lprior = (stats.norm.logpdf(D, 0, np.sqrt(2)) + stats.beta.logpdf(E, 4.0, 1.5)
                  + stats.norm.logpdf(B, 0, 1))
        exact = _exact_loo(np.vstack([ll, lprior]))
    nuts = pa.run_fit(fit)
    tree = pa.datatree(fit, nuts, pa.pointwise_loglik(fit, nuts))
    res = pa.loo(tree)
    got = np.asarray(res.elpd_i).ravel()
    assert np.max(np.asarray(res.pareto_k)) < 0.7
    np.testing.assert_allclose(got, exact, atol=0.03)
    assert abs(float(res.elpd) - exact.sum()) < 0.08


# ------------------------------------------------------------------ the command
@pytest.mark.slow
def test_audit_command_writes_the_page_checks_and_agreement(tmp_path):
    """``crowdrank audit PAIRS.csv --model crowdbt-domain --check-backends`` on a tiny set
    (PyMC the audited back-end, NumPyro the check; plain CrowdBT the only baseline): the
    page, the agreement table and the checks are written and consistent."""
    import pandas as pd

    from crowdrank.reports.cli import main

    t, _ = m.simulate(4, 2, 120, "crowdbt-domain", n_categories=2, seed=12)
    f = write_pair_table(t, tmp_path / "d.csv", {"category": t.extra["category"]})
    out = tmp_path / "a"
    assert main(["audit", str(f), "--model", "crowdbt-domain", "--category", "category",
                 "--backend", "pymc", "--eta-beta", "4,1.5", "--chains", "2", "--tune",
                 "150", "--draws", "150", "--check-backends", "--loo-models", "crowdbt",
                 "--quiet", "--out", str(out)]) == 0
    rep = json.loads((out / "metrics.json").read_text())
    assert set(rep["gate"]) >= {"trusted", "rhat_max", "divergences", "ebfmi_min"}
    ag = rep["backend_agreement"]
    assert ag["labels"] == ["pymc", "numpyro"] and ag["n_params"] == 4 + 4
    assert len(pd.read_csv(out / "agreement.csv")) == ag["n_params"]
    loo = rep["checks"]["loo"]["tables"][0]
    assert {r["model"] for r in loo["table"]} == {"crowdbt-domain", "crowdbt"}
    assert loo["n_obs"] == 120
    ppc = pd.read_csv(out / "checks" / "ppc.csv")
    assert set(ppc.statistic) == {"worker_agreement", "first_choice_rate",
                                  "category_agreement"}
    assert set(ppc.model) == {"crowdbt-domain", "crowdbt"}
    page = (out / "report.html").read_text()
    for s in ("What the model says", "Model comparison (PSIS-LOO)",
              "Posterior predictive checks", "pymc against numpyro", "EM vs NUTS"):
        assert s in page, s
    assert (out / "nuts" / "posterior.nc").exists()
    assert (out / "nuts-numpyro" / "posterior.nc").exists()
    assert (out / "checks" / "crowdbt" / "posterior.nc").exists()


@pytest.mark.slow
def test_fits_on_a_local_cluster_equal_the_fits_in_process():
    """The same NUTS fit (PyMC, plain BT on 30 pairs) as a Dask task on a LocalCluster
    worker process gives the draws of the in-process run."""
    distributed = pytest.importorskip("distributed")
    _, _, _, ext = _ext("crowdbt-bias", n_items=4, n_workers=2, n_pairs=30)
    st = ext.data
    (bt,) = pa.baseline_fits(st.first, st.second, st.y, st.worker, st.items, st.workers,
                             ext.worker_ab, PRIOR, "pymc",
                             {"chains": 2, "tune": 100, "draws": 100, "seed": 5}, ("bt",))
    (local,) = pa.run_fits([bt])
    cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                       dashboard_address=None)
    client = distributed.Client(cluster)
    try:
        (remote,) = pa.run_fits([bt], scheduler=client)
        pids = set(client.run(lambda: __import__("os").getpid()).values())
    finally:
        client.close()
        cluster.close()
    assert __import__("os").getpid() not in pids
    np.testing.assert_array_equal(remote.draws["lambda"], local.draws["lambda"])


# ------------------------------------------------------------------ warm starts
def test_numpyro_inits_map_each_chain_through_its_sites_bijection():
    """Starting values (constrained, one dict per chain) become the sampler's unconstrained
    coordinates: λ and β unchanged, a Beta accuracy through the logit."""
    import jax
    jax.config.update("jax_enable_x64", True)
    from scipy.special import logit

    from crowdrank.inference.nuts.pair_nuts import _numpyro_inits

    _, st, _, fit = _ext("crowdbt-bias")
    rng = np.random.default_rng(0)
    inits = [{"lambda": rng.normal(size=st.n_items), "eta": rng.uniform(0.5, 0.99, st.n_groups),
              "beta": rng.normal(size=st.n_workers)} for _ in range(3)]
    u = _numpyro_inits(fit.programs()[0](), inits, 3)
    for k in ("lambda", "beta"):
        np.testing.assert_allclose(np.asarray(u[k]), np.stack([c[k] for c in inits]))
    np.testing.assert_allclose(np.asarray(u["eta"]), logit(np.stack([c["eta"] for c in inits])),
                               rtol=1e-10)
    with pytest.raises(ValueError, match="3 starting points for 2 chains"):
        _numpyro_inits(fit.programs()[0](), inits, 2)


def test_warm_starts_are_in_the_point_methods_mode(monkeypatch):
    """The audit's chains start from seeded draws of the EM distribution, one per chain,
    every accuracy at or above 1/2 on a set simulated with truthful workers; the baselines
    start from the EM's λ and prior accuracies reflected above 1/2."""
    from crowdrank.inference.batch.crowdbt_ext import fit_ext_em

    _, st, _, _ = _ext("crowdbt-bias", n_pairs=200)
    wab = np.tile([4.0, 1.5], (st.n_workers, 1))
    captured = {}

    def fake_run(fit, approx_of, baselines=(), **kw):
        captured["fit"], captured["base"] = fit, baselines

    monkeypatch.setattr(pa, "run_pair_audit", fake_run)
    pa.crowdbt_ext_audit(st, wab, nuts_kw={"chains": 3}, seed=4)
    em = fit_ext_em(st, wab)
    inits = captured["fit"].inits
    assert len(inits) == 3 and all(np.all(c["eta"] >= 0.5) for c in inits)
    assert not np.allclose(inits[0]["lambda"], inits[1]["lambda"])
    lam = np.stack([c["lambda"] for c in inits])
    assert np.all(np.abs(lam - em.mu) < 5 * em.sd)
    for b in captured["base"]:
        assert len(b.inits) == 3
        if b.kind == "ext":
            assert all(np.all(c["eta"] >= 0.5) for c in b.inits)


# ------------------------------------------------------------------ the page
def _fake_fits(fits, **kw):
    """Stand-in for NUTS: iid draws around 0 / 0.8 of every site, 4 chains × 300."""
    out = []
    for k, f in enumerate(fits):
        rng = np.random.default_rng(k)
        d = {}
        for site, axes in f.dims().items():
            if site == "beta" and not (f.kind == "ext" and f.data.bias):
                continue
            if site == "gamma" and not f.data[1].shape[1]:
                continue
            shape = (4, 300) + tuple(len(v) for _, v in axes)
            d[site] = (0.8 + 0.05 * rng.standard_normal(shape) if site == "eta"
                       else 0.5 * rng.standard_normal(shape))
        nuts = _nuts(d, f.backend)
        nuts.stats = {"diverging": np.zeros((4, 300), bool),
                      "energy": rng.standard_normal((4, 300))}
        nuts.settings = {"chains": 4, "tune": 0, "draws": 300, "seed": 0}
        out.append(nuts)
    return out


@pytest.mark.parametrize("which", ["crowdbt-domain", "contextual-bt"])
def test_page_shows_the_reports_numbers(which, tmp_path, monkeypatch):
    """The whole audit but the sampling (iid draws stand in for NUTS): the page holds the
    gate verdict, every family's aggregates as metrics.json has them, the agreement, the
    LOO table of the three models and the predictive checks."""
    from crowdrank.reports.html import fmt
    from crowdrank.reports.pair_audit_html import write_pair_report

    monkeypatch.setattr(pa, "run_fits", _fake_fits)
    opts = {"check_backends": True, "checks": True, "nuts_kw": {"chains": 4}}
    if which == "contextual-bt":
        t, X, _ = _ctx(n=80, p=1)
        audit = pa.contextual_audit(t, X, covariates=("x0",), **opts)
    else:
        _, st, _, fit = _ext(which, n_pairs=80)
        audit = pa.crowdbt_ext_audit(st, fit.worker_ab, categories=fit.categories, **opts)
    rep = audit.report
    assert rep["gate"]["trusted"] and rep["backend_agreement"]["agree"]
    page = write_pair_report(tmp_path / "r.html", audit).read_text()
    assert "Reference trusted" in page and "agree on all" in page
    for fam, f in rep["families"].items():
        a = f["aggregate"]
        assert re.search(rf"<td>{re.escape(fam)}</td><td>{a['n']}</td>"
                         rf"<td>{re.escape(fmt(a['median_abs_z']))}</td>", page), fam
    loo = rep["checks"]["loo"]["tables"][0]
    assert {r["model"] for r in loo["table"]} == {which, "crowdbt", "bt"}
    for r in loo["table"]:
        assert f"<td>{fmt(r['elpd'])}</td>" in page
    assert set(rep["checks"]["ppc"]) == {which, "crowdbt", "bt"}
    assert "What the model says" in page and "PSIS-LOO prefers" in page

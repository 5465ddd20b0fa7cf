"""The CrowdBT extensions (models.crowdbt_ext, inference.batch.crowdbt_ext): annotator
bias and domain-specific reliability.

Oracles: the likelihood written out pair by pair from the two latent branches (plain
Python floats), the exact reduction to CrowdBT's reference and EM (β = 0, one category),
finite differences for the EM's derivatives, SciPy's L-BFGS on the same log posterior for
the EM fixed point, the simulator's frequencies against the likelihood, SciPy's Normal and
Beta densities for the PPLs' log densities, and NUTS for the EM's intervals (slow)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from crowdrank.inference.batch import crowdbt_ext as ext
from crowdrank.models import crowdbt_ext as m
from crowdrank.models.errors import DataError, UsageError
from crowdrank.models.io import read_pair_table, write_pair_table
from crowdrank.models.pair_table import PairTable, from_rankings


def _sig(x):
    return 1 / (1 + math.exp(-x))


def _st(variant, n_items=6, n_workers=4, n_pairs=300, seed=3):
    t, truth = m.simulate(n_items, n_workers, n_pairs, variant, seed=seed)
    return m.structure(t, variant, "category" if variant == "crowdbt-domain" else None), truth


@pytest.mark.parametrize("variant", m.VARIANTS)
def test_loglik_equals_the_two_branches_written_out(variant):
    st, _ = _st(variant, n_pairs=40)
    rng = np.random.default_rng(1)
    lam, eta = rng.normal(size=st.n_items), rng.uniform(0.05, 0.95, st.n_groups)
    beta = rng.normal(size=st.n_workers) if st.bias else None
    got = m.loglik(st, lam, eta, beta)
    for s in range(len(st.first)):
        d = lam[st.first[s]] - lam[st.second[s]]
        b = beta[st.worker[s]] if st.bias else 0.0
        e = eta[st.group[s]]
        p_first = e * _sig(d + b) + (1 - e) * _sig(-d + b)     # truthful / reversed judge
        want = math.log(p_first if st.sign[s] > 0 else 1 - p_first)
        assert got[s] == pytest.approx(want, rel=1e-12, abs=1e-12)
    lp1, lp0 = m.log_probs(st, lam, eta, beta)
    np.testing.assert_allclose(np.exp(lp1) + np.exp(lp0), 1.0, rtol=1e-12)


def test_without_bias_and_categories_it_is_crowdbt():
    from crowdrank.models.likelihood import crowdbt_loglik
    t, _ = m.simulate(5, 3, 60, "crowdbt-domain", n_categories=1, seed=4)
    st = m.structure(t, "crowdbt-domain", "category")
    assert st.n_groups == t.n_workers
    rng = np.random.default_rng(2)
    lam, eta = rng.normal(size=5), rng.uniform(0.2, 0.9, st.n_groups)
    got = m.loglik(st, lam, eta)
    w, lo = t.winner_loser()
    for s in range(t.n_pairs):
        want = crowdbt_loglik(lam, eta[st.group[s]], np.array([w[s], lo[s]]))
        assert got[s] == pytest.approx(want, rel=1e-10)


def test_simulator_frequencies_follow_the_likelihood():
    # one pair shown many times to one worker: the share of first-item wins estimates (E1)
    n = 20000
    for variant in m.VARIANTS:
        t, truth = m.simulate(2, 1, n, variant, n_categories=1, seed=5)
        st = m.structure(t, variant, "category" if variant == "crowdbt-domain" else None)
        lp1, _ = m.log_probs(st, truth["lambda"], m.true_group_eta(st, truth),
                             truth["beta"] if st.bias else None)
        p = np.exp(lp1)
        expected, observed = p.sum(), st.y.sum()
        assert abs(observed - expected) < 4 * np.sqrt(np.sum(p * (1 - p)))


def test_reader_keeps_presentation_order_and_names_bad_lines(tmp_path):
    f = tmp_path / "p.csv"
    f.write_text("worker,left,right,label,topic\nw1,a,b,b,x\nw2,b,a,b,y\n")
    t = read_pair_table(f, ("topic",))
    assert [t.items[i] for i in t.first] == ["a", "b"] and list(t.first_won) == [0, 1]
    assert list(t.extra["topic"]) == ["x", "y"] and list(t.lines) == [2, 3]
    f.write_text("worker,left,right,label\nw1,a,b,b\nw2,a,b,c\n")
    with pytest.raises(DataError, match=r"p\.csv, line 3: label 'c'"):
        read_pair_table(f)
    f.write_text("worker,left,right,label\nw1,a,a,a\n")
    with pytest.raises(DataError, match="line 2: left and right are the same"):
        read_pair_table(f)
    with pytest.raises(DataError, match="no column 'topic'"):
        read_pair_table(f, ("topic",))
    f.write_text("worker,ranking\nw1,a>b>c\n")
    with pytest.raises(DataError, match=r"line 1: a pairwise CSV needs columns .*rankings file"):
        read_pair_table(f)


def test_bias_needs_a_presentation_order_and_domain_a_category(tmp_path):
    from crowdrank.models.data import Rankings
    data = Rankings(("a", "b", "c"), ("w",), np.array([[0, 1], [1, 2], [2, 0]]),
                    np.array([3, 3]), np.array([0, 0]))
    t = from_rankings(data)
    assert not t.oriented and t.n_pairs == 6
    with pytest.raises(DataError, match="order in which each pair was shown"):
        m.structure(t, "crowdbt-bias")
    with pytest.raises(UsageError, match="category"):
        m.structure(t, "crowdbt-domain")
    with pytest.raises(DataError, match="no category column 'topic' was read"):
        m.structure(t, "crowdbt-domain", "topic")
    f = tmp_path / "p.csv"
    f.write_text("worker,left,right,label,topic\nw1,a,b,b,x\nw2,b,a,b,\n")
    with pytest.raises(DataError, match=r"p\.csv, line 3: empty cell in category column"):
        m.structure(read_pair_table(f, ("topic",)), "crowdbt-domain", "topic")
    # the domain model ignores orientation: rank-broken rankings are fine with a category
    t2 = PairTable(t.items, t.workers, t.first, t.second, t.first_won, t.worker,
                   {"c": np.array(["x"] * 6, dtype=object)}, None, False)
    assert m.structure(t2, "crowdbt-domain", "c").n_groups == 1


def _fd(f, x, h=1e-6):
    out = np.empty_like(x)
    for i in range(len(x)):
        e = np.zeros_like(x)
        e[i] = h
        out[i] = (f(x + e) - f(x - e)) / (2 * h)
    return out


@pytest.mark.parametrize("variant", m.VARIANTS)
def test_em_derivatives_match_finite_differences(variant):
    st, _ = _st(variant, n_pairs=120)
    ab = m.group_beta(st, np.tile([3.0, 1.5], (st.n_workers, 1)))
    Z = ext.design(st, 0.3, 1.2, 0.8)
    rng = np.random.default_rng(3)
    theta = rng.normal(size=Z.Zu.shape[1])
    eta = rng.uniform(0.2, 0.9, st.n_groups)
    gt, ge = ext.gradient(st, Z, theta, eta, ab)
    np.testing.assert_allclose(gt, _fd(lambda x: ext.log_posterior(st, Z, x, eta, ab), theta),
                               atol=1e-5)
    np.testing.assert_allclose(ge, _fd(lambda x: ext.log_posterior(st, Z, theta, x, ab), eta),
                               atol=1e-5)
    H = ext.neg_hessian(st, Z, theta, eta)
    cols = [_fd(lambda x, i=i: ext.gradient(st, Z, x, eta, ab)[0][i], theta)
            for i in range(len(theta))]
    np.testing.assert_allclose(-H, np.stack(cols), atol=1e-5)
    # the joint observed information over (θ, η)
    D = len(theta)
    x = np.concatenate([theta, eta])
    Hf = ext.neg_hessian_full(st, Z, theta, eta, ab)
    cols = [_fd(lambda y, i=i: np.concatenate(ext.gradient(st, Z, y[:D], y[D:], ab))[i], x)
            for i in range(len(x))]
    np.testing.assert_allclose(-Hf, np.stack(cols), atol=1e-5)


@pytest.mark.parametrize("variant", m.VARIANTS)
def test_em_ascends_and_stops_at_the_optimisers_point(variant):
    from scipy.optimize import minimize
    from scipy.special import expit, logit

    st, _ = _st(variant, n_pairs=250)
    wab = np.tile([3.0, 1.5], (st.n_workers, 1))      # b > 1: an interior optimum
    ab = m.group_beta(st, wab)
    Z = ext.design(st, 0.0, 1.0, 1.0)
    theta, eta = Z.mean.copy(), np.full(st.n_groups, 0.7)
    f = ext.log_posterior(st, Z, theta, eta, ab)
    for _ in range(20):
        theta, eta = ext.em_step(st, Z, theta, eta, ab)
        f2 = ext.log_posterior(st, Z, theta, eta, ab)
        assert f2 >= f - 1e-9
        f = f2
    fit = ext.fit_ext_em(st, wab, tol=1e-7)
    assert fit.converged
    D = Z.Zu.shape[1]

    def negf(x):      # a general-purpose optimiser on (θ, logit η), from the prior point
        return -ext.log_posterior(st, Z, x[:D], expit(x[D:]), ab)

    def negg(x):
        e = expit(x[D:])
        gt, ge = ext.gradient(st, Z, x[:D], e, ab)
        return -np.concatenate([gt, ge * e * (1 - e)])

    x0 = np.concatenate([Z.mean, np.zeros(st.n_groups)])
    r = minimize(negf, x0, jac=negg, method="L-BFGS-B", options={"gtol": 1e-10, "ftol": 1e-15,
                                                                "maxiter": 5000})
    np.testing.assert_allclose(fit.mu, r.x[:st.n_items], atol=2e-4)
    np.testing.assert_allclose(fit.eta, expit(r.x[D:]), atol=2e-4)
    if st.bias:
        np.testing.assert_allclose(fit.beta, r.x[st.n_items:D], atol=2e-4)
    assert fit.objective >= -r.fun - 1e-8
    assert np.all(np.isfinite(logit(fit.eta)))


@pytest.mark.parametrize("variant", m.VARIANTS)
def test_squarem_reaches_the_plain_em_fixed_point_in_fewer_steps(variant):
    st, _ = _st(variant, n_pairs=300, seed=13)
    wab = np.tile([2.0, 1.0], (st.n_workers, 1))     # b = 1: accuracies may reach 1
    plain = ext.fit_ext_em(st, wab, tol=1e-8, accelerate=False, newton_below=None)
    fast = ext.fit_ext_em(st, wab, tol=1e-8, newton_below=None)
    assert plain.converged and fast.converged
    np.testing.assert_allclose(fast.mu, plain.mu, atol=1e-6)
    np.testing.assert_allclose(fast.eta, plain.eta, atol=1e-6)
    assert fast.objective >= plain.objective - 1e-9
    assert fast.iterations < plain.iterations


@pytest.mark.parametrize("variant", m.VARIANTS)
def test_newton_steps_reach_the_em_fixed_point_in_fewer_steps(variant):
    # the oracle: plain EM (no extrapolation, no Newton) run to a tight tolerance; b = 1
    # lets some accuracies sit on the bound 1, which the projected step must hold there
    st, _ = _st(variant, n_pairs=300, seed=13)
    wab = np.tile([2.0, 1.0], (st.n_workers, 1))
    plain = ext.fit_ext_em(st, wab, tol=1e-8, accelerate=False, newton_below=None)
    hybrid = ext.fit_ext_em(st, wab, tol=1e-8)
    assert plain.converged and hybrid.converged and hybrid.newton_steps > 0
    np.testing.assert_allclose(hybrid.mu, plain.mu, atol=1e-6)
    np.testing.assert_allclose(hybrid.eta, plain.eta, atol=1e-6)
    assert hybrid.objective >= plain.objective - 1e-9
    assert hybrid.iterations < plain.iterations
    kinds = [k for _, k, _ in hybrid.trace[1:]]
    assert "newton" in kinds and hybrid.fit_dict()["newton_steps"] == kinds.count("newton")


@pytest.mark.parametrize("variant", m.VARIANTS)
def test_newton_direction_is_the_dense_solve(variant):
    # the Schur complement of the η block against numpy's dense solve of the full
    # observed information (some accuracies held out of the free set)
    st, _ = _st(variant, n_pairs=200, seed=7)
    wab = np.tile([3.0, 1.5], (st.n_workers, 1))
    ab = m.group_beta(st, wab)
    Z = ext.design(st, 0.0, 1.0, 1.0)
    fit = ext.fit_ext_em(st, wab)                       # near the mode: −∇²F is p.d.
    rng = np.random.default_rng(0)
    theta = np.concatenate([fit.mu, fit.beta]) if st.bias else fit.mu.copy()
    theta = theta + rng.normal(0, 0.05, len(theta))
    eta = np.clip(fit.eta + rng.normal(0, 0.02, st.n_groups), 0.05, 0.95)
    free = np.ones(st.n_groups, bool)
    free[0] = False
    gt, ge = ext.gradient(st, Z, theta, eta, ab)
    dt, de = ext.newton_direction(st, Z, theta, eta, ab, free, gt, ge)
    D = len(theta)
    keep = np.concatenate([np.ones(D, bool), free])
    H = ext.neg_hessian_full(st, Z, theta, eta, ab)[np.ix_(keep, keep)]
    want = np.linalg.solve(H, np.concatenate([gt, ge[free]]))
    np.testing.assert_allclose(np.concatenate([dt, de]), want, rtol=1e-8, atol=1e-10)


def test_newton_step_raises_the_posterior_or_declines():
    # from points along an EM run: a step taken never lowers F and keeps 0 < η < 1
    st, _ = _st("crowdbt-bias", n_pairs=300, seed=2)
    wab = np.tile([3.0, 1.0], (st.n_workers, 1))
    ab = m.group_beta(st, wab)
    Z = ext.design(st, 0.0, 1.0, 1.0)
    theta, eta = Z.mean.copy(), np.full(st.n_groups, 0.7)
    taken = 0
    for _ in range(8):
        f0 = ext.log_posterior(st, Z, theta, eta, ab)
        nt = ext.newton_step(st, Z, theta, eta, ab)
        if nt is not None:
            taken += 1
            assert ext.log_posterior(st, Z, *nt, ab) > f0
            assert np.all((nt[1] > 0) & (nt[1] < 1))
        theta, eta = ext.em_step(st, Z, theta, eta, ab)
    assert taken > 0


def test_em_with_one_category_is_crowdbt_em():
    from crowdrank.inference.batch.crowdbt_em import fit_crowdbt_em
    from crowdrank.models.data import Rankings
    from crowdrank.models.priors import Priors

    t, _ = m.simulate(6, 4, 300, "crowdbt-domain", n_categories=1, seed=6)
    st = m.structure(t, "crowdbt-domain", "category")
    wab = np.tile([4.0, 1.5], (t.n_workers, 1))
    fit = ext.fit_ext_em(st, wab, mu0=0.2, sigma0=1.3, tol=1e-8)
    w, lo = t.winner_loser()
    data = Rankings(t.items, t.workers, np.stack([w, lo]), np.full(t.n_pairs, 2), t.worker)
    ref = fit_crowdbt_em(data, Priors(data.workers, wab, mu0=0.2, sigma0=1.3), tol=1e-8)
    np.testing.assert_allclose(fit.mu, ref.mu, atol=1e-6)
    order = [st.groups.index(f"{wk}|c0") for wk in data.workers]
    np.testing.assert_allclose(fit.eta[order], ref.eta, atol=1e-6)
    np.testing.assert_allclose(fit.sd**2, ref.sigma2, rtol=1e-5)


def test_em_recovers_simulated_bias_and_scores():
    st, truth = _st("crowdbt-bias", n_items=8, n_workers=5, n_pairs=1500, seed=7)
    fit = ext.fit_ext_em(st, np.tile([4.0, 1.5], (st.n_workers, 1)))
    assert fit.converged
    assert np.corrcoef(fit.mu, truth["lambda"])[0, 1] > 0.95
    z = (fit.beta - truth["beta"]) / fit.beta_sd
    assert np.all(np.abs(z) < 3.5), z
    # ignoring the bias is worse for the biased workers' data: the bias model's likelihood
    # at its MAP beats the no-bias model's by a clear margin
    st0 = m.Structure("crowdbt-domain", st.items, st.workers, st.groups, st.first, st.second,
                      st.sign, st.worker, st.group, st.group_worker, False)
    fit0 = ext.fit_ext_em(st0, np.tile([4.0, 1.5], (st.n_workers, 1)))
    assert fit.objective - fit0.objective > 10


def test_em_recovers_domain_reliability():
    # accuracies spread over (0.3, 1): mostly truthful groups fix the orientation (the
    # model is symmetric under λ → −λ, η → 1 − η), so a flat-ish prior finds the low ones.
    # The accuracies trade off against the scale of λ (a lower η with larger gaps explains
    # the data almost as well), so single ones can be off by ~0.15 with 10 items; their
    # order across groups is what the data pin down
    t, truth = m.simulate(10, 3, 3000, "crowdbt-domain", n_categories=2, eta_ab=(4.0, 1.5),
                          seed=9)
    st = m.structure(t, "crowdbt-domain", "category")
    assert st.n_groups == 6
    fit = ext.fit_ext_em(st, np.tile([1.5, 1.5], (st.n_workers, 1)))
    true = m.true_group_eta(st, truth)
    assert np.max(np.abs(fit.eta - true)) < 0.1, np.c_[fit.eta, true]
    assert np.corrcoef(fit.eta, true)[0, 1] > 0.95
    assert np.corrcoef(fit.mu, truth["lambda"])[0, 1] > 0.95


def test_em_refuses_priors_below_one():
    st, _ = _st("crowdbt-bias", n_pairs=30)
    with pytest.raises(DataError, match="a, b >= 1"):
        ext.fit_ext_em(st, np.tile([0.5, 1.0], (st.n_workers, 1)))


def _point(st, seed=9):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=st.n_items), rng.uniform(0.1, 0.9, st.n_groups),
            rng.normal(size=st.n_workers) if st.bias else None)


def _reference_joint(st, wab, lam, eta, beta, mu0, s0, bsd):
    ab = m.group_beta(st, wab)
    out = (m.loglik(st, lam, eta, beta).sum() + stats.norm(mu0, s0).logpdf(lam).sum()
           + stats.beta(ab[:, 0], ab[:, 1]).logpdf(eta).sum())
    return out + (stats.norm(0, bsd).logpdf(beta).sum() if st.bias else 0.0)


@pytest.mark.parametrize("variant", m.VARIANTS)
def test_numpyro_log_density_is_the_reference(variant):
    import jax
    from numpyro.infer.util import log_density

    st, _ = _st(variant, n_pairs=80)
    wab = np.tile([3.0, 1.2], (st.n_workers, 1))
    lam, eta, beta = _point(st)
    params = {"lambda": lam, "eta": eta} | ({"beta": beta} if st.bias else {})
    with jax.enable_x64(True):
        got, _ = log_density(m.numpyro_model(st, wab, 0.3, 1.4, 0.7), (), {}, params)
    want = _reference_joint(st, wab, lam, eta, beta, 0.3, 1.4, 0.7)
    assert float(got) == pytest.approx(want, rel=1e-9)


@pytest.mark.parametrize("variant", m.VARIANTS)
def test_pymc_log_density_is_the_reference(variant):
    from scipy.special import logit

    st, _ = _st(variant, n_pairs=80)
    wab = np.tile([3.0, 1.2], (st.n_workers, 1))
    lam, eta, beta = _point(st)
    model = m.pymc_model(st, wab, 0.3, 1.4, 0.7)
    f = model.compile_logp(jacobian=False)
    point = {"lambda": lam, "eta_logodds__": logit(eta)} | ({"beta": beta} if st.bias else {})
    want = _reference_joint(st, wab, lam, eta, beta, 0.3, 1.4, 0.7)
    assert float(f(point)) == pytest.approx(want, rel=1e-9)


def test_registry_names_the_pair_table_models_functions():
    from crowdrank.models.registry import MODELS, PAIR_MODELS, PAIR_TABLE, REGISTRY
    assert set(PAIR_MODELS) == {"crowdbt-bias", "crowdbt-domain", "contextual-bt"}
    assert not set(PAIR_MODELS) & set(MODELS)       # the ranking layers do not apply
    from crowdrank.inference.batch.pair_fits import pair_fit
    for name, spec in PAIR_TABLE.items():
        assert spec.data == "pair-table" and callable(spec.reference_loglik())
        for role in ("table_simulate", "numpyro_program", "pymc_program"):
            assert callable(spec.fn(role))
        assert callable(pair_fit(name))          # registered on the inference side
        # every function the entry names lives in models/ (models import no inference)
        for role in ("reference", "table_simulate", "numpyro_program", "pymc_program"):
            assert getattr(spec, role).startswith("crowdrank.models.")
    assert all(spec.data == "rankings" for spec in REGISTRY.values())
    assert PAIR_TABLE["crowdbt-bias"].reference_loglik() is m.loglik


def test_cli_fits_both_extensions_by_em(tmp_path):
    import pandas as pd

    from crowdrank.reports.cli import main
    t, _ = m.simulate(5, 3, 200, "crowdbt-domain", seed=10)
    f = write_pair_table(t, tmp_path / "dom.csv", {"topic": t.extra["category"]})
    assert main(["fit", str(f), "--model", "crowdbt-domain", "--method", "map",
                 "--category", "topic", "--out", str(tmp_path / "d")]) == 0
    g = pd.read_csv(tmp_path / "d" / "groups.csv")
    assert len(g) == len({(w, c) for w, c in zip(t.worker, t.extra["category"])})
    assert set(g.columns) >= {"group", "worker", "eta", "a", "b"}
    t, _ = m.simulate(5, 3, 200, "crowdbt-bias", seed=10)
    f = write_pair_table(t, tmp_path / "bias.csv")
    assert main(["fit", str(f), "--model", "crowdbt-bias", "--method", "map",
                 "--out", str(tmp_path / "b")]) == 0
    g = pd.read_csv(tmp_path / "b" / "groups.csv")
    assert "beta" in g and len(g) == 3
    assert len(pd.read_csv(tmp_path / "b" / "items.csv")) == 5
    assert main(["fit", str(f), "--model", "crowdbt-domain", "--method", "map",
                 "--out", str(tmp_path / "x")]) == 2       # no --category: a usage error


def test_cli_reads_per_worker_beta_priors(tmp_path):
    import pandas as pd

    from crowdrank.reports.cli import main
    t, _ = m.simulate(4, 2, 120, "crowdbt-domain", seed=14)
    f = write_pair_table(t, tmp_path / "dom.csv", {"topic": t.extra["category"]})
    pri = tmp_path / "prior.csv"
    pri.write_text("worker,a,b\nw0,3,1.5\nw1,7,2\n")
    assert main(["fit", str(f), "--model", "crowdbt-domain", "--category", "topic",
                 "--method", "map", "--worker-prior-file", str(pri),
                 "--out", str(tmp_path / "o")]) == 0
    g = pd.read_csv(tmp_path / "o" / "groups.csv")
    n = pd.Series([f"{t.workers[w]}|{c}" for w, c in zip(t.worker, t.extra["category"])]
                  ).value_counts()
    # the Beta of the responsibilities adds each group's pairs to its worker's prior
    prior = {"w0": 3 + 1.5, "w1": 7 + 2}
    for _, row in g.iterrows():
        assert row.a + row.b == pytest.approx(prior[row.worker] + n[row.group])
    pri.write_text("worker,a,b\nw0,3,1.5\n")
    assert main(["fit", str(f), "--model", "crowdbt-domain", "--category", "topic",
                 "--method", "map", "--worker-prior-file", str(pri),
                 "--out", str(tmp_path / "o2")]) == 2      # w1 has no prior: an error


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["numpyro", "pymc"])
@pytest.mark.parametrize("variant", m.VARIANTS)
def test_em_agrees_with_nuts(variant, backend):
    """Audited against each other on a small simulated set (5 items, 3 workers, 400
    pairs; measured: λ and β |z| ≤ 0.5, sd ratios 0.76-1.0). Tolerances: every item score's
    and bias's EM estimate within 0.6 NUTS sds of the posterior mean and Laplace's sd
    within [0.7, 1.25] of NUTS's. Accuracies: the EM mode is within 1.5 NUTS sds of the
    mean (a skewed posterior: mode ≠ mean); the Beta of the responsibilities — the
    complete-data posterior, λ taken as known — is overconfident (sd ratio measured
    0.28-0.56), and the joint Laplace over (λ, β, η) corrects it (median sd ratio
    within 0.35 of 1, closer to 1 than the Beta's)."""
    from crowdrank.validation.pipelines.pair_audit import audit_crowdbt_ext

    st, truth = _st(variant, n_items=5, n_workers=3, n_pairs=400, seed=11)
    wab = np.tile([4.0, 1.5], (st.n_workers, 1))
    rep = audit_crowdbt_ext(st, wab, backend=backend,
                            nuts_kw={"chains": 2, "tune": 400, "draws": 500, "seed": 1})
    assert rep["nuts"]["max_r_hat"] < 1.05
    fam = rep["families"]
    for name in ["lambda"] + (["beta"] if st.bias else []):
        p = fam[name]["parameters"]
        assert np.max(np.abs(p["z"])) < 0.6, (name, p["z"])
        assert 0.7 < np.min(p["sd_ratio"]) and np.max(p["sd_ratio"]) < 1.25, p["sd_ratio"]
    assert np.max(np.abs(fam["eta_joint"]["parameters"]["z"])) < 1.5
    beta_ratio = np.median(fam["eta"]["parameters"]["sd_ratio"])
    joint_ratio = np.median(fam["eta_joint"]["parameters"]["sd_ratio"])
    assert beta_ratio < 0.7
    assert abs(joint_ratio - 1) < 0.35 and abs(joint_ratio - 1) < abs(beta_ratio - 1)
    # and NUTS recovers the simulated truth: centred scores, biases, accuracies
    lam = fam["lambda"]["parameters"]
    m_l, s_l = np.asarray(lam["mcmc_mean"]), np.asarray(lam["mcmc_sd"])
    err = (m_l - m_l.mean()) - (truth["lambda"] - truth["lambda"].mean())
    assert np.all(np.abs(err) < 3.5 * s_l), (err, s_l)
    checks = [("eta", m.true_group_eta(st, truth))]
    if st.bias:
        checks.append(("beta", truth["beta"]))
    for name, true in checks:
        p = fam[name]["parameters"]
        z = (np.asarray(p["mcmc_mean"]) - true) / np.asarray(p["mcmc_sd"])
        assert np.all(np.abs(z) < 3.5), (name, z)


@pytest.mark.slow
def test_audit_cli_writes_the_comparison(tmp_path):
    import json

    import pandas as pd

    from crowdrank.reports.cli import main
    t, _ = m.simulate(4, 2, 200, "crowdbt-bias", seed=12)
    f = write_pair_table(t, tmp_path / "bias.csv")
    out = tmp_path / "a"
    # PyMC here: the cheaper back-end on this tiny model (NumPyro's compile dominates)
    assert main(["audit", str(f), "--model", "crowdbt-bias", "--approx", "em",
                 "--backend", "pymc",
                 "--eta-beta", "4,1.5", "--chains", "2", "--tune", "100", "--draws", "100",
                 "--posterior-sbc", "0", "--out", str(out)]) == 0
    rep = json.loads((out / "metrics.json").read_text())
    assert set(rep["families"]) >= {"lambda", "eta", "beta", "eta_joint"}
    par = pd.read_csv(out / "parameters.csv")
    assert len(par[par.family == "lambda"]) == 4 and len(par[par.family == "beta"]) == 2
    assert main(["audit", str(f), "--model", "crowdbt-bias", "--approx", "online",
                 "--out", str(out)]) == 2

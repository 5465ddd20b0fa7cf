"""EP refinement of the online updates (inference.online.ep) and Gauss–Hermite moment
matching (``taylor="quadrature"``).

Oracles: the one-pass methods themselves (EP's first pass must *be* them, bit for bit; a
one-ranking EP's fixed point is the one-pass update), the exact posterior of a tiny COUPLE
model by self-normalised importance sampling from the prior (brute force, no
approximation but Monte Carlo error), and Monte Carlo for the quadrature's expectations.
"""

from __future__ import annotations

import numpy as np
import pytest

from crowdrank.inference.online import fit_online, gbmm
from crowdrank.inference.online.ep import converged, ep_init, ep_pass, fit_ep
from crowdrank.models.errors import UsageError
from crowdrank.models.priors import Priors, build_priors
from crowdrank.models.registry import get as get_model
from crowdrank.models.simulate import simulate

MODELS = ("couple", "crowdbt", "pl", "bt")


@pytest.fixture(scope="module")
def small():
    return simulate("couple", n_items=12, n_workers=3, tasks_per_worker=30, kmax=4, seed=5,
                    setting="amateur").rankings


def _priors(data, model):
    return get_model(model).worker_priors(build_priors(data), data)


@pytest.mark.parametrize("model", MODELS)
def test_first_pass_is_the_one_pass_update_bit_for_bit(small, model):
    pri = _priors(small, model)
    for order in ("file", "shuffle"):
        a = fit_online(small, model, pri, order=order, seed=3, progress=False)
        e = fit_ep(small, model, pri, passes=1, order=order, seed=3, progress=False)
        assert np.array_equal(a.mu, e.mu) and np.array_equal(a.sigma2, e.sigma2)
        if a.alpha is not None:
            assert np.array_equal(a.alpha, e.alpha)
        assert e.algorithm == "ep-" + a.algorithm
        assert e.options["ep"]["passes_run"] == 1


def test_one_ranking_ep_fixed_point_is_the_one_pass_update(small):
    """One unit: its cavity is the prior again in every pass. (CrowdBT's unit is a
    rank-broken pair, so it gets a ranking of two.)"""
    three = small.subset(np.array([4]))
    pair = small.subset(np.array([int(np.flatnonzero(small.lengths == 2)[0])]))
    assert three.lengths[0] == 3
    for model in MODELS:
        one = pair if model == "crowdbt" else three
        pri = _priors(one, model)
        a = fit_online(one, model, pri, progress=False)
        for damping in (0.0, 0.5):
            e = fit_ep(one, model, pri, passes=6, damping=damping, tol=1e-12, progress=False)
            np.testing.assert_allclose(e.mu, a.mu, rtol=0, atol=1e-12)
            np.testing.assert_allclose(e.sigma2, a.sigma2, rtol=1e-12)
            if a.alpha is not None:
                np.testing.assert_allclose(e.alpha, a.alpha, rtol=1e-12)
            assert e.options["ep"]["converged"]


@pytest.mark.parametrize("model", MODELS)
def test_deterministic_given_order_and_seed(small, model):
    pri = _priors(small, model)
    a = fit_ep(small, model, pri, passes=3, order="shuffle", seed=7, progress=False)
    b = fit_ep(small, model, pri, passes=3, order="shuffle", seed=7, progress=False)
    c = fit_ep(small, model, pri, passes=3, order="shuffle", seed=8, progress=False)
    assert np.array_equal(a.mu, b.mu) and np.array_equal(a.sigma2, b.sigma2)
    assert not np.array_equal(a.mu, c.mu)


def test_per_pass_log_and_convergence(small):
    pri = _priors(small, "couple")
    seen = []
    e = fit_ep(small, "couple", pri, passes=40, damping=0.3, tol=1e-4, progress=False,
               callback=seen.append)
    log = e.options["ep"]["per_pass"]
    assert log == seen and [x["pass"] for x in log] == list(range(1, len(log) + 1))
    assert log[0]["damping"] == 0.0 and all(x["damping"] == 0.3 for x in log[1:])
    assert e.options["ep"]["converged"] and converged(log[-1], 1e-4)
    assert len(log) < 40 and not converged(log[-2], 1e-4)
    # the changes shrink: the last pass moves far less than the second
    assert log[-1]["max_dmu_sd"] < 0.05 * log[1]["max_dmu_sd"]
    # the posterior.json schema round-trips, with the EP log
    from crowdrank.inference.online import OnlinePosterior
    back = OnlinePosterior.from_dict(e.to_dict())
    assert np.array_equal(back.mu, e.mu) and back.options["ep"]["passes_run"] == len(log)


def test_improper_cavities_are_skipped_and_counted(small):
    pri = _priors(small, "couple")
    st = ep_init(small, "couple", pri)
    seq = np.arange(small.n_rankings)
    ep_pass(st, seq)
    # make one unit's stored site claim more precision than the whole approximation holds
    it = st.ordr[: st.lengths[0], 0]
    st.site_tau[0, 0] = 2.0 / st.post.sigma2[it[0]]
    st.site_alpha[1, 0] = 10.0 * st.post.alpha[st.wk[1], 0]
    before = st.site_tau[0].copy(), st.site_alpha[1].copy()
    entry = ep_pass(st, seq, damping=0.5)
    assert entry["improper_cavities"] == 2
    assert np.array_equal(st.site_tau[0], before[0])       # kept as it was
    assert np.array_equal(st.site_alpha[1], before[1])
    assert np.all(st.post.sigma2 > 0) and np.all(st.post.alpha > 0)


def test_bad_options_are_usage_errors(small):
    pri = _priors(small, "couple")
    for kw in ({"damping": 1.0}, {"damping": -0.1}, {"passes": 0}, {"tol": 0.0}):
        with pytest.raises(UsageError):
            fit_ep(small, "couple", pri, progress=False, **kw)
    with pytest.raises(UsageError, match="tau"):
        fit_ep(small, "pl", _priors(small, "pl"), wl_params={"tau": 0.1}, progress=False)


# ------------------------------------------------------------------ exact posterior
def couple_exact(data, alpha0, M=400_000, seed=0):
    """Posterior means/sds of λ (prior N(0, 1)) and E[η_w^1] by self-normalised
    importance sampling from the prior, the COUPLE likelihood written out here
    (Eq. 3–4 of [Pan18]: a stage is ``Σ_t η̄_t softmax(λ_c)_t``)."""
    rng = np.random.default_rng(seed)
    lam = rng.standard_normal((M, data.n_items))
    eta = np.stack([rng.dirichlet(alpha0[w], size=M) for w in range(data.n_workers)], 1)
    logw = np.zeros(M)
    for n in range(data.n_rankings):
        k, w = int(data.lengths[n]), int(data.worker[n])
        r = data.order[:k, n]
        for s in range(k - 1):
            x = lam[:, r[s:]]
            x = np.exp(x - x.max(1, keepdims=True))
            p = x / x.sum(1, keepdims=True)
            eb = eta[:, w, : k - s]
            logw += np.log(np.sum(eb / eb.sum(1, keepdims=True) * p, 1))
    wt = np.exp(logw - logw.max())
    wt /= wt.sum()
    m = wt @ lam
    return m, np.sqrt(wt @ (lam - m) ** 2), 1.0 / np.sum(wt**2)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_ep_is_closer_to_the_exact_posterior_than_one_pass(seed):
    """Four items, one worker whose η is nearly known (concentrated Dirichlet), 40 rankings
    of three: the exact posterior of λ by importance sampling. EP's means are closer to it
    than the one-pass update's; EP over quadrature moment matching (``score_alpha="prior"``,
    the exact tilted distribution of a stage) is the closest, within 0.15 posterior sd."""
    d = simulate("couple", n_items=4, n_workers=1, tasks_per_worker=40, kmax=3, seed=seed,
                 setting="expert").rankings
    a0 = np.tile(200.0 * np.array([0.7, 0.2, 0.1]), (1, 1))
    pri = Priors(workers=list(d.workers), alpha=a0, mu0=0.0, sigma0=1.0, spec="test")
    m, sd, ess = couple_exact(d, a0)
    assert ess > 10_000

    def err(post):
        return float(np.max(np.abs(post.mu - m) / sd))

    adf = err(fit_online(d, "couple", pri, progress=False))
    ep = err(fit_ep(d, "couple", pri, passes=50, tol=1e-6, progress=False))
    adf_q = err(fit_online(d, "couple", pri, taylor="quadrature", score_alpha="prior",
                           progress=False))
    ep_q = fit_ep(d, "couple", pri, taylor="quadrature", score_alpha="prior", passes=50,
                  tol=1e-6, progress=False)
    assert ep < 0.6 * adf
    assert err(ep_q) < 0.15 and err(ep_q) < 0.5 * min(adf, adf_q)
    # the sds move towards the exact ones as well (mean-field still misses correlation)
    sdr_adf = np.sqrt(fit_online(d, "couple", pri, progress=False).sigma2) / sd
    sdr_epq = np.sqrt(ep_q.sigma2) / sd
    assert np.median(np.abs(np.log(sdr_epq))) < np.median(np.abs(np.log(sdr_adf)))


# ------------------------------------------------------------------ quadrature
def test_quadrature_moments_match_monte_carlo():
    rng = np.random.default_rng(11)
    mu, s2 = [0.3, -0.5, 0.9, 0.1], [0.8, 0.5, 1.1, 0.3]
    A, B, C = gbmm.quadrature_moments(mu, s2)
    z = rng.standard_normal((400_000, 4))
    x = np.array(mu) + np.sqrt(s2) * z
    e = np.exp(x - x.max(1, keepdims=True))
    p = e / e.sum(1, keepdims=True)
    np.testing.assert_allclose(A, p.mean(0), atol=3e-3)
    np.testing.assert_allclose(B, (p[:, :, None] * z[:, None, :]).mean(0), atol=4e-3)
    np.testing.assert_allclose(C, (p[:, :, None] * (z * z - 1)[:, None, :]).mean(0),
                               atol=6e-3)
    assert A.sum() == pytest.approx(1.0, abs=1e-12)


def test_quadrature_stage_is_the_tilted_moments_by_monte_carlo():
    """With ``score_alpha="prior"`` the quadrature score step returns the mean and variance
    of ``N(λ; μ, σ²) Σ_t a_t softmax(λ)_t`` (normalised), estimated here by weighting
    Gaussian draws."""
    rng = np.random.default_rng(12)
    mu, s2, a = [0.3, -0.5, 0.9], [0.8, 0.5, 1.1], [3.0, 1.5, 0.5]
    m_new, s_new, _ = gbmm.stage_update(mu, s2, a, taylor="quadrature", score_alpha="prior")
    x = np.array(mu) + np.sqrt(s2) * rng.standard_normal((2_000_000, 3))
    e = np.exp(x - x.max(1, keepdims=True))
    f = (e / e.sum(1, keepdims=True)) @ np.array(a)
    wm = (f[:, None] * x).sum(0) / f.sum()
    wv = (f[:, None] * (x - wm) ** 2).sum(0) / f.sum()
    np.testing.assert_allclose(m_new, wm, atol=3e-3)
    np.testing.assert_allclose(s_new, wv, rtol=5e-3)
    # the paper's plug-in update is visibly further from the tilted moments
    m_p, _s_p, _ = gbmm.stage_update(mu, s2, a, taylor="paper", score_alpha="prior")
    assert np.max(np.abs(np.subtract(m_p, wm))) > 10 * np.max(np.abs(np.subtract(m_new, wm)))


def test_quadrature_points_rule():
    assert [gbmm.quad_points(m) for m in (2, 3, 4, 5, 6, 7, 8, 9, 12)] == [
        16, 16, 9, 6, 4, 3, 3, 2, 2]
    z, w = gbmm.gauss_hermite(9)
    assert w.sum() == pytest.approx(1.0)
    assert np.dot(w, z**4) == pytest.approx(3.0)          # E[Z^4] exactly


def test_quadrature_kernel_equals_spec_and_default_is_unchanged(small):
    from crowdrank.inference.online.gbmm import gbmm_pass_python

    pri = _priors(small, "couple")
    post = fit_online(small, "couple", pri, taylor="quadrature", progress=False)
    st = fit_online(small, "couple", pri, passes=0 + 1, progress=False)   # default
    mu, s2 = np.full(small.n_items, 0.0), np.full(small.n_items, 1.0)
    alpha = pri.for_data(small, K=small.K).alpha[:, : small.K].copy()
    gbmm_pass_python(small.order, small.lengths, small.worker, range(small.n_rankings), mu,
                     s2, alpha, taylor="quadrature")
    np.testing.assert_allclose(post.mu, mu, rtol=0, atol=1e-11)
    np.testing.assert_allclose(post.sigma2, s2, rtol=1e-11)
    np.testing.assert_allclose(post.alpha, alpha, rtol=1e-11)
    assert not np.allclose(post.mu, st.mu)


# ------------------------------------------------------------------ command line
def test_cli_fit_method_ep_writes_the_same_posterior(small, tmp_path, capsys):
    from crowdrank.inference.online import OnlinePosterior
    from crowdrank.models.io import write_rankings
    from crowdrank.reports.cli import main

    path = write_rankings(small, tmp_path / "rk.csv")
    for model, extra in (("couple", ["--taylor", "quadrature"]), ("crowdbt", [])):
        out = tmp_path / f"ep-{model}"
        rc = main(["fit", str(path), "--model", model, "--method", "ep", "--passes", "4",
                   "--damping", "0.3", "--no-progress", "--out", str(out), *extra])
        assert rc == 0
        got = OnlinePosterior.from_json(out / "posterior.json")
        from crowdrank.models.io import read_data
        data, _ = read_data(str(path))
        want = fit_ep(data, model, _priors(data, model), passes=4, damping=0.3,
                      progress=False, **({"taylor": "quadrature"} if extra else {}))
        assert np.array_equal(got.mu, want.mu) and np.array_equal(got.sigma2, want.sigma2)
        assert got.options["ep"]["damping"] == 0.3 and len(got.options["ep"]["per_pass"]) == 4
        assert (out / "items.csv").is_file()
    assert "pass(es)" in capsys.readouterr().out
    assert main(["fit", str(path), "--method", "ep", "--damping", "1", "--out",
                 str(tmp_path / "bad")]) != 0


@pytest.mark.parametrize("model", MODELS)
def test_numba_pass_equals_the_readable_pass(small, model):
    pri = _priors(small, model)
    a = ep_init(small, model, pri)
    b = ep_init(small, model, pri)
    seq = np.random.default_rng(0).permutation(small.n_rankings)
    if a.pairwise:
        from crowdrank.inference.online.api import pairs_sequence
        seq = pairs_sequence(small.lengths, seq)
    for damping in (0.5, 0.0, 0.3):
        ea = ep_pass(a, seq, damping)
        eb = ep_pass(b, seq, damping, python=True)
        assert ea["improper_cavities"] == eb["improper_cavities"]
        assert ea["clamped"] == eb["clamped"]
        np.testing.assert_allclose(a.post.mu, b.post.mu, rtol=0, atol=1e-12)
        np.testing.assert_allclose(a.post.sigma2, b.post.sigma2, rtol=1e-12)
        np.testing.assert_allclose(a.site_tau, b.site_tau, rtol=1e-12, atol=1e-12)
        if a.post.alpha is not None:
            np.testing.assert_allclose(a.post.alpha, b.post.alpha, rtol=1e-12)


@pytest.mark.parametrize("model", ("couple", "crowdbt"))
def test_undamped_ep_reaches_the_damped_fixed_point_in_fewer_passes(small, model):
    """Damping changes the path, not the fixed point: undamped and damped EP, each run to
    convergence, agree; and after 5 passes the undamped run is closer to that point than
    the damped one (why the study measures ep3/ep5 with damping 0). A damping that moved
    the fixed point, or an undamped pass that diverged, fails."""
    pri = _priors(small, model)
    a = fit_ep(small, model, pri, passes=200, damping=0.0, tol=1e-10, progress=False)
    b = fit_ep(small, model, pri, passes=400, damping=0.5, tol=1e-10, progress=False)
    assert a.options["ep"]["converged"] and b.options["ep"]["converged"]
    assert a.options["ep"]["improper_cavities"] == 0
    np.testing.assert_allclose(a.mu, b.mu, rtol=0, atol=1e-6)
    np.testing.assert_allclose(a.sigma2, b.sigma2, rtol=1e-6)
    np.testing.assert_allclose(a.alpha, b.alpha, rtol=1e-5)

    def gap(q):
        return float(np.max(np.abs(q.mu - a.mu) / np.sqrt(a.sigma2)))
    u5 = fit_ep(small, model, pri, passes=5, damping=0.0, tol=1e-12, progress=False)
    d5 = fit_ep(small, model, pri, passes=5, damping=0.5, tol=1e-12, progress=False)
    assert gap(u5) < gap(d5)

"""EP with exact worker moments (``ep-exact``, inference.online.ep_exact).

Oracles, none of them the code under test: adaptive 2-D quadrature (SciPy ``dblquad``) of
a Dirichlet over the simplex; importance sampling from the prior (seeded, large, its
standard error from batch means) of the tilted distribution of one site and of the exact
posterior of tiny data; adaptive 1-D quadrature (SciPy ``quad``) of CrowdBT's tilted Beta
and Gaussian; and the readable specification for the numba loops.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate, stats
from scipy.special import expit, softmax

from crowdrank.inference import methods
from crowdrank.inference.online import ep_exact as X
from crowdrank.models.data import Rankings
from crowdrank.models.errors import UsageError
from crowdrank.models.priors import build_priors
from crowdrank.models.registry import get as get_model
from crowdrank.models.simulate import simulate


def _stage_like(lam, eta, order):
    """COUPLE's likelihood of one ranking (items ``order``, best first) at draws ``lam``
    ``(S, L)``, ``eta`` ``(S, K)``: ``Π_s Σ_t η̄_t softmax_t`` ([Pan18], Eq. 3-4)."""
    k = len(order)
    out = np.ones(lam.shape[0])
    for s in range(k - 1):
        p = softmax(lam[:, order[s:]], axis=1)
        e = eta[:, :k - s] / eta[:, :k - s].sum(1, keepdims=True)
        out *= (p * e).sum(1)
    return out


def _batches(est, n_batches=10):
    """Mean and standard error of ``est`` over batch means."""
    v = np.array(est)
    return v.mean(0), v.std(0, ddof=1) / np.sqrt(n_batches)


# ------------------------------------------------------------------ the simplex integral
def test_dirichlet_moments_against_adaptive_quadrature():
    a = np.array([2.5, 1.5, 1.2])
    M = {c: w for c, w in zip(X.combos(3), [0.3, 0.1, 0.05, 0.2, 0.15, 0.2])}
    Z, E1, E2 = X.dirichlet_product_moments(a, M)
    from scipy.special import gammaln
    lnorm = gammaln(a.sum()) - gammaln(a).sum()

    def pdf(x, y):
        return np.exp(lnorm + (a[0] - 1) * np.log(x) + (a[1] - 1) * np.log(y)
                      + (a[2] - 1) * np.log(1.0 - x - y))

    def like(x, y):                 # stage 1 over (η1, η2, η3), stage 2 over (η1, η2)/Σ
        eta = (x, y, 1.0 - x - y)
        return sum(M[c] * eta[c[0]] * eta[c[1]] / (x + y) for c in M)

    def integral(g):
        return integrate.dblquad(
            lambda y, x: pdf(x, y) * like(x, y) * g(x, y),
            0, 1, 0, lambda x: 1.0 - x, epsabs=1e-10, epsrel=1e-8)[0]
    z0 = integral(lambda x, y: 1.0)
    assert Z == pytest.approx(z0, rel=1e-6)
    for t, g in enumerate((lambda x, y: x, lambda x, y: y)):
        assert E1[t] == pytest.approx(integral(g) / z0, rel=1e-6)
        assert E2[t] == pytest.approx(integral(lambda x, y, g=g: g(x, y) ** 2) / z0, rel=1e-6)


# ------------------------------------------------------------------ one site
@pytest.mark.parametrize("a", [np.array([2.0, 0.7, 0.3, 0.1]),       # the paper's profile
                               np.array([1.2, 1.5, 0.9, 2.0])])
def test_couple_site_against_importance_sampling(a):
    """The site update on a cavity matches the tilted distribution's E[η̃_t], E[η̃_t²]
    (through Eq. 10) and, with ``scores="exact"``, its score means and variances."""
    mc, vc = np.array([0.3, -0.2, 0.5, 0.0]), np.array([0.5, 0.3, 0.8, 0.4])
    rng = np.random.default_rng(1)
    est = []
    for _ in range(10):
        lam = mc + np.sqrt(vc) * rng.standard_normal((200_000, 4))
        eta = rng.dirichlet(a, 200_000)
        w = _stage_like(lam, eta, [0, 1, 2, 3])
        w = w / w.sum()
        E1, E2 = w @ eta, w @ eta ** 2
        m = w @ lam
        est.append(np.concatenate([X.alpha_from_moments(E1, E2), m, w @ lam ** 2 - m ** 2]))
    mean, se = _batches(est)
    m_new, v_new, a_new = X.couple_site_python(mc, vc, a, scores="exact")
    got = np.concatenate([a_new, m_new, v_new])
    assert np.all(np.abs(got - mean) < 5 * se + 1e-4 * np.abs(mean)), (got, mean, se)
    _, _, a_ep = X.couple_site_python(mc, vc, a, scores="ep")
    np.testing.assert_array_equal(a_ep, a_new)       # the worker part is the same


def test_short_ranking_projection_against_importance_sampling():
    """A ranking of 2 items by a worker with K = 4: ``projection="full"`` is Eq. 10 on the
    tilted moments of the whole η (which the oracle draws), ``"sub"`` on those of
    ``η_{1..2}`` renormalised."""
    a = np.array([1.7, 0.6, 0.4, 0.3])
    mc, vc = np.array([0.4, -0.3]), np.array([0.6, 0.5])
    rng = np.random.default_rng(4)
    est = []
    for _ in range(10):
        lam = mc + np.sqrt(vc) * rng.standard_normal((200_000, 2))
        eta = rng.dirichlet(a, 200_000)
        w = _stage_like(lam, eta, [0, 1])
        w = w / w.sum()
        sub = eta[:, :2] / eta[:, :2].sum(1, keepdims=True)
        est.append(np.concatenate([X.alpha_from_moments(w @ eta, w @ eta ** 2)[:2],
                                   X.alpha_from_moments(w @ sub, w @ sub ** 2)]))
    mean, se = _batches(est)
    full = X.couple_site_python(mc, vc, a, projection="full")[2]
    sub = X.couple_site_python(mc, vc, a, projection="sub")[2]
    got = np.concatenate([full[:2], sub[:2]])
    assert np.all(np.abs(got - mean) < 5 * se + 1e-4 * np.abs(mean)), (got, mean, se)
    assert np.max(np.abs(full[:2] - sub[:2])) > 20 * se.max()   # the two differ here


def test_couple_site_short_ranking_keeps_the_other_entries():
    a = np.array([2.0, 0.7, 0.3, 0.1])
    _, _, a_new = X.couple_site_python(np.array([0.2, -0.1]), np.array([0.4, 0.6]), a)
    np.testing.assert_array_equal(a_new[2:], a[2:])
    assert not np.allclose(a_new[:2], a[:2])


# ------------------------------------------------------------------ the numba twin
def _tiny(model="couple", n=60):
    d = simulate("couple", n_items=10, n_workers=3, tasks_per_worker=n // 3, kmax=4, seed=3,
                 setting=["expert", "amateur", "malicious"]).rankings
    return d, get_model(model).worker_priors(build_priors(d), d)


@pytest.mark.parametrize("model,scores,projection", [
    ("couple", "ep", "full"), ("couple", "exact", "full"), ("couple", "ep", "sub"),
    ("crowdbt", "ep", "full")])
def test_numba_pass_equals_specification(model, scores, projection):
    d, pri = _tiny(model)
    st = [X.ep_exact_init(d, model, pri) for _ in range(2)]
    for python, s in zip((False, True), st):
        seq = np.arange(s.src.n_rankings)
        for _ in range(3):
            X.ep_exact_pass(s, seq, 0.3, scores=scores, projection=projection,
                            python=python)
    a, b = st
    for x, y in ((a.post.mu, b.post.mu), (a.post.sigma2, b.post.sigma2),
                 (a.post.alpha, b.post.alpha), (a.site_alpha, b.site_alpha),
                 (a.site_tau, b.site_tau)):
        np.testing.assert_allclose(x, y, rtol=1e-9, atol=1e-11)


# ------------------------------------------------------------------ whole fits
def _exact_posterior(d, post0, draws=200_000, batches=10, seed=0):
    """Importance sampling from the prior ``post0`` (items N(μ, σ²), workers Dir(α)):
    batch estimates of the centred score means and of every worker's E[η]."""
    rng = np.random.default_rng(seed)
    L, W = len(post0.mu), post0.alpha.shape[0]
    out = []
    for _ in range(batches):
        lam = post0.mu + np.sqrt(post0.sigma2) * rng.standard_normal((draws, L))
        eta = np.stack([rng.dirichlet(post0.alpha[w], draws) for w in range(W)], 1)
        logw = np.zeros(draws)
        for n in range(d.n_rankings):
            k = int(d.lengths[n])
            logw += np.log(_stage_like(lam, eta[:, d.worker[n]], d.order[:k, n]))
        w = np.exp(logw - logw.max())
        w /= w.sum()
        cen = lam - lam.mean(1, keepdims=True)
        out.append(np.concatenate([w @ cen, np.sqrt(w @ cen ** 2 - (w @ cen) ** 2),
                                   np.einsum("s,swk->wk", w, eta).ravel()]))
    return _batches(out, batches)


def test_one_ranking_fit_is_the_exact_posterior():
    """With one site, EP's first pass is the exact tilted projection: the α it reports is
    Eq. 10 on the exact posterior's E[η_t], E[η_t²]."""
    d = Rankings.from_lists([["b", "a", "c"]], ["w"], items=["a", "b", "c"])
    pri = get_model("couple").worker_priors(build_priors(d), d)
    st = X.ep_exact_init(d, "couple", pri)
    post0 = st.post.copy()
    post = X.fit_ep_exact(d, "couple", pri, passes=1, scores="exact")
    rng = np.random.default_rng(2)
    est = []
    for _ in range(10):
        lam = post0.mu + np.sqrt(post0.sigma2) * rng.standard_normal((200_000, 3))
        eta = rng.dirichlet(post0.alpha[0], 200_000)
        w = _stage_like(lam, eta, d.order[:3, 0])
        w = w / w.sum()
        m = w @ lam
        est.append(np.concatenate([X.alpha_from_moments(w @ eta, w @ eta ** 2), m,
                                   w @ lam ** 2 - m ** 2]))
    mean, se = _batches(est)
    got = np.concatenate([post.alpha[0], post.mu, post.sigma2])
    assert np.all(np.abs(got - mean) < 5 * se + 1e-4 * np.abs(mean)), (got, mean, se)


@pytest.mark.parametrize("scores,z_max,eta_max", [("ep", 0.5, 0.07), ("exact", 0.15, 0.045)])
def test_tiny_fit_close_to_the_exact_posterior(scores, z_max, eta_max):
    """3 items, 2 workers, 6 rankings: the EP fixed point against importance sampling.
    EP is not exact; the bounds are what a correct site update reaches here, with room
    (measured: with EP's score part max |z| 0.40 and E[η_t] off by ≤ 0.049 — EP's own
    Taylor worker part is off by 0.12; with the exact score part 0.058 and 0.029)."""
    d = Rankings.from_lists(
        [["a", "b", "c"], ["a", "c", "b"], ["b", "a"], ["c", "b", "a"], ["c", "a"],
         ["b", "c", "a"]], ["u", "u", "u", "v", "v", "v"], items=["a", "b", "c"])
    pri = get_model("couple").worker_priors(build_priors(d), d)
    post0 = X.ep_exact_init(d, "couple", pri).post
    mean, se = _exact_posterior(d, post0)
    assert np.all(se < 0.002)                   # the oracle is sharp enough for the bounds
    post = X.fit_ep_exact(d, "couple", pri, passes=50, tol=1e-8, scores=scores)
    assert post.options["ep"]["converged"]
    cm, csd = mean[:3], mean[3:6]
    z = (post.mu - post.mu.mean() - cm) / csd
    assert np.max(np.abs(z)) < z_max, z
    eta = post.alpha / post.alpha.sum(1, keepdims=True)
    assert np.max(np.abs(eta.ravel() - mean[6:])) < eta_max, (eta, mean[6:])


# ------------------------------------------------------------------ CrowdBT
@pytest.mark.parametrize("a,b,c1", [(4.0, 1.5, 0.7), (0.6, 0.3, 0.2), (9.0, 1.0, 0.95)])
def test_crowdbt_worker_against_adaptive_quadrature(a, b, c1):
    def mom(j):                     # QUADPACK's algebraic weight x^(a−1) (1−x)^(b−1)
        return integrate.quad(lambda x: (x * c1 + (1 - x) * (1 - c1)) * x ** j, 0, 1,
                              weight="alg", wvar=(a - 1.0, b - 1.0), epsabs=1e-14,
                              epsrel=1e-12)[0]
    z = mom(0)
    E1, E2 = mom(1) / z, mom(2) / z
    s = (E1 - E2) / (E2 - E1 * E1)
    got = X.crowdbt_worker_python(a, b, c1)
    assert got == pytest.approx((E1 * s, (1 - E1) * s), rel=1e-8)


def test_crowdbt_one_pair_fit_against_quadrature():
    """One reported pair: the fit's Beta is the exact tilted Beta's moment match, with
    ``c1 = E[σ(d)]`` by adaptive quadrature over the score difference."""
    d = Rankings.from_lists([["a", "b"]], ["w"], items=["a", "b"])
    pri = get_model("crowdbt").worker_priors(build_priors(d), d)
    post0 = X.ep_exact_init(d, "crowdbt", pri).post
    post = X.fit_ep_exact(d, "crowdbt", pri, passes=1)
    m = post0.mu[0] - post0.mu[1]
    v = post0.sigma2.sum()
    c1 = integrate.quad(lambda x: stats.norm.pdf(x, m, np.sqrt(v)) * expit(x),
                        -np.inf, np.inf, epsabs=1e-13)[0]
    a, b = post0.alpha[0]

    def mom(j):                     # QUADPACK's algebraic weight x^(a−1) (1−x)^(b−1)
        return integrate.quad(lambda x: (x * c1 + (1 - x) * (1 - c1)) * x ** j, 0, 1,
                              weight="alg", wvar=(a - 1.0, b - 1.0), epsabs=1e-14,
                              epsrel=1e-12)[0]
    E1, E2 = mom(1) / mom(0), mom(2) / mom(0)
    s = (E1 - E2) / (E2 - E1 * E1)
    np.testing.assert_allclose(post.alpha[0], [E1 * s, (1 - E1) * s], rtol=1e-8)


# ------------------------------------------------------------------ refusals, registry
def test_rankings_longer_than_four_are_refused():
    d = Rankings.from_lists([list("abcde"), list("edcba")], ["u", "v"])
    pri = get_model("couple").worker_priors(build_priors(d), d)
    with pytest.raises(UsageError, match="at most 4 items"):
        X.fit_ep_exact(d, "couple", pri)
    with pytest.raises(UsageError, match="couple and crowdbt"):
        X.fit_ep_exact(d, "pl", build_priors(d))
    with pytest.raises(UsageError, match="scores"):
        X.fit_ep_exact(d, "couple", pri, scores="taylor")


def test_registry_entry_fits_through_the_method_table():
    d, pri = _tiny()
    m = methods.get("ep-exact")
    assert m.fits("couple") and m.fits("crowdbt") and not m.fits("pl")
    post = m.run(d, "couple", pri, m.options(scores="exact", passes=3))
    assert post.method == "ep-exact"
    assert post.options["ep"]["worker_moments"] == "exact"
    assert np.all(np.isfinite(post.mu)) and np.all(post.alpha > 0)


def test_ep_passes_reaches_ep_exact():
    """An option set's ``ep_passes`` is ep-exact's ``passes`` too (the study's
    ``ep-exact passes=200`` row), not dropped as for the one-pass update."""
    from crowdrank.validation.pipelines.variants import variant_method

    assert variant_method({"method": "ep-exact", "ep_passes": "200"}) == \
        ("ep-exact", {"passes": 200})
    assert variant_method({"method": "online", "ep_passes": "200"}) == ("online", {})

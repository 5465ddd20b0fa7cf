"""Independent checks of the online update formulas.

- Eq. (9)-(10) against brute-force moments of ``η`` under ``Σ_t η_t R_t · Dir(α)`` by
  numerical integration (m = 2, 3) and by Monte Carlo (m = 4).
- The ``full`` Taylor ``R_t`` against the exact ``E[softmax]`` by Gauss–Hermite quadrature
  (error O(σ⁴)), and the paper's formula shown to be only first-order accurate.
- OnlineGBMM with k = 2, ``taylor="full"``, ``score_alpha="prior"`` is CrowdBT online.
- Eq. (11)-(12) equal the Weng–Lin/Stein formulas ``μ + σ² ∂log l``, ``σ²(1 + σ² ∂²log l)``
  with the derivatives taken by finite differences of the intermediate likelihood.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import integrate, special, stats

from crowdrank.inference.online import fit_online
from crowdrank.inference.online.crowdbt import pair_update
from crowdrank.inference.online.gbmm import (
    alpha_update,
    dirichlet_moments,
    expected_softmax,
    score_update,
    stage_update,
)
from crowdrank.models.data import Rankings
from crowdrank.models.priors import Priors
from crowdrank.models.simulate import simulate


def _tilted_moments_quad(a, R):
    """E[η_t], E[η_t²] under ∝ (Σ R_v η_v) Dir(a), by quadrature over the simplex.

    m = 2: adaptive quadrature against the Beta density. m >= 3: stick-breaking
    ``η_j = v_j Π_{i<j}(1 − v_i)``, ``v_j ~ Beta(a_j, Σ_{i>j} a_i)`` independent, and a
    tensor Gauss–Jacobi rule in the ``v_j``, exact here because the integrands are
    polynomials of degree <= 3 in each ``v_j``.
    """
    m = len(a)
    if m == 2:
        def mom(f):
            return integrate.quad(lambda x: f(np.array([x, 1 - x])) * (R[0] * x + R[1] * (1 - x))
                                  * stats.beta.pdf(x, a[0], a[1]), 0, 1, epsabs=1e-13,
                                  epsrel=1e-12, limit=200)[0]
        Z = mom(lambda e: 1.0)
        return (np.array([mom(lambda e, t=t: e[t]) / Z for t in range(m)]),
                np.array([mom(lambda e, t=t: e[t] ** 2) / Z for t in range(m)]))
    nodes, weights = [], []
    for j in range(m - 1):
        rest = float(np.sum(a[j + 1:]))
        t, w = special.roots_jacobi(6, rest - 1.0, a[j] - 1.0)   # (1-t)^α (1+t)^β
        nodes.append((1 + t) / 2)
        weights.append(w / w.sum())
    Z, S1, S2 = 0.0, np.zeros(m), np.zeros(m)
    for idx in itertools.product(range(6), repeat=m - 1):
        v = np.array([nodes[j][i] for j, i in enumerate(idx)])
        wt = np.prod([weights[j][i] for j, i in enumerate(idx)])
        eta = np.empty(m)
        left = 1.0
        for j in range(m - 1):
            eta[j] = left * v[j]
            left *= 1 - v[j]
        eta[m - 1] = left
        lik = float(np.dot(R, eta))
        Z += wt * lik
        S1 += wt * lik * eta
        S2 += wt * lik * eta ** 2
    return S1 / Z, S2 / Z


@pytest.mark.parametrize("a,R", [
    ([2.0, 3.5], [0.7, 0.3]),
    ([1.2, 8.0], [0.05, 0.95]),
    ([1.5, 2.0, 4.0], [0.5, 0.3, 0.2]),
    ([3.0, 1.1, 1.4], [0.1, 0.6, 0.3]),
    ([0.3, 0.8, 0.05], [0.2, 0.2, 0.6]),
    ([5.0, 4.0, 1.0, 0.1], [0.1, 0.5, 0.3, 0.1]),
    ([1e-3, 2.0, 7.0, 0.5], [0.4, 0.3, 0.2, 0.1]),
])
def test_alpha_update_matches_numerical_integration(a, R):
    E1, E2 = _tilted_moments_quad(np.array(a), np.array(R))
    e1, e2 = dirichlet_moments(a, R)
    np.testing.assert_allclose(e1, E1, rtol=1e-7, atol=1e-14)
    np.testing.assert_allclose(e2, E2, rtol=1e-7, atol=1e-14)
    brute_alpha = (E1 - E2) * E1 / (E2 - E1 ** 2)          # Eq. (10) on the exact moments
    np.testing.assert_allclose(alpha_update(a, R), brute_alpha, rtol=1e-5)


def test_alpha_update_matches_monte_carlo_m4():
    rng = np.random.default_rng(0)
    a = np.array([5.0, 4.0, 1.0, 0.1])
    R = np.array([0.1, 0.5, 0.3, 0.1])
    eta = rng.dirichlet(a, size=2_000_000)
    w = eta @ R
    w /= w.sum()
    E1 = w @ eta
    E2 = w @ eta ** 2
    se = np.sqrt(w @ (eta - E1) ** 2 * np.sum(w ** 2))     # weighted-mean standard error
    e1, e2 = dirichlet_moments(list(a), list(R))
    assert np.all(np.abs(np.array(e1) - E1) < 5 * se + 1e-12)
    se2 = np.sqrt(w @ (eta ** 2 - E2) ** 2 * np.sum(w ** 2))
    assert np.all(np.abs(np.array(e2) - E2) < 5 * se2 + 1e-12)


def test_alpha_update_is_identity_without_information():
    """Equal R_t: the stage says nothing about η, so α must not move (exact algebra)."""
    a = [2.0, 0.7, 3.3, 1.0]
    np.testing.assert_allclose(alpha_update(a, [0.25] * 4), a, rtol=1e-10)


def _exact_expected_softmax(mu, s2, n=40):
    x, w = np.polynomial.hermite_e.hermegauss(n)
    w = w / w.sum()
    out = np.zeros(len(mu))
    for idx in itertools.product(range(n), repeat=len(mu)):
        lam = mu + np.sqrt(s2) * x[list(idx)]
        p = np.exp(lam - lam.max())
        out += np.prod(w[list(idx)]) * p / p.sum()
    return out


def test_full_taylor_is_second_order_and_paper_formula_is_not():
    mu = np.array([0.3, -0.2, 0.6])
    base = np.array([1.0, 0.5, 2.0])
    err = {"full": [], "paper": []}
    for h in (0.02, 0.01):
        s2 = base * h
        exact = _exact_expected_softmax(mu, s2)
        for v, errs in err.items():
            errs.append(np.max(np.abs(np.array(expected_softmax(list(mu), list(s2), v, 0.0))
                                      - exact)))
    # halving σ² divides an O(σ⁴) error by ~4 and an O(σ²) error by ~2
    assert 3.3 < err["full"][0] / err["full"][1] < 4.7
    assert 1.6 < err["paper"][0] / err["paper"][1] < 2.4
    assert err["full"][1] < 1e-4 < err["paper"][1]


def test_score_update_is_stein_update_of_intermediate_likelihood():
    """Eq. (11)-(12) = μ + σ² ∂log l/∂μ and σ²(1 + σ² ∂²log l/∂μ²), l = Σ a_t e_t/(S ψ)."""
    mu = np.array([0.4, -0.3, 1.1, 0.0])
    s2 = np.array([0.8, 0.3, 1.5, 0.05])
    a = np.array([3.0, 1.0, 0.5, 0.2])

    def logl(x):
        e = np.exp(x)
        return np.log(np.dot(a, e) / (a.sum() * e.sum()))

    h = 1e-4
    mu_new, s2_new = score_update(list(mu), list(s2), list(a), kappa=-np.inf)
    for t in range(4):
        d = np.zeros(4)
        d[t] = h
        g = (logl(mu + d) - logl(mu - d)) / (2 * h)
        H = (logl(mu + d) - 2 * logl(mu) + logl(mu - d)) / h ** 2
        assert mu_new[t] == pytest.approx(mu[t] + s2[t] * g, rel=1e-8, abs=1e-9)
        assert s2_new[t] == pytest.approx(s2[t] * (1 + s2[t] * H), rel=1e-6)


def test_gbmm_stage_k2_full_prior_equals_crowdbt_pair():
    rng = np.random.default_rng(1)
    for _ in range(500):
        mu = rng.normal(0, 3, 2)
        s2 = np.exp(rng.uniform(-6, 2, 2))
        ab = np.exp(rng.uniform(-3, 4, 2))
        m, v, al = stage_update(list(mu), list(s2), list(ab), taylor="full",
                                score_alpha="prior")
        mw, ml, sw, sl, a, b = pair_update(mu[0], mu[1], s2[0], s2[1], ab[0], ab[1])
        np.testing.assert_allclose(m, [mw, ml], rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose(v, [sw, sl], rtol=1e-12)
        np.testing.assert_allclose(al, [a, b], rtol=1e-9)


def test_onlinegbmm_k2_reproduces_crowdbt_online_pass():
    sim = simulate("crowdbt", n_items=25, n_workers=6, tasks_per_worker=60, seed=3,
                   setting="amateur")
    d = sim.rankings
    pri = Priors.geometric(d.workers, 2, a0=10, a=3)
    g = fit_online(d, "couple", pri, taylor="full", score_alpha="prior", progress=False)
    c = fit_online(d, "crowdbt", pri, progress=False)
    np.testing.assert_allclose(g.mu, c.mu, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(g.sigma2, c.sigma2, rtol=1e-9)
    np.testing.assert_allclose(g.alpha, c.alpha, rtol=1e-8)
    # and the default variants are genuinely different algorithms
    d2 = fit_online(d, "couple", pri, progress=False)
    assert np.max(np.abs(d2.mu - c.mu)) > 1e-6


def test_couple_with_perfect_worker_moves_like_pl_direction():
    """A confident expert prior: the winner's mean goes up, the loser's down."""
    d = Rankings.from_lists([["a", "b", "c"]], ["w"])
    pri = Priors.explicit({"w": [1e6, 1.0, 1.0]})
    p = fit_online(d, "couple", pri, progress=False)
    mu = dict(zip(p.items, p.mu))
    assert mu["a"] > 0 > mu["c"] and mu["a"] > mu["b"] > mu["c"]
    assert np.all(p.sigma2 < 1.0)

"""Per-parameter metrics against hand-computable and independently computed cases."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate, stats

from crowdrank.validation import metrics as M


# ------------------------------------------------------------------ closed-form KL
def _kl_quad(p, q, lo, hi):
    """KL(p ‖ q) by numerical integration: an independent check of the closed forms."""
    f = lambda x: p.pdf(x) * (p.logpdf(x) - q.logpdf(x))
    return integrate.quad(f, lo, hi, limit=200)[0]


def test_kl_normal_known_value_and_quadrature():
    # log(2) + (1 + 1) / 8 - 1/2, by hand
    assert M.kl_normal(0.0, 1.0, 1.0, 2.0) == pytest.approx(np.log(2) + 0.25 - 0.5, abs=1e-12)
    for mq, sq, mp, sp in [(0.3, 0.7, -0.2, 1.3), (2.0, 0.1, 2.1, 0.12)]:
        ref = _kl_quad(stats.norm(mq, sq), stats.norm(mp, sp), mq - 12 * sq, mq + 12 * sq)
        assert M.kl_normal(mq, sq, mp, sp) == pytest.approx(ref, rel=1e-6, abs=1e-10)
    assert M.kl_normal(0.5, 2.0, 0.5, 2.0) == pytest.approx(0.0, abs=1e-14)


@pytest.mark.parametrize("aq,bq,ap,bp", [(5, 4, 3, 3), (2.5, 7.0, 3.0, 6.0), (40, 3, 35, 4)])
def test_kl_beta_matches_quadrature(aq, bq, ap, bp):
    ref = _kl_quad(stats.beta(aq, bq), stats.beta(ap, bp), 0, 1)
    assert M.kl_beta(aq, bq, ap, bp) == pytest.approx(ref, rel=1e-6, abs=1e-10)


def test_beta_moment_fit_inverts_moments():
    a, b = np.array([5.0, 0.7, 30.0]), np.array([4.0, 2.0, 1.5])
    d = stats.beta(a, b)
    fa, fb = M.beta_moment_fit(d.mean(), d.var())
    np.testing.assert_allclose(fa, a, rtol=1e-10)
    np.testing.assert_allclose(fb, b, rtol=1e-10)
    with pytest.raises(ValueError, match="Beta moment fit"):
        M.beta_moment_fit([0.5], [0.3])        # var >= m(1-m): no Beta has these moments


def test_dirichlet_marginals_match_dirichlet_draws():
    alpha = np.array([[5.0, 4.0, 1.0, 0.1], [10 / 6, 10 / 36, 10 / 216, 10 / 1296]])
    a, b = M.dirichlet_marginals(alpha)
    rng = np.random.default_rng(1)
    for w in range(2):
        x = rng.dirichlet(alpha[w], size=200_000)
        m, s = M.q_moments("beta", a[w], b[w])
        np.testing.assert_allclose(x.mean(0), m, atol=3e-3)
        np.testing.assert_allclose(x.std(0), s, atol=3e-3)


# ------------------------------------------------------------------ Wasserstein
def test_w1_two_gaussians_known_values():
    rng = np.random.default_rng(0)
    x = rng.normal(0.0, 1.0, size=(40_000, 2))
    # a pure shift moves every quantile by the shift: W1 = 1
    w = M.wasserstein_to_draws("normal", [1.0, 0.0], [1.0, 2.0], x, n_quantiles=4000)
    assert w[0] == pytest.approx(1.0, abs=0.02)
    # same mean, sds 1 and 2: W1 = |1 - 2| E|Z| = sqrt(2/pi)
    assert w[1] == pytest.approx(np.sqrt(2 / np.pi), abs=0.02)


# ------------------------------------------------------------------ the whole table
def _beta_case(a, b, n=8000, seed=0):
    return np.random.default_rng(seed).beta(a, b, size=(n, len(a)))


def test_beta_against_its_own_draws_is_nominal():
    a, b = np.array([5.0, 2.0, 30.0, 1.2]), np.array([4.0, 6.0, 3.0, 0.9])
    x = _beta_case(a, b)
    mcse = x.std(0, ddof=1) / np.sqrt(len(x))           # independent draws
    r = M.parameter_metrics("beta", a, b, x, mcse)
    # z is a mean error over sd: with n iid draws its sd is 1/sqrt(n) ≈ 0.011
    assert np.all(np.abs(r["z"]) < 5 / np.sqrt(len(x)))
    np.testing.assert_allclose(r["noise_floor"], 1 / np.sqrt(len(x)), rtol=1e-12)
    np.testing.assert_allclose(r["sd_ratio"], 1.0, atol=0.03)
    np.testing.assert_allclose(r["coverage_50"], 0.5, atol=0.025)
    np.testing.assert_allclose(r["coverage_90"], 0.9, atol=0.015)
    assert np.all(r["kl"] < 2e-3) and np.all(r["w1"] < 0.06)


def test_shifted_and_narrow_approximations_move_the_metrics():
    rng = np.random.default_rng(3)
    x = rng.normal(0.0, 1.0, size=(8000, 1))
    mcse = np.array([1 / np.sqrt(8000)])
    exact = M.parameter_metrics("normal", [0.0], [1.0], x, mcse)
    shifted = M.parameter_metrics("normal", [0.5], [1.0], x, mcse)
    low = M.parameter_metrics("normal", [-0.5], [1.0], x, mcse)
    narrow = M.parameter_metrics("normal", [0.0], [0.5], x, mcse)
    assert shifted["z"][0] == pytest.approx(0.5, abs=0.05)
    assert low["z"][0] == pytest.approx(-0.5, abs=0.05)
    assert narrow["sd_ratio"][0] == pytest.approx(0.5, abs=0.02)
    for bad in (shifted, narrow):
        assert bad["kl"][0] > exact["kl"][0] + 0.05
        assert bad["w1"][0] > exact["w1"][0] + 0.1
        assert bad["coverage_90"][0] < 0.88 and bad["coverage_50"][0] < 0.46
    # coverage of N(0, 1) draws by q's interval, by the normal cdf
    c = stats.norm.ppf(0.95)
    assert shifted["coverage_90"][0] == pytest.approx(
        stats.norm.cdf(0.5 + c) - stats.norm.cdf(0.5 - c), abs=0.015)
    # a too-narrow q covers its nominal share of its own mass, far less of the draws:
    # P(|Z| < 0.5 * 1.645) for Z ~ N(0, 1)
    assert narrow["coverage_90"][0] == pytest.approx(2 * stats.norm.cdf(0.5 * 1.6449) - 1,
                                                     abs=0.02)


def test_bad_inputs_raise_instead_of_nan():
    x = np.ones((100, 1))
    with pytest.raises(ValueError, match="constant"):
        M.parameter_metrics("normal", [0.0], [1.0], x, [0.0])
    with pytest.raises(ValueError, match="non-finite"):
        M.parameter_metrics("normal", [0.0], [1.0], np.full((10, 1), np.nan), [0.0])
    with pytest.raises(ValueError, match="sds > 0"):
        M.q_moments("normal", [0.0], [0.0])
    with pytest.raises(ValueError, match="unknown marginal family"):
        M.q_moments("gamma", [1.0], [1.0])


def test_aggregate_by_hand():
    z = np.array([0.05, -0.2, 0.0, 0.1])
    ratio = np.array([1.0, 1.0, 0.8, 1.1])
    agg = M.aggregate(z, ratio, [0.5, 0.4, 0.6, 0.5], [0.9, 0.8, 1.0, 0.9])
    assert agg["median_abs_z"] == pytest.approx(0.075)
    assert agg["p90_abs_z"] == pytest.approx(np.percentile([0.05, 0.2, 0, 0.1], 90))
    assert agg["median_sd_ratio"] == pytest.approx(1.0)
    assert agg["share_close"] == pytest.approx(0.5)      # rows 0 and 3
    assert agg["mean_coverage_50"] == pytest.approx(0.5)
    assert agg["mean_coverage_90"] == pytest.approx(0.9)

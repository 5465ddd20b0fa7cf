"""Audits on what the data identify: centred scores, contrasts, order probabilities and the
common level (validation.metrics, validation.compare.identified_comparison).

Oracles: the covariance of a linear map of independent Gaussians computed by matrix algebra,
Monte Carlo, numerical integration (scipy.integrate) for ``P(λ_i > λ_j)``, and synthetic
"MCMC" draws with a shared level component whose every metric is known in closed form.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate, stats

from crowdrank.validation import compare as C
from crowdrank.validation import metrics as M

MU = np.array([0.5, -0.3, 1.2, 0.0, -1.1])
SD = np.array([0.3, 0.5, 0.2, 0.7, 0.4])


def test_centred_marginals_equal_the_linear_map_covariance():
    L = len(MU)
    A = np.eye(L) - np.ones((L, L)) / L
    cov = A @ np.diag(SD**2) @ A.T
    m, s = M.centred_normal(MU, SD)
    np.testing.assert_allclose(m, A @ MU, atol=1e-15)
    np.testing.assert_allclose(s, np.sqrt(np.diag(cov)), rtol=1e-13)
    lm, ls = M.level_normal(MU, SD)
    assert lm == pytest.approx(MU.mean())
    assert ls == pytest.approx(np.sqrt(np.ones(L) @ np.diag(SD**2) @ np.ones(L)) / L)


def test_centred_marginals_match_monte_carlo():
    rng = np.random.default_rng(3)
    x = rng.normal(MU, SD, size=(400_000, len(MU)))
    c = M.centred_draws(x)
    m, s = M.centred_normal(MU, SD)
    np.testing.assert_allclose(c.mean(0), m, atol=4e-3)
    np.testing.assert_allclose(c.std(0), s, rtol=5e-3)


def test_order_probability_against_numerical_integration():
    i, j = np.array([0, 2, 3]), np.array([1, 4, 0])
    p = M.order_probability_normal(MU, SD, i, j)
    for k in range(3):
        a, b = i[k], j[k]
        # P(λ_a > λ_b) = ∫ φ_a(x) F_b(x) dx
        val, _ = integrate.quad(lambda x, a=a, b=b: stats.norm.pdf(x, MU[a], SD[a])
                                * stats.norm.cdf(x, MU[b], SD[b]), -np.inf, np.inf)
        assert p[k] == pytest.approx(val, abs=1e-9)


def test_order_probability_draws_counts_ties_half():
    d = np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 2.0], [3.0, 1.0]])
    assert M.order_probability_draws(d, np.array([0]), np.array([1]))[0] == pytest.approx(
        (2 + 0.5) / 4)


def test_order_probability_summary_by_hand():
    pq = np.array([0.9, 0.4, 0.5, 0.99])
    pm = np.array([0.8, 0.6, 0.5, 0.99])
    s = M.order_probability_summary(pq, pm, n_draws=100)
    assert s["n"] == 4
    assert s["median_abs_diff"] == pytest.approx(np.median([0.1, 0.2, 0.0, 0.0]))
    assert s["max_abs_diff"] == pytest.approx(0.2)
    assert s["share_flipped"] == pytest.approx(0.25)
    assert s["mean_overconfidence"] == pytest.approx((0.1 + 0.0 + 0.0 + 0.0) / 4)
    with pytest.raises(ValueError):
        M.order_probability_summary(pq, pm[:3], 100)
    # no pairs (a one-item model): a count of none, no statistic of an empty set
    assert M.order_probability_summary(np.array([]), np.array([]), 100) == {"n": 0}


def test_item_pairs_all_or_seeded_sample():
    i, j = C.item_pairs(5, max_pairs=100)
    assert len(i) == 10 and np.all(i < j)
    a = C.item_pairs(100, max_pairs=50, seed=1)
    b = C.item_pairs(100, max_pairs=50, seed=1)
    c = C.item_pairs(100, max_pairs=50, seed=2)
    assert len(a[0]) == 50 and np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    assert not (np.array_equal(a[0], c[0]) and np.array_equal(a[1], c[1]))
    assert len(set(zip(a[0].tolist(), a[1].tolist()))) == 50


def _shared_level_idata(mu, sd, tau, chains=4, draws=2000, seed=0):
    """'MCMC' draws ``λ_i = μ_i + σ_i ε_i + τ u`` with one shared ``u ~ N(0, 1)``."""
    import arviz_base as ab

    rng = np.random.default_rng(seed)
    L = len(mu)
    lam = (mu + sd * rng.standard_normal((chains, draws, L))
           + tau * rng.standard_normal((chains, draws, 1)))
    items = [f"item{r}" for r in range(L)]
    dt = ab.from_dict({"posterior": {"lambda": lam}}, dims={"lambda": ["item"]},
                      coords={"item": items})
    return dt, items


def test_mean_field_exact_on_contrasts_but_not_on_the_level():
    """The approximation ``N(μ_i, σ_i²)`` is the exact law of every contrast and centred
    score of the draws, but misses the shared level's ``τ²``: its raw sd ratio is
    ``σ/√(σ² + τ²)`` while the centred and contrast ratios are 1."""
    from types import SimpleNamespace

    L, tau = 30, 0.8
    mu = np.linspace(-2, 2, L)
    sd = np.full(L, 0.6)
    dt, items = _shared_level_idata(mu, sd, tau)
    on = SimpleNamespace(items=items, mu=mu, sigma2=sd**2)
    table, s = C.identified_comparison(on, dt, max_pairs=200, seed=0)
    assert s["raw"]["median_sd_ratio"] == pytest.approx(0.6 / np.hypot(0.6, tau), rel=0.03)
    assert s["centred"]["median_sd_ratio"] == pytest.approx(1.0, abs=0.03)
    assert s["contrast"]["median_sd_ratio"] == pytest.approx(1.0, abs=0.03)
    assert s["centred"]["median_abs_z"] < 0.05
    lev = s["level_detail"]
    assert lev["mcmc_sd"] == pytest.approx(np.hypot(0.6 / np.sqrt(L), tau), rel=0.05)
    assert lev["approx_sd"] == pytest.approx(0.6 / np.sqrt(L))
    assert lev["sd_ratio"] < 0.2
    assert s["pairs"] == {"used": 200, "of": L * (L - 1) // 2, "sampled": True, "seed": 0}
    assert s["order_probability"]["median_abs_diff"] < 0.02
    assert set(table.kind) == {"centred", "level", "contrast"}
    # a shift of every online mean by the same amount moves the level and raw z only
    on2 = SimpleNamespace(items=items, mu=mu + 1.0, sigma2=sd**2)
    _, s2 = C.identified_comparison(on2, dt, max_pairs=200, seed=0)
    assert s2["raw"]["median_abs_z"] > 0.7
    assert s2["centred"]["median_abs_z"] < 0.05
    assert s2["level_detail"]["z"] == pytest.approx(1.0 / lev["mcmc_sd"], rel=0.05)


def test_level_correction_is_exact_for_the_level_and_keeps_the_centred_part():
    from types import SimpleNamespace

    L = 20
    mu = np.linspace(-1, 1, L) + 0.7          # a drifted level
    sd = np.full(L, 0.4)
    km, ks = M.level_corrected_normal(mu, sd, 0.0, 1.0)
    cm, cs = M.centred_normal(mu, sd)
    np.testing.assert_allclose(km, cm)
    np.testing.assert_allclose(ks**2, cs**2 + 1.0 / L)
    # draws from the exact structure: centred part as q's, level ~ N(0, 1/L)
    rng = np.random.default_rng(5)
    x = mu + sd * rng.standard_normal((4, 3000, L))
    x = x - x.mean(-1, keepdims=True) + rng.normal(0, 1 / np.sqrt(L), (4, 3000, 1))
    import arviz_base as ab
    items = [f"i{r}" for r in range(L)]
    dt = ab.from_dict({"posterior": {"lambda": x}}, dims={"lambda": ["item"]},
                      coords={"item": items})
    on = SimpleNamespace(items=items, mu=mu, sigma2=sd**2,
                         options={"mu0": 0.0, "sigma0": 1.0})
    _, s = C.identified_comparison(on, dt, max_pairs=50)
    assert s["raw"]["median_abs_z"] > 1.0                  # the drift shows on raw scores
    assert s["raw_level_corrected"]["median_abs_z"] < 0.06
    assert s["raw_level_corrected"]["median_sd_ratio"] == pytest.approx(1.0, abs=0.04)


def test_overconfident_contrasts_are_measured():
    from types import SimpleNamespace

    L = 12
    mu = np.linspace(-1, 1, L)
    sd = np.full(L, 0.5)
    dt, items = _shared_level_idata(mu, sd, 0.0, seed=1)
    on = SimpleNamespace(items=items, mu=mu, sigma2=(0.5 * sd) ** 2)
    _, s = C.identified_comparison(on, dt)
    assert s["contrast"]["median_sd_ratio"] == pytest.approx(0.5, rel=0.03)
    assert s["order_probability"]["mean_overconfidence"] > 0.05
    assert s["pairs"]["sampled"] is False


def test_compare_carries_the_identified_summary():
    from test_compare import ALPHA, ITEMS, WORKERS, make_idata, online_stub
    from test_compare import MU as MU12
    from test_compare import SD as SD12

    dt = make_idata(MU12, SD12, ALPHA)
    cmp = C.compare(online_stub("couple", ITEMS, MU12, SD12, WORKERS, ALPHA), dt)
    d = cmp.to_dict()["identified"]
    assert set(d) >= {"raw", "centred", "contrast", "level", "order_probability"}
    assert d["raw"]["median_sd_ratio"] == pytest.approx(
        cmp.aggregates["lambda"]["median_sd_ratio"], rel=1e-9)
    assert C.compare(online_stub("couple", ITEMS, MU12, SD12, WORKERS, ALPHA), dt,
                     identified=False).identified is None


def test_an_approximation_with_draws_is_read_through_its_draws():
    """A correlated approximation (full-rank VI, Laplace, Pathfinder) carries the common
    level in its draws: read through them it is exact on the centred scores, contrasts and
    level of a posterior it equals; read as independent marginals (its sds alone) it would
    put the level's variance into every centred score (sd ratio ~9 here)."""
    from crowdrank.inference.posterior import Posterior

    L, tau = 6, 2.0
    mu = np.linspace(-1, 1, L)
    sd = np.full(L, 0.2)
    dt, items = _shared_level_idata(mu, sd, tau)
    rng = np.random.default_rng(11)
    draws = (mu + sd * rng.standard_normal((1, 4000, L))
             + tau * rng.standard_normal((1, 4000, 1)))
    post = Posterior.from_draws("pl", "fullrank-advi", draws={"lambda": draws}, items=items)
    _, s = C.identified_comparison(post, dt, max_pairs=200, seed=0)
    for kind in ("centred", "contrast"):
        assert s[kind]["median_sd_ratio"] == pytest.approx(1.0, abs=0.06), kind
        assert s[kind]["median_abs_z"] < 0.1, kind
    assert s["level_detail"]["sd_ratio"] == pytest.approx(1.0, abs=0.06)
    assert s["order_probability"]["median_abs_diff"] < 0.03
    # the same draws in another item order: matched by id, not by position
    perm = np.arange(L)[::-1]
    post2 = Posterior.from_draws("pl", "fullrank-advi", draws={"lambda": draws[..., perm]},
                                 items=[items[k] for k in perm])
    _, s2 = C.identified_comparison(post2, dt, max_pairs=200, seed=0)
    assert s2["centred"] == s["centred"]

"""Pinned conventions of the validation layer, each against an independent computation.

* The convergence gate (docs/design.md, Validation: R-hat < 1.01, bulk and tail ESS ≥ 400, no
  divergence, E-BFMI ≥ 0.3) on *borderline* synthetic draws: AR(1) chains whose
  autocorrelation and chain offsets put R-hat near 1.02 and bulk ESS near 250 (not
  trusted, and trusted under a gate loosened to 1.05 / 150), or R-hat near 1.004 and
  bulk ESS near 600 (trusted). The diagnostics themselves are asserted to be in the
  intended range, so a change of ArviZ cannot silently turn a borderline case into an
  easy one. The thresholds are also hit exactly (``<`` versus ``≤``).
* KL(q ‖ p̂) in its direction, on asymmetric Normal and Beta cases whose value is known
  (closed form for the Normal, numerical integration for the Beta).
* W1 in units of the MCMC sd, with an sd far from 1, against ``scipy.stats``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats

from crowdrank.inference import gate
from crowdrank.inference.gate import check
from crowdrank.validation import metrics as M


# ============================================================== the gate
def ar1_chains(seed, phi, offset, chains=4, draws=1000, params=2):
    """Stationary AR(1) chains (unit variance, lag-1 autocorrelation ``phi``; bulk ESS ≈
    ``N (1 − φ)/(1 + φ)``), chain ``c`` shifted by ``offset · (c − 1.5)``."""
    rng = np.random.default_rng(seed)
    e = rng.normal(size=(chains, draws, params))
    x = np.empty_like(e)
    x[:, 0] = e[:, 0]
    s = math.sqrt(1 - phi ** 2)
    for t in range(1, draws):
        x[:, t] = phi * x[:, t - 1] + s * e[:, t]
    return x + (offset * (np.arange(chains) - 1.5))[:, None, None]


def tree(x, diverging=None, energy=None, seed=0):
    from arviz_base import from_dict

    C, D = x.shape[:2]
    rng = np.random.default_rng(seed)
    ss = {"diverging": np.zeros((C, D), bool) if diverging is None else diverging,
          "energy": rng.normal(size=(C, D)) if energy is None else energy}
    return from_dict({"posterior": {"lambda": x}, "sample_stats": ss})


@pytest.fixture(scope="module")
def borderline_bad():
    # φ = 0.85 (ESS ≈ 4000 · 0.081 ≈ 325 before offsets), small chain offsets
    return tree(ar1_chains(10, 0.85, 0.08))


@pytest.fixture(scope="module")
def borderline_good():
    # φ = 0.74 (ESS ≈ 4000 · 0.149 ≈ 600), no offsets
    return tree(ar1_chains(3, 0.74, 0.0))


def test_thresholds_are_the_protocols():
    assert gate.RHAT_MAX == 1.01
    assert gate.ESS_MIN == 400
    assert gate.EBFMI_MIN == 0.3


def test_rhat_102_ess_250_is_not_trusted(borderline_bad):
    g = check(borderline_bad)
    assert 1.015 < g.rhat_max < 1.03          # the intended borderline case
    assert 200 < g.ess_bulk_min < 300
    assert g.ess_tail_min >= 400
    assert not g.trusted
    text = " | ".join(g.reasons)
    assert "R-hat" in text and "bulk ESS" in text
    assert "tail ESS" not in text and "divergent" not in text and "E-BFMI" not in text
    assert len(g.reasons) == 2
    assert "reference NOT trusted" in g.verdict()
    # the same draws pass a gate loosened to R-hat 1.05 / ESS 150: only the thresholds
    # separate them from a trusted reference
    assert check(borderline_bad, rhat_max=1.05, ess_min=150).trusted


def test_rhat_1004_ess_600_is_trusted(borderline_good):
    g = check(borderline_good)
    assert 1.0 < g.rhat_max < 1.008
    assert 500 < g.ess_bulk_min < 750
    assert g.ess_tail_min > 800
    assert g.trusted, g.reasons
    assert g.reasons == [] and g.divergences == 0
    assert g.verdict().startswith("reference TRUSTED")


def test_thresholds_are_strict_for_rhat_and_inclusive_for_ess(borderline_good):
    g = check(borderline_good)
    # R-hat must be strictly below the threshold ...
    at = check(borderline_good, rhat_max=g.rhat_max)
    assert not at.trusted and any("R-hat" in r for r in at.reasons)
    assert check(borderline_good, rhat_max=np.nextafter(g.rhat_max, 2.0)).trusted
    # ... ESS at least the threshold
    assert check(borderline_good, ess_min=g.ess_bulk_min).trusted
    above = check(borderline_good, ess_min=np.nextafter(g.ess_bulk_min, 1e9))
    assert not above.trusted
    assert [r for r in above.reasons if "ESS" in r] == [
        f"bulk ESS {g.ess_bulk_min:.0f} < {np.nextafter(g.ess_bulk_min, 1e9):.0f}"]
    assert check(borderline_good, ess_min=g.ess_tail_min).trusted is False


def ebfmi_by_hand(energy):
    """E-BFMI per chain: ``Σ_t (E_t − E_{t−1})² / Σ_t (E_t − Ē)²`` (Betancourt 2016)."""
    num = np.sum(np.diff(energy, axis=1) ** 2, axis=1)
    den = np.sum((energy - energy.mean(axis=1, keepdims=True)) ** 2, axis=1)
    return num / den


@pytest.mark.parametrize("phi, trusted", [(0.875, False), (0.8, True)])
def test_ebfmi_borderline(borderline_good, phi, trusted):
    # AR(1) energy: E-BFMI ≈ 2 (1 − φ), 0.25 and 0.4
    energy = ar1_chains(4, phi, 0.0, params=1)[..., 0]
    x = borderline_good["posterior"]["lambda"].values
    g = check(tree(x, energy=energy))
    want = float(np.min(ebfmi_by_hand(energy)))
    assert g.ebfmi_min == pytest.approx(want, rel=1e-10)
    assert 0.2 < want < 0.45
    assert g.trusted is trusted
    assert g.reasons == ([] if trusted else [f"E-BFMI {want:.2f} < 0.3"])


def test_divergences_are_counted_and_any_one_fails(borderline_good):
    x = borderline_good["posterior"]["lambda"].values
    div = np.zeros(x.shape[:2], bool)
    div[2, 17] = div[0, 999] = True
    g = check(tree(x, diverging=div))
    assert g.divergences == 2 and not g.trusted
    assert g.reasons == ["2 divergent transition(s) out of 4000"]
    div[:] = False
    div[3, 0] = True
    one = check(tree(x, diverging=div))
    assert one.divergences == 1 and not one.trusted     # a single divergence is enough


def test_one_chain_is_never_trusted(borderline_good):
    x = borderline_good["posterior"]["lambda"].values[:1]
    g = check(tree(x))
    assert not g.trusted
    assert any("only 1 chain" in r for r in g.reasons)


def test_diagnostics_are_the_worst_over_parameters():
    # parameter 0 mixes well, parameter 1 does not: the gate reports parameter 1's figures
    good = ar1_chains(3, 0.2, 0.0, params=1)
    bad = ar1_chains(5, 0.95, 0.3, params=1)
    g = check(tree(np.concatenate([good, bad], axis=2)))
    gb = check(tree(bad))
    assert g.rhat_max == pytest.approx(gb.rhat_max, rel=1e-12)
    assert g.ess_bulk_min == pytest.approx(gb.ess_bulk_min, rel=1e-12)
    assert g.ess_tail_min == pytest.approx(gb.ess_tail_min, rel=1e-12)


# ============================================================== KL direction
def test_kl_normal_direction_on_asymmetric_case():
    # draws with population mean 0 and sd exactly 2: p̂ = N(0, 2²); q = N(1, 0.5²)
    z = np.random.default_rng(0).normal(size=4000)
    draws = ((z - z.mean()) / z.std() * 2.0)[:, None]
    want = math.log(2 / 0.5) + (0.5 ** 2 + 1.0) / (2 * 2.0 ** 2) - 0.5        # 1.04254
    reverse = math.log(0.5 / 2) + (2.0 ** 2 + 1.0) / (2 * 0.5 ** 2) - 0.5    # 8.11371
    got = M.kl_to_moment_fit("normal", [1.0], [0.5], draws)
    assert got[0] == pytest.approx(want, rel=1e-10)
    assert abs(got[0] - reverse) > 5
    assert M.kl_normal(1.0, 0.5, 0.0, 2.0) == pytest.approx(want, rel=1e-12)


def kl_by_quadrature(q, p):
    def f(x):
        lq, lp = q.logpdf(x), p.logpdf(x)
        return math.exp(lq) * (lq - lp)
    return integrate.quad(f, 0, 1, limit=200, epsabs=1e-12, epsrel=1e-10)[0]


def test_kl_beta_direction_on_asymmetric_case():
    # draws whose population mean and variance are those of Beta(4, 3): p̂ = Beta(4, 3)
    a_p, b_p = 4.0, 3.0
    m = a_p / (a_p + b_p)
    v = a_p * b_p / ((a_p + b_p) ** 2 * (a_p + b_p + 1))
    x = stats.beta(a_p, b_p).ppf((np.arange(2000) + 0.5) / 2000)
    x = m + (x - x.mean()) / x.std() * math.sqrt(v)
    assert 0 < x.min() and x.max() < 1
    fit = M.beta_moment_fit(x.mean(), x.var())
    assert np.allclose(fit, (a_p, b_p), rtol=1e-10)
    q = stats.beta(2.0, 5.0)
    want = kl_by_quadrature(q, stats.beta(a_p, b_p))
    reverse = kl_by_quadrature(stats.beta(a_p, b_p), q)
    assert abs(want - reverse) > 0.1
    got = M.kl_to_moment_fit("beta", [2.0], [5.0], x[:, None])
    assert got[0] == pytest.approx(want, rel=1e-7)
    assert M.kl_beta(2.0, 5.0, a_p, b_p) == pytest.approx(want, rel=1e-7)


def test_parameter_metrics_kl_is_q_to_moment_fit():
    rng = np.random.default_rng(1)
    draws = rng.normal(0.3, 2.5, size=(3000, 2))
    out = M.parameter_metrics("normal", [1.0, -0.5], [0.4, 5.0], draws, [0.05, 0.05])
    mean, sd = draws.mean(0), draws.std(0)          # moment fit: population moments
    for j, (mq, sq) in enumerate([(1.0, 0.4), (-0.5, 5.0)]):
        want = math.log(sd[j] / sq) + (sq ** 2 + (mq - mean[j]) ** 2) / (2 * sd[j] ** 2) - 0.5
        assert out["kl"][j] == pytest.approx(want, rel=1e-10)


# ============================================================== W1 and the other units
def test_w1_is_in_units_of_the_mcmc_sd():
    rng = np.random.default_rng(2)
    draws = np.column_stack([rng.normal(5.0, 3.0, 2000), rng.normal(-1.0, 0.2, 2000)])
    p1, p2 = np.array([5.5, -1.0]), np.array([2.0, 0.3])
    mcse = np.array([0.07, 0.004])
    out = M.parameter_metrics("normal", p1, p2, draws, mcse)
    s = draws.std(axis=0, ddof=1)
    assert abs(s[0] - 1) > 1 and abs(s[1] - 1) > 0.5
    grid = (np.arange(1000) + 0.5) / 1000
    for j in range(2):
        q = stats.norm(p1[j], p2[j]).ppf(grid)
        want = stats.wasserstein_distance(draws[:, j], q) / s[j]
        assert out["w1"][j] == pytest.approx(want, rel=1e-10)
    m = draws.mean(axis=0)
    np.testing.assert_allclose(out["z"], (p1 - m) / s, rtol=1e-12)
    np.testing.assert_allclose(out["noise_floor"], mcse / s, rtol=1e-12)
    np.testing.assert_allclose(out["sd_ratio"], p2 / s, rtol=1e-12)
    np.testing.assert_allclose(out["mcmc_sd"], s, rtol=1e-12)
    for prob, key in ((0.5, "coverage_50"), (0.9, "coverage_90")):
        lo = stats.norm(p1, p2).ppf((1 - prob) / 2)
        hi = stats.norm(p1, p2).ppf((1 + prob) / 2)
        np.testing.assert_allclose(out[key], np.mean((draws >= lo) & (draws <= hi), axis=0))


def test_w1_beta_family():
    rng = np.random.default_rng(3)
    draws = rng.beta(3.0, 9.0, size=(1500, 1))
    out = M.parameter_metrics("beta", [4.0], [8.0], draws, [0.001])
    q = stats.beta(4.0, 8.0).ppf((np.arange(1000) + 0.5) / 1000)
    want = stats.wasserstein_distance(draws[:, 0], q) / draws[:, 0].std(ddof=1)
    assert out["w1"][0] == pytest.approx(want, rel=1e-10)
    assert out["approx_mean"][0] == pytest.approx(4 / 12, rel=1e-12)
    assert out["approx_sd"][0] == pytest.approx(math.sqrt(32 / (144 * 13)), rel=1e-12)


def test_dirichlet_marginals_are_beta_alpha_t_S_minus_alpha_t():
    a, b = M.dirichlet_marginals(np.array([[1.0, 2.0, 3.0], [0.5, 0.25, 4.0]]))
    np.testing.assert_array_equal(a, [[1, 2, 3], [0.5, 0.25, 4]])
    np.testing.assert_array_equal(b, [[5, 4, 3], [4.25, 4.5, 0.75]])


def test_aggregate_by_hand():
    z = np.array([0.05, -0.08, 0.3, -1.2, 0.0])
    r = np.array([1.0, 0.85, 1.05, 0.95, 1.1])
    out = M.aggregate(z, r, [0.5, 0.4, 0.3, 0.2, 0.1], [0.9, 0.8, 0.7, 0.6, 0.5])
    assert out["n"] == 5
    assert out["median_abs_z"] == pytest.approx(0.08)
    assert out["p90_abs_z"] == pytest.approx(np.percentile([0.05, 0.08, 0.3, 1.2, 0.0], 90))
    assert out["median_sd_ratio"] == pytest.approx(1.0)
    # |z| ≤ 0.1 and ratio in [0.9, 1.1], bounds included: parameters 0 and 4
    assert out["share_close"] == pytest.approx(2 / 5)
    assert out["mean_coverage_50"] == pytest.approx(0.3)
    assert out["mean_coverage_90"] == pytest.approx(0.7)
    assert M.aggregate([], [], [], []) == {"n": 0}


# ============================================================== the gate's edges
def test_two_chains_are_enough_and_the_verdict_is_frozen():
    from dataclasses import FrozenInstanceError

    x = ar1_chains(0, 0.0, 0.0, chains=2, draws=1500, params=2)
    g = check(tree(x))
    assert g.trusted, g.reasons                  # two chains: split R-hat is defined
    with pytest.raises(FrozenInstanceError):
        g.trusted = False


def test_tail_ess_and_ebfmi_thresholds_are_inclusive():
    x = ar1_chains(1, 0.0, 0.0)                  # iid: tail ESS below bulk ESS here
    g = check(tree(x))
    assert g.trusted and g.ess_tail_min < g.ess_bulk_min
    assert check(tree(x), ess_min=g.ess_tail_min).trusted
    above = check(tree(x), ess_min=np.nextafter(g.ess_tail_min, 1e9))
    assert [r for r in above.reasons if "ESS" in r] == [
        f"tail ESS {g.ess_tail_min:.0f} < {np.nextafter(g.ess_tail_min, 1e9):.0f}"]
    assert check(tree(x), ebfmi_min=g.ebfmi_min).trusted
    low = check(tree(x), ebfmi_min=np.nextafter(g.ebfmi_min, 9.0))
    assert low.reasons == [f"E-BFMI {g.ebfmi_min:.2f} < {np.nextafter(g.ebfmi_min, 9.0)}"]


def test_missing_sample_stats_are_reasons_not_defaults():
    from arviz_base import from_dict

    x = ar1_chains(1, 0.0, 0.0)
    only_div = from_dict({"posterior": {"lambda": x},
                          "sample_stats": {"diverging": np.zeros((4, 1000), bool)}})
    g = check(only_div)
    assert g.reasons == ["E-BFMI not computable"] and g.divergences == 0
    only_energy = from_dict({"posterior": {"lambda": x},
                             "sample_stats": {"energy": np.random.default_rng(0)
                                              .normal(size=(4, 1000))}})
    g = check(only_energy)
    assert g.reasons == ["no divergence information in sample_stats"]
    assert g.divergences == 0


def test_two_draws_give_no_ebfmi_and_no_parameters_give_no_diagnostics():
    x = ar1_chains(1, 0.0, 0.0, draws=2)
    g = check(tree(x))
    assert "E-BFMI not computable" in g.reasons and math.isnan(g.ebfmi_min)
    g = check(tree(ar1_chains(1, 0.0, 0.0, draws=3)))
    assert math.isfinite(g.ebfmi_min)                  # three draws are enough for E-BFMI
    g = check(tree(np.zeros((4, 1000, 0))))       # a posterior with no scalar parameter
    assert "R-hat not computable for some parameters" in g.reasons
    assert "ESS not computable for some parameters" in g.reasons
    assert math.isnan(g.rhat_max) and not g.trusted

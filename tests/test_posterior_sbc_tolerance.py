"""Posterior SBC's tolerance verdict (validation/pipelines/posterior_sbc_tolerance.py)
against an exact oracle: a Gaussian posterior-SBC loop simulated in closed form, in which the
method's bias ``b`` and sd ratio ``ρ`` (the fidelity box's figures) are set, so the verdict's
estimates must land on them within their standard errors; its false-alarm rate on an exact
method is at most α; and the closed-form refit moments the replicates read agree with Monte
Carlo draws of the same fit."""

from __future__ import annotations

import numpy as np
import pytest

from crowdrank.validation.pipelines import posterior_sbc_tolerance as tol


def gaussian_loop(b, rho, R, n, P, seed, corr=0.0):
    """``n`` replicates of posterior SBC for ``P`` Gaussian parameters (flat prior, exact
    posterior ``N(0, 1)`` at ``y``), with a method ``N(μ + bσ, ρ²σ²)`` at ``y`` and at
    ``(y, y′)``: ``θ′`` from the method's fit, ``ȳ′ ~ N(θ′, 1/R)`` (``R`` times the
    information), the exact refit ``N(Rȳ′/(1 + R), 1/(1 + R))`` and the method's refit off
    by the same ``b, ρ``. ``corr``: correlation of the parameters' draws within a replicate.
    Returns ``z`` and the refit/base variance ratio, ``(n, P)`` each."""
    rng = np.random.default_rng(seed)
    C = np.full((P, P), corr) + (1 - corr) * np.eye(P)
    Lc = np.linalg.cholesky(C)
    e1 = rng.standard_normal((n, P)) @ Lc.T
    e2 = rng.standard_normal((n, P)) @ Lc.T
    theta = b + rho * e1
    ybar = theta + e2 / np.sqrt(R)
    s_exact = 1.0 / np.sqrt(1.0 + R)
    m_q = R * ybar / (1.0 + R) + b * s_exact
    z = (theta - m_q) / (rho * s_exact)
    var_ratio = np.full((n, P), (rho * s_exact) ** 2 / rho**2)
    return z, var_ratio


@pytest.mark.parametrize("b, rho, R", [(0.3, 0.7, 2.0), (0.0, 1.25, 1.0), (-0.5, 1.0, 4.0),
                                       (0.2, 0.9, 0.5)])
def test_the_estimates_land_on_the_methods_bias_and_sd_ratio(b, rho, R):
    n = 20_000
    z, vr = gaussian_loop(b, rho, R, n, 1, seed=int(10 * rho + R))
    g = tol.group_tolerance(z, vr, beta=0.05)
    assert g["R_eff_median"] == pytest.approx(R, rel=1e-9)
    s = z.std(ddof=1)
    # standard errors by the delta method: sd(z) has se s/√(2n); ρ(s) has slope
    # −(1 + R) s ρ³ / R; |b| = |E z| ρ / c with c = 1 − 1/√(1 + R)
    se_rho = (1 + R) * s * rho**3 / R * s / np.sqrt(2 * n)
    c = 1 - 1 / np.sqrt(1 + R)
    se_b = rho / c * s / np.sqrt(n) + abs(b) * se_rho / rho
    assert abs(g["sd_ratio"] - rho) < 4 * se_rho
    assert abs(g["abs_z"] - abs(b)) < 4 * se_b
    assert g["sd_ratio_lo"] <= rho <= g["sd_ratio_hi"]
    assert g["abs_z_lo"] <= abs(b) <= g["abs_z_hi"]


def test_an_over_confident_method_is_flagged_and_an_exact_one_is_not():
    """The planted over-confident fit's setting (ρ = 1/√2 at R = 2; 200 replicates, five
    independent parameters): flagged in at least 80 % of the seeds (36 of these 40: at 200
    replicates the upper bound of ρ sits near 0.85, so the power is about 0.9, not 1); the
    exact method, with its parameters correlated within a replicate, flagged in at most α
    of the seeds."""
    over = [tol.group_tolerance(*gaussian_loop(0.0, 0.5**0.5, 2.0, 200, 5, s), beta=0.0056)
            for s in range(40)]
    assert np.mean([g["outside"] for g in over]) >= 0.8
    assert all("too narrow" in " ".join(g["reasons"]) for g in over if g["outside"])
    names = [f"lambda_c[i{j}]" for j in range(9)]
    fams = ["lambda_centred"] * 9
    exact = [tol.tolerance_summary(*gaussian_loop(0.0, 1.0, 2.0, 200, 9, 100 + s, corr=0.5),
                                   names, fams, alpha=0.05)["within_tolerance"]
             for s in range(200)]
    assert np.mean(exact) >= 0.95


def test_a_method_inside_the_box_is_not_called_outside():
    """ρ = 0.95 and b = 0.05 are inside the box: with 200 replicates the verdict must not
    call the group outside (it cannot prove it inside; it finds no evidence against)."""
    out = [tol.group_tolerance(*gaussian_loop(0.05, 0.95, 2.0, 200, 40, s), beta=0.05 / 63)
           ["outside"] for s in range(50)]
    assert np.mean(out) <= 0.05


def test_a_parameter_the_augmentation_does_not_inform_bounds_nothing():
    z = np.random.default_rng(0).standard_normal((200, 3)) * 2.0
    g = tol.group_tolerance(z, np.ones((200, 3)), beta=0.01)
    assert g["blind_params"] == 3 and not g["outside"]
    assert g["sd_ratio_lo"] == 0.0 and g["sd_ratio_hi"] == np.inf


def test_the_box_reads_the_centred_scores_and_the_first_entry_of_a_simplex():
    names = ["lambda_c[i0]", "lambda_c[i1]", "eta[w0,1]", "eta[w0,2]", "eta[w1,1]",
             "eta[w1,2]"]
    fams = ["lambda_centred"] * 2 + ["eta"] * 4
    assert tol.box_columns(names, fams) == {"lambda_centred": [0, 1], "eta": [2, 4]}
    assert tol.box_columns(["eta[w0]", "eta[w1]"], ["eta", "eta"]) == {"eta": [0, 1]}
    with pytest.raises(ValueError, match="do not match"):
        tol.tolerance_summary(np.zeros((5, 2)), np.zeros((5, 3)), names[:2], fams[:2])


@pytest.mark.parametrize("model", ["couple", "crowdbt"])
def test_the_refit_moments_of_a_closed_form_fit_are_its_draws_moments(model):
    """Exact means and sds of λ, the centred scores and the Beta marginals of η against
    200,000 draws of the same fit (Monte Carlo: within 5 standard errors)."""
    from crowdrank.inference.posterior import Posterior
    from crowdrank.validation.pipelines.posterior_sbc_draws import draws_of, refit_moments
    from crowdrank.validation.pipelines.sbc_ranks import flatten_params

    rng = np.random.default_rng(1)
    L, W = 6, 3
    alpha = rng.uniform(0.5, 8.0, size=(W, 3 if model == "couple" else 2))
    post = Posterior.from_marginals(model, "x", items=[f"i{r}" for r in range(L)],
                                    mu=rng.normal(size=L), sigma2=rng.uniform(0.1, 2.0, L),
                                    workers=[f"w{w}" for w in range(W)], alpha=alpha)
    S = 200_000
    lam, eta = draws_of(post, S, 7)
    flat = flatten_params(model, lam, eta)
    mean, sd = refit_moments(model, post, flat[:100])
    assert mean.shape == sd.shape == (flat.shape[1],)
    np.testing.assert_array_less(np.abs(flat.mean(axis=0) - mean), 5 * sd / np.sqrt(S))
    np.testing.assert_allclose(flat.std(axis=0), sd, rtol=5 * np.sqrt(2 / S) * 3)

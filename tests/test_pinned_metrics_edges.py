"""Edges of ``validation.metrics`` found by mutation testing (``make mutate``).

Each test pins a documented contract at a point where a one-token change of the code
would change the result: the argument checks (every invalid marginal, Dirichlet and
moment-fit input is an error, never a NaN), the inclusive "close enough" box of the
aggregates, and the interval probabilities. Expected values come from the contracts in
the docstrings (docs/design.md, Validation, issue 5) and from closed forms computed here, never from the
code's own output.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from crowdrank.validation import metrics as M


# ------------------------------------------------------------------ marginal checks
@pytest.mark.parametrize("a,b", [(0.0, 1.0), (-0.5, 1.0), (1.0, 0.0), (1.0, -0.5),
                                 (np.nan, 1.0), (1.0, np.inf)])
def test_beta_marginal_needs_positive_finite_parameters(a, b):
    with pytest.raises(ValueError, match="beta marginals need"):
        M.q_moments("beta", [a], [b])


@pytest.mark.parametrize("m,s", [(0.0, 0.0), (0.0, -1.0), (0.0, np.nan), (0.0, np.inf),
                                 (np.nan, 1.0), (np.inf, 1.0), (-np.inf, 1.0)])
def test_normal_marginal_needs_finite_mean_and_positive_finite_sd(m, s):
    with pytest.raises(ValueError, match="normal marginals need"):
        M.q_moments("normal", [m], [s])


def test_beta_marginal_whose_a_plus_b_overflows_is_an_error():
    # a = b = 1e308 are finite but a + b is not: the Beta's moments (mean 1/2) cannot be
    # computed in floating point, so the check must refuse them instead of returning a
    # wrong mean (SciPy gives 0) and a NaN sd.
    with pytest.raises(ValueError, match="beta marginals need"):
        M.q_moments("beta", [1e308], [1e308])


def test_beta_marginal_with_a_tiny_b_is_accepted_and_exact():
    # a / b overflows but a + b and a * b do not: a valid Beta, mean a/(a+b), sd by hand;
    # so does a ** b for Beta(10, 400)
    for a, b in [(1.0, 1e-310), (10.0, 400.0)]:
        m, s = M.q_moments("beta", [a], [b])
        assert m[0] == pytest.approx(a / (a + b), rel=1e-14)
        assert s[0] == pytest.approx(math.sqrt(a * b / ((a + b) ** 2 * (a + b + 1))),
                                     rel=1e-12)


@pytest.mark.parametrize("alpha", [
    np.array([1.0, 2.0]),                          # not (W, K)
    np.ones((2, 3, 1)),
    np.array([[1.0, 0.0, 2.0]]),                   # a zero concentration
    np.array([[1.0, -0.5, 2.0]]),
    np.array([[1.0, np.inf, 2.0]]),                # not finite
    np.array([[1.0, np.nan, 2.0]]),
])
def test_dirichlet_marginals_reject_invalid_concentrations(alpha):
    with pytest.raises(ValueError, match="Dirichlet concentrations"):
        M.dirichlet_marginals(alpha)


# ------------------------------------------------------------------ moment fit
@pytest.mark.parametrize("m,v", [(0.5, 0.0), (0.5, -0.01), (0.8, 0.3), (0.8, 0.16),
                                 (0.5, 0.25),
                                 (0.0, 0.1), (1.0, 0.1), (-0.2, 0.1), (1.2, 0.1)])
def test_beta_moment_fit_refuses_moments_no_beta_has(m, v):
    # a Beta has 0 < mean < 1 and 0 < var < mean (1 - mean); (0.8, 0.16) is the bound
    with pytest.raises(ValueError, match="no Beta moment fit"):
        M.beta_moment_fit([m], [v])


@pytest.mark.parametrize("a,b", [(0.12, 0.48), (3.0, 0.5), (0.3, 9.0)])
def test_beta_moment_fit_recovers_skewed_betas(a, b):
    # moments of Beta(a, b) in closed form; m != 1/2, so m (1 - m) and m² differ
    m = a / (a + b)
    v = a * b / ((a + b) ** 2 * (a + b + 1))
    fa, fb = M.beta_moment_fit([m], [v])
    assert fa[0] == pytest.approx(a, rel=1e-10)
    assert fb[0] == pytest.approx(b, rel=1e-10)


# ------------------------------------------------------------------ MCMC draws
def test_draws_whose_sd_overflows_are_an_error_not_nan():
    # finite draws whose sum overflows both ways (numpy's pairwise sum over a contiguous
    # column: +inf and -inf partial sums): the MCMC mean and sd are NaN, so no metric can
    # be computed
    x = np.zeros((16, 2), order="F")
    x[:, 1] = np.linspace(-1.0, 1.0, 16)
    x[0, 0] = x[8, 0] = 1.7e308
    x[1, 0] = x[9, 0] = -1.7e308
    with np.errstate(all="ignore"):
        assert np.all(np.isfinite(x)) and np.isnan(x.std(axis=0, ddof=1)[0])
        with pytest.raises(ValueError, match="^1 parameter"):
            M.parameter_metrics("normal", [0.0, 0.0], [1.0, 1.0], x, [0.1, 0.1])


def test_constant_draws_are_counted_in_the_message():
    # two constant columns; the three others vary, with sds well below 1
    x = np.random.default_rng(0).normal(scale=0.1, size=(50, 5))
    x[:, 1] = 3.0
    x[:, 3] = -1.0
    with pytest.raises(ValueError, match="^2 parameter"):
        M.parameter_metrics("normal", np.zeros(5), np.ones(5), x, np.full(5, 0.1))


# ------------------------------------------------------------------ intervals
@pytest.mark.parametrize("prob", [0.0, 1.0, 1.5, -0.1])
def test_central_interval_probability_is_open_unit_interval(prob):
    with pytest.raises(ValueError, match="interval probability"):
        M.central_interval("normal", [0.0], [1.0], prob)


def test_central_interval_quantiles():
    lo, hi = M.central_interval("normal", [1.0], [2.0], 0.9)
    z = stats.norm.ppf(0.95)
    assert lo[0] == pytest.approx(1.0 - 2.0 * z, rel=1e-12)
    assert hi[0] == pytest.approx(1.0 + 2.0 * z, rel=1e-12)


# ------------------------------------------------------------------ aggregates
def test_close_box_is_z_01_and_ratio_09_to_11_inclusive():
    # issue 5: |z| <= 0.1 and sd ratio in [0.9, 1.1]; each row is inside or outside by one
    # condition only, on both sides of every edge
    z = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.1, -0.1, 0.1000001, -0.1000001])
    r = np.array([0.9, 1.1, 0.8999999, 1.1000001, 1.5, 2.0, 1.0, 1.0, 1.0, 1.0])
    inside = [True, True, False, False, False, False, True, True, False, False]
    agg = M.aggregate(z, r, np.full(10, 0.5), np.full(10, 0.9))
    assert agg["share_close"] == pytest.approx(np.mean(inside))
    for i in range(10):
        one = M.aggregate(z[i:i + 1], r[i:i + 1], [0.5], [0.9])
        assert one["share_close"] == float(inside[i]), (z[i], r[i])


def test_aggregate_of_nothing():
    assert M.aggregate([], [], [], []) == {"n": 0}


# ------------------------------------------------------------------ families
@pytest.mark.parametrize("family", ["zzz", "poisson", "gamma", "Normal", ""])
def test_every_entry_point_rejects_an_unknown_family(family):
    x = np.random.default_rng(1).uniform(0.2, 0.8, size=(30, 1))
    calls = [lambda: M.q_moments(family, [0.5], [1.0]),
             lambda: M.kl_to_moment_fit(family, [2.0], [2.0], x),
             lambda: M.wasserstein_to_draws(family, [2.0], [2.0], x, n_quantiles=10),
             lambda: M.central_interval(family, [2.0], [2.0], 0.5),
             lambda: M.parameter_metrics(family, [2.0], [2.0], x, [0.01])]
    for call in calls:
        with pytest.raises(ValueError, match="unknown marginal family"):
            call()


# ------------------------------------------------------------------ shapes and coverage
@pytest.mark.parametrize("shape", [(40,), (40, 2, 1), ()])
def test_draws_must_be_samples_by_parameters(shape):
    x = np.random.default_rng(2).normal(size=shape)
    with pytest.raises(ValueError, match=r"draws must be \(samples, parameters\)"):
        M.parameter_metrics("normal", [0.0], [1.0], x, [0.1])


def test_coverage_interval_is_closed():
    # [lo, hi] includes both ends: of 0, 1, 2, 3 the interval [1, 2] holds two draws
    x = np.array([[0.0, 1.0], [1.0, 1.0], [2.0, 5.0], [3.0, -1.0]])
    np.testing.assert_array_equal(M.coverage(x, [1.0, 1.0], [2.0, 1.0]), [0.5, 0.5])


def test_beta_moments_do_not_overflow_for_huge_concentrations():
    """Beta(1e155, 1e155): a·b overflows float64, the moments must not (mean 1/2,
    sd = sqrt(1/4 / (2e155 + 1)) by the closed form)."""
    from crowdrank.validation.metrics import q_moments

    m, s = q_moments("beta", 1e155, 1e155)
    assert float(m) == 0.5
    assert float(s) == pytest.approx(np.sqrt(0.25 / 2e155), rel=1e-12)
    m, s = q_moments("beta", [2.0, 5.0], [3.0, 1.0])       # ordinary values, closed form
    np.testing.assert_allclose(m, [0.4, 5 / 6], rtol=1e-14)
    np.testing.assert_allclose(s, np.sqrt([6 / (25 * 6), 5 / (36 * 7)]), rtol=1e-14)

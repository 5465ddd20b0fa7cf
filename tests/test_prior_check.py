"""The prior-only check itself (``validation.reference.simplex_prior_check``), on exact iid
Dirichlet draws and on planted errors, under the paper's geometric prior ``α = 10·6^-t``
(``α_4 ≈ 0.0077``: ~80 % of ``E[η_4]`` comes from the ~1 % of draws with ``η_4 > 0.1``).

Oracles: SciPy's Beta distribution for the exact sd and quantile, a plain loop for the
count of tail visits, and exact Dirichlet draws (log-space Gammas) for the null. The NUTS
seed sweep behind the check's design is ``bench/bench_simplex_tail.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from crowdrank.validation.reference import simplex_prior_check

ALPHA = 10 * 6.0 ** -np.arange(1, 5)


def _iid(rng, alpha, chains=2, draws=1000):
    from crowdrank.inference.nuts.starts import log_dirichlet_draws

    x = np.exp(log_dirichlet_draws(rng, np.asarray(alpha)[None], chains * draws))[:, 0, :]
    return x.reshape(chains, draws, len(alpha))


def _runs_by_loop(flags) -> int:
    count, prev = 0, False
    for f in flags:
        if f and not prev:
            count += 1
        prev = f
    return count


def test_rows_against_scipy_and_a_loop():
    """Exact sd and upper quantile from SciPy's Beta; the tail visits counted by a loop."""
    eta = _iid(np.random.default_rng(3), ALPHA)
    res = simplex_prior_check(eta, ALPHA)
    S = ALPHA.sum()
    for t, row in enumerate(res.rows):
        beta = stats.beta(ALPHA[t], S - ALPHA[t])
        assert row["sd_exact"] == pytest.approx(beta.std(), rel=1e-10)
        assert row["q_upper"] == pytest.approx(beta.ppf(0.99), rel=1e-8)
        above = eta[..., t] > row["q_upper"]
        assert row["excursions"] == sum(_runs_by_loop(c) for c in above)
        assert row["p_above_draws"] == pytest.approx(above.mean())
        assert row["excursions_iid"] == pytest.approx(2000 * 0.01 * 0.99 + 2 * 0.01)
        assert 0 < row["tail_visits_effective"] <= 20.0 + 1e-9
        assert row["mcse"] == pytest.approx(row["sd_exact"] / np.sqrt(
            min(row["ess_eta"], row["ess_above"])))


def test_exact_draws_no_false_alarm_and_a_calibrated_z():
    """200 runs of 2 × 1,000 exact draws: no failure, and the mean's z of the smallest entry
    spreads like a standard normal (sd within 20 %, |z| > 3 on at most 2 % of the runs).
    ArviZ's self-normalised z has the heavier lower tail there (the sd of a tail-carried
    variable comes from the same rare draws as its mean)."""
    rng = np.random.default_rng(20261201)
    zs, z_arviz, fails = [], [], 0
    for _ in range(200):
        res = simplex_prior_check(_iid(rng, ALPHA), ALPHA)
        fails += not res.passed
        row = res.rows[3]
        zs.append(row["z_mean"])
        z_arviz.append((row["mean_draws"] - row["mean_exact"]) / row["mcse_arviz"])
    zs, z_arviz = np.array(zs), np.array(z_arviz)
    assert fails == 0
    assert 0.8 < zs.std() < 1.2, zs.std()
    assert np.mean(np.abs(zs) > 3) <= 0.02
    assert abs(zs.mean()) < 0.25
    # the exact-variance z is bounded below (−E/sd·√n ≈ −4.8 at 2,000 draws); ArviZ's is not
    assert zs.min() > -4.9
    assert np.quantile(z_arviz, 0.02) < np.quantile(zs, 0.02)


@pytest.mark.parametrize("factor", [2.0, 0.5])
def test_wrong_smallest_concentration_fails_at_the_tests_size(factor):
    """Draws from a Dirichlet with α_4 doubled or halved (E[η_4] off by 2×) fail at 2 × 1,000
    draws, on η_4, on every one of five runs: the lower tail P(log η_4 < −20) moves by ≳ 9
    standard errors even where the mean alone cannot tell."""
    rng = np.random.default_rng(7)
    for _ in range(5):
        res = simplex_prior_check(_iid(rng, ALPHA * [1, 1, 1, factor]), ALPHA)
        assert not res.passed
        assert not res.rows[3]["passed"]
        assert abs(res.rows[3]["z_tail"]) > 5


def _without_upper_tail(rng, eta, alpha):
    """Exact draws with every visit of η_4 above its exact 0.99 quantile replaced by an exact
    draw below it: a sampler that never reaches the tail that carries ~80 % of E[η_4]."""
    q = stats.beta.isf(0.01, alpha[-1], alpha.sum() - alpha[-1])
    out = eta.copy()
    hit = out[..., -1] > q
    pool = _iid(rng, alpha, 1, 4 * int(hit.sum()) + 10)[0]
    out[hit] = pool[pool[:, -1] <= q][: int(hit.sum())]
    return out


def test_a_sampler_that_misses_the_upper_tail_fails_at_8000_draws():
    """No visit above the 0.99 quantile of η_4 (the mean ~5× too small, the lower tail
    right): caught by the mean and the tail-visit statistic at 2 × 4,000 draws. At 2 × 1,000
    (20 visits expected) the null's own spread allows it (docs/design.md §5.1)."""
    rng = np.random.default_rng(11)
    for _ in range(3):
        eta = _without_upper_tail(rng, _iid(rng, ALPHA, 2, 4000), ALPHA)
        res = simplex_prior_check(eta, ALPHA)
        row = res.rows[3]
        assert not res.passed
        assert row["excursions"] == 0 and abs(row["z_tail"]) < 5
        assert row["z_above"] < -5 and row["z_mean"] < -5


def test_upper_p_is_checked():
    with pytest.raises(ValueError, match="upper_p"):
        simplex_prior_check(_iid(np.random.default_rng(0), ALPHA), ALPHA, upper_p=0.7)


# ------------------------------------------------------------------ tail visits of a fit
def test_tail_visits_counts_and_effective_number():
    """iid draws: ~n·p effective visits; the same draws each held for 5 steps (a sticky
    chain with the same marginal) count as ~1/5 as many; the visits against a loop; entries
    with α ≥ 0.5 are left out."""
    from crowdrank.validation.reference import tail_visits

    rng = np.random.default_rng(5)
    alpha = np.stack([ALPHA, ALPHA[::-1]])                          # (W=2, K=4)
    from crowdrank.inference.nuts.starts import log_dirichlet_draws

    eta = np.exp(log_dirichlet_draws(rng, alpha, 4000)).reshape(2, 2000, 2, 4)
    res = tail_visits(eta, alpha)
    assert res["entries"] == 6 and res["effective_iid"] == pytest.approx(40.0)
    assert 0.6 * 40 < res["effective_median"] < 1.4 * 40
    w0 = res["worst"][0]
    w, t = map(int, w0["entry"][4:-1].split(","))
    x = eta[:, :, w, t]
    above = x > np.quantile(x, 0.99)
    assert w0["visits"] == sum(_runs_by_loop(c) for c in above)
    assert alpha[w, t] < 0.5 and w0["alpha"] == alpha[w, t]
    sticky = np.repeat(eta[:, :400], 5, axis=1)                     # same length, held 5×
    st = tail_visits(sticky, alpha)
    assert st["effective_median"] < 0.4 * res["effective_median"]
    assert tail_visits(eta, np.full((2, 4), 1.0)) is None


def test_tail_visits_of_a_crowdbt_and_a_couple_posterior():
    from arviz_base import from_dict

    from crowdrank.models.priors import Priors
    from crowdrank.validation.reference import tail_visits_of

    rng = np.random.default_rng(2)
    pr = Priors.geometric(["a", "b"], 4)
    eta = rng.dirichlet([1.0] * 4, size=(2, 500, 2))
    idata = from_dict({"posterior": {"eta": eta}}, dims={"eta": ["worker", "stage"]})
    res = tail_visits_of(idata, "couple", pr)
    assert res["entries"] == int((pr.alpha < 0.5).sum())
    b = from_dict({"posterior": {"eta": rng.beta(2, 2, size=(2, 500, 2))}},
                  dims={"eta": ["worker"]})
    res_b = tail_visits_of(b, "crowdbt", pr)                         # (a, b) = (1.67, 0.28)
    assert res_b["entries"] == int((pr.beta() < 0.5).sum())
    assert tail_visits_of(b, "bt", pr) is None

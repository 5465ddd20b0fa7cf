"""Guards: extreme inputs give finite μ, positive σ² and α, with every clamp counted; strict
mode turns a would-be clamp into an error naming the ranking."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crowdrank.inference.online import OnlineError, fit_online, kernels
from crowdrank.inference.online.crowdbt import pair_update
from crowdrank.inference.online.gbmm import stage_update
from crowdrank.inference.online.state import CLAMP_KEYS
from crowdrank.inference.online.wenglin import bt_game, pl_game
from crowdrank.models.data import Rankings
from crowdrank.models.priors import Priors

mus = st.floats(-50, 50)
s2s = st.floats(1e-8, 1e4)
alphas = st.floats(1e-4, 1e7)


def _zero():
    return {k: 0 for k in CLAMP_KEYS}


def _ok(values, positive):
    arr = np.asarray(values, float)
    return np.all(np.isfinite(arr)) and (not positive or np.all(arr > 0))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(2, 8).flatmap(lambda m: st.tuples(
    st.lists(mus, min_size=m, max_size=m), st.lists(s2s, min_size=m, max_size=m),
    st.lists(alphas, min_size=m, max_size=m))),
    st.sampled_from(["paper", "full", "plugin"]), st.sampled_from(["updated", "prior"]))
def test_gbmm_stage_extremes_finite_positive(args, taylor, score_alpha):
    mu, s2, a = args
    counts = _zero()
    m2, v2, a2 = stage_update(mu, s2, a, taylor=taylor, score_alpha=score_alpha,
                              counts=counts)
    assert _ok(m2, False) and _ok(v2, True) and _ok(a2, True)
    assert all(isinstance(v, int) and v >= 0 for v in counts.values())


@settings(max_examples=200, deadline=None)
@given(mus, mus, s2s, s2s, alphas, alphas)
def test_crowdbt_pair_extremes_finite_positive(mw, ml, sw, sl, a, b):
    out = pair_update(mw, ml, sw, sl, a, b, counts=_zero())
    assert _ok(out[:2], False) and _ok(out[2:], True)


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 10).flatmap(lambda m: st.tuples(
    st.lists(mus, min_size=m, max_size=m), st.lists(s2s, min_size=m, max_size=m))),
    st.sampled_from([pl_game, bt_game]))
def test_weng_lin_extremes_finite_positive(args, game):
    mu, s2 = args
    m2, v2 = game(mu, s2, beta=0.5, counts=_zero())
    assert _ok(m2, False) and _ok(v2, True)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**31 - 1), st.integers(2, 12), st.sampled_from(["couple", "crowdbt",
                                                                          "pl", "bt"]))
def test_long_and_short_rankings_through_kernels(seed, kmax, model):
    """Whole passes with extreme prior states: finite, positive, counters consistent."""
    rng = np.random.default_rng(seed)
    L, W, N = 15, 3, 40
    kmax = min(kmax, L)
    ranks = [list(rng.choice(L, size=int(rng.integers(2, kmax + 1)), replace=False))
             for _ in range(N)]
    d = Rankings.from_lists([[str(i) for i in r] for r in ranks],
                            [str(w) for w in rng.integers(0, W, N)],
                            items=[str(i) for i in range(L)], worker_ids=["0", "1", "2"])
    alpha = np.exp(rng.uniform(np.log(1e-4), np.log(1e7), (W, max(d.K, 2))))
    pri = Priors(d.workers, alpha, mu0=float(rng.uniform(-50, 50)),
                 sigma0=float(np.sqrt(np.exp(rng.uniform(np.log(1e-8), np.log(1e4))))))
    post = fit_online(d, model, pri, progress=False)
    assert _ok(post.mu, False) and _ok(post.sigma2, True)
    if post.alpha is not None:
        assert _ok(post.alpha, True)
    assert set(post.clamped) == set(CLAMP_KEYS)


def test_clamp_is_counted_and_strict_raises():
    """α of 1e300: the moments of Eq. (9) overflow, so Eq. (10) cannot be evaluated."""
    d = Rankings.from_lists([["a", "b", "c"], ["b", "c"]], ["w1", "w1"])
    pri = Priors.explicit({"w1": [1e300, 1e300, 1.0]})
    post = fit_online(d, "couple", pri, progress=False)
    assert post.clamped["alpha"] > 0
    assert np.all(np.isfinite(post.alpha)) and np.all(post.alpha > 0)
    assert np.all(np.isfinite(post.mu)) and np.all(post.sigma2 > 0)
    with pytest.raises(OnlineError, match=r"ranking \d+ \(worker 'w1'.*alpha"):
        fit_online(d, "couple", pri, progress=False, strict=True)


def test_strict_crowdbt_names_the_source_ranking():
    d = Rankings.from_lists([["a", "b"], ["a", "b", "c"]], ["w1", "w2"])
    pri = Priors.explicit({"w1": [1.0, 2.0], "w2": [1e300, 1e300]})
    with pytest.raises(OnlineError, match=r"ranking 1 \(worker 'w2'"):
        fit_online(d, "crowdbt", pri, progress=False, strict=True)
    post = fit_online(d, "crowdbt", pri, progress=False)
    assert post.clamped["alpha"] > 0


def test_kernel_counts_kappa_floor():
    """A huge variance drives the factor of Eq. (12) below κ: counted, σ² stays > 0."""
    d = Rankings.from_lists([["a", "b"]] * 3, ["w"] * 3)
    pri = Priors.explicit({"w": [50.0, 1.0]}, sigma0=100.0)
    post = fit_online(d, "couple", pri, progress=False)
    assert post.clamped["kappa"] > 0
    assert np.all(post.sigma2 > 0)


def test_kernel_module_has_one_kernel_per_method():
    for name in ("gbmm_kernel", "crowdbt_kernel", "pl_kernel", "bt_kernel"):
        assert callable(getattr(kernels, name))


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 6).flatmap(lambda k: st.tuples(
    st.lists(mus, min_size=k, max_size=k), st.lists(s2s, min_size=k, max_size=k),
    st.lists(alphas, min_size=k, max_size=k))), st.sampled_from(["paper", "full", "plugin"]))
def test_gbmm_kernel_equals_spec_at_extremes(args, taylor):
    """Even where the guards bind, the kernel computes what the specification computes."""
    from crowdrank.inference.online.gbmm import ranking_update
    mu, s2, a = (np.array(x, float) for x in args)
    k = len(mu)
    order = np.arange(k, dtype=np.int64)[:, None]
    m1, v1, a1 = mu.copy(), s2.copy(), a.copy()
    c1 = _zero()
    ranking_update(m1, v1, a1, list(range(k)), taylor=taylor, counts=c1)
    m2, v2, a2 = mu.copy(), s2.copy(), a[None, :].copy()
    counts, err = np.zeros(5, np.int64), np.zeros(3, np.int64)
    rc = kernels.gbmm_kernel(order, np.array([k], np.int64), np.zeros(1, np.int64),
                             np.zeros(1, np.int64), 0, 1, m2, v2, a2,
                             kernels.TAYLOR_CODES[taylor], False, 1e-4, 1e-4, False, counts,
                             err)
    assert rc == -1
    np.testing.assert_allclose(m2, m1, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(v2, v1, rtol=1e-12)
    np.testing.assert_allclose(a2[0], a1, rtol=1e-12)
    assert dict(zip(CLAMP_KEYS, counts.tolist())) == c1


def _crowdbt_both(mw, ml, sw, sl, a, b, taylor):
    """One pair ``w > l`` through the specification and through the numba kernel: their
    outputs ``(μ_w, μ_l, σ_w², σ_l², a, b)`` and clamp counts."""
    c1 = _zero()
    spec = pair_update(mw, ml, sw, sl, a, b, counts=c1, taylor=taylor)
    mu, s2 = np.array([mw, ml]), np.array([sw, sl])
    ab = np.array([[a, b]])
    counts, err = np.zeros(5, np.int64), np.zeros(3, np.int64)
    rc = kernels.crowdbt_kernel(np.array([[0], [1]], np.int64), np.zeros(1, np.int64),
                                np.zeros(1, np.int64), 0, 1, mu, s2, ab, 1e-4, 1e-4, False,
                                counts, err, kernels.TAYLOR_CODES[taylor])
    assert rc == -1
    return (np.array(spec), c1), (np.array([*mu, *s2, *ab[0]]),
                                  dict(zip(CLAMP_KEYS, counts.tolist())))


@settings(max_examples=200, deadline=None)
@given(mus, mus, s2s, s2s, alphas, alphas)
def test_crowdbt_kernel_equals_spec_at_extremes(mw, ml, sw, sl, a, b):
    """Even where the guards bind (κ₂ on the comparison's probability, κ on the variance
    factors, the Beta's moments), the CrowdBT kernel computes what :func:`pair_update`
    computes, clamp counts included. Chen et al.'s expansion only: the quadrature's sums
    are added in another order, and the Beta's moment matching (E2 − E1² cancels up to
    ~14 digits at a, b ~ 1e7) makes their last bits differences of any size; its guard
    is checked on the fixed case below."""
    (want, c_want), (got, c_got) = _crowdbt_both(mw, ml, sw, sl, a, b, "paper")
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    assert c_got == c_want


@pytest.mark.parametrize("taylor", ["paper", "quadrature"])
def test_crowdbt_kernel_equals_spec_where_a_guard_binds(taylor):
    """A case the random search may miss: the winner 30 below the loser, so the
    comparison's probability is under κ₂ and the two weights are renormalised."""
    (want, c_want), (got, c_got) = _crowdbt_both(-15.0, 15.0, 1.0, 1.0, 5.0, 2.0, taylor)
    assert c_want["kappa2"] == 1
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=0)
    assert c_got == c_want


def test_weng_lin_write_back_stops_at_a_non_finite_mean_in_strict_mode():
    """The guard every Weng–Lin kernel ends a ranking with: in strict mode a non-finite
    new μ stops the pass (``True``) with the ranking's position and the μ code, and
    nothing of that ranking is written; otherwise the old μ is kept and counted."""
    from crowdrank.inference.online.guards import CODES

    cand = np.array([0, 1], np.int64)
    for strict in (True, False):
        mu, s2 = np.array([0.5, -0.5]), np.array([1.0, 2.0])
        counts, err = np.zeros(5, np.int64), np.zeros(3, np.int64)
        stop = kernels._write_back(7, 2, cand, mu, s2, np.array([np.nan, 0.1]),
                                   np.array([0.9, 1.8]), s2.copy(), strict, counts, err)
        if strict:
            assert stop is True and err[0] == 7 and err[1] == CODES["mu"]
            np.testing.assert_array_equal(mu, [0.5, -0.5])
        else:
            assert stop is False and counts[2] == 1
            np.testing.assert_array_equal(mu, [0.5, 0.1])
            np.testing.assert_array_equal(s2, [0.9, 1.8])


def test_weng_lin_write_back_stops_at_a_variance_that_is_not_positive_in_strict_mode():
    """The σ² half of the same guard: in strict mode a new σ² ≤ 0 stops the pass with the
    σ² code; otherwise it is floored and counted."""
    from crowdrank.inference.online.guards import CODES, FLOOR

    cand = np.array([0, 1], np.int64)
    for strict in (True, False):
        mu, s2 = np.array([0.5, -0.5]), np.array([1.0, 2.0])
        counts, err = np.zeros(5, np.int64), np.zeros(3, np.int64)
        stop = kernels._write_back(4, 2, cand, mu, s2, np.array([0.6, -0.6]),
                                   np.array([-1.0, 1.8]), s2.copy(), strict, counts, err)
        if strict:
            assert stop is True and err[0] == 4 and err[1] == CODES["sigma2"]
            np.testing.assert_array_equal(s2, [1.0, 2.0])
        else:
            assert stop is False and counts[1] == 1
            np.testing.assert_array_equal(s2, [FLOOR, 1.8])


def test_crowdbt_guards_on_a_loser_at_minus_infinity():
    """A loser whose score is −∞ gives a non-finite new mean for it alone: strict mode stops
    with the μ code and writes nothing; otherwise the old mean is kept and counted once,
    as the specification does."""
    from crowdrank.inference.online.guards import CODES

    (want, c_want), (got, c_got) = _crowdbt_both(0.0, -np.inf, 1.0, 1.0, 5.0, 2.0, "paper")
    assert c_got == c_want and c_want["mu"] == 1
    np.testing.assert_array_equal(got, want)
    mu, s2, ab = np.array([0.0, -np.inf]), np.array([1.0, 1.0]), np.array([[5.0, 2.0]])
    counts, err = np.zeros(5, np.int64), np.zeros(3, np.int64)
    rc = kernels.crowdbt_kernel(np.array([[0], [1]], np.int64), np.zeros(1, np.int64),
                                np.zeros(1, np.int64), 0, 1, mu, s2, ab, 1e-4, 1e-4, True,
                                counts, err, 0)
    assert rc == 0 and err.tolist() == [0, CODES["mu"], 1]
    np.testing.assert_array_equal(ab, [[5.0, 2.0]])


def test_crowdbt_counts_a_floored_winner_variance():
    """A winner's σ² below the floor is floored and counted (the loser's is not): the
    kernel's count is the specification's."""
    (want, c_want), (got, c_got) = _crowdbt_both(0.0, 0.0, 1e-310, 1.0, 5.0, 2.0, "paper")
    assert c_got == c_want and c_want["sigma2"] == 1
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=0)


def test_gbmm_strict_variance_failure_names_its_stage():
    """COUPLE's strict σ² failure reports the stage it happened at: a pair (one stage, 1)
    whose variance factor is negative under κ = 0 (equal scores, a skewed prior α used
    for the score step, σ² = 10) has a finite new mean and a new σ² of 0."""
    from crowdrank.inference.online.guards import CODES

    mu, s2, alpha = np.zeros(2), np.array([10.0, 10.0]), np.array([[10.0, 1.0]])
    counts, err = np.zeros(5, np.int64), np.zeros(3, np.int64)
    rc = kernels.gbmm_kernel(np.array([[0], [1]], np.int64), np.array([2], np.int64),
                             np.zeros(1, np.int64), np.zeros(1, np.int64), 0, 1, mu, s2,
                             alpha, 0, True, 0.0, 1e-4, True, counts, err)
    assert rc == 0 and err.tolist() == [0, CODES["sigma2"], 1]
    np.testing.assert_array_equal(s2, [10.0, 10.0])


def _gbmm_both(mu, s2, a, taylor):
    """One ranking ``0 > 1 > … > k−1`` through the specification (``ranking_update``) and
    the numba kernel (non-strict, κ = κ₂ = 1e-4): their ``(μ, σ², α)`` and clamp counts."""
    from crowdrank.inference.online.gbmm import ranking_update

    mu, s2, a = (np.array(x, float) for x in (mu, s2, a))
    k = len(mu)
    m1, v1, a1, c1 = mu.copy(), s2.copy(), a.copy(), _zero()
    ranking_update(m1, v1, a1, list(range(k)), taylor=taylor, counts=c1)
    m2, v2, a2 = mu.copy(), s2.copy(), a[None, :].copy()
    counts, err = np.zeros(5, np.int64), np.zeros(3, np.int64)
    rc = kernels.gbmm_kernel(np.arange(k, dtype=np.int64)[:, None], np.array([k], np.int64),
                             np.zeros(1, np.int64), np.zeros(1, np.int64), 0, 1, m2, v2, a2,
                             kernels.TAYLOR_CODES[taylor], False, 1e-4, 1e-4, False, counts,
                             err)
    assert rc == -1
    return (m1, v1, a1, c1), (m2, v2, a2[0], dict(zip(CLAMP_KEYS, counts.tolist())))


def test_gbmm_counts_each_non_finite_mean_once():
    """An item of infinite variance gets a non-finite new mean: outside strict mode the old
    mean is kept and counted once per item and stage, as the specification counts it."""
    (m1, v1, a1, c1), (m2, v2, a2, c2) = _gbmm_both([0.3, -0.2], [np.inf, 1.0], [5.0, 2.0],
                                                    "paper")
    assert c1["mu"] == 1 and c2 == c1
    for got, want in ((m2, m1), (v2, v1), (a2, a1)):
        np.testing.assert_array_equal(got, want)
    assert m2[0] == 0.3


def test_gbmm_quadrature_floors_a_probability_just_under_kappa2():
    """The quadrature stage's expected softmax of a candidate far behind the others lies
    between κ₂/2 and κ₂ (e^−9 / 2 ≈ 6e-5): it is floored to κ₂ and counted, as the
    specification does. The quadrature's weights are the Gauss–Hermite weights as they
    are, not a multiple: R is floored before it is normalised."""
    (m1, v1, a1, c1), (m2, v2, a2, c2) = _gbmm_both([0.0, 0.0, -9.0], [1e-4, 1e-4, 1e-4],
                                                    [5.0, 2.0, 1.0], "quadrature")
    assert c1["kappa2"] == 1 and c2 == c1
    for got, want in ((m2, m1), (v2, v1), (a2, a1)):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_strict_crowdbt_variance_failure_names_the_pair_it_stopped_at():
    """CrowdBT's strict σ² failure reports the position in ``seq`` of the pair it stopped
    at, with the σ² code and stage 1, and writes nothing of that pair. Under κ = 0, equal
    scores, a worker with accuracy prior (10, 1) and σ² = 10, the variance factor
    1 + σ²(ab/Ψ² − 1/ψ²) is negative, so the new σ² is 0; the pair before it (another
    worker, (6, 4): factor 0.999) goes through."""
    from crowdrank.inference.online.guards import CODES

    pairs = np.array([[0, 2], [1, 3]], np.int64)           # column n: (winner, loser)
    mu, s2 = np.zeros(4), np.array([10.0, 10.0, 0.1, 0.1])
    ab = np.array([[10.0, 1.0], [6.0, 4.0]])
    counts, err = np.zeros(5, np.int64), np.zeros(3, np.int64)
    rc = kernels.crowdbt_kernel(pairs, np.array([0, 1], np.int64), np.array([1, 0], np.int64),
                                0, 2, mu, s2, ab, 0.0, 1e-4, True, counts, err, 0)
    assert rc == 1 and err.tolist() == [1, CODES["sigma2"], 1]
    np.testing.assert_array_equal(s2[:2], [10.0, 10.0])
    np.testing.assert_array_equal(ab[0], [10.0, 1.0])
    assert mu[2] > 0 > mu[3] and s2[2] < 0.1


def test_strict_crowdbt_mean_failure_names_the_pair_it_stopped_at():
    """The same for a non-finite new mean: a loser at −∞ in the second pair of ``seq``
    stops the pass at position 1 with the μ code; the first pair went through."""
    from crowdrank.inference.online.guards import CODES

    pairs = np.array([[0, 2], [1, 3]], np.int64)           # column n: (winner, loser)
    mu, s2 = np.array([0.0, -np.inf, 0.0, 0.0]), np.ones(4)
    ab = np.array([[5.0, 2.0], [6.0, 4.0]])
    counts, err = np.zeros(5, np.int64), np.zeros(3, np.int64)
    rc = kernels.crowdbt_kernel(pairs, np.array([0, 1], np.int64), np.array([1, 0], np.int64),
                                0, 2, mu, s2, ab, 1e-4, 1e-4, True, counts, err, 0)
    assert rc == 1 and err.tolist() == [1, CODES["mu"], 1]
    assert mu[0] == 0.0 and mu[1] == -np.inf and mu[2] > 0 > mu[3]

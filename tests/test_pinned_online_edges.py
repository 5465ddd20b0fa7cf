"""Edges of the readable online updates (``gbmm.py``, ``crowdbt.py``) found by mutation
testing (``make mutate``).

Each test pins a property that follows from docs/design.md, Online alone, at a point where a
one-token change of the code would show:

* shift invariance: softmax, Eq. (11)–(12) and CrowdBT's ``C`` depend on the scores only
  through differences, so adding 400 to every score moves the new scores by 400 and leaves
  σ² and α as they were (a shift by the *maximum* in the wrong direction overflows ``exp``);
* the floors count only where they are active: ``max(x, κ) != x``; at ``x == κ`` exactly
  (constructed so, with exactly representable numbers) nothing changes and nothing counts;
  a stage counts its κ2 floor once however many ``R_t`` it floors (the kernel's rule), κ is
  counted per candidate;
* the documented defaults (paper Taylor term, updated α, κ = κ2 = 1e-4) at a state where
  both floors bind;
* unknown option names are errors, and strict mode names the stage (1-based, reverse
  order: the first stage processed of a k = 3 ranking is stage 2).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from crowdrank.inference.online import OnlineError, gbmm
from crowdrank.inference.online.crowdbt import crowdbt_pass_python, pair_update
from crowdrank.inference.online.state import CLAMP_KEYS

SHIFT = 400.0      # exp(400) is finite, exp(800) is not


def _zero():
    return {k: 0 for k in CLAMP_KEYS}


# ============================================================== shift invariance
@pytest.mark.parametrize("taylor", gbmm.TAYLOR)
@pytest.mark.parametrize("score_alpha", gbmm.SCORE_ALPHA)
def test_gbmm_stage_is_invariant_to_a_common_score_shift(taylor, score_alpha):
    mu, s2, a = [0.3, -0.4, 1.1, 0.0], [0.5, 0.9, 0.2, 1.3], [3.0, 1.5, 0.7, 0.4]
    m0, v0, a0 = gbmm.stage_update(mu, s2, a, taylor=taylor, score_alpha=score_alpha)
    c = _zero()
    m1, v1, a1 = gbmm.stage_update([x + SHIFT for x in mu], s2, a, taylor=taylor,
                                   score_alpha=score_alpha, counts=c)
    assert c == _zero()                               # no guard had to step in
    np.testing.assert_allclose(np.subtract(m1, SHIFT), m0, rtol=0, atol=1e-12)
    np.testing.assert_allclose(v1, v0, rtol=1e-12)
    np.testing.assert_allclose(a1, a0, rtol=1e-12)


def test_gbmm_softmax_and_ranking_are_shift_invariant():
    mu = [0.2, -1.0, 0.7]
    e0, psi0 = gbmm.softmax_shifted(mu)
    e1, psi1 = gbmm.softmax_shifted([x + SHIFT for x in mu])
    # e_t = exp(mu_t - max mu): the top item has e = 1 exactly
    assert e1[2] == 1.0 and e0[2] == 1.0
    np.testing.assert_allclose(np.divide(e1, psi1), np.divide(e0, psi0), rtol=1e-12)
    assert psi0 == pytest.approx(1 + math.exp(-0.5) + math.exp(-1.7), rel=1e-14)
    st0 = ([0.2, -1.0, 0.7, 0.1], [0.4, 0.8, 0.3, 0.6], [2.0, 1.0, 0.5])
    st1 = ([x + SHIFT for x in st0[0]], list(st0[1]), list(st0[2]))
    st0 = tuple(list(x) for x in st0)
    gbmm.ranking_update(*st0, [2, 0, 3])
    gbmm.ranking_update(*st1, [2, 0, 3])
    np.testing.assert_allclose(np.subtract(st1[0], SHIFT), st0[0], rtol=0, atol=1e-12)
    np.testing.assert_allclose(st1[1], st0[1], rtol=1e-12)
    np.testing.assert_allclose(st1[2], st0[2], rtol=1e-12)


@pytest.mark.parametrize("mw,ml", [(0.4, -0.3), (-0.8, 0.5)])
def test_crowdbt_pair_is_invariant_to_a_common_score_shift(mw, ml):
    base = pair_update(mw, ml, 0.6, 0.9, 4.0, 1.5)
    c = _zero()
    moved = pair_update(mw + SHIFT, ml + SHIFT, 0.6, 0.9, 4.0, 1.5, counts=c)
    assert c == _zero()
    np.testing.assert_allclose(np.subtract(moved[:2], SHIFT), base[:2], rtol=0, atol=1e-12)
    np.testing.assert_allclose(moved[2:], base[2:], rtol=1e-12)


# ============================================================== floors and their counts
def test_kappa2_at_equality_is_not_counted():
    # mu = (0, 0): p = (1/2, 1/2) exactly; kappa2 = 1/2 floors nothing
    c = _zero()
    R = gbmm.expected_softmax([0.0, 0.0], [0.3, 0.3], "plugin", 0.5, c)
    assert R == [0.5, 0.5] and c["kappa2"] == 0
    # the paper's R at equal scores and variances is also exactly p
    R = gbmm.expected_softmax([0.0, 0.0], [0.3, 0.3], "paper", 0.5, c)
    assert R == [0.5, 0.5] and c["kappa2"] == 0


def test_kappa2_counts_a_stage_once():
    # two of three R_t below kappa2: one floored stage
    c = _zero()
    mu = [0.0, -12.0, -13.0]
    R = gbmm.expected_softmax(mu, [0.0, 0.0, 0.0], "plugin", 1e-4, c)
    assert c["kappa2"] == 1
    e = [math.exp(x) for x in mu]
    p = [x / math.fsum(e) for x in e]
    raw = [p[0], 1e-4, 1e-4]
    np.testing.assert_allclose(R, [r / math.fsum(raw) for r in raw], rtol=1e-13)


def test_kappa_at_equality_is_not_counted():
    # a = (1, ..., 1): Psi = psi and a_t e_t = e_t, so the factor is exactly 1 = kappa
    for m in (2, 3, 4):
        mu = [0.3 * t for t in range(m)]
        s2 = [0.5 + 0.1 * t for t in range(m)]
        c = _zero()
        mu2, s22 = gbmm.score_update(mu, s2, [1.0] * m, kappa=1.0, counts=c)
        assert c["kappa"] == 0
        assert mu2 == mu and s22 == s2


def test_kappa_counts_each_floored_candidate():
    # huge variances with a near-certain report: the factor of Eq. (12) by hand
    mu, s2, a = [0.0, 0.0, 0.5], [50.0, 50.0, 0.01], [1.0, 1e-6, 1e-6]
    e = [math.exp(x) for x in mu]
    psi, Psi = math.fsum(e), math.fsum(x * y for x, y in zip(a, e))
    factors = []
    for t in range(3):
        qa, q = a[t] * e[t] / Psi, e[t] / psi
        factors.append(1 + s2[t] * (qa * (1 - qa) - q * (1 - q)))
    want = sum(f < 1e-4 for f in factors)
    assert 0 < want < 3                                # the case is informative
    c = _zero()
    _, s22 = gbmm.score_update(mu, s2, a, kappa=1e-4, counts=c)
    assert c["kappa"] == want
    np.testing.assert_allclose(s22, [v * max(f, 1e-4) for v, f in zip(s2, factors)],
                               rtol=1e-9)


def test_crowdbt_floors_at_equality_are_not_counted():
    # equal scores: c1 = c2 = 1/2 exactly; a = b = 1: Psi = psi and the curvature is 0
    c = _zero()
    out = pair_update(0.0, 0.0, 0.5, 0.7, 1.0, 1.0, kappa=1.0, kappa2=0.5, counts=c)
    assert c == _zero()
    assert out[:4] == (0.0, 0.0, 0.5, 0.7)


def test_crowdbt_kappa_counted_per_item_kappa2_once():
    # huge variances: the second-order term drives c1 below kappa2 (floored, counted
    # once) and both factors of Eq. (12) below kappa (counted per item), by hand
    mw, ml, sw, sl, a, b = 1.0, 0.0, 80.0, 90.0, 5.0, 1e-3
    ew, el = math.exp(mw), math.exp(ml)
    c1 = ew / (ew + el) + 0.5 * (sw + sl) * ew * el * (el - ew) / (ew + el) ** 3
    assert c1 < 1e-4 and 1 - c1 > 1e-4
    psi, Psi = ew + el, a * ew + b * el
    curv = a * ew * b * el / Psi ** 2 - ew * el / psi ** 2
    n_kappa = int(1 + sw * curv < 1e-4) + int(1 + sl * curv < 1e-4)
    c = _zero()
    pair_update(mw, ml, sw, sl, a, b, counts=c)
    assert c["kappa2"] == 1
    assert c["kappa"] == n_kappa and n_kappa > 0


# ============================================================== documented defaults
def _binding_state():
    """A stage where the κ2 floor (R of a far-behind item) and the κ floor (σ² = 50, a
    confident worker) both bind."""
    return [0.0, -12.0, 0.5], [50.0, 0.01, 50.0], [20.0, 1e-3, 1e-3]


def test_gbmm_defaults_are_paper_updated_and_kappas_1e4():
    mu, s2, a = _binding_state()
    explicit = {"taylor": "paper", "score_alpha": "updated", "kappa": 1e-4, "kappa2": 1e-4}
    c = _zero()
    want = gbmm.stage_update(mu, s2, a, counts=c, **explicit)
    assert c["kappa"] > 0 and c["kappa2"] > 0           # both floors matter here
    assert gbmm.stage_update(mu, s2, a) == want
    R = gbmm.expected_softmax(mu, s2)
    assert R == gbmm.expected_softmax(mu, s2, "paper", 1e-4)
    assert min(R) > 0
    assert gbmm.score_update(mu, s2, a) == gbmm.score_update(mu, s2, a, 1e-4)
    # ranking_update and the reference pass forward the same defaults
    st = ([0.5, 0.0, -12.0], list(s2), list(a))
    st2 = tuple(list(x) for x in st)
    gbmm.ranking_update(*st, [1, 2, 0])
    gbmm.ranking_update(*st2, [1, 2, 0], **explicit)
    assert st == st2
    order = np.array([[1], [2], [0]])
    st3 = (np.array([0.5, 0.0, -12.0]), np.array(s2), np.array([a]))
    st4 = tuple(x.copy() for x in st3)
    gbmm.gbmm_pass_python(order, [3], [0], [0], *st3)
    gbmm.gbmm_pass_python(order, [3], [0], [0], *st4, **explicit)
    for x, y in zip(st3, st4):
        np.testing.assert_array_equal(x, y)


def test_crowdbt_defaults_are_kappas_1e4():
    args = (1.0, 0.0, 80.0, 90.0, 5.0, 1e-3)
    c = _zero()
    want = pair_update(*args, kappa=1e-4, kappa2=1e-4, counts=c)
    assert c["kappa"] > 0 and c["kappa2"] > 0
    assert pair_update(*args) == want
    pairs = np.array([[0], [1]])
    st = (np.array([1.0, 0.0]), np.array([80.0, 90.0]), np.array([[5.0, 1e-3]]))
    st2 = tuple(x.copy() for x in st)
    crowdbt_pass_python(pairs, [0], [0], *st)
    crowdbt_pass_python(pairs, [0], [0], *st2, kappa=1e-4, kappa2=1e-4)
    for x, y in zip(st, st2):
        np.testing.assert_array_equal(x, y)
    np.testing.assert_array_equal(st[0], want[:2])


# ============================================================== options and strict mode
@pytest.mark.parametrize("name", ["", "aaa", "Paper", "paperx", "fulll", "zzz"])
def test_unknown_taylor_is_an_error(name):
    with pytest.raises(ValueError, match="taylor must be one of"):
        gbmm.expected_softmax([0.1, 0.0], [0.2, 0.3], name)
    with pytest.raises(ValueError, match="taylor must be one of"):
        gbmm.stage_update([0.1, 0.0], [0.2, 0.3], [1.0, 2.0], taylor=name)


@pytest.mark.parametrize("name", ["", "aaa", "Updated", "updatedx", "prio", "zzz"])
def test_unknown_score_alpha_is_an_error(name):
    with pytest.raises(ValueError, match="score_alpha must be one of"):
        gbmm.stage_update([0.1, 0.0], [0.2, 0.3], [1.0, 2.0], score_alpha=name)


def test_strict_names_the_stage_in_reverse_order():
    # α = 1e300: the moments of Eq. (9) overflow in the first stage processed, which for
    # k = 3 is stage 2 (candidates ρ(2..3)); not strict, the clamp is counted instead
    st = ([0.0, 0.1, -0.2], [1.0, 1.0, 1.0], [1e300, 1e300, 1.0])
    with pytest.raises(OnlineError, match=r"^ranking, stage 2: alpha"):
        gbmm.ranking_update(*(list(x) for x in st), [0, 1, 2], strict=True)
    with pytest.raises(OnlineError, match=r"^ranking 0, stage 2: alpha"):
        gbmm.gbmm_pass_python(np.array([[0], [1], [2]]), [3], [0], [0],
                              *(np.array(x) for x in st[:2]), np.array([st[2]]), strict=True)
    c = _zero()
    gbmm.ranking_update(*(list(x) for x in st), [0, 1, 2], counts=c)
    assert c["alpha"] > 0


def test_options_are_keyword_only():
    # the signatures' bare * : an option passed by position (a κ taken for a κ2, a Taylor
    # variant for a score order) is an error, not a silent reinterpretation
    with pytest.raises(TypeError):
        gbmm.stage_update([0.1, 0.0], [0.2, 0.3], [1.0, 2.0], "full")
    with pytest.raises(TypeError):
        gbmm.gbmm_pass_python(np.array([[0], [1]]), [2], [0], [0], np.zeros(2), np.ones(2),
                              np.ones((1, 2)), "full")
    with pytest.raises(TypeError):
        pair_update(0.1, 0.0, 0.2, 0.3, 1.0, 2.0, 1e-4)
    with pytest.raises(TypeError):
        crowdbt_pass_python(np.array([[0], [1]]), [0], [0], np.zeros(2), np.ones(2),
                            np.ones((1, 2)), 1e-4)


def test_defaults_are_not_strict():
    # α = 1e300: the moments overflow and the guards must step in; by default they clamp
    # and count (DESIGN.md §3: strict mode is opt-in), they do not raise
    c = _zero()
    out = pair_update(0.1, 0.0, 0.5, 0.5, 1e300, 1e300, counts=c)
    assert c["alpha"] > 0 and all(math.isfinite(x) for x in out)
    pairs = np.array([[0], [1]])
    st = (np.array([0.1, 0.0]), np.array([0.5, 0.5]), np.array([[1e300, 1e300]]))
    c = crowdbt_pass_python(pairs, [0], [0], *st)
    assert c["alpha"] > 0 and np.all(np.isfinite(st[2])) and np.all(st[2] > 0)
    c = _zero()
    gbmm.stage_update([0.0, 0.1], [1.0, 1.0], [1e300, 1e300], counts=c)
    assert c["alpha"] > 0
    st = (np.array([0.0, 0.1, -0.2]), np.ones(3), np.array([[1e300, 1e300, 1.0]]))
    c = gbmm.gbmm_pass_python(np.array([[0], [1], [2]]), [3], [0], [0], *st)
    assert c["alpha"] > 0 and np.all(np.isfinite(st[2])) and np.all(st[2] > 0)
    c = _zero()
    gbmm.ranking_update(*(list(x) for x in ([0.0, 0.1], [1.0, 1.0], [1e300, 1e300])),
                        [0, 1], counts=c)
    assert c["alpha"] > 0

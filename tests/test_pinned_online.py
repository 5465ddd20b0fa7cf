"""Pinned conventions of the online updates, each against an independent computation.

The kernel-vs-specification tests (``test_online_kernels.py``) compare two transcriptions
of the same formulas, so an error planted in *both* (a flipped sign of the paper's Taylor
term, stages run forward) passes them. Here the expected values come from code written in
this file from docs/design.md, Online alone:

* ``R_t`` of every Taylor variant at a hand-chosen point, in exact rational arithmetic;
* the Dirichlet moments of Eq. 9 from the raw moments of ``Dir(a)`` (not from Eq. 9's
  closed form), the scores by the gradient/curvature of ``log Σ_t a_t softmax_t``;
* whole k = 3 and k = 4 rankings, stage order ``k−1 … 1`` written out by hand, and short
  passes through :func:`crowdrank.inference.online.fit_online` (which runs the numba kernel);
* CrowdBT's pair update from the formulas of Chen et al. as quoted in docs/design.md, Online.

Tolerances are near rounding (1e-11 relative), so that any change of a formula shows.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from crowdrank.inference.online import fit_online, gbmm
from crowdrank.inference.online.crowdbt import pair_update
from crowdrank.models.data import Rankings
from crowdrank.models.priors import Priors

RTOL = 1e-11


# ============================================================== independent reference
def ref_R(mu_c, s2_c, taylor, kappa2=1e-4):
    """Step 1 of docs/design.md, Online, no shift of μ (values here are moderate)."""
    e = [math.exp(x) for x in mu_c]
    psi = math.fsum(e)
    p = [x / psi for x in e]
    m = len(p)
    if taylor == "paper":
        sp = math.fsum(s2_c[j] * p[j] for j in range(m))
        R = [p[t] - 0.5 * sp * p[t] + 0.5 * s2_c[t] * p[t] for t in range(m)]
    elif taylor == "full":
        R = [p[t] + 0.5 * s2_c[t] * p[t] * (1 - p[t]) * (1 - 2 * p[t])
             - 0.5 * p[t] * math.fsum(s2_c[j] * p[j] * (1 - 2 * p[j])
                                      for j in range(m) if j != t)
             for t in range(m)]
    else:
        R = p
    R = [max(r, kappa2) for r in R]
    Z = math.fsum(R)
    return [r / Z for r in R]


def ref_dirichlet_tilted_moments(a, R):
    """``E[η_t]``, ``E[η_t²]`` under ``Σ_v R_v η_v · Dir(a)`` (normalised), built from the
    raw moments of the Dirichlet: ``E[η_t η_v] = a_t (a_v + δ_tv) / (S (S+1))`` and
    ``E[η_t² η_v] = a_t (a_t+1) (a_v + 2 δ_tv) / (S (S+1) (S+2))``."""
    S = math.fsum(a)
    m = len(a)
    Z = math.fsum(R[v] * a[v] / S for v in range(m))
    E1, E2 = [], []
    for t in range(m):
        E1.append(math.fsum(R[v] * a[t] * (a[v] + (v == t)) / (S * (S + 1))
                            for v in range(m)) / Z)
        E2.append(math.fsum(R[v] * a[t] * (a[t] + 1) * (a[v] + 2 * (v == t))
                            / (S * (S + 1) * (S + 2)) for v in range(m)) / Z)
    return E1, E2


def ref_alpha(a, R):
    """Eq. 10: the Beta whose first two moments are ``E1``, ``E2``; its first parameter."""
    E1, E2 = ref_dirichlet_tilted_moments(a, R)
    return [(E1[t] - E2[t]) * E1[t] / (E2[t] - E1[t] ** 2) for t in range(len(a))]


def ref_scores(mu_c, s2_c, a, kappa=1e-4):
    """Eq. 11–12 as the Stein / Weng–Lin step on ``log C(λ) = log Σ_t a_t e^{λ_t} −
    log Σ_t e^{λ_t}``: ``μ + σ² ∂_t log C``, ``σ² · max(1 + σ² ∂²_tt log C, κ)``."""
    e = [math.exp(x) for x in mu_c]
    psi = math.fsum(e)
    Psi = math.fsum(at * et for at, et in zip(a, e))
    mu_new, s2_new = [], []
    for t in range(len(e)):
        qa, q = a[t] * e[t] / Psi, e[t] / psi        # the two softmax weights of λ_t
        grad = qa - q
        curv = qa * (1 - qa) - q * (1 - q)           # d/dλ_t of each weight
        mu_new.append(mu_c[t] + s2_c[t] * grad)
        s2_new.append(s2_c[t] * max(1 + s2_c[t] * curv, kappa))
    return mu_new, s2_new


def ref_stage(mu_c, s2_c, a, taylor="paper", score_alpha="updated"):
    R = ref_R(mu_c, s2_c, taylor)
    a_new = ref_alpha(a, R)
    a_score = a_new if score_alpha == "updated" else list(a)
    mu_new, s2_new = ref_scores(mu_c, s2_c, a_score)
    return mu_new, s2_new, a_new


def ref_ranking(mu, s2, alpha_w, ranking, taylor="paper", score_alpha="updated"):
    """One ranking, stages in *reverse* order (i = k−1 … 1; candidates ρ(i..k)), each
    stage starting from what the previous one left. Returns new copies."""
    mu, s2, alpha_w = list(mu), list(s2), list(alpha_w)
    k = len(ranking)
    for i in range(k - 1, 0, -1):                    # 1-based stage index
        cand = ranking[i - 1:]
        m = len(cand)
        mc, sc, an = ref_stage([mu[r] for r in cand], [s2[r] for r in cand], alpha_w[:m],
                               taylor, score_alpha)
        for j, r in enumerate(cand):
            mu[r], s2[r] = mc[j], sc[j]
        alpha_w[:m] = an
    return mu, s2, alpha_w


def close(got, want, rtol=RTOL):
    got, want = np.asarray(got, float), np.asarray(want, float)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * 1e-2)


# ============================================================== step 1 at a hand point
# μ = (log 3, log 2, 0): p = (1/2, 1/3, 1/6) exactly; σ² = (1/5, 2/5, 3/5).
HAND_MU = [math.log(3.0), math.log(2.0), 0.0]
HAND_S2 = [0.2, 0.4, 0.6]
P = [Fraction(1, 2), Fraction(1, 3), Fraction(1, 6)]
S2 = [Fraction(1, 5), Fraction(2, 5), Fraction(3, 5)]


def _exact_paper():
    sp = sum(s * p for s, p in zip(S2, P))                       # = 1/3
    R = [p - sp * p / 2 + s * p / 2 for s, p in zip(S2, P)]
    return [r / sum(R) for r in R]


def test_paper_R_at_hand_computed_point():
    # By hand: Σσ²p = 1/10 + 2/15 + 1/10 = 1/3, so R = (1/2 − 1/12 + 1/20,
    # 1/3 − 1/18 + 1/15, 1/6 − 1/36 + 1/20) = (7/15, 31/90, 17/90); they sum to 1.
    assert _exact_paper() == [Fraction(7, 15), Fraction(31, 90), Fraction(17, 90)]
    got = gbmm.expected_softmax(HAND_MU, HAND_S2, "paper")
    close(got, [7 / 15, 31 / 90, 17 / 90], rtol=1e-13)
    # a flipped Taylor term (− ½ σ_t² p_t) would give (33, 19, 8)/90 / (2/3) = (33, 19, 8)/60
    assert abs(got[0] - 7 / 15) < 1e-12 and abs(got[0] - 33 / 60) > 1e-2


def test_full_and_plugin_R_at_hand_computed_point():
    R = []
    for t in range(3):
        cross = sum(S2[j] * P[j] * (1 - 2 * P[j]) for j in range(3) if j != t)
        R.append(P[t] + S2[t] * P[t] * (1 - P[t]) * (1 - 2 * P[t]) / 2 - P[t] * cross / 2)
    want = [float(r / sum(R)) for r in R]
    close(gbmm.expected_softmax(HAND_MU, HAND_S2, "full"), want, rtol=1e-13)
    close(gbmm.expected_softmax(HAND_MU, HAND_S2, "plugin"), [0.5, 1 / 3, 1 / 6], rtol=1e-13)


def test_R_floor_kappa2_then_renormalise():
    # p_3 = e^-12 / (1 + e^-1 + e^-12) < κ2 = 1e-4: floored to κ2, then all renormalised.
    mu = [0.0, -1.0, -12.0]
    e = [1.0, math.exp(-1.0), math.exp(-12.0)]
    p = [x / sum(e) for x in e]
    raw = [p[0], p[1], 1e-4]
    counts = {"alpha": 0, "sigma2": 0, "mu": 0, "kappa": 0, "kappa2": 0}
    got = gbmm.expected_softmax(mu, [0.0, 0.0, 0.0], "plugin", 1e-4, counts)
    close(got, [r / sum(raw) for r in raw], rtol=1e-13)
    assert counts["kappa2"] == 1
    # a larger floor is a real parameter, not a constant
    got = gbmm.expected_softmax(mu, [0.0, 0.0, 0.0], "plugin", 0.2)
    raw = [p[0], max(p[1], 0.2), 0.2]
    close(got, [r / sum(raw) for r in raw], rtol=1e-13)


@pytest.mark.parametrize("taylor", ["paper", "full", "plugin"])
def test_R_matches_reference_at_random_points(taylor):
    rng = np.random.default_rng(7)
    for _ in range(30):
        m = int(rng.integers(2, 6))
        mu = rng.normal(0, 1.5, m).tolist()
        s2 = rng.uniform(0.01, 1.5, m).tolist()
        close(gbmm.expected_softmax(mu, s2, taylor), ref_R(mu, s2, taylor))


# ============================================================== steps 2 and 3
def test_alpha_update_against_dirichlet_raw_moments():
    rng = np.random.default_rng(3)
    for _ in range(40):
        m = int(rng.integers(2, 6))
        a = np.exp(rng.uniform(-2, 3, m)).tolist()
        R = rng.dirichlet(np.ones(m)).tolist()
        E1, E2 = gbmm.dirichlet_moments(a, R)
        W1, W2 = ref_dirichlet_tilted_moments(a, R)
        close(E1, W1)
        close(E2, W2)
        close(gbmm.alpha_update(a, R), ref_alpha(a, R), rtol=1e-9)


def test_score_update_against_log_C_derivatives():
    rng = np.random.default_rng(4)
    for _ in range(40):
        m = int(rng.integers(2, 6))
        mu = rng.normal(0, 1, m).tolist()
        s2 = rng.uniform(0.05, 1.0, m).tolist()
        a = np.exp(rng.uniform(-2, 2, m)).tolist()
        got = gbmm.score_update(mu, s2, a)
        want = ref_scores(mu, s2, a)
        close(got[0], want[0])
        close(got[1], want[1])
    # κ floor: a huge σ² with a strong, near-certain report makes the factor negative
    mu, s2, a = [0.0, 0.0], [50.0, 50.0], [1.0, 1e-6]
    got = gbmm.score_update(mu, s2, a, kappa=1e-4)
    want = ref_scores(mu, s2, a, kappa=1e-4)
    close(got[1], want[1])


# ============================================================== whole rankings
def _random_state(rng, L, K):
    mu = rng.normal(0, 1.0, L).tolist()
    s2 = rng.uniform(0.1, 1.2, L).tolist()
    alpha = np.exp(rng.uniform(-1.5, 2.5, K)).tolist()
    return mu, s2, alpha


@pytest.mark.parametrize("k", [3, 4])
@pytest.mark.parametrize("taylor", ["paper", "full", "plugin"])
@pytest.mark.parametrize("score_alpha", ["updated", "prior"])
def test_ranking_update_reverse_stages_against_reference(k, taylor, score_alpha):
    rng = np.random.default_rng(10 * k + len(taylor))
    for _ in range(5):
        mu, s2, alpha = _random_state(rng, 6, 4)
        ranking = rng.permutation(6)[:k].tolist()
        want = ref_ranking(mu, s2, alpha, ranking, taylor, score_alpha)
        got = (list(mu), list(s2), list(alpha))
        gbmm.ranking_update(*got, ranking, taylor=taylor, score_alpha=score_alpha)
        for g, w in zip(got, want):
            close(g, w)


def test_defaults_are_paper_updated_and_reverse():
    """The readable update's defaults are the paper's: the same numbers as the reference
    with ``taylor=paper, score_alpha=updated``, and clearly not those of forward stages."""
    rng = np.random.default_rng(99)
    mu, s2, alpha = _random_state(rng, 5, 4)
    ranking = [3, 0, 4, 1]
    want = ref_ranking(mu, s2, alpha, ranking)
    got = (list(mu), list(s2), list(alpha))
    gbmm.ranking_update(*got, ranking)
    for g, w in zip(got, want):
        close(g, w)
    # forward order (stage 1 first) moves the scores by much more than rounding
    fwd = (list(mu), list(s2), list(alpha))
    for i in range(1, len(ranking)):
        cand = ranking[i - 1:]
        mc, sc, an = ref_stage([fwd[0][r] for r in cand], [fwd[1][r] for r in cand],
                               fwd[2][:len(cand)])
        for j, r in enumerate(cand):
            fwd[0][r], fwd[1][r] = mc[j], sc[j]
        fwd[2][:len(cand)] = an
    assert np.max(np.abs(np.subtract(fwd[0], want[0]))) > 1e-3


def _toy_data(rng, n_items=7, workers=("u", "v", "w"), n=40, kmax=4):
    rankings, who = [], []
    for _ in range(n):
        k = int(rng.integers(2, kmax + 1))
        rankings.append([f"i{x}" for x in rng.permutation(n_items)[:k]])
        who.append(workers[int(rng.integers(len(workers)))])
    return Rankings.from_lists(rankings, who, items=[f"i{x}" for x in range(n_items)],
                               worker_ids=list(workers))


@pytest.mark.parametrize("taylor", ["paper", "full", "plugin"])
@pytest.mark.parametrize("score_alpha", ["updated", "prior"])
def test_fit_online_couple_pass_against_reference(taylor, score_alpha):
    """The numba kernel behind ``fit_online`` (file order, priors from ``Priors``) against
    the reference run ranking after ranking."""
    rng = np.random.default_rng(5)
    data = _toy_data(rng)
    alpha0 = np.exp(rng.uniform(-1, 2, (data.n_workers, data.K)))
    priors = Priors(data.workers, alpha0, mu0=0.3, sigma0=0.8)
    post = fit_online(data, "couple", priors, taylor=taylor, score_alpha=score_alpha,
                      progress=False)
    mu = [0.3] * data.n_items
    s2 = [0.64] * data.n_items
    alpha = [list(row) for row in alpha0]
    for n in range(data.n_rankings):
        r = data.ranking(n).tolist()
        w = int(data.worker[n])
        mu, s2, alpha[w] = ref_ranking(mu, s2, alpha[w], r, taylor, score_alpha)
    close(post.mu, mu, rtol=1e-9)
    close(post.sigma2, s2, rtol=1e-9)
    close(post.alpha, alpha, rtol=1e-9)


def test_fit_online_default_options_are_the_papers():
    rng = np.random.default_rng(6)
    data = _toy_data(rng, n=25)
    priors = Priors(data.workers, np.full((3, data.K), 1.5))
    post = fit_online(data, "couple", priors, progress=False)
    assert post.options["taylor"] == "paper"
    assert post.options["score_alpha"] == "updated"
    assert post.options["stage_order"] == "reverse"
    mu, s2 = [0.0] * data.n_items, [1.0] * data.n_items
    alpha = [[1.5] * data.K for _ in range(3)]
    for n in range(data.n_rankings):
        w = int(data.worker[n])
        mu, s2, alpha[w] = ref_ranking(mu, s2, alpha[w], data.ranking(n).tolist())
    close(post.mu, mu, rtol=1e-9)
    close(post.alpha, alpha, rtol=1e-9)


# ============================================================== CrowdBT online
def ref_crowdbt_pair(mw, ml, sw, sl, a, b, kappa=1e-4, kappa2=1e-4):
    """docs/design.md, Online, CrowdBT online, with the same κ2 floor on ``(c1, c2)``."""
    ew, el = math.exp(mw), math.exp(ml)
    p = ew / (ew + el)
    c1 = p + 0.5 * (sw + sl) * ew * el * (el - ew) / (ew + el) ** 3
    c2 = 1 - c1
    c1, c2 = max(c1, kappa2), max(c2, kappa2)
    c1, c2 = c1 / (c1 + c2), c2 / (c1 + c2)
    c = (c1 * a + c2 * b) / (a + b)
    E1 = (c1 * (a + 1) * a + c2 * a * b) / (c * (a + b + 1) * (a + b))
    E2 = (c1 * (a + 2) * (a + 1) * a + c2 * (a + 1) * a * b) / (
        c * (a + b + 2) * (a + b + 1) * (a + b))
    a_new = (E1 - E2) * E1 / (E2 - E1 ** 2)
    b_new = (E1 - E2) * (1 - E1) / (E2 - E1 ** 2)
    (mw2, ml2), (sw2, sl2) = ref_scores([mw, ml], [sw, sl], [a, b], kappa)
    return mw2, ml2, sw2, sl2, a_new, b_new


def test_crowdbt_pair_update_against_reference():
    rng = np.random.default_rng(8)
    for _ in range(60):
        mw, ml = rng.normal(0, 1.2, 2)
        sw, sl = rng.uniform(0.05, 1.5, 2)
        a, b = np.exp(rng.uniform(-1, 3, 2))
        close(pair_update(mw, ml, sw, sl, a, b), ref_crowdbt_pair(mw, ml, sw, sl, a, b))


def test_crowdbt_kappa2_floor_is_active_at_a_certain_pair():
    # p = σ(−12) ≈ 6e-6 < κ2: c1 is floored, then (c1, c2) renormalised
    got = pair_update(-6.0, 6.0, 1e-3, 1e-3, 3.0, 2.0)
    close(got, ref_crowdbt_pair(-6.0, 6.0, 1e-3, 1e-3, 3.0, 2.0))


def test_fit_online_crowdbt_pass_against_reference():
    rng = np.random.default_rng(9)
    data = _toy_data(rng, n=30)
    ab = np.exp(rng.uniform(-0.5, 2, (data.n_workers, 2)))
    priors = Priors(data.workers, np.column_stack([ab, np.ones((3, data.K - 2))]),
                    mu0=-0.2, sigma0=1.1)
    post = fit_online(data, "crowdbt", priors, progress=False)
    mu, s2 = [-0.2] * data.n_items, [1.21] * data.n_items
    AB = [list(r) for r in ab]
    for n in range(data.n_rankings):
        r = data.ranking(n).tolist()
        w = int(data.worker[n])
        for i in range(len(r)):                       # full rank-breaking, (i, j) in order
            for j in range(i + 1, len(r)):
                out = ref_crowdbt_pair(mu[r[i]], mu[r[j]], s2[r[i]], s2[r[j]], *AB[w])
                mu[r[i]], mu[r[j]], s2[r[i]], s2[r[j]] = out[:4]
                AB[w] = list(out[4:])
    close(post.mu, mu, rtol=1e-9)
    close(post.sigma2, s2, rtol=1e-9)
    close(post.alpha, AB, rtol=1e-9)

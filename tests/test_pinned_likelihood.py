"""The NumPy reference likelihoods (``models/likelihood.py``) against brute force written
here from docs/design.md, Models, in plain Python floats, for k = 2 … 5.

COUPLE stage ``i`` of a reported ranking ``ρ`` (``m = k − i + 1`` candidates):
``P = Σ_{t≤m} η̄_t · exp(λ_{ρ(i+t−1)}) / Σ_{j≥i} exp(λ_{ρ(j)})`` with
``η̄_t = η_t / Σ_{v≤m} η_v``; the ranking's likelihood is the product over ``i = 1..k−1``.
Exact special cases that need no formula at all: ``η = e_1`` is Plackett–Luce, ``η = e_2``
reports the second-best remaining item at every stage, and a uniform ``η`` makes every
stage ``1/m``, so every ranking has probability ``1/k!`` whatever ``λ``.
"""

from __future__ import annotations

import math
from itertools import combinations, permutations

import numpy as np
import pytest

from crowdrank.models import likelihood as L
from crowdrank.models.data import Rankings


def bf_couple(lam, eta, rho):
    p = 1.0
    k = len(rho)
    for i in range(k - 1):                      # 0-based stage: candidates rho[i:]
        m = k - i
        den = sum(math.exp(lam[r]) for r in rho[i:])
        act = sum(eta[:m])
        p *= sum(eta[t] / act * math.exp(lam[rho[i + t]]) / den for t in range(m))
    return p


def bf_pl(lam, rho):
    p = 1.0
    for i in range(len(rho) - 1):
        p *= math.exp(lam[rho[i]]) / sum(math.exp(lam[r]) for r in rho[i:])
    return p


def bf_crowdbt(lam, eta, rho):
    p = 1.0
    for i, j in combinations(range(len(rho)), 2):
        s = 1 / (1 + math.exp(-(lam[rho[i]] - lam[rho[j]])))
        p *= eta * s + (1 - eta) * (1 - s)
    return p


def bf_bt(lam, rho):
    return bf_crowdbt(lam, 1.0, rho)


def bf_normalizer(lam, eta, rho):
    return sum(bf_couple(lam, eta, list(o)) for o in permutations(rho))


def _case(seed, k, L_=7, K=5):
    rng = np.random.default_rng(seed)
    lam = rng.normal(0, 1.3, L_).tolist()
    eta = rng.dirichlet(np.full(K, 0.8)).tolist()
    rho = rng.permutation(L_)[:k].tolist()
    return lam, eta, rho


@pytest.mark.parametrize("k", [2, 3, 4, 5])
def test_couple_loglik_brute_force(k):
    for seed in range(6):
        lam, eta, rho = _case(seed, k)
        want = math.log(bf_couple(lam, eta, rho))
        assert L.couple_loglik(np.array(lam), np.array(eta), np.array(rho)) == \
            pytest.approx(want, rel=1e-12, abs=1e-12)
        # each stage on its own
        for i in range(k - 1):
            m = k - i
            want_i = sum(eta[t] / sum(eta[:m]) * math.exp(lam[rho[i + t]])
                         / sum(math.exp(lam[r]) for r in rho[i:]) for t in range(m))
            assert L.couple_stage_prob(np.array(lam), np.array(eta), np.array(rho[i:])) == \
                pytest.approx(want_i, rel=1e-12)


@pytest.mark.parametrize("k", [3, 4])
def test_couple_normalizer_and_normalized_brute_force(k):
    for seed in range(4):
        lam, eta, rho = _case(seed + 10, k)
        Z = bf_normalizer(lam, eta, rho)
        assert abs(Z - 1) > 1e-4                         # not normalised for k ≥ 3
        assert L.couple_normalizer(np.array(lam), np.array(eta), np.array(rho)) == \
            pytest.approx(Z, rel=1e-12)
        want = math.log(bf_couple(lam, eta, rho) / Z)
        assert L.couple_normalized_loglik(np.array(lam), np.array(eta), np.array(rho)) == \
            pytest.approx(want, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("k", [2, 3, 4, 5])
def test_one_hot_and_uniform_eta(k):
    lam, _, rho = _case(k, k)
    lam_a, rho_a = np.array(lam), np.array(rho)
    e1 = np.eye(5)[0]
    assert L.couple_loglik(lam_a, e1, rho_a) == pytest.approx(math.log(bf_pl(lam, rho)),
                                                              rel=1e-12)
    assert L.pl_loglik(lam_a, rho_a) == pytest.approx(math.log(bf_pl(lam, rho)), rel=1e-12)
    # η = e_2: the reported item at every stage is the *second* of the remaining ones
    second = 1.0
    for i in range(k - 1):
        second *= math.exp(lam[rho[i + 1]]) / sum(math.exp(lam[r]) for r in rho[i:])
    assert L.couple_loglik(lam_a, np.eye(5)[1], rho_a) == pytest.approx(math.log(second),
                                                                       rel=1e-12)
    # uniform η: every stage is 1/m, the ranking 1/k!
    assert L.couple_loglik(lam_a, np.full(5, 0.2), rho_a) == \
        pytest.approx(-math.log(math.factorial(k)), rel=1e-12)
    assert L.couple_loglik(lam_a, np.full(5, 3.0), rho_a) == \
        pytest.approx(-math.log(math.factorial(k)), rel=1e-12)    # η enters normalised


@pytest.mark.parametrize("k", [2, 3, 4])
def test_pl_bt_crowdbt_brute_force(k):
    for seed in range(4):
        lam, _, rho = _case(seed + 20, k)
        eta = 0.2 + 0.15 * seed
        a, r = np.array(lam), np.array(rho)
        assert L.pl_loglik(a, r) == pytest.approx(math.log(bf_pl(lam, rho)), rel=1e-12)
        assert L.bt_loglik(a, r) == pytest.approx(math.log(bf_bt(lam, rho)), rel=1e-12)
        assert L.crowdbt_loglik(a, eta, r) == pytest.approx(
            math.log(bf_crowdbt(lam, eta, rho)), rel=1e-12)
        d = lam[rho[0]] - lam[rho[1]]
        assert L.crowdbt_pair_prob(lam[rho[0]], lam[rho[1]], eta) == pytest.approx(
            eta / (1 + math.exp(-d)) + (1 - eta) / (1 + math.exp(d)), rel=1e-13)


def test_loglik_pointwise_uses_each_workers_row_for_every_model():
    rng = np.random.default_rng(3)
    rankings = [["a", "b", "c", "d"], ["c", "a"], ["d", "b", "a"], ["b", "d", "c", "a"],
                ["a", "d"]]
    who = ["u", "v", "v", "w", "u"]
    data = Rankings.from_lists(rankings, who, items=["a", "b", "c", "d"],
                               worker_ids=["u", "v", "w"])
    lam = rng.normal(0, 1, 4)
    eta = rng.dirichlet(np.ones(4), size=3)
    acc = rng.uniform(0.2, 0.9, 3)
    idx = {"a": 0, "b": 1, "c": 2, "d": 3}
    wi = {"u": 0, "v": 1, "w": 2}
    want = {"pl": [], "bt": [], "crowdbt": [], "couple": [], "couple-normalized": []}
    for r, w in zip(rankings, who):
        rho = [idx[x] for x in r]
        e = eta[wi[w]].tolist()
        want["pl"].append(math.log(bf_pl(lam, rho)))
        want["bt"].append(math.log(bf_bt(lam, rho)))
        want["crowdbt"].append(math.log(bf_crowdbt(lam, acc[wi[w]], rho)))
        want["couple"].append(math.log(bf_couple(lam, e, rho)))
        want["couple-normalized"].append(
            math.log(bf_couple(lam, e, rho) / bf_normalizer(lam, e, rho)))
    for model, vals in want.items():
        e = acc if model == "crowdbt" else (eta if model.startswith("couple") else None)
        got = L.loglik_pointwise(model, data, lam, e)
        np.testing.assert_allclose(got, vals, rtol=1e-12)
        assert L.loglik(model, data, lam, e) == pytest.approx(sum(vals), rel=1e-12)
    with pytest.raises(ValueError, match="unknown model"):
        L.loglik_pointwise("plackett", data, lam)


def test_stage_log_mixture_is_log_of_the_mixture():
    ls = np.log(np.array([0.5, 0.3, 0.2]))
    le = np.log(np.array([0.6, 0.3, 0.1]))
    assert L.stage_log_mixture(ls, le) == pytest.approx(math.log(0.3 + 0.09 + 0.02), rel=1e-13)

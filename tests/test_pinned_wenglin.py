"""The readable Weng–Lin games ([WL11], Algorithms 1 and 4) pinned where a pass over many
rankings cannot see: the documented defaults, the κ floor and its count, the guards' default
(count, not raise) and keyword-only options.

Oracle: openskill's ``PlackettLuce`` / ``BradleyTerryFull`` (version 6), rating one game
from the same prior ``(μ, σ²)``. A factor ``max(1 − Δ_i, κ)`` that hit the floor shows up in
openskill's output as ``σ_new² / σ_old² = κ``, so the number of floored items is read off
openskill, not off our code.
"""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest

om = pytest.importorskip("openskill.models")

from crowdrank.inference.online import OnlineError
from crowdrank.inference.online.state import empty_counts
from crowdrank.inference.online.wenglin import bt_game, gamma_value, pl_game, wl_pass_python

GAMES = [(pl_game, "PlackettLuce"), (bt_game, "BradleyTerryFull")]
# four items, best first; the large-variance items floor under a large constant γ
MU = [0.3, -0.2, 0.1, 1.0]
S2 = [4.0, 0.5, 9.0, 0.1]


def _openskill_game(cls, mu, s2, *, beta, kappa, tau=0.0, gamma=None):
    kw = {} if gamma is None else {"gamma": lambda *args: gamma}
    model = getattr(om, cls)(beta=beta, kappa=kappa, tau=tau, **kw)
    out = model.rate([[model.rating(mu=m, sigma=math.sqrt(v))] for m, v in zip(mu, s2)])
    return np.array([t[0].mu for t in out]), np.array([t[0].sigma ** 2 for t in out])


def _floored(s2_old, s2_new, kappa, tau=0.0):
    """Items whose variance factor was the floor κ, as openskill's output shows it."""
    ratio = np.asarray(s2_new) / (np.asarray(s2_old) + tau * tau)
    return int(np.sum(np.abs(ratio - kappa) < 1e-9 * kappa))


@pytest.mark.parametrize("game,cls", GAMES)
def test_defaults_are_the_documented_ones(game, cls):
    """Omitted options mean κ = 1e-4, τ = 0, γ = σ_i/c (openskill's default γ), non-strict."""
    mu, s2 = game(MU, S2, beta=0.5)
    mu_os, s2_os = _openskill_game(cls, MU, S2, beta=0.5, kappa=1e-4, tau=0.0)
    np.testing.assert_allclose(mu, mu_os, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(s2, s2_os, rtol=1e-12)


@pytest.mark.parametrize("game,cls", GAMES)
def test_default_kappa_is_the_floor(game, cls):
    """A constant γ = 5 drives some factors below zero: the default κ = 1e-4 replaces them."""
    counts = empty_counts()
    mu, s2 = game(MU, S2, beta=0.5, gamma=5.0, counts=counts)
    mu_os, s2_os = _openskill_game(cls, MU, S2, beta=0.5, kappa=1e-4, gamma=5.0)
    np.testing.assert_allclose(mu, mu_os, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(s2, s2_os, rtol=1e-12)
    n = _floored(S2, s2_os, 1e-4)
    assert 0 < n < len(MU)           # some, not all: the count below can be wrong
    assert counts["kappa"] == n
    assert sum(counts.values()) == n   # nothing else was clamped


@pytest.mark.parametrize("game,cls", GAMES)
@pytest.mark.parametrize("kappa,tau", [(0.05, 0.0), (0.3, 0.4)])
def test_kappa_count_matches_openskill(game, cls, kappa, tau):
    """``counts["kappa"]`` counts each floored item once; the caller's dict is the one
    updated, and a second game adds to it."""
    counts = empty_counts()
    mu, s2 = game(MU, S2, beta=0.7, kappa=kappa, tau=tau, gamma=3.0, counts=counts)
    mu_os, s2_os = _openskill_game(cls, MU, S2, beta=0.7, kappa=kappa, tau=tau, gamma=3.0)
    np.testing.assert_allclose(mu, mu_os, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(s2, s2_os, rtol=1e-12)
    n = _floored(S2, s2_os, kappa, tau)
    assert 0 < n < len(MU)
    assert counts["kappa"] == n
    game(MU, S2, beta=0.7, kappa=kappa, tau=tau, gamma=3.0, counts=counts)
    assert counts["kappa"] == 2 * n


@pytest.mark.parametrize("game,cls", GAMES)
def test_floor_without_counts_argument(game, cls):
    """Without ``counts`` a floored game still runs (a private counter is used)."""
    mu, s2 = game(MU, S2, beta=0.5, gamma=5.0)
    mu_os, s2_os = _openskill_game(cls, MU, S2, beta=0.5, kappa=1e-4, gamma=5.0)
    np.testing.assert_allclose(mu, mu_os, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(s2, s2_os, rtol=1e-12)


@pytest.mark.parametrize("game", [pl_game, bt_game])
def test_guards_count_by_default_and_raise_when_strict(game):
    """An infinite prior variance makes ``Ω = σ²/c · …`` NaN: by default the guard keeps the
    old ``μ`` and ``σ²`` and counts both; ``strict=True`` raises naming ``where``."""
    counts = empty_counts()
    mu, s2 = game([0.0, 0.0], [math.inf, 1.0], beta=0.5, counts=counts)
    assert mu[0] == 0.0 and s2[0] == math.inf
    assert counts["mu"] == 1 and counts["sigma2"] == 1
    with pytest.raises(OnlineError, match="game 7: mu"):
        game([0.0, 0.0], [math.inf, 1.0], beta=0.5, strict=True, where="game 7")


def test_pass_defaults_and_strict():
    """The reference pass: omitted options are the documented defaults (checked against
    openskill game by game, with floors), and it counts rather than raises by default."""
    L = 5
    rng = np.random.default_rng(3)
    ranks = [rng.permutation(L)[: int(rng.integers(2, L + 1))] for _ in range(12)]
    order = np.full((L, len(ranks)), -1, dtype=np.int64)
    for n, r in enumerate(ranks):
        order[: len(r), n] = r
    lengths = np.array([len(r) for r in ranks])
    for model, cls in (("pl", "PlackettLuce"), ("bt", "BradleyTerryFull")):
        mu, s2 = np.linspace(-1, 1, L), np.linspace(0.5, 6.0, L)
        mu_os, s2_os = mu.copy(), s2.copy()
        floored = 0
        for r in ranks:
            m2, v2 = _openskill_game(cls, mu_os[r], s2_os[r], beta=0.5, kappa=1e-4,
                                     gamma=20.0)
            floored += _floored(s2_os[r], v2, 1e-4)
            mu_os[r], s2_os[r] = m2, v2
        counts = wl_pass_python(model, order, lengths, range(len(ranks)), mu, s2, beta=0.5,
                                gamma=20.0)
        np.testing.assert_allclose(mu, mu_os, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(s2, s2_os, rtol=1e-10)
        assert floored > 0 and counts["kappa"] == floored
        # τ defaults to 0: without the floor (γ default) the same numbers as openskill's τ = 0
        mu, s2 = np.zeros(L), np.ones(L)
        wl_pass_python(model, order, lengths, [0], mu, s2, beta=0.5)
        m2, v2 = _openskill_game(cls, np.zeros(len(ranks[0])), np.ones(len(ranks[0])),
                                 beta=0.5, kappa=1e-4)
        np.testing.assert_allclose(s2[ranks[0]], v2, rtol=1e-12)

        mu, s2 = np.zeros(L), np.ones(L)
        s2[ranks[0][0]] = math.inf
        counts = wl_pass_python(model, order, lengths, [0], mu, s2, beta=0.5)
        assert counts["mu"] >= 1
        s2[ranks[0][0]] = math.inf
        with pytest.raises(OnlineError, match="ranking 0"):
            wl_pass_python(model, order, lengths, [0], mu, s2, beta=0.5, strict=True)


@pytest.mark.parametrize("fn", [pl_game, bt_game, wl_pass_python])
def test_options_are_keyword_only(fn):
    """β, κ, τ, γ are keyword-only, so a call can never swap two of them by position."""
    params = inspect.signature(fn).parameters
    opts = [p for p in params if p in ("beta", "kappa", "tau", "gamma", "strict", "counts")]
    assert opts and all(params[p].kind is inspect.Parameter.KEYWORD_ONLY for p in opts)
    with pytest.raises(TypeError):
        if fn is wl_pass_python:
            fn("pl", np.zeros((2, 1), int), np.array([2]), [0], np.zeros(2), np.ones(2), 0.5)
        else:
            fn([0.0, 1.0], [1.0, 1.0], 0.5)


def test_gamma_values():
    """γ of [WL11]: σ_i/c (openskill's default), 1/k, or a constant."""
    assert gamma_value("sigma/c", 4.0, 8.0, 3) == 0.25
    assert gamma_value("1/k", 4.0, 8.0, 3) == pytest.approx(1 / 3)
    assert gamma_value(0.7, 4.0, 8.0, 3) == 0.7
    assert gamma_value("2.5", 4.0, 8.0, 3) == 2.5


@pytest.mark.parametrize("game", [pl_game, bt_game])
def test_shift_invariance_at_large_scores(game):
    """Adding a constant to every score moves every ``μ`` by it and leaves ``σ²`` alone
    (only score differences enter [WL11]'s updates); at + 5000 an ``exp`` of the unshifted
    or wrong-way-shifted scores would overflow."""
    shift = 5000.0
    mu0, s20 = game(MU, S2, beta=0.5)
    mu1, s21 = game([m + shift for m in MU], S2, beta=0.5)
    np.testing.assert_allclose(np.subtract(mu1, shift), mu0, atol=1e-9)
    np.testing.assert_allclose(s21, s20, rtol=1e-12)


@pytest.mark.parametrize("game", [pl_game, bt_game])
def test_factor_equal_to_kappa_is_not_a_floor(game):
    """γ = 0 makes ``Δ = 0`` exactly, so the factor ``1 − Δ`` equals κ = 1: ``σ²`` is kept
    and nothing is counted (a floor is counted only where it changes the value)."""
    counts = empty_counts()
    _, s2 = game(MU, S2, beta=0.5, gamma=0.0, kappa=1.0, counts=counts)
    assert s2 == S2
    assert counts["kappa"] == 0
    game(MU, S2, beta=0.5, gamma=0.0, kappa=1.0 + 1e-12, counts=counts)
    assert counts["kappa"] == len(MU)


def test_pass_updates_the_callers_counts():
    """``wl_pass_python(counts=c)`` adds to ``c`` and returns it (the caller's totals)."""
    order = np.array([[0, 1], [1, 2], [2, 0]])
    lengths = np.array([3, 3])
    for model in ("pl", "bt"):
        counts = empty_counts()
        counts["kappa"] = 5
        out = wl_pass_python(model, order, lengths, [0, 1], np.zeros(3), np.full(3, 4.0),
                             beta=0.5, gamma=50.0, counts=counts)
        assert out is counts and counts["kappa"] > 5

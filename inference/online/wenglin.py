"""Weng–Lin OnlinePL and OnlineBT ([WL11], Algorithms 1 and 4), readable.

The baselines that [Pan18] calls OnlinePL and OnlineBT. One ranking is one game with one
player (item) per team, best first, no ties. The conventions are those of ``openskill``
(``PlackettLuce`` and ``BradleyTerryFull``, version 6), the external cross-check: with the
same ``β, κ, τ, γ`` and the same order the numbers agree (up to openskill storing ``σ``
where we store ``σ²``). openskill's ``margin``, ``limit_sigma``, ``balance`` and weights are
left off (their defaults).

Parameters
----------
beta : performance noise ``β`` (openskill's default is ``σ0/2``).
kappa : floor ``κ`` of the variance factor, ``σ² ← σ² max(1 − δ, κ)``.
tau : additive dynamics; before a game every player's ``σ² ← σ² + τ²``.
gamma : ``"sigma/c"`` (openskill's default ``γ = σ_i / c``), ``"1/k"`` (Weng & Lin's other
    choice) or a number (a constant ``γ``).

OnlinePL (Algorithm 4): ``c = sqrt(Σ_q (σ_q² + β²))``, ``S_q = Σ_{s ranked ≥ q} e^{μ_s/c}``;
for item ``i`` with ``p_{iq} = e^{μ_i/c}/S_q`` over the stages ``q ≤ i`` it takes part in:
``Ω_i = σ_i²/c · (1 − p_{ii} − Σ_{q<i} p_{iq})``, ``Δ_i = γ σ_i²/c² Σ_{q≤i} p_{iq}(1 − p_{iq})``.

OnlineBT (Algorithm 1, full pairing): ``c_iq = sqrt(σ_i² + σ_q² + 2β²)``,
``p_iq = 1/(1 + e^{(μ_q − μ_i)/c_iq})``, ``Ω_i = Σ_{q≠i} σ_i²/c_iq (s_iq − p_iq)`` with
``s_iq = 1`` if ``i`` beat ``q``, ``Δ_i = Σ_{q≠i} γ σ_i²/c_iq² p_iq (1 − p_iq)``.

Both: ``μ_i ← μ_i + Ω_i``, ``σ_i² ← σ_i² max(1 − Δ_i, κ)``, all from the game's prior values.
"""

from __future__ import annotations

import math

import numpy as np

from .arith import exp, ieee, plain_sum
from .guards import guard_finite, guard_positive
from .state import empty_counts

GAMMAS = ("sigma/c", "1/k")


def gamma_value(gamma, sigma2_i: float, c: float, k: int) -> float:
    """``γ`` of [WL11] (Eq. 14-15 region): openskill's default ``σ_i / c``."""
    if gamma == "sigma/c":
        return math.sqrt(sigma2_i) / c
    if gamma == "1/k":
        return 1.0 / k
    return float(gamma)


def pl_game(mu_g, s2_g, *, beta, kappa=1e-4, tau=0.0, gamma="sigma/c", counts=None,
            strict=False, where=""):
    """One ranking (items best first) under OnlinePL; returns new ``(μ, σ²)`` lists."""
    with np.errstate(all="ignore"):
        m2, v2 = _pl_game(ieee(mu_g), ieee(s2_g), beta, kappa, tau, gamma, counts, strict,
                          where)
    return [float(x) for x in m2], [float(x) for x in v2]


def _pl_game(mu_g, s2_g, beta, kappa, tau, gamma, counts, strict, where):
    if counts is None:
        counts = empty_counts()
    k = len(mu_g)
    s2 = [s + tau * tau for s in s2_g]
    c = math.sqrt(plain_sum(s + beta * beta for s in s2))
    top = max(mu_g)
    # e^{(μ − max)/c}: every p_iq is a ratio, so the shift only keeps exp finite
    e = [exp((m - top) / c) for m in mu_g]
    S = [plain_sum(e[q:]) for q in range(k)]          # S_q: items ranked at q or below
    mu_new, s2_new = [], []
    for i in range(k):
        omega, delta = 0.0, 0.0
        for q in range(i + 1):
            p = e[i] / S[q]
            delta += p * (1.0 - p)
            omega += (1.0 - p) if q == i else -p
        omega *= s2[i] / c
        delta *= s2[i] / (c * c)
        delta *= gamma_value(gamma, s2[i], c, k)
        factor = 1.0 - delta
        if factor < kappa:
            counts["kappa"] += 1
        mu_new.append(guard_finite(mu_g[i] + omega, mu_g[i], "mu", counts, strict, where))
        s2_new.append(guard_positive(s2[i] * max(factor, kappa), s2[i], "sigma2", counts,
                                     strict, where))
    return mu_new, s2_new


def bt_game(mu_g, s2_g, *, beta, kappa=1e-4, tau=0.0, gamma="sigma/c", counts=None,
            strict=False, where=""):
    """One ranking (items best first) under OnlineBT with full pairing."""
    with np.errstate(all="ignore"):
        m2, v2 = _bt_game(ieee(mu_g), ieee(s2_g), beta, kappa, tau, gamma, counts, strict,
                          where)
    return [float(x) for x in m2], [float(x) for x in v2]


def _bt_game(mu_g, s2_g, beta, kappa, tau, gamma, counts, strict, where):
    if counts is None:
        counts = empty_counts()
    k = len(mu_g)
    s2 = [s + tau * tau for s in s2_g]
    mu_new, s2_new = [], []
    for i in range(k):
        omega, delta = 0.0, 0.0
        for q in range(k):
            if q == i:
                continue
            ciq = math.sqrt(s2[i] + s2[q] + 2.0 * beta * beta)
            piq = 1.0 / (1.0 + exp((mu_g[q] - mu_g[i]) / ciq))
            s = 1.0 if q > i else 0.0            # best first: i beat every q after it
            omega += s2[i] / ciq * (s - piq)
            delta += gamma_value(gamma, s2[i], ciq, k) * (s2[i] / ciq) / ciq * piq * (1 - piq)
        factor = 1.0 - delta
        if factor < kappa:
            counts["kappa"] += 1
        mu_new.append(guard_finite(mu_g[i] + omega, mu_g[i], "mu", counts, strict, where))
        s2_new.append(guard_positive(s2[i] * max(factor, kappa), s2[i], "sigma2", counts,
                                     strict, where))
    return mu_new, s2_new


#: Weng–Lin's game per model: PL's k-player game, or BT's game of rank-broken pairs
#: (:func:`wl_pass_python`).
GAMES = {"pl": pl_game, "bt": bt_game}


def wl_pass_python(model, order, lengths, seq, mu, sigma2, *, beta, kappa=1e-4, tau=0.0,
                   gamma="sigma/c", strict=False, counts=None):
    """The reference pass (``model`` ``"pl"`` or ``"bt"``), updating ``mu``, ``sigma2``."""
    if counts is None:
        counts = empty_counts()
    game = GAMES[model]
    for n in seq:
        r = [int(order[p, n]) for p in range(int(lengths[n]))]
        m2, s2 = game([float(mu[i]) for i in r], [float(sigma2[i]) for i in r], beta=beta,
                      kappa=kappa, tau=tau, gamma=gamma, counts=counts, strict=strict,
                      where=f"ranking {n}")
        for j, i in enumerate(r):
            mu[i], sigma2[i] = m2[j], s2[j]
    return counts

"""TrueSkill for paired comparisons, as a comparator beside Weng–Lin, CrowdBT and COUPLE.

TrueSkill [Herbrich06] keeps a Gaussian ``N(μ_r, σ_r²)`` per item; a comparison is won by
the item whose *performance* ``λ_r + N(0, β²)`` is larger by more than a draw margin
``ε``. For one game between ``i`` and ``j`` with ``c² = 2β² + σ_i² + σ_j²`` (after the
dynamics ``σ² ← σ² + τ²``), ``t = (μ_i − μ_j)/c`` and ``e = ε/c``, assumed-density filtering
gives, for a win of ``i``,

    ``v = φ(t − e)/Φ(t − e)``,  ``w = v (v + t − e)``,
    ``μ_i += σ_i² v / c``,  ``μ_j −= σ_j² v / c``,
    ``σ_k² ← σ_k² (1 − σ_k² w / c²)`` for ``k = i, j``;

and for a draw ``v = (φ(−e − t) − φ(e − t)) / (Φ(e − t) − Φ(−e − t))``,
``w = v² + ((e − t) φ(e − t) + (e + t) φ(e + t)) / (Φ(e − t) − Φ(−e − t))``, with ``μ_i`` moved
by ``+σ_i² v / c`` and ``μ_j`` by ``−σ_j² v / c``. The margin comes from the draw
probability: ``ε = √2 β Φ⁻¹((1 + p_draw)/2)``. These are the updates of the ``trueskill``
package for two players (the tests compare game by game).

Rankings are fed as their fully rank-broken pairs in file order, winner first; this data
layer splits ties into strict rankings, so no draws reach the update from a file (the
update handles them for callers that have draws). Functions follow the (init, update,
export) shape of the other online methods.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
from scipy.special import log_ndtr, ndtr, ndtri

# scipy.special's scalar ufuncs, not scipy.stats.norm: ~100x less overhead per game
_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def _pdf(x: float) -> float:
    return math.exp(-0.5 * x * x - _LOG_SQRT_2PI)


@dataclass(frozen=True)
class TrueSkillParams:
    """``beta``: performance sd; ``tau``: dynamics added to every σ² before a game;
    ``draw_probability``: sets the draw margin."""

    beta: float
    tau: float = 0.0
    draw_probability: float = 0.0

    @property
    def epsilon(self) -> float:
        return math.sqrt(2.0) * self.beta * float(ndtri((1 + self.draw_probability) / 2))


def v_w_win(t: float, e: float) -> tuple[float, float]:
    """``v`` and ``w`` of a win (stable through the log of Φ for very negative ``t − e``)."""
    x = t - e
    v = math.exp(-0.5 * x * x - _LOG_SQRT_2PI - float(log_ndtr(x)))
    return v, v * (v + x)


def v_w_draw(t: float, e: float) -> tuple[float, float]:
    """``v`` and ``w`` of a draw."""
    den = float(ndtr(e - t) - ndtr(-e - t))
    v = (_pdf(-e - t) - _pdf(e - t)) / den
    w = v * v + ((e - t) * _pdf(e - t) + (e + t) * _pdf(e + t)) / den
    return v, w


def init(n_items: int, mu0: float, sigma0: float) -> tuple[np.ndarray, np.ndarray]:
    """Every item at the prior ``N(mu0, sigma0²)``: ``(mu, sigma2)``."""
    return np.full(n_items, float(mu0)), np.full(n_items, float(sigma0) ** 2)


def update(mu: np.ndarray, sigma2: np.ndarray, i: int, j: int, params: TrueSkillParams,
           drawn: bool = False) -> None:
    """One game, ``i`` beating ``j`` (or a draw), in place."""
    s2i, s2j = sigma2[i] + params.tau**2, sigma2[j] + params.tau**2
    c = math.sqrt(2 * params.beta**2 + s2i + s2j)
    t, e = (mu[i] - mu[j]) / c, params.epsilon / c
    v, w = v_w_draw(t, e) if drawn else v_w_win(t, e)
    mu[i] += s2i / c * v
    mu[j] -= s2j / c * v
    sigma2[i] = s2i * (1 - s2i / c**2 * w)
    sigma2[j] = s2j * (1 - s2j / c**2 * w)


def fit_trueskill(data, priors, *, beta: float | None = None, tau: float = 0.0,
                  draw_probability: float = 0.0, progress: bool = False):
    """TrueSkill over the rank-broken pairs of ``data`` in file order, from the
    ``N(mu0, sigma0²)`` of ``priors``; ``beta`` defaults to ``sigma0/2`` (the trueskill
    package's convention, as for Weng–Lin here). Returns an
    :class:`~crowdrank.inference.online.state.OnlinePosterior` (model ``bt``, algorithm
    ``trueskill``)."""
    from tqdm.auto import tqdm

    from .state import OnlinePosterior

    s0 = float(priors.sigma0)
    params = TrueSkillParams(s0 / 2 if beta is None else float(beta), float(tau),
                             float(draw_probability))
    mu, sigma2 = init(data.n_items, priors.mu0, s0)
    pairs = data.rank_break()
    t0 = time.perf_counter()
    for i, j in tqdm(pairs.order.T, total=pairs.n_rankings, desc="trueskill",
                     disable=not progress, unit="pair"):
        update(mu, sigma2, int(i), int(j), params)
    opts = {"mu0": float(priors.mu0), "sigma0": s0, "prior_spec": getattr(priors, "spec", ""),
            "trueskill": {"beta": params.beta, "tau": params.tau,
                          "draw_probability": params.draw_probability}}
    return OnlinePosterior("bt", "trueskill", opts, list(data.items), mu, sigma2, [], None,
                           data.n_rankings, seconds=time.perf_counter() - t0)

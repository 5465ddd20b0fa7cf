"""The pieces of the samplers' exact worker-simplex representation ([MT00]'s boost
and the reweighted magnitude; docs/design.md §5.1), shared by the model inputs and the
worker-prior families. Plain NumPy (the array module is an argument where a PPL calls it),
importing nothing else of crowdrank, so that every layer above can use it.
"""

from __future__ import annotations

import numpy as np

#: The samplers' worker simplexes (``docs/design.md``, "Sampling"): concentrations below
#: this get the Marsaglia–Tsang boost (``log g = log u − e/α``); the others are sampled as
#: ``g ~ Gamma(α)`` directly (``log g`` is well scaled for ``α ≳ 1/2``, and one coordinate
#: per entry avoids the curved ``log u − e/α`` ridge that the data would otherwise pin).
BOOST_BELOW = 0.5


#: The magnitude ``S = Σ_t g_t`` of a worker's Gammas is independent of ``η = g/S`` and
#: unseen by the likelihood, so its distribution can be changed without changing the
#: posterior of ``η``: the samplers reweight it from ``Gamma(Σα)`` to
#: ``log S ~ Normal(0, LEVEL_SD²)``. A narrow ``S`` together with data-pinned ratios pins
#: every ``log g_t`` on its own axis, which a diagonal mass matrix can follow; with the
#: original ``Gamma(Σα)`` every ``log g_t`` of a worker moves together along ``log S``.
LEVEL_SD = 0.3


def level_log_ratio(log_s, alpha_sum, xp=np, sd=None):
    """``log f(S) − log Gamma(S; Σα, 1)`` with ``log S ~ Normal(0, sd²)`` (both as
    densities of ``S``), the log weight that moves ``S``'s law from one to the other.
    ``xp`` is the array module (NumPy, ``jax.numpy``, or ``pytensor.tensor``); ``sd``
    (default :data:`LEVEL_SD`) may be one value per worker: any law of ``S`` is exact."""
    from math import lgamma, log, pi

    a = alpha_sum
    sd = LEVEL_SD if sd is None else np.asarray(sd, float)
    lg = np.array([lgamma(float(v)) for v in np.ravel(a)]).reshape(np.shape(a))
    log_f = -0.5 * (log_s / sd) ** 2 - np.log(sd) - 0.5 * log(2 * pi) - log_s
    log_p = (a - 1.0) * log_s - xp.exp(log_s) - lg
    return log_f - log_p


def boost_split(alpha, boost=None) -> tuple[tuple, tuple]:
    """Index sets ``(big, small)`` of the ``(W, K)`` concentrations sampled as plain Gammas
    and with the boost, in row-major order. ``boost`` (a boolean ``(W, K)`` mask) overrides
    the default rule ``α < BOOST_BELOW``; either representation is exact, only the
    sampler's efficiency differs (see :func:`boost_mask`)."""
    a = np.asarray(alpha)
    small = a < BOOST_BELOW if boost is None else np.asarray(boost, bool)
    if small.shape != a.shape:
        raise ValueError(f"boost mask must be {a.shape}, got {small.shape}")
    return np.nonzero(~small), np.nonzero(small)


#: An entry whose *approximate posterior* concentration is at least this is sampled as a
#: plain Gamma even when its prior concentration is tiny (see :func:`boost_mask`).
INFORMED_ALPHA = 10.0


def boost_mask(prior_alpha, approx_alpha=None) -> np.ndarray:
    """Which entries get the Marsaglia–Tsang boost.

    The boost is what keeps a *prior-dominated* ``log η_t`` with ``α_t ≪ 1`` (a tail with
    scale ``1/α_t``) well scaled; an entry that the data pin (its approximate posterior
    ``Beta(a, S − a)`` marginal has ``a ≥ INFORMED_ALPHA``: no mass piled near 0) is better
    as one plain ``log g_t`` coordinate than as the boost's thin curved ``log u − e/α``
    ridge. Without an approximation the prior alone decides (``α < BOOST_BELOW``)."""
    small = np.asarray(prior_alpha) < BOOST_BELOW
    if approx_alpha is not None:
        small &= np.asarray(approx_alpha) < INFORMED_ALPHA
    return small

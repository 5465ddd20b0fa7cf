"""NumPyro distributions the programs need and NumPyro does not ship."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpyro.distributions as dist


class LogGamma(dist.Distribution):
    """``y = log g`` with ``g ~ Gamma(α, 1)``: density ``exp(α y − e^y) / Γ(α)`` on the real
    line. The worker table of ``simplex="gibbs"``: held in log space because for ``α ≪ 1``
    ``g`` itself underflows (``log g ≈ −Exp(1)/α``; ``α = 0.0077`` gives ``log g`` below
    ``−745`` with probability ~0.3 %); sampled by :func:`jax.random.loggamma`, exact for
    small ``α``."""

    # NumPyro's declarations, read from the class (never mutated)
    arg_constraints = {"concentration": dist.constraints.positive}  # noqa: RUF012
    support = dist.constraints.real
    reparametrized_params = []  # noqa: RUF012

    def __init__(self, concentration, validate_args=None):
        self.concentration = jnp.asarray(concentration)
        super().__init__(batch_shape=jnp.shape(self.concentration),
                         validate_args=validate_args)

    def sample(self, key, sample_shape=()):
        shape = tuple(sample_shape) + self.batch_shape
        return jax.random.loggamma(key, jnp.broadcast_to(self.concentration, shape))

    def log_prob(self, value):
        a = self.concentration
        return a * value - jnp.exp(value) - jax.scipy.special.gammaln(a)

"""The Plackett–Luce family's NumPyro columns and draws: PL, BT and CrowdBT on rank-broken
pairs, PeerGrader's reliability-scaled PL ([Plackett75], [Luce59], [BT52], [Chen13],
[Raman14]; docs/design.md §2)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ..model_inputs import ModelInputs
from .blocks import pair_block, pl_block


# The models' column functions (models.registry.ModelSpec.numpyro_columns):
# ``f(inputs, lam, log_eta)`` with ``log_eta`` the table of :func:`log_eta_table` (or None).
def ranking_columns(inputs: ModelInputs, lam, log_eta=None):
    """Plackett–Luce ([Pan18], Eq. 1), one value per ranking column."""
    index = inputs.index
    return jnp.concatenate([pl_block(lam[index[:k, a:b]]) for k, a, b in inputs.blocks])


def pair_columns(inputs: ModelInputs, lam, log_eta=None):
    """BT on the rank-broken pairs, or CrowdBT [Chen13] when the worker table is given."""
    if log_eta is None:
        return pair_block(lam[inputs.index])
    return pair_block(lam[inputs.index], log_eta[inputs.worker].T)


def scaled_columns(inputs: ModelInputs, lam, log_eta):
    """PeerGrader [Raman14]: PL on the grader's scaled scores ``η_g·λ`` (one scale per
    column)."""
    index = inputs.index
    scale = jnp.exp(log_eta)[inputs.worker]
    return jnp.concatenate([pl_block(lam[index[:k, a:b]] * scale[a:b])
                            for k, a, b in inputs.blocks])

# ---------------------------------------------------------------- the observed site
# The models' draws (models.registry.ModelSpec.numpyro_draw): new orders ``(n, k)`` of the
# item sets ``items`` ``(n, k)`` (one task per row) by the generative process
# (:class:`RankingLikelihood`); ``log_w`` is the rows' worker table (``log η`` ``(n, K)``
# COUPLE, ``[log η, log(1 − η)]`` CrowdBT, ``log η_g`` ``(n,)`` PeerGrader, None). Each splits
# ``key`` the same way (true order, flip, stages).
def _pl_order(key, items, x):
    # the true order: Plackett–Luce by sorting λ + Gumbel noise (best first)
    g = x + jax.random.gumbel(key, x.shape, x.dtype)
    return jnp.take_along_axis(items, jnp.argsort(-g, axis=1), axis=1)


def draw_pl(key, items, log_w, lam):
    """PL (and BT): the PL order."""
    k_true, _, _ = jax.random.split(key, 3)
    return _pl_order(k_true, items, lam[items])


def draw_scaled(key, items, log_w, lam):
    """PeerGrader: PL on ``η_g·λ``."""
    k_true, _, _ = jax.random.split(key, 3)
    return _pl_order(k_true, items, lam[items] * jnp.exp(log_w)[:, None])


def draw_crowdbt(key, items, log_w, lam):
    """CrowdBT: the PL order with probability ``η_w``, else its reverse."""
    k_true, k_flip, _ = jax.random.split(key, 3)
    true = _pl_order(k_true, items, lam[items])
    right = jnp.log(jax.random.uniform(k_flip, (items.shape[0],), lam.dtype)) < log_w[:, 0]
    return jnp.where(right[:, None], true, true[:, ::-1])

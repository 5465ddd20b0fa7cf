"""Dense-block kernels of the NumPyro programs (docs/design.md §2, §2.1; [Pan18], Eq. 1-4).

One ranking length at a time, on ``(k, n)`` slices with static shapes (no masks): the
Plackett–Luce, COUPLE-stage and pair kernels that every model's column functions reuse,
the guarded log of a worker table and the float64 accumulation of a block's total (see
:mod:`crowdrank.models.numpyro_models`, "Precision").
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.nn import log_sigmoid


# ---------------------------------------------------------------- row kernels
def _lse_rows(rows):
    """``log Σ_j exp(rows[j])`` for a short list of equal-shape arrays, stably.

    Written row by row so that XLA fuses it into one elementwise loop; the shift is a
    ``stop_gradient`` (the value does not depend on it, and neither does the gradient).
    """
    m = rows[0]
    for r in rows[1:]:
        m = jnp.maximum(m, r)
    m = jax.lax.stop_gradient(m)
    s = jnp.exp(rows[0] - m)
    for r in rows[1:]:
        s = s + jnp.exp(r - m)
    return m + jnp.log(s)


def _suffix_lse(x):
    """``LSE_i = log Σ_{j≥i} exp(x[j])`` for ``i = 0..k-2`` by backward recursion."""
    k = x.shape[0]
    out = [None] * (k - 1)
    acc = x[k - 1]
    for i in range(k - 2, -1, -1):
        acc = jnp.logaddexp(x[i], acc)
        out[i] = acc
    return out


def pl_block(x):
    """Plackett–Luce ([Pan18], Eq. 1) of a dense block: ``x = λ[ρ]`` ``(k, n)`` → ``(n,)``."""
    lse = _suffix_lse(x)
    return sum(x[i] - lse[i] for i in range(x.shape[0] - 1))


def couple_block(x, log_eta_rows, log_cum_rows):
    """COUPLE ([Pan18], Eq. 3-4) of a dense block of rankings of one length ``k``.

    Parameters
    ----------
    x : (k, n)
        ``λ`` of each ranking's items in reported order.
    log_eta_rows : (k, n)
        ``log η_w[t]`` of each ranking's worker.
    log_cum_rows : (k, n)
        ``log Σ_{v≤t} η_w[v]`` of each ranking's worker.
    """
    k = x.shape[0]
    lse = _suffix_lse(x)
    total = 0.0
    for i in range(k - 1):
        m = k - i
        mix = _lse_rows([log_eta_rows[t] + x[i + t] for t in range(m)])
        total = total + mix - lse[i] - log_cum_rows[m - 1]
    return total


def pair_block(x, log_eta_pairs=None):
    """BT (``log_eta_pairs=None``) or CrowdBT [Chen13] per pair ``x = (λ_i, λ_j)``:
    ``log(η σ(d) + (1 − η) σ(−d))``, ``d = λ_i − λ_j``, via logaddexp for stability.

    ``log_eta_pairs`` is ``(2, n)``: ``log η`` and ``log(1 − η)`` of each pair's worker, so
    that an accuracy near 0 or 1 never goes through ``log(1 − η)`` of a rounded ``η``."""
    d = x[0] - x[1]
    if log_eta_pairs is None:
        return log_sigmoid(d)
    return jnp.logaddexp(log_eta_pairs[0] + log_sigmoid(d),
                         log_eta_pairs[1] + log_sigmoid(-d))

def _safe_log(x):
    # A Dirichlet draw can underflow to exactly 0 (float32, tiny α); log(tiny) keeps the
    # stage finite (that entry's weight is ~0 anyway) instead of producing -inf - -inf.
    return jnp.log(jnp.maximum(x, jnp.finfo(x.dtype).tiny))

def _acc_sum(v):
    """``Σ v``, accumulated in float64 whenever JAX has 64-bit types (see module doc)."""
    return jnp.sum(v.astype(jnp.float64) if jax.config.jax_enable_x64 else v)

"""The five models as NumPyro programs (DESIGN.md §2; seed 000, Eq. 1-4).

Every model is a plain function of a :class:`~models.model_inputs.ModelInputs` (padded
arrays and masks), vectorised over rankings; the only Python loop is over the ``K <= 6``
stage positions. Sites: ``lambda`` ``(L,)`` ``~ Normal(mu0, sigma0)``; ``eta`` ``(W, K)``
``~ Dirichlet(α_w)`` (COUPLE) or ``(W,)`` ``~ Beta(a_w, b_w)`` (CrowdBT); the likelihood
enters as one ``numpyro.factor("loglik", ...)`` so that NUTS sees a single fused kernel.

The log-likelihood functions (``*_loglik``) return one value per *column* of the padded
layout; :func:`pointwise_loglik` sums them to one value per source ranking.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
from jax.nn import log_sigmoid
from jax.scipy.special import logsumexp

from .model_inputs import ModelInputs


# ---------------------------------------------------------------- stage kernels
def _masked_lse(x, active):
    """``log Σ exp(x)`` over axis 0, over ``active`` entries only (padding is ``-inf``)."""
    return logsumexp(jnp.where(active, x, -jnp.inf), axis=0)


def pl_loglik(lam, index, mask):
    """Plackett–Luce per ranking (seed 000, Eq. 1): ``Σ_i λ_ρ(i) − log Σ_{j≥i} e^λ_ρ(j)``.

    ``index, mask`` ``(K, N)``; returns ``(N,)``.
    """
    x = lam[index]
    K = index.shape[0]
    total = jnp.zeros(index.shape[1], x.dtype)
    for i in range(K - 1):
        on = mask[i + 1]  # stage i exists iff k >= i + 2
        # On a dead stage every slot is made active so that no -inf - -inf NaN appears;
        # the value is then discarded by the outer where.
        act = mask[i:] | ~on
        stage = x[i] - _masked_lse(x[i:], act)
        total = total + jnp.where(on, stage, 0.0)
    return total


def couple_loglik(lam, log_eta_rows, index, mask):
    """COUPLE per ranking (seed 000, Eq. 3-4), stable stage mixture.

    At stage ``i`` with ``m`` candidates ``ρ(i..k)``:
    ``log P = logsumexp_t [log η̄_t + log softmax(λ_c)_t]``, ``t < m``, with
    ``log η̄_t = log η_t − logsumexp_{v<m} log η_v``; padded slots are ``-inf``.

    Parameters
    ----------
    lam : (L,)
    log_eta_rows : (K, N)
        ``log η`` of each ranking's worker, transposed to the per-position layout.
    index, mask : (K, N)
    """
    x = lam[index]
    K = index.shape[0]
    total = jnp.zeros(index.shape[1], x.dtype)
    for i in range(K - 1):
        on = mask[i + 1]
        act = mask[i:] | ~on
        xs = jnp.where(act, x[i:], -jnp.inf)
        log_soft = xs - logsumexp(xs, axis=0)
        le = jnp.where(act, log_eta_rows[: K - i], -jnp.inf)
        log_etabar = le - logsumexp(le, axis=0)
        stage = logsumexp(log_etabar + log_soft, axis=0)
        total = total + jnp.where(on, stage, 0.0)
    return total


def couple_log_normalizer(lam, log_eta, group):
    """``log Σ_{orderings} Eq. 4`` for the rankings of one length ``k`` (DESIGN.md §2).

    ``group`` is a :class:`~models.model_inputs.PermGroup`; every ``k!`` ordering of each
    task is scored with :func:`couple_loglik` on a ``(k, P·n_k)`` layout and the ``P``
    values per task are combined by logsumexp. Returns ``(n_k,)``.
    """
    k, P, n = group.k, group.perms.shape[0], group.items.shape[1]
    cand = group.items[group.perms.T]                 # (k, P, n_k): ordering p of task j
    idx = jnp.asarray(cand.reshape(k, P * n))
    le = log_eta[group.worker, :k].T                  # (k, n_k)
    le = jnp.broadcast_to(le[:, None, :], (k, P, n)).reshape(k, P * n)
    ll = couple_loglik(lam, le, idx, jnp.ones((k, P * n), bool)).reshape(P, n)
    return logsumexp(ll, axis=0)


def pair_loglik(lam, index, eta_pairs=None):
    """BT (``eta_pairs=None``) or CrowdBT (Chen et al. 2013) per pair ``i > j``:
    ``log(η σ(d) + (1 − η) σ(−d))``, ``d = λ_i − λ_j``, via logaddexp for stability."""
    d = lam[index[0]] - lam[index[1]]
    if eta_pairs is None:
        return log_sigmoid(d)
    return jnp.logaddexp(jnp.log(eta_pairs) + log_sigmoid(d),
                         jnp.log1p(-eta_pairs) + log_sigmoid(-d))


# ---------------------------------------------------------------- whole data
def _safe_log(x):
    # A Dirichlet draw can underflow to exactly 0 in float32 for tiny α; log(tiny) keeps
    # log η̄ finite (its weight is then ~0 anyway) instead of turning the stage into NaN.
    return jnp.log(jnp.maximum(x, jnp.finfo(x.dtype).tiny))


def column_loglik(inputs: ModelInputs, lam, eta=None):
    """Log-likelihood of every column of the padded layout (rankings, or pairs)."""
    m = inputs.model
    index, mask = jnp.asarray(inputs.index), jnp.asarray(inputs.mask)
    # init_to_value hands back the caller's NumPy arrays: make them JAX arrays before
    # they are indexed with traced indices
    lam = jnp.asarray(lam)
    eta = None if eta is None else jnp.asarray(eta)
    if m == "pl":
        return pl_loglik(lam, index, mask)
    if m == "bt":
        return pair_loglik(lam, index)
    if m == "crowdbt":
        return pair_loglik(lam, index, eta[jnp.asarray(inputs.worker)])
    log_eta = _safe_log(eta)
    ll = couple_loglik(lam, log_eta[jnp.asarray(inputs.worker)].T, index, mask)
    if m == "couple-normalized":
        for g in inputs.groups:
            ll = ll.at[g.rows].add(-couple_log_normalizer(lam, log_eta, g))
    return ll


def pointwise_loglik(inputs: ModelInputs, lam, eta=None):
    """One log-likelihood value per source ranking, shape ``(n_obs,)``: pairs of BT/CrowdBT
    are summed back to their ranking (``segment_sum`` over ``origin``)."""
    ll = column_loglik(inputs, lam, eta)
    if inputs.model in ("bt", "crowdbt"):
        return jax.ops.segment_sum(ll, jnp.asarray(inputs.origin), num_segments=inputs.n_obs)
    return ll


def model(inputs: ModelInputs):
    """The NumPyro program of ``inputs.model`` (λ, η priors plus one likelihood factor)."""
    lam = numpyro.sample("lambda", dist.Normal(inputs.mu0, inputs.sigma0)
                         .expand([inputs.n_items]).to_event(1))
    eta = None
    if inputs.model == "crowdbt":
        a = jnp.asarray(inputs.alpha)
        eta = numpyro.sample("eta", dist.Beta(a[:, 0], a[:, 1]).to_event(1))
    elif inputs.model in ("couple", "couple-normalized"):
        eta = numpyro.sample("eta", dist.Dirichlet(jnp.asarray(inputs.alpha)).to_event(1))
    # Only the total enters the density: the pairs of BT/CrowdBT need not be regrouped.
    numpyro.factor("loglik", jnp.sum(column_loglik(inputs, lam, eta)))

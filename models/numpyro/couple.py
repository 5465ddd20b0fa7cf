"""COUPLE's NumPyro columns by autodiff, the normalised model's ``log Σ_orderings Eq. 4``,
and both models' draws ([Pan18], Eq. 3-4; docs/design.md §2, §4)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ..couple_normalizer import ordering_stage_product
from ..model_inputs import ModelInputs
from .blocks import _lse_rows, couple_block
from .pl import _pl_order


def couple_log_normalizer(lam, log_eta, log_cum, index, worker, group):
    """``log Σ_{k! orderings} Eq. 4`` for the rankings of one length (``docs/design.md``).

    Returns ``(n,)``. Stage ``i`` of ordering ``π`` (``m = k − i`` items left) contributes
    ``Σ_{t<m} η_t p_{π(i+t)} / (S_i · Σ_{v<m} η_v)`` with ``p = exp(λ − max)`` and the
    suffix sum ``S_i = Σ_{j≥i} p_{π(j)}`` ([Pan18], Eq. 4), so the sum over orderings is
    a sum of products of ratios, computed in linear space
    (:func:`crowdrank.models.couple_normalizer.ordering_stage_product`, shared with PyMC):

    * ``λ`` is gathered once per task (``(k, n)``); an ordering is a *static* reordering of
      those ``k`` rows, so no ``k!``-fold gather (and no ``k!``-fold scatter-add in the
      backward pass, which cost most of the gradient);
    * the worker weights ``w^{(m)}_t = exp(log η_t − log Σ_{v<m} η_v)`` (``t < m``) are
      each ``≤ 1`` and their largest is ``≥ 1/m``, so nothing underflows however small
      ``η_t`` is (an underflowed ``w`` is an entry whose weight is ``< 1e-308``);
    * ``p ∈ (0, 1]`` after the per-task shift, which cancels in every ratio.

    Every ratio is a positive ``O(1)`` quantity (for ``λ`` spreads within a task below
    ~50 in float64), so the sum is taken directly and its log returned. Measured 3.3x
    cheaper per gradient than the log-space form over gathered orderings
    (``bench/bench_couple_normalizer.py``), equal to it to ~1e-13.
    """
    k, a, b = group.k, group.start, group.stop
    x = lam[index[:k, a:b]]                                   # (k, n): one gather
    p = jnp.exp(x - jax.lax.stop_gradient(x.max(axis=0)))
    le = log_eta[worker[a:b], :k].T                           # (k, n)
    lc = log_cum[worker[a:b], :k].T
    w = {m: [jnp.exp(le[t] - lc[m - 1]) for t in range(m)] for m in range(2, k + 1)}
    total = 0.0
    for perm in np.asarray(group.perms):                      # static: k! orderings
        total = total + ordering_stage_product([p[j] for j in perm],
                                               lambda m, t: w[m][t], k)
    return jnp.log(total)


def couple_log_normalizer_gathered(lam, log_eta, log_cum, index, worker, group):
    """The same as :func:`couple_log_normalizer`, the direct way: every ordering scored
    with :func:`couple_block` in log space on a ``(k, k!·n)`` gathered layout, combined by
    logsumexp. Kept as the reference the fast form is tested and measured against."""
    k, a, b = group.k, group.start, group.stop
    P, n = group.perms.shape[0], b - a
    cand = index[:k, a:b][group.perms.T].reshape(k, P * n)     # ordering p of task j
    w = jnp.tile(worker[a:b], P)
    ll = couple_block(lam[cand], log_eta[w, :k].T, log_cum[w, :k].T).reshape(P, n)
    return _lse_rows([ll[p] for p in range(P)])

def couple_columns_ad(inputs: ModelInputs, lam, log_eta):
    """COUPLE ([Pan18], Eq. 3-4) by autodiff; normalised COUPLE subtracts, for each
    length group of ``inputs.groups``, ``log Σ_orderings Eq. 4``."""
    index, worker = inputs.index, inputs.worker
    # log Σ_{v≤t} η_v as a cumulative logsumexp of log η: exact however small η_v is
    log_cum = jax.lax.cumlogsumexp(log_eta, axis=1)
    # One (W, 2K) table gathered once per block: one scatter-add in the backward pass
    # instead of two (measured 63 -> 53 ms per gradient at the paper's scale, 2 cores).
    table = jnp.concatenate([log_eta, log_cum], axis=1)
    K = log_eta.shape[1]
    parts = []
    for k, a, b in inputs.blocks:
        rows = table[worker[a:b]].T
        parts.append(couple_block(lam[index[:k, a:b]], rows[:k], rows[K:K + k]))
    ll = jnp.concatenate(parts)
    for g in inputs.groups:
        z = couple_log_normalizer(lam, log_eta, log_cum, index, worker, g)
        ll = ll.at[g.start:g.stop].add(-z)
    return ll

def draw_couple(key, items, log_w, lam):
    """COUPLE's story ([Pan18], Sect. 3.2): at a stage with m items left the worker reports
    the item at offset t of the remaining true order with probability η̄_t."""
    k_true, _, k_stage = jax.random.split(key, 3)
    k = items.shape[1]
    remaining, out = _pl_order(k_true, items, lam[items]), []
    for i, sk in zip(range(k - 1), jax.random.split(k_stage, max(k - 1, 1))):
        m = k - i
        t = jax.random.categorical(sk, log_w[:, :m], axis=1)
        out.append(jnp.take_along_axis(remaining, t[:, None], axis=1)[:, 0])
        pos = jnp.arange(m - 1)[None, :]
        remaining = jnp.where(pos < t[:, None], remaining[:, :-1], remaining[:, 1:])
    out.append(remaining[:, 0])
    return jnp.stack(out, axis=1)


def draw_normalized(key, items, log_w, lam):
    """Normalised COUPLE, exactly: one of the k! orderings with probability
    Eq. 4 / Σ_orderings Eq. 4 (for k = 2 the story is already exact)."""
    n, k = items.shape
    if k < 3:
        return draw_couple(key, items, log_w, lam)
    from itertools import permutations

    import numpy as np

    _, _, k_stage = jax.random.split(key, 3)
    perms = np.array(list(permutations(range(k))))
    P = len(perms)
    cand = items[:, perms]                                   # (n, P, k)
    rows = jnp.repeat(log_w[:, :k], P, axis=0).T            # (k, n·P)
    cum = jnp.repeat(jax.lax.cumlogsumexp(log_w, axis=1)[:, :k], P, axis=0).T
    ll = couple_block(lam[cand.reshape(n * P, k)].T, rows, cum).reshape(n, P)
    j = jax.random.categorical(k_stage, ll, axis=1)
    return jnp.take_along_axis(cand, j[:, None, None], axis=1)[:, 0]

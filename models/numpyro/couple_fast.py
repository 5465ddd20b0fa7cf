"""COUPLE's columns and total with hand-written derivatives computed in the forward pass
(``jax.custom_vjp``): the sampler's fast path (``model(..., fast=True)``; see the comment
below and :mod:`crowdrank.models.numpyro_models`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ..model_inputs import ModelInputs
from .blocks import _acc_sum
from .program import log_eta_table


# ---------------------------------------------------------------- fast COUPLE columns
# The sampler needs the total log-likelihood and its gradient, LOO the per-ranking values.
# ``couple_columns`` computes
# the same per-ranking values as ``column_loglik`` for COUPLE, but
#
# * the ``- log Σ_{v≤m} η_v`` terms of a ranking of length ``k`` are one entry of a dense
#   ``(W, K − 1)`` table of their cumulative sums (one gather per column instead of
#   ``k − 1``), whose gradient rides in the same scatter as ``η``'s;
# * the values are put in data order by a gather (COUPLE's columns are a permutation of the
#   rankings) and the cotangents back by another: no scatter-add by ``origin``;
# * each stage is evaluated with a per-stage shift (the suffix maximum of λ), as
#   ``log P_i = log A_i − log S_i`` with ``u_{ij} = exp(λ_j − max_{j'≥i} λ_{j'}) ≤ 1``,
#   ``S_i = Σ_{j≥i} u_{ij} ≥ 1`` and ``A_i = Σ_t η_t u_{i,i+t} ≥ η_{t*} ≥ tiny``: the same
#   value as log η̄ + log-softmax with a logsumexp over the active entries only, and as
#   stable (nothing overflows; the largest ``u`` of a stage is exactly 1);
# * the per-column derivatives are written by hand (``jax.custom_vjp``) and computed *in
#   the forward pass*, in the same elementwise loop that computes the value, and reduced
#   there to items and workers with one ``segment_sum`` per length block; a backward pass
#   whose cotangent is the same for every ranking (a sum: tests/test_gradients.py feeds
#   −1) only scales those reductions, any other cotangent weights the per-column
#   derivatives (``lax.cond`` at run time), so every cotangent is exact. The sampler uses
#   the scalar twin :func:`_couple_sum_core` (see there why).
#   Measured at the paper's scale (``bench/bench_gradient.py``): autodiff materialises many
#   ``(k, n)`` intermediates and recomputes the exponentials once per consumer; this path
#   does not.
class _CouplePlan:
    """NumPy tables of one ``ModelInputs`` for :func:`couple_columns` (built at trace time)."""

    def __init__(self, inputs: ModelInputs):
        import numpy as np

        self.blocks = list(inputs.blocks)
        self.index = [np.ascontiguousarray(inputs.index[:k, a:b]) for k, a, b in self.blocks]
        self.worker = [np.ascontiguousarray(inputs.worker[a:b]) for k, a, b in self.blocks]
        # COUPLE's columns are the rankings: ``origin`` is a permutation, and gathers in
        # both directions put the values in data order (no scatter-add)
        self.origin = np.asarray(inputs.origin)
        self.inverse = np.argsort(self.origin)
        self.counts = {k: np.bincount(w, minlength=inputs.n_workers)
                       for (k, a, b), w in zip(self.blocks, self.worker)}
        # the sum's form: how many stages with m candidates each worker reported
        stages = np.zeros((inputs.n_workers, inputs.K))
        for (k, a, b), w in zip(self.blocks, self.worker):
            for i in range(k - 1):          # stage i has m = k - i candidates
                stages[:, k - i - 1] += self.counts[k]
        self.stages = stages


def _couple_block_fwd(x, e):
    """Value ``(n,)`` and derivatives ``dx (k, n)``, ``de (k, n)`` of each column of one
    dense block.

    ``x = λ[ρ]`` ``(k, n)``, ``e = η_w`` rows ``(k, n)`` (clamped to ``tiny``). Value per
    column: ``Σ_i log A_i − log S_i`` (the ``− log Σ_{v≤m} η_v`` term is added outside).
    """
    k = x.shape[0]
    xs = [x[j] for j in range(k)]
    es = [e[t] for t in range(k)]
    # suffix maxima (no gradient flows through a shift: the value does not depend on it)
    cm = [None] * k
    cm[k - 1] = xs[k - 1]
    for i in range(k - 2, -1, -1):
        cm[i] = jnp.maximum(xs[i], cm[i + 1])
    val = jnp.zeros_like(xs[0])
    dx = [jnp.zeros_like(xs[0])] * k
    de = [jnp.zeros_like(xs[0])] * k
    for i in range(k - 1):
        u = [jnp.exp(xs[j] - cm[i]) for j in range(i, k)]
        S = u[0]
        A = es[0] * u[0]
        for t in range(1, k - i):
            S = S + u[t]
            A = A + es[t] * u[t]
        val = val + (jnp.log(A) - jnp.log(S))
        rA = 1.0 / A
        rS = 1.0 / S
        for t in range(k - i):
            ua = u[t] * rA
            dx[i + t] = dx[i + t] + es[t] * ua - u[t] * rS
            de[t] = de[t] + ua
    return val, jnp.stack(dx), jnp.stack(de)


def _couple_core(plan: _CouplePlan, L: int, W: int, K: int):
    """``core(lam, eta, pay)``: per ranking, in data order, ``Σ_i (log A_i − log S_i)``
    minus ``pay[w, k − 2]`` (the ranking's ``Σ log Σ_{v≤m} η_v``), with a hand-written VJP
    (see the section comment)."""
    idx = [jnp.asarray(ix) for ix in plan.index]
    flat = [jnp.asarray(ix.ravel()) for ix in plan.index]
    wk = [jnp.asarray(w) for w in plan.worker]
    origin, inverse = jnp.asarray(plan.origin), jnp.asarray(plan.inverse)

    def forward(lam, eta, pay, need_grad):
        vals, res = [], []
        dlam = jnp.zeros(L, lam.dtype)
        deta = jnp.zeros((W, K), lam.dtype)
        cnt = jnp.zeros((W, max(K - 1, 1)), lam.dtype)
        for (k, a, b), ix, fl, w in zip(plan.blocks, idx, flat, wk):
            v, dx, de = _couple_block_fwd(lam[ix], eta[w, :k].T)
            if need_grad:
                # computed once and kept: without the barrier XLA fuses the elementwise
                # chain into each consumer (the values, two scatters) and recomputes it
                v, dx, de = jax.lax.optimization_barrier((v, dx, de))
            if k >= 2:
                v = v - pay[w, k - 2].astype(v.dtype)
            vals.append(v)
            if need_grad:
                res.append((dx, de))
                # the derivatives of the *sum*, reduced here in the fused forward loop:
                # what the sampler's uniform cotangent needs (see bwd)
                dlam = dlam + jax.ops.segment_sum(dx.ravel(), fl, num_segments=L)
                deta = deta.at[:, :k].add(jax.ops.segment_sum(de.T, w, num_segments=W))
                if k >= 2:
                    cnt = cnt.at[:, k - 2].add(jnp.asarray(plan.counts[k], lam.dtype))
        return jnp.concatenate(vals)[inverse], (dlam, deta, -cnt, res)

    @jax.custom_vjp
    def core(lam, eta, pay):
        return forward(lam, eta, pay, False)[0]

    def fwd(lam, eta, pay):
        return forward(lam, eta, pay, True)

    def general(g, res):
        dlam = jnp.zeros(L, res[0][0].dtype)
        deta = jnp.zeros((W, K), res[0][0].dtype)
        dpay = jnp.zeros((W, max(K - 1, 1)), res[0][0].dtype)
        for (k, a, b), fl, w, (dx, de) in zip(plan.blocks, flat, wk, res):
            gb = g[a:b].astype(dx.dtype)
            dlam = dlam + jax.ops.segment_sum((dx * gb).ravel(), fl, num_segments=L)
            # one scatter per block for η and the pay table: the weights ride along
            rows = jnp.concatenate([(de * gb).T, gb[:, None]], axis=1)
            dw = jax.ops.segment_sum(rows, w, num_segments=W)
            deta = deta.at[:, :k].add(dw[:, :k])
            if k >= 2:
                dpay = dpay.at[:, k - 2].add(-dw[:, k])
        return dlam, deta, dpay

    def bwd(saved, g):
        dlam1, deta1, dpay1, res = saved
        g = g[origin]                     # back to the layout's column order: a gather
        g0 = g[0].astype(dlam1.dtype)
        # NUTS differentiates the sum (every cotangent the same): scale the forward's
        # reductions; any other cotangent takes the per-ranking path
        return jax.lax.cond(jnp.all(g == g[0]),
                            lambda: (g0 * dlam1, g0 * deta1, g0 * dpay1),
                            lambda: general(g, res))

    core.defvjp(fwd, bwd)
    return core


def couple_columns(inputs: ModelInputs, lam, eta=None, *, log_eta=None):
    """The per-ranking log-likelihood of COUPLE, ``(n_obs,)`` in data order (the values of
    :func:`pointwise_loglik`), with the hand-written derivatives of the section comment:
    the sampler's fast path.

    The core works on ``η'_w = exp(log η_w − max_t log η_w)`` (largest entry exactly 1), so
    an entry far below the largest is lost only when it is ``< 1e-38`` times smaller (float32)
    and contributes nothing measurable to any stage; the shift cancels between ``log A_i`` and
    ``log Σ_{v≤m} η_v``, which is a cumulative logsumexp of ``log η`` (exact).
    """
    lam = jnp.asarray(lam)
    log_eta = log_eta_table(inputs, eta, log_eta)
    plan = _CouplePlan(inputs)
    core = _couple_core(plan, inputs.n_items, inputs.n_workers, inputs.K)
    shift = jax.lax.stop_gradient(jnp.max(log_eta, axis=1, keepdims=True))
    eta_c = jnp.maximum(jnp.exp(log_eta - shift), jnp.finfo(log_eta.dtype).tiny)
    log_cum = jax.lax.cumlogsumexp(log_eta, axis=1) - shift
    # a ranking of length k pays Σ_{m=2..k} log Σ_{v<m} η_v: column k-2 of this table
    pay = jnp.cumsum(log_cum[:, 1:], axis=1) if inputs.K > 1 else jnp.zeros_like(log_cum)
    return core(lam, eta_c, pay)


def _couple_sum_core(plan: _CouplePlan, L: int, W: int, K: int):
    """``core(lam, eta) = Σ_columns Σ_i (log A_i − log S_i)``: the scalar form of
    :func:`_couple_core`, whose derivatives are reduced in the forward loop and only scaled
    by the (scalar) cotangent. The sampler's path: with a vector output XLA no longer fuses
    the values and the reductions into one loop (measured 1.2–1.6x slower at N = 45,000,
    ``bench/results/observed_gradient.json``)."""
    blocks = [(blk, ix, w) for blk, ix, w in zip(plan.blocks, plan.index, plan.worker)
              if blk[0] >= 2]
    idx = [jnp.asarray(ix) for _, ix, _ in blocks]
    flat = [jnp.asarray(ix.ravel()) for _, ix, _ in blocks]
    wk = [jnp.asarray(w) for _, _, w in blocks]

    def value_and_grads(lam, eta, need_grad):
        val = 0.0
        dlam = jnp.zeros(L, lam.dtype)
        deta = jnp.zeros((W, K), eta.dtype)
        for ((k, a, b), _, _), ix, fl, w in zip(blocks, idx, flat, wk):
            v, dx, de = _couple_block_fwd(lam[ix], eta[w, :k].T)
            val = val + _acc_sum(v)
            if need_grad:
                dlam = dlam + jax.ops.segment_sum(dx.ravel(), fl, num_segments=L)
                deta = deta.at[:, :k].add(jax.ops.segment_sum(de.T, w, num_segments=W))
        return val, dlam, deta

    @jax.custom_vjp
    def core(lam, eta):
        return value_and_grads(lam, eta, False)[0]

    def fwd(lam, eta):
        val, dlam, deta = value_and_grads(lam, eta, True)
        return val, (dlam, deta)

    def bwd(res, g):
        dlam, deta = res
        # the total may be float64 while the work is float32: cotangents keep the primal dtype
        return (g * dlam).astype(dlam.dtype), (g * deta).astype(deta.dtype)

    core.defvjp(fwd, bwd)
    return core


def couple_total(inputs: ModelInputs, lam, eta=None, *, log_eta=None):
    """``Σ column_loglik`` of COUPLE, the sampler's likelihood term (fused scalar kernel,
    :func:`_couple_sum_core`; the same shift as :func:`couple_columns`)."""
    lam = jnp.asarray(lam)
    log_eta = log_eta_table(inputs, eta, log_eta)
    plan = _CouplePlan(inputs)
    core = _couple_sum_core(plan, inputs.n_items, inputs.n_workers, inputs.K)
    shift = jax.lax.stop_gradient(jnp.max(log_eta, axis=1, keepdims=True))
    eta_c = jnp.maximum(jnp.exp(log_eta - shift), jnp.finfo(log_eta.dtype).tiny)
    log_cum = jax.lax.cumlogsumexp(log_eta, axis=1) - shift
    return core(lam, eta_c) - _acc_sum(jnp.asarray(plan.stages, log_cum.dtype) * log_cum)


def couple_fast(inputs: ModelInputs, lam, log_eta, reduce: bool):
    """COUPLE's ``numpyro_fast`` (models.registry): :func:`couple_total` (``reduce``) or
    :func:`couple_columns`, both with hand-written derivatives."""
    if reduce:
        return couple_total(inputs, lam, log_eta=log_eta)
    return couple_columns(inputs, lam, log_eta=log_eta)

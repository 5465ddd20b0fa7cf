"""The five models as NumPyro programs (docs/design.md, Models; [Pan18], Eq. 1-4).

Every model is a plain function of a :class:`~models.model_inputs.ModelInputs` (padded
arrays), vectorised over rankings; the only Python loops are over the ``<= 5`` ranking
lengths and the ``K <= 6`` stage positions. The likelihood enters as one
``numpyro.factor("loglik")``.

Parametrisation (what the sampler moves; ``docs/design.md``, "Sampling"). The *model* is
always ``λ_r ~ Normal(mu0, sigma0²)`` iid and ``η_w ~ Dirichlet(α_w)`` (COUPLE) or
``Beta(a_w, b_w)`` (CrowdBT); two exact reparametrisations are the defaults:

* ``simplex="gamma"``: ``η_w`` through independent Gammas with the Marsaglia–Tsang boost
  [MT00], ``g_t = u_t · U_t^{1/α_t}``, ``u_t ~ Gamma(α_t + 1)``, ``e_t = −log U_t ~ Exp(1)``,
  so ``log g_t = log u_t − e_t/α_t`` and ``log η = log_softmax(log g)``. Sites ``eta_u``,
  ``eta_e`` (one entry per concentration below :data:`BOOST_BELOW`) and ``eta_g``
  (``g_t ~ Gamma(α_t)`` directly for the others), over the ``(W, K)`` table (``(W, 2)`` for
  CrowdBT, whose ``η = η_1``) in row-major order; ``eta`` is a deterministic site. ``g_t ~ Gamma(α_t)`` independently, so ``g/Σg ~ Dirichlet(α)``
  exactly and ``Σg`` is an auxiliary variable the likelihood never sees; the sampler works
  on ``log u`` and ``log e``, whose scales stay O(1) however small ``α_t`` is, and ``log η``
  enters the likelihood without ever being clamped. ``simplex="dirichlet"`` is NumPyro's
  own Dirichlet/Beta (stick-breaking), kept for comparison: for ``α_t ≪ 1`` its transform
  clips the simplex and inflates ``E[η_t]`` several-fold without a divergence.
* ``level="centered"``: ``λ = m·1 + λ_c`` with ``m ~ Normal(mu0, sigma0²/L)`` (site
  ``lambda_mean``) and ``λ_c ~ ZeroSumNormal(sigma0)`` (site ``lambda_c``), the same prior
  as iid ``Normal(mu0, sigma0²)``; the likelihood sees only ``λ_c``, so the narrow ridge
  along ``(1, …, 1)`` that slows every ``λ_r`` becomes one prior-only coordinate.
  ``level="iid"`` samples ``lambda`` directly.

Numerics of the COUPLE stage ([Pan18], Eq. 3). With ``m`` candidates ``c = ρ(i..k)``,

    log P_i = log Σ_{t<m} η_t e^{λ_{c_t}} − log Σ_{t<m} e^{λ_{c_t}} − log Σ_{v<m} η_v,

which is ``logsumexp_t(log η̄_t + log softmax(λ_c)_t)`` rearranged: the first term is a
logsumexp of ``log η_t + λ_{c_t}`` (stable, shifted by its own maximum), the second is
computed for all stages at once by the backward recursion
``LSE_i = logaddexp(λ_{ρ(i)}, LSE_{i+1})`` (one ``exp`` per stage instead of ``m``), and the
third is a per-worker table ``log cumsum(η)``. Rankings of one length form one dense block
(:attr:`ModelInputs.blocks`), so no masks or ``-inf`` padding enter the arithmetic.

The ``*_loglik`` functions return one value per *column*; :func:`pointwise_loglik` sums
them to one value per source ranking.

The COUPLE *model* (what NUTS differentiates) uses :func:`couple_total` instead: the same
total, with a hand-written gradient computed in the forward pass (``jax.custom_vjp``); at
the paper's scale on 2 CPU cores it measured 13 ms per potential+gradient against 52 ms for
autodiff of ``column_loglik`` (float32; ``bench/results/nuts_gradient.json``). ``model(...,
fast=False)`` gives the autodiff path back.

Precision. ``model(..., loglik_dtype="float32")`` does the elementwise work of the
likelihood in float32 (half the cost at scale) but sums each block's total in float64 when
JAX runs with 64-bit types: a total of ~10⁶ nats has a float32 spacing of ~0.1 nat, the
size of the energy differences NUTS weighs.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
from jax.nn import log_sigmoid

from .model_inputs import ModelInputs, boost_split, level_log_ratio

SIMPLEX = ("gamma", "dirichlet")
LEVEL = ("centered", "iid")


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


def log_eta_table(inputs: ModelInputs, eta=None, log_eta=None):
    """The worker table the likelihood reads: ``(W, K)`` ``log η`` (COUPLE) or ``(W, 2)``
    ``[log η, log(1 − η)]`` (CrowdBT), from ``log_eta`` when given (exact), else from
    ``eta`` (a Dirichlet row, or CrowdBT's accuracy ``(W,)``)."""
    if log_eta is not None:
        return jnp.asarray(log_eta)
    eta = jnp.asarray(eta)
    if inputs.model == "crowdbt":
        return jnp.stack([jnp.log(eta), jnp.log1p(-eta)], axis=1)
    return _safe_log(eta)


def couple_log_normalizer(lam, log_eta, log_cum, index, worker, group):
    """``log Σ_{k! orderings} Eq. 4`` for the rankings of one length (``docs/design.md``).

    Every ordering of each task is scored with :func:`couple_block` on a ``(k, P·n)``
    layout; the ``P`` values per task are combined by logsumexp. Returns ``(n,)``.
    """
    k, a, b = group.k, group.start, group.stop
    P, n = group.perms.shape[0], b - a
    cand = index[:k, a:b][group.perms.T].reshape(k, P * n)     # ordering p of task j
    w = jnp.tile(worker[a:b], P)
    ll = couple_block(lam[cand], log_eta[w, :k].T, log_cum[w, :k].T).reshape(P, n)
    return _lse_rows([ll[p] for p in range(P)])


# ---------------------------------------------------------------- whole data
def column_loglik(inputs: ModelInputs, lam, eta=None, *, log_eta=None):
    """Log-likelihood of every column of the (length-sorted) layout: rankings, or pairs.

    The worker parameters are ``eta`` (``(W, K)`` Dirichlet rows, or CrowdBT's ``(W,)``
    accuracies) or, exactly, ``log_eta`` in the layout of :func:`log_eta_table`.
    """
    m = inputs.model
    index, worker = inputs.index, inputs.worker
    # init_to_value hands back the caller's NumPy arrays: make them JAX arrays before
    # they are indexed with traced indices
    lam = jnp.asarray(lam)
    if m == "bt":
        return pair_block(lam[index])
    if m == "pl":
        return jnp.concatenate([pl_block(lam[index[:k, a:b]]) for k, a, b in inputs.blocks])
    log_eta = log_eta_table(inputs, eta, log_eta)
    if m == "crowdbt":
        return pair_block(lam[index], log_eta[worker].T)
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
    if m == "couple-normalized":
        for g in inputs.groups:
            z = couple_log_normalizer(lam, log_eta, log_cum, index, worker, g)
            ll = ll.at[g.start:g.stop].add(-z)
    return ll


def pointwise_loglik(inputs: ModelInputs, lam, eta=None, *, log_eta=None):
    """One log-likelihood value per source ranking, ``(n_obs,)``, in the data's order: the
    columns are put back by ``origin`` and the pairs of BT/CrowdBT summed per ranking."""
    ll = column_loglik(inputs, lam, eta, log_eta=log_eta)
    return jax.ops.segment_sum(ll, jnp.asarray(inputs.origin), num_segments=inputs.n_obs)


# ---------------------------------------------------------------- priors (sampler coordinates)
def item_scores(inputs: ModelInputs, level: str = "centered"):
    """Sample ``λ ~ Normal(mu0, sigma0²)`` iid, as ``lambda`` (``level="iid"``) or as
    ``lambda_mean + lambda_c`` (``"centered"``, the same prior; module docstring)."""
    L = inputs.n_items
    if level == "iid" or L < 2:
        return numpyro.sample("lambda", dist.Normal(inputs.mu0, inputs.sigma0)
                              .expand([L]).to_event(1))
    # mean of L iid N(mu0, s²) is N(mu0, s²/L); the centred part is ZeroSumNormal(s),
    # independent of the mean: together exactly the iid prior
    m = numpyro.sample("lambda_mean", dist.Normal(inputs.mu0, inputs.sigma0 / L ** 0.5))
    c = numpyro.sample("lambda_c", dist.ZeroSumNormal(inputs.sigma0, event_shape=(L,)))
    return numpyro.deterministic("lambda", m + c)


def worker_log_eta(inputs: ModelInputs, simplex: str = "gamma", boost=None):
    """Sample the worker simplexes and return the table of :func:`log_eta_table`.

    ``simplex="gamma"``: the Marsaglia–Tsang Gamma construction (module docstring),
    ``log g = log u − e/α`` and ``log η = log_softmax(log g)``; ``"dirichlet"``: NumPyro's
    Dirichlet (COUPLE) or Beta (CrowdBT) site ``eta``.
    """
    alpha = jnp.asarray(inputs.alpha)
    crowdbt = inputs.model == "crowdbt"
    if simplex == "dirichlet":
        if crowdbt:
            eta = numpyro.sample("eta", dist.Beta(alpha[:, 0], alpha[:, 1]).to_event(1))
        else:
            eta = numpyro.sample("eta", dist.Dirichlet(alpha).to_event(1))
        return log_eta_table(inputs, eta)
    big, small = boost_split(inputs.alpha, boost)
    log_g = jnp.zeros(alpha.shape, alpha.dtype)
    if big[0].size:
        # α ≥ BOOST_BELOW: g ~ Gamma(α) itself; its log (the sampler's coordinate) has a
        # log-concave density with sd ≈ 1/√α and no long tail
        g = numpyro.sample("eta_g", dist.Gamma(alpha[big], 1.0).to_event(1))
        log_g = log_g.at[big].set(jnp.log(g))
    if small[0].size:
        a_s = alpha[small]
        u = numpyro.sample("eta_u", dist.Gamma(a_s + 1.0, 1.0).to_event(1))
        e = numpyro.sample("eta_e", dist.Exponential(jnp.ones_like(a_s)).to_event(1))
        log_g = log_g.at[small].set(jnp.log(u) - e / a_s)
    log_s = jax.scipy.special.logsumexp(log_g, axis=1)
    # S = Σ g is independent of η and unseen by the likelihood: reweighting its law is exact
    # for η and keeps each log g_t on its own axis (models.model_inputs.LEVEL_SD)
    numpyro.factor("eta_level", jnp.sum(level_log_ratio(log_s, inputs.alpha.sum(axis=1), jnp)))
    log_eta = log_g - log_s[:, None]
    numpyro.deterministic("eta", jnp.exp(log_eta[:, 0]) if crowdbt else jnp.exp(log_eta))
    return log_eta


def _acc_sum(v):
    """``Σ v``, accumulated in float64 whenever JAX has 64-bit types (see module doc)."""
    return jnp.sum(v.astype(jnp.float64) if jax.config.jax_enable_x64 else v)


def model(inputs: ModelInputs, *, simplex: str = "gamma", level: str = "centered",
          fast: bool = True, loglik_dtype=None, prior_only: bool = False, boost=None):
    """The NumPyro program of ``inputs.model``: priors on λ (and η) and one likelihood
    factor.

    Parameters
    ----------
    simplex : {"gamma", "dirichlet"}
        How ``η_w`` is sampled (module docstring); the model is the same.
    level : {"centered", "iid"}
        How ``λ`` is sampled; the model is the same.
    fast : bool
        COUPLE: use :func:`couple_total` (hand-written gradient) instead of autodiff.
    loglik_dtype : {None, "float32", "float64"}
        Precision of the likelihood's elementwise work (block totals are summed in float64
        when JAX has 64-bit types); ``None`` keeps the parameters' precision.
    prior_only : bool
        Leave the likelihood out (prior checks, and the supports of the sites).
    boost : (W, K) bool array, optional
        Which simplex entries get the boost (:func:`models.model_inputs.boost_mask`);
        default: the prior's small concentrations.
    """
    if simplex not in SIMPLEX:
        raise ValueError(f"simplex must be one of {SIMPLEX}, got {simplex!r}")
    if level not in LEVEL:
        raise ValueError(f"level must be one of {LEVEL}, got {level!r}")
    lam = item_scores(inputs, level)
    log_eta = worker_log_eta(inputs, simplex, boost) if inputs.has_eta else None
    if prior_only:
        return
    if loglik_dtype is not None:
        lam = lam.astype(loglik_dtype)
        log_eta = None if log_eta is None else log_eta.astype(loglik_dtype)
    # Only the total enters the density: columns need not be put back in data order.
    if inputs.model == "couple" and fast:
        numpyro.factor("loglik", couple_total(inputs, lam, log_eta=log_eta))
    else:
        numpyro.factor("loglik", _acc_sum(column_loglik(inputs, lam, log_eta=log_eta)))


# ---------------------------------------------------------------- fast COUPLE total
# The sampler needs only the *total* log-likelihood and its gradient. ``couple_total``
# computes the same value as ``jnp.sum(column_loglik(...))`` for COUPLE, but
#
# * the ``- log Σ_{v≤m} η_v`` term is a dense (W, K) table of stage counts times
#   ``log cumsum η`` (its per-column gather and the scatter-add of its gradient disappear);
# * each stage is evaluated with a per-stage shift (the suffix maximum of λ), as
#   ``log P_i = log A_i − log S_i`` with ``u_{ij} = exp(λ_j − max_{j'≥i} λ_{j'}) ≤ 1``,
#   ``S_i = Σ_{j≥i} u_{ij} ≥ 1`` and ``A_i = Σ_t η_t u_{i,i+t} ≥ η_{t*} ≥ tiny``: the same
#   value as log η̄ + log-softmax with a logsumexp over the active entries only, and as
#   stable (nothing overflows; the largest ``u`` of a stage is exactly 1);
# * the gradient is written by hand (``jax.custom_vjp``) and computed *in the forward
#   pass*, in the same fused elementwise loop that computes the value (the cotangent of a
#   scalar is a scalar, so the backward pass only scales it), and reduced to items and
#   workers with one ``segment_sum`` per length block. Measured at the paper's scale
#   (``bench/bench_gradient.py``): autodiff materialises many ``(k, n)`` intermediates and
#   recomputes the exponentials once per consumer; this path does not.
class _CouplePlan:
    """NumPy tables of one ``ModelInputs`` for :func:`couple_total` (built at trace time)."""

    def __init__(self, inputs: ModelInputs):
        import numpy as np

        K, W = inputs.K, inputs.n_workers
        self.blocks = [(k, a, b) for k, a, b in inputs.blocks if k >= 2]
        self.index = [np.ascontiguousarray(inputs.index[:k, a:b]) for k, a, b in self.blocks]
        self.worker = [np.ascontiguousarray(inputs.worker[a:b]) for k, a, b in self.blocks]
        counts = np.zeros((W, K))
        for (k, a, b), w in zip(self.blocks, self.worker):
            for i in range(k - 1):          # stage i has m = k - i candidates
                counts[:, k - i - 1] += np.bincount(w, minlength=W)
        self.counts = counts


def _couple_block_fwd(x, e):
    """Value ``(n,)`` and gradients ``dx (k, n)``, ``de (k, n)`` of one dense block.

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
    val = 0.0
    dx = [0.0] * k
    de = [0.0] * k
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
    """``core(lam, eta) = Σ_columns Σ_i (log A_i − log S_i)`` with a hand-written VJP."""
    idx = [jnp.asarray(ix) for ix in plan.index]
    flat = [jnp.asarray(ix.ravel()) for ix in plan.index]
    wk = [jnp.asarray(w) for w in plan.worker]

    def value_and_grads(lam, eta, need_grad):
        val = 0.0
        dlam = jnp.zeros(L, lam.dtype)
        deta = jnp.zeros((W, K), eta.dtype)
        for (k, a, b), ix, fl, w in zip(plan.blocks, idx, flat, wk):
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
    """``Σ column_loglik`` of COUPLE (the sampler's likelihood term), fast path.

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
    return core(lam, eta_c) - _acc_sum(jnp.asarray(plan.counts, log_cum.dtype) * log_cum)

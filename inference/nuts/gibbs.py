"""The exact Gibbs step of COUPLE's worker simplexes given the item scores (docs/design.md,
"Sampling", "The Gibbs route for the worker simplexes").

COUPLE's stage ``i`` of a ranking of length ``k`` by worker ``w`` ([Pan18], Eq. 3) has
``m = k − i`` candidates ``c_t = ρ(i + t)``, ``t < m``, and probability

    P_i = Σ_{t<m} η̄_t s_{i,t},   η̄_t = η_t / Σ_{v<m} η_v,   s_{i,t} = e^{λ_{c_t}} / Σ_{j≥i} e^{λ_{ρ(j)}}.

With ``η = g / Σ g``, ``g_t ~ Gamma(α_t, 1)`` independent (then ``η ~ Dirichlet(α)``), the
sum ``Σ g`` cancels and ``P_i = Σ_t g_t s_{i,t} / G_m`` with ``G_m = Σ_{v<m} g_v``. Two
latent variables per stage make every factor a monomial in ``g`` — the Plackett–Luce
augmentation of [CD12] (there for PL's own normaliser; here for COUPLE's mixture too):

* ``z_i ∈ {0..m−1}``, the offset the worker took: ``p(z_i = t) ∝ g_t s_{i,t}``, whose sum
  over ``t`` is the numerator of ``P_i``;
* ``ξ_i ~ Exponential(rate G_m)``: ``1/G_m = ∫_0^∞ exp(−ξ G_m) dξ``.

The joint density of ``(g, z, ξ)`` given ``λ`` is

    Π_t g_t^{α_t − 1} e^{−g_t} · Π_i g_{z_i} s_{i,z_i} e^{−ξ_i G_{m_i}},

whose ``(z, ξ)``-marginal is the model (prior × Π_i P_i), and whose conditionals are

    z_i | g ~ Categorical(∝ g_t s_{i,t}, t < m_i),    ξ_i | g ~ Exponential(G_{m_i}),
    g_t | z, ξ ~ Gamma(α_t + n_t, rate 1 + Ξ_t),                                  (G)

with ``n_t = #{i : z_i = t}`` and ``Ξ_t = Σ_{i : m_i > t} ξ_i`` over the worker's stages
(``g_t`` enters ``G_{m_i}`` exactly when ``t < m_i``). Drawing ``(z, ξ)`` given ``g`` and
then ``g`` given ``(z, ξ)`` is a two-block Gibbs sweep of the augmented density, so it
leaves ``p(g | λ, data)`` — and hence ``p(η | λ, data)`` — invariant; with no data
(``n = Ξ = 0``) it draws ``g ~ Gamma(α)`` exactly, the exact Dirichlet however small
``α_t`` is. Workers are independent given ``λ``: everything is vectorised over all stages
with one segment sum per worker.

Two Metropolis moves of the same conditional complement the sweep (:func:`jump`, an
independence proposal that frees an entry stuck in its prior spike; :func:`walk`, random-walk
steps on the observed-data scale); each is exact on its own (``tests/test_gibbs.py``).

Numerics: ``g`` is held as ``log g`` (for ``α ≪ 1`` ``g`` underflows); ``z`` is drawn by
inverse CDF of the softmax of ``log g_t + λ_{c_t}`` (the stage's common denominator
cancels), ``ξ`` as
``Exp(1)·exp(−logsumexp(log g_{<m}))``, and ``log g`` by :func:`jax.random.loggamma`
(exact for small shapes). The worker sums are float64 when JAX has 64-bit types.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import jax
import jax.numpy as jnp
import numpy as np

from crowdrank.models.model_inputs import ModelInputs


@dataclass(frozen=True)
class StageTables:
    """COUPLE's stages grouped by their number of candidates ``m = 2..K``.

    ``items[j]`` ``(n_m, m)``: the candidates ``ρ(i..k−1)`` of every stage with ``m`` items
    left, in reported order; ``worker[j]`` ``(n_m,)``: its worker; ``m[j]`` the size."""

    m: tuple
    items: tuple
    worker: tuple
    n_workers: int
    K: int


def stage_tables(inputs: ModelInputs) -> StageTables:
    """The stages of every ranking of ``inputs`` (COUPLE's length-sorted layout)."""
    items, worker, sizes = [], [], []
    for m in range(2, inputs.K + 1):
        it = [inputs.index[k - m:k, a:b].T for k, a, b in inputs.blocks if k >= m]
        wk = [inputs.worker[a:b] for k, a, b in inputs.blocks if k >= m]
        if it and sum(x.shape[0] for x in it):
            sizes.append(m)
            items.append(np.ascontiguousarray(np.concatenate(it).astype(np.int32)))
            worker.append(np.concatenate(wk).astype(np.int32))
    return StageTables(tuple(sizes), tuple(items), tuple(worker), int(inputs.n_workers),
                       int(inputs.K))


def draw_offsets(key, log_g, lam, items, worker):
    """``z_i | g, λ`` of (G): offset ``t < m`` with probability ``∝ g_t e^{λ_{c_t}}``, by
    inverse CDF of the normalised weights (one uniform per stage: random bits dominate the
    step's cost). ``items`` ``(n, m)``, ``worker`` ``(n,)``."""
    m = items.shape[1]
    p = jax.nn.softmax(log_g[worker, :m] + lam[items], axis=1)
    u = jax.random.uniform(key, p.shape[:1], p.dtype)
    return jnp.sum(jnp.cumsum(p[:, :-1], axis=1) < u[:, None], axis=1)


def draw_slack(key, log_g, worker, m: int):
    """``ξ_i | g ~ Exponential(rate G_m)``, ``G_m = Σ_{v<m} g_v`` of the stage's worker."""
    log_G = jax.scipy.special.logsumexp(log_g[worker, :m], axis=1)
    return jax.random.exponential(key, log_G.shape, log_G.dtype) * jnp.exp(-log_G)


def augment(key, log_g, lam, tables: StageTables):
    """One draw of ``(z, ξ)`` given ``(g, λ)``, reduced to what (G) reads: the per-worker
    offset counts ``n`` ``(W, K)`` and slack sums ``Ξ`` ``(W, K)``."""
    W, K = tables.n_workers, tables.K
    n = jnp.zeros((W, K), log_g.dtype)
    Xi = jnp.zeros((W, K), log_g.dtype)
    keys = jax.random.split(key, 2 * max(len(tables.m), 1))
    for j, (m, it, wk) in enumerate(zip(tables.m, tables.items, tables.worker)):
        it, wk = jnp.asarray(it), jnp.asarray(wk)
        z = draw_offsets(keys[2 * j], log_g, lam, it, wk)
        n = n + jax.ops.segment_sum(jax.nn.one_hot(z, K, dtype=log_g.dtype), wk,
                                    num_segments=W)
        xi = draw_slack(keys[2 * j + 1], log_g, wk, m)
        # ξ_i enters the rate of every g_t with t < m_i
        s = jax.ops.segment_sum(xi, wk, num_segments=W)
        Xi = Xi + s[:, None] * (jnp.arange(K) < m)
    return n, Xi


def draw_log_g(key, alpha, n, Xi):
    """``log g`` with ``g_t ~ Gamma(α_t + n_t, rate 1 + Ξ_t)`` (G), in log space."""
    a = jnp.asarray(alpha, n.dtype) + n
    return jax.random.loggamma(key, a) - jnp.log1p(Xi)


def sweep(key, log_g, lam, tables: StageTables, alpha):
    """One exact Gibbs sweep ``g → (z, ξ) → g`` given ``λ``; returns the new ``log g``."""
    k_aug, k_g = jax.random.split(key)
    n, Xi = augment(k_aug, log_g, lam, tables)
    return draw_log_g(k_g, alpha, n, Xi)


def sweeps(key, log_g, lam, tables: StageTables, alpha, n_sweeps: int = 1):
    """``n_sweeps`` sweeps in one ``fori_loop`` (no gradient: each costs a few gathers)."""
    def body(i, lg):
        return sweep(jax.random.fold_in(key, i), lg, lam, tables, alpha)
    return jax.lax.fori_loop(0, int(n_sweeps), body, log_g)


def worker_loglik(log_g, lam, tables: StageTables):
    """``Σ_i log P_i`` per worker ``(W,)`` ([Pan18], Eq. 3), ``z`` and ``ξ`` summed out,
    without the stages' ``log Σ_{j≥i} e^{λ_{ρ(j)}}`` (free of ``g``: it cancels in every
    ratio the jump takes)."""
    out = jnp.zeros(tables.n_workers, log_g.dtype)
    for m, it, wk in zip(tables.m, tables.items, tables.worker):
        it, wk = jnp.asarray(it), jnp.asarray(wk)
        lg = log_g[wk, :m]
        v = (jax.scipy.special.logsumexp(lg + lam[it], axis=1)
             - jax.scipy.special.logsumexp(lg, axis=1))
        out = out + jax.ops.segment_sum(v, wk, num_segments=tables.n_workers)
    return out


def _log_eta(log_g):
    return log_g - jax.scipy.special.logsumexp(log_g, axis=1, keepdims=True)


def jump(key, log_g, lam, tables: StageTables, alpha, beta):
    """An independence Metropolis–Hastings move of every worker's row, exact given ``λ``:
    propose ``η' ~ Dirichlet(β_w)`` (a fixed, data-informed proposal, e.g. ``α + n̂/2``
    from expected offset counts) and ``S' ~ Gamma(Σα_w)``, ``g' = S'η'``. The target of
    ``g`` is ``Dir(η; α)·Gamma(S; Σα)·L_w(η)`` and the proposal ``Dir(η'; β)·Gamma(S'; Σα)``
    (the same Jacobian), so ``S`` cancels and the log ratio is

        [ℓ_w(η') + Σ_t (α_t − β_t) log η'_t] − [the same at η].

    Why: the sweep (G) leaves an entry stuck in its prior spike (``g_t ~ 1e−50``: no stage
    picks offset ``t``, so ``n_t = 0`` and the next draw is from the spike again) for
    hundreds of sweeps; this move jumps straight to the data mode when ``β`` covers it, and
    is exact whatever ``β`` is (a poor ``β`` only lowers its acceptance)."""
    k_eta, k_s, k_u = jax.random.split(key, 3)
    alpha = jnp.asarray(alpha, log_g.dtype)
    beta = jnp.asarray(beta, log_g.dtype)
    le_new = _log_eta(jax.random.loggamma(k_eta, beta))
    log_s = jax.random.loggamma(k_s, alpha.sum(axis=1))
    le_old = _log_eta(log_g)

    def score(le):
        return worker_loglik(le, lam, tables) + jnp.sum((alpha - beta) * le, axis=1)

    log_r = score(le_new) - score(le_old)
    ok = jnp.log(jax.random.uniform(k_u, log_r.shape, log_r.dtype)) < log_r
    return jnp.where(ok[:, None], le_new + log_s[:, None], log_g)


#: Width (sd, in log-odds) of the data-mode half of :func:`entry_jump`'s proposal.
ENTRY_JUMP_SD = 1.5


def entry_jump(key, log_g, lam, tables: StageTables, alpha, beta):
    """One Metropolis–Hastings update of each entry ``y_t = log g_t`` (``t = 0..K−1`` in
    turn, every worker at once) given the others, with an independence proposal that
    mixes the two modes an entry can have: half the prior ``LogGamma(α_t)`` (which *is*
    the conditional inside the prior spike, where the likelihood no longer depends on
    ``g_t``), half ``c + Normal(logit η̂_t, ENTRY_JUMP_SD²)`` with ``c = log Σ_{v≠t} g_v``
    and ``η̂ = β/Σβ`` (the data mode's rough place). A proposal may depend on the other
    entries (``c``), not on ``y_t``: each update is exact for ``y_t | y_{−t}, λ``.
    Why: the sweep and the walk are local; an entry whose posterior has a prior spike
    beside a data mode crossed between them only every few hundred iterations."""
    alpha = jnp.asarray(alpha, log_g.dtype)
    beta = jnp.asarray(beta, log_g.dtype)
    W, K = log_g.shape
    eta_hat = jnp.clip(beta / beta.sum(axis=1, keepdims=True), 1e-4, 0.9)
    mu = jnp.log(eta_hat) - jnp.log1p(-eta_hat)

    def target(lg):
        return worker_loglik(lg, lam, tables) + jnp.sum(alpha * lg - jnp.exp(lg), axis=1)

    def body(t, carry):
        lg, cur, key = carry
        key, k_c, k_p, k_n, k_u = jax.random.split(key, 5)
        others = jnp.where(jnp.arange(K) == t, -jnp.inf, lg)
        c = jax.scipy.special.logsumexp(others, axis=1)
        a_t, m_t = alpha[:, t], c + mu[:, t]

        def log_q(y):
            prior = a_t * y - jnp.exp(y) - jax.scipy.special.gammaln(a_t)
            data = (-0.5 * ((y - m_t) / ENTRY_JUMP_SD) ** 2
                    - jnp.log(ENTRY_JUMP_SD * jnp.sqrt(2 * jnp.pi)))
            return jnp.logaddexp(prior, data) - jnp.log(2.0)

        pick = jax.random.bernoulli(k_c, 0.5, (W,))
        y_new = jnp.where(pick, jax.random.loggamma(k_p, a_t),
                          m_t + ENTRY_JUMP_SD * jax.random.normal(k_n, (W,), lg.dtype))
        prop = lg.at[:, t].set(y_new)
        new = target(prop)
        log_r = (new - log_q(y_new)) - (cur - log_q(lg[:, t]))
        ok = jnp.log(jax.random.uniform(k_u, (W,), lg.dtype)) < log_r
        return jnp.where(ok[:, None], prop, lg), jnp.where(ok, new, cur), key

    return jax.lax.fori_loop(0, K, body, (log_g, target(log_g), key))[0]


#: Proposal scales of :func:`walk` (sd of the step of one ``log g_t``), one drawn per
#: step independently of the state: the posterior sd of ``log g_t`` spans ~0.03 (an entry
#: pinned by hundreds of stages) to ~3 (an unidentified small entry).
WALK_SCALES = (0.03, 0.15, 0.6, 2.5)


def walk(key, log_g, lam, tables: StageTables, alpha, n_steps: int):
    """``n_steps`` random-walk Metropolis steps on each worker's ``log g`` given ``λ``, the
    ``(z, ξ)``-marginal target ``Σ_t (α_t y_t − e^{y_t}) + ℓ_w(η)`` (``y = log g``). Each
    step moves, for every worker, either one entry ``t`` or the prefix ``y_0..y_t`` together
    (``t`` and the kind drawn uniformly) by ``scale·N(0, 1)``, the scale drawn from
    :data:`WALK_SCALES` — a symmetric proposal whose choices do not depend on the state, so
    each step is exact; workers accept independently (the target factorises over workers
    given ``λ``). The prefix moves follow COUPLE's nested normalisers ``G_2 ⊂ G_3 ⊂ …``:
    they change a prefix's mass against the rest while keeping the ratios inside it, the
    direction in which two small entries whose ratio the data pin are correlated. Why: the sweep (G) moves an entry by about its
    complete-data sd, while the data identify the offsets of a stage only weakly (the
    softmax weights of the candidates overlap), so the sweep's autocorrelation is high;
    these steps move on the observed-data scale."""
    alpha = jnp.asarray(alpha, log_g.dtype)
    W, K = log_g.shape
    scales = jnp.asarray(WALK_SCALES, log_g.dtype)

    def target(lg):
        return (worker_loglik(lg, lam, tables)
                + jnp.sum(alpha * lg - jnp.exp(lg), axis=1))

    def body(i, carry):
        lg, cur = carry
        k_t, k_s, k_n, k_u, k_k = jax.random.split(jax.random.fold_in(key, i), 5)
        t = jax.random.randint(k_t, (), 0, K)
        sc = scales[jax.random.randint(k_s, (), 0, scales.shape[0])]
        step = sc * jax.random.normal(k_n, (W,), lg.dtype)
        ar = jnp.arange(K)
        mask = jnp.where(jax.random.bernoulli(k_k), ar <= t, ar == t)
        prop = lg + step[:, None] * mask
        new = target(prop)
        ok = jnp.log(jax.random.uniform(k_u, (W,), lg.dtype)) < new - cur
        return jnp.where(ok[:, None], prop, lg), jnp.where(ok, new, cur)

    return jax.lax.fori_loop(0, int(n_steps), body, (log_g, target(log_g)))[0]


#: Degrees of freedom and scale inflation of :func:`mode_jump`'s multivariate-t components
#: (heavier tails and a wider scale than the Laplace fit: the fit is made at one ``λ``, the
#: chain's ``λ`` wanders around it).
MODE_JUMP_DF = 5.0
MODE_JUMP_INFLATE = 1.0
#: Floor on the eigenvalues of the fit's negative Hessian (sd ≤ ~4.5 in ``log g``).
MODE_FIT_FLOOR = 0.05
#: Newton steps of :func:`mode_fit` (from a fixed start; each step is one gradient and
#: ``K`` Hessian-vector products of the worker target).
MODE_FIT_STEPS = 12
#: Newton steps of the refit at the current ``λ`` each iteration, from the fit made once at
#: the approximation's scores (at a posterior ``λ`` of the proxy, worker 37: acceptance
#: 0.62–0.66 fitted at that ``λ`` against 0.18–0.21 with the fit at the approximation's
#: scores; docs/design.md, Sect. 5.3a).
MODE_REFIT_STEPS = 2


def _masked_target(y, lam, tables: StageTables, alpha, active):
    """The ``(z, ξ)``-marginal target of ``y = log g`` per worker with the entries outside
    ``active`` ``(K,)`` removed (``g_t = 0``: the prior spike's limit, where the likelihood
    no longer depends on ``g_t``)."""
    lg = jnp.where(active, y, -jnp.inf)
    prior = jnp.where(active, alpha * y - jnp.exp(y), 0.0)
    return worker_loglik(lg, lam, tables) + jnp.sum(prior, axis=1)


def _newton_fit(y0, lam, tables: StageTables, alpha, active, steps: int):
    """Damped Newton ascent of :func:`_masked_target` for every worker at once (the target
    is a sum over workers, so each worker's ``K × K`` Hessian block is read off ``K``
    Hessian-vector products along one entry of every worker); returns the end point and
    the negative Hessian there (inactive entries: identity)."""
    K = y0.shape[1]
    eye = jnp.eye(K, dtype=y0.dtype)
    grad = jax.grad(lambda y: jnp.sum(_masked_target(y, lam, tables, alpha, active)))

    def neg_hess(y):
        # the K Hessian-vector products as one batched product (vmap over the basis), not
        # K copies of the second derivative in the program: XLA compiles it once
        cols = jax.vmap(lambda e: jax.jvp(grad, (y,), (jnp.broadcast_to(e, y.shape),))[1])(eye)
        h = -jnp.moveaxis(cols, 0, 2)                      # (W, K, K): h[w, i, t]
        h = 0.5 * (h + jnp.swapaxes(h, 1, 2))
        mask = active[:, None] & active[None, :]
        h = jnp.where(mask, h, eye)
        # a floor on the curvature's eigenvalues: away from the mode, or along an entry
        # with a flat target (nearly in its spike), the Hessian is not negative definite;
        # the fit only shapes a proposal, exactness is untouched
        ev, vec = jnp.linalg.eigh(h)
        return jnp.einsum("wij,wj,wkj->wik", vec, jnp.maximum(ev, MODE_FIT_FLOOR), vec)

    def body(i, y):
        g = jnp.where(active, grad(y), 0.0)
        step = jnp.linalg.solve(neg_hess(y), g[..., None])[..., 0]
        y = y + jnp.clip(step, -2.0, 2.0)
        return jnp.clip(y, -40.0, 20.0)

    y = jax.lax.fori_loop(0, int(steps), body, y0)
    return y, neg_hess(y)


def spike_sets(K: int) -> tuple:
    """The components of :func:`mode_jump`'s mixture: which entries are in their prior
    spike — none, the last, the one before, both (the two smallest ``α`` under the
    geometric prior; at the paper's ``α`` only these have spikes: ``α_3 = 0.046``,
    ``α_4 = 0.0077``)."""
    last = tuple(range(max(K - 2, 1), K))
    out = [()]
    for r in range(1, len(last) + 1):
        out += [tuple(c) for c in combinations(last, r)]
    return tuple(out)


def mode_fit(lam, tables: StageTables, alpha, y0, steps: int = MODE_FIT_STEPS):
    """The components of :func:`mode_jump`'s proposal, fitted at ``λ``: for each set of
    entries in :func:`spike_sets` (those removed: ``g_t = 0``), the Laplace fit of the
    others as ``(location, Cholesky factor of the scale)`` of a multivariate t in
    ``y = log g`` with scale ``MODE_JUMP_INFLATE² · (−H)^{-1}``. ``y0`` ``(W, K)``: the
    Newton start — inside the data region (e.g. equal entries): from an entry in its
    spike the target is flat and Newton stays there."""
    alpha = jnp.asarray(alpha, y0.dtype)
    K = y0.shape[1]
    actives = np.array([~np.isin(np.arange(K), spiked) for spiked in spike_sets(K)])
    # the sets' Newton fits as one batched fit (vmap over the sets' masks): one copy of
    # the Newton step in the compiled program instead of one per set
    mus, hs = jax.vmap(lambda a: _newton_fit(y0, lam, tables, alpha, a, steps))(
        jnp.asarray(actives))
    out = []
    for j, active in enumerate(actives):
        ix = np.flatnonzero(active)
        cov = jnp.linalg.inv(hs[j][:, ix][:, :, ix]) * MODE_JUMP_INFLATE ** 2
        out.append((mus[j][:, ix], jnp.linalg.cholesky(cov)))
    return tuple(out)


def _t_logpdf(y, mu, chol, df):
    """Multivariate t log density, location ``mu``, scale ``chol cholᵀ``, per worker."""
    d = y.shape[-1]
    z = jax.scipy.linalg.solve_triangular(chol, (y - mu)[..., None], lower=True)[..., 0]
    q = jnp.sum(z * z, axis=-1)
    gl = jax.scipy.special.gammaln
    return (gl((df + d) / 2) - gl(df / 2) - 0.5 * d * jnp.log(df * jnp.pi)
            - jnp.sum(jnp.log(jnp.diagonal(chol, axis1=-2, axis2=-1)), axis=-1)
            - 0.5 * (df + d) * jnp.log1p(q / df))


def _t_draw(key, mu, chol, df):
    k_z, k_c = jax.random.split(key)
    z = jax.random.normal(k_z, mu.shape, mu.dtype)
    w = 2.0 * jax.random.gamma(k_c, df / 2, mu.shape[:1], mu.dtype) / df
    return mu + jnp.einsum("wij,wj->wi", chol, z) / jnp.sqrt(w)[:, None]


def mode_jump(key, log_g, lam, tables: StageTables, alpha, fit, df: float = MODE_JUMP_DF):
    """An independence Metropolis–Hastings move of every worker's whole row ``y = log g``
    given ``λ``, from a mixture whose components cover a worker's modes — each set ``S``
    of :func:`spike_sets` (entries in their prior spike) with equal weight:

        q(y) = mean_S [ t(y_{−S}; μ_S, Σ_S) · Π_{t∈S} LogGamma(y_t; α_t) ],

    ``(μ_S, Σ_S)`` the Laplace fit of the other entries with those of ``S`` removed, whose
    own proposal is their prior (inside the spike the likelihood no longer depends on
    them); ``fit`` from :func:`mode_fit` (it may depend on ``λ``, never on ``y``). The log
    ratio is ``[π(y') − log q(y')] − [π(y) − log q(y)]`` with ``π`` the ``(z, ξ)``-marginal
    target ``Σ_t (α_t y_t − e^{y_t}) + ℓ_w(η)`` of :func:`walk`; the mixture's density is
    evaluated exactly at both points (every component at each). Why: at a posterior
    ``λ`` the route's other moves cross between a worker's spike and data modes once
    every ~40 iterations (``docs/design.md``, Sect. 5.3a), the row jump's ``Dirichlet(β)``
    and the entry jump's data half are centred where the approximation put the row (often
    in the spike), and a move of the spiked entry alone is refused because the others
    must shift too. Returns the new ``log g`` and the acceptances ``(W,)``."""
    alpha = jnp.asarray(alpha, log_g.dtype)
    W, K = log_g.shape
    sets = spike_sets(K)
    gl = jax.scipy.special.gammaln

    def log_q(y):
        comps = []
        for spiked, (mu, ch) in zip(sets, fit):
            ix = np.flatnonzero(~np.isin(np.arange(K), spiked))
            v = _t_logpdf(y[:, ix], mu, ch, df)
            for t in spiked:
                v = v + alpha[:, t] * y[:, t] - jnp.exp(y[:, t]) - gl(alpha[:, t])
            comps.append(v)
        return jax.scipy.special.logsumexp(jnp.stack(comps), axis=0) - jnp.log(len(sets))

    def target(y):
        return worker_loglik(y, lam, tables) + jnp.sum(alpha * y - jnp.exp(y), axis=1)

    k_c, k_d, k_u = jax.random.split(key, 3)
    draws = []
    for j, (spiked, (mu, ch)) in enumerate(zip(sets, fit)):
        k_t, k_p = jax.random.split(jax.random.fold_in(k_d, j))
        ix = np.flatnonzero(~np.isin(np.arange(K), spiked))
        y = jnp.zeros((W, K), log_g.dtype).at[:, ix].set(_t_draw(k_t, mu, ch, df))
        if spiked:
            sp = np.asarray(spiked)
            y = y.at[:, sp].set(jax.random.loggamma(k_p, alpha[:, sp]))
        draws.append(y)
    pick = jax.random.randint(k_c, (W,), 0, len(sets))
    prop = jnp.take_along_axis(jnp.stack(draws, axis=1), pick[:, None, None], axis=1)[:, 0]
    log_r = (target(prop) - log_q(prop)) - (target(log_g) - log_q(log_g))
    ok = jnp.log(jax.random.uniform(k_u, (W,), log_g.dtype)) < log_r
    return jnp.where(ok[:, None], prop, log_g), ok


def scores_of(sites: dict):
    """``λ`` from the sampler's item sites (``lambda``, or ``lambda_mean + lambda_c``)."""
    if "lambda" in sites:
        return sites["lambda"]
    return sites["lambda_mean"][..., None] + sites["lambda_c"]


def make_gibbs_fn(inputs: ModelInputs, n_sweeps: int = 1, prior_only: bool = False,
                  beta=None, walk_steps: int = 0, mode_center=None,
                  mode_refit: int = MODE_REFIT_STEPS):
    """The ``gibbs_fn`` of :class:`numpyro.infer.HMCGibbs` for the site ``eta_log_g`` of
    :func:`crowdrank.models.numpyro_models.model` (``simplex="gibbs"``): with ``beta`` ``(W, K)``
    first one :func:`jump` and one :func:`entry_jump`, then ``n_sweeps`` sweeps of (G), then ``walk_steps`` steps of
    :func:`walk`, all given the current ``λ`` (each leaves ``p(g | λ, data)`` invariant).
    ``prior_only`` leaves the stages out (the exact prior). With ``mode_center`` (a ``λ``
    ``(L,)``, e.g. the approximation's means) each iteration starts with one
    :func:`mode_jump`, its mixture fitted once at that ``λ`` (:func:`mode_fit`; Newton from
    equal entries, ``g_t = Σα/K``: the approximation's ``β`` often puts a data-mode entry
    in its spike, where Newton would stay), then refitted at the current ``λ`` by
    ``mode_refit`` Newton steps from there (a function of ``λ`` only, never of ``η``: the
    move stays exact)."""
    tables = stage_tables(inputs)
    if prior_only:
        tables = StageTables((), (), (), tables.n_workers, tables.K)
    alpha = np.asarray(inputs.alpha, float)
    fit = None
    if mode_center is not None and not prior_only:
        y0 = np.log(np.broadcast_to(alpha.sum(axis=1, keepdims=True) / alpha.shape[1],
                                    alpha.shape))
        fit = jax.jit(lambda lam, y: mode_fit(lam, tables, alpha, y))(
            jnp.asarray(mode_center, float), jnp.asarray(y0, float))

    def gibbs_fn(rng_key, gibbs_sites, hmc_sites):
        log_g = gibbs_sites["eta_log_g"]
        lam = jnp.asarray(scores_of(hmc_sites), log_g.dtype)
        if fit is not None:
            k_mode, rng_key = jax.random.split(rng_key)
            base = jnp.asarray(fit[0][0], log_g.dtype)
            here = (mode_fit(lam, tables, alpha, base, mode_refit) if mode_refit else
                    jax.tree_util.tree_map(lambda a: jnp.asarray(a, log_g.dtype), fit))
            log_g = mode_jump(k_mode, log_g, lam, tables, alpha, here)[0]
        if beta is not None:
            k_jump, k_entry, rng_key = jax.random.split(rng_key, 3)
            log_g = jump(k_jump, log_g, lam, tables, alpha, beta)
            log_g = entry_jump(k_entry, log_g, lam, tables, alpha, beta)
        k_sweep, k_walk = jax.random.split(rng_key)
        log_g = sweeps(k_sweep, log_g, lam, tables, alpha, n_sweeps)
        if walk_steps:
            log_g = walk(k_walk, log_g, lam, tables, alpha, walk_steps)
        return {"eta_log_g": log_g}

    return gibbs_fn

"""The conditionals of the collapsed Gibbs sampler, as numba kernels over the stages
(docs/design.md, "The collapsed Gibbs sampler"; ``tests/test_gibbs_collapsed.py`` checks
them against the exact posterior and plants a wrong copy of each).

Notation (:mod:`crowdrank.inference.gibbs.layout`): stage ``s`` of worker ``w`` has
``m_s`` candidates ``c_{s,t}``; ``η_w = g_w / Σ g_w`` with ``g_{w,t} ~ Gamma(α_{w,t}, 1)``;
the offset ``z_s`` is the position, in the remaining reported order, of the item the
worker took from the true order; ``ξ_s ~ Exponential(G_{w,m_s})`` with ``G_{w,m} =
Σ_{t<m} g_{w,t}`` the slack of COUPLE's normaliser. The augmented joint is

    p(λ) Π_{w,t} Gamma(g_{w,t}; α_{w,t}, 1) Π_s g_{w,z_s} e^{λ_{c_{s,z_s}}} / D_s(λ) · e^{−ξ_s G_{w,m_s}},

``D_s(λ) = Σ_{t<m_s} e^{λ_{c_{s,t}}}``. Its ``(z, ξ)``-marginal is the model.

Random numbers come from numba's own generator (seeded per chain by :func:`seed`).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit


@njit(cache=True)
def seed(value):
    """Seed numba's generator (one state per process: one chain per process)."""
    np.random.seed(value)


@njit(cache=True)
def log_gamma(a):
    """``log X``, ``X ~ Gamma(a, 1)``, finite however small ``a`` is: for ``a < 1``,
    ``X = Y U^{1/a}`` with ``Y ~ Gamma(a + 1)`` (Marsaglia–Tsang's boost), taken in logs
    (``X`` itself underflows for ``a ≈ 0.008``)."""
    if a < 1.0:
        u = 1.0 - np.random.random()
        return np.log(np.random.gamma(a + 1.0, 1.0)) + np.log(u) / a
    return np.log(np.random.gamma(a, 1.0))


@njit(cache=True)
def _pick(cum, ms):
    """Inverse CDF of the unnormalised cumulative weights ``cum[:ms]``."""
    u = np.random.random() * cum[ms - 1]
    t = 0
    while t < ms - 1 and cum[t] <= u:
        t += 1
    return t


@njit(cache=True)
def offsets(cand, m, worker, elam, log_g, z):
    """``z_s | g, λ``: ``P(z_s = t) ∝ g_{w,t} e^{λ_{c_{s,t}}}``, ``t < m_s`` (the
    uncollapsed draw; ``elam = e^{λ − max λ}``)."""
    W, K = log_g.shape
    gn = np.empty((W, K))
    for w in range(W):
        mx = log_g[w].max()
        for t in range(K):
            gn[w, t] = np.exp(log_g[w, t] - mx)
    cum = np.empty(K)
    for s in range(m.shape[0]):
        w, ms, tot = worker[s], m[s], 0.0
        for t in range(ms):
            tot += gn[w, t] * elam[cand[s, t]]
            cum[t] = tot
        z[s] = _pick(cum, ms)


@njit(cache=True)
def slacks(m, worker, log_g, xi):
    """``ξ_s | g ~ Exponential(rate G_{w,m_s})``."""
    W, K = log_g.shape
    log_G = np.empty((W, K + 1))
    for w in range(W):
        log_G[w, 0] = -np.inf
        for t in range(K):
            a, b = log_G[w, t], log_g[w, t]
            hi = max(a, b)
            log_G[w, t + 1] = hi + np.log(np.exp(a - hi) + np.exp(b - hi))
    for s in range(m.shape[0]):
        xi[s] = np.random.exponential(1.0) * np.exp(-log_G[worker[s], m[s]])


@njit(cache=True)
def rescale(w_start, log_g, xi, alpha):
    """The scale move ``(g, ξ) → (c g, ξ / c)`` per worker, ``c`` from its conditional
    (Liu & Sabatti's group move): ``c S ~ Gamma(Σ_t α_{w,t})`` with ``S = Σ_t g_{w,t}``.
    ``ξ_s G`` and ``η`` are unchanged; the move frees the scale ``S``, which the
    ``g ↔ ξ`` alternation only walks by ``O(1/√n)`` per sweep."""
    W, K = log_g.shape
    for w in range(W):
        mx = log_g[w].max()
        acc = 0.0
        for t in range(K):
            acc += np.exp(log_g[w, t] - mx)
        d = log_gamma(alpha[w].sum()) - (mx + np.log(acc))
        for t in range(K):
            log_g[w, t] += d
        f = np.exp(-d)
        for s in range(w_start[w], w_start[w + 1]):
            xi[s] *= f


@njit(cache=True)
def urn(cand, m, w_start, elam, xi, alpha, z, log_g):
    """``(z, g) | ξ, λ`` with ``g`` integrated out of the offsets' step: for each worker,
    a sequential scan of its stages from

        P(z_s = t | z_{−s}, ξ, λ) ∝ e^{λ_{c_{s,t}}} (α_{w,t} + n_{w,t}^{−s}) / (1 + Ξ_{w,t}),

    ``n_{w,t}`` the worker's stages at offset ``t``, ``Ξ_{w,t} = Σ_{s: m_s > t} ξ_s``
    (a Pólya urn: an empty offset keeps weight ``α_t/(1 + Ξ_t)``); then
    ``g_{w,t} | z, ξ ~ Gamma(α_{w,t} + n_{w,t}, rate 1 + Ξ_{w,t})``."""
    W, K = alpha.shape
    n = np.zeros(K)
    Xi = np.zeros(K)
    r = np.zeros(K)
    cum = np.empty(K)
    for w in range(W):
        a, b = w_start[w], w_start[w + 1]
        n[:] = 0.0
        Xi[:] = 0.0
        for s in range(a, b):
            n[z[s]] += 1.0
            for t in range(m[s]):
                Xi[t] += xi[s]
        for t in range(K):
            r[t] = 1.0 / (1.0 + Xi[t])
        for s in range(a, b):
            n[z[s]] -= 1.0
            ms, tot = m[s], 0.0
            for t in range(ms):
                tot += elam[cand[s, t]] * (alpha[w, t] + n[t]) * r[t]
                cum[t] = tot
            zs = _pick(cum, ms)
            z[s] = zs
            n[zs] += 1.0
        for t in range(K):
            log_g[w, t] = log_gamma(alpha[w, t] + n[t]) - np.log1p(Xi[t])


@njit(cache=True)
def _worker_target(cand, m, a, b, elam, y, alpha_w, N_w):
    """``Σ_t (α_t y_t − e^{y_t}) + Σ_s [log Σ_{t<m_s} e^{y_t} e^{λ_{c_{s,t}}} −
    log Σ_{t<m_s} e^{y_t}]`` for one worker's stages ``a:b`` (``N_w[k]`` of them with
    ``k`` candidates), ``y = log g``, ``elam = e^{λ − max λ}``: the target of ``g | λ`` with
    ``(z, ξ)`` summed out (the stages' ``log D_s(λ)`` dropped: free of ``g``). The common
    factor ``e^{max y}`` cancels between each stage's two sums."""
    K = y.shape[0]
    tot = 0.0
    mx = y[0]
    for t in range(K):
        tot += alpha_w[t] * y[t] - np.exp(y[t])
        mx = max(mx, y[t])
    gy = np.empty(K)
    prefix = 0.0
    for t in range(K):
        gy[t] = np.exp(y[t] - mx)
        prefix += gy[t]
        if t >= 1:
            tot -= N_w[t + 1] * np.log(prefix)
    for s in range(a, b):
        acc = 0.0
        for t in range(m[s]):
            acc += gy[t] * elam[cand[s, t]]
        tot += np.log(acc)
    return tot


@njit(cache=True)
def walk(cand, m, w_start, elam, N, log_g, alpha, chol, n_steps, accepted):
    """``n_steps`` random-walk Metropolis steps per worker on ``y = log g`` given ``λ``,
    with ``(z, ξ)`` summed out (:func:`_worker_target`); the step ``chol[w] ε``,
    ``ε ~ N(0, I)``, fixed after warm-up. ``accepted[w]`` counts the worker's accepted
    steps. Why: the urn moves ``η`` by about its complete-data spread; with the offsets
    only weakly identified (overlapping candidates) that is a fraction of the posterior
    spread, and a worker's ratios between COUPLE's nested normalisers mix slowly."""
    W, K = log_g.shape
    y = np.empty(K)
    eps = np.empty(K)
    for w in range(W):
        a, b = w_start[w], w_start[w + 1]
        cur = _worker_target(cand, m, a, b, elam, log_g[w], alpha[w], N[w])
        for _ in range(n_steps):
            for t in range(K):
                eps[t] = np.random.standard_normal()
            for t in range(K):
                acc = 0.0
                for j in range(t + 1):
                    acc += chol[w, t, j] * eps[j]
                y[t] = log_g[w, t] + acc
            new = _worker_target(cand, m, a, b, elam, y, alpha[w], N[w])
            if np.log(1.0 - np.random.random()) < new - cur:
                log_g[w, :] = y
                cur = new
                accepted[w] += 1


@njit(cache=True)
def ranking_loglik(cand, m, worker, origin, lam, rows, n_obs):
    """``log P`` of each source ranking: the sum of its stages' ``log Σ_{t<m} η̄_t
    s_t`` ([Pan18], Eq. 3) with ``η̄`` the worker's row ``rows[w]`` renormalised over the
    first ``m`` offsets (COUPLE: ``η``; CrowdBT: ``(η, 1 − η)``; PL, BT: ``(1, 0, …)``)."""
    out = np.zeros(n_obs)
    K = cand.shape[1]
    e = np.empty(K)
    for s in range(m.shape[0]):
        ms, w = m[s], worker[s]
        mx = lam[cand[s, 0]]
        for t in range(1, ms):
            mx = max(mx, lam[cand[s, t]])
        den = 0.0
        for t in range(ms):
            e[t] = np.exp(lam[cand[s, t]] - mx)
            den += e[t]
        num = 0.0
        tot = 0.0
        for t in range(ms):
            num += rows[w, t] * e[t]
            tot += rows[w, t]
        out[origin[s]] += np.log(num / (tot * den))
    return out


@njit(cache=True)
def _stage_probs(cand, s, ms, w, elam, rows, p, r):
    """Stage ``s``'s softmax ``p`` over its candidates and the offsets' responsibilities
    ``r_t ∝ η̄_t p_t``; returns ``log Σ_t η̄_t p_t`` (``η̄`` the worker's row renormalised
    over the first ``ms`` offsets)."""
    den = 0.0
    for t in range(ms):
        p[t] = elam[cand[s, t]]
        den += p[t]
    num = 0.0
    tot = 0.0
    for t in range(ms):
        p[t] /= den
        r[t] = rows[w, t] * p[t]
        num += r[t]
        tot += rows[w, t]
    for t in range(ms):
        r[t] /= num
    return np.log(num / tot)


@njit(cache=True)
def mixture_gradient(cand, m, worker, lam, rows, value=True):
    """``ℓ(λ)`` (``nan`` unless ``value``: the leapfrog's inner steps need the gradient
    alone, and a logarithm per stage is a third of the pass) and its gradient
    ``Σ_s (r_s − p_s)`` scattered on the items."""
    K = cand.shape[1]
    p = np.empty(K)
    r = np.empty(K)
    g = np.zeros(lam.shape[0])
    elam = np.exp(lam - lam.max())
    tot = 0.0
    for s in range(m.shape[0]):
        ms, w = m[s], worker[s]
        den = 0.0
        for t in range(ms):
            p[t] = elam[cand[s, t]]
            den += p[t]
        num = 0.0
        for t in range(ms):
            r[t] = rows[w, t] * p[t]
            num += r[t]
        if value:
            wt = 0.0
            for t in range(ms):
                wt += rows[w, t]
            tot += np.log(num / (wt * den))
        for t in range(ms):
            g[cand[s, t]] += r[t] / num - p[t] / den
    return (tot if value else np.nan), g


@njit(cache=True)
def mixture_hessian(cand, m, worker, lam, rows, n_items):
    """``ℓ(λ)``, its gradient and ``−∇²ℓ = Σ_s [diag(p) − p pᵀ] − [diag(r) − r rᵀ]``
    (dense ``L × L``: the complete-data curvature less the offsets' missing information)."""
    K = cand.shape[1]
    p = np.empty(K)
    r = np.empty(K)
    g = np.zeros(n_items)
    H = np.zeros((n_items, n_items))
    elam = np.exp(lam - lam.max())
    tot = 0.0
    for s in range(m.shape[0]):
        ms = m[s]
        tot += _stage_probs(cand, s, ms, worker[s], elam, rows, p, r)
        for j in range(ms):
            cj = cand[s, j]
            g[cj] += r[j] - p[j]
            H[cj, cj] += p[j] - r[j]
            for k in range(ms):
                H[cj, cand[s, k]] += r[j] * r[k] - p[j] * p[k]
    return tot, g, H


@njit(cache=True)
def _log_q(v, c, a, mean, sd):
    """The entry jump's proposal density at ``y_t = v``: half the prior ``LogGamma(α_t)``,
    half ``c + N(mean, sd²)``."""
    prior = a * v - np.exp(v) - math.lgamma(a)
    d = (v - c - mean) / sd
    data = -0.5 * d * d - np.log(sd * np.sqrt(2.0 * np.pi))
    hi = max(prior, data)
    return hi + np.log(0.5 * np.exp(prior - hi) + 0.5 * np.exp(data - hi))


@njit(cache=True)
def entry_jump(cand, m, w_start, elam, N, log_g, alpha, dm_mean, dm_sd, accepted):
    """One independence Metropolis–Hastings update of each entry ``y_t = log g_t`` of
    every worker given the others and ``λ`` (``(z, ξ)`` summed out): propose from half the
    prior ``LogGamma(α_t)`` — the conditional itself inside the prior spike, where the
    likelihood no longer depends on ``g_t`` — and half ``c + N(dm_mean, dm_sd²)``,
    ``c = log Σ_{v≠t} g_v`` (the data mode of ``log(η_t / (1 − η_t))``, fitted in
    warm-up). The proposal depends on the other entries, never on ``y_t``: each update is
    exact. Why: the urn crosses between an entry's spike and its data mode only when a
    stage happens to pick the empty offset, and the walk's steps are local."""
    W, K = log_g.shape
    y = np.empty(K)
    for w in range(W):
        a, b = w_start[w], w_start[w + 1]
        cur = _worker_target(cand, m, a, b, elam, log_g[w], alpha[w], N[w])
        for t in range(K):
            mx = -np.inf
            for v in range(K):
                if v != t:
                    mx = max(mx, log_g[w, v])
            acc = 0.0
            for v in range(K):
                if v != t:
                    acc += np.exp(log_g[w, v] - mx)
            c = mx + np.log(acc)
            if np.random.random() < 0.5:
                new_t = log_gamma(alpha[w, t])
            else:
                new_t = c + dm_mean[w, t] + dm_sd[w, t] * np.random.standard_normal()
            for v in range(K):
                y[v] = log_g[w, v]
            y[t] = new_t
            new = _worker_target(cand, m, a, b, elam, y, alpha[w], N[w])
            log_r = (new - cur + _log_q(log_g[w, t], c, alpha[w, t], dm_mean[w, t],
                                        dm_sd[w, t])
                     - _log_q(new_t, c, alpha[w, t], dm_mean[w, t], dm_sd[w, t]))
            if np.log(1.0 - np.random.random()) < log_r:
                log_g[w, t] = new_t
                cur = new
                accepted[w, t] += 1

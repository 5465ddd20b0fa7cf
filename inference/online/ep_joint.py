"""The joint worker factor of ``ep-exact workers=joint``: each COUPLE worker's η posterior
computed from *all* its rankings at once, on a grid over the K-simplex (docs/fidelity.md,
"EP with exact worker moments": a site's tilted distribution weights a stage offset ``t``
by ``α_t p_t``, so no single ranking can move an entry whose concentration is small, while
the product of a worker's rankings can).

Given ``q(λ) = Π_j N(μ_j, σ_j²)`` (the scores' marginals), worker ``w``'s factor is

``q(η_w) ∝ Dir(η_w; a⁰_w) Π_{n ∈ w} Σ_c M_{n,c} Π_s η̄^{(s)}_{t_s}``,          (J1)

with ``M_{n,c} = E_{q(λ)}[Π_s p_{s,t_s}(λ)]`` ([Pan18], Eq. 3–4; the ``k!`` combinations
``c`` and ``η̄`` as :mod:`.ep_exact`) by the tensor Gauss–Hermite rule of ep-exact
(``lam="gh"``) or at the means (``lam="plugin"``: ``Π_s p_{s,t_s}(μ)``). The marginals,
not the ranking's cavity, are integrated: an item appears in many rankings, so the two
differ by one ranking's share.

**The simplex grid.** ``η`` through its stick coordinates ``u_i = S_{i−1}/S_i ~
Beta(A_{i−1}, a_i)``, independent under the prior (``S_i = Σ_{t≤i} η_t``, ``A_i = Σ_{t≤i}
a_t``; neutrality, [Ng11]); each ``u_i`` in logit coordinates ``x_i``. One dimension's rule
is a partition of the ``x`` line into cells, each cell a node at its midpoint weighted by
the cell's exact prior mass (the Beta CDF), the two unbounded end cells as nodes at
``x = ±40`` (``u`` within 1e−17 of 0 or 1) weighted by the prior's tail masses — so the
weights sum to one and the prior's spikes at the simplex's faces (``a_t < 1``: the prior's
``a_4 ≈ 0.008``) are kept as mass, not as density. Two stages: a coarse partition
(:data:`COARSE`) gives each ``x_i``'s posterior mean and sd over the interior cells, and a
partition refined to :data:`FINE_CELLS` cells over mean ± :data:`FINE_SDS` sd is added to
it. The likelihood's log is accumulated in float64 over the rankings (``M @ W``, the
combinations' stage weights ``W`` on the grid; :mod:`.ep_joint_kernel` runs it and the
Gauss–Hermite integrals as numba loops, tested equal to the readable functions here).

**Projection.** ``E[η_t]`` and ``E[η_t²]`` on the grid, then [Pan18], Eq. 10 (as
:func:`.simplex_moments.alpha_from_moments`). The Dirichlet keeps ``E[η_t]`` and ``Var[η_t]``
of one chosen ``t`` exactly only when ``K = 2``; for ``K > 2`` Eq. 10 averages the
per-entry concentrations, so ``E[η¹]`` is kept and its sd is the Dirichlet's.
"""

from __future__ import annotations

import functools

import numpy as np

from .ep_exact_kernel import GH_POINTS
from .ep_joint_kernel import add_log_likelihood, ranking_moments_gh
from .gbmm import gauss_hermite
from .simplex_moments import alpha_from_moments, combos

#: the coarse partition of each stick coordinate's logit: cell edges
COARSE = np.linspace(-12.0, 12.0, 25)
FINE_CELLS, FINE_SDS = 16, 6.0
TAIL_X = 40.0
#: a ranking's likelihood is floored here before its log (it is at least the smallest of
#: its M_{n,c}, the stage weights of a point summing to one: in practice never reached)
FLOOR = 1e-300
LAMS = ("gh", "plugin")


# ------------------------------------------------------------------ M_{n,c}
def _softmax_stages(lam: np.ndarray, k: int) -> list[np.ndarray]:
    out = []
    for s in range(k - 1):
        z = lam[..., s:] - lam[..., s:].max(-1, keepdims=True)
        e = np.exp(z)
        out.append(e / e.sum(-1, keepdims=True))
    return out


@functools.cache
def _gh_grid(k: int) -> tuple[np.ndarray, np.ndarray]:
    """The tensor Gauss–Hermite rule of ``k`` items: nodes ``(n^k, k)`` and weights."""
    z1, w1 = gauss_hermite(GH_POINTS[k])
    grid = np.stack(np.meshgrid(*([z1] * k), indexing="ij"), -1).reshape(-1, k)
    wts = np.prod(np.stack(np.meshgrid(*([w1] * k), indexing="ij"), -1).reshape(-1, k), 1)
    grid.flags.writeable = wts.flags.writeable = False
    return grid, wts


def ranking_moments(mu, s2, items: np.ndarray, lam: str = "gh", chunk: int = 256,
                    python: bool = False):
    """``M`` ``(N, k!)`` of (J1) for ``N`` rankings of ``k`` items (rows of ``items``, best
    first), under ``N(μ, σ²)`` by the tensor Gauss–Hermite rule or at the means; ``"gh"``
    runs :func:`.ep_joint_kernel.ranking_moments_gh` unless ``python`` (this readable
    specification, tested equal)."""
    N, k = items.shape
    cs = combos(k)
    if lam == "gh" and not python:
        return ranking_moments_gh(np.asarray(mu, float), np.asarray(s2, float),
                                  np.ascontiguousarray(items, dtype=np.int64))
    m, v = np.asarray(mu, float)[items], np.asarray(s2, float)[items]
    if lam == "plugin":
        ps = _softmax_stages(m, k)
        return np.stack([np.prod([ps[s][:, t] for s, t in enumerate(c)], 0) for c in cs], 1)
    grid, wts = _gh_grid(k)
    out = np.empty((N, len(cs)))
    for a in range(0, N, chunk):
        lam_ = m[a:a + chunk, None, :] + np.sqrt(v[a:a + chunk, None, :]) * grid
        ps = _softmax_stages(lam_, k)
        for j, c in enumerate(cs):
            out[a:a + chunk, j] = np.prod([ps[s][..., t] for s, t in enumerate(c)], 0) @ wts
    return out


# ------------------------------------------------------------------ the simplex grid
def stick_rule(p: float, q: float, edges: np.ndarray):
    """One stick coordinate ``u ~ Beta(p, q)``: nodes ``u`` and prior masses (summing to
    one) of the cells between ``edges`` (logit) and the two tails (module docstring)."""
    from scipy.special import betainc, expit

    edges = np.asarray(edges, float)
    cdf = np.concatenate([[0.0], betainc(p, q, expit(edges)), [1.0]])
    x = np.concatenate([[-TAIL_X], (edges[1:] + edges[:-1]) / 2, [TAIL_X]])
    return expit(x), np.maximum(np.diff(cdf), 0.0)


def simplex_grid(a, edges: list[np.ndarray]):
    """Points ``η`` ``(G, K)`` and log prior masses of the product of the stick rules of
    ``Dir(a)`` (``edges[i−2]`` the partition of ``u_i``, ``i = 2..K``)."""
    a = np.asarray(a, float)
    K = len(a)
    rules = [stick_rule(a[:i - 1].sum(), a[i - 1], edges[i - 2]) for i in range(2, K + 1)]
    U = np.stack(np.meshgrid(*[r[0] for r in rules], indexing="ij"), -1).reshape(-1, K - 1)
    Wt = np.stack(np.meshgrid(*[r[1] for r in rules], indexing="ij"), -1).reshape(-1, K - 1)
    S = np.ones((len(U), K + 1))                   # S[:, i] = Σ_{t≤i} η_t, S[:, K] = 1
    for i in range(K, 1, -1):
        S[:, i - 1] = U[:, i - 2] * S[:, i]
    eta = np.diff(S[:, :K + 1], axis=1)
    eta[:, 0] = S[:, 1]
    with np.errstate(divide="ignore"):
        return eta, np.log(Wt).sum(1), np.log(U / (1 - U))


def combo_weights(eta: np.ndarray, k: int) -> np.ndarray:
    """``W`` ``(k!, G)``: ``Π_s η̄^{(s)}_{t_s}`` at every grid point (``η̄^{(s)}`` the first
    ``k − s`` entries renormalised)."""
    bars = [eta[:, :k - s] / eta[:, :k - s].sum(1, keepdims=True) for s in range(k - 1)]
    return np.stack([np.prod([bars[s][:, t] for s, t in enumerate(c)], 0) for c in combos(k)])


def log_likelihood_python(eta: np.ndarray, M: np.ndarray, k: int) -> np.ndarray:
    """``Σ_n log Σ_c M_{n,c} W_c(η)`` at every grid point (the readable specification of
    :func:`.ep_joint_kernel.add_log_likelihood`)."""
    W = combo_weights(eta, k)
    out = np.zeros(eta.shape[0])
    for a in range(0, eta.shape[0], 32768):
        out[a:a + 32768] = np.log(np.maximum(M @ W[:, a:a + 32768], FLOOR)).sum(0)
    return out


@functools.lru_cache(maxsize=16)
def _coarse_grid(a: tuple):
    """:func:`simplex_grid` of ``Dir(a)`` on the coarse partitions, kept: the workers
    share their prior row, and every update starts from it."""
    out = simplex_grid(np.array(a), [COARSE] * (len(a) - 1))
    for v in out:
        v.flags.writeable = False
    return out


def log_posterior(a0, M_by_k: dict, edges=None, python: bool = False):
    """Grid points, normalised weights of (J1) and the logit coordinates (``edges=None``:
    the coarse partitions); the likelihood by :func:`.ep_joint_kernel.add_log_likelihood`
    unless ``python``."""
    if edges is None:
        eta, lp, x = _coarse_grid(tuple(float(v) for v in a0))
        lp = lp.copy()
    else:
        eta, lp, x = simplex_grid(a0, edges)
    for k, M in M_by_k.items():
        if python:
            lp += log_likelihood_python(eta, M, k)
        else:
            add_log_likelihood(eta, np.ascontiguousarray(M, dtype=float), lp, FLOOR)
    lp -= lp.max()
    w = np.exp(lp)
    return eta, w / w.sum(), x


def worker_moments(a0, M_by_k: dict, python: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``E[η_t]``, ``E[η_t²]`` of (J1) by the two-stage grid (module docstring)."""
    K = len(a0)
    eta, w, x = log_posterior(a0, M_by_k, None, python)
    edges = []
    for i in range(K - 1):
        inner = np.abs(x[:, i]) < TAIL_X / 2
        mass = w[inner].sum()
        e = COARSE
        if mass > 1e-12:
            wi, xi = w[inner], x[inner, i]
            xm = _wsum(wi, xi) / mass
            sd = np.sqrt(max(_wsum(wi, (xi - xm) ** 2) / mass, 1e-6))
            fine = np.linspace(xm - FINE_SDS * sd, xm + FINE_SDS * sd, FINE_CELLS + 1)
            e = np.union1d(COARSE, fine[(fine > COARSE[0]) & (fine < COARSE[-1])])
        edges.append(e)
    eta, w, _ = log_posterior(a0, M_by_k, edges, python)
    return _wsum(w[:, None], eta, 0), _wsum(w[:, None], eta ** 2, 0)


def _wsum(w, x, axis=None):
    """``Σ w x`` elementwise, not a BLAS dot: a threaded BLAS's workers spin on the other
    cores for these short vectors (measured: a 16,000-long dot cost 2.8 ms of process CPU
    through ``@`` on two busy cores, 10 µs as a product and a sum)."""
    return (w * x).sum(axis)


def worker_cavities(mu, s2, ordr, lengths, wk, site_tau, site_nu, w):
    """The scores' marginals with every score site of worker ``w``'s rankings removed
    (``q\\w(λ)``): the worker's factor must not see its own rankings twice, once through
    the scores they moved. Items whose cavity precision is not positive keep the marginal."""
    tau, nu = 1.0 / np.asarray(s2, float), np.asarray(mu, float) / np.asarray(s2, float)
    for n in np.flatnonzero(wk == w):
        it = ordr[:lengths[n], n]
        tau[it] -= site_tau[n, :lengths[n]]
        nu[it] -= site_nu[n, :lengths[n]]
    ok = tau > 0
    return (np.where(ok, nu / np.where(ok, tau, 1.0), mu),
            np.where(ok, 1.0 / np.where(ok, tau, 1.0), s2))


def joint_worker_update(alpha0: np.ndarray, mu, s2, ordr, lengths, wk, lam: str = "gh",
                        sites=None, python: bool = False):
    """``α`` ``(W, K)``: every worker's (J1) projected by [Pan18], Eq. 10; workers without
    rankings keep the prior. ``sites = (site_tau, site_nu)``: integrate each worker's
    rankings under its cavity :func:`worker_cavities` rather than the marginals;
    ``python``: the readable specifications instead of :mod:`.ep_joint_kernel`."""
    out = np.array(alpha0, float, copy=True)
    lengths, wk = np.asarray(lengths), np.asarray(wk)
    for w in np.unique(wk):
        m, v = (mu, s2) if sites is None else worker_cavities(mu, s2, ordr, lengths, wk,
                                                             *sites, w)
        M_by_k = {}
        for k in np.unique(lengths[wk == w]):
            if k < 2:
                continue
            idx = np.flatnonzero((lengths == k) & (wk == w))
            M_by_k[int(k)] = ranking_moments(m, v, ordr[:k, idx].T, lam, python=python)
        if not M_by_k:
            continue
        E1, E2 = worker_moments(alpha0[w], M_by_k, python)
        out[w] = alpha_from_moments(E1, E2)
    return out


__all__ = ["FLOOR", "LAMS", "add_log_likelihood", "joint_worker_update",
           "log_likelihood_python", "ranking_moments", "simplex_grid", "stick_rule",
           "worker_cavities", "worker_moments"]

"""numba twin of :mod:`.ep_joint`'s two heavy steps: the rankings' score integrals
``M_{n,c}`` (J1) and the sum of the rankings' log likelihoods over the simplex grid.

The readable specifications are :func:`.ep_joint.ranking_moments` (``lam="gh"``) and
:func:`.ep_joint.log_likelihood_python` (tested equal). What differs is *how*:

- ``M_{n,c}``: one ranking at a time through :func:`.ep_exact_kernel._softmax_moments`,
  the site kernel's walk of the same tensor Gauss–Hermite grid (``GH_POINTS`` per item),
  instead of the ``(N, n^k, k)`` arrays of the specification;
- the log likelihood: the stage weights ``W_c(η)`` built per block of grid points (never
  the ``(k!, G)`` matrix), ``Σ_c M_{n,c} W_c`` accumulated over the block, and the
  rankings' factors multiplied before one ``log`` is taken (a ``log`` per ranking and point
  is most of the specification's cost). Every factor lies in ``[min_c M_{n,c}, 1]`` (the
  ``W_c`` of a point sum to one); the running product is flushed into the log below
  :data:`FLUSH` and a factor below :data:`SMALL` is logged alone, so the product never
  underflows; ``log(ab) = log a + log b`` to rounding, so the two agree to rounding.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .ep_exact_kernel import CS, NCOMB, _softmax_moments

#: grid points per block: the block's stage weights (``k! × BLOCK`` doubles) stay in cache
BLOCK = 256
#: the running product of a point's factors is taken into the log below FLUSH; a factor
#: below SMALL goes into the log alone, so the product stays above 1e-300 (no underflow)
FLUSH, SMALL = 1e-200, 1e-100


@njit(cache=True, error_model="numpy")
def ranking_moments_gh(mu, s2, items):
    """``M`` ``(N, k!)``: ``E[Π_s p_{s,t_s}(λ)]`` of each row of ``items`` (``k`` items,
    best first) under ``N(μ, diag σ²)``, by the Gauss–Hermite rule of the site kernel."""
    N, k = items.shape
    nc = NCOMB[k]
    out = np.empty((N, nc))
    mc = np.empty(k)
    vc = np.empty(k)
    D = np.zeros(24)
    M = np.empty(24)
    prod = np.empty(24)
    G = np.empty(k)
    H = np.empty(k)
    lam = np.empty(k)
    p = np.empty((k, k))
    idx = np.empty(k, dtype=np.int64)
    for n in range(N):
        for j in range(k):
            mc[j] = mu[items[n, j]]
            vc[j] = s2[items[n, j]]
        _softmax_moments(mc, vc, k, False, D, M, G, H, lam, p, idx, prod)
        for c in range(nc):
            out[n, c] = M[c]
    return out


@njit(cache=True, error_model="numpy")
def add_log_likelihood(eta, M, lp, floor):
    """``lp[g] += Σ_n log(max(Σ_c M[n, c] W_c(η_g), floor))`` for the rankings of one
    length ``k`` (``M`` ``(N, k!)``), ``W_c(η) = Π_s η̄^{(s)}_{t_s}`` (module docstring)."""
    G = eta.shape[0]
    N = M.shape[0]
    if N == 0:
        return
    nc = M.shape[1]
    k = 2
    while NCOMB[k] != nc:
        k += 1
    W = np.empty((nc, BLOCK))
    acc = np.empty(BLOCK)
    run = np.empty(BLOCK)
    bars = np.empty((k, k))
    for g0 in range(0, G, BLOCK):
        nb = min(G, g0 + BLOCK) - g0
        for b in range(nb):
            g = g0 + b
            for s in range(k - 1):              # η̄^{(s)}: the first k − s entries
                tot = 0.0
                for t in range(k - s):
                    tot += eta[g, t]
                for t in range(k - s):
                    bars[s, t] = eta[g, t] / tot
            for c in range(nc):
                w = 1.0
                for s in range(k - 1):
                    w *= bars[s, CS[k, c, s]]
                W[c, b] = w
            run[b] = 1.0
        for n in range(N):
            for b in range(nb):
                acc[b] = 0.0
            for c in range(nc):
                m = M[n, c]
                for b in range(nb):
                    acc[b] += m * W[c, b]
            for b in range(nb):
                v = max(acc[b], floor)
                if v < SMALL:                   # taken alone: the product cannot underflow
                    lp[g0 + b] += math.log(v)
                else:
                    run[b] *= v
                    if run[b] < FLUSH:
                        lp[g0 + b] += math.log(run[b])
                        run[b] = 1.0
        for b in range(nb):
            lp[g0 + b] += math.log(run[b])


__all__ = ["add_log_likelihood", "ranking_moments_gh"]

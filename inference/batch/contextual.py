"""Contextual Bradley–Terry (MAP): item strength that depends on the comparison's covariates.

The article in ``seeds/002_*`` ("contextual BT", the Chatbot Arena form [Chiang24]) lets
each comparison ``s`` carry a covariate vector ``x_s`` (prompt category as one-hot
columns, difficulty, ...): the log-odds that ``i`` beats ``j`` is
``(λ_i − λ_j) + x_s·(γ_i − γ_j)`` with ``γ_i ∈ R^p`` the item's covariate profile. With
``z_s = (e_i − e_j) ⊗ (1, x_s)`` over ``θ = (λ, γ)`` this is a logistic regression without
intercept ([BT52] when ``p = 0``), so ``ℓ = Σ_s log σ(z_s·θ)``, ``∇ℓ = Zᵀ σ(−Zθ)`` and
``∇²ℓ = −Zᵀ diag(σ(Zθ) σ(−Zθ)) Z``; the priors are ``λ_r ~ N(μ0, σ0²)`` and
``γ_rk ~ N(0, τ²)``. The MAP is found by the damped Newton solver of :mod:`.solvers`'s
kind (here on the dense ``L(1 + p)`` Hessian) and Laplace's covariance comes with it.

Only the batch MAP and a simulator exist; the covariates come as arrays (the readers do
not take extra CSV columns yet) and there is no NumPyro/PyMC version.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse
from scipy.linalg import cho_factor, cho_solve
from scipy.special import expit, log_expit

# the model's simulator lives with the model (models/contextual.py); kept importable here
from crowdrank.models.contextual import simulate as simulate_contextual  # noqa: F401


def design(win, lose, X, n_items: int) -> sparse.csr_matrix:
    """``Z`` ``(S, L(1 + p))``: row ``s`` is ``(e_w − e_l) ⊗ (1, x_s)``, laid out as
    ``[λ (L) | γ (L × p), row-major by item]``."""
    win, lose = np.asarray(win), np.asarray(lose)
    X = np.asarray(X, float).reshape(len(win), -1)
    S, p = X.shape
    L = n_items
    rows = np.repeat(np.arange(S), 2 * (1 + p))
    # vectorised: for each row the λ columns w, l and the γ columns L + w p + k, L + l p + k
    k = np.arange(p)
    cw = np.concatenate([win[:, None], L + win[:, None] * p + k[None, :]], axis=1)
    cl = np.concatenate([lose[:, None], L + lose[:, None] * p + k[None, :]], axis=1)
    v = np.concatenate([np.ones((S, 1)), X], axis=1)
    cols = np.concatenate([cw, cl], axis=1).reshape(-1)
    vals = np.concatenate([v, -v], axis=1).reshape(-1)
    return sparse.csr_matrix((vals, (rows, cols)), shape=(S, L * (1 + p)))


@dataclass(frozen=True)
class ContextualFit:
    lam: np.ndarray          # (L,)
    gamma: np.ndarray        # (L, p)
    cov: np.ndarray          # Laplace covariance over θ = (λ, γ)
    iterations: int
    grad_norm: float
    converged: bool

    def sd(self) -> tuple[np.ndarray, np.ndarray]:
        L = len(self.lam)
        d = np.sqrt(np.diag(self.cov))
        return d[:L], d[L:].reshape(self.gamma.shape)


def _prior_precision(L: int, p: int, sigma0: float, tau: float) -> np.ndarray:
    return np.concatenate([np.full(L, 1 / sigma0**2), np.full(L * p, 1 / tau**2)])


def log_posterior(theta, Z, mean, prec) -> float:
    return float(np.sum(log_expit(Z @ theta)) - 0.5 * np.sum(prec * (theta - mean) ** 2))


def fit_contextual(win, lose, X, n_items: int, *, mu0: float = 0.0, sigma0: float = 1.0,
                   tau: float = 1.0, tol: float = 1e-9, max_iter: int = 100) -> ContextualFit:
    """MAP of contextual BT for comparisons ``win[s] ≻ lose[s]`` with covariates ``X[s]``."""
    X = np.asarray(X, float).reshape(len(win), -1)
    p = X.shape[1]
    L = n_items
    Z = design(win, lose, X, L)
    prec = _prior_precision(L, p, sigma0, tau)
    mean = np.concatenate([np.full(L, float(mu0)), np.zeros(L * p)])
    theta = mean.copy()
    f = log_posterior(theta, Z, mean, prec)
    it = 0
    while True:
        u = Z @ theta
        g = Z.T @ expit(-u) - prec * (theta - mean)
        gnorm = float(np.max(np.abs(g)))
        if gnorm <= tol or it >= max_iter:
            break
        q = expit(u) * expit(-u)
        A = (Z.T @ sparse.diags(q) @ Z).toarray()
        A[np.diag_indices_from(A)] += prec
        step = cho_solve(cho_factor(A), g)
        t = 1.0
        while t > 1e-12:                      # backtracking: the log posterior is concave
            cand = theta + t * step
            fc = log_posterior(cand, Z, mean, prec)
            if fc >= f + 1e-4 * t * float(g @ step) - 1e-13 * max(1.0, abs(f)):
                break
            t *= 0.5
        theta, f = cand, fc
        it += 1
    q = expit(Z @ theta) * expit(-(Z @ theta))
    A = (Z.T @ sparse.diags(q) @ Z).toarray()
    A[np.diag_indices_from(A)] += prec
    cov = cho_solve(cho_factor(A), np.eye(len(theta)))
    return ContextualFit(theta[:L], theta[L:].reshape(L, p), cov, it, gnorm, gnorm <= tol)

"""Laplace's approximation at the batch optimum: ``λ ~ N(λ̂, (−∇²f(λ̂))⁻¹)``.

At the MAP the negative Hessian of the log posterior (:func:`.luce.objective_hessian`) is
positive definite and its inverse is the Laplace covariance. At the ML estimate under
``Σ λ = 0`` the Hessian is singular along ``1``; the covariance of the constrained estimate is
the pseudo-inverse ``A⁺`` of ``A = −∇²ℓ``, computed as ``(A + 11ᵀ/L)⁻¹ − 11ᵀ/L`` (``11ᵀ/L``
is the projection onto the null space, which ``A⁺`` leaves out).
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import cho_factor, cho_solve

from .solvers import Problem


def covariance(problem: Problem, lam) -> np.ndarray:
    """The Laplace covariance ``(L, L)`` at ``lam`` (the module docstring)."""
    lam = np.asarray(lam, float)
    A = problem.neg_hess(lam)
    L = len(lam)
    if problem.prior is not None:
        return cho_solve(cho_factor(A), np.eye(L))
    J = np.full((L, L), 1.0 / L)
    return cho_solve(cho_factor(A + J), np.eye(L)) - J

"""Three batch solvers of the BT/PL MAP (or ML) problem of :mod:`.luce`, blackjax style.

Each solver is a pair of pure functions over an immutable state — ``init(problem, lam0)``
and ``step(problem, state)`` — and :func:`solve` runs any of them to a gradient tolerance.
The problem is a :class:`Problem` (stages, prior or ``None`` for ML, stage weights).

- **gradient ascent**: ``λ ← λ + ∇f / Lip`` with ``Lip`` a bound on the curvature
  (:func:`lipschitz`), which guarantees ascent without a line search;
- **Newton**: ``λ ← λ + t (−∇²f)⁻¹ ∇f`` with the analytic Hessian of :mod:`.luce`, a
  Cholesky solve, and backtracking from ``t = 1`` (``f`` is concave, so full steps are
  taken near the optimum and convergence is quadratic). For ML the Hessian is singular
  along ``1``; the step solves ``(−∇²f + 11ᵀ/L) δ = ∇f``, which keeps ``Σ λ = 0``;
- **MM** ([Hunter04]): minorise ``−log Σ_{m∈C} e^{λ_m} ≥ const − Σ_{m∈C} e^{λ_m} / S^t``
  (``S^t`` the stage's sum at the current iterate), which separates the objective into
  ``W_i λ_i − c_i e^{λ_i}`` per item with ``W_i`` the item's (weighted) wins and
  ``c_i = Σ_{s ∋ i} w_s / S_s^t``. Without a prior the maximiser is Hunter's
  ``e^{λ_i} = W_i / c_i``; with the ``N(μ0, σ0²)`` prior each item's surrogate
  ``W_i λ − c_i e^λ − (λ − μ0)²/(2σ0²)`` is maximised exactly by Lambert's W:
  ``λ_i = μ0 + σ0² W_i − W₀(σ0² c_i e^{μ0 + σ0² W_i})``. Every MM step increases the
  objective, with no step size to tune.

Convergence is declared when the largest absolute gradient entry is ``≤ tol``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np
from scipy.linalg import cho_factor, cho_solve
from scipy.special import lambertw

from . import luce

SOLVERS = ("newton", "mm", "gradient")


@dataclass(frozen=True, eq=False)
class Problem:
    """What is maximised: the stages, the prior (``None``: ML with ``Σ λ = 0``), and
    optional per-unit weights (bootstrap multiplicities)."""

    stages: luce.Stages
    prior: luce.Prior | None
    weights: np.ndarray | None = None

    def f(self, lam) -> float:
        return luce.objective(self.stages, lam, self.prior, self.weights)

    def grad(self, lam) -> np.ndarray:
        return luce.objective_gradient(self.stages, lam, self.prior, self.weights)

    def hess(self, lam) -> np.ndarray:
        return luce.objective_hessian(self.stages, lam, self.prior, self.weights)

    def neg_hess(self, lam) -> np.ndarray:
        return luce.objective_neg_hessian(self.stages, lam, self.prior, self.weights)


class SolverState(NamedTuple):
    lam: np.ndarray
    f: float
    grad: np.ndarray
    step: float          # last accepted step length (gradient ascent, Newton)
    iteration: int


def _centre(problem: Problem, lam: np.ndarray) -> np.ndarray:
    return lam - lam.mean() if problem.prior is None else lam


def _state(problem: Problem, lam, step: float, iteration: int) -> SolverState:
    lam = _centre(problem, np.asarray(lam, float))
    return SolverState(lam, problem.f(lam), problem.grad(lam), step, iteration)


def init(problem: Problem, lam0=None) -> SolverState:
    """The starting state (``λ = μ0``, or 0 for ML, unless ``lam0`` is given)."""
    if lam0 is None:
        lam0 = np.full(problem.stages.n_items,
                       0.0 if problem.prior is None else problem.prior.mu0)
    return _state(problem, lam0, 1.0, 0)


def _backtrack(problem: Problem, state: SolverState, direction: np.ndarray, t: float,
               shrink: float = 0.5, armijo: float = 1e-4, min_step: float = 1e-20
               ) -> SolverState:
    """Largest ``t·shrinkⁿ`` with ``f(λ + t d) ≥ f(λ) + armijo · t · ∇f·d``."""
    slope = float(np.dot(state.grad, direction))
    # near the optimum the predicted gain falls below the rounding of f itself; a step is
    # then judged by the objective only up to that rounding (else the test never passes)
    eps = 64 * np.finfo(float).eps * max(1.0, abs(state.f))
    while t > min_step:
        cand = _centre(problem, state.lam + t * direction)
        fc = problem.f(cand)
        if fc >= state.f + armijo * t * slope - (eps if t * slope < eps else 0.0):
            return SolverState(cand, fc, problem.grad(cand), t, state.iteration + 1)
        t *= shrink
    # no ascent possible at floating-point resolution: keep the point
    return state._replace(iteration=state.iteration + 1, step=0.0)


def lipschitz(problem: Problem) -> float:
    """An upper bound on the curvature ``λ_max(−∇²f)``: each stage's
    ``diag p − p pᵀ ≼ ½ I`` on its candidates ([Bohning92]), so
    ``−∇²f ≼ ½ diag(n) + I/σ0²`` with ``n_i`` the weighted stages item ``i`` is in."""
    n = luce.appearances(problem.stages, problem.weights)
    return 0.5 * float(n.max()) + (0.0 if problem.prior is None
                                   else 1.0 / problem.prior.sigma0 ** 2)


def gradient_step(problem: Problem, state: SolverState) -> SolverState:
    """One gradient-ascent iteration ``λ ← λ + ∇f / Lip`` (:func:`lipschitz`): the step
    that a concave ``f`` with that curvature bound never overshoots, so ``f`` increases
    at every iteration without a line search."""
    step = state.step if state.iteration else 1.0 / lipschitz(problem)
    return _state(problem, state.lam + step * state.grad, step, state.iteration + 1)


def newton_direction(problem: Problem, lam: np.ndarray, grad: np.ndarray) -> np.ndarray:
    """``(−∇²f)⁻¹ ∇f``; for ML the ``1`` direction is fixed by adding ``11ᵀ/L``."""
    A = problem.neg_hess(lam)
    if problem.prior is None:
        A += 1.0 / len(lam)
    return cho_solve(cho_factor(A, overwrite_a=True, check_finite=False), grad,
                     check_finite=False)


def newton_step(problem: Problem, state: SolverState) -> SolverState:
    """One damped Newton iteration."""
    return _backtrack(problem, state, newton_direction(problem, state.lam, state.grad), 1.0)


def wexp(x) -> np.ndarray:
    """``W₀(eˣ)`` (Lambert's W of ``eˣ``) without overflow: SciPy for moderate ``x``, a few
    Newton steps on ``w + log w = x`` beyond."""
    x = np.asarray(x, float)
    out = np.empty_like(x)
    small = x < 500
    out[small] = lambertw(np.exp(x[small])).real
    if np.any(~small):
        xb = x[~small]
        w = xb - np.log(xb)
        for _ in range(6):
            w -= (w + np.log(w) - xb) / (1 + 1 / w)
        out[~small] = w
    return out


def mm_step(problem: Problem, state: SolverState) -> SolverState:
    """One MM iteration ([Hunter04]; the module docstring)."""
    st = problem.stages
    lam = state.lam
    shift = lam.max()
    w = luce._stage_weights(st, problem.weights)
    g = np.where(st.mask, np.exp(lam[st.cand] - shift), 0.0)
    S = g.sum(axis=1)                               # stage sums, scaled by e^{-shift}
    contrib = np.broadcast_to((w / S)[:, None], st.mask.shape)[st.mask]
    c = np.bincount(st.cand[st.mask], weights=contrib, minlength=st.n_items)
    with np.errstate(divide="ignore"):              # c_i = 0: item in no stage (prior only)
        log_c = np.log(c) - shift                   # log of the unscaled c_i
    W = luce.wins(st, problem.weights)
    if problem.prior is None:
        with np.errstate(divide="ignore"):
            new = np.log(W) - log_c
    else:
        mu0, s2 = problem.prior.mu0, problem.prior.sigma0 ** 2
        # items in no stage have c_i = 0: their surrogate is the prior alone, maximised at μ0
        seen = c > 0
        new = np.full_like(lam, mu0)
        x = np.log(s2) + log_c[seen] + mu0 + s2 * W[seen]
        new[seen] = mu0 + s2 * W[seen] - wexp(x)
    return _state(problem, new, state.step, state.iteration + 1)


STEPS = {"newton": newton_step, "mm": mm_step, "gradient": gradient_step}

#: Default iteration caps: Newton converges in a handful; MM and gradient ascent linearly.
MAX_ITER = {"newton": 100, "mm": 100_000, "gradient": 100_000}


@dataclass(frozen=True)
class SolveResult:
    lam: np.ndarray
    objective: float
    grad_norm: float           # max |∂f/∂λ_r| at the end
    iterations: int
    converged: bool
    solver: str
    seconds: float
    reason: str = ""


def solve(problem: Problem, solver: str = "newton", *, lam0=None, tol: float = 1e-9,
          max_iter: int | None = None) -> SolveResult:
    """Run ``solver`` from ``lam0`` until ``max |∇f| ≤ tol`` or ``max_iter`` iterations."""
    if solver not in STEPS:
        raise ValueError(f"unknown solver {solver!r}; expected one of {SOLVERS}")
    step = STEPS[solver]
    max_iter = MAX_ITER[solver] if max_iter is None else int(max_iter)
    t0 = time.perf_counter()
    state = init(problem, lam0)
    reason = "max_iter"
    while True:
        gnorm = float(np.max(np.abs(state.grad))) if len(state.grad) else 0.0
        if gnorm <= tol:
            reason = "tolerance"
            break
        if state.iteration >= max_iter:
            break
        new = step(problem, state)
        if new.step == 0.0 and solver == "newton":
            reason = "no ascent at floating-point resolution"
            state = new
            break
        state = new
    gnorm = float(np.max(np.abs(state.grad))) if len(state.grad) else 0.0
    return SolveResult(state.lam, state.f, gnorm, state.iteration, gnorm <= tol, solver,
                       time.perf_counter() - t0, reason)


def with_weights(problem: Problem, weights) -> Problem:
    """The same problem with per-unit ``weights`` (a bootstrap resample)."""
    return replace(problem, weights=None if weights is None else np.asarray(weights, float))

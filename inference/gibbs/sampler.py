"""One chain of the collapsed Gibbs sampler: ``init`` and ``step`` over a small state
(docs/design.md, "The collapsed Gibbs sampler"; the kernels in
:mod:`crowdrank.inference.gibbs.kernels`).

A sweep, each block drawn from its conditional in the augmented joint:

1. ``ξ | g`` (Exponential slacks of COUPLE's normalisers);
2. ``(g, ξ) → (c g, ξ/c)``, the scale move;
3. ``(z, g) | ξ, λ``: the offsets by the collapsed Pólya urn (``g`` integrated out),
   then ``g`` given them;
4. ``λ | z``: a Metropolis–Hastings step from a Gaussian fitted once to the scores'
   conditional (below), ``lambda_steps`` times.

Why the order is valid (partially collapsed Gibbs, [vDP08]): step 3 draws ``z`` from
``p(z | ξ, λ)`` with ``g`` marginalised and then ``g`` from ``p(g | z, ξ, λ)``, i.e. the
pair ``(z, g)`` jointly given ``(ξ, λ)``; ``z`` is the only block drawn without its
partner, and the ``g`` it leaves behind is redrawn at once. The scan inside step 3 needs
its starting ``z`` distributed as ``p(z | ξ, λ)``: it is, because the only block moved
since ``z`` was last drawn is ``(g, ξ)`` (steps 1–2, given ``z``'s own conditioning
variables' joint law). Without a worker parameter (PL, BT) the offsets are fixed at ``0``
and only step 4 runs.

The scores' step. Given ``z`` the scores' conditional is Plackett–Luce with known choices,

    log π(λ | z) = n(z)·λ − A(λ) − ‖λ − μ₀‖² / (2σ₀²) + const,

``n(z)`` the chosen counts and ``A(λ) = Σ_s log D_s(λ)``, free of ``z``. Its second-order
expansion at a fixed point ``λ_f`` (``A_f``, gradient ``a``, Hessian ``H_A``) is the
Gaussian ``N(μ(z), H⁻¹)`` with ``H = H_A + I/σ₀²`` and ``H μ(z) = n(z) − a + H_A λ_f +
μ₀/σ₀²`` — the Hessian does not depend on ``z``, so it is factorised once. The step is
preconditioned Crank–Nicolson [Cotter13] about that Gaussian,
``λ' = μ + ρ (λ − μ) + √(1 − ρ²) H^{−½} ε`` (``ρ = 0``: an independence proposal), whose
acceptance ratio is ``w(λ')/w(λ)`` with

    log w(λ) = −A(λ) + a·(λ − λ_f) + ½ (λ − λ_f)ᵀ H_A (λ − λ_f):

the expansion's remainder, the same for every ``z`` (``n(z)·λ`` cancels). At the paper's
scale the remainder is small and the step nearly an exact draw of ``λ | z``; on small
data ``ρ`` is raised in warm-up until about a third of the steps are accepted. ``λ_f`` and
``ρ`` are adapted during warm-up only and fixed for the kept draws.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy.linalg import cho_solve, cholesky, solve_triangular

from . import kernels as kn
from .layout import Stages

#: Warm-up sweeps at which ``λ_f`` moves to the mean of the scores since the last move
#: (fractions of the warm-up, and a first one after :data:`FIRST_RECENTRE` sweeps).
RECENTRE_AT = (0.25, 0.5, 0.75)
FIRST_RECENTRE = 20
#: The walk's first step size (sd of each ``log g_t``), before warm-up has a covariance;
#: the walk's steps after that: ``WALK_SCALE² / K`` times the warm-up draws' covariance
#: ([Haario01]'s 2.38²/d) with each entry's variance at most ``WALK_VAR_MAX`` (an entry
#: in its prior spike swings by ~100 in ``log g``; its steps need not).
WALK_START = 0.3
WALK_SCALE = 2.38
WALK_VAR_MAX = 4.0
#: Warm-up window of the acceptance-rate adaptation of ``ρ``, and its target band.
ADAPT_EVERY = 25
ACCEPT_BAND = (0.2, 0.6)


@dataclass
class Laplace:
    """The scores' Gaussian: expansion point, ``H_A``, ``a``, ``A_f``, ``chol`` (lower
    factor of ``H``), the constant ``c`` of ``H μ(z) = n(z) + c``."""

    lam_f: np.ndarray
    A_f: float
    grad: np.ndarray
    H_A: np.ndarray
    chol: np.ndarray
    c: np.ndarray

    def log_w(self, st: Stages, lam) -> float:
        d = lam - self.lam_f
        return (-kn.log_partition(st.cand, st.m, lam) + self.A_f + self.grad @ d
                + 0.5 * d @ (self.H_A @ d))


def laplace(st: Stages, lam_f, mu0: float, sigma0: float) -> Laplace:
    """The expansion of the scores' conditional at ``lam_f`` (module docstring)."""
    lam_f = np.asarray(lam_f, float).copy()
    A_f, grad, H_A = kn.expansion(st.cand, st.m, lam_f, st.n_items)
    H = H_A + np.eye(st.n_items) / sigma0 ** 2
    chol = cholesky(H, lower=True)
    c = -grad + H_A @ lam_f + mu0 / sigma0 ** 2
    return Laplace(lam_f, float(A_f), grad, H_A, chol, c)


def map_scores(st: Stages, z, mu0: float, sigma0: float, iters: int = 20) -> np.ndarray:
    """The mode of ``λ | z`` by Newton's method from ``μ₀`` (the warm-up's first
    expansion point)."""
    lam = np.full(st.n_items, float(mu0))
    n = kn.counts(st.cand, z, st.n_items)
    for _ in range(iters):
        _, grad, H_A = kn.expansion(st.cand, st.m, lam, st.n_items)
        g = n - grad - (lam - mu0) / sigma0 ** 2
        step = np.linalg.solve(H_A + np.eye(st.n_items) / sigma0 ** 2, g)
        lam += np.clip(step, -2.0, 2.0)
        if np.max(np.abs(step)) < 1e-8:
            break
    return lam


@dataclass
class State:
    """A chain's state: ``lam`` ``(L,)``; ``log_g`` ``(W, K)``, ``z`` ``(S,)``, ``xi``
    ``(S,)`` (empty without a worker parameter); the current ``log w(λ)``; the step's
    ``rho``, its Gaussian and its acceptance counts."""

    lam: np.ndarray
    log_g: np.ndarray
    z: np.ndarray
    xi: np.ndarray
    log_w: float
    rho: float
    gauss: Laplace
    accepted: int = 0
    proposed: int = 0
    history: list = field(default_factory=list)
    walk_chol: np.ndarray | None = None
    walk_accepted: np.ndarray | None = None


def init(st: Stages, alpha, mu0: float, sigma0: float, rng: np.random.Generator,
         *, spread: float = 2.0, lam0=None) -> State:
    """A dispersed start: ``g`` from its prior, ``λ`` from ``N(λ̂, spread² H⁻¹)`` about the
    mode ``λ̂`` of ``λ | z = 0`` (or ``lam0``), the offsets from ``z | g, λ``."""
    W, S = st.n_workers, st.n_stages
    z = np.zeros(S, np.int32)
    lam_hat = map_scores(st, z, mu0, sigma0) if lam0 is None else np.asarray(lam0, float)
    gauss = laplace(st, lam_hat, mu0, sigma0)
    eps = rng.standard_normal(st.n_items)
    lam = lam_hat + spread * solve_triangular(gauss.chol.T, eps, lower=False)
    if alpha is not None:
        log_g = np.array([[kn.log_gamma(float(a)) for a in row] for row in alpha])
        kn.offsets(st.cand, st.m, st.worker, np.exp(lam - lam.max()), log_g, z)
    else:
        log_g = np.zeros((W, 0))
    xi = np.zeros(S if alpha is not None else 0)
    K = log_g.shape[1]
    chol = np.broadcast_to(WALK_START * np.eye(K), (W, K, K)).copy()
    return State(lam, log_g, z, xi, gauss.log_w(st, lam), 0.0, gauss, walk_chol=chol,
                 walk_accepted=np.zeros(W, np.int64))


def score_step(st: Stages, state: State, rng: np.random.Generator) -> None:
    """One pCN step of ``λ | z`` about the fixed Gaussian (module docstring)."""
    g = state.gauss
    n = kn.counts(st.cand, state.z, st.n_items)
    mu = cho_solve((g.chol, True), n + g.c)
    x = solve_triangular(g.chol.T, rng.standard_normal(st.n_items), lower=False)
    rho = state.rho
    prop = mu + rho * (state.lam - mu) + math.sqrt(1.0 - rho * rho) * x
    lw = g.log_w(st, prop)
    state.proposed += 1
    if math.log(1.0 - rng.random()) < lw - state.log_w:
        state.lam, state.log_w = prop, lw
        state.accepted += 1


def step(st: Stages, alpha, state: State, rng: np.random.Generator,
         lambda_steps: int = 1, walk_steps: int = 0) -> None:
    """One sweep (module docstring), in place."""
    if alpha is not None and walk_steps:
        elam = np.exp(state.lam - state.lam.max())
        kn.walk(st.cand, st.m, st.w_start, elam, st.stage_counts, state.log_g, alpha,
                state.walk_chol, walk_steps, state.walk_accepted)
        # the walk moved g with (z, ξ) summed out: z is redrawn given g before ξ
        kn.offsets(st.cand, st.m, st.worker, elam, state.log_g, state.z)
    if alpha is not None:
        kn.slacks(st.m, st.worker, state.log_g, state.xi)
        kn.rescale(st.w_start, state.log_g, state.xi, alpha)
        kn.urn(st.cand, st.m, st.w_start, np.exp(state.lam - state.lam.max()), state.xi,
               alpha, state.z, state.log_g)
    for _ in range(lambda_steps):
        score_step(st, state, rng)


def walk_chol(log_g_draws: np.ndarray) -> np.ndarray:
    """The walk's step factors from warm-up draws ``(n, W, K)`` of ``log g``."""
    n, _, K = log_g_draws.shape
    x = log_g_draws - log_g_draws.mean(axis=0)
    cov = np.einsum("nwi,nwj->wij", x, x) / max(n - 1, 1)
    sd = np.sqrt(np.clip(np.einsum("wii->wi", cov), 1e-12, None))
    scale = np.minimum(sd, np.sqrt(WALK_VAR_MAX)) / sd
    cov = cov * scale[:, :, None] * scale[:, None, :] * WALK_SCALE ** 2 / K
    return np.linalg.cholesky(cov + 1e-8 * np.eye(K))


def adapt(st: Stages, state: State, i: int, warmup: int, window: dict,
          mu0: float, sigma0: float) -> None:
    """Warm-up only: move ``λ_f`` to the recent scores' mean and the walk's steps to the
    recent ``log g``'s covariance at fixed sweeps, and widen or narrow ``ρ`` by the
    acceptance of the last :data:`ADAPT_EVERY` steps."""
    window.setdefault("lam", []).append(state.lam.copy())
    if state.log_g.shape[1]:
        window.setdefault("log_g", []).append(state.log_g.copy())
    marks = {FIRST_RECENTRE} | {int(f * warmup) for f in RECENTRE_AT}
    if i + 1 in marks and i + 1 < warmup:
        lam_w = window["lam"]
        centre = np.mean(lam_w[len(lam_w) // 2:], axis=0)
        state.gauss = laplace(st, centre, mu0, sigma0)
        state.log_w = state.gauss.log_w(st, state.lam)
        if "log_g" in window:
            g_w = window["log_g"]
            state.walk_chol = walk_chol(np.asarray(g_w[len(g_w) // 2:]))
        window.clear()
    if (i + 1) % ADAPT_EVERY == 0:
        rate = state.accepted / max(state.proposed, 1)
        state.history.append((i + 1, rate, state.rho))
        lo, hi = ACCEPT_BAND
        if rate < lo:
            state.rho = 1.0 - (1.0 - state.rho) * 0.6
        elif rate > hi and state.rho > 0:
            state.rho = max(0.0, 1.0 - (1.0 - state.rho) / 0.6)
        state.accepted = state.proposed = 0


def eta_of(model_family: str, log_g: np.ndarray) -> np.ndarray:
    """The worker parameter from ``log g``: Dirichlet rows ``g/Σg`` (``"dirichlet"``) or
    the Beta accuracy ``g_0/(g_0 + g_1)`` (``"beta"``)."""
    lse = log_g.max(axis=1, keepdims=True)
    e = np.exp(log_g - lse)
    eta = e / e.sum(axis=1, keepdims=True)
    return eta[:, 0] if model_family == "beta" else eta


def run_chain(st: Stages, alpha, mu0: float, sigma0: float, *, warmup: int, draws: int,
              thin: int = 1, seed: int = 0, family: str | None = None,
              lambda_steps: int = 1, walk_steps: int = 0, lam0=None,
              progress=None) -> dict:
    """One chain: ``warmup`` adapted sweeps, then ``draws × thin`` sweeps keeping every
    ``thin``-th. Returns ``lambda`` ``(draws, L)``, ``eta`` (``(draws, W[, K])`` or
    ``None``), the kept steps' acceptance rate, ``rho`` and the seconds per sweep.
    ``progress(n)`` is called with the sweeps done since its last call."""
    import time

    kn.seed(int(seed) % (2 ** 31))
    rng = np.random.default_rng(seed)
    alpha = None if alpha is None else np.ascontiguousarray(alpha, float)
    state = init(st, alpha, mu0, sigma0, rng, lam0=lam0)
    window: dict = {}
    t0 = time.perf_counter()
    for i in range(warmup):
        step(st, alpha, state, rng, lambda_steps, walk_steps)
        adapt(st, state, i, warmup, window, mu0, sigma0)
        if progress is not None:
            progress(1)
    state.accepted = state.proposed = 0
    state.walk_accepted[:] = 0
    t1 = time.perf_counter()
    lam_out = np.empty((draws, st.n_items))
    eta_out = None
    for d in range(draws):
        for _ in range(thin):
            step(st, alpha, state, rng, lambda_steps, walk_steps)
        if progress is not None:
            progress(thin)
        lam_out[d] = state.lam
        if alpha is not None:
            e = eta_of(family or "dirichlet", state.log_g)
            if eta_out is None:
                eta_out = np.empty((draws,) + e.shape)
            eta_out[d] = e
    t2 = time.perf_counter()
    sweeps = warmup + draws * thin
    return {"lambda": lam_out, "eta": eta_out,
            "accept": state.accepted / max(state.proposed, 1), "rho": state.rho,
            "walk_accept": (state.walk_accepted / max(draws * thin * walk_steps, 1)
                            if walk_steps else None),
            "sweep_seconds": (t2 - t0) / max(sweeps, 1), "warmup_seconds": t1 - t0,
            "sampling_seconds": t2 - t1, "adapt_history": state.history}

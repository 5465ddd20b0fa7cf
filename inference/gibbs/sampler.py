"""One chain of the collapsed Gibbs sampler: ``init`` and ``step`` over a small state
(docs/design.md, "The collapsed Gibbs sampler"; the kernels in
:mod:`crowdrank.inference.gibbs.kernels`).

A sweep, each block drawn from a conditional of the augmented joint (kernels' docstring):

1. ``λ | g``, the offsets and slacks summed out: ``lambda_steps`` Hamiltonian Monte Carlo
   transitions of ``log π(λ | η) = ℓ(λ) − ‖λ − μ₀‖²/(2σ₀²)``, ``ℓ`` the data's
   log-likelihood given the rows ``η`` (COUPLE's Eq. 3 mixture), with a dense metric
   from a Laplace fit made in warm-up (:func:`score_step`);
2. ``g | λ``, the offsets and slacks summed out: ``walk_steps`` random-walk Metropolis
   steps per worker (:func:`~crowdrank.inference.gibbs.kernels.walk`);
3. ``z | g, λ`` (the offsets, drawn afresh: steps 1–2 moved with them summed out);
4. ``ξ | g`` (Exponential slacks of COUPLE's normalisers);
5. ``(g, ξ) → (c g, ξ/c)``, the scale move [LS00];
6. ``(z, g) | ξ, λ``: the offsets by the collapsed Pólya urn (``g`` integrated out),
   then ``g`` given them.

Why the order is valid (partially collapsed Gibbs, [vDP08]): steps 1 and 2 target
conditionals of the ``(z, ξ)``-marginal, so they leave the joint of ``(λ, g)`` right and
``(z, ξ)`` stale; step 3 redraws ``z`` from ``p(z | g, λ)`` and step 4 ``ξ`` from
``p(ξ | g)`` (``ξ`` is independent of ``z`` and ``λ`` given ``g``), after which the whole
state is a draw of the joint again. Step 6 draws ``z`` from ``p(z | ξ, λ)`` with ``g``
integrated out, by a sequential scan whose starting ``z`` must itself be a draw of
``p(z | ξ, λ)`` (it is: nothing but ``(g, ξ)`` has moved since step 3, jointly with it),
and then ``g`` from ``p(g | z, ξ, λ)`` — the pair ``(z, g)`` jointly given ``(ξ, λ)``.
Without a worker parameter (PL, BT) only step 1 runs (the rows are ``(1, 0, …)``: the
reported item is the chosen one).

Why the scores move with the offsets summed out: with noisy workers the scores given the
offsets are several times narrower than their posterior (the offsets carry most of the
information), and alternating ``λ | z`` with ``z | λ`` then moves the scores by a small
fraction of their spread per sweep (measured on the default audit data: bulk ESS 8 of
2,000 draws). With the metric ``H_f`` the target is close to a standard normal in
whitened coordinates and a trajectory of a few leapfrog steps crosses it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy.linalg import cho_solve, cholesky, solve_triangular

from . import kernels as kn
from .layout import Stages

#: The warm-up's first part ("approach", this share of it, at most :data:`APPROACH_MAX`
#: sweeps): the scores are set to a draw of the Gaussian fitted at the mode of ``λ | η``
#: (found by Newton from the current scores) without a Metropolis test — an approximate
#: Gibbs step that carries a cold start to the posterior in a few sweeps, before the
#: metric is fitted where the chain is. Discarded with the rest of the warm-up.
APPROACH_SHARE = 0.25
APPROACH_MAX = 60
#: Then ``λ_f`` moves to the mean of the scores over the last half of windows that double
#: from :data:`RECENTRE_MIN` sweeps (:func:`recentre_marks`), the last one ending at least
#: two adaptation windows of ``ρ`` before the warm-up does.
RECENTRE_MIN = 20
#: The walk's first step size (sd of each ``log g_t``), before warm-up has a covariance;
#: the walk's steps after that: ``WALK_SCALE² / K`` times the warm-up draws' covariance
#: ([Haario01]'s 2.38²/d) with each entry's variance at most ``WALK_VAR_MAX`` (an entry
#: in its prior spike swings by ~100 in ``log g``; its steps need not).
WALK_START = 0.3
WALK_SCALE = 2.38
WALK_VAR_MAX = 4.0
#: The scores' HMC: the whitened trajectory's length (a quarter period of a standard
#: normal's Hamiltonian flow is π/2: a trajectory about that long lands far from its
#: start), the first step size, the mean acceptance the warm-up's dual averaging
#: [Hoffman14] aims at, and the window of the acceptance figures it records.
TRAJECTORY = 1.5
EPS_START = 0.5
TARGET_ACCEPT = 0.8
ADAPT_EVERY = 25
#: The entry jump's data half (:func:`~crowdrank.inference.gibbs.kernels.entry_jump`): its
#: first sd (before warm-up has draws), the least warm-up draws outside the spike it is
#: fitted from, the inflation of their sd (heavier than the data mode, so that the
#: proposal covers it) and the range the sd is kept in.
JUMP_SD_START = 2.0
JUMP_MIN_DRAWS = 10
JUMP_SD_INFLATE = 1.5
JUMP_SD_RANGE = (0.05, 3.0)


@dataclass
class Laplace:
    """The scores' Gaussian, fixed after warm-up: the expansion point ``lam_f`` and the
    lower Cholesky factor ``chol`` of ``H_f``, the negative Hessian of ``log π(λ | η_f)``
    there (eigenvalues floored at ``1/σ₀²``: the offsets' missing information can make the
    mixture's curvature indefinite away from the mode)."""

    lam_f: np.ndarray
    chol: np.ndarray


def rows_of(log_g: np.ndarray, n_workers: int, K: int) -> np.ndarray:
    """The workers' offset weights ``(W, K)``: ``η = g / Σ g`` (COUPLE's row; CrowdBT's
    ``(η, 1 − η)``), or ``(1, 0, …)`` without a worker parameter (PL, BT)."""
    if log_g.shape[1] == 0:
        rows = np.zeros((n_workers, K))
        rows[:, 0] = 1.0
        return rows
    e = np.exp(log_g - log_g.max(axis=1, keepdims=True))
    return np.ascontiguousarray(e / e.sum(axis=1, keepdims=True))


def precision_factor(H: np.ndarray, floor: float) -> np.ndarray:
    """The lower Cholesky factor of ``H`` (symmetrised), its eigenvalues floored at
    ``floor`` when it is not positive definite."""
    H = 0.5 * (H + H.T)
    try:
        return cholesky(H, lower=True)
    except np.linalg.LinAlgError:
        ev, vec = np.linalg.eigh(H)
        return cholesky((vec * np.maximum(ev, floor)) @ vec.T, lower=True)


def laplace(st: Stages, lam_f, rows, mu0: float, sigma0: float) -> Laplace:
    """The scores' Gaussian expanded at ``lam_f`` for the rows ``rows``."""
    lam_f = np.asarray(lam_f, float).copy()
    _, _, H = kn.mixture_hessian(st.cand, st.m, st.worker, lam_f, rows, st.n_items)
    chol = precision_factor(H + np.eye(st.n_items) / sigma0 ** 2, 1.0 / sigma0 ** 2)
    return Laplace(lam_f, chol)


def map_scores(st: Stages, rows, mu0: float, sigma0: float, iters: int = 20,
               lam0=None) -> tuple[np.ndarray, np.ndarray]:
    """The mode of ``λ | η`` by Newton's method from ``lam0`` (default ``μ₀``), and the
    lower Cholesky factor of the (floored) negative Hessian there."""
    lam = np.full(st.n_items, float(mu0)) if lam0 is None else np.array(lam0, float)
    eye = np.eye(st.n_items) / sigma0 ** 2
    for _ in range(iters):
        _, g, H = kn.mixture_hessian(st.cand, st.m, st.worker, lam, rows, st.n_items)
        chol = precision_factor(H + eye, 1.0 / sigma0 ** 2)
        step = cho_solve((chol, True), g - (lam - mu0) / sigma0 ** 2)
        lam += np.clip(step, -2.0, 2.0)
        if np.max(np.abs(step)) < 1e-8:
            break
    return lam, chol


def score_step(st: Stages, state: State, rng: np.random.Generator, rows, mu0: float,
               sigma0: float) -> None:
    """One Hamiltonian Monte Carlo transition of ``λ | η`` (offsets summed out) with the
    dense metric ``H_f`` of the scores' Gaussian: in whitened coordinates ``x = C_fᵀ(λ −
    λ_f)`` (``H_f = C_f C_fᵀ``) the target is close to a standard normal, so a few leapfrog
    steps of size ``ε`` (adapted in warm-up towards :data:`TARGET_ACCEPT`) travel a
    trajectory of length about :data:`TRAJECTORY`, jittered. Exact for any fixed ``(λ_f,
    H_f, ε)``: the leapfrog map is volume-preserving and reversible, and the Metropolis
    test corrects its error [Neal11]."""
    g = state.gauss
    C = g.chol

    def lam_of(x):
        return g.lam_f + solve_triangular(C.T, x, lower=False)

    def pot_grad(x, value=True):
        lam = lam_of(x)
        ll, grad = kn.mixture_gradient(st.cand, st.m, st.worker, lam, rows, value)
        d = lam - mu0
        # −log π and its gradient in x (C⁻¹ ∇_λ)
        return (-(ll - 0.5 * float(d @ d) / sigma0 ** 2),
                -solve_triangular(C, grad - d / sigma0 ** 2, lower=True))

    eps = state.eps
    n = max(1, math.ceil(TRAJECTORY * (0.8 + 0.4 * rng.random()) / eps))
    x = C.T @ (state.lam - g.lam_f)
    U, dU = pot_grad(x)
    p = rng.standard_normal(st.n_items)
    h0 = U + 0.5 * float(p @ p)
    p = p - 0.5 * eps * dU
    for i in range(n):
        x = x + eps * p
        U, dU = pot_grad(x, value=i == n - 1)
        p = p - (eps if i < n - 1 else 0.5 * eps) * dU
    h1 = U + 0.5 * float(p @ p)
    acc = math.exp(min(0.0, h0 - h1)) if math.isfinite(h1) else 0.0
    state.proposed += 1
    state.accept_sum += acc
    state.last_accept = acc
    if rng.random() < acc:
        state.lam = lam_of(x)
        state.accepted += 1


@dataclass
class State:
    """A chain's state: ``lam`` ``(L,)``; ``log_g`` ``(W, K)``, ``z`` ``(S,)``, ``xi``
    ``(S,)`` (empty without a worker parameter); the scores' step size ``eps``, its Gaussian
    and its acceptance counts; the walk's step factors and acceptances."""

    lam: np.ndarray
    log_g: np.ndarray
    z: np.ndarray
    xi: np.ndarray
    eps: float
    gauss: Laplace
    accepted: int = 0
    proposed: int = 0
    accept_sum: float = 0.0
    last_accept: float = 0.0
    dual: dict = field(default_factory=dict)
    history: list = field(default_factory=list)
    walk_chol: np.ndarray | None = None
    walk_accepted: np.ndarray | None = None
    jump_mean: np.ndarray | None = None
    jump_sd: np.ndarray | None = None
    jump_accepted: np.ndarray | None = None


def init(st: Stages, alpha, mu0: float, sigma0: float, rng: np.random.Generator,
         *, spread: float = 2.0, lam0=None) -> State:
    """A dispersed start: ``g`` from its prior, ``λ`` from ``N(λ̂, spread² H⁻¹)`` about the
    mode ``λ̂`` of Plackett–Luce on the reported orders (or ``lam0``), the offsets from
    ``z | g, λ``."""
    W, S, K = st.n_workers, st.n_stages, st.K
    one_hot = rows_of(np.zeros((W, 0)), W, K)
    lam_hat, chol = map_scores(st, one_hot, mu0, sigma0)
    if lam0 is not None:
        lam_hat = np.asarray(lam0, float)
    lam = lam_hat + spread * solve_triangular(chol.T, rng.standard_normal(st.n_items),
                                              lower=False)
    z = np.zeros(S, np.int32)
    if alpha is not None:
        log_g = np.array([[kn.log_gamma(float(a)) for a in row] for row in alpha])
        kn.offsets(st.cand, st.m, st.worker, np.exp(lam - lam.max()), log_g, z)
    else:
        log_g = np.zeros((W, 0))
    xi = np.zeros(S if alpha is not None else 0)
    Kg = log_g.shape[1]
    chol_w = np.broadcast_to(WALK_START * np.eye(Kg), (W, Kg, Kg)).copy()
    gauss = Laplace(lam_hat, chol)
    a = np.asarray(alpha, float) if alpha is not None else np.ones((W, 0))
    jump_mean = np.log(a) - np.log(np.maximum(a.sum(axis=1, keepdims=True) - a, 1e-12))
    return State(lam, log_g, z, xi, EPS_START, gauss, walk_chol=chol_w,
                 walk_accepted=np.zeros(W, np.int64), jump_mean=jump_mean,
                 jump_sd=np.full(a.shape, JUMP_SD_START),
                 jump_accepted=np.zeros(a.shape, np.int64))


def approach_scores(st: Stages, state: State, rng: np.random.Generator, rows, mu0: float,
                    sigma0: float) -> None:
    """The warm-up's approach step (:data:`APPROACH_SHARE`): ``λ`` ← a draw of the Gaussian
    at the mode of ``λ | η`` (two Newton steps from the current scores), not tested."""
    mode, chol = map_scores(st, rows, mu0, sigma0, iters=2, lam0=state.lam)
    state.lam = mode + solve_triangular(chol.T, rng.standard_normal(st.n_items), lower=False)


def step(st: Stages, alpha, state: State, rng: np.random.Generator, mu0: float,
         sigma0: float, lambda_steps: int = 1, walk_steps: int = 0, jumps: int = 0,
         approach: bool = False) -> None:
    """One sweep (module docstring), in place; ``approach`` replaces the scores' exact
    step by :func:`approach_scores` (warm-up only)."""
    rows = rows_of(state.log_g, st.n_workers, st.K)
    if approach:
        approach_scores(st, state, rng, rows, mu0, sigma0)
    else:
        for _ in range(lambda_steps):
            score_step(st, state, rng, rows, mu0, sigma0)
    if alpha is None:
        return
    elam = np.exp(state.lam - state.lam.max())
    if walk_steps:
        kn.walk(st.cand, st.m, st.w_start, elam, st.stage_counts, state.log_g, alpha,
                state.walk_chol, walk_steps, state.walk_accepted)
    for _ in range(jumps):
        kn.entry_jump(st.cand, st.m, st.w_start, elam, st.stage_counts, state.log_g, alpha,
                      state.jump_mean, state.jump_sd, state.jump_accepted)
    # the scores (and the walk) moved with the offsets summed out: z is redrawn given
    # (g, λ) before the urn, whose scan starts from a draw of p(z | ξ, λ)
    kn.offsets(st.cand, st.m, st.worker, elam, state.log_g, state.z)
    kn.slacks(st.m, st.worker, state.log_g, state.xi)
    kn.rescale(st.w_start, state.log_g, state.xi, alpha)
    kn.urn(st.cand, st.m, st.w_start, elam, state.xi, alpha, state.z, state.log_g)


def walk_chol(log_g_draws: np.ndarray) -> np.ndarray:
    """The walk's step factors from warm-up draws ``(n, W, K)`` of ``log g``."""
    n, _, K = log_g_draws.shape
    x = log_g_draws - log_g_draws.mean(axis=0)
    cov = np.einsum("nwi,nwj->wij", x, x) / max(n - 1, 1)
    sd = np.sqrt(np.clip(np.einsum("wii->wi", cov), 1e-12, None))
    scale = np.minimum(sd, np.sqrt(WALK_VAR_MAX)) / sd
    cov = cov * scale[:, :, None] * scale[:, None, :] * WALK_SCALE ** 2 / K
    return np.linalg.cholesky(cov + 1e-8 * np.eye(K))


def jump_fit(state: State, log_g_draws: np.ndarray) -> None:
    """The data half of the entry jump from warm-up draws ``(n, W, K)`` of ``log g``: per
    entry, the mean and sd of ``log g_t − log Σ_{v≠t} g_v`` over the draws outside the
    prior spike (``η_t > 10⁻³``); entries with fewer than :data:`JUMP_MIN_DRAWS` such draws
    keep their proposal."""
    n, _, K = log_g_draws.shape
    if n < JUMP_MIN_DRAWS:
        return
    for t in range(K):
        others = np.delete(log_g_draws, t, axis=2)
        mx = others.max(axis=2)
        c = mx + np.log(np.exp(others - mx[..., None]).sum(axis=2))
        d = log_g_draws[:, :, t] - c                      # (n, W): log(η_t / (1 − η_t))
        ok = d > np.log(1e-3)
        for w in np.flatnonzero(ok.sum(axis=0) >= JUMP_MIN_DRAWS):
            x = d[ok[:, w], w]
            state.jump_mean[w, t] = x.mean()
            state.jump_sd[w, t] = np.clip(x.std() * JUMP_SD_INFLATE, *JUMP_SD_RANGE)


def adapt(st: Stages, state: State, i: int, warmup: int, window: dict,
          mu0: float, sigma0: float) -> None:
    """Warm-up only: move ``λ_f`` (and ``H_f``) to the recent scores' mean and the walk's
    steps to the recent ``log g``'s covariance at fixed sweeps (:func:`recentre_marks`),
    and adapt the scores' step size (:func:`dual_average`, restarted at each move)."""
    approach = approach_sweeps(warmup)
    window.setdefault("lam", []).append(state.lam.copy())
    if state.log_g.shape[1]:
        window.setdefault("log_g", []).append(state.log_g.copy())
    moved = i + 1 == approach or i + 1 in recentre_marks(warmup)
    if moved:
        lam_w = window["lam"]
        centre = (state.lam if i + 1 == approach else
                  np.mean(lam_w[len(lam_w) // 2:], axis=0))
        state.gauss = laplace(st, centre, rows_of(state.log_g, st.n_workers, st.K), mu0,
                              sigma0)
        if "log_g" in window:
            g_w = np.asarray(window["log_g"][len(window["log_g"]) // 2:])
            state.walk_chol = walk_chol(g_w)
            jump_fit(state, g_w)
        window.clear()
    dual_average(state, i + 1 - approach, restart=moved)
    if (i + 1) % ADAPT_EVERY == 0:
        state.history.append((i + 1, state.accept_sum / max(state.proposed, 1), state.eps))
        state.accepted = state.proposed = 0
        state.accept_sum = 0.0


def dual_average(state: State, t: int, *, restart: bool = False) -> None:
    """Nesterov's dual averaging of ``log ε`` towards :data:`TARGET_ACCEPT` ([Hoffman14],
    Algorithm 5, their constants), from the last transition's acceptance probability;
    ``restart`` starts it afresh (at the end of the approach, whose steps are not HMC's).
    After warm-up ``ε`` is the averaged iterate, fixed."""
    d = state.dual
    if restart or not d:
        d.update(mu=math.log(10 * state.eps), hbar=0.0, log_eps_bar=math.log(state.eps),
                 t=0)
        return
    if t <= 0 or state.proposed == 0:
        return
    d["t"] += 1
    k = d["t"]
    a = state.last_accept
    d["hbar"] = (1 - 1 / (k + 10)) * d["hbar"] + (TARGET_ACCEPT - a) / (k + 10)
    log_eps = d["mu"] - math.sqrt(k) / 0.05 * d["hbar"]
    w = k ** -0.75
    d["log_eps_bar"] = w * log_eps + (1 - w) * d["log_eps_bar"]
    state.eps = min(math.exp(log_eps), 2.0)


def recentre_marks(warmup: int) -> set:
    """The warm-up sweeps after which ``λ_f`` moves: ``a + 20 (2^k − 1)``, ``k ≥ 1``, ``a``
    the approach's sweeps, up to two ``ρ`` windows before the end."""
    a, out, k = approach_sweeps(warmup), set(), 1
    while a + RECENTRE_MIN * (2 ** k - 1) <= warmup - 2 * ADAPT_EVERY:
        out.add(a + RECENTRE_MIN * (2 ** k - 1))
        k += 1
    return out


def approach_sweeps(warmup: int) -> int:
    """The warm-up's approach sweeps (:data:`APPROACH_SHARE`)."""
    return min(int(APPROACH_SHARE * warmup), APPROACH_MAX)


def eta_of(model_family: str, log_g: np.ndarray) -> np.ndarray:
    """The worker parameter from ``log g``: Dirichlet rows ``g/Σg`` (``"dirichlet"``) or
    the Beta accuracy ``g_0/(g_0 + g_1)`` (``"beta"``)."""
    lse = log_g.max(axis=1, keepdims=True)
    e = np.exp(log_g - lse)
    eta = e / e.sum(axis=1, keepdims=True)
    return eta[:, 0] if model_family == "beta" else eta


def run_chain(st: Stages, alpha, mu0: float, sigma0: float, *, warmup: int, draws: int,
              thin: int = 1, seed: int = 0, family: str | None = None,
              lambda_steps: int = 1, walk_steps: int = 0, jumps: int = 0, lam0=None,
              progress=None) -> dict:
    """One chain: ``warmup`` adapted sweeps, then ``draws × thin`` sweeps keeping every
    ``thin``-th. Returns ``lambda`` ``(draws, L)``, ``eta`` (``(draws, W[, K])`` or
    ``None``), the kept steps' acceptance rate, the step size and the seconds per sweep.
    ``progress(n)`` is called with the sweeps done since its last call."""
    import time

    kn.seed(int(seed) % (2 ** 31))
    rng = np.random.default_rng(seed)
    alpha = None if alpha is None else np.ascontiguousarray(alpha, float)
    state = init(st, alpha, mu0, sigma0, rng, lam0=lam0)
    window: dict = {}
    t0 = time.perf_counter()
    n_approach = approach_sweeps(warmup)
    for i in range(warmup):
        step(st, alpha, state, rng, mu0, sigma0, lambda_steps, walk_steps, jumps,
             approach=i < n_approach)
        adapt(st, state, i, warmup, window, mu0, sigma0)
        if progress is not None:
            progress(1)
    if state.dual:
        state.eps = math.exp(state.dual["log_eps_bar"])
    state.accepted = state.proposed = 0
    state.accept_sum = 0.0
    state.walk_accepted[:] = 0
    state.jump_accepted[:] = 0
    t1 = time.perf_counter()
    lam_out = np.empty((draws, st.n_items))
    eta_out = None
    for d in range(draws):
        for _ in range(thin):
            step(st, alpha, state, rng, mu0, sigma0, lambda_steps, walk_steps, jumps)
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
            "accept": state.accepted / max(state.proposed, 1), "eps": state.eps,
            "walk_accept": (state.walk_accepted / max(draws * thin * walk_steps, 1)
                            if walk_steps else None),
            "jump_accept": (state.jump_accepted / max(draws * thin * jumps, 1)
                            if jumps and alpha is not None else None),
            "sweep_seconds": (t2 - t0) / max(sweeps, 1), "warmup_seconds": t1 - t0,
            "sampling_seconds": t2 - t1, "adapt_history": state.history}

"""PeerGrader by batch MAP, the way its authors fit it [Raman14].

The model (:mod:`crowdrank.models.registry`, ``"peergrader"``): a grader ``g`` reports the ranking
``ρ`` of a task with probability ``PL(ρ | η_g·λ)`` ([Raman14]; [Pan18], Sect. 5.1 calls it
PeerGrader, the fifth baseline), ``λ_r ~ Normal(mu0, sigma0²)`` and the reliability
``η_g ~ Gamma(shape, rate)`` (:meth:`crowdrank.models.priors.Priors.gamma_params`). A grader with
``η_g → 0`` orders at random; a large ``η_g`` follows ``λ`` almost surely.

[Raman14] fit this by gradient methods on the whole data set, several passes until
convergence ([Pan18], Table 2 text: "it relies on SGD ... needs to process the whole
dataset several times"). Here: the MAP of ``(λ, η)`` by L-BFGS (SciPy) on the exact log
posterior and its analytic gradient, optimising ``u = log η`` so that ``η > 0`` without
bounds (the objective is the density of ``η``, not of ``u``: the MAP of the model as
written, no Jacobian term). Each function/gradient evaluation is one pass over the data
(:attr:`PeerGraderFit.passes`). NUTS on the same model is ``crowdrank fit --model
peergrader --method nuts`` (both PPLs).

blackjax-style pieces: :func:`init` (the state at the prior mean), :func:`update` (one
optimiser run from a state), :func:`export` (scores and reliabilities by id).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from crowdrank.models.data import Rankings
from crowdrank.models.errors import UsageError
from crowdrank.models.model_inputs import ModelInputs, model_inputs
from crowdrank.models.priors import Priors


@dataclass
class PeerGraderFit:
    """A MAP fit: ``lam`` ``(L,)`` and ``eta`` ``(W,)`` in the data's item/worker order."""

    items: tuple[str, ...]
    workers: tuple[str, ...]
    lam: np.ndarray
    eta: np.ndarray
    log_posterior: float = float("nan")
    passes: int = 0
    iterations: int = 0
    converged: bool = False
    seconds: float = 0.0
    fix_eta: bool = False
    message: str = ""
    options: dict = field(default_factory=dict)


# ------------------------------------------------------------------ the objective
def block_loglik_grad(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """PL log-likelihood of each column of a dense block ``x`` ``(k, n)`` (scores in
    reported order) and its gradient ``∂/∂x`` ``(k, n)`` ([Pan18], Eq. 1).

    ``ll = Σ_{i<k−1} x_i − LSE_i`` with ``LSE_i = log Σ_{j≥i} e^{x_j}``; so
    ``∂ll/∂x_j = 1[j<k−1] − Σ_{i≤min(j,k−2)} e^{x_j − LSE_i}`` (each ``e^{x_j−LSE_i} ≤ 1``:
    nothing overflows).
    """
    k = x.shape[0]
    lse = np.empty((k - 1, x.shape[1]))
    acc = x[k - 1]
    for i in range(k - 2, -1, -1):
        acc = np.logaddexp(x[i], acc)
        lse[i] = acc
    ll = (x[: k - 1] - lse).sum(axis=0)
    g = np.zeros_like(x)
    g[: k - 1] = 1.0
    for j in range(k):
        for i in range(min(j, k - 2) + 1):
            g[j] -= np.exp(x[j] - lse[i])
    return ll, g


def log_posterior(inputs: ModelInputs, lam: np.ndarray, eta: np.ndarray, *,
                  grad: bool = True):
    """``log p(λ, η | data)`` up to a constant, and its gradient ``(dλ, dη)``.

    Prior terms: ``−(λ−mu0)²/(2 sigma0²)`` and ``(shape−1) log η − rate·η``.
    """
    L, W = inputs.n_items, inputs.n_workers
    shape, rate = inputs.alpha[:, 0], inputs.alpha[:, 1]
    val = float(-0.5 * np.sum((lam - inputs.mu0) ** 2) / inputs.sigma0 ** 2
                + np.sum((shape - 1.0) * np.log(eta) - rate * eta))
    dlam = -(lam - inputs.mu0) / inputs.sigma0 ** 2
    deta = (shape - 1.0) / eta - rate
    for k, a, b in inputs.blocks:
        if k < 2:
            continue
        idx = inputs.index[:k, a:b]
        w = inputs.worker[a:b]
        base = lam[idx]
        x = eta[w] * base
        ll, g = block_loglik_grad(x)
        val += float(ll.sum())
        if grad:
            dlam += np.bincount(idx.ravel(), weights=(g * eta[w]).ravel(), minlength=L)
            deta += np.bincount(w, weights=(g * base).sum(axis=0), minlength=W)
    return (val, dlam, deta) if grad else val


# ------------------------------------------------------------------ init / update / export
def init(data: Rankings, priors: Priors) -> tuple[ModelInputs, np.ndarray, np.ndarray]:
    """Inputs and the starting state: ``λ = mu0`` and every ``η_g`` at its prior mean."""
    inputs = model_inputs("peergrader", data, priors)
    lam = np.full(inputs.n_items, inputs.mu0, float)
    eta = inputs.alpha[:, 0] / inputs.alpha[:, 1]
    return inputs, lam, eta


def update(inputs: ModelInputs, lam: np.ndarray, eta: np.ndarray, *, fix_eta: bool = False,
           max_passes: int = 500, tol: float = 1e-12):
    """One L-BFGS run from ``(λ, η)``; returns ``(λ, η, log posterior, result)``.

    ``fix_eta`` keeps every ``η_g`` at its start (PL MAP on scaled scores: with ``η = 1``
    this is plain Plackett–Luce MAP under the Normal prior, which is how it is tested
    against ``choix``).
    """
    from scipy.optimize import minimize

    L = inputs.n_items

    def split(z):
        return z[:L], (eta if fix_eta else np.exp(z[L:]))

    def f(z):
        lam_, eta_ = split(z)
        v, dl, de = log_posterior(inputs, lam_, eta_)
        g = dl if fix_eta else np.concatenate([dl, de * eta_])   # chain rule: dη/du = η
        return -v, -g

    z0 = lam.copy() if fix_eta else np.concatenate([lam, np.log(eta)])
    res = minimize(f, z0, jac=True, method="L-BFGS-B",
                   options={"maxfun": int(max_passes), "maxiter": int(max_passes),
                            "ftol": tol, "gtol": 1e-6})
    lam_, eta_ = split(res.x)
    return lam_, np.asarray(eta_, float).copy(), -float(res.fun), res


def export(fit: PeerGraderFit) -> dict:
    """Scores and reliabilities by id (JSON-able)."""
    return {"model": "peergrader", "method": "map",
            "items": {it: float(v) for it, v in zip(fit.items, fit.lam)},
            "workers": {w: float(v) for w, v in zip(fit.workers, fit.eta)},
            "log_posterior": fit.log_posterior, "passes": fit.passes,
            "iterations": fit.iterations, "converged": fit.converged,
            "seconds": fit.seconds, "message": fit.message}


def fit_peergrader(data: Rankings, priors: Priors, *, fix_eta: bool = False,
                   max_passes: int = 500, tol: float = 1e-12) -> PeerGraderFit:
    """The MAP of PeerGrader on ``data`` under ``priors`` (module docstring).

    ``max_passes`` bounds the number of passes over the data (objective+gradient
    evaluations); :attr:`PeerGraderFit.converged` says whether L-BFGS met its tolerance.
    """
    if max_passes < 1:
        raise UsageError("max_passes must be >= 1")
    t0 = time.perf_counter()
    inputs, lam, eta = init(data, priors)
    lam, eta, lp, res = update(inputs, lam, eta, fix_eta=fix_eta, max_passes=max_passes,
                               tol=tol)
    if not (np.all(np.isfinite(lam)) and np.all(np.isfinite(eta))):
        raise FloatingPointError("PeerGrader MAP produced a non-finite estimate")
    return PeerGraderFit(items=tuple(data.items), workers=tuple(data.workers), lam=lam,
                         eta=eta, log_posterior=lp, passes=int(res.nfev),
                         iterations=int(res.nit), converged=bool(res.success),
                         seconds=time.perf_counter() - t0, fix_eta=fix_eta,
                         message=str(res.message),
                         options={"max_passes": max_passes, "tol": tol})


def one_pass_seconds(data: Rankings, priors: Priors, repeats: int = 3) -> float:
    """Wall time of one objective+gradient pass over ``data`` (best of ``repeats``): the
    unit of [Pan18]'s Fig. 8 timing of PeerGrader ("we set the iteration number to one")."""
    inputs, lam, eta = init(data, priors)
    best = float("inf")
    for _ in range(max(1, repeats)):
        t = time.perf_counter()
        log_posterior(inputs, lam, eta)
        best = min(best, time.perf_counter() - t)
    return best

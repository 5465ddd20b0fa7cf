"""CrowdBT by EM: the MAP of item scores and worker accuracies, with a Beta prior (BBQ).

CrowdBT [Chen13] says worker ``k`` reports ``i ≻ j`` with probability
``p = η_k σ(λ_i − λ_j) + (1 − η_k) σ(λ_j − λ_i)``: with probability ``η_k`` the worker
reports the Bradley–Terry comparison, otherwise its reverse. Marking *which* happened by
a latent indicator gives the EM algorithm (the article in ``seeds/002_*``, "EM" section;
the Bayesian version with ``η_k ~ Beta(a_k, b_k)`` is the one it calls BBQ). For every
rank-broken pair ``s`` reported by worker ``k`` with ``d_s = λ_winner − λ_loser``:

- **E-step**: ``r_s = η_k σ(d_s) / p_s``, the posterior probability that the report is
  the BT comparison;
- **M-step, workers**: ``η_k = (Σ_{s∈k} r_s + a_k − 1) / (n_k + a_k + b_k − 2)``, the mode of
  ``Beta(a_k + Σ r_s, b_k + Σ (1 − r_s))``;
- **M-step, items**: a Bradley–Terry MAP with *soft* outcomes, weight ``r_s`` on
  ``winner ≻ loser`` and ``1 − r_s`` on the reverse, under the ``N(μ0, σ0²)`` prior — one
  damped Newton step of :mod:`.solvers` on the doubled stages (a generalised EM step).

Each iteration increases the observed-data log posterior
``F = Σ_s log p_s + log N(λ) + Σ_k log Beta(η_k)``; the run stops when the largest entry
of its gradient in ``λ`` and ``logit η`` (:func:`projected_norm`) is ``≤ tol``, projected on
the box ``0 ≤ η ≤ 1``: a worker whose every report agrees with the scores has its MAP
accuracy at the bound ``η = 1`` (with ``b_k = 1``), where ``∂F/∂η > 0`` is the optimality
condition. The MAP needs
``a_k, b_k ≥ 1`` (a Beta density with a parameter below 1 is unbounded at 0 or 1, and so is
``F``). The uncertainty reported is Laplace's for ``λ`` with ``η`` held at its estimate,
and ``Beta(a_k + Σ r_s, b_k + Σ(1 − r_s))`` for each worker.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from scipy.linalg import cho_factor, cho_solve
from scipy.special import expit, log_expit

from crowdrank.models.data import DataError, Rankings

from . import luce
from .solvers import Problem, init, newton_step


@dataclass(frozen=True, eq=False)
class Pairs:
    """Rank-broken pairs: winner, loser, worker index; and the doubled stages of the
    soft-outcome M-step (first all ``winner ≻ loser``, then all reverses)."""

    win: np.ndarray
    lose: np.ndarray
    worker: np.ndarray
    n_items: int
    n_workers: int
    doubled: luce.Stages


def pairs_of(data: Rankings) -> Pairs:
    pr = data.rank_break()
    if pr.n_rankings == 0:
        raise DataError("no pairs to fit", data.source)
    win, lose = pr.order[0].astype(np.int64), pr.order[1].astype(np.int64)
    S = len(win)
    cand = np.concatenate([np.stack([win, lose], 1), np.stack([lose, win], 1)])
    st = luce.Stages(data.n_items, cand, np.ones_like(cand, bool), np.arange(2 * S),
                     2 * S, "bt")
    return Pairs(win, lose, pr.worker.astype(np.int64), data.n_items, data.n_workers, st)


def _d(P: Pairs, lam) -> np.ndarray:
    return lam[P.win] - lam[P.lose]


def log_p(P: Pairs, lam, eta) -> np.ndarray:
    """``log p_s`` of every pair (stable: a log-sum-exp of the two branches)."""
    d, e = _d(P, lam), eta[P.worker]
    return np.logaddexp(np.log(e) + log_expit(d), np.log1p(-e) + log_expit(-d))


def log_posterior(P: Pairs, lam, eta, ab, mu0: float, sigma0: float) -> float:
    """``F(λ, η)`` up to a constant."""
    a, b = ab[:, 0], ab[:, 1]
    return float(np.sum(log_p(P, lam, eta)) - np.sum((lam - mu0) ** 2) / (2 * sigma0**2)
                 + np.sum((a - 1) * np.log(eta) + (b - 1) * np.log1p(-eta)))


def gradient(P: Pairs, lam, eta, ab, mu0: float, sigma0: float):
    """``(∂F/∂λ, ∂F/∂η)``: ``∂ log p/∂d = (2η − 1) σ(d) σ(−d) / p`` and
    ``∂ log p/∂η = (σ(d) − σ(−d)) / p``."""
    d, e = _d(P, lam), eta[P.worker]
    s = expit(d)
    p = np.exp(log_p(P, lam, eta))
    gd = (2 * e - 1) * s * (1 - s) / p
    gl = (np.bincount(P.win, gd, P.n_items) - np.bincount(P.lose, gd, P.n_items)
          - (lam - mu0) / sigma0**2)
    ge = (np.bincount(P.worker, (2 * s - 1) / p, P.n_workers)
          + (ab[:, 0] - 1) / eta - (ab[:, 1] - 1) / (1 - eta))
    return gl, ge


def neg_hessian_lambda(P: Pairs, lam, eta, sigma0: float) -> np.ndarray:
    """``−∂²F/∂λ²`` with ``η`` fixed: ``g''(d) = (2η−1)[q(1−2σ)p − (2η−1)q²]/p²`` per pair
    (``q = σ(d)σ(−d)``), scattered on ``(e_w − e_l)(e_w − e_l)ᵀ``, plus ``I/σ0²``."""
    d, e = _d(P, lam), eta[P.worker]
    s = expit(d)
    q = s * (1 - s)
    p = np.exp(log_p(P, lam, eta))
    c = 2 * e - 1
    h = -c * (q * (1 - 2 * s) * p - c * q**2) / p**2     # −g''(d)
    L = P.n_items
    idx = np.concatenate([P.win * L + P.win, P.lose * L + P.lose,
                          P.win * L + P.lose, P.lose * L + P.win])
    A = np.bincount(idx, np.concatenate([h, h, -h, -h]), L * L).reshape(L, L)
    A[np.diag_indices(L)] += 1 / sigma0**2
    return A


@dataclass(eq=False)
class EMFit:
    """The EM MAP of CrowdBT. ``mu``/``sigma2``: item estimate and Laplace variance (``η``
    fixed); ``eta``: worker accuracy (mode); ``alpha``: ``(W, 2)`` Beta ``(a + Σr, b + Σ(1−r))``
    per worker — the attributes the audit reads from an approximation."""

    model: str
    items: list
    workers: list
    mu: np.ndarray
    sigma2: np.ndarray
    eta: np.ndarray
    alpha: np.ndarray
    iterations: int
    grad_norm: float
    converged: bool
    objective: float
    seconds: float
    tol: float
    prior: dict
    algorithm: str = "crowdbt-em"

    def items_table(self):
        import pandas as pd
        df = pd.DataFrame({"item": self.items, "mu": self.mu, "sigma2": self.sigma2,
                           "sd": np.sqrt(self.sigma2)})
        df = df.sort_values("mu", ascending=False, kind="stable").reset_index(drop=True)
        df.insert(0, "rank", np.arange(1, len(df) + 1))
        return df

    def workers_table(self):
        import pandas as pd
        return pd.DataFrame({"worker": self.workers, "eta": self.eta,
                             "a": self.alpha[:, 0], "b": self.alpha[:, 1]})

    def fit_dict(self) -> dict:
        return {"model": self.model, "method": "map", "solver": "em",
                "algorithm": self.algorithm, "iterations": int(self.iterations),
                "grad_norm": float(self.grad_norm), "converged": bool(self.converged),
                "tol": float(self.tol), "objective": float(self.objective),
                "seconds": float(self.seconds), "prior": self.prior,
                "n_items": len(self.items), "n_workers": len(self.workers)}

    def to_json(self, path) -> None:
        import json
        from pathlib import Path

        d = self.fit_dict()
        d["items"] = {it: {"mu": float(self.mu[i]), "sigma2": float(self.sigma2[i])}
                      for i, it in enumerate(self.items)}
        d["workers"] = {w: {"eta": float(self.eta[k]), "alpha": self.alpha[k].tolist()}
                        for k, w in enumerate(self.workers)}
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(d, indent=1))


def projected_norm(P: Pairs, lam, eta, ab, mu0: float, sigma0: float,
                   edge: float = 1e-9) -> float:
    """Largest entry of the gradient in ``(λ, logit η)`` — ``∂F/∂η · η(1 − η)`` for the
    workers, so that an accuracy creeping towards 1 is judged on the scale it moves on —
    projected on ``0 ≤ η ≤ 1`` (zero for an ``η`` at a bound whose gradient points out)."""
    gl, ge = gradient(P, lam, eta, ab, mu0, sigma0)
    ge = np.where(((eta >= 1 - edge) & (ge > 0)) | ((eta <= edge) & (ge < 0)), 0.0, ge)
    return float(max(np.abs(gl).max(), np.abs(ge * eta * (1 - eta)).max()))


def em_init(P: Pairs, ab, mu0: float):
    """``λ = μ0`` and every ``η_k`` at its prior mode."""
    lam = np.full(P.n_items, float(mu0))
    eta = (ab[:, 0] - 1) / (ab.sum(1) - 2)
    return lam, np.clip(np.where(np.isfinite(eta), eta, 0.5), 0.5, 1 - 1e-6)


def em_step(P: Pairs, lam, eta, ab, prior: luce.Prior):
    """One EM iteration (the module docstring)."""
    d, e = _d(P, lam), eta[P.worker]
    r = np.exp(np.log(e) + log_expit(d) - log_p(P, lam, eta))
    n = np.bincount(P.worker, minlength=P.n_workers).astype(float)
    R = np.bincount(P.worker, r, P.n_workers)
    eta = (R + ab[:, 0] - 1) / (n + ab[:, 0] + ab[:, 1] - 2)
    eta = np.clip(eta, 1e-12, 1 - 1e-12)       # a worker at exactly 0 or 1 stays finite
    # one damped Newton step on the M-step objective (a generalised EM step: it increases
    # the M-step objective, hence F, at a third of the cost of solving it exactly)
    problem = Problem(P.doubled, prior, np.concatenate([r, 1 - r]))
    state = newton_step(problem, init(problem, lam))
    return state.lam, eta, r


def squarem_step(P: Pairs, lam, eta, ab, prior: luce.Prior):
    """One SQUAREM cycle (:func:`crowdrank.inference.batch.squarem.squarem_cycle`) of :func:`em_step`
    in ``x = (λ, η)``, ``η`` projected into ``(0, 1)``. Returns ``(λ, η, EM steps used)``."""
    from .squarem import squarem_cycle

    L = len(lam)

    def em_map(x):
        new_lam, new_eta, _ = em_step(P, x[:L], x[L:], ab, prior)
        return np.concatenate([new_lam, new_eta])

    def project(x):
        return np.concatenate([x[:L], np.clip(x[L:], 1e-12, 1 - 1e-12)])

    x, k = squarem_cycle(em_map, lambda x: log_posterior(P, x[:L], x[L:], ab, prior.mu0,
                                                         prior.sigma0),
                         np.concatenate([lam, eta]), project=project)
    return x[:L], x[L:], k


def fit_crowdbt_em(data: Rankings, priors, *, tol: float = 1e-6, max_iter: int = 5000,
                   accelerate: bool = True) -> EMFit:
    """The MAP of CrowdBT by EM under ``priors`` (``mu0, sigma0`` and ``priors.beta()``
    ordered like ``data.workers``). ``accelerate``: SQUAREM cycles (:func:`squarem_step`;
    same fixed point, monotone) instead of plain EM steps; ``max_iter`` counts EM steps
    either way."""
    from threadpoolctl import threadpool_limits

    t0 = time.perf_counter()
    pri = priors.for_data(data, K=2) if hasattr(priors, "for_data") else priors
    ab = np.asarray(pri.beta(), float)
    if np.any(ab < 1):
        bad = [data.workers[k] for k in np.flatnonzero(np.any(ab < 1, axis=1))[:5]]
        raise DataError(f"the CrowdBT MAP needs Beta(a, b) priors with a, b >= 1 (below 1 "
                        f"the density, and the posterior, is unbounded at 0 or 1); workers "
                        f"{bad} have {ab[np.any(ab < 1, axis=1)][0].tolist()}: give priors with "
                        "a, b >= 1, e.g. by --worker-prior-file (CSV worker,a,b)", data.source)
    mu0, s0 = float(pri.mu0), float(pri.sigma0)
    prior = luce.Prior(mu0, s0)
    P = pairs_of(data)
    lam, eta = em_init(P, ab, mu0)
    it, gnorm = 0, np.inf
    with threadpool_limits(1, user_api="blas"):
        while it < max_iter:
            gnorm = projected_norm(P, lam, eta, ab, mu0, s0)
            if gnorm <= tol:
                break
            if accelerate:
                lam, eta, k = squarem_step(P, lam, eta, ab, prior)
            else:
                (lam, eta, _), k = em_step(P, lam, eta, ab, prior), 1
            it += k
        gnorm = projected_norm(P, lam, eta, ab, mu0, s0)
        A = neg_hessian_lambda(P, lam, eta, s0)
        try:
            cov = cho_solve(cho_factor(A), np.eye(P.n_items))
        except np.linalg.LinAlgError:
            raise DataError("Laplace's covariance of the CrowdBT MAP does not exist (the "
                            "Hessian in λ is not negative definite there)",
                            data.source) from None
    d, e = _d(P, lam), eta[P.worker]
    r = np.exp(np.log(e) + log_expit(d) - log_p(P, lam, eta))
    R = np.bincount(P.worker, r, P.n_workers)
    n = np.bincount(P.worker, minlength=P.n_workers).astype(float)
    alpha = np.stack([ab[:, 0] + R, ab[:, 1] + n - R], 1)
    return EMFit("crowdbt", list(data.items), list(data.workers), lam, np.diag(cov).copy(),
                 eta, alpha, it, gnorm, gnorm <= tol,
                 log_posterior(P, lam, eta, ab, mu0, s0), time.perf_counter() - t0, tol,
                 {"mu0": mu0, "sigma0": s0, "worker_beta": "priors.beta()"})

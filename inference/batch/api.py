"""Batch point estimates of BT and PL with their intervals: the public entry points.

:func:`fit_batch` maximises the posterior (``method="map"``, the ``N(μ0, σ0²)`` prior of
:class:`crowdrank.models.priors.Priors` as a ridge) or the likelihood (``method="ml"``, ``Σ λ = 0``)
with one of the solvers of :mod:`.solvers`, and attaches Laplace's covariance
(:mod:`.laplace`). The result, :class:`BatchFit`, has the attributes the validation layer
reads from an online posterior (``model, items, mu, sigma2, workers, alpha``), so an audit
compares it with NUTS exactly as it compares the online updates.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from crowdrank.models.data import DataError, Rankings

from . import laplace, luce
from .solvers import SOLVERS, Problem, solve

METHODS = ("map", "ml")


@dataclass(eq=False)
class BatchFit:
    """A batch estimate of the item scores with a Gaussian approximation around it.

    ``mu`` is the estimate (MAP or ML), ``sigma2`` the diagonal of ``cov`` (Laplace, or the
    bootstrap's variance when :mod:`.bootstrap` fills it in); ``intervals`` holds optional
    extra columns for ``items.csv`` (bootstrap percentile intervals for scores and ranks).
    """

    model: str
    method: str
    solver: str
    items: list
    mu: np.ndarray
    sigma2: np.ndarray
    cov: np.ndarray | None
    iterations: int
    grad_norm: float
    converged: bool
    objective: float
    seconds: float
    tol: float
    prior: dict | None
    n_stages: int
    reason: str = ""
    algorithm: str = "laplace"
    workers: list = field(default_factory=list)
    alpha: None = None
    intervals: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict)
    draws: np.ndarray | None = None     # bootstrap refits (B, L), when bootstrapped

    def items_table(self):
        """Items sorted by ``mu`` (best first): ``rank, item, mu, sigma2, sd`` like the other
        methods, then any interval columns."""
        import pandas as pd
        df = pd.DataFrame({"item": self.items, "mu": self.mu, "sigma2": self.sigma2,
                           "sd": np.sqrt(self.sigma2), **self.intervals})
        df = df.sort_values("mu", ascending=False, kind="stable").reset_index(drop=True)
        df.insert(0, "rank", np.arange(1, len(df) + 1))
        return df

    def to_json(self, path) -> None:
        """``fit_dict()`` plus every item's ``mu``/``sigma2`` (and bootstrap intervals)."""
        import json
        from pathlib import Path

        d = self.fit_dict()
        d["items"] = {it: {"mu": float(self.mu[i]), "sigma2": float(self.sigma2[i]),
                           **{k: float(v[i]) for k, v in self.intervals.items()}}
                      for i, it in enumerate(self.items)}
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(d, indent=1))

    def fit_dict(self) -> dict:
        """What ``fit.json`` records: solver, iterations, final gradient norm, convergence."""
        return {"model": self.model, "method": self.method, "solver": self.solver,
                "algorithm": self.algorithm, "iterations": int(self.iterations),
                "grad_norm": float(self.grad_norm), "converged": bool(self.converged),
                "stop_reason": self.reason, "tol": float(self.tol),
                "objective": float(self.objective), "seconds": float(self.seconds),
                "prior": self.prior, "n_items": len(self.items),
                "n_stages": int(self.n_stages), **self.extra}


def problem_for(data: Rankings, model: str, method: str = "map", mu0: float = 0.0,
                sigma0: float = 1.0) -> Problem:
    """The optimisation problem of ``model`` on ``data``; for ML, checks that the
    estimate exists (:func:`.luce.check_ml_exists`)."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; expected one of {METHODS}")
    st = luce.stages(data, model)
    if method == "ml":
        luce.check_ml_exists(st, data.items, data.source)
        return Problem(st, None)
    return Problem(st, luce.Prior(float(mu0), float(sigma0)))


def fit_batch(data: Rankings, model: str, priors=None, *, method: str = "map",
              solver: str = "newton", tol: float = 1e-9, max_iter: int | None = None,
              lam0=None, laplace_cov: bool = True) -> BatchFit:
    """MAP or ML scores of ``model`` (``"bt"`` or ``"pl"``) on ``data`` by ``solver``.

    ``priors`` is a :class:`crowdrank.models.priors.Priors` (only ``mu0, sigma0`` are read; ``None``
    means ``N(0, 1)``). Returns a :class:`BatchFit` with Laplace's covariance unless
    ``laplace_cov=False``. A run that stops before ``tol`` is reported (``converged`` is
    False in the result and in ``fit.json``), not raised.
    """
    if solver not in SOLVERS:
        raise ValueError(f"unknown solver {solver!r}; expected one of {SOLVERS}")
    mu0 = 0.0 if priors is None else float(priors.mu0)
    sigma0 = 1.0 if priors is None else float(priors.sigma0)
    from threadpoolctl import threadpool_limits

    t0 = time.perf_counter()
    problem = problem_for(data, model, method, mu0, sigma0)
    # one BLAS thread: the dense factorisations are a few hundred items wide, where extra
    # threads cost more in synchronisation than they gain (measured 40x slower on a busy
    # 2-core machine)
    with threadpool_limits(1, user_api="blas"):
        res = solve(problem, solver, lam0=lam0, tol=tol, max_iter=max_iter)
        if not np.all(np.isfinite(res.lam)):
            raise DataError(f"the {solver} solver produced non-finite scores", data.source)
        cov = laplace.covariance(problem, res.lam) if laplace_cov else None
    sigma2 = np.diag(cov).copy() if cov is not None else np.full(len(res.lam), np.nan)
    return BatchFit(model=model, method=method, solver=solver, items=list(data.items),
                    mu=res.lam, sigma2=sigma2, cov=cov, iterations=res.iterations,
                    grad_norm=res.grad_norm, converged=res.converged,
                    objective=res.objective, seconds=time.perf_counter() - t0, tol=tol,
                    prior=None if method == "ml" else {"mu0": mu0, "sigma0": sigma0},
                    n_stages=problem.stages.n_stages, reason=res.reason)


INTERVALS = ("laplace", "bootstrap")


def fit_with_intervals(data: Rankings, model: str, priors=None, *, intervals: str = "laplace",
                       method: str = "map", solver: str = "newton", resamples: int = 1000,
                       seed: int = 0, processes: int = 1, prob: float = 0.95,
                       progress: bool = False, tol: float = 1e-9,
                       max_iter: int | None = None) -> BatchFit:
    """:func:`fit_batch` with its ``sigma2`` from Laplace or from the bootstrap
    (:mod:`.bootstrap`: ``sigma2`` the refits' variance, ``draws`` the refits, and the
    percentile intervals ``score_lo/hi``, ``rank_lo/hi`` in ``intervals``)."""
    from .bootstrap import bootstrap

    if intervals not in INTERVALS:
        raise ValueError(f"unknown intervals {intervals!r}; expected one of {INTERVALS}")
    fit = fit_batch(data, model, priors, method=method, solver=solver, tol=tol,
                    max_iter=max_iter)
    if intervals == "laplace":
        return fit
    mu0 = 0.0 if priors is None else float(priors.mu0)
    sigma0 = 1.0 if priors is None else float(priors.sigma0)
    problem = problem_for(data, model, method, mu0, sigma0)
    boot = bootstrap(problem, fit.mu, resamples, seed=seed, processes=processes,
                     progress=progress, source=data.source, items=data.items)
    fit.sigma2 = boot.draws.var(axis=0, ddof=1)
    fit.draws = boot.draws
    fit.algorithm = "bootstrap"
    lo, hi = boot.score_interval(prob)
    rlo, rhi = boot.rank_interval(prob)
    fit.intervals = {"score_lo": lo, "score_hi": hi, "rank_lo": rlo, "rank_hi": rhi}
    fit.extra["bootstrap"] = {"resamples": int(resamples), "seed": int(seed),
                              "processes": boot.processes, "seconds": boot.seconds,
                              "interval_prob": prob,
                              "refits_not_converged": boot.not_converged,
                              "unit": "input ranking"}
    fit.seconds += boot.seconds
    return fit

"""Laplace's approximation computed in the PPL: a Gaussian at the posterior mode of the
NumPyro program with the inverse of the full Hessian as covariance ([Tierney86];
``docs/design.md``, Batch methods).

The mode is found by L-BFGS (SciPy, on the JAX gradient of the potential) on the sampler's
unconstrained coordinates (:mod:`crowdrank.inference.approx.target`) and the Hessian is
``jax.hessian`` of the potential there (the autodiff form of the density: COUPLE's
hand-written gradient is reverse-mode only). The Gaussian lives on those coordinates, so for
BT and PL with ``level="iid"`` (or ``"centered"``, a linear map of ``λ``) it is the batch
MAP + Laplace of :func:`crowdrank.inference.batch.api.fit_with_intervals` written in the PPL;
for the worker models it is a Gaussian on ``log`` Gammas, not on ``η`` itself, and its
mode includes the Jacobian of that map.

**Stopping rule**: L-BFGS's own (gradient norm below ``gtol`` or relative decrease below
``ftol``, at most ``max_steps`` iterations); converged means SciPy reported success and the
Hessian is positive definite.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from crowdrank.models.data import Rankings
from crowdrank.models.priors import Priors

from .result import ApproxFit
from .target import build_target, x64


@dataclass
class LaplaceOptions:
    """Options of ``crowdrank fit --method laplace``."""

    max_steps: int = 2000       #: the most L-BFGS iterations
    gtol: float = 1e-8          #: L-BFGS gradient tolerance
    draws: int = 1000           #: draws of the Gaussian
    simplex: str = "gamma"      #: worker simplex coordinates (docs/design.md §5.1)
    level: str = "centered"     #: item-score coordinates (docs/design.md §5.2)
    seed: int = 0
    backend: str = "numpyro"    #: NumPyro only


def find_mode(target, max_steps: int = 2000, gtol: float = 1e-8, z0=None):
    """``(z*, scipy result)``: the maximum of ``target.log_p`` by L-BFGS."""
    from scipy.optimize import minimize

    vg = target.value_and_grad()

    def fun(z):
        v, g = vg(z)
        return float(v), np.asarray(g, float)

    start = target.z0 if z0 is None else np.asarray(z0, float)
    res = minimize(fun, start, jac=True, method="L-BFGS-B",
                   options={"maxiter": max_steps, "gtol": gtol, "ftol": 1e-14,
                            "maxcor": 20})
    return np.asarray(res.x, float), res


def fit_laplace(data: Rankings, model: str, priors: Priors,
                options: LaplaceOptions | None = None, **kw) -> ApproxFit:
    """Laplace's approximation of ``model`` (module docstring)."""
    from scipy import stats

    o = LaplaceOptions(**{**(options.__dict__ if options else {}), **kw})
    if o.backend != "numpyro":
        raise ValueError("laplace is computed on the NumPyro program (backend 'numpyro')")
    t0 = time.perf_counter()
    with x64():
        target = build_target(data, model, priors, simplex=o.simplex, level=o.level,
                              fast=False, seed=o.seed)
        mode, res = find_mode(target, o.max_steps, o.gtol)
        # compiled: op by op, the Hessian of COUPLE's density costs about a minute
        H = -np.asarray(target.hessian()(mode), float)
        H = 0.5 * (H + H.T)
        evals = np.linalg.eigvalsh(H)
        pd = bool(evals.min() > 0)
        cov = np.linalg.inv(H) if pd else np.linalg.pinv(H)
        cov = 0.5 * (cov + cov.T)
        rng = np.random.default_rng(o.seed)
        if pd:
            z = rng.multivariate_normal(mode, cov, size=o.draws, method="cholesky")
            log_q = stats.multivariate_normal(mode, cov).logpdf(z)
        else:
            z = np.repeat(mode[None], o.draws, axis=0)
            log_q = None
        log_p = target.log_p_draws(z) if pd else None
        cons = target.constrain_draws(z)
    diag = {"converged": bool(res.success) and pd, "steps": int(res.nit),
            "final_log_p": float(-res.fun), "hessian_min_eigenvalue": float(evals.min()),
            "hessian_positive_definite": pd, "optimizer_message": str(res.message),
            "stopping_rule": f"L-BFGS: projected gradient < {o.gtol:g} or relative decrease "
            f"< 1e-14, at most {o.max_steps} iterations",
            "seconds": time.perf_counter() - t0, "dim": target.dim}
    out = ApproxFit(method="laplace-ppl", model=model, backend="numpyro", lam=cons["lambda"],
                    eta=cons.get("eta"), items=list(data.items), workers=list(data.workers),
                    z=z, log_q=log_q, log_p=log_p, diagnostics=diag)
    out.mode, out.cov = mode, cov
    return out

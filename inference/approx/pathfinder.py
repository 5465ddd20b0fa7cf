"""Multi-path Pathfinder ([Zhang22]) on the NumPyro program's JAX log density.

Why blackjax: pymc-extras (the PyMC route to Pathfinder) requires ``pymc < 6.4`` and this
suite runs PyMC 6.4, so Pathfinder is run by blackjax's implementation
(``blackjax.vi.multipathfinder.multi_approximate``) on the potential of
:mod:`crowdrank.inference.approx.target` — the same unconstrained coordinates NUTS moves.

As Stan and pymc-extras run it: ``paths`` independent L-BFGS runs start from the model's
initial point plus a uniform jitter in ``[−jitter, jitter]`` on every coordinate; along each
path the Gaussian built from L-BFGS's inverse-Hessian estimate with the largest ELBO is kept
(blackjax's estimates from ``elbo_draws`` draws each; an estimate above the path's best
``log p`` plus the entropy of a Gaussian with sds of 10 is discarded as an artefact);
``draws_per_path`` draws of each path's Gaussian form a pool, which is
Pareto-smoothed importance resampled ([Vehtari24]) to ``draws`` draws without replacement
(the pool holds ``paths × draws_per_path``), with weights ``p(z)/q_path(z)``. The pool's PSIS k̂ is the diagnostic reported.

**Stopping rule** of each path: L-BFGS's (gradient norm below ``gtol``, objective decrease
below ``ftol``, at most ``max_steps`` iterations; Stan's tolerance 1e-12, because an early
stop leaves the inverse-Hessian estimate without curvature along the weakly identified
directions — the common level — and the paths' Gaussians too narrow there: measured k̂ 2.2
with ``ftol = 1e-6`` against 0.36 with 1e-12 on the three-item BT test posterior). Converged means every path ended with a
finite ELBO.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from crowdrank.models.data import Rankings
from crowdrank.models.priors import Priors

from .psis import KHAT_RELIABLE, psis_diagnostic
from .result import ApproxFit
from .target import build_target, x64


@dataclass
class PathfinderOptions:
    """Options of ``crowdrank fit --method pathfinder``."""

    paths: int = 4              #: independent L-BFGS paths
    draws_per_path: int = 1000  #: draws of each path's Gaussian in the pool
    draws: int = 1000           #: draws kept after PSIS resampling
    max_steps: int = 200        #: the most L-BFGS iterations per path
    elbo_draws: int = 25        #: draws per ELBO estimate along a path (Stan's default)
    maxcor: int = 6             #: L-BFGS history (Stan's default history size)
    gtol: float = 1e-8          #: L-BFGS gradient tolerance
    ftol: float = 1e-12         #: L-BFGS objective decrease tolerance (Stan: 1e-12)
    jitter: float = 2.0         #: half-width of the uniform start jitter (Stan's inits)
    simplex: str = "gamma"      #: worker simplex coordinates (docs/design.md §5.1)
    level: str = "centered"     #: item-score coordinates (docs/design.md §5.2)
    seed: int = 0
    backend: str = "numpyro"    #: NumPyro's density, blackjax's Pathfinder


def memory_bytes() -> int:
    """The memory this process may use: the machine's physical memory, or the address-space
    limit when one is set (``ulimit -v``)."""
    import os
    import resource

    phys = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    return int(phys if soft in (resource.RLIM_INFINITY, -1) else min(phys, soft))


def check_memory(target, o: PathfinderOptions, available: int | None = None) -> None:
    """Refuse, with the sizes, a path whose ELBO estimates cannot fit in memory: blackjax
    evaluates the density at all ``(max_steps + 1) × elbo_draws`` points of a path at once,
    each holding the likelihood's ``K × M`` columns (8 bytes each), e.g. 5,025 × 1.8 M
    columns = 72 GB on the paper's 450,000 rankings — XLA would stop after the L-BFGS run
    with an out-of-memory error instead."""
    cells = max(1, int(np.size(target.inputs.index)))
    need = (o.max_steps + 1) * o.elbo_draws * cells * 8
    have = memory_bytes() if available is None else available
    if need > have:
        steps = have // (cells * 8 * o.elbo_draws) - 1
        lower = (f"--max-steps {steps} or fewer fits" if steps >= 1 else
                 "no --max-steps fits")
        raise ValueError(
            f"pathfinder needs ~{need / 2**30:.0f} GiB for one path's ELBO estimates "
            f"((max_steps + 1) × elbo_draws = {o.max_steps + 1} × {o.elbo_draws} densities of "
            f"{cells:,} likelihood columns at once) and this process has "
            f"{have / 2**30:.0f} GiB: {lower}; advi, lowrank-advi and laplace-ppl evaluate "
            "the density a bounded number of draws at a time")


def fit_pathfinder(data: Rankings, model: str, priors: Priors,
                   options: PathfinderOptions | None = None, **kw) -> ApproxFit:
    """Multi-path Pathfinder of ``model`` (module docstring)."""
    import jax
    from blackjax.vi.pathfinder import approximate, sample

    o = PathfinderOptions(**{**(options.__dict__ if options else {}), **kw})
    if o.backend != "numpyro":
        raise ValueError("pathfinder runs blackjax on the NumPyro program (backend 'numpyro')")
    t0 = time.perf_counter()
    with x64():
        # autodiff form of the density: vmapped over paths inside L-BFGS
        target = build_target(data, model, priors, simplex=o.simplex, level=o.level,
                              fast=False, seed=o.seed)
        check_memory(target, o)
        rng = np.random.default_rng(o.seed)
        starts = target.z0[None] + rng.uniform(-o.jitter, o.jitter, (o.paths, target.dim))
        jnp = jax.numpy
        # an ELBO above this bound is a numerical artefact of a degenerate inverse-Hessian
        # estimate (seen: 1e18 on CrowdBT), not a better Gaussian: E_q log p is at most the
        # path's best log p and a Gaussian whose every sd is below 10 has entropy below
        # dim/2 · log(2πe·100)
        slack = 0.5 * target.dim * np.log(2 * np.pi * np.e * 100.0)

        def one_path(key, x0):
            k1, k2 = jax.random.split(key)
            _, info = approximate(k1, target.log_p, x0, o.elbo_draws, maxiter=o.max_steps,
                                  maxcor=o.maxcor, gtol=o.gtol, ftol=o.ftol)
            path = info.path
            lp = jax.vmap(target.log_p)(path.position)
            bound = jnp.max(jnp.where(jnp.isfinite(lp), lp, -jnp.inf)) + slack
            elbo = jnp.where(jnp.isfinite(path.elbo) & (path.elbo <= bound), path.elbo,
                             -jnp.inf)
            best = jax.tree.map(lambda x: x[jnp.argmax(elbo)], path)
            z, lq = sample(k2, best, o.draws_per_path)
            return z, jax.vmap(target.log_p)(z), lq, elbo

        keys = jax.random.split(jax.random.PRNGKey(o.seed), o.paths)
        # one path at a time: each holds (max_steps + 1) x elbo_draws densities at once
        run = jax.jit(one_path)                 # compiled once, run per path
        outs = [run(k, x0) for k, x0 in zip(keys, starts)]
        pool = np.concatenate([np.asarray(r[0], float) for r in outs])
        log_p = np.concatenate([np.asarray(r[1], float) for r in outs])
        log_q = np.concatenate([np.asarray(r[2], float) for r in outs])
        elbo = np.stack([np.asarray(r[3], float) for r in outs])     # (paths, max_steps + 1)
        finite = np.isfinite(log_p) & np.isfinite(log_q)
        khat, lw = psis_diagnostic(np.where(finite, log_p, -np.inf),
                                   np.where(finite, log_q, 0.0))
        # without replacement (the pool holds several times ``draws``): a degenerate set of
        # weights still returns distinct draws, and k̂ says the weights are not to be trusted
        w = np.exp(lw) / np.exp(lw).sum()
        replace = o.draws > int(np.sum(w > 0))
        idx = rng.choice(pool.shape[0], size=o.draws, replace=replace, p=w)
        z = pool[idx]
        cons = target.constrain_draws(z)
    best = np.max(elbo, axis=1)          # blackjax sets the steps not taken to -inf
    steps = [int(np.sum(np.isfinite(e))) for e in elbo]
    diag = {"converged": bool(np.all(np.isfinite(best))), "steps": int(max(steps)),
            "steps_per_path": steps, "final_elbo": float(np.max(best)),
            "elbo_per_path": [float(b) for b in best], "khat": khat,
            "psis_reliable": bool(khat <= KHAT_RELIABLE),
            "pool": int(pool.shape[0]),
            "stopping_rule": f"L-BFGS per path: gradient < {o.gtol:g} or decrease "
            f"< {o.ftol:g}, at most {o.max_steps} iterations; {o.paths} paths, PSIS "
            f"resampling of {pool.shape[0]} draws to {o.draws}",
            "seconds": time.perf_counter() - t0, "dim": target.dim}
    out = ApproxFit(method="pathfinder", model=model, backend="numpyro", lam=cons["lambda"],
                    eta=cons.get("eta"), items=list(data.items), workers=list(data.workers),
                    z=z, log_q=log_q[idx], log_p=log_p[idx], diagnostics=diag,
                    psis_resampled=True)
    out.pool = {"z": pool, "log_p": log_p, "log_q": log_q}
    return out

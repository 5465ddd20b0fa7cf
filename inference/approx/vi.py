"""Automatic differentiation variational inference, as NumPyro and PyMC users run it.

Three Gaussian families on the sampler's unconstrained coordinates
(:mod:`crowdrank.inference.approx.target`; [Kucukelbir17]):

* ``advi``: mean-field, NumPyro ``AutoNormal`` / PyMC ``pm.fit(method="advi")``;
* ``fullrank-advi``: a full covariance, ``AutoMultivariateNormal`` /
  ``pm.fit(method="fullrank_advi")``;
* ``lowrank-advi``: diagonal plus rank ``r``, ``AutoLowRankMultivariateNormal`` (NumPyro
  only: PyMC has no such family).

The ELBO is maximised by Adam (gradients clipped to ±10, step size decaying
exponentially to ``decay`` times its first value at ``max_steps``) on reparametrised
``particles``-draw gradients.
**Stopping rule**: the loss is averaged over consecutive windows of ``window`` steps; the
fit stops when the relative change of two consecutive window means,
``|m_j − m_{j−1}| / |m_j|``, falls below ``elbo_tol``, or at ``max_steps`` (then it is reported
as not converged). Stan's ADVI uses the same kind of relative-ELBO rule. PyMC's fit uses its
own callback (``CheckParametersConvergence``, relative parameter change ``elbo_tol``) with the
same ``max_steps``.

Both back-ends give ``log q`` of each draw and the model's ``log p`` in the same
unconstrained coordinates, so PSIS k̂ is computed ([Yao18]): NumPyro's from the guide's
density and the program's potential, PyMC's from its fitted Gaussian (mean and sd, or the
full covariance) on its own coordinates and ``Model.compile_logp``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from crowdrank.models.data import Rankings
from crowdrank.models.errors import UsageError
from crowdrank.models.priors import Priors

from .result import ApproxFit
from .target import build_target, x64

FAMILIES = {"advi": "AutoNormal", "fullrank-advi": "AutoMultivariateNormal",
            "lowrank-advi": "AutoLowRankMultivariateNormal"}
PYMC_METHODS = {"advi": "advi", "fullrank-advi": "fullrank_advi"}


@dataclass
class SviOptions:
    """What :func:`run_svi` reads: the schedule and stopping rule of every SVI fit of this
    package (ADVI, the structured and flow guides), so that they stop by one rule with
    defaults stated once; each method's options class adds its own fields."""

    max_steps: int = 10000      #: the most Adam steps
    learning_rate: float = 0.01  #: Adam's first step size
    window: int = 500           #: steps per window of the stopping rule
    elbo_tol: float = 1e-3      #: relative change of consecutive window-mean losses
    decay: float = 0.1          #: learning rate at max_steps, as a fraction of the first
    particles: int = 1          #: Monte Carlo draws per ELBO gradient
    seed: int = 0
    progress: bool = True


@dataclass
class VIOptions(SviOptions):
    """Options of the ADVI fits (``crowdrank fit --method advi|fullrank-advi|lowrank-advi``)."""

    rank: int | None = None     #: lowrank-advi's rank (default: ⌈√D⌉, NumPyro's)
    draws: int = 1000           #: draws of the fitted q
    backend: str = "numpyro"    #: "numpyro" or "pymc"
    simplex: str = "gamma"      #: worker simplex coordinates (docs/design.md §5.1)
    level: str = "centered"     #: item-score coordinates (docs/design.md §5.2)


def fit_vi(data: Rankings, model: str, priors: Priors, method: str = "advi",
           options: VIOptions | None = None, **kw) -> ApproxFit:
    """Fit ``model`` by the ADVI family ``method`` (module docstring); ``kw`` override
    fields of ``options``."""
    o = VIOptions(**{**(options.__dict__ if options else {}), **kw})
    if method not in FAMILIES:
        raise ValueError(f"unknown VI family {method!r}; expected one of {tuple(FAMILIES)}")
    if o.backend == "pymc":
        if method not in PYMC_METHODS:
            raise ValueError(f"{method} is NumPyro only (PyMC has advi and fullrank-advi)")
        return _fit_pymc(data, model, priors, method, o)
    if o.backend != "numpyro":
        raise ValueError(f"backend must be 'numpyro' or 'pymc', got {o.backend!r}")
    return _fit_numpyro(data, model, priors, method, o)


def _stop(means: list[float], tol: float) -> bool:
    """The stopping rule on the window means of the loss (module docstring)."""
    if len(means) < 2:
        return False
    return abs(means[-1] - means[-2]) <= tol * max(abs(means[-1]), 1e-12)


def _guide(method: str, prog, o: VIOptions):
    from numpyro.infer import autoguide, init_to_median

    init = init_to_median(num_samples=15)
    if method == "advi":
        return autoguide.AutoNormal(prog, init_loc_fn=init)
    if method == "fullrank-advi":
        return autoguide.AutoMultivariateNormal(prog, init_loc_fn=init)
    kw = {} if o.rank is None else {"rank": int(o.rank)}
    return autoguide.AutoLowRankMultivariateNormal(prog, init_loc_fn=init, **kw)


def _draw_q(method: str, guide, params, target, key, n: int):
    """``n`` draws of the guide's ``q`` as flat ``z`` in ``target``'s order (sites sorted
    by name, as ``ravel_pytree`` of the site dict) and their ``log q``. The full-rank and
    low-rank guides flatten their sites in the model's trace order instead: their draws
    are unpacked by site and re-flattened (a permutation, so ``log q`` is unchanged)."""
    import jax.numpy as jnp
    import numpyro.distributions as dist

    sites = sorted(target.sites)
    if method == "advi":
        loc = jnp.concatenate([jnp.ravel(params[f"{s}_auto_loc"]) for s in sites])
        scale = jnp.concatenate([jnp.ravel(params[f"{s}_auto_scale"]) for s in sites])
        q = dist.Normal(loc, scale).to_event(1)
        z = q.sample(key, (n,))
        return np.asarray(z, float), np.asarray(q.log_prob(z), float)
    q = guide.get_posterior(params)
    zg = q.sample(key, (n,))
    parts = guide._unpack_latent(zg)
    z = jnp.concatenate([jnp.reshape(parts[s], (n, -1)) for s in sites], axis=1)
    return np.asarray(z, float), np.asarray(q.log_prob(zg), float)


def _check_finite(method: str, means: list[float], params: dict, steps: int,
                  o: VIOptions) -> None:
    """A diverged optimisation (a window's mean loss or a variational parameter not finite)
    is an error that says where it happened and what to change, not draws of a
    ``NaN``-located Gaussian (NumPyro then fails on the guide's invalid ``loc``)."""
    import jax

    # a flow's parameters are nested (its networks' layers): every leaf is checked
    bad = [k for k, v in params.items()
           if not all(np.all(np.isfinite(np.asarray(x))) for x in jax.tree.leaves(v))]
    if np.isfinite(means[-1]) and not bad:
        return
    ok = [i for i, m in enumerate(means) if np.isfinite(m)]
    last = (f"; the last finite window-mean ELBO was {-means[ok[-1]]:.6g} at step "
            f"{(ok[-1] + 1) * o.window}" if ok else "")
    raise UsageError(
        f"{method} diverged: after {steps} steps the window-mean ELBO is {-means[-1]:.6g}"
        + (f" and {', '.join(sorted(bad))} not finite" if bad else "") + last
        + f" (learning rate {o.learning_rate:g}); try a smaller --learning-rate")


def run_svi(model, guide, o, desc: str):
    """Maximise the ELBO of ``guide`` for ``model`` (NumPyro callables without arguments)
    with the schedule and stopping rule of the module docstring; ``o`` carries
    ``max_steps``, ``learning_rate``, ``decay``, ``window``, ``elbo_tol``, ``particles``,
    ``seed`` and ``progress`` (:class:`SviOptions`). Returns ``(params, diagnostics)`` (``converged``, ``steps``,
    ``final_elbo``, ``elbo_trace``, ``stopping_rule``); a diverged run is a
    :class:`UsageError` (:func:`_check_finite`). Shared by every SVI method of this package
    (the structured and flow guides too), so they stop by one rule."""
    import jax
    import numpyro
    from jax.example_libraries.optimizers import exponential_decay
    from numpyro.infer import SVI, Trace_ELBO
    from tqdm.auto import tqdm

    # an exponentially decaying step size: Adam's stationary noise shrinks with it
    step = exponential_decay(o.learning_rate, o.max_steps, o.decay)
    # gradients clipped to [-10, 10] (NumPyro's ClippedAdam): a one-draw gradient far
    # in a Gamma coordinate's tail must not throw the fit out of the bulk
    svi = SVI(model, guide, numpyro.optim.ClippedAdam(step, clip_norm=10.0),
              Trace_ELBO(num_particles=o.particles))
    state = svi.init(jax.random.PRNGKey(o.seed))

    @jax.jit
    def chunk(state):
        return jax.lax.scan(lambda s, _: svi.update(s), state, None, length=o.window)

    means, trace, steps, converged = [], [], 0, False
    bar = tqdm(total=o.max_steps, disable=not o.progress, desc=desc, unit="step")
    while steps < o.max_steps:
        state, losses = chunk(state)
        losses = np.asarray(losses)
        steps += o.window
        means.append(float(np.mean(losses)))
        trace.append(-means[-1])
        bar.update(o.window)
        bar.set_postfix(elbo=f"{-means[-1]:.4g}")
        if not np.isfinite(means[-1]):
            break
        if _stop(means, o.elbo_tol):
            converged = True
            break
    bar.close()
    params = svi.get_params(state)
    _check_finite(desc, means, params, steps, o)
    diag = {"converged": converged, "steps": steps, "final_elbo": trace[-1] if trace else None,
            "elbo_trace": trace, "stopping_rule": f"relative change of {o.window}-step mean "
            f"ELBO < {o.elbo_tol:g}, at most {o.max_steps} steps"}
    return params, diag


def _fit_numpyro(data, model, priors, method, o: VIOptions) -> ApproxFit:
    import jax

    from crowdrank.models import numpyro_models as npm

    t0 = time.perf_counter()
    with x64():
        target = build_target(data, model, priors, simplex=o.simplex, level=o.level,
                              seed=o.seed)
        inputs = target.inputs

        def prog():
            npm.model(inputs, pointwise=False, **target.param)

        guide = _guide(method, prog, o)
        params, diag = run_svi(prog, guide, o, method)
        z, log_q = _draw_q(method, guide, params, target, jax.random.PRNGKey(o.seed + 1),
                           o.draws)
        log_p = target.log_p_draws(z)
        cons = target.constrain_draws(z)
    diag.update(seconds=time.perf_counter() - t0, dim=target.dim)
    return ApproxFit(method=method, model=model, backend="numpyro", lam=cons["lambda"],
                     eta=cons.get("eta"), items=list(data.items), workers=list(data.workers),
                     z=z, log_q=log_q, log_p=log_p, diagnostics=diag)


def _fit_pymc(data, model, priors, method, o: VIOptions) -> ApproxFit:
    import pymc as pm

    from crowdrank.models.model_inputs import model_inputs
    from crowdrank.models.pymc_models import build_model

    t0 = time.perf_counter()
    inputs = model_inputs(model, data, priors)
    pm_model = build_model(inputs, data.items, data.workers, simplex=o.simplex, level=o.level)
    with pm_model:
        cb = pm.variational.callbacks.CheckParametersConvergence(
            every=o.window, tolerance=o.elbo_tol, diff="relative")
        approx = pm.fit(n=o.max_steps, method=PYMC_METHODS[method], random_seed=o.seed,
                        progressbar=o.progress, callbacks=[cb],
                        obj_optimizer=pm.adam(learning_rate=o.learning_rate),
                        obj_n_mc=o.particles)
    z, log_q, log_p, lam, eta = _pymc_draws(approx, pm_model, method, o)
    hist = np.asarray(approx.hist, float)
    steps = int(hist.size)
    tail = hist[-min(o.window, steps):] if steps else hist
    diag = {"converged": steps < o.max_steps, "steps": steps,
            "final_elbo": float(-np.mean(tail)) if steps else None,
            "elbo_trace": [float(-np.mean(hist[i:i + o.window]))
                           for i in range(0, steps, o.window)],
            "stopping_rule": f"PyMC CheckParametersConvergence: relative parameter change "
            f"< {o.elbo_tol:g} every {o.window} steps, at most {o.max_steps} steps",
            "seconds": time.perf_counter() - t0}
    return ApproxFit(method=method, model=model, backend="pymc", lam=lam, eta=eta,
                     items=list(data.items), workers=list(data.workers), z=z, log_q=log_q,
                     log_p=log_p, diagnostics=diag)


def _pymc_draws(approx, pm_model, method: str, o: VIOptions):
    """``(z, log q, log p, λ, η)`` of ``o.draws`` draws of PyMC's fitted Gaussian: drawn
    here (seeded) on PyMC's own unconstrained coordinates, the group's flat vector in its
    ``ordering``; ``log q`` the Gaussian's density; ``log p`` the model's log density
    there with the transforms' Jacobians (``Model.compile_logp``, the density PyMC's NUTS
    samples), so PSIS k̂ compares the two in the same coordinates; ``λ``/``η`` the model's
    variables at each draw (what ``approx.sample`` returns)."""
    from scipy import stats

    group = approx.groups[0]
    mean = np.asarray(group.mean.eval(), float)
    rng = np.random.default_rng(o.seed + 1)
    if method == "advi":
        sd = np.asarray(group.std.eval(), float)
        z = mean + sd * rng.standard_normal((o.draws, mean.size))
        log_q = stats.norm.logpdf(z, mean, sd).sum(axis=1)
    else:
        cov = np.asarray(group.cov.eval(), float)
        q = stats.multivariate_normal(mean, 0.5 * (cov + cov.T))
        z = np.atleast_2d(q.rvs(size=o.draws, random_state=rng))
        log_q = np.atleast_1d(q.logpdf(z))
    logp = pm_model.compile_logp(jacobian=True)
    outs = [pm_model["lambda"]] + ([pm_model["eta"]] if "eta" in pm_model.named_vars else [])
    # the variables as functions of the value variables (not fresh prior draws)
    outs = pm_model.replace_rvs_by_values(outs)
    values = pm_model.compile_fn(outs, inputs=pm_model.value_vars, point_fn=True,
                                 on_unused_input="ignore")
    log_p, lam, eta = np.empty(o.draws), [], []
    for s, row in enumerate(z):
        point = {name: row[sl].reshape(shape) for name, sl, shape, _ in
                 group.ordering.values()}
        log_p[s] = float(logp(point))
        got = values(point)
        lam.append(np.asarray(got[0], float))
        if len(got) > 1:
            eta.append(np.asarray(got[1], float))
    return z, log_q, log_p, np.stack(lam), (np.stack(eta) if eta else None)

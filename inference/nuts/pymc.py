"""The PyMC runner of :func:`crowdrank.inference.nuts.fit_nuts`: ``pm.sample`` on the model of
:mod:`crowdrank.models.pymc_models`, its statistics under the contract's names, the
per-ranking log-likelihood (``pm.compute_log_likelihood``) and posterior predictive orders
(``pm.sample_posterior_predictive``).
"""

from __future__ import annotations

import os
import time

import numpy as np

from .config import NutsConfig

#: sample_stats names of the PyMC sampler and of nutpie, mapped to the contract's names
_PYMC_STATS = {"diverging": ("diverging",), "energy": ("energy",),
               "tree_depth": ("tree_depth", "depth"), "n_steps": ("n_steps",),
               "lp": ("lp", "logp"), "acceptance_rate": ("acceptance_rate", "mean_tree_accept"),
               "step_size": ("step_size",)}




def _pymc_mass(model, values: dict, dense: bool = False):
    """PyMC's diagonal adaptive potential seeded with the variance of ``values`` (constrained
    draws of the free variables) on the sampler's unconstrained scale, in the order of
    ``model.value_vars`` — the NumPyro rule (:func:`numpyro_starts_from_draws`); with
    ``dense``, the full adaptive potential seeded with the same diagonal."""
    import pytensor
    import pytensor.tensor as pt
    from pymc.step_methods.hmc.quadpotential import QuadPotentialDiagAdapt

    cols = []
    for vv in model.value_vars:
        rv = model.values_to_rvs[vv]
        x = np.asarray(values[rv.name], float)
        n = x.shape[0]
        tr = model.rvs_to_transforms.get(rv)
        if tr is not None:
            sym = pt.tensor(dtype="float64", shape=(None,) * x.ndim)
            x = pytensor.function([sym], tr.forward(sym, *rv.owner.inputs))(x)
        cols.append(np.asarray(x, float).reshape(n, -1))
    z = np.concatenate(cols, axis=1)
    var = np.clip(z.var(axis=0), 1e-4, 1e2)
    if dense:
        from pymc.step_methods.hmc.quadpotential import QuadPotentialFullAdapt
        return QuadPotentialFullAdapt(z.shape[1], z.mean(axis=0), np.diag(var), 10)
    return QuadPotentialDiagAdapt(z.shape[1], z.mean(axis=0), var, 10)



def run_pymc(inputs, cfg: NutsConfig, *, initvals, jitter, progress, pointwise, param,
             mass_values=None, keep=None):
    """Sample with ``pm.sample``; returns ``(post, stats, ll, timings)`` as plain arrays
    ``(chain, draw, ...)`` (``timings`` also carries the sampler's name and the predictive
    draws, which :func:`~crowdrank.inference.nuts.fit_nuts` takes out)."""
    import pymc as pm

    from crowdrank.models import pymc_models as pmm

    chains, tune, target_accept = cfg.chains, cfg.tune, cfg.target_accept
    max_tree_depth, dense_mass = cfg.max_tree_depth, cfg.dense_mass
    cores = 1 if cfg.chain_method == "sequential" else None
    timings = {}
    t = time.perf_counter()
    model = pmm.build_model(inputs, prior_only=cfg.prior_only, **param)
    timings["compile"] = time.perf_counter() - t  # graph only; samplers compile lazily
    t = time.perf_counter()
    with model:
        kw = {}
        if initvals is not None:
            kw["initvals"] = initvals if chains > 1 else initvals[0]
            if not jitter:   # starts drawn from an approximation are dispersed already
                kw["init"] = "adapt_diag"
        if mass_values is not None:
            # the mass matrix starts from the approximation's variances (as NumPyro's)
            kw.pop("init", None)
            kw["step"] = pm.NUTS(vars=model.value_vars,
                                 potential=_pymc_mass(model, mass_values, dense=dense_mass),
                                 target_accept=target_accept, max_treedepth=max_tree_depth)
        elif dense_mass:
            kw["init"] = "jitter+adapt_full" if jitter else "adapt_full"
        if "step" not in kw:   # otherwise the step carries these settings
            kw.update(target_accept=target_accept, nuts={"max_treedepth": max_tree_depth})
        # PyMC times only the whole run; the draws' callback (in this process, as each
        # chain's draws arrive) marks when the last chain left warm-up
        clock = {"end_tune": t, "tune_grads": 0.0}

        def _mark(trace, draw):
            if draw.tuning:
                clock["end_tune"] = max(clock["end_tune"], time.perf_counter())
                st = draw.stats[0] if isinstance(draw.stats, list | tuple) else draw.stats
                # PyMC's own NUTS names the leapfrog count "tree_size"
                clock["tune_grads"] += float(st.get("tree_size", st.get("n_steps", 0)))
        idata = pm.sample(draws=cfg.draws, tune=tune, chains=chains,
                          cores=cores or min(chains, os.cpu_count() or 1),
                          random_seed=cfg.seed,
                          progressbar=progress, compute_convergence_checks=False,
                          callback=_mark, **kw)
    end = time.perf_counter()
    timings["warmup"] = clock["end_tune"] - t if tune > 0 else 0.0
    timings["sampling"] = end - t - timings["warmup"]
    if tune > 0:
        timings["warmup_gradients"] = clock["tune_grads"]
    post, stats = _draws_and_stats(idata, inputs.has_eta, timings)
    ll = None
    if pointwise:
        t = time.perf_counter()
        with model:
            lls = pm.compute_log_likelihood(idata, var_names=["rankings"],
                                            extend_inferencedata=False, progressbar=False)
        ll = np.asarray(lls["rankings"].values, float)
        timings["pointwise"] = time.perf_counter() - t
    if keep is not None:
        t = time.perf_counter()
        thin = idata["posterior"].to_dataset().isel(draw=keep)
        with model:
            pp = pm.sample_posterior_predictive(thin, var_names=["rankings"],
                                                random_seed=cfg.seed + 0x99, progressbar=False)
        timings["predictive_draws"] = np.asarray(
            pp["posterior_predictive"]["rankings"].values).astype(np.int32)
        timings["predictive"] = time.perf_counter() - t
    return post, stats, ll, timings


def _draws_and_stats(idata, has_eta: bool, timings: dict):
    """The posterior's ``lambda`` (and ``eta``) and the sample stats under the contract's
    names, from PyMC's or nutpie's DataTree; ``timings`` gains the sampling gradients and
    the sampler's name."""
    ss = idata["sample_stats"].to_dataset()
    post = {"lambda": np.asarray(idata["posterior"]["lambda"].values, float)}
    if has_eta:
        post["eta"] = np.asarray(idata["posterior"]["eta"].values, float)
    stats = {}
    for name, candidates in _PYMC_STATS.items():
        for c in candidates:
            if c in ss:
                stats[name] = np.asarray(ss[c].values)
                break
    stats["diverging"] = stats["diverging"].astype(bool)
    if "n_steps" in stats:
        timings["sampling_gradients"] = float(np.asarray(stats["n_steps"]).sum())
    timings["sampler"] = str(idata["posterior"].attrs.get("inference_library", "pymc"))
    return post, stats

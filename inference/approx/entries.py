"""The PPL approximations as entries of the method registry
(:mod:`crowdrank.inference.methods`): their options dataclasses (each field's default and
``--help``) and their ``fit(data, model, priors, options, *, seed, progress) -> Posterior``
functions. Importing this module costs no NumPy or JAX (``crowdrank --help`` reads it).

Every fit returns a :class:`~crowdrank.inference.posterior.Posterior` of draws (the NUTS
layout) whose diagnostics hold ``converged``, ``steps``, ``final_elbo`` (Laplace:
``final_log_p``), the stopping rule, and PSIS ``psis_khat`` with its verdict
``psis_label`` (``"not reliable"`` above 0.7); ``psis=True`` replaces q's draws by their
Pareto-smoothed importance resample.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from crowdrank.models.errors import UsageError

from .scope import check_model


def opt(default, help: str, **meta):
    """A method option, as :func:`crowdrank.inference.methods.opt` makes one (defined here
    so that the registry can import this module while it is itself being imported)."""
    return field(default=default, metadata={"help": help, **meta})


_SIMPLEX = opt("gamma", "COUPLE/CrowdBT worker coordinates the approximation lives on: the "
               "exact Gamma construction (docs/design.md 5.1) or the PPL's stick-breaking "
               "Dirichlet/Beta", choices=("gamma", "dirichlet"))
_LEVEL = opt("centered", "item-score coordinates: common level + zero-sum part "
             "(docs/design.md 5.2) or iid λ", choices=("centered", "iid"))
_PSIS = opt(False, "return the PSIS importance resample of the draws (k̂ is reported "
            "either way)")
_DRAWS = opt(1000, "draws of the approximation")


@dataclass(frozen=True)
class AdviOptions:
    backend: str = opt("numpyro", "the PPL that fits it", choices=("numpyro", "pymc"))
    max_steps: int = opt(10000, "the most optimiser steps (ADVI: Adam; L-BFGS otherwise)")
    learning_rate: float = opt(0.01, "Adam's first step size (decays to 1/10 at "
                               "--max-steps)")
    window: int = opt(500, "steps per window of the ELBO stopping rule")
    elbo_tol: float = opt(1e-3, "stop when the window-mean ELBO changes by less than this "
                          "(relative); PyMC: relative parameter change")
    particles: int = opt(1, "Monte Carlo draws per ELBO gradient")
    draws: int = _DRAWS
    simplex: str = _SIMPLEX
    level: str = _LEVEL
    psis: bool = _PSIS


@dataclass(frozen=True)
class LowRankAdviOptions(AdviOptions):
    rank: int | None = opt(None, "rank of the covariance's low-rank part (default "
                           "ceil(sqrt(D)), NumPyro's)", type=int)


@dataclass(frozen=True)
class LaplacePplOptions:
    backend: str = opt("numpyro", "the PPL that fits it", choices=("numpyro", "pymc"))
    max_steps: int = opt(2000, "the most optimiser steps (ADVI: Adam; L-BFGS otherwise)")
    draws: int = _DRAWS
    simplex: str = _SIMPLEX
    level: str = _LEVEL
    psis: bool = _PSIS


@dataclass(frozen=True)
class PathfinderOptions:
    backend: str = opt("numpyro", "the PPL that fits it", choices=("numpyro", "pymc"))
    paths: int = opt(4, "independent L-BFGS paths of multi-path Pathfinder")
    draws_per_path: int = opt(1000, "draws of each path's Gaussian pooled before PSIS "
                              "resampling")
    max_steps: int = opt(200, "the most optimiser steps (ADVI: Adam; L-BFGS otherwise)")
    draws: int = _DRAWS
    simplex: str = _SIMPLEX
    level: str = _LEVEL
    psis: bool = _PSIS


_NUMPYRO = opt("numpyro", "the PPL that fits it (a NumPyro guide)", choices=("numpyro",))
_POOL = opt(4000, "with --psis: draws of q importance-weighted, of which --draws are "
            "resampled")


@dataclass(frozen=True)
class StructuredViOptions:
    backend: str = _NUMPYRO
    max_steps: int = opt(10000, "the most Adam steps")
    learning_rate: float = opt(0.01, "Adam's first step size (decays to 1/10 at "
                               "--max-steps)")
    window: int = opt(500, "steps per window of the ELBO stopping rule")
    elbo_tol: float = opt(1e-3, "stop when the window-mean ELBO changes by less than this "
                          "(relative)")
    particles: int = opt(1, "Monte Carlo draws per ELBO gradient")
    covariance: str = opt("full", "the scores' Gaussian: full-rank or low-rank plus "
                          "diagonal", choices=("full", "lowrank"))
    rank: int | None = opt(None, "--covariance lowrank: rank of its low-rank part (default "
                           "ceil(sqrt(L)))", type=int)
    draws: int = _DRAWS
    pool: int = _POOL
    psis: bool = _PSIS


@dataclass(frozen=True)
class FlowViOptions:
    backend: str = _NUMPYRO
    flow: str = opt("iaf", "NumPyro's AutoIAFNormal or AutoBNAFNormal", choices=("iaf", "bnaf"))
    num_flows: int = opt(2, "stacked autoregressive transforms")
    hidden: int = opt(0, "hidden units per layer (IAF; 0: the dimension) or per dimension "
                      "(BNAF; 0: 8)")
    max_steps: int = opt(10000, "the most Adam steps")
    learning_rate: float = opt(0.005, "Adam's first step size (decays to 1/10 at "
                               "--max-steps)")
    window: int = opt(500, "steps per window of the ELBO stopping rule")
    elbo_tol: float = opt(1e-3, "stop when the window-mean ELBO changes by less than this "
                          "(relative)")
    particles: int = opt(1, "Monte Carlo draws per ELBO gradient")
    draws: int = _DRAWS
    pool: int = _POOL
    simplex: str = _SIMPLEX
    level: str = _LEVEL
    psis: bool = _PSIS


def _posterior(fit, options, seconds_key: str = "seconds"):
    import numpy as np

    from crowdrank.inference.posterior import Posterior

    from .psis import label

    if not np.all(np.isfinite(fit.lam)) or (fit.eta is not None
                                            and not np.all(np.isfinite(fit.eta))):
        raise RuntimeError(f"{fit.method} on {fit.model}: non-finite draws (the optimiser "
                           f"diverged after {fit.diagnostics.get('steps')} steps); try a "
                           "smaller --learning-rate or another method")
    draws = {"lambda": fit.lam[None]}
    if fit.eta is not None:
        draws["eta"] = fit.eta[None]
    d = {k: v for k, v in fit.diagnostics.items() if k not in ("khat",)}
    d["psis_khat"] = fit.khat
    d["psis_label"] = label(fit.khat)
    d["psis_resampled"] = fit.psis_resampled
    d["backend"] = fit.backend
    post = Posterior.from_draws(fit.model, fit.method, draws=draws, items=fit.items,
                                workers=fit.workers if fit.eta is not None else (),
                                diagnostics=d, options=dict(options.__dict__),
                                seconds=float(fit.diagnostics.get(seconds_key, float("nan"))),
                                algorithm=f"{fit.method}-{fit.backend}", native=None)
    post.tree.attrs.update({"psis_khat": float("nan") if fit.khat is None else fit.khat,
                            "psis_label": d["psis_label"], "backend": fit.backend})
    return post


def _common(options, model):
    check_model(model)
    if options.draws < 10:
        raise UsageError("--draws must be >= 10 (PSIS needs the draws)")
    return {"draws": int(options.draws), "simplex": options.simplex, "level": options.level}


def _fit_vi(method, data, model, priors, options, seed, progress):
    from . import fit_approx

    if options.backend == "pymc" and method == "lowrank-advi":
        raise UsageError("lowrank-advi is NumPyro's (PyMC has advi and fullrank-advi)")
    if options.max_steps < options.window or options.window < 1:
        raise UsageError("need --window >= 1 and --max-steps >= --window")
    kw = {"backend": options.backend, "max_steps": int(options.max_steps),
          "learning_rate": float(options.learning_rate), "window": int(options.window),
          "elbo_tol": float(options.elbo_tol), "particles": int(options.particles),
          **_common(options, model)}
    if method == "lowrank-advi" and options.rank is not None:
        kw["rank"] = int(options.rank)
    fit = fit_approx(data, model, priors, method, psis=bool(options.psis), seed=int(seed),
                     progress=progress, **kw)
    return _posterior(fit, options)


def fit_advi(data, model, priors, options, *, seed=0, progress=False):
    """Mean-field ADVI (NumPyro ``AutoNormal`` or PyMC ``advi``)."""
    return _fit_vi("advi", data, model, priors, options, seed, progress)


def fit_fullrank_advi(data, model, priors, options, *, seed=0, progress=False):
    """Full-rank ADVI (NumPyro ``AutoMultivariateNormal`` or PyMC ``fullrank_advi``)."""
    return _fit_vi("fullrank-advi", data, model, priors, options, seed, progress)


def fit_lowrank_advi(data, model, priors, options, *, seed=0, progress=False):
    """Low-rank-plus-diagonal ADVI (NumPyro ``AutoLowRankMultivariateNormal``)."""
    return _fit_vi("lowrank-advi", data, model, priors, options, seed, progress)


def fit_laplace_ppl(data, model, priors, options, *, seed=0, progress=False):
    """Laplace at the mode of the NumPyro program (``jax.hessian``)."""
    from . import fit_approx

    if options.backend != "numpyro":
        raise UsageError("laplace-ppl is computed on the NumPyro program (--backend numpyro)")
    fit = fit_approx(data, model, priors, "laplace-ppl", psis=bool(options.psis),
                     seed=int(seed), max_steps=int(options.max_steps),
                     **_common(options, model))
    return _posterior(fit, options)


def fit_pathfinder(data, model, priors, options, *, seed=0, progress=False):
    """Multi-path Pathfinder (blackjax on the NumPyro density), PSIS-resampled."""
    from . import fit_approx

    if options.backend != "numpyro":
        raise UsageError("pathfinder runs blackjax on the NumPyro density (--backend numpyro)")
    if options.paths < 1 or options.draws_per_path < 10:
        raise UsageError("need --paths >= 1 and --draws-per-path >= 10")
    fit = fit_approx(data, model, priors, "pathfinder", seed=int(seed),
                     paths=int(options.paths), draws_per_path=int(options.draws_per_path),
                     max_steps=int(options.max_steps), **_common(options, model))
    return _posterior(fit, options)


def _svi_kw(options):
    if options.max_steps < options.window or options.window < 1:
        raise UsageError("need --window >= 1 and --max-steps >= --window")
    if options.draws < 10 or options.pool < 10:
        raise UsageError("--draws and --pool must be >= 10 (PSIS needs the draws)")
    if options.particles < 1 or not options.learning_rate > 0:
        raise UsageError("need --particles >= 1 and --learning-rate > 0")
    return {"max_steps": int(options.max_steps), "learning_rate": float(options.learning_rate),
            "window": int(options.window), "elbo_tol": float(options.elbo_tol),
            "particles": int(options.particles), "draws": int(options.draws),
            "pool": int(options.pool)}


def _fit_structured(method, data, model, priors, options, seed, progress):
    from . import fit_approx

    if options.covariance == "lowrank" and options.rank is not None and options.rank < 1:
        raise UsageError("--rank must be >= 1")
    try:
        fit = fit_approx(data, model, priors, method, psis=bool(options.psis),
                         seed=int(seed), progress=progress, covariance=options.covariance,
                         rank=options.rank, **_svi_kw(options))
    except ValueError as e:     # a model without a Dirichlet/Beta worker factor
        raise UsageError(str(e)) from None
    return _posterior(fit, options)


def fit_structured_vi(data, model, priors, options, *, seed=0, progress=False):
    """Structured VI: a full-rank Gaussian on the scores × a Dirichlet (COUPLE) or Beta
    (CrowdBT) per worker (:mod:`crowdrank.inference.approx.structured`)."""
    return _fit_structured("structured-vi", data, model, priors, options, seed, progress)


def fit_coupled_vi(data, model, priors, options, *, seed=0, progress=False):
    """Coupled VI: structured VI whose worker concentrations are an affine function of
    the scores the worker ranked (:mod:`crowdrank.inference.approx.structured`, (C1))."""
    return _fit_structured("coupled-vi", data, model, priors, options, seed, progress)


def fit_flow_vi(data, model, priors, options, *, seed=0, progress=False):
    """Flow VI: NumPyro's ``AutoIAFNormal``/``AutoBNAFNormal``
    (:mod:`crowdrank.inference.approx.flow`)."""
    from . import fit_approx

    if options.num_flows < 1 or options.hidden < 0:
        raise UsageError("need --num-flows >= 1 and --hidden >= 0")
    check_model(model)
    fit = fit_approx(data, model, priors, "flow-vi", psis=bool(options.psis), seed=int(seed),
                     progress=progress, flow=options.flow, num_flows=int(options.num_flows),
                     hidden=int(options.hidden), simplex=options.simplex,
                     level=options.level, **_svi_kw(options))
    return _posterior(fit, options)


#: The models the structured guides have a worker factor for (a Dirichlet or Beta worker
#: prior; ``structured.worker_family`` checks the registry itself).
STRUCTURED_MODELS = ("couple", "couple-normalized", "crowdbt")


def method_entries():
    """This package's entries of the method registry, as keyword arguments of
    :class:`~crowdrank.inference.methods.Method` (the registry builds them: this module
    does not import it, so neither imports the other at run time). They name no models
    (``Method.models`` empty: every model); :func:`check_model` refuses one that is not in
    the ranking registry."""
    here = __name__
    return (
        _entry("advi", "mean-field ADVI in the PPL (NumPyro AutoNormal / PyMC advi), PSIS k̂",
               f"{here}:fit_advi", AdviOptions, backends=("numpyro", "pymc")),
        _entry("fullrank-advi", "full-rank ADVI in the PPL (NumPyro AutoMultivariateNormal / "
               "PyMC fullrank_advi), PSIS k̂", f"{here}:fit_fullrank_advi", AdviOptions,
               backends=("numpyro", "pymc")),
        _entry("lowrank-advi", "low-rank ADVI (NumPyro AutoLowRankMultivariateNormal), "
               "PSIS k̂", f"{here}:fit_lowrank_advi", LowRankAdviOptions,
               backends=("numpyro",)),
        _entry("laplace-ppl", "Laplace at the mode of the NumPyro program (full Hessian, "
               "every model), PSIS k̂", f"{here}:fit_laplace_ppl", LaplacePplOptions,
               backends=("numpyro",)),
        _entry("pathfinder", "multi-path Pathfinder (blackjax on the NumPyro density), PSIS "
               "resampling and k̂", f"{here}:fit_pathfinder", PathfinderOptions,
               backends=("numpyro",)),
        _entry("structured-vi", "full-rank Gaussian scores × Dirichlet/Beta workers, k̂",
               f"{here}:fit_structured_vi", StructuredViOptions, backends=("numpyro",),
               models=STRUCTURED_MODELS),
        _entry("coupled-vi", "structured-vi, worker factor a function of its scores",
               f"{here}:fit_coupled_vi", StructuredViOptions, backends=("numpyro",),
               models=STRUCTURED_MODELS),
        _entry("flow-vi", "normalising-flow guide (NumPyro IAF or BNAF), k̂",
               f"{here}:fit_flow_vi", FlowViOptions, backends=("numpyro",)),
    )


def _entry(name, title, fit, options_class, **kw) -> dict:
    return dict(name=name, title=title, fit=fit, options_class=options_class, **kw)

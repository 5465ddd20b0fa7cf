"""The public entry point: :func:`fit_nuts` — one data set, one model, one back-end → a DataTree.

The XLA settings that must precede JAX (host devices, the compilation cache) are in
:mod:`crowdrank.inference.xla_setup`, re-exported here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from crowdrank.models.data import Rankings
from crowdrank.models.model_inputs import ModelInputs, model_inputs
from crowdrank.models.priors import Priors
from crowdrank.models.registry import ModelSpec, name_of

from ..gate import Gate, check
from ..xla_setup import (  # noqa: F401  (re-exported)
    configure_compilation_cache,
    configure_host_devices,
    default_cache_dir,
)
from .config import POINTWISE_LIMIT, NutsConfig
from .datatree import thinned_draws, to_datatree
from .route import route_for


@dataclass
class NutsResult:
    """What :func:`fit_nuts` returns (``docs/contracts.md``)."""

    idata: object
    gate: Gate
    timings: dict = field(default_factory=dict)
    #: NumPyro only: the adapted sampler (:func:`adaptation_summary`): per-chain step size
    #: and inverse mass diagonal beside the per-chain posterior variance of every
    #: unconstrained coordinate — what tells a poorly adapted coordinate from a hard one.
    adaptation: dict | None = None


def fit_nuts(data: Rankings, model: str | ModelSpec, priors: Priors,
             config: NutsConfig | None = None, *, init: dict | None = None, approx=None,
             progress: bool = True, **options) -> NutsResult:
    """Sample ``model`` on ``data`` under ``priors`` with NUTS.

    Parameters
    ----------
    data : Rankings
    model : {"pl", "bt", "crowdbt", "couple", "couple-normalized"} or ModelSpec
        A name of the model registry (looked up once, here) or its spec, which the
        model's inputs carry into the traced programs.
    priors : Priors
        ``λ ~ Normal(mu0, sigma0)``; COUPLE ``η_w ~ Dir(α_w)``; CrowdBT
        ``η_w ~ Beta(a_w, b_w)`` (the same object the online methods read).
    config : NutsConfig, optional
        The sampler's settings (:class:`~crowdrank.inference.nuts.config.NutsConfig`, every
        option and its default); default ``NutsConfig()``.
    init : dict, optional
        A starting point on the constrained scale, e.g. the online posterior means:
        ``{"lambda": (L,), "eta": (W, K)}`` (COUPLE) or ``(W,)``/``(W, 2)`` (CrowdBT: the
        accuracy, or Beta ``(a, b)`` from which the mean is taken; a missing ``eta`` starts
        at its prior mean). It is mapped to the sampler's coordinates
        (:mod:`crowdrank.inference.nuts.starts`) and each chain starts there plus its own uniform
        jitter in ``[-init_jitter, init_jitter]`` on the unconstrained scale (NumPyro; PyMC
        applies its usual ``[-1, 1]`` jitter).
    approx : OnlinePosterior, optional
        Warm start from an approximate posterior (e.g. :func:`crowdrank.inference.online.fit_online`
        on the same data and priors): chain ``c`` starts at its own draw of the
        approximation, mapped to the sampler's coordinates through the exact conditionals
        of the auxiliary variables (:mod:`crowdrank.inference.nuts.starts`), and, with
        ``seed_mass``, the initial inverse mass matrix is the variance of 400 such draws on
        the unconstrained scale. Overrides ``init``.
    progress : bool
        Show a progress bar.
    **options
        Fields of :class:`NutsConfig` replacing those of ``config``
        (``fit_nuts(data, "couple", priors, chains=2, tune=50)``); an unknown name raises
        :class:`TypeError` naming the valid ones.

    Returns
    -------
    NutsResult

    The routes that are neither default nor trusted (the Gibbs route of the worker
    simplexes, staged warm-ups, per-worker levels, refined concentrations) are reached
    through :func:`crowdrank.inference.nuts.experimental.fit_nuts_experimental` only.
    """
    cfg = NutsConfig.build(config, options)
    route = route_for(cfg)
    route.check(cfg, name_of(model), approx)
    plan = _plan(data, model, priors, cfg, route, init, approx)
    t0 = time.perf_counter()
    post, stats, ll, timings = _run(plan, cfg, route, progress)
    timings["total"] = time.perf_counter() - t0
    sampler = timings.pop("sampler", "numpyro")
    pp = timings.pop("predictive_draws", None)
    adaptation = timings.pop("adaptation", None)
    keep = timings.pop("kept_draws", plan.keep)
    backend = cfg.backend
    idata = to_datatree(plan.inputs, data, priors, post, stats, ll, backend=backend, pp=pp,
                        pp_draws=keep,
                        extra_attrs={"chains": cfg.chains, "tune": cfg.tune,
                                     "draws": int(post["lambda"].shape[1]),
                                     "target_accept": cfg.target_accept, "seed": cfg.seed,
                                     "precision": cfg.precision if backend == "numpyro"
                                     else "float64",
                                     "init": plan.init_kind, "simplex": cfg.simplex,
                                     "level": cfg.level, "adapt": route.adapt,
                                     "worker_level": route.worker_level,
                                     "refine_eta": int(route.refine_eta),
                                     "eta_update": route.eta_update,
                                     **route.attrs(),
                                     "prior_only": int(cfg.prior_only),
                                     **({"gradient_ms": float(timings["gradient_ms"]),
                                         "gradient_compile_s": float(timings["gradient_compile"])}
                                        if "gradient_ms" in timings else {}),
                                     **({"init_jitter": float(cfg.init_jitter)}
                                        if plan.init_kind == "given" and backend == "numpyro"
                                        else {}),
                                     "sampler": sampler})
    gate = check(idata)
    return NutsResult(idata=idata, gate=gate, timings=timings, adaptation=adaptation)


@dataclass
class _Plan:
    """What a run needs besides the config: the model's inputs, the sampler's coordinates,
    the starting information and what to store."""

    inputs: ModelInputs
    param: dict
    init_kind: str
    init_values: dict | None
    draws_z: tuple | None
    rng: np.random.Generator
    pointwise: bool
    keep: np.ndarray | None


def _plan(data, model, priors, cfg: NutsConfig, route, init, approx) -> _Plan:
    """Inputs, coordinates and starting information, the random choices in a fixed order
    (one generator keyed on the seed: the same seed gives the same starts)."""
    from .starts import _check_init, approx_draws

    inputs = model_inputs(model, data, priors)
    param = route.param(cfg)
    pointwise, predictive = cfg.pointwise, cfg.predictive
    if cfg.prior_only:
        pointwise = predictive = False
    init_values = None if init is None else _check_init(init, inputs)
    rng = np.random.default_rng([int(cfg.seed), 0x5EED])
    draws_z = None
    if approx is not None:
        approx = route.prepare_approx(inputs, approx, data, cfg, param)
        n = max(cfg.chains, 400 if cfg.seed_mass else cfg.chains)
        draws_z = approx_draws(inputs, approx, data.items, data.workers, n, rng)
        init_kind = "approx"
    elif init_values is not None:
        init_kind = "given"
    else:
        init_kind = "default"
    stored = cfg.chains * cfg.draws * inputs.n_obs <= POINTWISE_LIMIT
    pointwise = stored if pointwise is None else pointwise
    predictive = stored if predictive is None else predictive
    keep = thinned_draws(cfg.chains, cfg.draws) if predictive else None
    return _Plan(inputs, param, init_kind, init_values, draws_z, rng, bool(pointwise), keep)


def _run(plan: _Plan, cfg: NutsConfig, route, progress: bool):
    """The back-end's run from the plan: ``(post, stats, ll, timings)``."""
    if cfg.backend == "numpyro":
        from .numpyro import run_numpyro

        starts, inv_mass = route.numpyro_starts(plan.inputs, cfg, plan.draws_z,
                                                plan.init_values, plan.rng, plan.param)
        return run_numpyro(plan.inputs, cfg, route, starts=starts, inv_mass=inv_mass,
                           progress=progress, pointwise=plan.pointwise, param=plan.param,
                           keep=plan.keep)
    from .pymc import run_pymc
    from .starts import pymc_initvals

    initvals = mass_values = None
    if plan.draws_z is not None or plan.init_values is not None:
        initvals, mass_values = pymc_initvals(plan.inputs, plan.draws_z, plan.init_values,
                                              cfg.chains, plan.rng, plan.param)
    return run_pymc(plan.inputs, cfg, initvals=initvals, jitter=plan.draws_z is None,
                    progress=progress, pointwise=plan.pointwise, param=plan.param,
                    mass_values=mass_values if cfg.seed_mass else None, keep=plan.keep)

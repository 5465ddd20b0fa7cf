"""NUTS runners: one data set, one model, one back-end → an ArviZ DataTree (docs/design.md, Validation).

:func:`fit_nuts` samples a model of :mod:`crowdrank.models.numpyro_models` or
:mod:`crowdrank.models.pymc_models` and returns a :class:`NutsResult` whose ``idata`` has the layout
of ``docs/contracts.md`` (posterior ``lambda`` ``(chain, draw, item)``, ``eta``;
``sample_stats``; ``log_likelihood`` with one value per *source ranking*;
``observed_data``; ``posterior_predictive``: new orders of the observed tasks, drawn by
the observed site's own generative process), coordinates named after the real ids, and whose ``gate`` says whether
the run is trusted as a reference (:mod:`crowdrank.inference.gate`).

Parallel chains (NumPyro)
-------------------------
NumPyro runs chains in parallel with ``pmap`` over XLA *host devices*, whose number is
fixed by ``XLA_FLAGS=--xla_force_host_platform_device_count`` when JAX initialises.
:func:`configure_host_devices` sets that flag — an explicit call, made by the ``crowdrank``
entry point, the benchmarks and the test suite, never an import side effect — **only if JAX
is not imported yet and the user has not set it**, to ``max(4, os.cpu_count())`` so that the
default 4 chains get a device each. The choice of ``chain_method`` is ``"parallel"`` when
there are enough devices, else ``"vectorized"`` (all chains in one program).
"""

from __future__ import annotations

import os
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from crowdrank.models.data import Rankings
from crowdrank.models.errors import UsageError
from crowdrank.models.model_inputs import ModelInputs, model_inputs
from crowdrank.models.priors import Priors

from ..gate import Gate, check


def configure_host_devices(n: int | None = None) -> bool:
    """Ask XLA for ``n`` CPU devices (default ``max(4, cpu_count)``: one per default chain),
    if it is still possible (see module doc). Returns whether the flag was set."""
    if "jax" in sys.modules:
        return False  # too late: the flag is read once, when JAX's backend starts
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_force_host_platform_device_count" in flags:
        return False  # the user's choice wins
    n = n or max(4, os.cpu_count() or 1)
    os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={n}".strip()
    return True

BACKENDS = ("numpyro", "pymc")
#: Warm-up schemes of :func:`fit_nuts` (``adapt``).
ADAPT = ("windowed", "fixed", "pooled")
#: Above this many stored log-lik values (chains × draws × rankings) the pointwise
#: log-likelihood is not stored by default (paper scale: 4·1000·450,000 ≈ 1.8e9 ≈ 7 GB).
POINTWISE_LIMIT = 50_000_000
#: Posterior predictive draws kept (all chains together): the draws are thinned to at most
#: this many; a check's Monte Carlo error then stays below ~2.5 % of a rate.
PREDICTIVE_DRAWS = 400


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


# ---------------------------------------------------------------- public API
def fit_nuts(data: Rankings, model: str, priors: Priors, *, backend: str = "numpyro",
             chains: int = 4, tune: int = 1000, draws: int = 1000,
             target_accept: float = 0.8, seed: int = 0, init: dict | None = None,
             approx=None, progress: bool = True, precision: str = "float64",
             chain_method: str | None = None, pointwise: bool | None = None,
             init_jitter: float = 1.0, simplex: str = "gamma", level: str = "centered",
             seed_mass: bool = True, max_tree_depth: int = 10,
             prior_only: bool = False, predictive: bool | None = None,
             dense_mass: bool = False, adapt: str = "windowed",
             max_draws: int | None = None, worker_level: str = "fixed",
             refine_eta: bool = False, eta_update: str = "nuts",
             gibbs_sweeps: int = 1, gibbs_walk: int = 0,
             gibbs_mode_jump: bool = False) -> NutsResult:
    """Sample ``model`` on ``data`` under ``priors`` with NUTS.

    Parameters
    ----------
    data : Rankings
    model : {"pl", "bt", "crowdbt", "couple", "couple-normalized"}
    priors : Priors
        ``λ ~ Normal(mu0, sigma0)``; COUPLE ``η_w ~ Dir(α_w)``; CrowdBT
        ``η_w ~ Beta(a_w, b_w)`` (the same object the online methods read).
    backend : {"numpyro", "pymc"}
        PyMC uses its default sampler (nutpie when installed and compatible).
    chains, tune, draws, target_accept, seed
        Sampler settings; ``seed`` fixes every random choice.
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
        of the auxiliary variables (:mod:`crowdrank.inference.nuts.starts`), and, with ``seed_mass``
        (NumPyro), the initial inverse mass matrix is the variance of 400 such draws on the
        unconstrained scale. Overrides ``init``.
    init_jitter : float
        NumPyro only: half-width of the per-chain jitter around ``init`` (default 1, as
        PyMC's ``jitter+adapt_diag``). ``0`` starts every chain at the same point, which
        makes R-hat unable to see several modes; use it only for timing experiments.
    progress : bool
        Show a progress bar.
    precision : {"float64", "float32"}
        NumPyro only: precision of the likelihood's elementwise work. Parameters, priors
        and the likelihood's block totals stay float64 (a total of ~10⁶ nats has a float32
        spacing of ~0.1 nat); float32 roughly halves the gradient time at large scale
        (``bench/bench_gradient.py``). PyMC always uses float64.
    chain_method : {"parallel", "vectorized", "sequential"}, optional
        NumPyro: default ``"parallel"`` when there are enough host devices. PyMC:
        ``"sequential"`` runs the chains one after another in this process (``cores=1``:
        no worker processes, for callers that already run fits in parallel processes);
        anything else, one process per chain up to the core count.
    pointwise : bool, optional
        Store the per-ranking log-likelihood (group ``log_likelihood``), computed by the
        PPL's own tool (``numpyro.infer.log_likelihood``, ``pm.compute_log_likelihood``)
        from the observed site; default: only below :data:`POINTWISE_LIMIT` stored values.
    predictive : bool, optional
        Store posterior predictive draws of the rankings (group ``posterior_predictive``,
        variable ``rankings``: new orders of the observed tasks by the model's generative
        process, ``numpyro.infer.Predictive`` / ``pm.sample_posterior_predictive``), from
        at most :data:`PREDICTIVE_DRAWS` draws evenly thinned; default: as ``pointwise``.
    simplex, level : str
        The sampler's coordinates (:mod:`crowdrank.models.numpyro_models`): ``"gamma"`` (exact for
        any concentration) or ``"dirichlet"`` (the PPL's own simplex, kept for comparison);
        ``"centered"`` (mean + zero-sum scores) or ``"iid"``. The model is the same.
    max_tree_depth : int
        NUTS's tree depth limit (both back-ends).
    dense_mass : bool
        Adapt a dense (full) mass matrix instead of a diagonal one (NumPyro
        ``dense_mass=True``; PyMC ``QuadPotentialFullAdapt``), seeded with the diagonal of
        the approximation's variances when ``approx`` is given. Worth it only when the
        posterior has strong linear correlations that a diagonal scaling cannot follow.
    max_draws : int, optional
        NumPyro: while the gate fails on R-hat or ESS alone, continue every chain for
        another ``draws`` (the adapted kernel fixed) up to ``max_draws`` per chain
        (:func:`_extend_sampling`); the DataTree's ``draws`` attr is the number kept.
        Default: no extension.
    prior_only : bool
        Sample the prior alone (the data only give the shapes): the check of a sampler
        against the exact marginals of its prior (:mod:`crowdrank.validation.reference`).
    adapt : {"windowed", "fixed", "pooled"}
        NumPyro, diagonal mass, with ``approx``: how warm-up adapts. ``"windowed"`` (the
        default) is Stan's schedule, each chain re-estimating its mass in doubling
        windows; ``"fixed"`` keeps the mass seeded from the approximation and adapts the
        step size only; ``"pooled"`` adapts the step size for half of ``tune`` with the
        seeded mass, then replaces the mass by the variance of those warm-up draws pooled
        over all chains and adapts the step size again (:func:`_staged_warmup`; the
        paper-scale probes). The target is the same; only the cost differs — but a
        scheme that mixes worse also hides modes worse: on a tiny COUPLE data set
        ``"fixed"`` with ``refine_eta`` disagreed with the default on 2 of 18 means
        (|z| 3.8), and on the paper-scale proxy neither staged scheme beat the default
        (``docs/notes.md``, paper scale). Trust the gate, not the scheme.
    worker_level : {"fixed", "approx"}
        NumPyro, Gamma simplex, with ``approx``: the law of each worker's auxiliary
        magnitude ``log S`` (exact for any law): ``"fixed"`` sd
        :data:`crowdrank.models.model_inputs.LEVEL_SD` for everyone, ``"approx"`` per worker the sd of
        its pinned ``log η_t`` under the approximation
        (:func:`crowdrank.inference.nuts.starts.worker_level_sd`), which removes the stiffest
        directions when the data pin ``η`` tightly (hundreds of tasks per worker).
    refine_eta : bool
        COUPLE with ``approx``: replace the approximation's worker concentrations by
        ``α + n_w``, the EM expected offset counts given its item means
        (:func:`crowdrank.inference.nuts.starts.refine_worker_alpha`), before they choose the boost
        mask, the starts and the seeded mass — for data where the one-pass update leaves
        small components at their prior. Changes only the sampler's efficiency.
    eta_update : {"nuts", "gibbs"}
        How the worker simplexes move. ``"nuts"`` (default): jointly with ``λ`` in NUTS
        (``simplex``). ``"gibbs"`` (NumPyro, model ``"couple"``): NUTS moves ``λ`` given
        ``η`` and each iteration first runs ``gibbs_sweeps`` sweeps of the exact Gibbs step
        of ``η`` given ``λ`` (:mod:`crowdrank.inference.nuts.gibbs`; ``numpyro.infer.HMCGibbs``): the
        gradient sees only ``λ``, and a worker whose ``η_t`` has a prior spike beside a data
        mode is moved by exact conditional draws instead of a trajectory. ``simplex``,
        ``worker_level`` and ``adapt`` keep their defaults; ``approx``, ``init``,
        ``max_draws`` and ``refine_eta`` work (the seeded mass is ``λ``'s only);
        ``NutsResult.adaptation`` is None. With ``approx`` each iteration also starts
        with exact Metropolis–Hastings jumps of every worker's row and of each entry
        (:func:`crowdrank.inference.nuts.gibbs.jump`, :func:`crowdrank.inference.nuts.gibbs.entry_jump`; proposal
        :func:`gibbs_jump_proposal`), which free an entry stuck in its prior spike;
        without ``approx``, no jumps. Measured on the paper-scale proxy: ~13 leapfrogs per
        draw instead of ~110, but ``η`` not better mixed than under joint NUTS
        (docs/design.md, Sect. 5.3a): not the default. Other models (normalised COUPLE's ``k!``
        normaliser breaks the augmentation) and PyMC raise :class:`UsageError`.
    gibbs_sweeps : int
        Sweeps of the Gibbs step per iteration (``eta_update="gibbs"``); each costs a few
        gathers over the stages, no gradient.
    gibbs_walk : int
        ``eta_update="gibbs"``: random-walk Metropolis steps of each worker's row per
        iteration after the sweeps (:func:`crowdrank.inference.nuts.gibbs.walk`; exact, one likelihood
        pass each, no gradient). Default 0.
    gibbs_mode_jump : bool
        ``eta_update="gibbs"`` with ``approx``: each iteration first one independence
        Metropolis–Hastings move of every worker's row from a mixture over which of the
        two smallest-``α`` entries sit in their prior spike, each component a Laplace fit
        (Newton at the approximation's scores, refitted by a few steps at the current
        ``λ``; :func:`crowdrank.inference.nuts.gibbs.mode_jump`; exact whatever the fit). Measured on the
        paper-scale proxy: η min bulk ESS 18.6 → 74 but not yet trusted, and only with
        ``gibbs_walk`` (docs/design.md, Sect. 5.3a). Default off.

    Returns
    -------
    NutsResult
    """
    if backend not in BACKENDS:
        raise UsageError(f"unknown backend {backend!r}; expected one of {BACKENDS}")
    if chains < 1 or draws < 1 or tune < 0:
        raise UsageError("need chains >= 1, draws >= 1 and tune >= 0")
    if not 0 < target_accept < 1:
        raise UsageError("target_accept must be in (0, 1)")
    if precision not in ("float64", "float32"):
        raise UsageError("precision must be 'float64' or 'float32'")
    if not (np.isfinite(init_jitter) and init_jitter >= 0):
        raise UsageError("init_jitter must be a finite number >= 0")
    if adapt not in ADAPT:
        raise UsageError(f"adapt must be one of {ADAPT}, got {adapt!r}")
    if adapt != "windowed" and (backend != "numpyro" or dense_mass or approx is None):
        raise UsageError(f"adapt={adapt!r} needs backend='numpyro', a diagonal mass and "
                         "approx= (its mass is seeded from the approximation)")
    if worker_level not in ("fixed", "approx"):
        raise UsageError(f"worker_level must be 'fixed' or 'approx', got {worker_level!r}")
    if worker_level == "approx" and (backend != "numpyro" or approx is None
                                     or simplex != "gamma"):
        raise UsageError("worker_level='approx' needs backend='numpyro', simplex='gamma' "
                         "and approx=")
    if refine_eta and (approx is None or model != "couple"):
        raise UsageError("refine_eta needs model='couple' and approx=")
    if simplex not in ("gamma", "dirichlet") or level not in ("centered", "iid"):
        raise UsageError(f"simplex must be 'gamma' or 'dirichlet' and level 'centered' or "
                         f"'iid', got {simplex!r}, {level!r}")
    _check_eta_update(eta_update, gibbs_sweeps, gibbs_walk, backend=backend, model=model,
                      simplex=simplex, worker_level=worker_level, adapt=adapt,
                      chain_method=chain_method)
    gibbs = eta_update == "gibbs"
    inputs = model_inputs(model, data, priors)
    param = {"simplex": "gibbs" if gibbs else simplex, "level": level}
    if prior_only:
        pointwise = predictive = False
    init_values = None if init is None else _check_init(init, inputs)
    starts, draws_z, jump_beta, mode_center = None, None, None, None
    if gibbs_mode_jump and not (gibbs and approx is not None):
        raise UsageError("gibbs_mode_jump needs eta_update='gibbs' and approx= (the "
                         "mixture is fitted at the approximation's scores)")
    rng = np.random.default_rng([int(seed), 0x5EED])
    if approx is not None:
        from crowdrank.models.model_inputs import boost_mask

        from .starts import approx_alpha, approx_draws
        if refine_eta:
            approx = _refined_approx(inputs, approx, data)
        if gibbs:
            jump_beta = gibbs_jump_proposal(inputs, approx, data)
            if gibbs_mode_jump:
                mode_center = gibbs_mode_center(approx, data)
        if inputs.has_eta and simplex == "gamma" and not gibbs:
            # entries the approximation says the data pin: one plain Gamma coordinate
            a_post = approx_alpha(inputs, approx, data.workers)
            param["boost"] = boost_mask(inputs.alpha, a_post)
            if worker_level == "approx":
                from crowdrank.models.model_inputs import INFORMED_ALPHA

                from .starts import worker_level_sd
                param["level_sd"] = worker_level_sd(a_post, a_post >= INFORMED_ALPHA)
        lam_d, leta_d = approx_draws(inputs, approx, data.items, data.workers,
                                     max(chains, 400 if seed_mass else chains), rng)
        draws_z = (lam_d, leta_d)
        init_kind = "approx"
    elif init_values is not None:
        init_kind = "given"
    else:
        init_kind = "default"
    if pointwise is None:
        pointwise = chains * draws * inputs.n_obs <= POINTWISE_LIMIT
    if predictive is None:
        predictive = chains * draws * inputs.n_obs <= POINTWISE_LIMIT
    keep = _thinned_draws(chains, draws) if predictive else None
    t0 = time.perf_counter()
    if backend == "numpyro":
        if gibbs and draws_z is not None:
            starts, inv_mass = gibbs_starts(inputs, *draws_z, chains, rng, level,
                                            seed_mass=seed_mass)
        elif gibbs and init_values is not None:
            starts, inv_mass = gibbs_jittered_starts(inputs, init_values, chains, seed,
                                                     init_jitter, level), None
        elif draws_z is not None:
            starts, inv_mass = numpyro_starts_from_draws(inputs, *draws_z, chains, rng, param,
                                                         seed_mass=seed_mass)
        elif init_values is not None:
            starts, inv_mass = jittered_starts(inputs, init_values, chains, seed, init_jitter,
                                               **param), None
        else:
            inv_mass = None
        post, stats, ll, timings = _run_numpyro(
            inputs, chains=chains, tune=tune, draws=draws, target_accept=target_accept,
            seed=seed, starts=starts, inv_mass=inv_mass, progress=progress,
            precision=precision, chain_method=chain_method, pointwise=pointwise,
            param=param, max_tree_depth=max_tree_depth, prior_only=prior_only, keep=keep,
            dense_mass=dense_mass, adapt=adapt, max_draws=max_draws,
            gibbs_sweeps=gibbs_sweeps, jump_beta=jump_beta, gibbs_walk=gibbs_walk,
            mode_center=mode_center)
        keep = timings.pop("kept_draws", keep)
    else:
        initvals = mass_values = None
        if draws_z is not None or init_values is not None:
            initvals, mass_values = pymc_initvals(inputs, draws_z, init_values, chains, rng,
                                                  param)
        post, stats, ll, timings = _run_pymc(
            inputs, chains=chains, tune=tune, draws=draws, target_accept=target_accept,
            seed=seed, initvals=initvals, jitter=draws_z is None, progress=progress,
            mass_values=mass_values if seed_mass else None,
            pointwise=pointwise, param=param, max_tree_depth=max_tree_depth,
            prior_only=prior_only, keep=keep,
            cores=1 if chain_method == "sequential" else None, dense_mass=dense_mass)
    timings["total"] = time.perf_counter() - t0
    sampler = timings.pop("sampler", "numpyro")
    pp = timings.pop("predictive_draws", None)
    adaptation = timings.pop("adaptation", None)
    idata = to_datatree(inputs, data, priors, post, stats, ll, backend=backend, pp=pp,
                        pp_draws=keep,
                        extra_attrs={"chains": chains, "tune": tune,
                                     "draws": int(post["lambda"].shape[1]),
                                     "target_accept": target_accept, "seed": seed,
                                     "precision": precision if backend == "numpyro"
                                     else "float64",
                                     "init": init_kind, "simplex": simplex, "level": level,
                                     "adapt": adapt, "worker_level": worker_level,
                                     "refine_eta": int(refine_eta),
                                     "eta_update": eta_update,
                                     **({"gibbs_sweeps": int(gibbs_sweeps),
                                         "gibbs_walk": int(gibbs_walk),
                                         "gibbs_jump": int(jump_beta is not None),
                                         "gibbs_mode_jump": int(mode_center is not None)}
                                        if gibbs else {}),
                                     "prior_only": int(prior_only),
                                     **({"init_jitter": float(init_jitter)}
                                        if init_kind == "given" and backend == "numpyro"
                                        else {}),
                                     "sampler": sampler})
    gate = check(idata)
    return NutsResult(idata=idata, gate=gate, timings=timings, adaptation=adaptation)


#: How :func:`fit_nuts` moves the worker simplexes (``eta_update``).
ETA_UPDATE = ("nuts", "gibbs")


def _check_eta_update(eta_update, gibbs_sweeps, gibbs_walk=0, *, backend, model, simplex, worker_level,
                      adapt, chain_method):
    """Reject the combinations the Gibbs route does not support, saying why."""
    if eta_update not in ETA_UPDATE:
        raise UsageError(f"eta_update must be one of {ETA_UPDATE}, got {eta_update!r}")
    if eta_update != "gibbs":
        return
    if backend != "numpyro":
        raise UsageError("eta_update='gibbs' needs backend='numpyro' (numpyro.infer.HMCGibbs; "
                         "PyMC has no such step here)")
    if model != "couple":
        why = (" (its k!-ordering normaliser is not a product of stagewise mixtures, so "
               "the offset/slack augmentation is not exact)" if model == "couple-normalized"
               else " (the augmentation is COUPLE's stagewise mixture)")
        raise UsageError(f"eta_update='gibbs' supports model='couple' only, got "
                         f"{model!r}{why}")
    if simplex != "gamma" or worker_level != "fixed" or adapt != "windowed":
        raise UsageError("eta_update='gibbs' holds the worker table in its own site: leave "
                         "simplex='gamma', worker_level='fixed' and adapt='windowed' at "
                         "their defaults")
    if chain_method == "vectorized":
        raise UsageError("eta_update='gibbs' cannot vectorise chains (numpyro's Gibbs "
                         "kernels take one key): use chain_method='parallel' or "
                         "'sequential'")
    if int(gibbs_sweeps) < 1 or int(gibbs_walk) < 0:
        raise UsageError("gibbs_sweeps must be >= 1 and gibbs_walk >= 0")


#: The Gibbs route's jump proposal ``Dirichlet(α + JUMP_SHRINK·n̂)``: half the expected
#: counts, a proposal wider than the conditional (an independence proposal must not be
#: narrower than its target in any direction, or the chain sticks where it is too thin).
JUMP_SHRINK = 0.5


def gibbs_jump_proposal(inputs: ModelInputs, approx, data: Rankings) -> np.ndarray:
    """``β = α + JUMP_SHRINK·n̂`` ``(W, K)``: the proposal of :func:`crowdrank.inference.nuts.gibbs.jump`,
    ``n̂`` the EM expected offset counts at the approximation's item means
    (:func:`crowdrank.inference.nuts.starts.refine_worker_alpha`). Fixed before sampling (it depends on
    the data and the approximation only), as an independence proposal must be."""
    from .starts import _positions, refine_worker_alpha

    ix = _positions(approx.items, data.items, "item")
    a0 = np.asarray(inputs.alpha, float)
    n_hat = refine_worker_alpha(inputs, np.asarray(approx.mu, float)[ix], a0) - a0
    return a0 + JUMP_SHRINK * np.maximum(n_hat, 0.0)


def gibbs_mode_center(approx, data: Rankings) -> np.ndarray:
    """The approximation's item means in ``data``'s item order: where
    :func:`crowdrank.inference.nuts.gibbs.mode_fit` fits the mode jump's mixture (fixed before sampling)."""
    from .starts import _positions

    return np.asarray(approx.mu, float)[_positions(approx.items, data.items, "item")]


def _gibbs_values(inputs: ModelInputs, lam, log_eta, rng: np.random.Generator,
                  level: str) -> dict:
    """Sampler values of the Gibbs route for ``(λ, log η)`` (any leading batch dims): the
    item sites as :func:`crowdrank.inference.nuts.starts.sampler_values`, and ``eta_log_g = log η +
    log S`` with ``S ~ Gamma(Σα)`` drawn independently — exact, since ``g/S ~ Dir(α)`` is
    independent of ``S = Σ g ~ Gamma(Σα)``."""
    from .starts import item_values

    out = item_values(inputs, lam, level)
    log_eta = np.asarray(log_eta, float)
    S = rng.gamma(np.asarray(inputs.alpha, float).sum(axis=1),
                  size=log_eta.shape[:-1])
    out["eta_log_g"] = log_eta + np.log(S)[..., None]
    return out


def gibbs_starts(inputs: ModelInputs, lam_draws, log_eta_draws, chains: int,
                 rng: np.random.Generator, level: str, *, seed_mass: bool = True):
    """:func:`numpyro_starts_from_draws` for the Gibbs route: chain starts from the first
    ``chains`` draws (``eta_log_g`` on its own scale, the identity bijection) and the
    seeded inverse mass of the NUTS block alone (the item sites, sorted by name)."""
    param = {"simplex": "gibbs", "level": level}
    z = _unconstrain(inputs, _gibbs_values(inputs, lam_draws, log_eta_draws, rng, level),
                     param)
    return _starts_and_mass(z, chains, seed_mass, mass_sites=[k for k in sorted(z)
                                                              if k != "eta_log_g"])


def gibbs_jittered_starts(inputs: ModelInputs, init: dict, chains: int, seed: int,
                          jitter: float, level: str) -> dict:
    """:func:`jittered_starts` for the Gibbs route (the jitter on the NUTS block only; the
    worker table's own randomness is its ``S`` draw)."""
    from .starts import point_log_eta

    rng = np.random.default_rng([int(seed), 0x5EED])
    lam = np.broadcast_to(np.asarray(init["lambda"], float), (chains, inputs.n_items))
    leta = np.broadcast_to(point_log_eta(inputs, init.get("eta")),
                           (chains, inputs.n_workers, inputs.K))
    param = {"simplex": "gibbs", "level": level}
    z = _unconstrain(inputs, _gibbs_values(inputs, lam, leta, rng, level), param)
    out = {k: z[k] + (0.0 if k == "eta_log_g" else jitter)
           * rng.uniform(-1.0, 1.0, size=z[k].shape) for k in sorted(z)}
    return out if chains > 1 else {k: v[0] for k, v in out.items()}


# ---------------------------------------------------------------- init
def _refined_approx(inputs: ModelInputs, approx, data: Rankings):
    """A shallow copy of ``approx`` whose COUPLE worker concentrations are refined by
    :func:`crowdrank.inference.nuts.starts.refine_worker_alpha` at its item means."""
    import copy

    from .starts import _positions, refine_worker_alpha

    ix = _positions(approx.items, data.items, "item")
    iw = _positions(approx.workers, data.workers, "worker")
    alpha = np.array(approx.alpha, float)
    alpha[iw, : inputs.K] = refine_worker_alpha(inputs, np.asarray(approx.mu, float)[ix],
                                                inputs.alpha)
    out = copy.copy(approx)
    out.alpha = alpha
    return out


def _check_init(init: dict, inputs: ModelInputs) -> dict:
    """Validate a starting point and move it strictly inside the support."""
    out = {}
    lam = np.asarray(init.get("lambda"), float)
    if lam.shape != (inputs.n_items,) or not np.all(np.isfinite(lam)):
        raise UsageError(f"init['lambda'] must be {inputs.n_items} finite values, "
                         f"got shape {lam.shape}")
    out["lambda"] = lam
    family = inputs.spec.worker_prior
    if family == "beta" and init.get("eta") is not None:
        eta = np.asarray(init["eta"], float)
        if eta.ndim == 2 and eta.shape[1] == 2:  # Beta (a, b): start at the mean
            eta = eta[:, 0] / eta.sum(axis=1)
        if eta.shape != (inputs.n_workers,):
            raise UsageError(f"init['eta'] for CrowdBT must be ({inputs.n_workers},) "
                             f"or ({inputs.n_workers}, 2), got {eta.shape}")
        out["eta"] = np.clip(eta, 1e-3, 1 - 1e-3)
    elif family == "dirichlet" and init.get("eta") is not None:
        eta = np.asarray(init["eta"], float)
        if eta.ndim != 2 or eta.shape[0] != inputs.n_workers or eta.shape[1] < inputs.K:
            raise UsageError(f"init['eta'] for COUPLE must be ({inputs.n_workers}, "
                             f">={inputs.K}), got {eta.shape}")
        eta = np.clip(eta[:, : inputs.K], 1e-6, None)  # keep the start off the boundary
        out["eta"] = eta / eta.sum(axis=1, keepdims=True)
    return out


# ---------------------------------------------------------------- NumPyro
def _site_bijections(inputs: ModelInputs, param: dict) -> dict:
    """``{site: bijection from unconstrained to constrained}`` of the NumPyro program."""
    import jax
    from numpyro import handlers
    from numpyro.distributions import biject_to

    from crowdrank.models import numpyro_models as npm

    with jax.enable_x64(True), handlers.seed(rng_seed=0):
        tr = handlers.trace(npm.model).get_trace(inputs, prior_only=True, **param)
    return {k: biject_to(v["fn"].support) for k, v in tr.items()
            if v["type"] == "sample" and not v.get("is_observed", False)}


def _unconstrain(inputs: ModelInputs, values: dict, param: dict) -> dict:
    """Constrained site values (any leading batch dims) → unconstrained, float64 NumPy."""
    import jax

    bij = _site_bijections(inputs, param)
    with jax.enable_x64(True):
        return {k: np.asarray(bij[k].inv(jax.numpy.asarray(v, jax.numpy.float64)), float)
                for k, v in values.items()}


def jittered_starts(inputs: ModelInputs, init: dict, chains: int, seed: int,
                    jitter: float = 1.0, *, simplex: str = "gamma",
                    level: str = "centered", boost=None) -> dict:
    """Per-chain NumPyro starting points around ``init``, on the unconstrained scale.

    ``init`` (constrained ``λ``, ``η``, as checked by :func:`_check_init`) is mapped to the
    sampler's coordinates (:func:`crowdrank.inference.nuts.starts.sampler_values`: each chain draws its
    own auxiliary Gamma variables given ``η``) and to the unconstrained scale through
    NumPyro's own bijections; chain ``c`` then starts at that point plus an independent
    ``Uniform(-jitter, jitter)`` offset on every coordinate, PyMC's ``jitter+adapt_diag``
    rule.

    Why: with one common start, every chain follows the same path into the same basin,
    and R-hat, which compares chains, cannot see a second mode or a chain that has not
    left the start's neighbourhood; dispersed starts are what make the between-chain
    comparison informative. Random choices come from ``numpy.random.default_rng`` keyed on
    ``seed``, so the same seed gives the same starts (and the same draws). A missing
    ``eta`` starts at its prior mean. Returns ``{site: (chains, ...)}``, or the
    unbatched point when ``chains == 1``.
    """
    from .starts import point_log_eta, sampler_values

    rng = np.random.default_rng([int(seed), 0x5EED])
    lam = np.broadcast_to(np.asarray(init["lambda"], float), (chains, inputs.n_items))
    leta = point_log_eta(inputs, init.get("eta"))
    if leta is not None:
        leta = np.broadcast_to(leta, (chains,) + leta.shape)
    param = {"simplex": simplex, "level": level, "boost": boost}
    vals = sampler_values(inputs, lam, leta, rng, **param)
    z = _unconstrain(inputs, vals, param)
    out = {k: z[k] + jitter * rng.uniform(-1.0, 1.0, size=z[k].shape) for k in sorted(z)}
    return out if chains > 1 else {k: v[0] for k, v in out.items()}


def numpyro_starts_from_draws(inputs: ModelInputs, lam_draws, log_eta_draws, chains: int,
                              rng: np.random.Generator, param: dict, *,
                              seed_mass: bool = True):
    """Chain starts (the first ``chains`` draws) and the initial inverse mass matrix (the
    variance of all draws, per unconstrained coordinate, flattened in NumPyro's order:
    sites sorted by name, each raveled) from draws ``(λ, log η)`` of an approximation."""
    from .starts import sampler_values

    vals = sampler_values(inputs, lam_draws, log_eta_draws, rng, **param)
    z = _unconstrain(inputs, vals, param)
    return _starts_and_mass(z, chains, seed_mass, mass_sites=sorted(z))


def _starts_and_mass(z: dict, chains: int, seed_mass: bool, mass_sites: list):
    """Chain starts (the first ``chains`` draws of every site in ``z``, unconstrained) and,
    from 20 draws on, the initial inverse mass: each draw-variance of ``mass_sites``'
    coordinates, in NumPyro's order (sites sorted by name, each raveled)."""
    starts = {k: z[k][:chains] for k in sorted(z)}
    if chains == 1:
        starts = {k: v[0] for k, v in starts.items()}
    n = next(iter(z.values())).shape[0]
    inv_mass = None
    if seed_mass and n >= 20:
        var = np.concatenate([z[k].reshape(n, -1).var(axis=0) for k in mass_sites])
        # a coordinate the draws barely move (or move wildly) must not freeze or blow up
        # the first adaptation window
        inv_mass = np.clip(var, 1e-4, 1e2)
    return starts, inv_mass


def _run_numpyro(inputs, *, chains, tune, draws, target_accept, seed, starts, inv_mass,
                 progress, precision, chain_method, pointwise, param, max_tree_depth=10,
                 prior_only=False, keep=None, dense_mass=False, adapt="windowed",
                 max_draws=None, gibbs_sweeps=1, jump_beta=None, gibbs_walk=0,
                 mode_center=None):
    import jax
    from numpyro.infer import MCMC, NUTS, HMCGibbs, init_to_median

    from crowdrank.models import numpyro_models as npm

    gibbs = param.get("simplex") == "gibbs"
    if chain_method is None:
        # numpyro's Gibbs kernels take one key: no vectorised chains
        chain_method = ("parallel" if jax.local_device_count() >= chains
                        else "sequential" if gibbs else "vectorized")
    timings = {}
    # 64-bit types on for the whole run, set globally rather than by a context manager:
    # the progress bar's host callback runs on another thread, which does not see a
    # thread-local x64 setting and then returns int32 where int64 was traced.
    prev_x64 = bool(jax.config.jax_enable_x64)
    jax.config.update("jax_enable_x64", True)
    try:
        loglik_dtype = "float32" if precision == "float32" else None

        def prog():
            # the sampler's form of the density: the site's total (models.numpyro_models)
            return npm.model(inputs, loglik_dtype=loglik_dtype, prior_only=prior_only,
                             pointwise=False, **param)

        init_params = None
        if starts is not None:
            init_params = {k: jax.numpy.asarray(v, jax.numpy.float64) for k, v in starts.items()}
        if inv_mass is not None and dense_mass:
            inv_mass = np.diag(inv_mass)
        def make(mass, adapt_mass):
            nuts = NUTS(prog, target_accept_prob=target_accept,
                        init_strategy=init_to_median(num_samples=15),
                        inverse_mass_matrix=None if mass is None
                        else jax.numpy.asarray(mass), max_tree_depth=max_tree_depth,
                        dense_mass=dense_mass, adapt_mass_matrix=adapt_mass)
            if not gibbs:
                return nuts
            # the worker table moves by the exact Gibbs step given λ (inference.gibbs);
            # NUTS adapts and moves λ given η
            from .gibbs import make_gibbs_fn
            return HMCGibbs(nuts, gibbs_fn=make_gibbs_fn(inputs, gibbs_sweeps, prior_only,
                                                         jump_beta, gibbs_walk, mode_center),
                            gibbs_sites=["eta_log_g"])

        def make_mcmc(kernel, n_warm):
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="There are not enough devices")
                return MCMC(kernel, num_warmup=n_warm, num_samples=draws, num_chains=chains,
                            chain_method=chain_method, progress_bar=progress)

        z0 = None if starts is None else {k: (v if chains == 1 else v[0])
                                           for k, v in starts.items()}
        timings.update(gradient_timing(inputs, z=z0, param=param, loglik_dtype=loglik_dtype))
        if gibbs:
            timings.update(gibbs_timing(inputs, gibbs_sweeps, z=z0, level=param["level"],
                                        walk_steps=gibbs_walk))
        extra = ("diverging", "energy", "num_steps", "accept_prob", "adapt_state.step_size",
                 "potential_energy")
        # HMCGibbs keeps the NUTS block's state as ``hmc_state``
        pre = "hmc_state." if gibbs else ""
        extra = tuple(pre + f for f in extra)
        key = jax.random.PRNGKey(seed)
        t = time.perf_counter()
        if adapt == "windowed":
            mcmc = make_mcmc(make(inv_mass, True), tune)
            mcmc.warmup(key, extra_fields=(pre + "num_steps",), collect_warmup=True,
                        init_params=init_params)
            # JAX dispatches asynchronously: wait for the state, or it lands in "sampling"
            jax.block_until_ready(mcmc.post_warmup_state)
            if tune > 0:
                timings["warmup_gradients"] = float(np.asarray(
                    mcmc.get_extra_fields()[pre + "num_steps"]).sum())
        else:
            mcmc = _staged_warmup(inputs, make, make_mcmc, key, tune, inv_mass, init_params,
                                  param, adapt, timings)
        timings["warmup"] = time.perf_counter() - t
        t = time.perf_counter()
        mcmc.run(mcmc.post_warmup_state.rng_key, extra_fields=extra)
        samples = jax.block_until_ready(mcmc.get_samples(group_by_chain=True))
        ex = _fields(mcmc, pre)
        samples, ex, rounds = _extend_sampling(mcmc, samples, ex, extra, chains, draws,
                                               max_draws, pre)
        timings["sampling"] = time.perf_counter() - t
        timings["sampling_rounds"] = float(rounds)
        if gibbs:
            timings["gibbs_sweeps"] = float(gibbs_sweeps)
        else:
            timings["adaptation"] = adaptation_summary(inputs, param, mcmc, samples, chains)
        if keep is not None and rounds > 1:   # thin the longer run as fit_nuts would
            keep = _thinned_draws(chains, rounds * draws)
            timings["kept_draws"] = keep
        post = {k: np.asarray(samples[k], float) for k in ("lambda", "eta") if k in samples}
        n_steps = np.asarray(ex["num_steps"])
        timings["sampling_gradients"] = float(n_steps.sum())
        stats = {
            "diverging": np.asarray(ex["diverging"], bool),
            "energy": np.asarray(ex["energy"], float),
            "lp": -np.asarray(ex["potential_energy"], float),
            "n_steps": n_steps.astype(np.int64),
            # Depth of the trajectory tree: a full tree of depth d has 2^d - 1 leapfrogs.
            "tree_depth": np.ceil(np.log2(n_steps + 1.0)).astype(np.int64),
            "acceptance_rate": np.asarray(ex["accept_prob"], float),
            "step_size": np.asarray(ex["adapt_state.step_size"], float),
        }
        ll = None
        if pointwise:
            t = time.perf_counter()
            ll = _numpyro_pointwise(inputs, samples, param)
            timings["pointwise"] = time.perf_counter() - t
        if keep is not None:
            t = time.perf_counter()
            timings["predictive_draws"] = _numpyro_predictive(inputs, samples, param, keep,
                                                              seed)
            timings["predictive"] = time.perf_counter() - t
    finally:
        jax.config.update("jax_enable_x64", prev_x64)
    return post, stats, ll, timings


def _fields(mcmc, pre: str = "") -> dict:
    """The run's extra fields ``(chain, draw)`` by their plain names (``pre`` stripped:
    ``"hmc_state."`` for ``HMCGibbs``)."""
    ex = mcmc.get_extra_fields(group_by_chain=True)
    return {k[len(pre):] if pre and k.startswith(pre) else k: v for k, v in ex.items()}


def _extend_sampling(mcmc, samples: dict, ex: dict, extra, chains: int, draws: int,
                     max_draws: int | None, pre: str = ""):
    """More rounds of ``draws`` per chain while the gate fails on R-hat or ESS alone.

    Why: a posterior with a rare transition (at the medium scale, a worker whose ``η_K``
    has both a prior spike at 0 and a data mode near 0.7, ``docs/notes.md``) needs more
    draws than a fixed budget guesses; the gate says so after the fact. Each round
    continues every chain from its last state with the adapted kernel *fixed* (no
    adaptation after warm-up), so the rounds together are one longer run of the same
    Markov chains. Stops at ``max_draws`` per chain, or as soon as the gate passes, or
    when it fails for a reason more draws cannot fix (divergences, low E-BFMI).
    Returns the concatenated samples and extra fields, and the number of rounds."""
    import jax

    rounds = 1
    if not max_draws or chains < 2:
        return samples, ex, rounds
    while (rounds + 1) * draws <= max_draws:
        gate = _gate_of(samples, ex)
        if gate.trusted or any("diverg" in r or "BFMI" in r for r in gate.reasons):
            break
        mcmc.post_warmup_state = mcmc.last_state
        mcmc.run(mcmc.post_warmup_state.rng_key, extra_fields=extra)
        more = jax.block_until_ready(mcmc.get_samples(group_by_chain=True))
        more_ex = _fields(mcmc, pre)
        samples = {k: np.concatenate([np.asarray(samples[k]), np.asarray(more[k])], axis=1)
                   for k in samples}
        ex = {k: np.concatenate([np.asarray(ex[k]), np.asarray(more_ex[k])], axis=1)
              for k in ex}
        rounds += 1
    return samples, ex, rounds


def _gate_of(samples: dict, ex: dict) -> Gate:
    """The gate (:func:`crowdrank.inference.gate.check`) on raw NumPyro draws ``(chain, draw, ...)``:
    the model's parameters ``lambda`` (and ``eta``), divergences and energies."""
    from arviz_base import from_dict

    post = {k: np.asarray(samples[k], float) for k in ("lambda", "eta") if k in samples}
    stats = {"diverging": np.asarray(ex["diverging"], bool),
             "energy": np.asarray(ex["energy"], float)}
    return check(from_dict({"posterior": post, "sample_stats": stats}))


#: Share of ``tune`` spent in the first, step-size-only stage of ``adapt="pooled"``.
POOLED_FIRST = 0.5


def _staged_warmup(inputs, make, make_mcmc, key, tune, inv_mass, init_params, param, adapt,
                   timings):
    """Warm-up with a fixed diagonal mass per stage and only the step size adapted.

    ``adapt="fixed"``: one stage, the seeded mass (the approximation's variances) kept.
    ``adapt="pooled"``: a first stage (``POOLED_FIRST·tune`` iterations) from the seeded
    mass; the variance of the second half of its draws, **pooled over all chains** and
    computed on the sampler's unconstrained scale, becomes the mass of a second stage
    that re-adapts the step size from the first stage's last states.

    Why: Stan's windowed adaptation (NumPyro's default) re-estimates each chain's mass from
    its own 25- and 50-draw windows; with thousands of coordinates the smallest of those
    noisy variances sets the step size and the longest sets the trajectory, so a good
    seeded mass is replaced by a worse one (``docs/notes.md``, paper scale). Pooling the
    chains gives ``chains×`` more draws per estimate. Exactness does not depend on the
    mass: warm-up draws are discarded and the mass and step size are fixed while
    sampling, so the chains target the posterior whatever mass warm-up chose.

    Returns the last stage's ``MCMC`` (its warm-up done); ``timings`` gains
    ``warmup_gradients`` and, per stage, ``warmup_gradients_<i>``/``warmup_iters_<i>``.
    """
    import jax

    if inv_mass is None:
        raise UsageError(f"adapt={adapt!r} needs a seeded mass matrix: pass approx= "
                         "(a warm start from an approximate posterior)")
    n1 = tune if adapt == "fixed" else max(1, round(POOLED_FIRST * tune))
    stages = [n1] + ([tune - n1] if adapt == "pooled" and tune - n1 > 0 else [])
    mass, state, total = np.asarray(inv_mass, float), init_params, 0.0
    for i, n in enumerate(stages):
        key, sub = jax.random.split(key)
        mcmc = make_mcmc(make(mass, False), n)
        mcmc.warmup(sub, extra_fields=("num_steps",), collect_warmup=True, init_params=state)
        jax.block_until_ready(mcmc.post_warmup_state)
        steps = float(np.asarray(mcmc.get_extra_fields()["num_steps"]).sum())
        timings[f"warmup_gradients_{i + 1}"], timings[f"warmup_iters_{i + 1}"] = steps, n
        total += steps
        if i + 1 < len(stages):
            mass = pooled_variance(inputs, mcmc.get_samples(group_by_chain=True), param)
            state = mcmc.last_state.z
    timings["warmup_gradients"] = total
    return mcmc


def pooled_variance(inputs: ModelInputs, samples: dict, param: dict) -> np.ndarray:
    """Diagonal inverse mass from warm-up draws ``{site: (chain, draw, ...)}``: the variance
    of the second half of the draws on the unconstrained scale, pooled over chains, in
    NumPyro's order (sites sorted by name, each raveled), regularised as Stan does
    (``n/(n+5)·var + 1e-3·5/(n+5)``)."""
    sites = _site_bijections(inputs, param)
    vals = {k: np.asarray(v, float) for k, v in samples.items() if k in sites}
    C, D = next(iter(vals.values())).shape[:2]
    half = {k: v[:, D // 2:] for k, v in vals.items()}
    z = _unconstrain(inputs, half, param)
    n = C * (D - D // 2)
    var = np.concatenate([z[k].reshape(n, -1).var(axis=0) for k in sorted(z)])
    return (n / (n + 5.0)) * var + 1e-3 * (5.0 / (n + 5.0))


def coordinate_names(inputs: ModelInputs, param: dict) -> list[str]:
    """Names of NumPyro's unconstrained coordinates in its flattening order (sites sorted by
    name, each raveled): ``lambda_mean``, ``lambda_c[i]`` (the zero-sum block's ``L − 1``
    free coordinates), ``eta_g[w,t]``/``eta_u[w,t]``/``eta_e[w,t]`` (worker ``w``'s entry
    ``t``, as :func:`crowdrank.models.model_inputs.boost_split` orders them), ``eta[...]`` otherwise."""
    from crowdrank.models.model_inputs import boost_split

    bij = _site_bijections(inputs, param)
    sizes = {k: int(np.prod(np.shape(v))) for k, v in
             _unconstrain(inputs, _prior_point(inputs, param), param).items()}
    big, small = (boost_split(inputs.alpha, param.get("boost")) if inputs.has_eta
                  else ((), ()))
    names = []
    for k in sorted(bij):
        idx = {"eta_g": big, "eta_u": small, "eta_e": small}.get(k)
        if idx is not None and len(idx) == 2 and len(idx[0]) == sizes[k]:
            names += [f"{k}[{w},{t}]" for w, t in zip(*idx)]
        elif sizes[k] == 1:
            names.append(k)
        else:
            names += [f"{k}[{i}]" for i in range(sizes[k])]
    return names


def _prior_point(inputs: ModelInputs, param: dict) -> dict:
    """One draw of the program's latent sites (only their shapes matter)."""
    import jax
    from numpyro import handlers

    from crowdrank.models import numpyro_models as npm

    with jax.enable_x64(True), handlers.seed(rng_seed=0):
        tr = handlers.trace(npm.model).get_trace(inputs, prior_only=True, **param)
    return {k: np.asarray(v["value"]) for k, v in tr.items()
            if v["type"] == "sample" and not v.get("is_observed", False)}


def adaptation_summary(inputs: ModelInputs, param: dict, mcmc, samples: dict,
                       chains: int) -> dict:
    """What NumPyro's warm-up adapted, against what the draws then showed.

    ``step_size`` ``(chains,)``; ``inv_mass`` ``(chains, D)``: the diagonal of the adapted
    inverse mass matrix; ``post_var`` ``(chains, D)``: each chain's variance of its draws
    on the same unconstrained coordinates; ``names``: the ``D`` coordinates
    (:func:`coordinate_names`). A well adapted diagonal has ``inv_mass ≈ post_var``; a
    ratio far below 1 on a coordinate means its steps are too short there (slow drift), far
    above 1 too long (small step size for everyone)."""
    adapt = mcmc.post_warmup_state.adapt_state
    step = np.atleast_1d(np.asarray(adapt.step_size, float))
    imm = adapt.inverse_mass_matrix
    blocks = [imm[k] for k in sorted(imm)] if isinstance(imm, dict) else [imm]
    diag = []
    for b in blocks:
        b = np.asarray(b, float)
        if chains == 1:
            b = b[None]
        diag.append(np.diagonal(b, axis1=-2, axis2=-1) if b.ndim == 3 else b)
    inv_mass = np.concatenate(diag, axis=1)
    sites = sorted(_site_bijections(inputs, param))
    vals = {k: np.asarray(samples[k], float) for k in sites}
    if chains == 1:
        vals = {k: v[None] for k, v in vals.items()}
    z = _unconstrain(inputs, vals, param)
    C, D = next(iter(z.values())).shape[:2]
    post_var = np.concatenate([z[k].reshape(C, D, -1).var(axis=1) for k in sites], axis=1)
    return {"step_size": step, "inv_mass": inv_mass, "post_var": post_var,
            "names": coordinate_names(inputs, param)}


def gradient_timing(inputs: ModelInputs, reps: int = 5, *, z: dict | None = None,
                    param: dict | None = None, loglik_dtype=None) -> dict:
    """Seconds to compile the potential+gradient and ms per call, at a fixed point.

    The potential is built with :func:`numpyro.infer.util.potential_energy` on the
    unconstrained scale and jitted as one program, as NUTS does internally; this is the
    unit cost of a leapfrog step. (Measured separately: NUTS compiles its own copy.) ``z``
    is an unconstrained point (default: λ = 0 and η at its prior mean).
    """
    import jax
    from numpyro.infer.util import potential_energy

    from crowdrank.models import numpyro_models as npm

    param = param or {}
    if z is None and param.get("simplex") == "gibbs":
        z = gibbs_jittered_starts(inputs, {"lambda": np.zeros(inputs.n_items)}, 1, 0, 0.0,
                                  param.get("level", "centered"))
    elif z is None:
        z = jittered_starts(inputs, {"lambda": np.zeros(inputs.n_items)}, 1, 0, 0.0, **param)
    kw = dict(param, loglik_dtype=loglik_dtype, pointwise=False)
    with jax.enable_x64(True):
        z = {k: jax.numpy.asarray(v, jax.numpy.float64) for k, v in z.items()}
        vg = jax.jit(jax.value_and_grad(
            lambda p: potential_energy(npm.model, (inputs,), kw, p)))
        t = time.perf_counter()
        jax.block_until_ready(vg(z))
        compile_s = time.perf_counter() - t
        t = time.perf_counter()
        for _ in range(reps):
            jax.block_until_ready(vg(z))
    return {"compile": compile_s, "gradient_ms": 1e3 * (time.perf_counter() - t) / reps}


def gibbs_timing(inputs: ModelInputs, sweeps: int = 1, reps: int = 5, *,
                 z: dict | None = None, level: str = "centered",
                 walk_steps: int = 0) -> dict:
    """Seconds to compile :func:`crowdrank.inference.nuts.gibbs.sweeps` and ms per call (``sweeps``
    sweeps, one chain) at ``z`` (default: λ = 0 and a prior draw of the worker table): the
    cost the Gibbs route adds to each iteration besides the gradients (with
    ``walk_steps`` random-walk steps after the sweeps; the jump not included)."""
    import jax

    from .gibbs import stage_tables, walk
    from .gibbs import sweeps as run_sweeps

    tables = stage_tables(inputs)
    alpha = np.asarray(inputs.alpha, float)
    with jax.enable_x64(True):
        # the cost barely depends on the point: λ = 0 (z holds unconstrained item sites)
        lam = jax.numpy.zeros(inputs.n_items)
        if z is None:
            log_g = jax.random.loggamma(jax.random.PRNGKey(0), jax.numpy.asarray(alpha))
        else:
            log_g = jax.numpy.asarray(z["eta_log_g"], jax.numpy.float64)
        def step(key, lg, la):
            lg = run_sweeps(key, lg, la, tables, alpha, sweeps)
            return walk(key, lg, la, tables, alpha, walk_steps) if walk_steps else lg
        fn = jax.jit(step)
        key = jax.random.PRNGKey(1)
        t = time.perf_counter()
        jax.block_until_ready(fn(key, log_g, lam))
        compile_s = time.perf_counter() - t
        t = time.perf_counter()
        for _ in range(reps):
            jax.block_until_ready(fn(key, log_g, lam))
    return {"gibbs_compile": compile_s,
            "gibbs_ms": 1e3 * (time.perf_counter() - t) / reps}


def _thinned_draws(chains: int, draws: int) -> np.ndarray:
    """Indices of the draws kept for posterior predictive checks (every chain the same):
    evenly spaced, at most :data:`PREDICTIVE_DRAWS` over all chains."""
    per_chain = max(1, min(draws, PREDICTIVE_DRAWS // max(chains, 1)))
    return np.unique(np.linspace(0, draws - 1, per_chain).round().astype(int))


def _flat(samples: dict, keep=None) -> dict:
    """``{site: (chain, draw, ...)}`` → ``{site: (chain·draw, ...)}`` (draws ``keep`` only)."""
    out = {}
    for k, v in samples.items():
        v = np.asarray(v)
        if keep is not None:
            v = v[:, keep]
        out[k] = v.reshape((-1,) + v.shape[2:])
    return out


def _numpyro_pointwise(inputs, samples, param, chunk: int = 256) -> np.ndarray:
    """Per-ranking log-lik of every draw, ``(chain, draw, n_obs)``: NumPyro's own
    ``log_likelihood`` of the observed site ``rankings`` (float64, autodiff-free values),
    over the sampler's sites, jitted once and run in chunks of draws."""
    import jax
    from numpyro.infer import log_likelihood

    from crowdrank.models import numpyro_models as npm

    C, D = np.asarray(samples["lambda"]).shape[:2]
    flat = _flat(samples)
    n = C * D
    chunk = min(chunk, n)

    def prog():
        return npm.model(inputs, **param)

    fn = jax.jit(lambda s: log_likelihood(prog, s)["rankings"])
    out = np.empty((n, inputs.n_obs))
    for a in range(0, n, chunk):
        idx = np.minimum(np.arange(a, a + chunk), n - 1)    # one shape: one compile
        part = np.asarray(fn({k: v[idx] for k, v in flat.items()}))
        out[a:a + chunk] = part[: min(chunk, n - a)]
    return out.reshape(C, D, inputs.n_obs)


def _numpyro_predictive(inputs, samples, param, keep, seed) -> np.ndarray:
    """Posterior predictive orders ``(chain, len(keep), n_obs, K)`` by
    ``numpyro.infer.Predictive`` over the kept draws (the model with ``predict=True``)."""
    import jax
    from numpyro.infer import Predictive

    from crowdrank.models import numpyro_models as npm

    C = np.asarray(samples["lambda"]).shape[0]
    flat = _flat(samples, keep)
    pred = Predictive(lambda: npm.model(inputs, predict=True, **param), flat,
                      return_sites=["rankings"])
    key = jax.random.fold_in(jax.random.PRNGKey(int(seed)), 0x99)
    draws = np.asarray(pred(key)["rankings"])
    return draws.reshape((C, len(keep)) + draws.shape[1:]).astype(np.int32)


# ---------------------------------------------------------------- PyMC
#: sample_stats names of the PyMC sampler and of nutpie, mapped to the contract's names
_PYMC_STATS = {"diverging": ("diverging",), "energy": ("energy",),
               "tree_depth": ("tree_depth", "depth"), "n_steps": ("n_steps",),
               "lp": ("lp", "logp"), "acceptance_rate": ("acceptance_rate", "mean_tree_accept"),
               "step_size": ("step_size",)}


def pymc_initvals(inputs: ModelInputs, draws_z, init_values, chains: int,
                  rng: np.random.Generator, param: dict) -> tuple[list[dict], dict | None]:
    """One dict of constrained starting values per chain for PyMC's free variables, from
    approximation draws ``(λ, log η)`` (the first ``chains`` of them) or from a point
    (auxiliaries drawn per chain); and, from approximation draws, the constrained values of
    all draws (to seed the mass matrix, :func:`_pymc_mass`), else None."""
    from .starts import point_log_eta, sampler_values

    if draws_z is not None:
        vals = sampler_values(inputs, draws_z[0], draws_z[1], rng, **param)
        starts = [{k: np.asarray(v[c], float) for k, v in vals.items()} for c in range(chains)]
        return starts, (vals if draws_z[0].shape[0] >= 20 else None)
    lam = np.broadcast_to(init_values["lambda"], (chains, inputs.n_items))
    leta = point_log_eta(inputs, init_values.get("eta"))
    if leta is not None:
        leta = np.broadcast_to(leta, (chains,) + leta.shape)
    vals = sampler_values(inputs, lam, leta, rng, **param)
    return [{k: np.asarray(v[c], float) for k, v in vals.items()} for c in range(chains)], None


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


def _run_pymc(inputs, *, chains, tune, draws, target_accept, seed, initvals, jitter, progress,
              pointwise, param, max_tree_depth=10, prior_only=False, mass_values=None,
              keep=None, cores=None, dense_mass=False):
    import pymc as pm

    from crowdrank.models import pymc_models as pmm

    timings = {}
    t = time.perf_counter()
    model = pmm.build_model(inputs, prior_only=prior_only, **param)
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
        idata = pm.sample(draws=draws, tune=tune, chains=chains,
                          cores=cores or min(chains, os.cpu_count() or 1), random_seed=seed,
                          progressbar=progress, compute_convergence_checks=False,
                          callback=_mark, **kw)
    end = time.perf_counter()
    timings["warmup"] = clock["end_tune"] - t if tune > 0 else 0.0
    timings["sampling"] = end - t - timings["warmup"]
    if tune > 0:
        timings["warmup_gradients"] = clock["tune_grads"]
    ss = idata["sample_stats"].to_dataset()
    post = {"lambda": np.asarray(idata["posterior"]["lambda"].values, float)}
    if inputs.has_eta:
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
                                                random_seed=seed + 0x99, progressbar=False)
        timings["predictive_draws"] = np.asarray(
            pp["posterior_predictive"]["rankings"].values).astype(np.int32)
        timings["predictive"] = time.perf_counter() - t
    return post, stats, ll, timings


# ---------------------------------------------------------------- DataTree
def to_datatree(inputs: ModelInputs, data: Rankings, priors: Priors, post: dict, stats: dict,
                ll: np.ndarray | None, *, backend: str, extra_attrs: dict | None = None,
                pp: np.ndarray | None = None, pp_draws=None):
    """Assemble the contract's DataTree from plain arrays (chain, draw, ...); ``pp`` are
    posterior predictive orders ``(chain, len(pp_draws), ranking, position)`` of the draws
    ``pp_draws``."""
    from arviz_base import from_dict

    coords = {"item": list(data.items), "worker": list(data.workers),
              "stage": list(range(1, inputs.K + 1)),
              "ranking": list(range(data.n_rankings)),
              "position": list(range(data.K))}
    dims = {"lambda": ["item"], "order": ["ranking", "position"],
            "ranking_worker": ["ranking"], "ranking_length": ["ranking"]}
    posterior = {"lambda": post["lambda"]}
    if "eta" in post:
        posterior["eta"] = post["eta"]
        dims["eta"] = ["worker", "stage"] if post["eta"].ndim == 4 else ["worker"]
    groups = {
        "posterior": posterior,
        "sample_stats": stats,
        # The observed rankings as item indices (best first, -1 padding); ids are the
        # posterior's ``item``/``worker`` coordinates.
        "observed_data": {"order": np.asarray(data.order.T, np.int64),
                          "ranking_worker": np.asarray(data.worker, np.int64),
                          "ranking_length": np.asarray(data.lengths, np.int64)},
    }
    if ll is not None:
        groups["log_likelihood"] = {"rankings": ll}
        dims_ll = {"rankings": ["ranking"]}
    else:
        dims_ll = {}
    attrs = {"model": inputs.model, "backend": backend, "prior_spec": priors.spec,
             "mu0": float(priors.mu0), "sigma0": float(priors.sigma0),
             "n_rankings": int(data.n_rankings), "source": str(data.source),
             "pointwise_loglik": int(ll is not None),
             "posterior_predictive": int(pp is not None)}
    if extra_attrs:
        attrs.update({k: v for k, v in extra_attrs.items()})
    dt = from_dict(groups, coords=coords, dims={**dims, **dims_ll})
    if pp is not None:
        dt["posterior_predictive"] = _predictive_group(dt, pp, pp_draws, coords)
    dt.attrs.update(attrs)
    return dt


def _predictive_group(dt, pp, pp_draws, coords):
    """The ``posterior_predictive`` group: ``rankings`` ``(chain, draw, ranking, position)``
    whose ``draw`` coordinate holds the kept draws' indices."""
    import xarray as xr

    dims = ("chain", "draw", "ranking", "position")
    values = (dt["posterior"]["chain"].values, np.asarray(pp_draws, np.int64),
              coords["ranking"], coords["position"])
    return xr.DataTree(xr.Dataset({"rankings": (dims, np.asarray(pp))},
                                  coords=dict(zip(dims, values))))


# ---------------------------------------------------------------- files
def write_nuts(result: NutsResult, out_dir) -> dict:
    """Write ``posterior.nc`` (the DataTree) and ``summary.csv`` (one row per parameter,
    named by its real id) into ``out_dir``; returns the paths."""
    import arviz_stats as azs

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    nc = out / "posterior.nc"
    idata = result.idata
    idata.attrs.update({f"gate_{k}": (v if not isinstance(v, list) else "; ".join(v))
                        for k, v in result.gate.to_dict().items()})
    idata.attrs["gate_trusted"] = int(result.gate.trusted)
    idata.to_netcdf(nc, engine="h5netcdf")
    summ = azs.summary(idata, round_to="none")
    csv = out / "summary.csv"
    summ.to_csv(csv, index_label="parameter")
    return {"posterior": str(nc), "summary": str(csv)}


def read_nuts(path):
    """Read a ``posterior.nc`` written by :func:`write_nuts` back as a DataTree."""
    import xarray as xr

    path = Path(path)
    if path.is_dir():
        path = path / "posterior.nc"
    if not path.exists():
        raise FileNotFoundError(f"{path}: no NUTS posterior here")
    return xr.open_datatree(path, engine="h5netcdf").load()



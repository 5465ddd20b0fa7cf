"""Sampling routes that are neither the default nor trusted: :func:`fit_nuts_experimental`.

Each changes only how the sampler moves, never the target, and each is kept for the
measurements that motivated it (``docs/design.md`` §5.3a, ``docs/notes.md``, paper scale):

* ``eta_update="gibbs"`` (NumPyro, model ``"couple"``): NUTS moves ``λ`` given ``η`` and
  each iteration first runs ``gibbs_sweeps`` sweeps of the exact Gibbs step of ``η`` given
  ``λ`` (:mod:`crowdrank.inference.nuts.gibbs`; ``numpyro.infer.HMCGibbs``): the gradient sees
  only ``λ``, and a worker whose ``η_t`` has a prior spike beside a data mode is moved by
  exact conditional draws instead of a trajectory. With ``approx`` each iteration also
  starts with exact Metropolis–Hastings jumps of every worker's row and of each entry
  (:func:`crowdrank.inference.nuts.gibbs.jump`, :func:`crowdrank.inference.nuts.gibbs.entry_jump`;
  proposal :func:`gibbs_jump_proposal`); ``gibbs_walk`` adds random-walk Metropolis steps
  of each row (:func:`crowdrank.inference.nuts.gibbs.walk`), ``gibbs_mode_jump`` (with
  ``approx``) an independence move from a mixture of Laplace fits over which of the two
  smallest-``α`` entries sit in their prior spike (:func:`crowdrank.inference.nuts.gibbs.mode_jump`).
  Measured on the paper-scale proxy: ~13 leapfrogs per draw instead of ~110, but ``η`` not
  better mixed than under joint NUTS; with the mode jump and the walk η min bulk ESS 18.6 →
  74, not yet trusted. ``NutsResult.adaptation`` is None on this route.
* ``adapt`` (NumPyro, diagonal mass, with ``approx``): ``"fixed"`` keeps the mass seeded from
  the approximation and adapts the step size only; ``"pooled"`` adapts the step size for
  half of ``tune``, then replaces the mass by the variance of those warm-up draws pooled
  over all chains and adapts the step size again (:func:`_staged_warmup`). On a tiny
  COUPLE data set ``"fixed"`` with ``refine_eta`` disagreed with the default on 2 of 18
  means (|z| 3.8), and on the paper-scale proxy neither staged scheme beat the default.
* ``worker_level="approx"`` (NumPyro, Gamma simplex, with ``approx``): per worker the sd of
  its auxiliary magnitude ``log S`` is that of its pinned ``log η_t`` under the
  approximation (:func:`crowdrank.inference.nuts.starts.worker_level_sd`; exact for any law).
* ``refine_eta`` (COUPLE with ``approx``): the approximation's worker concentrations
  become ``α + n_w``, the EM expected offset counts given its item means
  (:func:`crowdrank.inference.nuts.starts.refine_worker_alpha`), before they choose the boost
  mask, the starts and the seeded mass.

Trust the gate, not the scheme.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import numpy as np

from crowdrank.models.data import Rankings
from crowdrank.models.errors import UsageError
from crowdrank.models.model_inputs import ModelInputs
from crowdrank.models.priors import Priors

from .config import NutsConfig
from .fit import NutsResult, fit_nuts
from .route import LastWarmup, NutsRoute, route_for
from .starts import (
    _positions,
    _site_bijections,
    _starts_and_mass,
    _unconstrain,
    item_values,
    point_log_eta,
    refine_worker_alpha,
)

#: How the worker simplexes move (``eta_update``).
ETA_UPDATE = ("nuts", "gibbs")
#: Warm-up schemes (``adapt``).
ADAPT = ("windowed", "fixed", "pooled")
WORKER_LEVELS = ("fixed", "approx")


@dataclass(frozen=True)
class ExperimentalConfig:
    """The experimental routes' options (module doc); the defaults are the trusted route."""

    eta_update: str = "nuts"
    gibbs_sweeps: int = 1
    gibbs_walk: int = 0
    gibbs_mode_jump: bool = False
    adapt: str = "windowed"
    worker_level: str = "fixed"
    refine_eta: bool = False

    def __post_init__(self):
        if self.eta_update not in ETA_UPDATE:
            raise UsageError(f"eta_update must be one of {ETA_UPDATE}, got {self.eta_update!r}")
        if self.adapt not in ADAPT:
            raise UsageError(f"adapt must be one of {ADAPT}, got {self.adapt!r}")
        if self.worker_level not in WORKER_LEVELS:
            raise UsageError(f"worker_level must be 'fixed' or 'approx', "
                             f"got {self.worker_level!r}")
        if int(self.gibbs_sweeps) < 1 or int(self.gibbs_walk) < 0:
            raise UsageError("gibbs_sweeps must be >= 1 and gibbs_walk >= 0")
        if self.gibbs_mode_jump and self.eta_update != "gibbs":
            raise UsageError("gibbs_mode_jump needs eta_update='gibbs' and approx= (the "
                             "mixture is fitted at the approximation's scores)")

    @classmethod
    def fields(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))


@dataclass(frozen=True)
class ExperimentalNutsConfig(NutsConfig):
    """A :class:`NutsConfig` whose route is the experimental one of ``experimental``."""

    experimental: ExperimentalConfig = ExperimentalConfig()


def fit_nuts_experimental(data: Rankings, model: str, priors: Priors,
                          config: NutsConfig | None = None, *,
                          experimental: ExperimentalConfig | None = None,
                          init: dict | None = None, approx=None, progress: bool = True,
                          **options) -> NutsResult:
    """:func:`crowdrank.inference.nuts.fit_nuts` on an experimental route (module doc).

    ``options`` may name fields of :class:`NutsConfig` and of :class:`ExperimentalConfig`
    (``fit_nuts_experimental(d, "couple", pr, eta_update="gibbs", chains=2)``); they replace
    those of ``config`` and ``experimental``.
    """
    valid = set(NutsConfig.fields()) | set(ExperimentalConfig.fields())
    unknown = sorted(set(options) - valid)
    if unknown:
        raise TypeError(f"unknown NUTS option(s) {unknown}; valid: {', '.join(sorted(valid))}")
    x_opts = {k: options.pop(k) for k in ExperimentalConfig.fields() if k in options}
    x = dataclasses.replace(experimental or ExperimentalConfig(), **x_opts)
    base = NutsConfig.build(config, options)
    cfg = ExperimentalNutsConfig(**{f: getattr(base, f) for f in NutsConfig.fields()},
                                 experimental=x)
    return fit_nuts(data, model, priors, cfg, init=init, approx=approx, progress=progress)


class ExperimentalRoute(NutsRoute):
    """The routes of :class:`ExperimentalConfig` through :class:`NutsRoute`'s hooks."""

    def __init__(self, x: ExperimentalConfig):
        self.x = x
        self.eta_update, self.adapt = x.eta_update, x.adapt
        self.worker_level, self.refine_eta = x.worker_level, bool(x.refine_eta)
        self.gibbs = x.eta_update == "gibbs"
        if self.gibbs:
            # HMCGibbs keeps the NUTS block's state as ``hmc_state``; its Gibbs kernels
            # take one key, so no vectorised chains
            self.prefix, self.fallback_chain_method = "hmc_state.", "sequential"
        self.jump_beta = self.mode_center = None

    def check(self, cfg: NutsConfig, model: str, approx) -> None:
        x = self.x
        if x.adapt != "windowed" and (cfg.backend != "numpyro" or cfg.dense_mass
                                      or approx is None):
            raise UsageError(f"adapt={x.adapt!r} needs backend='numpyro', a diagonal mass "
                             "and approx= (its mass is seeded from the approximation)")
        if x.worker_level == "approx" and (cfg.backend != "numpyro" or approx is None
                                           or cfg.simplex != "gamma"):
            raise UsageError("worker_level='approx' needs backend='numpyro', "
                             "simplex='gamma' and approx=")
        if x.refine_eta and (approx is None or model not in EXPERIMENT_MODELS):
            raise UsageError(f"refine_eta needs model={_models()} and approx=")
        if self.gibbs:
            _check_gibbs(model, cfg, x)
        if x.gibbs_mode_jump and approx is None:
            raise UsageError("gibbs_mode_jump needs eta_update='gibbs' and approx= (the "
                             "mixture is fitted at the approximation's scores)")

    def param(self, cfg: NutsConfig) -> dict:
        return {"simplex": "gibbs" if self.gibbs else cfg.simplex, "level": cfg.level}

    def prepare_approx(self, inputs, approx, data, cfg, param):
        from crowdrank.models.model_inputs import INFORMED_ALPHA

        from .starts import _refined_approx, approx_alpha, worker_level_sd

        if self.refine_eta:
            approx = _refined_approx(inputs, approx, data)
        if self.gibbs:
            self.jump_beta = gibbs_jump_proposal(inputs, approx, data)
            if self.x.gibbs_mode_jump:
                self.mode_center = gibbs_mode_center(approx, data)
            return approx
        approx = super().prepare_approx(inputs, approx, data, cfg, param)
        if inputs.has_eta and cfg.simplex == "gamma" and self.worker_level == "approx":
            a_post = approx_alpha(inputs, approx, data.workers)
            param["level_sd"] = worker_level_sd(a_post, a_post >= INFORMED_ALPHA)
        return approx

    def numpyro_starts(self, inputs, cfg, draws_z, init_values, rng, param):
        if not self.gibbs:
            return super().numpyro_starts(inputs, cfg, draws_z, init_values, rng, param)
        if draws_z is not None:
            return gibbs_starts(inputs, *draws_z, cfg.chains, rng, cfg.level,
                                seed_mass=cfg.seed_mass)
        if init_values is not None:
            return gibbs_jittered_starts(inputs, init_values, cfg.chains, cfg.seed,
                                         cfg.init_jitter, cfg.level), None
        return None, None

    def kernel(self, nuts, inputs, prior_only):
        if not self.gibbs:
            return nuts
        from numpyro.infer import HMCGibbs

        from .gibbs import make_gibbs_fn

        # the worker table moves by the exact Gibbs step given λ; NUTS adapts and moves λ
        return HMCGibbs(nuts, gibbs_fn=make_gibbs_fn(inputs, self.x.gibbs_sweeps, prior_only,
                                                     self.jump_beta, self.x.gibbs_walk,
                                                     self.mode_center),
                        gibbs_sites=["eta_log_g"])

    def warmup(self, inputs, make, make_mcmc, key, tune, inv_mass, init_params, param,
               timings):
        if self.adapt == "windowed":
            return super().warmup(inputs, make, make_mcmc, key, tune, inv_mass, init_params,
                                  param, timings)
        return _staged_warmup(inputs, make, make_mcmc, key, tune, inv_mass, init_params,
                              param, self.adapt, timings)

    def profile(self, inputs, z0, param, loglik_dtype) -> dict:
        if not self.gibbs:
            return super().profile(inputs, z0, param, loglik_dtype)
        z = z0 if z0 is not None else gibbs_jittered_starts(
            inputs, {"lambda": np.zeros(inputs.n_items)}, 1, 0, 0.0, param["level"])
        out = super().profile(inputs, z, param, loglik_dtype)
        out.update(gibbs_timing(inputs, self.x.gibbs_sweeps, z=z0, level=param["level"],
                                walk_steps=self.x.gibbs_walk))
        return out

    def after_sampling(self, inputs, param, mcmc, samples, chains, timings) -> None:
        if self.gibbs:
            timings["gibbs_sweeps"] = float(self.x.gibbs_sweeps)
        else:
            super().after_sampling(inputs, param, mcmc, samples, chains, timings)

    def attrs(self) -> dict:
        if not self.gibbs:
            return {}
        return {"gibbs_sweeps": int(self.x.gibbs_sweeps), "gibbs_walk": int(self.x.gibbs_walk),
                "gibbs_jump": int(self.jump_beta is not None),
                "gibbs_mode_jump": int(self.mode_center is not None)}


#: The models the experiments are written for (``refine_eta``, ``eta_update="gibbs"``):
#: COUPLE's stagewise mixture.
EXPERIMENT_MODELS = ("couple",)


def _models() -> str:
    """:data:`EXPERIMENT_MODELS` as the refusals name them (``'couple'``)."""
    return " or ".join(repr(m) for m in EXPERIMENT_MODELS)


def _check_gibbs(model: str, cfg: NutsConfig, x: ExperimentalConfig) -> None:
    """Reject the combinations the Gibbs route does not support, saying why."""
    if cfg.backend != "numpyro":
        raise UsageError("eta_update='gibbs' needs backend='numpyro' (numpyro.infer.HMCGibbs; "
                         "PyMC has no such step here)")
    if model not in EXPERIMENT_MODELS:
        from crowdrank.models.registry import REGISTRY
        normalized = model in REGISTRY and REGISTRY[model].normalized
        why = (" (its k!-ordering normaliser is not a product of stagewise mixtures, so "
               "the offset/slack augmentation is not exact)" if normalized
               else " (the augmentation is COUPLE's stagewise mixture)")
        raise UsageError(f"eta_update='gibbs' supports model={_models()} only, got "
                         f"{model!r}{why}")
    if cfg.simplex != "gamma" or x.worker_level != "fixed" or x.adapt != "windowed":
        raise UsageError("eta_update='gibbs' holds the worker table in its own site: leave "
                         "simplex='gamma', worker_level='fixed' and adapt='windowed' at "
                         "their defaults")
    if cfg.chain_method == "vectorized":
        raise UsageError("eta_update='gibbs' cannot vectorise chains (numpyro's Gibbs "
                         "kernels take one key): use chain_method='parallel' or "
                         "'sequential'")


#: The Gibbs route's jump proposal ``Dirichlet(α + JUMP_SHRINK·n̂)``: half the expected
#: counts, a proposal wider than the conditional (an independence proposal must not be
#: narrower than its target in any direction, or the chain sticks where it is too thin).
JUMP_SHRINK = 0.5


def gibbs_jump_proposal(inputs: ModelInputs, approx, data: Rankings) -> np.ndarray:
    """``β = α + JUMP_SHRINK·n̂`` ``(W, K)``: the proposal of :func:`crowdrank.inference.nuts.gibbs.jump`,
    ``n̂`` the EM expected offset counts at the approximation's item means
    (:func:`crowdrank.inference.nuts.starts.refine_worker_alpha`). Fixed before sampling (it depends on
    the data and the approximation only), as an independence proposal must be."""
    ix = _positions(approx.items, data.items, "item")
    a0 = np.asarray(inputs.alpha, float)
    n_hat = refine_worker_alpha(inputs, np.asarray(approx.mu, float)[ix], a0) - a0
    return a0 + JUMP_SHRINK * np.maximum(n_hat, 0.0)


def gibbs_mode_center(approx, data: Rankings) -> np.ndarray:
    """The approximation's item means in ``data``'s item order: where
    :func:`crowdrank.inference.nuts.gibbs.mode_fit` fits the mode jump's mixture (fixed before sampling)."""
    return np.asarray(approx.mu, float)[_positions(approx.items, data.items, "item")]


def _gibbs_values(inputs: ModelInputs, lam, log_eta, rng: np.random.Generator,
                  level: str) -> dict:
    """Sampler values of the Gibbs route for ``(λ, log η)`` (any leading batch dims): the
    item sites as :func:`crowdrank.inference.nuts.starts.sampler_values`, and ``eta_log_g = log η +
    log S`` with ``S ~ Gamma(Σα)`` drawn independently — exact, since ``g/S ~ Dir(α)`` is
    independent of ``S = Σ g ~ Gamma(Σα)``."""
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
    rng = np.random.default_rng([int(seed), 0x5EED])
    lam = np.broadcast_to(np.asarray(init["lambda"], float), (chains, inputs.n_items))
    leta = np.broadcast_to(point_log_eta(inputs, init.get("eta")),
                           (chains, inputs.n_workers, inputs.K))
    param = {"simplex": "gibbs", "level": level}
    z = _unconstrain(inputs, _gibbs_values(inputs, lam, leta, rng, level), param)
    out = {k: z[k] + (0.0 if k == "eta_log_g" else jitter)
           * rng.uniform(-1.0, 1.0, size=z[k].shape) for k in sorted(z)}
    return out if chains > 1 else {k: v[0] for k, v in out.items()}



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

    Runs every stage but the last, which it returns unrun (:class:`LastWarmup`: it runs
    with the draws); ``timings`` gains ``warmup_gradients`` and, per stage,
    ``warmup_gradients_<i>``/``warmup_iters_<i>``.
    """
    import jax

    if inv_mass is None:
        raise UsageError(f"adapt={adapt!r} needs a seeded mass matrix: pass approx= "
                         "(a warm start from an approximate posterior)")
    n1 = tune if adapt == "fixed" else max(1, round(POOLED_FIRST * tune))
    stages = [n1] + ([tune - n1] if adapt == "pooled" and tune - n1 > 0 else [])
    mass, state, total = np.asarray(inv_mass, float), init_params, 0.0
    for i, n in enumerate(stages[:-1]):
        key, sub = jax.random.split(key)
        mcmc = make_mcmc(make(mass, False), n)
        mcmc.warmup(sub, extra_fields=("num_steps",), collect_warmup=True, init_params=state)
        jax.block_until_ready(mcmc.post_warmup_state)
        steps = float(np.asarray(mcmc.get_extra_fields()["num_steps"]).sum())
        timings[f"warmup_gradients_{i + 1}"], timings[f"warmup_iters_{i + 1}"] = steps, n
        total += steps
        mass = pooled_variance(inputs, mcmc.get_samples(group_by_chain=True), param)
        state = mcmc.last_state.z
    timings["warmup_gradients"] = total
    key, sub = jax.random.split(key)
    timings[f"warmup_iters_{len(stages)}"] = stages[-1]
    return LastWarmup(make_mcmc(make(mass, False), stages[-1]), sub, state, len(stages))


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


@route_for.register
def _experimental_route(cfg: ExperimentalNutsConfig) -> NutsRoute:
    return ExperimentalRoute(cfg.experimental)

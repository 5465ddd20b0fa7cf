"""How :func:`crowdrank.inference.nuts.fit_nuts` moves the parameters: the sampling route.

:class:`NutsRoute` is the default and trusted route: NUTS on every coordinate of the
sampler (:mod:`crowdrank.models.numpyro_models`, ``simplex``/``level``), Stan's windowed
warm-up, starts and seeded mass from :mod:`crowdrank.inference.nuts.starts`. Its methods are the
points where a route may differ — the sampler's sites, how an approximation is prepared,
the starts, the kernel, the warm-up, what is timed and summarised, the attributes recorded
— so that the experimental routes (:mod:`crowdrank.inference.nuts.experimental`) change them by
overriding, and the public entry point names none of their options.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import numpy as np

from crowdrank.models.data import Rankings
from crowdrank.models.model_inputs import ModelInputs

from .config import NutsConfig


class LastWarmup(NamedTuple):
    """The last phase of a route's warm-up, not yet run: it runs as one program with the
    draws (:func:`crowdrank.inference.nuts.numpyro._last_warmup_and_draws`)."""

    mcmc: Any               #: an ``MCMC`` whose ``num_warmup`` is the phase's length
    key: Any                #: its PRNG key
    init_params: Any        #: its starts (unconstrained), or None for the kernel's own
    stage: int | None = None   #: its number among staged warm-ups (timed as such)


class NutsRoute:
    """Plain NUTS on all coordinates (the default of :func:`~crowdrank.inference.nuts.fit_nuts`)."""

    #: recorded in the DataTree's attrs (``docs/contracts.md``)
    eta_update = "nuts"
    adapt = "windowed"
    worker_level = "fixed"
    refine_eta = False
    #: where the NUTS state's fields sit in the kernel's state ("" for NUTS itself)
    prefix = ""
    #: NumPyro's chain method when there are fewer host devices than chains
    fallback_chain_method = "vectorized"

    def check(self, cfg: NutsConfig, model: str, approx) -> None:
        """Reject options this route cannot honour (the config checked its own values)."""

    def param(self, cfg: NutsConfig) -> dict:
        """The sampler's coordinates (keyword arguments of the PPL programs)."""
        return {"simplex": cfg.simplex, "level": cfg.level}

    def prepare_approx(self, inputs: ModelInputs, approx, data: Rankings, cfg: NutsConfig,
                       param: dict):
        """The approximation the starts are drawn from; with the Gamma simplex, the entries
        it says the data pin become one plain Gamma coordinate (``param["boost"]``)."""
        if inputs.has_eta and cfg.simplex == "gamma":
            from crowdrank.models.model_inputs import boost_mask

            from .starts import approx_alpha
            param["boost"] = boost_mask(inputs.alpha,
                                        approx_alpha(inputs, approx, data.workers))
        return approx

    def numpyro_starts(self, inputs: ModelInputs, cfg: NutsConfig, draws_z, init_values,
                       rng: np.random.Generator, param: dict):
        """NumPyro's per-chain unconstrained starts and seeded inverse mass (or ``None``s)."""
        from .starts import jittered_starts, numpyro_starts_from_draws

        if draws_z is not None:
            return numpyro_starts_from_draws(inputs, *draws_z, cfg.chains, rng, param,
                                             seed_mass=cfg.seed_mass)
        if init_values is not None:
            return jittered_starts(inputs, init_values, cfg.chains, cfg.seed, cfg.init_jitter,
                                   **param), None
        return None, None

    def kernel(self, nuts, inputs: ModelInputs, prior_only: bool):
        """The MCMC kernel around the NUTS kernel."""
        return nuts

    def warmup(self, inputs, make, make_mcmc, key, tune, inv_mass, init_params, param,
               timings) -> LastWarmup:
        """The warm-up up to its last phase, which is returned unrun (:class:`LastWarmup`):
        here the whole of it, Stan's windowed adaptation (NumPyro's default)."""
        return LastWarmup(make_mcmc(make(inv_mass, True), tune), key, init_params)

    def profile(self, inputs: ModelInputs, z0, param: dict, loglik_dtype) -> dict:
        """``NutsConfig.profile``: compile and time the potential and its gradient alone
        (``gradient_compile`` seconds, ``gradient_ms`` per call)."""
        from .numpyro import gradient_timing

        t = gradient_timing(inputs, z=z0, param=param, loglik_dtype=loglik_dtype)
        return {"gradient_compile": t["compile"], "gradient_ms": t["gradient_ms"]}

    def after_sampling(self, inputs: ModelInputs, param: dict, mcmc, samples: dict,
                       chains: int, timings: dict) -> None:
        """What the adapted sampler looked like (``NutsResult.adaptation``)."""
        from .numpyro import adaptation_summary

        timings["adaptation"] = adaptation_summary(inputs, param, mcmc, samples, chains)

    def attrs(self) -> dict:
        """Attributes of the route's own beyond those every fit writes."""
        return {}


@functools.singledispatch
def route_for(cfg: NutsConfig) -> NutsRoute:
    """How the parameters of a fit under ``cfg`` move: plain NUTS on every coordinate. A
    configuration class with a route of its own registers it here
    (:mod:`crowdrank.inference.nuts.experimental`), so :func:`~crowdrank.inference.nuts.fit_nuts`
    names no route but the default."""
    return NutsRoute()

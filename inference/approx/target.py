"""The posterior as a JAX log density on the sampler's unconstrained coordinates.

Every approximation of this package works on the same target: the NumPyro program of the
model (:func:`crowdrank.models.numpyro_models.model`, with its exact reparametrisations of
``docs/design.md`` §5 — ``level="centered"``, ``simplex="gamma"`` by default), mapped by
NumPyro's own ``initialize_model`` to a flat vector ``z`` of unconstrained coordinates.
``log_p(z) = −potential(z)`` is the log joint density of ``z`` (priors, likelihood and the
log-Jacobians of the constraining transforms), the quantity NUTS samples and the density a
Gaussian ``q(z)`` is compared with (PSIS k̂, :mod:`crowdrank.inference.approx.psis`).
``constrain(z)`` gives back the model's ``lambda`` and ``eta``.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np

from crowdrank.models.data import Rankings
from crowdrank.models.model_inputs import ModelInputs, model_inputs
from crowdrank.models.priors import Priors
from crowdrank.models.registry import get as get_model


@contextlib.contextmanager
def x64():
    """64-bit JAX types for the block, set globally (as the NUTS runner does: a progress
    bar's host callback runs on another thread and does not see a thread-local setting)."""
    import jax

    prev = bool(jax.config.jax_enable_x64)
    jax.config.update("jax_enable_x64", True)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", prev)


@dataclass
class Target:
    """A model's posterior on the flat unconstrained coordinates (module docstring).

    Attributes
    ----------
    inputs : ModelInputs
    dim : int
        Number of unconstrained coordinates.
    z0 : (dim,) array
        NumPyro's initial point (``init_to_median``).
    log_p : callable
        ``z (dim,) -> log p(z)`` (JAX, differentiable, unnormalised).
    constrain : callable
        ``z (dim,) -> {"lambda": (L,), "eta": ...}`` (JAX).
    unravel : callable
        ``z (dim,) -> {site: value}`` on the unconstrained scale.
    sites : dict
        Site name -> shape on the unconstrained scale (in ``z``'s order).
    param : dict
        The parametrisation (``simplex``, ``level``, ``fast``).
    """

    inputs: ModelInputs
    dim: int
    z0: np.ndarray
    log_p: object
    constrain: object
    unravel: object
    sites: dict
    param: dict

    def constrain_draws(self, z: np.ndarray) -> dict[str, np.ndarray]:
        """``lambda`` ``(S, L)`` and ``eta`` ``(S, W[, K])`` of draws ``z`` ``(S, dim)``."""
        import jax

        out = jax.jit(jax.vmap(self.constrain))(np.asarray(z, np.float64))
        return {k: np.asarray(v) for k, v in out.items()}

    def log_p_draws(self, z: np.ndarray, chunk: int = 1000) -> np.ndarray:
        """``log p(z)`` of each row of ``z`` ``(S, dim)``."""
        import jax

        f = jax.jit(jax.vmap(self.log_p))
        z = np.asarray(z, np.float64)
        return np.concatenate([np.asarray(f(z[i:i + chunk]))
                               for i in range(0, len(z), chunk)]) if len(z) else np.zeros(0)


def build_target(data: Rankings, model: str, priors: Priors, *, simplex: str = "gamma",
                 level: str = "centered", fast: bool = True, seed: int = 0) -> Target:
    """The :class:`Target` of ``model`` on ``data`` under ``priors``.

    ``fast`` selects COUPLE's hand-written gradient (``jax.custom_vjp``, reverse mode only);
    a Hessian (Laplace) needs ``fast=False``, the autodiff path of the same density.
    Call inside :func:`x64`.
    """
    import jax
    from jax.flatten_util import ravel_pytree
    from numpyro.infer import init_to_median
    from numpyro.infer.util import initialize_model

    from crowdrank.models import numpyro_models as npm

    spec = get_model(model)
    if spec.has_eta and not spec.worker_prior.simplex_coordinates and simplex != "gamma":
        simplex = "gamma"      # PeerGrader's positive scale has one parametrisation
    if simplex == "gibbs":
        raise ValueError("simplex='gibbs' is moved by a Gibbs step, not by a density "
                         "approximation: use 'gamma' or 'dirichlet'")
    inputs = model_inputs(model, data, priors)
    param = {"simplex": simplex, "level": level, "fast": fast}
    kw = {"simplex": simplex, "level": level, "fast": fast, "pointwise": False}
    info = initialize_model(jax.random.PRNGKey(seed), npm.model, model_args=(inputs,),
                            model_kwargs=kw, init_strategy=init_to_median(num_samples=15))
    z0_tree = info.param_info.z
    flat0, unravel = ravel_pytree(z0_tree)
    potential, post = info.potential_fn, info.postprocess_fn

    def log_p(z):
        return -potential(unravel(z))

    def constrain(z):
        out = post(unravel(z))
        keep = {"lambda": out["lambda"]}
        if "eta" in out:
            keep["eta"] = out["eta"]
        return keep

    sites = {k: tuple(np.shape(v)) for k, v in sorted(z0_tree.items())}
    return Target(inputs=inputs, dim=int(flat0.size), z0=np.asarray(flat0, np.float64),
                  log_p=log_p, constrain=constrain, unravel=unravel, sites=sites,
                  param=param)

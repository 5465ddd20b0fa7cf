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
from dataclasses import dataclass, field, replace

import numpy as np

from crowdrank.models.data import Rankings
from crowdrank.models.model_inputs import ModelInputs, model_inputs
from crowdrank.models.priors import Priors
from crowdrank.models.registry import ModelSpec, as_spec


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


@dataclass(eq=False)
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

    The compiled forms of ``log_p`` (batched, its gradient, its Hessian) and of
    ``constrain`` are made once per target and kept: the methods that share a target
    (:func:`build_target` returns the same one for the same data, model and priors) share
    their XLA compilations too.
    """

    inputs: ModelInputs
    dim: int
    z0: np.ndarray
    log_p: object
    constrain: object
    unravel: object
    sites: dict
    param: dict
    compiled: dict = field(default_factory=dict, repr=False)

    def _jit(self, name: str, make):
        f = self.compiled.get(name)
        if f is None:
            f = self.compiled[name] = make()
        return f

    def constrain_draws(self, z: np.ndarray, chunk: int = 1000) -> dict[str, np.ndarray]:
        """``lambda`` ``(S, L)`` and ``eta`` ``(S, W[, K])`` of draws ``z`` ``(S, dim)``."""
        import jax

        f = self._jit("constrain", lambda: jax.jit(jax.vmap(self.constrain)))
        parts = [f(b) for b in _chunks(z, chunk)]
        n = len(z)
        return {k: np.concatenate([np.asarray(p[k]) for p in parts])[:n] for k in parts[0]}

    def log_p_draws(self, z: np.ndarray, chunk: int | None = None) -> np.ndarray:
        """``log p(z)`` of each row of ``z`` ``(S, dim)``, in blocks of ``chunk`` draws
        (default :func:`draws_per_batch`: the data's size bounds the block)."""
        import jax

        if not len(z):
            return np.zeros(0)
        chunk = draws_per_batch(self.inputs) if chunk is None else chunk
        f = self._jit(f"log_p{chunk}", lambda: jax.jit(jax.vmap(self.log_p)))
        return np.concatenate([np.asarray(f(b)) for b in _chunks(z, chunk)])[:len(z)]

    def value_and_grad(self):
        """Compiled ``z -> (−log p(z), −∇ log p(z))`` (the potential and its gradient)."""
        import jax

        return self._jit("vg", lambda: jax.jit(jax.value_and_grad(
            lambda z: -self.log_p(z))))

    def hessian(self):
        """Compiled ``z -> ∇² log p(z)`` (forward-over-reverse; needs ``fast=False``).

        Its columns are Hessian-vector products ``∂/∂ε ∇ log p(z + ε e_j)``, computed
        :func:`draws_per_batch` at a time (``jax.lax.map``): all ``dim`` at once, as
        ``jax.hessian`` does, would hold ``dim`` copies of the data's intermediates
        (hundreds of GB at the paper's 450,000 rankings); on small data one batch holds
        every column and the result is ``jax.hessian``'s."""
        import jax

        if self.param.get("fast"):
            raise ValueError("the Hessian needs the autodiff density: build_target(fast=False)")
        batch = min(self.dim, draws_per_batch(self.inputs, cap=self.dim))
        grad = jax.grad(self.log_p)

        def hess(z):
            def column(v):
                return jax.jvp(grad, (z,), (v,))[1]
            eye = jax.numpy.eye(self.dim, dtype=z.dtype)
            return jax.lax.map(column, eye, batch_size=batch)

        return self._jit("hessian", lambda: jax.jit(hess))


#: Array elements one block of draws may put in each of the density's intermediates
#: (a float64 array of 2**24 elements is 128 MB; the likelihood holds a handful at once).
BATCH_ELEMENTS = 2 ** 24


def draws_per_batch(inputs: ModelInputs, cap: int = 1000) -> int:
    """How many draws (or tangent vectors) one vectorised evaluation of the density takes:
    at most ``cap``, and at most :data:`BATCH_ELEMENTS` over the data's ``K × M`` columns
    of the likelihood, so the memory of a batch does not grow with the data (1,000 draws
    on the embedded default, 9 on the paper's 450,000 rankings)."""
    cells = max(1, int(np.size(inputs.index)))
    return int(max(1, min(cap, BATCH_ELEMENTS // cells)))


def _chunks(z, chunk: int):
    """Rows of ``z`` in blocks of ``chunk``, the last one padded by repeating its final
    row: every block has one shape, so the batched function compiles once."""
    z = np.asarray(z, np.float64)
    for i in range(0, len(z), chunk):
        b = z[i:i + chunk]
        if len(b) < chunk and len(z) > chunk:
            b = np.concatenate([b, np.repeat(b[-1:], chunk - len(b), axis=0)])
        yield b


#: Targets already built in this process, by (data, priors, model, simplex, level, seed):
#: an audit fits several approximations of one model on one data set, and NumPyro's
#: ``initialize_model`` (run op by op, each new operation compiled) costs seconds per call.
#: Entries hold their data and priors, so an id is never matched to a new object.
_TARGETS: dict = {}
_TARGETS_KEEP = 4


def build_target(data: Rankings, model: str | ModelSpec, priors: Priors, *, simplex: str = "gamma",
                 level: str = "centered", fast: bool = True, seed: int = 0) -> Target:
    """The :class:`Target` of ``model`` (a name, looked up once here, or its spec) on
    ``data`` under ``priors``.

    ``fast`` selects COUPLE's hand-written gradient (``jax.custom_vjp``, reverse mode only);
    a Hessian (Laplace) needs ``fast=False``, the autodiff path of the same density.
    Call inside :func:`x64`. The same data, priors and model give the same target
    within a process (and so its compilations, :class:`Target`).
    """
    spec = as_spec(model)
    model = spec.name
    if spec.has_eta and not spec.worker_prior.simplex_coordinates and simplex != "gamma":
        simplex = "gamma"      # PeerGrader's positive scale has one parametrisation
    if simplex == "gibbs":
        raise ValueError("simplex='gibbs' is moved by a Gibbs step, not by a density "
                         "approximation: use 'gamma' or 'dirichlet'")
    key = (id(data), id(priors), model, simplex, level, int(seed))
    hit = _TARGETS.get(key)
    if hit is not None and hit[0] is data and hit[1] is priors:
        built = hit[2]
    else:
        built = {}
        _TARGETS[key] = (data, priors, built)
        while len(_TARGETS) > _TARGETS_KEEP:
            _TARGETS.pop(next(iter(_TARGETS)))
    if fast in built:
        return built[fast]
    if built:
        # the other gradient form of a target already built: the same coordinates, start
        # and constraining map; only the potential's gradient implementation differs
        other = next(iter(built.values()))
        built[fast] = _with_gradient_form(other, fast)
        return built[fast]
    built[fast] = _initialize(data, spec, priors, simplex, level, fast, seed)
    return built[fast]


def _with_gradient_form(target: Target, fast: bool) -> Target:
    """``target`` with its potential written with (``fast``) or without COUPLE's
    hand-written gradient: NumPyro's ``potential_energy`` of the same program, the
    function ``initialize_model`` returns for it."""
    from numpyro.infer.util import potential_energy

    from crowdrank.models import numpyro_models as npm

    kw = {"simplex": target.param["simplex"], "level": target.param["level"], "fast": fast,
          "pointwise": False}
    args, unravel = (target.inputs,), target.unravel

    def log_p(z):
        return -potential_energy(npm.model, args, kw, unravel(z))

    return replace(target, log_p=log_p, param={**target.param, "fast": fast}, compiled={})


def _initialize(data, model, priors, simplex, level, fast, seed) -> Target:
    import jax
    from jax.flatten_util import ravel_pytree
    from numpyro.infer import init_to_median
    from numpyro.infer.util import initialize_model

    from crowdrank.models import numpyro_models as npm

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

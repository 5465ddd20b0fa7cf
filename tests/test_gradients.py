"""The gradient the sampler uses, for every model and both PPLs, against finite differences.

NUTS reads the gradient of the *potential energy* (minus the log joint, Jacobians included)
on the unconstrained scale. Checking ``jax.grad`` of the log-likelihood is not enough: a
hand-written backward rule (``jax.custom_vjp``) that ignores its cotangent is still right
for the cotangent +1 of ``grad(loglik)``, and wrong for the −1 the potential energy feeds
it. So the derivative is taken exactly where the sampler takes it:

* NumPyro: ``numpyro.infer.util.potential_energy`` on the unconstrained sites that
  ``initialize_model`` reports, differentiated with ``jax.grad`` in float64;
* PyMC: ``model.compile_dlogp()`` against central differences of ``model.compile_logp()``
  over the value variables the model reports.

Nothing here names a site: the parametrisation (simplex transforms, auxiliary variables,
zero-sum parts) may change, and every free coordinate is checked whatever it is called.
"""

from __future__ import annotations

import numpy as np
import pytest

from crowdrank.models.likelihood import MODELS
from crowdrank.models.model_inputs import model_inputs
from crowdrank.models.priors import Priors
from crowdrank.models.simulate import simulate

jax = pytest.importorskip("jax")
numpyro = pytest.importorskip("numpyro")

H = 1e-5          # central differences in float64: truncation ~H², rounding ~1e-16/H
RTOL, ATOL = 2e-6, 2e-7


@pytest.fixture(scope="module")
def data():
    # k = 2..4 mixed: every block length, and the k! normaliser for k = 3, 4
    return simulate("couple", n_items=6, n_workers=3, tasks_per_worker=5, kmax=4,
                    seed=21).rankings


@pytest.fixture(scope="module")
def priors(data):
    rng = np.random.default_rng(2)
    return Priors(data.workers, rng.uniform(0.5, 3.0, size=(data.n_workers, data.K)),
                  mu0=0.2, sigma0=1.3, spec="test")


def central_differences(f, x, h=H):
    x = np.asarray(x, float)
    out = np.empty_like(x)
    for i in range(x.size):
        e = np.zeros_like(x)
        e[i] = h
        out[i] = (f(x + e) - f(x - e)) / (2 * h)
    return out


@pytest.mark.parametrize("model", MODELS)
def test_numpyro_potential_energy_gradient(model, data, priors):
    from jax.flatten_util import ravel_pytree
    from numpyro import handlers
    from numpyro.distributions.transforms import biject_to
    from numpyro.infer.util import potential_energy

    from crowdrank.models import numpyro_models as npm

    inp = model_inputs(model, data, priors)
    with jax.enable_x64(True):
        # every latent site the model samples, mapped to the unconstrained scale by the
        # same bijection NumPyro's samplers use (``initialize_model`` does this too, after
        # a much slower search for a valid start)
        tr = handlers.trace(handlers.seed(npm.model, 0)).get_trace(inp)
        z0 = {name: biject_to(site["fn"].support).inv(site["value"])
              for name, site in tr.items()
              if site["type"] == "sample" and not site["is_observed"]}
        assert z0, "the model reports no latent sites"
        flat0, unravel = ravel_pytree(z0)
        assert flat0.dtype == np.float64
        rng = np.random.default_rng(3)
        flat = np.asarray(flat0) + rng.normal(0, 0.7, flat0.shape)   # off the prior draw

        def energy(f):
            return potential_energy(npm.model, (inp,), {}, unravel(f))

        pe = jax.jit(energy)
        grad = np.asarray(jax.jit(jax.grad(energy))(flat))
        fd = central_differences(lambda f: float(pe(f)), flat)
    assert np.all(np.isfinite(grad))
    np.testing.assert_allclose(grad, fd, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.usefixtures("pytensor_without_c")
def test_pymc_dlogp_gradient(model, data, priors):
    pytest.importorskip("pymc")
    from crowdrank.models import pymc_models as pmm

    inp = model_inputs(model, data, priors)
    m = pmm.build_model(inp)
    point0 = m.initial_point()
    names = [v.name for v in m.value_vars]
    assert names and set(names) <= set(point0)
    shapes = [np.shape(point0[n]) for n in names]
    sizes = [int(np.prod(s)) for s in shapes]

    def unflatten(x):
        out, i = dict(point0), 0
        for n, s, k in zip(names, shapes, sizes):
            out[n] = np.asarray(x[i:i + k], float).reshape(s)
            i += k
        return out

    x0 = np.concatenate([np.ravel(point0[n]) for n in names]).astype(float)
    x = x0 + np.random.default_rng(4).normal(0, 0.7, x0.shape)
    # the Python linker compiles in a fraction of the default's time; same graph
    logp = m.compile_logp(mode="FAST_COMPILE")
    dlogp = m.compile_dlogp(mode="FAST_COMPILE")
    grad = np.asarray(dlogp(unflatten(x)), float)
    assert grad.shape == x.shape
    fd = central_differences(lambda v: float(logp(unflatten(v))), x)
    np.testing.assert_allclose(grad, fd, rtol=RTOL, atol=ATOL)

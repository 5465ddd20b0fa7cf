"""Normalising-flow variational inference: NumPyro's ``AutoIAFNormal`` (inverse
autoregressive flow, [Kingma16]) or ``AutoBNAFNormal`` (block neural autoregressive flow,
[DeCao19]) on the model's program, in the sampler's unconstrained coordinates
(:mod:`crowdrank.inference.approx.target`, the same ``simplex``/``level`` choices as ADVI).

``q`` is a standard normal ``ε`` pushed through ``num_flows`` autoregressive transforms
(reversed between flows), ``z = f(ε)``, ``log q(z) = log N(ε) − log |det ∂f/∂ε|``: a
density that can bend around a corner worker's funnel where a Gaussian cannot. The ELBO is
maximised by :func:`crowdrank.inference.approx.vi.run_svi` (ADVI's schedule and stopping
rule). ``log q`` of each draw comes from the flow's forward pass with its intermediates
(an IAF or BNAF has no cheap inverse), ``log p`` from the target's potential, so PSIS k̂ is
computed as for ADVI; ``psis=True`` draws ``pool`` draws and returns ``draws`` of their
Pareto-smoothed importance resample (:func:`crowdrank.inference.approx.structured.pooled_psis`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from crowdrank.models.data import Rankings
from crowdrank.models.priors import Priors

from .result import ApproxFit
from .target import build_target, x64
from .vi import SviOptions

FLOWS = ("iaf", "bnaf")


@dataclass
class FlowOptions(SviOptions):
    """Options of ``flow-vi`` (module docstring); the SVI loop's from
    :class:`~crowdrank.inference.approx.vi.SviOptions`, with a smaller first step (a flow's
    many weights diverge at ADVI's)."""

    learning_rate: float = 0.005  #: Adam's first step size
    flow: str = "iaf"           #: "iaf" (AutoIAFNormal) or "bnaf" (AutoBNAFNormal)
    num_flows: int = 2          #: stacked autoregressive transforms
    hidden: int = 0             #: IAF: hidden units per layer (0: NumPyro's, the dimension);
    #: BNAF: hidden units per input dimension (0: NumPyro's 8)
    draws: int = 1000           #: draws returned
    pool: int = 4000            #: draws of q scored before PSIS resampling (psis=True)
    simplex: str = "gamma"      #: worker simplex coordinates (docs/design.md §5.1)
    level: str = "centered"     #: item-score coordinates (docs/design.md §5.2)
    backend: str = "numpyro"


def make_flow_guide(prog, o: FlowOptions):
    """The autoguide of ``o.flow`` for ``prog``."""
    from numpyro.infer import autoguide

    if o.flow == "iaf":
        kw = {} if not o.hidden else {"hidden_dims": [int(o.hidden)] * 2}
        return autoguide.AutoIAFNormal(prog, num_flows=int(o.num_flows), **kw)
    if o.flow == "bnaf":
        kw = {} if not o.hidden else {"hidden_factors": [int(o.hidden)] * 2}
        return autoguide.AutoBNAFNormal(prog, num_flows=int(o.num_flows), **kw)
    raise ValueError(f"flow must be one of {FLOWS}, got {o.flow!r}")


def flow_draws(guide, params, target, key, n: int):
    """``n`` draws of the fitted flow as flat ``z`` in ``target``'s order (sites sorted by
    name; the guide packs them in trace order) and their ``log q``."""
    import jax.numpy as jnp

    q = guide.get_posterior(params)
    x, inter = q.sample_with_intermediates(key, (n,))
    log_q = q.log_prob(x, inter)
    parts = guide._unpack_latent(x)
    z = jnp.concatenate([jnp.reshape(parts[s], (n, -1)) for s in sorted(target.sites)],
                        axis=1)
    return np.asarray(z, float), np.asarray(log_q, float)


def fit_flow(data: Rankings, model: str, priors: Priors, options: FlowOptions | None = None,
             *, psis: bool = False, **kw) -> ApproxFit:
    """Fit ``model`` by a flow guide (module docstring); ``kw`` override fields of
    ``options``; ``psis`` returns the PSIS resample of ``pool`` draws."""
    import jax

    from crowdrank.models import numpyro_models as npm

    from .structured import pooled_psis
    from .vi import run_svi

    o = FlowOptions(**{**(options.__dict__ if options else {}), **kw})
    if o.backend != "numpyro":
        raise ValueError(f"flow-vi is NumPyro's autoguide (backend 'numpyro'), got "
                         f"{o.backend!r}")
    if o.flow not in FLOWS:
        raise ValueError(f"flow must be one of {FLOWS}, got {o.flow!r}")
    t0 = time.perf_counter()
    with x64():
        target = build_target(data, model, priors, simplex=o.simplex, level=o.level,
                              seed=o.seed)
        if target.dim < 2:
            raise ValueError("flow-vi needs at least 2 unconstrained coordinates; use advi")
        inputs = target.inputs

        def prog():
            npm.model(inputs, pointwise=False, **target.param)

        guide = make_flow_guide(prog, o)
        params, diag = run_svi(prog, guide, o, f"flow-vi ({o.flow})")
        n = max(o.pool, o.draws) if psis else o.draws
        z, log_q = flow_draws(guide, params, target, jax.random.PRNGKey(o.seed + 1), n)
        log_p = target.log_p_draws(z)
        cons = target.constrain_draws(z)
    diag.update(seconds=time.perf_counter() - t0, dim=target.dim, flow=o.flow,
                num_flows=int(o.num_flows))
    fit = ApproxFit(method="flow-vi", model=model, backend="numpyro", lam=cons["lambda"],
                    eta=cons.get("eta"), items=list(data.items), workers=list(data.workers),
                    z=z, log_q=log_q, log_p=log_p, diagnostics=diag)
    return pooled_psis(fit, o.draws, o.seed + 7) if psis else fit

"""Draws from an online posterior as an ArviZ 1.x DataTree, named like the NUTS result.

The approximation is a product of independent factors: ``λ_r ~ N(μ_r, σ_r²)``; COUPLE
workers ``η_w ~ Dir(α_w)`` (``eta`` dims ``(chain, draw, worker, stage)``, ``stage = 1..K``);
CrowdBT workers ``η_w ~ Beta(a_w, b_w)`` (``eta`` dims ``(chain, draw, worker)``, the
accuracy). Coordinates are the real ids (``docs/contracts.md``).
"""

from __future__ import annotations

import numpy as np


def to_datatree(post, draws: int = 1000, seed: int = 0, chains: int = 1):
    """Sample ``chains × draws`` from the approximation (seeded) into a DataTree with a
    ``posterior`` group; attributes ``model``, ``method="online"``, ``algorithm``."""
    from arviz_base import from_dict

    if draws < 1 or chains < 1:
        raise ValueError("draws and chains must be >= 1")
    rng = np.random.default_rng(seed)
    L = len(post.items)
    lam = post.mu + np.sqrt(post.sigma2) * rng.standard_normal((chains, draws, L))
    data = {"lambda": lam}
    dims = {"lambda": ["item"]}
    coords = {"item": list(post.items)}
    family = post.model_spec().worker_prior       # the state's spec: no lookup
    if family is not None:
        data["eta"] = family.posterior_draws(rng, post.alpha, (chains, draws))
        dims["eta"] = list(family.dims)
        coords["worker"] = list(post.workers)
        if "stage" in family.dims:
            coords["stage"] = list(range(1, post.alpha.shape[1] + 1))
    attrs = {"model": post.model, "method": "online", "algorithm": post.algorithm,
             "seed": int(seed), "mu0": float(post.options.get("mu0", 0.0)),
             "sigma0": float(post.options.get("sigma0", 1.0)),
             "prior_spec": str(post.options.get("prior_spec", ""))}
    tree = from_dict({"posterior": data}, coords=coords, dims=dims)
    tree.attrs.update(attrs)
    return tree

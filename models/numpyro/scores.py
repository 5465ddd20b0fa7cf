"""The item scores' prior as NumPyro sites, shared by the program (:mod:`.program`) and the
models as functions of arrays (:mod:`.arrays`). ``inputs`` needs ``n_items``, ``mu0`` and
``sigma0``."""

from __future__ import annotations

import numpyro
import numpyro.distributions as dist


def item_scores(inputs, level: str = "centered"):
    """Sample ``λ ~ Normal(mu0, sigma0²)`` iid, as ``lambda`` (``level="iid"``) or as
    ``lambda_mean + lambda_c`` (``"centered"``, the same prior; module docstring)."""
    L = inputs.n_items
    if level == "iid" or L < 2:
        return numpyro.sample("lambda", dist.Normal(inputs.mu0, inputs.sigma0)
                              .expand([L]).to_event(1))
    # mean of L iid N(mu0, s²) is N(mu0, s²/L); the centred part is ZeroSumNormal(s),
    # independent of the mean: together exactly the iid prior
    m = numpyro.sample("lambda_mean", dist.Normal(inputs.mu0, inputs.sigma0 / L ** 0.5))
    c = numpyro.sample("lambda_c", dist.ZeroSumNormal(inputs.sigma0, event_shape=(L,)))
    return numpyro.deterministic("lambda", m + c)

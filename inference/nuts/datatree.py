"""The contract's DataTree of a NUTS run, and its files (``docs/contracts.md``).

:func:`to_datatree` assembles plain arrays ``(chain, draw, ...)`` into an ArviZ DataTree
with the real ids as coordinates; :func:`write_nuts` / :func:`read_nuts` store it as NetCDF
beside a one-row-per-parameter ``summary.csv``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from crowdrank.models.data import Rankings
from crowdrank.models.model_inputs import ModelInputs
from crowdrank.models.priors import Priors

from .config import PREDICTIVE_DRAWS


def thinned_draws(chains: int, draws: int) -> np.ndarray:
    """Indices of the draws kept for posterior predictive checks (every chain the same):
    evenly spaced, at most :data:`PREDICTIVE_DRAWS` over all chains."""
    per_chain = max(1, min(draws, PREDICTIVE_DRAWS // max(chains, 1)))
    return np.unique(np.linspace(0, draws - 1, per_chain).round().astype(int))


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
def write_nuts(result, out_dir) -> dict:
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

"""NUTS for the pair-table models (the CrowdBT extensions, contextual BT).

These models read presented pairs with extra columns (:mod:`crowdrank.models.pair_table`), not the
:class:`crowdrank.models.data.Rankings` layout of :func:`crowdrank.inference.nuts.fit_nuts`, so they get this
small runner: a NumPyro program (a zero-argument function) or a PyMC model in, the draws
``name → (chain, draw, ...)`` and NumPyro's split R-hat / bulk ESS summary out
(:func:`numpyro.diagnostics.summary`, the same estimators for both back-ends), with the
sampler's ``diverging`` and ``energy`` per draw so that :meth:`PairNuts.datatree` can go
through the suite's convergence gate (:func:`crowdrank.inference.gate.check`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np


@dataclass
class PairNuts:
    """Draws ``(chain, draw, ...)`` per site, their summary (``mean, sd, r_hat, ess``
    arrays per site), and timings."""

    draws: dict
    summary: dict
    backend: str
    seconds: float
    settings: dict = field(default_factory=dict)
    stats: dict = field(default_factory=dict)      # "diverging", "energy": (chain, draw)

    def mean(self, name):
        return self.summary[name]["mean"]

    def sd(self, name):
        return self.summary[name]["sd"]

    def max_rhat(self) -> float:
        return float(max(np.nanmax(s["r_hat"]) for s in self.summary.values()))

    def min_ess(self) -> float:
        return float(min(np.nanmin(s["ess"]) for s in self.summary.values()))

    def dataset(self, dims: dict | None = None):
        """The draws as an ``xarray.Dataset`` over ``chain, draw`` and the named trailing
        axes (``dims``: name → coordinate names and values, e.g.
        ``{"lambda": [("item", items)]}``; unnamed axes get ``<name>_dim_<j>``)."""
        import xarray as xr

        data, coords = {}, {}
        for k, v in self.draws.items():
            names = ["chain", "draw"]
            for j, (dn, vals) in enumerate((dims or {}).get(k, [])):
                names.append(dn)
                coords[dn] = list(vals)
            names += [f"{k}_dim_{j}" for j in range(len(names) - 2, v.ndim - 2)]
            data[k] = (names, np.asarray(v))
        return xr.Dataset(data, coords=coords)

    def datatree(self, dims: dict | None = None, log_likelihood=None):
        """An ArviZ ``DataTree``: ``posterior`` (:meth:`dataset`), ``sample_stats``
        (``diverging``, ``energy``) when recorded, and ``log_likelihood`` when given (an
        ``xarray.Dataset``) — what :func:`crowdrank.inference.gate.check`, ArviZ's plots and
        :func:`crowdrank.validation.reference.backend_agreement` read."""
        import xarray as xr

        groups = {"posterior": self.dataset(dims)}
        if self.stats:
            groups["sample_stats"] = xr.Dataset(
                {k: (("chain", "draw"), np.asarray(v)) for k, v in self.stats.items()})
        if log_likelihood is not None:
            groups["log_likelihood"] = log_likelihood
        return xr.DataTree.from_dict(groups)

    def to_netcdf(self, path, dims: dict | None = None) -> None:
        """The draws as an ArviZ-style ``posterior`` NetCDF (``dims`` as :meth:`dataset`)."""
        self.dataset(dims).to_netcdf(path, engine="h5netcdf")


def _summarise(draws: dict) -> dict:
    from numpyro.diagnostics import summary

    out = {}
    for k, v in draws.items():
        s = summary({k: np.asarray(v)}, group_by_chain=True)[k]
        out[k] = {"mean": np.asarray(s["mean"]), "sd": np.asarray(s["std"]),
                  "r_hat": np.asarray(s["r_hat"]), "ess": np.asarray(s["n_eff"])}
    return out


def _numpyro_inits(model, inits: list[dict], chains: int) -> dict:
    """Per-chain starting values (constrained, one dict per chain) mapped to the sampler's
    unconstrained coordinates through each site's own bijection (Beta: logit)."""
    import jax.numpy as jnp
    from numpyro import handlers
    from numpyro.distributions.transforms import biject_to

    if len(inits) != chains:
        raise ValueError(f"{len(inits)} starting points for {chains} chains")
    tr = handlers.trace(handlers.seed(model, 0)).get_trace()
    out = {}
    for k in inits[0]:
        vals = jnp.asarray(np.stack([np.asarray(c[k], float) for c in inits]))
        u = biject_to(tr[k]["fn"].support).inv(vals)
        out[k] = u if chains > 1 else u[0]
    return out


def sample_numpyro(model, *, chains: int = 2, tune: int = 500, draws: int = 500,
                   seed: int = 0, target_accept: float = 0.8, progress: bool = False,
                   sites: tuple[str, ...] | None = None,
                   inits: list[dict] | None = None) -> PairNuts:
    """NUTS on a NumPyro program; chains run one after another (``chain_method=
    "sequential"``: the machine's cores are shared, and the models are small).
    ``inits``: one dict of constrained starting values per chain (default NumPyro's
    uniform(−2, 2) in the unconstrained space)."""
    import jax
    from numpyro.infer import MCMC, NUTS

    t0 = time.perf_counter()
    mcmc = MCMC(NUTS(model, target_accept_prob=target_accept), num_warmup=tune,
                num_samples=draws, num_chains=chains, chain_method="sequential",
                progress_bar=progress)
    init = None if inits is None else _numpyro_inits(model, inits, chains)
    mcmc.run(jax.random.PRNGKey(seed), init_params=init,
             extra_fields=("diverging", "energy"))
    s = mcmc.get_samples(group_by_chain=True)
    d = {k: np.asarray(v) for k, v in s.items() if sites is None or k in sites}
    ex = mcmc.get_extra_fields(group_by_chain=True)
    return PairNuts(d, _summarise(d), "numpyro", time.perf_counter() - t0,
                    {"chains": chains, "tune": tune, "draws": draws, "seed": seed,
                     "target_accept": target_accept},
                    {"diverging": np.asarray(ex["diverging"], bool),
                     "energy": np.asarray(ex["energy"], float)})


def sample_pymc(model, *, chains: int = 2, tune: int = 500, draws: int = 500,
                seed: int = 0, target_accept: float = 0.8, progress: bool = False,
                sites: tuple[str, ...] | None = None,
                inits: list[dict] | None = None) -> PairNuts:
    """NUTS on a PyMC model (PyMC's own sampler, one process); ``inits`` as
    :func:`sample_numpyro`'s."""
    import pymc as pm

    if inits is not None and len(inits) != chains:
        raise ValueError(f"{len(inits)} starting points for {chains} chains")
    t0 = time.perf_counter()
    with model:
        idata = pm.sample(draws=draws, tune=tune, chains=chains, cores=1, random_seed=seed,
                          target_accept=target_accept, progressbar=progress,
                          compute_convergence_checks=False, nuts_sampler="pymc",
                          initvals=None if inits is None else [
                              {k: np.asarray(v, float) for k, v in c.items()}
                              for c in inits])
    post = idata.posterior
    names = sites or [v.name for v in model.free_RVs]
    d = {k: np.asarray(post[k].values) for k in names}
    ss = idata.sample_stats
    return PairNuts(d, _summarise(d), "pymc", time.perf_counter() - t0,
                    {"chains": chains, "tune": tune, "draws": draws, "seed": seed,
                     "target_accept": target_accept},
                    {"diverging": np.asarray(ss["diverging"].values, bool),
                     "energy": np.asarray(ss["energy"].values, float)})


def sample(backend: str, model, **kw) -> PairNuts:
    if backend == "numpyro":
        return sample_numpyro(model, **kw)
    if backend == "pymc":
        return sample_pymc(model, **kw)
    raise ValueError(f"backend must be numpyro or pymc, got {backend!r}")

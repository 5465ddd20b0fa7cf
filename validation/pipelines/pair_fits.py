"""The NUTS fits of the pair-table audit (:mod:`crowdrank.validation.pipelines.pair_audit`): each fit
described by a picklable :class:`PairFit` (the model's data, priors, back-end and
settings) and run by :func:`run_fit`, in this process or as Dask tasks (:func:`run_fits`;
the same seeds give the same draws), with the baselines fitted on the same pairs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

#: Models fitted on the same pairs for the LOO comparison only.
BASELINES = ("crowdbt", "bt")


@dataclass(eq=False)
class PairFit:
    """One NUTS fit, as data (picklable: a Dask task builds the program where it runs).

    ``kind``: ``"ext"`` (``data`` a :class:`crowdrank.models.crowdbt_ext.Structure`; plain CrowdBT
    is one with ``β ≡ 0`` and one group per worker) or ``"contextual"`` (``data`` a
    ``(PairTable, X)``; plain BT has no covariate column). ``prior``: ``mu0, sigma0`` and
    ``bias_sd`` / ``tau``; ``worker_ab``: the ``(W, 2)`` Beta priors (``"ext"``).
    ``categories``: each pair's category (for the by-category check), or None."""

    name: str
    kind: str
    data: object
    prior: dict
    backend: str = "numpyro"
    nuts_kw: dict = field(default_factory=dict)
    worker_ab: np.ndarray | None = None
    categories: np.ndarray | None = None
    covariates: tuple = ()
    inits: list | None = None          # one dict of starting values per chain

    # ---------------------------------------------------------------- the pairs
    @property
    def pairs(self):
        """``(first, second, first_won, worker)`` arrays and the worker ids."""
        if self.kind == "ext":
            st = self.data
            return st.first, st.second, st.y, st.worker, st.workers
        t, _ = self.data
        return t.first, t.second, t.first_won, t.worker, t.workers

    @property
    def n_pairs(self) -> int:
        return len(self.pairs[0])

    def dims(self) -> dict:
        """Coordinate names and ids of every site (for the DataTree and the agreement
        check, which matches parameters by id)."""
        if self.kind == "ext":
            st = self.data
            return {"lambda": [("item", st.items)], "eta": [("group", st.groups)],
                    "beta": [("worker", st.workers)]}
        t, X = self.data
        names = self.covariates or tuple(f"x{k}" for k in range(np.shape(X)[1]))
        return {"lambda": [("item", t.items)], "gamma": [("item", t.items),
                                                         ("covariate", names)]}

    # ---------------------------------------------------------------- the programs
    def programs(self):
        """``(numpyro program, pymc model builder)`` (zero-argument callables)."""
        p = self.prior
        if self.kind == "ext":
            from crowdrank.models.crowdbt_ext import numpyro_model, pymc_model
            st, ab = self.data, self.worker_ab
            return (lambda: numpyro_model(st, ab, p["mu0"], p["sigma0"], p.get("bias_sd", 1.0)),
                    lambda: pymc_model(st, ab, p["mu0"], p["sigma0"], p.get("bias_sd", 1.0)))
        from crowdrank.models.contextual import numpyro_model, pymc_model
        t, X = self.data
        return (lambda: numpyro_model(t, X, p["mu0"], p["sigma0"], p.get("tau", 1.0)),
                lambda: pymc_model(t, X, p["mu0"], p["sigma0"], p.get("tau", 1.0),
                                   self.covariates or None))

    # ---------------------------------------------------------------- per draw
    def params(self, nuts, c: int, d: int) -> dict:
        return {k: np.asarray(v[c, d]) for k, v in nuts.draws.items()}

    def loglik(self, par: dict) -> np.ndarray:
        """``log P(y_s)`` per pair by the model's NumPy reference log-likelihood."""
        if self.kind == "ext":
            from crowdrank.models.crowdbt_ext import loglik
            return loglik(self.data, par["lambda"], par["eta"], par.get("beta"))
        from crowdrank.models.contextual import loglik
        t, X = self.data
        return loglik(t, X, par["lambda"], self._gamma(par))

    def _gamma(self, par):
        t, X = self.data
        p = np.shape(X)[1]
        return par["gamma"] if p else np.zeros((t.n_items, 0))

    def prob_first(self, par: dict) -> np.ndarray:
        """``P(first item wins)`` per pair (the replicated data's Bernoulli)."""
        if self.kind == "ext":
            from crowdrank.models.crowdbt_ext import log_probs
            return np.exp(log_probs(self.data, par["lambda"], par["eta"], par.get("beta"))[0])
        from scipy.special import expit

        from crowdrank.models.contextual import logits
        t, X = self.data
        return expit(logits(t.first, t.second, X, par["lambda"], self._gamma(par)))

    def preferred_first(self, par: dict) -> np.ndarray:
        """Whether the draw prefers the item shown first: ``λ_f > λ_t`` (the comparison a
        truthful worker judges), contextual BT: (C1) > 0."""
        if self.kind == "ext":
            lam = par["lambda"]
            return lam[self.data.first] > lam[self.data.second]
        from crowdrank.models.contextual import logits
        t, X = self.data
        return logits(t.first, t.second, X, par["lambda"], self._gamma(par)) > 0


def ext_fit(name: str, st, worker_ab, prior: dict, backend: str, nuts_kw: dict,
            categories=None) -> PairFit:
    return PairFit(name, "ext", st, dict(prior), backend, dict(nuts_kw),
                   np.asarray(worker_ab, float), categories)


def contextual_fit(name: str, table, X, prior: dict, backend: str, nuts_kw: dict,
                   covariates: tuple = ()) -> PairFit:
    X = np.asarray(X, float).reshape(table.n_pairs, -1)
    return PairFit(name, "contextual", (table, X), dict(prior), backend, dict(nuts_kw),
                   covariates=tuple(covariates))


def baseline_fits(first, second, first_won, worker, items, workers, worker_ab,
                  prior: dict, backend: str, nuts_kw: dict, which=BASELINES,
                  source: str = "<pairs>") -> list[PairFit]:
    """Plain CrowdBT (the extension with ``β ≡ 0`` and one group per worker: (E1) is then
    CrowdBT's likelihood exactly) and plain BT (contextual BT without covariates) on the
    same pairs, under the same ``λ`` prior (and the same worker Beta priors)."""
    from crowdrank.models.crowdbt_ext import Structure
    from crowdrank.models.pair_table import PairTable

    first, second = np.asarray(first, np.int64), np.asarray(second, np.int64)
    won, worker = np.asarray(first_won, np.int64), np.asarray(worker, np.int64)
    out = []
    for name in which:
        if name == "crowdbt":
            st = Structure("crowdbt", tuple(items), tuple(workers), tuple(workers), first,
                           second, np.where(won == 1, 1, -1).astype(np.int64), worker, worker,
                           np.arange(len(workers)), False, source)
            out.append(ext_fit("crowdbt", st, worker_ab, {"mu0": prior["mu0"],
                                                         "sigma0": prior["sigma0"]},
                               backend, nuts_kw))
        elif name == "bt":
            t = PairTable(tuple(items), tuple(workers), first, second, won, worker, {}, None,
                          True, source)
            out.append(contextual_fit("bt", t, np.zeros((len(first), 0)),
                                      {"mu0": prior["mu0"], "sigma0": prior["sigma0"]},
                                      backend, nuts_kw))
        else:
            raise ValueError(f"baseline models are {BASELINES}, got {name!r}")
    return out


def _aligned(obj):
    """``obj`` with every NumPy array field copied: arrays unpickled from a Dask message
    can be views of an unaligned buffer, which PyTensor's C code refuses."""
    import dataclasses

    if isinstance(obj, np.ndarray):
        return np.array(obj, copy=True)
    if isinstance(obj, tuple):
        return tuple(_aligned(v) for v in obj)
    if isinstance(obj, dict):
        return {k: _aligned(v) for k, v in obj.items()}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.replace(obj, **{f.name: _aligned(getattr(obj, f.name))
                                           for f in dataclasses.fields(obj) if f.init})
    return obj


def run_fit(fit: PairFit):
    """NUTS for one :class:`PairFit` (also the Dask task: it builds the program here)."""
    from crowdrank.inference.nuts.pair_nuts import sample

    fit = _aligned(fit)
    numpyro_fn, pymc_fn = fit.programs()
    kw = dict(fit.nuts_kw, inits=fit.inits)
    if fit.backend == "numpyro":
        import jax
        jax.config.update("jax_enable_x64", True)
        return sample("numpyro", numpyro_fn(), **kw)
    return sample("pymc", pymc_fn(), **kw)


def run_fits(fits: list[PairFit], *, scheduler=None, processes: int | None = None,
             log: Callable[[str], None] | None = None) -> list:
    """:func:`run_fit` for every fit: one after another here, or all at once as Dask tasks
    (``scheduler``: ``"local"``, an address or a ``distributed.Client``). Raises
    :class:`crowdrank.validation.runtime.grid.SchedulerError` when no scheduler answers."""
    log = log or (lambda msg: None)
    if scheduler is None:
        out = []
        for f in fits:
            log(f"NUTS {f.name} ({f.backend})")
            out.append(run_fit(f))
        return out
    from distributed import as_completed

    from crowdrank.validation.runtime.grid import dask_client, release_client

    client, owned = dask_client(scheduler, processes)
    try:
        futs = {client.submit(run_fit, f, pure=False,
                              key=f"crowdrank-pairs-{f.name}-{f.backend}-{k}"): k
                for k, f in enumerate(fits)}
        log(f"dask: {len(futs)} NUTS fit(s) submitted to {client.scheduler.address}")
        res = [None] * len(fits)
        for fut in as_completed(futs):
            k = futs[fut]
            res[k] = fut.result()           # a task's exception is raised here
            log(f"NUTS {fits[k].name} ({fits[k].backend}) done on the cluster")
            fut.release()
    finally:
        release_client(client, owned)
    return res

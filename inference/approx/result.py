"""The one result every approximation of :mod:`crowdrank.inference.approx` returns.

Draws of ``lambda`` and ``eta`` in the layout NUTS writes (``posterior.nc``: group
``posterior``, ``lambda`` over ``(chain, draw, item)``, ``eta`` over ``(chain, draw, worker[,
stage])``; ``docs/contracts.md``), with the approximation's log density ``log q`` and the
target's ``log p`` of each draw on the unconstrained scale (group ``sample_stats``), the
PSIS diagnostic (:mod:`crowdrank.inference.approx.psis`) and the optimiser's convergence.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from crowdrank.models.data import Rankings
from crowdrank.models.priors import Priors

from .psis import KHAT_RELIABLE, label, psis_diagnostic


@dataclass
class ApproxFit:
    """Draws of an approximate posterior and how they were obtained.

    Attributes
    ----------
    method, model, backend : str
    lam : (S, L) array
    eta : (S, W) or (S, W, K) array, or None
    z : (S, D) array or None
        The draws on the unconstrained scale of :class:`~crowdrank.inference.approx.target.Target`.
    log_q, log_p : (S,) arrays or None
        ``log q(z)`` of the approximation and the target's unnormalised ``log p(z)``.
    diagnostics : dict
        ``converged``, ``steps``, ``final_elbo`` (or the method's equivalent), ``seconds``,
        and after :meth:`with_psis` ``khat``, ``psis_reliable``.
    """

    method: str
    model: str
    backend: str
    lam: np.ndarray
    eta: np.ndarray | None
    items: list
    workers: list
    z: np.ndarray | None = None
    log_q: np.ndarray | None = None
    log_p: np.ndarray | None = None
    diagnostics: dict = field(default_factory=dict)
    psis_resampled: bool = False

    @property
    def khat(self) -> float | None:
        return self.diagnostics.get("khat")

    def with_psis(self, resample: bool = False, seed: int = 0) -> ApproxFit:
        """Attach PSIS k̂ ([Vehtari24]) from ``log p − log q``; with ``resample``, the draws
        are replaced by a Pareto-smoothed importance resample of themselves (the same
        number, with replacement). No density: the fit is returned unchanged."""
        if self.psis_resampled and "khat" in self.diagnostics:
            return self            # already the PSIS resample of a pool (Pathfinder)
        if self.log_q is None or self.log_p is None:
            self.diagnostics.setdefault("khat", None)
            return self
        khat, lw = psis_diagnostic(self.log_p, self.log_q)
        self.diagnostics["khat"] = khat
        self.diagnostics["psis_reliable"] = bool(khat <= KHAT_RELIABLE)
        if resample:
            rng = np.random.default_rng(seed)
            idx = rng.choice(len(lw), size=len(lw), replace=True, p=np.exp(lw - lw.max())
                             / np.exp(lw - lw.max()).sum())
            self.lam = self.lam[idx]
            self.eta = None if self.eta is None else self.eta[idx]
            self.z = None if self.z is None else self.z[idx]
            self.log_q, self.log_p = self.log_q[idx], self.log_p[idx]
            self.psis_resampled = True
        return self

    def verdict(self) -> str:
        """One line: the method, convergence and the PSIS verdict."""
        d = self.diagnostics
        conv = "converged" if d.get("converged") else "NOT converged"
        k = d.get("khat")
        ks = ("k̂ n/a (no density)" if k is None else
              f"k̂ = {k:.2f} ({label(k)})")
        return f"{self.method} [{self.backend}]: {conv} after {d.get('steps')} steps; {ks}"

    def to_datatree(self, data: Rankings, priors: Priors):
        """The DataTree NUTS writes (one chain), with ``sample_stats`` ``log_q``/``log_p``."""
        from arviz_base import from_dict

        posterior = {"lambda": self.lam[None]}
        dims = {"lambda": ["item"]}
        coords = {"item": list(self.items)}
        if self.eta is not None:
            posterior["eta"] = self.eta[None]
            coords["worker"] = list(self.workers)
            if self.eta.ndim == 3:
                coords["stage"] = list(range(1, self.eta.shape[2] + 1))
                dims["eta"] = ["worker", "stage"]
            else:
                dims["eta"] = ["worker"]
        groups = {"posterior": posterior}
        if self.log_q is not None:
            groups["sample_stats"] = {"log_q": self.log_q[None], "log_p": self.log_p[None]}
        dt = from_dict(groups, coords=coords, dims=dims)
        attrs = {"model": self.model, "backend": self.backend, "method": self.method,
                 "prior_spec": priors.spec, "mu0": float(priors.mu0),
                 "sigma0": float(priors.sigma0), "n_rankings": int(data.n_rankings),
                 "source": str(data.source), "psis_resampled": int(self.psis_resampled)}
        for k, v in self.diagnostics.items():
            if isinstance(v, (bool, np.bool_)):
                attrs[f"approx_{k}"] = int(v)
            elif isinstance(v, (int, float, str, np.integer, np.floating)):
                attrs[f"approx_{k}"] = v
        dt.attrs.update(attrs)
        return dt

    def write(self, out_dir, data: Rankings, priors: Priors) -> dict:
        """``posterior.nc`` (as NUTS writes it) and ``summary.csv`` into ``out_dir``."""
        import arviz_stats as azs

        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        dt = self.to_datatree(data, priors)
        nc = out / "posterior.nc"
        dt.to_netcdf(nc, engine="h5netcdf")
        csv = out / "summary.csv"
        azs.summary(dt, kind="stats", round_to="none").to_csv(csv, index_label="parameter")
        return {"posterior": str(nc), "summary": str(csv)}

    def moments(self) -> dict:
        """Per-parameter means and sds of the draws (``lambda``, ``eta``)."""
        out = {"lambda_mean": self.lam.mean(0), "lambda_sd": self.lam.std(0, ddof=1)}
        if self.eta is not None:
            out["eta_mean"], out["eta_sd"] = self.eta.mean(0), self.eta.std(0, ddof=1)
        return out

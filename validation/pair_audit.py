"""The pair-table models audited: a point method (EM MAP, contextual MAP) against NUTS.

The same metrics as the online audit (:func:`validation.metrics.parameter_metrics`:
``z = (approx mean − NUTS mean) / NUTS sd``, the sd ratio, coverages of the
approximation's central intervals, KL, W1) for every parameter family the point method
gives a distribution for:

- CrowdBT extensions by EM (:mod:`inference.batch.crowdbt_ext`): ``lambda`` and ``beta``
  as Normals (the estimate, Laplace's sd with ``η`` fixed), ``eta`` as the Beta of the
  responsibilities, ``Beta(a + Σ r, b + Σ(1 − r))`` (what CrowdBT's EM reports); and,
  when every ``η`` is inside ``(0, 1)``, ``lambda_joint``, ``beta_joint``, ``eta_joint``:
  Normals with the sds of Laplace over ``(λ, β, η)`` jointly (the observed information);
- contextual BT by MAP (:mod:`inference.batch.contextual`): ``lambda`` and ``gamma`` as
  Normals with Laplace's sd.

:func:`audit_crowdbt_ext` / :func:`audit_contextual` fit both and return a JSON-ready
dict: per family the per-parameter arrays and :func:`validation.metrics.aggregate`.
"""

from __future__ import annotations

import numpy as np

from .metrics import aggregate, parameter_metrics


def compare(approx: dict, nuts) -> dict:
    """``approx``: name → ``(family, p1, p2)`` or ``(family, p1, p2, site)`` (flattened
    arrays; ``site``: the NUTS site, default the name); ``nuts`` a
    :class:`inference.pair_nuts.PairNuts`. Returns name → ``{"parameters": {metric:
    list}, "aggregate": {...}}``."""
    out = {}
    for name, spec in approx.items():
        family, p1, p2 = spec[:3]
        site = spec[3] if len(spec) > 3 else name
        d = np.asarray(nuts.draws[site])
        draws = d.reshape(d.shape[0] * d.shape[1], -1)
        ess = np.asarray(nuts.summary[site]["ess"], float).reshape(-1)
        mcse = draws.std(axis=0, ddof=1) / np.sqrt(np.maximum(ess, 1.0))
        m = parameter_metrics(family, np.ravel(p1), np.ravel(p2), draws, mcse)
        out[name] = {"parameters": {k: v.tolist() for k, v in m.items()},
                     "aggregate": aggregate(m["z"], m["sd_ratio"], m["coverage_50"],
                                            m["coverage_90"])}
    return out


def _nuts(backend, numpyro_fn, pymc_fn, nuts_kw):
    from inference.pair_nuts import sample

    if backend == "numpyro":
        import jax
        jax.config.update("jax_enable_x64", True)
        return sample("numpyro", numpyro_fn(), **nuts_kw)
    return sample("pymc", pymc_fn(), **nuts_kw)


def audit_crowdbt_ext(st, worker_ab, *, backend: str = "numpyro", mu0: float = 0.0,
                      sigma0: float = 1.0, bias_sd: float = 1.0, nuts_kw: dict | None = None,
                      em_kw: dict | None = None) -> dict:
    """EM MAP vs NUTS for a :class:`models.crowdbt_ext.Structure`."""
    from inference.batch.crowdbt_ext import fit_ext_em
    from models.crowdbt_ext import numpyro_model, pymc_model

    fit = fit_ext_em(st, worker_ab, mu0=mu0, sigma0=sigma0, bias_sd=bias_sd, **(em_kw or {}))
    nuts = _nuts(backend, lambda: numpyro_model(st, worker_ab, mu0, sigma0, bias_sd),
                 lambda: pymc_model(st, worker_ab, mu0, sigma0, bias_sd), nuts_kw or {})
    approx = {"lambda": ("normal", fit.mu, fit.sd),
              "eta": ("beta", fit.alpha[:, 0], fit.alpha[:, 1])}
    if st.bias:
        approx["beta"] = ("normal", fit.beta, fit.beta_sd)
    if fit.joint is not None:          # Laplace over (λ, β, η) jointly
        approx["lambda_joint"] = ("normal", fit.mu, fit.joint["lambda_sd"], "lambda")
        approx["eta_joint"] = ("normal", fit.eta, fit.joint["eta_sd"], "eta")
        if st.bias:
            approx["beta_joint"] = ("normal", fit.beta, fit.joint["beta_sd"], "beta")
    return {"model": st.variant, "approximation": "em", "backend": backend,
            "em": fit.fit_dict(), "nuts": {"seconds": nuts.seconds,
                                           "max_r_hat": nuts.max_rhat(),
                                           "min_ess": nuts.min_ess(), **nuts.settings},
            "families": compare(approx, nuts)}


def audit_contextual(table, X, *, backend: str = "numpyro", mu0: float = 0.0,
                     sigma0: float = 1.0, tau: float = 1.0, nuts_kw: dict | None = None
                     ) -> dict:
    """Contextual BT's MAP (Laplace) vs NUTS on a :class:`models.pair_table.PairTable`."""
    from inference.batch.contextual import fit_contextual
    from models.contextual import numpyro_model, pymc_model

    X = np.asarray(X, float).reshape(table.n_pairs, -1)
    win, lose = table.winner_loser()
    fit = fit_contextual(win, lose, X, table.n_items, mu0=mu0, sigma0=sigma0, tau=tau)
    nuts = _nuts(backend, lambda: numpyro_model(table, X, mu0, sigma0, tau),
                 lambda: pymc_model(table, X, mu0, sigma0, tau), nuts_kw or {})
    sd_l, sd_g = fit.sd()
    approx = {"lambda": ("normal", fit.lam, sd_l)}
    if X.shape[1]:
        approx["gamma"] = ("normal", fit.gamma, sd_g)
    return {"model": "contextual-bt", "approximation": "map", "backend": backend,
            "map": {"iterations": fit.iterations, "converged": fit.converged},
            "nuts": {"seconds": nuts.seconds, "max_r_hat": nuts.max_rhat(),
                     "min_ess": nuts.min_ess(), **nuts.settings},
            "families": compare(approx, nuts)}

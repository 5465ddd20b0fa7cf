"""The pair-table models audited: a point method (EM MAP, contextual MAP) against NUTS,
the NUTS reference checked (gate, the other PPL), and the models themselves checked
(PSIS-LOO against plain CrowdBT and BT on the same pairs, posterior predictive checks).

Approximation vs NUTS
---------------------
The same metrics as the online audit (:func:`crowdrank.validation.metrics.parameter_metrics`:
``z = (approx mean − NUTS mean) / NUTS sd``, the sd ratio, coverages of the
approximation's central intervals, KL, W1) for every parameter family the point method
gives a distribution for:

- CrowdBT extensions by EM (:mod:`crowdrank.inference.batch.crowdbt_ext`): ``lambda`` and ``beta``
  as Normals (the estimate, Laplace's sd with ``η`` fixed), ``eta`` as the Beta of the
  responsibilities, ``Beta(a + Σ r, b + Σ(1 − r))`` (what CrowdBT's EM reports); and,
  when every ``η`` is inside ``(0, 1)``, ``lambda_joint``, ``beta_joint``, ``eta_joint``:
  Normals with the sds of Laplace over ``(λ, β, η)`` jointly (the observed information);
- contextual BT by MAP (:mod:`crowdrank.inference.batch.contextual`): ``lambda`` and ``gamma`` as
  Normals with Laplace's sd.

The reference
-------------
Every NUTS fit is described by a picklable :class:`PairFit` (the model's data, priors,
back-end and settings) and run by :func:`run_fit`, in this process or as Dask tasks
(:func:`~crowdrank.validation.pipelines.pair_fits.run_fits`, ``scheduler`` as :func:`crowdrank.validation.runtime.grid.dask_client`; the
same seeds give the same draws). The audited fit goes through the suite's convergence
gate (:func:`crowdrank.inference.gate.check`); with ``check_backends`` the model is also fitted by
the other PPL and the two posteriors are compared parameter by parameter with
:func:`crowdrank.validation.reference.backend_agreement` (the ranking audit's rule and table).

Model checks
------------
The observation unit is one presented pair: ``log P(y_s)``, the probability of the
reported winner given the pair, its order, its worker and its columns. Every model here
(the extensions, contextual BT, and the baselines fitted on the same pairs: plain CrowdBT
[Chen13], the extension with ``β ≡ 0`` and one group per worker, and plain BT, contextual
BT without covariates) gives a probability of that same event, so their ``elpd`` are
comparable. The pointwise log-likelihood of every draw comes from the models' NumPy
reference functions (:func:`crowdrank.models.crowdbt_ext.loglik`, :func:`crowdrank.models.contextual.loglik`);
ArviZ computes PSIS-LOO (Pareto ``k̂`` per pair) and the comparison [Vehtari17].

The posterior predictive checks replicate every pair's winner from (E1) or (C1) with the
parameters of a posterior draw and compare statistics of the data with the replicated
ones (the realised discrepancies of :mod:`crowdrank.validation.predictive`, [Gelman96]):

- ``worker_agreement``: per worker, the share of their pairs won by the item the draw
  prefers (``λ_f > λ_t``; contextual BT: the sign of (C1), covariates included);
- ``first_choice_rate``: per worker and over all, the share of pairs won by the item shown
  first — a bias the plain models cannot reproduce;
- ``category_agreement`` (``crowdbt-domain``): the agreement by category.

Reported per statistic as :class:`crowdrank.validation.predictive.PredictiveCheck` rows (observed,
replicated mean and 5–95 % range, ``ppp = P(T(y_rep) ≥ T(y))``, ties counting half).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from crowdrank.validation.metrics import aggregate, parameter_metrics
from crowdrank.validation.pipelines.pair_fits import (  # noqa: F401  (the audit's names, re-exported)
    BASELINES,
    PairFit,
    baseline_fits,
    contextual_fit,
    ext_fit,
    run_fit,
    run_fits,
)

#: Posterior draws used by the predictive checks (evenly spaced over all chains).
PPC_DRAWS = 400


# ====================================================================== approx vs NUTS
def compare(approx: dict, nuts) -> dict:
    """``approx``: name → ``(family, p1, p2)`` or ``(family, p1, p2, site)`` (flattened
    arrays; ``site``: the NUTS site, default the name); ``nuts`` a
    :class:`crowdrank.inference.nuts.pair_nuts.PairNuts`. Returns name → ``{"parameters": {metric:
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


# ====================================================================== LOO and PPC
def pointwise_loglik(fit: PairFit, nuts) -> np.ndarray:
    """``(chain, draw, pair)``: ``log P(y_s | θ)`` of every draw by the reference
    log-likelihood (:meth:`PairFit.loglik`)."""
    first = next(iter(nuts.draws.values()))
    C, D = first.shape[:2]
    out = np.empty((C, D, fit.n_pairs))
    for c in range(C):
        for d in range(D):
            out[c, d] = fit.loglik(fit.params(nuts, c, d))
    if not np.all(np.isfinite(out)):
        raise ValueError(f"{fit.name}: non-finite pointwise log-likelihood")
    return out


def datatree(fit: PairFit, nuts, ll: np.ndarray | None = None):
    """The fit as an ArviZ DataTree (posterior with ids, sample stats, and the pointwise
    log-likelihood ``y`` over ``pair`` when ``ll`` is given)."""
    import xarray as xr

    lld = None
    if ll is not None:
        lld = xr.Dataset({"y": (("chain", "draw", "pair"), ll)},
                         coords={"pair": np.arange(ll.shape[-1])})
    return nuts.datatree(fit.dims(), lld)


def loo(tree):
    """ArviZ PSIS-LOO of a DataTree with the pointwise ``y`` (pointwise values kept)."""
    import arviz_stats as azs

    return azs.loo(tree, pointwise=True, var_name="y")


def loo_table(trees: dict, n_pairs: int):
    """A :class:`crowdrank.validation.predictive.LooTable` (unit ``pair``) over ``{model: DataTree}``."""
    import arviz_stats as azs

    from crowdrank.validation.predictive import LooTable, _loo_pareto

    t = LooTable("pair", "one presented pair: log P(reported winner | the pair, its order, "
                 "worker and columns); every model gives the probability of this same event",
                 int(n_pairs), list(trees))
    loos = {m: loo(tr) for m, tr in trees.items()}
    t.pareto = {m: _loo_pareto(v) for m, v in loos.items()}
    if len(loos) >= 2:
        t.table = azs.compare(loos, round_to="none")
    else:
        t.note = "fewer than two models fitted"
    return t


def _rows_for(stat: str, groups, obs, rep, ns) -> list[dict]:
    rows = []
    for j, g in enumerate(groups):
        if ns[j] == 0:
            continue
        o, r = obs[:, j], rep[:, j]
        rows.append({"statistic": stat, "group": str(g), "n": int(ns[j]),
                     "observed": float(o.mean()), "replicated": float(r.mean()),
                     "replicated_lo": float(np.quantile(r, 0.05)),
                     "replicated_hi": float(np.quantile(r, 0.95)),
                     "ppp": float(np.mean(r > o) + 0.5 * np.mean(r == o))})
    return rows


def ppc_pairs(fit: PairFit, params: list[dict], seed: int = 0):
    """Posterior predictive checks (module docstring) from parameter draws ``params``
    (one dict of arrays per draw): a :class:`crowdrank.validation.predictive.PredictiveCheck`."""
    from crowdrank.validation.predictive import PredictiveCheck

    _, _, won, worker, workers = fit.pairs
    won = np.asarray(won).astype(bool)
    W = len(workers)
    rng = np.random.default_rng(seed)
    nw = np.bincount(worker, minlength=W)
    cats = None
    if fit.categories is not None:
        levels, cats = np.unique(np.asarray(fit.categories, dtype=str), return_inverse=True)
        nc = np.bincount(cats, minlength=len(levels))

    def per(values, index, n):
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.bincount(index, weights=values.astype(float), minlength=n) / np.maximum(
                np.bincount(index, minlength=n), 1)

    obs = {"worker_agreement": [], "first_choice_rate": [], "all": [], "cat": []}
    rep = {k: [] for k in obs}
    fc_obs = per(won, worker, W)
    for par in params:
        pref = fit.preferred_first(par)
        y_rep = rng.random(fit.n_pairs) < fit.prob_first(par)
        for y, box in ((won, obs), (y_rep, rep)):
            agree = y == pref
            box["worker_agreement"].append(per(agree, worker, W))
            box["first_choice_rate"].append(fc_obs if y is won else per(y, worker, W))
            box["all"].append([float(np.mean(y))])
            if cats is not None:
                box["cat"].append(per(agree, cats, len(levels)))
    arr = {k: np.asarray(v) for k, v in obs.items()}
    rar = {k: np.asarray(v) for k, v in rep.items()}
    rows = (_rows_for("worker_agreement", workers, arr["worker_agreement"],
                      rar["worker_agreement"], nw)
            + _rows_for("first_choice_rate", ["all"], arr["all"], rar["all"], [fit.n_pairs])
            + _rows_for("first_choice_rate", workers, arr["first_choice_rate"],
                        rar["first_choice_rate"], nw))
    if cats is not None:
        rows += _rows_for("category_agreement", levels, arr["cat"], rar["cat"], nc)
    return PredictiveCheck(fit.name, len(params), pd.DataFrame(rows))


def ppc_draws(fit: PairFit, nuts, n: int = PPC_DRAWS) -> list[dict]:
    """At most ``n`` posterior draws, evenly spaced over chains and draws."""
    first = next(iter(nuts.draws.values()))
    C, D = first.shape[:2]
    flat = np.unique(np.linspace(0, C * D - 1, min(n, C * D)).round().astype(int))
    return [fit.params(nuts, k // D, k % D) for k in flat]


# ====================================================================== the whole audit
@dataclass
class PairAudit:
    """Everything an audit produced: ``report`` (JSON-ready, ``metrics.json``), the fits
    (``fit`` and its NUTS result, the other PPL's, the baselines'), their DataTrees, the
    backend agreement and the model checks, for the page (:mod:`crowdrank.reports.pair_audit_html`)."""

    report: dict
    fit: PairFit
    nuts: object
    tree: object
    other: object = None
    other_tree: object = None
    agreement: object = None
    baselines: dict = field(default_factory=dict)       # name -> (PairFit, PairNuts, tree)
    loo: object = None                                  # LooTable
    ppc: dict = field(default_factory=dict)             # name -> PredictiveCheck


def _nuts_info(nuts) -> dict:
    return {"backend": nuts.backend, "seconds": nuts.seconds, "max_r_hat": nuts.max_rhat(),
            "min_ess": nuts.min_ess(), **nuts.settings}


def run_pair_audit(fit: PairFit, approx_of: Callable, *, check_backends: bool = False,
                   baselines: list[PairFit] | None = None, checks: bool = True,
                   scheduler=None, processes: int | None = None, seed: int = 0,
                   log: Callable[[str], None] | None = None) -> PairAudit:
    """NUTS for ``fit`` (and, with ``check_backends``, the same model with the other PPL;
    with ``checks`` every ``baselines`` fit too: all through :func:`run_fits`), then
    ``approx_of(nuts) -> (approx dict for :func:`compare`, report fields)`` compared with
    the reference, the gate, the agreement, PSIS-LOO and the predictive checks."""
    from crowdrank.inference.gate import check as gate_check
    from crowdrank.validation.reference import backend_agreement

    log = log or (lambda msg: None)
    t0 = time.perf_counter()
    fits = [fit]
    if check_backends:
        other = "pymc" if fit.backend == "numpyro" else "numpyro"
        kw = dict(fit.nuts_kw, seed=int(fit.nuts_kw.get("seed", 0)) + 1)
        fits.append(replace(fit, backend=other, nuts_kw=kw))
    base = list(baselines or []) if checks else []
    fits += base
    res = run_fits(fits, scheduler=scheduler, processes=processes, log=log)
    nuts = res[0]
    approx, extra = approx_of(nuts)
    ll = pointwise_loglik(fit, nuts) if checks else None
    tree = datatree(fit, nuts, ll)
    gate = gate_check(tree)
    log(f"{fit.name}: {gate.verdict()}")
    report = {"model": fit.name, **extra, "backend": fit.backend,
              "nuts": _nuts_info(nuts), "gate": gate.to_dict(),
              "families": compare(approx, nuts)}
    audit = PairAudit(report, fit, nuts, tree)
    if check_backends:
        alt = res[1]
        audit.other, audit.other_tree = alt, datatree(fits[1], alt)
        ag = backend_agreement(tree, audit.other_tree, labels=(fit.backend, fits[1].backend),
                               variables=tuple(nuts.draws))
        ag.other_gate = gate_check(audit.other_tree)
        audit.agreement = ag
        report["backend_agreement"] = {**ag.to_dict(), "other_gate": ag.other_gate.to_dict(),
                                       "other_nuts": _nuts_info(alt)}
        log(f"{fit.name}: {ag.verdict()}")
    else:
        report["backend_agreement"] = None
    if checks:
        trees = {fit.name: tree}
        offset = 2 if check_backends else 1
        for bf, bn in zip(base, res[offset:]):
            bt = datatree(bf, bn, pointwise_loglik(bf, bn))
            audit.baselines[bf.name] = (bf, bn, bt)
            trees[bf.name] = bt
        log("checks: PSIS-LOO of " + ", ".join(trees) + "; posterior predictive checks")
        audit.loo = loo_table(trees, fit.n_pairs)
        audit.ppc = {fit.name: ppc_pairs(fit, ppc_draws(fit, nuts), seed)}
        for name, (bf, bn, _) in audit.baselines.items():
            audit.ppc[name] = ppc_pairs(bf, ppc_draws(bf, bn), seed)
        report["checks"] = {
            "loo": {"tables": [audit.loo.to_dict()]},
            "ppc": {m: c.to_dict() for m, c in audit.ppc.items()},
            "baselines": {m: _nuts_info(bn) for m, (_, bn, _) in audit.baselines.items()}}
    else:
        report["checks"] = None
    report["seconds_total"] = time.perf_counter() - t0
    return audit


# ====================================================================== warm starts
# CrowdBT's likelihood is unchanged by λ → −λ, η → 1 − η: with chains started at random a
# chain can settle in the mirrored mode (the prior makes it far less probable, but it is a
# local mode), and the reference then fails its gate with R-hat near 2. As the ranking
# audit starts its chains from draws of the online posterior, these start from draws of
# the point method's distribution (one per chain, seeded), in the mode the point method
# found (EM starts every accuracy at >= 0.7: workers on the whole truthful). Warm-up then
# moves each chain on its own; the draws kept are NUTS's.
def _chains(nuts_kw: dict) -> int:
    return int(nuts_kw.get("chains", 2))


def _normal(rng, mu, sd):
    return rng.normal(np.asarray(mu, float), np.asarray(sd, float))


def _truthful(rng, worker_ab):
    """An accuracy per row of ``worker_ab`` from its Beta prior, reflected to >= 1/2."""
    ab = np.asarray(worker_ab, float)
    u = rng.beta(ab[:, 0], ab[:, 1])
    return np.clip(np.maximum(u, 1.0 - u), 0.5, 1.0 - 1e-3)


def _baseline_inits(fits: list, lam_mu, lam_sd, worker_ab, seed: int) -> None:
    rng = np.random.default_rng(seed + 7)
    for f in fits:
        f.inits = [{"lambda": _normal(rng, lam_mu, lam_sd),
                    **({"eta": _truthful(rng, worker_ab)} if f.kind == "ext" else {})}
                   for _ in range(_chains(f.nuts_kw))]


# ====================================================================== the two audits
def crowdbt_ext_audit(st, worker_ab, *, backend: str = "numpyro", mu0: float = 0.0,
                      sigma0: float = 1.0, bias_sd: float = 1.0, nuts_kw: dict | None = None,
                      em_kw: dict | None = None, categories=None, warm_start: bool = True,
                      **opts) -> PairAudit:
    """EM MAP vs NUTS for a :class:`crowdrank.models.crowdbt_ext.Structure` (``opts``: those of
    :func:`run_pair_audit`; ``baselines``, when given, names the models of
    :data:`BASELINES` to fit; ``warm_start``: chains start from draws of the EM's
    distribution, see "warm starts" above)."""
    from crowdrank.inference.batch.crowdbt_ext import fit_ext_em

    em = fit_ext_em(st, worker_ab, mu0=mu0, sigma0=sigma0, bias_sd=bias_sd, **(em_kw or {}))
    prior = {"mu0": mu0, "sigma0": sigma0, "bias_sd": bias_sd}
    fit = ext_fit(st.variant, st, worker_ab, prior, backend, nuts_kw or {}, categories)
    seed = int(opts.get("seed", 0))
    if warm_start:
        rng = np.random.default_rng(seed + 5)
        fit.inits = [{"lambda": _normal(rng, em.mu, em.sd),
                      "eta": np.clip(rng.beta(em.alpha[:, 0], em.alpha[:, 1]), 1e-3,
                                     1 - 1e-3),
                      **({"beta": _normal(rng, em.beta, em.beta_sd)} if st.bias else {})}
                     for _ in range(_chains(fit.nuts_kw))]

    def approx_of(nuts):
        approx = {"lambda": ("normal", em.mu, em.sd),
                  "eta": ("beta", em.alpha[:, 0], em.alpha[:, 1])}
        if st.bias:
            approx["beta"] = ("normal", em.beta, em.beta_sd)
        if em.joint is not None:          # Laplace over (λ, β, η) jointly
            approx["lambda_joint"] = ("normal", em.mu, em.joint["lambda_sd"], "lambda")
            approx["eta_joint"] = ("normal", em.eta, em.joint["eta_sd"], "eta")
            if st.bias:
                approx["beta_joint"] = ("normal", em.beta, em.joint["beta_sd"], "beta")
        return approx, {"approximation": "em", "em": em.fit_dict()}

    names = opts.pop("baselines", BASELINES)
    base = baseline_fits(st.first, st.second, st.y, st.worker, st.items, st.workers,
                         worker_ab, prior, backend, nuts_kw or {}, names, st.source)
    if warm_start:
        _baseline_inits(base, em.mu, em.sd, worker_ab, seed)
    return run_pair_audit(fit, approx_of, baselines=base, **opts)


def contextual_audit(table, X, *, backend: str = "numpyro", mu0: float = 0.0,
                     sigma0: float = 1.0, tau: float = 1.0, nuts_kw: dict | None = None,
                     covariates: tuple = (), worker_ab=None, warm_start: bool = True,
                     **opts) -> PairAudit:
    """Contextual BT's MAP (Laplace) vs NUTS on a :class:`crowdrank.models.pair_table.PairTable`
    (``worker_ab``: the Beta priors of the plain-CrowdBT baseline, default ``Beta(5, 1)``)."""
    from crowdrank.inference.batch.contextual import fit_contextual

    X = np.asarray(X, float).reshape(table.n_pairs, -1)
    win, lose = table.winner_loser()
    mp = fit_contextual(win, lose, X, table.n_items, mu0=mu0, sigma0=sigma0, tau=tau)
    prior = {"mu0": mu0, "sigma0": sigma0, "tau": tau}
    fit = contextual_fit("contextual-bt", table, X, prior, backend, nuts_kw or {}, covariates)
    seed = int(opts.get("seed", 0))
    sd_l, sd_g = mp.sd()
    if warm_start:
        rng = np.random.default_rng(seed + 5)
        fit.inits = [{"lambda": _normal(rng, mp.lam, sd_l),
                      **({"gamma": _normal(rng, mp.gamma, sd_g)} if X.shape[1] else {})}
                     for _ in range(_chains(fit.nuts_kw))]

    def approx_of(nuts):
        sd_l, sd_g = mp.sd()
        approx = {"lambda": ("normal", mp.lam, sd_l)}
        if X.shape[1]:
            approx["gamma"] = ("normal", mp.gamma, sd_g)
        return approx, {"approximation": "map",
                        "map": {"iterations": mp.iterations, "converged": mp.converged}}

    names = opts.pop("baselines", BASELINES)
    wab = (np.tile([5.0, 1.0], (table.n_workers, 1)) if worker_ab is None
           else np.asarray(worker_ab, float))
    base = baseline_fits(table.first, table.second, table.first_won, table.worker,
                         table.items, table.workers, wab, prior, backend, nuts_kw or {},
                         names, table.source)
    if warm_start:
        _baseline_inits(base, mp.lam, sd_l, wab, seed)
    return run_pair_audit(fit, approx_of, baselines=base, **opts)


def audit_crowdbt_ext(st, worker_ab, **kw) -> dict:
    """:func:`crowdbt_ext_audit`'s report only (no model checks unless ``checks=True``)."""
    kw.setdefault("checks", False)
    return crowdbt_ext_audit(st, worker_ab, **kw).report


def audit_contextual(table, X, **kw) -> dict:
    """:func:`contextual_audit`'s report only (no model checks unless ``checks=True``)."""
    kw.setdefault("checks", False)
    return contextual_audit(table, X, **kw).report

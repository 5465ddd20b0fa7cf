"""Posterior model checks: PSIS-LOO model comparison and posterior predictive checks
(docs/design.md, "Model checks").

Both read what :func:`crowdrank.inference.nuts.fit_nuts` stores from the observed site ``rankings``:
the per-ranking log-likelihood (group ``log_likelihood``) and new orders of the observed
tasks drawn by the model's generative process (group ``posterior_predictive``). Pure
functions of those arrays; :mod:`crowdrank.reports.predictive_html` renders them.

Which observations a model can be compared on
---------------------------------------------
PSIS-LOO estimates the expected log predictive density of a left-out observation [Vehtari17];
``elpd`` values of two models are comparable only when both are log *probabilities of the
same event*. The unit here is one ranking (its order given its task: items and worker):

* PL, normalised COUPLE (and PeerGrader) are distributions over the ``k!`` orderings of a
  task for every ``k``;
* stagewise COUPLE's Eq. 4 is normalised only for ``k = 2`` ([Pan18]; docs/design.md,
  Facts);
* BT and CrowdBT score a ranking by its ``k(k−1)/2`` rank-broken pairs as if independent, a
  composite likelihood that is not normalised over orderings for ``k ≥ 3``; for ``k = 2``
  it is the probability of the pair's order.

So :func:`loo_compare` makes two comparisons and refuses the rest: **rankings with k = 2**
(every model: each value is ``log P(order of the pair)``), and **all rankings** (only the
models normalised for every ``k`` in the data). For the ``k = 2`` comparison every model
is still fitted on all its data; only the held-out units are the pairs.

Given the data, a third comparison puts PL, BT, CrowdBT and COUPLE (every model whose
spec has a ``pair_loglik``) on the same units of every length: **the composite pairwise
unit** (``"pairs"``). The unit is one ranking; its score under a model is the *composite
log-likelihood* ``c_n(θ) = Σ_{(i, j) ∈ pairs(ρ_n)} log P(i before j | θ)``, the sum over
the ranking's ``k(k−1)/2`` rank-broken pairs of the probability the model gives that
pair's order when the pair is a two-item task of the same worker (for BT and CrowdBT
``c_n`` is their own likelihood; for PL each term is also the exact pair marginal of the
ranking; for COUPLE it is Eq. 4 with ``k = 2``). ``c_n`` is not the probability of the
ranking — the pairs of one ranking are dependent — so this compares the models'
*pairwise predictions* on the same events, a composite-likelihood comparison [Varin11],
not their predictive densities of rankings. The leave-one-out posterior is still each
model's own: the PSIS weights and their Pareto ``k̂`` come from the model's likelihood of
the left-out ranking (what removing it from the data changes), and the expected score is
``elpd_n = log Σ_s w_s(n) exp(c_n(θ_s))`` with the smoothed normalised weights
(:func:`composite_loo`); for BT and CrowdBT this is their ordinary PSIS-LOO.

Posterior predictive checks
---------------------------
A statistic ``T`` of the rankings measured against the *posterior order* of each task's
items (the order by ``λ`` of the same draw, :func:`crowdrank.validation.predictive_stats.order_by_scores`)
is computed on the data and on the draw's replicated data: ``T(y, θ_d)`` against
``T(y_rep,d, θ_d)``, a realised-discrepancy check [Gelman96]. Reported per statistic: the
posterior mean of the observed value, the mean and the 5–95 % range of the replicated
value, and the posterior predictive p-value ``P(T(y_rep) ≥ T(y))`` (ties count half);
values near 0 or 1 mean the model does not reproduce that feature of the data. The
statistics are :mod:`crowdrank.validation.predictive_stats`'s (shared with the prior predictive
checks): the first-choice rate by stage and each worker's pair agreement.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from crowdrank.models.data import Rankings
from crowdrank.models.registry import ModelSpec, as_spec, name_of
from crowdrank.validation.predictive_stats import (
    first_choice_by_stage,
    order_by_scores,
    worker_pair_agreement,
)

#: Pareto k̂ above this: the PSIS estimate of that observation's elpd is unreliable
#: [Vehtari17]. With ``S`` draws the threshold is ``min(1 − 1/log10 S, 0.7)`` (ArviZ's
#: ``good_k``; 0.7 from ``S ≈ 2,200``), which is what :func:`loo_compare` uses.
PARETO_K_BAD = 0.7


# ====================================================================== observation units
def normalised_for(model: str | ModelSpec, k: int) -> bool:
    """Whether ``model``'s (a name or its spec) per-ranking likelihood is a probability
    over the ``k!`` orderings of a task of length ``k`` (module docstring)."""
    spec = as_spec(model)
    if k <= 2:
        return True
    # rank-broken pairs: a composite likelihood; stagewise COUPLE: Eq. 4 is not normalised
    # (it is the only non-pairwise model without an exact simulator)
    return not spec.pairwise and spec.exact_simulator


@dataclass
class LooTable:
    """One comparison: the observation unit, the models compared, and why others were not.

    ``table`` is ArviZ's ``compare`` (index: model; ``rank``, ``elpd``, ``p``,
    ``elpd_diff``, ``weight``, ``se``, ``dse``, ...); ``pareto`` per model: ``max_k``,
    ``good_k`` (the threshold for its number of draws), ``n_bad`` (``k̂ > good_k``), ``n``,
    ``elpd``, ``se``; ``refused`` model → reason;
    ``note`` says why there is no table when ``table`` is None.
    """

    unit: str
    description: str
    n_obs: int
    models: list[str]
    table: pd.DataFrame | None = None
    pareto: dict = field(default_factory=dict)
    refused: dict = field(default_factory=dict)
    note: str = ""

    def to_dict(self) -> dict:
        tab = None
        if self.table is not None:
            tab = [{"model": str(i), **{c: (v.item() if hasattr(v, "item") else v)
                                        for c, v in row.items()}}
                   for i, row in self.table.iterrows()]
        return {"unit": self.unit, "description": self.description, "n_obs": self.n_obs,
                "models": list(self.models), "table": tab, "pareto": self.pareto,
                "refused": self.refused, "note": self.note}


@dataclass
class LooComparison:
    """The PSIS-LOO comparisons of :func:`loo_compare` (one :class:`LooTable` per unit)."""

    tables: list[LooTable]

    def to_dict(self) -> dict:
        return {"tables": [t.to_dict() for t in self.tables],
                "pareto_k_threshold": PARETO_K_BAD}


def _subset_tree(idata, rows: np.ndarray):
    """A DataTree with the posterior and the log-likelihood of rankings ``rows`` only."""
    import xarray as xr

    ll = idata["log_likelihood"].to_dataset()[["rankings"]].isel(ranking=rows)
    post = idata["posterior"].to_dataset()
    return xr.DataTree.from_dict({"posterior": post, "log_likelihood": ll})


def composite_pair_loglik(model: str | ModelSpec, data: Rankings, lam,
                          eta=None) -> np.ndarray:
    """``c_n(θ)`` of every ranking of ``data`` (module docstring) for draws ``lam``
    ``(..., L)`` and ``eta`` ``(..., W)`` / ``(..., W, K)`` (None without a worker
    parameter), in ``data``'s item and worker order: ``(..., N)``, the sum of the model's
    ``pair_loglik`` over each ranking's rank-broken pairs."""
    f = as_spec(model).fn("pair_loglik")
    if f is None:
        raise ValueError(f"model {name_of(model)!r} has no pair likelihood (registry "
                         "pair_loglik)")
    pairs = dataclasses.replace(data, origin=None).rank_break()
    lp = np.asarray(f(lam, eta, pairs.order[0], pairs.order[1], pairs.worker))
    flat = lp.reshape(-1, lp.shape[-1])
    out = np.zeros((flat.shape[0], data.n_rankings))
    np.add.at(out, (slice(None), np.asarray(pairs.origin)), flat)
    return out.reshape(lp.shape[:-1] + (data.n_rankings,))


def composite_loo(idata, data: Rankings, model: str | ModelSpec, own=None):
    """PSIS-LOO of the composite pairwise unit for one fit (module docstring): weights and
    Pareto ``k̂`` from the fit's own per-ranking log-likelihood, expected score ``c_n``.
    ``own``: that fit's PSIS-LOO over all its rankings when already computed (ArviZ
    smooths each ranking's weights in a Python loop, ~1 ms a ranking: 13 s for the
    read-level data). Returns ArviZ's ELPD object (``elpd``, ``se``, ``elpd_i``,
    ``pareto_k``)."""
    import arviz_stats as azs
    import xarray as xr

    if own is None:
        own = azs.loo(_subset_tree(idata, np.arange(data.n_rankings)), pointwise=True,
                      var_name="rankings")
    post = idata["posterior"].to_dataset()
    lam = post["lambda"].values
    spec = as_spec(model)
    eta = post["eta"].values if "eta" in post and spec.has_eta else None
    ll = idata["log_likelihood"].to_dataset()["rankings"]
    comp = ll.copy(data=composite_pair_loglik(spec, data, lam, eta))
    tree = xr.DataTree.from_dict({"posterior": post,
                                  "log_likelihood": xr.Dataset({"rankings": comp})})
    return azs.loo(tree, pointwise=True, var_name="rankings", log_weights=own.log_weights,
                   pareto_k=own.pareto_k)


def loo_compare(fits: dict, lengths, data: Rankings | None = None, *,
                specs: dict | None = None) -> LooComparison:
    """PSIS-LOO of each fit (``{model: DataTree}`` with a ``log_likelihood`` group, all on
    the same rankings, whose lengths are ``lengths``) on the observation units of the
    module docstring, compared with ArviZ (``arviz_stats.loo`` / ``compare``). With
    ``data`` (the rankings the fits are on) the composite pairwise unit is added.
    ``specs``: the models' specs by name where the caller has them (the others are
    looked up once, here)."""
    import arviz_stats as azs

    specs = _Specs(specs or {})
    lengths = np.asarray(lengths)
    units = [("k=2", lengths == 2,
              "rankings of two items (pairs): every model gives log P(order of the pair)")]
    if np.any(lengths > 2):
        units.insert(0, ("all", np.ones(len(lengths), bool),
                         ("all rankings: only models normalised over the k! orderings of "
                          "every task length in the data")))
    else:
        units[0] = ("all", lengths == 2, "all rankings (every one has two items)")
    out, whole = [], {}              # each fit's PSIS-LOO over all its rankings
    for unit, sel, desc in units:
        rows = np.flatnonzero(sel)
        ks = sorted(set(lengths[rows].tolist()))
        ok, refused = [], {}
        for m, dt in fits.items():
            if "log_likelihood" not in dt.children:
                refused[m] = "no pointwise log-likelihood stored (pointwise=False)"
            elif any(not normalised_for(specs[m], k) for k in ks):
                bad = [k for k in ks if not normalised_for(specs[m], k)]
                refused[m] = (f"its likelihood of a ranking with k = {', '.join(map(str, bad))}"
                              " is not a probability over orderings "
                              + ("(rank-broken pairs)" if specs[m].pairwise
                                 else "(Eq. 4 is not normalised)"))
            else:
                ok.append(m)
        t = LooTable(unit, desc, len(rows), ok, refused=refused)
        if len(rows) == 0:
            t.note = "no such rankings in the data"
        elif len(ok) < 2:
            t.note = "fewer than two comparable models"
        if t.note and not len(rows):
            out.append(t)
            continue
        loos = {m: azs.loo(_subset_tree(fits[m], rows), pointwise=True, var_name="rankings")
                for m in ok}
        if len(rows) == len(lengths):
            whole.update(loos)
        t.pareto = {m: _loo_pareto(v) for m, v in loos.items()}
        if t.note:
            out.append(t)
            continue
        t.table = azs.compare(loos, round_to="none")
        out.append(t)
    if data is not None:
        out.append(_composite_table(fits, data, whole, specs))
    return LooComparison(out)


class _Specs(dict):
    """Models' specs by name: those given, and each other one looked up on its first use
    (once; a fit refused before its spec is read needs none)."""

    def __missing__(self, name):
        spec = self[name] = as_spec(name)
        return spec


def _composite_table(fits: dict, data: Rankings, whole: dict, specs: dict) -> LooTable:
    import arviz_stats as azs

    ok, refused = [], {}
    for m, dt in fits.items():
        if "log_likelihood" not in dt.children:
            refused[m] = "no pointwise log-likelihood stored (pointwise=False)"
        elif specs[m].pair_loglik is None:
            refused[m] = "no pair likelihood in its registry spec (pair_loglik)"
        else:
            ok.append(m)
    t = LooTable("pairs", "each ranking's rank-broken pairs as one unit: a composite-"
                 "likelihood comparison of pairwise predictions (Σ over the pairs of log P of "
                 "the pair's order), PSIS weights from each model's own likelihood",
                 int(data.n_rankings), ok, refused=refused)
    if not ok:
        t.note = "no model with a pair likelihood"
        return t
    # a pairwise model's likelihood of a ranking is the sum over its rank-broken pairs
    # (tests/test_loo_pairs.py), so its composite LOO is its own: reused, not recomputed
    loos = {m: whole[m] if m in whole and specs[m].pairwise
            else composite_loo(fits[m], data, specs[m], own=whole.get(m)) for m in ok}
    t.pareto = {m: _loo_pareto(v) for m, v in loos.items()}
    if len(ok) < 2:
        t.note = "fewer than two comparable models"
    else:
        t.table = azs.compare(loos, round_to="none")
    return t


def _loo_pareto(elpd) -> dict:
    k = np.asarray(elpd.pareto_k).ravel()
    good = float(getattr(elpd, "good_k", PARETO_K_BAD) or PARETO_K_BAD)
    return {"max_k": float(np.max(k)), "good_k": good, "n_bad": int(np.sum(k > good)),
            "n": int(k.size), "elpd": float(elpd.elpd), "se": float(elpd.se)}


# ====================================================================== predictive checks
@dataclass
class PredictiveCheck:
    """Posterior predictive checks of one fit: one row per statistic and group.

    ``rows`` columns: ``statistic`` (``first_choice_stage`` or ``worker_pair_agreement``),
    ``group`` (stage ``1..K−1`` or worker id), ``n`` (rankings behind it), ``observed``
    (posterior mean of ``T(y, θ)``), ``replicated`` (mean of ``T(y_rep, θ)``),
    ``replicated_lo``/``replicated_hi`` (its 5 % and 95 % quantiles), ``ppp``.
    """

    model: str
    draws: int
    rows: pd.DataFrame

    def flagged(self, alpha: float = 0.05) -> pd.DataFrame:
        """Rows whose ``ppp`` is below ``alpha/2`` or above ``1 − alpha/2``."""
        p = self.rows["ppp"]
        return self.rows[(p < alpha / 2) | (p > 1 - alpha / 2)]

    def to_dict(self) -> dict:
        return {"model": self.model, "draws": self.draws,
                "rows": self.rows.to_dict(orient="records"),
                "n_flagged": len(self.flagged())}


def check_statistics(data: Rankings, order, reference) -> tuple[np.ndarray, np.ndarray]:
    """``(stage rates (K−1,), worker pair agreement (W,))`` of rankings ``order``
    ``(N, K)`` (the tasks of ``data``) against ``reference`` (per-position layout)."""
    d = dataclasses.replace(data, order=np.asarray(order).T)
    return first_choice_by_stage(d, reference)[0], worker_pair_agreement(d, reference)


def ppc(data: Rankings, lam_draws, replicated, model: str = "") -> PredictiveCheck:
    """Realised-discrepancy checks (module docstring) from ``lam_draws`` ``(D, L)`` and the
    same draws' replicated orders ``replicated`` ``(D, N, K)`` of ``data``'s tasks."""
    lam_draws = np.asarray(lam_draws, float)
    rep = np.asarray(replicated)
    if rep.shape[0] != lam_draws.shape[0] or rep.shape[1:] != (data.n_rankings,
                                                               data.order.shape[0]):
        raise ValueError(f"replicated orders {rep.shape} do not match {lam_draws.shape[0]} "
                         f"draws of {data.n_rankings} rankings of length <= {data.K}")
    obs_s, obs_w, rep_s, rep_w = [], [], [], []
    for d in range(lam_draws.shape[0]):
        ref = order_by_scores(data, lam_draws[d])
        s, w = check_statistics(data, data.order.T, ref)
        obs_s.append(s)
        obs_w.append(w)
        s, w = check_statistics(data, rep[d], ref)
        rep_s.append(s)
        rep_w.append(w)
    _, stage_n = first_choice_by_stage(data, data.order)
    rows = []
    for name, groups, ns, obs, repl in (
            ("first_choice_stage", range(1, data.order.shape[0]), stage_n,
             np.array(obs_s), np.array(rep_s)),
            ("worker_pair_agreement", data.workers, np.bincount(data.worker,
                                                                minlength=data.n_workers),
             np.array(obs_w), np.array(rep_w))):
        for j, g in enumerate(groups):
            if ns[j] == 0:
                continue
            o, r = obs[:, j], repl[:, j]
            rows.append({"statistic": name, "group": str(g), "n": int(ns[j]),
                         "observed": float(o.mean()), "replicated": float(r.mean()),
                         "replicated_lo": float(np.quantile(r, 0.05)),
                         "replicated_hi": float(np.quantile(r, 0.95)),
                         "ppp": float(np.mean(r > o) + 0.5 * np.mean(r == o))})
    return PredictiveCheck(model, int(lam_draws.shape[0]), pd.DataFrame(rows))


def ppc_from_idata(data: Rankings, idata, model: str = "") -> PredictiveCheck | None:
    """:func:`ppc` from a fit's ``posterior_predictive`` group (None when it has none):
    the replicated orders and ``λ`` of the same (chain, draw) pairs."""
    if "posterior_predictive" not in idata.children:
        return None
    pp = idata["posterior_predictive"]["rankings"]
    lam = idata["posterior"]["lambda"].sel(draw=pp["draw"].values).values
    rep = np.asarray(pp.values)
    C, D = rep.shape[:2]
    return ppc(data, lam.reshape(C * D, -1), rep.reshape((C * D,) + rep.shape[2:]),
               model or str(idata.attrs.get("model", "")))


# ====================================================================== the audit's checks
@dataclass
class ModelChecks:
    """What the audit reports about the models themselves (not about an approximation):
    the PSIS-LOO comparison and one posterior predictive check per fitted model."""

    loo: LooComparison
    ppc: dict                       # model -> PredictiveCheck
    extra_fits: dict = field(default_factory=dict)   # model -> file of a fit made for LOO

    def to_dict(self) -> dict:
        return {"loo": self.loo.to_dict(),
                "ppc": {m: c.to_dict() for m, c in self.ppc.items() if c is not None},
                "extra_fits": dict(self.extra_fits)}


def model_checks(data: Rankings, priors, fits: dict, extra_models=(), *, out=None,
                 log=None, fit=None, specs: dict | None = None, **nuts_kw) -> ModelChecks:
    """LOO comparison and posterior predictive checks of ``fits`` (``{model: DataTree}``)
    and of ``extra_models`` fitted here by NUTS (``nuts_kw`` for
    :func:`crowdrank.inference.nuts.fit_nuts`), or by ``fit(data, model, priors)`` (a
    result with ``idata`` and ``gate``, e.g. the collapsed Gibbs sampler's) when given;
    written to ``out/checks/<model>/`` when ``out`` is given. All fits are on ``data``,
    under ``priors``. ``specs``: the models' specs by name where the caller has them (the
    others are looked up once, here)."""
    from pathlib import Path

    from crowdrank.inference.nuts import fit_nuts, write_nuts

    log = log or (lambda msg: None)
    fits = dict(fits)
    specs = _Specs(specs or {})
    files = {}
    for m in extra_models:
        if m in fits:
            continue
        pri = specs[m].worker_priors(priors, data)
        if fit is not None:
            log(f"checks: the reference sampler for {m} (for the LOO comparison)")
            res = fit(data, m, pri)
        else:
            log(f"checks: NUTS for {m} (for the LOO comparison)")
            res = fit_nuts(data, m, pri, pointwise=True, predictive=True, **nuts_kw)
        fits[m] = res.idata
        if out is not None:
            d = Path(out) / "checks" / m
            write_nuts(res, d)
            files[m] = f"checks/{m}/posterior.nc"
    log(f"checks: PSIS-LOO of {', '.join(fits)}; posterior predictive checks")
    loo = loo_compare(fits, data.lengths, data, specs=specs)
    checks = {m: ppc_from_idata(data, dt, m) for m, dt in fits.items()}
    return ModelChecks(loo, checks, files)

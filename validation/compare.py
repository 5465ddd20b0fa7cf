"""An approximate posterior against a NUTS reference on the same data and priors.

docs/design.md, Validation. :func:`compare` takes two
posteriors (:class:`crowdrank.inference.posterior.Posterior`), the reference and the approximation.
The reference's draws are an ArviZ ``DataTree`` in the layout of ``docs/contracts.md``
(``lambda`` over ``item``; COUPLE ``eta`` over ``(worker, stage)``, CrowdBT ``eta`` over
``worker``); the approximation is read through its marginals (``model, items, mu, sigma2,
workers, alpha``: the helpers below take any object with these attributes). Parameters are
matched by their real ids, never by position.

The approximate marginals compared are those the online state *is*: ``N(μ_r, σ_r²)`` for
item scores; for COUPLE the Beta marginals ``Beta(α_t, S − α_t)`` of ``Dir(α_w)`` ([Pan18],
Eq. 9-10 keep ``α_w`` Dirichlet); for CrowdBT ``Beta(a_w, b_w)`` [Chen13].

The reference is trusted only if the NUTS convergence gate passes; otherwise every number is
still computed, and the comparison carries ``trusted = False`` with the gate's reasons.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from crowdrank.validation import metrics as M
from crowdrank.validation.agreement import (  # noqa: F401  (compare's public names)
    LOW_WORKERS,
    TOP_K,
    PairwiseAccuracy,
    comparison_components,
    lowest,
    order_sensitivity,
    pairwise_accuracy,
    pairwise_accuracy_comparable,
    ranking_agreement,
    top_overlap,
    worker_agreement,
)
from crowdrank.validation.tables import (  # noqa: F401  (align and aggregates: compare's public names)
    DrawsMemo,
    _coord,
    _diag,
    _finite_or_none,
    _flat_draws,
    _reindex,
    aggregates,
    align,
)

PARAM_COLUMNS = ("model", "variant", "kind", "param", "id", "stage", "mcmc_mean", "mcmc_sd",
                 "mcse", "rhat", "ess_bulk", "ess_tail", "approx_mean", "approx_sd", "z",
                 "noise_floor", "sd_ratio", "kl", "w1", "coverage_50", "coverage_90",
                 "reference_trusted")


# ------------------------------------------------------------------ the gate
def reference_gate(reference, gate=None):
    """The trust decision: ``gate`` when given, else the reference's own
    (``Posterior.gate``, ``NutsResult.gate``), else computed from its draws by
    :func:`crowdrank.inference.gate.check` (rank R-hat < 1.01, bulk and tail ESS >= 400, no
    divergences, E-BFMI >= 0.3)."""
    from crowdrank.inference.gate import check

    if gate is not None:
        return gate
    if reference.gate is not None:
        return reference.gate
    return check(reference.tree)


# ------------------------------------------------------------------ marginals
def worker_quality_online(online) -> np.ndarray:
    """``E[η_w^1]`` under the online state ([Pan18], Sect. 5.3): ``α_w^1 / Σ_t α_w^t``;
    for CrowdBT ``a_w / (a_w + b_w)``. Rows in ``online.workers`` order."""
    alpha = np.asarray(online.alpha, float)
    return alpha[:, 0] / alpha.sum(axis=1)


def worker_quality_nuts(idata) -> np.ndarray:
    """Posterior mean of ``η_w^1`` (COUPLE: stage 1; CrowdBT: the accuracy), worker order
    of the ``worker`` coordinate."""
    eta = idata["posterior"]["eta"]
    if "stage" in eta.dims:
        eta = eta.isel(stage=0)
    return np.asarray(eta.mean(("chain", "draw")).transpose("worker").values, float)


#: A zero sd (a point mass: a method whose draws are all equal, a Laplace whose Hessian is
#: singular) is scored as the limit of ``N(m, s²)`` with ``s → 0``: its sd is raised to this
#: fraction of the reference's smallest sd, which keeps every metric's Gaussian defined
#: (``z`` exact, sd ratio and coverage ≈ 0, KL large) instead of failing the comparison.
POINT_MASS_SD = 1e-9


def approx_sd(online, idx, idata) -> np.ndarray:
    """The approximation's item sds (``online.sigma2`` at ``idx``), a zero one raised to
    :data:`POINT_MASS_SD` of the reference's smallest item sd with a warning naming the
    items; a negative or non-finite variance is an error naming them."""
    import warnings

    var = np.asarray(online.sigma2, float)[idx]
    items = _coord(idata, "item")
    bad = ~np.isfinite(var) | (var < 0)
    if bad.any():
        raise ValueError(f"the approximation's variance is negative or not finite for "
                         f"{[items[k] for k in np.flatnonzero(bad)][:5]}")
    zero = var == 0
    if zero.any():
        ref_sd = float(np.asarray(idata["posterior"]["lambda"].std(("chain", "draw"))).min())
        warnings.warn(f"the approximation has sd 0 for {int(zero.sum())} item(s) (e.g. "
                      f"{[items[k] for k in np.flatnonzero(zero)][:5]}): scored as a point "
                      "mass (sd ratio and coverage ~0)", RuntimeWarning, stacklevel=3)
        var = np.where(zero, (POINT_MASS_SD * max(ref_sd, 1e-12)) ** 2, var)
    return np.sqrt(var)


def parameter_table(online, idata, *, model: str | None = None, variant: str = "default",
                    trusted: bool = True) -> pd.DataFrame:
    """One row per scalar parameter (every ``λ_r``, every ``η_w`` component) with every
    metric of :func:`crowdrank.validation.metrics.parameter_metrics` and the MCMC diagnostics."""
    model = model or getattr(online, "model", None) or idata.attrs.get("model")
    frames = []
    # items: Gaussian q
    items = _coord(idata, "item")
    idx = _reindex(online.items, items, "item(s)")
    mu = np.asarray(online.mu, float)[idx]
    sd = approx_sd(online, idx, idata)
    x, _ = _flat_draws(idata, "lambda")
    d = _diag(idata, "lambda")
    r = M.parameter_metrics("normal", mu, sd, x, d["mcse"])
    frames.append(pd.DataFrame({"kind": "lambda", "param": [f"lambda[{i}]" for i in items],
                                "id": items, "stage": 0, **r,
                                **{k: v for k, v in d.items() if k != "mcse"}}))
    # workers: Beta marginals
    if "eta" in idata["posterior"] and getattr(online, "alpha", None) is not None:
        workers = _coord(idata, "worker")
        widx = _reindex(online.workers, workers, "worker(s)")
        alpha = np.asarray(online.alpha, float)[widx]
        x, dims = _flat_draws(idata, "eta")
        d = _diag(idata, "eta")
        if "stage" in dims:
            stages = [int(s) for s in idata["posterior"]["stage"].values]
            K = len(stages)
            if alpha.shape[1] < K:
                raise ValueError(f"online alpha has {alpha.shape[1]} stages, NUTS has {K}")
            a, b = M.dirichlet_marginals(alpha[:, :K])
            ids = np.repeat(workers, K)
            stage = np.tile(stages, len(workers))
            params = [f"eta[{w},{t}]" for w, t in zip(ids, stage)]
            a, b = a.reshape(-1), b.reshape(-1)
        else:
            a, b = alpha[:, 0], alpha[:, 1]
            ids, stage = np.asarray(workers), 1
            params = [f"eta[{w}]" for w in workers]
        r = M.parameter_metrics("beta", a, b, x, d["mcse"])
        frames.append(pd.DataFrame({"kind": "eta", "param": params, "id": ids, "stage": stage,
                                    **r, **{k: v for k, v in d.items() if k != "mcse"}}))
    table = pd.concat(frames, ignore_index=True)
    table["model"] = model
    table["variant"] = variant
    table["reference_trusted"] = bool(trusted)
    return table[list(PARAM_COLUMNS)]


# ------------------------------------------------------------------ identified quantities
#: At most this many item pairs get contrast and order-probability rows; with more, a
#: seeded sample of pairs (the (S, P) draw matrix of all L(L−1)/2 pairs would not fit).
MAX_PAIRS = 2000


#: MCSE and bulk ESS of reference draws, memoised on the draws
_REF_STATS = DrawsMemo()


def _ref_stats(draws3) -> tuple[np.ndarray, np.ndarray]:
    """ArviZ's MCSE of the mean and bulk ESS of each column of draws ``(chain, draw, P)``
    (memoised on the draws: :class:`crowdrank.validation.tables.DrawsMemo`)."""
    import arviz_stats as azs
    import xarray as xr

    a = np.asarray(draws3, dtype=float)

    def compute():
        da = xr.DataArray(a, dims=("chain", "draw", "p"))
        return (np.asarray(azs.mcse(da, method="mean").values, float).reshape(-1),
                np.asarray(azs.ess(da, method="bulk").values, float).reshape(-1))

    hit = _REF_STATS.get(a, compute)
    return hit[0].copy(), hit[1].copy()


def _mcse(draws3) -> np.ndarray:
    """ArviZ's MCSE of the mean of each column of draws ``(chain, draw, P)``."""
    return _ref_stats(draws3)[0]


def _derived_metrics(p1, p2, draws3) -> dict[str, np.ndarray]:
    """:func:`crowdrank.validation.metrics.parameter_metrics` for a derived quantity given as draws
    ``(chain, draw, P)``, with its MCSE and ESS from ArviZ on those draws."""
    mcse, ess = _ref_stats(draws3)
    out = M.parameter_metrics("normal", p1, p2, draws3.reshape(-1, draws3.shape[-1]), mcse)
    out["ess_bulk"] = ess
    return out


def item_pairs(L: int, max_pairs: int = MAX_PAIRS, seed: int = 0) -> tuple[np.ndarray,
                                                                          np.ndarray]:
    """All pairs ``i < j`` when there are at most ``max_pairs``, else a seeded sample of
    ``max_pairs`` of them (without replacement), sorted."""
    n = L * (L - 1) // 2
    iu, ju = np.triu_indices(L, 1)
    if n <= max_pairs:
        return iu, ju
    pick = np.sort(np.random.default_rng(seed).choice(n, size=max_pairs, replace=False))
    return iu[pick], ju[pick]


def _derived_approx(online, items, mu, sd, i, j) -> dict:
    """The approximation's centred scores, level, contrasts ``(mean, sd)`` and order
    probabilities. From its own draws when it has them (full-rank VI, Laplace, Pathfinder,
    bootstrap: their correlations, the common level's above all, are in the draws, and
    independent marginals would misstate every centred score), else the closed forms of
    independent Gaussians (:mod:`crowdrank.validation.metrics`)."""
    tree = getattr(online, "tree", None)
    if tree is None or "lambda" not in tree["posterior"]:
        return {"centred": M.centred_normal(mu, sd), "level": M.level_normal(mu, sd),
                "contrast": M.contrast_normal(mu, sd, i, j),
                "order": M.order_probability_normal(mu, sd, i, j)}
    da = tree["posterior"]["lambda"].transpose("chain", "draw", "item")
    own = [str(v) for v in da["item"].values]
    x = np.asarray(da.values, float).reshape(-1, len(own))[:, _reindex(own, items, "item(s)")]
    c, lev, d = M.centred_draws(x), x.mean(axis=-1), x[:, i] - x[:, j]
    return {"centred": (c.mean(0), c.std(0, ddof=1)),
            "level": (float(lev.mean()), float(lev.std(ddof=1))),
            "contrast": (d.mean(0), d.std(0, ddof=1)),
            "order": M.order_probability_draws(x, i, j)}


def identified_comparison(online, idata, *, max_pairs: int = MAX_PAIRS, seed: int = 0
                          ) -> tuple[pd.DataFrame, dict]:
    """The item scores compared on what the data identify (docs/design.md, Validation).

    Beside the raw marginals ``λ_i``: the centred scores ``λ_i − mean(λ)``, the contrasts
    ``λ_i − λ_j`` and the order probabilities ``P(λ_i > λ_j)`` over :func:`item_pairs`, and
    the common level ``mean(λ)`` on its own. An approximation with draws of its own is read
    through those draws (Gaussians moment-matched to each derived quantity, order
    probabilities counted), one with marginals only through the closed forms of
    :mod:`crowdrank.validation.metrics` (its Gaussians are independent); MCMC's are the same
    functions of each draw.

    Returns
    -------
    table : DataFrame
        One row per centred score, contrast and the level (``kind`` ``centred``,
        ``contrast``, ``level``) with the columns of :func:`parameter_table`'s metrics, and
        ``p_order_approx``/``p_order_mcmc`` on contrast rows.
    summary : dict
        ``{"raw"|"centred"|"contrast"|"level": aggregates, "order_probability": ...,
        "level_detail": {...}, "pairs": {...}}``.
    """
    items = _coord(idata, "item")
    idx = _reindex(online.items, items, "item(s)")
    mu = np.asarray(online.mu, float)[idx]
    sd = approx_sd(online, idx, idata)
    da = idata["posterior"]["lambda"].transpose("chain", "draw", "item")
    lam = np.asarray(da.values, float)                       # (C, D, L)
    i, j = item_pairs(len(items), max_pairs, seed)
    q = _derived_approx(online, items, mu, sd, i, j)
    frames = []
    r = _derived_metrics(*q["centred"], M.centred_draws(lam))
    frames.append(pd.DataFrame({"kind": "centred", "param": [f"centred[{i}]" for i in items],
                                "id": items, **r}))
    lm, ls = q["level"]
    r = _derived_metrics(np.array([lm]), np.array([ls]), lam.mean(axis=-1)[..., None])
    frames.append(pd.DataFrame({"kind": "level", "param": ["level"], "id": ["mean(lambda)"],
                                **r}))
    r = _derived_metrics(*q["contrast"], lam[..., i] - lam[..., j])
    flat = lam.reshape(-1, lam.shape[-1])
    pq = q["order"]
    pm = M.order_probability_draws(flat, i, j)
    ids = [f"{items[a]}>{items[b]}" for a, b in zip(i, j)]
    frames.append(pd.DataFrame({"kind": "contrast", "param": [f"contrast[{x}]" for x in ids],
                                "id": ids, **r, "p_order_approx": pq, "p_order_mcmc": pm}))
    table = pd.concat(frames, ignore_index=True)
    summary = {}
    raw_mcse = _mcse(lam)
    raw_r = M.parameter_metrics("normal", mu, sd, flat, raw_mcse)
    for name, sub in (("raw", pd.DataFrame(raw_r)),
                      ("centred", table[table.kind == "centred"]),
                      ("contrast", table[table.kind == "contrast"]),
                      ("level", table[table.kind == "level"])):
        summary[name] = M.aggregate(sub.z, sub.sd_ratio, sub.coverage_50, sub.coverage_90)
        summary[name]["median_noise_floor"] = float(np.median(sub.noise_floor))
        summary[name]["median_kl"] = float(np.median(sub.kl))
        summary[name]["median_w1"] = float(np.median(sub.w1))
    opts = getattr(online, "options", None) or {}
    if "mu0" in opts and "sigma0" in opts:
        # the raw marginals once the level is the exact one (prior N(μ0, σ0²/L))
        km, ks = M.level_corrected_normal(mu, sd, opts["mu0"], opts["sigma0"])
        sub = pd.DataFrame(M.parameter_metrics("normal", km, ks, flat, raw_mcse))
        summary["raw_level_corrected"] = M.aggregate(sub.z, sub.sd_ratio, sub.coverage_50,
                                                     sub.coverage_90)
        summary["raw_level_corrected"]["median_noise_floor"] = float(np.median(sub.noise_floor))
        summary["raw_level_corrected"]["median_kl"] = float(np.median(sub.kl))
        summary["raw_level_corrected"]["median_w1"] = float(np.median(sub.w1))
    summary["order_probability"] = M.order_probability_summary(pq, pm, flat.shape[0])
    lev = table[table.kind == "level"].iloc[0]
    summary["level_detail"] = {k: float(lev[k]) for k in (
        "mcmc_mean", "mcmc_sd", "approx_mean", "approx_sd", "z", "sd_ratio", "kl", "w1",
        "coverage_50", "coverage_90")}
    n_all = len(items) * (len(items) - 1) // 2
    summary["pairs"] = {"used": len(i), "of": int(n_all),
                        "sampled": bool(len(i) < n_all), "seed": int(seed)}
    return table, summary


# ------------------------------------------------------------------ ranking level
@dataclass
class Comparison:
    """The comparison of one online posterior (one variant) against one NUTS reference.

    Attributes
    ----------
    model : str
        The model compared.
    variant : str
        The approximation's label.
    parameters : DataFrame
        One row per parameter: reference and approximation moments, ``z``, the sd ratio,
        KL, W1, the coverages.
    aggregates : dict
        Those rows summarised (medians, maxima, shares).
    ranking : dict
        Kendall τ between the two posteriors' item means, top-k overlap, and each method's
        pairwise accuracy against the truth where known.
    workers : dict or None
        The worker parameters' comparison, for models that have them.
    trusted : bool
        The reference passed its convergence gate.
    reasons : list of str
        Why it did not.
    identified : dict or None
        The comparison on the identified parameters (centred scores, order probabilities).
    identified_table : DataFrame or None
        Their rows.
    """

    model: str
    variant: str
    parameters: pd.DataFrame
    aggregates: dict
    ranking: dict
    workers: dict | None
    trusted: bool
    reasons: list[str]
    identified: dict | None = None     # identified_comparison's summary
    identified_table: pd.DataFrame | None = None

    def to_dict(self) -> dict:
        """JSON-able summary (no per-parameter rows; those go to ``parameters.csv``)."""
        return {"model": self.model, "variant": self.variant,
                "reference_trusted": self.trusted,
                "reference_note": None if self.trusted else
                "reference not trusted: " + "; ".join(self.reasons),
                "aggregates": self.aggregates, "ranking": self.ranking,
                "workers": self.workers, "identified": self.identified}


def _as_pair(reference, approximation):
    """Both arguments as posteriors, the reference first. A call with the approximation
    first and a bare NUTS tree (or ``NutsResult``) second, ``compare(online, idata)``, is
    read the same way."""
    from crowdrank.inference.posterior import Posterior, as_posterior

    def sampled(x):
        return type(x).__name__ in ("DataTree", "NutsResult")

    if sampled(approximation) and not (sampled(reference) or isinstance(reference, Posterior)):
        reference, approximation = approximation, reference
    return as_posterior(reference), as_posterior(approximation)


def compare(reference, approximation, *, gate=None, truth=None, truth_eta1=None, model=None,
            variant: str = "default", components=None, identified: bool = True,
            max_pairs: int = MAX_PAIRS, seed: int = 0) -> Comparison:
    """Compare ``approximation`` with the sampled ``reference`` at parameter, ranking and
    worker level.

    Parameters
    ----------
    reference : Posterior
        The NUTS reference (draws in the contract layout; a ``NutsResult`` or a bare
        DataTree is read as one, :func:`crowdrank.inference.posterior.as_posterior`).
    approximation : Posterior
        Any method's posterior (or a result :func:`~crowdrank.inference.posterior.as_posterior`
        reads). Its marginals give ``z``, the sd ratio, KL, W1 and the coverages — exact
        for closed-form marginals; a method with draws of its own (the bootstrap, the
        draw-only methods, whose marginals are moment-matched) has its λ coverages from
        the percentile intervals of those draws
        (:func:`crowdrank.validation.intervals.percentile_coverage`).
    gate : Gate, optional
        The reference's gate; its own (or one computed from its draws) when absent.
    truth : array, optional
        True item scores aligned with the ``item`` coordinate (higher is better).
    truth_eta1 : array, optional
        True ``η_w^1`` aligned with the ``worker`` coordinate (simulations).
    components : array, optional
        Comparison-graph component of each item, aligned like ``truth``
        (:func:`comparison_components`): the accuracy then counts only pairs the data can
        order, and reports how many were left out.
    identified, max_pairs, seed : also compare centred scores, contrasts, order
        probabilities and the common level (:func:`identified_comparison`; pairs sampled
        with ``seed`` above ``max_pairs``).

    model : str, optional
        The model's name (default: the reference's).
    variant : str
        The approximation's label in the tables.
    """
    ref, online = _as_pair(reference, approximation)
    idata = ref.tree
    g = reference_gate(ref, gate)
    trusted, reasons = bool(g.trusted), [str(r) for r in g.reasons]
    table = parameter_table(online, idata, model=model or online.model, variant=variant,
                            trusted=trusted)
    lam = table[table.kind == "lambda"]
    ranking = ranking_agreement(lam.approx_mean.to_numpy(), lam.mcmc_mean.to_numpy(), truth,
                                components=components)
    workers = None
    if "eta" in idata["posterior"] and online.alpha is not None:
        wid = _coord(idata, "worker")
        q_on = worker_quality_online(online)[_reindex(online.workers, wid, "worker(s)")]
        workers = worker_agreement(q_on, worker_quality_nuts(idata), wid, truth_eta1)
        workers["quality_online"] = q_on.tolist()
        workers["quality_nuts"] = worker_quality_nuts(idata).tolist()
        workers["ids"] = wid
    ident = ident_table = None
    if identified and len(online.items) >= 2:
        ident_table, ident = identified_comparison(online, idata, max_pairs=max_pairs,
                                                   seed=seed)
        ident_table.insert(0, "variant", variant)
        ident_table.insert(0, "model", str(table.model.iloc[0]))
    c = Comparison(model=str(table.model.iloc[0]), variant=variant, parameters=table,
                   aggregates=aggregates(table), ranking=ranking, workers=workers,
                   trusted=trusted, reasons=reasons, identified=ident,
                   identified_table=ident_table)
    if online.tree is not None:
        from crowdrank.validation.intervals import percentile_coverage
        draws = online.tree["posterior"]["lambda"].transpose("chain", "draw", "item")
        percentile_coverage(c, np.asarray(draws.values, float).reshape(-1, draws.shape[-1]),
                            [str(v) for v in draws["item"].values], idata)
    return c

"""The pair-table audit's page (``crowdrank audit PAIRS.csv --model crowdbt-bias|
crowdbt-domain|contextual-bt``): one self-contained HTML file built from the ranking
report's blocks (:mod:`crowdrank.reports.html`, :mod:`crowdrank.reports.figures`,
:mod:`crowdrank.reports.predictive_html`) over a :class:`crowdrank.validation.pipelines.pair_audit.PairAudit`.

Sections: summary (the gate and what the model says), data, the NUTS diagnostics (and
the other PPL's agreement), the approximation against NUTS per parameter family (λ, γ,
β, ρ_{w,c} = η per group, and the joint-Laplace variants), PSIS-LOO against plain CrowdBT
and BT on the same pairs, the posterior predictive checks, definitions and files.
Nothing is computed here beyond summaries of the draws for the text.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .audit_html import DEFINITIONS
from .html import (
    Section,
    agreement_blocks,
    figure,
    fmt,
    heading,
    keyvalues,
    note,
    paragraph,
    table,
    write,
)

#: The aggregate columns of :func:`crowdrank.validation.metrics.aggregate` and their headers.
AGG = ["n", "median_abs_z", "p90_abs_z", "median_sd_ratio", "share_close",
       "mean_coverage_50", "mean_coverage_90"]
AGG_H = ["n", "median |z|", "p90 |z|", "median sd ratio", "share close", "coverage 50 %",
         "coverage 90 %"]

#: What each family is, for the tables.
FAMILY_TEXT = {
    "lambda": "item scores λ (the estimate with Laplace's sd; EM: with η fixed)",
    "eta": "accuracies η (ρ_{w,c} per worker and category for crowdbt-domain) as the Beta "
           "of the EM responsibilities",
    "beta": "worker biases β towards the item shown first (Laplace's sd, η fixed)",
    "gamma": "covariate effects γ (Laplace's sd)",
    "lambda_joint": "λ with the sd of Laplace over (λ, β, η) jointly",
    "eta_joint": "η as a Normal with the joint Laplace sd",
    "beta_joint": "β with the joint Laplace sd",
}

LOO_TEXT = (
    "PSIS-LOO estimates each model's expected log predictive density (elpd) of a left-out "
    "pair: the probability of its reported winner given the pair, the order it was shown "
    "in, its worker and its columns. Every model here — the audited one, plain CrowdBT "
    "(one accuracy per worker, no bias) and plain BT (no worker model, no covariates), "
    "all fitted by NUTS on the same pairs under the same λ prior — gives the probability "
    "of that same event, so their elpd are comparable; higher is better, and a difference "
    "means something when it is several times its standard error (dse). A Pareto k̂ above "
    "the threshold marks pairs whose PSIS estimate is unreliable.")

PPC_TEXT = (
    "Posterior predictive checks: every pair's winner is replicated from the model with the "
    "parameters of a posterior draw, and statistics of the data are compared with the "
    "replicated ones. 'worker_agreement' is the share of a worker's pairs won by the item "
    "the draw prefers (λ_first > λ_second; contextual BT: the sign of its log-odds with the "
    "covariates); 'first_choice_rate' the share won by the item shown first (a bias plain "
    "CrowdBT and BT cannot reproduce); 'category_agreement' the agreement by category. "
    "ppp = P(replicated ≥ observed): below 0.025 or above 0.975 the model does not "
    "reproduce that feature.")


def parameter_table(families: dict, names: dict) -> pd.DataFrame:
    """One row per parameter of every family: ``kind`` (the family), ``param`` (its id)
    and the metrics — the layout :mod:`crowdrank.reports.figures` reads."""
    rows = []
    for fam, f in families.items():
        p = f["parameters"]
        labels = names.get(fam.removesuffix("_joint"), [])
        for j in range(len(p["z"])):
            rows.append({"kind": fam, "param": labels[j] if j < len(labels) else str(j),
                         **{k: v[j] for k, v in p.items()}})
    return pd.DataFrame(rows)


def _names(audit) -> dict:
    dims = audit.fit.dims()
    out = {}
    for site, axes in dims.items():
        if len(axes) == 1:
            out[site] = [str(v) for v in axes[0][1]]
        else:
            out[site] = [f"{a}:{b}" for a in axes[0][1] for b in axes[1][1]]
    return out


def _post(audit, site):
    d = audit.nuts.draws.get(site)
    return None if d is None else np.asarray(d).reshape(-1, *np.shape(d)[2:])


def _interval(x):
    return np.quantile(x, 0.05, axis=0), np.quantile(x, 0.95, axis=0)


def model_says(audit, names: dict) -> list[str]:
    """A few sentences on what the NUTS posterior says (top items, biases, the least
    accurate workers or categories, the largest covariate effects, the LOO verdict)."""
    out = []
    lam = _post(audit, "lambda")
    m = lam.mean(axis=0)
    top = np.argsort(-m)[:3]
    out.append("Highest posterior mean scores: " + ", ".join(
        f"{names['lambda'][i]} ({m[i]:.2f})" for i in top) + ".")
    beta = _post(audit, "beta")
    if beta is not None:
        lo, hi = _interval(beta)
        bm = beta.mean(axis=0)
        sig = [k for k in range(len(bm)) if lo[k] > 0 or hi[k] < 0]
        out.append(f"{len(sig)} of {len(bm)} workers have a 90 % interval of β that excludes 0"
                   + (": " + ", ".join(f"{names['beta'][k]} (β {bm[k]:+.2f}, "
                                       f"{'towards' if bm[k] > 0 else 'against'} the item "
                                       "shown first)" for k in sig[:6]) if sig else "")
                   + ".")
    eta = _post(audit, "eta")
    if eta is not None:
        em = eta.mean(axis=0)
        low = np.argsort(em)[:3]
        out.append("Least accurate " + ("worker–category groups" if audit.fit.categories
                                        is not None else "workers") + ": "
                   + ", ".join(f"{names['eta'][g]} (E[η] {em[g]:.2f})" for g in low) + ".")
        if audit.fit.categories is not None:
            cats = pd.Series([g.split("|", 1)[-1] for g in names["eta"]])
            by = pd.Series(em).groupby(cats).mean().sort_values()
            out.append("Mean accuracy by category: " + ", ".join(
                f"{c} {v:.2f}" for c, v in by.items()) + ".")
    gamma = _post(audit, "gamma")
    if gamma is not None and gamma.ndim == 3 and gamma.shape[2]:
        g = gamma.reshape(gamma.shape[0], -1)
        gm, gs = g.mean(axis=0), g.std(axis=0)
        big = np.argsort(-np.abs(gm) / np.maximum(gs, 1e-12))[:3]
        out.append("Covariate effects furthest from 0 (in posterior sds): " + ", ".join(
            f"{names['gamma'][k]} ({gm[k]:+.2f} ± {gs[k]:.2f})" for k in big) + ".")
    if audit.loo is not None and audit.loo.table is not None:
        t = audit.loo.table
        best = str(t.index[0])
        rest = [f"{m} by {-r['elpd_diff']:.1f} ± {r['dse']:.1f}"
                for m, r in t.iloc[1:].iterrows()]
        out.append(f"PSIS-LOO prefers {best}" + (" over " + ", ".join(rest) if rest else "")
                   + " (elpd difference ± its se).")
    return out


def write_pair_report(path, audit) -> object:
    """Assemble the page from a :class:`crowdrank.validation.pipelines.pair_audit.PairAudit` and write it."""
    from crowdrank.reports import figures as F
    from crowdrank.reports.predictive_html import _loo_section, _ppc_section

    rep = audit.report
    names = _names(audit)
    gate = audit.report["gate"]
    model, approx = rep["model"], rep.get("approximation", "")
    t = parameter_table(rep["families"], names)
    t_plain = t[~t.kind.str.endswith("_joint")]
    kinds = [k for k in ("lambda", "gamma", "beta", "eta") if (t.kind == k).any()]
    # ---------------------------------------------------------------- summary
    summ = Section("Summary", anchor="summary")
    summ.add(paragraph(f"{model}: the {approx.upper()} point method with its intervals "
                       "against the NUTS posterior of the same model under the same priors, "
                       f"on {audit.fit.n_pairs} presented pairs ({rep.get('data', '')})."))
    summ.add(note("Reference trusted: the NUTS run passed the gate (R-hat < 1.01, ESS ≥ 400, "
                  "no divergences, E-BFMI ≥ 0.3)", "ok") if gate["trusted"] else
             note("Reference NOT trusted: " + "; ".join(gate["reasons"])
                  + ". Every comparison below is still computed, but read it with care.",
                  "bad"))
    if audit.agreement is not None:
        summ.add(note(audit.agreement.verdict(), "ok" if audit.agreement.agree else "bad"))
    summ.add(heading("What the model says"), paragraph(" ".join(model_says(audit, names))))
    summ.add(table([dict(set=k, what=FAMILY_TEXT.get(k, k), **f["aggregate"])
                    for k, f in rep["families"].items()],
                   ["set", "what"] + AGG, ["family", "approximation"] + AGG_H))
    # ---------------------------------------------------------------- data
    data_s = Section("Data", anchor="data")
    _, _, won, _, workers = audit.fit.pairs
    kv = [("source", rep.get("data", "")), ("pairs", audit.fit.n_pairs),
          ("items", len(names["lambda"])), ("workers", len(workers)),
          ("share won by the item shown first", float(np.mean(won)))]
    if "eta" in names:
        kv.append(("reliability groups", len(names["eta"])))
    if rep.get("covariates") is not None:
        kv.append(("covariate columns", ", ".join(rep["covariates"]) or "none"))
    data_s.add(keyvalues(kv))
    # ---------------------------------------------------------------- diagnostics
    diag = Section("MCMC diagnostics", anchor="mcmc")
    nk = rep["nuts"]
    diag.add(heading(f"NUTS ({nk['backend']}, {nk['chains']} chains, {nk['tune']} tuning + "
                     f"{nk['draws']} draws each, {nk['seconds']:.1f} s)"),
             note(_verdict(gate), "ok" if gate["trusted"] else "bad"),
             keyvalues([("max R-hat", gate.get("rhat_max")),
                        ("min bulk ESS", gate.get("ess_bulk_min")),
                        ("min tail ESS", gate.get("ess_tail_min")),
                        ("divergences", gate.get("divergences")),
                        ("min E-BFMI", gate.get("ebfmi_min"))]))
    try:
        diag.add(figure(F.energy(audit.tree), "Energy: marginal vs transition distribution "
                        "(ArviZ)."))
    except Exception as exc:   # noqa: BLE001 - a missing plot must not sink the report
        diag.add(note(f"energy plot unavailable: {exc}"))
    ag = audit.agreement
    if ag is not None:
        diag.add(*agreement_blocks(ag, extra=f" The {ag.labels[1]} run: "
                                   + _verdict(rep["backend_agreement"]["other_gate"]) + "."))
    # ---------------------------------------------------------------- approximation
    appr = Section(f"{approx.upper()} vs NUTS", anchor="approx")
    appr.add(paragraph("Per family, the approximation's marginal q against the NUTS draws "
                       "(see Definitions): z = (E_q − m)/s, the sd ratio sd_q/s and the "
                       "share of draws inside q's central 50 % and 90 % intervals. The "
                       "*_joint rows use the sds of Laplace over (λ, β, η) jointly."),
             table([dict(set=k, **f["aggregate"]) for k, f in rep["families"].items()],
                   ["set"] + AGG, ["family"] + AGG_H))
    worst = t.reindex(t.z.abs().sort_values(ascending=False).index).head(10)
    appr.add(paragraph("The parameters with the largest |z|:"),
             table(worst, ["kind", "param", "mcmc_mean", "mcmc_sd", "approx_mean", "approx_sd",
                           "z", "sd_ratio", "coverage_50", "coverage_90"],
                   ["family", "parameter", "m", "s", "E_q", "sd_q", "z", "sd ratio",
                    "coverage 50 %", "coverage 90 %"]),
             figure(F.means_scatter(t_plain, kinds, approx_label=approx.upper()),
                    f"{approx.upper()} vs NUTS means, bars ±1 sd of each."),
             figure(F.z_and_sd_ratio(t_plain, kinds), "Standardised mean error and sd ratio; "
                    "green: the 'close' box."),
             figure(F.coverage(t_plain, kinds), "Coverage of the NUTS draws by the "
                    "approximation's intervals; dashed: nominal."))
    joint = t[t.kind.str.endswith("_joint")]
    if len(joint):
        jk = list(dict.fromkeys(joint.kind))
        appr.add(figure(F.z_and_sd_ratio(joint, jk), "The same with the joint Laplace sds."))
    # ---------------------------------------------------------------- checks
    if rep.get("checks"):
        checks = [_loo_section(rep["checks"]["loo"], LOO_TEXT, "pairs"),
                  _ppc_section(rep["checks"]["ppc"], PPC_TEXT, "worker / category", "pairs")]
    else:
        checks = [Section("Model checks", anchor="checks").add(
            note("Not run (--no-checks)."))]
    # ---------------------------------------------------------------- definitions
    defs = Section("Definitions and files", anchor="definitions")
    defs.add(table([{"name": k, "meaning": v} for k, v in DEFINITIONS[:7] if k != "q"],
                   ["name", "meaning"], ["", "meaning"]),
             paragraph("q is the point method's marginal: a Normal (estimate, Laplace's sd) "
                       "for λ, β, γ and the *_joint families, the Beta of the EM "
                       "responsibilities for η."),
             paragraph("Files beside this page: metrics.json, parameters.csv (one row per "
                       "parameter and family), nuts/posterior.nc (posterior, sample stats, "
                       "pointwise log-likelihood), nuts-<other PPL>/posterior.nc and "
                       "agreement.csv (--check-backends), checks/<model>/posterior.nc (the "
                       "LOO baselines) and checks/ppc.csv."))
    return write(path, f"crowdrank audit: {model}, {approx.upper()} vs NUTS",
                 [summ, data_s, diag, appr, *checks, defs],
                 subtitle=f"{rep.get('data', '')} — backend {nk['backend']}")


def _verdict(g: dict) -> str:
    figs = (f"R-hat max {fmt(g.get('rhat_max'), 4)}, ESS bulk min "
            f"{fmt(g.get('ess_bulk_min'))}, ESS tail min {fmt(g.get('ess_tail_min'))}, "
            f"divergences {g.get('divergences')}, E-BFMI min {fmt(g.get('ebfmi_min'))}")
    if g["trusted"]:
        return f"reference TRUSTED ({figs})"
    return f"reference NOT trusted: {'; '.join(g['reasons'])} ({figs})"

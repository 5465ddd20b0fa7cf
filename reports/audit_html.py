"""The audit page: the report sections of docs/guide.md, assembled from the results of
:func:`crowdrank.reports.audit.run_audit` with the blocks of :mod:`crowdrank.reports.html`.

One function per section, each reading the audits, ``metrics.json``'s dict, the subject, the
audit's configuration and the priors; nothing is computed here beyond picking and
formatting (the numbers come from :mod:`crowdrank.validation`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from crowdrank.reports import figures as F
from crowdrank.reports.html import (
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
from crowdrank.reports.predictive_html import check_sections
from crowdrank.validation.reference import tail_visits_sentence

DEFINITIONS = [
    ("m, s, e", "MCMC (NUTS) mean, sd and Monte Carlo standard error of the mean (ArviZ)"),
    ("q", ("the online approximation's marginal: N(μ, σ²) for λ; Beta(α_t, S − α_t) for a "
          "COUPLE η component (Dirichlet marginal); Beta(a, b) for CrowdBT's η")),
    ("z", "(E_q − m) / s; its noise floor e / s is what Monte Carlo error alone gives"),
    ("sd ratio", "sd_q / s; below 1 the approximation is over-confident"),
    ("KL", "KL(q ‖ moment fit to the draws) in closed form (Gaussian for λ, Beta for η)"),
    ("W1", "1-Wasserstein distance between the draws and q (SciPy), in units of s"),
    ("coverage", "share of the MCMC draws inside q's central 50 % / 90 % interval"),
    ("share close", "share of parameters with |z| ≤ 0.1 and sd ratio in [0.9, 1.1]"),
    ("centred, contrast, level", ("what the data identify: the centred scores λ_i − mean(λ), "
                                  "the contrasts λ_i − λ_j (all pairs, or a seeded sample) and "
                                  "the common level mean(λ), pinned by the prior alone; the "
                                  "online marginals are closed forms of its Gaussians, NUTS's "
                                  "the same functions of each draw")),
    ("raw_level_corrected", ("the raw marginals of the online Gaussians once their common "
                             "level is replaced by the exact one (its prior N(μ0, σ0²/L), "
                             "independent of the centred scores: design.md 5.2)")),
    ("order probability", ("P(λ_i > λ_j): Φ((μ_i − μ_j)/√(σ_i² + σ_j²)) online, the share of "
                           "draws with λ_i > λ_j for NUTS; over-confidence is the mean of "
                           "|p_online − ½| − |p_NUTS − ½|")),
    ("accuracy", ("the paper's pairwise accuracy Σ 1(r_i > r_j) ∧ 1(λ_i > λ_j) / Σ 1(r_i > r_j) "
                 "against the ground truth (Pan et al. 2018, Sect. 5.1), with posterior means")),
    ("lowest six", ("the six workers with the lowest E[η_w¹] (Pan et al. 2018, Sect. 5.3); at most "
                   "half the workers when there are fewer than 12")),
]


def _aggregate_rows(aggs: Mapping) -> list[dict]:
    return [dict(set=k, **v) for k, v in aggs.items()]


AGG_COLS = ["set", "n", "median_abs_z", "p90_abs_z", "median_noise_floor", "median_sd_ratio",
            "share_close", "mean_coverage_50", "mean_coverage_90", "median_kl", "median_w1"]
AGG_HEAD = ["parameters", "n", "median |z|", "p90 |z|", "median e/s", "median sd ratio",
            "share close", "coverage 50 %", "coverage 90 %", "median KL", "median W1/s"]


IDENT_ROWS = ("raw", "raw_level_corrected", "centred", "contrast", "level")
ORDER_COLS = ["n", "median_abs_diff", "p90_abs_diff", "max_abs_diff", "mean_overconfidence",
              "share_flipped", "median_iid_se"]
ORDER_HEAD = ["pairs", "median |Δp|", "p90 |Δp|", "max |Δp|", "over-confidence",
              "share flipped", "median iid se"]


def _summary(audits, metrics, subject, cfg, priors) -> Section:
    """The verdict per model and the headline comparison."""
    models = metrics["models"]
    summ = Section("Summary", anchor="summary")
    rows = []
    for a in audits:
        m = models[a.model]
        lam = m["aggregates"].get("lambda", {})
        al = m["aggregates"]["all"]
        rows.append({"model": a.model, "trusted": m["reference_trusted"],
                     "mz": lam.get("median_abs_z"), "p90": lam.get("p90_abs_z"),
                     "sdr": lam.get("median_sd_ratio"), "close": al.get("share_close"),
                     "c50": al.get("mean_coverage_50"), "c90": al.get("mean_coverage_90"),
                     "tau": m["ranking"].get("kendall_tau"),
                     "acc_on": m["ranking"].get("accuracy_online"),
                     "acc_nu": m["ranking"].get("accuracy_nuts"),
                     "t_nuts": m["timings"]["nuts"].get("total"),
                     # the first approximation's (online's default; a model
                     # without an online update: the first --approx)
                     "t_on": next(iter(m["timings"]["online"].values()))["wall"]})
    summ.add(paragraph(f"Subject: {subject.description or subject.data.source}. Each model "
                       "is fitted by NUTS (the reference) and by online moment matching "
                       "under the same priors; the tables compare the two posteriors."))
    for a in audits:
        m = models[a.model]
        summ.add(note(f"{a.model}: reference trusted — the NUTS run passed the gate "
                      "(R-hat < 1.01, ESS ≥ 400, no divergences, E-BFMI ≥ 0.3)", "ok")
                 if m["reference_trusted"] else note(f"{a.model}: {m['reference_note']}. "
                                                     "Every comparison below is still "
                                                     "computed, but read it with care.", "bad"))
    summ.add(table(rows, ["model", "trusted", "mz", "p90", "sdr", "close", "c50", "c90", "tau",
                          "acc_on", "acc_nu", "t_nuts", "t_on"],
                   ["model", "reference trusted", "λ median |z|", "λ p90 |z|",
                    "λ median sd ratio", "share close (all)", "coverage 50 %",
                    "coverage 90 %", "Kendall τ (means)", "accuracy online",
                    "accuracy NUTS", "NUTS s", "online s"]))
    return summ


def _data(audits, metrics, subject, cfg, priors) -> Section:
    """What was read: sizes, ranking lengths, the priors both methods use."""
    data_s = Section("Data", anchor="data")
    d = metrics["data"]
    data_s.add(keyvalues([("source", d["source"]), ("items", d["items"]),
                          ("workers", d["workers"]), ("rankings", d["rankings"]),
                          ("longest ranking K", d["K"]),
                          ("rankings by length k", ", ".join(f"k={k}: {v}" for k, v in
                                                             d["k_counts"].items())),
                          ("pairs after full rank-breaking", d["pairs_after_rank_breaking"]),
                          ("rankings per worker (min / median / max)",
                           (f"{d['rankings_per_worker']['min']} / "
                           f"{d['rankings_per_worker']['median']:g} / "
                           f"{d['rankings_per_worker']['max']}")),
                          ("items never ranked", d["items_never_ranked"]),
                          ("tied rankings split", d["ties_split"]),
                          ("comparison graph connected", d["connected"]),
                          ("ground truth", "known" if metrics["truth_known"] else "none"),
                          ("priors (both methods)", (f"{priors.spec}; λ ~ N({priors.mu0:g}, "
                                                    f"{priors.sigma0:g}²)"))]))
    for n in d.get("notes") or []:
        data_s.add(note(str(n)))
    return data_s


def _diagnostics(audits, metrics, subject, cfg, priors) -> Section:
    """The NUTS gate per model, its worst parameters and plots."""
    models = metrics["models"]
    diag = Section("MCMC diagnostics", anchor="mcmc")
    for a in audits:
        g = models[a.model]["gate"]
        t = a.comparisons[0].parameters
        post = a.nuts.idata["posterior"]
        if cfg.reference == "gibbs":
            title = (f"{a.model}: the reference by collapsed Gibbs ({post.sizes['chain']} "
                     f"chains, {post.sizes['draw']} draws each; R-hat and ESS gate, no "
                     "divergence notion)")
        else:
            title = (f"{a.model}: NUTS ({cfg.backend}, {cfg.chains} chains, {cfg.tune} "
                     f"tuning + {cfg.draws} draws each)")
        diag.add(heading(title),
                 note(f"{cfg.reference_label}: " + a.nuts.gate.verdict(),
                      "ok" if g["trusted"] else "bad"),
                 keyvalues([("max R-hat", g.get("rhat_max")),
                            ("min bulk ESS", g.get("ess_bulk_min")),
                            ("min tail ESS", g.get("ess_tail_min")),
                            ("divergences", g.get("divergences")),
                            ("min E-BFMI", g.get("ebfmi_min"))]),
                 paragraph("The parameters with the highest R-hat:"),
                 table(t.sort_values("rhat", ascending=False).head(6),
                       ["param", "rhat", "ess_bulk", "ess_tail", "mcmc_mean", "mcmc_sd", "mcse"],
                       ["parameter", "R-hat", "bulk ESS", "tail ESS", "mean", "sd", "MCSE"]),
                 figure(F.rhat_ess(t), "R-hat and ESS of every parameter; dashed: the gate."),
                 figure(F.trace_worst(a.nuts.idata, t),
                        "Trace of the parameters with the worst R-hat (ArviZ)."),
                 figure(F.rank_worst(a.nuts.idata, t),
                        "Rank (Δ-ECDF) plots of the same parameters: chains that mix stay "
                        "inside the envelope (ArviZ)."))
        ag = getattr(a, "agreement", None)
        if ag is not None:
            diag.add(*agreement_blocks(ag, f"{a.model}: "))
        tv = models[a.model].get("tail_visits")
        if tv:
            diag.add(note(tail_visits_sentence(tv, a.model)))
        if cfg.reference == "gibbs":
            continue                # no trajectories, no energy
        try:
            diag.add(figure(F.energy(a.nuts.idata),
                            "Energy: marginal vs transition distribution, E-BFMI per chain "
                            "(ArviZ)."))
        except Exception as exc:   # noqa: BLE001 - a missing plot must not sink the report
            diag.add(note(f"energy plot unavailable: {exc}"))
    return diag


def _approximation(audits, metrics, subject, cfg, priors) -> Section:
    """The default variant against NUTS, parameter by parameter."""
    appr = Section("Approximation vs MCMC", anchor="approx")
    for a in audits:
        c = a.comparisons[0]
        t = c.parameters
        appr.add(heading(f"{a.model}: online ({getattr(a.online, 'algorithm', a.model)}, "
                         "default variant) vs NUTS"))
        if not c.trusted:
            appr.add(note("reference not trusted: " + "; ".join(c.reasons), "bad"))
        appr.add(table(_aggregate_rows(c.aggregates), AGG_COLS, AGG_HEAD))
        if c.identified:
            ident = c.identified
            appr.add(paragraph("What the data identify: the raw item marginals beside the "
                               "centred scores, the contrasts and the common level (see "
                               "Definitions). A gap on the raw scores that vanishes on the "
                               "centred ones comes from the parametrisation (the level), not "
                               "from the approximation."),
                     table([dict(quantity=k, **ident[k]) for k in IDENT_ROWS if k in ident],
                           ["quantity"] + AGG_COLS[1:], ["quantity"] + AGG_HEAD[1:]),
                     table([dict(what=f"{ident['pairs']['used']} of {ident['pairs']['of']} "
                                 "pairs" + (" (seeded sample)" if ident["pairs"]["sampled"]
                                            else ""), **ident["order_probability"])],
                           ["what"] + ORDER_COLS, ["order probabilities"] + ORDER_HEAD))
        worst = t.reindex(t.z.abs().sort_values(ascending=False).index).head(8)
        appr.add(paragraph("The parameters with the largest |z|:"),
                 table(worst, ["param", "mcmc_mean", "mcmc_sd", "approx_mean", "approx_sd", "z",
                               "noise_floor", "sd_ratio", "kl", "w1", "coverage_90"],
                       ["parameter", "m", "s", "E_q", "sd_q", "z", "e/s", "sd ratio", "KL",
                        "W1/s", "coverage 90 %"]),
                 figure(F.means_scatter(t), "Online vs NUTS means, bars ±1 sd of each."),
                 figure(F.z_and_sd_ratio(t), "Standardised mean error and sd ratio; green: "
                        "the 'close' box."),
                 figure(F.coverage(t), "Coverage of the MCMC draws by the online intervals; "
                        "dashed: nominal."),
                 figure(F.forest_items(t, a.nuts.idata, seed=cfg.seed),
                        "NUTS (blue) and online (red) intervals for selected items."))
    return appr


def _workers(audits, metrics, subject, cfg, priors) -> Section:
    """Worker quality by both methods (models with a worker parameter)."""
    work = Section("Worker quality", anchor="workers")
    for a in audits:
        w = a.comparisons[0].workers
        if not w:
            continue
        rows = [{"what": "Spearman ρ of E[η¹], online vs NUTS", "value": w["spearman"]},
                {"what": f"lowest {w['lowest_k']} by online", "value": ", ".join(w["lowest_online"])},
                {"what": f"lowest {w['lowest_k']} by NUTS", "value": ", ".join(w["lowest_nuts"])},
                {"what": "shared", "value": w["lowest_overlap"]}]
        if "lowest_truth" in w:
            rows += [{"what": f"lowest {w['lowest_k']} by the true η¹",
                      "value": ", ".join(w["lowest_truth"])},
                     {"what": "Spearman ρ with the truth: online / NUTS",
                      "value": f"{fmt(w['spearman_truth_online'])} / "
                               f"{fmt(w['spearman_truth_nuts'])}"},
                     {"what": "true lowest found: online / NUTS",
                      "value": f"{w['lowest_overlap_truth_online']} / "
                               f"{w['lowest_overlap_truth_nuts']}"}]
        work.add(heading(a.model), table(rows, ["what", "value"], ["worker quality", "value"]),
                 figure(F.workers(w), "E[η_w¹] by both methods; circled: the lowest-quality "
                        "workers (red: found by both)."))
    return work


def _ranking(audits, metrics, subject, cfg, priors) -> Section:
    """Ranking agreement, and accuracy against the truth where known."""
    rank = Section("Ranking agreement and accuracy", anchor="ranking")
    rrows = []
    for a in audits:
        for c in a.comparisons:
            rrows.append(dict(model=a.model, variant=c.variant, **c.ranking))
    cols = ["model", "variant", "kendall_tau", "top10_overlap"]
    head = ["model", "online variant", "Kendall τ online vs NUTS", "top-10 overlap"]
    if metrics["truth_known"]:
        cols += ["accuracy_online", "accuracy_nuts", "kendall_tau_truth_online",
                 "kendall_tau_truth_nuts"]
        head += ["accuracy online", "accuracy NUTS", "τ truth–online", "τ truth–NUTS"]
    rank.add(table(rrows, cols, head))
    if not metrics["truth_known"]:
        rank.add(note("No ground truth: accuracy is not computed."))
    return rank


def _order(audits, metrics, subject, cfg, priors) -> Section:
    """The spread of the online means over seeded data orders."""
    order = Section("Order sensitivity", anchor="order")
    orows = []
    for a in audits:
        if a.order:
            orows.append(dict(model=a.model, **{k: v for k, v in a.order.items()
                                                if k != "per_item"}))
    if orows:
        order.add(paragraph("The online pass depends on the order of the data. It was repeated "
                            "over seeded permutations; the spread of the online means (sd "
                            "over permutations) is shown beside their gap to MCMC, both in "
                            "MCMC sds."),
                  table(orows, ["model", "permutations", "median_spread", "p90_spread",
                                "median_gap", "p90_gap", "share_gap_above_2_spread",
                                "kendall_tau_min", "kendall_tau_max"],
                        ["model", "permutations", "median spread", "p90 spread", "median gap",
                         "p90 gap", "share gap > 2 spread", "τ vs NUTS min", "τ vs NUTS max"]))
        for a in audits:
            if a.order:
                order.add(figure(F.order_sensitivity(a.order), f"{a.model}: per item."))
    else:
        order.add(note("Not run (fewer than 2 permutations requested)."))
    return order


def _timings(audits, metrics, subject, cfg, priors) -> Section:
    """Wall-clock seconds of every fit."""
    tim = Section("Timings", anchor="timings")
    trows = [r for a in audits for r in a.timings]
    tim.add(table(trows, ["label", "seconds"], ["what", "seconds"], digits=4),
            figure(F.timings(trows), "Wall-clock seconds (log scale)."))
    return tim


def _variants(audits, metrics, subject, cfg, priors) -> Section:
    """Every variant compared, one row each."""
    var = Section("Variants compared", anchor="variants")
    vrows = []
    for a in audits:
        for c, o, post in zip(a.comparisons, a.variant_opts, a.variant_posteriors(),
                              strict=True):
            lam = c.aggregates.get("lambda", {})
            k = None if post is None else post.diagnostics.get("psis_khat")
            eta = c.aggregates.get("eta", {})
            vrows.append({"model": a.model, "label": f"{a.model} {c.variant}",
                          "options": ", ".join(f"{k}={v}" for k, v in o.items()) or "—",
                          "median_abs_z": lam.get("median_abs_z"),
                          "median_sd_ratio": lam.get("median_sd_ratio"),
                          "eta_median_abs_z": eta.get("median_abs_z"),
                          "eta_median_sd_ratio": eta.get("median_sd_ratio"),
                          "share_close": c.aggregates["all"]["share_close"],
                          "centred_median_abs_z": (c.identified or {}).get(
                              "centred", {}).get("median_abs_z"),
                          "centred_median_sd_ratio": (c.identified or {}).get(
                              "centred", {}).get("median_sd_ratio"),
                          "accuracy": c.ranking.get("accuracy_online"),
                          "khat": "n/a" if k is None else
                          f"{k:.2f} ({post.diagnostics.get('psis_label')})"})
    var.add(paragraph("OnlineGBMM variants (docs/design.md, Online): `taylor` is the approximation of "
                      "E[softmax] (the paper's appendix formula, the full second-order "
                      "Taylor expansion, or the plug-in p); `score_alpha` is which α the "
                      "score step uses (updated, the paper's order, or the prior α)."),
            table(vrows, ["label", "options", "median_abs_z", "median_sd_ratio",
                          "centred_median_abs_z", "centred_median_sd_ratio",
                          "eta_median_abs_z", "eta_median_sd_ratio", "share_close",
                          "accuracy", "khat"],
                  ["variant", "options", "λ median |z|", "λ median sd ratio",
                   "centred λ median |z|", "centred λ median sd ratio",
                   "η median |z|", "η median sd ratio", "share close", "accuracy",
                   "PSIS k̂"]))
    var.add(paragraph("PSIS k̂ (Vehtari et al. 2024) of every approximation with a density: "
                      "above 0.7 the approximation is **not reliable** (its importance "
                      "ratios against the exact posterior have no usable tail); n/a: no "
                      "density of its draws (docs/fidelity.md, the PPLs' approximations)."))
    if len(vrows) > len(audits):
        var.add(figure(F.variants(vrows), "λ median |z| and sd ratio by variant."))
    return var


def _definitions(audits, metrics, subject, cfg, priors) -> Section:
    """What each column means, and the files beside the page."""
    defs = Section("Definitions and files", anchor="definitions")
    defs.add(table([{"name": k, "meaning": v} for k, v in DEFINITIONS], ["name", "meaning"],
                   ["", "meaning"]),
             paragraph("Files beside this page: metrics.json (aggregates), parameters.csv "
                       "(one row per parameter and online variant, real ids), identified.csv "
                       "(centred scores, contrasts with order probabilities, the level), "
                       "<model>/nuts/posterior.nc (ArviZ DataTree) and "
                       "<model>/online/posterior.json."))
    return defs


def _posterior_sbc(metrics: dict, path) -> list:
    """The verdict without a reference, when the audit ran posterior SBC."""
    if not metrics.get("posterior_sbc"):
        return []
    from crowdrank.reports.posterior_sbc_html import verdict_section
    return [verdict_section(metrics["posterior_sbc"], Path(path).parent)]


def write_audit_report(path, subject, cfg, priors, audits, metrics) -> Path:
    """Assemble the audit page (the report sections of docs/guide.md) from the results of
    :func:`crowdrank.reports.audit.run_audit` and write it to ``path``."""
    args = (audits, metrics, subject, cfg, priors)
    sections = [_summary(*args), _data(*args), _diagnostics(*args), _approximation(*args),
                _workers(*args), _ranking(*args), _order(*args),
                *check_sections(metrics.get("checks")), *_posterior_sbc(metrics, path),
                _timings(*args), _variants(*args), _definitions(*args)]
    return write(path, "crowdrank audit: online moment matching vs NUTS", sections,
                 subtitle=f"{subject.description or subject.data.source} — models "
                          f"{', '.join(cfg.models)}; backend {cfg.backend}")

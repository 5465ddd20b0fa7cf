"""The audit page's model checks: PSIS-LOO comparison and posterior predictive checks.

Renders the ``checks`` entry of ``metrics.json`` (:meth:`crowdrank.validation.predictive.ModelChecks.to_dict`)
as two sections of :mod:`crowdrank.reports.html`; nothing is computed here.
"""

from __future__ import annotations

from .html import Section, esc, figure, fmt, note, paragraph, table

LOO_TEXT = (
    "PSIS-LOO estimates each model's expected log predictive density (elpd) of a left-out "
    "ranking given its task (items and worker); higher is better, and a difference is "
    "meaningful when it is several times its standard error (dse). Values are comparable "
    "only for models that give a probability of the same event, so the rankings of two "
    "items (where every model does) and all rankings (only the models normalised over "
    "the k! orderings: PL, normalised COUPLE) are compared separately. BT and CrowdBT "
    "score a longer ranking by its rank-broken pairs as if independent, and stagewise "
    "COUPLE's Eq. 4 is not normalised for k ≥ 3: they are left out of that comparison, "
    "with the reason. A Pareto k̂ above min(1 − 1/log10 S, 0.7) (S draws) marks rankings "
    "whose PSIS estimate is unreliable.")

PPC_TEXT = (
    "Posterior predictive checks: each statistic is measured against the posterior order "
    "of each task's items (the order by λ of one posterior draw), on the data and on "
    "rankings of the same tasks replicated by the model's generative process from the same "
    "draw. 'observed' and 'replicated' are averages over draws, the interval is the "
    "replicated 5–95 % range, and ppp = P(replicated ≥ observed). A ppp below 0.025 or "
    "above 0.975 means the model does not reproduce that feature: e.g. a worker who agrees "
    "with the consensus less than the model predicts is noisier than their η says.")


#: Panel titles of the predictive statistics (others show their name).
PPC_TITLES = {"first_choice_stage": "first choice = best remaining, by stage",
              "worker_pair_agreement": "pair agreement with the posterior order, by worker",
              "worker_agreement": "pairs won by the item the draw prefers, by worker",
              "first_choice_rate": "pairs won by the item shown first",
              "category_agreement": "pairs won by the item the draw prefers, by category"}


def _loo_section(loo: dict, text: str = LOO_TEXT, unit: str = "rankings") -> Section:
    s = Section("Model comparison (PSIS-LOO)", anchor="loo")
    s.add(paragraph(text))
    for t in loo.get("tables", []):
        s.add(f"<h3>{esc(t['unit'])}: {esc(t['description'])} ({t['n_obs']} {esc(unit)})</h3>")
        if t.get("table"):
            s.add(table(t["table"], ["model", "rank", "elpd", "se", "elpd_diff", "dse",
                                     "p", "weight"],
                        ["model", "rank", "elpd", "se", "elpd − best", "dse",
                         "p_loo (effective parameters)", "stacking weight"]))
        elif t.get("note"):
            s.add(note(f"No comparison: {t['note']}."))
        if t.get("pareto"):
            rows = [{"model": m, **v} for m, v in t["pareto"].items()]
            s.add(table(rows, ["model", "elpd", "se", "max_k", "good_k", "n_bad", "n"],
                        ["model", "elpd", "se", "max Pareto k̂", "threshold",
                         "k̂ above it", unit]))
            bad = [r["model"] for r in rows if r["n_bad"]]
            if bad:
                s.add(note(f"Unreliable PSIS estimates (k̂ above the threshold) for "
                           f"{', '.join(bad)}: "
                           f"read their elpd with care (refit without those {unit}, or "
                           "use K-fold cross-validation).", "bad"))
        for m, why in (t.get("refused") or {}).items():
            s.add(note(f"{m} not compared here: {why}."))
    return s


def _ppc_figure(check: dict):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = check["rows"]
    parts = [(st, PPC_TITLES.get(st, st)) for st in dict.fromkeys(r["statistic"] for r in rows)]
    fig, axes = plt.subplots(1, max(len(parts), 1), figsize=(5 * max(len(parts), 2), 3.2),
                             squeeze=False)
    axes = axes.ravel()
    for ax, (stat, title) in zip(axes, parts):
        rs = [r for r in rows if r["statistic"] == stat][:40]
        x = range(len(rs))
        lo = [r["replicated"] - r["replicated_lo"] for r in rs]
        hi = [r["replicated_hi"] - r["replicated"] for r in rs]
        ax.errorbar(x, [r["replicated"] for r in rs], yerr=[lo, hi], fmt="o", color="0.6",
                    ms=4, capsize=2, label="replicated (5–95 %)")
        ax.plot(x, [r["observed"] for r in rs], "x", color="C3", label="observed")
        ax.set_xticks(list(x), [r["group"] for r in rs], rotation=90, fontsize=7)
        ax.set_title(title, fontsize=9)
        ax.set_ylim(-0.02, 1.02)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    return fig


def _ppc_section(ppc: dict, text: str = PPC_TEXT, group: str = "stage / worker",
                 unit: str = "rankings") -> Section:
    s = Section("Posterior predictive checks", anchor="ppc")
    s.add(paragraph(text))
    for m, c in ppc.items():
        s.add(f"<h3>{esc(m)} ({c['draws']} draws)</h3>")
        flagged = [r for r in c["rows"] if r["ppp"] < 0.025 or r["ppp"] > 0.975]
        s.add(note(f"{m}: {len(flagged)} of {len(c['rows'])} statistics outside the central "
                   "95 % of their predictive distribution"
                   + (": " + ", ".join(f"{r['statistic']} {r['group']} (ppp "
                                       f"{fmt(r['ppp'], 2)})" for r in flagged[:10])
                      if flagged else ""), "bad" if flagged else "ok"))
        s.add(figure(_ppc_figure(c), f"{m}: observed (×) against the replicated 5–95 % "
                                     "range (grey), per stage and per worker."))
        s.add(table(c["rows"], ["statistic", "group", "n", "observed", "replicated",
                                "replicated_lo", "replicated_hi", "ppp"],
                    ["statistic", group, unit, "observed", "replicated",
                     "5 %", "95 %", "ppp"]))
    return s


def check_sections(checks: dict | None) -> list[Section]:
    """The two sections, or one that says the checks were not run."""
    if not checks:
        return [Section("Model checks", anchor="checks").add(
            note("Not run (audit with checks=False)."))]
    return [_loo_section(checks["loo"]), _ppc_section(checks["ppc"])]

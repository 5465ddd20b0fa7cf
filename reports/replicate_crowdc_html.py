"""The page, ``results.json`` and CSV of ``crowdrank replicate crowdc``
(:mod:`crowdrank.validation.studies.replicate_crowdc`): CrowDC's simulation study [Wang23] with the paper's
claim beside our numbers, in the conventions of :mod:`crowdrank.reports.replicate_html`.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from . import html as H
from .replicate_html import _clean

#: The columns of the CSV and of the grid table.
COLUMNS = ("n", "t", "r", "g", "p", "datasets", "divisions", "comparisons_crowdc",
           "comparisons_btl", "saving", "tau_btl", "tau_crowdc", "tau_ratio",
           "tau_a_ratio", "concordance_ratio", "tau_ratio_rank_placement",
           "tau_ratio_joint_fit", "tau_vs_btl", "concordance_same_group",
           "concordance_cross_group", "btl_concordance_same_group",
           "btl_concordance_cross_group", "claim", "cpu_seconds")
#: The readings of the "accuracy ratio" and of the conquer step, as the page names them.
READINGS = {
    "tau_ratio": "τ-b ratio (mean τ CrowDC / mean τ BTL), conquer by score — Algorithm 2 "
                 "as written",
    "tau_a_ratio": "τ-a ratio (ties count 0 in the numerator, C(n, 2) below)",
    "tau_ratio_per_dataset": "mean over data sets of τ CrowDC / τ BTL of that data set",
    "concordance_ratio": "share of item pairs ordered right, (1 + τ-a)/2, as a ratio",
    "tau_ratio_rank_placement": "conquer by within-group position instead of score",
    "tau_ratio_joint_fit": "not CrowDC: one BT fit of every comparison CrowDC made (the "
                           "information limit of its design)",
}


def write_csv(summary: dict, path: Path) -> Path:
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=["experiment", *COLUMNS])
        w.writeheader()
        for r in summary["rows"]:
            w.writerow({"experiment": "crowdc", **{k: r.get(k, "") for k in COLUMNS}})
    return path


def ratio_figure(summary: dict):
    """τ ratio against the saving, one panel per (t, r); colour = g, size = p."""
    from .figures import _plt
    plt = _plt()
    rows = summary["rows"]
    panels = sorted({(r["t"], r["r"]) for r in rows})
    fig, axes = plt.subplots(1, len(panels), figsize=(3.2 * len(panels), 3.0),
                             squeeze=False, sharey=True)
    colors = {2: "#c0392b", 5: "#2471a3"}
    for ax, (t, r) in zip(axes[0], panels):
        for x in rows:
            if (x["t"], x["r"]) != (t, r):
                continue
            ax.scatter(100 * x["saving"], 100 * x["tau_ratio"], s=6 + 2 * x["p"] ** 1.3,
                       color=colors.get(x["g"], "#777"), alpha=0.7,
                       marker={50: "s", 100: "o", 200: "^"}.get(x["n"], "o"))
        ax.axhline(95, color="k", lw=0.7, ls="--")
        ax.axvspan(45, 50, color="#27ae60", alpha=0.12, lw=0)
        ax.set_title(f"t = {t}, r = {r}", fontsize=9)
        ax.set_xlabel("comparisons saved (%)")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("τ CrowDC / τ BTL (%)")
    fig.tight_layout()
    return fig


def sections(summary: dict) -> list[H.Section]:
    cl = summary["claim"]
    sec = H.Section("The claim: n ≥ 100, t ≥ 5, r = 0.8, p = 12", anchor="claim")
    rows = [x for x in summary["rows"] if x["claim"]]
    sec.add(H.paragraph(
        f"{summary['repeats']} simulated data sets per setting, {summary['divisions']} "
        "random group divisions each; Kendall's τ against the truth. Paper: 45–50 % of the "
        "comparisons saved while keeping ≥ 95 % of BTL's accuracy ([Wang23], Sect. 5). "
        f"Settings of the claim in this grid: {cl['settings']}."))
    if rows:
        sec.add(H.table([{k: x[k] for k in ("n", "t", "r", "g", "p", "saving", "tau_btl",
                                             "tau_crowdc", "tau_ratio", "concordance_ratio",
                                             "tau_ratio_joint_fit")} for x in rows]))
        ok_s = cl["saving_45_50"]
        sec.add(H.note(
            f"Saving within 45–50 %: {'yes' if ok_s else 'no'} "
            f"({', '.join(f'{100 * x['saving']:.1f} %' for x in rows)}). "
            f"τ ratio ≥ 95 %: {'yes' if cl['tau_ratio_ge_95'] else 'no'} (lowest "
            f"{100 * cl['min_tau_ratio']:.1f} %).", "ok" if ok_s and cl["tau_ratio_ge_95"]
            else "warn"))
        rd = H.Section("Which reading of the paper's 'accuracy ratio'?", anchor="readings")
        rd.add(H.paragraph(
            "The paper does not define its accuracy ratio, nor which τ, nor how its BT fit "
            "treats items with unbeaten records. The lowest value over the claim's settings "
            "of each reading:"))
        rd.add(H.table([{"reading": v, "lowest over the claim's settings":
                         cl.get(f"min_{k}"), "≥ 95 %": cl.get(f"{k}_ge_95")}
                        for k, v in READINGS.items()]))
        lost = [{"n": x["n"], "g": x["g"],
                 "same-group pairs, BTL": x["btl_concordance_same_group"],
                 "same-group pairs, CrowDC": x["concordance_same_group"],
                 "cross-group pairs, BTL": x["btl_concordance_cross_group"],
                 "cross-group pairs, CrowDC": x["concordance_cross_group"]} for x in rows]
        rd.add(H.paragraph("Where the accuracy goes — the share of pairs ordered right, "
                           "inside one group and across groups:"))
        rd.add(H.table(lost))
        out = [sec, rd]
    else:
        out = [sec]
    grid = H.Section("The grid", anchor="grid")
    f = summary.get("findings")
    if f and (f["g_pairs"] or f["p_lines"]):
        grid.add(H.paragraph(
            "The paper's findings (Sect. 5), counted over this grid: 'accuracy decreases as "
            f"the number of groups increases' — the smaller g has the higher τ ratio in "
            f"{f['fewer_groups_higher']} of {f['g_pairs']} pairs of settings that differ only "
            f"in g (p is per group, so g = 5 has more pivots in all); 'increasing the number "
            f"of pivots enhances the accuracy ratio' — the τ ratio grows with p in "
            f"{f['more_pivots_higher']} of {f['p_lines']} series that differ only in p."))
    grid.add(H.figure(ratio_figure(summary), "τ ratio against comparisons saved, per "
                      "(t, r): red g = 2, blue g = 5; marker size grows with p; square "
                      "n = 50, circle 100, triangle 200; dashed 95 %, green band 45–50 %"))
    grid.add(H.table([{k: x[k] for k in COLUMNS} for x in summary["rows"]]))
    out.append(grid)
    return out


def _paper_section(summary) -> H.Section:
    sec = H.Section("The paper's numbers", anchor="paper")
    sec.add(H.table([{"what": k, "paper": v["value"], "where": v["where"]}
                     for k, v in summary["paper"].items()], ["what", "paper", "where"]))
    return sec


def write_all(summary: dict, out: str | Path) -> dict:
    """``results.json``, ``results.csv`` and ``crowdc.html`` into ``out``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(_clean(summary), indent=1) + "\n")
    write_csv(summary, out / "results.csv")
    run = H.Section("Run", anchor="run")
    run.add(H.keyvalues({"experiment": "crowdc", "data sets per setting": summary["repeats"],
                         "divisions": summary["divisions"], "seed": summary["seed"],
                         "scheduler": summary.get("scheduler"),
                         "seconds": summary.get("seconds_total"),
                         "CPU seconds of the tasks": summary.get("cpu_seconds_tasks"),
                         "load average at start": summary.get("load_average_start"),
                         **{f"machine {k}": v for k, v in summary["machine"].items()}}))
    page = H.write(out / "crowdc.html", "Replication of [Wang23]: CrowDC",
                   sections(summary) + [_paper_section(summary), run],
                   subtitle="Wang, Zhang & Song, 'CrowDC: a divide-and-conquer approach for "
                            "paired comparisons in crowdsourcing' [Wang23], its simulation "
                            "study replicated with crowdrank")
    return {"json": out / "results.json", "csv": out / "results.csv", "html": page}

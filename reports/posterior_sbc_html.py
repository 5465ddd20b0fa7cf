"""The posterior-SBC page and figure, from ``posterior_sbc.json`` and ``ranks.csv`` of
:func:`crowdrank.validation.pipelines.posterior_sbc.run_posterior_sbc`: the verdict per
parameter group, the ECDF-difference plot of the ranks (how to read it:
:mod:`crowdrank.reports.sbc_html`), the companion checks, and what the check can and cannot
see (docs/sbc.md, "Posterior SBC")."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

from . import html as H
from .sbc_html import ecdf_difference_figure

CANNOT_SEE = (
    "Posterior SBC ranks a draw θ′ of the fit to your data among the refit's draws after "
    "adding data simulated at θ′: for an exact posterior the ranks are uniform. It checks "
    "that the method updates coherently near your data. The verdict reads the fidelity "
    "box's figures from the replicates (the fit's sd ratio and bias, assuming its error is "
    "the same at your data and at the augmented data) and calls a group not calibrated only "
    "when it is confidently outside the box (|z| ≤ 0.1, sd ratio in [0.9, 1.1]); the "
    "uniformity test of the ranks beside it is strict (it detects any miscalibration given "
    "enough replicates). It cannot see a fit that ignores the data (the prior passes it "
    "exactly), hence the contraction and predictive checks beside it; a bias the method "
    "carries through its update as if it were prior information is invisible to it; its "
    "power grows with the size of the simulated addition (docs/sbc.md); and it says "
    "nothing about whether the model suits the data.")


def _num(v) -> str:
    """A figure of the JSON: infinity and NaN are written ``null`` there (a bound nothing
    limits, an estimate the ranks cannot give where ``y′`` adds no information)."""
    return "n/a" if v is None or not np.isfinite(v) else f"{v:.2f}"


def tolerance_cells(g: dict) -> tuple[str, str]:
    """A group's sd ratio and |z| with their bounds."""
    return (f"{_num(g['sd_ratio'])} [{_num(g['sd_ratio_lo'])}, {_num(g['sd_ratio_hi'])}]",
            f"{_num(g['abs_z'])} [{_num(g['abs_z_lo'])}, {_num(g['abs_z_hi'])}]")


def tolerance_line(g: dict) -> str:
    """One group's tolerance figures: the fit's sd ratio and |z| (medians over the group)
    with their bounds, and whether the group is confidently outside the box."""
    sd, z = tolerance_cells(g)
    return (f"sd ratio {sd}, |z| {z} "
            f"({'outside the box' if g['outside'] else 'within tolerance'})")


def read_ranks(path: str | Path) -> tuple[list[str], np.ndarray]:
    """``ranks.csv``: the parameter names and the ``(replicates, parameters)`` ranks."""
    with Path(path).open(newline="") as fh:
        rows = list(csv.reader(fh))
    return rows[0][1:], np.array([[float(v) for v in r[1:]] for r in rows[1:]])


def ranks_figure(out: str | Path):
    """The ECDF-difference figure of the ranks, one panel per parameter group."""
    out = Path(out)
    summary = json.loads((out / "posterior_sbc.json").read_text())
    names, ranks = read_ranks(out / "ranks.csv")
    fams = summary["families"]
    S = int(summary["config"]["ranks"])
    pvals = {f: v["ecdf_p_combined"] for f, v in summary["ranks"]["families"].items()}
    return ecdf_difference_figure(
        ranks, fams, S + 1, pvals, names,
        f"posterior SBC of {summary['method']} ({summary['model']}) on "
        f"{Path(summary['data']['source']).name}: {summary['replicates']} replicates",
        int(summary["config"]["seed"]))


def _check_rows(summary: dict) -> list[dict]:
    con = summary["checks"]["contraction"]
    rows = [{"check": f"moved from the prior, {f}",
             "value": f"median contraction {v['median']:.3f}, mean shift "
                      f"{v.get('shift_median', float('nan')):.3f} prior sds",
             "rule": f"median max(|contraction|, shift) ≥ {con['threshold']}",
             "passed": v["moved"]} for f, v in con["groups"].items()]
    pred = summary["checks"]["predictive"]
    rows.append({"check": "predictive p of log p(y | θ)", "value": f"{pred['p']:.3f}",
                 "rule": f"≥ {pred['threshold']}", "passed": pred["ok"]})
    return rows


def write_posterior_sbc_report(out: str | Path, name: str = "posterior_sbc.html") -> Path:
    """Write ``out/name`` and ``out/posterior_sbc_ecdf.png``; return the page's path."""
    out = Path(out)
    summary = json.loads((out / "posterior_sbc.json").read_text())
    fig = ranks_figure(out)
    fig.savefig(out / "posterior_sbc_ecdf.png", dpi=100)
    sec = H.Section("Posterior SBC", anchor="summary")
    sec.add(H.note(f"{summary['method']} ({summary['model']}): {summary['verdict']}",
                   "ok" if summary["calibrated"] else "bad"))
    sec.add(H.paragraph(CANNOT_SEE))
    cfg, t = summary["config"], summary["timing"]
    sec.add(H.keyvalues({
        "data": f"{summary['data']['source']} ({summary['data']['rankings']} rankings)",
        "replicates": summary["replicates"],
        "simulated rankings added per replicate": t["rankings_added"],
        "draws each θ′ is ranked among": cfg["ranks"], "seed": cfg["seed"],
        "base fit (s)": f"{t['base_fit_s']:.2f}",
        "replicates (s, total of their refits)": f"{t['replicate_s_total']:.2f}"}))
    sec.add(H.figure(fig, "Each line is one parameter's ECDF of ranks minus the uniform "
                          "CDF; grey: the simultaneous 95 % band; red lines leave it. "
                          "∪/S shapes: the fit is too narrow; ∩: too wide; a tilt: it sits "
                          "off-centre.", dpi=90))
    tol = summary["tolerance"]["groups"]
    sec.add(H.heading("Against the fidelity box's tolerance (the verdict)"))
    sec.add(H.table([{"group": f, "parameters the box reads": g["n_params"],
                      "sd ratio [bounds]": tolerance_cells(g)[0],
                      "|z| [bounds]": tolerance_cells(g)[1],
                      "information added R": _num(g["R_eff_median"]),
                      "within tolerance": not g["outside"],
                      "why not": "; ".join(g["reasons"])} for f, g in tol.items()]))
    sec.add(H.heading("Uniform ranks (strict)"))
    rows = [{"group": f, "parameters": v["n_params"],
             "ECDF p (combined)": v["ecdf_p_combined"],
             "pot_c p (combined)": v["pot_c_p_combined"], "threshold": v["threshold"],
             "uniform": v["calibrated"]} for f, v in summary["ranks"]["families"].items()]
    sec.add(H.table(rows))
    sec.add(H.heading("What the ranks cannot see"))
    sec.add(H.table(_check_rows(summary)))
    return H.write(out / name, f"posterior SBC: {summary['method']}", [sec])


def _group_cell(row: dict) -> str:
    def box(v):
        if "sd_ratio" not in v:
            return ""
        lo, hi = v["sd_ratio_bounds"]
        return f"sd ratio {_num(v['sd_ratio'])} [{_num(lo)}, {_num(hi)}], |z| {_num(v['abs_z'])}; "

    return "; ".join(f"{f}: {'calibrated' if v['calibrated'] else 'NOT calibrated'} "
                     f"({box(v)}strict: ECDF p {v['ecdf_p']:.2g}, pot_c p {v['pot_c_p']:.2g})"
                     for f, v in row["groups"].items())


def verdict_rows(psbc: dict) -> list[dict]:
    """One table row per audited approximation (``metrics.json``'s ``posterior_sbc``)."""
    rows = []
    for model, entries in psbc.items():
        for r in entries:
            if r.get("skipped"):
                rows.append({"model": model, "method": r["method"], "variant": r["variant"],
                             "verdict": f"not checked: {r['skipped']}"})
                continue
            rows.append({"model": model, "method": r["method"], "variant": r["variant"],
                         "verdict": "calibrated" if r["calibrated"] else "NOT calibrated",
                         "parameter groups": _group_cell(r),
                         "contraction (median)": ", ".join(
                             f"{f} {v:.2f}" for f, v in r["contraction"].items()),
                         "predictive p": r["predictive_p"],
                         "replicates × rankings added": f"{r['replicates']} × "
                                                        f"{r['rankings_added']}",
                         "seconds": r["seconds"]})
    return rows


def recommendation(psbc: dict) -> str:
    """One sentence: the calibrated method to use (the quickest to check, by its posterior
    SBC's seconds), or that none is calibrated, and for which parameter groups."""
    lines = []
    for model, entries in psbc.items():
        ok = [r for r in entries if not r.get("skipped") and r["calibrated"]]
        if ok:
            best = min(ok, key=lambda r: r["seconds"])
            lines.append(f"{model}: use {best['method']} ({best['variant']}), calibrated by "
                         "posterior SBC")
            continue
        bad = [f"{r['method']} ({', '.join(f for f, g in r['groups'].items() if not g['calibrated']) or 'companion checks'})"
               for r in entries if not r.get("skipped")]
        skipped = [r["method"] for r in entries if r.get("skipped")]
        lines.append(f"{model}: no checked method is calibrated"
                     + (f" — not calibrated: {'; '.join(bad)}" if bad else "")
                     + (f"; not checked (over the time budget): {', '.join(skipped)}"
                        if skipped else ""))
    return ". ".join(lines) + "."


def verdict_section(psbc: dict, out: str | Path) -> H.Section:
    """The audit's "verdict without a reference": the table, each method's ECDF figure, and
    what the check can and cannot see; each method's own page is written beside."""
    out = Path(out)
    sec = H.Section("Verdict without a reference: posterior SBC", anchor="posterior-sbc")
    sec.add(H.note(recommendation(psbc), "note"))
    sec.add(H.paragraph(CANNOT_SEE))
    sec.add(H.table(verdict_rows(psbc)))
    for model, entries in psbc.items():
        for r in entries:
            if r.get("skipped") or not r.get("folder"):
                continue
            write_posterior_sbc_report(out / r["folder"])
            sec.add(H.figure(ranks_figure(out / r["folder"]),
                             f"{model}, {r['method']} ({r['variant']}): {r['verdict']} — "
                             f"page: {r['folder']}/posterior_sbc.html", dpi=80))
    return sec


def refusal_rows(metrics: dict) -> dict:
    """An audit without NUTS: its posterior-SBC rows by model (``metrics.json`` keeps them
    with each variant), in the layout of a full audit's ``posterior_sbc``."""
    return {m: [v["posterior_sbc"] for v in d["variants"] if "posterior_sbc" in v]
            for m, d in metrics["models"].items()}


def write_verdict_report(out: str | Path, metrics: dict, name: str = "report.html") -> Path:
    """The page of an audit without NUTS (over ``--max-nuts-minutes``): each approximation's
    PSIS k̂ and its posterior-SBC verdict."""
    out = Path(out)
    psbc = refusal_rows(metrics)
    head = H.Section("No reference", anchor="summary")
    head.add(H.note("NUTS was not run: " + "; ".join(
        f"{m} estimated {p['estimate_minutes']:.1f} min > {p['budget_minutes']:g} min"
        for m, p in metrics["budget"]["models"].items()) + ". The verdicts below need no "
        "reference.", "note"))
    head.add(H.table([{"model": m, "method": v["variant"].get("method", "online"),
                       "PSIS k̂": v.get("psis_khat"), "k̂ reads": v.get("psis_label")}
                      for m, d in metrics["models"].items() for v in d["variants"]]))
    sections = [head]
    if any(psbc.values()):
        sections.append(verdict_section(psbc, out))
    return H.write(out / name, "crowdrank audit: the verdict without a reference", sections)

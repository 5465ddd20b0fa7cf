"""The page, ``results.json`` and CSV of a replicated experiment of the COUPLE paper
(:mod:`crowdrank.validation.studies.replicate`): our numbers beside the paper's wherever the text of
[Pan18] states one, with the figures embedded (:mod:`crowdrank.reports.html`).
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

from . import html as H

COLORS = {"couple": "#c0392b", "crowdbt": "#2471a3", "pl": "#27ae60", "bt": "#8e44ad",
          "peergrader": "#7f8c8d"}


def _label(m: str) -> str:
    from crowdrank.validation.studies.replicate import LABELS
    return LABELS.get(m, m)


def _pm(mean, sd) -> str:
    if mean is None or not math.isfinite(mean):
        return "—"
    return f"{mean:.2f} ± {sd:.2f}"


def _clean(x):
    """JSON without NaN/inf (written as null)."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    return x


# ------------------------------------------------------------------ rows (CSV and tables)
def rows(summary: dict) -> list[dict]:
    """One tidy row per number: ``experiment, dataset/setting, variant, method, fraction,
    mean, sd, n, paper``."""
    e = summary["experiment"]
    out = []
    if e == "fig7":
        for s in summary["settings"]:
            for m, c in s["curves"].items():
                for f, mu, sd in zip(summary["fractions"], c["mean"], c["sd"]):
                    out.append({"experiment": e, "setting": s["setting"], "variant": "",
                                "method": m, "fraction": f, "accuracy_mean": mu,
                                "accuracy_sd": sd, "n": s["repeats"], "paper": ""})
        for st, r in (summary.get("nuts") or {}).get("settings", {}).items():
            for m, a in r["accuracy"].items():
                out.append({"experiment": e, "setting": st, "variant": "nuts-scale",
                            "method": m, "fraction": 1.0, "accuracy_mean": 100 * a,
                            "accuracy_sd": "", "n": 1, "paper": ""})
    elif e == "cost":
        for name, c in summary["cost"].items():
            for m, p in c["per"].items():
                out.append({"experiment": e, "setting": name, "variant": "", "method": m,
                            "fraction": "", "accuracy_mean": "", "accuracy_sd": "",
                            "us_per_ranking": p["mean_us_per_ranking"],
                            "us_per_ranking_sd": p["sd_us_per_ranking"],
                            "us_per_ranking_best": p["min_us_per_ranking"],
                            "ratio_to_pl_cpu": c["ratio_to_pl"].get(
                                f"{m}:pl (cpu, whole pass)", 1.0),
                            "n": c["repeats"],
                            "paper": summary["paper"]["cost_ratio_couple_pl"]["value"]
                            if m == "couple" else ""})
    else:
        for s in summary["sets"]:
            variants = [("full", s["full"])] + [
                ("cleaned-by-" + "+".join(c["detected_by"]), c) for c in s["cleaned"]]
            for vname, v in variants:
                for m, a in v["accuracy"].items():
                    paper = ""
                    if (e == "babyface" and vname != "full" and m == "couple"
                            and "couple" in vname):
                        paper = summary["paper"]["babyface_cleaned_couple"]["value"]
                    out.append({"experiment": e, "setting": s["dataset"], "variant": vname,
                                "method": m, "fraction": 1.0, "accuracy_mean": a["mean"],
                                "accuracy_sd": a["sd"], "n": a["n"], "paper": paper})
    return out


def write_csv(summary: dict, path: Path) -> Path:
    rs = rows(summary)
    cols = []
    for r in rs:
        cols += [c for c in r if c not in cols]
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=cols)
        w.writeheader()
        for r in rs:
            w.writerow({k: r.get(k, "") for k in cols})
    return path


# ------------------------------------------------------------------ figures
def fig7_figure(summary: dict):
    from .figures import _plt
    plt = _plt()
    settings = summary["settings"]
    fig, axes = plt.subplots(1, len(settings), figsize=(3.4 * len(settings), 3.2),
                             squeeze=False)
    x = [100 * f for f in summary["fractions"]]
    for ax, s in zip(axes[0], settings):
        for m, c in s["curves"].items():
            mu, sd = c["mean"], c["sd"]
            ax.plot(x, mu, "-o", ms=3, color=COLORS.get(m), label=_label(m))
            ax.fill_between(x, [a - b for a, b in zip(mu, sd)], [a + b for a, b in zip(mu, sd)],
                            color=COLORS.get(m), alpha=0.2, lw=0)
        ax.set_title(s["setting"])
        ax.set_xlabel("% of samples")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("pairwise accuracy (%)")
    axes[0][-1].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return fig


def accuracy_bars(entries: list[tuple[str, dict]]):
    """Grouped bars of mean ± sd accuracy per method, one group per variant."""
    from .figures import _plt
    plt = _plt()
    methods = []
    for _, v in entries:
        methods += [m for m in v["accuracy"] if m not in methods]
    fig, ax = plt.subplots(figsize=(1.6 + 1.2 * len(entries) * max(1, len(methods)) / 3, 3.2))
    width = 0.8 / max(1, len(methods))
    for j, m in enumerate(methods):
        xs, ys, es = [], [], []
        for i, (_, v) in enumerate(entries):
            if m in v["accuracy"]:
                xs.append(i + j * width)
                ys.append(v["accuracy"][m]["mean"])
                es.append(v["accuracy"][m]["sd"])
        ax.bar(xs, ys, width, yerr=es, color=COLORS.get(m, "#bbb"), label=_label(m))
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(entries))])
    ax.set_xticklabels([n for n, _ in entries], fontsize=7)
    lo = min(v["accuracy"][m]["mean"] for _, v in entries for m in v["accuracy"])
    ax.set_ylim(max(0, lo - 8), 100)
    ax.set_ylabel("pairwise accuracy (%)")
    ax.legend(fontsize=6, loc="lower right")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def cost_figure(summary: dict):
    from .figures import _plt
    plt = _plt()
    cost = summary["cost"]
    fig, axes = plt.subplots(1, len(cost), figsize=(4 * len(cost), 3.0), squeeze=False)
    for ax, (name, c) in zip(axes[0], cost.items()):
        ms = list(c["per"])
        ax.bar(range(len(ms)), [c["per"][m]["min_us_per_ranking"] for m in ms],
               color=[COLORS.get(m) for m in ms])
        ax.set_xticks(range(len(ms)))
        ax.set_xticklabels([m for m in ms])
        ax.set_title(f"{name} ({c['n_rankings']:,} rankings)")
        ax.set_ylabel("µs per ranking")
    fig.tight_layout()
    return fig


# ------------------------------------------------------------------ sections
def _paper_section(summary) -> H.Section:
    sec = H.Section("The paper's numbers", anchor="paper")
    sec.add(H.paragraph(
        "Published figures stated in the text of [Pan18] that this experiment checks. The "
        "cells of Tables 3-7 and the curves of Fig. 7 are not in the text we have (only "
        "their captions), so only the statements below can be compared."))
    sec.add(H.table([{"what": k, "paper": v["value"], "where": v["where"]}
                     for k, v in summary["paper"].items()], ["what", "paper", "where"]))
    return sec


def fig7_sections(summary) -> list[H.Section]:
    sc = summary["scale"]
    main = H.Section("Fig. 7: accuracy against the share of samples", anchor="fig7")
    main.add(H.paragraph(
        f"L = {sc['n_items']} items ~ N(0, 1), W = {sc['n_workers']} workers, "
        f"T = {sc['tasks_per_worker']} tasks each, 2 ≤ k ≤ {sc['kmax']}; worker priors from "
        f"10 gold tasks per worker; each method one pass in a random order, mean ± sd over "
        f"{summary['repeats']} orders of the same data set (seed {summary['seed']})."
        + (f" Reports simulated by '{summary['simulator']['name']}': "
           f"{summary['simulator']['description']}." if summary.get("simulator") else "")))
    main.add(H.figure(fig7_figure(summary), "Pairwise accuracy (%) after each share of the "
                      "samples; band = ± 1 sd over orders ([Pan18], Fig. 7)."))
    claims = H.Section("The paper's claims, checked", anchor="claims")
    rows_ = []
    for s in summary["settings"]:
        b, st = s["couple_best"], s["couple_stable"]
        rows_.append({
            "setting": s["setting"],
            "COUPLE at 100 %": _pm(s["curves"]["couple"]["mean"][-1],
                                   s["curves"]["couple"]["sd"][-1]),
            "best baseline": f"{b['best_baseline_at_100']} "
                             + _pm(s["curves"][b["best_baseline_at_100"]]["mean"][-1],
                                   s["curves"][b["best_baseline_at_100"]]["sd"][-1]),
            "COUPLE ≥ all at 100 %": b["at_100"], "at every share": b["at_every_fraction"],
            f"stable (±{st['points']} pt) from": st["first_fraction_within"],
            "max |dev| from 20 %": st["max_dev_from_20pct"]})
    claims.add(H.table(rows_))
    c = summary["claims"]
    claims.add(H.note(
        f"Paper (Sect. 5.2): COUPLE superior on all settings — ours: "
        f"{'yes' if c['couple_best_everywhere'] else 'NO'}; COUPLE stable from 20 % of the "
        f"samples — ours: {'yes' if c['couple_stable_from_20pct'] else 'NO'}.",
        "ok" if c["couple_best_everywhere"] and c["couple_stable_from_20pct"] else "bad"))
    table = H.Section("Accuracy table (%)", anchor="table")
    for s in summary["settings"]:
        table.add(H.heading(s["setting"]))
        trs = []
        for i, f in enumerate(summary["fractions"]):
            r = {"share": f"{100 * f:g} %"}
            for m, cv in s["curves"].items():
                r[m] = _pm(cv["mean"][i], cv["sd"][i])
            trs.append(r)
        table.add(H.table(trs))
    out = [main, claims, table]
    if summary.get("nuts"):
        n = summary["nuts"]
        ns = H.Section("NUTS reference (reduced scale)", anchor="nuts")
        ns.add(H.paragraph(
            f"NUTS is not affordable at the paper's scale; at L = {n['scale']['n_items']}, "
            f"W = {n['scale']['n_workers']}, T = {n['scale']['tasks_per_worker']} per worker, "
            f"k ≤ {n['scale']['kmax']} (same settings and gold priors) the posterior mean's "
            f"accuracy beside one pass of each online method (one random order). Sampler: "
            f"{n['sampler']['chains']} chains × {n['sampler']['draws']} draws after "
            f"{n['sampler']['tune']} tuning steps."))
        trs = []
        for st, r in n["settings"].items():
            row = {"setting": st}
            row.update({m: 100 * a for m, a in r["accuracy"].items()})
            row["NUTS gate"] = "; ".join(f"{m}: {'trusted' if g['trusted'] else 'NOT trusted'}"
                                         f" (R-hat {_num(g['rhat_max'])}, bulk ESS "
                                         f"{_num(g['ess_bulk_min'], 0)})"
                                         for m, g in r["gate"].items())
            trs.append(row)
        ns.add(H.table(trs, digits=4))
        v = nuts_verdict(n)
        if v:
            ns.add(H.note(
                "Exact posteriors (NUTS posterior means): COUPLE's ranks the items at least "
                f"as well as CrowdBT's in {v['couple_ge']} of {v['n']} settings "
                f"({', '.join(f'{k} {d:+.2f}' for k, d in v['diff'].items())} points, "
                "COUPLE − CrowdBT); OnlineGBMM against its own model's posterior: "
                f"{', '.join(f'{k} {d:+.2f}' for k, d in v['online_vs_nuts'].items())} "
                "points.", "ok" if v["couple_ge"] == v["n"] else "note"))
        out.append(ns)
    return out


def _num(x, digits=3) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def nuts_verdict(n: dict) -> dict | None:
    """Per setting: COUPLE's NUTS accuracy minus CrowdBT's, and OnlineGBMM's minus COUPLE's
    NUTS (points); how many settings have COUPLE's posterior at least as accurate."""
    diff, onl = {}, {}
    for st, r in n["settings"].items():
        a = r["accuracy"]
        if "nuts-couple" in a and "nuts-crowdbt" in a:
            diff[st] = 100 * (a["nuts-couple"] - a["nuts-crowdbt"])
            if "couple" in a:
                onl[st] = 100 * (a["couple"] - a["nuts-couple"])
    if not diff:
        return None
    return {"n": len(diff), "couple_ge": sum(d >= 0 for d in diff.values()), "diff": diff,
            "online_vs_nuts": onl}


def not_runnable_section(summary) -> H.Section | None:
    nr = summary.get("not_runnable")
    if not nr:
        return None
    sec = H.Section("Experiments of the paper not runnable here", anchor="not-runnable")
    sec.add(H.table([{"experiment": k, "why": v} for k, v in nr.items()],
                    ["experiment", "why"]))
    return sec


def real_sections(summary) -> list[H.Section]:
    out = []
    e = summary["experiment"]
    for s in summary["sets"]:
        sec = H.Section(f"{s['dataset']}: accuracy", anchor=f"acc-{s['dataset']}")
        f = s["full"]
        sec.add(H.paragraph(
            f"{f['n_rankings']:,} rankings (the data duplicated {s['duplicate']}×), every "
            f"online method over {f['orders']} random orders (mean ± sd, %); PeerGrader is a "
            f"batch MAP (order-free). Priors: {summary['priors']}."))
        entries = [("full", f)] + [("cleaned by " + "+".join(c["detected_by"]), c)
                                   for c in s["cleaned"]]
        trs = []
        for name, v in entries:
            r = {"data": name}
            for m, a in v["accuracy"].items():
                r[m] = _pm(a["mean"], a["sd"])
            trs.append(r)
        sec.add(H.table(trs))
        if e == "babyface":
            p = summary["paper"]["babyface_cleaned_couple"]
            mine = [c for c in s["cleaned"] if "couple" in c["detected_by"]]
            if mine:
                a = mine[0]["accuracy"]["couple"]
                ok = abs(a["mean"] - p["value"]) <= 1.0
                sec.add(H.note(
                    f"Cleaned BabyFace, COUPLE: ours {_pm(a['mean'], a['sd'])} % vs the "
                    f"paper's ≈ {p['value']:.2f} % ({p['where']}); "
                    f"{'within' if ok else 'NOT within'} ±1 point.", "ok" if ok else "bad"))
        sec.add(H.figure(accuracy_bars(entries), f"{s['dataset']}: mean ± sd accuracy "
                         "([Pan18], Table 6 layout)"))
        for m, r in f["accuracy"].items():
            if "gate" in r:
                sec.add(H.note(f"{_label(m)}: {r['gate']['verdict']}",
                               "ok" if r["gate"]["trusted"] else "bad"))
        out.append(sec)
        ws = H.Section(f"{s['dataset']}: lowest-quality workers", anchor=f"w-{s['dataset']}")
        ws.add(H.paragraph(
            "Six lowest by COUPLE's E[η_w^1] = α_w^1/Σα_w and CrowdBT's E[η_w] = a_w/(a_w+b_w) "
            "(each averaged over the orders), and by PeerGrader's MAP reliability η_g "
            "([Pan18], Table 7)."))
        trs = []
        for i in range(max(len(v) for v in f["lowest"].values())):
            r = {"rank": i + 1}
            for m, ids in f["lowest"].items():
                if i < len(ids):
                    w = ids[i]
                    q = f["quality"][m][f["workers"].index(w)]
                    r[_label(m)] = f"{w} ({q:.3f})"
            trs.append(r)
        ws.add(H.table(trs))
        if "same_six" in s:
            ws.add(H.note(
                f"Paper: the three detectors find the same six workers on BabyFace. Ours "
                f"({s['dataset']}): {'the same six' if s['same_six'] else 'not the same six'}; "
                f"overlaps {s['overlap']}.", "ok" if s["same_six"] else "note"))
        out.append(ws)
    return out


def cost_sections(summary) -> list[H.Section]:
    sec = H.Section("Fig. 8 / Table 2: time per ranking", anchor="cost")
    p = summary["paper"]
    sec.add(H.paragraph(
        "Time of the update loop of one pass of each online method (numba kernels, after a "
        "warm-up that compiles them; 'wall' adds the pass's setup, e.g. rank-breaking for "
        "CrowdBT), divided by the number of rankings; the passes run one at a time in one "
        "process, on a machine other jobs may share (the best of the repeats is the least "
        "disturbed). BabyFace duplicated "
        f"{summary['duplicate']}× (k = 3 throughout); the synthetic set is the amateur "
        "setting at the scale below. PeerGrader: one objective+gradient pass over the "
        "data, and the whole MAP fit."))
    trs = []
    for name, c in summary["cost"].items():
        for m, r in c["per"].items():
            trs.append({"data": name, "method": _label(m),
                        "µs / ranking (mean ± sd)": _pm(r["mean_us_per_ranking"],
                                                        r["sd_us_per_ranking"]),
                        "best µs / ranking": r["min_us_per_ranking"],
                        "best wall µs / ranking": r["wall_us_per_ranking"],
                        "best CPU µs / ranking (whole pass)": r["cpu_us_per_ranking"],
                        "s / pass": r["seconds_per_pass"],
                        "ratio to OnlinePL (best)": c["ratio_to_pl"].get(f"{m}:pl", 1.0)})
        if "peergrader" in c:
            g = c["peergrader"]
            trs.append({"data": name, "method": "PeerGrader one pass (NumPy, vectorised)",
                        "best µs / ranking": g["one_pass_us_per_ranking"]})
            trs.append({"data": name, "method": f"PeerGrader MAP ({g['map_passes']} passes)",
                        "s / pass": g["map_seconds"]})
    sec.add(H.table(trs))
    bf = summary["cost"].get("babyface")
    if bf:
        r = bf["ratio_to_pl"]["couple:pl"]
        sec.add(H.note(
            f"COUPLE : OnlinePL on BabyFace = {r:.2f} (paper: about "
            f"{p['cost_ratio_couple_pl']['value']} measured in Matlab, theory 17 : 6 = "
            f"{p['cost_theory_couple_pl_k3']['value']:.2f} for k = 3); in CPU time of the "
            f"whole pass {bf['ratio_to_pl']['couple:pl (cpu, whole pass)']:.2f}. CrowdBT : "
            f"OnlinePL = {bf['ratio_to_pl']['crowdbt:pl']:.2f} (update loop), "
            f"{bf['ratio_to_pl']['crowdbt:pl (cpu, whole pass)']:.2f} (CPU, whole pass with "
            f"rank-breaking); the paper: CrowdBT the most costly.",
            "note"))
    sec.add(H.figure(cost_figure(summary), "best µs per ranking of each online "
                     "method's update loop ([Pan18], Fig. 8)"))
    return [sec]


def write_all(summary: dict, out: str | Path) -> dict:
    """``results.json``, ``results.csv`` and ``<experiment>.html`` into ``out``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    e = summary["experiment"]
    (out / "results.json").write_text(json.dumps(_clean(summary), indent=1) + "\n")
    write_csv(summary, out / "results.csv")
    if e == "fig7":
        body = fig7_sections(summary)
    elif e == "cost":
        body = cost_sections(summary)
    else:
        body = real_sections(summary)
    run = H.Section("Run", anchor="run")
    run.add(H.keyvalues({"experiment": e, "repeats": summary["repeats"],
                         "seed": summary["seed"], "scheduler": summary.get("scheduler"),
                         "seconds": summary.get("seconds_total"),
                         **{f"machine {k}": v for k, v in summary["machine"].items()}}))
    page = H.write(out / f"{e}.html", f"Replication of [Pan18]: {e}",
                   body + [x for x in (_paper_section(summary),
                                       not_runnable_section(summary)) if x] + [run],
                   subtitle="Pan, Han & Tsang, 'Stagewise learning for noisy k-ary "
                            "preferences', Machine Learning 107 (2018), Sect. 5 [Pan18], "
                            "replicated with crowdrank")
    return {"json": out / "results.json", "csv": out / "results.csv", "html": page}

"""The SBC page: one self-contained HTML file (figures as base64 PNG, no scripts) built from
``sbc.json`` and ``ranks.csv`` of :func:`crowdrank.validation.pipelines.sbc.run_sbc`.

The main figure is the ECDF-difference plot of Säilynoja, Bürkner & Vehtari (2022): for
each parameter, ``F̂(z) − z`` against the fractional rank ``z``, where ``F̂`` is the ECDF of
the parameter's ranks over the replicates; the grey area is the *simultaneous* 95 % band
under uniformity for that number of replicates (:func:`crowdrank.validation.pipelines.sbc.ecdf_test`). A
calibrated posterior keeps each curve inside the band in about 95 % of parameters; a curve
that bows *up* (ranks too small: truths below the draws) means the posterior sits too high,
a bow *down* too low; an ∩/∪ shape means posteriors too wide / too narrow.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

from crowdrank.validation.pipelines.sbc import FAMILIES, ecdf_test

from . import html as H
from .figures import _fig

FAMILY_TITLE = {"lambda": "item scores λ_r", "lambda_centred": "centred scores λ_r − mean λ",
                "eta": "worker η entries"}


def read_ranks(path: str | Path) -> dict:
    """``ranks.csv`` as ``{"params", "families", "rank" (N, P), "pit" (N, P) or None,
    "gate" (N,)}``, rows in replicate order."""
    rows: dict[int, dict] = {}
    order: list[str] = []
    fam: dict[str, str] = {}
    with Path(path).open(newline="") as fh:
        for r in csv.DictReader(fh):
            sim = int(r["sim"])
            if r["param"] not in fam:
                order.append(r["param"])
                fam[r["param"]] = r["family"]
            d = rows.setdefault(sim, {"rank": {}, "pit": {}, "gate": r["gate_passed"] == "1"})
            d["rank"][r["param"]] = float(r["rank"])
            if r["online_pit"] != "":
                d["pit"][r["param"]] = float(r["online_pit"])
    sims = sorted(rows)
    rank = np.array([[rows[s]["rank"][p] for p in order] for s in sims])
    has_pit = all(len(rows[s]["pit"]) == len(order) for s in sims)
    pit = np.array([[rows[s]["pit"][p] for p in order] for s in sims]) if has_pit else None
    return {"params": order, "families": [fam[p] for p in order], "rank": rank, "pit": pit,
            "gate": np.array([rows[s]["gate"] for s in sims]), "sims": sims}


def ecdf_difference_figure(values: np.ndarray, families: list[str], n_values: int | None,
                           pvalues: dict, names: list[str], title: str, seed: int = 0):
    """One panel per family: every parameter's ECDF difference and the simultaneous band
    for the number of replicates; curves leaving the band are drawn in red."""
    fams = [f for f in FAMILIES if f in families]
    fig, axes = _fig(ncols=len(fams), w=4.2, h=3.2)
    for ax, f in zip(axes, fams):
        cols = [j for j, g in enumerate(families) if g == f]
        band = None
        n_out = 0
        for j in cols:
            e = ecdf_test(values[:, j], n_values, seed=seed)
            band = e
            bad = not e.inside
            n_out += bad
            ax.step(e.z, e.ecdf - e.z, where="post", lw=1.4 if bad else 0.7,
                    color="#c0392b" if bad else "#34495e", alpha=0.9 if bad else 0.45,
                    zorder=3 if bad else 2)
        ax.fill_between(band.z, band.lower - band.z, band.upper - band.z, step="post",
                        color="#95a5a6", alpha=0.35, lw=0, zorder=1)
        ax.axhline(0, color="k", lw=0.6)
        ax.set_xlim(0, 1)
        ax.set_xlabel("fractional rank z" if n_values else "PIT z")
        ax.set_title(f"{FAMILY_TITLE.get(f, f)}\n{n_out}/{len(cols)} outside band; "
                     f"combined p={pvalues.get(f, float('nan')):.3g}", fontsize=9)
    axes[0].set_ylabel("ECDF(z) − z")
    fig.suptitle(title, fontsize=10)
    return fig


def histogram_figure(values: np.ndarray, families: list[str], n_values: int | None, title: str):
    """Pooled rank histograms per family, with the uniform expectation and its pointwise
    99 % binomial range per bin (pooled ranks are *not* independent within a replicate, so
    this is a picture, not the test)."""
    from scipy.stats import binom

    fams = [f for f in FAMILIES if f in families]
    fig, axes = _fig(ncols=len(fams), w=4.2, h=2.6)
    for ax, f in zip(axes, fams):
        cols = [j for j, g in enumerate(families) if g == f]
        v = values[:, cols].ravel()
        u = v / (n_values - 1) if n_values else v
        B = 20
        counts, edges = np.histogram(np.clip(u, 0, 1), bins=B, range=(0, 1))
        ax.bar(edges[:-1], counts, width=1 / B, align="edge", color="#5d8aa8", alpha=0.8)
        n = v.size
        lo, hi = binom.ppf([0.005, 0.995], n, 1 / B)
        ax.axhspan(lo, hi, color="#95a5a6", alpha=0.3, zorder=0)
        ax.axhline(n / B, color="k", lw=0.8)
        ax.set_title(FAMILY_TITLE.get(f, f), fontsize=9)
        ax.set_xlabel("rank / S" if n_values else "PIT")
    fig.suptitle(title, fontsize=10)
    return fig


def _family_rows(summary: dict) -> list[dict]:
    rows = []
    for f, v in summary.get("families", {}).items():
        rows.append({"family": f, "parameters": v["n_params"],
                     "ECDF p (combined)": v["ecdf_p_combined"],
                     "pot_c p (combined)": v.get("pot_c_p_combined"),
                     "chi² p (combined)": v["chi2_p_combined"],
                     "min ECDF p": v["ecdf_p_min"], "outside band": v["outside_band"],
                     "threshold": v["threshold"], "calibrated": v["calibrated"]})
    return rows


def _worst_rows(summary: dict, n: int = 8) -> list[dict]:
    params = summary.get("parameters", {})
    worst = sorted(params, key=lambda k: params[k]["ecdf_p"])[:n]
    return [{"parameter": k, "family": params[k]["family"], "ECDF p": params[k]["ecdf_p"],
             "ECDF p (Holm)": params[k]["ecdf_p_holm"], "chi² p": params[k]["chi2_p"],
             "pot_c p (ArviZ)": params[k]["pot_c_p"], "inside band": params[k]["inside_band"]}
            for k in worst]


def _verdict_block(summary: dict, what: str) -> str:
    ok = summary.get("calibrated")
    kind = "ok" if ok else ("note" if ok is None else "bad")
    return H.note(f"{what}: {summary.get('verdict', '—')}", kind)


def write_sbc_report(out: str | Path, name: str = "sbc.html") -> Path:
    """Write ``out/name`` from ``out/sbc.json`` and ``out/ranks.csv``; return its path."""
    out = Path(out)
    summary = json.loads((out / "sbc.json").read_text())
    data = read_ranks(out / "ranks.csv")
    cfg = summary["config"]
    S = int(summary["n_draws"])
    seed = int(cfg.get("seed", 0))
    sections = []

    intro = H.Section("Summary", anchor="summary")
    intro.add(H.paragraph(
        "Simulation-based calibration (Talts et al. 2018): each replicate draws the "
        "parameters from the prior, simulates rankings from the model's exact generative "
        "process and fits them. If the fit returns the true posterior, the rank of each "
        f"true value among the {S} thinned posterior draws is uniform on 0..{S}, and the "
        "online method's PIT (the true value's CDF under its approximate marginal) is "
        "uniform on [0, 1]."))
    intro.add(_verdict_block(summary["nuts"], f"NUTS ({cfg['backend']}) ranks"))
    if "online" in summary:
        intro.add(_verdict_block(summary["online"], f"{summary['online']['method']} PIT"))
    intro.add(H.paragraph(summary["nuts"].get("rule", "")))
    kv = {"model": cfg["model"], "backend": cfg["backend"],
          "replicates": summary["replicates"], "thinned draws S": S,
          "items": cfg["n_items"], "workers": cfg["n_workers"],
          "tasks per worker": cfg["tasks_per_worker"], "kmax": cfg["kmax"],
          "worker prior": cfg["worker_prior"], "λ prior": f"N({cfg['mu0']}, {cfg['sigma0']}²)",
          "seed": cfg["seed"]}
    if cfg["backend"] != "prior":
        kv.update({"chains × (tune + draws)": f"{cfg['chains']} × ({cfg['tune']} + "
                                               f"{cfg['draws']})",
                   "target accept": cfg["target_accept"]})
    if cfg.get("shift_sd"):
        kv["λ draws shifted by (test hook)"] = f"{cfg['shift_sd']} posterior sd"
    intro.add(H.keyvalues(kv))
    if summary.get("failed_replicates"):
        intro.add(H.note(f"{len(summary['failed_replicates'])} replicate(s) raised and are "
                         "left out of the tests: " + summary["failed_replicates"][0]["error"],
                         "bad"))
    sections.append(intro)

    sampler = "Gibbs" if cfg["backend"] == "gibbs" else "NUTS"
    nuts = H.Section(f"{sampler} ranks ({cfg['backend']})", anchor="nuts")
    nuts.add(H.figure(ecdf_difference_figure(
        data["rank"], data["families"], S + 1,
        {f: v["ecdf_p_combined"] for f, v in summary["nuts"]["families"].items()},
        data["params"], f"{cfg['model']} / {cfg['backend']}: ECDF difference of the ranks",
        seed), "Each line is one parameter's ECDF of ranks minus the uniform CDF; grey: the "
               "simultaneous 95 % band for this number of replicates (Säilynoja et al. "
               "2022). Above zero: truths rank low, the posterior sits too high; ∩ shape: "
               "too wide; ∪ / S shape: too narrow. Red lines leave the band.", dpi=90))
    nuts.add(H.figure(histogram_figure(data["rank"], data["families"], S + 1,
                                       "pooled rank histograms"),
                      "Ranks pooled over the parameters of a family; black: the uniform "
                      "expectation; grey: its pointwise 99 % range per bin.", dpi=80))
    nuts.add(H.table(_family_rows(summary["nuts"])))
    nuts.add(H.heading("Lowest p-values"))
    nuts.add(H.table(_worst_rows(summary["nuts"])))
    sections.append(nuts)

    if "online" in summary and data["pit"] is not None:
        on = summary["online"]
        sec = H.Section(f"Online PIT ({on['method']})", anchor="online")
        sec.add(H.figure(ecdf_difference_figure(
            data["pit"], data["families"], None,
            {f: v["ecdf_p_combined"] for f, v in on["families"].items()}, data["params"],
            f"{on['method']}: ECDF difference of the PIT values", seed),
            "As above, for the probability integral transform of each true value under the "
            "online method's approximate marginal (Gaussian for λ, Beta marginals of the "
            "Dirichlet for η). ∪/S shapes mean over-confident marginals.", dpi=90))
        sec.add(H.table(_family_rows(on)))
        sec.add(H.heading("Lowest p-values"))
        sec.add(H.table(_worst_rows(on)))
        if any(on.get("clamped", {}).values()):
            sec.add(H.keyvalues({f"guard counter {k}": v for k, v in on["clamped"].items()}))
        sections.append(sec)

    if cfg["backend"] != "prior":
        g = summary["gate"]
        gate = H.Section("NUTS convergence gate", anchor="gate")
        gate.add(H.keyvalues({
            "replicates passing the gate": g["passed"], "failing": g["failed"],
            "divergences (total)": g["divergences_total"],
            "replicates with divergences": g["replicates_with_divergences"],
            "median of min bulk ESS": g["ess_bulk_min_median"],
            "smallest min bulk ESS": g["ess_bulk_min_min"],
            f"replicates with min bulk ESS < S={S}": g["replicates_with_ess_below_n_draws"]}))
        if g["reasons"]:
            gate.add(H.table([{"reason": k, "replicates": v} for k, v in g["reasons"].items()]))
        gp = summary.get("nuts_gate_passed_only")
        if gp and gp.get("families"):
            gate.add(H.paragraph("The same tests on the replicates that passed the gate only "
                                 f"({gp['replicates']}): {gp['verdict']}. " + gp.get("note", "")))
            gate.add(H.table(_family_rows(gp)))
        sections.append(gate)

    t = summary.get("timing", {})
    tim = H.Section("Timing", anchor="timing")
    tim.add(H.keyvalues({k.replace("_", " "): v for k, v in t.items()}))
    sections.append(tim)
    return H.write(out / name, f"SBC: {cfg['model']} / {cfg['backend']}", sections,
                   subtitle=f"{summary['replicates']} replicates")

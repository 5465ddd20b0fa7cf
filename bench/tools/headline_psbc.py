"""Posterior SBC's rows of the headline table (``bench/results/posterior_sbc.json``, written
by ``bench/bench_posterior_sbc.py``); their goals are in ``headline.GOALS``: the verdict
against the fidelity box on the approximation study's rows (in the README), the power on
the planted methods, the cost on the default data and at the paper's scale (docs/results.md
only)."""

from __future__ import annotations

from pathlib import Path

from headline import Row
from records import latest_by, load


def _recs(d: Path, kind: str) -> list[dict]:
    return [r for r in (load(d, "posterior_sbc.json") or []) if r.get("kind") == kind]


def validation_rows(d: Path) -> list[Row]:
    """The verdict beside the box on every (subject, method) row measured at the default
    augmentation (a row measured only at another size is counted as not measured)."""
    from crowdrank.validation.pipelines.posterior_sbc import DEFAULT_AUGMENT

    # the verdict is the tolerance check (records with a verdict_rule); records written
    # before it carry the strict uniformity verdict only and are not counted
    tolerance = [r for r in _recs(d, "validate") if r.get("verdict_rule")]
    every = list(latest_by(tolerance, lambda r: (r["subject"], r["label"])).values())
    recs = list(latest_by([r for r in tolerance if r.get("augment") == DEFAULT_AUGMENT],
                          lambda r: (r["subject"], r["label"])).values())
    elsewhere = sorted(f"{r['subject']} {r['label']}" for r in every
                       if (r["subject"], r["label"]) not in
                       {(x["subject"], x["label"]) for x in recs})
    study = load(d, "approx_study.json")
    if not recs or study is None:
        return []
    rows = [(s["name"], m["label"], m["inside_box"]) for s in study["subjects"]
            if s.get("trusted") for m in s["methods"]]
    khat_in = [m.get("khat") for s in study["subjects"] if s.get("trusted")
               for m in s["methods"] if m["inside_box"]]
    khat_ok = sum(k is not None and k <= 0.7 for k in khat_in)
    inside = [(s, lab) for s, lab, box in rows if box]
    agree = sum(r["calibrated"] == r["inside_box"] for r in recs)
    got = {(r["subject"], r["label"]): r for r in recs}
    in_cal = sum(bool(got[k]["calibrated"]) for k in inside if k in got)
    in_measured = sum(k in got for k in inside)
    disagree = [f"{r['subject']} {r['label']} (box {'in' if r['inside_box'] else 'out'}, "
                f"posterior SBC {'calibrated' if r['calibrated'] else 'not'}: "
                + ", ".join(f"{f} sd ratio {v['sd_ratio']:.2f} [{v['sd_ratio_lo']:.2f}, "
                            f"{v['sd_ratio_hi']:.2f}], |z| ≥ {v['abs_z_lo']:.2f}"
                            for f, v in r["tolerance"].items())
                + ("" if r["predictive_p"] >= 0.01 else
                   f", predictive p {r['predictive_p']:.2g}")
                + ")" for r in recs if r["calibrated"] != r["inside_box"]]
    strict_agree = sum(r["strict_calibrated"] == r["inside_box"] for r in recs)
    strict_in = sum(bool(got[k]["strict_calibrated"]) for k in inside if k in got)
    labels = sorted({r["label"] for r in recs})
    n_out = sum(not r["inside_box"] for r in recs)
    out_not = sum(not r["inside_box"] and not r["calibrated"] for r in recs)
    values = {"rows": len(rows), "measured": len(recs), "agree": agree,
              "inside": len(inside), "inside_calibrated": in_cal}
    return [Row("posterior SBC vs the fidelity box",
                f"{agree} of {len(recs)} rows agree", "psbc validation",
                values, "posterior_sbc.json", recs,
                f"augment R = {DEFAULT_AUGMENT:g} (the default); "
                + (f"measured only at another R, so not counted: {', '.join(elsewhere)}; "
                   if elsewhere else "")
                + f"{in_cal} of the {len(inside)} rows inside the box called calibrated "
                "(the verdict: not confidently outside the box's tolerance, and the companion "
                f"checks pass; the strict uniform-ranks test beside it agrees on "
                f"{strict_agree} of {len(recs)} and calls {strict_in} in-box rows calibrated); "
                f"methods measured: {', '.join(labels)} ({len(recs)} rows, {in_measured} of "
                f"the {len(inside)} inside the box; the PPL approximations' rows need a refit "
                f"of 10–2,300 CPU s per replicate and were not run); of the {n_out} measured rows "
                f"outside the box {out_not} are NOT calibrated; where they disagree: "
                + ("; ".join(disagree) or "nowhere")
                + f". PSIS k̂ ≤ 0.7 on {khat_ok} of the {len(inside)} in-box rows.")]


def power_rows(d: Path) -> list[Row]:
    """The planted methods at each augmentation size."""
    recs = list(latest_by(_recs(d, "power"), lambda r: r["augment"]).values())
    if not recs:
        return []
    from crowdrank.validation.pipelines.posterior_sbc import DEFAULT_AUGMENT

    by = {r["augment"]: r for r in recs}
    default = by.get(DEFAULT_AUGMENT)
    parts = "; ".join(f"R = {a:g}"
                      + (f" with {r['prior_draws']:,} importance draws of the exact posterior"
                         if r.get("prior_draws") else "")
                      + f": over-confident {r['flagged']['planted-overconfident']}, "
                      f"prior-only {r['flagged']['planted-prior']}, exact "
                      f"{r['flagged']['planted-exact']} of {r['seeds']}"
                      for a, r in sorted(by.items()))
    if default is None:
        return []
    f = default["flagged"]
    values = {"seeds": default["seeds"], "over": f["planted-overconfident"],
              "prior": f["planted-prior"]}
    return [Row("posterior SBC: over-confident fit flagged",
                f"{f['planted-overconfident']} of {default['seeds']} seeds", "psbc power",
                values, "posterior_sbc.json", [default],
                f"augment R = {DEFAULT_AUGMENT:g} (the default), {default['sims']} replicates "
                f"each, tiny PL data per seed; the prior-only fit flagged in "
                f"{f['planted-prior']} of {default['seeds']}; flagged (the exact posterior "
                f"should not be): {parts}"
                + (f"; the strict uniform-ranks test beside it: over-confident "
                   f"{default['flagged_strict']['planted-overconfident']}, exact "
                   f"{default['flagged_strict']['planted-exact']} of {default['seeds']}"
                   if default.get("flagged_strict") else ""),
                headline=f["planted-overconfident"] < default["seeds"]
                or f["planted-prior"] < default["seeds"])]


def cost_rows(d: Path) -> list[Row]:
    """200 replicates of the one-pass update on the audit's default data."""
    from crowdrank.validation.pipelines.posterior_sbc import DEFAULT_AUGMENT

    recs = [r for r in _recs(d, "cost") if r["method"] == "online" and r["sims"] >= 200
            and r.get("augment") == DEFAULT_AUGMENT]
    by = latest_by(recs, lambda r: r["model"])
    if not by:
        return []
    worst = max(by.values(), key=lambda r: r["wall_s"])
    return [Row("posterior SBC of the one-pass update, default data, 200 replicates",
                f"{worst['wall_s']:.0f} s", "psbc cost", {"wall_s": worst["wall_s"]},
                "posterior_sbc.json", list(by.values()),
                "; ".join(f"{m}: {r['wall_s']:.1f} s wall, {r['cpu_s']:.1f} CPU s"
                          for m, r in by.items()), headline=False)]


def paper_rows(d: Path) -> list[Row]:
    """The default-budget audit of 450,000 rankings: posterior SBC instead of NUTS."""
    recs = _recs(d, "paper")
    if not recs:
        return []
    r = recs[-1]
    online = next((m["posterior_sbc"] for m in r["methods"] if m["method"] == "online"
                   and m.get("posterior_sbc")), None)
    if online is None or online.get("skipped"):
        return []
    parts = "; ".join(
        f"{m['method']}: " + (f"not checked ({m['posterior_sbc']['skipped']})"
                              if m["posterior_sbc"].get("skipped")
                              else m["posterior_sbc"]["verdict"])
        for m in r["methods"] if m.get("posterior_sbc"))
    values = {"rc": r["rc"], "psbc_s": online["seconds"], "audit_s": r["wall_s"]}
    return [Row("posterior SBC of the one-pass update, 450,000 rankings",
                f"{online['seconds'] / 60:.1f} min (audit {r['wall_s'] / 60:.1f} min)",
                "psbc paper", values, "posterior_sbc.json", [r],
                f"`crowdrank audit` with its default budget (NUTS estimated over it, so not "
                f"run), {online['replicates']} replicates of {online['rankings_added']:,} "
                f"simulated rankings each; load {r['load_before'][0]:.1f} before; {parts}",
                headline=False)]


def psbc_rows(d: Path) -> list[Row]:
    return validation_rows(d) + power_rows(d) + cost_rows(d) + paper_rows(d)

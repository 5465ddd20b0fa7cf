"""What the approximation study's record shows (``bench/bench_approx_study.py render``):
the "which approximation should I use" advice, the k̂ table, each subject's table and
accuracy-cost frontier figure, and the docs/fidelity.md section — from the record alone."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "bench" / "tools"))

from fidelity_pages import write_block

RESULTS = ROOT / "bench" / "results" / "approx_study.json"

# ------------------------------------------------------------------ what the record shows
START, END = "<!-- approx-study:start -->", "<!-- approx-study:end -->"
FIGURES = ROOT / "docs" / "figures"
KHAT_OK = 0.7
COST_GOAL = 5.0          # at most 1/5 of the reference's CPU seconds
COST_GOAL_TENTH = 10.0   # the "beyond Gaussian" goal: inside the box at ≤ 1/10 of it


def _done(subj: dict) -> list[dict]:
    return [m for m in subj["methods"] if m.get("status") == "done"]


def khat_table(rec: dict) -> dict:
    """The 2×2 counts over (subject, method) rows with a trusted reference and a k̂:
    ``{(khat_ok, inside): n}`` as ``"ok_in"``, ``"ok_out"``, ``"bad_in"``, ``"bad_out"``,
    and the rows left out (untrusted reference, no k̂)."""
    out = {"ok_in": 0, "ok_out": 0, "bad_in": 0, "bad_out": 0, "untrusted": 0, "no_khat": 0}
    for subj in rec["subjects"]:
        for m in _done(subj):
            if not subj.get("trusted"):
                out["untrusted"] += 1
            elif m.get("khat") is None or m.get("inside_box") is None:
                out["no_khat"] += 1
            else:
                key = ("ok" if m["khat"] <= KHAT_OK else "bad") + \
                      ("_in" if m["inside_box"] else "_out")
                out[key] += 1
    return out


def advice(subj: dict) -> dict:
    """Per subject: the cheapest method inside the box (CPU s), whether it costs at most
    1/5 of the reference's, and the method closest to the box."""
    done = _done(subj)
    ref = (subj.get("reference") or {}).get("cpu_s")
    inside = sorted((m for m in done if m.get("inside_box")), key=lambda m: m["cpu_s"])
    closest = min(done, key=lambda m: (m["box_distance"], m["cpu_s"]), default=None)
    best = inside[0] if inside else None
    return {"best": best, "closest": closest, "reference_cpu_s": ref,
            "goal": bool(best and ref and best["cpu_s"] * COST_GOAL <= ref),
            "goal_tenth": bool(ref and any(m["cpu_s"] * COST_GOAL_TENTH <= ref
                                           for m in inside)),
            "within_cost": [m["label"] for m in inside
                            if ref and m["cpu_s"] * COST_GOAL <= ref]}


def _f(x, nd=2) -> str:
    return "—" if x is None else f"{x:.{nd}f}"


def _ref_line(subj: dict) -> str:
    r = subj["reference"]
    cfg = f"{r['backend']}, 4 chains × ({r['tune']} + {r['draws']})"
    g = r.get("gradients") or {}
    grads = "" if g.get("sampling") is None else \
        f", {g['sampling']:,.0f} leapfrog steps in sampling" + \
        ("" if g.get("warmup") is None else f" + {g['warmup']:,.0f} in warm-up")
    trust = "trusted" if subj["trusted"] else "**NOT trusted**: its rows are not a verdict"
    by = ("this study" if r.get("computed_here")
          else "bench/bench_fidelity.py reference into the same cache")
    load = (r.get("loadavg_before") or ["?"])[0]
    extra = ("" if not r.get("extras_wall_s") else
             f" (of which {r['extras_wall_s']} s wall the pointwise log-likelihood and "
             "predictive draws, not sampling)")
    return (f"Reference: {cfg}, {trust} ({r['gate']}); {r['cpu_s']} CPU s, {r['wall_s']} s "
            f"wall{extra}{grads}; sampled by {by} ({r.get('date')}, load {load}).")


def subject_section(subj: dict) -> list[str]:
    d = subj.get("data") or {}
    head = f"### {subj['name']} ({subj['model']}"
    head += (f"; {d.get('items', d.get('n_items'))} items, {d.get('workers', d.get('n_workers'))}"
             f" workers, {d.get('rankings', d.get('n_rankings'))} rankings)" if d else ")")
    if "reference" not in subj:
        return [head, "", f"{subj['status']}: no row of this subject was measured.", ""]
    out = [head, "", _ref_line(subj), ""]
    adds = list((subj.get("added_references") or {}).values()) or \
        [a for a in [subj.get("reference_for_added_rows")] if a]
    for add in adds:
        cfg = (f"{add['backend']}, 4 chains × ({add['tune']} + {add['draws']})")
        diff = ("the study's configuration" if add.get("config_matches") else
                "differs from the study's: " + "; ".join(add.get("config_differences", [])))
        labels = sorted({m["label"] for m in subj["methods"]
                         if m.get("reference_folder") == add["folder"]})
        if not labels:
            continue
        out += [(f"Rows {', '.join(labels)} compare with `{add['folder']}` ({cfg}, "
                 f"{'trusted' if add['trusted'] else 'NOT trusted'}: {add['gate']}; {diff}; "
                 f"sampled {add.get('date')} at {add.get('commit')}, "
                 f"{add.get('cpu_s_this_reference')} CPU s); × reference uses "
                 f"{add['cpu_s']} CPU s ({add.get('cpu_s_source')})."), ""]
    if adds:
        out += ["The other rows compare with the reference above, a different run of NUTS.",
                ""]
    if (FIGURES / f"approx_frontier_{subj['name']}.png").is_file():
        out += [(f"![accuracy-cost frontier, {subj['name']}]"
                f"(figures/approx_frontier_{subj['name']}.png)"), ""]
    out += [("| method | centred \\|z\\| | centred sd ratio | η¹ \\|z\\| | η¹ sd ratio | "
            "k̂ | in the box | distance | CPU s | × reference | gradients | converged (steps) |"),
            "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    ref = subj["reference"]["cpu_s"]
    for m in subj["methods"]:
        if m.get("status") != "done":
            out.append(f"| {m['label']} | {m['status']} |" + " |" * 10)
            continue
        c, e = m["centred"], m["eta1"] or {}
        g = m.get("grad_evals")
        gs = "—" if g is None else (f"{g:,}" + (" (≥)" if "lower" in m["grad_evals_kind"]
                                                 else ""))
        conv = "—" if m.get("converged") is None else \
            f"{'yes' if m['converged'] else 'no'} ({m.get('steps')})"
        k = m.get("khat")
        out.append(f"| {m['label']} | {_f(c['median_abs_z'])} | {_f(c['median_sd_ratio'])} | "
                   f"{_f(e.get('median_abs_z'))} | {_f(e.get('median_sd_ratio'))} | "
                   f"{'n/a' if k is None else f'{k:.2f}'} | "
                   f"{'**yes**' if m['inside_box'] else 'no'} | {_f(m['box_distance'])} | "
                   f"{m['cpu_s']:.1f} | {_f(m['cpu_s'] / ref if ref else None)} | {gs} | "
                   f"{conv} |")
    return out + [""]


def advice_section(rec: dict) -> list[str]:
    out = ["### Which approximation should I use", "",
           ("Per subject, from the rows above: the cheapest method inside the box, whether it "
           f"costs at most 1/{COST_GOAL:.0f} of the trusted reference's CPU seconds (the "
           f"first study's goal) and whether one inside costs at most 1/{COST_GOAL_TENTH:.0f} "
           "(the goal of the structured, flow and exact-moment methods), and the method "
           "closest to the box."), "",
           ("| subject | reference | cheapest inside the box (CPU s) | ≤ 1/5 of NUTS | "
           "≤ 1/10 of NUTS | closest to the box (distance, CPU s) | k̂ ≤ 0.7 |"),
           "|---|---|---|---|---|---|---|"]
    for subj in rec["subjects"]:
        if "reference" not in subj:
            out.append(f"| {subj['name']} | {subj['status']} | | | | | |")
            continue
        a = advice(subj)
        b, c = a["best"], a["closest"]
        ok = [m["label"] for m in _done(subj) if m.get("khat") is not None
              and m["khat"] <= KHAT_OK]
        out.append(
            f"| {subj['name']} | {'trusted' if subj['trusted'] else 'NOT trusted'}, "
            f"{a['reference_cpu_s']} CPU s | "
            f"{'none' if b is None else f'{b['label']} ({b['cpu_s']:.1f})'} | "
            f"{'yes' if a['goal'] else 'no'} | {'yes' if a['goal_tenth'] else 'no'} | "
            f"{'—' if c is None else f'{c['label']} ({c['box_distance']:.2f}, {c['cpu_s']:.1f})'}"
            f" | {', '.join(ok) or 'none'} |")
    return out + [""]


def khat_section(rec: dict) -> list[str]:
    t = khat_table(rec)
    n_ok, n_bad = t["ok_in"] + t["ok_out"], t["bad_in"] + t["bad_out"]
    out = ["### Does k̂ ≤ 0.7 predict \"inside the box\"?", "",
           ("Every (subject, method) row measured against a trusted reference that has a k̂ "
           f"({n_ok + n_bad} rows; {t['untrusted']} rows of untrusted references and "
           f"{t['no_khat']} without a k̂ left out)."), "",
           "| | inside the box | outside |", "|---|---|---|",
           f"| k̂ ≤ 0.7 | {t['ok_in']} | {t['ok_out']} |",
           f"| k̂ > 0.7 | {t['bad_in']} | {t['bad_out']} |", ""]
    if n_ok + n_bad:
        out.append(f"Inside the box: {t['ok_in']} of {n_ok} rows with k̂ ≤ 0.7, "
                   f"{t['bad_in']} of {n_bad} with k̂ > 0.7.")
        out.append("")
    return out


def simplex_section(rec: dict) -> list[str]:
    """The goals of the methods that follow the worker simplex, per goal subject (the
    headline's rules, :mod:`headline_simplex`: a row is new when its label's first word is
    one of its ``NEW_METHODS``)."""
    from headline_simplex import CPU_SHARE, SUBJECTS, _is_new

    by = {s["name"]: s for s in rec["subjects"]}
    out = ["### The simplex-following methods against their goals", "",
           (f"Per goal subject: a method of any kind inside the box at ≤ {CPU_SHARE:g} of the "
            "reference's CPU seconds (goal 1), and the best new method (`ep-exact` and its "
            "variants, the structured and flow guides) no farther from the box than the best "
            "of the methods before them (goal 2)."), "",
           ("| subject | NUTS CPU s (limit) | best before (distance) | best new (distance, CPU "
            "s) | cheapest new inside (CPU s) | goal 1 | goal 2 |"),
           "|---|---|---|---|---|---|---|"]
    for name in SUBJECTS:
        subj = by.get(name)
        if subj is None or "reference" not in subj or not _done(subj):
            out.append(f"| {name} | not run | | | | | |")
            continue
        ref = subj["reference"]["cpu_s"]
        done = _done(subj)
        new = [m for m in done if _is_new(m["label"])]
        old = [m for m in done if not _is_new(m["label"])]
        bo = min(old, key=lambda m: (m["box_distance"], m["cpu_s"])) if old else None
        bn = min(new, key=lambda m: (m["box_distance"], m["cpu_s"])) if new else None
        inside_new = sorted((m for m in new if m["inside_box"]), key=lambda m: m["cpu_s"])
        ok = sorted((m for m in done if m["inside_box"] and m["cpu_s"] <= CPU_SHARE * ref),
                    key=lambda m: m["cpu_s"])
        closest = min(done, key=lambda m: (m["box_distance"], m["cpu_s"]))
        g1 = (f"**yes**: {ok[0]['label']} ({ok[0]['cpu_s']:.2f} s)" if ok else
              f"**no**: closest {closest['label']} ({closest['box_distance']:.3f}, "
              f"{closest['cpu_s']:.1f} s)")
        g2 = ("—" if bn is None or bo is None else
              "**yes**" if bn["box_distance"] <= bo["box_distance"] else "**no**")
        out.append(
            f"| {name} | {ref:.1f} ({CPU_SHARE * ref:.1f}) | "
            f"{'—' if bo is None else f'{bo['label']} ({bo['box_distance']:.3f})'} | "
            f"{'—' if bn is None else f'{bn['label']} ({bn['box_distance']:.3f}, {bn['cpu_s']:.1f})'}"
            f" | {', '.join(f'{m['label']} ({m['cpu_s']:.1f})' for m in inside_new[:2]) or 'none'}"
            f" | {g1} | {g2} |")
    return out + [""]


INTRO = """## The study of the PPL approximations (`bench/bench_approx_study.py`)

Every method of the registry that fits the model, with the same priors and data, against
the subject's NUTS reference (the configuration trusted above; sampled again on this
machine): the online one-pass update and undamped EP for context, then the PPLs' own
`advi`, `fullrank-advi`, `lowrank-advi`, `pathfinder` and `laplace-ppl` (NumPyro, the
registry's default options), undamped EP to convergence or 200 passes (`ep200
damping=0`), then `ep-exact` (EP whose site updates integrate the worker's
η exactly; with EP's score part, and with the exact one: `scores=exact`) and the
structured and flow guides (`structured-vi`, `coupled-vi`, `flow-vi`) where the registry
has them. The box is the goals' (centred |z| ≤ 0.1 and sd ratio in
[0.9, 1.1], and the same on `E[η_w^1]`); the distance to it is the largest excess of those
four figures over their bounds (0 inside). Figures of a method with draws come from its
draws (centred per draw), those of the online and EP rows from their independent
Gaussians. k̂: PSIS of the approximation against the exact posterior ([Yao18];
[Vehtari24]). CPU s: `getrusage` of the study's one process and its children, for one fit,
JIT compilation included (the first one-pass fit of a model in the process also loads the
numba kernels that EP then shares: the default subjects' rows); gradients: log-density gradients where the method reports them ("≥": L-BFGS
iterations, a lower bound). The machine's 2 cores were shared with other work (load in the
JSON): CPU seconds are less inflated by that than wall seconds, not immune.
Frontier figures: x CPU seconds (log; below 0.01 drawn at 0.01), y distance to the box;
filled markers k̂ ≤ 0.7, the line joins the methods no other beats on both; vertical
lines: the reference's CPU s, 1/5 and 1/10 of it."""


def render_section(rec: dict) -> str:
    """The docs/fidelity.md section, from the record alone."""
    fin = rec.get("finished")
    lines = [START, INTRO, "",
             (f"Measured {rec['date']} → {fin or 'stopped before the end (see the rows)'} "
             f"at commit {rec['commit']}: `{rec['command']}`, load {rec['load_before'][0]} "
             f"at the start; no subject or method started after {rec.get('stop_at_utc')} UTC."),
             ""]
    for r in rec.get("merged_runs", []):
        absent = "; ".join(f"{k}: {', '.join(v)}" for k, v in r.get("absent", {}).items())
        lines += [(f"Rows added {r['date']} → {r.get('finished', 'stopped')} at commit "
                   f"{r['commit']}: `{r['command']}` (subjects {', '.join(r['subjects'])}"
                   + (f"; not in the plan there: {absent}" if absent else "") + "). Each row "
                   "records its commit; a subject's rows of an added run compare with the "
                   "reference named under its table."), ""]
    lines += advice_section(rec) + khat_section(rec) + simplex_section(rec)
    for subj in rec["subjects"]:
        lines += subject_section(subj)
    lines.append(END)
    return "\n".join(lines)


def frontier_figure(subj: dict, path: Path) -> None:
    """x: CPU s (log); y: distance to the box; the Pareto front of the two."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # getrusage's resolution: a fit under 0.01 CPU s is drawn at 0.01 (log axis)
    done = [dict(m, cpu_s=max(m["cpu_s"], 0.01))
            for m in sorted(_done(subj), key=lambda m: m["cpu_s"])]
    fig, ax = plt.subplots(figsize=(8.0, 4.0))
    for i, m in enumerate(done):
        ok = m.get("khat") is not None and m["khat"] <= KHAT_OK
        ax.scatter(m["cpu_s"], m["box_distance"], s=40, color="C0",
                   facecolors="C0" if ok else "none", zorder=3)
        ax.annotate(m["label"], (m["cpu_s"], m["box_distance"]), fontsize=7,
                    xytext=(4, 3 if i % 2 == 0 else -10), textcoords="offset points")
    front, best = [], float("inf")
    for m in done:
        if m["box_distance"] < best:
            front.append(m)
            best = m["box_distance"]
    ax.step([m["cpu_s"] for m in front], [m["box_distance"] for m in front], where="post",
            color="C0", lw=1, alpha=0.6)
    ref = subj["reference"]["cpu_s"]
    ax.axvline(ref, color="k", lw=1, label=f"NUTS reference ({ref:.0f} CPU s)")
    ax.axvline(ref / COST_GOAL, color="k", lw=1, ls="--", label="1/5 of it")
    ax.axvline(ref / COST_GOAL_TENTH, color="k", lw=1, ls=":", label="1/10 of it")
    ax.set_xscale("log")
    ax.set_xlabel("CPU seconds of one fit (log)")
    ax.set_ylabel("distance to the box")
    ax.set_title(f"{subj['name']}" + ("" if subj.get("trusted") else " (reference NOT trusted)"),
                 fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.margins(x=0.15, y=0.12)
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)


def render(path: Path = RESULTS, out: Path = ROOT / "docs" / "fidelity.md",
           figures: bool = True) -> str:
    """Figures (``figures=True``) and the section of ``out`` between the markers, after
    the ``approx`` section."""
    rec = json.loads(path.read_text())
    if figures:
        FIGURES.mkdir(parents=True, exist_ok=True)
        for subj in rec["subjects"]:
            if "reference" in subj and _done(subj):
                frontier_figure(subj, FIGURES / f"approx_frontier_{subj['name']}.png")
    section = render_section(rec)
    write_block(out, START, END, section)
    return section


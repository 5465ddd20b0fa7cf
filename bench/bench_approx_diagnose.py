"""Which parameters keep the PPL approximations out of the box on the medium subjects, and why.

The study (``bench/bench_approx_study.py``) reports per method the *median* over parameters
of the centred scores' |z| and sd ratio and of ``E[η_w^1]``'s. No method is inside the box
(|z| ≤ 0.1, sd ratio in [0.9, 1.1]) on the medium subjects; this bench opens the medians
up. Per subject (the study's cached trusted NUTS reference, ``out/fidelity/<subject>``;
the same data, priors and seeds) and per method it fits the approximation once and splits
its per-parameter figures by how much the data say about the parameter:

* items by evidence — the number of rankings each item appears in, in three equal-count
  groups (least, middle, most);
* workers by their reference posterior's spread of ``η^1`` — the sd of NUTS's draws, in
  three groups (sharpest, middle, widest): a worker with few tasks or an ambiguous type
  has a wide, skewed (Dirichlet) posterior that a Gaussian in the unconstrained
  coordinates can miss.

For each group: median |z|, median sd ratio and the share of the group inside the box;
and the five parameters farthest from it with their evidence. JSON in
``bench/results/approx_diagnose.json``; rendered into docs/fidelity.md between
``<!-- approx-diagnose:start -->`` and ``<!-- approx-diagnose:end -->``::

    python bench/bench_approx_diagnose.py run [--subjects S,...] [--methods M,...] [--references]
    python bench/bench_approx_diagnose.py render

A run keeps the earlier record's other subjects (each with its own date and commit).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench" / "tools"))
from stamp import stamp

sys.path.insert(0, str(ROOT / "bench"))

import bench_approx_study as study
import bench_fidelity as fid
from fidelity_pages import write_block

RESULTS = ROOT / "bench" / "results" / "approx_diagnose.json"
SUBJECTS = ("medium-expert", "medium-amateur", "medium-spammer", "medium-malicious")
METHODS = ("advi", "fullrank-advi", "pathfinder", "laplace-ppl")
START, END = "<!-- approx-diagnose:start -->", "<!-- approx-diagnose:end -->"
GROUPS = ("low", "mid", "high")


def terciles(values: np.ndarray) -> np.ndarray:
    """Group index 0, 1, 2 of each value: three equal-count groups by rank (ties by order)."""
    order = np.argsort(values, kind="stable")
    g = np.empty(len(values), int)
    g[order] = np.arange(len(values)) * 3 // len(values)
    return g


def item_evidence(data, items: list[str]) -> np.ndarray:
    """Rankings each of ``items`` appears in."""
    counts = np.zeros(data.n_items, int)
    for row in np.asarray(data.order).T:
        counts[row[row >= 0]] += 1
    pos = {str(it): k for k, it in enumerate(data.items)}
    return np.asarray([counts[pos[i]] for i in items])


def in_box(z: np.ndarray, sd_ratio: np.ndarray) -> np.ndarray:
    lo, hi = study.SD_BOX
    return (np.abs(z) <= study.Z_BOX) & (sd_ratio >= lo) & (sd_ratio <= hi)


def by_group(z, sd_ratio, groups) -> dict:
    out = {}
    for g, name in enumerate(GROUPS):
        sel = groups == g
        out[name] = {"n": int(sel.sum()),
                     "median_abs_z": round(float(np.median(np.abs(z[sel]))), 3),
                     "median_sd_ratio": round(float(np.median(sd_ratio[sel])), 3),
                     "share_in_box": round(float(in_box(z[sel], sd_ratio[sel]).mean()), 3)}
    return out


def worst(names, z, sd_ratio, evidence, k: int = 5) -> list[dict]:
    """The ``k`` parameters farthest from the box (largest excess over its bounds)."""
    excess = np.maximum.reduce([np.abs(z) - study.Z_BOX, study.SD_BOX[0] - sd_ratio,
                                sd_ratio - study.SD_BOX[1], np.zeros_like(z)])
    top = np.argsort(-excess, kind="stable")[:k]
    return [{"name": names[i], "z": round(float(z[i]), 3),
             "sd_ratio": round(float(sd_ratio[i]), 3), "evidence": evidence[i]}
            for i in top]


def per_parameter(post, ref) -> dict:
    """Per-parameter centred and ``η^1`` metrics of a draw-based fit (as the study's
    ``compare_draws``, unaggregated)."""
    from crowdrank.validation import metrics as M

    lam, e = study.aligned_draws(post, ref)
    cen = lam - lam.mean(1, keepdims=True)
    out = {"centred": M.parameter_metrics("normal", cen.mean(0), cen.std(0, ddof=1),
                                          *ref.centred)}
    if e is not None:
        out["eta1"] = M.parameter_metrics("normal", e.mean(0), e.std(0, ddof=1), *ref.eta1)
    return out


def diagnose(name: str, methods, cache: Path, log) -> dict:
    """One subject: every method of ``methods`` fitted once and split by evidence."""
    from crowdrank.inference.nuts import configure_host_devices
    configure_host_devices()
    from crowdrank.inference.nuts import read_nuts
    from crowdrank.models.registry import get as get_model
    from crowdrank.validation.pipelines.variants import fit_variant

    load, model, _ = fid.subjects()[name]
    d, pri = load()
    pri = get_model(model).worker_priors(pri, d)
    ref = fid.Reference(read_nuts(cache / name))
    ev = item_evidence(d, ref.items)
    ig = terciles(ev)
    out = {"name": name, "model": model, "data": d.summary(), "methods": {},
           "items": {"evidence_by_group": {n: [int(ev[ig == g].min()), int(ev[ig == g].max())]
                                           for g, n in enumerate(GROUPS)}}}
    wsd = wg = None
    if ref.eta1 is not None:
        wsd = ref.eta1[0].std(0, ddof=1)
        wg = terciles(wsd)
        out["workers"] = {"eta1_sd_by_group": {n: [round(float(wsd[wg == g].min()), 3),
                                                   round(float(wsd[wg == g].max()), 3)]
                                               for g, n in enumerate(GROUPS)}}
    for m in methods:
        t, c = time.perf_counter(), study.cpu_seconds()
        post = fit_variant(d, model, pri, {"method": m}, progress=False)
        r = per_parameter(post, ref)
        row = {"cpu_s": round(study.cpu_seconds() - c, 1),
               "wall_s": round(time.perf_counter() - t, 1),
               "converged": (post.diagnostics or {}).get("converged"),
               "centred": {"by_evidence": by_group(r["centred"]["z"], r["centred"]["sd_ratio"], ig),
                           "worst": worst(ref.items, r["centred"]["z"],
                                          r["centred"]["sd_ratio"], [int(x) for x in ev])}}
        if "eta1" in r:
            e = r["eta1"]
            row["eta1"] = {"by_reference_sd": by_group(e["z"], e["sd_ratio"], wg),
                           "worst": worst(ref.workers, e["z"], e["sd_ratio"],
                                          [round(float(x), 3) for x in wsd])}
        out["methods"][m] = row
        log(f"{name} {m}: {row['cpu_s']} CPU s; items low/mid/high |z| "
            + " / ".join(str(row["centred"]["by_evidence"][g]["median_abs_z"]) for g in GROUPS))
    return out


def run(subjects, methods, cache: Path, path: Path, argv, references: bool = False) -> dict:
    """Diagnose ``subjects`` into the record at ``path``. The subjects of an earlier record
    that this run does not redo are kept, each with the date, commit and command that made
    it; ``references``: sample a subject's missing NUTS reference first (the study's
    configuration and seed, :func:`bench_approx_study.reference`), else it is reported as
    not run."""
    def log(msg):
        print(f"[{time.strftime('%H:%M:%S', time.gmtime())}] {msg}", flush=True)

    when = {k: v for k, v in stamp(argv, speed=False, script=__file__).items()
            if k in ("date", "commit", "command")}
    rec = {"bench": "approx_diagnose", **when,
           "load_before": [round(x, 2) for x in os.getloadavg()], "env": fid.env(),
           "box": {"abs_z": study.Z_BOX, "sd_ratio": list(study.SD_BOX)}, "subjects": []}
    old = json.loads(path.read_text()) if path.is_file() else {}
    kept = {s["name"]: {**{k: old.get(k) for k in when}, **s}
            for s in old.get("subjects", []) if s["name"] not in subjects}

    def write():
        order = [n for n in SUBJECTS if n in kept or n in subjects] + \
            [n for n in [*kept, *subjects] if n not in SUBJECTS]
        done = {s["name"]: s for s in rec["subjects"]}
        out = {**rec, "subjects": [done.get(n) or kept[n] for n in dict.fromkeys(order)
                                   if n in done or n in kept]}
        path.write_text(json.dumps(out, indent=1) + "\n")
        return out

    for name in subjects:
        if not (cache / name / "posterior.nc").is_file():
            if not references:
                rec["subjects"].append({"name": name, **when, "status": "not run: no cached "
                                        "reference (--references samples it)"})
                continue
            study.reference(name, cache, log)
        rec["subjects"].append({"status": "done", **when,
                                **diagnose(name, methods, cache, log)})
        write()
    rec["load_after"] = [round(x, 2) for x in os.getloadavg()]
    return write()


# ------------------------------------------------------------------ the page
def _cells(g: dict) -> str:
    return f"{g['median_abs_z']:.2f} / {g['median_sd_ratio']:.2f} / {100 * g['share_in_box']:.0f} %"


def render_section(rec: dict) -> str:
    """The section of docs/fidelity.md (markers and heading included) from the record."""
    return f"{START}\n{HEAD}\n{_body(rec)}\n{END}"


def _provenance(rec: dict) -> str:
    """Who measured what: the record's run, and each earlier run whose subjects it kept."""
    runs: dict = {}
    for s in rec["subjects"]:
        key = tuple(s.get(k) or rec[k] for k in ("date", "commit", "command"))
        runs.setdefault(key, []).append(s["name"])
    mine = (rec["date"], rec["commit"], rec["command"])
    if list(runs) in ([mine], []):
        return (f"Measured {rec['date']} at commit {rec['commit']}: `{rec['command']}`, load "
                f"{rec['load_before'][0]} at the start.")
    return "Measured in " + str(len(runs)) + " runs: " + "; ".join(
        f"{', '.join(names)} on {d} at commit {c} (`{cmd}`"
        + (f", load {rec['load_before'][0]} at the start" if (d, c, cmd) == mine else "")
        + ")" for (d, c, cmd), names in runs.items()) + "."


def _body(rec: dict) -> str:
    lines = [(f"{_provenance(rec)} Cells: median |z| / median sd ratio / share of the group "
              "inside the box; groups are thirds of the parameters."), ""]
    for s in rec["subjects"]:
        if s.get("status") != "done":
            lines += [f"**{s['name']}**: {s['status']}.", ""]
            continue
        ev = s["items"]["evidence_by_group"]
        lines += [f"**{s['name']}** ({s['model']}): items by rankings seen (low "
                  f"{ev['low'][0]}–{ev['low'][1]}, mid {ev['mid'][0]}–{ev['mid'][1]}, high "
                  f"{ev['high'][0]}–{ev['high'][1]})"
                  + ("; workers by NUTS's sd of η¹ (sharp {0[0]}–{0[1]}, mid {1[0]}–{1[1]}, "
                     "wide {2[0]}–{2[1]})".format(*[s["workers"]["eta1_sd_by_group"][g]
                                                     for g in GROUPS])
                     if "workers" in s else "") + ".", "",
                  ("| method | centred λ, low evidence | mid | high | η¹, sharp | mid | wide "
                  "| farthest parameters (z, sd ratio) |"),
                  "|---|---|---|---|---|---|---|---|"]
        for m, r in s["methods"].items():
            c = r["centred"]["by_evidence"]
            e = r.get("eta1", {}).get("by_reference_sd")
            far = r["centred"]["worst"][:2] + (r.get("eta1", {}).get("worst") or [])[:2]
            lines.append(f"| {m} | {_cells(c['low'])} | {_cells(c['mid'])} | "
                         f"{_cells(c['high'])} | "
                         + (" | ".join(_cells(e[g]) for g in GROUPS) if e else "– | – | –")
                         + " | " + "; ".join(f"{w['name']} ({w['z']:+.2f}, {w['sd_ratio']:.2f})"
                                             for w in far) + " |")
        lines.append("")
    return "\n".join(lines)


HEAD = """### Which parameters keep the approximations out of the box

(`bench/bench_approx_diagnose.py`)

The medians above, opened up per parameter on the medium subjects: each method fitted once
more on the same data and priors, its centred scores split into thirds by how many
rankings hold the item, its `E[η^1]` into thirds by how wide NUTS's posterior of the
worker's accuracy is; the two items and two workers farthest from the box (five of each
in the JSON).
"""


def render(path: Path = RESULTS, out: Path = ROOT / "docs" / "fidelity.md") -> None:
    write_block(out, START, END, render_section(json.loads(path.read_text())))


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=("run", "render"))
    ap.add_argument("--subjects", default=",".join(SUBJECTS))
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--cache", default=str(fid.CACHE))
    ap.add_argument("--out", default=str(RESULTS))
    ap.add_argument("--references", action="store_true",
                    help="sample a subject's missing NUTS reference (the study's settings)")
    args = ap.parse_args(argv)
    if args.what == "run":
        run(args.subjects.split(","), args.methods.split(","), Path(args.cache),
            Path(args.out), argv, references=args.references)
    render(Path(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())

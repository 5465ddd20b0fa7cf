"""SBC benchmark: how many replicates of ``crowdrank sbc`` fit in a time budget, and what
200 replicates would cost (the target: >= 200 replicates each for PL, CrowdBT and
normalised COUPLE at 10 items, 4 workers, 100 rankings, geometric prior, each <= 30 min on
2 cores).

The study runs as ``crowdrank sbc`` runs it (``run_sbc``: NumPyro replicates in vmapped
batches of ``--sbc-batch``, ``--processes`` worker processes), in steps of ``--step``
replicates until ``--max-sims`` are done or the budget is spent; the SBC cache makes every
step add to the last. What is *measured*: the replicates done, the wall time end to end,
and the CPU seconds. Only when fewer than 200 replicates finish is the 200-replicate time
an *extrapolation*, marked as such. The load average is recorded beside the times because
the machine may be shared (then the CPU seconds, not the wall time, say what an idle
machine would need).

    nice -n 10 python bench/bench_sbc.py --models pl crowdbt couple-normalized --budget-s 1800
    nice -n 10 python bench/bench_sbc.py --models couple-normalized --backend pymc \
        --label reused --budget-s 3600 --step 200 --max-sims 200 --processes 2
    python bench/bench_sbc.py render       # the table of docs/sbc.md from the record
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench" / "tools"))
from stamp import stamp

TARGET_REPLICATES = 200
#: The study's data sizes (``SbcConfig`` fields): 10 items, 4 workers x 25 tasks.
DEFAULT_SETTING = {"n_items": 10, "n_workers": 4, "tasks_per_worker": 25}
TARGET_S = 30 * 60
CORES = 2


def bench_one(model: str, backend: str, budget_s: float, batch: int, out: Path,
              max_sims: int, seed: int, nuts: dict | None = None, processes: int = 1,
              sbc_batch: int | None = None, lane_groups: int = 1,
              warmup_depth: int | None = None, setting: dict | None = None,
              simplex: str = "gamma") -> dict:
    from crowdrank.validation.pipelines.sbc import SbcConfig, run_sbc

    setting = {**DEFAULT_SETTING, **(setting or {})}
    # date, commit, command, CPU, libraries, and the machine's speed on the day, before the
    # study loads it
    when = stamp()
    load0 = os.getloadavg()
    # replicates already cached by an earlier run: this run's wall time does not cover them
    before = _cached_replicates(out)
    t0 = time.perf_counter()
    sims, summary, cpu = 0, None, 0.0
    while sims < max_sims and time.perf_counter() - t0 < budget_s:
        sims = min(max_sims, sims + batch)
        cfg = SbcConfig(model=model, backend=backend, sims=sims, seed=seed, batch=sbc_batch,
                        **setting,
                        lane_groups=lane_groups, warmup_depth=warmup_depth, simplex=simplex,
                        **(nuts or {}))
        c0 = os.times()
        summary = run_sbc(cfg, out, processes=processes, progress=False)
        c1 = os.times()
        # this process and its (finished, waited-for) worker processes
        cpu += (c1.user - c0.user + c1.system - c0.system
                + c1.children_user - c0.children_user
                + c1.children_system - c0.children_system)
        print(f"[bench_sbc] {model}/{backend}: {summary['replicates']} replicates, "
              f"{time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    wall = time.perf_counter() - t0
    n = summary["replicates"]
    # replicate time from the replicates themselves (cache hits from an earlier run would
    # otherwise make the wall time per replicate look smaller)
    per = summary["timing"]["replicate_s_mean"]
    reached = n >= TARGET_REPLICATES
    whole = before == 0        # the wall time covers every replicate
    rec = {
        "model": model, "backend": backend, "replicates": n,
        "failed_replicates": len(summary["failed_replicates"]),
        "budget_s": budget_s, "wall_s": round(wall, 1), "processes": processes,
        "sbc_batch": summary["timing"].get("batch"), "nice": os.nice(0),
        "lane_groups": lane_groups, "warmup_depth": warmup_depth,
        "cache_dir": str(out), **when, "cpu_s_total_measured": round(cpu, 1),
        "replicates_cached_before_this_run": before,
        "measured_200_replicates_wall_s": round(wall, 1) if reached and whole else None,
        "meets_30_min_target_measured": (bool(wall <= TARGET_S) if reached and whole
                                         else None),
        "s_per_replicate_measured": round(per, 2),
        "cpu_s_per_replicate_measured": _round(summary["timing"].get("replicate_cpu_s_mean")),
        "extrapolated_200_replicates_s_on_2_idle_cores_from_cpu": _round(
            None if summary["timing"].get("replicate_cpu_s_mean") is None
            else TARGET_REPLICATES * summary["timing"]["replicate_cpu_s_mean"] / CORES, 0),
        "nuts_s_per_replicate": round(summary["timing"]["nuts_s_mean"] or float("nan"), 2),
        "nuts_breakdown_s_mean": _breakdown(out),
        "extrapolated_200_replicates_s_on_2_cores": round(TARGET_REPLICATES * per / CORES),
        "extrapolated": not reached,
        "meets_30_min_target_extrapolated": bool(TARGET_REPLICATES * per / CORES <= TARGET_S),
        "reached_200_replicates": reached,
        "loadavg_before": [round(x, 2) for x in load0],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "settings": {k: summary["config"][k] for k in (
            "n_items", "n_workers", "tasks_per_worker", "kmax", "worker_prior", "chains",
            "tune", "draws", "n_ranks", "seed")},
        # PyMC: one compiled model per worker process (inference.pymc_reuse), or one per
        # replicate (the route before; label "sequential" in results/sbc.json)
        "pymc_reuse": summary["config"].get("pymc_reuse") if backend == "pymc" else None,
    }
    rec["simplex"] = simplex
    for key in ("nuts", "online"):
        if key in summary:
            s = summary[key]
            rec[key] = {"calibrated": s["calibrated"], "verdict": s["verdict"],
                        "families": {f: {"ecdf_p_combined": round(v["ecdf_p_combined"], 4),
                                         "pot_c_p_combined": _round(v.get("pot_c_p_combined"),
                                                                    4),
                                         "chi2_p_combined": round(v["chi2_p_combined"], 4),
                                         "outside_band": v["outside_band"],
                                         "n_params": v["n_params"]}
                                     for f, v in s["families"].items()}}
            if key == "online":
                rec[key]["method"] = s["method"]
    rec["nuts"]["parameters"] = _per_parameter(summary["nuts"], out / "ranks.csv",
                                               summary["n_draws"])
    g = summary["gate"]
    rec["gate"] = {k: g[k] for k in ("passed", "failed", "divergences_total",
                                     "replicates_with_divergences", "ess_bulk_min_median",
                                     "replicates_with_ess_below_n_draws", "reasons")}
    return rec


def _per_parameter(nuts: dict, ranks_csv: Path, S: int) -> dict:
    """Per parameter: the ECDF-band and ``pot_c`` p-values of the verdict and the counts
    of extreme ranks (0, ``S``, and the lowest/highest 7 of the ``S + 1`` values, where
    ``N·7/(S + 1)`` are expected under uniformity)."""
    import csv

    ranks: dict[str, list[int]] = {}
    with ranks_csv.open() as fh:
        for row in csv.DictReader(fh):
            ranks.setdefault(row["param"], []).append(int(row["rank"]))
    out = {}
    for name, v in nuts["parameters"].items():
        r = ranks.get(name, [])
        out[name] = {"ecdf_p": _round(v["ecdf_p"], 4), "pot_c_p": _round(v["pot_c_p"], 4),
                     "inside_band": v["inside_band"],
                     "rank_0": sum(x == 0 for x in r), "rank_S": sum(x == S for x in r),
                     "rank_below_7": sum(x < 7 for x in r),
                     "rank_above_S_minus_7": sum(x > S - 7 for x in r),
                     "expected_per_7_cells": round(len(r) * 7 / (S + 1), 2)}
    return out


def _cached_replicates(out: Path) -> int:
    """Replicates in ``out/cache`` (a vmapped batch counts its members)."""
    n = 0
    for p in (out / "cache").glob("*.json"):
        res = json.loads(p.read_text())["result"]
        n += len(res["members"]) if "members" in res else 1
    return n


def _round(x, nd: int = 2):
    return None if x is None else round(float(x), nd)


def _breakdown(out: Path) -> dict:
    """Mean compile / warm-up / sampling seconds of the cached replicates."""
    import numpy as np

    acc: dict[str, list] = {}
    for p in (out / "cache").glob("*.json"):
        res = json.loads(p.read_text())["result"]
        if "members" in res:       # a vmapped batch: its times once, per replicate
            det = res["members"][0]["timings"].get("nuts_detail", {})
            R = len(res["members"])
            for k in ("compile_and_first_chunk", "warmup", "sampling", "total"):
                if "batch_" + k in det:
                    acc.setdefault(k + "_per_replicate", []).append(det["batch_" + k] / R)
            continue
        det = res["timings"].get("nuts_detail", {})
        for k in ("compile", "warmup", "sampling", "total"):
            if k in det:
                acc.setdefault(k, []).append(det[k])
    return {k: round(float(np.mean(v)), 2) for k, v in acc.items()}


START, END = "<!-- sbc:start -->", "<!-- sbc:end -->"
#: the families' names in the table
FAMILY = {"lambda": "λ", "lambda_centred": "centred", "eta": "η"}


def _ranks(v: dict) -> str:
    """``calibrated (λ 0.83 / 0.23, …)``: the verdict and, per family, the combined ECDF
    p-value / ``pot_c`` p-value (the latter where the record has it)."""
    def fmt(p: float) -> str:
        return f"{p:.2f}" if p >= 0.01 else (f"{p:.3f}" if p >= 0.001 else "< 0.001")

    fams = []
    for key, f in (v.get("families") or {}).items():
        p = fmt(f["ecdf_p_combined"])
        if f.get("pot_c_p_combined") is not None:
            p += f" / {fmt(f['pot_c_p_combined'])}"
        fams.append(f"{FAMILY.get(key, key)} {p}")
    word = "calibrated" if v.get("calibrated") else "**NOT calibrated**"
    return f"{word} ({', '.join(fams)})" if fams else word


def _row(r: dict) -> str:
    """One study's row of the table (:func:`render_section`)."""
    s = r.get("settings") or {}
    name = (f"{r['model']} / {r['backend']} ({r.get('label', 'default')}; "
            f"{s.get('chains')} × ({s.get('tune')} + {s.get('draws')}))")
    rec = " · ".join([str(r.get("date", "no date"))[:10], r.get("commit") or "no commit",
                      f"load {r['loadavg_before'][0]:g}" if r.get("loadavg_before") else
                      "no load"]
                     + ([f"speed probe {r['speed']['python_s']:g} s"] if r.get("speed") else []))
    cached = r.get("replicates_cached_before_this_run") or 0
    if r.get("measured_200_replicates_wall_s") is not None:
        wall = f"{r['measured_200_replicates_wall_s'] / 60:.1f} min"
    else:
        wall = (f"{r['wall_s'] / 60:.1f} min for the last {r['replicates'] - cached} "
                f"({cached} from an earlier run)" if cached else
                f"{r['wall_s'] / 60:.1f} min for {r['replicates']}")
    g = r.get("gate") or {}
    gate = f"{g.get('passed')}/{(g.get('passed') or 0) + (g.get('failed') or 0)}"
    if g.get("divergences_total"):
        gate += f", {g['divergences_total']} divergences"
    online = r.get("online") or {}
    return (f"| {name} | {rec} | {r['replicates']} | {wall} | "
            f"{r.get('cpu_s_total_measured', float('nan')):,.0f} "
            f"({r.get('cpu_s_per_replicate_measured', float('nan')):.2f}) | {gate} | "
            f"{_ranks(r.get('nuts') or {})} | {online.get('method', '')}: "
            f"{_ranks(online)} |")


def render_section(doc: dict) -> str:
    """The measured-figures table of docs/sbc.md (markers included) from ``sbc.json``:
    one row per study record (model / back-end / label), by model, back-end and date."""
    t = doc.get("target") or {}
    lines = [START, "",
             (f"Rendered from `bench/results/sbc.json` (`python bench/bench_sbc.py render`). "
              f"Goal: {t.get('replicates')} replicates of each study in ≤ "
              f"{(t.get('seconds') or 0) / 60:.0f} min on {t.get('cores')} cores. *wall*: "
              "measured for all 200 in one run, else the run that finished them (resumed "
              "from the cache of earlier runs); *record*: date, commit, load average at "
              "the start and, in newer records, the machine's speed probe "
              "(`bench/tools/speed.py`, smaller is faster); *CPU s*: the run's, with its "
              "share per replicate; *NUTS ranks* and *online*: the verdict of `crowdrank "
              "sbc` and, per parameter family, the combined ECDF-band p-value / `pot_c` "
              "p-value (no `pot_c` in records older than its test)."), "",
             ("| study | record | replicates | wall | CPU s (per replicate) | gate passed "
             "| NUTS ranks | online |"),
             "|---|---|---|---|---|---|---|---|"]
    order = {m: i for i, m in enumerate(("pl", "crowdbt", "couple-normalized"))}
    runs = sorted(doc.get("runs", []), key=lambda r: (order.get(r["model"], 9), r["backend"],
                                                      str(r.get("date") or "")))
    lines += [_row(r) for r in runs]
    lines += ["", END]
    return "\n".join(lines)


def render(path: Path, out: Path) -> str:
    """Write the section of docs/sbc.md from ``sbc.json`` (replacing the old one)."""
    sys.path.insert(0, str(ROOT / "bench"))     # when imported by bench/tools/render_results.py
    from fidelity_pages import render_block

    return render_block(path, out, render_section, START, END)


def main() -> int:
    if sys.argv[1:2] == ["render"]:
        print(render(ROOT / "bench" / "results" / "sbc.json", ROOT / "docs" / "sbc.md"))
        return 0
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=["pl", "crowdbt", "couple-normalized"])
    ap.add_argument("--backend", default="numpyro", choices=("numpyro", "pymc"))
    ap.add_argument("--budget-s", type=float, default=900.0, help="per model")
    ap.add_argument("--step", type=int, default=100, help="replicates between budget checks")
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--sbc-batch", type=int, default=None,
                    help="replicates per vmapped NumPyro program (default: crowdrank sbc's)")
    ap.add_argument("--lane-groups", type=int, default=1,
                    help="NumPyro batches: lanes regrouped by difficulty (crowdrank sbc's)")
    ap.add_argument("--warmup-depth", type=int, default=None,
                    help="NumPyro batches: warm-up tree-depth cap (crowdrank sbc's)")
    ap.add_argument("--max-sims", type=int, default=TARGET_REPLICATES)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--chains", type=int, default=None, help="default: crowdrank sbc's")
    ap.add_argument("--tune", type=int, default=None)
    ap.add_argument("--draws", type=int, default=None)
    ap.add_argument("--items", type=int, default=DEFAULT_SETTING["n_items"])
    ap.add_argument("--workers", type=int, default=DEFAULT_SETTING["n_workers"])
    ap.add_argument("--tasks", type=int, default=DEFAULT_SETTING["tasks_per_worker"],
                    help="tasks per worker")
    ap.add_argument("--simplex", default="gamma", choices=("gamma", "dirichlet"),
                    help="the worker simplex of the NUTS fits (SbcConfig.simplex): gamma "
                         "(the sampler's default) or dirichlet (the PPL's own Beta/Dirichlet)")
    ap.add_argument("--label", default="default",
                    help="name of the NUTS setting (runs are keyed model/backend/label)")
    ap.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "crowdrank-sbc-bench"),
                    help="SBC output folders (caches), one per model/backend")
    ap.add_argument("--out", default="bench/results/sbc.json")
    a = ap.parse_args()
    path = ROOT / a.out
    nuts = {k: getattr(a, k) for k in ("chains", "tune", "draws") if getattr(a, k) is not None}
    for model in a.models:
        sub = f"{model}-{a.backend}" + ("" if a.label == "default" else f"-{a.label}")
        setting = {"n_items": a.items, "n_workers": a.workers, "tasks_per_worker": a.tasks}
        rec = bench_one(model, a.backend, a.budget_s, a.step, ROOT / a.work / sub,
                        a.max_sims, a.seed, nuts, a.processes, a.sbc_batch,
                        a.lane_groups, a.warmup_depth, setting, a.simplex)
        rec["label"] = a.label
        # read just before writing: another study may have added its record meanwhile
        old = json.loads(path.read_text()) if path.exists() else {}
        runs = {f"{r['model']}/{r['backend']}/{r.get('label', 'default')}": r
                for r in old.get("runs", [])}
        runs[f"{model}/{a.backend}/{a.label}"] = rec
        print(json.dumps(rec), flush=True)
        doc = {"what": "crowdrank sbc replicates per time budget, measured end to end; the "
                       "200-replicate time is an extrapolation (200 x measured s/replicate "
                       "/ 2) only where fewer than 200 replicates finished",
               "target": {"replicates": TARGET_REPLICATES, "seconds": TARGET_S,
                          "cores": CORES},
               "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform(),
                           "python": platform.python_version()},
               "runs": list(runs.values())}
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

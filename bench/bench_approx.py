"""The PPLs' own approximations against the NUTS reference: ``crowdrank audit --approx
advi,fullrank-advi,pathfinder,laplace-ppl`` on the embedded default (goal: 3 min on 2
cores), run as a user runs it (a fresh process, imports and JIT compilation included).

Per model and method: the centred-score median ``|z|`` and sd ratio (what the data
identify), the raw ``λ`` and ``η`` figures, PSIS k̂ with its verdict, the optimiser's
convergence; the online update (the audit's default variant) beside them. The date, the
commit, the command and the load average before and after are recorded because the
machine may be shared. Writes ``bench/results/approx.json``.

    python bench/bench_approx.py [--methods advi,fullrank-advi,pathfinder,laplace-ppl]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUDGET_S = 180.0
METHODS = "advi,fullrank-advi,pathfinder,laplace-ppl"


def _pick(agg: dict | None, *keys) -> dict:
    agg = agg or {}
    return {k: (round(agg[k], 3) if isinstance(agg.get(k), float) else agg.get(k))
            for k in keys}


def summarise(metrics: dict) -> dict:
    """Per model, per variant: the figures of the module docstring."""
    out = {}
    for model, mm in metrics["models"].items():
        rows = {}
        for v in mm["variants"]:
            ident = v.get("identified") or {}
            rows[v["variant"]] = {
                "centred": _pick(ident.get("centred"), "median_abs_z", "p90_abs_z",
                                 "median_sd_ratio"),
                "lambda": _pick(v["aggregates"].get("lambda"), "median_abs_z",
                                "median_sd_ratio", "mean_coverage_90"),
                "eta": _pick(v["aggregates"].get("eta"), "median_abs_z", "median_sd_ratio",
                             "mean_coverage_90"),
                "psis_khat": v.get("psis_khat"), "psis_label": v.get("psis_label"),
                "converged": v.get("converged"), "steps": v.get("steps"),
                "seconds": round(mm["timings"]["online"].get(v["variant"], {}).get("wall",
                                                                                 float("nan")), 2),
            }
        out[model] = {"reference_trusted": mm["reference_trusted"], "variants": rows}
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--methods", default=METHODS)
    p.add_argument("--out", default=str(ROOT / "bench" / "results" / "approx.json"))
    args = p.parse_args(argv)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True, check=False).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "crowdrank.reports.cli", "audit", "--approx",
               args.methods, "--out", tmp]
        load0 = os.getloadavg()
        t0, c0 = time.perf_counter(), os.times()
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - t0
        c1 = os.times()
        rec = {"date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
               "commit": commit,
               "command": f"crowdrank audit --approx {args.methods} --out DIR",
               "rc": proc.returncode, "wall_s": round(wall, 1), "budget_s": BUDGET_S,
               "cpu_s_children": round((c1.children_user + c1.children_system)
                                       - (c0.children_user + c0.children_system), 1),
               "cpus": os.cpu_count(),
               "loadavg_before": [round(x, 2) for x in load0],
               "loadavg_after": [round(x, 2) for x in os.getloadavg()]}
        if proc.returncode != 0:
            rec["stderr_tail"] = proc.stderr[-3000:]
        else:
            m = json.loads((Path(tmp) / "metrics.json").read_text())
            rec["data"] = {k: m["data"][k] for k in ("items", "workers", "rankings", "K")}
            rec["config"] = {k: m["config"][k] for k in ("chains", "tune", "draws", "backend")}
            rec["models"] = summarise(m)
    Path(args.out).write_text(json.dumps(rec, indent=1) + "\n")
    print(json.dumps(rec, indent=1))
    return 0 if rec["rc"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""Wall time of the main job, ``crowdrank audit`` on its embedded default (budget: 3 min on
2 cores), and optionally on the shared real data sets.

Each audit runs as a user runs it — a fresh ``python -m crowdrank.reports.cli audit`` process, imports
and JIT compilation included — and its ``metrics.json`` is read back for the per-stage
timings, the NUTS gate and the headline comparison figures. The load average is recorded
beside the times because the machine may be shared.

Prints one JSON object per audit and writes ``bench/results/audit.json``.

    python bench/bench_audit.py                       # the default audit
    python bench/bench_audit.py --real                # + babyface and readlevel (--quick)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench" / "tools"))
BUDGET_S = 180.0

from stamp import stamp


def run_one(args: list[str], out: Path, xla_cache: str | None = None) -> dict:
    """Run one audit in a fresh process; return its timings and headline figures.
    ``xla_cache``: a folder for its compiled programs (an empty one is a user's first run),
    else the user's own cache, as it is."""
    load0 = os.getloadavg()
    env = dict(os.environ)
    if xla_cache is not None:
        env["CROWDRANK_XLA_CACHE"] = xla_cache
    t0, c0 = time.perf_counter(), os.times()
    proc = subprocess.run([sys.executable, "-m", "crowdrank.reports.cli", "audit", *args, "--out",
                           str(out)], cwd=ROOT, capture_output=True, text=True, check=False,
                          env=env)
    wall = time.perf_counter() - t0
    c1 = os.times()
    rec = {"args": args, "rc": proc.returncode, "wall_s": round(wall, 2),
           "cpu_s_children": round((c1.children_user + c1.children_system)
                                   - (c0.children_user + c0.children_system), 2),
           "loadavg_before": [round(x, 2) for x in load0],
           "loadavg_after": [round(x, 2) for x in os.getloadavg()]}
    if proc.returncode != 0:
        rec["stderr_tail"] = proc.stderr[-2000:]
        return rec
    m = json.loads((out / "metrics.json").read_text())
    rec["data"] = {k: m["data"][k] for k in ("items", "workers", "rankings", "K")}
    rec["config"] = {k: m["config"][k] for k in ("chains", "tune", "draws", "backend")}
    for model, mm in m["models"].items():
        lam = mm["aggregates"].get("lambda", {})
        eta = mm["aggregates"].get("eta", {})
        rec[model] = {
            "trusted": mm["reference_trusted"],
            "gate": {k: mm["gate"].get(k) for k in ("rhat_max", "ess_bulk_min",
                                                    "ess_tail_min", "divergences",
                                                    "ebfmi_min")},
            "nuts_s": {k: round(v, 2) for k, v in mm["timings"]["nuts"].items()
                       if isinstance(v, (int, float))},
            "online_s": round(mm["timings"]["online"]["default"]["wall"], 4),
            "lambda_median_abs_z": lam.get("median_abs_z"),
            "lambda_p90_abs_z": lam.get("p90_abs_z"),
            "lambda_median_sd_ratio": lam.get("median_sd_ratio"),
            "eta_median_abs_z": eta.get("median_abs_z"),
            "eta_median_sd_ratio": eta.get("median_sd_ratio"),
            "share_close": mm["aggregates"]["all"]["share_close"],
            "coverage_50": mm["aggregates"]["all"]["mean_coverage_50"],
            "coverage_90": mm["aggregates"]["all"]["mean_coverage_90"],
            "kendall_tau": mm["ranking"].get("kendall_tau"),
            "accuracy_online": mm["ranking"].get("accuracy_online"),
            "accuracy_nuts": mm["ranking"].get("accuracy_nuts"),
            "lowest6_shared": (mm["workers"] or {}).get("lowest_overlap"),
            "order_median_spread": (mm["order_sensitivity"] or {}).get("median_spread"),
            "order_median_gap": (mm["order_sensitivity"] or {}).get("median_gap"),
        }
    rec["seconds_total_inside"] = round(m.get("seconds_total", float("nan")), 2)
    return rec


def save_figures(audit_dir: Path, fig_dir: Path, prefix: str, dpi: int = 70) -> list[str]:
    """Small PNGs of the headline comparison figures (for the README), from the files an
    audit wrote: ``parameters.csv`` and the NUTS ``posterior.nc`` of each model."""
    import pandas as pd

    sys.path.insert(0, str(ROOT))
    from crowdrank.inference.nuts import read_nuts
    from crowdrank.reports import figures as F

    fig_dir.mkdir(parents=True, exist_ok=True)
    t = pd.read_csv(audit_dir / "parameters.csv", dtype={"id": str})
    written = []
    for model in t.model.unique():
        tm = t[(t.model == model) & (t.variant == "default")]
        dt = read_nuts(audit_dir / model / "nuts")
        for name, fig in (("means", F.means_scatter(tm)), ("z_sd", F.z_and_sd_ratio(tm)),
                          ("forest", F.forest_items(tm, dt, n_each=4))):
            path = fig_dir / f"{prefix}_{model}_{name}.png"
            fig.savefig(path, dpi=dpi)
            written.append(str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path))
    return written


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--real", action="store_true", help="also babyface and readlevel (--quick)")
    p.add_argument("--keep", default=None, help="keep the audit folders under this folder")
    p.add_argument("--only", default=None,
                   help="comma-separated subset of the runs (default, geometric, babyface, "
                        "readlevel)")
    p.add_argument("--figures", default=None,
                   help="write small PNGs of the headline figures to this folder")
    p.add_argument("--xla-cache", choices=("cold", "user"), default="cold",
                   help="cold: each audit compiles every program, as a user's first run "
                        "(default); user: the user's compilation cache as it is")
    args, _ = p.parse_known_args(argv)       # bench/run_all.py passes its own flags along
    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench_audit_"))
    # the embedded default (gold-task priors, the paper's Sect. 5.1 protocol) and the same
    # data under the paper's geometric prior; real data use the geometric prior by default
    runs = [("default", []), ("geometric", ["--worker-prior", "geometric:a0=10,a=6"])]
    if args.real:
        runs += [("babyface", ["babyface", "--quick"]), ("readlevel", ["readlevel", "--quick"])]
    if args.only:
        keep = set(args.only.split(","))
        runs = [r for r in runs if r[0] in keep]
    results = []
    for name, a in runs:
        if args.xla_cache == "cold":
            cache, state = str(base / name / "xla-cache"), "cold (an empty cache)"
        else:
            from crowdrank.inference.nuts.fit import default_cache_dir

            cache = None
            folder = os.environ.get("CROWDRANK_XLA_CACHE") or default_cache_dir()
            n = len(os.listdir(folder)) if os.path.isdir(folder) else 0
            state = f"the user's ({n} files at the start)"
        rec = {"bench": "audit", "name": name, "machine": platform.machine(),
               **stamp(), "xla_cache": state, **run_one(a, base / name, cache)}
        budget = {"default": BUDGET_S, "geometric": 120.0, "babyface": 300.0,
                  "readlevel": 480.0}.get(name)
        if budget is not None:
            rec["budget_s"] = budget
            rec["within_budget"] = rec["wall_s"] <= budget
        if args.figures and rec["rc"] == 0:
            rec["figures"] = save_figures(base / name, Path(args.figures).resolve(),
                                          f"audit_{name}")
        print(json.dumps(rec), flush=True)
        results.append(rec)
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    path = out / "audit.json"
    if args.only and path.exists():      # update the runs measured now, keep the others
        old = [r for r in json.loads(path.read_text()) if r.get("name") not in
               {r["name"] for r in results}]
        results = old + results
    path.write_text(json.dumps(results, indent=1))
    return 0 if all(r["rc"] == 0 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())

"""SBC benchmark: how many replicates of ``crowdrank sbc`` fit in a time budget, and what
200 replicates would cost (the target: >= 200 replicates each for PL, CrowdBT and
normalised COUPLE at 10 items, 4 workers, 100 rankings, geometric prior, each <= 30 min on
2 cores).

The replicates run in this process, one after another (``processes=1``), in batches, until
the budget is spent; the SBC cache makes every batch add to the last. What is *measured* is
the number of replicates done and the wall time per replicate on one process; the time for
200 replicates on 2 processes is an *extrapolation* (``200 × s_per_replicate / 2``, which
assumes perfect scaling over two idle cores) and is marked as such. The load average is
recorded beside the times because the machine may be shared.

    nice -n 10 python bench/bench_sbc.py --models pl crowdbt couple-normalized --budget-s 900
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

TARGET_REPLICATES = 200
TARGET_S = 30 * 60
CORES = 2


def bench_one(model: str, backend: str, budget_s: float, batch: int, out: Path,
              max_sims: int, seed: int, nuts: dict | None = None) -> dict:
    from validation.sbc import SbcConfig, run_sbc

    load0 = os.getloadavg()
    t0 = time.perf_counter()
    sims, summary = 0, None
    while sims < max_sims and time.perf_counter() - t0 < budget_s:
        sims = min(max_sims, sims + batch)
        cfg = SbcConfig(model=model, backend=backend, sims=sims, n_items=10, n_workers=4,
                        tasks_per_worker=25, seed=seed, **(nuts or {}))
        summary = run_sbc(cfg, out, processes=1, progress=False)
        print(f"[bench_sbc] {model}/{backend}: {summary['replicates']} replicates, "
              f"{time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    wall = time.perf_counter() - t0
    n = summary["replicates"]
    # replicate time from the replicates themselves (cache hits from an earlier run would
    # otherwise make the wall time per replicate look smaller)
    per = summary["timing"]["replicate_s_mean"]
    rec = {
        "model": model, "backend": backend, "replicates": n,
        "failed_replicates": len(summary["failed_replicates"]),
        "budget_s": budget_s, "wall_s": round(wall, 1), "processes": 1, "nice": os.nice(0),
        "s_per_replicate_measured": round(per, 2),
        "cpu_s_per_replicate_measured": _round(summary["timing"].get("replicate_cpu_s_mean")),
        "extrapolated_200_replicates_s_on_2_idle_cores_from_cpu": _round(
            None if summary["timing"].get("replicate_cpu_s_mean") is None
            else TARGET_REPLICATES * summary["timing"]["replicate_cpu_s_mean"] / CORES, 0),
        "nuts_s_per_replicate": round(summary["timing"]["nuts_s_mean"] or float("nan"), 2),
        "nuts_breakdown_s_mean": _breakdown(out),
        "extrapolated_200_replicates_s_on_2_cores": round(TARGET_REPLICATES * per / CORES),
        "extrapolated": True,
        "meets_30_min_target_extrapolated": bool(TARGET_REPLICATES * per / CORES <= TARGET_S),
        "reached_200_replicates": n >= TARGET_REPLICATES,
        "loadavg_before": [round(x, 2) for x in load0],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "settings": {k: summary["config"][k] for k in (
            "n_items", "n_workers", "tasks_per_worker", "kmax", "worker_prior", "chains",
            "tune", "draws", "n_ranks", "seed")},
    }
    for key in ("nuts", "online"):
        if key in summary:
            s = summary[key]
            rec[key] = {"calibrated": s["calibrated"], "verdict": s["verdict"],
                        "families": {f: {"ecdf_p_combined": round(v["ecdf_p_combined"], 4),
                                         "chi2_p_combined": round(v["chi2_p_combined"], 4),
                                         "outside_band": v["outside_band"],
                                         "n_params": v["n_params"]}
                                     for f, v in s["families"].items()}}
            if key == "online":
                rec[key]["method"] = s["method"]
    g = summary["gate"]
    rec["gate"] = {k: g[k] for k in ("passed", "failed", "divergences_total",
                                     "replicates_with_divergences", "ess_bulk_min_median",
                                     "replicates_with_ess_below_n_draws", "reasons")}
    return rec


def _round(x, nd: int = 2):
    return None if x is None else round(float(x), nd)


def _breakdown(out: Path) -> dict:
    """Mean compile / warm-up / sampling seconds of the cached replicates."""
    import numpy as np

    acc: dict[str, list] = {}
    for p in (out / "cache").glob("*.json"):
        det = json.loads(p.read_text())["result"]["timings"].get("nuts_detail", {})
        for k in ("compile", "warmup", "sampling", "total"):
            if k in det:
                acc.setdefault(k, []).append(det[k])
    return {k: round(float(np.mean(v)), 2) for k, v in acc.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=["pl", "crowdbt", "couple-normalized"])
    ap.add_argument("--backend", default="numpyro", choices=("numpyro", "pymc"))
    ap.add_argument("--budget-s", type=float, default=900.0, help="per model")
    ap.add_argument("--batch", type=int, default=5, help="replicates between checks")
    ap.add_argument("--max-sims", type=int, default=TARGET_REPLICATES)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--chains", type=int, default=None, help="default: crowdrank sbc's")
    ap.add_argument("--tune", type=int, default=None)
    ap.add_argument("--draws", type=int, default=None)
    ap.add_argument("--label", default="default",
                    help="name of the NUTS setting (runs are keyed model/backend/label)")
    ap.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "crowdrank-sbc-bench"),
                    help="SBC output folders (caches), one per model/backend")
    ap.add_argument("--out", default="bench/results/sbc.json")
    a = ap.parse_args()
    path = ROOT / a.out
    old = json.loads(path.read_text()) if path.exists() else {}
    runs = {f"{r['model']}/{r['backend']}/{r.get('label', 'default')}": r
            for r in old.get("runs", [])}
    nuts = {k: getattr(a, k) for k in ("chains", "tune", "draws") if getattr(a, k) is not None}
    for model in a.models:
        sub = f"{model}-{a.backend}" + ("" if a.label == "default" else f"-{a.label}")
        rec = bench_one(model, a.backend, a.budget_s, a.batch, ROOT / a.work / sub,
                        a.max_sims, a.seed, nuts)
        rec["label"] = a.label
        runs[f"{model}/{a.backend}/{a.label}"] = rec
        print(json.dumps(rec), flush=True)
        doc = {"what": "crowdrank sbc replicates per time budget; the 200-replicate time on "
                       "2 cores is an extrapolation (200 x measured s/replicate / 2)",
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

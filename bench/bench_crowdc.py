"""CrowDC's simulation study ([Wang23]) timed end to end: ``crowdrank replicate crowdc``'s
grid in a fresh cache, its claim and readings, wall and CPU seconds and the load.

Goal: the paper's grid (our reading, 68 settings × 20 data sets × 20 divisions) in
≤ 10 min on 2 cores. Results in ``bench/results/crowdc.json`` (every row of the grid,
the claim's verdict under each reading of the paper's accuracy ratio).

Run: ``nice .venv/bin/python bench/bench_crowdc.py [--settings paper|claim]
[--processes 2]`` (the same as ``crowdrank replicate crowdc --processes 2`` into a
temporary folder, timed).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench" / "tools"))
from stamp import stamp


def _cpu() -> float:
    """CPU seconds of this process and its (finished) children."""
    return sum(getattr(resource.getrusage(who), f)
               for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
               for f in ("ru_utime", "ru_stime"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--settings", default="paper", help="paper, claim or n,t,r,g,p[;...]")
    ap.add_argument("--datasets", type=int, default=20)
    ap.add_argument("--divisions", type=int, default=20)
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "crowdc.json"))
    args = ap.parse_args(argv)
    when = stamp(argv, script=__file__)

    from crowdrank.validation.studies.replicate_crowdc import parse_settings, run_experiment

    load0, c0, t0 = os.getloadavg(), _cpu(), time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        s = run_experiment(tmp, repeats=args.datasets, seed=args.seed,
                           processes=args.processes, progress=True,
                           settings=parse_settings(args.settings), divisions=args.divisions)
    wall = time.perf_counter() - t0
    rec = {"bench": "crowdc", "grid": args.settings, "rows": s["rows"], "claim": s["claim"],
           "claim_settings": s["claim_settings"], "datasets": args.datasets,
           "divisions": args.divisions, "processes": args.processes,
           "seconds_total": wall, "cpu_seconds_total": _cpu() - c0,
           "cpu_seconds_tasks": s["cpu_seconds_tasks"], "goal_seconds": 600.0,
           "load_average_before": list(load0), "load_average_after": list(os.getloadavg()),
           "machine": platform.machine(), "load_average": load0[0],
           "python": platform.python_version(), "nice": os.nice(0), **when}
    Path(args.out).write_text(json.dumps(rec, indent=1) + "\n")
    cl = s["claim"]
    print(f"{len(s['rows'])} settings in {wall:.0f} s wall, {rec['cpu_seconds_total']:.0f} s "
          f"CPU (load {load0[0]:.1f}); claim: saving 45-50 % {cl['saving_45_50']}, "
          f"tau ratio >= 95 % {cl['tau_ratio_ge_95']} (lowest {cl['min_tau_ratio']}); "
          f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The peers' table: accuracy and Spearman's ρ of every crowdrank method beside crowd-kit's
BradleyTerry / NoisyBradleyTerry and choix, in one process on the same data
(:mod:`crowdrank.validation.studies.peers`), on BabyFace, read-level and the two PrefLib sets.

Results in ``bench/results/peers.json`` (one row per data set and method, with wall and
CPU seconds per fit; the load average beside them). Needs ``crowd-kit`` (a development
dependency: ``pip install --no-deps crowd-kit scikit-learn nltk`` avoids its optional
``transformers``); without it the crowd-kit rows are left out and the file says so.

Run: ``nice .venv/bin/python bench/bench_peers.py [--orders 5] [--datasets babyface,...]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench" / "tools"))
from stamp import stamp

DATASETS = ("babyface", "readlevel", "preflib-dots", "preflib-puzzle")


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--orders", type=int, default=5,
                    help="random orders of the order-dependent methods")
    ap.add_argument("--datasets", default=",".join(DATASETS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "peers.json"))
    args = ap.parse_args(argv)
    when = stamp(argv, script=__file__)

    from threadpoolctl import threadpool_limits

    from crowdrank.models.io import load_dataset
    from crowdrank.validation.studies import peers

    methods = [m for m in peers.LABELS
               if m not in peers.CROWDKIT or _version("crowd-kit") is not None]
    sets = []
    t_all = time.perf_counter()
    for name in args.datasets.split(","):
        data, truth = load_dataset(name)
        load0 = os.getloadavg()
        with threadpool_limits(1, user_api="blas"):      # the same BLAS for every method
            rows = peers.table(data, truth, methods, orders=args.orders, seed=args.seed,
                               progress=True)
        sets.append({"dataset": name, "items": data.n_items, "rankings": data.n_rankings,
                     "workers": len(data.workers), "kmax": int(data.K), "rows": rows,
                     "load_average_before": list(load0),
                     "load_average_after": list(os.getloadavg())})
        for r in rows:
            if r["accuracy"] is None:
                print(f"{name:15s} {r['label']:34s} {r['error']}", flush=True)
                continue
            print(f"{name:15s} {r['label']:34s} acc {r['accuracy']:.3f}  rho "
                  f"{r['spearman']:.3f}  {r['cpu_seconds']:.2f} s CPU", flush=True)
    rec = {"bench": "peers", "orders": args.orders, "seed": args.seed, "sets": sets,
           "versions": {d: _version(d) for d in ("crowd-kit", "choix", "trueskill",
                                                 "numpy", "scipy", "pandas")},
           "crowdkit_missing": _version("crowd-kit") is None,
           "seconds_total": time.perf_counter() - t_all,
           "machine": platform.machine(), "load_average": os.getloadavg()[0],
           "python": platform.python_version(), "nice": os.nice(0), **when}
    Path(args.out).write_text(json.dumps(rec, indent=1) + "\n")
    print(f"wrote {args.out} ({rec['seconds_total']:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

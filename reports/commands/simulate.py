"""``crowdrank simulate``: a seeded synthetic data set with its true parameters.

Writes ``rankings.csv`` (``worker,ranking,task``; with ``--format parquet``
``rankings.parquet``, the same columns with ``ranking`` a list of item ids), ``truth.csv`` (``item,score`` = the true
λ), ``workers.csv`` (``worker,setting,eta_1..eta_K``), with ``--gold G`` also ``gold.csv``
(``worker,ranking,true_order,task``: reported gold rankings and their true order, for
:meth:`models.priors.Priors.from_gold` via :func:`models.io.read_gold`), and
``simulation.json`` (the parameters, counts and timings).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from models.errors import UsageError
from models.registry import get
from models.simulate import PAPER_SCALE, SIM_MODELS, WORKER_TYPES


def register(sub) -> None:
    p = sub.add_parser(
        "simulate", help="simulate a crowdsourced ranking data set (the paper's protocol)",
        description="Simulate rankings by crowd workers of one type under one model (seed "
                    "000, Sect. 5.2): item scores λ ~ N(0, 1), worker η ~ Dir(α0[type]), T "
                    "tasks per worker of size k uniform on 2..kmax, true order from PL(λ), "
                    "the report from the model's worker story. Writes rankings.csv (or "
                    "rankings.parquet), truth.csv, workers.csv (and gold.csv with --gold) into "
                    "--out.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--model", choices=SIM_MODELS, default="couple")
    p.add_argument("--setting", choices=tuple(WORKER_TYPES), default="amateur",
                   help="worker type of every worker")
    p.add_argument("--items", type=int, default=None,
                   help=f"number of items L (default 50; paper {PAPER_SCALE['n_items']})")
    p.add_argument("--workers", type=int, default=None,
                   help=f"number of workers W (default 10; paper {PAPER_SCALE['n_workers']})")
    p.add_argument("--tasks", type=int, default=None,
                   help="tasks per worker T (default 20; paper "
                        f"{PAPER_SCALE['tasks_per_worker']})")
    p.add_argument("--kmax", type=int, default=None,
                   help="largest task size (default 4; 2 for bt/crowdbt)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--gold", type=int, default=0, metavar="G",
                   help="gold tasks per worker (written to gold.csv)")
    p.add_argument("--paper-scale", action="store_true",
                   help="the paper's scale: L=1000, W=500, T=900, kmax=4 (450,000 rankings); "
                        "explicit --items/--workers/--tasks/--kmax still override")
    p.add_argument("--format", dest="fmt", choices=("csv", "parquet"), default="csv",
                   help="rankings file format: rankings.csv or rankings.parquet (worker, "
                        "ranking as a list of item ids, task)")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--quiet", action="store_true", help="no progress messages on stderr")
    p.set_defaults(func=run)


def _positive(name: str, value: int | None) -> None:
    if value is not None and value < 1:
        raise UsageError(f"--{name} must be >= 1, got {value}")


def run(args) -> int:
    from models.io import (
        write_gold,
        write_parquet,
        write_rankings,
        write_truth,
        write_worker_truth,
    )
    from models.simulate import simulate

    for name in ("items", "workers", "tasks", "kmax"):
        _positive(name, getattr(args, name))
    if args.gold < 0:
        raise UsageError(f"--gold must be >= 0, got {args.gold}")
    pairwise = get(args.model).pairwise
    base = dict(PAPER_SCALE) if args.paper_scale else {
        "n_items": 50, "n_workers": 10, "tasks_per_worker": 20, "kmax": 4}
    if pairwise:
        base["kmax"] = 2
    for opt, key in (("items", "n_items"), ("workers", "n_workers"),
                     ("tasks", "tasks_per_worker"), ("kmax", "kmax")):
        if getattr(args, opt) is not None:
            base[key] = getattr(args, opt)
    if pairwise and base["kmax"] != 2:
        raise UsageError(f"{args.model} is a pairwise model: use --kmax 2 (k-ary data are "
                         "rank-broken at fit time, not simulated)")
    if not 2 <= base["kmax"] <= base["n_items"]:
        raise UsageError(f"need 2 <= --kmax <= --items, got kmax={base['kmax']}, "
                         f"items={base['n_items']}")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} exists and is not a folder")
    out.mkdir(parents=True, exist_ok=True)
    say = (lambda *a: None) if args.quiet else (lambda msg: print(msg, file=sys.stderr,
                                                                  flush=True))
    n = base["n_workers"] * base["tasks_per_worker"]
    say(f"simulate: {args.model}, {args.setting} workers, L={base['n_items']}, "
        f"W={base['n_workers']}, T={base['tasks_per_worker']}, k<={base['kmax']}: "
        f"{n:,} rankings (seed {args.seed}) ...")
    timings = {}
    t0 = time.perf_counter()
    sim = simulate(args.model, setting=args.setting, gold_per_worker=args.gold,
                   seed=args.seed, **base)
    timings["simulate"] = time.perf_counter() - t0
    say(f"simulate: drew {sim.rankings.n_rankings:,} rankings in {timings['simulate']:.1f} s; "
        "writing ...")
    t1 = time.perf_counter()
    data = sim.rankings
    fmt = getattr(args, "fmt", "csv")
    rankings_file = "rankings.parquet" if fmt == "parquet" else "rankings.csv"
    (write_parquet if fmt == "parquet" else write_rankings)(data, out / rankings_file)
    write_truth(data.items, sim.lam, out / "truth.csv")
    write_worker_truth(data.workers, sim.settings, sim.eta, out / "workers.csv")
    files = [rankings_file, "truth.csv", "workers.csv"]
    if sim.gold is not None:
        g = sim.gold
        from models.data import Rankings

        g = Rankings(items=g.items, workers=g.workers, order=g.order, lengths=g.lengths,
                     worker=g.worker,
                     task=np.array([f"g{j}" for j in range(g.n_rankings)], dtype=object),
                     source=g.source)
        write_gold(g, sim.gold_true_order, out / "gold.csv")
        files.append("gold.csv")
    timings["write"] = time.perf_counter() - t1
    timings["total"] = time.perf_counter() - t0
    meta = {
        "model": args.model, "setting": args.setting, "seed": args.seed,
        "paper_scale": bool(args.paper_scale), **{k: int(v) for k, v in base.items()},
        "gold_per_worker": args.gold, "alpha0": list(WORKER_TYPES[args.setting]),
        "n_rankings": data.n_rankings,
        "n_gold": 0 if sim.gold is None else sim.gold.n_rankings,
        "k_counts": {str(k): v for k, v in data.k_counts().items()},
        "files": files, "seconds": {k: round(v, 3) for k, v in timings.items()},
    }
    (out / "simulation.json").write_text(json.dumps(meta, indent=2) + "\n")
    say(f"simulate: wrote {', '.join(files)} to {out} in {timings['write']:.1f} s "
        f"(total {timings['total']:.1f} s)")
    print(f"{data.n_rankings} rankings by {data.n_workers} workers over {data.n_items} items "
          f"-> {out}")
    return 0

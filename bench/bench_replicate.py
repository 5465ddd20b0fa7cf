"""The COUPLE paper's experiments at their sizes ([Pan18], Sect. 5), once, and the Dask
executor's overhead: ``bench/results/replicate_<experiment>.json``.

For each experiment named on the command line this runs ``validation.studies.replicate.
run_experiment`` into ``--out/<experiment>`` (page, results.json, CSV and the grid cache
there) and writes the summary, its wall time, the machine (CPU count, load average) and the
date to ``bench/results/replicate_<experiment>.json``. The issue's goals: ``fig7`` at full
scale with R = 5 in <= 10 min on 2 cores; ``babyface`` with R = 1000 in <= 3 min; cleaned
BabyFace COUPLE within ±1 point of the paper's 92.30 %.

``dask`` times one grid of ``--dask-tasks`` synthetic tasks of ``--dask-work`` CPU seconds
each (``validation.runtime.grid.sleep_job``) on the local process pool and on a Dask
``LocalCluster`` with the same number of worker processes, fresh caches each, and reports
the overhead ``dask / pool - 1`` (goal <= 10 %).

``gap`` (Fig. 7's gap, ``bench/results/replicate_fig7_gap.json``): for each simulator of
``validation.studies.replicate.SIMULATORS``, ``replicate fig7 --nuts --simulator S`` with
``--repeats-gap`` orders at the paper's scale and NUTS at the reduced scale.

Each run records wall seconds, CPU seconds (this process and its reaped worker processes)
and the load average before and after. The goal runs, one command each:

    nice python bench/bench_replicate.py fig7          # R = 5, paper scale (<= 10 min)
    nice python bench/bench_replicate.py babyface      # R = 1000 (<= 3 min)

    nice python bench/bench_replicate.py fig7 babyface cost readlevel preflib dask gap \
        [--repeats-fig7 5] [--repeats-real 1000] [--processes 2] [--out /tmp/replicate]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench" / "tools"))
from stamp import stamp

sys.path.insert(0, str(ROOT))

from crowdrank.validation.studies.replicate import machine, run_experiment

RESULTS = ROOT / "bench" / "results"


def env() -> dict:
    m = machine()
    try:
        m["loadavg"] = list(os.getloadavg())
    except OSError:
        pass
    return m


def cpu_seconds() -> float:
    """CPU time of this process and of its reaped children (the grid's worker processes
    are reaped when their pool closes): on a shared machine whose load average is many
    times its core count, wall time measures the other jobs as much as this one."""
    import resource
    me = resource.getrusage(resource.RUSAGE_SELF)
    ch = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + ch.ru_utime + ch.ru_stime


def _provenance() -> dict:
    """The record's date, ``commit`` (``+dirty`` when the tree differs), ``command`` as
    typed, CPU and library versions (:func:`stamp.stamp`, without the speed probe)."""
    return stamp(speed=False)


def write(name: str, obj: dict) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"replicate_{name}.json"
    path.write_text(json.dumps(obj, indent=1, default=str) + "\n")
    return path


def _cached_results(cache: Path) -> set[str]:
    """The grid results already in ``cache`` (one file per finished task)."""
    return {p.name for p in cache.glob("*.json")} if cache.is_dir() else set()


def run_one(name: str, args) -> dict:
    from crowdrank.reports.replicate_html import _clean, write_all

    out = Path(args.out) / name
    repeats = {"fig7": args.repeats_fig7, "cost": args.repeats_cost}.get(name,
                                                                          args.repeats_real)
    if name == "readlevel" or name == "preflib":
        repeats = min(repeats, args.repeats_other)
    cache = out / "cache"
    if name == "cost" and cache.is_dir():
        # a timing measures this code on this machine: one read from the cache of an
        # earlier run (other code, perhaps another day) would be recorded as this commit's
        shutil.rmtree(cache)
    cached = _cached_results(cache)
    before = env()
    t0, c0 = time.perf_counter(), cpu_seconds()
    summary = run_experiment(name, out, repeats=repeats, seed=args.seed,
                             processes=args.processes, progress=True, nuts=args.nuts)
    wall = time.perf_counter() - t0
    cpu = cpu_seconds() - c0
    write_all(summary, out)
    tasks = {"from_cache": len(cached), "computed": len(_cached_results(cache) - cached)}
    obj = {"benchmark": "replicate", "experiment": name, "repeats": repeats,
           **_provenance(), "date": before["date"],
           "wall_seconds": wall, "cpu_seconds": cpu,
           "cpu_seconds_per_process": cpu / max(1, args.processes),
           "processes": args.processes, "nuts": args.nuts,
           "machine_before": before, "machine_after": env(), "grid_tasks": tasks,
           "note": "grid_tasks.from_cache counts the results read from the cache of an "
                   "earlier run into the same --out (never for cost); the wall time "
                   "includes numba compilation in each worker process",
           "summary": _clean(summary)}
    tag = f"{name}_{args.tag}" if args.tag else name
    print(f"{name}: {wall:.1f} s wall, {cpu:.1f} s CPU -> {write(tag, obj)}",
          file=sys.stderr)
    return obj


def run_gap(args) -> dict:
    """Fig. 7's gap under each simulator (``validation.studies.replicate.SIMULATORS``): the online
    methods at the paper's scale (``--repeats-gap`` orders) and COUPLE and CrowdBT by NUTS
    at the reduced scale (``--nuts-scale``; all four settings under 'story', those of
    ``--gap-nuts-settings`` under the others); one table of accuracies at 100 % of the
    samples per simulator."""
    from crowdrank.reports.replicate_html import _clean, nuts_verdict, write_all
    from crowdrank.validation.studies.replicate import NUTS_SCALE, SETTINGS

    nsc = dict(NUTS_SCALE)
    if args.nuts_scale:
        nsc = dict(zip(("n_items", "n_workers", "tasks_per_worker", "kmax"),
                       (int(x) for x in args.nuts_scale.split(","))))
    obj = {"benchmark": "replicate-fig7-gap", "repeats": args.repeats_gap, "nuts_scale": nsc,
           "processes": args.processes, "machine_before": env(), **_provenance(),
           "simulators": {}}
    tag = f"fig7_gap_{args.tag}" if args.tag else "fig7_gap"
    for sim in args.simulators:
        out = Path(args.out) / f"fig7-gap-{sim}"
        t0, c0 = time.perf_counter(), cpu_seconds()
        sel = args.gap_nuts_settings if sim != "story" else SETTINGS
        summary = run_experiment("fig7", out, repeats=args.repeats_gap, seed=args.seed,
                                 processes=args.processes, progress=True, nuts=True,
                                 simulator=sim, nuts_scale=nsc, nuts_settings=sel)
        write_all(summary, out)
        table = {}
        for s in summary["settings"]:
            table[s["setting"]] = {"paper_scale_online_at_100": {
                m: c["mean"][-1] for m, c in s["curves"].items()}}
        for st, r in summary["nuts"]["settings"].items():
            table.setdefault(st, {})["nuts_scale"] = {m: 100 * a for m, a in r["accuracy"].items()}
            table[st]["nuts_gate"] = r["gate"]
            table[st]["nuts_seconds"] = r["seconds"]
        obj["simulators"][sim] = {
            "description": summary["simulator"]["description"], "table": table,
            "nuts_verdict": nuts_verdict(summary["nuts"]),
            "claims": summary["claims"], "wall_seconds": time.perf_counter() - t0,
            "cpu_seconds": cpu_seconds() - c0, "machine_after": env(),
            "summary": _clean(summary)}
        print(f"gap {sim}: {obj['simulators'][sim]['wall_seconds']:.0f} s wall -> "
              f"{write(tag, obj)}", file=sys.stderr)
    return obj


def run_dask(args) -> dict:
    from distributed import Client, LocalCluster

    from crowdrank.validation.runtime.grid import run_grid, sleep_job

    specs = [{"seed": s, "work": args.dask_work} for s in range(args.dask_tasks)]
    base = Path(args.out) / "dask-bench"
    shutil.rmtree(base, ignore_errors=True)
    rows = []
    for rep in range(args.dask_repeats):
        t = time.perf_counter()
        pool = run_grid(specs, sleep_job, base / f"pool{rep}", processes=args.processes,
                        progress=False)
        t_pool = time.perf_counter() - t
        cluster = LocalCluster(n_workers=args.processes, threads_per_worker=1, processes=True,
                               dashboard_address=None)
        client = Client(cluster)
        client.wait_for_workers(args.processes)
        t = time.perf_counter()
        dask = run_grid(specs, sleep_job, base / f"dask{rep}", scheduler=client,
                        progress=False)
        t_dask = time.perf_counter() - t
        client.close()
        cluster.close()
        same = [r["draws"] for r in pool.results] == [r["draws"] for r in dask.results]
        rows.append({"pool_seconds": t_pool, "dask_seconds": t_dask,
                     "overhead": t_dask / t_pool - 1.0, "identical_results": same})
        print(f"dask bench rep {rep}: pool {t_pool:.2f} s, dask {t_dask:.2f} s", file=sys.stderr)
    best_pool = min(r["pool_seconds"] for r in rows)
    best_dask = min(r["dask_seconds"] for r in rows)
    obj = {"benchmark": "replicate-dask-overhead", "tasks": args.dask_tasks,
           "cpu_seconds_per_task": args.dask_work, "processes": args.processes,
           "runs": rows, "overhead_best": best_dask / best_pool - 1.0,
           "goal": "<= 0.10",
           "note": "pool: ProcessPoolExecutor (spawn) started inside run_grid (its start-up "
                   "is timed); dask: a LocalCluster started before timing (a cluster is "
                   "long-lived), so the time is scheduling, transfer and caching only",
           "machine": env(), **_provenance()}
    print(f"dask: {write('dask', obj)}", file=sys.stderr)
    return obj


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("experiments", nargs="+",
                   choices=("fig7", "babyface", "cost", "readlevel", "preflib", "dask",
                            "gap"))
    p.add_argument("--out", default="/tmp/crowdrank-replicate")
    p.add_argument("--repeats-fig7", type=int, default=5)
    p.add_argument("--repeats-real", type=int, default=1000)
    p.add_argument("--repeats-other", type=int, default=100,
                   help="orders for readlevel and preflib (bigger sets)")
    p.add_argument("--repeats-cost", type=int, default=10)
    p.add_argument("--processes", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--nuts", action="store_true")
    p.add_argument("--tag", default="",
                   help="written as replicate_<experiment>_<tag>.json (e.g. a --nuts run "
                        "beside the main one)")
    p.add_argument("--repeats-gap", type=int, default=1,
                   help="gap: orders of the paper-scale online runs per simulator")
    p.add_argument("--simulators", nargs="+", default=["story", "normalized", "fixed"],
                   help="gap: the simulators compared (validation.studies.replicate.SIMULATORS)")
    p.add_argument("--gap-nuts-settings", nargs="+", default=["amateur", "malicious"],
                   help="gap: settings NUTS runs on under the other simulators than 'story' "
                        "(all four under 'story')")
    p.add_argument("--nuts-scale", default=None, metavar="L,W,T,K",
                   help="gap: the NUTS reference's synthetic sizes (default NUTS_SCALE)")
    p.add_argument("--dask-tasks", type=int, default=40)
    p.add_argument("--dask-work", type=float, default=0.5)
    p.add_argument("--dask-repeats", type=int, default=2)
    args = p.parse_args(argv)
    from crowdrank.inference.nuts import configure_host_devices
    configure_host_devices()
    for name in args.experiments:
        if name == "dask":
            run_dask(args)
        elif name == "gap":
            run_gap(args)
        else:
            run_one(name, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())

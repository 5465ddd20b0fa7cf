"""The online fit at data scale: whole-command time and peak memory of
``crowdrank fit FILE --model couple --method online`` from CSV and from Parquet.

Sizes: 450,000 rankings (the paper's scale, ``simulate --paper-scale``), 4.5 M
(``--tasks 9000``) and 45 M (``--tasks 90000``) by default. Up to 4.5 M the files are made
by ``crowdrank simulate --paper-scale --tasks T --format parquet`` and the CSV is the same
rankings written by Arrow (``worker,a>b>c,task``, as ``write_rankings`` writes them); above,
the script simulates the same protocol in blocks of 4.5 M rankings (λ and η drawn once,
each block seeded from the run's seed) so that the generator fits in memory, and appends
every block to both files.

Each measurement is one fresh ``crowdrank`` process (imports, reading, updates, writing
``posterior.json`` and ``items.csv``): wall time, CPU time (user + system of the process)
and peak resident memory (``ru_maxrss`` from ``wait4``). The machine is shared, so the
load average is recorded before and after each run; CPU time is the fairer figure on a
loaded machine (the command uses one core for the updates and Arrow's threads for
parsing). The streaming default is compared with ``--in-memory`` (the path every fit took
before) up to ``--in-memory-max`` rankings, and at every such size the two posteriors are
compared bit for bit. ``--shuffle-seeds`` runs ``--order shuffle`` at the smallest size
(external shuffle on the stream, in-memory permutation with ``--in-memory``) and records
the Kendall τ of the posterior means with the true scores beside file order.

    nice python bench/bench_scale.py [--sizes 450000 4500000 45000000] [--work DIR]
                                     [--in-memory-max 4500000] [--shuffle-seeds 3] [--append]

At the smallest size it also measures what a fresh checkout pays once (``startup``): the
fit with an empty numba cache (``NUMBA_CACHE_DIR``: the kernels compiled and cached), the
same fit again from that cache, and ``crowdrank --help``. Every other timed run is of a warm
numba cache: one untimed fit at the smallest size fills it first.

Writes ``bench/results/scale.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench" / "tools"))
from stamp import stamp

WORKERS = 500
BLOCK = 4_500_000
GOALS = {"45M_parquet_s": 60, "45M_csv_s": 120, "45M_peak_mb": 1024, "450k_csv_s": 2}


def crowdrank() -> str:
    exe = Path(sys.executable).parent / "crowdrank"
    return str(exe) if exe.exists() else "crowdrank"


TIME = shutil.which("time", path="/usr/bin:/bin")


def run_measured(args: list[str], env: dict | None = None) -> dict:
    """One fresh process: wall s, CPU s and peak RSS MB of that process, the load averages
    around it, and its last output line.

    The peak memory comes from GNU ``time`` (``%M``), which forks from a small process:
    Linux keeps a process's peak resident set across ``exec``, so a command started
    directly from this (large, after simulating) Python process would report this
    process's peak instead of its own."""
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    wrapped = ([TIME, "-f", "CROWDRANK_BENCH %M %U %S"] if TIME else []) + args
    p = subprocess.Popen(wrapped, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=None if env is None else {**os.environ, **env})
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    out = p.stdout.read().decode()
    err = p.stderr.read().decode()
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(args)} failed:\n{out}\n{err}")
    peak, cpu = ru.ru_maxrss / 1024, ru.ru_utime + ru.ru_stime
    for line in err.splitlines():
        if line.startswith("CROWDRANK_BENCH "):
            kb, user, sys_s = line.split()[1:4]
            peak, cpu = int(kb) / 1024, float(user) + float(sys_s)
    return {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "peak_rss_mb": round(peak, 1),
            "peak_from": "GNU time %M" if TIME else "wait4 ru_maxrss",
            "load_before": round(load0, 2), "load_after": round(os.getloadavg()[0], 2),
            "output": out.strip().splitlines()[-1] if out.strip() else ""}


# ------------------------------------------------------------------ data
def make_small(n: int, folder: Path, seed: int) -> tuple[Path, Path]:
    """``simulate --paper-scale --tasks n/500 --format parquet``, and the same rankings as
    CSV written by Arrow."""
    pq_path = folder / "rankings.parquet"
    if not pq_path.exists():
        subprocess.run([crowdrank(), "simulate", "--paper-scale", "--tasks",
                        str(n // WORKERS), "--format", "parquet", "--seed", str(seed),
                        "--out", str(folder), "--quiet"], check=True)
    csv_path = folder / "rankings.csv"
    if not csv_path.exists():
        import pyarrow.parquet as pq
        with _CsvAppender(csv_path) as w:
            pf = pq.ParquetFile(pq_path)
            for g in range(pf.num_row_groups):
                w.write(pf.read_row_group(g))
    return csv_path, pq_path


class _CsvAppender:
    """``worker,ranking,task`` rows appended from Parquet-layout tables (``a>b>c``)."""

    def __init__(self, path: Path):
        self.path, self.tmp = path, path.with_suffix(".csv.part")
        self.fh = self.tmp.open("wb")
        self.fh.write(b"worker,ranking,task\n")

    def write(self, table) -> None:
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.csv as pcsv

        t = pa.table({"worker": table.column("worker"),
                      "ranking": pc.binary_join(table.column("ranking"), ">"),
                      "task": table.column("task")})
        pcsv.write_csv(t, self.fh, pcsv.WriteOptions(include_header=False,
                                                     quoting_style="none"))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.fh.close()
        if exc[0] is None:
            self.tmp.replace(self.path)


def make_large(n: int, folder: Path, seed: int) -> tuple[Path, Path]:
    """The paper's protocol at ``n`` rankings, simulated and written in blocks."""
    from crowdrank.models.data import Rankings
    from crowdrank.models.io.parquet import Writer
    from crowdrank.models.io.parquet import table as pq_table
    from crowdrank.models.simulate import PAPER_SCALE, simulate

    csv_path, pq_path = folder / "rankings.csv", folder / "rankings.parquet"
    if csv_path.exists() and pq_path.exists():
        return csv_path, pq_path
    folder.mkdir(parents=True, exist_ok=True)
    first = simulate("couple", seed=seed, n_items=PAPER_SCALE["n_items"],
                     n_workers=WORKERS, tasks_per_worker=1)
    lam, eta = first.lam, first.eta
    per_block = BLOCK // WORKERS
    tasks_total = n // WORKERS
    done, b = 0, 0
    tmp_pq = pq_path.with_suffix(".parquet.part")
    with Writer(tmp_pq, has_task=True) as pw, _CsvAppender(csv_path) as cw:
        while done < tasks_total:
            t = min(per_block, tasks_total - done)
            sim = simulate("couple", seed=[seed, b + 1], n_items=PAPER_SCALE["n_items"],
                           n_workers=WORKERS, tasks_per_worker=t, lam=lam, eta=eta)
            r = sim.rankings
            offset = done * WORKERS
            task = np.char.add("t", (np.arange(r.n_rankings) + offset).astype(str))
            r = Rankings(items=r.items, workers=r.workers, order=r.order, lengths=r.lengths,
                         worker=r.worker, task=task.astype(object), source=r.source)
            tab = pq_table(r)
            pw._w.write_table(tab, row_group_size=pw.row_group)
            cw.write(tab)
            done += t
            b += 1
            print(f"  simulated {done * WORKERS:,} of {n:,} rankings", file=sys.stderr,
                  flush=True)
    tmp_pq.replace(pq_path)
    from crowdrank.models.io import write_truth
    write_truth(first.rankings.items, lam, folder / "truth.csv")
    return csv_path, pq_path


# ------------------------------------------------------------------ runs
def fit(data: Path, out: Path, *extra: str, env: dict | None = None) -> dict:
    if out.exists():
        shutil.rmtree(out)
    return run_measured([crowdrank(), "fit", str(data), "--model", "couple", "--method",
                         "online", "--out", str(out), "--no-progress", *extra], env=env)


def startup(csv_path: Path, folder: Path) -> dict:
    """What a fresh checkout pays once: the fit with an empty numba cache (the kernels are
    compiled and written to it), then the same fit again reading that cache; and
    ``crowdrank --help`` (every command's parser)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="crowdrank-numba-") as cache:
        env = {"NUMBA_CACHE_DIR": cache}
        first = fit(csv_path, folder / "out_first", env=env)
        cached = fit(csv_path, folder / "out_first", env=env)
        files = sorted(p.name for p in Path(cache).rglob("*") if p.is_file())
    return {"first_run_empty_numba_cache": first, "second_run_same_cache": cached,
            "numba_cache_files": len(files),
            "help": run_measured([crowdrank(), "--help"])}


def same_posterior(a: Path, b: Path) -> bool:
    x, y = (json.loads((p / "posterior.json").read_text()) for p in (a, b))
    return x["items"] == y["items"] and x["workers"] == y["workers"] \
        and x["clamped"] == y["clamped"]


def kendall_to_truth(out: Path, truth: Path) -> float:
    import pandas as pd
    from scipy.stats import kendalltau

    items = pd.read_csv(out / "items.csv")
    t = pd.read_csv(truth).set_index("item")["score"]
    return float(kendalltau(items["mu"], t.loc[items["item"]].to_numpy()).statistic)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[450_000, 4_500_000, 45_000_000])
    ap.add_argument("--work", default="/tmp/crowdrank-bench-scale",
                    help="folder for the data files (kept between runs)")
    ap.add_argument("--in-memory-max", type=int, default=4_500_000)
    ap.add_argument("--shuffle-seeds", type=int, default=3)
    ap.add_argument("--shuffle-at", type=int, nargs="+", default=None,
                    help="sizes for the shuffle comparison (default: the smallest size); "
                         "above 2^20 rankings (CSV: 16 MiB) the stream's shuffle uses "
                         "several buckets")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "scale.json"))
    ap.add_argument("--append", action="store_true",
                    help="keep the runs of other sizes already in --out (each run has its "
                         "own date)")
    args = ap.parse_args()
    import pyarrow

    work = Path(args.work)
    # once, before this script rewrites its own (tracked) record and makes the tree dirty
    st = stamp()
    result = {
        "bench": "scale", "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "commit": st["commit"], "command": st["command"],
        "what": "crowdrank fit FILE --model couple --method online, whole command",
        "machine": {"cpus": os.cpu_count(), "cpu": st["cpu"],
                    "python": platform.python_version(), "pyarrow": pyarrow.__version__,
                    "niceness": os.nice(0),
                    "note": "shared machine: see each run's load averages"},
        "goals": GOALS, "runs": [],
    }
    if args.append and Path(args.out).exists():
        old = json.loads(Path(args.out).read_text())
        result["runs"] = [r for r in old.get("runs", []) if r["rankings"] not in args.sizes]
        shuffles = old.get("shuffle", [])
        shuffles = [shuffles] if isinstance(shuffles, dict) else shuffles
        redo = set(args.shuffle_at or [min(args.sizes)]) if args.shuffle_seeds else set()
        result["shuffle"] = [x for x in shuffles if x["rankings"] not in redo]
    for n in args.sizes:
        folder = work / f"n{n}"
        folder.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        csv_path, pq_path = (make_small if n <= BLOCK else make_large)(n, folder, args.seed)
        row = {"rankings": n, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
               "commit": st["commit"], "cpu": st["cpu"],
               "make_data_s": round(time.perf_counter() - t0, 1),
               "csv_mb": round(csv_path.stat().st_size / 2**20, 1),
               "parquet_mb": round(pq_path.stat().st_size / 2**20, 1)}
        if n == min(args.sizes):
            # untimed: fills the numba cache, which a code change invalidates, so the timed
            # runs are of a warm cache as a user's second fit is; startup times the cold one
            fit(csv_path, folder / "out_csv")
        row["csv"] = fit(csv_path, folder / "out_csv")
        if n == min(args.sizes):
            row["startup"] = startup(csv_path, folder)
        row["parquet"] = fit(pq_path, folder / "out_parquet")
        if n <= args.in_memory_max:
            row["csv_in_memory"] = fit(csv_path, folder / "out_mem", "--in-memory")
            row["identical_to_in_memory"] = (
                same_posterior(folder / "out_csv", folder / "out_mem")
                and same_posterior(folder / "out_parquet", folder / "out_mem"))
        for key in ("csv", "parquet", "csv_in_memory"):
            if key in row:
                row[key]["rankings_per_s_wall"] = round(n / row[key]["wall_s"])
                row[key]["rankings_per_s_cpu"] = round(n / row[key]["cpu_s"])
        result["runs"].append(row)
        result["runs"].sort(key=lambda r: r["rankings"])
        print(json.dumps(row), flush=True)
        _save(result, args.out)
    for n in (args.shuffle_at or [min(args.sizes)]) if args.shuffle_seeds else []:
        folder = work / f"n{n}"
        truth = folder / "truth.csv"
        shuf = {"rankings": n, "file_order": kendall_to_truth(folder / "out_csv", truth),
                "stream_external": [], "in_memory": []}
        for s in range(args.shuffle_seeds):
            r = fit(folder / "rankings.csv", folder / "out_shuf", "--order", "shuffle",
                    "--seed", str(s))
            runs = json.loads((folder / "out_shuf" / "posterior.json").read_text())
            shuf["stream_external"].append({
                "seed": s, "tau": kendall_to_truth(folder / "out_shuf", truth),
                "buckets": runs["options"]["runs"][-1].get("buckets"), "wall_s": r["wall_s"],
                "cpu_s": r["cpu_s"], "peak_rss_mb": r["peak_rss_mb"]})
            if n <= args.in_memory_max:
                r = fit(folder / "rankings.csv", folder / "out_shuf_mem", "--order", "shuffle",
                        "--seed", str(s), "--in-memory")
                shuf["in_memory"].append({
                    "seed": s, "tau": kendall_to_truth(folder / "out_shuf_mem", truth),
                    "wall_s": r["wall_s"], "cpu_s": r["cpu_s"],
                    "peak_rss_mb": r["peak_rss_mb"]})
        result.setdefault("shuffle", []).append(shuf)
        result["shuffle"].sort(key=lambda x: x["rankings"])
        print(json.dumps(shuf), flush=True)
        _save(result, args.out)


def _save(result: dict, path: str) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()

"""Time to run each tutorial notebook (goal: well under a minute each on an idle laptop).

Each notebook of ``docs/tutorials/`` is executed as the test suite executes it — a fresh
kernel started by ``nbclient``, in a temporary folder — and its wall time, the CPU time
of the kernel and everything it started (PyMC's chain processes included, read from
``os.times()``'s children counters once the kernel has exited) and the load average are
recorded. On a shared machine the wall time depends on the load; the CPU time does not
(much), so both are kept.

Writes ``bench/results/tutorials.json``.

    python bench/bench_tutorials.py                          # all four
    python bench/bench_tutorials.py 01-generative-story.ipynb
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TUTORIALS = ROOT / "docs" / "tutorials"
OUT = ROOT / "bench" / "results" / "tutorials.json"
GOAL_S = 60.0


def run_one(name: str) -> dict:
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError

    nb = nbformat.read(TUTORIALS / name, as_version=4)
    os.environ["MPLBACKEND"] = "Agg"
    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        t0, c0 = time.perf_counter(), os.times()
        error = None
        try:
            NotebookClient(nb, timeout=1200, kernel_name="python3",
                           resources={"metadata": {"path": tmp}}).execute()
        except (CellExecutionError, CellTimeoutError) as e:   # recorded: the notebook failed
            error = f"{type(e).__name__}: {str(e)[-500:]}"
        wall = time.perf_counter() - t0
        c1 = os.times()
    cpu = (c1.children_user + c1.children_system) - (c0.children_user + c0.children_system)
    return {"notebook": name, "ok": error is None, "error": error,
            "wall_s": round(wall, 1), "cpu_s_kernel": round(cpu, 1),
            "code_cells": sum(c.cell_type == "code" for c in nb.cells),
            "loadavg_before": [round(x, 2) for x in load0],
            "loadavg_after": [round(x, 2) for x in os.getloadavg()]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("notebooks", nargs="*", help="notebook file names (default: all)")
    args = ap.parse_args(argv)
    names = args.notebooks or sorted(p.name for p in TUTORIALS.glob("*.ipynb"))
    rows = []
    for name in names:
        rec = run_one(name)
        print(json.dumps(rec), flush=True)
        rows.append(rec)
    old = json.loads(OUT.read_text()) if OUT.is_file() else {}
    by_name = {r["notebook"]: r for r in old.get("notebooks", [])}
    by_name.update({r["notebook"]: r for r in rows})
    result = {"bench": "tutorials", "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
              "machine": platform.machine(), "cpus": os.cpu_count(),
              "python": platform.python_version(), "goal_s": GOAL_S,
              "note": ("wall time on a shared machine depends on its load (loadavg); "
                       "cpu_s_kernel is the kernel's and its children's CPU time"),
              "notebooks": [by_name[k] for k in sorted(by_name)]}
    OUT.write_text(json.dumps(result, indent=1) + "\n")
    print(OUT)
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

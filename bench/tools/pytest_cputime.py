"""A pytest plugin: wall and CPU seconds of every test, with the load average at its start.

On the shared machine wall times grow with the load (5x at load 15 on 2 cores), so the
suite's cost is compared in CPU seconds: this process (every thread: JAX, Arrow) plus the
children it waited for (the README commands, notebook kernels, process pools). A
module-scoped fixture is charged to the first test that uses it.

    PYTHONPATH=bench .venv/bin/python -m pytest -q -p pytest_cputime [-m slow] [FILES]

appends one JSON line per test to ``$CROWDRANK_TEST_TIMES`` (default
``bench/results/test_times.jsonl``) and prints the 25 largest CPU costs at the end. Under
pytest-xdist (``-n 2``) each worker measures its own tests (``worker`` in the row; the
lines are appended whole) and the controller prints the table from the lines the run
appended.
"""

from __future__ import annotations

import json
import os
import resource
import time
from pathlib import Path

import pytest

OUT = Path(os.environ.get("CROWDRANK_TEST_TIMES",
                          Path(__file__).resolve().parents[1] / "results" / "test_times.jsonl"))
_ROWS: list[dict] = []
_START = {"offset": 0}


def pytest_sessionstart(session):
    _START["offset"] = OUT.stat().st_size if OUT.exists() else 0


def _cpu() -> float:
    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    t0, c0, load = time.perf_counter(), _cpu(), os.getloadavg()[0]
    yield
    row = {"test": item.nodeid, "wall_s": round(time.perf_counter() - t0, 2),
           "cpu_s": round(_cpu() - c0, 2), "load": round(load, 1),
           "slow": item.get_closest_marker("slow") is not None,
           "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    _ROWS.append(row)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with OUT.open("a") as fh:
        fh.write(json.dumps(row) + "\n")


def pytest_terminal_summary(terminalreporter):
    if not _ROWS and OUT.exists():          # the xdist controller: the workers' lines
        with OUT.open() as fh:
            fh.seek(_START["offset"])
            _ROWS.extend(json.loads(ln) for ln in fh if ln.strip())
    if not _ROWS:
        return
    tr = terminalreporter
    tr.section("CPU seconds per test (largest 25)")
    for r in sorted(_ROWS, key=lambda r: -r["cpu_s"])[:25]:
        tr.write_line(f"{r['cpu_s']:8.1f} CPU-s {r['wall_s']:8.1f} s  load {r['load']:5.1f}  "
                      f"{r['test']}")
    tr.write_line(f"total: {sum(r['cpu_s'] for r in _ROWS):.0f} CPU-s, "
                  f"{sum(r['wall_s'] for r in _ROWS):.0f} s in tests; written to {OUT}")

"""The test suite's time as CI runs it: a fresh clone, cold caches, ``.ci/run``.

    nice python bench/bench_suite.py [--work DIR]
    python bench/bench_suite.py --from DIR [--note TEXT]

Clones this checkout's HEAD into ``DIR/main`` (a temporary folder by default), links the
data sets' ``shared/`` folder beside it as CI has it, and runs ``CI=true bash .ci/run``
there with an empty PyTensor compiledir (``DIR/ptc``); the clone's numba caches are empty
because its files are new, and the suite's XLA cache is a folder of the run
(``tests/conftest.py``), so every cache starts cold. ``.ci/run`` builds the venv from
pip's cache and runs ``make test`` (pytest on both cores). The log goes to ``DIR/log``,
the start and end times (epoch s) to ``DIR/start`` and ``DIR/end``, the exit status to
``DIR/rc``.

``--from DIR`` records a run already made that way (the same files, e.g. a run started by
hand as ``CI=true PYTENSOR_FLAGS=compiledir=DIR/ptc /usr/bin/time -v bash .ci/run >
DIR/log 2>&1`` in ``DIR/main``): nothing is run, the figures are read from its files;
``--note`` says what else that run had (the per-test CPU plugin, say), kept in the record.

Writes ``bench/results/suite.json``: pytest's counts and seconds (its last line), the whole
command's wall time, the CPU seconds of the run where known (``/usr/bin/time -v`` in the
log, else the children's ``rusage`` when this script ran it), the commit the clone tested,
the date, the CPU model and the load average, and the machine's speed on the suite's kind
of work (``bench/tools/speed.py``, measured when the record is written: with ``--from``,
after the run on the same machine). Machines of the same name ran the same suite at
speeds 2x apart on different days, so a time without the probe says little about the code.
The record written before is kept in ``history`` (newest first, without its own history).
The goal: ``make test`` in <= 15 min.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench" / "tools"))
from speed import speed_probe
from stamp import cpu_model

OUT = ROOT / "bench" / "results" / "suite.json"
GOAL_MIN = 15.0
#: pytest's summary line, e.g. "1532 passed, 1 skipped, 59 warnings in 1932.10s (0:32:12)"
SUMMARY = re.compile(r"^=*\s*((?:\d+ \w+(?:, )?)+) in ([\d.]+)s\b", re.MULTILINE)


def pytest_summary(log: str) -> dict:
    """Counts (``passed``, ``failed``, ``skipped``, ``errors``, …) and ``pytest_seconds``
    from the last pytest summary line of ``log``; ``ValueError`` when there is none (a run
    that stopped before pytest finished)."""
    found = SUMMARY.findall(log)
    if not found:
        raise ValueError("no pytest summary line in the log: the run did not finish pytest")
    counts, seconds = found[-1]
    out = {"pytest_seconds": float(seconds)}
    for n, what in re.findall(r"(\d+) (\w+)", counts):
        out[{"error": "errors", "warning": "warnings"}.get(what, what)] = int(n)
    for k in ("passed", "failed", "skipped", "errors"):
        out.setdefault(k, 0)
    return out


def time_v(log: str) -> dict:
    """User and system CPU seconds from ``/usr/bin/time -v`` lines in ``log``, if any."""
    out = {}
    for key, name in (("user_cpu_seconds", "User time"), ("system_cpu_seconds", "System time")):
        m = re.search(rf"{name} \(seconds\): ([\d.]+)", log)
        if m:
            out[key] = float(m.group(1))
    return out


def run(work: Path) -> str:
    """Clone HEAD into ``work/main`` and run ``.ci/run`` there; returns the command."""
    work.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "clone", "-q", str(ROOT), str(work / "main")], check=True)
    shared = ROOT.parent / "shared"
    if shared.is_dir() and not (work / "shared").exists():
        (work / "shared").symlink_to(shared)
    env = dict(os.environ, CI="true", PYTENSOR_FLAGS=f"compiledir={work / 'ptc'}")
    cmd = f"CI=true PYTENSOR_FLAGS=compiledir={work / 'ptc'} bash .ci/run"
    (work / "start").write_text(f"{int(time.time())}\n")
    with open(work / "log", "w") as log:
        rc = subprocess.run(["bash", ".ci/run"], cwd=work / "main", env=env, stdout=log,
                            stderr=subprocess.STDOUT, check=False).returncode
    (work / "end").write_text(f"{int(time.time())}\n")
    (work / "rc").write_text(f"{rc}\n")
    return cmd


def record(work: Path, command: str) -> dict:
    """The record of the finished run in ``work`` (module doc), from its files only."""
    log = (work / "log").read_text(errors="replace")
    start, end = (int((work / f).read_text().split()[0]) for f in ("start", "end"))
    commit = subprocess.run(["git", "-C", str(work / "main"), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True, check=True).stdout.strip()
    rec = {"bench": "suite", "what": "make test from a fresh clone, cold caches (.ci/run)",
           **pytest_summary(log), "ci_run_seconds": end - start,
           "ci_run_exit_status": int((work / "rc").read_text().split()[0]),
           **time_v(log), "goal_minutes": GOAL_MIN}
    rec["pytest_minutes"] = round(rec["pytest_seconds"] / 60.0, 1)
    rec["met"] = rec["failed"] == 0 and rec["errors"] == 0 and rec["pytest_minutes"] <= GOAL_MIN
    rec.update(date=datetime.fromtimestamp(end, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
               commit=commit, command=command, cpus=os.cpu_count(), cpu=cpu_model(),
               load_before=None, load_after=None, speed=speed_probe())
    return rec


def with_history(rec: dict, out: Path) -> dict:
    """``rec`` with the records already in ``out`` (the previous latest first) as its
    ``history``, each without its own history."""
    old = json.loads(out.read_text()) if out.is_file() else None
    past = [] if old is None else [{k: v for k, v in old.items() if k != "history"},
                                   *old.get("history", [])]
    return {**rec, "history": past}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, help="folder for the clone and its log (default: a "
                    "new temporary folder, kept)")
    ap.add_argument("--from", dest="src", type=Path,
                    help="record a finished run in this folder instead of running one")
    ap.add_argument("--note", default="", help="with --from: what else the run had (e.g. "
                    "the per-test CPU plugin through PYTEST_ADDOPTS), kept in the record")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    if args.src:
        rec = record(args.src, f"bench/bench_suite.py --from {args.src} (a run made as the "
                     "module doc says: CI=true PYTENSOR_FLAGS=compiledir=DIR/ptc bash .ci/run "
                     "in a fresh clone" + (f"; {args.note}" if args.note else "") + ")")
    else:
        work = args.work or Path(tempfile.mkdtemp(prefix="crowdrank-suite-"))
        load = [round(x, 2) for x in os.getloadavg()]
        rec = record(work, run(work))
        # what only a run of this process knows: the load around it, its children's CPU
        rec.update(load_before=load, load_after=[round(x, 2) for x in os.getloadavg()])
        if "user_cpu_seconds" not in rec:
            ru = resource.getrusage(resource.RUSAGE_CHILDREN)
            rec.update(user_cpu_seconds=round(ru.ru_utime, 1),
                       system_cpu_seconds=round(ru.ru_stime, 1))
    rec = with_history(rec, args.out)
    args.out.write_text(json.dumps(rec, indent=1) + "\n")
    print(f"{rec['passed']} passed, {rec['failed']} failed in {rec['pytest_minutes']} min of "
          f"pytest (goal <= {GOAL_MIN:g} min: {'met' if rec['met'] else 'NOT met'}); "
          f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

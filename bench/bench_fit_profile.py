"""What a default ``crowdrank fit DATA --method nuts`` saves by timing the gradient only when
asked (``NutsConfig.profile``; CLI ``--profile``).

Three variants of the same command (same data, same seed, default sampler settings), each
a fresh process, ``--repeats`` times, interleaved so that a change of machine load hits all
of them: ``before``, an exported older commit whose NumPyro fits always compiled and timed
a second potential+gradient (``--before``: a folder whose ``crowdrank/`` is ``git archive
COMMIT``); ``after``, this checkout's default; ``after_profile``, this checkout with
``--profile`` (the same work as ``before``'s, asked for). ``after_profile − after`` isolates
what the switch saves from the other changes between the commits. Wall seconds from
``time.perf_counter``, CPU seconds of the child from ``resource.getrusage`` (user +
system); ``uptime``'s load averages before and after each run (the machine is shared).
Writes ``bench/results/fit_profile.json``.

    python bench/bench_fit_profile.py DATA --before /tmp/before --before-commit SHA [--repeats 2]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench" / "tools"))
from stamp import commit as _commit  # HEAD, +dirty when the tree differs

RESULTS = ROOT / "bench" / "results" / "fit_profile.json"
#: the CLI run from a given package root (``PYTHONPATH`` puts it before the editable install)
RUN = "import sys; from crowdrank.reports.cli import main; sys.exit(main())"


def _load() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def one_run(pkg_root: str | None, data: str, seed: int, out: str, extra=()) -> dict:
    """One ``crowdrank fit DATA --method nuts`` in a fresh process: wall and CPU seconds."""
    env = dict(os.environ)
    if pkg_root:
        env["PYTHONPATH"] = pkg_root
    cmd = [sys.executable, "-c", RUN, "fit", data, "--method", "nuts", "--seed", str(seed),
           "--out", out, *extra]
    load0 = _load()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False,
                          cwd=tempfile.gettempdir())
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        raise SystemExit(f"run failed ({pkg_root or 'this checkout'}):\n{proc.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(("NUTS (", "profile:"))]
    return {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "load_before": load0,
            "load_after": _load(), "stdout": lines}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data")
    ap.add_argument("--before", required=True, help="folder holding the older crowdrank/")
    ap.add_argument("--before-commit", required=True)
    ap.add_argument("--after", default=None,
                    help="folder holding the newer crowdrank/ (default: this checkout)")
    ap.add_argument("--after-commit", default=None)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data-note", default="",
                    help="how DATA was made (recorded), e.g. the simulate command")
    ap.add_argument("--out", default=str(RESULTS))
    a = ap.parse_args(argv)
    variants = (("before", a.before, ()), ("after", a.after, ()),
                ("after_profile", a.after, ("--profile",)))
    runs = {label: [] for label, _, _ in variants}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.repeats):
            for label, root, extra in variants:
                rec = one_run(root, a.data, a.seed, str(Path(tmp) / f"{label}{r}"), extra)
                runs[label].append(rec)
                print(label, json.dumps(rec), flush=True)

    def mean(label, key):
        return round(sum(x[key] for x in runs[label]) / len(runs[label]), 2)

    rec = {
        "benchmark": "fit-nuts-profile",
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit_before": a.before_commit, "commit_after": a.after_commit or _commit(),
        "command": f"crowdrank fit {a.data} --method nuts --seed {a.seed} --out DIR "
                   "(defaults: numpyro, 4 chains, tune 1000, draws 1000)",
        "data": a.data_note or a.data,
        "cpu_count": os.cpu_count(),
        "runs": runs,
        "mean_wall_s": {k: mean(k, "wall_s") for k in runs},
        "mean_cpu_s": {k: mean(k, "cpu_s") for k in runs},
        "note": "before: every NumPyro fit compiles and times a second potential+gradient "
                "(gradient_timing); after: only with NutsConfig(profile=True) / --profile "
                "(after_profile). The machine is shared (see the load averages of each run).",
    }
    for key in ("wall_s", "cpu_s"):
        m = rec[f"mean_{key}"]
        rec[f"saved_{key}"] = {"before_minus_after": round(m["before"] - m["after"], 2),
                               "profile_minus_after": round(m["after_profile"] - m["after"], 2)}
    Path(a.out).write_text(json.dumps(rec, indent=1) + "\n")
    print(json.dumps({k: rec[k] for k in ("mean_wall_s", "mean_cpu_s", "saved_wall_s",
                                          "saved_cpu_s")}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""A benchmark's command run again in a child process: stopped after a time cap (a run
that does not finish still leaves a record, written by the benchmark), or with the code of
another commit (to tell a change of code from a change of environment).

The benchmark stamps what comes back (``stamp.stamp``): these functions only run the child
and return what it wrote or printed.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def without(argv: list[str], option: str) -> list[str]:
    """``argv`` without ``option`` and its value (``--opt V`` or ``--opt=V``)."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == option:
            skip = True
        elif not a.startswith(option + "="):
            out.append(a)
    return out


def cpu_seconds() -> float:
    """CPU seconds of this process and of its finished children."""
    me, ch = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return me.ru_utime + me.ru_stime + ch.ru_utime + ch.ru_stime


def git(*args, root: Path = ROOT) -> str:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                          check=True).stdout.strip()


def at_commit(script: str, rev: str, argv: list[str], root: Path = ROOT) -> tuple[str, list]:
    """``(short hash of rev, records)``: ``script`` (a path in the repository) of commit
    ``rev`` run with ``argv`` and ``--out FILE`` in a detached worktree of ``rev``, with
    this Python (the same libraries) and the same ``shared/`` data; the worktree is removed
    afterwards, also when the run fails."""
    short = git("rev-parse", "--short", rev, root=root)
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "crowdrank"         # the package's name: PYTHONPATH=tmp imports it
        git("worktree", "add", "-f", "--detach", str(tree), short, root=root)
        try:
            if (root.parent / "shared").is_dir():
                (Path(tmp) / "shared").symlink_to(root.parent / "shared")
            res = Path(tmp) / "records.json"
            subprocess.run([sys.executable, str(tree / script), *without(argv, "--out"),
                            "--out", str(res)],
                           check=True, env=dict(os.environ, PYTHONPATH=tmp))
            return short, json.loads(res.read_text())
        finally:
            git("worktree", "remove", "--force", str(tree), root=root)


def with_cap(script: Path, argv: list[str], minutes: float) -> dict:
    """``script`` run with ``argv`` and ``--out FILE``, stopped after ``minutes``:
    ``records`` (what it wrote; ``None`` when it was stopped), ``lines`` (the JSON lines it
    printed on stdout), ``wall_s`` and ``cpu_s`` (this process's and its children's) until
    it returned or was stopped."""
    with tempfile.TemporaryDirectory() as tmp:
        res, log = Path(tmp) / "records.json", Path(tmp) / "stdout"
        c0, t0 = cpu_seconds(), time.perf_counter()
        records = None
        with log.open("w") as fh:
            try:
                subprocess.run([sys.executable, str(script), *argv, "--out", str(res)],
                               stdout=fh, check=True, timeout=minutes * 60)
                records = json.loads(res.read_text())
            except subprocess.TimeoutExpired:
                pass
        return {"records": records, "wall_s": time.perf_counter() - t0,
                "cpu_s": cpu_seconds() - c0,
                "lines": [ln for ln in log.read_text().splitlines() if ln.startswith("{")]}

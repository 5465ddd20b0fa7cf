"""Where and when a benchmark's figures were measured: the fields every record carries.

``stamp()`` gives the UTC date, the commit (``+dirty`` when tracked code differs from it,
so a figure from uncommitted code says so), the command as typed, the load average at the
start, the machine (CPU model and count) and the versions of the libraries that compute
the figures (a seeded sampler run repeats its draws only with the same ones: docs/notes.md,
"The medium-scale PyMC reference"). The headline (``headline.record``) shows a record's
date and commit; ``docs/results.md`` shows all of them.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from speed import speed_probe

ROOT = Path(__file__).resolve().parents[2]


def commit(root: Path = ROOT) -> str:
    """The short hash of ``HEAD``, with ``+dirty`` when a tracked file differs from it;
    ``"unknown"`` outside a git checkout. The records under ``bench/results/`` do not
    count: they are what benchmarks write, not the code they measure, so one benchmark's
    fresh record does not mark the next benchmark's as dirty."""
    def git(*args):
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True,
                              text=True, check=False)

    head = git("rev-parse", "--short", "HEAD")
    if head.returncode != 0 or not head.stdout.strip():
        return "unknown"
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", ".",
                ":(exclude)bench/results").stdout.strip()
    return head.stdout.strip() + ("+dirty" if dirty else "")


#: The libraries whose versions a record carries (:func:`packages`).
PACKAGES = ("numpy", "scipy", "numba", "jax", "jaxlib", "numpyro", "pymc", "pytensor",
            "arviz", "arviz-stats")


def packages(names=PACKAGES) -> dict:
    """``{name: version}`` of the installed distributions among ``names`` (absent ones are
    left out)."""
    out = {}
    for n in names:
        try:
            out[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            pass
    return out


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def stamp(argv: list[str] | None = None, speed: bool = True, *,
          script: str | Path | None = None) -> dict:
    """``date``, ``commit``, ``command``, ``load_before`` (1, 5, 15 min), ``cpus``, ``cpu``,
    ``packages`` (:func:`packages`) and, with ``speed``, the machine's speed probe
    (``speed``, ``bench/tools/speed.py``, ~6 s: machines of one CPU model ran the same code
    2x apart on different days): ``argv`` defaults to this process's (the benchmark's
    command line). With ``script`` (a benchmark's ``__file__``, for a ``main(argv)`` that
    tests call too), ``argv`` is the arguments after the script's name, this process's by
    default."""
    if script is not None:
        argv = [str(script), *(sys.argv[1:] if argv is None else argv)]
    argv = sys.argv if argv is None else argv
    script = Path(argv[0])
    try:
        script = script.resolve().relative_to(ROOT)
    except ValueError:
        pass
    return {"date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "commit": commit(),
            "command": " ".join(["python", str(script), *argv[1:]]),
            "load_before": [round(x, 2) for x in os.getloadavg()],
            "cpus": os.cpu_count(), "cpu": cpu_model(), "packages": packages(),
            **({"speed": speed_probe()} if speed else {})}

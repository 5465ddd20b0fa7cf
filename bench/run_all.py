"""Run every benchmark in bench/ and print their JSON lines (``make bench``).

Each ``bench/bench_*.py`` prints one JSON object per measurement and writes
``bench/results/<name>.json``; this runner only runs them in turn, so that one command
refreshes every figure the README quotes.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    rc = 0
    for script in sorted(HERE.glob("bench_*.py")):
        print(f"# {script.name}", file=sys.stderr, flush=True)
        rc |= subprocess.call([sys.executable, str(script), *argv], cwd=HERE.parent)
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

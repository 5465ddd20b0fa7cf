"""``wide-csv``: ``worker[,task],rank1,rank2,...``, one item per column, best first;
trailing cells may be empty for shorter rankings (the BabyFace CSV export).
See ``docs/data.md``."""

from __future__ import annotations

from pathlib import Path

from ..data import DataError
from ._base import Builder, csv_rows

NAME = "wide-csv"


def _is_rank(c: str) -> bool:
    return c.startswith("rank") and c[4:].isdigit()


def recognises(header: list[str]) -> bool:
    cols = [c.strip().lower() for c in header]
    return "worker" in cols and any(_is_rank(c) for c in cols)


def parse(path: Path, b: Builder, block: int = 1):
    """Feed the rankings of ``path`` to ``b``; yields 1 per row."""
    rows = csv_rows(path, b)
    _, header = next(rows)
    cols = [c.strip().lower() for c in header]
    rank_cols = [i for i, c in enumerate(cols) if _is_rank(c)]
    other = [c for i, c in enumerate(cols) if i not in rank_cols]
    if sorted(other) not in (["worker"], ["task", "worker"]):
        raise DataError(f"wide-csv header must be worker[,task],rank1,rank2,...; got "
                        f"{','.join(header)}", b.source, 1)
    nums = [int(cols[i][4:]) for i in rank_cols]
    if nums != list(range(1, len(nums) + 1)):
        raise DataError("rank columns must be rank1, rank2, ... in order", b.source, 1)
    iw = cols.index("worker")
    it = cols.index("task") if "task" in cols else None
    n = len(header)
    for line, row in rows:
        if len(row) != n:
            raise DataError(f"malformed line: expected {n} fields, got {len(row)}",
                            b.source, line)
        cells = [row[i].strip() for i in rank_cols]
        while cells and not cells[-1]:
            cells.pop()
        b.add(line, row[iw].strip(), [[c] for c in cells],
              None if it is None else row[it].strip())
        yield 1

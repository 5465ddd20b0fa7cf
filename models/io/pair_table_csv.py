"""The pairwise CSV with extra columns as a :class:`~crowdrank.models.pair_table.PairTable`:
:func:`read_pair_table` (a file, or a registered pair-table data set by name) and
:func:`write_pair_table`. Column rules: :mod:`crowdrank.models.pair_table` and docs/data.md.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from ..errors import DataError
from ..pair_table import REQUIRED, PairTable
from .pair_datasets import PAIR_DATASETS, load_pair_dataset

__all__ = ["read_pair_table", "write_pair_table"]


def read_pair_table(path, extra: tuple[str, ...] = ()) -> PairTable:
    """Read a pairwise CSV (``worker,left,right,label`` + the ``extra`` columns).

    Errors name the file, the line and the reason: a missing column, a row of the wrong
    length, an empty id, ``left == right``, a ``label`` that is neither ``left`` nor
    ``right``. Blank rows are skipped and nothing else is dropped.

    ``path`` may also name a registered pair-table data set
    (:data:`crowdrank.models.io.pair_datasets.PAIR_DATASETS`, e.g. ``preflib-dots-pairs``) when no
    such file exists; its table comes with all its columns.

    Parameters
    ----------
    path : str or Path
        The file.
    extra : tuple of str
        The extra columns to read.
    """
    path = Path(path)
    src = str(path)
    if not path.exists():
        if src in PAIR_DATASETS:
            table, _ = load_pair_dataset(src)
            missing = [c for c in extra if c not in table.extra]
            if missing:
                raise DataError(f"no column {missing[0]!r} in data set {src} (its columns: "
                                f"{', '.join(table.extra)})", src)
            return table
        raise DataError("no such file", src)
    items: dict[str, int] = {}
    workers: dict[str, int] = {}
    first, second, won, worker, lines = [], [], [], [], []
    cells: dict[str, list[str]] = {c: [] for c in extra}
    with path.open(newline="", encoding="utf-8-sig") as fh:
        reader = csv.reader(fh)
        try:
            header = [h.strip() for h in next(reader)]
        except StopIteration:
            raise DataError("empty file (no header)", src, 1) from None
        low = [h.lower() for h in header]
        missing = [c for c in REQUIRED if c not in low]
        if missing:
            raise DataError(f"a pairwise CSV needs columns {','.join(REQUIRED)}; missing "
                            f"{missing} in header {header} (these models read the order "
                            "each pair was shown and per-comparison columns, which a "
                            "rankings file does not have)", src, 1)
        col = {c: low.index(c) for c in REQUIRED}
        for c in extra:
            if c not in header:
                raise DataError(f"no column {c!r} in header {header}", src, 1)
            col[c] = header.index(c)
        n = len(header)
        for row in reader:
            line = reader.line_num
            if not row or not "".join(row).strip():
                continue
            if len(row) != n:
                raise DataError(f"malformed line: expected {n} fields, got {len(row)}",
                                src, line)
            w, a, b, lab = (row[col[c]].strip() for c in REQUIRED)
            if not w or not a or not b:
                raise DataError("empty worker, left or right id", src, line)
            if a == b:
                raise DataError(f"left and right are the same item {a!r}", src, line)
            if lab not in (a, b):
                raise DataError(f"label {lab!r} is neither left ({a!r}) nor right ({b!r})",
                                src, line)
            first.append(items.setdefault(a, len(items)))
            second.append(items.setdefault(b, len(items)))
            won.append(1 if lab == a else 0)
            worker.append(workers.setdefault(w, len(workers)))
            lines.append(line)
            for c in extra:
                cells[c].append(row[col[c]].strip())
    if not first:
        raise DataError("no pairs in the file", src)
    return PairTable(tuple(items), tuple(workers), np.asarray(first, np.int64),
                     np.asarray(second, np.int64), np.asarray(won, np.int64),
                     np.asarray(worker, np.int64),
                     {c: np.asarray(v, dtype=object) for c, v in cells.items()},
                     np.asarray(lines, np.int64), True, src)


def write_pair_table(t: PairTable, path, extra: dict | None = None) -> Path:
    """Write ``t`` as a pairwise CSV (``left`` = presented first) with ``extra`` columns
    (name → per-pair values) appended; :func:`read_pair_table` reads it back.

    Parameters
    ----------
    t : PairTable
        The pairs.
    path : str or Path
        The file.
    extra : dict, optional
        Column name -> per-pair values.
    """
    import pandas as pd

    items = np.asarray(t.items, dtype=object)
    df = pd.DataFrame({"worker": np.asarray(t.workers, dtype=object)[t.worker],
                       "left": items[t.first], "right": items[t.second],
                       "label": np.where(t.first_won == 1, items[t.first], items[t.second])})
    for k, v in (extra or {}).items():
        df[k] = v
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(path, index=False, lineterminator="\n")
    return path

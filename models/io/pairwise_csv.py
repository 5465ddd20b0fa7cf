"""``pairwise-csv``: crowd-kit's ``worker,left,right,label[,task]``; ``label`` is the winner
and must be ``left`` or ``right``. See ``docs/data.md``."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..data import DataError, Rankings
from ._base import Builder, check_ids, columns, csv_rows

NAME = "pairwise-csv"
REQUIRED, OPTIONAL = ("worker", "left", "right", "label"), ("task",)


def recognises(header: list[str]) -> bool:
    return set(REQUIRED) <= {c.strip().lower() for c in header}


def parse(path: Path, b: Builder, block: int = 1):
    """Feed the pairs of ``path`` to ``b``; yields 1 per row."""
    rows = csv_rows(path, b)
    _, header = next(rows)
    col = columns(header, REQUIRED, OPTIONAL, b.source, NAME)
    n, it = len(header), col.get("task")
    iw, il, irr, ilab = col["worker"], col["left"], col["right"], col["label"]
    for line, row in rows:
        if len(row) != n:
            raise DataError(f"malformed line: expected {n} fields ({','.join(header)}), "
                            f"got {len(row)}", b.source, line)
        left, right, label = row[il].strip(), row[irr].strip(), row[ilab].strip()
        if label == left:
            pair = [[left], [right]]
        elif label == right:
            pair = [[right], [left]]
        else:
            raise DataError(f"label {label!r} is neither left ({left!r}) nor right "
                            f"({right!r})", b.source, line)
        b.add(line, row[iw].strip(), pair, None if it is None else row[it].strip())
        yield 1


def write(data: Rankings, path: str | Path) -> Path:
    """Write pairs (``K == 2``) in crowd-kit's ``worker,left,right,label`` convention, with
    ``left`` the winner (rank-break k-ary data first).

    Parameters
    ----------
    data : Rankings
        The data.
    path : str or Path
        The file.
    """
    import pandas as pd

    if data.K != 2:
        raise DataError(f"pairwise CSV holds pairs; this data has k up to {data.K} "
                        "(use data.rank_break() first)", data.source)
    check_ids(data.items, "item", forbidden=())
    check_ids(data.workers, "worker", forbidden=())
    items = np.asarray(data.items, dtype=object)
    df = pd.DataFrame({"worker": np.asarray(data.workers, dtype=object)[data.worker],
                       "left": items[data.order[0]], "right": items[data.order[1]],
                       "label": items[data.order[0]]})
    if data.task is not None:
        df["task"] = data.task
    df.to_csv(path, index=False, lineterminator="\n")
    return path

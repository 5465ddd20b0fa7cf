"""``rankings-csv``: ``worker,ranking[,task]``, items joined by ``>``, best first.

``a>b=c>d`` marks a tie group; a tied ranking is split as appendix 1.3 of [Pan18]
does (``a>b>d`` and ``a>c>d``, :func:`models.data.split_ties`) and counted. Ids are
stripped of surrounding white space. See ``docs/data.md``.

One reader. Rows are read by :mod:`csv` in blocks; within a block, the rows that are
clean (right number of fields, no tie, no empty id, ``k >= 2``, no item twice, ids in the
universe when it is fixed) are converted at once with array operations, and every other
row goes through the row-by-row path, which splits ties, skips (``invalid="skip"``) or
raises the error that names the file, the line and the reason. Both paths build the same
rankings in file order, so the result does not depend on the block size.
"""

from __future__ import annotations

import re
from itertools import islice
from pathlib import Path

import numpy as np

from ..data import PAD, DataError, Rankings
from ._base import Builder, check_ids, columns, csv_rows, ranking_strings, split_ranking

NAME = "rankings-csv"
REQUIRED, OPTIONAL = ("worker", "ranking"), ("task",)
BLOCK = 1 << 16  # rows converted at once; bounds the memory of one step
LONG = 64        # rankings longer than this take the row path


def recognises(header: list[str]) -> bool:
    return {"worker", "ranking"} <= {c.strip().lower() for c in header}


def parse(path: Path, b: Builder, block: int = BLOCK):
    """Feed the rankings of ``path`` to ``b``; yields the rows added, per block."""
    rows = csv_rows(path, b)
    _, header = next(rows)
    col = columns(header, REQUIRED, OPTIONAL, b.source, NAME)
    shape = (len(header), col["worker"], col["ranking"], col.get("task"))
    while True:
        chunk = list(islice(rows, block))
        if not chunk:
            return
        _add_block(b, chunk, header, shape)
        yield len(chunk)


def _add_row(b: Builder, line: int, row: list[str], header, shape) -> None:
    """One row, with every check and its exact message (the irregular rows' path)."""
    n, iw, ir, it = shape
    if len(row) != n:
        raise DataError(f"malformed line: expected {n} fields ({','.join(header)}), "
                        f"got {len(row)}", b.source, line)
    text = row[ir].strip()
    if not text:
        raise DataError("empty ranking", b.source, line)
    b.add(line, row[iw].strip(), split_ranking(text), None if it is None else row[it].strip())


_SPACE = re.compile(r"\s")


def _stripped(values: list[str]) -> list[str]:
    """``values`` stripped of surrounding white space (a copy only when some has any)."""
    return [x.strip() for x in values] if _SPACE.search("".join(values)) else values


def _nonempty(values) -> np.ndarray:
    return np.asarray(values, dtype=object) != ""


def _clean_rows(b: Builder, rows: list[list[str]], shape):
    """Which rows the array path may take, with their stripped cells and item ids.

    A row is *clean* when :func:`_add_row` would add it unchanged as one tie-free ranking
    and raise nothing; everything else (including every error) is left to that path.
    """
    import pandas as pd

    n, iw, ir, it = shape
    m = len(rows)
    ok = np.fromiter((len(r) == n for r in rows), dtype=bool, count=m)
    if not ok.all():
        blank = [""] * n
        rows = [r if len(r) == n else blank for r in rows]
    worker = _stripped([r[iw] for r in rows])
    text = _stripped([r[ir] for r in rows])
    ok &= _nonempty(worker) & _nonempty(text)
    joined = ">".join(text)
    if "=" in joined:  # ties: the row path splits them
        ok &= np.fromiter(("=" not in x for x in text), dtype=bool, count=m)
    task = None
    if it is not None:
        task = _stripped([r[it] for r in rows])
        ok &= _nonempty(task)
        task = np.asarray(task, dtype=object)
    lengths = np.fromiter((x.count(">") for x in text), dtype=np.int64, count=m) + 1
    flat = np.asarray(_stripped(joined.split(">")), dtype=object)
    row_of = np.repeat(np.arange(m), lengths)
    ok &= lengths >= 2
    ok[row_of[flat == ""]] = False
    ok &= lengths <= LONG  # very long rows: the row path (keeps the table below small)
    codes, _ = pd.factorize(flat, sort=False)
    K = int(min(lengths.max(), LONG))
    # an item twice in one row: sort each column of the padded codes and compare neighbours
    table = np.full((K, m), PAD, dtype=np.int64)
    pos = np.arange(len(codes)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    short = pos < K
    table[pos[short], row_of[short]] = codes[short]
    table = np.where(table == PAD, -1 - np.arange(K)[:, None], table)
    table.sort(axis=0)
    ok &= ~np.any(table[1:] == table[:-1], axis=0)
    if b.fixed_items:
        ok[row_of[~b.known(flat, "item")]] = False
    if b.fixed_workers:
        ok &= b.known(worker, "worker")
    return ok, np.asarray(worker, dtype=object), flat, lengths, task


def _add_block(b: Builder, chunk: list[tuple[int, list[str]]], header, shape) -> None:
    lines = [ln for ln, _ in chunk]
    rows = [r for _, r in chunk]
    ok, worker, flat, lengths, task = _clean_rows(b, rows, shape)
    ends = np.cumsum(lengths)
    starts = ends - lengths
    # runs of clean rows go in as arrays, the rows between them one by one, in file order
    i, m = 0, len(rows)
    for j in np.flatnonzero(~ok).tolist() + [m]:
        if j > i:
            b.add_many(worker[i:j], flat[starts[i]:ends[j - 1]], lengths[i:j],
                       None if task is None else task[i:j])
        if j < m:
            _add_row(b, lines[j], rows[j], header, shape)
        i = j + 1


def write(data: Rankings, path: str | Path) -> Path:
    """Write ``worker,ranking[,task]`` (vectorised; fast for 10^5-10^6 rankings).

    Rankings are written as they are held (tie-split rankings stay split, so a re-read
    reports ``ties_split = 0``).
    """
    import pandas as pd

    path = Path(path)
    check_ids(data.items, "item")
    check_ids(data.workers, "worker", forbidden=())
    df = pd.DataFrame({"worker": np.asarray(data.workers, dtype=object)[data.worker],
                       "ranking": ranking_strings(data)})
    if data.task is not None:
        df["task"] = data.task
    df.to_csv(path, index=False, lineterminator="\n")
    return path

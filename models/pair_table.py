"""Presented pairs with their extra columns: the input of the CrowdBT extensions and of
contextual BT.

A :class:`crowdrank.models.data.Rankings` keeps only *who won*; the models here also need *how the
pair was shown* (the annotator-bias model's "first item") and per-comparison columns (a
category for domain-specific reliability, covariates for contextual BT). They read the
pairwise CSV (crowd-kit's ``worker,left,right,label[,task]``, ``docs/data.md``) directly:

- **presented first** is the ``left`` column: the item in ``left`` was shown first (or on
  the left) and ``right`` second; ``label`` names the winner and must equal one of them;
- any other column can be asked for by name (``extra=("category",)``); its cells come back
  as strings, one per pair, with the CSV line of each pair for located errors.

Rank-broken k-ary rankings carry no presentation order: :func:`from_rankings` orients
each rank-broken pair winner-first, which is only meaningful for models in which the
orientation does not matter (no bias term); the bias model refuses such data.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .errors import DataError

REQUIRED = ("worker", "left", "right", "label")


@dataclass(frozen=True, eq=False)
class PairTable:
    """Pairs as presented. ``first``/``second``: item indices (``first`` shown first);
    ``first_won``: 1 when the first item won; ``worker``: worker index; ``extra``: the
    requested columns' raw cells; ``lines``: the CSV line of each pair (``None`` when the
    pairs did not come from a file); ``oriented``: whether ``first`` is a real
    presentation order (False for rank-broken rankings)."""

    items: tuple[str, ...]
    workers: tuple[str, ...]
    first: np.ndarray
    second: np.ndarray
    first_won: np.ndarray
    worker: np.ndarray
    extra: dict = field(default_factory=dict)
    lines: np.ndarray | None = None
    oriented: bool = True
    source: str = "<pairs>"

    @property
    def n_pairs(self) -> int:
        return len(self.first)

    @property
    def n_items(self) -> int:
        return len(self.items)

    @property
    def n_workers(self) -> int:
        return len(self.workers)

    def winner_loser(self) -> tuple[np.ndarray, np.ndarray]:
        w = np.where(self.first_won == 1, self.first, self.second)
        return w, np.where(self.first_won == 1, self.second, self.first)

    def line_of(self, s: int) -> int | None:
        return None if self.lines is None else int(self.lines[s])

    def column(self, name: str, role: str) -> np.ndarray:
        """The cells of the extra column ``name``, checked: a :class:`DataError` names the
        file when the column was not read and the line of its first empty cell (a model
        would otherwise read an empty string as a category level). ``role`` names what the
        column is for in the messages ("covariate", "category")."""
        if name not in self.extra:
            raise DataError(f"no {role} column {name!r} was read", self.source)
        cells = self.extra[name]
        for s, c in enumerate(cells):
            if c == "":
                raise DataError(f"empty cell in {role} column {name!r}", self.source,
                                self.line_of(s))
        return cells


def read_pair_table(path, extra: tuple[str, ...] = ()) -> PairTable:
    """Read a pairwise CSV (``worker,left,right,label`` + the ``extra`` columns).

    Errors name the file, the line and the reason: a missing column, a row of the wrong
    length, an empty id, ``left == right``, a ``label`` that is neither ``left`` nor
    ``right``. Blank rows are skipped and nothing else is dropped.

    ``path`` may also name a registered pair-table data set
    (:data:`crowdrank.models.io.pair_datasets.PAIR_DATASETS`, e.g. ``preflib-dots-pairs``) when no
    such file exists; its table comes with all its columns."""
    path = Path(path)
    src = str(path)
    if not path.exists():
        from .io.pair_datasets import PAIR_DATASETS, load_pair_dataset
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


def from_rankings(data) -> PairTable:
    """The rank-broken pairs of :class:`crowdrank.models.data.Rankings`, winner first and marked
    ``oriented=False`` (a ranking has no presentation order)."""
    pr = data.rank_break()
    if pr.n_rankings == 0:
        raise DataError("no pairs to fit", data.source)
    w, lo = pr.order[0].astype(np.int64), pr.order[1].astype(np.int64)
    extra = {} if pr.task is None else {"task": np.asarray(pr.task, dtype=object)}
    return PairTable(tuple(data.items), tuple(data.workers), w, lo, np.ones_like(w),
                     pr.worker.astype(np.int64), extra, None, False, data.source)


def write_pair_table(t: PairTable, path, extra: dict | None = None) -> Path:
    """Write ``t`` as a pairwise CSV (``left`` = presented first) with ``extra`` columns
    (name → per-pair values) appended; :func:`read_pair_table` reads it back."""
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

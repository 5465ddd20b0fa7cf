"""``parquet``: Apache Parquet with columns ``worker`` (string), ``ranking`` (list of item
ids, best first) and an optional ``task`` (string); see ``docs/data.md``.

Row groups are the streaming unit: :func:`parse` reads one row group at a time (split into
``block`` rows) with the worker and item columns dictionary-encoded by the Parquet reader
itself, so that no id is hashed twice. A ranking holds no ties (a list has no tie groups);
ids are taken as they are (no white space is stripped). The checks are those of the
rankings CSV with the same messages; the "line" a message names is the row's number in the
file (the first ranking is row 1).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..data import DataError, Rankings
from . import _arrow
from ._base import Builder

NAME = "parquet"
EXTENSIONS = (".parquet", ".pq")
REQUIRED, OPTIONAL = ("worker", "ranking"), ("task",)
BLOCK = 1 << 17           # rows converted at once
ROW_GROUP = 1 << 20       # rows per row group written


def _open(path: Path, source: str):
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise DataError(f"not a Parquet file ({exc})", source) from None
    names = [n.lower() for n in pf.schema_arrow.names]
    for n in names:
        if n not in REQUIRED + OPTIONAL:
            raise DataError(f"unexpected column {n!r} in a {NAME} file; expected "
                            f"{','.join(REQUIRED)} (optional {','.join(OPTIONAL)})", source)
    if len(set(names)) != len(names):
        raise DataError("a column appears twice", source)
    missing = [c for c in REQUIRED if c not in names]
    if missing:
        raise DataError(f"the file lacks column(s) {missing}; expected "
                        f"{','.join(REQUIRED)}", source)
    col = {n: pf.schema_arrow.names[i] for i, n in enumerate(names)}
    types = {n: pf.schema_arrow.field(col[n]).type for n in names}
    for n in ("worker", "task"):
        if n in types and not _stringlike(types[n]):
            raise DataError(f"column {n!r} must hold strings, not {types[n]}", source)
    rt = types["ranking"]
    if not (pa.types.is_list(rt) or pa.types.is_large_list(rt)) \
            or not _stringlike(rt.value_type):
        raise DataError(f"column 'ranking' must be a list of item ids (strings), not {rt}",
                        source)
    # the reader dictionary-encodes these leaf columns itself (ids repeat a lot)
    leaves = [pf.schema.column(i).path for i in range(len(pf.schema))]
    dict_cols = [p for p in leaves if p.split(".")[0].lower() in ("worker", "ranking")]
    return pq.ParquetFile(path, read_dictionary=dict_cols), col


def _stringlike(t) -> bool:
    import pyarrow as pa

    if pa.types.is_dictionary(t):
        t = t.value_type
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def n_rows(path: str | Path) -> int:
    """The number of rankings in a Parquet file (from its footer; nothing is read)."""
    return _open(Path(path), str(path))[0].metadata.num_rows


def parse(path: Path, b: Builder, block: int = BLOCK):
    """Feed the rankings of ``path`` to ``b`` row group by row group; yields the rows
    added, ``block`` at a time (the last yield: the rest), across row groups."""
    pf, col = _open(path, b.source)
    names = [col[n] for n in ("worker", "ranking", "task") if n in col]
    row, pending = 1, 0          # rows added since the last yield (exactly ``block``)
    for g in range(pf.num_row_groups):
        table = pf.read_row_group(g, columns=names)
        n = table.num_rows
        s = 0
        while s < n:
            e = min(s + block - pending, n)
            _add_block(b, [table.column(c).slice(s, e - s).combine_chunks() for c in names],
                       "task" in col, row + s)
            pending += e - s
            if pending == block:
                yield block
                pending = 0
            s = e
        row += n
    if pending:
        yield pending


def _add_block(b: Builder, cols: list, has_task: bool, first: int) -> None:
    import pyarrow as pa
    import pyarrow.compute as pc

    worker, ranking = cols[0], cols[1]
    m = len(ranking)
    ok = _arrow.valid(worker) & _arrow.valid(ranking)
    wcodes, workers = _arrow.encode(worker)
    wempty = np.array([not x for x in workers], dtype=bool)
    if wempty.any():
        ok &= ~wempty[wcodes]
    if isinstance(ranking, pa.LargeListArray):
        ranking = ranking.cast(pa.list_(ranking.type.value_type))
    lengths = _arrow.ints(pc.list_value_length(ranking), fill=0)
    values = pc.list_flatten(ranking)
    icodes, items = _arrow.encode(values)
    bad_item = ~_arrow.valid(values)
    iempty = np.array([not x for x in items], dtype=bool)
    if iempty.any():
        bad_item |= iempty[icodes]
    if bad_item.any():
        ok[np.repeat(np.arange(m), lengths)[bad_item]] = False
    tasks = None
    tcol = cols[2] if has_task else None
    if tcol is not None:
        if pa.types.is_dictionary(tcol.type):
            tcol = tcol.cast(tcol.type.value_type)
        ok &= _arrow.ints(pc.binary_length(tcol), fill=0) > 0
        if b.keep_task:
            tasks = tcol.to_numpy(zero_copy_only=False).astype(object)

    def one(i: int) -> None:
        line = first + i
        w = worker[i].as_py()
        r = ranking[i].as_py()
        if r is None or not r:
            raise DataError("empty ranking", b.source, line)
        if any(x is None for x in r):
            r = ["" if x is None else x for x in r]
        t = None if tcol is None else tcol[i].as_py()
        b.add(line, "" if w is None else w, [[x] for x in r],
              None if tcol is None else ("" if t is None else t))

    _arrow.add_rows(b, ok, icodes, items, lengths, wcodes, workers, tasks, one)


# ------------------------------------------------------------------ writing
def schema(has_task: bool):
    import pyarrow as pa

    fields = [pa.field("worker", pa.string(), nullable=False),
              pa.field("ranking", pa.list_(pa.string()), nullable=False)]
    if has_task:
        fields.append(pa.field("task", pa.string(), nullable=False))
    return pa.schema(fields)


def table(data: Rankings):
    """``data`` as an Arrow table of the Parquet layout (tie-split rankings stay split)."""
    import pyarrow as pa

    lengths = data.lengths.astype(np.int64)
    offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    flat = data.order.T[np.arange(data.K)[None, :] < lengths[:, None]]
    items = pa.array(list(data.items), pa.string())
    workers = pa.array(list(data.workers), pa.string())
    cols = {"worker": workers.take(pa.array(data.worker)),
            "ranking": pa.ListArray.from_arrays(pa.array(offsets),
                                                items.take(pa.array(flat)))}
    if data.task is not None:
        cols["task"] = pa.array(data.task.tolist(), pa.string())
    return pa.table(cols, schema=schema(data.task is not None))


class Writer:
    """Append :class:`Rankings` (e.g. the chunks of a stream) to one Parquet file, a row
    group per ``row_group`` rankings; use as a context manager."""

    def __init__(self, path: str | Path, has_task: bool, row_group: int = ROW_GROUP):
        import pyarrow.parquet as pq

        self.path = Path(path)
        self.row_group = row_group
        self.rows = 0
        self._w = pq.ParquetWriter(self.path, schema(has_task), compression="zstd")

    def write(self, data: Rankings) -> None:
        self._w.write_table(table(data), row_group_size=self.row_group)
        self.rows += data.n_rankings

    def close(self) -> None:
        self._w.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def write(data: Rankings, path: str | Path, row_group: int = ROW_GROUP) -> Path:
    """Write ``worker, ranking[, task]`` to a Parquet file (row groups of ``row_group``).

    Parameters
    ----------
    data : Rankings
        The data.
    path : str or Path
        The file.
    row_group : int
        Rankings per row group.
    """
    with Writer(path, data.task is not None, row_group) as w:
        w.write(data)
    return Path(path)

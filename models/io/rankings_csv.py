"""``rankings-csv``: ``worker,ranking[,task]``, items joined by ``>``, best first.

``a>b=c>d`` marks a tie group; a tied ranking is split as appendix 1.3 of [Pan18]
does (``a>b>d`` and ``a>c>d``, :func:`crowdrank.models.data.split_ties`) and counted. Ids are
stripped of surrounding white space. See ``docs/data.md``.

One reader, two paths to the same result:

* **Arrow** (the default): the file is read in byte blocks cut at line ends; each block
  is parsed by ``pyarrow.csv`` (multi-threaded), rankings are split on ``>`` and item and
  worker ids dictionary-encoded with Arrow compute functions, and the rows that are clean
  go in as arrays (:mod:`._arrow`); any other row (a tie, an error, a skipped ranking)
  goes through the row path with its physical line.
* **Python** (:mod:`csv`): a block that Arrow cannot take line for line (a quote, which
  may hide a line break, so from there to the end of the file; a blank line, a line with
  the wrong number of fields, a NUL byte, a lone carriage return, a line longer than the
  :mod:`csv` field limit, text that is not UTF-8) is read as before: clean rows in blocks
  with array operations, every other row through the row path, which splits ties, skips
  (``invalid="skip"``) or raises the error that names the file, the line and the reason.

Both paths build the same rankings in file order, so the result depends neither on the
block size nor on the path (tested).
"""

from __future__ import annotations

import codecs
import csv
import io
import re
from itertools import islice
from pathlib import Path

import numpy as np

from ..data import PAD, DataError, Rankings
from . import _arrow
from ._base import (
    Builder,
    check_ids,
    columns,
    csv_rows,
    decode_error,
    ranking_strings,
    split_ranking,
)

NAME = "rankings-csv"
REQUIRED, OPTIONAL = ("worker", "ranking"), ("task",)
BLOCK = 1 << 17  # rows converted at once; bounds the memory of one step
LONG = _arrow.LONG  # rankings longer than this take the row path
BYTES = 1 << 23  # bytes parsed by Arrow at once (rounded to a multiple of ``block`` lines)
#: ASCII bytes that ``str.strip`` removes besides the line ends (a block without them,
#: and without non-ASCII bytes, needs no stripping at all)
_ASCII_SPACE = (b" ", b"\t", b"\x0b", b"\x0c", b"\x1c", b"\x1d", b"\x1e", b"\x1f")


def recognises(header: list[str]) -> bool:
    return {"worker", "ranking"} <= {c.strip().lower() for c in header}


def parse(path: Path, b: Builder, block: int = BLOCK):
    """Feed the rankings of ``path`` to ``b``; yields the rows added, ``block`` at a time
    (the last yield: the rest), whichever path reads them."""
    g = _Groups(block)
    start = _arrow_header(path)
    if start is None:      # an unusual first line: the Python path reads it as before
        rows = csv_rows(path, b)
        _, header = next(rows)
        col = columns(header, REQUIRED, OPTIONAL, b.source, NAME)
        shape = (len(header), col["worker"], col["ranking"], col.get("task"))
        yield from _parse_python(b, g, rows, header, shape)
    else:
        header, offset = start
        col = columns(header, REQUIRED, OPTIONAL, b.source, NAME)
        shape = (len(header), col["worker"], col["ranking"], col.get("task"))
        yield from _parse_arrow(path, b, g, header, shape, offset)
    if g.pending:
        yield g.pending


class _Groups:
    """Counts the rows added since the last yield, so that both paths yield exactly
    ``block`` rows at a time, across the byte blocks (the chunks of a stream do not
    depend on which path read them)."""

    def __init__(self, block: int):
        self.block, self.pending = block, 0

    def room(self) -> int:
        return self.block - self.pending

    def add(self, rows: int) -> bool:
        """Count ``rows``; ``True`` when a group is full (yield it)."""
        self.pending += rows
        if self.pending >= self.block:
            self.pending = 0
            return True
        return False


def _parse_python(b: Builder, g: _Groups, rows, header, shape):
    while True:
        chunk = list(islice(rows, g.room()))
        if not chunk:
            return
        _add_block(b, chunk, header, shape)
        if g.add(len(chunk)):
            yield g.block


# ------------------------------------------------------------------ the Arrow path
def _arrow_header(path: Path) -> tuple[list[str], int] | None:
    """The header and the byte offset of line 2, when the first line is plain (no quote,
    UTF-8, ends with a line break); otherwise ``None``."""
    with path.open("rb") as fh:
        head = fh.read(1 << 16)
    nl = head.find(b"\n")
    if nl < 0:
        return None
    first = head[:nl]
    skip = len(codecs.BOM_UTF8) if first.startswith(codecs.BOM_UTF8) else 0
    first = first[skip:]
    if first.endswith(b"\r"):
        first = first[:-1]
    if not first.strip() or any(c in first for c in (b'"', b"\r", b"\x00")):
        return None
    try:
        text = first.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return next(csv.reader([text])), nl + 1


def _byte_blocks(fh, block: int):
    """``(bytes, lines)``: the rest of ``fh`` in pieces of a whole multiple of ``block``
    lines (the last piece: whatever is left), about :data:`BYTES` each."""
    carry = b""
    want = BYTES
    while True:
        data = fh.read(max(want - len(carry), 1 << 16))
        buf = carry + data
        if not data:
            if buf:
                yield buf, None
            return
        nl = np.flatnonzero(np.frombuffer(buf, dtype=np.uint8) == 10)
        q = (len(nl) // block) * block
        if q == 0:          # fewer than ``block`` lines: read more
            carry, want = buf, 2 * len(buf)
            continue
        cut = int(nl[q - 1]) + 1
        yield buf[:cut], nl[:q]
        carry, want = buf[cut:], BYTES


def _plain(blk: bytes, nl: np.ndarray | None) -> bool:
    """Whether Arrow reads ``blk`` line for line as :mod:`csv` would (see the module doc)."""
    if b'"' in blk or b"\x00" in blk:
        return False
    if b"\r" in blk and blk.count(b"\r") != blk.count(b"\r\n"):
        return False
    if nl is None:
        nl = np.flatnonzero(np.frombuffer(blk, dtype=np.uint8) == 10)
    ends = np.concatenate([[-1], nl, [len(blk)]])
    return int(np.diff(ends).max()) <= csv.field_size_limit()


def _trailing_blank(blk: bytes) -> tuple[bytes, int]:
    """``blk`` without the blank lines that end it, and how many there were."""
    t = blk.rstrip(b" \t\r\n")
    cut = blk.find(b"\n", len(t))
    if cut < 0:
        return blk, 0
    tail = blk[cut + 1:]
    if tail.count(b"\r") != tail.count(b"\r\n"):
        return blk, 0
    return blk[:cut + 1], tail.count(b"\n") + (1 if tail and not tail.endswith(b"\n") else 0)


def _parse_arrow(path: Path, b: Builder, g: _Groups, header, shape, offset: int):
    line = 2                           # the physical line of the block's first row
    trailing = 0
    with path.open("rb") as fh:
        fh.seek(offset)
        for blk, nl in _byte_blocks(fh, g.block):
            if nl is None:             # the file's last piece
                blk, trailing = _trailing_blank(blk)
            # csv ends a line at "\n", "\r\n" and a lone "\r" (without "\r": the line
            # ends found while cutting the block; counting "\r\n" scans slowly)
            if b"\r" in blk:
                lines = blk.count(b"\n") + blk.count(b"\r") - blk.count(b"\r\n")
            else:
                lines = len(nl) if nl is not None else blk.count(b"\n")
            if b'"' in blk:            # a quoted field may span lines: csv from here on
                yield from _python_rest(path, b, g, header, shape, offset, line)
                return
            if blk:
                table = _plain(blk, nl) and _arrow_table(blk, header)
                if table is False or table is None:
                    yield from _python_block(path, b, g, header, shape, blk, line)
                else:
                    yield from _arrow_rows(b, g, header, shape, table, line, blk)
            offset += len(blk)
            line += lines
    for _ in range(trailing):          # as csv does: after the last row
        b.skip_blank()


def _arrow_table(blk: bytes, header):
    """``blk`` parsed by Arrow as strings, or ``None`` when a line is irregular (a blank
    line, a wrong number of fields) or the text is not UTF-8: the Python path then reads
    the block and names the line."""
    import pyarrow as pa
    import pyarrow.csv as pcsv

    names = [f"c{i}" for i in range(len(header))]
    irregular = []

    def handler(row):
        irregular.append(row.number)
        return "skip"

    try:
        table = pcsv.read_csv(
            pa.py_buffer(blk),
            read_options=pcsv.ReadOptions(column_names=names, use_threads=True,
                                          block_size=1 << 20),
            parse_options=pcsv.ParseOptions(invalid_row_handler=handler,
                                            ignore_empty_lines=False),
            convert_options=pcsv.ConvertOptions(column_types={c: pa.string() for c in names},
                                                strings_can_be_null=False,
                                                quoted_strings_can_be_null=False))
    except (pa.ArrowInvalid, UnicodeDecodeError):
        return None
    return None if irregular else table


def _clean_arrow(b: Builder, cols: list, shape, strip: bool, has_eq: bool):
    """The Arrow twin of :func:`_clean_rows`: the caller's half of the clean test
    (non-empty ids, no tie) and the encoded ids, for :func:`_arrow.add_rows`."""
    import pyarrow.compute as pc

    _, iw, ir, it = shape

    def trim(a):
        return pc.utf8_trim(a, characters=_arrow.PY_WHITESPACE) if strip else a

    worker = trim(cols[iw])
    ranking = cols[ir]
    pieces = pc.split_pattern(ranking, ">")
    flat = trim(pc.list_flatten(pieces))
    # no nulls here (strings_can_be_null=False); NumPy comparisons, since a compute call
    # with a Python scalar imports pandas (see _arrow.ints)
    lengths = _arrow.ints(pc.list_value_length(pieces))
    ok = _arrow.ints(pc.binary_length(worker)) > 0
    if has_eq:
        ok &= ~_arrow.bools(pc.match_substring(ranking, "="))
    empty_item = _arrow.ints(pc.binary_length(flat)) == 0
    if empty_item.any():
        ok[np.repeat(np.arange(len(lengths)), lengths)[empty_item]] = False
    tasks = None
    if it is not None:
        task = trim(cols[it])
        ok &= _arrow.ints(pc.binary_length(task)) > 0
        if b.keep_task:     # task ids are often unique per row: no dictionary
            tasks = task.to_numpy(zero_copy_only=False).astype(object)
    icodes, items = _arrow.encode(flat)
    wcodes, workers = _arrow.encode(worker)
    return ok, icodes, items, lengths, wcodes, workers, tasks


def _arrow_rows(b: Builder, g: _Groups, header, shape, table, line: int, blk: bytes):
    strip = not blk.isascii() or any(c in blk for c in _ASCII_SPACE)
    has_eq = b"=" in blk
    cols = [c.combine_chunks() for c in table.columns]
    n = table.num_rows
    s = 0
    while s < n:
        e = min(s + g.room(), n)
        part = [c.slice(s, e - s) for c in cols]
        ok, icodes, items, lengths, wcodes, workers, tasks = _clean_arrow(
            b, part, shape, strip, has_eq)

        def row(i, part=part, first=line + s):
            cells = [c[i].as_py() for c in part]
            if not "".join(cells).strip():      # a line of empty fields: a blank line
                b.skip_blank()
                return
            _add_row(b, first + i, cells, header, shape)

        blank0 = b.blank
        _arrow.add_rows(b, ok, icodes, items, lengths, wcodes, workers, tasks, row)
        if g.add((e - s) - (b.blank - blank0)):
            yield g.block
        s = e


def _python_block(path: Path, b: Builder, g: _Groups, header, shape, blk: bytes, line: int):
    """One byte block read by :mod:`csv` (lines numbered from ``line``)."""
    try:
        text = blk.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise decode_error(path, b.source, exc) from None
    rows = _csv_rows(io.StringIO(text, newline=""), b, line - 1)
    yield from _parse_python(b, g, rows, header, shape)


def _python_rest(path: Path, b: Builder, g: _Groups, header, shape, offset: int, line: int):
    """The rest of the file from byte ``offset`` (physical line ``line``) read by :mod:`csv`."""
    with path.open("rb") as raw:
        raw.seek(offset)
        text = io.TextIOWrapper(raw, encoding="utf-8", newline="")
        try:
            yield from _parse_python(b, g, _csv_rows(text, b, line - 1), header, shape)
        except UnicodeDecodeError as exc:
            raise decode_error(path, b.source, exc) from None


def _csv_rows(fh, b: Builder, before: int):
    """:func:`crowdrank.models.io._base.csv_rows` on an open text ``fh`` whose first line is line
    ``before + 1`` of the file, past the header."""
    reader = csv.reader(fh)
    try:
        for row in reader:
            if not row or not "".join(row).strip():
                b.skip_blank()
                continue
            yield before + reader.line_num, row
    except csv.Error as exc:
        raise DataError(f"malformed line: {exc}", b.source, before + reader.line_num) from None


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

    Parameters
    ----------
    data : Rankings
        The data.
    path : str or Path
        The file.
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

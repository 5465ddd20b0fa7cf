"""The vectorised half of the Arrow readers (rankings CSV, Parquet): rows whose ids are
dictionary-encoded are checked with array operations and added in runs; every other row
goes through the caller's row-by-row path, which has the exact error message.

A row is *clean* when the row path would add it unchanged as one tie-free ranking and
raise nothing: ``2 <= k <= LONG``, no item twice, every id non-empty and, when the
universe is fixed, known. The callers check emptiness and ties (they know how their
format spells them); :func:`add_rows` checks the rest and adds runs of clean rows between
the others in file order, so the result equals the row path's (tested).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ._base import Builder

LONG = 64        # rankings longer than this take the row path (keeps the table below small)

#: Every character ``str.strip()`` removes; Arrow's ``utf8_trim`` with exactly this set
#: strips as Python does (Arrow's own notion of white space differs on a few characters).
#: (Written out: computing it takes 0.15 s at import; a test recomputes it.)
PY_WHITESPACE = ("\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003"
                 "\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")


def encode(arr):
    """``(codes, uniques)`` of an Arrow string array: codes in order of first appearance
    (Arrow's dictionary encoding keeps that order), nulls as code 0 (callers mark them)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if not pa.types.is_dictionary(arr.type):
        arr = pc.dictionary_encode(arr)
    return ints(arr.indices), arr.dictionary.to_pylist()


# Arrow arrays to NumPy, read off their buffers. Arrow's own ``to_numpy`` / ``__array__``
# (and any compute call given a Python scalar) import pandas, which costs about as much
# CPU as reading and fitting the paper's 450,000 rankings; the readers need neither.
def _bits(buf, offset: int, n: int) -> np.ndarray:
    """``n`` bits of an Arrow bitmap from bit ``offset`` (least significant bit first)."""
    raw = np.frombuffer(buf, np.uint8, count=(offset % 8 + n + 7) // 8, offset=offset // 8)
    return np.unpackbits(raw, bitorder="little")[offset % 8:offset % 8 + n].view(bool)


def _array(arr):
    import pyarrow as pa
    return arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr


def valid(arr) -> np.ndarray:
    """Which entries of an Arrow array are not null (``arr.is_valid()`` as NumPy)."""
    arr = _array(arr)
    buf = arr.buffers()[0]
    if not len(arr) or buf is None or not arr.null_count:
        return np.ones(len(arr), dtype=bool)
    return _bits(buf, arr.offset, len(arr)).copy()


def ints(arr, fill: int = 0) -> np.ndarray:
    """An Arrow integer array as int64 NumPy, nulls as ``fill``."""
    import pyarrow as pa

    arr = _array(arr)
    n = len(arr)
    if not n:
        return np.zeros(0, dtype=np.int64)
    kind = "i" if pa.types.is_signed_integer(arr.type) else "u"
    dt = np.dtype(f"{kind}{arr.type.bit_width // 8}")
    out = np.frombuffer(arr.buffers()[1], dt, count=n, offset=arr.offset * dt.itemsize)
    out = out.astype(np.int64)
    if arr.null_count:
        out[~valid(arr)] = fill
    return out


def bools(arr, fill: bool = False) -> np.ndarray:
    """An Arrow boolean array as NumPy, nulls as ``fill``."""
    arr = _array(arr)
    n = len(arr)
    if not n:
        return np.zeros(0, dtype=bool)
    out = _bits(arr.buffers()[1], arr.offset, n).copy()
    if arr.null_count:
        out[~valid(arr)] = fill
    return out


def duplicated(codes: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Per row, whether an item appears twice (rows longer than :data:`LONG` are compared
    on their first ``LONG`` items only; they take the row path anyway)."""
    m = len(lengths)
    if not m or not len(codes):
        return np.zeros(m, dtype=bool)
    K = int(min(max(int(lengths.max()), 1), LONG))
    starts = np.cumsum(lengths) - lengths
    # padding gets distinct negative values so that it never looks like a repeat
    table = np.empty((K, m), dtype=np.int64)
    for p in range(K):
        has = lengths > p
        table[p] = np.where(has, codes[np.minimum(starts + p, len(codes) - 1)], -1 - p)
    if K <= 12:    # few positions: compare every pair (much faster than sorting columns)
        dup = np.zeros(m, dtype=bool)
        for p in range(K):
            for q in range(p + 1, K):
                dup |= table[p] == table[q]
        return dup
    table.sort(axis=0)
    return np.any(table[1:] == table[:-1], axis=0)


def add_rows(b: Builder, ok: np.ndarray, icodes: np.ndarray, items: Sequence[str],
             lengths: np.ndarray, wcodes: np.ndarray, workers: Sequence[str],
             tasks: np.ndarray | None, row: Callable[[int], None]) -> None:
    """Add ``m`` rows to ``b`` in order: clean runs as arrays, the others by ``row(i)``.

    ``icodes`` are the rows' item codes back to back (into ``items``), ``lengths`` their
    ``k``, ``wcodes`` the worker codes (into ``workers``), ``tasks`` the task ids (object
    array) or ``None``; ``ok`` is the caller's verdict on emptiness and ties.
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    m = len(lengths)
    ok = ok & (lengths >= 2) & (lengths <= LONG)
    ok &= ~duplicated(icodes, lengths)
    iglob = b.lookup(items, "item")
    wglob = b.lookup(workers, "worker")
    if b.fixed_items:
        row_of = np.repeat(np.arange(m), lengths)
        ok[row_of[iglob[icodes] < 0]] = False
    if b.fixed_workers:
        ok &= wglob[wcodes] >= 0
    ends = np.cumsum(lengths)
    starts = ends - lengths
    i = 0
    for j in np.flatnonzero(~ok).tolist() + [m]:
        if j > i:
            ic = b.assign(iglob, items, icodes[starts[i]:ends[j - 1]], "item")
            wc = b.assign(wglob, workers, wcodes[i:j], "worker")
            b.add_encoded(ic, lengths[i:j], wc, None if tasks is None else tasks[i:j])
        if j < m:
            row(j)
        i = j + 1

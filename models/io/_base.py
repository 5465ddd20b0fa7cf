"""What every reader shares: the builder of :class:`Rankings`, text decoding with located
errors, header checks, id checks for the writers.

The builder maps ids to dense indices in order of first appearance, validates each
ranking and counts what is skipped; readers feed it one ranking at a time
(:meth:`Builder.add`) or, for clean tie-free rows, a block at a time
(:meth:`Builder.add_many`), which gives the same result faster.
"""

from __future__ import annotations

import codecs
import csv
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np

from ..data import PAD, DataError, Rankings, split_ties

FORBIDDEN_IN_IDS = (">", "=")


# =============================================================================== building
class Builder:
    """Accumulates parsed rankings, maps ids to dense indices, validates each ranking.

    ``items``/``workers`` fix the id universe (an id outside it is an error). With
    ``invalid="skip"`` a ranking whose *content* is bad (an item twice, k < 2, an empty
    item id) is skipped, and counted and listed in the notes, instead of raising.
    """

    def __init__(self, source: str, items: Sequence[str] | None = None,
                 workers: Sequence[str] | None = None, invalid: str = "error",
                 keep_task: bool = True):
        if invalid not in ("error", "skip"):
            raise ValueError(f"invalid must be 'error' or 'skip', got {invalid!r}")
        self.invalid = invalid
        self.skipped: list[tuple[int | None, str]] = []   # (line, reason) of skipped rankings
        self.source = source
        self.fixed_items = items is not None
        self.fixed_workers = workers is not None
        self.item_index: dict[str, int] = {}
        self.worker_index: dict[str, int] = {}
        for it in items or ():
            self.item_index.setdefault(str(it), len(self.item_index))
        for w in workers or ():
            self.worker_index.setdefault(str(w), len(self.worker_index))
        self.notes: list[str] = []  # format notes added by the parsers
        self.ties_split = 0
        self.n_source = 0          # input rankings so far (after PrefLib count expansion)
        self.blank = 0             # blank lines skipped (reported in notes)
        self.has_task = False
        # a streaming fit needs no task ids: they are still checked but not kept, which
        # saves a Python string per ranking
        self.keep_task = keep_task
        self._reset()

    def _reset(self):
        # rankings are kept as array blocks; single rankings go to lists first
        self.parts: list[tuple[np.ndarray, ...]] = []
        self.flat: list[int] = []
        self.lengths: list[int] = []
        self.worker: list[int] = []
        self.task: list[str | None] = []
        self.origin: list[int] = []
        self.n_rows = 0
        self.chunk_ties = 0
        self.chunk_blank = 0
        self.skip_mark = len(self.skipped)

    def __len__(self):
        return self.n_rows

    def skip_blank(self):
        self.blank += 1
        self.chunk_blank += 1

    # ------------------------------------------------------------------ ids
    def worker_id(self, w: str, line: int | None) -> int:
        if not w:
            raise DataError("empty worker id", self.source, line)
        j = self.worker_index.get(w)
        if j is None:
            if self.fixed_workers:
                raise DataError(f"unknown worker id {w!r}", self.source, line)
            j = self.worker_index[w] = len(self.worker_index)
        return j

    def known(self, ids: Iterable[str], kind: str) -> np.ndarray:
        """Whether each id is in the fixed universe of ``kind`` (all True when not fixed)."""
        fixed, index = ((self.fixed_items, self.item_index) if kind == "item"
                        else (self.fixed_workers, self.worker_index))
        ids = list(ids)
        if not fixed:
            return np.ones(len(ids), dtype=bool)
        return np.fromiter((x in index for x in ids), dtype=bool, count=len(ids))

    def _codes(self, values: np.ndarray, kind: str) -> np.ndarray:
        """Dense indices of ``values``, new ids appended in order of first appearance."""
        index = self.item_index if kind == "item" else self.worker_index
        fixed = self.fixed_items if kind == "item" else self.fixed_workers
        import pandas as pd  # lazily: the CLI imports this module for --help

        local, uniques = pd.factorize(values, sort=False)
        glob = np.empty(len(uniques), dtype=np.int64)
        for u, x in enumerate(uniques.tolist()):
            j = index.get(x)
            if j is None:
                if fixed:  # callers check the universe first; this is a safety net
                    raise DataError(f"unknown {kind} id {x!r}", self.source)
                j = index[x] = len(index)
            glob[u] = j
        return glob[local]

    # ------------------------------------------------------------------ one ranking
    def add(self, line: int | None, worker: str, groups: list[list[str]],
            task: str | None = None, count: int = 1) -> None:
        """One input ranking given as tie groups (best first), repeated ``count`` times."""
        if self.invalid == "error":
            return self._add(line, worker, groups, task, count)
        try:
            self.check(line, groups)
        except DataError as exc:
            self.skipped.extend([(line, exc.reason)] * count)
            return None
        return self._add(line, worker, groups, task, count)

    def check(self, line, groups) -> list[str]:
        """The ranking-content checks (an item twice, k < 2, an empty item id)."""
        src = self.source
        flat_ids = [x for g in groups for x in g]
        for x in flat_ids:
            if not x:
                raise DataError("empty item id in a ranking", src, line)
        if len(set(flat_ids)) != len(flat_ids):
            seen = set()
            for x in flat_ids:
                if x in seen:
                    raise DataError(f"item {x!r} appears twice in one ranking", src, line)
                seen.add(x)
        if len(groups) < 2:
            extra = " (after splitting ties)" if len(flat_ids) >= 2 else ""
            raise DataError(f"a ranking needs at least 2 items{extra}, got {len(groups)}",
                            src, line)
        return flat_ids

    def _add(self, line, worker, groups, task, count) -> None:
        src = self.source
        flat_ids = self.check(line, groups)
        idx = self.item_index
        ids = []
        for x in flat_ids:
            j = idx.get(x)
            if j is None:
                if self.fixed_items:
                    raise DataError(f"unknown item id {x!r}", src, line)
                j = idx[x] = len(idx)
            ids.append(j)
        w = self.worker_id(worker, line)
        if task is not None:
            if not task:
                raise DataError("empty task id", src, line)
            if self.keep_task:
                self.has_task = True
            else:
                task = None
        if len(flat_ids) != len(groups):  # tied: split ([Pan18], appendix 1.3)
            pos = dict(zip(flat_ids, ids))
            rankings = [[pos[x] for x in r] for r in split_ties(groups)]
            self.ties_split += count
            self.chunk_ties += count
        else:
            rankings = [ids]
        for _ in range(count):
            for r in rankings:
                self.flat.extend(r)
                self.lengths.append(len(r))
                self.worker.append(w)
                self.task.append(task)
                self.origin.append(self.n_source)
                self.n_rows += 1
            self.n_source += 1

    # ------------------------------------------------------------------ a block
    def add_many(self, workers: np.ndarray, flat: np.ndarray, lengths: np.ndarray,
                 tasks: np.ndarray | None = None) -> None:
        """Clean, tie-free rankings at once: ``flat`` holds their item ids back to back,
        ``lengths`` their ``k``. The caller has checked them as :meth:`check` would (and
        the universe, when fixed), so the result is the one :meth:`add` would give."""
        n = len(lengths)
        if not n:
            return
        self._flush()
        icode = self._codes(np.asarray(flat, dtype=object), "item")
        wcode = self._codes(np.asarray(workers, dtype=object), "worker")
        if tasks is not None and self.keep_task:
            self.has_task = True
            tasks = np.asarray(tasks, dtype=object)
        else:
            tasks = np.full(n, None, dtype=object)
        origin = self.n_source + np.arange(n, dtype=np.int64)
        self.parts.append((icode.astype(np.int32), np.asarray(lengths, dtype=np.int32),
                           wcode.astype(np.int32), tasks, origin))
        self.n_source += n
        self.n_rows += n

    def lookup(self, values: Sequence[str], kind: str) -> np.ndarray:
        """Dense index of each id in ``values`` (``-1`` for an id not seen yet)."""
        index = self.item_index if kind == "item" else self.worker_index
        get = index.get
        return np.fromiter((get(x, -1) for x in values), dtype=np.int64, count=len(values))

    def assign(self, glob: np.ndarray, uniques: Sequence[str], local: np.ndarray,
               kind: str) -> np.ndarray:
        """Global indices of the local codes ``local`` (into ``uniques``), giving ids not
        seen yet (``glob == -1``) new indices in order of first appearance in ``local``.
        ``glob`` is updated in place; the caller has checked fixed universes."""
        codes = glob[local]
        unseen = codes < 0
        if unseen.any():
            index = self.item_index if kind == "item" else self.worker_index
            first = np.full(len(glob), len(local), dtype=np.int64)
            np.minimum.at(first, local[unseen], np.flatnonzero(unseen))
            new = np.flatnonzero(first < len(local))
            for u in new[np.argsort(first[new])].tolist():   # order of first appearance
                j = index.get(uniques[u])      # the row path may have added it meanwhile
                if j is None:
                    j = index[uniques[u]] = len(index)
                glob[u] = j
            codes = glob[local]
        return codes

    def add_encoded(self, icode: np.ndarray, lengths: np.ndarray, wcode: np.ndarray,
                    tasks: np.ndarray | None = None) -> None:
        """Clean, tie-free rankings whose ids are already dense indices (:meth:`assign`):
        ``icode`` holds their items back to back, ``lengths`` their ``k``. The result is
        the one :meth:`add` would give, row by row."""
        n = len(lengths)
        if not n:
            return
        self._flush()
        if tasks is not None and self.keep_task:
            self.has_task = True
            tasks = np.asarray(tasks, dtype=object)
        else:
            tasks = np.full(n, None, dtype=object)
        origin = self.n_source + np.arange(n, dtype=np.int64)
        self.parts.append((np.asarray(icode, dtype=np.int32), np.asarray(lengths, np.int32),
                           np.asarray(wcode, dtype=np.int32), tasks, origin))
        self.n_source += n
        self.n_rows += n

    def _flush(self) -> None:
        if self.lengths:
            self.parts.append((np.asarray(self.flat, dtype=np.int32),
                               np.asarray(self.lengths, dtype=np.int32),
                               np.asarray(self.worker, dtype=np.int32),
                               np.asarray(self.task, dtype=object),
                               np.asarray(self.origin, dtype=np.int64)))
            self.flat, self.lengths, self.worker, self.task, self.origin = [], [], [], [], []

    # ------------------------------------------------------------------ the result
    def take(self, notes: Iterable[str] = (), chunk: bool = False) -> Rankings:
        """The rankings gathered so far (or since the last chunk) as a :class:`Rankings`."""
        self._flush()
        cols = list(zip(*self.parts)) if self.parts else [()] * 5
        flat, lengths, worker, task, origin = (
            np.concatenate(c) if c else np.zeros(0, dt)
            for c, dt in zip(cols, (np.int32, np.int32, np.int32, object, np.int64)))
        N = len(lengths)
        K = max(int(lengths.max()) if N else 2, 2)
        order = np.full((K, N), PAD, dtype=np.int32)
        if N:
            starts = np.repeat(np.cumsum(lengths) - lengths, lengths)
            pos = np.arange(len(flat)) - starts
            order[pos, np.repeat(np.arange(N), lengths)] = flat
        ties = self.chunk_ties if chunk else self.ties_split
        blank = self.chunk_blank if chunk else self.blank
        notes = list(self.notes) + list(notes)
        if ties:
            notes.append(f"split {ties} tied ranking(s) into tie-free rankings "
                         "([Pan18], appendix 1.3)")
        if blank:
            notes.append(f"skipped {blank} blank line(s)")
        skipped = self.skipped[self.skip_mark:] if chunk else self.skipped
        if skipped:
            shown = "; ".join(f"line {ln}: {r}" for ln, r in skipped[:10])
            notes.append(f"skipped {len(skipped)} invalid ranking(s) (invalid='skip'): "
                         f"{shown}" + (" ..." if len(skipped) > 10 else ""))
        out = Rankings(
            items=tuple(self.item_index), workers=tuple(self.worker_index), order=order,
            lengths=lengths, worker=worker, task=task if self.has_task else None,
            origin=origin, ties_split=ties, source=self.source, notes=tuple(notes))
        if chunk:
            self.notes = []
            self._reset()
        return out

    def nothing_read(self) -> DataError:
        """The error for a source that gave no ranking at all (never an empty result)."""
        why = "no rankings in the file"
        if self.skipped:
            why += f": all {len(self.skipped)} were invalid and skipped (invalid='skip')"
        elif self.blank:
            why += f" (only {self.blank} blank line(s) besides any header)"
        return DataError(why, self.source)


def split_ranking(text: str) -> list[list[str]]:
    """``"a > b = c > d"`` → ``[["a"], ["b", "c"], ["d"]]`` (ids stripped)."""
    return [[x.strip() for x in part.split("=")] for part in text.split(">")]


# =============================================================================== text
def decode_error(path: Path, source: str, exc: UnicodeDecodeError) -> DataError:
    """A :class:`DataError` for a file that is not UTF-8, naming the line and byte.

    Text is decoded in blocks, so the position in ``exc`` is not a position in the file;
    the file is scanned again, line by line, to find the first undecodable line.
    """
    try:
        with path.open("rb") as fh:
            for line, raw in enumerate(fh, start=1):
                if line == 1 and raw.startswith(codecs.BOM_UTF8):
                    raw = raw[len(codecs.BOM_UTF8):]
                try:
                    raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    return DataError(
                        f"not UTF-8 text: byte 0x{raw[e.start]:02x} at character "
                        f"{len(raw[:e.start].decode('utf-8', 'replace')) + 1} of the line "
                        f"cannot be decoded ({e.reason}); save the file as UTF-8",
                        source, line)
    except OSError:
        pass
    return DataError(f"not UTF-8 text ({exc.reason}); save the file as UTF-8", source)


def text_lines(path: Path, source: str | None = None) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of a UTF-8 file (an optional BOM is dropped); a byte that
    is not UTF-8 is a :class:`DataError` naming the file and the line."""
    source = source or str(path)
    with path.open(encoding="utf-8-sig") as fh:
        try:
            yield from enumerate(fh, start=1)
        except UnicodeDecodeError as exc:
            raise decode_error(path, source, exc) from None


def csv_rows(path: Path, b: Builder) -> Iterator[tuple[int, list[str]]]:
    """``(line, [cells])`` for every non-blank row after the header; the header first.

    Blank rows (no cell with text) are counted on the builder, never dropped silently.
    """
    with path.open(newline="", encoding="utf-8-sig") as fh:
        reader = csv.reader(fh)
        try:
            try:
                header = next(reader)
            except StopIteration:
                raise DataError("empty file (no header)", b.source, 1) from None
            yield 1, header
            for row in reader:
                if not row or not "".join(row).strip():
                    b.skip_blank()
                    continue
                yield reader.line_num, row
        except UnicodeDecodeError as exc:
            raise decode_error(path, b.source, exc) from None
        except csv.Error as exc:
            raise DataError(f"malformed line: {exc}", b.source, reader.line_num) from None


def first_line(path: Path) -> str:
    """The first non-blank line of a text file, stripped ("" for an empty file)."""
    for _, text in text_lines(path):
        if text.strip():
            return text.strip()
    return ""


def columns(header: list[str], required: Sequence[str], optional: Sequence[str],
            source: str, fmt: str) -> dict[str, int]:
    """Column name → index, refusing unknown, duplicated and missing columns."""
    cols = [c.strip().lower() for c in header]
    allowed = set(required) | set(optional)
    for c in cols:
        if c not in allowed:
            raise DataError(f"unexpected column {c!r} in the header of a {fmt} file; expected "
                            f"{','.join(required)}" + (f" (optional {','.join(optional)})"
                                                       if optional else ""), source, 1)
    if len(set(cols)) != len(cols):
        raise DataError("a column appears twice in the header", source, 1)
    missing = [c for c in required if c not in cols]
    if missing:
        raise DataError(f"the header lacks column(s) {missing}; expected "
                        f"{','.join(required)}", source, 1)
    return {c: i for i, c in enumerate(cols)}


# =============================================================================== writing
def check_ids(ids: Iterable[str], what: str, forbidden=FORBIDDEN_IN_IDS) -> None:
    """Refuse ids that would not survive a write and a re-read."""
    for x in ids:
        if x != x.strip() or not x:
            raise DataError(f"{what} id {x!r} is empty or has surrounding white space and "
                            "would not survive a round trip", "<writer>")
        for ch in forbidden:
            if ch in x:
                raise DataError(f"{what} id {x!r} contains {ch!r}, which the rankings CSV "
                                "uses as a separator", "<writer>")


def ranking_strings(data: Rankings, order: np.ndarray | None = None,
                    lengths: np.ndarray | None = None) -> np.ndarray:
    """``a>b>c`` for every column, vectorised per ranking length."""
    import pandas as pd

    order = data.order if order is None else order
    lengths = data.lengths if lengths is None else lengths
    items = np.asarray(data.items, dtype=object)
    out = np.empty(order.shape[1], dtype=object)
    for k in np.unique(lengths):
        sel = np.flatnonzero(lengths == k)
        cols = [items[order[p, sel]] for p in range(int(k))]
        out[sel] = pd.Series(cols[0]).str.cat(cols[1:], sep=">").to_numpy()
    return out

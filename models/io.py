"""Readers and writers for rankings, ground truth, worker truth and gold tasks, and loaders
for the shared real data sets (DESIGN.md §1).

Formats (``fmt=`` names; :func:`read_rankings` detects them from the extension and the
header when ``fmt`` is not given):

``rankings-csv``
    Header ``worker,ranking`` with an optional ``task`` column (any column order).
    ``ranking`` is item ids joined by ``>``, best first: ``a>b>c``. ``=`` inside a ranking
    marks a tie group, ``a>b=c>d``; a tied ranking is split as the seed paper's appendix
    1.3 does (:func:`models.data.split_ties`: ``a>b>d`` and ``a>c>d``) and the number of
    split input rankings is :attr:`Rankings.ties_split`. Ids are stripped of surrounding
    white space.
``pairwise-csv``
    crowd-kit's convention: header ``worker,left,right,label`` (optional ``task``);
    ``label`` is the winner and must be ``left`` or ``right``.
``wide-csv``
    Header ``worker,rank1,rank2,...`` (optional ``task``): one item per column, best
    first; trailing cells may be empty for shorter rankings (the BabyFace CSV export).
``worker-winner-loser``
    White-space separated ``worker winner loser`` per line, no header (the CrowdBT
    paper's ``all_pair.txt``); detected for ``.txt`` files whose first line has three
    fields and no comma.
``preflib``
    PrefLib ``.soc/.soi/.toc/.toi`` (the 2022 format: ``# KEY: value`` metadata, then
    ``count: a,b,{c,d},e``). Counts are expanded. Ties (``{..}``, only allowed in
    ``.toc/.toi``) are split as above. PrefLib carries no worker ids, so the loader makes
    them up, by the option ``workers``: ``"single"`` (default) gives every ranking of the
    file one pseudo-worker named after the file (one crowd-wide η for COUPLE/CrowdBT);
    ``"per-ranking"`` gives every expanded ranking its own worker ``<file>:<j>`` (each
    worker then has one ranking and its η is informed by the prior alone). ``item_ids``
    is ``"number"`` (default, the alternative's number) or ``"name"``.
``mat``
    A MATLAB file whose variable ``var`` (default ``data``) is a numeric matrix with the
    worker in the first column and the items best first in the others (BabyFace.mat).

Blank lines are skipped on purpose: they are counted and reported in
:attr:`Rankings.notes` (never silently). Every other irregularity is a
:class:`~models.data.DataError` naming the file, the line and the reason.

Tie splitting: every ranking produced by splitting keeps its input ranking's worker, task
and line, and :attr:`Rankings.origin` maps it to the index of its *input* ranking (so that
per-ranking log-likelihoods can be summed back to the source rankings). With no ties
``origin`` is the identity.

Streaming: :func:`iter_rankings_chunks` yields the rankings of a line-based file
(``rankings-csv``, ``pairwise-csv``, ``wide-csv``, ``worker-winner-loser``) in chunks of
``chunk_size`` input rows, each chunk a :class:`Rankings` whose ``items``/``workers`` are
the ids seen *so far*: indices are stable across chunks (each chunk's id tuples are a
prefix of the next chunk's), so an online learner can keep its state arrays and append.
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .data import PAD, DataError, Rankings, align_scores, split_ties

__all__ = [
    "DATASETS",
    "FORMATS",
    "WorkerTruth",
    "datasets_root",
    "detect_format",
    "iter_rankings_chunks",
    "load_dataset",
    "read_data",
    "read_gold",
    "read_rankings",
    "read_truth",
    "read_truth_scores",
    "read_worker_truth",
    "write_gold",
    "write_pairwise",
    "write_rankings",
    "write_truth",
    "write_worker_truth",
]

FORMATS = ("rankings-csv", "pairwise-csv", "wide-csv", "worker-winner-loser", "preflib", "mat")
LINE_FORMATS = ("rankings-csv", "pairwise-csv", "wide-csv", "worker-winner-loser")
PREFLIB_EXTS = (".soc", ".soi", ".toc", ".toi")
DATASETS = ("babyface", "readlevel", "preflib-dots", "preflib-puzzle")
TRUTH_SCORE_COLUMNS = ("score", "ground_truth_score")

_FORBIDDEN_IN_IDS = (">", "=")


# =============================================================================== building
class _Builder:
    """Accumulates parsed rankings, maps ids to dense indices, validates each ranking."""

    def __init__(self, source: str, items: Sequence[str] | None = None,
                 workers: Sequence[str] | None = None, invalid: str = "error"):
        if invalid not in ("error", "skip"):
            raise ValueError(f"invalid must be 'error' or 'skip', got {invalid!r}")
        self.invalid = invalid
        self.skipped: list[tuple[int | None, str]] = []   # (line, reason) of skipped rankings
        self.skip_mark = 0
        self.source = source
        self.fixed_items = items is not None
        self.fixed_workers = workers is not None
        self.item_index: dict[str, int] = {}
        self.worker_index: dict[str, int] = {}
        for it in items or ():
            self.item_index.setdefault(str(it), len(self.item_index))
        for w in workers or ():
            self.worker_index.setdefault(str(w), len(self.worker_index))
        self.ties_split = 0
        self.n_source = 0          # input rankings so far (after PrefLib count expansion)
        self.blank = 0             # blank lines skipped (reported in notes)
        self.has_task = False
        self._reset()

    def _reset(self):
        self.flat: list[int] = []
        self.lengths: list[int] = []
        self.worker: list[int] = []
        self.task: list[str] = []
        self.origin: list[int] = []
        self.chunk_ties = 0
        self.chunk_blank = 0
        self.skip_mark = len(self.skipped)

    def __len__(self):
        return len(self.lengths)

    def worker_id(self, w: str, line: int | None) -> int:
        if not w:
            raise DataError("empty worker id", self.source, line)
        j = self.worker_index.get(w)
        if j is None:
            if self.fixed_workers:
                raise DataError(f"unknown worker id {w!r}", self.source, line)
            j = self.worker_index[w] = len(self.worker_index)
        return j

    def add(self, line: int | None, worker: str, groups: list[list[str]],
            task: str | None = None, count: int = 1) -> None:
        """One input ranking given as tie groups (best first), repeated ``count`` times."""
        if self.invalid == "error":
            return self._add(line, worker, groups, task, count)
        try:
            self._check(line, groups)
        except DataError as exc:
            self.skipped.extend([(line, exc.reason)] * count)
            return None
        return self._add(line, worker, groups, task, count)

    def _check(self, line, groups) -> list[str]:
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
        flat_ids = self._check(line, groups)
        idx = self.item_index
        try:
            ids = [idx[x] for x in flat_ids]
        except KeyError:
            ids = []
            for x in flat_ids:
                j = idx.get(x)
                if j is None:
                    if self.fixed_items:
                        raise DataError(f"unknown item id {x!r}", src, line) from None
                    j = idx[x] = len(idx)
                ids.append(j)
        w = self.worker_id(worker, line)
        if task is not None:
            if not task:
                raise DataError("empty task id", src, line)
            self.has_task = True
        tied = len(flat_ids) != len(groups)
        if tied:
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
            self.n_source += 1

    def take(self, notes: Iterable[str] = (), chunk: bool = False) -> Rankings:
        """The rankings gathered so far (or since the last chunk) as a :class:`Rankings`."""
        lengths = np.asarray(self.lengths, dtype=np.int32)
        N = len(lengths)
        K = max(int(lengths.max()) if N else 2, 2)
        order = np.full((K, N), PAD, dtype=np.int32)
        if N:
            flat = np.asarray(self.flat, dtype=np.int32)
            starts = np.repeat(np.cumsum(lengths) - lengths, lengths)
            pos = np.arange(len(flat)) - starts
            col = np.repeat(np.arange(N), lengths)
            order[pos, col] = flat
        ties = self.chunk_ties if chunk else self.ties_split
        blank = self.chunk_blank if chunk else self.blank
        notes = list(notes)
        if ties:
            notes.append(f"split {ties} tied ranking(s) into tie-free rankings "
                         "(seed 000, appendix 1.3)")
        if blank:
            notes.append(f"skipped {blank} blank line(s)")
        skipped = self.skipped[self.skip_mark:] if chunk else self.skipped
        if skipped:
            shown = "; ".join(f"line {ln}: {r}" for ln, r in skipped[:10])
            notes.append(f"skipped {len(skipped)} invalid ranking(s) (invalid='skip'): "
                         f"{shown}" + (" ..." if len(skipped) > 10 else ""))
        out = Rankings(
            items=tuple(self.item_index), workers=tuple(self.worker_index), order=order,
            lengths=lengths, worker=np.asarray(self.worker, dtype=np.int32),
            task=np.asarray(self.task, dtype=object) if self.has_task else None,
            origin=np.asarray(self.origin, dtype=np.int64), ties_split=ties,
            source=self.source, notes=tuple(notes))
        if chunk:
            self._reset()
        return out

    def skip_blank(self):
        self.blank += 1
        self.chunk_blank += 1


def _split_ranking(text: str) -> list[list[str]]:
    """``"a > b = c > d"`` → ``[["a"], ["b", "c"], ["d"]]`` (ids stripped)."""
    return [[x.strip() for x in part.split("=")] for part in text.split(">")]


# =============================================================================== detection
def _first_line(path: Path) -> str:
    with path.open(newline="", encoding="utf-8-sig") as fh:
        for line in fh:
            if line.strip():
                return line.strip()
    return ""


def _header_kind(header: list[str]) -> str | None:
    cols = [c.strip().lower() for c in header]
    s = set(cols)
    if {"worker", "ranking"} <= s:
        return "rankings-csv"
    if {"worker", "left", "right", "label"} <= s:
        return "pairwise-csv"
    if "worker" in s and any(c.startswith("rank") and c[4:].isdigit() for c in cols):
        return "wide-csv"
    return None


def detect_format(path: str | Path) -> str:
    """The ``fmt`` :func:`read_rankings` would use for ``path`` (by extension and header)."""
    path = Path(path)
    ext = path.suffix.lower()
    if ext in PREFLIB_EXTS:
        return "preflib"
    if ext == ".mat":
        return "mat"
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    first = _first_line(path)
    if "," in first:
        kind = _header_kind(next(csv.reader([first])))
        if kind:
            return kind
        raise DataError("cannot tell the format from the header "
                        f"{first[:80]!r}; expected worker,ranking[,task] or "
                        "worker,left,right,label or worker,rank1,rank2,... (or pass fmt=)",
                        str(path), 1)
    if len(first.split()) == 3:
        return "worker-winner-loser"
    raise DataError(f"cannot tell the format of this file (first line {first[:80]!r}); "
                    f"pass fmt= one of {FORMATS}", str(path), 1)


# =============================================================================== line parsers
def _csv_rows(path: Path, b: _Builder):
    """``(line, [cells])`` for every non-blank row after the header; the header first."""
    fh = path.open(newline="", encoding="utf-8-sig")
    with fh:
        reader = csv.reader(fh)
        try:
            header = next(reader)
        except StopIteration:
            raise DataError("empty file (no header)", b.source, 1) from None
        yield 1, header
        for row in reader:
            if not row or all(not c.strip() for c in row):
                b.skip_blank()
                continue
            yield reader.line_num, row


def _columns(header: list[str], required: Sequence[str], optional: Sequence[str],
             source: str, fmt: str) -> dict[str, int]:
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


def _parse_rankings_csv(path: Path, b: _Builder):
    rows = _csv_rows(path, b)
    _, header = next(rows)
    col = _columns(header, ("worker", "ranking"), ("task",), b.source, "rankings-csv")
    n, iw, ir, it = len(header), col["worker"], col["ranking"], col.get("task")
    for line, row in rows:
        if len(row) != n:
            raise DataError(f"malformed line: expected {n} fields ({','.join(header)}), "
                            f"got {len(row)}", b.source, line)
        text = row[ir].strip()
        if not text:
            raise DataError("empty ranking", b.source, line)
        b.add(line, row[iw].strip(), _split_ranking(text),
              None if it is None else row[it].strip())
        yield


def _parse_pairwise_csv(path: Path, b: _Builder):
    rows = _csv_rows(path, b)
    _, header = next(rows)
    col = _columns(header, ("worker", "left", "right", "label"), ("task",), b.source,
                   "pairwise-csv")
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
        yield


def _parse_wide_csv(path: Path, b: _Builder):
    rows = _csv_rows(path, b)
    _, header = next(rows)
    cols = [c.strip().lower() for c in header]
    rank_cols = [i for i, c in enumerate(cols) if c.startswith("rank") and c[4:].isdigit()]
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
        yield


def _parse_wwl(path: Path, b: _Builder):
    with path.open(encoding="utf-8-sig") as fh:
        for line, text in enumerate(fh, start=1):
            parts = text.split()
            if not parts:
                b.skip_blank()
                continue
            if len(parts) != 3:
                raise DataError(f"malformed line: expected 'worker winner loser', got "
                                f"{len(parts)} field(s)", b.source, line)
            b.add(line, parts[0], [[parts[1]], [parts[2]]])
            yield


_LINE_PARSERS = {
    "rankings-csv": _parse_rankings_csv,
    "pairwise-csv": _parse_pairwise_csv,
    "wide-csv": _parse_wide_csv,
    "worker-winner-loser": _parse_wwl,
}


# =============================================================================== PrefLib
def _parse_preflib_order(text: str, source: str, line: int) -> list[list[str]]:
    """``"1,{2,3},4"`` → ``[["1"], ["2", "3"], ["4"]]``."""
    groups: list[list[str]] = []
    i, s = 0, text.strip()
    while i < len(s):
        if s[i] == "{":
            j = s.find("}", i)
            if j < 0:
                raise DataError("malformed line: '{' without '}'", source, line)
            groups.append([x.strip() for x in s[i + 1:j].split(",")])
            i = j + 1
        else:
            j = s.find(",", i)
            j = len(s) if j < 0 else j
            tok = s[i:j].strip()
            if "{" in tok or "}" in tok:
                raise DataError("malformed line: misplaced brace", source, line)
            groups.append([tok])
            i = j
        rest = s[i:].lstrip()
        if rest:
            if rest[0] != ",":
                raise DataError("malformed line: expected ',' between alternatives",
                                source, line)
            i = len(s) - len(rest) + 1
            if not s[i:].strip():
                raise DataError("malformed line: trailing ','", source, line)
        else:
            break
    return groups


def _read_preflib(path: Path, b: _Builder, *, workers: str = "single",
                  item_ids: str = "number", skip_short: bool = False,
                  item_prefix: str = "") -> list[str]:
    if workers not in ("single", "per-ranking"):
        raise ValueError(f"workers must be 'single' or 'per-ranking', got {workers!r}")
    if item_ids not in ("number", "name"):
        raise ValueError(f"item_ids must be 'number' or 'name', got {item_ids!r}")
    src = b.source
    kind = path.suffix.lower()[1:]
    strict, complete = kind in ("soc", "soi"), kind in ("soc", "toc")
    names: dict[str, str] = {}
    n_alt = None
    short = 0
    stem = path.stem
    j = 0
    with path.open(encoding="utf-8-sig") as fh:
        for line, text in enumerate(fh, start=1):
            t = text.strip()
            if not t:
                b.skip_blank()
                continue
            if t.startswith("#"):
                key, _, val = t[1:].partition(":")
                key = key.strip().upper()
                if key == "NUMBER ALTERNATIVES":
                    try:
                        n_alt = int(val)
                    except ValueError:
                        raise DataError(f"bad NUMBER ALTERNATIVES {val.strip()!r}",
                                        src, line) from None
                elif key.startswith("ALTERNATIVE NAME"):
                    names[key.split()[-1]] = val.strip()
                continue
            cnt, colon, order = t.partition(":")
            if not colon:
                raise DataError("malformed line: expected 'count: a,b,...' (PrefLib 2022 "
                                "format)", src, line)
            try:
                count = int(cnt)
            except ValueError:
                raise DataError(f"malformed line: count {cnt.strip()!r} is not an integer",
                                src, line) from None
            if count < 1:
                raise DataError(f"count must be >= 1, got {count}", src, line)
            groups = _parse_preflib_order(order, src, line)
            flat = [x for g in groups for x in g]
            if strict and len(flat) != len(groups):
                raise DataError(f"a tie in a strict-order .{kind} file", src, line)
            for x in flat:
                if x and n_alt is not None and not (x.isdigit() and 1 <= int(x) <= n_alt):
                    raise DataError(f"unknown alternative {x!r} (file declares {n_alt})",
                                    src, line)
            if complete and n_alt is not None and len(set(flat)) != n_alt \
                    and len(flat) == len(set(flat)):
                raise DataError(f"a .{kind} line must rank all {n_alt} alternatives, got "
                                f"{len(flat)}", src, line)
            if skip_short and len(groups) < 2:
                short += count
                continue
            if item_ids == "name":
                groups = [[names.get(x, x) for x in g] for g in groups]
            if item_prefix:
                groups = [[item_prefix + x for x in g] for g in groups]
            if workers == "single":
                b.add(line, stem, groups, count=count)
            else:
                for _ in range(count):
                    j += 1
                    b.add(line, f"{stem}:{j}", groups)
    notes = [f"PrefLib {path.name}: no worker ids; workers={workers!r}"]
    if short:
        notes.append(f"skipped {short} ranking(s) with fewer than 2 items (skip_short=True)")
    if item_ids == "name" and len(set(names.values())) != len(names):
        raise DataError("alternative names are not unique; use item_ids='number'", src)
    return notes


def _preflib_names(path: Path) -> dict[str, str]:
    names = {}
    with path.open(encoding="utf-8-sig") as fh:
        for t in fh:
            if t.startswith("#"):
                key, _, val = t[1:].partition(":")
                if key.strip().upper().startswith("ALTERNATIVE NAME"):
                    names[key.split()[-1]] = val.strip()
    return names


def _read_mat(path: Path, b: _Builder, var: str = "data") -> None:
    from scipy.io import loadmat

    try:
        m = loadmat(str(path))
    except Exception as exc:  # noqa: BLE001 - any unreadable .mat is bad input
        raise DataError(f"not a readable MATLAB file ({exc})", b.source) from None
    if var not in m:
        raise DataError(f"no variable {var!r} in the file (has "
                        f"{[k for k in m if not k.startswith('__')]})", b.source)
    a = np.asarray(m[var])
    if a.ndim != 2 or a.shape[1] < 3:
        raise DataError(f"variable {var!r} must be a matrix worker,item1,item2,...; got "
                        f"shape {a.shape}", b.source)
    if not np.all(np.isfinite(a.astype(float))):
        raise DataError(f"variable {var!r} has non-finite entries", b.source)
    a = a.astype(np.int64)
    for n, row in enumerate(a, start=1):
        cells = [str(x) for x in row[1:] if x != 0]  # 0 pads shorter rankings
        b.add(n, str(row[0]), [[c] for c in cells])  # "line" = matrix row (1-based)


# =============================================================================== public readers
def read_rankings(path: str | Path, fmt: str | None = None, *,
                  items: Sequence[str] | None = None, worker_ids: Sequence[str] | None = None,
                  invalid: str = "error", fast: bool = True, **opts) -> Rankings:
    """Read a rankings file into a :class:`Rankings` (format detected unless ``fmt``).

    ``items``/``worker_ids`` fix the id universe (ids outside it are errors; items never
    ranked still get an index). ``invalid="skip"`` skips rankings whose *content* is bad
    (an item twice, k < 2, an empty item id) instead of raising, and counts and lists them
    in :attr:`Rankings.notes`; malformed lines and headers are always errors. ``fast``: a
    clean ``rankings-csv`` file (no ties, blanks or bad lines) is read vectorised with pandas
    (about 5x faster); anything irregular falls back to the line-by-line reader, which gives
    the exact error or note, so the result never depends on ``fast``. ``opts`` are
    format options: PrefLib ``workers``
    (``"single"``/``"per-ranking"``), ``item_ids`` (``"number"``/``"name"``),
    ``skip_short`` (count and skip rankings with < 2 items instead of an error); ``mat``
    ``var``.
    """
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{path}: is a folder, not a rankings file")
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    fmt = fmt or detect_format(path)
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; expected one of {FORMATS}")
    if fast and fmt == "rankings-csv" and not opts:
        data = _fast_rankings_csv(path, items, worker_ids)
        if data is not None:
            return data
    b = _Builder(str(path), items, worker_ids, invalid)
    notes: list[str] = []
    if fmt in _LINE_PARSERS:
        if opts:
            raise TypeError(f"format {fmt} takes no options, got {sorted(opts)}")
        for _ in _LINE_PARSERS[fmt](path, b):
            pass
    elif fmt == "preflib":
        notes = _read_preflib(path, b, **opts)
    else:
        _read_mat(path, b, **opts)
    return b.take(notes)


def _fast_rankings_csv(path: Path, items, worker_ids) -> Rankings | None:
    """Vectorised reader for a *clean* rankings CSV; ``None`` on anything irregular."""
    import pandas as pd

    try:
        df = pd.read_csv(path, dtype=object, keep_default_na=False, na_filter=False,
                         skip_blank_lines=False, encoding="utf-8-sig", engine="c")
    except Exception:  # noqa: BLE001 - any parser trouble: let the careful reader explain
        return None
    cols = [str(c).strip().lower() for c in df.columns]
    if sorted(cols) not in (["ranking", "worker"], ["ranking", "task", "worker"]) or not len(df):
        return None
    if df.isna().to_numpy().any():
        return None
    df.columns = cols
    rk = df["ranking"].astype(str)
    if rk.str.contains("=", regex=False).any():
        return None
    lengths = rk.str.count(">").to_numpy(dtype=np.int64) + 1
    if lengths.min() < 2:
        return None
    joined = ">".join(rk.tolist())
    flat = joined.split(">")
    if any(ch in joined for ch in " \t\r\n\f\v"):
        flat = [x.strip() for x in flat]
    flat = pd.Series(flat, dtype=object)
    wk = df["worker"].astype(str).str.strip()
    task = df["task"].astype(str).str.strip().to_numpy(dtype=object) if "task" in cols else None
    if (flat == "").any() or (wk == "").any() or (task is not None and (task == "").any()):
        return None

    def codes(values: pd.Series, universe):
        if universe is None:
            c, uniq = pd.factorize(values, sort=False)
            return c, tuple(uniq.tolist())
        index = {}
        for x in universe:
            index.setdefault(str(x), len(index))
        c = values.map(index)
        if c.isna().any():
            return None, None
        return c.to_numpy(dtype=np.int64), tuple(index)

    icode, item_ids = codes(flat, items)
    wcode, wids = codes(wk, worker_ids)
    if icode is None or wcode is None:
        return None
    N, K = len(lengths), int(lengths.max())
    order = np.full((K, N), PAD, dtype=np.int32)
    starts = np.repeat(np.cumsum(lengths) - lengths, lengths)
    order[np.arange(len(icode)) - starts, np.repeat(np.arange(N), lengths)] = icode
    # an item twice in one ranking: sort each column (padding made distinct) and compare
    filled = np.where(order == PAD, -1 - np.arange(K)[:, None], order)
    srt = np.sort(filled, axis=0)
    if np.any(srt[1:] == srt[:-1]):
        return None
    return Rankings(items=item_ids, workers=wids, order=order, lengths=lengths,
                    worker=wcode.astype(np.int32), task=task, source=str(path))


def iter_rankings_chunks(path: str | Path, chunk_size: int = 10_000, fmt: str | None = None,
                         *, items: Sequence[str] | None = None,
                         worker_ids: Sequence[str] | None = None,
                         invalid: str = "error") -> Iterator[Rankings]:
    """Stream a line-based rankings file in chunks of ``chunk_size`` input rows.

    Each chunk is a :class:`Rankings` over the items and workers seen so far (its
    ``items``/``workers`` tuples are prefixes of the next chunk's, so indices are stable);
    ``origin`` holds each ranking's global input-row index and ``ties_split`` the splits in
    that chunk. A bad line raises :class:`DataError` when its chunk is read; the chunks
    before it have been yielded already. Formats: ``rankings-csv``, ``pairwise-csv``,
    ``wide-csv``, ``worker-winner-loser``.
    """
    if chunk_size < 1:
        raise ValueError("chunk_size must be >= 1")
    path = Path(path)
    fmt = fmt or detect_format(path)
    if fmt not in _LINE_PARSERS:
        raise ValueError(f"streaming supports {LINE_FORMATS}, not {fmt!r}")
    b = _Builder(str(path), items, worker_ids, invalid)
    rows = 0
    for _ in _LINE_PARSERS[fmt](path, b):
        rows += 1
        if rows == chunk_size:
            yield b.take(chunk=True)
            rows = 0
    if rows or b.chunk_blank:
        yield b.take(chunk=True)


def read_truth_scores(path: str | Path) -> dict[str, float]:
    """A ground-truth CSV ``item,score`` (higher is better) as ``{item: score}``.

    ``ground_truth_score`` is accepted as the score column's name (the BabyFace export).
    Duplicate items, empty ids, non-numbers and NaN/infinite scores are errors.
    """
    path = Path(path)
    src = str(path)
    b = _Builder(src)
    rows = _csv_rows(path, b)
    _, header = next(rows)
    cols = [c.strip().lower() for c in header]
    if len(cols) != 2 or cols[0] != "item" or cols[1] not in TRUTH_SCORE_COLUMNS:
        raise DataError(f"header must be item,score; got {','.join(header)}", src, 1)
    out: dict[str, float] = {}
    for line, row in rows:
        if len(row) != 2:
            raise DataError(f"malformed line: expected 2 fields (item,score), got {len(row)}",
                            src, line)
        it, val = row[0].strip(), row[1].strip()
        if not it:
            raise DataError("empty item id", src, line)
        try:
            s = float(val)
        except ValueError:
            raise DataError(f"score {val!r} is not a number", src, line) from None
        if not math.isfinite(s):
            raise DataError(f"score of {it!r} is {val} (NaN or infinite)", src, line)
        if it in out:
            raise DataError(f"item {it!r} given twice", src, line)
        out[it] = s
    if not out:
        raise DataError("no scores in the file", src)
    return out


def read_truth(path: str | Path, data: Rankings) -> np.ndarray:
    """Ground truth aligned with ``data.items`` (higher = better).

    An item of the file unknown to ``data`` is an error (naming its line), and so is an item
    of ``data`` without a score.
    """
    path = Path(path)
    scores = read_truth_scores(path)
    known = set(data.items)
    unknown = [it for it in scores if it not in known]
    if unknown:
        # find the line of the first unknown item for the message
        with path.open(newline="", encoding="utf-8-sig") as fh:
            for line, row in enumerate(csv.reader(fh), start=1):
                if line > 1 and row and row[0].strip() == unknown[0]:
                    break
        raise DataError(f"item {unknown[0]!r} is not in the data ({len(unknown)} unknown "
                        "item(s) in all)", str(path), line)
    return align_scores(data, scores, source=str(path))


# =============================================================================== writers
def _check_ids(ids: Iterable[str], what: str, forbidden=_FORBIDDEN_IN_IDS) -> None:
    for x in ids:
        if x != x.strip() or not x:
            raise DataError(f"{what} id {x!r} is empty or has surrounding white space and "
                            "would not survive a round trip", "<writer>")
        for ch in forbidden:
            if ch in x:
                raise DataError(f"{what} id {x!r} contains {ch!r}, which the rankings CSV "
                                "uses as a separator", "<writer>")


def _ranking_strings(data: Rankings, order: np.ndarray | None = None,
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


def write_rankings(data: Rankings, path: str | Path) -> Path:
    """Write ``worker,ranking[,task]`` (vectorised; fast for 10^5-10^6 rankings).

    Rankings are written as they are held (tie-split rankings stay split, so a re-read
    reports ``ties_split = 0``).
    """
    import pandas as pd

    path = Path(path)
    _check_ids(data.items, "item")
    _check_ids(data.workers, "worker", forbidden=())
    df = pd.DataFrame({"worker": np.asarray(data.workers, dtype=object)[data.worker],
                       "ranking": _ranking_strings(data)})
    if data.task is not None:
        df["task"] = data.task
    df.to_csv(path, index=False, lineterminator="\n")
    return path


def write_pairwise(data: Rankings, path: str | Path) -> Path:
    """Write pairs (``K == 2``) in crowd-kit's ``worker,left,right,label`` convention, with
    ``left`` the winner (rank-break k-ary data first)."""
    import pandas as pd

    if data.K != 2:
        raise DataError(f"pairwise CSV holds pairs; this data has k up to {data.K} "
                        "(use data.rank_break() first)", data.source)
    _check_ids(data.items, "item", forbidden=())
    _check_ids(data.workers, "worker", forbidden=())
    items = np.asarray(data.items, dtype=object)
    df = pd.DataFrame({"worker": np.asarray(data.workers, dtype=object)[data.worker],
                       "left": items[data.order[0]], "right": items[data.order[1]],
                       "label": items[data.order[0]]})
    if data.task is not None:
        df["task"] = data.task
    df.to_csv(path, index=False, lineterminator="\n")
    return path


def write_truth(items: Sequence[str], scores: Sequence[float], path: str | Path) -> Path:
    """Write ``item,score`` (full float precision, so it reads back exactly)."""
    scores = np.asarray(scores, dtype=float)
    if len(items) != len(scores):
        raise ValueError(f"{len(items)} items but {len(scores)} scores")
    if not np.all(np.isfinite(scores)):
        raise ValueError("scores must be finite")
    _check_ids(items, "item", forbidden=())
    path = Path(path)
    with path.open("w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["item", "score"])
        w.writerows((it, repr(float(s))) for it, s in zip(items, scores))
    return path


# =============================================================================== worker truth
@dataclass(frozen=True)
class WorkerTruth:
    """Simulated workers' true parameters: type (``setting``) and ``eta`` ``(W, K)``."""

    workers: tuple[str, ...]
    settings: tuple[str, ...]
    eta: np.ndarray

    def for_data(self, data: Rankings) -> np.ndarray:
        """``eta`` rows in ``data.workers`` order."""
        index = {w: i for i, w in enumerate(self.workers)}
        missing = [w for w in data.workers if w not in index]
        if missing:
            raise DataError(f"no true η for worker(s) {missing[:5]}", "<worker truth>")
        return self.eta[[index[w] for w in data.workers]]


def write_worker_truth(workers: Sequence[str], settings: Sequence[str], eta: np.ndarray,
                       path: str | Path) -> Path:
    """Write ``worker,setting,eta_1..eta_K`` (a simulation's true worker parameters)."""
    eta = np.asarray(eta, dtype=float)
    if eta.ndim != 2 or eta.shape[0] != len(workers) or len(settings) != len(workers):
        raise ValueError("need one setting and one eta row per worker")
    path = Path(path)
    with path.open("w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["worker", "setting"] + [f"eta_{t + 1}" for t in range(eta.shape[1])])
        for wid, s, row in zip(workers, settings, eta):
            w.writerow([wid, s] + [repr(float(x)) for x in row])
    return path


def read_worker_truth(path: str | Path) -> WorkerTruth:
    """Read ``worker,setting,eta_1..eta_K``; each row must be a probability vector."""
    path = Path(path)
    src = str(path)
    b = _Builder(src)
    rows = _csv_rows(path, b)
    _, header = next(rows)
    cols = [c.strip().lower() for c in header]
    K = len(cols) - 2
    if cols[:2] != ["worker", "setting"] or K < 2 or \
            cols[2:] != [f"eta_{t + 1}" for t in range(K)]:
        raise DataError("header must be worker,setting,eta_1,...,eta_K (K >= 2)", src, 1)
    workers, settings, eta = [], [], []
    seen = set()
    for line, row in rows:
        if len(row) != len(cols):
            raise DataError(f"malformed line: expected {len(cols)} fields, got {len(row)}",
                            src, line)
        wid = row[0].strip()
        if not wid:
            raise DataError("empty worker id", src, line)
        if wid in seen:
            raise DataError(f"worker {wid!r} given twice", src, line)
        seen.add(wid)
        try:
            vals = [float(c) for c in row[2:]]
        except ValueError:
            raise DataError("an eta value is not a number", src, line) from None
        if not all(math.isfinite(v) and v >= 0 for v in vals):
            raise DataError("eta values must be finite and >= 0", src, line)
        if abs(sum(vals) - 1.0) > 1e-6:
            raise DataError(f"eta must sum to 1, sums to {sum(vals):.6g}", src, line)
        workers.append(wid)
        settings.append(row[1].strip())
        eta.append(vals)
    return WorkerTruth(tuple(workers), tuple(settings), np.array(eta, dtype=float))


# =============================================================================== gold tasks
def write_gold(gold: Rankings, true_order: np.ndarray, path: str | Path) -> Path:
    """Write gold tasks: ``worker,ranking,true_order[,task]``: what the worker reported and
    the task's true order (same items, best first). Read back with :func:`read_gold` and
    feed :meth:`models.priors.Priors.from_gold`."""
    import pandas as pd

    true_order = np.asarray(true_order)
    if true_order.shape[1] != gold.n_rankings:
        raise ValueError("true_order must be (K, N) like gold.order")
    _check_ids(gold.items, "item")
    df = pd.DataFrame({"worker": np.asarray(gold.workers, dtype=object)[gold.worker],
                       "ranking": _ranking_strings(gold),
                       "true_order": _ranking_strings(gold, true_order, gold.lengths)})
    if gold.task is not None:
        df["task"] = gold.task
    df.to_csv(path, index=False, lineterminator="\n")
    return Path(path)


def read_gold(path: str | Path) -> tuple[Rankings, np.ndarray]:
    """Read a gold CSV: ``(gold rankings, true_order (K, N))`` with ``true_order`` in the
    per-position layout over ``gold.items``, as :meth:`Priors.from_gold` expects."""
    path = Path(path)
    b = _Builder(str(path))
    rows = _csv_rows(path, b)
    _, header = next(rows)
    col = _columns(header, ("worker", "ranking", "true_order"), ("task",), b.source, "gold")
    n = len(header)
    truths: list[list[str]] = []
    for line, row in rows:
        if len(row) != n:
            raise DataError(f"malformed line: expected {n} fields, got {len(row)}",
                            b.source, line)
        rep = _split_ranking(row[col["ranking"]].strip())
        tru = [x.strip() for x in row[col["true_order"]].split(">")]
        if any(len(g) > 1 for g in rep):
            raise DataError("ties are not allowed in gold rankings", b.source, line)
        if sorted(tru) != sorted(g[0] for g in rep):
            raise DataError("true_order must hold the same items as the ranking",
                            b.source, line)
        b.add(line, row[col["worker"]].strip(), rep,
              None if "task" not in col else row[col["task"]].strip())
        truths.append(tru)
    gold = b.take()
    index = {it: i for i, it in enumerate(gold.items)}
    true_order = np.full(gold.order.shape, PAD, dtype=np.int32)
    for n_, tru in enumerate(truths):
        true_order[: len(tru), n_] = [index[x] for x in tru]
    return gold, true_order


# =============================================================================== real data sets
def datasets_root() -> Path:
    """``$CROWDRANK_DATASETS`` or ``../shared/datasets`` beside the checkout."""
    env = os.environ.get("CROWDRANK_DATASETS")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[1].parent / "shared" / "datasets"


def _need(path: Path) -> Path:
    if not path.exists():
        raise FileNotFoundError(f"{path}: missing (shared data sets are looked up in "
                                f"{datasets_root()}; set CROWDRANK_DATASETS)")
    return path


def load_dataset(name: str, root: str | Path | None = None, **opts
                 ) -> tuple[Rankings, np.ndarray | None]:
    """A shared real data set as ``(Rankings, truth aligned with items or None)``.

    Truth is oriented so that *higher = better = ranked first*:

    ``babyface``
        BabyFace (COUPLE paper): 3,074 three-item rankings, 21 workers, 18 items; truth =
        the ``ground_truth`` of the file. ``source="mat"`` (default, ``BabyFace.mat`` via
        SciPy) or ``"csv"`` (the plain export). Six rows of the file name one item twice
        (e.g. ``1 > 14 > 1``, rows 1658, 1814, 1830, 2228, 2401, 2718); they are skipped and
        listed in the notes (``invalid="skip"``, the default here; ``"error"`` refuses),
        leaving 3,068 rankings.
    ``readlevel``
        Chen et al. 2013 reading difficulty: ``all_pair.txt`` = ``worker winner loser``,
        winner = the passage judged *harder*; so "better" means harder, and truth = the
        ``doc_info.txt`` level (1-12, higher is harder; many ties). 12,728 lines, 624
        workers, 490 passages; two lines compare passage 268 with itself (lines 11995 and
        11996) and are skipped and listed in the notes (``invalid="skip"``, the default
        here), leaving 12,726 pairs. Items are in ``doc_info.txt`` order.
    ``preflib-dots`` / ``preflib-puzzle``
        PrefLib 00024 / 00025 (Mao et al. 2013): 4 files (elections) of full rankings of 4
        alternatives, best (fewest dots / fewest moves) first. ``part=None`` (default: all
        four files) or ``1..4``; items are ``<title>:<name>`` (e.g. ``all_200x3:203``), one
        set per file, so the comparison graph has one component per file. Truth = minus the
        alternative's name (dot count / moves), which is the true order by name within a
        file (info.txt) and comparable across files (equal counts tie). ``workers`` as for
        PrefLib files (default ``"single"``: one pseudo-worker per file).
    """
    root = Path(root) if root is not None else datasets_root()
    if name == "babyface":
        d = root / "babyface"
        source = opts.pop("source", "mat")
        invalid = opts.pop("invalid", "skip")
        if opts:
            raise TypeError(f"unknown options {sorted(opts)} for babyface")
        if source == "mat":
            from scipy.io import loadmat

            data = read_rankings(_need(d / "BabyFace.mat"), fmt="mat", invalid=invalid)
            gt = np.asarray(loadmat(str(d / "BabyFace.mat"))["ground_truth"], float).ravel()
            scores = {str(i + 1): float(s) for i, s in enumerate(gt)}
            truth = align_scores(data, scores, source=str(d / "BabyFace.mat"))
        elif source == "csv":
            data = read_rankings(_need(d / "babyface_rankings_from_mat.csv"), fmt="wide-csv",
                                 invalid=invalid)
            truth = read_truth(_need(d / "babyface_ground_truth_from_mat.csv"), data)
        else:
            raise ValueError("babyface source must be 'mat' or 'csv'")
        return _with_source(data, "babyface"), truth
    if name == "readlevel":
        invalid = opts.pop("invalid", "skip")
        if opts:
            raise TypeError(f"unknown options {sorted(opts)} for readlevel")
        d = root / "readlevel_chen2013"
        levels: dict[str, float] = {}
        doc = _need(d / "doc_info.txt")
        with doc.open() as fh:
            for line, text in enumerate(fh, start=1):
                parts = text.split()
                if not parts:
                    continue
                if len(parts) != 2:
                    raise DataError("malformed line: expected 'passage level'", str(doc), line)
                if parts[0] in levels:
                    raise DataError(f"passage {parts[0]!r} given twice", str(doc), line)
                try:
                    levels[parts[0]] = float(parts[1])
                except ValueError:
                    raise DataError(f"level {parts[1]!r} is not a number", str(doc),
                                    line) from None
        data = read_rankings(_need(d / "all_pair.txt"), fmt="worker-winner-loser",
                             invalid=invalid, items=list(levels))
        truth = align_scores(data, levels, source=str(doc))
        data = _with_source(data, "readlevel", "better = judged harder; truth = level "
                            "(higher = harder)")
        return data, truth
    if name in ("preflib-dots", "preflib-puzzle"):
        folder, series = (("preflib_mturk_dots", "00024") if name == "preflib-dots"
                          else ("preflib_mturk_puzzle", "00025"))
        part = opts.pop("part", None)
        wmode = opts.pop("workers", "single")
        if opts:
            raise TypeError(f"unknown options {sorted(opts)} for {name}")
        files = sorted(_need(root / folder).glob(f"{series}-*.soc"))
        if part is not None:
            files = [f for f in files if f.stem.endswith(f"{int(part):08d}")]
        if not files:
            raise FileNotFoundError(f"no {series}-*.soc file (part={part}) in {root / folder}")
        b = _Builder(name)
        notes, scores = [], {}
        for f in files:
            names = _preflib_names(f)
            title = _preflib_title(f)
            prefix = f"{title}:"
            b.source = str(f)
            notes += _read_preflib(f, b, workers=wmode, item_ids="name", item_prefix=prefix)
            for nm in names.values():
                scores[prefix + nm] = -float(nm)
        b.source = name
        notes.append("truth = -(alternative name): fewer dots/moves is better; items of "
                     "different files are different alternatives")
        data = b.take(notes)
        return data, align_scores(data, scores, source=name)
    raise ValueError(f"unknown data set {name!r}; expected one of {DATASETS}")


def _preflib_title(path: Path) -> str:
    with path.open(encoding="utf-8-sig") as fh:
        for t in fh:
            if t.upper().startswith("# TITLE:"):
                return t.partition(":")[2].strip() or path.stem
    return path.stem


def _with_source(data: Rankings, source: str, *notes: str) -> Rankings:
    return Rankings(items=data.items, workers=data.workers, order=data.order,
                    lengths=data.lengths, worker=data.worker, task=data.task,
                    origin=data.origin, ties_split=data.ties_split, source=source,
                    notes=tuple(data.notes) + notes)


def read_data(spec: str | Path, fmt: str | None = None, truth: str | Path | None = None,
              invalid: str = "error") -> tuple[Rankings, np.ndarray | None]:
    """A file path *or* a shared data set name (:data:`DATASETS`), with its truth.

    For a file, ``truth`` (a ``item,score`` CSV) is read if given; for a data set name its
    own truth is used unless ``truth`` overrides it (and ``invalid`` does not apply: the
    data sets' own defaults hold). The CLI uses this for ``FILE``.
    """
    p = Path(spec)
    if not p.exists() and str(spec) in DATASETS:
        data, t = load_dataset(str(spec))
    else:
        data, t = read_rankings(p, fmt=fmt, invalid=invalid), None
    if truth is not None:
        t = read_truth(truth, data)
    return data, t


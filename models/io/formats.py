"""The format registry: one :class:`Format` per file format, detection, and the two public
readers built on it (:func:`read_rankings`, :func:`iter_rankings_chunks`).

A format module provides ``parse(path, builder, ...)``, a generator that feeds the file's
rankings to a :class:`~crowdrank.models.io._base.Builder` and yields how many input rows it added
(streamable formats -- the line-based ones and Parquet -- take ``block``, the most rows
per step); formats recognised by their header provide ``recognises(header)``. See
``docs/data.md``.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..data import DataError, Rankings
from . import mat, pairwise_csv, parquet, preflib, rankings_csv, wide_csv, worker_winner_loser
from ._base import Builder, first_line

__all__ = ["FORMATS", "LINE_FORMATS", "PREFLIB_EXTS", "REGISTRY", "STREAM_FORMATS", "Format",
           "detect_format", "iter_rankings_chunks", "read_rankings"]


@dataclass(frozen=True)
class Format:
    """A file format: its name (``fmt=``), parser, how it is recognised, a description.

    Attributes
    ----------
    name : str
        The name ``fmt=`` takes.
    parse : callable
        The reader of a file of this format.
    description : str
        One line for ``crowdrank data``.
    line_based : bool
        The file is read line by line (error messages name lines).
    extensions : tuple of str
        File extensions that select it.
    header : callable or None
        Recognises the format from a CSV header's fields.
    first_line : callable or None
        Recognises the format from a file's first line.
    options : tuple of str
        The format's options (keyword arguments of the reader).
    streamable : bool
        :func:`iter_rankings_chunks` can read it in chunks.
    """

    name: str
    parse: Callable
    description: str
    line_based: bool = False                       # streamable, takes no options
    extensions: tuple[str, ...] = ()               # recognised by extension
    header: Callable[[list[str]], bool] | None = None   # recognised by a CSV header
    first_line: Callable[[str], bool] | None = None     # recognised by the first line
    options: tuple[str, ...] = ()
    streamable: bool = False                       # read in chunks, though not by lines

    @property
    def stream(self) -> bool:
        return self.line_based or self.streamable


REGISTRY: dict[str, Format] = {f.name: f for f in (
    Format("rankings-csv", rankings_csv.parse, "worker,ranking[,task]; items joined by '>' "
           "best first, '=' marks a tie (split and counted)", line_based=True,
           header=rankings_csv.recognises),
    Format("pairwise-csv", pairwise_csv.parse, "crowd-kit's worker,left,right,label[,task]; "
           "label is the winner", line_based=True, header=pairwise_csv.recognises),
    Format("wide-csv", wide_csv.parse, "worker[,task],rank1,rank2,...; one item per column, "
           "best first, trailing cells may be empty", line_based=True,
           header=wide_csv.recognises),
    Format("worker-winner-loser", worker_winner_loser.parse, "'worker winner loser' per "
           "line, white-space separated, no header (CrowdBT's all_pair.txt)",
           line_based=True, first_line=worker_winner_loser.recognises_line),
    Format("preflib", preflib.parse, "PrefLib .soc/.soi/.toc/.toi (2022 format); counts "
           "expanded, ties split, no worker ids", extensions=preflib.EXTENSIONS,
           options=("workers", "item_ids", "skip_short")),
    Format("mat", mat.parse, "MATLAB matrix worker,item1,item2,... (0 pads shorter "
           "rankings; BabyFace.mat)", extensions=mat.EXTENSIONS, options=("var",)),
    Format("parquet", parquet.parse, "Apache Parquet: worker (string), ranking (list of "
           "item ids, best first), optional task; row groups are the streaming unit",
           extensions=parquet.EXTENSIONS, streamable=True),
)}

FORMATS = tuple(REGISTRY)
LINE_FORMATS = tuple(n for n, f in REGISTRY.items() if f.line_based)
STREAM_FORMATS = tuple(n for n, f in REGISTRY.items() if f.stream)
PREFLIB_EXTS = preflib.EXTENSIONS


def detect_format(path: str | Path) -> str:
    """The ``fmt`` :func:`read_rankings` would use for ``path`` (by extension and header).

    Parameters
    ----------
    path : str or Path
        The file.
    """
    path = Path(path)
    ext = path.suffix.lower()
    for f in REGISTRY.values():
        if ext in f.extensions:
            return f.name
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    first = first_line(path)
    if "," in first:
        header = next(csv.reader([first]))
        for f in REGISTRY.values():
            if f.header is not None and f.header(header):
                return f.name
        raise DataError("cannot tell the format from the header "
                        f"{first[:80]!r}; expected worker,ranking[,task] or "
                        "worker,left,right,label or worker,rank1,rank2,... (or pass fmt=)",
                        str(path), 1)
    for f in REGISTRY.values():
        if f.first_line is not None and f.first_line(first):
            return f.name
    raise DataError(f"cannot tell the format of this file (first line {first[:80]!r}); "
                    f"pass fmt= one of {FORMATS}", str(path), 1)


def _format(path: Path, fmt: str | None) -> Format:
    name = fmt or detect_format(path)
    if name not in REGISTRY:
        raise ValueError(f"unknown format {name!r}; expected one of {FORMATS}")
    return REGISTRY[name]


def read_rankings(path: str | Path, fmt: str | None = None, *,
                  items: Sequence[str] | None = None, worker_ids: Sequence[str] | None = None,
                  invalid: str = "error", fast: bool = True, **opts) -> Rankings:
    """Read a rankings file into a :class:`Rankings` (format detected unless ``fmt``).

    ``items``/``worker_ids`` fix the id universe (ids outside it are errors; items never
    ranked still get an index). ``invalid="skip"`` skips rankings whose *content* is bad
    (an item twice, k < 2, an empty item id) instead of raising, and counts and lists them
    in :attr:`Rankings.notes`; malformed lines and headers are always errors, and so is a
    file that yields no ranking at all. ``opts`` are format options: PrefLib ``workers``
    (``"single"``/``"per-ranking"``), ``item_ids`` (``"number"``/``"name"``),
    ``skip_short`` (count and skip rankings with < 2 items instead of an error); ``mat``
    ``var``. ``fast`` is accepted for compatibility and has no effect: there is one
    reader per format, and the rankings CSV reader converts clean rows in blocks.

    Parameters
    ----------
    path : str or Path
        The file.
    fmt : str, optional
        The format (default: detected).
    items, worker_ids : sequence of str, optional
        The id universes.
    invalid : {"error", "skip"}
        Raise on a ranking whose content is bad, or skip and count it.
    fast : bool
        No effect (above).
    **opts
        Format options (above).
    """
    del fast
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{path}: is a folder, not a rankings file")
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    f = _format(path, fmt)
    b = Builder(str(path), items, worker_ids, invalid)
    if f.stream and opts:
        raise TypeError(f"format {f.name} takes no options, got {sorted(opts)}")
    for _ in f.parse(path, b, **opts):
        pass
    if not len(b):
        raise b.nothing_read()
    return b.take()


def iter_rankings_chunks(path: str | Path, chunk_size: int = 10_000, fmt: str | None = None,
                         *, items: Sequence[str] | None = None,
                         worker_ids: Sequence[str] | None = None,
                         invalid: str = "error", keep_task: bool = True
                         ) -> Iterator[Rankings]:
    """Stream a rankings file in chunks of ``chunk_size`` input rows.

    Each chunk is a :class:`Rankings` over the items and workers seen so far (its
    ``items``/``workers`` tuples are prefixes of the next chunk's, so indices are stable);
    ``origin`` holds each ranking's global input-row index and ``ties_split`` the splits in
    that chunk. A bad line raises :class:`DataError` when its chunk is read; the chunks
    before it have been yielded already; a file without any ranking is an error at its
    end. Formats: ``rankings-csv``, ``pairwise-csv``, ``wide-csv``,
    ``worker-winner-loser`` and ``parquet`` (:data:`STREAM_FORMATS`). ``keep_task=False``
    checks task ids but does not keep them (``task`` is ``None``; a streaming fit needs
    none, and a Python string per ranking is most of a chunk's memory).

    Parameters
    ----------
    path : str or Path
        The file.
    chunk_size : int
        Input rows per chunk.
    fmt : str, optional
        The format (default: detected).
    items, worker_ids : sequence of str, optional
        The id universes, fixed up front.
    invalid : {"error", "skip"}
        Raise on a ranking whose content is bad, or skip and count it.
    keep_task : bool
        Keep the task ids.
    """
    if chunk_size < 1:
        raise ValueError("chunk_size must be >= 1")
    path = Path(path)
    f = _format(path, fmt)
    if not f.stream:
        raise ValueError(f"streaming supports {STREAM_FORMATS}, not {f.name!r}")
    b = Builder(str(path), items, worker_ids, invalid, keep_task=keep_task)
    rows = total = 0
    for n in f.parse(path, b, block=chunk_size):
        rows += n
        if rows >= chunk_size:
            total += len(b)
            yield b.take(chunk=True)
            rows = 0
    total += len(b)
    if not total:
        raise b.nothing_read()
    if rows or b.chunk_blank:
        yield b.take(chunk=True)

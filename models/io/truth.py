"""Ground truth: item scores (``item,score``), simulated workers' true η
(``worker,setting,eta_1..eta_K``) and gold tasks (``worker,ranking,true_order[,task]``).

Truth files are often wider than the data (a benchmark's full item list, a subset of its
rankings): items of the file that the data never names are counted and reported, not
refused, unless ``strict=True``. An item of the data *without* a score is always an error.
See ``docs/data.md``.
"""

from __future__ import annotations

import csv
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..data import PAD, DataError, Rankings, align_scores
from ..errors import DataWarning
from ._base import Builder, check_ids, columns, csv_rows, ranking_strings, split_ranking

__all__ = ["TRUTH_SCORE_COLUMNS", "Truth", "WorkerTruth", "load_truth", "read_gold",
           "read_truth", "read_truth_scores", "read_worker_truth", "write_gold",
           "write_truth", "write_worker_truth"]

TRUTH_SCORE_COLUMNS = ("score", "ground_truth_score")


# =============================================================================== item scores
def read_truth_scores(path: str | Path) -> dict[str, float]:
    """A ground-truth CSV ``item,score`` (higher is better) as ``{item: score}``.

    ``ground_truth_score`` is accepted as the score column's name (the BabyFace export).
    Duplicate items, empty ids, non-numbers and NaN/infinite scores are errors.

    Parameters
    ----------
    path : str or Path
        The file.
    """
    path = Path(path)
    src = str(path)
    rows = csv_rows(path, Builder(src))
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


@dataclass(frozen=True)
class Truth:
    """Ground truth read for a data set: ``scores`` aligned with ``data.items`` and the
    ``extra`` items that the file scores but the data never names (left out).

    Attributes
    ----------
    scores : ndarray
        The scores, aligned with ``data.items``.
    extra : tuple of str
        Items the file scores but the data never names.
    source : str
        The file.
    """

    scores: np.ndarray
    extra: tuple[str, ...]
    source: str

    @property
    def note(self) -> str | None:
        """The line that reports the left-out items (``None`` when there are none)."""
        if not self.extra:
            return None
        shown = ", ".join(repr(x) for x in self.extra[:5])
        return (f"truth {self.source}: {len(self.extra)} scored item(s) are not in the data "
                f"and were left out, e.g. {shown}" + (" ..." if len(self.extra) > 5 else "")
                + " (strict=True or --strict-truth refuses them)")


def _line_of(path: Path, item: str) -> int | None:
    """The line of ``item`` in an ``item,score`` file (for the error message)."""
    with path.open(newline="", encoding="utf-8-sig") as fh:
        reader = csv.reader(fh)
        for row in reader:
            if reader.line_num > 1 and row and row[0].strip() == item:
                return reader.line_num
    return None


def load_truth(path: str | Path, data: Rankings, *, strict: bool = False) -> Truth:
    """Ground truth for ``data`` with the items the file scores beyond the data.

    An item of ``data`` without a score is an error. An item of the file that ``data``
    never names is left out and reported in :attr:`Truth.note`; with ``strict=True`` it
    is an error naming its line.

    Parameters
    ----------
    path : str or Path
        The file.
    data : Rankings
        The data.
    strict : bool
        Refuse items the file scores but ``data`` never names.
    """
    path = Path(path)
    scores = read_truth_scores(path)
    known = set(data.items)
    extra = tuple(it for it in scores if it not in known)
    if extra and strict:
        raise DataError(f"item {extra[0]!r} is not in the data ({len(extra)} unknown "
                        "item(s) in all; strict)", str(path), _line_of(path, extra[0]))
    return Truth(align_scores(data, scores, source=str(path)), extra, str(path))


def read_truth(path: str | Path, data: Rankings, *, strict: bool = False) -> np.ndarray:
    """Ground truth aligned with ``data.items`` (higher = better).

    An item of ``data`` without a score is an error. Items of the file that ``data`` never
    names are left out with a :class:`~crowdrank.models.errors.DataWarning` that counts them
    (:func:`load_truth` returns them instead); ``strict=True`` makes them an error.

    Parameters
    ----------
    path : str or Path
        The file.
    data : Rankings
        The data.
    strict : bool
        Refuse items the file scores but ``data`` never names.
    """
    t = load_truth(path, data, strict=strict)
    if t.note:
        warnings.warn(t.note, DataWarning, stacklevel=2)
    return t.scores


def write_truth(items: Sequence[str], scores: Sequence[float], path: str | Path) -> Path:
    """Write ``item,score`` (full float precision, so it reads back exactly).

    Parameters
    ----------
    items : sequence of str
        The item ids.
    scores : array_like
        Their scores.
    path : str or Path
        The file.
    """
    scores = np.asarray(scores, dtype=float)
    if len(items) != len(scores):
        raise ValueError(f"{len(items)} items but {len(scores)} scores")
    if not np.all(np.isfinite(scores)):
        raise ValueError("scores must be finite")
    check_ids(items, "item", forbidden=())
    path = Path(path)
    with path.open("w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["item", "score"])
        w.writerows((it, repr(float(s))) for it, s in zip(items, scores))
    return path


# =============================================================================== worker truth
@dataclass(frozen=True)
class WorkerTruth:
    """Simulated workers' true parameters: type (``setting``) and ``eta`` ``(W, K)``.

    Attributes
    ----------
    workers : tuple of str
        The worker ids.
    settings : tuple of str
        Each worker's type (``expert``, ``amateur``, ...).
    eta : ndarray
        ``(W, K)`` each worker's ``η``.
    """

    workers: tuple[str, ...]
    settings: tuple[str, ...]
    eta: np.ndarray

    def for_data(self, data: Rankings) -> np.ndarray:
        """``eta`` rows in ``data.workers`` order.

        Parameters
        ----------
        data : Rankings
            The data.
        """
        index = {w: i for i, w in enumerate(self.workers)}
        missing = [w for w in data.workers if w not in index]
        if missing:
            raise DataError(f"no true η for worker(s) {missing[:5]}", "<worker truth>")
        return self.eta[[index[w] for w in data.workers]]


def write_worker_truth(workers: Sequence[str], settings: Sequence[str], eta: np.ndarray,
                       path: str | Path) -> Path:
    """Write ``worker,setting,eta_1..eta_K`` (a simulation's true worker parameters).

    Parameters
    ----------
    workers : sequence of str
        The worker ids.
    settings : sequence of str
        Each worker's type.
    eta : array_like
        ``(W, K)`` each worker's ``η``.
    path : str or Path
        The file.
    """
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
    """Read ``worker,setting,eta_1..eta_K``; each row must be a probability vector.

    Parameters
    ----------
    path : str or Path
        The file.
    """
    path = Path(path)
    src = str(path)
    rows = csv_rows(path, Builder(src))
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
    feed :meth:`crowdrank.models.priors.Priors.from_gold`.

    Parameters
    ----------
    gold : Rankings
        The gold tasks as the workers reported them.
    true_order : ndarray
        ``(K, N)`` each task's true order, per position.
    path : str or Path
        The file.
    """
    import pandas as pd

    true_order = np.asarray(true_order)
    if true_order.shape[1] != gold.n_rankings:
        raise ValueError("true_order must be (K, N) like gold.order")
    check_ids(gold.items, "item")
    df = pd.DataFrame({"worker": np.asarray(gold.workers, dtype=object)[gold.worker],
                       "ranking": ranking_strings(gold),
                       "true_order": ranking_strings(gold, true_order, gold.lengths)})
    if gold.task is not None:
        df["task"] = gold.task
    df.to_csv(path, index=False, lineterminator="\n")
    return Path(path)


def read_gold(path: str | Path) -> tuple[Rankings, np.ndarray]:
    """Read a gold CSV: ``(gold rankings, true_order (K, N))`` with ``true_order`` in the
    per-position layout over ``gold.items``, as :meth:`Priors.from_gold` expects.

    Parameters
    ----------
    path : str or Path
        The file.
    """
    path = Path(path)
    b = Builder(str(path))
    rows = csv_rows(path, b)
    _, header = next(rows)
    col = columns(header, ("worker", "ranking", "true_order"), ("task",), b.source, "gold")
    n = len(header)
    truths: list[list[str]] = []
    for line, row in rows:
        if len(row) != n:
            raise DataError(f"malformed line: expected {n} fields, got {len(row)}",
                            b.source, line)
        rep = split_ranking(row[col["ranking"]].strip())
        tru = [x.strip() for x in row[col["true_order"]].split(">")]
        if any(len(g) > 1 for g in rep):
            raise DataError("ties are not allowed in gold rankings", b.source, line)
        if sorted(tru) != sorted(g[0] for g in rep):
            raise DataError("true_order must hold the same items as the ranking",
                            b.source, line)
        b.add(line, row[col["worker"]].strip(), rep,
              None if "task" not in col else row[col["task"]].strip())
        truths.append(tru)
    if not len(b):
        raise b.nothing_read()
    gold = b.take()
    index = {it: i for i, it in enumerate(gold.items)}
    true_order = np.full(gold.order.shape, PAD, dtype=np.int32)
    for n_, tru in enumerate(truths):
        true_order[: len(tru), n_] = [index[x] for x in tru]
    return gold, true_order

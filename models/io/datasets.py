"""The shared real data sets: a registry with a description per set (in the spirit of
crowd-kit's ``crowdkit.datasets``), their loaders, and :func:`read_data`, which takes a
file *or* a set's name.

The files are not vendored: they live in ``$CROWDRANK_DATASETS`` or ``../shared/datasets``
beside the checkout. ``crowdrank data list`` shows the registry and which sets are present.
Every loader returns ``(Rankings, truth)`` with the truth aligned with ``items`` and
oriented so that *higher = better = ranked first*. See ``docs/data.md``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..data import DataError, Rankings, UsageError, align_scores
from ._base import Builder, text_lines
from .formats import read_rankings
from .preflib import metadata as preflib_metadata
from .preflib import parse as parse_preflib
from .truth import load_truth, read_truth

__all__ = ["DATASETS", "REGISTRY", "DataSet", "datasets_root",
           "load_dataset", "read_data"]


def datasets_root() -> Path:
    """``$CROWDRANK_DATASETS`` or ``../shared/datasets`` beside the checkout."""
    env = os.environ.get("CROWDRANK_DATASETS")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2].parent / "shared" / "datasets"


def _need(path: Path) -> Path:
    if not path.exists():
        raise FileNotFoundError(f"{path}: missing (shared data sets are looked up in "
                                f"{datasets_root()}; set CROWDRANK_DATASETS)")
    return path


def with_notes(data: Rankings, *notes: str, source: str | None = None) -> Rankings:
    """``data`` with more notes (and optionally another ``source`` label)."""
    return Rankings(items=data.items, workers=data.workers, order=data.order,
                    lengths=data.lengths, worker=data.worker, task=data.task,
                    origin=data.origin, ties_split=data.ties_split,
                    source=data.source if source is None else source,
                    notes=tuple(data.notes) + tuple(n for n in notes if n))


# =============================================================================== loaders
def _load_babyface(folder: Path, source: str = "mat", invalid: str = "skip"):
    if source == "mat":
        from scipy.io import loadmat

        mat = _need(folder / "BabyFace.mat")
        data = read_rankings(mat, fmt="mat", invalid=invalid)
        gt = np.asarray(loadmat(str(mat))["ground_truth"], float).ravel()
        scores = {str(i + 1): float(s) for i, s in enumerate(gt)}
        truth = align_scores(data, scores, source=str(mat))
    elif source == "csv":
        data = read_rankings(_need(folder / "babyface_rankings_from_mat.csv"), fmt="wide-csv",
                             invalid=invalid)
        truth = read_truth(_need(folder / "babyface_ground_truth_from_mat.csv"), data)
    else:
        raise UsageError("babyface source must be 'mat' or 'csv'")
    return with_notes(data, source="babyface"), truth


def _read_levels(doc: Path) -> dict[str, float]:
    """``passage level`` per line (``doc_info.txt``) as ``{passage: level}``."""
    levels: dict[str, float] = {}
    for line, text in text_lines(doc):
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
            raise DataError(f"level {parts[1]!r} is not a number", str(doc), line) from None
    return levels


def _load_readlevel(folder: Path, invalid: str = "skip"):
    doc = _need(folder / "doc_info.txt")
    levels = _read_levels(doc)
    data = read_rankings(_need(folder / "all_pair.txt"), fmt="worker-winner-loser",
                         invalid=invalid, items=list(levels))
    truth = align_scores(data, levels, source=str(doc))
    return with_notes(data, "better = judged harder; truth = level (higher = harder)",
                      source="readlevel"), truth


def _preflib_loader(name: str, series: str):
    def load(folder: Path, part: int | None = None, workers: str = "single"):
        files = sorted(_need(folder).glob(f"{series}-*.soc"))
        if part is not None:
            files = [f for f in files if f.stem.endswith(f"{int(part):08d}")]
        if not files:
            raise FileNotFoundError(f"no {series}-*.soc file (part={part}) in {folder}")
        b = Builder(name)
        scores = {}
        for f in files:
            title, names = preflib_metadata(f)
            prefix = f"{title}:"
            b.source = str(f)
            for _ in parse_preflib(f, b, workers=workers, item_ids="name",
                                   item_prefix=prefix):
                pass
            for nm in names.values():
                scores[prefix + nm] = -float(nm)
        b.source = name
        data = b.take([("truth = -(alternative name): fewer dots/moves is better; items "
                        "of different files are different alternatives")])
        return data, align_scores(data, scores, source=name)
    return load


# =============================================================================== registry
@dataclass(frozen=True)
class DataSet:
    """One shared real data set: where its files are, what it holds, how to load it.

    Attributes
    ----------
    name : str
        The name (``crowdrank data list``, ``FILE`` arguments).
    folder : str
        Its folder under the shared data sets' root.
    files : tuple of str
        The files it needs there.
    description : str
        What it holds.
    as_loaded : str
        What the loader returns (items, workers, rankings after cleaning).
    truth : str
        Where its ground truth comes from.
    origin : str
        Where the data come from (the paper, the URL).
    loader : callable
        ``f(folder, **options) -> (Rankings, truth or None)``.
    options : tuple of str
        The loader's options.
    """

    name: str
    folder: str
    files: tuple[str, ...]
    description: str
    as_loaded: str
    truth: str
    origin: str
    loader: Callable[..., tuple[Rankings, np.ndarray | None]]
    options: tuple[str, ...] = ()

    def path(self, root: str | Path | None = None) -> Path:
        """The set's folder under ``root``.

        Parameters
        ----------
        root : str or Path, optional
            The shared data sets' folder (default :func:`datasets_root`).
        """
        return (Path(root) if root is not None else datasets_root()) / self.folder

    def missing(self, root: str | Path | None = None) -> list[Path]:
        """The set's files that are absent under ``root`` (empty when it can be loaded).

        Parameters
        ----------
        root : str or Path, optional
            The shared data sets' folder (default :func:`datasets_root`).
        """
        folder = self.path(root)
        return [folder / f for f in self.files if not (folder / f).exists()]

    def load(self, root: str | Path | None = None, **opts) -> tuple[Rankings, np.ndarray]:
        """The set as ``(Rankings, truth aligned with items)``.

        Parameters
        ----------
        root : str or Path, optional
            The shared data sets' folder (default :func:`datasets_root`).
        **opts
            The set's options (:func:`load_dataset`).
        """
        unknown = sorted(set(opts) - set(self.options))
        if unknown:
            raise TypeError(f"unknown options {unknown} for {self.name}")
        return self.loader(self.path(root), **opts)


REGISTRY: dict[str, DataSet] = {d.name: d for d in (
    DataSet(
        "babyface", "babyface", ("BabyFace.mat", "babyface_rankings_from_mat.csv",
                                 "babyface_ground_truth_from_mat.csv"),
        "COUPLE paper's BabyFace: three-item rankings (best first) of 18 facial "
        "micro-expressions by 21 workers",
        "3,068 rankings: the file's 3,074 rows less 6 that name one item twice (skipped and "
        "listed in the notes; invalid='error' refuses them); source='mat' (default) or "
        "'csv' (the plain export)",
        "the file's ground_truth (higher = ranked higher); the first pair agrees with it "
        "77 % of the time",
        "GitHub Yuangang-Pan/Robust-Ranking-Aggregation--CoarsenRank, BabyFace/read_data/ "
        "(no licence file)",
        _load_babyface, ("source", "invalid")),
    DataSet(
        "readlevel", "readlevel_chen2013", ("all_pair.txt", "doc_info.txt"),
        "CrowdBT paper's reading difficulty (Chen et al., WSDM 2013): pairs by 624 workers "
        "over 490 passages; the winner is the passage judged harder",
        "12,726 pairs: the 12,728 lines less 2 that compare passage 268 with itself "
        "(skipped and listed in the notes); 'better' means harder",
        "passage level 1-12 from doc_info.txt (higher = harder; many ties)",
        "same repository, Read_level/read_data/ (no licence file)",
        _load_readlevel, ("invalid",)),
    DataSet(
        "preflib-dots", "preflib_mturk_dots", tuple(f"00024-0000000{i}.soc" for i in range(1, 5)),
        "PrefLib 00024 (Mao, Procaccia & Chen, AAAI 2013): Mechanical Turk workers rank 4 "
        "images from fewest dots to most, 4 files (one per dot spacing); no worker ids",
        "3,183 rankings over 16 items '<file title>:<name>' (4 separate item sets: the "
        "comparison graph has 4 components); one pseudo-worker per file; part=1..4 loads "
        "one file; workers='per-ranking' gives each ranking its own worker",
        "minus the dot count (fewer is better: the true order by name)",
        "fleverest/PrefLib-Data, GPL-3.0; cite Mao et al. 2013",
        _preflib_loader("preflib-dots", "00024"), ("part", "workers")),
    DataSet(
        "preflib-puzzle", "preflib_mturk_puzzle",
        tuple(f"00025-0000000{i}.soc" for i in range(1, 5)),
        "PrefLib 00025 (Mao, Procaccia & Chen, AAAI 2013): Mechanical Turk workers rank 4 "
        "sliding puzzles from closest to solved to furthest, 4 files; no worker ids",
        "3,180 rankings over 16 items '<file title>:<name>' (4 components); one "
        "pseudo-worker per file; part=1..4 loads one file",
        "minus the moves to solve (fewer is better: the true order by name)",
        "fleverest/PrefLib-Data, GPL-3.0; cite Mao et al. 2013",
        _preflib_loader("preflib-puzzle", "00025"), ("part", "workers")),
)}

DATASETS = tuple(REGISTRY)


def load_dataset(name: str, root: str | Path | None = None, **opts
                 ) -> tuple[Rankings, np.ndarray | None]:
    """A shared real data set as ``(Rankings, truth aligned with items)``.

    ``name`` is one of :data:`DATASETS`; ``opts`` are the set's options (see
    :data:`REGISTRY` and ``crowdrank data list``):

    ``babyface``
        ``source="mat"`` (default, ``BabyFace.mat`` via SciPy) or ``"csv"``;
        ``invalid="skip"`` (default: the six rows that name one item twice, e.g.
        ``1 > 14 > 1`` on rows 1658, 1814, 1830, 2228, 2401, 2718, are skipped and listed in
        the notes) or ``"error"``.
    ``readlevel``
        ``invalid="skip"`` (default: lines 11995 and 11996 compare passage 268 with itself).
        Items are in ``doc_info.txt`` order.
    ``preflib-dots`` / ``preflib-puzzle``
        ``part=None`` (all four files) or ``1..4``; ``workers="single"`` (one pseudo-worker
        per file) or ``"per-ranking"``. Items are ``<title>:<name>``; truth = minus the
        alternative's name, comparable across files (equal counts tie).

    Parameters
    ----------
    name : str
        One of :data:`DATASETS`.
    root : str or Path, optional
        The shared data sets' folder (default :func:`datasets_root`).
    **opts
        The set's options (above).
    """
    if name not in REGISTRY:
        raise UsageError(f"unknown data set {name!r}; expected one of {DATASETS}")
    return REGISTRY[name].load(root, **opts)


def read_data(spec: str | Path, fmt: str | None = None, truth: str | Path | None = None,
              invalid: str = "error", *, strict_truth: bool = False
              ) -> tuple[Rankings, np.ndarray | None]:
    """A file path *or* a shared data set name (:data:`DATASETS`), with its truth.

    For a file, ``truth`` (a ``item,score`` CSV) is read if given; for a data set name its
    own truth is used unless ``truth`` overrides it (and ``invalid`` does not apply: the
    data sets' own defaults hold). Items the truth file scores beyond the data are left
    out and reported in the returned data's notes (``strict_truth=True`` refuses them).
    The CLI uses this for ``FILE``.

    Parameters
    ----------
    spec : str or Path
        A file or a data set's name.
    fmt : str, optional
        The file's format (default: detected).
    truth : str or Path, optional
        An ``item,score`` CSV.
    invalid : {"error", "skip"}
        What a file's bad ranking does (:func:`read_rankings`).
    strict_truth : bool
        Refuse truth items the data never names.
    """
    p = Path(spec)
    if not p.exists() and str(spec) in REGISTRY:
        data, t = load_dataset(str(spec))
    else:
        data, t = read_rankings(p, fmt=fmt, invalid=invalid), None
    if truth is not None:
        tr = load_truth(truth, data, strict=strict_truth)
        data, t = with_notes(data, tr.note), tr.scores
    return data, t

"""Readers and writers for rankings, ground truth, worker truth and gold tasks, and the
registry of shared real data sets. The full guide is ``docs/data.md``.

Layout (one module per format, a registry that detects and parses):

``formats``
    :data:`REGISTRY` of :class:`Format`, :func:`detect_format`, :func:`read_rankings`,
    :func:`iter_rankings_chunks` (streaming, for the line-based formats).
the format modules
    ``rankings_csv``, ``pairwise_csv``, ``wide_csv``, ``worker_winner_loser``, ``preflib``,
    ``mat``, ``parquet``: one format each (``fmt=`` names ``rankings-csv``,
    ``pairwise-csv``, ``wide-csv``, ``worker-winner-loser``, ``preflib``, ``mat``,
    ``parquet``; :data:`STREAM_FORMATS` can be streamed).
``truth``
    Ground-truth scores, simulated workers' true η, gold tasks.
``datasets``
    The shared real data sets (:data:`DATASETS`, :func:`load_dataset`,
    :func:`read_data` (a file or a set's name).
``pair_datasets``, ``pair_table_csv``
    The pair-table sets and the pairwise CSV with extra columns
    (:func:`read_pair_table`, :func:`write_pair_table`).
``catalog``
    :func:`list_datasets`: both kinds of shared set.

Input rules: blank lines are skipped and counted in :attr:`Rankings.notes`; ties are split
and counted; every other irregularity is a :class:`~crowdrank.models.data.DataError` naming the file,
the line and the reason, and so is a file with no ranking at all or one that is not UTF-8.
Tie-split rankings keep their input ranking's worker, task and line, and
:attr:`Rankings.origin` maps each to the index of its *input* ranking.
"""

from __future__ import annotations

# names the single-module models.io also exposed; kept so that old imports keep working
from collections.abc import Iterable, Iterator, Sequence  # noqa: F401
from dataclasses import dataclass  # noqa: F401
from pathlib import Path  # noqa: F401

from ..data import PAD, DataError, Rankings, align_scores, split_ties
from .catalog import list_datasets
from .datasets import (
    DATASETS,
    DataSet,
    datasets_root,
    load_dataset,
    read_data,
)
from .datasets import REGISTRY as DATASET_REGISTRY
from .formats import (
    FORMATS,
    LINE_FORMATS,
    PREFLIB_EXTS,
    STREAM_FORMATS,
    Format,
    detect_format,
    iter_rankings_chunks,
    read_rankings,
)
from .formats import REGISTRY as FORMAT_REGISTRY
from .pair_table_csv import read_pair_table, write_pair_table
from .pairwise_csv import write as write_pairwise
from .parquet import write as write_parquet
from .rankings_csv import write as write_rankings
from .truth import (
    TRUTH_SCORE_COLUMNS,
    Truth,
    WorkerTruth,
    load_truth,
    read_gold,
    read_truth,
    read_truth_scores,
    read_worker_truth,
    write_gold,
    write_truth,
    write_worker_truth,
)

__all__ = [
    "DATASETS",
    "DATASET_REGISTRY",
    "FORMATS",
    "FORMAT_REGISTRY",
    "LINE_FORMATS",
    "PAD",
    "PREFLIB_EXTS",
    "STREAM_FORMATS",
    "TRUTH_SCORE_COLUMNS",
    "DataError",
    "DataSet",
    "Format",
    "Rankings",
    "Truth",
    "WorkerTruth",
    "align_scores",
    "datasets_root",
    "detect_format",
    "iter_rankings_chunks",
    "list_datasets",
    "load_dataset",
    "load_truth",
    "read_data",
    "read_gold",
    "read_pair_table",
    "read_rankings",
    "read_truth",
    "read_truth_scores",
    "read_worker_truth",
    "split_ties",
    "write_gold",
    "write_pair_table",
    "write_pairwise",
    "write_parquet",
    "write_rankings",
    "write_truth",
    "write_worker_truth",
]

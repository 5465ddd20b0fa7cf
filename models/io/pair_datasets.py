"""Shared real data sets as *pair tables* (:class:`crowdrank.models.pair_table.PairTable`): the
input of contextual BT and the CrowdBT extensions, with a real covariate and category.

PrefLib's Mechanical Turk Dots (00024) and Puzzle (00025) sets [Mao13] come as four files,
one per difficulty setting, each with four alternatives whose true order is known:

- **Dots**: images with ``200, 200 + i, 200 + 2i, 200 + 3i`` dots, ``i ∈ {3, 5, 7, 9}``
  (files 1-4); workers order them from fewest dots to most. Smaller spacing ``i`` is
  harder: the images differ less.
- **Puzzle**: sliding puzzles ``d, d + 3, d + 6, d + 9`` moves from solved, ``d ∈ {5, 7,
  9, 11}`` (files 2, 3, 4, 1: the level is read off each file's alternative names); workers order them from closest to solved to furthest. A larger
  ``d`` is harder: the same 3-move gaps on longer puzzles.

The rank-based loaders (:mod:`.datasets`) keep each file's four alternatives as separate
items (four components). Here the *position* in the true order is the item — ``p1`` (the
fewest dots / moves, the true best) … ``p4`` — in all four files, so one model sees every
difficulty and a covariate can say how the item differences change with it. Every
expanded ranking is rank-broken into its 6 pairs (winner = ranked earlier), and each pair
carries:

``task``
    the ranking it came from (``<file stem>:<j>``, ``j`` counting expanded rankings);
``level``
    the file's published parameter (Dots: the spacing ``i``; Puzzle: ``d``);
``difficulty``
    ``0, 1, 2, 3`` from the easiest file to the hardest (Dots: ``i = 9, 7, 5, 3``; Puzzle:
    ``d = 5, 7, 9, 11``), the covariate for contextual BT;
``category``
    ``Dots i=3`` … as text, for the domain model's per-category accuracy.

PrefLib has no worker ids and no presentation order: every pair has the one pseudo-worker
``mturk`` (with ``crowdbt-domain`` and ``category`` an accuracy per difficulty), and
``left``/``right`` is a *seeded random* orientation (``seed``), stated in the table's
source: the bias model fitted on it estimates a bias that is zero by construction. The
truth is ``−position`` (``p1`` best), as :mod:`.datasets` scores these sets.
"""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import numpy as np

from ..errors import DataError, UsageError
from ..pair_table import PairTable
from ._base import Builder
from .datasets import DataSet, _need, datasets_root
from .preflib import metadata as preflib_metadata
from .preflib import parse as parse_preflib

__all__ = ["PAIR_DATASETS", "load_pair_dataset"]

#: per set: folder, file series, label, the parameter's symbol, its published values,
#: whether a larger value is harder, and how to read it off a file's alternative names
#: (the file order is not the parameter's: Puzzle's file 1 is d = 11)
_SETS = {"preflib-dots-pairs": ("preflib_mturk_dots", "00024", "Dots", "i", (3, 5, 7, 9),
                                False, lambda v: v[1] - v[0]),
         "preflib-puzzle-pairs": ("preflib_mturk_puzzle", "00025", "Puzzle", "d",
                                  (5, 7, 9, 11), True, lambda v: v[0])}


def _loader(name: str):
    _, series, label, sym, levels, larger_is_harder, level_of = _SETS[name]
    by_hardness = sorted(levels, reverse=not larger_is_harder)

    def load(folder: Path, seed: int = 0) -> tuple[PairTable, np.ndarray]:
        files = [_need(folder / f"{series}-0000000{k}.soc") for k in range(1, 5)]
        first, second, won, task, level, diff, cat = ([] for _ in range(7))
        rng = np.random.default_rng(seed)
        for f in files:
            _, names = preflib_metadata(f)
            order = sorted(names, key=lambda k: float(names[k]))
            if order != ["1", "2", "3", "4"]:
                raise DataError("expected alternatives 1-4 named in increasing order "
                                f"(the true order), got names {names}", str(f))
            vals = [int(names[k]) for k in order]
            lv = level_of(vals)
            if lv not in levels or len({b - a for a, b in pairwise(vals)}) != 1:
                raise DataError(f"alternatives {vals} are not the published design "
                                f"({label}: {sym} in {levels}, equal gaps)", str(f))
            b = Builder(str(f))
            for _ in parse_preflib(f, b, workers="per-ranking", item_ids="number"):
                pass
            data = b.take([])
            idx = np.asarray([int(it) - 1 for it in data.items])   # item index -> position
            for r in range(data.n_rankings):
                ranked = idx[data.order[:data.lengths[r], r]]      # (k, N): column r
                for a in range(len(ranked)):
                    for c in range(a + 1, len(ranked)):
                        flip = rng.random() < 0.5
                        w, lo = int(ranked[a]), int(ranked[c])
                        first.append(lo if flip else w)
                        second.append(w if flip else lo)
                        won.append(0 if flip else 1)
                        task.append(data.workers[data.worker[r]])
                        level.append(str(lv))
                        diff.append(str(by_hardness.index(lv)))
                        cat.append(f"{label} {sym}={lv}")
        S = len(first)
        extra = {"task": np.asarray(task, dtype=object), "level": np.asarray(level, object),
                 "difficulty": np.asarray(diff, dtype=object),
                 "category": np.asarray(cat, dtype=object)}
        table = PairTable(("p1", "p2", "p3", "p4"), ("mturk",),
                          np.asarray(first, np.int64), np.asarray(second, np.int64),
                          np.asarray(won, np.int64), np.zeros(S, np.int64), extra, None,
                          True, f"{name} (left/right: seeded random orientation, seed {seed})")
        return table, -np.arange(1.0, 5.0)
    return load


PAIR_DATASETS: dict[str, DataSet] = {d.name: d for d in (
    DataSet(
        "preflib-dots-pairs", "preflib_mturk_dots",
        tuple(f"00024-0000000{i}.soc" for i in range(1, 5)),
        "PrefLib 00024 Dots [Mao13] as one pair table: items p1..p4 = position in the true "
        "order (200, 200+i, 200+2i, 200+3i dots) in all four files; covariate difficulty "
        "0..3 (i = 9, 7, 5, 3: smaller spacing is harder), level = i, category 'Dots i=..'",
        "3,183 rankings rank-broken into 19,098 pairs; one pseudo-worker 'mturk'; "
        "left/right a seeded random orientation (no presentation order in PrefLib); "
        "task = the ranking",
        "-position (p1, fewest dots, best)",
        "fleverest/PrefLib-Data, GPL-3.0; cite Mao et al. 2013",
        _loader("preflib-dots-pairs"), ("seed",)),
    DataSet(
        "preflib-puzzle-pairs", "preflib_mturk_puzzle",
        tuple(f"00025-0000000{i}.soc" for i in range(1, 5)),
        "PrefLib 00025 Puzzle [Mao13] as one pair table: items p1..p4 = position in the "
        "true order (d, d+3, d+6, d+9 moves) in all four files; covariate difficulty 0..3 "
        "(d = 5, 7, 9, 11: longer puzzles are harder), level = d, category 'Puzzle d=..'",
        "3,180 rankings rank-broken into 19,080 pairs; one pseudo-worker 'mturk'; "
        "left/right a seeded random orientation; task = the ranking",
        "-position (p1, fewest moves, best)",
        "fleverest/PrefLib-Data, GPL-3.0; cite Mao et al. 2013",
        _loader("preflib-puzzle-pairs"), ("seed",)),
)}


def load_pair_dataset(name: str, root: str | Path | None = None, **opts
                      ) -> tuple[PairTable, np.ndarray]:
    """A registered pair-table data set (:data:`PAIR_DATASETS`) as ``(PairTable, truth
    aligned with its items)``; ``root`` defaults to :func:`.datasets.datasets_root`."""
    if name not in PAIR_DATASETS:
        raise UsageError(f"unknown pair data set {name!r}; expected one of "
                         f"{tuple(PAIR_DATASETS)}")
    root = datasets_root() if root is None else root
    return PAIR_DATASETS[name].load(root, **opts)

"""Presented pairs with their extra columns: the input of the CrowdBT extensions and of
contextual BT.

A :class:`crowdrank.models.data.Rankings` keeps only *who won*; the models here also need *how the
pair was shown* (the annotator-bias model's "first item") and per-comparison columns (a
category for domain-specific reliability, covariates for contextual BT). They read the
pairwise CSV (crowd-kit's ``worker,left,right,label[,task]``, ``docs/data.md``) directly:

- **presented first** is the ``left`` column: the item in ``left`` was shown first (or on
  the left) and ``right`` second; ``label`` names the winner and must equal one of them;
- any other column can be asked for by name (``extra=("category",)``); its cells come back
  as strings, one per pair, with the CSV line of each pair for located errors.

Rank-broken k-ary rankings carry no presentation order: :func:`from_rankings` orients
each rank-broken pair winner-first, which is only meaningful for models in which the
orientation does not matter (no bias term); the bias model refuses such data.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .errors import DataError

REQUIRED = ("worker", "left", "right", "label")


@dataclass(frozen=True, eq=False)
class PairTable:
    """Pairs as presented. ``first``/``second``: item indices (``first`` shown first);
    ``first_won``: 1 when the first item won; ``worker``: worker index; ``extra``: the
    requested columns' raw cells; ``lines``: the CSV line of each pair (``None`` when the
    pairs did not come from a file); ``oriented``: whether ``first`` is a real
    presentation order (False for rank-broken rankings)."""

    items: tuple[str, ...]
    workers: tuple[str, ...]
    first: np.ndarray
    second: np.ndarray
    first_won: np.ndarray
    worker: np.ndarray
    extra: dict = field(default_factory=dict)
    lines: np.ndarray | None = None
    oriented: bool = True
    source: str = "<pairs>"

    @property
    def n_pairs(self) -> int:
        return len(self.first)

    @property
    def n_items(self) -> int:
        return len(self.items)

    @property
    def n_workers(self) -> int:
        return len(self.workers)

    def winner_loser(self) -> tuple[np.ndarray, np.ndarray]:
        w = np.where(self.first_won == 1, self.first, self.second)
        return w, np.where(self.first_won == 1, self.second, self.first)

    def line_of(self, s: int) -> int | None:
        return None if self.lines is None else int(self.lines[s])

    def column(self, name: str, role: str) -> np.ndarray:
        """The cells of the extra column ``name``, checked: a :class:`DataError` names the
        file when the column was not read and the line of its first empty cell (a model
        would otherwise read an empty string as a category level). ``role`` names what the
        column is for in the messages ("covariate", "category")."""
        if name not in self.extra:
            raise DataError(f"no {role} column {name!r} was read", self.source)
        cells = self.extra[name]
        for s, c in enumerate(cells):
            if c == "":
                raise DataError(f"empty cell in {role} column {name!r}", self.source,
                                self.line_of(s))
        return cells


def from_rankings(data) -> PairTable:
    """The rank-broken pairs of :class:`crowdrank.models.data.Rankings`, winner first and marked
    ``oriented=False`` (a ranking has no presentation order)."""
    pr = data.rank_break()
    if pr.n_rankings == 0:
        raise DataError("no pairs to fit", data.source)
    w, lo = pr.order[0].astype(np.int64), pr.order[1].astype(np.int64)
    extra = {} if pr.task is None else {"task": np.asarray(pr.task, dtype=object)}
    return PairTable(tuple(data.items), tuple(data.workers), w, lo, np.ones_like(w),
                     pr.worker.astype(np.int64), extra, None, False, data.source)

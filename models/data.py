"""The one data convention of crowdrank: a set of rankings by workers over items.

A *ranking* is a strict order of ``k >= 2`` distinct items, best first, reported by one
worker (docs/design.md, Data). A data set holds ``N`` rankings of lengths ``2..K`` over ``L`` items
and ``W`` workers. String ids are mapped to dense integer indices once, here, and every
other layer works with the indices and maps back through :attr:`Rankings.items` and
:attr:`Rankings.workers`.

The padded array that both inference routes consume is the *per-position* layout
``order[K, N]`` (position ``p`` of ranking ``n``; ``-1`` past the ranking's end): it was
measured 2-3x faster for the vectorised likelihood than ``(N, K)`` because each stage of
the likelihood then reads contiguous rows.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np

from .errors import DataError, InputError, UsageError  # noqa: F401 - re-exported

PAD = -1


@dataclass(frozen=True, eq=False)
class Rankings:
    """An immutable set of rankings in the per-position padded layout.

    Attributes
    ----------
    items : tuple of str
        Item ids; index ``r`` in the arrays means ``items[r]``.
    workers : tuple of str
        Worker ids; index ``w`` means ``workers[w]``.
    order : ndarray of int32, shape (K, N)
        ``order[p, n]`` is the item at position ``p`` (0 = best) of ranking ``n``;
        ``-1`` (:data:`PAD`) for ``p >= lengths[n]``.
    lengths : ndarray of int32, shape (N,)
        ``k`` of each ranking, ``>= 2``.
    worker : ndarray of int32, shape (N,)
        The worker index of each ranking.
    task : ndarray of object or None, shape (N,)
        Optional task id of each ranking (kept through tie splitting and rank-breaking).
    origin : ndarray of int64, shape (N,)
        Index of the source ranking this row came from (identity unless the set was made
        by :meth:`rank_break`, which maps each pair to its ranking, for per-ranking LOO).
    ties_split : int
        How many tied input rankings were split into several rankings (reported, never
        silent; docs/design.md, Data).
    source : str
        Where the data came from (file name or a description).

    notes : tuple of str
        What the reader noted about the source (rankings skipped, ties split, ...).
    """

    items: tuple[str, ...]
    workers: tuple[str, ...]
    order: np.ndarray
    lengths: np.ndarray
    worker: np.ndarray
    task: np.ndarray | None = None
    origin: np.ndarray | None = None
    ties_split: int = 0
    source: str = "<data>"
    notes: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self):
        order = np.asarray(self.order, dtype=np.int32)
        if order.ndim != 2:
            raise DataError(f"order must be (K, N), got shape {order.shape}", self.source)
        lengths = np.asarray(self.lengths, dtype=np.int32)
        worker = np.asarray(self.worker, dtype=np.int32)
        origin = (np.arange(order.shape[1], dtype=np.int64) if self.origin is None
                  else np.asarray(self.origin, dtype=np.int64))
        object.__setattr__(self, "order", order)
        object.__setattr__(self, "lengths", lengths)
        object.__setattr__(self, "worker", worker)
        object.__setattr__(self, "origin", origin)
        object.__setattr__(self, "items", tuple(self.items))
        object.__setattr__(self, "workers", tuple(self.workers))
        for a in (order, lengths, worker, origin):
            a.setflags(write=False)
        self._validate()

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_lists(
        cls,
        rankings: Sequence[Sequence[str]],
        workers: Sequence[str],
        *,
        items: Sequence[str] | None = None,
        worker_ids: Sequence[str] | None = None,
        tasks: Sequence[str] | None = None,
        source: str = "<data>",
        lines: Sequence[int] | None = None,
        ties_split: int = 0,
    ) -> Rankings:
        """Build from rankings given as lists of item ids (best first).

        ``items``/``worker_ids`` fix the id universe (items never ranked still get a
        score); by default they are the ids in order of first appearance. ``lines`` gives
        the source line of each ranking, used in error messages.

        Parameters
        ----------
        rankings : sequence of sequence of str
            Each ranking's item ids, best first.
        workers : sequence of str
            The worker id of each ranking.
        items, worker_ids : sequence of str, optional
            The id universes.
        tasks : sequence of str, optional
            The task id of each ranking.
        source : str
            What error messages call the data (a file).
        lines : sequence of int, optional
            The source line of each ranking.
        ties_split : int
            How many rankings with ties were split to make these.
        """
        if len(rankings) != len(workers):
            raise DataError(
                f"{len(rankings)} rankings but {len(workers)} worker ids", source)
        if tasks is not None and len(tasks) != len(rankings):
            raise DataError(f"{len(rankings)} rankings but {len(tasks)} task ids", source)
        item_index: dict[str, int] = {}
        if items is not None:
            for i, it in enumerate(items):
                item_index.setdefault(str(it), i)
            if len(item_index) != len(items):
                raise DataError("duplicate item ids in the item list", source)
        worker_index: dict[str, int] = {}
        if worker_ids is not None:
            for i, w in enumerate(worker_ids):
                worker_index.setdefault(str(w), i)
        n = len(rankings)
        K = max((len(r) for r in rankings), default=2)
        order = np.full((max(K, 2), n), PAD, dtype=np.int32)
        lengths = np.zeros(n, dtype=np.int32)
        widx = np.zeros(n, dtype=np.int32)
        for j, (rk, w) in enumerate(zip(rankings, workers)):
            line = lines[j] if lines is not None else None
            check_ranking(rk, source=source, line=line)
            w = str(w)
            if not w.strip():
                raise DataError("empty worker id", source, line)
            if w not in worker_index:
                if worker_ids is not None:
                    raise DataError(f"unknown worker id {w!r}", source, line)
                worker_index[w] = len(worker_index)
            widx[j] = worker_index[w]
            for p, it in enumerate(rk):
                it = str(it)
                if it not in item_index:
                    if items is not None:
                        raise DataError(f"unknown item id {it!r}", source, line)
                    item_index[it] = len(item_index)
                order[p, j] = item_index[it]
            lengths[j] = len(rk)
        return cls(
            items=tuple(item_index), workers=tuple(worker_index), order=order,
            lengths=lengths, worker=widx,
            task=None if tasks is None else np.asarray([str(t) for t in tasks], dtype=object),
            ties_split=ties_split, source=source,
        )

    def _validate(self) -> None:
        K, N = self.order.shape
        if self.lengths.shape != (N,) or self.worker.shape != (N,) or self.origin.shape != (N,):
            raise DataError("order, lengths, worker and origin disagree on N", self.source)
        if N and (self.lengths.min() < 2 or self.lengths.max() > K):
            raise DataError("every ranking needs 2 <= k <= K", self.source)
        pos = np.arange(K)[:, None]
        active = pos < self.lengths[None, :]
        if np.any(self.order[~active] != PAD):
            raise DataError("padding past a ranking's end must be -1", self.source)
        if N and (self.order[active].min() < 0 or self.order[active].max() >= len(self.items)):
            raise DataError("item index out of range", self.source)
        if N and (self.worker.min() < 0 or self.worker.max() >= len(self.workers)):
            raise DataError("worker index out of range", self.source)
        if self.task is not None and len(self.task) != N:
            raise DataError("task ids and rankings disagree on N", self.source)

    # ------------------------------------------------------------------ shape facts
    @property
    def n_rankings(self) -> int:
        return int(self.order.shape[1])

    @property
    def n_items(self) -> int:
        return len(self.items)

    @property
    def n_workers(self) -> int:
        return len(self.workers)

    @property
    def K(self) -> int:
        """The longest ranking length (the padded height of :attr:`order`)."""
        return int(self.order.shape[0])

    def __len__(self) -> int:
        return self.n_rankings

    def __repr__(self) -> str:
        return (f"Rankings(N={self.n_rankings}, L={self.n_items}, W={self.n_workers}, "
                f"K={self.K}, source={self.source!r})")

    # ------------------------------------------------------------------ views
    def ranking(self, n: int) -> np.ndarray:
        """Item indices of ranking ``n``, best first.

        Parameters
        ----------
        n : int
            The ranking's index.
        """
        return self.order[: self.lengths[n], n].copy()

    def as_lists(self, ids: bool = False) -> list[list]:
        """All rankings as lists of item indices (or ids with ``ids=True``).

        Parameters
        ----------
        ids : bool
            Item ids instead of indices.
        """
        out = []
        for n in range(self.n_rankings):
            r = self.ranking(n)
            out.append([self.items[i] for i in r] if ids else r.tolist())
        return out

    def positions(self) -> tuple[np.ndarray, np.ndarray]:
        """Gather-safe padded layout: ``(index, mask)``, both ``(K, N)``.

        ``index`` has the padding replaced by 0 so that it can be used directly for
        gathers in NumPy/JAX/PyTensor; ``mask`` is True on real positions. Any model
        that gathers with ``index`` must multiply or select with ``mask``.
        """
        mask = self.order != PAD
        return np.where(mask, self.order, 0).astype(np.int32), mask

    def k_counts(self) -> dict[int, int]:
        """How many rankings have each length ``k``."""
        return dict(sorted(Counter(self.lengths.tolist()).items()))

    def rankings_per_worker(self) -> np.ndarray:
        """``(W,)`` the number of rankings of each worker."""
        return np.bincount(self.worker, minlength=self.n_workers)

    def appearances_per_item(self) -> np.ndarray:
        """``(L,)`` the number of rankings each item appears in."""
        _, mask = self.positions()
        return np.bincount(self.order[mask], minlength=self.n_items)

    def n_pairs(self) -> int:
        """Pairs produced by full rank-breaking: ``sum k(k-1)/2``."""
        k = self.lengths.astype(np.int64)
        return int(np.sum(k * (k - 1) // 2))

    # ------------------------------------------------------------------ transforms
    def subset(self, idx: Iterable[int] | np.ndarray) -> Rankings:
        """Rankings ``idx`` (in that order), keeping the item/worker universe.

        Parameters
        ----------
        idx : iterable of int
            The rankings' indices.
        """
        idx = np.asarray(idx, dtype=np.int64)
        lengths = self.lengths[idx]
        K = int(lengths.max()) if len(idx) else 2
        return Rankings(
            items=self.items, workers=self.workers, order=self.order[:K, idx],
            lengths=lengths, worker=self.worker[idx],
            task=None if self.task is None else self.task[idx],
            origin=self.origin[idx], ties_split=self.ties_split, source=self.source,
            notes=self.notes,
        )

    def permuted(self, seed: int) -> Rankings:
        """The same rankings in a seeded random order (for order-sensitivity studies).

        Parameters
        ----------
        seed : int
            Seed of the order.
        """
        perm = np.random.default_rng(seed).permutation(self.n_rankings)
        return self.subset(perm)

    def rank_break(self) -> Rankings:
        """Full rank-breaking: each ranking into its ``k(k-1)/2`` ordered pairs.

        [Pan18], Lemma 1: full breaking is the consistent breaking for PL. Pairs keep
        the ranking's worker and task, and :attr:`origin` maps each pair to its source
        ranking (pairs are emitted in ranking order, then ``(i, j)`` lexicographic).
        """
        wins, loses, w, org = [], [], [], []
        for k in np.unique(self.lengths):
            sel = np.flatnonzero(self.lengths == k)
            for i, j in combinations(range(int(k)), 2):
                wins.append(self.order[i, sel])
                loses.append(self.order[j, sel])
                w.append(self.worker[sel])
                org.append(sel)
        if not wins:
            return self.subset([])
        wins, loses = np.concatenate(wins), np.concatenate(loses)
        w, org = np.concatenate(w), np.concatenate(org)
        # stable sort by source ranking so pairs stay in the file's order
        srt = np.argsort(org, kind="stable")
        return Rankings(
            items=self.items, workers=self.workers,
            order=np.stack([wins[srt], loses[srt]]), lengths=np.full(len(srt), 2),
            worker=w[srt], task=None if self.task is None else self.task[org[srt]],
            origin=self.origin[org[srt]], ties_split=self.ties_split,
            source=self.source, notes=self.notes,
        )

    def is_connected(self) -> bool:
        """Whether the comparison graph (items linked when ranked together) is connected.

        Only items that appear at least once count; items never ranked are reported by
        :func:`summary` separately. Linking each ranking's first item to the others gives
        the same components as all pairs, with ``K - 1`` edges per ranking.
        """
        from scipy.sparse import coo_matrix
        from scipy.sparse.csgraph import connected_components

        src, dst = [], []
        for p in range(1, self.K):
            sel = self.lengths > p
            src.append(self.order[0, sel])
            dst.append(self.order[p, sel])
        src = np.concatenate(src) if src else np.zeros(0, np.int32)
        dst = np.concatenate(dst) if dst else np.zeros(0, np.int32)
        graph = coo_matrix((np.ones(len(src)), (src, dst)), shape=(self.n_items,) * 2)
        _, labels = connected_components(graph, directed=False)
        seen = self.appearances_per_item() > 0
        return len(np.unique(labels[seen])) <= 1

    def summary(self) -> dict:
        """Plain-dict facts for ``crowdrank data summary`` and reports."""
        rpw = self.rankings_per_worker()
        app = self.appearances_per_item()
        return {
            "source": self.source,
            "items": self.n_items,
            "workers": self.n_workers,
            "rankings": self.n_rankings,
            "K": self.K,
            "k_counts": {int(k): int(v) for k, v in self.k_counts().items()},
            "pairs_after_rank_breaking": self.n_pairs(),
            "rankings_per_worker": {
                "min": int(rpw.min()) if len(rpw) else 0,
                "median": float(np.median(rpw)) if len(rpw) else 0.0,
                "max": int(rpw.max()) if len(rpw) else 0,
            },
            "items_never_ranked": int(np.sum(app == 0)),
            "ties_split": int(self.ties_split),
            "connected": bool(self.is_connected()),
            "notes": list(self.notes),
        }


def check_ranking(ranking: Sequence[str], *, source: str | None = None,
                  line: int | None = None) -> None:
    """Raise :class:`DataError` unless ``ranking`` is a strict order of >= 2 distinct ids."""
    if len(ranking) < 2:
        raise DataError(f"a ranking needs at least 2 items, got {len(ranking)}", source, line)
    seen = set()
    for it in ranking:
        s = str(it)
        if not s.strip():
            raise DataError("empty item id in a ranking", source, line)
        if s in seen:
            raise DataError(f"item {s!r} appears twice in one ranking", source, line)
        seen.add(s)


def split_ties(groups: Sequence[Sequence[str]]) -> list[list[str]]:
    """Split a ranking with ties into tie-free rankings ([Pan18], appendix 1.3).

    ``groups`` is the ranking as a list of tie groups, best first; ``a > {b = c} > d`` is
    ``[[a], [b, c], [d]]`` and becomes ``[a, b, d]`` and ``[a, c, d]``: one ranking for each
    choice of one member per tie group. A tie-free ranking is returned unchanged.

    Parameters
    ----------
    groups : sequence of sequence of str
        The tie groups, best first.
    """
    out: list[list[str]] = [[]]
    for g in groups:
        out = [prefix + [x] for prefix in out for x in g]
    return out


def align_scores(rankings: Rankings, scores: dict[str, float], *,
                 source: str = "<truth>") -> np.ndarray:
    """Ground-truth scores as an array aligned with ``rankings.items``.

    Items of the data without a score get NaN *and are listed in the error* unless the
    caller accepts partial truth: here we refuse silently-missing truth.

    Parameters
    ----------
    rankings : Rankings
        The data whose items the scores are aligned with.
    scores : dict of str to float
        Score by item id.
    source : str
        What error messages call the scores (the file).
    """
    missing = [it for it in rankings.items if it not in scores]
    if missing:
        raise DataError(
            f"{len(missing)} item(s) of the data have no ground-truth score, e.g. "
            f"{missing[:5]}", source)
    return np.array([float(scores[it]) for it in rankings.items])

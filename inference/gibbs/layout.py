"""The stages every Gibbs conditional walks over, grouped by worker (docs/design.md,
"The collapsed Gibbs sampler").

A ranking ``ρ`` of length ``k`` by worker ``w`` has ``k − 1`` stages: stage ``i`` offers
the ``m = k − i`` candidates ``c_t = ρ(i + t)``, ``t < m``, in reported order. COUPLE's
stage probability is ``Σ_t η̄_t e^{λ_{c_t}} / Σ_{j<m} e^{λ_{c_j}}`` ([Pan18], Eq. 3);
CrowdBT's pair (winner, loser) is the stage ``m = 2`` with ``η̄ = (η, 1 − η)``; PL's and
BT's stages are the same with the offset fixed at ``0``. One table serves all four.

The stages are sorted by worker (stable: the file's order within a worker), because the
collapsed offset step is a Pólya urn that runs sequentially within each worker.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from crowdrank.models.model_inputs import ModelInputs


@dataclass(frozen=True, eq=False)
class Stages:
    """Every stage of the data.

    Attributes
    ----------
    cand : ndarray, shape (S, K), int32
        The candidates of each stage in reported order, ``-1`` past ``m``.
    m : ndarray, shape (S,), int32
        The number of candidates.
    worker : ndarray, shape (S,), int32
        The stage's worker (stages sorted by worker).
    w_start : ndarray, shape (W + 1,), int64
        Stages ``w_start[w]:w_start[w + 1]`` are worker ``w``'s.
    origin : ndarray, shape (S,), int64
        The source ranking of each stage (pointwise log-likelihoods per ranking).
    n_items, n_workers, K : int
        ``L``, ``W`` and the longest stage.
    """

    cand: np.ndarray
    m: np.ndarray
    worker: np.ndarray
    w_start: np.ndarray
    origin: np.ndarray
    n_items: int
    n_workers: int
    K: int

    @property
    def n_stages(self) -> int:
        return int(self.m.shape[0])

    @property
    def stage_counts(self) -> np.ndarray:
        """``(W, K + 1)``: each worker's stages by number of candidates."""
        if not hasattr(self, "_counts"):
            N = np.zeros((self.n_workers, self.K + 1))
            np.add.at(N, (self.worker, self.m), 1.0)
            object.__setattr__(self, "_counts", N)
        return self._counts


def stages(inputs: ModelInputs) -> Stages:
    """The stages of ``inputs`` (its length-sorted blocks; pairs for BT and CrowdBT)."""
    K = inputs.K
    cand, m, worker, origin = [np.zeros((0, K), np.int32)], [np.zeros(0, np.int32)], \
        [np.zeros(0, np.int32)], [np.zeros(0, np.int64)]
    for k, a, b in inputs.blocks:
        for i in range(k - 1):
            block = np.full((b - a, K), -1, np.int32)
            block[:, :k - i] = inputs.index[i:k, a:b].T
            cand.append(block)
            m.append(np.full(b - a, k - i, np.int32))
            worker.append(inputs.worker[a:b])
            origin.append(inputs.origin[a:b])
    cand, m, worker, origin = (np.concatenate(cand), np.concatenate(m),
                               np.concatenate(worker), np.concatenate(origin))
    srt = np.argsort(worker, kind="stable")
    worker = np.ascontiguousarray(worker[srt], np.int32)
    W = int(inputs.n_workers)
    w_start = np.searchsorted(worker, np.arange(W + 1)).astype(np.int64)
    return Stages(np.ascontiguousarray(cand[srt]), np.ascontiguousarray(m[srt]), worker,
                  w_start, np.ascontiguousarray(origin[srt], np.int64), int(inputs.n_items),
                  W, K)


def empty_like(st: Stages) -> Stages:
    """The same items, workers and ``K`` with no stage: the prior alone (prior-only runs)."""
    return Stages(np.zeros((0, st.K), np.int32), np.zeros(0, np.int32),
                  np.zeros(0, np.int32), np.zeros(st.n_workers + 1, np.int64),
                  np.zeros(0, np.int64), st.n_items, st.n_workers, st.K)

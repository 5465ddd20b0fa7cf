"""The normalised-COUPLE normaliser's stage product, written once for both PPLs.

``log Σ_{k! orderings} Eq. 4`` ([Pan18], Eq. 4; docs/design.md, Models) is, for one
ordering ``π`` of a task's ``k`` items, a product over stages ``i < k − 1`` (``m = k − i``
items left) of

    ``Σ_{t<m} w^{(m)}_t q_{i+t} / S_i``,  ``S_i = Σ_{j≥i} q_j``,

with ``q_j = p_{π(j)}``, ``p = exp(λ − max)`` over the task, and the worker weights
``w^{(m)}_t = η_t / Σ_{v<m} η_v``. Only ``+``, ``*`` and ``/`` appear, so the same
function builds the NumPyro (``jax.numpy``) and the PyMC (PyTensor) graph: each back-end
gathers its ``q`` rows and weights its own way (NumPyro one ordering at a time from static
row slices, PyMC all orderings at once by a constant-index take) and hands them here.
"""

from __future__ import annotations

from itertools import permutations

import numpy as np


def padded_orderings(K: int) -> tuple[np.ndarray, np.ndarray]:
    """All ``K!`` orderings ``(P, K)`` of the positions of a padded ``(n, K)`` table and,
    for each, the last position it moves (``-1``: the identity). An ordering is one of a
    row of length ``k`` when that position is ``< k``: it leaves the padding in place (the
    masked normalisers of the models as functions of arrays)."""
    perms = np.array(list(permutations(range(K))), np.int64).reshape(-1, K)
    moved = perms != np.arange(K)
    last = np.where(moved.any(axis=1), K - 1 - np.argmax(moved[:, ::-1], axis=1), -1)
    return perms, last


def ordering_stage_product(q, weight, k: int):
    """``Π_{i<k−1} (Σ_{t<m} weight(m, t)·q[i+t]) / S_i`` for the ``k`` rows ``q[0..k−1]``
    of one ordering (or a stack of orderings: any shape the rows broadcast to).

    ``weight(m, t)`` returns ``w^{(m)}_t`` (``t < m``); callers precompute or build it in
    their back-end. Every factor is a ratio of positive ``O(1)`` quantities (``q ∈ (0, 1]``,
    ``w ≤ 1``), so the product is taken in linear space; the caller sums it over orderings
    and takes the log.
    """
    suffix = [None] * (k - 1)          # S_i, accumulated from the last row up
    acc = q[k - 1]
    for i in range(k - 2, -1, -1):
        acc = acc + q[i]
        suffix[i] = acc
    prod = 1.0
    for i in range(k - 1):
        m = k - i
        mix = weight(m, 0) * q[i]
        for t in range(1, m):
            mix = mix + weight(m, t) * q[i + t]
        prod = prod * (mix / suffix[i])
    return prod

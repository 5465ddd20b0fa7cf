"""CrowDC [Wang23]: divide-and-conquer paired comparisons, and its simulation protocol.

CrowDC saves comparisons by never comparing most cross-group pairs:

1. **Divide** (Algorithm 1): split the ``n`` items at random into ``g`` groups of
   ``m = n/g``; compare every pair inside each group (``t`` times) and fit Bradley–Terry
   per group: the *within-group* scores.
2. **Pivots**: sort each group by within-group score (ascending) and take ``p`` pivots at
   the orders ``ORD`` spread evenly over ``1..m`` (``m = 10, p = 4`` gives ``{1, 4, 7, 10}``,
   the paper's example; so the lowest and highest are always pivots); compare every pair
   of the ``g·p`` pivots — the pairs of two pivots of one group were already compared in
   step 1 and their outcomes are reused — and fit BT: the *out-of-group* scores.
3. **Conquer** (Algorithm 2): a pivot's final score is its out-of-group score; any other
   item sits between its closest pivots below and above (by within-group score) ``l`` and
   ``r``, and is placed by proportion:
   ``s_fin = s_out(l) + (s_in − s_in(l)) / (s_in(r) − s_in(l)) · (s_out(r) − s_out(l))``.

Cost: ``t · (g·C(m, 2) + C(g·p, 2) − g·C(p, 2))`` comparisons against the baseline's
``t · C(n, 2)`` (BTL: every pair). Simulation protocol: item ``d_b`` is better than
``d_a`` when ``b > a``; each of the ``t`` comparisons of a pair picks the better item
with probability ``r``; one data set holds the outcomes of every pair, which the baseline
uses in full and CrowDC only where its design compares. Accuracy is Kendall's τ between
the scores and the truth.

The BT fits are the MAP of :mod:`.api` with a vague ``N(0, 10²)`` prior: with few
comparisons the ML estimate often does not exist (an item that won every comparison),
and the paper does not say how its BT fit handles that.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import comb

import numpy as np

from . import luce
from .solvers import Problem, solve

#: Prior sd of the BT fits (vague; see the module docstring).
SIGMA0 = 10.0


def simulate_outcomes(n: int, t: int, r: float, rng: np.random.Generator) -> np.ndarray:
    """``B[a, b]``: how many of the ``t`` comparisons of pair ``a < b`` the better item
    ``b`` won (upper triangle; the rest is 0)."""
    B = np.zeros((n, n), dtype=np.int64)
    iu = np.triu_indices(n, 1)
    B[iu] = rng.binomial(t, r, size=len(iu[0]))
    return B


def bt_scores(items: np.ndarray, B: np.ndarray, t: int, pairs=None,
              sigma0: float = SIGMA0) -> np.ndarray:
    """BT MAP scores of ``items`` from the outcomes ``B`` of the given ``pairs`` (default:
    every pair of ``items``), aligned with ``items``."""
    items = np.asarray(items)
    idx = {int(x): k for k, x in enumerate(items)}
    if pairs is None:
        a, b = np.triu_indices(len(items), 1)
        pa, pb = items[a], items[b]
    else:
        pa, pb = pairs
    lo, hi = np.minimum(pa, pb), np.maximum(pa, pb)
    wins_hi = B[lo, hi].astype(float)
    ia = np.array([idx[int(x)] for x in lo])
    ib = np.array([idx[int(x)] for x in hi])
    cand = np.concatenate([np.stack([ib, ia], 1), np.stack([ia, ib], 1)])
    st = luce.Stages(len(items), cand, np.ones_like(cand, bool), np.arange(len(cand)),
                     len(cand), "bt")
    w = np.concatenate([wins_hi, t - wins_hi])
    return solve(Problem(st, luce.Prior(0.0, sigma0), w), "newton", tol=1e-8).lam


def pivot_orders(m: int, p: int) -> np.ndarray:
    """0-based positions (in ascending within-group order) of the ``p`` pivots of a group
    of ``m``: ``round(linspace(1, m, p)) − 1``."""
    if not 2 <= p <= m:
        raise ValueError(f"need 2 <= p <= group size {m}, got p={p}")
    return np.unique(np.round(np.linspace(1, m, p)).astype(int) - 1)


def cost(n: int, g: int, p: int, t: int) -> tuple[int, int]:
    """``(CrowDC comparisons, baseline comparisons)``."""
    m = n // g
    return t * (g * comb(m, 2) + comb(g * p, 2) - g * comb(p, 2)), t * comb(n, 2)


@dataclass(frozen=True)
class CrowdcResult:
    scores: np.ndarray         # final scores, item order 0..n-1
    comparisons: int
    pivots: np.ndarray


def crowdc(B: np.ndarray, t: int, g: int, p: int, rng: np.random.Generator) -> CrowdcResult:
    """CrowDC on the outcomes ``B`` of ``n`` items with a random division into ``g`` groups
    (the module docstring)."""
    n = B.shape[0]
    if n % g:
        raise ValueError(f"n={n} must be divisible by g={g}")
    m = n // g
    if m < 3 or p < 2:
        raise ValueError("each group needs at least 3 items and p >= 2 pivots")
    groups = rng.permutation(n).reshape(g, m)
    s_in = np.empty(n)
    pivots = []
    order = pivot_orders(m, p)
    for grp in groups:
        s = bt_scores(grp, B, t)
        s_in[grp] = s
        pivots.append(grp[np.argsort(s, kind="stable")[order]])
    piv = np.concatenate(pivots)
    s_out = dict(zip(piv.tolist(), bt_scores(piv, B, t).tolist()))
    fin = np.empty(n)
    for grp, pv in zip(groups, pivots):
        pin = s_in[pv]                                   # ascending by construction
        for j in grp:
            if int(j) in s_out and j in pv:
                fin[j] = s_out[int(j)]
                continue
            k = int(np.clip(np.searchsorted(pin, s_in[j], side="right"), 1, len(pv) - 1))
            lo, hi = pv[k - 1], pv[k]
            span = s_in[hi] - s_in[lo]
            frac = 0.0 if span == 0 else (s_in[j] - s_in[lo]) / span
            fin[j] = s_out[int(lo)] + frac * (s_out[int(hi)] - s_out[int(lo)])
    return CrowdcResult(fin, cost(n, g, p, t)[0], piv)


def btl(B: np.ndarray, t: int) -> np.ndarray:
    """The baseline: BT on every pair."""
    return bt_scores(np.arange(B.shape[0]), B, t)

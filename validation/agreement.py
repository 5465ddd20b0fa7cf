"""How far two rankings agree: the COUPLE paper's pairwise accuracy over comparable pairs
([Pan18], Sect. 5.2), top-k overlap, rank correlations, the lowest-quality workers and the
sensitivity to the data's order — the ranking and worker rows of
:func:`crowdrank.validation.compare.compare`."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy import stats

from crowdrank.validation.tables import _finite_or_none

TOP_K = 10          # top-k overlap of the item rankings
LOW_WORKERS = 6     # the paper's six lowest-quality workers ([Pan18], Sect. 5.3, Table 4)


def comparison_components(data) -> np.ndarray:
    """The connected component of each item in the comparison graph of ``data`` (a
    :class:`~crowdrank.models.data.Rankings`), as integer labels aligned with ``data.items``.

    Items are linked when one ranking holds both. Scores are identified only up to a shift
    per component (the likelihood sees differences within rankings), so the data order
    two items only when they share a component. An item never ranked is a component of its
    own. Linking each ranking's first item to the others gives the same components as all
    of its pairs, with ``k - 1`` edges per ranking.
    """
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    src = [data.order[0, data.lengths > p] for p in range(1, data.K)]
    dst = [data.order[p, data.lengths > p] for p in range(1, data.K)]
    src = np.concatenate(src) if src else np.zeros(0, np.int32)
    dst = np.concatenate(dst) if dst else np.zeros(0, np.int32)
    graph = coo_matrix((np.ones(len(src)), (src, dst)), shape=(data.n_items,) * 2)
    return connected_components(graph, directed=False)[1]


def _pair_counts(truth, scores, components, block: int) -> tuple[int, int, int]:
    """``(right, used, left_out)`` over the pairs the truth orders (``r_i > r_j``): used =
    same component (all when ``components`` is None), right = used and ``λ_i > λ_j``."""
    t, s = np.asarray(truth, float), np.asarray(scores, float)
    if t.shape != s.shape or t.ndim != 1:
        raise ValueError("truth and scores must be 1-d arrays of the same length")
    if not (np.all(np.isfinite(t)) and np.all(np.isfinite(s))):
        raise ValueError("truth and scores must be finite")
    c = None
    if components is not None:
        c = np.asarray(components)
        if c.shape != t.shape:
            raise ValueError("components must hold one label per item, like truth")
    num = den = out = 0
    for i0 in range(0, len(t), block):
        gt = t[i0:i0 + block, None] > t[None, :]
        if c is not None:
            same = c[i0:i0 + block, None] == c[None, :]
            out += int(np.sum(gt & ~same))
            gt &= same
        num += int(np.sum(gt & (s[i0:i0 + block, None] > s[None, :])))
        den += int(np.sum(gt))
    return num, den, out


def pairwise_accuracy(truth, scores, block: int = 512, components=None) -> float:
    """The paper's accuracy ([Pan18], Sect. 5.1, a Wilcoxon–Mann–Whitney statistic):
    ``Σ_{i,j} 1(r_i > r_j) ∧ 1(λ_i > λ_j) / Σ_{i,j} 1(r_i > r_j)``, ``r`` the true scores
    (higher is better), ``λ`` the estimates. Ties in ``λ`` count as wrong, ties in ``r``
    are not pairs. Computed in row blocks so that ``L²`` booleans are never all held.

    ``components`` (labels per item, e.g. :func:`comparison_components`) restricts the sum
    to pairs in the same component, the only pairs whose order the data can determine;
    :func:`pairwise_accuracy_comparable` also says how many pairs that leaves out."""
    num, den, _ = _pair_counts(truth, scores, components, block)
    if den == 0:
        raise ValueError("the ground truth orders no pair of items (all scores tied)"
                         if components is None else
                         "the ground truth orders no pair of items within a component")
    return num / den


class PairwiseAccuracy(NamedTuple):
    """:func:`pairwise_accuracy` over comparable pairs, with the pairs it counted and left
    out (pairs the truth orders across components); ``accuracy`` is None with no pair."""

    accuracy: float | None
    n_pairs_used: int
    n_pairs_left_out: int


def pairwise_accuracy_comparable(truth, scores, components, block: int = 512
                                 ) -> PairwiseAccuracy:
    """Pairwise accuracy over the pairs in one component of the comparison graph.

    ``components`` is a :class:`~crowdrank.models.data.Rankings` (its components are computed, and
    ``truth``/``scores`` must be aligned with its ``items``) or labels per item. On a
    connected data set nothing is left out and the accuracy is :func:`pairwise_accuracy`'s.
    Pairs are those the truth orders (``r_i > r_j``); ties in the truth are not pairs.
    """
    if hasattr(components, "order"):
        components = comparison_components(components)
    num, den, out = _pair_counts(truth, scores, components, block)
    return PairwiseAccuracy(num / den if den else None, den, out)


def top_overlap(a, b, k: int = TOP_K) -> float:
    """Share of the top-``k`` items by ``a`` that are also top-``k`` by ``b``."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    k = min(k, len(a))
    return len(set(np.argsort(-a, kind="stable")[:k]) & set(np.argsort(-b, kind="stable")[:k])) / k


def lowest(values, ids, k: int = LOW_WORKERS) -> list[str]:
    """The ``k`` ids with the lowest values (the paper's noisy-worker detection)."""
    order = np.argsort(np.asarray(values, float), kind="stable")[: min(k, len(ids))]
    return [str(ids[i]) for i in order]


def _corr(fn, a, b) -> float | None:
    if len(a) < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return None          # undefined (constant input): reported as null, not NaN
    return _finite_or_none(fn(a, b)[0])


def ranking_agreement(online_means, nuts_means, truth=None, k: int = TOP_K,
                      components=None) -> dict:
    """Kendall τ between the two posteriors' item means, top-``k`` overlap, and the pairwise
    accuracy of each method against the ground truth where known — over the pairs the data
    can order (same component of the comparison graph) when ``components`` labels are
    given, with the number of pairs used and left out."""
    out = {"kendall_tau": _corr(stats.kendalltau, online_means, nuts_means),
           f"top{k}_overlap": top_overlap(online_means, nuts_means, k)}
    if truth is not None:
        if components is None:
            out["accuracy_online"] = pairwise_accuracy(truth, online_means)
            out["accuracy_nuts"] = pairwise_accuracy(truth, nuts_means)
        else:
            a_on = pairwise_accuracy_comparable(truth, online_means, components)
            a_nu = pairwise_accuracy_comparable(truth, nuts_means, components)
            out["accuracy_online"], out["accuracy_nuts"] = a_on.accuracy, a_nu.accuracy
            out["accuracy_pairs_used"] = a_on.n_pairs_used
            out["accuracy_pairs_left_out"] = a_on.n_pairs_left_out
        out["kendall_tau_truth_online"] = _corr(stats.kendalltau, truth, online_means)
        out["kendall_tau_truth_nuts"] = _corr(stats.kendalltau, truth, nuts_means)
    return out


def worker_agreement(online_q, nuts_q, ids, truth_q=None, k: int = LOW_WORKERS) -> dict:
    """Spearman correlation of ``E[η_w^1]`` between the methods and the overlap of the ``k``
    lowest-quality workers by each ([Pan18], Sect. 5.3; ``k`` is at most half the
    workers, so that the overlap still means something with few workers)."""
    # with few workers "the six lowest" would be (nearly) all of them: use half at most
    k = max(1, min(k, len(ids) // 2))
    lo_on, lo_nu = lowest(online_q, ids, k), lowest(nuts_q, ids, k)
    out = {"spearman": _corr(stats.spearmanr, online_q, nuts_q),
           "lowest_online": lo_on, "lowest_nuts": lo_nu,
           "lowest_overlap": len(set(lo_on) & set(lo_nu)), "lowest_k": k}
    if truth_q is not None:
        lo_tr = lowest(truth_q, ids, k)
        out.update(spearman_truth_online=_corr(stats.spearmanr, truth_q, online_q),
                   spearman_truth_nuts=_corr(stats.spearmanr, truth_q, nuts_q),
                   lowest_truth=lo_tr,
                   lowest_overlap_truth_online=len(set(lo_tr) & set(lo_on)),
                   lowest_overlap_truth_nuts=len(set(lo_tr) & set(lo_nu)))
    return out


# ------------------------------------------------------------------ order sensitivity
def order_sensitivity(perm_means, online_means, nuts_means, nuts_sds, ids=None) -> dict:
    """Spread of the online item means over seeded permutations of the data, beside their
    gap to MCMC (docs/design.md, Validation), both in units of the MCMC sd.

    Parameters
    ----------
    perm_means : array, shape (P, L)
        Online means from ``P`` passes over permuted data (items in the same order as the
        other arrays).
    online_means : array, shape (L,)
        The online means of the pass being audited (file order).
    nuts_means, nuts_sds : arrays, shape (L,)

    Returns
    -------
    dict
        ``per_item`` (``spread`` = sd over permutations / s, ``gap`` = |online − m| / s),
        medians and 90th percentiles of both, the share of items whose gap exceeds twice
        their spread (a gap that order alone does not explain), and the range of Kendall τ
        between each permutation's means and the MCMC means.
    """
    P = np.asarray(perm_means, float)
    if P.ndim != 2 or P.shape[0] < 2:
        raise ValueError("order sensitivity needs at least 2 permutations")
    s = np.asarray(nuts_sds, float)
    spread = P.std(axis=0, ddof=1) / s
    gap = np.abs(np.asarray(online_means, float) - np.asarray(nuts_means, float)) / s
    taus = [_corr(stats.kendalltau, p, nuts_means) for p in P]
    taus = [t for t in taus if t is not None]
    out = {"permutations": int(P.shape[0]),
           "median_spread": float(np.median(spread)), "p90_spread": float(np.percentile(spread, 90)),
           "median_gap": float(np.median(gap)), "p90_gap": float(np.percentile(gap, 90)),
           "share_gap_above_2_spread": float(np.mean(gap > 2 * spread)),
           "kendall_tau_min": min(taus) if taus else None,
           "kendall_tau_max": max(taus) if taus else None}
    out["per_item"] = {"id": [str(i) for i in (ids if ids is not None else range(len(s)))],
                       "spread": spread.tolist(), "gap": gap.tolist()}
    return out


# ------------------------------------------------------------------ everything together

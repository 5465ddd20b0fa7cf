"""Statistics of a ranking data set against a reference order, for predictive checks.

A predictive check compares statistics of the observed data with their distribution under
data sets drawn from the model: from the *prior* (prior predictive: before any data is
seen, what does the model think a crowd reports?) or from the *posterior* (posterior
predictive). The statistics below are what a crowdsourcing analyst reads, all measured
against a *reference order* of each ranking's own items:

- the task's true order, where it is known (simulated data, prior predictive draws), or
- the order by a score vector (the true λ, or a posterior mean), :func:`order_by_scores`.

Every statistic is a pure function of the rankings (:class:`crowdrank.models.data.Rankings`) and a
reference in the same per-position layout (``(K, N)``, best first, ``PAD`` after ``k``):

- :func:`first_choice_by_stage`: at stage ``i`` of a ranking, does the reported item equal
  the best *remaining* item of the reference? (stage 1 is the first choice; in COUPLE's
  story the stage-``i`` rate is ``E[η̄¹]`` over the ``m = k − i + 1`` remaining items,
  [Pan18], Sect. 3.2);
- :func:`worker_first_choice`: per worker, the share of rankings whose top item is the
  reference's top item (first-choice accuracy);
- :func:`worker_pair_agreement`: per worker, the share of rank-broken pairs reported in the
  reference's order (for pairs this is CrowdBT's accuracy η¹, [Chen13]);
- :func:`kendall_tau`: per ranking, Kendall's τ between report and reference;
- :func:`summarise`: all of the above as one dictionary of numbers.
"""

from __future__ import annotations

import numpy as np

from crowdrank.models.data import PAD, Rankings


def _check(data: Rankings, reference: np.ndarray) -> np.ndarray:
    ref = np.asarray(reference)
    if ref.shape != data.order.shape:
        raise ValueError(f"reference has shape {ref.shape}, the rankings {data.order.shape}")
    a = np.sort(np.where(data.order == PAD, -1, data.order), axis=0)
    b = np.sort(np.where(ref == PAD, -1, ref), axis=0)
    if not np.array_equal(a, b):
        bad = int(np.flatnonzero(np.any(a != b, axis=0))[0])
        raise ValueError(f"reference of ranking {bad} does not hold the ranking's items")
    return ref


def order_by_scores(data: Rankings, scores) -> np.ndarray:
    """Each ranking's items sorted by ``scores`` (aligned with ``data.items``), best first,
    in the per-position layout of ``data.order``; ties keep the reported order."""
    scores = np.asarray(scores, float)
    if scores.shape != (data.n_items,):
        raise ValueError(f"scores must have one value per item ({data.n_items}), "
                         f"got shape {scores.shape}")
    if not np.all(np.isfinite(scores)):
        raise ValueError("scores must be finite")
    pad = data.order == PAD
    key = np.where(pad, np.inf, -scores[np.where(pad, 0, data.order)])
    idx = np.argsort(key, axis=0, kind="stable")
    return np.take_along_axis(data.order, idx, axis=0)


def reference_ranks(data: Rankings, reference) -> np.ndarray:
    """``r[p, n]``: the place (0 = best) in ``reference[:, n]`` of the item the worker put
    at place ``p`` of ranking ``n``; ``K`` at padded places."""
    ref = _check(data, reference)
    K = data.order.shape[0]
    hit = (data.order[:, None, :] == ref[None, :, :]) & (data.order[:, None, :] != PAD)
    r = hit.argmax(axis=1)
    return np.where(data.order == PAD, K, r)


def first_choice_by_stage(data: Rankings, reference) -> tuple[np.ndarray, np.ndarray]:
    """Share of stage-``i`` choices (``i = 1 … K−1``) that are the best remaining item of the
    reference, and the number of rankings with that stage: two arrays of length ``K − 1``
    (NaN where no ranking has the stage)."""
    r = reference_ranks(data, reference)
    K = r.shape[0]
    # best remaining = smallest reference place among places i..k-1 (padding is K)
    suffix_min = np.minimum.accumulate(r[::-1], axis=0)[::-1]
    rates, counts = np.full(K - 1, np.nan), np.zeros(K - 1, dtype=int)
    for i in range(K - 1):
        has = data.lengths > i + 1
        counts[i] = int(has.sum())
        if counts[i]:
            rates[i] = float(np.mean(r[i, has] == suffix_min[i, has]))
    return rates, counts


def _per_worker(data: Rankings, values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    num = np.bincount(data.worker, weights=values, minlength=data.n_workers)
    den = np.bincount(data.worker, weights=weights, minlength=data.n_workers)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)


def worker_first_choice(data: Rankings, reference) -> np.ndarray:
    """Per worker (``data.workers`` order): share of their rankings whose first item is the
    reference's first item (NaN for a worker without rankings)."""
    r = reference_ranks(data, reference)
    return _per_worker(data, (r[0] == 0).astype(float), np.ones(data.n_rankings))


def _pair_counts(data: Rankings, reference) -> tuple[np.ndarray, np.ndarray]:
    """Per ranking: rank-broken pairs in the reference's order, and all its pairs."""
    r = reference_ranks(data, reference)
    K = r.shape[0]
    agree = np.zeros(data.n_rankings)
    for p in range(K - 1):
        for q in range(p + 1, K):
            valid = data.lengths > q
            agree += valid & (r[p] < r[q])
    k = data.lengths.astype(float)
    return agree, k * (k - 1) / 2


def worker_pair_agreement(data: Rankings, reference) -> np.ndarray:
    """Per worker: share of their rank-broken pairs in the reference's order."""
    agree, total = _pair_counts(data, reference)
    return _per_worker(data, agree, total)


def kendall_tau(data: Rankings, reference) -> np.ndarray:
    """Per ranking: Kendall's τ between report and reference (+1 same, −1 reversed)."""
    agree, total = _pair_counts(data, reference)
    return (2 * agree - total) / total


def summarise(data: Rankings, reference) -> dict:
    """All statistics of ``data`` against ``reference`` as plain numbers and lists:
    ``first_choice`` (all rankings), ``stage_rate``/``stage_count`` (by stage),
    ``pair_agreement`` (all rank-broken pairs), ``tau_mean``, and per worker
    ``worker_first_choice`` and ``worker_pair_agreement``."""
    rates, counts = first_choice_by_stage(data, reference)
    agree, total = _pair_counts(data, reference)
    r0 = reference_ranks(data, reference)[0]
    return {
        "first_choice": float(np.mean(r0 == 0)),
        "stage_rate": rates.tolist(),
        "stage_count": counts.tolist(),
        "pair_agreement": float(agree.sum() / total.sum()),
        "tau_mean": float(np.mean((2 * agree - total) / total)),
        "worker_first_choice": worker_first_choice(data, reference).tolist(),
        "worker_pair_agreement": worker_pair_agreement(data, reference).tolist(),
    }

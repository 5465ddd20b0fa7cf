"""Plain NumPy/SciPy reference log-likelihoods (docs/design.md, Models).

These are the ground truth that the NumPyro and PyMC models, and the tests, are checked
against, so they are written for reading, not for speed: one ranking at a time, one stage
at a time. Conventions: ``lam`` is the score vector (length L), a ranking is an integer
array of item indices best first, ``eta`` is one worker's uncertainty vector (length >= k,
COUPLE) or accuracy (scalar, CrowdBT).

Equation numbers refer to [Pan18] (Stagewise learning for noisy k-ary preferences).
"""

from __future__ import annotations

from itertools import permutations

import numpy as np
from scipy.special import expit, log_expit, log_softmax, logsumexp

from .data import Rankings
from .registry import MODELS, get  # noqa: F401  (re-exported: the model names)


# ---------------------------------------------------------------- single rankings
def pl_loglik(lam: np.ndarray, ranking: np.ndarray) -> float:
    """Plackett–Luce: ``sum_i log softmax(lam[rho(i..k)])[rho(i)]`` ([Pan18], Eq. 1)."""
    lam = np.asarray(lam, dtype=float)
    r = np.asarray(ranking)
    return float(sum(log_softmax(lam[r[i:]])[0] for i in range(len(r) - 1)))


def bt_loglik(lam: np.ndarray, ranking: np.ndarray) -> float:
    """Bradley–Terry on the fully rank-broken ranking: ``sum_{i<j} log sigma(lam_i - lam_j)``."""
    lam = np.asarray(lam, dtype=float)
    r = np.asarray(ranking)
    k = len(r)
    return float(sum(np.log(expit(lam[r[i]] - lam[r[j]]))
                     for i in range(k) for j in range(i + 1, k)))


def crowdbt_pair_prob(lam_w: float, lam_l: float, eta: float) -> float:
    """CrowdBT [Chen13]: ``eta sigma(d) + (1 - eta) sigma(-d)``, ``d = lam_w - lam_l``."""
    d = lam_w - lam_l
    return float(eta * expit(d) + (1.0 - eta) * expit(-d))


def crowdbt_loglik(lam: np.ndarray, eta: float, ranking: np.ndarray) -> float:
    """CrowdBT on the fully rank-broken ranking (product over its ``k(k-1)/2`` pairs)."""
    lam = np.asarray(lam, dtype=float)
    r = np.asarray(ranking)
    k = len(r)
    return float(sum(np.log(crowdbt_pair_prob(lam[r[i]], lam[r[j]], eta))
                     for i in range(k) for j in range(i + 1, k)))


def peergrader_loglik(lam: np.ndarray, eta: float, ranking: np.ndarray) -> float:
    """PeerGrader [Raman14]: Plackett–Luce on the grader's scaled scores,
    ``P(ρ | λ, η_g) = PL(ρ | η_g·λ)``; ``η_g → 0`` is a grader who orders at random,
    a large ``η_g`` one who follows ``λ`` almost surely."""
    return pl_loglik(float(eta) * np.asarray(lam, dtype=float), ranking)


def couple_stage_prob(lam: np.ndarray, eta: np.ndarray, candidates: np.ndarray) -> float:
    """One COUPLE stage ([Pan18], Eq. 3): ``sum_t etabar_t softmax(lam_c)[t]``.

    ``candidates`` are the ``m`` remaining items in the *reported* order; the reported
    item is ``candidates[0]`` and ``candidates[t]`` is the item at offset ``t``. The first
    ``m`` entries of ``eta`` are renormalised (``etabar``).
    """
    m = len(candidates)
    active = np.asarray(eta, dtype=float)[:m]
    etabar = active / active.sum()
    p = np.exp(log_softmax(np.asarray(lam, dtype=float)[candidates]))
    return float(np.dot(etabar, p))


def couple_loglik(lam: np.ndarray, eta: np.ndarray, ranking: np.ndarray) -> float:
    """COUPLE ([Pan18], Eq. 4): product over stages ``i = 1..k-1`` of Eq. 3.

    Not normalised over orderings for ``k >= 3`` (docs/design.md, Facts); see
    :func:`couple_normalizer`.
    """
    r = np.asarray(ranking)
    return float(sum(np.log(couple_stage_prob(lam, eta, r[i:])) for i in range(len(r) - 1)))


def couple_normalizer(lam: np.ndarray, eta: np.ndarray, subset: np.ndarray) -> float:
    """``Z = sum over all k! orderings of subset`` of the Eq. 4 product (1 only for k <= 2)."""
    return float(sum(np.exp(couple_loglik(lam, eta, np.array(o)))
                     for o in permutations(np.asarray(subset).tolist())))


def couple_normalized_loglik(lam: np.ndarray, eta: np.ndarray, ranking: np.ndarray) -> float:
    """Normalised COUPLE (docs/design.md, Models): Eq. 4 divided by its sum over the ``k!`` orderings."""
    return couple_loglik(lam, eta, ranking) - np.log(couple_normalizer(lam, eta, ranking))


# ---------------------------------------------------------------- whole data sets
# The models' ``order_prob`` (models.registry): ``f(lam, [eta_w,] ranking)`` → the
# probability that the model's generative process (the NumPyro site's ``sample``,
# ``redraw``) reports ``ranking`` for a task of its items. Where the likelihood is that law
# (PL, PeerGrader, normalised COUPLE) the spec names none and ``exp(reference)`` is used;
# BT and CrowdBT draw a PL order (reversed whole with probability 1 − η) whose law is not
# their rank-broken pseudo-likelihood for k ≥ 3, and stagewise COUPLE runs its story.
def pl_order_prob(lam: np.ndarray, ranking: np.ndarray) -> float:
    """A Plackett–Luce draw (PL, BT): ``exp`` of :func:`pl_loglik`."""
    return float(np.exp(pl_loglik(lam, np.asarray(ranking))))


def crowdbt_order_prob(lam: np.ndarray, eta: float, ranking: np.ndarray) -> float:
    """CrowdBT's draw: a PL order kept with probability ``η``, reversed otherwise."""
    r = np.asarray(ranking)
    return float(eta) * pl_order_prob(lam, r) + (1.0 - float(eta)) * pl_order_prob(lam, r[::-1])


def couple_order_prob(lam: np.ndarray, eta: np.ndarray, ranking: np.ndarray) -> float:
    """Stagewise COUPLE's story enumerated ([Pan18], Eq. 3): Σ over true PL orders ``π`` of
    ``PL(π)`` × Π over stages of ``η_t / Σ_{v<m} η_v`` (``t`` the reported item's offset in
    the ``m`` items of ``π`` left)."""
    eta = np.asarray(eta, float)
    o = [int(i) for i in np.asarray(ranking)]
    total = 0.0
    for pi in permutations(o):
        p = pl_order_prob(lam, np.array(pi))
        remaining = list(pi)
        for item in o[:-1]:
            m = len(remaining)
            t = remaining.index(item)
            p *= eta[t] / np.sum(eta[:m])
            remaining.remove(item)
        total += p
    return total


def loglik_pointwise(model: str, data: Rankings, lam: np.ndarray,
                     eta: np.ndarray | None = None) -> np.ndarray:
    """Log-likelihood of each ranking of ``data`` (shape ``(N,)``).

    ``eta`` is ``(W, K)`` for COUPLE (rows are uncertainty vectors), ``(W,)`` for CrowdBT
    (accuracies) and PeerGrader (reliabilities), and ignored for PL/BT. BT and CrowdBT contributions are the sum over the ranking's
    rank-broken pairs, so that pointwise values are per *ranking* for every model and LOO
    can compare models on the same observations.
    """
    spec = get(model)
    fn = spec.reference_loglik()
    out = np.empty(data.n_rankings)
    for n in range(data.n_rankings):
        r = data.ranking(n)
        w = data.worker[n]
        if spec.eta_scalar:
            out[n] = fn(lam, float(np.asarray(eta)[w]), r)
        elif spec.has_eta:
            out[n] = fn(lam, np.asarray(eta)[w], r)
        else:
            out[n] = fn(lam, r)
    return out


def loglik(model: str, data: Rankings, lam: np.ndarray, eta: np.ndarray | None = None) -> float:
    """Total log-likelihood: the sum of :func:`loglik_pointwise`."""
    return float(np.sum(loglik_pointwise(model, data, lam, eta)))


def stage_log_mixture(log_softmax_c: np.ndarray, log_etabar: np.ndarray) -> float:
    """``log sum_t etabar_t p_t`` via logsumexp: the stable form the PPL models use."""
    return float(logsumexp(log_etabar + log_softmax_c))


def eq4_all_orderings(lam_tasks: np.ndarray, eta_rows: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray]:
    """``log Eq. 4`` of every one of the ``k!`` orderings of ``n`` tasks, vectorised.

    ``lam_tasks`` ``(n, k)`` are the scores of each task's items and ``eta_rows``
    ``(n, >= k)`` each task's worker's uncertainty vector. Returns the position
    permutations ``(P, k)`` (``P = k!``, the identity first) and ``(n, P)`` log-probabilities:
    ordering ``p`` of task ``j`` lists ``lam_tasks[j, perms[p]]`` best first. The one place
    that sums Eq. 4 over orderings: the exact sampler of normalised COUPLE draws from it and
    the story's normaliser ``Z`` sums it.
    """
    lam_tasks = np.asarray(lam_tasks, float)
    eta_rows = np.asarray(eta_rows, float)
    k = lam_tasks.shape[1]
    perms = np.array(list(permutations(range(k))))            # (P, k)
    lc = lam_tasks[:, perms]                                   # (n, P, k)
    logp = np.zeros(lc.shape[:2])
    for i in range(k - 1):
        m = k - i
        x = lc[:, :, i:]
        lsm = x - logsumexp(x, axis=-1, keepdims=True)         # log softmax of the m left
        eb = eta_rows[:, :m] / eta_rows[:, :m].sum(axis=1, keepdims=True)
        logp += np.log(np.einsum("nm,npm->np", eb, np.exp(lsm)))
    return perms, logp



# ---------------------------------------------------------------- pairs, vectorised over draws
# The models' ``pair_loglik`` (models.registry): ``f(lam, eta, winner, loser, worker)`` →
# ``log P(winner before loser)`` when the pair is a task of two items for that worker, for
# many posterior draws at once: ``lam`` ``(..., L)``, ``eta`` ``(..., W)`` or
# ``(..., W, K)`` (or None), ``winner, loser, worker`` ``(P,)``; result ``(..., P)``. The
# composite pairwise LOO unit (validation.predictive) sums them over a ranking's rank-broken
# pairs. For PL this is also the exact pair marginal of a longer ranking (i is ranked before
# j iff λ_i + G_i > λ_j + G_j, whatever the other items: σ(λ_i − λ_j)).
def _pair_d(lam, winner, loser):
    lam = np.asarray(lam, float)
    return lam[..., winner] - lam[..., loser]


def pair_bt(lam, eta, winner, loser, worker):
    """PL and BT: ``log σ(λ_i − λ_j)``."""
    return log_expit(_pair_d(lam, winner, loser))


def pair_crowdbt(lam, eta, winner, loser, worker):
    """CrowdBT [Chen13]: ``log(η_w σ(d) + (1 − η_w) σ(−d))``."""
    d = _pair_d(lam, winner, loser)
    e = np.asarray(eta, float)[..., worker]
    # a Beta draw rounded to exactly 1 (or 0) gives log(1 − η) = −inf: one branch of the
    # mixture has probability 0, which logaddexp takes exactly, so no warning is due
    with np.errstate(divide="ignore"):
        return np.logaddexp(np.log(e) + log_expit(d), np.log1p(-e) + log_expit(-d))


def pair_couple(lam, eta, winner, loser, worker):
    """COUPLE with ``k = 2`` ([Pan18], Eq. 4, normalised for pairs):
    ``log(η̄_1 σ(d) + η̄_2 σ(−d))``, ``η̄ = η_{1:2} / (η_1 + η_2)``."""
    d = _pair_d(lam, winner, loser)
    e = np.asarray(eta, float)[..., worker, :2]
    le = np.log(np.maximum(e, np.finfo(float).tiny))
    lz = np.logaddexp(le[..., 0], le[..., 1])
    return np.logaddexp(le[..., 0] + log_expit(d), le[..., 1] + log_expit(-d)) - lz


def pair_scaled(lam, eta, winner, loser, worker):
    """PeerGrader [Raman14] with ``k = 2``: ``log σ(η_g (λ_i − λ_j))``."""
    return log_expit(np.asarray(eta, float)[..., worker] * _pair_d(lam, winner, loser))

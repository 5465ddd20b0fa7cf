"""Bradley–Terry and Plackett–Luce as Luce choice stages: log-likelihood, gradient, Hessian.

A Plackett–Luce ranking of ``k`` items is ``k − 1`` *stages*: the item placed first among
the ones still unplaced, chosen with probability ``softmax(λ_candidates)[chosen]``
([Pan18], Eq. 1; [Plackett75, Luce59]). Bradley–Terry on fully rank-broken pairs
([Pan18], Lemma 1; [BT52]) is the same thing with two candidates per stage, so one set of
formulas serves both models and the batch solvers never branch on the model.

With stage weights ``w_s`` (1, or bootstrap multiplicities) and probabilities
``p_s = softmax(λ[C_s])`` over the candidate set ``C_s`` whose first member ``c_s`` was
chosen:

- ``ℓ(λ) = Σ_s w_s (λ_{c_s} − log Σ_{m ∈ C_s} e^{λ_m})``;
- ``∇ℓ = Σ_s w_s (e_{c_s} − p_s)`` (a vector over items, ``p_s`` scattered into ``C_s``);
- ``∇²ℓ = −Σ_s w_s (diag p_s − p_s p_sᵀ)``, negative semi-definite with ``1`` in its null
  space: ``ℓ`` only sees differences of scores.

The ``N(μ0, σ0²)`` prior on every ``λ_r`` adds ``−Σ (λ_r − μ0)² / (2σ0²)`` (a ridge), its
gradient ``−(λ − μ0)/σ0²`` and Hessian ``−I/σ0²``; that is the MAP objective. Without a
prior (maximum likelihood) scores are fixed by ``Σ λ_r = 0`` and the maximum exists only
when the directed comparison graph is strongly connected ([Hunter04], Assumption 1:
for every split of the items into two groups, someone in each group beat someone in the
other); :func:`check_ml_exists` refuses the data otherwise.

Everything here is a pure function of a :class:`Stages` and a score vector.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from crowdrank.models.data import PAD, DataError, Rankings
from crowdrank.models.registry import get


@dataclass(frozen=True, eq=False)
class Stages:
    """The choice stages of a data set, in a padded layout.

    Attributes
    ----------
    n_items : int
    cand : ndarray of int, shape (S, m)
        Candidate item indices of each stage; column 0 is the chosen item; padding is 0.
    mask : ndarray of bool, shape (S, m)
        True on real candidates.
    unit : ndarray of int, shape (S,)
        The resampling unit of each stage (dense index of the *input* ranking it came from,
        so tie-split rankings and rank-broken pairs travel together in a bootstrap).
    n_units : int
    model : str
        ``"pl"`` or ``"bt"``.
    """

    n_items: int
    cand: np.ndarray
    mask: np.ndarray
    unit: np.ndarray
    n_units: int
    model: str

    @property
    def n_stages(self) -> int:
        return int(self.cand.shape[0])


#: The models the batch PL/BT fits cover (their stages: PL's, or BT's rank-broken pairs
#: for a ``pairwise`` spec); the ``ml``/``laplace``/``bootstrap`` entries of
#: :mod:`crowdrank.inference.methods` fit these.
BATCH_MODELS = ("pl", "bt")


def stages(data: Rankings, model: str) -> Stages:
    """The stages of ``data`` under ``model``: PL's ``k − 1`` stages per ranking, or BT's one
    stage per rank-broken pair."""
    if model not in BATCH_MODELS:
        raise ValueError(f"batch fitting covers models "
                         f"{' and '.join(repr(m) for m in BATCH_MODELS)}, got {model!r}")
    if data.n_rankings == 0:
        raise DataError("no rankings to fit", data.source)
    units = np.unique(data.origin, return_inverse=True)[1].astype(np.int64)
    if get(model).pairwise:
        k = data.lengths.astype(np.int64)
        pairs = data.rank_break()       # pairs in ranking order, k(k-1)/2 per ranking
        unit = np.repeat(units, k * (k - 1) // 2)
        cand = pairs.order.T.astype(np.int64)
        return Stages(data.n_items, cand, np.ones_like(cand, bool), unit,
                      int(units.max()) + 1, model)
    K = data.K
    cands, units_s = [], []
    for s in range(K - 1):
        sel = np.flatnonzero(data.lengths > s + 1)   # at least two items left to choose from
        c = np.full((len(sel), K), PAD, dtype=np.int64)
        c[:, : K - s] = data.order[s:, sel].T
        cands.append(c)
        units_s.append(units[sel])
    cand = np.concatenate(cands)
    mask = cand != PAD
    return Stages(data.n_items, np.where(mask, cand, 0), mask, np.concatenate(units_s),
                  int(units.max()) + 1, model)


# ---------------------------------------------------------------- the objective
def _stage_weights(st: Stages, weights) -> np.ndarray:
    """Per-stage weights from per-unit ``weights`` (``None``: all 1)."""
    if weights is None:
        return np.ones(st.n_stages)
    weights = np.asarray(weights, float)
    if weights.shape != (st.n_units,):
        raise ValueError(f"weights must have one entry per unit ({st.n_units})")
    return weights[st.unit]


def _probs(st: Stages, lam: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(log p, p)`` per stage and candidate (zero probability on the padding)."""
    x = np.where(st.mask, lam[st.cand], -np.inf)
    mx = x.max(axis=1, keepdims=True)
    z = np.exp(x - mx)
    tot = z.sum(axis=1, keepdims=True)
    return x - mx - np.log(tot), z / tot


def loglik(st: Stages, lam, weights=None) -> float:
    """``ℓ(λ) = Σ_s w_s log softmax(λ[C_s])[c_s]`` (the module docstring)."""
    lam = np.asarray(lam, float)
    logp, _ = _probs(st, lam)
    return float(np.dot(_stage_weights(st, weights), logp[:, 0]))


def gradient(st: Stages, lam, weights=None) -> np.ndarray:
    """``∇ℓ = Σ_s w_s (e_{c_s} − p_s)``."""
    lam = np.asarray(lam, float)
    w = _stage_weights(st, weights)
    _, p = _probs(st, lam)
    L = st.n_items
    wp = (w[:, None] * p)[st.mask]
    return (np.bincount(st.cand[:, 0], weights=w, minlength=L)
            - np.bincount(st.cand[st.mask], weights=wp, minlength=L))


def neg_hessian(st: Stages, lam, weights=None) -> np.ndarray:
    """``−∇²ℓ = Σ_s w_s (diag p_s − p_s p_sᵀ)``, dense ``(L, L)`` (positive semi-definite)."""
    lam = np.asarray(lam, float)
    w = _stage_weights(st, weights)
    _, p = _probs(st, lam)
    L = st.n_items
    wp = w[:, None] * p
    # off-diagonal entries −w p_a p_b for each unordered candidate pair, scattered in both
    # orientations by one bincount (one L² allocation: this runs at every Newton step)
    m = st.cand.shape[1]
    idx, val = [], []
    for a in range(m):
        for b in range(a + 1, m):
            ok = st.mask[:, a] & st.mask[:, b]
            ia, ib = st.cand[ok, a], st.cand[ok, b]
            v = -wp[ok, a] * p[ok, b]
            idx += [ia * L + ib, ib * L + ia]
            val += [v, v]
    A = np.bincount(np.concatenate(idx), weights=np.concatenate(val),
                    minlength=L * L).reshape(L, L)
    A[np.diag_indices(L)] += np.bincount(st.cand[st.mask], weights=(wp * (1 - p))[st.mask],
                                         minlength=L)
    return A


def hessian(st: Stages, lam, weights=None) -> np.ndarray:
    """``∇²ℓ = −Σ_s w_s (diag p_s − p_s p_sᵀ)``, dense ``(L, L)``."""
    return -neg_hessian(st, lam, weights)


def wins(st: Stages, weights=None) -> np.ndarray:
    """``W_i = Σ_s w_s 1[c_s = i]``: how often each item was chosen (MM's numerator)."""
    return np.bincount(st.cand[:, 0], weights=_stage_weights(st, weights), minlength=st.n_items)


def appearances(st: Stages, weights=None) -> np.ndarray:
    """Weighted count of the stages each item is a candidate in."""
    w = _stage_weights(st, weights)
    return np.bincount(st.cand[st.mask], weights=np.broadcast_to(w[:, None], st.mask.shape)
                       [st.mask], minlength=st.n_items)


@dataclass(frozen=True)
class Prior:
    """``λ_r ~ N(mu0, sigma0²)`` for every item; ``None`` in its place means ML."""

    mu0: float = 0.0
    sigma0: float = 1.0


def objective(st: Stages, lam, prior: Prior | None, weights=None) -> float:
    """Log-likelihood plus the log prior density up to a constant (MAP), or the
    log-likelihood alone (``prior=None``, ML)."""
    val = loglik(st, lam, weights)
    if prior is not None:
        val -= float(np.sum((np.asarray(lam) - prior.mu0) ** 2)) / (2 * prior.sigma0 ** 2)
    return val


def objective_gradient(st: Stages, lam, prior: Prior | None, weights=None) -> np.ndarray:
    g = gradient(st, lam, weights)
    if prior is not None:
        g -= (np.asarray(lam) - prior.mu0) / prior.sigma0 ** 2
    return g


def objective_neg_hessian(st: Stages, lam, prior: Prior | None, weights=None) -> np.ndarray:
    """``−∇²`` of :func:`objective` (what Newton and Laplace factorise)."""
    A = neg_hessian(st, lam, weights)
    if prior is not None:
        A[np.diag_indices_from(A)] += 1.0 / prior.sigma0 ** 2
    return A


def objective_hessian(st: Stages, lam, prior: Prior | None, weights=None) -> np.ndarray:
    return -objective_neg_hessian(st, lam, prior, weights)


def compress(st: Stages) -> tuple[Stages, np.ndarray]:
    """Identical stages merged: ``(unique, index)`` where ``unique`` has one stage per
    distinct (chosen, candidates) row, each its own unit, and ``index[s]`` is the unique
    stage of stage ``s``. Per-unit weights ``w`` of ``st`` become
    ``bincount(index, w[st.unit])`` on ``unique`` with the same objective — read-level's
    12,726 pairs are 2,490 distinct ones, so a bootstrap refit does a fifth of the work."""
    rows = np.where(st.mask, st.cand, -1)
    uniq, index = np.unique(rows, axis=0, return_inverse=True)
    mask = uniq >= 0
    U = len(uniq)
    return Stages(st.n_items, np.where(mask, uniq, 0), mask, np.arange(U), U,
                  st.model), index.reshape(-1)


# ---------------------------------------------------------------- identifiability
def beats_graph(st: Stages, weights=None):
    """Directed graph (sparse ``(L, L)``) with an edge ``j → i`` when ``i`` was chosen over
    ``j`` in some stage of positive weight."""
    from scipy.sparse import coo_matrix

    w = _stage_weights(st, weights)
    src, dst = [], []
    for a in range(1, st.cand.shape[1]):
        ok = st.mask[:, a] & (w > 0)
        src.append(st.cand[ok, a])
        dst.append(st.cand[ok, 0])
    src, dst = np.concatenate(src), np.concatenate(dst)
    return coo_matrix((np.ones(len(src)), (src, dst)), shape=(st.n_items,) * 2).tocsr()


def check_ml_exists(st: Stages, items=None, source: str = "<data>", weights=None) -> None:
    """Raise :class:`DataError` unless the maximum-likelihood scores exist: every item
    appears and the beats graph is strongly connected ([Hunter04], Assumption 1)."""
    from scipy.sparse.csgraph import connected_components

    items = list(items) if items is not None else [str(i) for i in range(st.n_items)]
    seen = appearances(st, weights) > 0
    if not np.all(seen):
        never = [items[i] for i in np.flatnonzero(~seen)[:5]]
        raise DataError(f"maximum likelihood needs every item compared, but "
                        f"{int(np.sum(~seen))} never are (e.g. {never}); fit MAP with a "
                        "prior (--method map) instead", source)
    n, labels = connected_components(beats_graph(st, weights), directed=True,
                                     connection="strong")
    if n > 1:
        sizes = np.bincount(labels)
        small = int(np.argmin(sizes))
        ex = [items[i] for i in np.flatnonzero(labels == small)[:5]]
        raise DataError(
            f"the maximum-likelihood scores do not exist: the comparison graph is not "
            f"strongly connected ({n} strongly connected components; e.g. {ex} never "
            "beat, or never lost to, the items outside their component, so their scores "
            "run off to ±infinity); fit MAP with a prior (--method map) instead", source)

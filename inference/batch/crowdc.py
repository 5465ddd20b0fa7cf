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

Every BT fit here compares each pair of its items the same number of times, so it is
fitted on a dense win matrix by a batched Newton solver (:func:`bt_map_dense`): all the
groups of all the random divisions of one data set are one stacked solve. The fits are
the MAP with a vague ``N(0, 10²)`` prior: with few comparisons the ML estimate often does
not exist (an item that won every comparison), and the paper does not say how its BT fit
handles that.

*Readings* of the conquer step (:data:`PLACEMENTS`), measured side by side by
``crowdrank replicate crowdc``: ``"score"`` is Algorithm 2 as written (proportion of the
within-group *scores*); ``"rank"`` places an item by the proportion of its within-group
*position* between the two pivots'; ``"joint"`` is not the paper's algorithm but the
information limit of the same comparisons — one BT fit on every comparison CrowDC made.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import comb

import numpy as np

#: Prior sd of the BT fits (vague; see the module docstring).
SIGMA0 = 10.0
#: Readings of the conquer step (module docstring).
PLACEMENTS = ("score", "rank", "joint")


def simulate_outcomes(n: int, t: int, r: float, rng: np.random.Generator) -> np.ndarray:
    """``B[a, b]``: how many of the ``t`` comparisons of pair ``a < b`` the better item
    ``b`` won (upper triangle; the rest is 0)."""
    B = np.zeros((n, n), dtype=np.int64)
    iu = np.triu_indices(n, 1)
    B[iu] = rng.binomial(t, r, size=len(iu[0]))
    return B


def win_matrix(B: np.ndarray, t: int) -> np.ndarray:
    """``W[a, b]``: how often ``a`` beat ``b``, from the upper-triangle outcomes ``B``."""
    up = np.triu(np.ones(B.shape, bool), 1)
    W = np.where(up, t - B, 0).astype(float)
    W += np.where(up, B, 0).T
    return W


# ---------------------------------------------------------------- dense batched BT MAP
def _objective(W, lam, sigma0):
    d = lam[..., :, None] - lam[..., None, :]
    return -(W * np.logaddexp(0.0, -d)).sum(axis=(-2, -1)) - (lam ** 2).sum(-1) / (2 * sigma0 ** 2)


def _grad_neg_hess(W, N, lam, sigma0):
    d = lam[..., :, None] - lam[..., None, :]
    p = 0.5 * (1.0 + np.tanh(0.5 * d))                    # σ(λ_a − λ_b), overflow-free
    g = (W - N * p).sum(-1) - lam / sigma0 ** 2
    c = N * p * (1.0 - p)
    H = -c
    idx = np.arange(lam.shape[-1])
    H[..., idx, idx] = c.sum(-1) + 1.0 / sigma0 ** 2     # c's diagonal is 0 (N_aa = 0)
    return g, H


def bt_map_dense(W, sigma0: float = SIGMA0, *, tol: float = 1e-8, max_iter: int = 100):
    """BT MAP scores, ``λ ~ N(0, sigma0²)``, of a stack of dense win matrices ``W``
    (``(..., m, m)``, ``W[a, b]`` = wins of ``a`` over ``b``; unpaired items 0) by damped
    Newton on all of them at once: the gradient ``Σ_b W_ab − N_ab σ(λ_a − λ_b) − λ_a/σ0²``
    and negative Hessian ``diag(Σ_b c_ab) − c + I/σ0²``, ``c = N σ (1 − σ)``, ``N = W + Wᵀ``
    ([Hunter04], Sect. 2 with the ridge of the Gaussian prior). Stops when every
    ``max |∇| ≤ tol``."""
    W = np.asarray(W, float)
    shape = W.shape[:-2]
    W = W.reshape((-1,) + W.shape[-2:])
    N = W + np.swapaxes(W, -1, -2)
    lam = np.zeros(W.shape[:-1])
    f = _objective(W, lam, sigma0)
    for _ in range(max_iter):
        g, H = _grad_neg_hess(W, N, lam, sigma0)
        if np.max(np.abs(g), initial=0.0) <= tol:
            break
        d = np.linalg.solve(H, g[..., None])[..., 0]
        slope = (g * d).sum(-1)
        step = np.ones(len(lam))
        eps = 64 * np.finfo(float).eps * np.maximum(1.0, np.abs(f))
        for _ in range(60):              # backtracking, each fit its own step
            cand = lam + step[:, None] * d
            fc = _objective(W, cand, sigma0)
            ok = fc >= f + 1e-4 * step * slope - eps
            if ok.all():
                break
            step = np.where(ok, step, 0.5 * step)
        lam, f = cand, fc
    return lam.reshape(shape + lam.shape[-1:])


# ---------------------------------------------------------------- the design
def pivot_orders(m: int, p: int) -> np.ndarray:
    """0-based positions (in ascending within-group order) of the ``p`` pivots of a group
    of ``m``: ``round(linspace(1, m, p)) − 1``."""
    if not 2 <= p <= m:
        raise ValueError(f"need 2 <= p <= group size {m}, got p={p}")
    return np.unique(np.round(np.linspace(1, m, p)).astype(int) - 1)


def cost(n: int, g: int, p: int, t: int) -> tuple[int, int]:
    """``(CrowDC comparisons, baseline comparisons)``; the pairs of two pivots of one group
    are compared once and shared by the divide and pivot steps (Sect. 4 of [Wang23])."""
    m = n // g
    return t * (g * comb(m, 2) + comb(g * p, 2) - g * comb(p, 2)), t * comb(n, 2)


def cost_unshared(n: int, g: int, p: int, t: int) -> int:
    """The paper's formula read literally, ``(C(n/g, 2)·g + C(g·p, 2))·t``: the shared
    pivot pairs counted twice."""
    return t * (g * comb(n // g, 2) + comb(g * p, 2))


def divisions(n: int, g: int, count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` random divisions of ``n`` items into ``g`` groups: ``(count, g, n/g)``."""
    if n % g:
        raise ValueError(f"n={n} must be divisible by g={g}")
    return np.stack([rng.permutation(n).reshape(g, n // g) for _ in range(count)])


@dataclass(frozen=True)
class CrowdcResult:
    scores: np.ndarray         # final scores, item order 0..n-1
    comparisons: int
    pivots: np.ndarray


def crowdc_many(W: np.ndarray, groups: np.ndarray, p: int,
                placements=("score",)) -> dict:
    """CrowDC on the win matrix ``W`` of ``n`` items for every division in ``groups``
    (``(D, g, m)``, :func:`divisions`): ``{placement: (D, n) final scores, "pivots":
    (D, g·p) pivot items, "compared": (D, n, n) bool, the pairs CrowDC compares}``."""
    D, g, m = groups.shape
    n = W.shape[0]
    if m < 3 or p < 2:
        raise ValueError("each group needs at least 3 items and p >= 2 pivots")
    order = pivot_orders(m, p)
    P = len(order)
    Wg = W[groups[..., :, None], groups[..., None, :]]              # (D, g, m, m)
    # items with the same record tie in a complete design (often, for small t); the
    # solver leaves them equal only to its tolerance, so scores are rounded before they
    # are sorted and ties go to the lower item number: the same pivots however the fits
    # were batched
    s_in = np.round(bt_map_dense(Wg), 7)                            # (D, g, m)
    srt = np.lexsort((groups, s_in), axis=-1)
    piv_local = srt[..., order]                                     # (D, g, P)
    piv = np.take_along_axis(groups, piv_local, -1).reshape(D, g * P)
    s_out = bt_map_dense(W[piv[:, :, None], piv[:, None, :]]).reshape(D, g, P)
    pos = np.argsort(srt, axis=-1)                                  # within-group position
    out = {"pivots": piv}
    for pl in placements:
        if pl == "joint":
            continue
        x = s_in if pl == "score" else pos.astype(float)
        xp = np.take_along_axis(x, piv_local, -1)                   # ascending (D, g, P)
        k = np.clip((xp[..., None, :] <= x[..., :, None]).sum(-1), 1, P - 1)
        lo = np.take_along_axis(xp, k - 1, -1)
        hi = np.take_along_axis(xp, k, -1)
        olo = np.take_along_axis(s_out, k - 1, -1)
        ohi = np.take_along_axis(s_out, k, -1)
        span = hi - lo
        frac = np.where(span > 0, (x - lo) / np.where(span > 0, span, 1.0), 0.0)
        fin = olo + frac * (ohi - olo)
        # a pivot's final score is its out-of-group score (Algorithm 2), ties or not
        np.put_along_axis(fin, piv_local, s_out, -1)
        scores = np.empty((D, n))
        scores[np.arange(D)[:, None], groups.reshape(D, n)] = fin.reshape(D, n)
        out[pl] = scores
    comp = np.zeros((D, n, n), bool)
    di = np.arange(D)[:, None, None, None]
    comp[di, groups[..., :, None], groups[..., None, :]] = True
    comp[np.arange(D)[:, None, None], piv[:, :, None], piv[:, None, :]] = True
    comp[:, np.arange(n), np.arange(n)] = False
    out["compared"] = comp
    if "joint" in placements:
        out["joint"] = bt_map_dense(np.where(comp, W, 0.0))
    return out


def crowdc(B: np.ndarray, t: int, g: int, p: int, rng: np.random.Generator) -> CrowdcResult:
    """CrowDC on the outcomes ``B`` of ``n`` items with one random division into ``g``
    groups, ``rng.permutation(n).reshape(g, n/g)`` (the module docstring)."""
    n = B.shape[0]
    groups = divisions(n, g, 1, rng)
    res = crowdc_many(win_matrix(B, t), groups, p)
    return CrowdcResult(res["score"][0], cost(n, g, p, t)[0], res["pivots"][0])


def btl(B: np.ndarray, t: int) -> np.ndarray:
    """The baseline: BT on every pair."""
    return bt_map_dense(win_matrix(B, t))


# ---------------------------------------------------------------- Kendall's τ
def kendall_tau(scores: np.ndarray, variant: str = "b", tie_tol: float = 1e-9) -> np.ndarray:
    """Kendall's τ of each row of ``scores`` (``(..., n)``) against the truth ``0..n−1``
    (item ``b`` better than ``a`` when ``b > a``, no ties): ``"a"`` = (concordant −
    discordant) / C(n, 2); ``"b"`` divides by ``sqrt(C(n, 2) · (C(n, 2) − tied pairs))``.
    Scores within ``tie_tol`` (relative to the row's range) are tied: a MAP solver
    returns items with the same record equal only up to its tolerance."""
    s = np.asarray(scores, float)
    n = s.shape[-1]
    iu = np.triu_indices(n, 1)                   # pairs a < b: truth says b > a
    d = s[..., iu[1]] - s[..., iu[0]]
    rng_ = np.ptp(s, axis=-1, keepdims=True)
    tied = np.abs(d) <= tie_tol * np.maximum(rng_, 1e-300)
    sgn = np.where(tied, 0.0, np.sign(d))
    n0 = len(iu[0])
    num = sgn.sum(-1)
    if variant == "a":
        return num / n0
    if variant == "b":
        return num / np.sqrt(n0 * (n0 - tied.sum(-1)))
    raise ValueError(f"variant must be 'a' or 'b', got {variant!r}")

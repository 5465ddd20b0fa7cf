"""OnlineGBMM for COUPLE, written for reading: the specification the kernel is tested against.

[Pan18], Sect. 4.3 and Algorithm 1 (docs/design.md, Online). One ranking ``ρ`` by worker ``w`` is
processed stage by stage in *reverse* (stages ``k−1`` down to ``1``, Remark 3). A stage
with candidates ``c = ρ(i..k)`` (``m = k−i+1`` of them; offset ``t`` is ``ρ(i+t−1)``, so the
reported local winner is offset 1) and prior ``a = α_w[1..m]``:

1. ``R_t ≈ E_{N(μ,σ²)}[softmax(λ_c)_t]`` (appendix 1.1.2) by one of four variants
   (``taylor``): ``paper`` (the appendix's formula), ``full`` (the complete second-order
   Taylor expansion), ``plugin`` (``R_t = p_t``), ``quadrature`` (Gauss–Hermite over the
   candidates' Gaussians, :func:`quadrature_moments`; the score step of this variant uses
   the same quadrature, see :func:`score_update_quadrature`); then
   ``R_t ← max(R_t, κ2) / Σ max(R, κ2)``.
2. ``α_t`` by moment matching of ``η̄_t`` under ``Σ_t η̄_t R_t · Dir(a)`` (Eq. 9a, 9b, 10).
3. ``μ`` and ``σ²`` of the candidates by Eq. (11) and (12), with ``a`` the *updated* ``α``
   (``score_alpha="updated"``, the paper's order: α first, then scores) or the stage's
   prior ``α`` (``score_alpha="prior"``); the paper does not say which.

Within a stage every step reads the stage's starting ``μ, σ²``; across the stages of a
ranking the state carries over. Plain Python floats and lists, one formula per line.
"""

from __future__ import annotations

import numpy as np

from .arith import exp, ieee, plain_sum
from .guards import guard_finite, guard_positive
from .state import empty_counts

TAYLOR = ("paper", "full", "plugin", "quadrature")
SCORE_ALPHA = ("updated", "prior")

#: Tensor-product Gauss–Hermite budget of the ``quadrature`` variant: ``n_m`` nodes per
#: candidate with ``n_m = max(2, min(16, ⌊QUAD_BUDGET^(1/m)⌋))``: 16 for m = 2 and 3, 9 for
#: m = 4, 6 for m = 5, 4 for m = 6, 3 for m = 7, 8 and 2 from m = 9 on (``2^m`` nodes: a
#: coarse rule for long rankings, and more than the budget from m = 14).
QUAD_BUDGET = 8192
QUAD_MAX = 16


def quad_points(m: int) -> int:
    """Gauss–Hermite nodes per dimension for a stage with ``m`` candidates."""
    n = int(np.floor(QUAD_BUDGET ** (1.0 / m) + 1e-9))
    return max(2, min(QUAD_MAX, n))


def gauss_hermite(n: int):
    """Probabilists' Gauss–Hermite nodes ``z`` and weights summing to one: ``Σ w f(z) ≈
    E[f(Z)]``, ``Z ~ N(0, 1)`` (exact for polynomials of degree ``< 2n``)."""
    from numpy.polynomial.hermite_e import hermegauss

    z, w = hermegauss(n)
    return z, w / w.sum()


def quadrature_moments(mu_c, s2_c):
    """``A_t = E[p_t]``, ``B_tj = E[p_t z_j]``, ``C_tj = E[p_t (z_j² − 1)]`` with
    ``p = softmax(λ_c)``, ``λ_j = μ_j + σ_j z_j``, ``z ~ N(0, I)``, by the tensor-product
    Gauss–Hermite rule of :func:`quad_points` nodes per candidate.

    By Stein's lemma [Stein81] ``∂E[p_t]/∂μ_j = B_tj/σ_j`` and ``∂²E[p_t]/∂μ_j² = C_tj/σ_j²``: the
    derivatives that Eq. (11)–(12) take of the plug-in softmax, here of its expectation.
    """
    m = len(mu_c)
    z, w = gauss_hermite(quad_points(m))
    grid = np.stack(np.meshgrid(*([z] * m), indexing="ij"), -1).reshape(-1, m)
    wts = np.prod(np.stack(np.meshgrid(*([w] * m), indexing="ij"), -1).reshape(-1, m), 1)
    lam = np.asarray(mu_c, float) + np.sqrt(np.asarray(s2_c, float)) * grid
    lam = lam - lam.max(axis=1, keepdims=True)      # the shift keeps exp finite
    e = np.exp(lam)
    p = e / e.sum(axis=1, keepdims=True)
    wp = wts[:, None] * p                           # (nodes, m)
    return wp.sum(0), wp.T @ grid, wp.T @ (grid * grid - 1.0)


def score_update_quadrature(mu_c, s2_c, a, moments, kappa=1e-4, counts=None):
    """Eq. (11)–(12) by quadrature: the stage's tilted factor is ``f(λ) = Σ_t a_t
    softmax(λ_c)_t`` (``∝ E_η[Σ_t η̄_t softmax_t]``), ``Z = E[f] = Σ_t a_t A_t``,
    ``G_j = Σ_t a_t B_tj``, ``H_j = Σ_t a_t C_tj`` (:func:`quadrature_moments`) and

    ``μ_j ← μ_j + σ_j G_j / Z``, ``σ_j² ← σ_j² max(1 + H_j/Z − (G_j/Z)², κ)``:

    the exact moments of the tilted Gaussian (ADF), up to the quadrature error, where the
    paper's update evaluates the same derivatives at ``λ = μ``.
    """
    A, B, C = moments
    m = len(mu_c)
    Z = plain_sum(a[t] * A[t] for t in range(m))
    mu_new, s2_new = [], []
    for j in range(m):
        G = plain_sum(a[t] * B[t, j] for t in range(m)) / Z
        H = plain_sum(a[t] * C[t, j] for t in range(m)) / Z
        mu_new.append(mu_c[j] + np.sqrt(s2_c[j]) * G)
        factor = 1.0 + H - G * G
        if counts is not None and factor < kappa:
            counts["kappa"] += 1
        s2_new.append(s2_c[j] * max(factor, kappa))
    return mu_new, s2_new


def softmax_shifted(mu_c):
    """``e_t = exp(μ_t − max μ)`` and ``ψ = Σ e``: every quantity of Eq. (11)–(12) and of
    ``p = softmax(μ_c)`` is invariant to a common shift, and the shift keeps ``exp`` finite
    for any finite ``μ``."""
    top = max(mu_c)
    e = [exp(x - top) for x in mu_c]
    return e, plain_sum(e)


def expected_softmax(mu_c, s2_c, taylor="paper", kappa2=1e-4, counts=None):
    """Step 1: ``R_t ≈ E[softmax(λ_c)_t]`` under independent ``N(μ_c, σ²_c)``.

    ``paper`` ([Pan18], appendix 1.1.2): ``R_t = p_t − ½ (Σ_j σ_j² p_j) p_t + ½ σ_t² p_t``.
    ``full``: ``R_t = p_t + ½ σ_t² p_t(1−p_t)(1−2p_t) − ½ p_t Σ_{j≠t} σ_j² p_j (1−2p_j)``
    (the second derivatives of softmax; for ``m = 2`` this is Chen et al.'s ``c1``).
    ``plugin``: ``R_t = p_t``. All are followed by the appendix's guard
    ``R_t ← max(R_t, κ2) / Σ_v max(R_v, κ2)``; ``counts["kappa2"]`` counts stages where the
    floor was active.
    """
    e, psi = softmax_shifted(mu_c)
    inv_psi = 1.0 / psi
    p = [x * inv_psi for x in e]
    m = len(p)
    if taylor == "paper":
        sp = plain_sum(s2_c[j] * p[j] for j in range(m))
        R = [p[t] - 0.5 * sp * p[t] + 0.5 * s2_c[t] * p[t] for t in range(m)]
    elif taylor == "full":
        R = []
        for t in range(m):
            cross = plain_sum(s2_c[j] * p[j] * (1.0 - 2.0 * p[j]) for j in range(m) if j != t)
            R.append(p[t] + 0.5 * s2_c[t] * p[t] * (1.0 - p[t]) * (1.0 - 2.0 * p[t])
                     - 0.5 * p[t] * cross)
    elif taylor == "plugin":
        R = list(p)
    elif taylor == "quadrature":
        R = [float(x) for x in quadrature_moments(mu_c, s2_c)[0]]
    else:
        raise ValueError(f"taylor must be one of {TAYLOR}, got {taylor!r}")
    if counts is not None and any(r < kappa2 for r in R):
        counts["kappa2"] += 1
    R = [max(r, kappa2) for r in R]
    inv_Z = 1.0 / plain_sum(R)
    return [r * inv_Z for r in R]


def dirichlet_moments(a, R):
    """Eq. (9a)–(9b): ``E[η_t]`` and ``E[η_t²]`` under ``Σ_v η_v R_v · Dir(a) / R̄``.

    ``S = Σ a``, ``Ra = Σ R_v a_v`` and the evidence ``R̄ = Ra / S`` (appendix 1.1.3).
    """
    S = plain_sum(a)
    Ra = plain_sum(R[v] * a[v] for v in range(len(a)))
    Rbar = Ra / S
    d1 = 1.0 / (Rbar * (S + 1.0) * S)              # the denominators do not depend on t
    d2 = 1.0 / (Rbar * (S + 2.0) * (S + 1.0) * S)
    E1 = [a[t] * (Ra + R[t]) * d1 for t in range(len(a))]
    E2 = [a[t] * (a[t] + 1.0) * (Ra + 2.0 * R[t]) * d2 for t in range(len(a))]
    return E1, E2


def alpha_update(a, R):
    """Eq. (10): ``α_t ← (E[η_t] − E[η_t²]) E[η_t] / (E[η_t²] − E[η_t]²)``, ``t ≤ m``.

    The raw values; the caller applies the guard (a value can only be non-positive or
    non-finite through rounding, e.g. ``E[η_t²] − E[η_t]²`` cancelling for huge ``α``).
    """
    E1, E2 = dirichlet_moments(a, R)
    return [(E1[t] - E2[t]) * E1[t] / (E2[t] - E1[t] * E1[t]) for t in range(len(a))]


def score_update(mu_c, s2_c, a, kappa=1e-4, counts=None):
    """Eq. (11)–(12) for the ``m`` candidates with worker weights ``a``.

    ``ψ = Σ e``, ``Ψ = Σ a_t e_t``:
    ``μ_t ← μ_t + σ_t² (a_t e_t/Ψ − e_t/ψ)``,
    ``σ_t² ← σ_t² · max(1 + σ_t² (a_t e_t (Ψ − a_t e_t)/Ψ² − e_t (ψ − e_t)/ψ²), κ)``.
    ``counts["kappa"]`` counts candidates where the ``κ`` floor was active.
    """
    e, psi = softmax_shifted(mu_c)
    m = len(e)
    Psi = plain_sum(a[t] * e[t] for t in range(m))
    u, v = 1.0 / Psi, 1.0 / psi                    # one division each per stage
    mu_new, s2_new = [], []
    for t in range(m):
        ae = a[t] * e[t]
        mu_new.append(mu_c[t] + s2_c[t] * (ae * u - e[t] * v))
        factor = 1.0 + s2_c[t] * (ae * (Psi - ae) * u * u - e[t] * (psi - e[t]) * v * v)
        if counts is not None and factor < kappa:
            counts["kappa"] += 1
        s2_new.append(s2_c[t] * max(factor, kappa))
    return mu_new, s2_new


def stage_update(mu_c, s2_c, a, *, taylor="paper", score_alpha="updated", kappa=1e-4,
                 kappa2=1e-4, counts=None, strict=False, where=""):
    """One stage, steps 1–3, guarded: returns ``(μ_c', σ²_c', a')``."""
    if counts is None:
        counts = empty_counts()
    with np.errstate(all="ignore"):
        return _stage(ieee(mu_c), ieee(s2_c), ieee(a), taylor, score_alpha, kappa, kappa2,
                      counts, strict, where)


def _stage(mu_c, s2_c, a, taylor, score_alpha, kappa, kappa2, counts, strict, where):
    R = expected_softmax(mu_c, s2_c, taylor, kappa2, counts)
    raw = alpha_update(a, R)
    a_new = [guard_positive(raw[t], a[t], "alpha", counts, strict, where)
             for t in range(len(a))]
    if score_alpha == "updated":
        a_score = a_new
    elif score_alpha == "prior":
        a_score = list(a)
    else:
        raise ValueError(f"score_alpha must be one of {SCORE_ALPHA}, got {score_alpha!r}")
    if taylor == "quadrature":
        mu_raw, s2_raw = score_update_quadrature(mu_c, s2_c, a_score,
                                                 quadrature_moments(mu_c, s2_c), kappa, counts)
    else:
        mu_raw, s2_raw = score_update(mu_c, s2_c, a_score, kappa, counts)
    mu_new = [guard_finite(mu_raw[t], mu_c[t], "mu", counts, strict, where)
              for t in range(len(mu_c))]
    s2_new = [guard_positive(s2_raw[t], s2_c[t], "sigma2", counts, strict, where)
              for t in range(len(s2_c))]
    return [float(x) for x in mu_new], [float(x) for x in s2_new], [float(x) for x in a_new]


def ranking_update(mu, sigma2, alpha_w, ranking, **opts):
    """One ranking (item indices best first) by one worker, in place, reverse stages.

    ``mu``, ``sigma2`` are the item arrays/lists, ``alpha_w`` the worker's row (length
    ``>= k``). Stage ``i`` (1-based) has candidates ``ranking[i−1:]``; it is run for
    ``i = k−1, …, 1`` (Remark 3), each stage starting from what the previous one left.
    """
    k = len(ranking)
    where = opts.pop("where", "ranking")
    for s in range(k - 2, -1, -1):
        cand = [int(x) for x in ranking[s:]]
        m = k - s
        mu_c = [float(mu[r]) for r in cand]
        s2_c = [float(sigma2[r]) for r in cand]
        a = [float(alpha_w[t]) for t in range(m)]
        mu_c, s2_c, a = stage_update(mu_c, s2_c, a, where=f"{where}, stage {s + 1}", **opts)
        for j, r in enumerate(cand):
            mu[r] = mu_c[j]
            sigma2[r] = s2_c[j]
        for t in range(m):
            alpha_w[t] = a[t]


def gbmm_pass_python(order, lengths, worker, seq, mu, sigma2, alpha, *, taylor="paper",
                     score_alpha="updated", kappa=1e-4, kappa2=1e-4, strict=False,
                     counts=None):
    """The reference pass: rankings ``seq`` (column indices of ``order``) in that order,
    updating ``mu``, ``sigma2``, ``alpha`` in place. Mirrors the kernel's signature."""
    if counts is None:
        counts = empty_counts()
    for n in seq:
        k = int(lengths[n])
        ranking_update(mu, sigma2, alpha[worker[n]], [int(order[p, n]) for p in range(k)],
                       taylor=taylor, score_alpha=score_alpha, kappa=kappa, kappa2=kappa2,
                       counts=counts, strict=strict, where=f"ranking {n}")
    return counts

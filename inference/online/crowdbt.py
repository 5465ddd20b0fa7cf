"""CrowdBT online [Chen13], written for reading: the kernel's specification.

For a reported pair ``w > l`` by a worker with accuracy ``η ~ Beta(a, b)`` and items
``N(μ_w, σ_w²)``, ``N(μ_l, σ_l²)`` (docs/design.md, Online, [Chen13], Sect. 3):

- ``c1 = p + ½(σ_w² + σ_l²) e_w e_l (e_l − e_w)/(e_w + e_l)³`` with ``p = σ(μ_w − μ_l)``
  (second-order expectation of the BT probability), ``c2 = 1 − c1``; both pass the same
  ``κ2`` floor as OnlineGBMM (``c ← max(c, κ2)/Σ``) so that ``c`` is never negative;
- ``c = (c1 a + c2 b)/(a+b)``,
  ``E1 = (c1 (a+1) a + c2 a b) / (c (a+b+1)(a+b))``,
  ``E2 = (c1 (a+2)(a+1) a + c2 (a+1) a b) / (c (a+b+2)(a+b+1)(a+b))``,
  ``a ← (E1 − E2) E1 / (E2 − E1²)``, ``b ← (E1 − E2)(1 − E1) / (E2 − E1²)``;
- scores by the gradient of ``log C``, ``C = (a e_w + b e_l)/((a+b)(e_w + e_l))``, with the
  *prior* ``(a, b)``: ``μ_w ← μ_w + σ_w² (a e_w/Ψ − e_w/ψ)``,
  ``μ_l ← μ_l + σ_l² (b e_l/Ψ − e_l/ψ)``, ``σ² ← σ² max(1 + σ² ∂²log C, κ)`` with
  ``∂²log C/∂μ_w² = a e_w b e_l/Ψ² − e_w e_l/ψ²`` (the same for ``l``).

k-ary data are fully rank-broken first (``Rankings.rank_break()``; [Pan18], Lemma 1).

``taylor="quadrature"`` replaces both second-order expansions by the exact expectations,
computed by Gauss–Hermite quadrature over the pair's score difference
``d = λ_w − λ_l ~ N(μ_w − μ_l, v)``, ``v = σ_w² + σ_l²`` (the likelihood depends on the
scores only through ``d``), and exactly over the accuracy (the likelihood
``η σ(d) + (1 − η) σ(−d)`` is linear in ``η``, so the Beta integrals are closed forms;
[Minka01], ADF): :func:`difference_moments` gives ``c1 = E[σ(d)]`` (then the same ``κ2``
floor and the same Beta step: given the exact ``c1`` the Beta moments above *are* exact), and
the scores take the moments of the tilted Gaussian with ``f(d) = ā σ(d) + b̄ σ(−d)``
(``ā = a/(a+b)``, the prior's accuracy, as Chen et al.'s ``C``): with ``z = (d − E d)/√v``,
``Z = E[f]``, ``G = E[f z]/Z``, ``H = E[f (z² − 1)]/Z`` (Stein's lemma [Stein81]: the first
and second derivatives of ``log Z`` in ``E d``, times ``√v`` and ``v``),

``μ_w ← μ_w + σ_w² G/√v``, ``μ_l ← μ_l − σ_l² G/√v``,
``σ² ← σ² max(1 + (σ²/v)(H − G²), κ)``

— the marginal moments of the tilted two-item Gaussian (its ``λ_w``, ``λ_l`` given ``d`` are
the Gaussian conditionals), where the paper's update evaluates the same derivatives at
``d = μ_w − μ_l``.
"""

from __future__ import annotations

import numpy as np

from .arith import exp, ieee
from .guards import guard_finite, guard_positive
from .kernels import CROWDBT_QUAD_POINTS
from .state import empty_counts

#: The update's variants: Chen et al.'s second-order expansion, or quadrature (module doc).
TAYLOR = ("paper", "quadrature")
#: Gauss–Hermite nodes over the score difference (defined beside the kernel, whose numba
#: cache freezes the nodes and is keyed on that file).
QUAD_POINTS = CROWDBT_QUAD_POINTS


def sigmoid(x: float) -> float:
    """``1/(1 + e^{−x})`` without overflow for any finite ``x``."""
    if x >= 0.0:
        return 1.0 / (1.0 + exp(-x))
    e = exp(x)
    return e / (1.0 + e)


def difference_moments(mu_w, mu_l, s2_w, s2_l, n=QUAD_POINTS):
    """``(S0, S1, S2) = (E[σ(d)], E[σ(d) z], E[σ(d)(z² − 1)])`` with ``d = μ_w − μ_l + √v z``,
    ``v = σ_w² + σ_l²``, ``z ~ N(0, 1)``, by ``n``-point Gauss–Hermite
    (:func:`.gbmm.gauss_hermite`). ``S0`` is Chen et al.'s ``c1`` without the expansion."""
    from .gbmm import gauss_hermite

    z, w = gauss_hermite(n)
    m, sd = mu_w - mu_l, (s2_w + s2_l) ** 0.5
    S0 = S1 = S2 = 0.0
    for zk, wk in zip(z.tolist(), w.tolist()):
        ws = wk * sigmoid(m + sd * zk)
        S0 += ws
        S1 += ws * zk
        S2 += ws * (zk * zk - 1.0)
    return S0, S1, S2


def pair_update(mu_w, mu_l, s2_w, s2_l, a, b, *, kappa=1e-4, kappa2=1e-4, counts=None,
                strict=False, where="", taylor="paper"):
    """One reported pair ``w > l``: returns ``(μ_w, μ_l, σ_w², σ_l², a, b)``, guarded;
    ``taylor`` is one of :data:`TAYLOR` (module docstring)."""
    if taylor not in TAYLOR:
        raise ValueError(f"taylor must be one of {TAYLOR}, got {taylor!r}")
    if counts is None:
        counts = empty_counts()
    with np.errstate(all="ignore"):
        out = _pair(*ieee([mu_w, mu_l, s2_w, s2_l, a, b]), kappa, kappa2, counts, strict,
                    where, taylor == "quadrature")
    return tuple(float(x) for x in out)


def _pair(mu_w, mu_l, s2_w, s2_l, a, b, kappa, kappa2, counts, strict, where, quad=False):
    top = max(mu_w, mu_l)
    ew, el = exp(mu_w - top), exp(mu_l - top)   # ratios are shift invariant
    if quad:
        S0, S1, S2 = difference_moments(mu_w, mu_l, s2_w, s2_l)
        c1 = S0
    else:
        p = ew / (ew + el)
        d = ew + el
        c1 = p + 0.5 * (s2_w + s2_l) * ew * el * (el - ew) / (d * d * d)
    c2 = 1.0 - c1
    if c1 < kappa2 or c2 < kappa2:
        counts["kappa2"] += 1
    c1, c2 = max(c1, kappa2), max(c2, kappa2)
    z = c1 + c2
    c1, c2 = c1 / z, c2 / z

    # worker accuracy: moments of the tilted Beta, then a Beta with those moments
    c = (c1 * a + c2 * b) / (a + b)
    E1 = (c1 * (a + 1) * a + c2 * a * b) / (c * (a + b + 1) * (a + b))
    E2 = (c1 * (a + 2) * (a + 1) * a + c2 * (a + 1) * a * b) / (
        c * (a + b + 2) * (a + b + 1) * (a + b))
    a_new = guard_positive((E1 - E2) * E1 / (E2 - E1 * E1), a, "alpha", counts, strict, where)
    b_new = guard_positive((E1 - E2) * (1 - E1) / (E2 - E1 * E1), b, "alpha", counts, strict,
                           where)

    if quad:
        mw, ml, sw, sl = _scores_quadrature(mu_w, mu_l, s2_w, s2_l, a, b, S0, S1, S2, kappa,
                                            counts)
    else:
        mw, ml, sw, sl = _scores_taylor(mu_w, mu_l, s2_w, s2_l, a, b, ew, el, kappa, counts)
    mw = guard_finite(mw, mu_w, "mu", counts, strict, where)
    ml = guard_finite(ml, mu_l, "mu", counts, strict, where)
    sw = guard_positive(sw, s2_w, "sigma2", counts, strict, where)
    sl = guard_positive(sl, s2_l, "sigma2", counts, strict, where)
    return mw, ml, sw, sl, a_new, b_new


def _scores_taylor(mu_w, mu_l, s2_w, s2_l, a, b, ew, el, kappa, counts):
    """Chen et al.'s score step: the gradient and curvature of ``log C`` at ``μ``."""
    # scores with the prior (a, b), Chen et al.'s order
    psi = ew + el
    Psi = a * ew + b * el
    mw = mu_w + s2_w * (a * ew / Psi - ew / psi)
    ml = mu_l + s2_l * (b * el / Psi - el / psi)
    curv = a * ew * b * el / (Psi * Psi) - ew * el / (psi * psi)
    fw, fl = 1.0 + s2_w * curv, 1.0 + s2_l * curv
    counts["kappa"] += int(fw < kappa) + int(fl < kappa)
    sw, sl = s2_w * max(fw, kappa), s2_l * max(fl, kappa)
    return mw, ml, sw, sl


def _scores_quadrature(mu_w, mu_l, s2_w, s2_l, a, b, S0, S1, S2, kappa, counts):
    """The tilted Gaussian's marginal moments (module docstring): ``f = b̄ + (ā − b̄) σ(d)``,
    and the Gauss–Hermite rule integrates ``1``, ``z`` and ``z² − 1`` exactly, so
    ``Z = b̄ + (ā − b̄) S0``, ``E[f z] = (ā − b̄) S1``, ``E[f (z² − 1)] = (ā − b̄) S2``."""
    abar, bbar = a / (a + b), b / (a + b)
    Z = bbar + (abar - bbar) * S0
    G = (abar - bbar) * S1 / Z
    H = (abar - bbar) * S2 / Z
    v = s2_w + s2_l
    sd = v ** 0.5
    mw = mu_w + s2_w * G / sd
    ml = mu_l - s2_l * G / sd
    fw, fl = 1.0 + s2_w / v * (H - G * G), 1.0 + s2_l / v * (H - G * G)
    counts["kappa"] += int(fw < kappa) + int(fl < kappa)
    return mw, ml, s2_w * max(fw, kappa), s2_l * max(fl, kappa)


def crowdbt_pass_python(pairs, worker, seq, mu, sigma2, ab, *, kappa=1e-4, kappa2=1e-4,
                        strict=False, counts=None, taylor="paper"):
    """The reference pass over rank-broken pairs ``pairs[:, n] = (winner, loser)`` in the
    order ``seq``, updating ``mu``, ``sigma2``, ``ab`` (``(W, 2)``) in place."""
    if counts is None:
        counts = empty_counts()
    for n in seq:
        i, j, w = int(pairs[0, n]), int(pairs[1, n]), int(worker[n])
        out = pair_update(float(mu[i]), float(mu[j]), float(sigma2[i]), float(sigma2[j]),
                          float(ab[w, 0]), float(ab[w, 1]), kappa=kappa, kappa2=kappa2,
                          counts=counts, strict=strict, where=f"pair {n}", taylor=taylor)
        mu[i], mu[j], sigma2[i], sigma2[j], ab[w, 0], ab[w, 1] = out
    return counts

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
"""

from __future__ import annotations

import numpy as np

from .arith import exp, ieee
from .guards import guard_finite, guard_positive
from .state import empty_counts


def pair_update(mu_w, mu_l, s2_w, s2_l, a, b, *, kappa=1e-4, kappa2=1e-4, counts=None,
                strict=False, where=""):
    """One reported pair ``w > l``: returns ``(μ_w, μ_l, σ_w², σ_l², a, b)``, guarded."""
    if counts is None:
        counts = empty_counts()
    with np.errstate(all="ignore"):
        out = _pair(*ieee([mu_w, mu_l, s2_w, s2_l, a, b]), kappa, kappa2, counts, strict,
                    where)
    return tuple(float(x) for x in out)


def _pair(mu_w, mu_l, s2_w, s2_l, a, b, kappa, kappa2, counts, strict, where):
    top = max(mu_w, mu_l)
    ew, el = exp(mu_w - top), exp(mu_l - top)   # ratios are shift invariant
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

    # scores with the prior (a, b), Chen et al.'s order
    psi = ew + el
    Psi = a * ew + b * el
    mw = mu_w + s2_w * (a * ew / Psi - ew / psi)
    ml = mu_l + s2_l * (b * el / Psi - el / psi)
    curv = a * ew * b * el / (Psi * Psi) - ew * el / (psi * psi)
    fw, fl = 1.0 + s2_w * curv, 1.0 + s2_l * curv
    counts["kappa"] += int(fw < kappa) + int(fl < kappa)
    sw, sl = s2_w * max(fw, kappa), s2_l * max(fl, kappa)
    mw = guard_finite(mw, mu_w, "mu", counts, strict, where)
    ml = guard_finite(ml, mu_l, "mu", counts, strict, where)
    sw = guard_positive(sw, s2_w, "sigma2", counts, strict, where)
    sl = guard_positive(sl, s2_l, "sigma2", counts, strict, where)
    return mw, ml, sw, sl, a_new, b_new


def crowdbt_pass_python(pairs, worker, seq, mu, sigma2, ab, *, kappa=1e-4, kappa2=1e-4,
                        strict=False, counts=None):
    """The reference pass over rank-broken pairs ``pairs[:, n] = (winner, loser)`` in the
    order ``seq``, updating ``mu``, ``sigma2``, ``ab`` (``(W, 2)``) in place."""
    if counts is None:
        counts = empty_counts()
    for n in seq:
        i, j, w = int(pairs[0, n]), int(pairs[1, n]), int(worker[n])
        out = pair_update(float(mu[i]), float(mu[j]), float(sigma2[i]), float(sigma2[j]),
                          float(ab[w, 0]), float(ab[w, 1]), kappa=kappa, kappa2=kappa2,
                          counts=counts, strict=strict, where=f"pair {n}")
        mu[i], mu[j], sigma2[i], sigma2[j], ab[w, 0], ab[w, 1] = out
    return counts

"""numba twin of :mod:`.ep_exact`: one EP pass with exact worker moments.

The readable specification is :func:`crowdrank.inference.online.ep_exact.site_update_python`
(tested equal per site and per pass). Two computations differ in *how*, not in *what*:

- the Dirichlet integrals: the specification runs a Gauss–Jacobi product rule over the
  nested Beta variables ``u_i`` (:func:`.ep_exact.dirichlet_product_moments`); here they
  are the same polynomial moments in closed form, ``E[u^e (1−u)^f] = (p)_e (q)_f /
  (p+q)_{e+f}`` (rising factorials; [Ng11]), from the exponent tables that
  :func:`.ep_exact.combo_tables` builds — both are exact for these polynomials, so they
  agree to rounding;
- the tensor Gauss–Hermite grid is walked as a mixed-radix counter instead of built, and
  the stages' softmaxes at a node share one exponential per item (suffix sums).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from . import kernels

#: The largest ranking length (= support size K of η) the exact worker integral takes.
K_MAX = 4
#: Gauss–Hermite nodes per item over the cavity, by ranking length k (``n^k`` nodes a
#: site: 400, 1000, 1296): product rules of degree ``2n − 1`` per item.
GH_POINTS = {2: 20, 3: 10, 4: 6}
#: a stage whose exponentials, shifted by the ranking's largest λ, sum below this is
#: recomputed shifted by its own largest λ (:func:`_softmax_moments`)
EXP_FLOOR = 1e-200


def combo_tables():
    """The combinations and their exponents, padded to :data:`K_MAX` (row ``k``).

    ``CS[k, c, s]``: the offset ``t_s`` chosen at stage ``s`` (``m = k − s`` candidates)
    by combination ``c`` of the ``k!`` ones; ``CE[k, c, i]``, ``CF[k, c, i]``: the powers
    of ``u_i`` and ``1 − u_i`` in ``Π_s η̄^{(m_s)}_{t_s}``; ``TE[k, t, i]``, ``TF[k, t, i]``:
    those of ``η̃_t = η̄^{(k)}_t``. With 1-based offsets ``j``, ``η̄^{(m)}_j = (1 − u_j)^{[j≥2]}
    Π_{i=j+1}^{m} u_i`` (module docstring of :mod:`.ep_exact`)."""
    from itertools import product

    CS = np.zeros((K_MAX + 1, 24, K_MAX), dtype=np.int64)
    CE = np.zeros((K_MAX + 1, 24, K_MAX + 1), dtype=np.int64)
    CF = np.zeros_like(CE)
    TE = np.zeros((K_MAX + 1, K_MAX, K_MAX + 1), dtype=np.int64)
    TF = np.zeros_like(TE)
    NCOMB = np.zeros(K_MAX + 1, dtype=np.int64)

    def add(e, f, m, t):                 # η̄^{(m)} at 0-based offset t
        j = t + 1
        for i in range(j + 1, m + 1):
            e[i] += 1
        if j >= 2:
            f[j] += 1
    for k in range(2, K_MAX + 1):
        combos = list(product(*[range(k - s) for s in range(k - 1)]))
        NCOMB[k] = len(combos)
        for c, ts in enumerate(combos):
            for s, t in enumerate(ts):
                CS[k, c, s] = t
                add(CE[k, c], CF[k, c], k - s, t)
        for t in range(k):
            add(TE[k, t], TF[k, t], k, t)
    return CS, CE, CF, TE, TF, NCOMB


def gh_tables():
    """Probabilists' Gauss–Hermite nodes and weights (summing to one) per ``k``."""
    from .gbmm import gauss_hermite

    n = max(GH_POINTS.values())
    N = np.zeros(K_MAX + 1, dtype=np.int64)
    Z = np.zeros((K_MAX + 1, n))
    W = np.zeros((K_MAX + 1, n))
    for k, nk in GH_POINTS.items():
        z, w = gauss_hermite(nk)
        N[k], Z[k, :nk], W[k, :nk] = nk, z, w
    return N, Z, W


CS, CE, CF, TE, TF, NCOMB = combo_tables()
GH_N, GH_Z, GH_W = gh_tables()


@njit(cache=True, inline="always", error_model="numpy")
def _rising(x, n):
    """``(x)_n = x (x+1) ⋯ (x+n−1)``."""
    out = 1.0
    for i in range(n):
        out *= x + i
    return out


@njit(cache=True, error_model="numpy")
def _poly_moment(a, k, e, f):
    """``E[Π_i u_i^{e_i} (1−u_i)^{f_i}]`` with ``u_i ~ Beta(a_1+…+a_{i−1}, a_i)``
    independent, ``i = 2..k`` (1-based, arrays indexed by ``i``)."""
    out = 1.0
    p = a[0]
    for i in range(2, k + 1):
        q = a[i - 1]
        if e[i] or f[i]:
            out *= _rising(p, e[i]) * _rising(q, f[i]) / _rising(p + q, e[i] + f[i])
        p += q
    return out


@njit(cache=True, error_model="numpy")
def _softmax_moments(mc, vc, k, exact_scores, D, M, G, H, lam, p, idx, prod):
    """Gauss–Hermite over the cavity ``N(mc, vc)`` of the ``k`` items: ``M[c] =
    E[Π_s p_{s,t_s}]`` for every combination ``c`` and, when ``exact_scores``, the
    tilted moments ``Z = E[F]``, ``G_j = E[F z_j]``, ``H_j = E[F (z_j² − 1)]`` with
    ``F = Σ_c D[c] Π_s p_{s,t_s}``. Returns ``Z``."""
    n = GH_N[k]
    nc = NCOMB[k]
    for c in range(nc):
        M[c] = 0.0
    for j in range(k):
        G[j] = 0.0
        H[j] = 0.0
        idx[j] = 0
    Z = 0.0
    total = 1
    for j in range(k):
        total *= n
    sd = np.empty(k)
    e = np.empty(k)
    for j in range(k):
        sd[j] = math.sqrt(vc[j])
    for _ in range(total):
        wt = 1.0
        top = -np.inf
        for j in range(k):
            wt *= GH_W[k, idx[j]]
            lam[j] = mc[j] + sd[j] * GH_Z[k, idx[j]]
            top = max(top, lam[j])
        # the stages' softmaxes share one exponential per item (stage s: the items s..k−1,
        # normalised by their suffix sum): k exponentials a node, not k(k+1)/2 − 1; a stage
        # whose shifted exponentials sum below EXP_FLOOR (its items far below the ranking's
        # top) is shifted by its own largest λ instead, so no stage underflows
        for j in range(k):
            e[j] = math.exp(lam[j] - top)
        tot = 0.0
        for s in range(k - 1, -1, -1):
            tot += e[s]
            if s == k - 1:
                continue
            if tot > EXP_FLOOR:
                for t in range(s, k):
                    p[s, t - s] = e[t] / tot
            else:
                stop = -np.inf
                for t in range(s, k):
                    stop = max(stop, lam[t])
                st = 0.0
                for t in range(s, k):
                    p[s, t - s] = math.exp(lam[t] - stop)
                    st += p[s, t - s]
                for t in range(k - s):
                    p[s, t] /= st
        F = 0.0
        for c in range(nc):
            pr = 1.0
            for s in range(k - 1):
                pr *= p[s, CS[k, c, s]]
            prod[c] = pr
            M[c] += wt * pr
            F += D[c] * pr
        if exact_scores:
            wf = wt * F
            Z += wf
            for j in range(k):
                z = GH_Z[k, idx[j]]
                G[j] += wf * z
                H[j] += wf * (z * z - 1.0)
        for j in range(k - 1, -1, -1):      # next node: increment the counter
            idx[j] += 1
            if idx[j] < n:
                break
            idx[j] = 0
    return Z


@njit(cache=True, error_model="numpy")
def worker_alpha(a, k, M, out, e, f, full):
    """The exact tilted Dirichlet's ``α`` of the first ``k`` components (Eq. 9–10 on
    the whole ranking): ``E[η̃_t]``, ``E[η̃_t²]`` under ``Dir(a) Σ_c M[c] Π_s η̄^{(s)}_{t_s}``
    and ``α_t = (E1 − E2) E1 / (E2 − E1²)`` into ``out``. Returns the evidence ``Σ_c M_c D_c``."""
    nc = NCOMB[k]
    Z = 0.0
    for t in range(k):
        out[t] = 0.0
    E1 = np.zeros(k)
    E2 = np.zeros(k)
    for c in range(nc):
        for i in range(k + 1):
            e[i] = CE[k, c, i]
            f[i] = CF[k, c, i]
        Z += M[c] * _poly_moment(a, k, e, f)
        for t in range(k):
            for pw in (1, 2):
                for i in range(k + 1):
                    e[i] = CE[k, c, i] + pw * TE[k, t, i]
                    f[i] = CF[k, c, i] + pw * TF[k, t, i]
                v = M[c] * _poly_moment(a, k, e, f)
                if pw == 1:
                    E1[t] += v
                else:
                    E2[t] += v
    # full: the moments of η_t = S_k η̃_t, S_k = Σ_{t≤k} η_t ~ Beta(A_k, S − A_k) independent
    # of η̃ and untouched by the site (aggregation); else those of η̃ itself
    A = 0.0
    S = 0.0
    for t in range(a.shape[0]):
        S += a[t]
        if t < k:
            A += a[t]
    s1 = A / S if full else 1.0
    s2 = A * (A + 1.0) / (S * (S + 1.0)) if full else 1.0
    for t in range(k):
        m1, m2 = s1 * E1[t] / Z, s2 * E2[t] / Z
        out[t] = (m1 - m2) * m1 / (m2 - m1 * m1)
    return Z


@njit(cache=True, error_model="numpy")
def ep_exact_couple_pass(first, d, seq, ordr, lengths, wk, mu, s2, alpha, site_tau, site_nu,
                         site_alpha, exact_scores, full, taylor, score_prior, kappa, kappa2,
                         strict, counts, err, out):
    """:func:`.ep_exact.ep_exact_pass_python` for COUPLE as one numba loop. ``out[0]``
    receives the improper cavities; returns ``-1`` or the position of a strict failure."""
    K = ordr.shape[0]
    Ka = alpha.shape[1]
    tau_c = np.empty(K)
    nu_c = np.empty(K)
    mc = np.empty(K)
    vc = np.empty(K)
    a_c = np.empty(Ka)
    a_new = np.empty(Ka)
    M = np.empty(24)
    D = np.empty(24)
    prod = np.empty(24)
    G = np.empty(K)
    H = np.empty(K)
    lam = np.empty(K)
    p = np.empty((K, K))
    idx = np.empty(K, dtype=np.int64)
    e = np.zeros(K + 1, dtype=np.int64)
    f = np.zeros(K + 1, dtype=np.int64)
    one = np.empty(1, dtype=np.int64)
    (mu_w, s2_w, e_w, p_w, R_w, a_w, an_w, cand_w, QA_w, QB_w, QC_w, qi_w, qz_w,
     ql_w) = kernels.gbmm_scratch(K)
    improper = 0
    for pos in range(seq.shape[0]):
        n = seq[pos]
        k = lengths[n]
        w = wk[n]
        ok = True
        for j in range(k):
            r = ordr[j, n]
            tau_c[j] = 1.0 / s2[r] - site_tau[n, j]
            nu_c[j] = mu[r] / s2[r] - site_nu[n, j]
            if not tau_c[j] > 0.0:
                ok = False
        for t in range(Ka):
            a_c[t] = alpha[w, t] - site_alpha[n, t]
            if not a_c[t] > 0.0:
                ok = False
        if not ok:
            improper += 1
            continue
        for j in range(k):
            r = ordr[j, n]
            if first:                       # pass 1: the cavity is q itself, bit for bit
                mc[j], vc[j] = mu[r], s2[r]
            else:
                mc[j], vc[j] = nu_c[j] / tau_c[j], 1.0 / tau_c[j]
                mu[r], s2[r] = mc[j], vc[j]
        if not first:
            for t in range(Ka):
                alpha[w, t] = a_c[t]
        # the combinations' Dirichlet weights D_c = E_Dir(a_c)[Π_s η̄^{(s)}_{t_s}]
        for c in range(NCOMB[k]):
            for i in range(k + 1):
                e[i] = CE[k, c, i]
                f[i] = CF[k, c, i]
            D[c] = _poly_moment(a_c, k, e, f)
        Z = _softmax_moments(mc, vc, k, exact_scores, D, M, G, H, lam, p, idx, prod)
        for t in range(Ka):
            a_new[t] = a_c[t]
        worker_alpha(a_c, k, M, a_new, e, f, full)
        fail = False
        for t in range(k):
            val, bad = kernels._positive(a_new[t], a_c[t], counts, 0, strict)
            fail = fail or bad
            a_new[t] = val
        if fail:
            err[0], err[1], err[2] = pos, 1, 0
            out[0] = improper
            return pos
        if exact_scores:
            for j in range(k):
                r = ordr[j, n]
                Gj, Hj = G[j] / Z, H[j] / Z
                mnew = mc[j] + math.sqrt(vc[j]) * Gj
                fac = 1.0 + Hj - Gj * Gj
                if fac < kappa:
                    counts[3] += 1
                val, bad = kernels._positive(vc[j] * max(fac, kappa), vc[j], counts, 1,
                                             strict)
                if bad or not math.isfinite(mnew):
                    err[0], err[1], err[2] = pos, 2, 0
                    out[0] = improper
                    return pos
                mu[r], s2[r] = mnew, val
        else:                                # the score part as EP: the stage updates
            one[0] = n
            bad = kernels.gbmm_units(ordr, lengths, wk, one, 0, 1, mu, s2, alpha, taylor,
                                     score_prior, kappa, kappa2, strict, counts, err, mu_w,
                                     s2_w, e_w, p_w, R_w, a_w, an_w, cand_w, QA_w, QB_w,
                                     QC_w, qi_w, qz_w, ql_w)
            if bad >= 0:
                err[0] = pos
                out[0] = improper
                return pos
        for t in range(Ka):
            alpha[w, t] = a_new[t]
        for j in range(k):
            r = ordr[j, n]
            nt = d * site_tau[n, j] + (1.0 - d) * (1.0 / s2[r] - tau_c[j])
            nn = d * site_nu[n, j] + (1.0 - d) * (mu[r] / s2[r] - nu_c[j])
            if not first:
                tq = tau_c[j] + nt
                mu[r] = (nu_c[j] + nn) / tq
                s2[r] = 1.0 / tq
            site_tau[n, j] = nt
            site_nu[n, j] = nn
        for t in range(Ka):
            na = d * site_alpha[n, t] + (1.0 - d) * (alpha[w, t] - a_c[t])
            if not first:
                alpha[w, t] = a_c[t] + na
            site_alpha[n, t] = na
    out[0] = improper
    return -1


@njit(cache=True, error_model="numpy")
def ep_exact_crowdbt_pass(first, d, seq, pairs, wk, mu, s2, ab, site_tau, site_nu,
                          site_alpha, kappa, strict, counts, err, out):
    """The CrowdBT pass of :func:`.ep_exact.ep_exact_pass_python`: per pair the quadrature
    scores of :func:`.kernels.crowdbt_kernel` and the exact Beta moments (closed forms of
    the 2-node Gauss–Jacobi rule's integrals, no ``κ2`` floor)."""
    improper = 0
    mc = np.empty(2)
    vc = np.empty(2)
    tau_c = np.empty(2)
    nu_c = np.empty(2)
    mn = np.empty(2)
    vn = np.empty(2)
    an = np.empty(2)
    for pos in range(seq.shape[0]):
        n = seq[pos]
        w = wk[n]
        ok = True
        for j in range(2):
            r = pairs[j, n]
            tau_c[j] = 1.0 / s2[r] - site_tau[n, j]
            nu_c[j] = mu[r] / s2[r] - site_nu[n, j]
            ok = ok and tau_c[j] > 0.0
            mc[j] = mu[r] if first else nu_c[j] / tau_c[j]
            vc[j] = s2[r] if first else 1.0 / tau_c[j]
        a = ab[w, 0] - site_alpha[n, 0]
        b = ab[w, 1] - site_alpha[n, 1]
        if not (ok and a > 0.0 and b > 0.0):
            improper += 1
            continue
        md = mc[0] - mc[1]
        v = vc[0] + vc[1]
        sd = math.sqrt(v)
        S0 = S1 = S2 = 0.0
        for q in range(kernels._Q1N.shape[0]):
            zq = kernels._Q1N[q]
            ws = kernels._Q1W[q] * kernels._sigmoid(md + sd * zq)
            S0 += ws
            S1 += ws * zq
            S2 += ws * (zq * zq - 1.0)
        abar, bbar = a / (a + b), b / (a + b)
        Zq = bbar + (abar - bbar) * S0
        G = (abar - bbar) * S1 / Zq
        H = (abar - bbar) * S2 / Zq
        mn[0] = mc[0] + vc[0] * G / sd
        mn[1] = mc[1] - vc[1] * G / sd
        for j in range(2):
            fac = 1.0 + vc[j] / v * (H - G * G)
            if fac < kappa:
                counts[3] += 1
            vn[j] = vc[j] * max(fac, kappa)
        # E[η], E[η²] under Beta(a, b) (η c1 + (1 − η)(1 − c1)), c1 = S0, in closed form
        c1 = S0
        c2 = 1.0 - S0
        s = a + b
        Z = (c1 * a + c2 * b) / s
        E1 = (c1 * (a + 1.0) * a + c2 * a * b) / (Z * (s + 1.0) * s)
        E2 = (c1 * (a + 2.0) * (a + 1.0) * a + c2 * (a + 1.0) * a * b) / (
            Z * (s + 2.0) * (s + 1.0) * s)
        prec = (E1 - E2) / (E2 - E1 * E1)
        an[0], f1 = kernels._positive(E1 * prec, a, counts, 0, strict)
        an[1], f2 = kernels._positive((1.0 - E1) * prec, b, counts, 0, strict)
        if f1 or f2:
            err[0], err[1], err[2] = pos, 1, 1
            out[0] = improper
            return pos
        for j in range(2):
            r = pairs[j, n]
            nt = d * site_tau[n, j] + (1.0 - d) * (1.0 / vn[j] - tau_c[j])
            nn = d * site_nu[n, j] + (1.0 - d) * (mn[j] / vn[j] - nu_c[j])
            if first:
                mu[r], s2[r] = mn[j], vn[j]
            else:
                tq = tau_c[j] + nt
                mu[r], s2[r] = (nu_c[j] + nn) / tq, 1.0 / tq
            site_tau[n, j] = nt
            site_nu[n, j] = nn
        for t in range(2):
            cav = a if t == 0 else b
            na = d * site_alpha[n, t] + (1.0 - d) * (an[t] - cav)
            ab[w, t] = an[t] if first else cav + na
            site_alpha[n, t] = na
    out[0] = improper
    return -1

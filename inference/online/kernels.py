"""numba kernels: the hot loops over rankings, one per online method.

Each kernel is a transcription of its readable specification (:mod:`.gbmm`,
:mod:`.crowdbt`, :mod:`.wenglin`) with the same operations in the same order, so the two
agree to rounding (tested to 1e-12 per update and on short prefixes). Differences that
only concern speed: the shifted exponentials of a stage are computed once and shared by
steps 1 and 3 of OnlineGBMM (the specification recomputes the same numbers), the loops of
a stage are fused where one loop's results feed the next one's sums (the same operations
in the same order, so bit-identical to the unfused loops), and scratch arrays are
allocated once per call.

Common arguments: ``seq`` (int64) are the column indices of ``order`` to process, in that
order, from ``seq[start]`` to ``seq[stop-1]``; ``counts`` (int64, 5) are the guard counters
in the order of :data:`crowdrank.inference.online.state.CLAMP_KEYS`; ``err`` (int64, 3) receives
``(position in seq, code, stage)`` when a guard fails in strict mode (codes in
:data:`crowdrank.inference.online.guards.CODES`). The return value is ``-1`` when all went through,
otherwise the position in ``seq`` of the ranking that failed (strict mode).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .guards import FLOOR

_A, _S2, _MU, _KAPPA, _KAPPA2 = 0, 1, 2, 3, 4       # counters, as CLAMP_KEYS
TAYLOR_CODES = {"paper": 0, "full": 1, "plugin": 2, "quadrature": 3}


def _gh_tables(mmax: int = 64):
    """Gauss–Hermite nodes/weights of :func:`.gbmm.gauss_hermite` for every stage size
    ``m ≤ mmax`` (row ``m``), padded; numba freezes these module arrays as constants."""
    from .gbmm import QUAD_MAX, gauss_hermite, quad_points

    npts = np.zeros(mmax + 1, dtype=np.int64)
    nodes = np.zeros((mmax + 1, QUAD_MAX))
    weights = np.zeros((mmax + 1, QUAD_MAX))
    for m in range(1, mmax + 1):
        n = quad_points(m)
        z, w = gauss_hermite(n)
        npts[m], nodes[m, :n], weights[m, :n] = n, z, w
    return npts, nodes, weights


_QP, _QN, _QW = _gh_tables()


@njit(cache=True, error_model="numpy")
def _quad_moments(mu_c, s2_c, m, A, B, C, idx, z, lam):
    """:func:`.gbmm.quadrature_moments` into ``A (m,)``, ``B (m, m)``, ``C (m, m)``
    (``B[t, j]``); ``idx``, ``z``, ``lam`` are scratch arrays of length ``>= m``. The
    tensor grid is walked as a mixed-radix counter."""
    n = _QP[m]
    for t in range(m):
        A[t] = 0.0
        idx[t] = 0
        for j in range(m):
            B[t, j] = 0.0
            C[t, j] = 0.0
    total = 1
    for t in range(m):
        total *= n
    for _ in range(total):
        wt = 1.0
        top = -np.inf
        for j in range(m):
            z[j] = _QN[m, idx[j]]
            wt *= _QW[m, idx[j]]
            lam[j] = mu_c[j] + math.sqrt(s2_c[j]) * z[j]
            top = max(top, lam[j])
        tot = 0.0
        for j in range(m):
            lam[j] = math.exp(lam[j] - top)
            tot += lam[j]
        for t in range(m):
            wp = wt * lam[t] / tot
            A[t] += wp
            for j in range(m):
                B[t, j] += wp * z[j]
                C[t, j] += wp * (z[j] * z[j] - 1.0)
        for j in range(m - 1, -1, -1):          # next node: increment the counter
            idx[j] += 1
            if idx[j] < n:
                break
            idx[j] = 0
GAMMA_CODES = {"sigma/c": 0, "1/k": 1}               # anything else: a constant (code 2)


@njit(cache=True, inline="always", error_model="numpy")
def _positive(new, old, counts, key, strict):
    """The guard of :func:`crowdrank.inference.online.guards.guard_positive`: ``new`` when
    finite and ``>= FLOOR``; otherwise a strict-mode failure (non-finite or ``<= 0``), or
    the old value (non-finite) or ``FLOOR``, counted in ``counts[key]`` as the
    specification counts it (also when the old value equals the non-finite new one).
    Returns ``(value, fail)``."""
    if math.isfinite(new) and new >= FLOOR:
        return new, False
    if strict and (not math.isfinite(new) or new <= 0.0):
        return new, True
    counts[key] += 1
    if not math.isfinite(new):
        return old, False
    return FLOOR, False


@njit(cache=True, error_model="numpy")
def gbmm_scratch(K):
    """The work arrays of :func:`gbmm_units` for rankings of at most ``K`` items."""
    return (np.empty(K), np.empty(K), np.empty(K), np.empty(K), np.empty(K), np.empty(K),
            np.empty(K), np.empty(K, dtype=np.int64), np.empty(K), np.empty((K, K)),
            np.empty((K, K)), np.empty(K, dtype=np.int64), np.empty(K), np.empty(K))


@njit(cache=True, error_model="numpy")
def gbmm_kernel(order, lengths, worker, seq, start, stop, mu, sigma2, alpha, taylor,
                score_prior, kappa, kappa2, strict, counts, err):
    """OnlineGBMM ([Pan18], Algorithm 1): reverse stages, Eq. (9)-(12) per stage."""
    (mu_c, s2_c, e, p, R, a, a_new, cand, QA, QB, QC, qidx, qz,
     qlam) = gbmm_scratch(order.shape[0])
    return gbmm_units(order, lengths, worker, seq, start, stop, mu, sigma2, alpha, taylor,
                      score_prior, kappa, kappa2, strict, counts, err, mu_c, s2_c, e, p, R,
                      a, a_new, cand, QA, QB, QC, qidx, qz, qlam)


@njit(cache=True, inline="always", error_model="numpy")
def _fail(err, pos, code, stage):
    """Record a strict-mode failure in ``err`` (module docstring) and return ``pos``."""
    err[0] = pos
    err[1] = code
    err[2] = stage
    return pos


@njit(cache=True, inline="always", error_model="numpy")
def gbmm_units(order, lengths, worker, seq, start, stop, mu, sigma2, alpha, taylor,
               score_prior, kappa, kappa2, strict, counts, err, mu_c, s2_c, e, p, R, a,
               a_new, cand, QA, QB, QC, qidx, qz, qlam):
    """:func:`gbmm_kernel` on caller-owned work arrays (:func:`gbmm_scratch`), so that a
    caller updating one ranking at a time (EP, :mod:`.ep`) does not allocate them for
    every ranking; inlined, so that neither pays a call per ranking (numba's cache is per
    file: a change here must also touch the callers' modules to recompile them). Why the
    steps stay in one loop body: docs/design.md, "The online kernels"."""
    for pos in range(start, stop):
        n = seq[pos]
        k, w = lengths[n], worker[n]
        for s in range(k - 2, -1, -1):           # reverse update strategy (Remark 3)
            m = k - s
            top = -np.inf
            for t in range(m):
                r = order[s + t, n]
                cand[t] = r
                mu_c[t] = mu[r]
                s2_c[t] = sigma2[r]
                a[t] = alpha[w, t]
                top = max(top, mu_c[t])
            psi = 0.0
            for t in range(m):
                e[t] = math.exp(mu_c[t] - top)
                psi += e[t]
            inv_psi = 1.0 / psi
            sp = 0.0
            for t in range(m):
                p[t] = e[t] * inv_psi
                sp += s2_c[t] * p[t]
            # step 1: R_t ~ E[softmax], appendix 1.1.2, then the kappa2 guard (fused with
            # step 1 in the default expansion: one loop less per stage)
            floored, Z = False, 0.0
            if taylor == 0:
                for t in range(m):
                    Rt = p[t] - 0.5 * sp * p[t] + 0.5 * s2_c[t] * p[t]
                    floored = floored or Rt < kappa2
                    Rt = max(Rt, kappa2)
                    R[t] = Rt
                    Z += Rt
            elif taylor == 1:
                for t in range(m):
                    cross = 0.0
                    for j in range(m):
                        if j != t:
                            cross += s2_c[j] * p[j] * (1.0 - 2.0 * p[j])
                    R[t] = (p[t] + 0.5 * s2_c[t] * p[t] * (1.0 - p[t]) * (1.0 - 2.0 * p[t])
                            - 0.5 * p[t] * cross)
            elif taylor == 2:
                for t in range(m):
                    R[t] = p[t]
            else:
                _quad_moments(mu_c, s2_c, m, QA, QB, QC, qidx, qz, qlam)
                for t in range(m):
                    R[t] = QA[t]
            if taylor != 0:
                for t in range(m):
                    floored = floored or R[t] < kappa2
                    R[t] = max(R[t], kappa2)
                    Z += R[t]
            if floored:
                counts[_KAPPA2] += 1
            inv_Z = 1.0 / Z
            # step 2: Eq. (9a), (9b), (10)
            S = Ra = 0.0
            for v in range(m):
                R[v] = R[v] * inv_Z
                S += a[v]
                Ra += R[v] * a[v]
            Rbar = Ra / S
            d1 = 1.0 / (Rbar * (S + 1.0) * S)
            d2 = 1.0 / (Rbar * (S + 2.0) * (S + 1.0) * S)
            Psi = 0.0                            # step 3's normaliser, summed here
            for t in range(m):
                E1 = a[t] * (Ra + R[t]) * d1
                E2 = a[t] * (a[t] + 1.0) * (Ra + 2.0 * R[t]) * d2
                raw = (E1 - E2) * E1 / (E2 - E1 * E1)
                val, fail = _positive(raw, a[t], counts, _A, strict)
                if fail:
                    return _fail(err, pos, 1, s + 1)
                a_new[t] = val
                Psi += (a[t] if score_prior else val) * e[t]
            # step 3: Eq. (11), (12) with the updated (default) or the prior alpha
            ak = a if score_prior else a_new
            u = 1.0 / Psi
            if taylor == 3:                      # quadrature: Z = Σ a_t A_t
                Zq = 0.0
                for t in range(m):
                    Zq += ak[t] * QA[t]
            for t in range(m):
                ae = ak[t] * e[t]
                if taylor == 3:
                    G = H = 0.0
                    for v in range(m):
                        G += ak[v] * QB[v, t]
                        H += ak[v] * QC[v, t]
                    G, H = G / Zq, H / Zq
                    mnew = mu_c[t] + math.sqrt(s2_c[t]) * G
                    factor = 1.0 + H - G * G
                else:
                    mnew = mu_c[t] + s2_c[t] * (ae * u - p[t])
                    factor = 1.0 + s2_c[t] * (ae * (Psi - ae) * u * u
                                              - e[t] * (psi - e[t]) * inv_psi * inv_psi)
                if factor < kappa:
                    counts[_KAPPA] += 1
                snew = s2_c[t] * max(factor, kappa)
                if not math.isfinite(mnew):
                    if strict:
                        return _fail(err, pos, 3, s + 1)
                    counts[_MU] += 1
                    mnew = mu_c[t]
                val, fail = _positive(snew, s2_c[t], counts, _S2, strict)
                if fail:
                    return _fail(err, pos, 2, s + 1)
                mu[cand[t]] = mnew
                sigma2[cand[t]] = val
            for t in range(m):
                alpha[w, t] = a_new[t]
    return -1


#: Gauss–Hermite nodes of CrowdBT's quadrature variant over the score difference (exact
#: for polynomials of degree < 128). The logistic has poles at ``±iπ``, so the error falls
#: geometrically at a rate set by the difference's sd: against adaptive quadrature, 32 nodes
#: leave ~2e-7 on ``E[σ(d) z]`` at sd 2, 64 nodes ~1e-10 (a pair costs 64 logistics). Here,
#: not in :mod:`.crowdbt`, because numba's cache freezes the nodes and is keyed on this file.
CROWDBT_QUAD_POINTS = 64


def _gh_1d():
    """The 1-D Gauss–Hermite rule of :func:`.crowdbt.difference_moments`."""
    from .gbmm import gauss_hermite

    return gauss_hermite(CROWDBT_QUAD_POINTS)


_Q1N, _Q1W = _gh_1d()


@njit(cache=True, inline="always", error_model="numpy")
def _sigmoid(x):
    """:func:`.crowdbt.sigmoid`."""
    if x >= 0.0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


@njit(cache=True, error_model="numpy")
def crowdbt_kernel(pairs, worker, seq, start, stop, mu, sigma2, ab, kappa, kappa2, strict,
                   counts, err, taylor):
    """CrowdBT online [Chen13] over rank-broken pairs ``pairs[:, n] = (w, l)``;
    ``taylor`` 0 is Chen et al.'s expansion, 3 the quadrature of :mod:`.crowdbt`."""
    S0 = S1 = S2 = 0.0
    for pos in range(start, stop):
        n = seq[pos]
        i = pairs[0, n]
        j = pairs[1, n]
        wk = worker[n]
        mu_w = mu[i]
        mu_l = mu[j]
        s2_w = sigma2[i]
        s2_l = sigma2[j]
        a = ab[wk, 0]
        b = ab[wk, 1]
        top = max(mu_w, mu_l)
        ew = math.exp(mu_w - top)
        el = math.exp(mu_l - top)
        if taylor == 3:
            md = mu_w - mu_l
            sd = (s2_w + s2_l) ** 0.5
            S0 = 0.0
            S1 = 0.0
            S2 = 0.0
            for q in range(_Q1N.shape[0]):
                zq = _Q1N[q]
                ws = _Q1W[q] * _sigmoid(md + sd * zq)
                S0 += ws
                S1 += ws * zq
                S2 += ws * (zq * zq - 1.0)
            c1 = S0
        else:
            p = ew / (ew + el)
            d = ew + el
            c1 = p + 0.5 * (s2_w + s2_l) * ew * el * (el - ew) / (d * d * d)
        c2 = 1.0 - c1
        if c1 < kappa2 or c2 < kappa2:
            counts[_KAPPA2] += 1
        c1 = max(c1, kappa2)
        c2 = max(c2, kappa2)
        z = c1 + c2
        c1 = c1 / z
        c2 = c2 / z
        c = (c1 * a + c2 * b) / (a + b)
        E1 = (c1 * (a + 1) * a + c2 * a * b) / (c * (a + b + 1) * (a + b))
        E2 = (c1 * (a + 2) * (a + 1) * a + c2 * (a + 1) * a * b) / (
            c * (a + b + 2) * (a + b + 1) * (a + b))
        raw_a = (E1 - E2) * E1 / (E2 - E1 * E1)
        raw_b = (E1 - E2) * (1 - E1) / (E2 - E1 * E1)
        a_new, fa = _positive(raw_a, a, counts, _A, strict)
        b_new, fb = _positive(raw_b, b, counts, _A, strict)
        if fa or fb:
            err[0] = pos
            err[1] = 1
            err[2] = 1
            return pos
        if taylor == 3:                          # the tilted Gaussian's moments
            abar = a / (a + b)
            bbar = b / (a + b)
            Zq = bbar + (abar - bbar) * S0
            G = (abar - bbar) * S1 / Zq
            H = (abar - bbar) * S2 / Zq
            v = s2_w + s2_l
            sd = v ** 0.5
            mw = mu_w + s2_w * G / sd
            ml = mu_l - s2_l * G / sd
            fw = 1.0 + s2_w / v * (H - G * G)
            fl = 1.0 + s2_l / v * (H - G * G)
        else:
            psi = ew + el
            Psi = a * ew + b * el
            mw = mu_w + s2_w * (a * ew / Psi - ew / psi)
            ml = mu_l + s2_l * (b * el / Psi - el / psi)
            curv = a * ew * b * el / (Psi * Psi) - ew * el / (psi * psi)
            fw = 1.0 + s2_w * curv
            fl = 1.0 + s2_l * curv
        counts[_KAPPA] += int(fw < kappa) + int(fl < kappa)
        sw = s2_w * max(fw, kappa)
        sl = s2_l * max(fl, kappa)
        if not (math.isfinite(mw) and math.isfinite(ml)):
            if strict:
                err[0] = pos
                err[1] = 3
                err[2] = 1
                return pos
            if not math.isfinite(mw):
                counts[_MU] += 1
                mw = mu_w
            if not math.isfinite(ml):
                counts[_MU] += 1
                ml = mu_l
        sw2, f1 = _positive(sw, s2_w, counts, _S2, strict)
        sl2, f2 = _positive(sl, s2_l, counts, _S2, strict)
        if f1 or f2:
            err[0] = pos
            err[1] = 2
            err[2] = 1
            return pos
        mu[i] = mw
        mu[j] = ml
        sigma2[i] = sw2
        sigma2[j] = sl2
        ab[wk, 0] = a_new
        ab[wk, 1] = b_new
    return -1


@njit(cache=True, inline="always", error_model="numpy")
def _gamma(mode, const, s2i, c, k):
    if mode == 0:
        return math.sqrt(s2i) / c
    if mode == 1:
        return 1.0 / k
    return const


@njit(cache=True, inline="always", error_model="numpy")
def _write_back(pos, k, cand, mu, sigma2, mu_new, s2_new, s2, strict, counts, err):
    """Guards of the Weng–Lin updates, then the write; returns True on a strict failure."""
    for i in range(k):
        mnew = mu_new[i]
        if not math.isfinite(mnew):
            if strict:
                err[0] = pos
                err[1] = 3
                return True
            counts[_MU] += 1
            mnew = mu[cand[i]]
        val, fail = _positive(s2_new[i], s2[i], counts, _S2, strict)
        if fail:
            err[0] = pos
            err[1] = 2
            return True
        mu[cand[i]] = mnew
        sigma2[cand[i]] = val
    return False


@njit(cache=True, error_model="numpy")
def pl_kernel(order, lengths, seq, start, stop, mu, sigma2, beta, kappa, tau, gmode, gconst,
              strict, counts, err):
    """Weng–Lin OnlinePL (Algorithm 4), one player per team, openskill's conventions."""
    K = order.shape[0]
    cand = np.empty(K, dtype=np.int64)
    mu_g = np.empty(K)
    s2 = np.empty(K)
    e = np.empty(K)
    S = np.empty(K)
    mu_new = np.empty(K)
    s2_new = np.empty(K)
    for pos in range(start, stop):
        n = seq[pos]
        k = lengths[n]
        top = -np.inf
        csum = 0.0
        for t in range(k):
            r = order[t, n]
            cand[t] = r
            mu_g[t] = mu[r]
            s2[t] = sigma2[r] + tau * tau
            csum += s2[t] + beta * beta
            top = max(top, mu_g[t])
        c = math.sqrt(csum)
        for t in range(k):
            e[t] = math.exp((mu_g[t] - top) / c)
        for q in range(k):
            acc = 0.0
            for t in range(q, k):
                acc += e[t]
            S[q] = acc
        for i in range(k):
            omega = 0.0
            delta = 0.0
            for q in range(i + 1):
                pr = e[i] / S[q]
                delta += pr * (1.0 - pr)
                if q == i:
                    omega += 1.0 - pr
                else:
                    omega -= pr
            omega *= s2[i] / c
            delta *= s2[i] / (c * c)
            delta *= _gamma(gmode, gconst, s2[i], c, k)
            factor = 1.0 - delta
            if factor < kappa:
                counts[_KAPPA] += 1
            mu_new[i] = mu_g[i] + omega
            s2_new[i] = s2[i] * max(factor, kappa)
        if _write_back(pos, k, cand, mu, sigma2, mu_new, s2_new, s2, strict, counts, err):
            return pos
    return -1


@njit(cache=True, error_model="numpy")
def bt_kernel(order, lengths, seq, start, stop, mu, sigma2, beta, kappa, tau, gmode, gconst,
              strict, counts, err):
    """Weng–Lin OnlineBT with full pairing (Algorithm 1), openskill's BradleyTerryFull."""
    K = order.shape[0]
    cand = np.empty(K, dtype=np.int64)
    mu_g = np.empty(K)
    s2 = np.empty(K)
    mu_new = np.empty(K)
    s2_new = np.empty(K)
    for pos in range(start, stop):
        n = seq[pos]
        k = lengths[n]
        for t in range(k):
            r = order[t, n]
            cand[t] = r
            mu_g[t] = mu[r]
            s2[t] = sigma2[r] + tau * tau
        for i in range(k):
            omega = 0.0
            delta = 0.0
            for q in range(k):
                if q == i:
                    continue
                ciq = math.sqrt(s2[i] + s2[q] + 2.0 * beta * beta)
                piq = 1.0 / (1.0 + math.exp((mu_g[q] - mu_g[i]) / ciq))
                sc = 1.0 if q > i else 0.0
                omega += s2[i] / ciq * (sc - piq)
                delta += _gamma(gmode, gconst, s2[i], ciq, k) * (s2[i] / ciq) / ciq * piq * (1 - piq)
            factor = 1.0 - delta
            if factor < kappa:
                counts[_KAPPA] += 1
            mu_new[i] = mu_g[i] + omega
            s2_new[i] = s2[i] * max(factor, kappa)
        if _write_back(pos, k, cand, mu, sigma2, mu_new, s2_new, s2, strict, counts, err):
            return pos
    return -1

"""Posterior SBC's tolerance verdict: is a fit confidently outside the fidelity box?

The ranks' uniformity test (:mod:`.sbc_uniformity`) detects *any* miscalibration given
enough replicates; the fidelity box (docs/fidelity.md) is a tolerance: the median over a
group's parameters of ``|z|`` at most :data:`~crowdrank.validation.metrics.Z_OK` and the
median sd ratio in :data:`~crowdrank.validation.metrics.SD_RATIO_OK`, on the centred scores
and on ``E[η_w^1]``. This module reads the box's figures from posterior SBC's replicates
(docs/sbc.md, "The tolerance verdict", derives the mapping and what it cannot see).

Each replicate gives every parameter ``j`` a standardised error
``z_ij = (θ′_ij − m′_ij) / s′_ij`` (θ′ against the refit's mean ``m′`` and sd ``s′``) and
the refit's variance over the base fit's, whose median is ``1/(1 + R_j)``: ``R_j`` is the
information ``y′`` added. For a Gaussian posterior and a method whose error relative to the
exact posterior is the same at ``y`` and at ``(y, y′)`` (mean ``b`` exact sds off, sd ``ρ``
times the exact one: the box's ``z`` and sd ratio),

    E z = −b (1 − 1/√(1 + R)) / ρ,        sd(z)² = (ρ² + R) / ((1 + R) ρ²),

so ``ρ = √(R / ((1 + R) sd(z)² − 1))`` and ``|b| = |E z| ρ / (1 − 1/√(1 + R))``; as
``R → ∞`` these are ``1/sd(z)`` and ``|E z|/sd(z)``. The planted over-confident fit
(variances halved at every data size) is that model with ``ρ = 1/√2``.

Per parameter: a two-sided interval for ``E z`` (Student t) and for ``sd z`` (log scale,
with the replicates' kurtosis [Bonett06], so heavy-tailed ``z`` does not narrow it), each at
level ``1 − β``. They bound ``|b_j|`` below by ``dist(0, E z interval)`` at the smallest ``ρ`` and
``ρ_j`` by the map of the sd interval's ends. A group is **outside the box** when the median over its
``P`` parameters of those bounds is outside the tolerance: the median of the lower bounds of
``|b_j|`` above 0.1, or the median of the upper bounds of ``ρ_j`` below 0.9, or the median
of the lower bounds above 1.1 (both maps are monotone in ``E z`` and ``sd z``; ``R_j`` is
read as known: its estimate from 200 variance ratios is far tighter than ``sd z``'s). The multiplicity correction matches the median: if the
group's median exceeds the median of the bounds, some parameter among the
``⌊P/2⌋ + 1`` with the largest true values is outside its interval (a partial-conjunction
argument, [BenjaminiHeller08]), so ``β = α / (3 (⌊P/2⌋ + 1) G)`` over ``G`` groups and the
three claims (bias needs both intervals; the two sd claims share one) keeps the
family-wise error at most ``α`` under any dependence between parameters.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from crowdrank.validation.metrics import SD_RATIO_OK, Z_OK


def box_columns(names: list[str], families: list[str], groups=("lambda_centred", "eta")
                ) -> dict[str, list[int]]:
    """The columns the box reads, per group: every centred score, and of the worker
    parameters ``η_w`` itself (one per worker) or its first entry ``η_w^1`` (a simplex:
    names ``eta[w,1]``), as the box compares ``E[η_w^1]``."""
    out: dict[str, list[int]] = {}
    for j, (n, f) in enumerate(zip(names, families)):
        if f not in groups:
            continue
        if f == "eta" and "," in n and not n.endswith(",1]"):
            continue
        out.setdefault(f, []).append(j)
    return out


def parameter_intervals(z: np.ndarray, beta: float) -> dict[str, np.ndarray]:
    """Per column of ``z`` ``(N, P)``: the mean, sd, and two-sided ``1 − β`` intervals of
    ``E z`` (t) and of ``sd z`` (log scale, kurtosis-adjusted); non-finite values are
    left out and counted (``n``)."""
    z = np.asarray(z, float)
    P = z.shape[1]
    res = {k: np.full(P, np.nan) for k in ("n", "mean", "sd", "mean_lo", "mean_hi",
                                           "sd_lo", "sd_hi", "kurtosis")}
    for j in range(P):
        x = z[:, j][np.isfinite(z[:, j])]
        n = x.size
        res["n"][j] = n
        if n < 4:
            continue
        m, s = x.mean(), x.std(ddof=1)
        res["mean"][j], res["sd"][j] = m, s
        t = stats.t.ppf(1.0 - beta / 2.0, n - 1)
        res["mean_lo"][j], res["mean_hi"][j] = m - t * s / math.sqrt(n), m + t * s / math.sqrt(n)
        if s <= 0:
            continue
        kurt = float(np.mean((x - m) ** 4) / np.mean((x - m) ** 2) ** 2)
        res["kurtosis"][j] = kurt
        # Var(log s²) ≈ (κ − (n − 3)/n)/(n − 1): 2/(n − 1) for normal z (κ = 3)
        se = math.sqrt(max(kurt - (n - 3.0) / n, 2.0 / n) / (n - 1.0))
        q = stats.norm.ppf(1.0 - beta / 2.0)
        res["sd_lo"][j] = s * math.exp(-q * se / 2.0)
        res["sd_hi"][j] = s * math.exp(q * se / 2.0)
    return res


def _dist0(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Distance of 0 from ``[lo, hi]``: the smallest ``|E z|`` the interval allows."""
    return np.where(lo > 0, lo, np.where(hi < 0, -hi, 0.0))


def _median(x: np.ndarray) -> float:
    x = np.asarray(x, float)
    return float(np.median(x)) if x.size and not np.any(np.isnan(x)) else float("nan")


def information_added(var_ratio: np.ndarray) -> np.ndarray:
    """``R_eff`` per column of ``var_ratio`` ``(N, P)`` (the refit's variance over the base
    fit's, per replicate): ``1 / median − 1``, the information ``y′`` added relative to what
    the fit to ``y`` held (prior included). 0 where the refit is not narrower."""
    v = np.asarray(var_ratio, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        med = np.array([np.median(c[np.isfinite(c)]) if np.isfinite(c).any() else np.nan
                        for c in v.T])
        r = 1.0 / med - 1.0
    return np.where(np.isfinite(r) & (r > 0), r, 0.0)


def sd_ratio_of(sd_z: np.ndarray, R: np.ndarray) -> np.ndarray:
    """The fit's sd ratio ``ρ`` whose ``z`` has sd ``sd_z`` when ``y′`` adds ``R`` times the
    information and the method's relative error is the same at ``y`` and at ``(y, y′)``:
    ``sd_z² = (ρ² + R) / ((1 + R) ρ²)``, so ``ρ = √(R / ((1 + R) sd_z² − 1))`` (decreasing
    in ``sd_z``; ``1/sd_z`` as ``R → ∞``). ``+∞`` where ``sd_z² ≤ 1/(1 + R)`` (no finite ρ
    is that wide) and NaN where ``R = 0`` (the ranks cannot see ρ)."""
    sd_z, R = np.broadcast_arrays(np.asarray(sd_z, float), np.asarray(R, float))
    with np.errstate(divide="ignore", invalid="ignore"):
        den = (1.0 + R) * sd_z**2 - 1.0
        rho = np.sqrt(R / den)
    rho = np.where(den <= 0, np.inf, rho)
    return np.where(R > 0, rho, np.nan)


def bias_of(mean_z: np.ndarray, rho: np.ndarray, R: np.ndarray) -> np.ndarray:
    """The fit's bias ``b`` in exact-posterior sds (the box's ``z``) from ``E z``: under the
    same model ``E z = −b (1 − 1/√(1 + R)) / ρ``, so ``|b| = |E z| ρ / (1 − 1/√(1 + R))``."""
    R = np.asarray(R, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.abs(mean_z) * rho / (1.0 - 1.0 / np.sqrt(1.0 + R))


def group_tolerance(z: np.ndarray, var_ratio: np.ndarray, beta: float) -> dict:
    """One group's box figures from its ``z`` and ``var_ratio`` ``(N, P)``: point estimates
    (the medians over its parameters of the fit's ``|b|`` and ``ρ``, as the box takes
    medians), their bounds at the group's level, and whether the group is confidently outside
    the box. A parameter ``y′`` does not inform (``R_eff = 0``) bounds nothing: ``[0, ∞]``."""
    r = parameter_intervals(z, beta)
    R = information_added(var_ratio)
    blind = R <= 0
    rho = sd_ratio_of(r["sd"], R)
    rho_lo, rho_hi = sd_ratio_of(r["sd_hi"], R), sd_ratio_of(r["sd_lo"], R)
    bias = bias_of(r["mean"], rho, R)
    bias_lo = bias_of(_dist0(r["mean_lo"], r["mean_hi"]), rho_lo, R)
    bias_hi = bias_of(np.maximum(np.abs(r["mean_lo"]), np.abs(r["mean_hi"])), rho_hi, R)
    rho_lo, bias_lo = np.where(blind, 0.0, rho_lo), np.where(blind, 0.0, bias_lo)
    rho_hi, bias_hi = np.where(blind, np.inf, rho_hi), np.where(blind, np.inf, bias_hi)
    est = {"abs_z": _median(bias), "abs_z_lo": _median(bias_lo), "abs_z_hi": _median(bias_hi),
           "sd_ratio": _median(rho), "sd_ratio_lo": _median(rho_lo),
           "sd_ratio_hi": _median(rho_hi), "R_eff_median": _median(R),
           "sd_z_median": _median(r["sd"]), "mean_z_median_abs": _median(np.abs(r["mean"]))}
    reasons = []
    undefined = np.isnan([est["abs_z_lo"], est["sd_ratio_lo"], est["sd_ratio_hi"]]).any()
    if undefined:
        reasons.append("some parameter's z is not defined in enough replicates")
    if est["abs_z_lo"] > Z_OK:
        reasons.append(f"median |z| ≥ {est['abs_z_lo']:.2f} > {Z_OK}")
    if est["sd_ratio_hi"] < SD_RATIO_OK[0]:
        reasons.append(f"median sd ratio ≤ {est['sd_ratio_hi']:.2f} < {SD_RATIO_OK[0]} "
                       "(too narrow)")
    if est["sd_ratio_lo"] > SD_RATIO_OK[1]:
        reasons.append(f"median sd ratio ≥ {est['sd_ratio_lo']:.2f} > {SD_RATIO_OK[1]} "
                       "(too wide)")
    return {**est, "n_params": int(z.shape[1]), "blind_params": int(blind.sum()),
            "replicates": int(np.nanmin(r["n"])) if z.shape[1] else 0, "beta": beta,
            "outside": bool(reasons), "reasons": reasons}


def tolerance_summary(z: np.ndarray, var_ratio: np.ndarray, names: list[str],
                      families: list[str], alpha: float = 0.05) -> dict:
    """The tolerance verdict of every group of :func:`box_columns` (module docstring):
    ``{"groups": {group: group_tolerance}, "within_tolerance": all groups inside or
    undecided, "rule": ...}``."""
    z, var_ratio = np.asarray(z, float), np.asarray(var_ratio, float)
    if (z.ndim != 2 or z.shape != var_ratio.shape or z.shape[1] != len(names)
            or len(names) != len(families)):
        raise ValueError(f"z {z.shape} and var_ratio {var_ratio.shape} do not match "
                         f"{len(names)} names / {len(families)} families")
    cols = box_columns(names, families)
    G = max(len(cols), 1)
    groups = {}
    for g, idx in cols.items():
        beta = alpha / (3.0 * (len(idx) // 2 + 1) * G)
        groups[g] = group_tolerance(z[:, idx], var_ratio[:, idx], beta)
    return {"groups": groups, "within_tolerance": not any(v["outside"] for v in
                                                          groups.values()),
            "alpha": alpha, "box": {"abs_z": Z_OK, "sd_ratio": list(SD_RATIO_OK)},
            "rule": ("outside the box when the median over the group's parameters of the "
                     "per-parameter bounds excludes the tolerance (|z| ≤ "
                     f"{Z_OK}, sd ratio in [{SD_RATIO_OK[0]}, {SD_RATIO_OK[1]}]); each bound "
                     "at 1 − α/(3(⌊P/2⌋ + 1)G)")}

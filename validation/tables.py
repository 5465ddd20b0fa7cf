"""Draws and parameter tables by real ids: the helpers the comparison
(:mod:`crowdrank.validation.compare`) and the interval checks
(:mod:`crowdrank.validation.intervals`) share. A NUTS ``DataTree``'s draws flattened per
variable, ArviZ's diagnostics in the same order, values re-indexed by id (never by
position), and a parameter table's aggregates.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from crowdrank.validation import metrics as M


def _finite_or_none(x) -> float | None:
    """JSON-safe float: a non-finite value becomes ``None`` (reported, never NaN)."""
    x = float(x)
    return x if math.isfinite(x) else None


def _flat_draws(idata, var: str) -> tuple[np.ndarray, list[str]]:
    """Posterior draws of ``var`` as ``(chain*draw, P)`` and the non-sample dims, in order."""
    da = idata["posterior"][var]
    other = [d for d in da.dims if d not in ("chain", "draw")]
    da = da.transpose("chain", "draw", *other)
    x = np.asarray(da.values, float)
    return x.reshape(x.shape[0] * x.shape[1], -1), other


class DrawsMemo:
    """A few values computed from arrays of draws, keyed on the array's bytes, shape and
    dtype (and any further key parts): the same draws byte for byte give the stored value,
    which is the one computed. An audit compares several approximations with one reference,
    and recomputing ArviZ's diagnostics of its draws was most of each comparison's time.
    The oldest entry is dropped first beyond ``keep``."""

    def __init__(self, keep: int = 16):
        self.keep = keep
        self._store: dict = {}

    def get(self, draws: np.ndarray, compute, *parts):
        import hashlib

        a = np.ascontiguousarray(draws)
        key = (*parts, a.shape, str(a.dtype),
               hashlib.blake2b(a.tobytes(), digest_size=20).hexdigest())
        hit = self._store.get(key)
        if hit is None:
            hit = self._store[key] = compute()
            while len(self._store) > self.keep:
                self._store.pop(next(iter(self._store)))
        return hit


_DIAG = DrawsMemo()


def _diag(idata, var: str) -> dict[str, np.ndarray]:
    """Per-parameter MCSE of the mean, rank R-hat, bulk and tail ESS (ArviZ 1.x), flattened
    in the order of :func:`_flat_draws` (memoised on the draws: :class:`DrawsMemo`)."""
    import arviz_stats as azs

    da = idata["posterior"][var]
    other = [d for d in da.dims if d not in ("chain", "draw")]

    def compute():
        def flat(res):
            return np.asarray(res[var].transpose(*other).values, float).reshape(-1)

        return {"mcse": flat(azs.mcse(idata, var_names=[var], method="mean")),
                "rhat": flat(azs.rhat(idata, var_names=[var])),
                "ess_bulk": flat(azs.ess(idata, var_names=[var], method="bulk")),
                "ess_tail": flat(azs.ess(idata, var_names=[var], method="tail"))}

    hit = _DIAG.get(da.transpose("chain", "draw", *other).values, compute, var,
                    tuple(da.dims))
    return {k: v.copy() for k, v in hit.items()}


def _coord(idata, name: str) -> list[str]:
    return [str(v) for v in idata["posterior"][name].values]


def _reindex(ids_from, ids_to, what: str) -> np.ndarray:
    """Index array taking rows in ``ids_from`` order to ``ids_to`` order, by id."""
    pos = {str(k): i for i, k in enumerate(ids_from)}
    missing = [k for k in ids_to if str(k) not in pos]
    if missing:
        raise ValueError(f"the online posterior has no {what} {missing[:5]} that the NUTS "
                         "posterior has: were they fitted on the same data?")
    return np.array([pos[str(k)] for k in ids_to], dtype=int)


def align(values, ids_from, ids_to, what: str = "item(s)") -> np.ndarray:
    """``values`` given in ``ids_from`` order, returned in ``ids_to`` order (by id)."""
    return np.asarray(values)[_reindex(ids_from, ids_to, what)]


def aggregates(table: pd.DataFrame) -> dict[str, dict]:
    """:func:`crowdrank.validation.metrics.aggregate` over all parameters and per kind."""
    out = {}
    for name, sub in [("all", table)] + [(k, table[table.kind == k])
                                          for k in ("lambda", "eta")]:
        if len(sub):
            out[name] = M.aggregate(sub.z, sub.sd_ratio, sub.coverage_50, sub.coverage_90)
            out[name]["median_noise_floor"] = float(np.median(sub.noise_floor))
            out[name]["median_kl"] = float(np.median(sub.kl))
            out[name]["median_w1"] = float(np.median(sub.w1))
    return out

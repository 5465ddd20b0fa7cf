"""Convergence gate: is a sampler's run trusted as the reference? (docs/design.md, Validation)

A run is trusted only if, over every scalar parameter of the posterior, the rank-normalised
split R-hat is below 1.01, bulk and tail ESS are at least 400, and — for Hamiltonian
samplers (NUTS) — there is no divergent transition and the E-BFMI of every chain is at
least 0.3 [Vehtari21], [Betancourt16]. A sampler without trajectories (the collapsed
Gibbs sampler) has no divergence or energy: its gate is the R-hat and ESS part alone
(``check(..., hmc=False)``; ``Gate.kind`` says which). All diagnostics are computed with ArviZ (``arviz_stats``); the gate only compares
them with the thresholds and says, in words, which failed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

RHAT_MAX = 1.01
ESS_MIN = 400.0
EBFMI_MIN = 0.3


@dataclass(frozen=True)
class Gate:
    """The verdict and the figures behind it.

    ``trusted`` is True only when ``reasons`` is empty. Figures that could not be computed
    (e.g. R-hat from one chain) are NaN and are themselves a reason.
    """

    trusted: bool
    reasons: list[str] = field(default_factory=list)
    rhat_max: float = math.nan
    ess_bulk_min: float = math.nan
    ess_tail_min: float = math.nan
    divergences: int = 0
    ebfmi_min: float = math.nan
    #: ``"hmc"`` (divergences and E-BFMI are part of the verdict) or ``"gibbs"`` (R-hat
    #: and ESS only)
    kind: str = "hmc"

    def verdict(self) -> str:
        """One line for the CLI and reports."""
        figs = (f"R-hat max {self.rhat_max:.4f}, ESS bulk min {self.ess_bulk_min:.0f}, "
                f"ESS tail min {self.ess_tail_min:.0f}")
        if self.kind == "hmc":
            figs += f", divergences {self.divergences}, E-BFMI min {self.ebfmi_min:.2f}"
        if self.trusted:
            return f"reference TRUSTED ({figs})"
        return f"reference NOT trusted: {'; '.join(self.reasons)} ({figs})"

    def to_dict(self) -> dict:
        return {"trusted": self.trusted, "reasons": list(self.reasons),
                "rhat_max": self.rhat_max, "ess_bulk_min": self.ess_bulk_min,
                "ess_tail_min": self.ess_tail_min, "divergences": self.divergences,
                "ebfmi_min": self.ebfmi_min, "kind": self.kind}

    @classmethod
    def from_dict(cls, d: dict) -> Gate:
        """The inverse of :meth:`to_dict` (a missing figure is NaN)."""
        def num(k):
            v = d.get(k)
            return math.nan if v is None else float(v)
        return cls(trusted=bool(d.get("trusted", False)),
                   reasons=[str(r) for r in d.get("reasons") or []],
                   rhat_max=num("rhat_max"), ess_bulk_min=num("ess_bulk_min"),
                   ess_tail_min=num("ess_tail_min"), divergences=int(d.get("divergences") or 0),
                   ebfmi_min=num("ebfmi_min"), kind=str(d.get("kind") or "hmc"))

    def to_attrs(self) -> dict:
        """The tree attributes ``gate_*`` (NetCDF keeps no lists: reasons joined by "; ")."""
        out = {f"gate_{k}": ("; ".join(v) if isinstance(v, list) else v)
               for k, v in self.to_dict().items()}
        out["gate_trusted"] = int(self.trusted)
        return out

    @classmethod
    def from_attrs(cls, attrs) -> Gate:
        """The gate :meth:`to_attrs` (or ``write_nuts``) stored in a tree's attributes."""
        d = {k[5:]: v for k, v in dict(attrs).items() if str(k).startswith("gate_")}
        reasons = d.get("reasons") or ""
        d["reasons"] = [r for r in str(reasons).split("; ") if r]
        return cls.from_dict(d)


def _worst(values: list[np.ndarray], worst) -> tuple[float, bool]:
    """The worst value and whether any value is NaN (not computable)."""
    arr = np.concatenate([np.asarray(v, float).ravel() for v in values]) if values else np.array([])
    if arr.size == 0:
        return math.nan, True
    has_nan = bool(np.any(~np.isfinite(arr)))
    finite = arr[np.isfinite(arr)]
    return (float(worst(finite)) if finite.size else math.nan), has_nan


def check(idata, *, rhat_max: float = RHAT_MAX, ess_min: float = ESS_MIN,
          ebfmi_min: float = EBFMI_MIN, hmc: bool = True) -> Gate:
    """Apply the gate to a DataTree with ``posterior`` and ``sample_stats`` groups.

    Parameters
    ----------
    idata : xarray.DataTree
        A NUTS result (``posterior`` with ``chain, draw`` dims; ``sample_stats`` with
        ``diverging`` and ``energy``).
    rhat_max, ess_min, ebfmi_min : float
        Thresholds (defaults: the suite's, docs/design.md, Validation).
    hmc : bool
        A Hamiltonian sampler's run: divergences and E-BFMI are checked too (False: the
        R-hat and ESS part alone; ``sample_stats`` may be absent).
    """
    import arviz_stats as azs

    post = idata["posterior"].to_dataset()
    n_chains = int(post.sizes.get("chain", 1))
    n_draws = int(post.sizes.get("draw", 0))
    reasons: list[str] = []

    def per_var(method_fn):
        return [np.asarray(method_fn(post[v])) for v in post.data_vars]

    rhats = per_var(lambda da: azs.rhat(da, method="rank"))
    bulk = per_var(lambda da: azs.ess(da, method="bulk"))
    tail = per_var(lambda da: azs.ess(da, method="tail"))
    r_max, r_nan = _worst(rhats, np.max)
    b_min, b_nan = _worst(bulk, np.min)
    t_min, t_nan = _worst(tail, np.min)

    if n_chains < 2:
        reasons.append(f"only {n_chains} chain: split R-hat across chains needs several")
    if r_nan:
        reasons.append("R-hat not computable for some parameters")
    if not (r_max < rhat_max):
        reasons.append(f"R-hat {r_max:.4f} >= {rhat_max}")
    if b_nan or t_nan:
        reasons.append("ESS not computable for some parameters")
    if not (b_min >= ess_min):
        reasons.append(f"bulk ESS {b_min:.0f} < {ess_min:.0f}")
    if not (t_min >= ess_min):
        reasons.append(f"tail ESS {t_min:.0f} < {ess_min:.0f}")

    if not hmc:
        return Gate(trusted=not reasons, reasons=reasons, rhat_max=r_max, ess_bulk_min=b_min,
                    ess_tail_min=t_min, kind="gibbs")
    stats = idata["sample_stats"].to_dataset()
    div = int(np.asarray(stats["diverging"]).sum()) if "diverging" in stats else 0
    if "diverging" not in stats:
        reasons.append("no divergence information in sample_stats")
    elif div > 0:
        reasons.append(f"{div} divergent transition(s) out of {n_chains * n_draws}")

    ebfmi = math.nan
    if "energy" in stats and n_draws > 2:
        ebfmi = float(np.nanmin(np.asarray(azs.bfmi(stats["energy"]))))
    if not (ebfmi >= ebfmi_min):
        reasons.append(f"E-BFMI {ebfmi:.2f} < {ebfmi_min}" if math.isfinite(ebfmi)
                       else "E-BFMI not computable")
    return Gate(trusted=not reasons, reasons=reasons, rhat_max=r_max, ess_bulk_min=b_min,
                ess_tail_min=t_min, divergences=div, ebfmi_min=ebfmi)

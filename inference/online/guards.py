"""The guards of docs/design.md (Online, Guards): never a silent NaN.

A new ``α`` or ``σ²`` that is non-finite or non-positive (and a non-finite ``μ``) is an
:class:`~crowdrank.inference.online.state.OnlineError` in strict mode. Otherwise it is replaced and
counted: a non-finite value keeps the value from before the update (the moment match broke
down, so the update carries no usable information), a value below :data:`FLOOR` (zero,
negative, or an underflow) becomes :data:`FLOOR`. The numba kernels apply the very same rule.
"""

from __future__ import annotations

import math

from .state import OnlineError

#: Smallest value kept for a positive parameter (α, σ²); below it is a counted clamp.
FLOOR = 1e-300

#: Integer codes used by the kernels for the quantity that failed a guard.
CODES = {"alpha": 1, "sigma2": 2, "mu": 3}


def guard_positive(new: float, old: float, key: str, counts: dict, strict: bool,
                   where: str = "") -> float:
    """Return ``new`` if finite and ``>= FLOOR``; else count (or raise) and replace it."""
    if math.isfinite(new) and new >= FLOOR:
        return new
    if strict and (not math.isfinite(new) or new <= 0.0):
        raise OnlineError(f"{where}: {key} became {new!r} (strict mode)")
    counts[key] += 1
    return old if not math.isfinite(new) else FLOOR


def guard_finite(new: float, old: float, key: str, counts: dict, strict: bool,
                 where: str = "") -> float:
    """Return ``new`` if finite; else count (or raise) and keep ``old``."""
    if math.isfinite(new):
        return new
    if strict:
        raise OnlineError(f"{where}: {key} became {new!r} (strict mode)")
    counts[key] += 1
    return old

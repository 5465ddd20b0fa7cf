"""SQUAREM [Varadhan08]: a monotone extrapolation of an EM map, shared by the EM fits.

One cycle from ``x0``: two EM steps ``x1, x2``, ``r = x1 − x0``, ``v = x2 − 2x1 + x0``,
step length ``α = min(−1, −‖r‖/‖v‖)``, the extrapolation ``x0 − 2αr + α²v`` (projected
back into the parameter space) and one EM step from it to stabilise it. The result is kept
only if the objective is at least that of ``x2``, else ``x2`` is returned: EM's monotone
ascent is never lost, and the fixed points are EM's.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def squarem_cycle(em_map: Callable[[np.ndarray], np.ndarray],
                  objective: Callable[[np.ndarray], float], x0: np.ndarray, *,
                  project: Callable[[np.ndarray], np.ndarray] = lambda x: x,
                  admissible: Callable[[np.ndarray], bool] = lambda x: True
                  ) -> tuple[np.ndarray, int]:
    """One SQUAREM cycle of ``em_map`` (flat parameter vector → flat vector) from ``x0``.

    ``project`` maps the extrapolation back into the domain (e.g. accuracies into
    ``(0, 1)``); ``admissible`` rejects a projected point where the EM map is not defined
    (then ``x2`` is kept). Returns ``(x, EM steps used)``."""
    x1 = em_map(x0)
    x2 = em_map(x1)
    r, v = x1 - x0, x2 - 2 * x1 + x0
    nv = float(np.linalg.norm(v))
    f2 = objective(x2)
    if nv == 0 or not np.isfinite(f2):
        return x2, 2
    alpha = min(-1.0, -float(np.linalg.norm(r)) / nv)
    x = x0 - 2 * alpha * r + alpha**2 * v
    with np.errstate(all="ignore"):
        if not np.all(np.isfinite(x)):
            return x2, 2
        x = project(x)
        if not admissible(x):
            return x2, 2
        try:
            x3 = em_map(x)
        except (ValueError, np.linalg.LinAlgError):
            return x2, 2
        f3 = objective(x3)
    if np.isfinite(f3) and f3 >= f2:
        return x3, 3
    return x2, 3

"""Two pieces of the exact worker integrals shared by :mod:`.ep_exact` (a site's worker
part) and :mod:`.ep_joint` (a worker's factor from all its rankings): the stage
combinations of a ranking of ``k`` items, and the Dirichlet whose moments are given
([Pan18], Eq. 10). A module of their own so that neither of the two imports the other."""

from __future__ import annotations

from itertools import product

import numpy as np


def combos(k: int) -> list[tuple]:
    """The ``k!`` combinations ``(t_0, …, t_{k−2})``, ``t_s < k − s``."""
    return list(product(*[range(k - s) for s in range(k - 1)]))


def alpha_from_moments(E1, E2) -> np.ndarray:
    """[Pan18], Eq. 10: ``α_t = (E1_t − E2_t) E1_t / (E2_t − E1_t²)``."""
    E1, E2 = np.asarray(E1), np.asarray(E2)
    return (E1 - E2) * E1 / (E2 - E1 * E1)

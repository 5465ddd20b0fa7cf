"""PyTensor pieces shared by the PyMC builders and the worker-prior families' PyMC sites
(importing nothing else of crowdrank, so the families can use them without a circle)."""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt


def safe_log(x):
    """``log x`` with the NumPyro twin's guard: an η entry that underflows to 0 stays
    finite in log."""
    return pt.log(pt.maximum(x, np.finfo(np.float64).tiny))

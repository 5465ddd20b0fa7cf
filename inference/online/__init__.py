"""Hand-written online moment matching (DESIGN.md §3).

``fit_online`` runs Weng–Lin OnlinePL / OnlineBT, CrowdBT online (Chen et al. 2013) or
OnlineGBMM for COUPLE (seed 000, Algorithm 1) and returns an :class:`OnlinePosterior`.
The readable stage updates (:mod:`.gbmm`, :mod:`.crowdbt`, :mod:`.wenglin`) are the
specification; :mod:`.kernels` are their numba transcriptions.
"""

from .api import fit_online, fit_online_stream
from .state import OnlineError, OnlinePosterior

__all__ = ["OnlineError", "OnlinePosterior", "fit_online", "fit_online_stream"]

"""Hand-written online moment matching (docs/design.md, Online).

``fit_online`` runs Weng–Lin OnlinePL / OnlineBT, CrowdBT online [Chen13] or
OnlineGBMM for COUPLE ([Pan18], Algorithm 1) and returns an :class:`OnlinePosterior`.
The readable stage updates (:mod:`.gbmm`, :mod:`.crowdbt`, :mod:`.wenglin`) are the
specification; :mod:`.kernels` are their numba transcriptions.
"""

from .api import fit_online, fit_online_stream
from .state import OnlineError, OnlinePosterior

__all__ = ["OnlineError", "OnlinePosterior", "fit_online", "fit_online_stream"]

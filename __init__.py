"""crowdrank: COUPLE, CrowdBT, Plackett-Luce and Bradley-Terry by NUTS (PyMC, NumPyro) beside
fast approximations, with a validation layer that audits each approximation against NUTS.

The repository root is this package (``pyproject.toml`` maps ``crowdrank`` to it), so the
folders ``models/``, ``inference/``, ``validation/`` and ``reports/`` are its subpackages
``crowdrank.models`` ... ``crowdrank.reports``; an install puts nothing else at top level.
Layers import downwards only: models <- inference <- validation <- reports.
"""

__version__ = "0.1.0"

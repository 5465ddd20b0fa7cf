"""Batch (non-online) point estimates and their intervals, one module per family:
:mod:`.luce` (BT/PL objective, gradient, Hessian), :mod:`.solvers` (gradient ascent,
Newton, MM), :mod:`.laplace`, :mod:`.bootstrap` (its refits stacked by :mod:`.stacked`), :mod:`.crowdbt_em` (CrowdBT's MAP by EM),
:mod:`.contextual` (contextual BT's MAP), :mod:`.crowdc` (CrowDC's design and simulation);
:mod:`.api` is the entry point of the BT/PL fits."""

from .api import METHODS, BatchFit, fit_batch, problem_for  # noqa: F401
from .solvers import SOLVERS  # noqa: F401

"""Intervals of point methods (Laplace, bootstrap) in the audit's comparison tables.

:func:`crowdrank.validation.compare.compare` reads any approximation as Gaussian marginals
``N(mu, sigma2)``, which is exactly Laplace's approximation. The bootstrap is not
Gaussian: its intervals are percentiles of the refitted scores ([Efron79]; Chatbot Arena
[Chiang24] reports them). :func:`percentile_coverage` replaces the Gaussian coverages of
a bootstrap comparison by the share of NUTS draws inside the bootstrap's own percentile
intervals, and recomputes the aggregates, so that ``coverage_50``/``coverage_90`` mean for
the bootstrap what they mean for every other method: how much posterior mass the
method's 50 % / 90 % interval holds. ``z`` and the sd ratio use the mean and sd of the
refits.
"""

from __future__ import annotations

import numpy as np

from crowdrank.validation import metrics as M
from crowdrank.validation.tables import _flat_draws, aggregates, align


def percentile_coverage(comparison, draws, items, idata) -> None:
    """Overwrite the λ coverages of ``comparison`` (in place) with those of the percentile
    intervals of ``draws`` ``(B, L)`` (columns in ``items`` order), and its aggregates."""
    table = comparison.parameters
    lam = table.kind == "lambda"
    ids = table.loc[lam, "id"].astype(str).tolist()
    x, _ = _flat_draws(idata, "lambda")
    nuts_items = [str(v) for v in idata["posterior"]["item"].values]
    x = x[:, [nuts_items.index(i) for i in ids]]
    b = align(np.asarray(draws, float).T, [str(i) for i in items], ids).T   # (B, P)
    for prob in M.COVERAGE_PROBS:
        lo, hi = np.percentile(b, [50 * (1 - prob), 50 * (1 + prob)], axis=0)
        table.loc[lam, f"coverage_{round(prob * 100)}"] = M.coverage(x, lo, hi)
    comparison.aggregates = aggregates(table)

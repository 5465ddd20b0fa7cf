"""Validation: how closely each approximation tracks the NUTS reference, by job.

Metrics and comparison (this package's modules), the pipelines that run fits end to end
(:mod:`crowdrank.validation.pipelines`: audit, SBC, pair audit, posteriordb export), the
research studies built on them (:mod:`crowdrank.validation.studies`: replication, CrowDC,
peers) and the run-time they share (:mod:`crowdrank.validation.runtime`: grid, cache,
process pool, Dask).

- :mod:`crowdrank.validation.metrics`: per-parameter formulas (z, noise floor, sd ratio, closed-form
  KL, W1, coverage) and their aggregates (docs/design.md, Validation).
- :mod:`crowdrank.validation.compare`: one online posterior against one NUTS ``DataTree``
  (parameter, ranking and worker level; convergence-gate marking; order sensitivity).
- :mod:`crowdrank.validation.predictive_stats`: statistics of rankings against a reference order
  (first choice by stage, per-worker accuracy and pair agreement, Kendall τ) for
  predictive checks.
- :mod:`crowdrank.validation.prior_predictive`: data sets drawn from the prior predictive of a model
  under a named worker prior, summarised by those statistics.
"""

if __name__ == "validation":      # imported by its bare name, with the repository root on sys.path
    raise ImportError(
        "import crowdrank.validation, not validation: the repository root is the package crowdrank "
        "(pyproject.toml: package-dir), so a bare 'validation' would load a second copy of every "
        "module (a second registry). Install the checkout (pip install -e .) and import "
        "crowdrank.validation.")

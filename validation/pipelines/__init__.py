"""The validation pipelines: each runs fits and compares them end to end.

- :mod:`crowdrank.validation.pipelines.audit`: NUTS against the approximations on one data
  set (``crowdrank audit``), with its variants, budget and external posteriors;
- :mod:`crowdrank.validation.pipelines.sbc`: simulation-based calibration (``crowdrank sbc``);
- :mod:`crowdrank.validation.pipelines.pair_audit`: the pair-table models (``crowdrank audit-pairs``);
- :mod:`crowdrank.validation.pipelines.posteriordb`: a trusted reference exported for others.
"""

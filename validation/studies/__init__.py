"""Research studies built on the pipelines: the COUPLE paper's experiments replicated
(:mod:`~crowdrank.validation.studies.replicate`), CrowDC's simulation study
(:mod:`~crowdrank.validation.studies.replicate_crowdc`) and the peers' table
(:mod:`~crowdrank.validation.studies.peers`)."""

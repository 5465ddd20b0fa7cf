"""``crowdrank audit``'s pipeline with its HTML page.

The pipeline itself (configuration, fits, comparisons, ``metrics.json``) is
:mod:`crowdrank.validation.pipelines.audit`, shared with the experiment grid and the tests; this module only
adds the report (:func:`crowdrank.reports.audit_html.write_audit_report`) and re-exports the pipeline's
names for the command and for callers that import them from here.
"""

from __future__ import annotations

from pathlib import Path

from crowdrank.validation.pipelines.audit import (  # noqa: F401  (re-exported)
    DEFAULT_SIMULATION,
    MODELS,
    VARIANT_CHOICES,
    AuditConfig,
    Log,
    ModelAudit,
    Subject,
    audit_model,
    build_metrics,
    default_subject,
    jsonable,
    make_priors,
    parse_variants,
    variant_label,
    variant_list,
)
from crowdrank.validation.pipelines.audit import run_audit as _run


def run_audit(subject: Subject, out: str | Path, cfg: AuditConfig | None = None, *,
              log=None, report: bool = True, scheduler=None,
              processes: int | None = None) -> dict:
    """Run the audit (:func:`crowdrank.validation.pipelines.audit.run_audit`; its fits on a Dask cluster with
    ``scheduler``) and write ``report.html``.

    Parameters
    ----------
    subject : Subject
        The data audited, with its truth where known.
    out : str or Path
        The output folder.
    cfg : AuditConfig, optional
        The audit's choices (default: the defaults).
    log : callable, optional
        Progress lines.
    report : bool
        Write ``report.html``.
    scheduler : str or Client, optional
        Run the fits on Dask.
    processes : int, optional
        Workers of a ``"local"`` cluster.
    """
    from crowdrank.reports.audit_html import write_audit_report

    return _run(subject, out, cfg, log=log, render=write_audit_report if report else None,
                scheduler=scheduler, processes=processes)

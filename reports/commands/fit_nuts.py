"""What ``crowdrank fit --method nuts`` prints beside the gate's verdict
(:func:`crowdrank.reports.commands.fit.run_nuts`): for models with a worker simplex, the
audit's informational tail-visits line (:func:`crowdrank.validation.reference.tail_visits_of`),
and with ``--profile`` the potential's and gradient's own timing (:func:`profile_line`).
``--init-from`` is read by the method registry's NUTS entry
(:func:`crowdrank.inference.method_fits.warm_start`).
"""

from __future__ import annotations


def tail_visits_line(idata, model: str, priors) -> str | None:
    """The audit's informational tail-visits line for a fit with a worker simplex (COUPLE's
    Dirichlet, CrowdBT's Beta) whose prior has entries with α < 0.5; ``None`` otherwise.
    Printed beside the gate's verdict, never part of it (docs/design.md §5.1)."""
    from crowdrank.validation.reference import tail_visits_of, tail_visits_sentence

    tv = tail_visits_of(idata, model, priors)
    return None if tv is None else tail_visits_sentence(tv, model)


def profile_line(timings: dict) -> str | None:
    """The gradient's cost of a ``--profile`` run (``NutsConfig.profile``): compile seconds and
    milliseconds per potential+gradient call at the first start; ``None`` without it."""
    if "gradient_ms" not in timings:
        return None
    return (f"profile: potential+gradient compiled in {timings['gradient_compile']:.2f} s, "
            f"{timings['gradient_ms']:.3f} ms per call")

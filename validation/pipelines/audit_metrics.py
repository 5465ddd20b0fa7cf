"""The content of an audit's ``metrics.json`` (:func:`build_metrics`) and the JSON
conversion every audit output goes through (:func:`jsonable`)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from crowdrank.models.priors import Priors
from crowdrank.validation.pipelines.audit_config import AuditConfig, Subject


def jsonable(x):
    """Plain JSON types; non-finite floats become ``None`` (JSON has no NaN).

    Parameters
    ----------
    x : object
        NumPy scalars and arrays, dicts, lists, tuples and plain values.
    """
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return jsonable(x.tolist())
    if isinstance(x, (np.bool_, bool)):
        return bool(x)
    if isinstance(x, (np.integer, int)):
        return int(x)
    if isinstance(x, (np.floating, float)):
        return float(x) if math.isfinite(float(x)) else None
    if x is None or isinstance(x, str):
        return x
    return str(x)


def _gate_dict(gate) -> dict | None:
    return None if gate is None else gate.to_dict()


# ====================================================================== one model
def _approx_diagnostics(post) -> dict:
    """An approximation's PSIS k̂ and its verdict, and an optimiser's convergence."""
    from crowdrank.inference.posterior import as_posterior

    if post is None:          # a ModelAudit made without its posteriors (tests, reports)
        return {}
    d = as_posterior(post).diagnostics
    keep = ("psis_khat", "psis_label", "converged", "steps", "final_elbo", "backend",
            "assumed_family", "source")
    return {k: jsonable(d[k]) for k in keep if k in d}


def build_metrics(subject: Subject, cfg: AuditConfig, priors: Priors,
                  audits: Sequence, seconds: float) -> dict:
    """The content of ``metrics.json`` (everything but per-parameter rows).

    Parameters
    ----------
    subject : Subject
        The data audited, with its truth where known.
    cfg : AuditConfig
        The audit's choices.
    priors : Priors
        The one prior object every fit reads (:func:`make_priors`).
    audits : sequence of ModelAudit
        One per model.
    seconds : float
        The audit's wall time.
    """
    from crowdrank.inference.posterior import as_posterior
    from crowdrank.validation.reference import tail_visits_of

    models = {}
    for a in audits:
        main = a.comparisons[0].to_dict()
        w = dict(main["workers"] or {})
        for k in ("quality_online", "quality_nuts", "quality_truth", "ids"):
            w.pop(k, None)
        order = None if a.order is None else {k: v for k, v in a.order.items()
                                              if k != "per_item"}
        models[a.model] = {
            "gate": _gate_dict(a.nuts.gate),
            "reference_trusted": main["reference_trusted"],
            "reference_note": main["reference_note"],
            "aggregates": main["aggregates"],
            "ranking": main["ranking"],
            "workers": w or None,
            "order_sensitivity": order,
            "identified": main.get("identified"),
            "variants": [{"variant": c.variant, "options": o, "aggregates": c.aggregates,
                          "ranking": c.ranking,
                          "identified": getattr(c, "identified", None),
                          **_approx_diagnostics(p)}
                         for c, o, p in zip(a.comparisons, a.variant_opts,
                                            a.variant_posteriors())],
            "timings": {"nuts": dict(a.nuts.timings), "online": a.online_seconds},
            "online_clamped": dict(as_posterior(a.online).diagnostics.get("clamped") or {}),
            # informational, not a gate criterion: how many independent upper-tail visits
            # the means of prior-dominated simplex entries rest on (docs/design.md §5.1)
            "tail_visits": tail_visits_of(a.nuts.idata, a.spec or a.model, priors),
            "backend_agreement": None if a.agreement is None else {
                **a.agreement.to_dict(),
                "other_gate": _gate_dict(getattr(a.agreement, "other_gate", None))},
            "files": {"nuts": f"{a.model}/nuts/posterior.nc",
                      "online": f"{a.model}/online/posterior.json"},
        }
    return {"subject": subject.description, "simulation": subject.simulation,
            "data": subject.data.summary(), "truth_known": subject.truth is not None,
            "priors": {"spec": priors.spec, "mu0": priors.mu0, "sigma0": priors.sigma0},
            "config": cfg.to_dict(), "models": models, "seconds_fits": seconds}

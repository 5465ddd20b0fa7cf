"""The standard experiment of the grid (:func:`crowdrank.validation.runtime.grid.run_grid`):
one simulated audit per spec, through the audit's own pipeline and defaults."""

from __future__ import annotations

from crowdrank.models.priors import Priors
from crowdrank.models.registry import get as get_model
from crowdrank.models.simulate import simulate
from crowdrank.validation.pipelines.audit import AuditConfig, Subject, audit_model


def audit_job(spec: dict) -> dict:
    """One simulated audit: simulate, fit online (``spec["variant"]``) and NUTS with the same
    priors, compare. Spec keys: ``model`` (couple|crowdbt), ``setting`` (a worker type),
    ``seed``, ``variant`` (online options, e.g. ``{"taylor": "full"}``) and optionally
    ``n_items, n_workers, tasks_per_worker, kmax, chains, tune, draws, backend``.
    Returns the comparison's JSON summary plus timings.
    """
    model = spec["model"]
    sim = simulate("couple", n_items=spec.get("n_items", 40), n_workers=spec.get("n_workers", 10),
                   tasks_per_worker=spec.get("tasks_per_worker", 30), kmax=spec.get("kmax", 4),
                   setting=spec["setting"], seed=spec["seed"])
    data = sim.rankings
    priors = Priors.geometric(data.workers, max(data.K, 2))
    # the audit's own pipeline and defaults; the spec overrides the sampler settings
    cfg = AuditConfig(models=(model,), seed=spec["seed"], permutations=0,
                      **{k: spec[k] for k in ("chains", "tune", "draws", "backend")
                         if k in spec})
    mspec = get_model(model)          # the grid point's name, looked up once
    subject = Subject(data, truth=sim.lam,
                      truth_eta1=(sim.eta[:, 0] if mspec.has_eta
                                  and not mspec.eta_scalar else None))
    variant = dict(spec.get("variant", {}))
    a = audit_model(subject, mspec, priors, cfg, None, variants=[variant])
    cmp = a.comparisons[0]
    out = cmp.to_dict()
    out["timings"] = {"online": a.online_seconds, "nuts": dict(a.nuts.timings)}
    return out


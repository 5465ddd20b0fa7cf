"""``crowdrank fit --method nuts``: sample one model with NUTS and write the posterior.

Called by :mod:`crowdrank.reports.commands.fit` as ``run(args, data, priors)`` with the data and the
priors already built (the same priors the online methods get). Writes
``DIR/posterior.nc`` (the ArviZ DataTree, NetCDF) and ``DIR/summary.csv`` (one row per
parameter, named by its real id), and prints the convergence gate's verdict and, for
models with a worker simplex, the audit's informational tail-visits line
(:func:`crowdrank.validation.reference.tail_visits_of`).

``--profile`` also times the potential and its gradient alone (:func:`profile_line`).
``--init-from posterior.json`` warm-starts NUTS from an online posterior (the JSON of
``docs/contracts.md``, read here with plain :mod:`json` so that the NUTS route does not
depend on the online package): each chain starts at its own draw of the approximation and
the mass matrix is seeded from the approximation's variances (``fit_nuts(approx=...)``);
a file without item variances gives a point start at the means instead.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from crowdrank.models.data import DataError
from crowdrank.models.registry import get


def init_from_online_json(path, data, model: str) -> dict:
    """The starting point ``{"lambda", "eta"}`` from an online ``posterior.json``.

    Items take ``mu``; COUPLE workers take the Dirichlet mean ``α / Σα`` (cut to the data's
    ``K``); CrowdBT workers the Beta mean ``a / (a + b)``. Every item and (for COUPLE and
    CrowdBT) every worker of the data must be present.
    """
    path = Path(path)
    try:
        d = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise DataError(f"not valid JSON: {exc.msg}", str(path), exc.lineno) from None
    if not isinstance(d, dict) or "items" not in d:
        raise DataError("not an online posterior: no 'items'", str(path))
    items = d["items"]
    missing = [it for it in data.items if it not in items]
    if missing:
        raise DataError(f"{len(missing)} item(s) of the data are not in the posterior, "
                        f"e.g. {missing[:5]}", str(path))
    try:
        lam = np.array([float(items[it]["mu"]) for it in data.items])
    except (KeyError, TypeError, ValueError):
        raise DataError("every item needs a numeric 'mu'", str(path)) from None
    if not np.all(np.isfinite(lam)):
        raise DataError("an item 'mu' is not finite", str(path))
    init = {"lambda": lam}
    family = get(model).worker_prior
    if family is not None and family.online_factor:   # an online posterior's α to start from
        workers = d.get("workers") or {}
        missing = [w for w in data.workers if w not in workers]
        if missing:
            raise DataError(f"{len(missing)} worker(s) of the data are not in the posterior, "
                            f"e.g. {missing[:5]}", str(path))
        try:
            alpha = [np.asarray(workers[w]["alpha"], float) for w in data.workers]
        except (KeyError, TypeError, ValueError):
            raise DataError("every worker needs a numeric 'alpha' list", str(path)) from None
        try:        # the factors' means, cut to the family's length (Beta (a, b), COUPLE K)
            init["eta"], init["alpha"] = family.start_from_factor(alpha, data.K)
        except ValueError as exc:
            raise DataError(str(exc), str(path)) from None
    try:
        s2 = np.array([float(items[it]["sigma2"]) for it in data.items])
        if np.all(np.isfinite(s2)) and np.all(s2 > 0):
            init["sigma2"] = s2
    except (KeyError, TypeError, ValueError):
        pass   # no variances: a point start at the means
    return init


def approx_from_init(init: dict, data):
    """The approximation ``fit_nuts(approx=...)`` reads (items' ``N(mu, sigma2)``, workers'
    Dirichlet/Beta ``alpha``), or ``None`` when the file gave no item variances."""
    from types import SimpleNamespace

    if "sigma2" not in init:
        return None
    return SimpleNamespace(items=list(data.items), mu=init["lambda"], sigma2=init["sigma2"],
                           workers=list(data.workers), alpha=init.get("alpha"))


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


def run(args, data, priors) -> int:
    from crowdrank.inference.nuts import fit_nuts, write_nuts

    init = approx = None
    if getattr(args, "init_from", None):
        init = init_from_online_json(args.init_from, data, args.model)
        approx = approx_from_init(init, data)
        init = {k: init[k] for k in ("lambda", "eta") if k in init}
    result = fit_nuts(
        data, args.model, priors, backend=args.backend, chains=int(args.chains),
        tune=int(args.tune), draws=int(args.draws), target_accept=float(args.target_accept),
        seed=int(args.seed), init=init, approx=approx,
        progress=not getattr(args, "no_progress", False),
        precision=getattr(args, "precision", None) or "float64",
        profile=bool(getattr(args, "profile", False)))
    paths = write_nuts(result, args.out)
    t = result.timings
    print(f"NUTS ({args.backend}, {args.model}): {data.n_rankings} rankings, "
          f"{data.n_items} items, {data.n_workers} workers; {args.chains} chains x "
          f"{args.draws} draws in {t.get('total', float('nan')):.1f} s")
    print(result.gate.verdict())
    line = profile_line(t)
    if line:
        print(line)
    line = tail_visits_line(result.idata, args.model, priors)
    if line:
        print(line)
    print(f"wrote {paths['posterior']} and {paths['summary']}")
    return 0

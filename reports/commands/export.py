"""``crowdrank export``: a trusted NUTS reference in posteriordb's layout.

With no data the subject is the audit's embedded default (its gold-task priors, as
``crowdrank audit`` fits it); with a file or a shared set's name, the priors come from the
same options as ``crowdrank fit``. NUTS runs with the audit's defaults unless ``--from``
names a ``posterior.nc`` of the same data, model and priors (the gate is re-read from its
draws). Layout and certification: :mod:`crowdrank.validation.pipelines.posteriordb`.
"""

from __future__ import annotations

from crowdrank.reports.help import HelpFormatter, add_nuts_options

#: the NUTS options of ``crowdrank export`` (defaults: the audit's, :class:`AuditConfig`)
EXPORT_NUTS = ("backend", "chains", "tune", "draws")


def register(sub) -> None:
    p = sub.add_parser(
        "export", help="export a trusted NUTS reference in posteriordb's layout",
        description="Fit (or read) a NUTS reference and write it as posteriordb does: data, "
                    "model code for NumPyro and PyMC, reference draws and an info file with "
                    "how they were certified (chains, draws, R-hat, ESS, divergences, date).",
        formatter_class=HelpFormatter)
    p.add_argument("data", nargs="?", default=None,
                   help="rankings file or shared set name; none: the audit's embedded default")
    p.add_argument("--format", choices=("posteriordb",), default="posteriordb",
                   help="the layout written (posteriordb: posteriors/, data/, models/, "
                        "reference_posteriors/)")
    p.add_argument("--model", default="couple", help="a model of the registry")
    p.add_argument("--out", required=True, help="the database folder (created)")
    p.add_argument("--name", default=None,
                   help="the data's name in the database (default: the file's stem, or "
                        "'crowdrank_default')")
    p.add_argument("--from", dest="from_nc", default=None, metavar="POSTERIOR_NC",
                   help="export this NUTS run instead of sampling (same data and priors)")
    p.add_argument("--worker-prior", default=None, help="as in crowdrank fit")
    from crowdrank.validation.pipelines.audit_config import AuditConfig
    # the audit's NUTS settings (NutsConfig's, the audit's own warm-up): its reference
    add_nuts_options(p, AuditConfig, EXPORT_NUTS)
    p.add_argument("--seed", type=int, default=0, help="seed of every random choice")
    p.add_argument("--allow-untrusted", action="store_true",
                   help="export a run that failed the gate, marked 'not certified'")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.set_defaults(func=run)


def _subject(args):
    """(data, priors, name) for the command's data and prior options."""
    from pathlib import Path

    from crowdrank.models.registry import get as get_model
    from crowdrank.validation.pipelines.audit import AuditConfig, default_subject, make_priors

    cfg = AuditConfig(worker_prior=args.worker_prior)
    if args.data is None:
        subject = default_subject()
        data, gold, name = subject.data, subject.gold, "crowdrank_default"
    else:
        from crowdrank.models.io import read_data
        data, _ = read_data(args.data)
        gold, name = None, Path(str(args.data)).stem.replace("-", "_")
    priors = get_model(args.model).worker_priors(make_priors(data, cfg, gold), data)
    return data, priors, args.name or name


def nuts_settings(args) -> dict:
    """The NUTS options on the line, else the audit's (:class:`AuditConfig`)."""
    from crowdrank.validation.pipelines.audit_config import AuditConfig

    return {k: getattr(AuditConfig, k) if getattr(args, k) is None else getattr(args, k)
            for k in EXPORT_NUTS}


def run(args) -> int:
    from crowdrank.inference.gate import check
    from crowdrank.inference.nuts import fit_nuts, read_nuts
    from crowdrank.models.registry import get as get_model
    from crowdrank.validation.pipelines.posteriordb import export_posteriordb

    get_model(args.model)                      # an unknown model fails before any work
    vars(args).update(nuts_settings(args))
    data, priors, name = _subject(args)
    settings = {"backend": args.backend, "chains": args.chains, "tune": args.tune,
                "draws": args.draws, "seed": args.seed}
    if args.from_nc:
        tree = read_nuts(args.from_nc)
        gate = check(tree)
        settings = {"from": str(args.from_nc), **{k: tree.attrs.get(k) for k in
                                                  ("backend", "source") if k in tree.attrs}}
    else:
        res = fit_nuts(data, args.model, priors, backend=args.backend, chains=args.chains,
                       tune=args.tune, draws=args.draws, seed=args.seed,
                       progress=not args.no_progress)
        tree, gate = res.idata, res.gate
    print(gate.verdict())
    paths = export_posteriordb(args.out, tree, gate, data, priors, args.model, name=name,
                               settings=settings, allow_untrusted=args.allow_untrusted)
    print(f"posterior {name}-{args.model} written to {args.out}")
    for role in ("posterior", "draws", "draws_info", "numpyro", "pymc"):
        print(f"  {role}: {paths[role]}")
    return 0

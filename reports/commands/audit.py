"""``crowdrank audit``: fit COUPLE and/or CrowdBT by NUTS and by online moment matching,
compare the posteriors, and write a report (the suite's main job).

With no DATA it audits the embedded default: a seeded simulation with the paper's
``amateur`` workers (:data:`crowdrank.reports.audit.DEFAULT_SIMULATION`), ground truth known.
DATA is a rankings file (any format :func:`crowdrank.models.io.read_rankings` reads) or the name of a
shared real data set (``babyface``, ``readlevel``, ...).
"""

from __future__ import annotations

import argparse

from crowdrank.inference import methods
from crowdrank.models.errors import UsageError
from crowdrank.models.registry import PAIR_MODELS, get, names


def audit_models() -> tuple[str, ...]:
    """The ranking models the audit takes: those with an online update to start NUTS from
    and to compare (``ModelSpec.online``; normalised COUPLE has none of its own)."""
    return tuple(m for m in names() if get(m).online and not get(m).normalized)


def register(sub) -> None:
    p = sub.add_parser(
        "audit", help="NUTS vs online moment matching on one data set, with a report",
        description="Fit the model(s) by NUTS and by the online update under the same "
                    "priors, compare the posteriors parameter by parameter, and write "
                    "DIR/report.html, DIR/metrics.json, DIR/parameters.csv and the fits. "
                    "Without DATA: an embedded seeded simulation (amateur workers).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("data", nargs="?", default=None,
                   help="rankings file or shared data set name (babyface, readlevel, "
                        "preflib-dots, preflib-puzzle); default: the embedded simulation")
    p.add_argument("--truth", default=None, help="ground truth CSV item,score (higher = better)")
    p.add_argument("--format", dest="fmt", default=None, help="force the rankings file format")
    p.add_argument("--model", choices=audit_models() + ("all",) + PAIR_MODELS,
                   default="all",
                   help="all = couple and crowdbt; bt and pl are audited one at a time "
                        "(their approximations: Weng–Lin online, and the batch point methods "
                        "of --approx); crowdbt-bias/crowdbt-domain (--approx em) and "
                        "contextual-bt (--approx map) audit a pairwise CSV")
    p.add_argument("--backend", choices=("numpyro", "pymc"), default="numpyro")
    p.add_argument("--variants", action="append", default=None, metavar="OPT=V1,V2",
                   help="online variants to compare, e.g. taylor=paper,full,plugin,quadrature "
                        "or score_alpha=updated,prior (COUPLE; CrowdBT takes "
                        "taylor=paper,quadrature), method=online,ep and "
                        "ep_passes=2,5,10 (every model: expectation propagation over the "
                        "update); repeatable")
    p.add_argument("--approx", default=None, metavar="M1,M2",
                   help="approximations to audit (any method of the registry but nuts), "
                        "shorthand for --variants method=M1,M2: "
                        + "; ".join(f"{m.name} ({m.title})" for m in methods.REGISTRY.values()
                                    if not m.reference))
    p.add_argument("--bootstrap", type=int, default=None, metavar="B",
                   help="bootstrap resamples (default 1000; 200 with --quick)")
    p.add_argument("--quick", action="store_true",
                   help="fewer NUTS iterations (250 tuning + 500 draws per chain, 1000 above 300 "
                        "parameters, warm-started) and 3 permutations")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--seed", type=int, default=0, help="NUTS and permutation seed")
    p.add_argument("--reference", choices=("nuts", "gibbs"), default="nuts",
                   help="the reference's sampler: NUTS in --backend, or the collapsed Gibbs "
                        "sampler (COUPLE, CrowdBT, PL, BT; its own defaults, crowdrank fit "
                        "--method gibbs --help); the model checks' extra fits use it too")
    n = p.add_argument_group("NUTS")
    n.add_argument("--chains", type=int, default=None)
    n.add_argument("--tune", type=int, default=None)
    n.add_argument("--draws", type=int, default=None)
    n.add_argument("--target-accept", type=float, default=None)
    n.add_argument("--max-nuts-minutes", type=float, default=30.0, metavar="MIN",
                   help="time a few gradients of the model on the data first and estimate "
                        "the NUTS run's wall time; beyond MIN minutes skip NUTS and report "
                        "the approximations with their PSIS k̂ (0 or less: no estimate, no "
                        "limit)")
    n.add_argument("--nuts-subsample", type=int, default=None, metavar="N",
                   help="over --max-nuts-minutes: audit on N seeded rankings instead")
    n.add_argument("--max-draws", type=int, default=None, metavar="D",
                   help="extend sampling in rounds of --draws while the gate fails on R-hat "
                        "or ESS, up to D draws per chain (default: 4 × draws, cut to the "
                        "budget)")
    n.add_argument("--check-backends", action="store_true",
                   help="also fit with the other PPL and report whether the two posteriors "
                        "agree parameter by parameter (doubles the NUTS time; PyMC is slower)")
    n.add_argument("--cold-start", action="store_true",
                   help="start NUTS from its default point instead of draws of the online "
                        "posterior (slower warm-up; for comparison)")
    c = p.add_argument_group("model checks")
    c.add_argument("--no-checks", action="store_true",
                   help="skip the model checks: PSIS-LOO comparison and posterior predictive "
                        "checks")
    c.add_argument("--loo-models", default=None, metavar="M1,M2",
                   help="models also fitted by NUTS for the LOO comparison only, beside the "
                        "audited ones ('' for none; default pl,bt, and crowdbt,bt for the "
                        "pair-table models)")
    p.add_argument("--permutations", type=int, default=None,
                   help="seeded permutations for the order-sensitivity study (0: skip)")
    g = p.add_argument_group("priors (shared by both methods)")
    g.add_argument("--prior-mu", type=float, default=0.0)
    g.add_argument("--prior-sigma", type=float, default=1.0)
    g.add_argument("--worker-prior", default=None,
                   help="geometric profile a0*(a^-1..a^-K) for every worker, e.g. "
                        "geometric:a0=10,a=6 (the default for DATA; the embedded simulation "
                        "uses its gold tasks instead)")
    g.add_argument("--worker-prior-gold", default=None, metavar="GOLD_CSV",
                   help="worker priors from gold tasks (worker,ranking,true_order)")
    g.add_argument("--worker-prior-file", default=None,
                   help="CSV worker,alpha1,..,alphaK (CrowdBT reads the first two); "
                        "overrides --worker-prior")
    d = p.add_argument_group("executor")
    d.add_argument("--scheduler", default=None, metavar="ADDR",
                   help="run the NUTS fits (one per audited model and per --loo-models "
                        "model) as tasks on Dask distributed, all at once: 'local' (a "
                        "LocalCluster of --processes workers) or a scheduler address "
                        "tcp://host:8786 (default $CROWDRANK_SCHEDULER, else one after the "
                        "other in this process); same results either way")
    d.add_argument("--processes", type=int, default=None,
                   help="worker processes of --scheduler local (default: one per CPU)")
    p.add_argument("--progress-bars", action="store_true",
                   help="also show the samplers' own progress bars")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    from crowdrank.reports.commands import audit_pairs
    audit_pairs.add_arguments(p)
    p.set_defaults(func=run)


def _model_list(text: str, option: str) -> tuple[str, ...]:
    from crowdrank.models.registry import get

    names = tuple(m.strip() for m in (text or "").split(",") if m.strip())
    for m in names:
        try:
            get(m)
        except UsageError as e:
            raise UsageError(f"{option}: {e}") from None
    return names


def config_from_args(args, data=None):
    """An :class:`crowdrank.reports.audit.AuditConfig` from the parsed options (``data``: the data set
    audited, which sets a quick audit's draws; None for the embedded default)."""
    from crowdrank.reports.audit import MODELS, AuditConfig, parse_variants
    from crowdrank.validation.pipelines.audit import n_scalar_params

    kw = {"models": MODELS if args.model == "all" else (args.model,), "backend": args.backend,
          "variants": parse_variants((args.variants or [])
                                     + ([f"method={args.approx}"] if args.approx else [])),
          "seed": args.seed,
          "worker_prior": args.worker_prior, "worker_prior_file": args.worker_prior_file,
          "worker_prior_gold": args.worker_prior_gold,
          "prior_mu": args.prior_mu, "prior_sigma": args.prior_sigma,
          "progress_bars": args.progress_bars, "check_backends": args.check_backends,
          "warm_start": not args.cold_start, "checks": not args.no_checks,
          "reference": getattr(args, "reference", "nuts"),
          "loo_models": _model_list("pl,bt" if args.loo_models is None else args.loo_models,
                                    "--loo-models")}
    if args.quick:
        kw["bootstrap"] = 200
    for name in ("chains", "tune", "draws", "target_accept", "permutations", "bootstrap",
                 "nuts_subsample", "max_draws"):
        v = getattr(args, name, None)
        if v is not None:
            kw[name] = v
    minutes = getattr(args, "max_nuts_minutes", None)
    kw["max_nuts_minutes"] = minutes if minutes is not None and minutes > 0 else None
    n_params = None if data is None else n_scalar_params(data, kw["models"])
    cfg = AuditConfig.quick(n_params, **kw) if args.quick else AuditConfig(**kw)
    if args.draws is None and n_params is not None:
        # iid chains of this length pass the gate with >= 95 % (docs/design.md)
        from crowdrank.validation.pipelines.budget import draws_for_gate
        cfg.draws = max(cfg.draws, draws_for_gate(n_params, cfg.chains))
    return cfg


def run(args) -> int:
    from crowdrank.reports.commands import audit_pairs
    from crowdrank.reports.commands.fit_pairs import check_pair_options, resolve

    check_pair_options(args)
    if args.model in audit_pairs.PAIR_MODELS:
        resolve(args)
        return audit_pairs.run(args)
    from crowdrank.reports.audit import Log, Subject, default_subject, run_audit

    config_from_args(args)          # option errors before the data are read
    if args.data is None:
        if args.truth:
            raise UsageError("--truth needs DATA (the embedded simulation has its own truth)")
        subject = default_subject()
    else:
        from crowdrank.models.io import read_data

        data, truth = read_data(args.data, fmt=args.fmt, truth=args.truth)
        subject = Subject(data, truth=truth, description=f"{args.data} ({data.n_rankings} "
                          f"rankings, {data.n_items} items, {data.n_workers} workers)")
    cfg = config_from_args(args, subject.data)
    from crowdrank.validation.runtime.grid import SchedulerError, resolve_scheduler

    if args.processes is not None and args.processes < 1:
        raise UsageError("--processes must be >= 1")
    try:
        metrics = run_audit(subject, args.out, cfg, log=Log(not args.quiet),
                            scheduler=resolve_scheduler(args.scheduler),
                            processes=args.processes)
    except SchedulerError as exc:
        raise UsageError(f"--scheduler: {exc}") from None
    if (metrics.get("budget") or {}).get("verdict") == "refused":
        return _print_refusal(metrics, args.out)
    for model, m in metrics["models"].items():
        lam = m["aggregates"].get("lambda", {})
        acc = m["ranking"].get("accuracy_online")
        print(f"{model}: reference {'trusted' if m['reference_trusted'] else 'NOT trusted'}; "
              f"λ median |z| {lam.get('median_abs_z', float('nan')):.3f}, median sd ratio "
              f"{lam.get('median_sd_ratio', float('nan')):.3f}; Kendall τ "
              f"{m['ranking'].get('kendall_tau') or float('nan'):.3f}"
              + (f"; accuracy online {acc:.3f} / NUTS {m['ranking']['accuracy_nuts']:.3f}"
                 if acc is not None else ""))
    print(f"report: {args.out}/report.html")
    return 0


def _print_refusal(metrics: dict, out: str) -> int:
    """The verdict of an audit whose NUTS run would exceed ``--max-nuts-minutes``."""
    for model, p in metrics["budget"]["models"].items():
        print(f"{model}: NUTS not run: estimated {p['estimate_minutes']:.1f} min > budget "
              f"{p['budget_minutes']:g} min (gradient {p['gradient_ms']:.3g} ms, "
              f"{p['n_params']} parameters); --nuts-subsample N audits on N rankings")
        for v in metrics["models"][model]["variants"]:
            k = v.get("psis_khat")
            print(f"  {v['variant'].get('method', 'online')} {v['variant']}: PSIS k̂ "
                  + ("n/a (no density)" if k is None else f"{k:.2f} ({v.get('psis_label')})"))
    print(f"metrics: {out}/metrics.json (no report.html: nothing to compare with)")
    return 0

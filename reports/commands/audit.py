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
from crowdrank.models.registry import PAIR_MODELS, REGISTRY, get, names


def audit_models() -> tuple[str, ...]:
    """The ranking models the audit takes with no ``--approx``: those with an online update
    to start NUTS from and to compare (``ModelSpec.online``; normalised COUPLE has none of
    its own). Every other registered model is audited against an ``--approx`` method that
    fits it (:func:`check_audited_model`)."""
    return tuple(m for m, spec in REGISTRY.items() if spec.online and not spec.normalized)


def check_audited_model(model: str, approx: str | None) -> None:
    """Refuse a ranking model that neither the online update nor any ``--approx`` method
    fits (a :class:`UsageError` naming the methods that would)."""
    if model in audit_models():
        return
    spec = get(model)             # the user's name, looked up once
    asked = [methods.resolve(n.strip(), spec) for n in (approx or "").split(",")
             if n.strip() and not n.strip().startswith("file:")]
    if any(n in methods.REGISTRY and methods.REGISTRY[n].fits(spec) for n in asked):
        return
    fit = [n for n in methods.approximations() if methods.REGISTRY[n].fits(spec)]
    raise UsageError(f"--model {model} has no online update to audit: name an approximation "
                     f"that fits it with --approx ({', '.join(fit) or 'none registered'})")


class AuditParser(argparse.ArgumentParser):
    """``crowdrank audit``'s parser: it parses every option, but its help leaves out the
    options of one approximation or one model family until the line names it, as
    ``crowdrank fit --method M --help`` does: ``--approx M --help`` adds what the audit
    runs M with (its variants, ``--bootstrap``), ``--model M --help`` for a pair-table
    model adds that family's options. :attr:`only_for` maps such an option's dest to
    the methods (``("approx", names)``) or models (``("model", names)``) it belongs to."""

    line: tuple[str, ...] = ()
    only_for: dict

    def parse_known_args(self, args=None, namespace=None):
        self.line = tuple(args) if args is not None else ()
        return super().parse_known_args(args, namespace)

    def _named(self) -> tuple[list, str | None]:
        from crowdrank.reports.commands.fit import _last_value

        approx = [methods.REGISTRY[n] for n in
                  (_last_value(self.line, "--approx") or "").split(",")
                  if n.strip() in methods.REGISTRY]
        return approx, _last_value(self.line, "--model")

    def _shown(self, action, approx, model) -> bool:
        kind, owners = self.only_for.get(action.dest, (None, ()))
        if kind == "approx":
            return any(m.name in owners for m in approx)
        if kind == "model":
            return model in owners
        return True

    def format_help(self) -> str:
        approx, model = self._named()
        formatter = self._get_formatter()
        formatter.add_usage(self.usage, self._actions, self._mutually_exclusive_groups)
        formatter.add_text(self.description)
        for g in self._action_groups:
            shown = [a for a in g._group_actions if self._shown(a, approx, model)
                     and self.only_for.get(a.dest, ("",))[0] != "approx"]
            hidden = len(shown) < len(g._group_actions)   # its description says where
            if shown or g.description:
                formatter.start_section(g.title)
                formatter.add_text(g.description if hidden or not shown else None)
                formatter.add_arguments(shown)
                formatter.end_section()
        placed = set()
        for m in approx:     # each method's own options in its section (once)
            own = [a for a in self._actions if a.dest not in placed
                   and m.name in self.only_for.get(a.dest, ("", ()))[1]
                   and self.only_for[a.dest][0] == "approx"]
            placed.update(a.dest for a in own)
            formatter.start_section(f"--approx {m.name}: {m.title}")
            formatter.add_text(approx_text(m))
            formatter.add_arguments(own)
            formatter.end_section()
        return formatter.format_help()


def approx_text(m) -> str:
    """What the audit fits approximation ``m`` with (its ``--approx M --help`` section)."""
    from dataclasses import fields

    from crowdrank.validation.pipelines.variants import VARIANT_CHOICES

    own = {f.name for f in fields(m.options_class)}
    varied = [f"{k}={','.join(v)}" for k, v in VARIANT_CHOICES.items()
              if k in own or (k == "ep_passes" and "passes" in own and m.name == "ep")]
    return (f"fits --model {', '.join(m.model_names())}; its options at their defaults "
            f"(crowdrank fit --method {m.name} --help lists them)"
            + (f"; --variants compares {'; '.join(varied)}" if varied else ""))


def register(sub) -> None:
    from dataclasses import fields

    from crowdrank.reports.commands.fit_pairs import PAIR_OPTIONS
    from crowdrank.reports.help import HelpFormatter, add_nuts_options
    from crowdrank.validation.pipelines.audit_config import (
        NUTS_FIELDS,
        QUICK_DRAWS,
        QUICK_MANY_PARAMS,
        QUICK_TUNE,
        AuditConfig,
    )

    p = sub.add_parser(
        "audit", help="NUTS vs online moment matching on one data set, with a report",
        usage="crowdrank audit [DATA] --out DIR [options]",
        description="Fit the model(s) by NUTS and by the approximations under the same "
                    "priors, compare the posteriors, write DIR/report.html and the fits.",
        formatter_class=HelpFormatter)
    p.__class__ = AuditParser      # as fit's FitParser: help only, no state at construction
    ranking = ", ".join(audit_models())
    others = [m for m in names() if m not in audit_models()]
    p.add_argument("data", nargs="?", default=None,
                   help="rankings file or shared data set (babyface, ...); default: a "
                        "seeded simulation, truth known")
    p.add_argument("--out", required=True, metavar="DIR", help="output folder")
    p.add_argument("--model", choices=names() + ("all",) + PAIR_MODELS,
                   default="all", metavar="MODEL",
                   help=f"all (couple, crowdbt; the default) or {ranking}; "
                        f"{', '.join(others)} with --approx; or a pair-table model (below)")
    p.add_argument("--approx", default=None, metavar="M1,M2",
                   help="approximations to audit beside online (crowdrank fit --help "
                        "lists them); --approx M --help: how it runs")
    p.add_argument("--variants", action="append", default=None, metavar="OPT=V1,V2",
                   help="values to compare, e.g. taylor=paper,quadrature or "
                        "method=online,ep; repeatable")
    p.add_argument("--bootstrap", type=int, default=None, metavar="B",
                   help=f"bootstrap resamples (default: {AuditConfig.bootstrap}; 200 with "
                        "--quick)")
    p.add_argument("--quick", action="store_true",
                   help=f"{QUICK_TUNE} tuning + {QUICK_DRAWS} draws per chain (more above "
                        f"{QUICK_MANY_PARAMS} parameters), 3 permutations")
    p.add_argument("--seed", type=int, default=0, metavar="S",
                   help="NUTS and permutation seed")
    p.add_argument("--reference", choices=("nuts", "gibbs"), default="nuts", metavar="R",
                   help="the reference's sampler: nuts or gibbs")
    p.add_argument("--permutations", type=int, default=None, metavar="N",
                   help=f"orders the online update is re-run on (default: "
                        f"{AuditConfig.permutations})")
    p.add_argument("--truth", default=None, metavar="CSV",
                   help="ground truth CSV item,score (higher = better)")
    p.add_argument("--format", dest="fmt", default=None, help="force the rankings file format")
    p.add_argument("--progress-bars", action="store_true",
                   help="also show the samplers' own progress bars")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    n = p.add_argument_group("NUTS (the reference)")
    add_nuts_options(n, AuditConfig, [f for f in NUTS_FIELDS if f != "chain_method"],
                     notes={"tune": f"{QUICK_TUNE} with --quick",
                            "draws": f"{QUICK_DRAWS} with --quick",
                            "max_draws": "4 × draws"})
    n.add_argument("--max-nuts-minutes", type=float, default=30.0, metavar="M",
                   help="skip NUTS when it is estimated over M minutes (0: no limit)")
    n.add_argument("--nuts-subsample", type=int, default=None, metavar="N",
                   help="over --max-nuts-minutes: audit N seeded rankings")
    n.add_argument("--check-backends", action="store_true",
                   help="also fit with the other PPL and compare the two")
    n.add_argument("--cold-start", action="store_true",
                   help="start NUTS at its default point, not from online")
    c = p.add_argument_group("model checks")
    c.add_argument("--no-checks", action="store_true",
                   help="skip PSIS-LOO and the posterior predictive checks")
    c.add_argument("--loo-models", default=None, metavar="M1,M2",
                   help="also fitted by NUTS, for LOO only (default: pl,bt)")
    from crowdrank.validation.pipelines.audit_config import AuditConfig as _Cfg
    c.add_argument("--posterior-sbc", type=int, default=None, metavar="N",
                   help=f"posterior-SBC replicates per approximation, the verdict "
                        f"without NUTS (0: none; default {_Cfg.posterior_sbc})")
    c.add_argument("--posterior-sbc-minutes", type=float, default=None, metavar="M",
                   help=f"skip a method estimated longer (default {_Cfg.posterior_sbc_minutes:g})")
    g = p.add_argument_group("priors (shared by every method)")
    g.add_argument("--prior-mu", type=float, default=0.0, metavar="MU",
                   help="mean of λ ~ Normal")
    g.add_argument("--prior-sigma", type=float, default=1.0, metavar="SD",
                   help="sd of λ ~ Normal")
    g.add_argument("--worker-prior", default=None, metavar="SPEC",
                   help="e.g. geometric:a0=10,a=6 (default: gold tasks, if any)")
    g.add_argument("--worker-prior-gold", default=None, metavar="F",
                   help="from gold tasks: CSV worker,ranking,true_order")
    g.add_argument("--worker-prior-file", default=None, metavar="F",
                   help="CSV worker,alpha1,..,alphaK (CrowdBT: a, b)")
    d = p.add_argument_group("executor")
    d.add_argument("--scheduler", default=None, metavar="ADDR",
                   help="NUTS fits as Dask tasks: local or tcp://host:8786 "
                        "(default: $CROWDRANK_SCHEDULER, else here)")
    d.add_argument("--processes", type=int, default=None, metavar="N",
                   help="workers of --scheduler local (default: the CPUs)")
    from crowdrank.reports.commands import audit_pairs
    before = len(p._action_groups)
    audit_pairs.add_arguments(p)
    pair_group = p._action_groups[before]
    pair_group.title = "pair-table models"
    pair_group.description = (f"--model {', '.join(PAIR_MODELS)}: crowdrank audit --model M "
                              "--help shows their options")
    # --bootstrap: the methods with a bootstrap option (map, ml, bootstrap)
    p.only_for = {"bootstrap": ("approx", tuple(
        m.name for m in methods.REGISTRY.values()
        if "bootstrap" in {f.name for f in fields(m.options_class)}))}
    p.only_for.update({d: ("model", PAIR_MODELS) for d in PAIR_OPTIONS})
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

    kw = {"models": MODELS if args.model == "all" else (args.model,),
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
    for name in ("backend", "chains", "tune", "draws", "target_accept", "permutations",
                 "bootstrap", "nuts_subsample", "max_draws", "posterior_sbc",
                 "posterior_sbc_minutes"):      # None: AuditConfig's
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
    if args.chains is not None and args.chains < 2:
        # the reference is trusted by split R-hat across chains (the gate)
        raise UsageError(f"--chains {args.chains}: an audit needs at least 2 chains, the "
                         "reference's trust gate compares them (split R-hat)")
    if args.model in audit_pairs.PAIR_MODELS:
        resolve(args)
        return audit_pairs.run(args)
    from crowdrank.reports.audit import Log, Subject, default_subject, run_audit

    if args.model != "all":
        check_audited_model(args.model, args.approx)
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
            ps = v.get("posterior_sbc")
            if ps is not None:
                print("    posterior SBC: " + (f"not checked: {ps['skipped']}"
                                              if ps.get("skipped") else ps["verdict"]))
    from crowdrank.reports.posterior_sbc_html import (
        recommendation,
        refusal_rows,
        write_verdict_report,
    )
    psbc = refusal_rows(metrics)
    if any(psbc.values()):
        print("recommendation: " + recommendation(psbc))
    page = write_verdict_report(out, metrics)
    print(f"metrics: {out}/metrics.json; report: {page} (no NUTS: the verdict without a "
          "reference)")
    return 0

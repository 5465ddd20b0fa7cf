"""``crowdrank fit``: one model, one inference method, written to a folder.

The options shared by every method (data, model, priors, seed, output) are parsed and
turned into a :class:`crowdrank.models.data.Rankings` and a
:class:`crowdrank.models.priors.Priors` here, so that every method receives the same data
and the same priors. The methods, their ``--method`` choices and their options come from
the method registry (:mod:`crowdrank.inference.methods`): one argument group per method,
generated from its options dataclass (:func:`add_method_options`; a field's default and
``metadata["help"]`` are its default and its help, stated nowhere else). A method with
its own writer in :data:`RUNNERS` (the online stream, EP's pass lines, NUTS's gate, the
batch tables) uses it; any other method, a registered extension included, is fitted by
its entry and written by :func:`crowdrank.inference.posterior.write_posterior` plus
``items.csv`` (:func:`run_generic`).
"""

from __future__ import annotations

import argparse
from dataclasses import MISSING, fields
from pathlib import Path

from crowdrank.inference import methods
from crowdrank.models.priors import DEFAULT_WORKER_PRIOR, Priors, build_priors
from crowdrank.models.registry import MODELS
from crowdrank.models.registry import get as get_model


def register(sub) -> None:
    p = sub.add_parser(
        "fit", help="fit one model by NUTS, an online update or another registered method",
        description="Fit one model to a rankings file by one inference method (NUTS in "
                    "NumPyro or PyMC, the online updates, EP, batch MAP/ML, EM, TrueSkill, "
                    "...) and write the posterior to --out.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("data", help="rankings file (rankings CSV, pairwise CSV, PrefLib, ...) or "
                                "a shared data set name (babyface, readlevel, ...)")
    from crowdrank.reports.commands.fit_pairs import PAIR_MODELS
    p.add_argument("--model", choices=MODELS + PAIR_MODELS, default="couple",
                   help="contextual-bt, crowdbt-bias, crowdbt-domain read a pairwise CSV "
                        "with extra columns (--covariates, --category): see docs/guide.md")
    p.add_argument("--method", choices=tuple(methods.REGISTRY), default="online",
                   help="; ".join(f"{m.name}: {m.title}" for m in methods.REGISTRY.values()))
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--seed", type=int, default=0)
    g = p.add_argument_group("priors (shared by every method)")
    g.add_argument("--prior-mu", type=float, default=0.0, help="mean of λ ~ Normal")
    g.add_argument("--prior-sigma", type=float, default=1.0, help="sd of λ ~ Normal")
    g.add_argument("--worker-prior", default=DEFAULT_WORKER_PRIOR,
                   help="geometric profile a0*(a^-1..a^-K) for every worker")
    g.add_argument("--worker-prior-gold", default=None, metavar="GOLD_CSV",
                   help="gold tasks (worker,ranking,true_order; `simulate --gold` writes "
                        "one): alpha_w = 1 + how often w reported each offset of the true "
                        "order (Pan et al. 2018, Sect. 5.1); overrides --worker-prior")
    g.add_argument("--worker-prior-file", default=None,
                   help="CSV worker,alpha1,..,alphaK (CrowdBT: worker,a,b); overrides "
                        "--worker-prior")
    add_method_options(p)
    from crowdrank.reports.commands import fit_pairs
    fit_pairs.add_arguments(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.set_defaults(func=run)


def _cli_fields():
    """``{field name: (owner methods, field)}`` of every registered method's options, in
    registry order (a field shared by several methods, like ``taylor``, is one option)."""
    out: dict[str, tuple[list[str], object]] = {}
    for m in methods.REGISTRY.values():
        for f in fields(m.options_class):
            if f.metadata.get("cli", True):
                out.setdefault(f.name, ([], f))[0].append(m.name)
    return out


def _defaults(name: str, owners: list[str]) -> list:
    vals = []
    for o in owners:
        f = next(f for f in fields(methods.get(o).options_class) if f.name == name)
        vals.append(f.default if f.default is not MISSING else f.default_factory())
    return vals


def add_method_options(p) -> None:
    """One argument group per method, from its options dataclass: ``--field-name`` with
    the field's help, choices and type; a field several methods share is added once (in
    its first method's group) and names them; its default is the dataclass default when
    the methods agree, else each method's own, said in the help (the parsed value is then
    ``None``, which keeps every method's default)."""
    groups = {}
    for name, (owners, f) in _cli_fields().items():
        meta = f.metadata
        group = groups.get(owners[0])
        if group is None:
            m = methods.get(owners[0])
            group = groups[owners[0]] = p.add_argument_group(f"--method {m.name}: {m.title}")
        vals = _defaults(name, owners)
        same = all(v == vals[0] for v in vals)
        help_ = meta["help"]
        if len(owners) > 1:
            help_ += f" [--method {', '.join(owners)}]"
        if not same:
            help_ += " (default: " + ", ".join(f"{v} for {o}" for o, v in
                                               zip(owners, vals)) + ")"
        flag = meta.get("flag", "--" + name.replace("_", "-"))
        kw = {"dest": name, "help": help_}
        if isinstance(vals[0], bool) and same:
            group.add_argument(flag, action="store_true", **kw)
            continue
        kw["type"] = meta.get("type", type(vals[0]) if vals[0] is not None else str)
        for key in ("choices", "metavar"):
            if key in meta:
                kw[key] = meta[key]
        group.add_argument(flag, default=vals[0] if same else None, **kw)


def method_options(method, args):
    """The options of ``method`` from the parsed ``args`` (a value left at ``None`` keeps
    the method's own default)."""
    given = {f.name: getattr(args, f.name, None) for f in fields(method.options_class)}
    return method.options(**given)


def load_priors(args, data) -> Priors:
    """The :class:`Priors` every method reads, from ``--prior-*`` and ``--worker-prior*``."""
    priors = build_priors(data, worker_prior=args.worker_prior,
                          worker_prior_file=args.worker_prior_file,
                          gold=args.worker_prior_gold,
                          mu0=args.prior_mu, sigma0=args.prior_sigma)
    return get_model(args.model).worker_priors(priors, data)


def load(args):
    """``(data, priors)`` of the command line."""
    from crowdrank.models.io import read_data

    data, _ = read_data(args.data)
    return data, load_priors(args, data)


def run(args) -> int:
    from crowdrank.reports.commands.fit_pairs import PAIR_MODELS

    if args.model in PAIR_MODELS:
        from crowdrank.reports.commands import fit_pairs
        return fit_pairs.run(args)
    method = methods.get(args.method)
    method.check_model(args.model)
    options = method_options(method, args)
    runner = RUNNERS.get(args.method)
    if runner is None:
        return run_generic(args, method, options)
    module, _, fn = runner.partition(":")
    import importlib
    return getattr(importlib.import_module(module), fn)(args, options)


def run_generic(args, method, options) -> int:
    """Any method without a writer of its own: ``posterior.json`` (and ``posterior.nc``
    for draws) by :func:`~crowdrank.inference.posterior.write_posterior`, ``items.csv``."""
    from crowdrank.inference.posterior import write_posterior

    data, priors = load(args)
    post = method.run(data, args.model, priors, options, seed=args.seed,
                      progress=not args.no_progress)
    out = Path(args.out)
    paths = write_posterior(post, out)
    post.items_table().to_csv(out / "items.csv", index=False, float_format="%.17g")
    print(f"{post.method} ({post.algorithm}, {args.model}): {len(post.items)} items, "
          f"{len(post.workers)} workers, {post.seconds:.3f} s; wrote "
          f"{', '.join(paths.values())} and {out / 'items.csv'}")
    return 0


def run_nuts(args, options) -> int:
    """NUTS through its entry: ``posterior.nc`` and ``summary.csv`` (``write_nuts``), the
    gate's verdict and, for a worker simplex, the informational tail-visits line."""
    from crowdrank.inference import nuts
    from crowdrank.reports.commands.fit_nuts import profile_line, tail_visits_line

    data, priors = load(args)
    post = methods.get("nuts").run(data, args.model, priors, options, seed=args.seed,
                                   progress=not args.no_progress)
    paths = nuts.write_nuts(post.native, args.out)
    print(f"NUTS ({options.backend}, {args.model}): {data.n_rankings} rankings, "
          f"{data.n_items} items, {data.n_workers} workers; {options.chains} chains x "
          f"{options.draws} draws in {post.diagnostics['timings'].get('total', float('nan')):.1f} s")
    print(post.gate.verdict())
    line = profile_line(post.diagnostics["timings"])
    if line:
        print(line)
    line = tail_visits_line(post.tree, args.model, priors)
    if line:
        print(line)
    print(f"wrote {paths['posterior']} and {paths['summary']}")
    return 0


#: ``crowdrank fit``'s own writers, by method name (``module:function(args, options)``).
RUNNERS = {"nuts": "crowdrank.reports.commands.fit:run_nuts",
           "online": "crowdrank.reports.commands.fit_online:run_method",
           "ep": "crowdrank.reports.commands.fit_ep:run_method",
           "map": "crowdrank.reports.commands.fit_batch:run_method",
           "ml": "crowdrank.reports.commands.fit_batch:run_method",
           "trueskill": "crowdrank.reports.commands.fit_batch:run_trueskill",
           **{m: "crowdrank.reports.commands.fit_approx:run_method" for m in
              ("advi", "fullrank-advi", "lowrank-advi", "laplace-ppl", "pathfinder")}}

"""``crowdrank fit``: one model, one inference method, written to a folder.

The options shared by every method (data, model, priors, seed, output) are parsed and
turned into a :class:`crowdrank.models.data.Rankings` and a
:class:`crowdrank.models.priors.Priors` here, so that every method receives the same data
and the same priors. The methods, their ``--method`` choices and their options come from
the method registry (:mod:`crowdrank.inference.methods`): one argument group per method,
generated from its options dataclass (:func:`add_method_options`; a field's default and
``metadata["help"]`` are its default and its help, stated nowhere else). The parser takes
every method's options, so that one given to the wrong method is a clear error
(:func:`check_method_options`) and the docs site lists them all, but its help is short
(:class:`FitParser`): ``crowdrank fit --help`` shows the shared options and the list of
methods, ``crowdrank fit --method M --help`` the shared options and M's. A method with
its own writer in :data:`RUNNERS` (the online stream, EP's pass lines, NUTS's gate, the
batch tables) uses it; any other method, a registered extension included, is fitted by
its entry and written by :func:`crowdrank.inference.posterior_io.write_posterior` plus
``items.csv`` (:func:`run_generic`).
"""

from __future__ import annotations

import argparse
import copy
from argparse import SUPPRESS
from dataclasses import MISSING, fields
from pathlib import Path
from typing import NamedTuple

from crowdrank.inference import methods
from crowdrank.models.errors import UsageError
from crowdrank.models.priors import DEFAULT_WORKER_PRIOR, Priors, build_priors
from crowdrank.models.registry import get as get_model
from crowdrank.models.registry import names as model_names

#: the line the short help ends the list of methods with
METHOD_HELP_LINE = "crowdrank fit --method M --help shows M's options"
PRIORS = "priors (shared by every method)"


class Section(NamedTuple):
    """One section of ``crowdrank fit``'s help: its actions, and ``usage``, the one word
    the usage line shows for them (``None``: each action)."""

    title: str
    text: str | None
    actions: list
    usage: str | None = None


class FitParser(argparse.ArgumentParser):
    """``crowdrank fit``'s parser: it parses every method's options, but its help and usage
    show the shared options and then either the list of methods (no ``--method`` on the
    line) or the options of the method the line names; the pair-table models' group joins
    them when ``--model`` names one of those models.

    The help reads ``--method`` and ``--model`` from the arguments being parsed, whichever
    side of ``--help`` they stand, by :meth:`parse_known_args` keeping the line (argparse
    runs ``--help`` as soon as it meets it, before the rest is parsed).
    """

    line: tuple[str, ...] = ()
    #: option dest → its action, for every method option (:func:`add_method_options`)
    method_actions: dict
    #: the pair-table models' actions and their group's title (``fit_pairs.add_arguments``)
    pair_actions: tuple
    pair_title: str

    def parse_known_args(self, args=None, namespace=None):
        self.line = tuple(args) if args is not None else ()
        return super().parse_known_args(args, namespace)

    def sections(self, method=None, model: str | None = None) -> list[Section]:
        """The help's sections for ``--method method`` (a :class:`Method`; ``None``: the
        list of methods) and ``--model model``."""
        from crowdrank.reports.commands.fit_pairs import PAIR_MODELS

        special = set(map(id, self.method_actions.values())) | set(map(id, self.pair_actions))
        out = []
        for g in self._action_groups:     # the shared groups, in the parser's order
            shared = [_shown(a) for a in g._group_actions if id(a) not in special]
            for a in shared:
                if a.dest == "method":    # the methods' own section says what each is
                    a.help = "one of the methods below (default: %(default)s)"
                    if method is not None:
                        a.help = "the inference method; crowdrank fit --help lists them"
                        a.default = SUPPRESS
            if shared:
                out.append(Section(g.title, g.description, shared,
                                   None if g.title in ("positional arguments", "options")
                                   else "prior options" if g.title == PRIORS
                                   else f"{g.title} options"))
        if method is None:
            listed = [argparse.Action([], m.name, metavar=m.name, help=m.title)
                      for m in methods.REGISTRY.values()]
            out.append(Section("methods (--method M)", METHOD_HELP_LINE, listed))
        else:
            out.append(Section(f"--method {method.name}: {method.title}",
                               f"fits --model {', '.join(method.model_names())}",
                               self.method_help(method), f"{method.name} options"))
        if model in PAIR_MODELS:
            out.append(Section(self.pair_title, None, [_shown(a) for a in self.pair_actions],
                               "pair-table options"))
        else:
            out.append(Section("pair-table models", (
                f"--model {', '.join(PAIR_MODELS)} take options of their own: crowdrank fit "
                "--model MODEL --help shows them"), []))
        return out

    def method_help(self, method) -> list[argparse.Action]:
        """``method``'s options as its help shows them: each with the method's own help
        line and default (a field several methods share is one action, whose help in the
        full parser names them all)."""
        shown = []
        for f in fields(method.options_class):
            if f.metadata.get("cli", True):
                a = _shown(self.method_actions[f.name])
                a.help = _help_text(f.metadata["help"], [_default_of(f)], [method.name])
                shown.append(a)
        return shown

    def _line_sections(self):
        method = methods.REGISTRY.get(_last_value(self.line, "--method"))
        return method, self.sections(method, _last_value(self.line, "--model"))

    def _usage(self, formatter, sections) -> None:
        """The usage line: the ``usage is None`` sections' actions one by one, the others
        one word each (``[prior options]``, ``[advi options]``)."""
        actions = []
        for s in sections:
            if s.usage is None:
                actions += s.actions
            elif s.actions:
                actions.append(argparse.Action([], s.usage, nargs="?", metavar=s.usage))
        formatter.add_usage(self.usage, actions, [])

    def format_usage(self) -> str:
        formatter = self._get_formatter()
        self._usage(formatter, self._line_sections()[1])
        return formatter.format_help()

    def format_help(self) -> str:
        method, sections = self._line_sections()
        formatter = self._get_formatter()
        self._usage(formatter, sections)
        formatter.add_text(self.description if method is None else
                           f"Fit one model by --method {method.name} and write the "
                           "posterior to --out.")
        for s in sections:
            formatter.start_section(s.title)
            formatter.add_text(s.text)
            formatter.add_arguments(s.actions)
            formatter.end_section()
        return formatter.format_help()


def _last_value(line, flag: str) -> str | None:
    """The value of the last ``flag V`` or ``flag=V`` on ``line`` (argparse keeps the
    last), up to a ``--``; ``None`` without one."""
    value = None
    for i, tok in enumerate(line):
        if tok == "--":
            break
        name, eq, rest = tok.partition("=")
        if name == flag:
            value = rest if eq else (line[i + 1] if i + 1 < len(line) else None)
    return value


def _shown(action: argparse.Action) -> argparse.Action:
    """A copy of ``action`` for the help: a ``None`` default is not printed (an option
    left out keeps the method's default, which its help line states), nor a flag's."""
    a = copy.copy(action)
    if a.default is None or a.default is False:     # False: a flag, off unless given
        a.default = SUPPRESS
    return a


def register(sub) -> None:
    p = sub.add_parser(
        "fit", help="fit one model by NUTS, an online update or another registered method",
        description="Fit one model to a rankings file by one inference method (NUTS in "
                    "NumPyro or PyMC, the online updates, EP, batch MAP/ML, EM, TrueSkill, "
                    "...) and write the posterior to --out.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    # argparse's add_parser takes no parser class per sub-command; FitParser adds no state
    # of its own at construction, only its help
    p.__class__ = FitParser
    p.add_argument("data", help="rankings file (rankings CSV, pairwise CSV, PrefLib, ...) or "
                                "a shared data set name (babyface, readlevel, ...)")
    from crowdrank.reports.commands.fit_pairs import PAIR_MODELS
    models = model_names() + PAIR_MODELS        # the registry as the parser is built
    p.add_argument("--model", choices=models, default="couple", metavar="MODEL",
                   help=f"one of {', '.join(models)}; the pair-table "
                        "models contextual-bt, crowdbt-bias, crowdbt-domain read a pairwise "
                        "CSV with extra columns (--covariates, --category): see docs/guide.md")
    p.add_argument("--method", choices=tuple(methods.REGISTRY), default="online",
                   metavar="METHOD",
                   help="; ".join(f"{m.name}: {m.title}" for m in methods.REGISTRY.values()))
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--seed", type=int, default=0, help="seed of every random choice")
    p.add_argument("--khat", action="store_true",
                   help="also the PSIS k̂ of the fitted posterior against the model's exact "
                        "density (1,000 draws; written to psis.json; the PPL approximations "
                        "always report it): above 0.7 it is not reliable, no NUTS needed")
    g = p.add_argument_group(PRIORS)
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
    p.method_actions = add_method_options(p)
    from crowdrank.reports.commands import fit_pairs
    before = len(p._actions), len(p._action_groups)
    fit_pairs.add_arguments(p)
    p.pair_actions = tuple(p._actions[before[0]:])
    p.pair_title = p._action_groups[before[1]].title
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


def _default_of(f):
    return f.default if f.default is not MISSING else f.default_factory()


def _defaults(name: str, owners: list[str]) -> list:
    return [_default_of(next(f for f in fields(methods.get(o).options_class) if f.name == name))
            for o in owners]


def _help_text(help_: str, vals: list, owners: list[str]) -> str:
    """``help_`` with the default(s) of the dataclass fields behind it: one value, one per
    method where they differ, none for a flag or a ``None`` default (whose meaning the
    help line gives); ``%`` escaped for argparse's formatting."""
    if len(owners) > 1:
        help_ += f" [--method {', '.join(owners)}]"
    if any(v != vals[0] for v in vals):
        help_ += " (default: " + ", ".join(f"{v} for {o}" for o, v in zip(owners, vals)) + ")"
    elif vals[0] is True:
        help_ += " (default: on)"
    elif vals[0] is not None and not isinstance(vals[0], bool):
        help_ += f" (default: {vals[0]})"
    return help_.replace("%", "%%")


def add_method_options(p) -> dict[str, argparse.Action]:
    """One argument group per method, from its options dataclass: ``--field-name`` with
    the field's help, choices and type; a field several methods share is added once (in
    its first method's group) and names them. Every parsed default is ``None`` (the
    method's own default then applies, :func:`method_options`, and an option given to a
    method that lacks it is seen, :func:`check_method_options`); the help states the
    dataclass default, or each method's where they differ. A field whose metadata says
    ``type=bool`` (on by default, or ``None``: decided by the data) is a ``--name`` /
    ``--no-name`` pair. Returns the actions by dest."""
    groups, actions = {}, {}
    for name, (owners, f) in _cli_fields().items():
        meta = f.metadata
        group = groups.get(owners[0])
        if group is None:
            m = methods.get(owners[0])
            group = groups[owners[0]] = p.add_argument_group(f"--method {m.name}: {m.title}")
        vals = _defaults(name, owners)
        flag = meta.get("flag", "--" + name.replace("_", "-"))
        kw = {"dest": name, "help": _help_text(meta["help"], vals, owners), "default": None}
        if meta.get("type") is bool:      # on by default, or None (decided by the data)
            actions[name] = group.add_argument(flag, action=argparse.BooleanOptionalAction,
                                               **kw)
            continue
        if isinstance(vals[0], bool) and all(v == vals[0] for v in vals):
            actions[name] = group.add_argument(flag, action="store_true", **kw)
            continue
        kw["type"] = meta.get("type", type(vals[0]) if vals[0] is not None else str)
        for key in ("choices", "metavar"):
            if key in meta:
                kw[key] = meta[key]
        actions[name] = group.add_argument(flag, **kw)
    return actions


def method_options(method, args):
    """The options of ``method`` from the parsed ``args`` (a value left at ``None`` keeps
    the method's own default)."""
    given = {f.name: getattr(args, f.name, None) for f in fields(method.options_class)}
    return method.options(**given)


def check_method_options(method, args) -> None:
    """A :class:`UsageError` for an option of another method given with ``--method
    method.name``: it names the methods the option belongs to (argparse would take it
    silently, every method's options being on one parser)."""
    own = {f.name for f in fields(method.options_class)}
    for name, (owners, f) in _cli_fields().items():
        if name not in own and getattr(args, name, None) is not None:
            flag = f.metadata.get("flag", "--" + name.replace("_", "-"))
            raise UsageError(f"{flag} is an option of --method {', '.join(owners)}, not of "
                             f"--method {method.name} (crowdrank fit --method {method.name} "
                             "--help lists its options)")


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
    from crowdrank.reports.commands.fit_pairs import PAIR_MODELS, check_pair_options

    if args.model not in PAIR_MODELS:
        args.method = methods.resolve(args.method, args.model)
    method = methods.get(args.method)
    check_method_options(method, args)
    check_pair_options(args)
    if getattr(args, "khat", False) and (args.method == "nuts" or args.model in PAIR_MODELS):
        raise UsageError("--khat is the PSIS diagnostic of an approximation of a rankings "
                         "model; NUTS's draws are the reference it needs none of")
    if args.model in PAIR_MODELS:
        from crowdrank.reports.commands import fit_pairs
        return fit_pairs.run(args)
    method.check_model(args.model)
    options = method_options(method, args)
    runner = RUNNERS.get(args.method)
    if runner is None:
        return run_generic(args, method, options)
    module, _, fn = runner.partition(":")
    import importlib
    return getattr(importlib.import_module(module), fn)(args, options)


def report_khat(args, post, data, priors) -> None:
    """With ``--khat``: the PSIS k̂ of ``post`` (a fitted
    :class:`~crowdrank.inference.posterior.Posterior`) against the model's exact log density
    (:func:`crowdrank.inference.approx.psis.posterior_khat`), printed as one line and written
    to ``OUT/psis.json``; "n/a" with the reason for a method without a density (the
    bootstrap, moment-matched marginals)."""
    if not getattr(args, "khat", False):
        return
    import json

    from crowdrank.inference.approx.psis import posterior_khat

    n = 1000
    res = posterior_khat(post, data, args.model, priors, n=n, seed=args.seed)
    k, lab = res["psis_khat"], res["psis_label"]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "psis.json").write_text(json.dumps(
        {"method": args.method, "model": args.model, "psis_khat": k, "psis_label": lab,
         "draws": n, "seed": args.seed}, indent=1) + "\n")
    if k is None:
        print(f"PSIS k̂: {lab}")
    else:
        print(f"PSIS k̂ = {k:.3f}: {lab}" + (
            " (k̂ > 0.7: the approximation misses mass of the posterior; do not trust its "
            "sds or tails)" if lab == "not reliable" else ""))


def run_generic(args, method, options) -> int:
    """Any method without a writer of its own: ``posterior.json`` (and ``posterior.nc``
    for draws) by :func:`~crowdrank.inference.posterior_io.write_posterior`, ``items.csv``."""
    from crowdrank.inference.posterior_io import write_posterior

    data, priors = load(args)
    post = method.run(data, args.model, priors, options, seed=args.seed,
                      progress=not args.no_progress)
    out = Path(args.out)
    paths = write_posterior(post, out)
    post.items_table().to_csv(out / "items.csv", index=False, float_format="%.17g")
    print(f"{post.method} ({post.algorithm}, {args.model}): {len(post.items)} items, "
          f"{len(post.workers)} workers, {post.seconds:.3f} s; wrote "
          f"{', '.join(paths.values())} and {out / 'items.csv'}")
    if post.gate is not None:      # a sampler's verdict (the Gibbs reference)
        print(post.gate.verdict())
    report_khat(args, post, data, priors)
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


def _approx_names() -> tuple[str, ...]:
    """The PPL approximations' names, from their entries of the method registry."""
    from crowdrank.inference.approx.entries import method_entries

    return tuple(e["name"] for e in method_entries())


#: ``crowdrank fit``'s own writers, by method name (``module:function(args, options)``);
#: every PPL approximation (:func:`crowdrank.inference.approx.entries.method_entries`)
#: is written by ``fit_approx``.
RUNNERS = {"nuts": "crowdrank.reports.commands.fit:run_nuts",
           "online": "crowdrank.reports.commands.fit_online:run_method",
           "ep": "crowdrank.reports.commands.fit_ep:run_method",
           "map": "crowdrank.reports.commands.fit_batch:run_method",
           "ml": "crowdrank.reports.commands.fit_batch:run_method",
           "trueskill": "crowdrank.reports.commands.fit_batch:run_trueskill",
           **{m: "crowdrank.reports.commands.fit_approx:run_method" for m in _approx_names()}}

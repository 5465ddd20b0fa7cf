"""``crowdrank sbc``: simulation-based calibration of the NUTS fits and the online methods.

Draws parameters from the prior, data from the model's exact generative process, fits by
NUTS and by the matching online method, and tests whether the ranks of the true values
among the posterior draws (and the PITs under the online marginals) are uniform (Talts et
al. 2018; Säilynoja et al. 2022). Writes ``ranks.csv``, ``sbc.json`` and ``sbc.html`` into
``--out``; replicates are cached in ``--out/cache``, so an interrupted or extended run
resumes. The logic is in :mod:`crowdrank.validation.pipelines.sbc`, the page in :mod:`crowdrank.reports.sbc_html`.
"""

from __future__ import annotations

import sys

from crowdrank.inference import methods


def register(sub) -> None:
    from crowdrank.reports.help import HelpFormatter, add_nuts_options
    from crowdrank.validation.pipelines.sbc import (  # models with an exact simulator
        DEFAULT_TUNE_DRAWS,
        NUTS_DEFAULTS,
        PAIRS_EXACT,
        SBC_BACKENDS,
        SbcConfig,
        sbc_models,
    )

    p = sub.add_parser(
        "sbc", help="simulation-based calibration (SBC) of NUTS and of the online methods",
        description="Simulation-based calibration (Talts et al. 2018): for each of --sims "
                    "replicates draw λ ~ N(mu, sigma²) and the worker η from the worker prior, "
                    "simulate rankings from the model's exact generative process, fit by NUTS "
                    "(and by the model's online method), and rank every true scalar "
                    "parameter among --ranks thinned posterior draws. Uniform ranks = "
                    "calibrated. Writes DIR/ranks.csv, DIR/sbc.json and DIR/sbc.html; "
                    "replicates are cached in DIR/cache (rerun to resume or to add --sims). "
                    "Stagewise 'couple' is offered on pairs only (--kmax 2): for k >= 3 its "
                    "likelihood is not normalised, so no simulator matches it (use "
                    "couple-normalized).",
        formatter_class=HelpFormatter)
    p.add_argument("--model", default=None, metavar="MODEL",
                   help="the model simulated and fitted, one with an exact simulator: "
                        + ", ".join(sbc_models() + PAIRS_EXACT) + " (default "
                        "couple-normalized); with --posterior any model --method fits "
                        "(default couple)")
    p.add_argument("--backend", choices=SBC_BACKENDS, default="numpyro",
                   help="NUTS back-end, or 'gibbs' (the collapsed Gibbs sampler: couple on "
                        "pairs, crowdbt, pl, bt; 2 chains x (300 warm-up + 1000) sweeps); "
                        "'prior' is the machinery check: it ignores the data "
                        "and draws the 'posterior' from the prior (the exact posterior given "
                        "no data), so its ranks must come out uniform")
    p.add_argument("--sims", type=int, default=None,
                   help="number of replicates (default 100; with --posterior 200)")
    p.add_argument("--out", required=True, help="output folder")
    d = p.add_argument_group("simulated data (per replicate)")
    d.add_argument("--items", type=int, default=10, help="items L")
    d.add_argument("--workers", type=int, default=4, help="workers W")
    d.add_argument("--tasks", type=int, default=25,
                   help="tasks (rankings) per worker; 4 workers x 25 = 100 rankings")
    d.add_argument("--kmax", type=int, default=None,
                   help="largest task size, sizes uniform on 2..kmax (default 4; 2 for "
                        "bt/crowdbt)")
    g = p.add_argument_group("priors (truth is drawn from them; the fits use them)")
    g.add_argument("--worker-prior", default="geometric:a0=10,a=6",
                   help="geometric profile α_w = a0·(a^-1..a^-K), as for 'crowdrank fit'; "
                        "CrowdBT reads (α1, α2) as its Beta(a, b)")
    g.add_argument("--prior-mu", type=float, default=0.0, help="mean of λ ~ Normal")
    g.add_argument("--prior-sigma", type=float, default=1.0, help="sd of λ ~ Normal")
    n = p.add_argument_group("NUTS")
    own = "; ".join(f"{m} {t}" for m, (t, _) in NUTS_DEFAULTS.items())
    own_draws = "; ".join(f"{m} {d}, whose gradient sums over k! orderings"
                          for m, (_, d) in NUTS_DEFAULTS.items())
    from dataclasses import fields
    defaults = {f.name: f.default for f in fields(SbcConfig)}
    defaults.update(zip(("tune", "draws"), DEFAULT_TUNE_DRAWS))
    add_nuts_options(n, defaults, ("chains", "tune", "draws", "target_accept", "simplex"),
                     notes={"tune": own + ", docs/sbc.md", "draws": own_draws})
    n.add_argument("--ranks", type=int, default=100, metavar="S",
                   help="thinned posterior draws each truth is ranked among (ranks 0..S); "
                        "keep S well below the bulk ESS so the kept draws are ~independent")
    t = p.add_argument_group("tests and running")
    t.add_argument("--no-online", action="store_true",
                   help="skip the approximation's PIT check")
    t.add_argument("--approx", default="online", metavar="M",
                   help="the approximation whose calibration is checked by its PIT beside "
                        "NUTS: any method of the registry but nuts (fitting the model or "
                        "its online counterpart): "
                        + ", ".join(m for m in methods.approximations()))
    t.add_argument("--alpha", type=float, default=0.05,
                   help="family-wise level of the verdict (Bonferroni over parameter families)")
    t.add_argument("--seed", type=int, default=0,
                   help="master seed: replicate i uses streams derived from (seed, i)")
    t.add_argument("--processes", type=int, default=None,
                   help="parallel replicate processes (default: all cores; 1 = in-process)")
    t.add_argument("--scheduler", default=None, metavar="ADDR",
                   help="run the replicates on Dask distributed: 'local' (a LocalCluster of "
                        "--processes workers) or a scheduler address tcp://host:8786 "
                        "(default $CROWDRANK_SCHEDULER, else local processes)")
    t.add_argument("--batch", type=int, default=None, metavar="B",
                   help="NumPyro: replicates fitted together in one vmapped program "
                        "(default 50; 1 = one fit_nuts per replicate, as PyMC always does)")
    t.add_argument("--lane-groups", type=int, default=1, metavar="G",
                   help="NumPyro batches: run each batch's lanes (replicates x chains) as G "
                        "groups sorted by difficulty, so a slow lane holds back only its "
                        "group (same draws; docs/sbc.md, the slowest lane)")
    t.add_argument("--warmup-depth", type=int, default=None, metavar="D",
                   help="NumPyro batches: cap NUTS trees at depth D during warm-up only "
                        "(default: the sampling cap, 10)")
    t.add_argument("--shift-sd", type=float, default=0.0, metavar="D",
                   help="check of the check: move every posterior draw of λ by D posterior "
                        "sds before ranking; SBC must then report the λ family as NOT "
                        "calibrated")
    t.add_argument("--check", action="store_true",
                   help="exit with status 3 when the NUTS ranks are not calibrated")
    t.add_argument("--no-progress", action="store_true", help="no progress lines on stderr")
    from crowdrank.reports.commands.sbc_posterior import add_arguments
    add_arguments(p)
    p.set_defaults(func=run)


def config_from_args(args):
    """The :class:`~crowdrank.validation.pipelines.sbc.SbcConfig` of the parsed options (a
    NUTS option left out keeps SbcConfig's default, which is NutsConfig's or SBC's own)."""
    from crowdrank.validation.pipelines.sbc import SbcConfig

    return SbcConfig(model=args.model, backend=args.backend, sims=args.sims,
                     n_items=args.items, n_workers=args.workers, tasks_per_worker=args.tasks,
                     kmax=args.kmax, worker_prior=args.worker_prior, mu0=args.prior_mu,
                     sigma0=args.prior_sigma, tune=args.tune, draws=args.draws,
                     n_ranks=args.ranks, online=not args.no_online, approx=args.approx,
                     seed=args.seed, shift_sd=args.shift_sd,
                     alpha=args.alpha, batch=args.batch, lane_groups=args.lane_groups,
                     warmup_depth=args.warmup_depth,
                     **{k: getattr(args, k) for k in ("chains", "target_accept", "simplex")
                        if getattr(args, k) is not None})


def run(args) -> int:
    from pathlib import Path

    from crowdrank.models.errors import UsageError
    from crowdrank.reports.sbc_html import write_sbc_report
    from crowdrank.validation.pipelines.sbc import PAIRS_EXACT, run_sbc, sbc_models

    if args.processes is not None and args.processes < 1:
        raise UsageError(f"--processes must be >= 1, got {args.processes}")
    if args.posterior is not None:
        from crowdrank.reports.commands.sbc_posterior import run as run_posterior
        return run_posterior(args)
    args.model = args.model or "couple-normalized"
    if args.model not in sbc_models() + PAIRS_EXACT:
        raise UsageError(f"--model {args.model}: prior SBC has an exact simulator for "
                         f"{', '.join(sbc_models() + PAIRS_EXACT)} only (--posterior DATA "
                         "checks any model a method fits)")
    args.sims = 100 if args.sims is None else args.sims
    cfg = config_from_args(args)
    # validate the worker prior before any process starts
    from crowdrank.validation.pipelines.sbc import make_priors
    make_priors(cfg.spec(0))
    from crowdrank.validation.runtime.grid import SchedulerError, resolve_scheduler
    try:
        summary = run_sbc(cfg, args.out, processes=args.processes,
                          progress=not args.no_progress,
                          scheduler=resolve_scheduler(getattr(args, "scheduler", None)))
    except SchedulerError as exc:
        raise UsageError(f"--scheduler: {exc}") from None
    page = write_sbc_report(args.out)
    out = Path(args.out)
    nuts = summary["nuts"]
    print(f"{cfg.model} / {cfg.backend}: {summary['replicates']} replicates, "
          f"{summary['n_draws']} thinned draws each")
    print(f"  {'Gibbs' if cfg.backend == 'gibbs' else 'NUTS'} ranks: {nuts['verdict']} "
          + "(" + ", ".join(f"{f} ECDF p={v['ecdf_p_combined']:.3g}, "
                            f"pot_c p={v['pot_c_p_combined']:.3g}"
                            for f, v in nuts["families"].items()) + ")")
    if "online" in summary:
        on = summary["online"]
        print(f"  {on['method']} PIT: {on['verdict']} "
              + "(" + ", ".join(f"{f} ECDF p={v['ecdf_p_combined']:.3g}, "
                                f"pot_c p={v['pot_c_p_combined']:.3g}"
                                for f, v in on["families"].items()) + ")")
    if cfg.backend != "prior":
        g = summary["gate"]
        print(f"  gate: {g['passed']} passed, {g['failed']} failed; divergences "
              f"{g['divergences_total']} in {g['replicates_with_divergences']} replicates")
    if summary["failed_replicates"]:
        print(f"  {len(summary['failed_replicates'])} replicate(s) raised and were left out "
              "(rerun to retry): " + summary["failed_replicates"][0]["error"][:200],
              file=sys.stderr)
    print(f"wrote {out / 'ranks.csv'}, {out / 'sbc.json'}, {page}")
    if args.check and not nuts["calibrated"]:
        return 3
    return 0

"""``crowdrank sbc --posterior DATA --method M``: posterior SBC of one method on the user's
data (:mod:`crowdrank.validation.pipelines.posterior_sbc`; docs/sbc.md, "Posterior SBC").

Writes ``posterior_sbc.json``, ``ranks.csv``, ``posterior_sbc_ecdf.png`` and
``posterior_sbc.html`` into ``--out``; replicates are cached in ``--out/cache``, so a killed
run resumes and a larger ``--sims`` adds replicates. Not a command of its own: ``crowdrank
sbc`` adds these options (:func:`add_arguments`) and hands over when ``--posterior`` is
given.
"""

from __future__ import annotations

import json
import sys


def add_arguments(p) -> None:
    """The posterior-SBC options of ``crowdrank sbc``."""
    from crowdrank.inference import methods
    from crowdrank.validation.pipelines.posterior_sbc import DEFAULT_AUGMENT, PosteriorSbcConfig

    g = p.add_argument_group(
        "posterior SBC: calibration of a method conditional on your data (docs/sbc.md)")
    g.add_argument("--posterior", metavar="DATA", default=None,
                   help="rankings file or shared data set name: check --method on these data "
                        "(θ' from its fit, rankings simulated at θ' on the data's tasks, the "
                        "refit on both; the ranks of θ') instead of the prior SBC above")
    g.add_argument("--method", default=PosteriorSbcConfig.method, metavar="M",
                   help="the method checked with --posterior: any registered method "
                        "(online methods continue their saved state): "
                        f"{', '.join(methods.REGISTRY)}")
    g.add_argument("--augment", type=float, default=DEFAULT_AUGMENT, metavar="R",
                   help="simulated rankings per replicate, as a multiple of the data's "
                        "(the power against an over-confident fit grows with R; docs/sbc.md)")
    g.add_argument("--method-option", action="append", default=[], metavar="NAME=VALUE",
                   help="an option of --method other than its default (repeatable), e.g. "
                        "--method-option draws=500")
    g.add_argument("--worker-prior-gold", default=None, metavar="GOLD_CSV",
                   help="--posterior: gold tasks give the worker priors, as for `crowdrank "
                        "fit`")
    g.add_argument("--worker-prior-file", default=None, metavar="CSV",
                   help="--posterior: CSV worker,alpha1,..,alphaK (CrowdBT: worker,a,b)")


def parse_options(pairs: list[str]) -> dict:
    """``NAME=VALUE`` pairs: a JSON value (number, true/false, null) or else a string."""
    from crowdrank.models.errors import UsageError

    out = {}
    for pair in pairs:
        name, eq, value = pair.partition("=")
        if not eq or not name:
            raise UsageError(f"--method-option {pair!r}: expected NAME=VALUE")
        try:
            out[name.replace("-", "_")] = json.loads(value)
        except json.JSONDecodeError:
            out[name.replace("-", "_")] = value
    return out


def run(args) -> int:
    """Posterior SBC of ``--method`` on ``--posterior``: print the verdict, write the files."""
    from pathlib import Path

    from crowdrank.models.errors import UsageError
    from crowdrank.models.io import read_data
    from crowdrank.models.priors import build_priors
    from crowdrank.models.registry import get as get_model
    from crowdrank.reports.posterior_sbc_html import write_posterior_sbc_report
    from crowdrank.validation.pipelines.posterior_sbc import (
        PosteriorSbcConfig,
        run_posterior_sbc,
    )
    from crowdrank.validation.runtime.grid import SchedulerError, resolve_scheduler

    model = args.model or "couple"
    cfg = PosteriorSbcConfig(method=args.method, model=model,
                             sims=args.sims or PosteriorSbcConfig.sims,
                             augment=args.augment, ranks=args.ranks, seed=args.seed,
                             alpha=args.alpha, options=parse_options(args.method_option))
    data, _ = read_data(args.posterior)
    priors = build_priors(data, worker_prior=args.worker_prior,
                          worker_prior_file=args.worker_prior_file,
                          gold=args.worker_prior_gold, mu0=args.prior_mu,
                          sigma0=args.prior_sigma)
    priors = get_model(model).worker_priors(priors, data)
    try:
        summary = run_posterior_sbc(data, priors, cfg, args.out, processes=args.processes,
                                    scheduler=resolve_scheduler(args.scheduler),
                                    progress=not args.no_progress)
    except SchedulerError as exc:
        raise UsageError(f"--scheduler: {exc}") from None
    page = write_posterior_sbc_report(args.out)
    out = Path(args.out)
    t = summary["timing"]
    print(f"posterior SBC of {cfg.method} ({model}) on {data.source}: "
          f"{summary['replicates']} replicates, {t['rankings_added']} simulated rankings "
          f"each, ranks among {cfg.ranks} draws")
    print(f"  verdict: {summary['verdict']}")
    from crowdrank.reports.posterior_sbc_html import tolerance_line

    for f, v in summary["ranks"]["families"].items():
        print(f"  {f}: {tolerance_line(summary['tolerance']['groups'][f])}; strict: "
              f"ECDF p={v['ecdf_p_combined']:.3g}, pot_c p={v['pot_c_p_combined']:.3g} "
              f"({'uniform' if v['calibrated'] else 'NOT uniform'})")
    con = summary["checks"]["contraction"]["groups"]
    print("  contraction from the prior (median): " + ", ".join(
        f"{f} {v['median']:.2f}" for f, v in con.items())
        + f"; predictive p {summary['checks']['predictive']['p']:.3f}")
    if summary["failed_replicates"]:
        print(f"  {len(summary['failed_replicates'])} replicate(s) raised and were left out "
              "(rerun to retry): " + summary["failed_replicates"][0]["error"][:200],
              file=sys.stderr)
    print(f"wrote {out / 'posterior_sbc.json'}, {out / 'ranks.csv'}, "
          f"{out / 'posterior_sbc_ecdf.png'}, {page}")
    if args.check and not summary["calibrated"]:
        return 3
    return 0

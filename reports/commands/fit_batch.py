"""``crowdrank fit --method map|ml``: batch point estimates of BT or PL with intervals.

``--model crowdbt --method map`` is CrowdBT's MAP by EM (:func:`run_crowdbt_em`);
``--method trueskill`` (model ``bt``) is TrueSkill over the rank-broken pairs
(:func:`run_trueskill`).

Called by :mod:`crowdrank.reports.commands.fit` as ``run(args, data, priors)``; :func:`add_arguments`
adds the options of this method to the ``fit`` parser. ``map`` maximises the posterior
under the ``--prior-mu``/``--prior-sigma`` Normal prior (the same prior NUTS and the online
updates read); ``ml`` maximises the likelihood under ``Σ λ = 0`` and refuses data whose
comparison graph is not strongly connected. Writes

- ``DIR/items.csv``: ``rank, item, mu, sigma2, sd`` like the other methods (``mu`` the
  estimate, ``sd`` Laplace's, or the bootstrap's with ``--intervals bootstrap``, which adds
  the percentile intervals ``score_lo, score_hi, rank_lo, rank_hi``);
- ``DIR/fit.json``: solver, iterations, final gradient norm (max |∂f/∂λ|), converged or
  not, the objective, the prior, timings, and the bootstrap's settings.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from crowdrank.models.errors import UsageError

METHODS = ("map", "ml")


def add_arguments(p) -> None:
    """The ``fit`` options of the batch methods."""
    b = p.add_argument_group("batch (--method map or ml; models bt and pl)")
    b.add_argument("--solver", choices=("newton", "mm", "gradient"), default="newton",
                   help="Newton (analytic Hessian), MM (Hunter 2004) or gradient ascent")
    b.add_argument("--tol", type=float, default=None,
                   help="stop when max |gradient| <= tol (default 1e-9; CrowdBT's EM 1e-6)")
    b.add_argument("--max-iter", type=int, default=None,
                   help="iteration cap (default: 100 Newton, 100000 MM/gradient)")
    b.add_argument("--intervals", choices=("laplace", "bootstrap"), default="laplace",
                   help="sd from Laplace (inverse Hessian) or from bootstrap refits")
    b.add_argument("--bootstrap", type=int, default=1000, metavar="B",
                   help="bootstrap resamples (--intervals bootstrap)")
    b.add_argument("--interval-prob", type=float, default=0.95,
                   help="probability of the bootstrap percentile intervals")
    b.add_argument("--processes", type=int, default=min(2, os.cpu_count() or 1),
                   help="processes for the bootstrap refits")
    t = p.add_argument_group("TrueSkill (--method trueskill; model bt)")
    t.add_argument("--ts-beta", type=float, default=None,
                   help="performance sd β (default prior-sigma/2)")
    t.add_argument("--ts-tau", type=float, default=0.0, help="dynamics τ added before a game")
    t.add_argument("--ts-draw-probability", type=float, default=0.0,
                   help="sets the draw margin (no draws reach it from a file: ties are split)")


def run(args, data, priors) -> int:
    from crowdrank.inference.batch.api import fit_with_intervals

    if (args.tol is not None and args.tol <= 0) or args.processes < 1:
        raise UsageError("--tol must be > 0 and --processes >= 1")
    if args.method == "trueskill":
        return run_trueskill(args, data, priors)
    if args.model == "crowdbt" and args.method == "map":
        return run_crowdbt_em(args, data, priors)
    if args.model not in ("bt", "pl"):
        raise UsageError(f"--method {args.method} fits models bt and pl (and crowdbt with "
                         f"--method map, by EM), not {args.model!r}")
    if args.intervals == "bootstrap" and args.bootstrap < 2:
        raise UsageError(f"--bootstrap needs at least 2 resamples, got {args.bootstrap}")
    if not 0 < args.interval_prob < 1:
        raise UsageError(f"--interval-prob must be in (0, 1), got {args.interval_prob}")
    fit = fit_with_intervals(data, args.model, priors, intervals=args.intervals,
                             method=args.method, solver=args.solver,
                             tol=1e-9 if args.tol is None else args.tol,
                             max_iter=args.max_iter,
                             resamples=args.bootstrap, seed=args.seed,
                             processes=args.processes, prob=args.interval_prob,
                             progress=not args.no_progress)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    fit.items_table().to_csv(out / "items.csv", index=False, float_format="%.17g")
    (out / "fit.json").write_text(json.dumps(fit.fit_dict(), indent=1))
    state = "converged" if fit.converged else f"NOT converged ({fit.reason})"
    print(f"{args.model} {args.method} by {args.solver}: {state} in {fit.iterations} "
          f"iterations, max |gradient| {fit.grad_norm:.2e}, {fit.seconds:.2f} s"
          + (f"; bootstrap {args.bootstrap} refits in "
             f"{fit.extra['bootstrap']['seconds']:.1f} s" if args.intervals == "bootstrap"
             else "")
          + f"; wrote {out / 'items.csv'} and {out / 'fit.json'}")
    return 0


def run_crowdbt_em(args, data, priors) -> int:
    """CrowdBT's MAP by EM (:mod:`crowdrank.inference.batch.crowdbt_em`): ``items.csv`` (Laplace sd with
    the accuracies fixed), ``workers.csv`` (``worker, eta, a, b``: the MAP accuracy and the
    Beta of its responsibilities) and ``fit.json``."""
    from crowdrank.inference.batch.crowdbt_em import fit_crowdbt_em

    if args.intervals != "laplace":
        raise UsageError("CrowdBT by EM reports Laplace intervals only (no bootstrap yet)")
    fit = fit_crowdbt_em(data, priors, tol=1e-6 if args.tol is None else args.tol,
                         max_iter=args.max_iter or 5000)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    fit.items_table().to_csv(out / "items.csv", index=False, float_format="%.17g")
    fit.workers_table().to_csv(out / "workers.csv", index=False, float_format="%.17g")
    (out / "fit.json").write_text(json.dumps(fit.fit_dict(), indent=1))
    state = "converged" if fit.converged else "NOT converged (max-iter)"
    print(f"crowdbt map by EM: {state} in {fit.iterations} iterations, max |gradient| "
          f"{fit.grad_norm:.2e}, {fit.seconds:.2f} s; wrote {out / 'items.csv'}, "
          f"{out / 'workers.csv'} and {out / 'fit.json'}")
    return 0


def run_trueskill(args, data, priors) -> int:
    """TrueSkill (:mod:`crowdrank.inference.online.trueskill`): ``posterior.json`` and ``items.csv``
    like the other online methods."""
    from crowdrank.inference.online.trueskill import fit_trueskill

    if args.model != "bt":
        raise UsageError(f"--method trueskill rates pairs: use --model bt, not {args.model!r}")
    if not 0 <= args.ts_draw_probability < 1 or args.ts_tau < 0 or (
            args.ts_beta is not None and not args.ts_beta > 0):
        raise UsageError("need --ts-beta > 0, --ts-tau >= 0 and 0 <= --ts-draw-probability < 1")
    post = fit_trueskill(data, priors, beta=args.ts_beta, tau=args.ts_tau,
                         draw_probability=args.ts_draw_probability,
                         progress=not args.no_progress)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    post.to_json(out / "posterior.json")
    post.items_table().to_csv(out / "items.csv", index=False, float_format="%.17g")
    print(f"trueskill: {data.n_pairs()} pairs, {len(post.items)} items, {post.seconds:.3f} s; "
          f"wrote {out / 'posterior.json'} and {out / 'items.csv'}")
    return 0

"""``crowdrank fit --method map|ml``: batch point estimates of BT or PL with intervals.

Called by :mod:`reports.commands.fit` as ``run(args, data, priors)``; :func:`add_arguments`
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

from models.errors import UsageError

METHODS = ("map", "ml")


def add_arguments(p) -> None:
    """The ``fit`` options of the batch methods."""
    b = p.add_argument_group("batch (--method map or ml; models bt and pl)")
    b.add_argument("--solver", choices=("newton", "mm", "gradient"), default="newton",
                   help="Newton (analytic Hessian), MM (Hunter 2004) or gradient ascent")
    b.add_argument("--tol", type=float, default=1e-9,
                   help="stop when max |gradient| <= tol")
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


def run(args, data, priors) -> int:
    from inference.batch.api import fit_with_intervals

    if args.model not in ("bt", "pl"):
        raise UsageError(f"--method {args.method} fits models bt and pl, not {args.model!r}")
    if args.intervals == "bootstrap" and args.bootstrap < 2:
        raise UsageError(f"--bootstrap needs at least 2 resamples, got {args.bootstrap}")
    if not 0 < args.interval_prob < 1:
        raise UsageError(f"--interval-prob must be in (0, 1), got {args.interval_prob}")
    if args.tol <= 0 or args.processes < 1:
        raise UsageError("--tol must be > 0 and --processes >= 1")
    fit = fit_with_intervals(data, args.model, priors, intervals=args.intervals,
                             method=args.method, solver=args.solver, tol=args.tol,
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

"""``crowdrank fit --method map|ml``: batch point estimates of BT or PL with intervals.

``--model crowdbt --method map`` is CrowdBT's MAP by EM (:func:`write_em`);
``--method trueskill`` (model ``bt``) is TrueSkill over the rank-broken pairs
(:func:`run_trueskill`).

Called by :mod:`crowdrank.reports.commands.fit` as ``run_method(args, options)`` with the
entry's options (:mod:`crowdrank.inference.methods`, where the options and their defaults
are). ``map`` maximises the posterior
under the ``--prior-mu``/``--prior-sigma`` Normal prior (the same prior NUTS and the online
updates read); ``ml`` maximises the likelihood under ``Σ λ = 0`` and refuses data whose
comparison graph is not strongly connected. Writes

- ``DIR/items.csv``: ``rank, item, mu, sigma2, sd`` like the other methods (``mu`` the
  estimate, ``sd`` Laplace's, or the bootstrap's with ``--intervals bootstrap``, which adds
  the percentile intervals ``score_lo, score_hi, rank_lo, rank_hi``);
- ``DIR/fit.json``: solver, iterations, final gradient norm (max |∂f/∂λ|), converged or
  not, the objective, the prior, timings, and the bootstrap's settings;
- ``DIR/posterior.json`` (and ``posterior.nc`` with the bootstrap's refits): the
  :class:`~crowdrank.inference.posterior.Posterior`, read back by
  :func:`~crowdrank.inference.posterior_io.read_posterior`.
"""

from __future__ import annotations

import json
from pathlib import Path


def run_method(args, options) -> int:
    """``--method map|ml`` through its entry (:mod:`crowdrank.inference.methods`): BT/PL by
    the batch solvers, CrowdBT's MAP by EM (:func:`write_em`)."""
    from crowdrank.inference import methods
    from crowdrank.inference.posterior_io import write_posterior
    from crowdrank.reports.commands.fit import load, report_khat

    data, priors = load(args)
    post = methods.get(args.method).run(data, args.model, priors, options, seed=args.seed,
                                        progress=not args.no_progress)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_posterior(post, out)
    if post.method == "em":
        rc = write_em(post.native, out)
        report_khat(args, post, data, priors)
        return rc
    fit = post.native
    fit.items_table().to_csv(out / "items.csv", index=False, float_format="%.17g")
    (out / "fit.json").write_text(json.dumps(fit.fit_dict(), indent=1))
    state = "converged" if fit.converged else f"NOT converged ({fit.reason})"
    boot = options.intervals == "bootstrap"
    print(f"{args.model} {args.method} by {options.solver}: {state} in {fit.iterations} "
          f"iterations, max |gradient| {fit.grad_norm:.2e}, {fit.seconds:.2f} s"
          + (f"; bootstrap {options.bootstrap} refits in "
             f"{fit.extra['bootstrap']['seconds']:.1f} s" if boot else "")
          + f"; wrote {out / 'items.csv'} and {out / 'fit.json'}")
    report_khat(args, post, data, priors)
    return 0


def write_em(fit, out: Path) -> int:
    """CrowdBT's MAP by EM (:mod:`crowdrank.inference.batch.crowdbt_em`): ``items.csv``
    (Laplace sd with the accuracies fixed), ``workers.csv`` (``worker, eta, a, b``: the MAP
    accuracy and the Beta of its responsibilities) and ``fit.json``."""
    fit.items_table().to_csv(out / "items.csv", index=False, float_format="%.17g")
    fit.workers_table().to_csv(out / "workers.csv", index=False, float_format="%.17g")
    (out / "fit.json").write_text(json.dumps(fit.fit_dict(), indent=1))
    state = "converged" if fit.converged else "NOT converged (max-iter)"
    print(f"crowdbt map by EM: {state} in {fit.iterations} iterations, max |gradient| "
          f"{fit.grad_norm:.2e}, {fit.seconds:.2f} s; wrote {out / 'items.csv'}, "
          f"{out / 'workers.csv'} and {out / 'fit.json'}")
    return 0


def run_trueskill(args, options) -> int:
    """TrueSkill (:mod:`crowdrank.inference.online.trueskill`) through its entry:
    ``posterior.json`` and ``items.csv`` like the other online methods."""
    from crowdrank.inference import methods
    from crowdrank.reports.commands.fit import load

    data, priors = load(args)
    post = methods.get("trueskill").run(data, args.model, priors, options, seed=args.seed,
                                        progress=not args.no_progress).native
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    post.to_json(out / "posterior.json")
    post.items_table().to_csv(out / "items.csv", index=False, float_format="%.17g")
    print(f"trueskill: {data.n_pairs()} pairs, {len(post.items)} items, {post.seconds:.3f} s; "
          f"wrote {out / 'posterior.json'} and {out / 'items.csv'}")
    return 0

"""``crowdrank fit --method advi|fullrank-advi|lowrank-advi|laplace-ppl|pathfinder``: the
PPLs' own approximations (:mod:`crowdrank.inference.approx`), written like every draw-based
method (``posterior.nc`` in the NUTS layout, ``posterior.json``, ``items.csv``), with the
optimiser's convergence and the PSIS k̂ verdict printed ("not reliable" above 0.7).
"""

from __future__ import annotations

from pathlib import Path


def summary_lines(post) -> list[str]:
    """The convergence line and the PSIS line of a fitted approximation."""
    d = post.diagnostics
    conv = "converged" if d.get("converged") else "NOT converged"
    elbo = d.get("final_elbo", d.get("final_log_p"))
    what = "ELBO" if "final_elbo" in d else "log p at the mode"
    line1 = (f"{post.method} [{d.get('backend')}, {post.model}]: {conv} after "
             f"{d.get('steps')} steps" + (f", final {what} {elbo:.6g}" if elbo is not None
                                          else "") + f"; {d.get('stopping_rule', '')}")
    k = d.get("psis_khat")
    if k is None:
        line2 = "PSIS k̂: n/a (this back-end gives no density of its draws)"
    else:
        line2 = (f"PSIS k̂ = {k:.3f}: {d.get('psis_label')}"
                 + (" (k̂ > 0.7: the approximation misses mass of the posterior; do not "
                    "trust its sds or tails)" if d.get("psis_label") == "not reliable" else "")
                 + (" — draws are the PSIS resample" if d.get("psis_resampled") else ""))
    return [line1, line2]


def run_method(args, options) -> int:
    from crowdrank.inference import methods
    from crowdrank.inference.posterior_io import write_posterior
    from crowdrank.reports.commands.fit import load

    data, priors = load(args)
    post = methods.get(args.method).run(data, args.model, priors, options, seed=args.seed,
                                        progress=not args.no_progress)
    out = Path(args.out)
    paths = write_posterior(post, out)
    post.items_table().to_csv(out / "items.csv", index=False, float_format="%.17g")
    for line in summary_lines(post):
        print(line)
    print(f"{len(post.items)} items, {len(post.workers)} workers, {post.seconds:.1f} s; "
          f"wrote {', '.join(paths.values())} and {out / 'items.csv'}")
    return 0

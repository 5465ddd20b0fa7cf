"""``crowdrank fit --method ep``: expectation propagation over an online update.

Called by :mod:`crowdrank.reports.commands.fit` as ``run_method(args, options)`` with the
``ep`` entry's options (:mod:`crowdrank.inference.methods`). Runs
:func:`crowdrank.inference.online.ep.fit_ep` through the entry (the one-pass options
``--taylor``, ``--score-alpha``, ``--kappa``, ``--kappa2``, ``--bt-breaking`` and the
Weng–Lin parameters choose the update it refines), prints one line per pass (the largest
mean change in sds, log-variance and log-concentration changes, improper cavities) and
writes ``DIR/posterior.json`` (the schema of every online result, ``algorithm =
"ep-…"``, the per-pass log under ``options.ep``) and ``DIR/items.csv``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from crowdrank.models.errors import UsageError


def _line(entry: dict) -> str:
    return (f"  pass {entry['pass']:>3}: max |Δμ|/σ {entry['max_dmu_sd']:.2e}, "
            f"max |Δlog σ²| {entry['max_dlog_sigma2']:.2e}, "
            f"max |Δlog α| {entry['max_dlog_alpha']:.2e}, "
            f"improper cavities {entry['improper_cavities']}")


def run_method(args, options) -> int:
    from crowdrank.inference import methods
    from crowdrank.reports.commands.fit import load, report_khat

    if args.state_in:
        raise UsageError("--state-in resumes a one-pass run; EP starts from the prior")
    data, priors = load(args)
    quiet = args.no_progress
    t0 = time.perf_counter()
    result = methods.get("ep").fn("fit")(
        data, args.model, priors, options, seed=args.seed, progress=not quiet,
        callback=None if quiet else (lambda e: print(_line(e), file=sys.stderr, flush=True)))
    post = result.native
    seconds = time.perf_counter() - t0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    post.to_json(out / "posterior.json")
    post.items_table().to_csv(out / "items.csv", index=False, float_format="%.17g")
    ep = post.options["ep"]
    clamps = {k: v for k, v in post.clamped.items() if v}
    print(f"{post.algorithm}: {ep['passes_run']} pass(es) of {data.n_rankings} rankings, "
          f"{'converged' if ep['converged'] else 'NOT converged'} (tol {ep['tol']:g}, "
          f"damping {ep['damping']:g}), improper cavities {ep['improper_cavities']}, "
          f"{seconds:.3f} s; guards: {clamps or 'none'}; wrote {out / 'posterior.json'} and "
          f"{out / 'items.csv'}")
    report_khat(args, result, data, priors)
    return 0

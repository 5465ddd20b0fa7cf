"""``crowdrank fit``: one model, one method (NUTS or online), written to a folder.

The options shared by both methods (data, model, priors, seed, output) are parsed and
turned into a :class:`crowdrank.models.data.Rankings` and a :class:`crowdrank.models.priors.Priors` here, so
that the two methods always receive the same data and the same priors.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from crowdrank.models.priors import DEFAULT_WORKER_PRIOR, Priors, build_priors
from crowdrank.models.registry import MODELS
from crowdrank.models.registry import get as get_model


def register(sub) -> None:
    p = sub.add_parser(
        "fit", help="fit one model by NUTS or by online moment matching",
        description="Fit one model to a rankings file, by NUTS (NumPyro or PyMC) or by the "
                    "hand-written online update, and write the posterior to --out.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("data", help="rankings file (rankings CSV, pairwise CSV, PrefLib, ...) or "
                                "a shared data set name (babyface, readlevel, ...)")
    from crowdrank.reports.commands.fit_pairs import PAIR_MODELS
    p.add_argument("--model", choices=MODELS + PAIR_MODELS, default="couple",
                   help="contextual-bt, crowdbt-bias, crowdbt-domain read a pairwise CSV "
                        "with extra columns (--covariates, --category): see docs/guide.md")
    p.add_argument("--method", choices=("nuts", "online", "ep", "map", "ml", "trueskill"),
                   default="online",
                   help="nuts (the reference), online (one pass of moment matching), ep "
                        "(expectation propagation over the same update: passes that revisit "
                        "every ranking's contribution), or the batch point estimates of bt/pl: "
                        "map (the prior as a ridge) and ml (sum-to-zero), or trueskill (bt: "
                        "TrueSkill over the rank-broken pairs)")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--seed", type=int, default=0)
    g = p.add_argument_group("priors (shared by both methods)")
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
    n = p.add_argument_group("NUTS (--method nuts)")
    n.add_argument("--backend", choices=("numpyro", "pymc"), default="numpyro")
    n.add_argument("--chains", type=int, default=4)
    n.add_argument("--tune", type=int, default=1000)
    n.add_argument("--draws", type=int, default=1000)
    n.add_argument("--target-accept", type=float, default=0.8)
    n.add_argument("--precision", choices=("float64", "float32"), default="float64",
                   help="NumPyro floating point: float32 is ~2x faster per gradient")
    n.add_argument("--eta-update", choices=("nuts", "gibbs"), default="nuts",
                   help="COUPLE, NumPyro: move the worker simplexes by an exact Gibbs step "
                        "given the scores, NUTS on the scores only (docs/design.md 5.3a)")
    n.add_argument("--gibbs-sweeps", type=int, default=1,
                   help="--eta-update gibbs: Gibbs sweeps of the simplexes per iteration")
    n.add_argument("--init-from", default=None,
                   help="an online posterior.json: each chain starts at its own draw of it, "
                        "the mass matrix from its variances (a warm start)")
    o = p.add_argument_group("online (--method online)")
    o.add_argument("--taylor", choices=("paper", "full", "plugin", "quadrature"),
                   default="paper",
                   help="OnlineGBMM approximation of E[softmax] (quadrature: Gauss–Hermite "
                        "moment matching, also for the score step); CrowdBT takes paper "
                        "(Chen et al.'s expansion) or quadrature (over the pair's score "
                        "difference)")
    o.add_argument("--score-alpha", choices=("updated", "prior"), default="updated",
                   help="which α the OnlineGBMM score step uses")
    o.add_argument("--order", choices=("file", "shuffle"), default="file",
                   help="pass order: the file's, or a seeded shuffle (of a streamed file: an "
                        "external shuffle through temporary bucket files)")
    o.add_argument("--chunk-size", type=int, default=1 << 17,
                   help="rankings read and updated at a time when the file is streamed "
                        "(the default for rankings/pairwise/wide CSV, worker-winner-loser, "
                        "Parquet); memory is bounded by it")
    o.add_argument("--in-memory", action="store_true",
                   help="read the whole file first instead of streaming it (same numbers)")
    o.add_argument("--passes", type=int, default=None,
                   help="passes over the data (default 1; with --method ep the most passes, "
                        "default 10, stopping once converged)")
    o.add_argument("--damping", type=float, default=0.0,
                   help="--method ep: weight kept on a ranking's previous site, in [0, 1) "
                        "(default 0, undamped; 0.5 from the pass after one that met an "
                        "improper cavity)")
    o.add_argument("--ep-tol", type=float, default=1e-3,
                   help="--method ep: converged when no mean moves by more than this many "
                        "sds, and no log variance or log concentration by more than this")
    o.add_argument("--strict", action="store_true",
                   help="error instead of a counted clamp on a non-positive α or σ²")
    o.add_argument("--state-in", default=None, help="resume from a saved online state")
    o.add_argument("--kappa", type=float, default=1e-4, help="σ² floor factor of Eq. (12)")
    o.add_argument("--kappa2", type=float, default=1e-4,
                   help="floor of R_t (appendix 1.1.2) in OnlineGBMM / CrowdBT")
    o.add_argument("--bt-breaking", choices=("game", "pairs"), default="game",
                   help="OnlineBT per ranking (openskill's full pairing) or per rank-broken pair")
    o.add_argument("--wl-beta", type=float, default=None,
                   help="Weng–Lin β (default prior-sigma/2, openskill's convention)")
    o.add_argument("--wl-kappa", type=float, default=None, help="Weng–Lin κ (default 1e-4)")
    o.add_argument("--wl-tau", type=float, default=None, help="Weng–Lin τ dynamics (default 0)")
    o.add_argument("--wl-gamma", default=None,
                   help="Weng–Lin γ: sigma/c (openskill's default), 1/k, or a number")
    from crowdrank.reports.commands import fit_batch
    fit_batch.add_arguments(p)
    from crowdrank.reports.commands import fit_pairs
    fit_pairs.add_arguments(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.set_defaults(func=run)


def load_priors(args, data) -> Priors:
    """The :class:`Priors` both methods read, from ``--prior-*`` and ``--worker-prior*``."""
    priors = build_priors(data, worker_prior=args.worker_prior,
                          worker_prior_file=args.worker_prior_file,
                          gold=getattr(args, "worker_prior_gold", None),
                          mu0=args.prior_mu, sigma0=args.prior_sigma)
    return get_model(args.model).worker_priors(priors, data)


def run(args) -> int:
    from crowdrank.models.io import read_data
    from crowdrank.reports.commands.fit_pairs import PAIR_MODELS

    if args.model in PAIR_MODELS:
        from crowdrank.reports.commands import fit_pairs
        return fit_pairs.run(args)

    if getattr(args, "passes", None) is None:
        from crowdrank.inference.online.ep import EP_PASSES
        args.passes = EP_PASSES if args.method == "ep" else 1
    if args.method == "online" and not getattr(args, "in_memory", False):
        from crowdrank.reports.commands import fit_online
        path = fit_online.stream_source(args.data)
        if path is not None:
            return fit_online.run_stream(args, path)
    data, _ = read_data(args.data)
    priors = load_priors(args, data)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    if args.method in ("map", "ml", "trueskill"):
        from crowdrank.reports.commands import fit_batch
        return fit_batch.run(args, data, priors)
    if args.method == "nuts":
        from crowdrank.reports.commands import fit_nuts
        return fit_nuts.run(args, data, priors)
    if args.method == "ep":
        from crowdrank.reports.commands import fit_ep
        return fit_ep.run(args, data, priors)
    from crowdrank.reports.commands import fit_online
    return fit_online.run(args, data, priors)

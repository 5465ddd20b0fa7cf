"""``crowdrank replicate``: the COUPLE paper's experiments ([Pan18], Sect. 5), our numbers
beside the paper's. The logic is in :mod:`crowdrank.validation.studies.replicate`, the page in
:mod:`crowdrank.reports.replicate_html`; grid tasks are cached in ``--out/cache`` and run on local
processes or, with ``--scheduler``, on a Dask cluster.
"""

from __future__ import annotations

import sys

from crowdrank.reports.help import HelpFormatter

EXPERIMENT_HELP = {
    "fig7": "Fig. 7: four synthetic settings (expert, amateur, spammer, malicious) at "
            "L=1000, W=500, T=900, k<=4; accuracy of COUPLE, CrowdBT, OnlinePL, OnlineBT "
            "after 5..100 % of the samples",
    "babyface": "Tables 6-7: BabyFace x5, every method over R orders + PeerGrader; six "
                "lowest-quality workers; cleaned re-run (paper: COUPLE ~92.30 %)",
    "cost": "Fig. 8 / Table 2: time per ranking on BabyFace and at paper scale; COUPLE : "
            "OnlinePL beside the paper's 2.8",
    "readlevel": "the BabyFace protocol on the reading-level pairs [Chen13]",
    "preflib": "the BabyFace protocol on PrefLib dots and puzzle (no worker ids)",
    "crowdc": "CrowDC's simulation study [Wang23]: n, t, r, g, p grid, --repeats data sets "
              "x --divisions group divisions per setting, Kendall tau against the truth "
              "beside BTL on every pair (paper: 45-50 % saved, >= 95 % of BTL's tau for "
              "n >= 100, t >= 5, r = 0.8, p = 12)",
}
#: Experiments of other papers, each with its own driver and page.
OTHER = ("crowdc",)


def register(sub) -> None:
    from crowdrank.validation.studies.replicate import EXPERIMENTS

    experiments = tuple(EXPERIMENTS) + tuple(x for x in OTHER if x not in EXPERIMENTS)
    p = sub.add_parser(
        "replicate", help="replicate the COUPLE paper's experiments (Sect. 5) beside its "
                          "published numbers",
        description="Run one of the COUPLE paper's experiments (Pan, Han & Tsang 2018, "
                    "Sect. 5) and write DIR/<experiment>.html (figures embedded), "
                    "DIR/results.json and DIR/results.csv, with the paper's published "
                    "number beside ours wherever its text states one. Experiments: "
                    + "; ".join(f"{k}: {v}" for k, v in EXPERIMENT_HELP.items())
                    + ". Grid tasks are cached in DIR/cache: a rerun reuses them, an "
                      "interrupted run resumes.",
        formatter_class=HelpFormatter)
    p.add_argument("experiment", choices=experiments,
                   help="the experiment to run (listed above)")
    p.add_argument("--out", default=None, help="output folder (default replicate-EXPERIMENT)")
    p.add_argument("--repeats", type=int, default=None, metavar="R",
                   help="random sample orders (fig7, real data) or timing repeats (cost); "
                        "default 5 (fig7, cost) or 100 (real data); the paper used 10^3")
    p.add_argument("--seed", type=int, default=0,
                   help="master seed: data of a setting and the order of each repeat derive "
                        "from it")
    p.add_argument("--scheduler", default=None, metavar="ADDR",
                   help="run the grid on Dask distributed: 'local' (a LocalCluster of "
                        "--processes workers) or a scheduler address tcp://host:8786 "
                        "(default $CROWDRANK_SCHEDULER, else local processes)")
    p.add_argument("--processes", type=int, default=None,
                   help="parallel local processes (or LocalCluster workers); 1 = in-process")
    p.add_argument("--nuts", action="store_true",
                   help="also fit COUPLE and CrowdBT by NUTS (the real data unduplicated; "
                        "fig7 at a reduced scale the page states) for the posterior-mean "
                        "accuracy")
    p.add_argument("--nuts-scale", default=None, metavar="L,W,T,K",
                   help="fig7: the synthetic sizes of the NUTS reference (default "
                        "60,20,60,4; NUTS cost grows with W*T)")
    p.add_argument("--simulator", default="story",
                   choices=("story", "normalized", "fixed"),
                   help="fig7: how a worker's report is generated: 'story' the COUPLE "
                        "story (true order from PL(lambda), stagewise offsets in the true "
                        "order); 'normalized' COUPLE's own Eq. 4 normalised over the k! "
                        "orderings; 'fixed' one ground-truth order of all items (no PL "
                        "draw) corrupted stagewise (Sect. 5.1 read literally)")
    p.add_argument("--scale", default=None, metavar="L,W,T,K",
                   help="fig7/cost synthetic sizes instead of the paper's 1000,500,900,4 "
                        "(items, workers, tasks per worker, largest k)")
    p.add_argument("--duplicate", type=int, default=None, metavar="D",
                   help="repeat the real data D times (paper: 5 for BabyFace; default "
                        "5 for babyface/cost, 1 otherwise)")
    p.add_argument("--settings", default=None, metavar="n,t,r,g,p[;...]",
                   help="crowdc: the settings to run, 'paper' (our reading of its grid, "
                        "68 settings) or 'claim' (those of its claim); default paper")
    p.add_argument("--divisions", type=int, default=20,
                   help="crowdc: random group divisions per data set (paper: 20)")
    p.add_argument("--no-progress", action="store_true", help="no progress output")
    p.set_defaults(func=run)


def parse_scale(text: str | None, option: str = "--scale") -> dict | None:
    from crowdrank.models.errors import UsageError

    if text is None:
        return None
    parts = text.split(",")
    try:
        vals = [int(x) for x in parts]
    except ValueError:
        vals = []
    if len(vals) != 4 or min(vals) < 1 or vals[3] < 2 or vals[3] > vals[0]:
        raise UsageError(f"{option} must be L,W,T,K (positive integers, 2 <= K <= L), "
                         f"got {text!r}")
    return dict(zip(("n_items", "n_workers", "tasks_per_worker", "kmax"), vals))


def run(args) -> int:
    from pathlib import Path

    from crowdrank.models.errors import UsageError
    from crowdrank.reports.replicate_html import write_all
    from crowdrank.validation.runtime.grid import SchedulerError, resolve_scheduler
    from crowdrank.validation.studies.replicate import run_experiment

    out = Path(args.out or f"replicate-{args.experiment}")
    if args.experiment == "crowdc":
        return run_crowdc(args, out)
    if args.settings is not None or args.divisions != 20:
        raise UsageError("--settings and --divisions are options of crowdc only")
    repeats = args.repeats if args.repeats is not None else (
        5 if args.experiment in ("fig7", "cost") else 100)
    if args.duplicate is not None and args.duplicate < 1:
        raise UsageError("--duplicate must be >= 1")
    if args.processes is not None and args.processes < 1:
        raise UsageError("--processes must be >= 1")
    try:
        summary = run_experiment(args.experiment, out, repeats=repeats, seed=args.seed,
                                 scheduler=resolve_scheduler(args.scheduler),
                                 processes=args.processes, nuts=args.nuts,
                                 progress=not args.no_progress, scale=parse_scale(args.scale),
                                 duplicate=args.duplicate, simulator=args.simulator,
                                 nuts_scale=parse_scale(args.nuts_scale, "--nuts-scale"))
    except SchedulerError as exc:
        raise UsageError(f"--scheduler: {exc}") from None
    files = write_all(summary, out)
    print(f"replicate {args.experiment}: {summary['seconds_total']:.1f} s; wrote "
          + ", ".join(str(p) for p in files.values()), file=sys.stderr)
    return 0


def run_crowdc(args, out) -> int:
    from crowdrank.models.errors import UsageError
    from crowdrank.reports.replicate_crowdc_html import write_all
    from crowdrank.validation.runtime.grid import SchedulerError, resolve_scheduler
    from crowdrank.validation.studies.replicate_crowdc import parse_settings, run_experiment

    if args.processes is not None and args.processes < 1:
        raise UsageError("--processes must be >= 1")
    try:
        summary = run_experiment(out, repeats=20 if args.repeats is None else args.repeats,
                                 seed=args.seed, scheduler=resolve_scheduler(args.scheduler),
                                 processes=args.processes, progress=not args.no_progress,
                                 settings=parse_settings(args.settings),
                                 divisions=args.divisions)
    except SchedulerError as exc:
        raise UsageError(f"--scheduler: {exc}") from None
    files = write_all(summary, out)
    cl = summary["claim"]
    print(f"replicate crowdc: {summary['seconds_total']:.1f} s; claim settings "
          f"{cl['settings']}, saving 45-50 %: {cl['saving_45_50']}, lowest tau ratio "
          f"{cl['min_tau_ratio']}; wrote " + ", ".join(str(p) for p in files.values()),
          file=sys.stderr)
    return 0

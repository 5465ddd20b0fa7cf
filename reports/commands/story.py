"""``crowdrank story``: the generative story told for teaching (see :mod:`crowdrank.reports.story`)."""

from __future__ import annotations

import sys

from crowdrank.models.errors import UsageError
from crowdrank.models.simulate import WORKER_TYPES, sim_models
from crowdrank.reports.help import HelpFormatter
from crowdrank.validation.prior_predictive import PRIOR_KINDS


def register(sub) -> None:
    p = sub.add_parser(
        "story", help="the generative story, narrated on one seeded example, with figures",
        description="Walk through one small seeded example of the model's generative story: "
                    "true scores, a worker's η, a task and its true order, each stage's "
                    "candidates, PL probabilities, η̄, the true winner and what the worker "
                    "reported; then show that the paper's stagewise likelihood (Eq. 4) does "
                    "not sum to 1 over orderings for k >= 3 and what normalised COUPLE "
                    "changes; then prior-predictive figures per worker type. Writes "
                    "DIR/story.md, the same story as one self-contained page DIR/story.html "
                    "(figures embedded), DIR/story.json and DIR/figures/story_*.png. With "
                    "--prior-predictive it adds prior predictive checks of the inference "
                    "priors (geometric, flat, gold): data sets drawn from each prior with the "
                    "model's simulator, summarised by the predictive-check statistics, in "
                    "DIR/prior_predictive.{json,csv} and section 8 of the page.",
        formatter_class=HelpFormatter)
    p.add_argument("--model", choices=sim_models(), default="couple",
                   help="the model whose story is told")
    p.add_argument("--setting", choices=tuple(WORKER_TYPES), default="amateur",
                   help="the featured worker's type")
    p.add_argument("--seed", type=int, default=0, help="seed of every random choice")
    p.add_argument("--items", type=int, default=8, help="items in the example (4..26)")
    p.add_argument("--out", default="story-out", help="output folder")
    p.add_argument("--markdown", default="story.md",
                   help="name of the Markdown file inside --out")
    p.add_argument("--no-figures", action="store_true", help="skip the PNG figures")
    p.add_argument("--print", dest="print_md", action="store_true",
                   help="also print the Markdown to stdout")
    p.add_argument("--no-html", action="store_true", help="skip DIR/story.html")
    g = p.add_argument_group("prior predictive checks")
    g.add_argument("--prior-predictive", action="store_true",
                   help="add prior predictive checks of the inference priors")
    g.add_argument("--priors", default=",".join(PRIOR_KINDS),
                   help=f"comma-separated priors to check, from {', '.join(PRIOR_KINDS)}")
    g.add_argument("--prior-draws", type=int, default=100,
                   help="data sets drawn from each prior")
    g.add_argument("--prior-workers", type=int, default=20, help="workers per data set")
    g.add_argument("--prior-tasks", type=int, default=30, help="tasks per worker")
    g.add_argument("--prior-items", type=int, default=30, help="items per data set")
    g.add_argument("--prior-k", type=int, default=4,
                   help="items per task (pairwise models: always 2)")
    g.add_argument("--geometric", default="a0=10,a=6", metavar="a0=..,a=..",
                   help="the geometric prior's parameters")
    g.add_argument("--gold-tasks", type=int, default=20,
                   help="gold tasks per worker behind the gold prior")
    p.set_defaults(func=run)


def run(args) -> int:
    from crowdrank.reports.story import tell

    if "/" in args.markdown or not args.markdown.endswith(".md"):
        raise UsageError(f"--markdown must be a plain file name ending in .md, got "
                         f"{args.markdown!r}")
    prior_check = _prior_options(args) if args.prior_predictive else None
    story = tell(args.model, args.setting, args.seed, out=args.out, n_items=args.items,
                 markdown_name=args.markdown, figures=not args.no_figures,
                 prior_check=prior_check, html=not args.no_html)
    if args.print_md:
        print(story.markdown)
    z = story.facts["normalizer"]
    print(f"story: {args.model}, {args.setting} worker, seed {args.seed}: reported "
          f"{' > '.join(story.facts['reported'])} (true {' > '.join(story.facts['true_order'])}); "
          f"Eq. 4 sums to {z['Z']:.4f} over the {z['k']}! orderings", file=sys.stderr)
    if prior_check is not None:
        for kind, v in story.facts["prior_check"]["priors"].items():
            print(f"prior predictive, {kind}: first-choice accuracy {v['first_choice_mean']:.3f}, "
                  f"{100 * v['worse_than_random']:.1f} % of workers worse than random",
                  file=sys.stderr)
    print(story.path)
    if story.html_path is not None:
        print(story.html_path)
    return 0


def _prior_options(args) -> dict:
    kinds = [k.strip() for k in args.priors.split(",") if k.strip()]
    bad = [k for k in kinds if k not in PRIOR_KINDS]
    if not kinds or bad:
        raise UsageError(f"--priors takes a comma-separated list from {', '.join(PRIOR_KINDS)}; "
                         f"got {args.priors!r}")
    for name in ("prior_draws", "prior_workers", "prior_tasks", "gold_tasks"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be at least 1")
    if args.prior_k < 2 or args.prior_k > args.prior_items:
        raise UsageError("--prior-k must be at least 2 and at most --prior-items")
    geo = {"a0": 10.0, "a": 6.0}
    for part in filter(None, args.geometric.split(",")):
        key, eq, val = part.partition("=")
        try:
            if not eq or key.strip() not in geo:
                raise ValueError
            geo[key.strip()] = float(val)
        except ValueError:
            raise UsageError(f"--geometric takes a0=..,a=.. (numbers > 0); got {part!r}") from None
    if not (geo["a0"] > 0 and geo["a"] > 0):
        raise UsageError("--geometric needs a0 > 0 and a > 0")
    return {"kinds": tuple(dict.fromkeys(kinds)), "n_draws": args.prior_draws,
            "n_workers": args.prior_workers, "tasks_per_worker": args.prior_tasks,
            "n_items": args.prior_items, "K": args.prior_k, "a0": geo["a0"], "a": geo["a"],
            "gold_tasks": args.gold_tasks, "progress": True}

"""``crowdrank story``: the generative story told for teaching (see :mod:`reports.story`)."""

from __future__ import annotations

import argparse
import sys

from models.errors import UsageError
from models.simulate import SIM_MODELS, WORKER_TYPES


def register(sub) -> None:
    p = sub.add_parser(
        "story", help="the generative story, narrated on one seeded example, with figures",
        description="Walk through one small seeded example of the model's generative story: "
                    "true scores, a worker's η, a task and its true order, each stage's "
                    "candidates, PL probabilities, η̄, the true winner and what the worker "
                    "reported; then show that the paper's stagewise likelihood (Eq. 4) does "
                    "not sum to 1 over orderings for k >= 3 and what normalised COUPLE "
                    "changes; then prior-predictive figures per worker type. Writes "
                    "DIR/story.md, DIR/story.json and DIR/figures/story_*.png.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--model", choices=SIM_MODELS, default="couple")
    p.add_argument("--setting", choices=tuple(WORKER_TYPES), default="amateur",
                   help="the featured worker's type")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--items", type=int, default=8, help="items in the example (4..26)")
    p.add_argument("--out", default="story-out", help="output folder")
    p.add_argument("--markdown", default="story.md",
                   help="name of the Markdown file inside --out")
    p.add_argument("--no-figures", action="store_true", help="skip the PNG figures")
    p.add_argument("--print", dest="print_md", action="store_true",
                   help="also print the Markdown to stdout")
    p.set_defaults(func=run)


def run(args) -> int:
    from reports.story import tell

    if "/" in args.markdown or not args.markdown.endswith(".md"):
        raise UsageError(f"--markdown must be a plain file name ending in .md, got "
                         f"{args.markdown!r}")
    story = tell(args.model, args.setting, args.seed, out=args.out, n_items=args.items,
                 markdown_name=args.markdown, figures=not args.no_figures)
    if args.print_md:
        print(story.markdown)
    z = story.facts["normalizer"]
    print(f"story: {args.model}, {args.setting} worker, seed {args.seed}: reported "
          f"{' > '.join(story.facts['reported'])} (true {' > '.join(story.facts['true_order'])}); "
          f"Eq. 4 sums to {z['Z']:.4f} over the {z['k']}! orderings", file=sys.stderr)
    print(story.path)
    return 0

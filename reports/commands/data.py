"""``crowdrank data summary``: what a rankings file (or a shared real data set) holds;
``crowdrank data list``: the registered shared data sets and whether their files are here;
``crowdrank data convert``: any supported format (or a shared set) to Parquet, streamed
chunk by chunk when the format allows. See ``docs/data.md``."""

from __future__ import annotations

import json

import numpy as np

from crowdrank.models.io import DATASETS, FORMATS
from crowdrank.reports.help import HelpFormatter


def register(sub) -> None:
    p = sub.add_parser("data", help="inspect data: crowdrank data summary FILE, data list",
                       description="Inspect rankings data.")
    dsub = p.add_subparsers(dest="data_command", metavar="ACTION")
    dsub.required = True
    s = dsub.add_parser(
        "summary", help="items, workers, rankings, k, rankings per worker, ties, connectedness",
        description="Summarise a rankings file: items, workers, rankings, the distribution "
                    "of k, rankings per worker, ties split, skipped lines, whether the "
                    "comparison graph is connected, and with ground truth how often the "
                    "reports agree with it. FILE may also be the name of a shared real data "
                    f"set ({', '.join(DATASETS)}), which brings its own truth.",
        formatter_class=HelpFormatter)
    _input_arguments(s, "file format")
    s.add_argument("--truth", default=None, help="ground-truth CSV item,score (higher = better)")
    s.add_argument("--strict-truth", action="store_true",
                   help="refuse a truth file that scores items absent from the data (by "
                        "default they are left out and counted in the notes)")
    s.add_argument("--json", action="store_true", help="print JSON instead of text")
    s.set_defaults(func=run_summary)
    ls = dsub.add_parser(
        "list", help="the shared real data sets, with descriptions and whether they are here",
        description="List the registered shared real data sets (the names FILE may take): "
                    "what each holds, its ground truth, where it comes from, and whether its "
                    "files are present under $CROWDRANK_DATASETS or ../shared/datasets. "
                    "Rankings sets come first; pair-table sets (for the pair-table models "
                    "crowdbt-bias, crowdbt-domain and contextual-bt) after them.")
    ls.add_argument("--json", action="store_true", help="print JSON instead of text")
    ls.set_defaults(func=run_list)
    c = dsub.add_parser(
        "convert", help="convert a rankings file (any supported format) to Parquet",
        description="Write the rankings of FILE (any supported format, or a shared data "
                    "set's name) to a Parquet file with columns worker (string), ranking "
                    "(list of item ids, best first) and task when the input has one. "
                    "Streamable formats are converted chunk by chunk in bounded memory; "
                    "ties are split and counted as every reader does (a Parquet ranking "
                    "has no ties).",
        formatter_class=HelpFormatter)
    _input_arguments(c, "input format")
    c.add_argument("--out", required=True, help="the Parquet file to write (.parquet)")
    c.add_argument("--row-group", type=int, default=1 << 20,
                   help="rankings per Parquet row group (the unit a stream reads)")
    c.add_argument("--no-progress", action="store_true", help="no progress bar")
    c.set_defaults(func=run_convert)


def _input_arguments(p, what: str) -> None:
    """The input of ``data summary`` and ``data convert``: FILE (or a shared set's name),
    its format and whether invalid rankings are skipped."""
    p.add_argument("file", metavar="FILE", help="rankings file or shared data set name")
    p.add_argument("--format", dest="fmt", choices=FORMATS, default=None,
                   help=f"{what} (default: detected from the extension and header)")
    p.add_argument("--skip-invalid", action="store_true",
                   help="skip (and count) rankings that name an item twice, have fewer than "
                        "2 items or an empty id, instead of stopping at the first")


def truth_agreement(data, truth: np.ndarray) -> dict:
    """How often the reports agree with the truth: on each ranking's first pair, and over
    all rank-broken pairs (pairs whose items tie in the truth are left out and counted)."""
    top = truth[data.order[0]] - truth[data.order[1]]
    pairs = data.rank_break()
    d = truth[pairs.order[0]] - truth[pairs.order[1]]
    return {
        "first_pair_agreement": float(np.mean(top[top != 0] > 0)) if np.any(top != 0) else None,
        "first_pair_truth_ties": int(np.sum(top == 0)),
        "pairwise_agreement": float(np.mean(d[d != 0] > 0)) if np.any(d != 0) else None,
        "pairs_truth_ties": int(np.sum(d == 0)),
        "pairs": len(d),
    }


def summarize(data, truth=None) -> dict:
    s = data.summary()
    rpw = data.rankings_per_worker()
    s["rankings_per_worker"]["mean"] = float(rpw.mean()) if len(rpw) else 0.0
    s["tasks"] = None if data.task is None else len(set(data.task.tolist()))
    if truth is not None:
        s["truth"] = truth_agreement(data, np.asarray(truth, float))
    return s


def format_summary(s: dict) -> str:
    rpw = s["rankings_per_worker"]
    k = ", ".join(f"k={k}: {v:,}" for k, v in s["k_counts"].items())
    lines = [
        f"source              {s['source']}",
        f"items               {s['items']:,}" + (f" ({s['items_never_ranked']:,} never ranked)"
                                                 if s["items_never_ranked"] else ""),
        f"workers             {s['workers']:,}",
        f"rankings            {s['rankings']:,}" + (f" in {s['tasks']:,} tasks"
                                                    if s.get("tasks") else ""),
        f"ranking length k    {k} (K = {s['K']})",
        f"pairs (rank-broken) {s['pairs_after_rank_breaking']:,}",
        (f"rankings per worker min {rpw['min']:,}, median {rpw['median']:g}, "
        f"mean {rpw['mean']:.1f}, max {rpw['max']:,}"),
        f"ties split          {s['ties_split']:,}",
        f"connected           {'yes' if s['connected'] else 'NO: the comparison graph has '
                                'several components; scores are only comparable within one'}",
    ]
    if "truth" in s:
        t = s["truth"]

        def pct(x):
            return "n/a" if x is None else f"{100 * x:.1f} %"

        lines.append(f"agrees with truth   first pair {pct(t['first_pair_agreement'])}, "
                     f"all pairs {pct(t['pairwise_agreement'])} "
                     f"({t['pairs_truth_ties']:,} of {t['pairs']:,} pairs tie in the truth)")
    for note in s["notes"]:
        lines.append(f"note                {note}")
    return "\n".join(lines)


def run_summary(args) -> int:
    from crowdrank.models.io import read_data

    data, truth = read_data(args.file, fmt=args.fmt, truth=args.truth,
                            invalid="skip" if args.skip_invalid else "error",
                            strict_truth=args.strict_truth)
    s = summarize(data, truth)
    print(json.dumps(s, indent=2) if args.json else format_summary(s))
    return 0


def format_list(sets: list[dict], root) -> str:
    lines = [f"shared data sets in {root} (set CROWDRANK_DATASETS to move them)", ""]
    for d in sets:
        state = "present" if d["present"] else f"MISSING ({len(d['missing'])} file(s))"
        kind = ("rankings" if d["kind"] == "rankings" else
                "pair table: fit/audit --model crowdbt-bias|crowdbt-domain|contextual-bt")
        lines.append(f"{d['name']:<22}{state}  [{kind}]")
        for key in ("description", "as_loaded", "truth", "origin"):
            lines.append(f"  {key.replace('_', ' '):<11} {d[key]}")
        if d["options"]:
            lines.append(f"  {'options':<11} {', '.join(d['options'])} "
                         "(models.io.load_dataset)")
        lines.append("")
    return "\n".join(lines).rstrip()


def run_list(args) -> int:
    from crowdrank.models.io import datasets_root, list_datasets

    sets = list_datasets(pairs=True)
    print(json.dumps(sets, indent=2) if args.json else format_list(sets, datasets_root()))
    return 0


def run_convert(args) -> int:
    """Stream FILE into a Parquet file (whole-file formats and data sets: read, then write)."""
    from pathlib import Path

    from tqdm.auto import tqdm

    from crowdrank.models.errors import UsageError
    from crowdrank.models.io import STREAM_FORMATS, detect_format, iter_rankings_chunks, read_data
    from crowdrank.models.io.parquet import Writer

    if args.row_group < 1:
        raise UsageError(f"--row-group must be >= 1, got {args.row_group}")
    out = Path(args.out)
    if out.suffix.lower() not in (".parquet", ".pq"):
        raise UsageError(f"--out {out}: a Parquet file name ends in .parquet or .pq")
    src = Path(args.file)
    invalid = "skip" if args.skip_invalid else "error"
    if src.is_file() and (args.fmt or detect_format(src)) in STREAM_FORMATS:
        chunks = iter_rankings_chunks(src, args.row_group, fmt=args.fmt, invalid=invalid)
    else:
        chunks = iter([read_data(args.file, fmt=args.fmt, invalid=invalid)[0]])
    tmp = out.with_name(out.name + ".part")     # no half-written file under --out
    n, notes, writer = 0, [], None
    try:
        with tqdm(disable=args.no_progress, desc="rankings", unit="rk", unit_scale=True,
                  leave=False) as bar:
            for chunk in chunks:
                if writer is None:
                    writer = Writer(tmp, chunk.task is not None, args.row_group)
                writer.write(chunk)
                n += chunk.n_rankings
                notes.extend(chunk.notes)
                bar.update(chunk.n_rankings)
        writer.close()
        tmp.replace(out)
    finally:
        if writer is not None and tmp.exists():
            writer.close()
            tmp.unlink()
    for note in dict.fromkeys(notes):
        print(f"note: {note}")
    print(f"{n} rankings -> {out}")
    return 0

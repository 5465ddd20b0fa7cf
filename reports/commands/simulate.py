"""``crowdrank simulate``: a seeded synthetic data set with its true parameters.

Writes ``rankings.csv`` (``worker,ranking,task``; with ``--format parquet``
``rankings.parquet``, the same columns with ``ranking`` a list of item ids), ``truth.csv`` (``item,score`` = the true
λ), ``workers.csv`` (``worker,setting,eta_1..eta_K``), with ``--gold G`` also ``gold.csv``
(``worker,ranking,true_order,task``: reported gold rankings and their true order, for
:meth:`crowdrank.models.priors.Priors.from_gold` via :func:`crowdrank.models.io.read_gold`), and
``simulation.json`` (the parameters, counts and timings).

The pair-table models (``--model crowdbt-bias|crowdbt-domain|contextual-bt``,
:data:`crowdrank.models.registry.PAIR_TABLE`) are simulated by their own simulators
(:func:`crowdrank.models.crowdbt_ext.simulate`, :func:`crowdrank.inference.batch.contextual.simulate_contextual`)
into ``pairs.csv`` — the pairwise CSV ``crowdrank fit PAIRS.csv --model ...`` reads
(``worker,left,right,label``, ``left`` shown first, plus ``category`` or the covariate
columns ``x0, x1, ...``) — with ``truth.csv`` (``item,score`` = the true λ), the workers'
truth (``workers.csv``: ``worker,eta,beta`` for the bias model; ``groups.csv``:
``group,worker,category,eta,n_pairs`` for the domain model, one row per worker and
category), ``coefficients.csv`` (``item,covariate,gamma``, contextual BT) and
``simulation.json`` (with the ``crowdrank fit`` command that fits the file).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from crowdrank.models.errors import UsageError
from crowdrank.models.registry import PAIR_MODELS, PAIR_TABLE, get
from crowdrank.models.simulate import PAPER_SCALE, WORKER_TYPES, sim_models
from crowdrank.reports.help import HelpFormatter


def register(sub) -> None:
    p = sub.add_parser(
        "simulate", help="simulate a crowdsourced ranking data set (the paper's protocol)",
        description="Simulate rankings by crowd workers of one type under one model (seed "
                    "000, Sect. 5.2): item scores λ ~ N(0, 1), worker η ~ Dir(α0[type]), T "
                    "tasks per worker of size k uniform on 2..kmax, true order from PL(λ), "
                    "the report from the model's worker story. Writes rankings.csv (or "
                    "rankings.parquet), truth.csv, workers.csv (and gold.csv with --gold) into "
                    "--out.",
        epilog="Pair-table models (--model crowdbt-bias, crowdbt-domain, contextual-bt) "
               "write pairs.csv (worker,left,right,label; left is shown first; plus "
               "category or x0, x1, ...) with truth.csv, workers.csv (bias: eta, beta), "
               "groups.csv (domain: eta per worker and category) or coefficients.csv "
               "(contextual: gamma); they take --items, --workers, --seed, --out, --quiet "
               "and the options of the 'pair-table models' group, not --setting, --tasks, "
               "--kmax, --gold, --paper-scale or --format.",
        formatter_class=HelpFormatter)
    p.add_argument("--model", choices=sim_models() + PAIR_MODELS, default="couple",
                   help="the model whose generative process draws the data")
    # no parser default, so that a --setting given to a pair-table model is seen (refused)
    p.add_argument("--setting", choices=tuple(WORKER_TYPES), default=argparse.SUPPRESS,
                   help="worker type of every worker (ranking models; default: amateur)")
    p.add_argument("--items", type=int, default=None,
                   help=f"number of items L (default 50; paper {PAPER_SCALE['n_items']})")
    p.add_argument("--workers", type=int, default=None,
                   help=f"number of workers W (default 10; paper {PAPER_SCALE['n_workers']})")
    p.add_argument("--tasks", type=int, default=None,
                   help="tasks per worker T (default 20; paper "
                        f"{PAPER_SCALE['tasks_per_worker']})")
    p.add_argument("--kmax", type=int, default=None,
                   help="largest task size (default 4; 2 for bt/crowdbt)")
    p.add_argument("--seed", type=int, default=0, help="seed of every random choice")
    p.add_argument("--gold", type=int, default=0, metavar="G",
                   help="gold tasks per worker (written to gold.csv)")
    p.add_argument("--paper-scale", action="store_true",
                   help="the paper's scale: L=1000, W=500, T=900, kmax=4 (450,000 rankings); "
                        "explicit --items/--workers/--tasks/--kmax still override")
    p.add_argument("--format", dest="fmt", choices=("csv", "parquet"), default="csv",
                   help="rankings file format: rankings.csv or rankings.parquet (worker, "
                        "ranking as a list of item ids, task)")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--quiet", action="store_true", help="no progress messages on stderr")
    g = p.add_argument_group(
        "pair-table models (--model crowdbt-bias, crowdbt-domain, contextual-bt)",
        "uniformly random pairs of distinct items in a random presentation order, each "
        "judged by a uniformly drawn worker; λ ~ N(0, 1). Defaults: --items 20, --workers "
        "10")
    g.add_argument("--pairs", type=int, default=None,
                   help="all three: number of comparisons (default 2000)")
    g.add_argument("--eta-beta", default=None, metavar="A,B",
                   help="crowdbt-bias/domain: the Beta(a, b) each accuracy η is drawn from "
                        "(default 8,2)")
    g.add_argument("--bias-sd", type=float, default=None,
                   help="crowdbt-bias: sd of the worker bias β_w ~ N(0, sd²) towards the "
                        "item shown first (default 1.0)")
    g.add_argument("--categories", type=int, default=None, metavar="C",
                   help="crowdbt-domain: number of categories c0..c{C-1}, one accuracy per "
                        "worker and category (default 3)")
    g.add_argument("--n-covariates", type=int, default=None, metavar="P",
                   help="contextual-bt: number of N(0, 1) covariate columns x0..x{P-1} "
                        "(default 1)")
    g.add_argument("--tau", type=float, default=None,
                   help="contextual-bt: sd of the covariate profiles γ ~ N(0, τ²) "
                        "(default 1.0)")
    p.set_defaults(func=run)


#: Which pair-table option applies to which model (anything else given is refused).
PAIR_OPTIONS = {"crowdbt-bias": ("pairs", "eta_beta", "bias_sd"),
                "crowdbt-domain": ("pairs", "eta_beta", "categories"),
                "contextual-bt": ("pairs", "n_covariates", "tau")}


def _positive(name: str, value: int | None) -> None:
    if value is not None and value < 1:
        raise UsageError(f"--{name} must be >= 1, got {value}")


def run(args) -> int:
    from crowdrank.models.io import (
        write_gold,
        write_parquet,
        write_rankings,
        write_truth,
        write_worker_truth,
    )
    from crowdrank.models.simulate import simulate

    for name in ("items", "workers", "tasks", "kmax"):
        _positive(name, getattr(args, name))
    if args.model in PAIR_MODELS:
        return run_pairs(args)
    args.setting = getattr(args, "setting", "amateur")
    given = [o for o in ("pairs", "eta_beta", "bias_sd", "categories", "n_covariates", "tau")
             if getattr(args, o, None) is not None]
    if given:
        raise UsageError(f"--{given[0].replace('_', '-')} is an option of the pair-table "
                         f"models ({', '.join(PAIR_MODELS)}), not of --model {args.model}")
    if args.gold < 0:
        raise UsageError(f"--gold must be >= 0, got {args.gold}")
    pairwise = get(args.model).pairwise
    base = dict(PAPER_SCALE) if args.paper_scale else {
        "n_items": 50, "n_workers": 10, "tasks_per_worker": 20, "kmax": 4}
    if pairwise:
        base["kmax"] = 2
    for opt, key in (("items", "n_items"), ("workers", "n_workers"),
                     ("tasks", "tasks_per_worker"), ("kmax", "kmax")):
        if getattr(args, opt) is not None:
            base[key] = getattr(args, opt)
    if pairwise and base["kmax"] != 2:
        raise UsageError(f"{args.model} is a pairwise model: use --kmax 2 (k-ary data are "
                         "rank-broken at fit time, not simulated)")
    if not 2 <= base["kmax"] <= base["n_items"]:
        raise UsageError(f"need 2 <= --kmax <= --items, got kmax={base['kmax']}, "
                         f"items={base['n_items']}")
    out, say = _out_and_log(args)
    n = base["n_workers"] * base["tasks_per_worker"]
    say(f"simulate: {args.model}, {args.setting} workers, L={base['n_items']}, "
        f"W={base['n_workers']}, T={base['tasks_per_worker']}, k<={base['kmax']}: "
        f"{n:,} rankings (seed {args.seed}) ...")
    timings = {}
    t0 = time.perf_counter()
    sim = simulate(args.model, setting=args.setting, gold_per_worker=args.gold,
                   seed=args.seed, **base)
    timings["simulate"] = time.perf_counter() - t0
    say(f"simulate: drew {sim.rankings.n_rankings:,} rankings in {timings['simulate']:.1f} s; "
        "writing ...")
    t1 = time.perf_counter()
    data = sim.rankings
    fmt = getattr(args, "fmt", "csv")
    rankings_file = "rankings.parquet" if fmt == "parquet" else "rankings.csv"
    (write_parquet if fmt == "parquet" else write_rankings)(data, out / rankings_file)
    write_truth(data.items, sim.lam, out / "truth.csv")
    write_worker_truth(data.workers, sim.settings, sim.eta, out / "workers.csv")
    files = [rankings_file, "truth.csv", "workers.csv"]
    if sim.gold is not None:
        g = sim.gold
        from crowdrank.models.data import Rankings

        g = Rankings(items=g.items, workers=g.workers, order=g.order, lengths=g.lengths,
                     worker=g.worker,
                     task=np.array([f"g{j}" for j in range(g.n_rankings)], dtype=object),
                     source=g.source)
        write_gold(g, sim.gold_true_order, out / "gold.csv")
        files.append("gold.csv")
    timings["write"] = time.perf_counter() - t1
    timings["total"] = time.perf_counter() - t0
    meta = {
        "model": args.model, "setting": args.setting, "seed": args.seed,
        "paper_scale": bool(args.paper_scale), **{k: int(v) for k, v in base.items()},
        "gold_per_worker": args.gold, "alpha0": list(WORKER_TYPES[args.setting]),
        "n_rankings": data.n_rankings,
        "n_gold": 0 if sim.gold is None else sim.gold.n_rankings,
        "k_counts": {str(k): v for k, v in data.k_counts().items()},
        "files": files, "seconds": {k: round(v, 3) for k, v in timings.items()},
    }
    (out / "simulation.json").write_text(json.dumps(meta, indent=2) + "\n")
    say(f"simulate: wrote {', '.join(files)} to {out} in {timings['write']:.1f} s "
        f"(total {timings['total']:.1f} s)")
    print(f"{data.n_rankings} rankings by {data.n_workers} workers over {data.n_items} items "
          f"-> {out}")
    return 0


# ------------------------------------------------------------------- pair-table models
def _eta_beta(spec: str) -> tuple[float, float]:
    try:
        a, b = (float(v) for v in spec.split(","))
    except ValueError:
        raise UsageError(f"--eta-beta must be A,B (two numbers), got {spec!r}") from None
    if not (a > 0 and b > 0 and np.isfinite(a) and np.isfinite(b)):
        raise UsageError(f"--eta-beta needs finite a, b > 0, got {spec!r}")
    return a, b


def _check_pair_args(args) -> None:
    """Refuse the ranking models' options and the other pair models' options."""
    wrong = [o for o, given in (("setting", hasattr(args, "setting")),
                                ("tasks", args.tasks is not None),
                                ("kmax", args.kmax is not None), ("gold", args.gold != 0),
                                ("paper-scale", args.paper_scale),
                                ("format", getattr(args, "fmt", "csv") != "csv"))
             if given]
    own = PAIR_OPTIONS[args.model]
    wrong += [o.replace("_", "-") for o in ("pairs", "eta_beta", "bias_sd", "categories",
                                            "n_covariates", "tau")
              if getattr(args, o) is not None and o not in own]
    if wrong:
        raise UsageError(f"--{wrong[0]} does not apply to --model {args.model} (its options: "
                         + ", ".join("--" + o.replace("_", "-") for o in own)
                         + ", --items, --workers, --seed)")
    if args.items is not None and args.items < 2:
        raise UsageError(f"--items must be >= 2 for pairs, got {args.items}")
    for o in ("pairs", "categories"):
        _positive(o, getattr(args, o))
    if args.eta_beta is not None:
        _eta_beta(args.eta_beta)
    if args.n_covariates is not None and args.n_covariates < 0:
        raise UsageError(f"--n-covariates must be >= 0, got {args.n_covariates}")
    for o in ("bias_sd", "tau"):
        v = getattr(args, o)
        if v is not None and not (np.isfinite(v) and v >= 0):
            raise UsageError(f"--{o.replace('_', '-')} must be finite and >= 0, got {v}")


def _write_csv(path: Path, header: list[str], rows) -> None:
    import csv

    with path.open("w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)


def run_pairs(args) -> int:
    """``simulate --model crowdbt-bias|crowdbt-domain|contextual-bt`` (module docstring)."""
    from crowdrank.models.io import write_pair_table, write_truth

    _check_pair_args(args)
    L = args.items if args.items is not None else 20
    W = args.workers if args.workers is not None else 10
    S = args.pairs if args.pairs is not None else 2000
    out, say = _out_and_log(args)
    say(f"simulate: {args.model}, L={L}, W={W}, {S:,} pairs (seed {args.seed}) ...")
    t0 = time.perf_counter()
    params: dict = {"n_items": L, "n_workers": W, "n_pairs": S}
    files = ["pairs.csv", "truth.csv"]
    if PAIR_TABLE[args.model].covariates:
        from crowdrank.inference.batch.contextual import simulate_contextual
        from crowdrank.models.contextual import table_from_simulation

        P = 1 if args.n_covariates is None else args.n_covariates
        tau = 1.0 if args.tau is None else args.tau
        win, lose, X, lam, gamma = simulate_contextual(L, S, P, tau=tau, seed=args.seed)
        # the presentation order and the workers: a second stream of the same seed
        table = table_from_simulation(win, lose, X, seed=args.seed + 1, n_workers=W)
        names = [f"x{k}" for k in range(P)]
        _write_csv(out / "coefficients.csv", ["item", "covariate", "gamma"],
                   ((table.items[i], nm, repr(float(gamma[i, k])))
                    for i in range(L) for k, nm in enumerate(names)))
        files.append("coefficients.csv")
        params.update(n_covariates=P, tau=tau, covariates="x_sk ~ N(0, 1)")
        fit_cmd = (f"crowdrank fit {out / 'pairs.csv'} --model contextual-bt --method map "
                   f"--tau {tau:g} --out FIT/"
                   + (f" --covariates {','.join(names)}" if P else ""))
    else:
        from crowdrank.models.crowdbt_ext import simulate as simulate_ext

        ab = _eta_beta(args.eta_beta or "8,2")
        C = 3 if args.categories is None else args.categories
        bsd = 1.0 if args.bias_sd is None else args.bias_sd
        table, truth = simulate_ext(L, W, S, args.model, n_categories=C, eta_ab=ab,
                                    bias_sd=bsd, seed=args.seed)
        lam = truth["lambda"]
        params.update(eta_beta=list(ab))
        if PAIR_TABLE[args.model].worker_bias:
            _write_csv(out / "workers.csv", ["worker", "eta", "beta"],
                       ((w, repr(float(truth["eta"][k])), repr(float(truth["beta"][k])))
                        for k, w in enumerate(table.workers)))
            files.append("workers.csv")
            params.update(bias_sd=bsd)
            fit_cmd = (f"crowdrank fit {out / 'pairs.csv'} --model crowdbt-bias --method map "
                       f"--eta-beta {ab[0]:g},{ab[1]:g} --bias-sd {bsd:g} --out FIT/")
        else:
            cat = table.extra["category"]
            n = np.zeros((W, C), np.int64)
            np.add.at(n, (table.worker, [int(c[1:]) for c in cat]), 1)
            _write_csv(out / "groups.csv", ["group", "worker", "category", "eta", "n_pairs"],
                       ((f"{w}|c{c}", w, f"c{c}", repr(float(truth["eta"][k, c])),
                         int(n[k, c])) for k, w in enumerate(table.workers)
                        for c in range(C)))
            files.append("groups.csv")
            params.update(n_categories=C)
            fit_cmd = (f"crowdrank fit {out / 'pairs.csv'} --model crowdbt-domain --method "
                       f"map --category category --eta-beta {ab[0]:g},{ab[1]:g} --out FIT/")
    write_pair_table(table, out / "pairs.csv", table.extra)
    write_truth(table.items, lam, out / "truth.csv")
    seconds = time.perf_counter() - t0
    meta = {"model": args.model, "seed": args.seed, **params,
            "presented_first": "the left column",
            "n_first_won": int(table.first_won.sum()), "files": files + ["simulation.json"],
            "fit_command": fit_cmd, "seconds": round(seconds, 3)}
    (out / "simulation.json").write_text(json.dumps(meta, indent=2) + "\n")
    say(f"simulate: wrote {', '.join(files)} to {out} in {seconds:.1f} s")
    print(f"{table.n_pairs} pairs by {table.n_workers} workers over {table.n_items} items "
          f"({args.model}) -> {out}")
    return 0


def _out_and_log(args):
    """The --out folder (created; refused if it is a file) and the progress printer
    (silent with --quiet), shared by the ranking and the pair-table routes."""
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} exists and is not a folder")
    out.mkdir(parents=True, exist_ok=True)
    say = (lambda *a: None) if args.quiet else (lambda msg: print(msg, file=sys.stderr,
                                                                  flush=True))
    return out, say

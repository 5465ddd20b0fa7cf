"""``crowdrank fit --method online``: run one online method and write its posterior.

Two paths with the same numbers, bit for bit (tested):

* **streaming** (the default for a rankings file in a streamable format: rankings CSV,
  pairwise CSV, wide CSV, worker-winner-loser, Parquet): :func:`run_stream` reads the file
  in chunks of ``--chunk-size`` rankings and feeds each to the kernel
  (:func:`crowdrank.inference.online.fit_online_stream`); memory is bounded by the chunk plus the
  state, ids are mapped incrementally, and the priors are built for the workers seen so
  far. ``--order shuffle`` on a stream is a seeded external shuffle
  (:mod:`crowdrank.models.io.shuffle`): a uniformly random order, drawn anew for every pass.
* **in memory** (a shared data set's name, PrefLib or MATLAB files, or ``--in-memory``):
  :func:`run`, with the data and the priors of :mod:`crowdrank.reports.commands.fit`,
  as every method gets them (the ``online`` entry of :mod:`crowdrank.inference.methods`). Its ``--order shuffle`` is ``fit_online``'s in-memory permutation
  (another draw for the same seed than the stream's; both uniform).

Either writes ``DIR/posterior.json`` (the JSON of ``docs/contracts.md``, also a state to
resume from with ``--state-in``) and ``DIR/items.csv`` (items sorted by ``mu``, best first).
"""

from __future__ import annotations

import time
from pathlib import Path

from crowdrank.models.data import DataError
from crowdrank.models.registry import get as get_model


def run_method(args, options) -> int:
    """``crowdrank fit --method online``: the stream when the file is streamable and
    ``--in-memory`` is not given, else the in-memory path (:func:`run`)."""
    # k̂ evaluates the exact density over every ranking: the data are read into memory
    if not options.in_memory and not getattr(args, "khat", False):
        path = stream_source(args.data)
        if path is not None:
            return run_stream(args, options, path)
    return run(args, options)


def run(args, options) -> int:
    """The in-memory path: the data and priors of ``fit``, fitted by the ``online`` entry."""
    from crowdrank.inference import methods
    from crowdrank.reports.commands.fit import load, report_khat

    data, priors = load(args)
    t0 = time.perf_counter()
    post = methods.get("online").run(data, args.model, priors, options, seed=args.seed,
                                     progress=not args.no_progress)
    rc = _write(args, post.native, data.n_rankings * int(options.passes),
                time.perf_counter() - t0, "in memory")
    report_khat(args, post, data, priors)
    return rc


def stream_source(spec: str) -> Path | None:
    """``spec`` as a file the streaming path can read, or ``None`` (a data set's name, a
    format that is not streamable: the in-memory path reads those)."""
    from crowdrank.models.io import STREAM_FORMATS, detect_format

    p = Path(spec)
    if not p.is_file():
        return None
    try:
        fmt = detect_format(p)
    except (DataError, FileNotFoundError):
        return None          # the in-memory path reports it, as before
    return p if fmt in STREAM_FORMATS else None


class _Seen:
    """What the prior builders read of a data set: the workers and the longest ranking."""

    def __init__(self, workers, K):
        self.workers, self.K = tuple(workers), int(K)


def stream_priors(args):
    """A function of a chunk returning the priors for the workers seen so far, made as
    ``fit``'s ``load_priors`` makes them for the whole file (same ``--prior-*`` and
    ``--worker-prior*`` options), with ``K`` the longest ranking seen so far: the
    profiles' entries do not depend on ``K``, so a later, longer ``K`` only appends."""
    from crowdrank.models.priors import build_priors, read_worker_prior_file

    spec = get_model(args.model)
    fixed = (read_worker_prior_file(args.worker_prior_file, args.prior_mu, args.prior_sigma)
             if args.worker_prior_file else None)
    gold = None
    if fixed is None and args.worker_prior_gold:
        from crowdrank.models.io import read_gold
        gold = read_gold(args.worker_prior_gold)
    kmax = 2

    def priors(chunk):
        nonlocal kmax
        kmax = max(kmax, chunk.K)
        seen = _Seen(chunk.workers, kmax)
        pri = fixed if fixed is not None else build_priors(
            seen, worker_prior=args.worker_prior, gold=gold, mu0=args.prior_mu,
            sigma0=args.prior_sigma)
        return spec.worker_priors(pri, seen)

    return priors


def run_stream(args, options, path: Path) -> int:
    """The streaming path (module docstring)."""
    import numpy as np

    from crowdrank.inference.method_fits import online_state, update_options
    from crowdrank.inference.online import fit_online_stream
    from crowdrank.models.errors import UsageError
    from crowdrank.models.io import iter_rankings_chunks
    from crowdrank.models.io.shuffle import buckets_for, external_shuffle

    chunk, passes, order = int(options.chunk_size), int(options.passes), options.order
    if chunk < 1:
        raise UsageError(f"--chunk-size must be >= 1, got {chunk}")
    if passes < 1:
        raise UsageError("passes must be >= 1")
    seed = int(args.seed)
    post = online_state(options)
    total = _count_hint(path)
    rng = np.random.default_rng(seed)
    priors = stream_priors(args)
    t0 = time.perf_counter()
    n = 0
    for p in range(passes):
        chunks = iter_rankings_chunks(path, chunk, keep_task=False)
        info = {"pass": p + 1}
        if order == "shuffle":
            buckets = buckets_for(total or path.stat().st_size // 16)
            chunks = external_shuffle(chunks, rng, buckets=buckets)
            info.update(order="shuffle", seed=seed, shuffle="external", buckets=buckets)
        before = 0 if post is None else post.n_rankings
        post = fit_online_stream(chunks, args.model, priors, state=post,
                                 progress=not args.no_progress,
                                 total=total, run_info=info, **update_options(options))
        n += post.n_rankings - before
    return _write(args, post, n, time.perf_counter() - t0,
                  f"streamed in chunks of {chunk:,}"
                  + (", shuffled externally" if order == "shuffle" else ""))


def _count_hint(path: Path) -> int | None:
    """The number of rankings when the file says it without being read (Parquet)."""
    from crowdrank.models.io import detect_format
    from crowdrank.models.io.parquet import n_rows

    return n_rows(path) if detect_format(path) == "parquet" else None


def write_items_csv(post, path: Path) -> None:
    """``post.items_table()`` written as pandas writes it (``index=False``, floats as
    ``%.17g``, a NaN as an empty field; tested byte for byte) with the :mod:`csv` module:
    importing pandas costs as much CPU as reading and fitting 450,000 rankings."""
    import csv

    import numpy as np

    mu = np.asarray(post.mu, dtype=float)
    sigma2 = np.asarray(post.sigma2, dtype=float)
    sd = np.sqrt(sigma2)
    order = np.argsort(-mu, kind="stable")  # best first, ties and NaNs as pandas sorts them

    def num(x: float) -> str:
        return "" if np.isnan(x) else f"{x:.17g}"

    with open(path, "w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["rank", "item", "mu", "sigma2", "sd"])
        for r, i in enumerate(order.tolist(), start=1):
            w.writerow([r, post.items[i], num(mu[i]), num(sigma2[i]), num(sd[i])])


def _write(args, post, n: int, seconds: float, how: str) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    post.to_json(out / "posterior.json")
    write_items_csv(post, out / "items.csv")
    clamps = {k: v for k, v in post.clamped.items() if v}
    rate = n / seconds if seconds > 0 else float("nan")
    print(f"{post.algorithm}: {n} rankings ({how}), {len(post.items)} items, "
          f"{len(post.workers)} workers, {seconds:.3f} s ({rate:,.0f} rankings/s; updates "
          f"{post.seconds:.3f} s); guards: {clamps or 'none'}; "
          f"wrote {out / 'posterior.json'} and {out / 'items.csv'}")
    return 0

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
  :func:`run`, called by :mod:`crowdrank.reports.commands.fit` with the data and the priors built,
  as NUTS gets them. Its ``--order shuffle`` is ``fit_online``'s in-memory permutation
  (another draw for the same seed than the stream's; both uniform).

Either writes ``DIR/posterior.json`` (the JSON of ``docs/contracts.md``, also a state to
resume from with ``--state-in``) and ``DIR/items.csv`` (items sorted by ``mu``, best first).
"""

from __future__ import annotations

import time
from pathlib import Path

from crowdrank.models.data import DataError
from crowdrank.models.registry import get as get_model


def _wl_params(args) -> dict | None:
    """Weng–Lin parameters given on the command line (the rest keep their defaults)."""
    given = {key: getattr(args, f"wl_{key}", None) for key in ("beta", "kappa", "tau", "gamma")}
    given = {k: v for k, v in given.items() if v is not None}
    return given or None


def _options(args) -> dict:
    """The options of the update, as ``fit_online`` takes them."""
    return {"taylor": getattr(args, "taylor", "paper"),
            "score_alpha": getattr(args, "score_alpha", "updated"),
            "strict": bool(getattr(args, "strict", False)),
            "kappa": float(getattr(args, "kappa", 1e-4)),
            "kappa2": float(getattr(args, "kappa2", 1e-4)),
            "bt_breaking": getattr(args, "bt_breaking", "game"), "wl_params": _wl_params(args)}


def _check_model(args) -> None:
    spec = get_model(args.model)
    if spec.normalized:       # its spec names OnlineGBMM, which approximates stagewise COUPLE
        raise DataError("there is no online update for normalised COUPLE; use --model couple "
                        "(OnlineGBMM) or --method nuts", "--model")
    if spec.online is None:
        raise DataError(f"there is no online update for {args.model}; use --method nuts",
                        "--model")


def run(args, data, priors) -> int:
    """The in-memory path: ``data`` and ``priors`` already built."""
    from crowdrank.inference.online import OnlinePosterior, fit_online

    _check_model(args)
    state_in = getattr(args, "state_in", None)
    state = OnlinePosterior.from_json(state_in) if state_in else None
    t0 = time.perf_counter()
    post = fit_online(
        data, args.model, priors, order=getattr(args, "order", "file"),
        seed=int(getattr(args, "seed", 0)), passes=int(getattr(args, "passes", 1)),
        state=state, progress=not getattr(args, "no_progress", False), **_options(args))
    return _write(args, post, data.n_rankings * int(getattr(args, "passes", 1)),
                  time.perf_counter() - t0, "in memory")


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
    if fixed is None and getattr(args, "worker_prior_gold", None):
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


def run_stream(args, path: Path) -> int:
    """The streaming path (module docstring)."""
    import numpy as np

    from crowdrank.inference.online import OnlinePosterior, fit_online_stream
    from crowdrank.models.errors import UsageError
    from crowdrank.models.io import iter_rankings_chunks
    from crowdrank.models.io.shuffle import buckets_for, external_shuffle

    _check_model(args)
    chunk = int(getattr(args, "chunk_size", 1 << 17))
    passes = int(getattr(args, "passes", 1))
    if chunk < 1:
        raise UsageError(f"--chunk-size must be >= 1, got {chunk}")
    if passes < 1:
        raise UsageError("passes must be >= 1")
    order = getattr(args, "order", "file")
    seed = int(getattr(args, "seed", 0))
    state_in = getattr(args, "state_in", None)
    post = OnlinePosterior.from_json(state_in) if state_in else None
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
                                 progress=not getattr(args, "no_progress", False),
                                 total=total, run_info=info, **_options(args))
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
        return "" if np.isnan(x) else "%.17g" % x

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

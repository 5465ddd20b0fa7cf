"""``fit_online``: one or several passes of an online method over a set of rankings.

The order is an explicit argument (docs/design.md, Online): the file's order by default, or a seeded
shuffle, drawn anew for each pass from one ``numpy`` generator seeded with ``seed``. CrowdBT
(and OnlineBT with ``bt_breaking="pairs"``) run on the fully rank-broken pairs; a shuffle
permutes whole rankings, so the pairs of one ranking stay together and in order.

A run can start from a saved state (``state=``): the state's items and workers are matched
to the data's by id, unseen ones start at their prior, and the options that change the
update must be the same as the state's. Processing ``n1`` rankings, saving, loading and
processing the next ``n2`` gives the same numbers, bit for bit, as one pass over all
``n1 + n2`` (tested).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from crowdrank.models.data import DataError, Rankings
from crowdrank.models.errors import UsageError
from crowdrank.models.priors import Priors
from crowdrank.models.registry import ModelSpec, as_spec, name_of

from . import kernels
from .crowdbt import TAYLOR as CROWDBT_TAYLOR
from .gbmm import SCORE_ALPHA, TAYLOR
from .guards import CODES
from .state import CLAMP_KEYS, OnlineError, OnlinePosterior

#: Rankings per kernel call; the progress bar advances between calls.
BLOCK = 1 << 16


def wl_defaults(priors: Priors | None, wl_params: dict | None) -> dict:
    """Weng–Lin parameters: ``beta = sigma0/2`` (openskill's ``σ/2`` convention),
    ``kappa = 1e-4``, ``tau = 0`` (no dynamics: the items do not change over the pass),
    ``gamma = "sigma/c"`` (openskill's default)."""
    sigma0 = 1.0 if priors is None else float(priors.sigma0)
    out = {"beta": sigma0 / 2.0, "kappa": 1e-4, "tau": 0.0, "gamma": "sigma/c"}
    for key, val in (wl_params or {}).items():
        if key not in out:
            raise UsageError(f"unknown Weng–Lin parameter {key!r}; expected {tuple(out)}")
        out[key] = val
    if not (out["beta"] > 0 and out["kappa"] > 0 and out["tau"] >= 0):
        raise UsageError("Weng–Lin parameters need beta > 0, kappa > 0, tau >= 0")
    if out["gamma"] not in kernels.GAMMA_CODES:
        out["gamma"] = float(out["gamma"])
    return out


# ------------------------------------------------------------------ the algorithms
# One entry per online model name (models.registry.ModelSpec.online): its option builder
# (the options that change the update, checked when resuming), its kernel, and whether a
# pass runs on the rank-broken pairs. The worker parameter and its length rule are read
# from the registry spec of the same name (models.registry: Beta → 2, Dirichlet → K).
def _check_guards(kappa, kappa2):
    if not (kappa > 0 and kappa2 >= 0):
        raise UsageError("guards need kappa > 0 and kappa2 >= 0")


def _gbmm_options(*, taylor="paper", score_alpha="updated", kappa=1e-4, kappa2=1e-4,
                  **_) -> dict:
    if taylor not in TAYLOR:
        raise UsageError(f"taylor must be one of {TAYLOR}, got {taylor!r}")
    if score_alpha not in SCORE_ALPHA:
        raise UsageError(f"score_alpha must be one of {SCORE_ALPHA}, got {score_alpha!r}")
    _check_guards(kappa, kappa2)
    return {"taylor": taylor, "score_alpha": score_alpha, "kappa": float(kappa),
            "kappa2": float(kappa2), "stage_order": "reverse"}


def _crowdbt_options(*, taylor="paper", kappa=1e-4, kappa2=1e-4, **_) -> dict:
    if taylor not in CROWDBT_TAYLOR:
        raise UsageError(f"taylor for CrowdBT must be one of {CROWDBT_TAYLOR} (Chen et al.'s "
                         f"expansion, or Gauss–Hermite moment matching), got {taylor!r}")
    _check_guards(kappa, kappa2)
    return {"taylor": taylor, "kappa": float(kappa), "kappa2": float(kappa2),
            "rank_breaking": "full"}


def _wl_pl_options(*, taylor="paper", kappa=1e-4, kappa2=1e-4, wl_params=None, priors=None,
                   **_) -> dict:
    if taylor != "paper":     # Weng–Lin's update has no expectation for quadrature to replace
        raise UsageError(f"taylor={taylor!r} is an option of COUPLE's and CrowdBT's updates; "
                         "Weng–Lin (PL, BT) takes only 'paper'")
    _check_guards(kappa, kappa2)
    return wl_defaults(priors, wl_params)


def _wl_bt_options(*, bt_breaking="game", **kw) -> dict:
    out = _wl_pl_options(**kw)
    if bt_breaking not in ("game", "pairs"):
        raise UsageError("bt_breaking must be 'game' (one full-pairing update per "
                         "ranking, openskill) or 'pairs' (rank-broken pairs in turn)")
    out["bt_breaking"] = bt_breaking
    return out


def _gbmm_kernel(opts, ordr, lengths, wk, seq, start, stop, mu, s2, alpha, strict, counts,
                 err) -> int:
    return kernels.gbmm_kernel(ordr, lengths, wk, seq, start, stop, mu, s2, alpha,
                               kernels.TAYLOR_CODES[opts["taylor"]],
                               opts["score_alpha"] == "prior", opts["kappa"],
                               opts["kappa2"], strict, counts, err)


def _crowdbt_kernel(opts, ordr, lengths, wk, seq, start, stop, mu, s2, alpha, strict, counts,
                    err) -> int:
    return kernels.crowdbt_kernel(ordr, wk, seq, start, stop, mu, s2, alpha, opts["kappa"],
                                  opts["kappa2"], strict, counts, err,
                                  kernels.TAYLOR_CODES[opts.get("taylor", "paper")])


def _wl_kernel(kern):
    def run(opts, ordr, lengths, wk, seq, start, stop, mu, s2, alpha, strict, counts, err):
        g = opts["gamma"]
        gmode = kernels.GAMMA_CODES.get(g, 2) if isinstance(g, str) else 2
        gconst = float(g) if gmode == 2 else 0.0
        return kern(ordr, lengths, seq, start, stop, mu, s2, float(opts["beta"]),
                    float(opts["kappa"]), float(opts["tau"]), gmode, gconst, strict, counts,
                    err)
    return run


@dataclass(frozen=True)
class OnlineAlgorithm:
    """One online method: ``options(**kw) -> dict``, ``kernel(opts, ...)``,
    ``pairwise(opts)`` (a pass runs on the fully rank-broken pairs), and
    ``saved_defaults``: the values of options added after states were first saved, which
    a saved state without them was made with (checked when resuming)."""

    name: str
    options: Callable[..., dict]
    kernel: Callable[..., int]
    pairwise: Callable[[dict], bool] = lambda opts: False
    saved_defaults: dict = field(default_factory=dict)


#: Online model name → its algorithm.
ONLINE: dict[str, OnlineAlgorithm] = {a.name: a for a in (
    OnlineAlgorithm("pl", _wl_pl_options, _wl_kernel(kernels.pl_kernel)),
    OnlineAlgorithm("bt", _wl_bt_options, _wl_kernel(kernels.bt_kernel),
                    lambda opts: opts.get("bt_breaking") == "pairs"),
    # a CrowdBT state saved before its ``taylor`` option existed was made with "paper"
    OnlineAlgorithm("crowdbt", _crowdbt_options, _crowdbt_kernel, lambda opts: True,
                    saved_defaults={"taylor": "paper"}),
    OnlineAlgorithm("couple", _gbmm_options, _gbmm_kernel),
)}


def online_algorithm(model: str | ModelSpec) -> OnlineAlgorithm:
    """The algorithm of an online model, by its name or its spec's (no registry lookup)."""
    model = name_of(model)
    try:
        return ONLINE[model]
    except KeyError:
        raise UsageError(f"unknown online model {model!r}; expected "
                         f"{', '.join(ONLINE)}") from None


def algorithm_options(model: str | ModelSpec, *, taylor="paper", score_alpha="updated",
                      kappa=1e-4, kappa2=1e-4, wl_params=None, bt_breaking="game",
                      priors=None) -> dict:
    """The options that change the update (checked when resuming)."""
    return online_algorithm(model).options(
        taylor=taylor, score_alpha=score_alpha, kappa=kappa, kappa2=kappa2,
        wl_params=wl_params, bt_breaking=bt_breaking, priors=priors)


def is_pairwise(model: str | ModelSpec, opts: dict) -> bool:
    """Does a pass of ``model`` with ``opts`` run on the fully rank-broken pairs?"""
    return online_algorithm(model).pairwise(opts)


def pass_orders(n: int, order: str, seed: int, passes: int) -> list[np.ndarray]:
    """The sequence of ranking indices of every pass: file order, or a seeded shuffle
    (a new permutation per pass, from one generator)."""
    if passes < 1:
        raise UsageError("passes must be >= 1")
    if order == "file":
        return [np.arange(n, dtype=np.int64)] * passes
    if order == "shuffle":
        rng = np.random.default_rng(seed)
        return [rng.permutation(n).astype(np.int64) for _ in range(passes)]
    raise UsageError(f"order must be 'file' or 'shuffle', got {order!r}")


def kernel_arrays(src: Rankings, item_map: np.ndarray, worker_map: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The kernels' int64 arrays of ``src``: the orders in state indices (``-1`` padding
    kept), the workers in state indices, the lengths. A fresh state indexes items and
    workers as the data do (identity maps), and then the orders are only widened: the
    general gather costs ~10 % of a paper-scale pass (16 ms of ~170)."""
    def remap(ids, mapping):
        if np.array_equal(mapping, np.arange(mapping.size)):
            return ids.astype(np.int64)
        return np.where(ids >= 0, mapping[np.maximum(ids, 0)], -1).astype(np.int64)
    return remap(src.order, item_map), remap(src.worker, worker_map), \
        src.lengths.astype(np.int64)


def pairs_sequence(lengths: np.ndarray, ranking_seq: np.ndarray) -> np.ndarray:
    """Pair indices (in the file-order rank-broken array) for rankings in ``ranking_seq``;
    the ``k(k−1)/2`` pairs of a ranking stay together and in their order."""
    npairs = (lengths.astype(np.int64) * (lengths - 1)) // 2
    first = np.concatenate([[0], np.cumsum(npairs)[:-1]])
    cnt = npairs[ranking_seq]
    starts = np.repeat(first[ranking_seq], cnt)
    within = np.arange(cnt.sum()) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    return (starts + within).astype(np.int64)


def _progress(total: int, enabled: bool, desc: str):
    from tqdm.auto import tqdm
    return tqdm(total=total, disable=not enabled or total < 200_000, desc=desc,
                unit="rk", unit_scale=True, leave=False)


def fit_online(data: Rankings, model: str | ModelSpec, priors: Priors, *,
               taylor: str = "paper", score_alpha: str = "updated", order: str = "file",
               seed: int = 0, passes: int = 1, strict: bool = False,
               state: OnlinePosterior | None = None, progress: bool = True,
               wl_params: dict | None = None, kappa: float = 1e-4, kappa2: float = 1e-4,
               bt_breaking: str = "game") -> OnlinePosterior:
    """Run an online method over ``data`` and return its posterior (``docs/contracts.md``).

    Parameters
    ----------
    data : Rankings
    model : {"pl", "bt", "crowdbt", "couple"} or ModelSpec
        Weng–Lin OnlinePL / OnlineBT, CrowdBT online [Chen13], OnlineGBMM
        ([Pan18], Algorithm 1): the name (looked up once, here) or its registry spec.
    priors : Priors
        The same object the NUTS models read: ``mu0, sigma0`` for items, ``alpha`` (COUPLE)
        or ``beta()`` (CrowdBT) for workers.
    taylor, score_alpha : OnlineGBMM variants (:mod:`.gbmm`); defaults are the paper's.
    order, seed, passes : pass order (``"file"`` or a ``"shuffle"`` seeded by ``seed``).
    strict : a guard failure is an :class:`OnlineError` instead of a counted clamp.
    state : resume from this posterior (not modified).
    wl_params : Weng–Lin ``beta, kappa, tau, gamma`` (:func:`wl_defaults`).
    kappa, kappa2 : guards of Eq. (12) and appendix 1.1.2 (COUPLE, CrowdBT).
    bt_breaking : OnlineBT on a whole ranking (``"game"``, openskill's full pairing) or on
        its rank-broken pairs one after another (``"pairs"``, [Pan18], Sect. 4.4).

    Other Parameters
    ----------------
    progress : bool
        Show a progress bar over the rankings.
    """
    opts = algorithm_options(model, taylor=taylor, score_alpha=score_alpha, kappa=kappa,
                             kappa2=kappa2, wl_params=wl_params, bt_breaking=bt_breaking,
                             priors=priors)
    spec = as_spec(model)         # after the options: an unknown online name says so first
    post = _start_state(data, spec, priors, state, opts)
    item_map, worker_map = post.index_maps(data)
    seqs = pass_orders(data.n_rankings, order, seed, passes)
    counts = np.zeros(len(CLAMP_KEYS), dtype=np.int64)
    err = np.zeros(3, dtype=np.int64)
    pairwise = is_pairwise(model, opts)
    src = data.rank_break() if pairwise else data
    ordr, wk, lengths = kernel_arrays(src, item_map, worker_map)
    mu, s2 = post.mu, post.sigma2
    t0 = time.perf_counter()
    with _progress(data.n_rankings * passes, progress, f"{post.algorithm}") as bar:
        for p, rseq in enumerate(seqs):
            seq = pairs_sequence(data.lengths, rseq) if pairwise else rseq
            per_rk = len(seq) / max(len(rseq), 1)
            for start in range(0, len(seq), BLOCK):
                stop = min(start + BLOCK, len(seq))
                bad = _run_kernel(model, opts, ordr, lengths, wk, seq, start, stop, mu, s2,
                                  post.alpha, strict, counts, err)
                if bad >= 0:
                    _raise_strict(data, src, seq, err, p, pairwise)
                bar.update(round(stop / per_rk) - round(start / per_rk))
    post.seconds += time.perf_counter() - t0
    post.n_rankings += data.n_rankings * passes
    for key, c in zip(CLAMP_KEYS, counts):
        post.clamped[key] = int(post.clamped.get(key, 0) + c)
    post.options.setdefault("runs", []).append(
        {"source": str(data.source), "order": order, "seed": int(seed), "passes": int(passes),
         "rankings": int(data.n_rankings), "strict": bool(strict)})
    return post


def _start_state(data, model: str | ModelSpec, priors, state, opts) -> OnlinePosterior:
    spec = as_spec(model)         # the worker parameter and its length rule
    model = spec.name
    if state is None:
        if spec.has_eta:
            priors = priors.for_data(data, K=spec.prior_K(data.K))
        post = OnlinePosterior.from_priors(spec, data.items, priors, workers=data.workers,
                                           K=max(data.K, 2), options=opts)
    else:
        if state.model != model:
            raise DataError(f"the saved state is for model {state.model!r}, not {model!r}",
                            "state")
        # a state saved before an option existed was made with its algorithm's old value
        saved = {**online_algorithm(model).saved_defaults, **state.options}
        differ = {k: (saved.get(k), v) for k, v in opts.items() if saved.get(k) != v}
        if differ:
            raise DataError("the saved state was made with other options: " + ", ".join(
                f"{k}={a!r} (now {b!r})" for k, (a, b) in differ.items()), "state")
        post = state.copy()
        post.spec = spec
        post.check("state")
        post.extend(data.items, data.workers if spec.has_eta else (), priors)
    if _grows_with_K(spec) and post.alpha.shape[1] < data.K:
        raise DataError(f"rankings of length {data.K} but the worker state has K="
                        f"{post.alpha.shape[1]}", data.source)
    return post


def _run_kernel(model, opts, ordr, lengths, wk, seq, start, stop, mu, s2, alpha, strict,
                counts, err) -> int:
    return online_algorithm(model).kernel(opts, ordr, lengths, wk, seq, start, stop, mu, s2,
                                          alpha, strict, counts, err)


def _grows_with_K(spec: ModelSpec) -> bool:
    """The worker vector is as long as the longest ranking (a Dirichlet prior: COUPLE)."""
    return spec.has_eta and not spec.eta_scalar


def _raise_strict(data, src, seq, err, p, pairwise):
    n = int(seq[err[0]])
    what = {v: k for k, v in CODES.items()}.get(int(err[1]), "?")
    source_rk = int(src.origin[n]) if pairwise else int(data.origin[n])
    worker = data.workers[int(src.worker[n])]
    raise OnlineError(
        f"{data.source}: ranking {source_rk} (worker {worker!r}, pass {p + 1}, stage "
        f"{int(err[2])}): {what} became non-finite or non-positive (strict mode; without "
        f"--strict it is clamped and counted)")


# ------------------------------------------------------------------ streaming
def fit_online_stream(chunks: Iterable[Rankings] | str, model: str | ModelSpec,
                      priors: Priors | Callable[[Rankings], Priors], *,
                      chunk_size: int = 100_000, checkpoint: str | None = None,
                      checkpoint_every: int = 1_000_000, resume: bool = False,
                      state: OnlinePosterior | None = None, K: int | None = None,
                      progress: bool = False, total: int | None = None,
                      run_info: dict | None = None, **opts) -> OnlinePosterior:
    """One pass in the order of the chunks over rankings that arrive in chunks, never all
    in memory; the numbers are those of :func:`fit_online` over all of them, bit for bit.

    ``chunks`` is an iterable of :class:`Rankings` or a path, read with
    ``models.io.iter_rankings_chunks(path, chunk_size)``; each chunk's ``items`` and
    ``workers`` must extend the previous chunk's (as the reader's do), so that ids are
    mapped incrementally. ``priors`` is a :class:`Priors` covering every worker, or a
    function of a chunk returning one for the chunk's workers (e.g. a geometric profile
    for the workers seen so far). With ``checkpoint``, the state is saved atomically every
    ``checkpoint_every`` rankings and at the end, with the count consumed from this stream
    in ``options["stream"]["consumed"]``; ``resume=True`` reloads it and skips the
    rankings already consumed. ``K`` fixes COUPLE's worker vector length up front (default:
    the first chunk's longest ranking, as ``fit_online`` takes the data's); a later chunk with longer rankings widens every worker's ``α``
    with its prior's further entries, which no earlier update has read (the update of a
    ranking of ``k`` items reads and writes ``α_w[:k]`` only), so the result does not
    depend on when it happens. ``progress`` shows rankings and rankings/s (``total``: the
    expected count, when known). ``run_info`` updates this pass's entry in
    ``options["runs"]`` (e.g. the order an external shuffle gave). ``order``/``passes`` other than one pass in file order
    are refused: a stream has no random access (the CLI's ``--order shuffle`` shuffles
    externally, :func:`crowdrank.models.io.shuffle.external_shuffle`, and feeds the result here).

    Parameters
    ----------
    chunks : iterable of Rankings, or str
        The rankings, chunk by chunk, or a path read in chunks of ``chunk_size``.
    model : str or ModelSpec
        ``pl``, ``bt``, ``crowdbt`` or ``couple``, or its spec (as :func:`fit_online`).
    priors : Priors or callable
        Priors covering every worker, or a function of a chunk returning them.
    chunk_size : int
        Rankings per chunk when ``chunks`` is a path.
    checkpoint : str, optional
        A file the state is saved to atomically as the pass goes.
    checkpoint_every : int
        Rankings between two saves of the checkpoint.
    resume : bool
        Reload ``checkpoint`` and skip the rankings it already consumed.
    state : OnlinePosterior, optional
        A state to continue from instead of the prior.
    K : int, optional
        COUPLE's worker vector length, fixed up front.
    progress : bool
        Show a progress bar.
    total : int, optional
        The number of rankings, for the progress bar.
    run_info : dict, optional
        What is stored beside the state in ``options["stream"]`` (the run's description).
    **opts
        The options of :func:`fit_online` (``taylor``, ``order``, ``kappa``, ...).
    """
    if opts.get("order", "file") != "file" or opts.get("passes", 1) != 1:
        raise UsageError("streaming runs one pass in the order of the chunks; shuffle the "
                         "stream first (models.io.shuffle.external_shuffle)")
    opts = {k: v for k, v in opts.items() if k not in ("order", "passes", "progress")}
    online_algorithm(model)       # an unknown online name says so before the lookup
    spec = as_spec(model)
    source = None
    if isinstance(chunks, str):
        from crowdrank.models.io import iter_rankings_chunks
        source = chunks
        chunks = iter_rankings_chunks(chunks, chunk_size, keep_task=False)
    skip = 0
    post = state
    if resume and checkpoint is not None:
        from pathlib import Path
        if Path(checkpoint).exists():
            post = OnlinePosterior.from_json(checkpoint)
            skip = int(post.options.get("stream", {}).get("consumed", 0))
    consumed, since = skip, 0
    runs = [] if post is None else list(post.options.get("runs", []))
    n_run = 0
    t0 = time.perf_counter()
    with _stream_progress(progress, total) as bar:
        for chunk in chunks:
            source = source or str(chunk.source)
            if skip >= chunk.n_rankings:
                skip -= chunk.n_rankings
                continue
            if skip:
                chunk = chunk.subset(np.arange(skip, chunk.n_rankings))
                skip = 0
            pri = priors(chunk) if callable(priors) else priors
            if post is None and _grows_with_K(spec):
                Kc = max(chunk.K, 2) if K is None else K
                post = OnlinePosterior.from_priors(spec, [], pri, workers=[], K=Kc,
                                                   options=algorithm_options(
                                                       spec, **_alg_kw(opts), priors=pri))
            if post is not None and _grows_with_K(spec) and post.alpha.shape[1] < chunk.K:
                _widen(post, chunk.K, pri)
            post = fit_online(chunk, spec, pri, state=post, progress=False, **opts)
            post.options.pop("runs", None)   # one entry per chunk would grow without bound
            consumed += chunk.n_rankings
            since += chunk.n_rankings
            n_run += chunk.n_rankings
            post.options["stream"] = {"consumed": consumed}
            if checkpoint is not None and since >= checkpoint_every:
                post.to_json(checkpoint)
                since = 0
            bar.update(chunk.n_rankings)
    if post is None:
        raise DataError("no rankings in the stream", source or "<stream>")
    runs.append({"source": str(source), "order": "file", "seed": 0, "passes": 1,
                 "rankings": int(n_run), "strict": bool(opts.get("strict", False)),
                 "stream": True, "wall_seconds": round(time.perf_counter() - t0, 3),
                 **(run_info or {})})
    post.options["runs"] = runs
    if checkpoint is not None:
        post.to_json(checkpoint)
    return post


def _widen(post: OnlinePosterior, K: int, priors: Priors) -> None:
    """Lengthen every COUPLE worker's ``α`` to ``K`` with its prior's entries
    ``K_old..K-1`` (never read by the updates so far, see :func:`fit_online_stream`)."""
    old = post.alpha.shape[1]
    if priors.K < K:
        raise DataError(f"worker priors have length {priors.K} but the stream has rankings "
                        f"of length {K}", priors.spec)
    index = {w: i for i, w in enumerate(priors.workers)}
    missing = [w for w in post.workers if w not in index]
    if missing:
        raise DataError(f"no worker prior for {len(missing)} worker(s), e.g. {missing[:5]}",
                        priors.spec)
    rows = priors.alpha[[index[w] for w in post.workers]][:, old:K]
    post.alpha = np.concatenate([post.alpha, rows.reshape(len(post.workers), K - old)], axis=1)


def _stream_progress(enabled: bool, total: int | None):
    from tqdm.auto import tqdm
    return tqdm(total=total, disable=not enabled, desc="rankings", unit="rk",
                unit_scale=True, leave=False, smoothing=0.1)


def _alg_kw(opts: dict) -> dict:
    keys = ("taylor", "score_alpha", "kappa", "kappa2", "wl_params", "bt_breaking")
    return {k: opts[k] for k in keys if k in opts}

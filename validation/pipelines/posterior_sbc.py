"""Posterior SBC: calibration of a fit *conditional on the user's data* [Sailynoja25].

For replicate ``i``: draw ``θ′ ~ q(θ | y)`` from the method's fit to the data ``y``,
simulate ``y′ ~ p(y′ | θ′)`` on the observed design (tasks resampled from ``y``: the same
workers, task sizes and item sets), refit on ``(y, y′)`` and rank ``θ′`` among the refit's
draws. For the exact posterior ``θ′`` is a draw from ``p(θ | y, y′)`` (the joint
``p(θ | y) p(y′ | θ)`` is ``p(y′ | y) p(θ | y, y′)``), so its ranks are uniform; a method
whose refit does not update coherently from ``q(θ | y)`` shows in the ranks. An online
method's refit is what it does in production: its saved state continued with ``y′``
(:attr:`crowdrank.inference.methods.Method.update`), no pass over ``y`` repeated.

The check cannot see a method that ignores the data (``q`` = the prior passes it
exactly), and an over-confident ``q`` passes when ``y′`` is small (its ranks tend to
uniform as ``y′`` shrinks; docs/sbc.md derives by how much). Two companion checks on
the base fit (:mod:`.posterior_sbc_checks`) and the augmentation's default size
(:data:`DEFAULT_AUGMENT`, chosen by the planted-method test) cover both.

The replicates run through :func:`crowdrank.validation.runtime.grid.run_grid` (local
processes or Dask; cached, so a killed run resumes); the base fit is cached beside them.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from crowdrank.models.data import Rankings
from crowdrank.models.errors import UsageError
from crowdrank.models.registry import ModelSpec, as_spec, name_of
from crowdrank.models.simulate import redraw_orders
from crowdrank.validation.pipelines.posterior_sbc_draws import (
    checked_parameters,
    draws_of,
    log_eta_rows,
    one_draw,
    refit_moments,
)
from crowdrank.validation.pipelines.sbc_ranks import (
    flatten_params,
    sbc_ranks,
)

#: ``y′`` holds ``augment × N`` rankings by default. The size sets the power against an
#: over-confident fit (ranks of a fit with variances halved tend to uniform as ``y′``
#: shrinks): at 2 the planted over-confident and prior-only fits are flagged in 10 of 10
#: seeds and the exact posterior in 0 of 10; at 1 the over-confident one in 8 of 10
#: (docs/sbc.md, "Posterior SBC"; bench/results/posterior_sbc.json, kind "power").
DEFAULT_AUGMENT = 2.0

#: What a cached replicate holds; part of the cache key, so a cache written without the
#: standardised errors ``z`` and variance ratios the tolerance verdict reads is not mistaken
#: for one with them.
REPLICATE_FORMAT = 3


@dataclass(frozen=True)
class PosteriorSbcConfig:
    """What a posterior-SBC run checks, and how.

    Attributes
    ----------
    method : str
        A name of the method registry.
    model : str
        A name of the model registry the method fits.
    sims : int
        Replicates.
    augment : float
        ``y′`` has ``max(1, round(augment · N))`` rankings (``N`` those of the data).
    ranks : int
        Draws of each refit ``θ′`` is ranked among (ranks ``0..ranks``).
    seed : int
        Master seed: replicate ``i`` uses streams derived from ``(seed, i)``.
    alpha : float
        Family-wise level of the verdict.
    predictive_draws : int
        Draws of the base fit the predictive check uses.
    options : dict
        The method's options that differ from its defaults (the base fit and every refit).
    """

    method: str = "online"
    model: str = "couple"
    sims: int = 200
    augment: float = DEFAULT_AUGMENT
    ranks: int = 100
    seed: int = 0
    alpha: float = 0.05
    predictive_draws: int = 200
    options: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.sims < 2:
            raise UsageError(f"--sims must be >= 2, got {self.sims}")
        if not self.augment > 0:
            raise UsageError(f"--augment must be > 0, got {self.augment}")
        if self.ranks < 10:
            raise UsageError(f"--ranks must be >= 10, got {self.ranks}")


# ====================================================================== the augmentation
def augmentation(model: str | ModelSpec, data: Rankings, lam, eta, m: int, rng: np.random.Generator
                 ) -> Rankings:
    """``y′``: ``m`` tasks drawn with replacement from ``data``'s design (each keeps its
    worker and item set), ordered by ``model``'s generative process at ``(λ, η)``
    (:func:`crowdrank.models.simulate.redraw_orders`)."""
    rows = rng.integers(0, data.n_rankings, size=int(m))
    tasks = np.asarray(data.order)[:, rows].T
    worker = np.asarray(data.worker)[rows]
    orders = redraw_orders(model, tasks, worker, np.asarray(lam, float),
                           log_eta_rows(model, eta), seed=rng)
    return Rankings(items=data.items, workers=data.workers, order=orders.T,
                    lengths=np.asarray(data.lengths)[rows], worker=worker,
                    source=f"y' ({m} rankings simulated on the design of {data.source})")


def joined(data: Rankings, extra: Rankings) -> Rankings:
    """``data`` followed by ``extra`` (the same items and workers)."""
    K = max(data.order.shape[0], extra.order.shape[0])

    def pad(o):
        return np.vstack([o, np.full((K - o.shape[0], o.shape[1]), -1, o.dtype)])

    return Rankings(items=data.items, workers=data.workers,
                    order=np.hstack([pad(np.asarray(data.order)), pad(np.asarray(extra.order))]),
                    lengths=np.concatenate([data.lengths, extra.lengths]),
                    worker=np.concatenate([data.worker, extra.worker]),
                    source=f"{data.source} + {extra.n_rankings} simulated rankings")


# ====================================================================== the fits
def model_spec(cfg: PosteriorSbcConfig, spec: ModelSpec | None = None) -> ModelSpec:
    """The spec of ``cfg.model``: the caller's (the audit hands its own down), else the
    name looked up, once, where the run starts."""
    if spec is None:
        return as_spec(cfg.model)
    if spec.name != cfg.model:
        raise ValueError(f"the spec of {spec.name!r} handed for a run of {cfg.model!r}")
    return spec


def check(model: str | ModelSpec, method: str) -> None:
    """Refuse, before anything runs, a method that does not fit ``model``."""
    from crowdrank.inference.methods import get as get_method

    m = get_method(method)
    if not m.fits(model):
        raise UsageError(f"--method {method} fits models {', '.join(m.model_names())}, not "
                         f"{name_of(model)}")


def method_options(method: str, given: dict | None = None):
    """The method's options: its defaults with ``given`` replaced (a
    :class:`~crowdrank.models.errors.UsageError` naming an unknown field)."""
    from dataclasses import fields, replace

    from crowdrank.inference.methods import get as get_method

    m = get_method(method)
    known = {f.name for f in fields(m.options_class)}
    unknown = sorted(set(given or {}) - known)
    if unknown:
        raise UsageError(f"method {method} has no option {', '.join(unknown)}; it has "
                         f"{', '.join(sorted(known))}")
    return replace(m.options(), **dict(given or {}))


def base_fit(data: Rankings, model: str | ModelSpec, method: str, priors, seed: int, options=None):
    """The method's fit to the data."""
    from crowdrank.inference.methods import get as get_method

    return get_method(method).run(data, model, priors, method_options(method, options),
                                  seed=int(seed))


def refit(base, data: Rankings, extra: Rankings, model: str | ModelSpec, method: str, priors, seed: int,
          options=None):
    """The method's fit to ``(data, extra)``: its ``update`` continues ``base`` with
    ``extra`` (an online state: no pass over ``data``), else a fit of the joined data."""
    from crowdrank.inference.methods import get as get_method

    m = get_method(method)
    opts = method_options(method, options)
    update = m.fn("update")             # None: the method has no continuation
    if update is not None:
        return update(base, extra, model, priors, opts, seed=int(seed))
    return m.run(joined(data, extra), model, priors, opts, seed=int(seed))


# ====================================================================== one replicate
def replicate(ctx: dict, sim: int) -> dict:
    """Replicate ``sim``: ``θ′``, ``y′``, the refit, and the rank of every parameter."""
    cfg = ctx["cfg"]
    rng = np.random.default_rng([cfg.seed, 0x505, sim])
    lam, eta = one_draw(ctx["base"], rng)
    data = ctx["data"]
    m = max(1, round(cfg.augment * data.n_rankings))
    t0 = time.perf_counter()
    spec = ctx["spec"]
    extra = augmentation(spec, data, lam, eta, m, rng)
    post = refit(ctx["base"], data, extra, spec, cfg.method, ctx["priors"],
                 seed=int(rng.integers(2**31)), options=cfg.options)
    t1 = time.perf_counter()
    lam_d, eta_d = draws_of(post, cfg.ranks, int(rng.integers(2**31)))
    truth = flatten_params(spec, lam, eta)
    draws = flatten_params(spec, lam_d, eta_d)
    mean, sd = refit_moments(spec, post, draws)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = (truth - mean) / sd          # a refit with sd 0 gives ±inf or NaN: kept, counted
        shrink = (sd / base_sd(ctx)) ** 2
    return {"sim": int(sim), "rank": sbc_ranks(draws, truth, rng).tolist(),
            "z": [float(v) for v in z], "var_ratio": [float(v) for v in shrink],
            "rankings_added": int(m), "refit_s": t1 - t0,
            "seconds": time.perf_counter() - t0}


def base_sd(ctx: dict) -> np.ndarray:
    """Every flattened parameter's sd under the base fit (computed once per process): the
    refit's variance over it, ``1/(1 + R_eff)``, says how much information ``y′`` added
    (:mod:`.posterior_sbc_tolerance`)."""
    if "base_sd" not in ctx:
        cfg = ctx["cfg"]
        lam_d, eta_d = draws_of(ctx["base"], cfg.ranks, cfg.seed)
        ctx["base_sd"] = refit_moments(ctx["spec"], ctx["base"],
                                       flatten_params(ctx["spec"], lam_d, eta_d))[1]
    return ctx["base_sd"]


_CONTEXTS: dict[str, dict] = {}


def load_context(path: str) -> dict:
    """The pickled base (data, priors, fit, config), read once per process; its ``setup``
    (``"module:function"``) is called then, before any replicate of this process."""
    if path not in _CONTEXTS:
        with open(path, "rb") as fh:
            ctx = pickle.load(fh)
        call_setup(ctx.get("setup"))
        _CONTEXTS[path] = ctx
    return _CONTEXTS[path]


def call_setup(setup: str | None) -> None:
    """Call ``"module:function"`` (e.g. one that registers methods outside the built-in
    registry, which a spawned process or a Dask worker does not have)."""
    if setup:
        import importlib

        module, _, name = setup.partition(":")
        getattr(importlib.import_module(module), name)()


def replicate_job(spec: dict) -> dict:
    """A grid job (:func:`crowdrank.validation.runtime.grid.run_grid`): one replicate."""
    return replicate(load_context(spec["context"]), int(spec["sim"]))


# ====================================================================== the run
def fingerprint(data: Rankings, priors, cfg: PosteriorSbcConfig) -> str:
    """What the base fit and the replicates depend on: the data, the priors and every
    setting but the replicate count (a larger ``--sims`` extends a run)."""
    h = hashlib.sha256()
    for a in (data.order, data.lengths, data.worker):
        h.update(np.ascontiguousarray(a).tobytes())
    h.update(repr((data.items, data.workers)).encode())
    h.update(pickle.dumps(priors))
    setting = {k: v for k, v in asdict(cfg).items() if k != "sims"}
    h.update(json.dumps(setting, sort_keys=True).encode())
    h.update(f"replicate format {REPLICATE_FORMAT}".encode())
    return h.hexdigest()[:16]


def prepare(data: Rankings, priors, cfg: PosteriorSbcConfig, out: Path, *,
            base=None, setup: str | None = None, spec: ModelSpec | None = None
            ) -> tuple[Path, dict]:
    """Fit the base (or read it from ``out/cache``; ``base``: the method's fit made by the
    caller with ``cfg``'s options) and pickle the replicates' context, with ``setup`` for
    the processes that read it (:func:`load_context`)."""
    call_setup(setup)
    spec = model_spec(cfg, spec)
    check(spec, cfg.method)
    method_options(cfg.method, cfg.options)
    key = fingerprint(data, priors, cfg)
    path = out / "cache" / f"base-{key}.pkl"
    if path.exists():
        ctx = load_context(str(path))
        if ctx.get("setup") != setup:          # the setup is not part of the cache key
            ctx["setup"] = setup
            _dump(path, ctx)
        ctx.setdefault("spec", spec)
        return path, ctx
    path.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    if base is None:
        base = base_fit(data, spec, cfg.method, priors, cfg.seed, cfg.options)
        base_s = time.perf_counter() - t0
    else:
        base_s = float(base.seconds)
    ctx = {"cfg": cfg, "spec": spec, "data": data, "priors": priors, "base": base,
           "base_s": base_s, "key": key, "setup": setup}
    _dump(path, ctx)
    _CONTEXTS[str(path)] = ctx
    return path, ctx


def _dump(path: Path, ctx: dict) -> None:
    tmp = path.with_suffix(".tmp")
    with tmp.open("wb") as fh:
        pickle.dump(ctx, fh)
    tmp.replace(path)


def replicate_specs(path: Path, ctx: dict, n: int) -> list[dict]:
    """The grid specs of replicates ``0..n-1`` (their cache keys) of the context pickled at
    ``path``."""
    return [{"kind": "posterior-sbc", "key": ctx["key"], "sim": i,
             "context": str(Path(path).resolve())} for i in range(n)]


def run_posterior_sbc(data: Rankings, priors, cfg: PosteriorSbcConfig, out, *,
                      processes: int | None = 1, scheduler=None, progress: bool = True,
                      base=None, setup: str | None = None,
                      spec: ModelSpec | None = None) -> dict:
    """Run (or resume) posterior SBC of ``cfg.method`` on ``data``; write ``ranks.csv``
    and ``posterior_sbc.json`` into ``out`` and return the summary (:func:`summarise`).

    Parameters
    ----------
    data : Rankings
        The user's data ``y``.
    priors : Priors
        The priors every fit reads (the method's own and the refits').
    cfg : PosteriorSbcConfig
    out : path
        Output folder; replicates are cached in ``out/cache``.
    processes : int, optional
        Local processes for the replicates (1: in this process; a replicate of an online
        method takes milliseconds, less than a process's start).
    scheduler : None, "local", address or Client
        Dask ``distributed`` instead of local processes.
    progress : bool
        Progress lines on stderr.
    base : Posterior, optional
        The method's fit to ``data`` with ``cfg``'s options, when the caller has it (the
        audit's); fitted here otherwise.
    setup : str, optional
        ``"module:function"`` called here and in every process that runs replicates,
        before the first: a method registered at run time (the planted methods of
        :mod:`.posterior_sbc_planted`) is not in a spawned process's registry.
    spec : ModelSpec, optional
        ``cfg.model``'s spec when the caller has it (the audit's): the replicates use it
        and look nothing up; ``cfg.model`` is looked up once otherwise.
    """
    from crowdrank.validation.pipelines.posterior_sbc_checks import companion_checks
    from crowdrank.validation.runtime.grid import GridError, load_cached, run_grid

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    path, ctx = prepare(data, priors, cfg, out, base=base, setup=setup, spec=spec)
    specs = replicate_specs(path, ctx, cfg.sims)
    failures: dict[str, str] = {}
    try:
        run_grid(specs, replicate_job, out / "cache", processes=processes,
                 progress=progress, scheduler=scheduler)
    except GridError as exc:
        failures = exc.failures
    done = [r for r in (load_cached(out / "cache", s) for s in specs) if r is not None]
    if len(done) < 2:
        raise RuntimeError("fewer than 2 posterior-SBC replicates finished: " + "; ".join(
            list(failures.values())[:3]))
    t1 = time.perf_counter()
    checks = companion_checks(ctx["base"], data, priors, cfg, ctx["spec"])
    summary = summarise(cfg, ctx, done, checks)
    summary["failed_replicates"] = [{"key": k, "error": v} for k, v in failures.items()]
    summary["timing"].update({"wall_s_this_run": time.perf_counter() - t0,
                              "replicates_wall_s": t1 - t0,
                              "checks_s": time.perf_counter() - t1})
    write_outputs(out, summary, done)
    return summary


def summarise(cfg: PosteriorSbcConfig, ctx: dict, done: list[dict], checks: dict) -> dict:
    """The verdict and its figures. **Calibrated** when every group of
    :data:`.posterior_sbc_draws.GROUPS` is within the fidelity box's tolerance
    (:func:`.posterior_sbc_tolerance.tolerance_summary`: not confidently outside it) and no
    companion check flags the fit. Beside it, the strict figure: the ranks' tail-sensitive
    uniformity test per group (``ranks``; ``strict_calibrated`` when it passes and no
    companion check flags), which detects any miscalibration given enough replicates."""
    from crowdrank.validation.pipelines.posterior_sbc_tolerance import tolerance_summary
    from crowdrank.validation.pipelines.sbc_uniformity import uniformity_summary

    data = ctx["data"]
    names, fams, keep, total = checked_parameters(ctx["spec"], data, ctx["base"])
    done = sorted(done, key=lambda r: r["sim"])
    ranks = np.array([r["rank"] for r in done], float)
    if ranks.shape[1] != total:
        raise ValueError(f"{ranks.shape[1]} ranks per replicate for {total} parameters")
    z = np.array([r["z"] for r in done], float)[:, keep]
    shrink = np.array([r["var_ratio"] for r in done], float)[:, keep]
    uni = uniformity_summary(ranks[:, keep], names, fams, cfg.ranks + 1, alpha=cfg.alpha,
                             seed=cfg.seed)
    tol = tolerance_summary(z, shrink, names, fams, alpha=cfg.alpha)
    flags = [c["flag"] for c in checks.values() if c.get("flag")]
    calibrated = bool(tol["within_tolerance"]) and not flags
    strict = bool(uni["calibrated"]) and not flags
    out_box = [f"{g} outside the box's tolerance ({'; '.join(v['reasons'])})"
               for g, v in tol["groups"].items() if v["outside"]]
    bad = [f for f, v in uni["families"].items() if not v["calibrated"]]
    strict_note = ("; strict test: ranks uniform in every group" if not bad else
                   f"; strict test: ranks not uniform in {', '.join(bad)}")
    verdict = ("calibrated within the fidelity box's tolerance: no group confidently outside "
               "it, and the fit moves away from the prior and reproduces the data"
               if calibrated else "NOT calibrated: " + "; ".join(out_box + flags)) + strict_note
    secs = np.array([r["seconds"] for r in done])
    return {"method": cfg.method, "model": cfg.model, "config": asdict(cfg),
            "data": {"source": str(data.source), "rankings": data.n_rankings,
                     "items": data.n_items, "workers": data.n_workers},
            "replicates": len(done), "calibrated": calibrated, "verdict": verdict,
            "tolerance": tol, "strict_calibrated": strict,
            "ranks": uni, "checks": checks,
            "size": miscalibration(ranks[:, keep], fams, cfg.ranks),
            "names": names, "families": fams,
            "columns": keep,
            "timing": {"base_fit_s": ctx["base_s"], "replicate_s_mean": float(secs.mean()),
                       "replicate_s_total": float(secs.sum()),
                       "rankings_added": int(done[0]["rankings_added"])}}


def miscalibration(ranks: np.ndarray, families: list[str], S: int) -> dict:
    """How far from calibrated, per group, in the units of the fidelity box: each
    parameter's ranks as normal scores ``Φ⁻¹((rank + ½)/(S + 1))``, whose mean is 0 and sd 1
    for a calibrated fit; the medians over the group's parameters of ``|mean|`` (an
    off-centre fit) and of the sd (above 1: too narrow; below: too wide), and the share of
    parameters whose sd is outside ``[0.9, 1.1]``. Not a test: the size of what the test
    finds, for reading it beside a tolerance."""
    from scipy.stats import norm

    z = norm.ppf((ranks + 0.5) / (S + 1))
    out = {}
    for f in dict.fromkeys(families):
        cols = [j for j, g in enumerate(families) if g == f]
        m, sd = np.abs(z[:, cols].mean(axis=0)), z[:, cols].std(axis=0, ddof=1)
        out[f] = {"median_abs_mean": float(np.median(m)), "median_sd": float(np.median(sd)),
                  "share_sd_outside_0.9_1.1": float(np.mean((sd < 0.9) | (sd > 1.1)))}
    return out


def write_outputs(out: Path, summary: dict, done: list[dict]) -> None:
    """``ranks.csv`` (one row per replicate, a column per checked parameter) and
    ``posterior_sbc.json``."""
    import csv

    from crowdrank.validation.pipelines.sbc_ranks import _jsonable

    cols = summary["columns"]
    with (out / "ranks.csv").open("w", newline="") as fh:
        w = csv.writer(fh)             # quotes names with a comma (COUPLE's eta[w0,1])
        w.writerow(["replicate", *summary["names"]])
        for r in sorted(done, key=lambda r: r["sim"]):
            w.writerow([r["sim"], *(int(r["rank"][j]) for j in cols)])
    with (out / "posterior_sbc.json").open("w") as fh:
        json.dump(_jsonable(summary), fh, indent=1)

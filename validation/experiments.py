"""Grids of experiments (models × settings × seeds × variants) with an on-disk cache.

Each point of a grid is a plain JSON-able *spec* (a dict). Its cache key is a hash of the
canonical JSON of the spec, so the same spec always maps to the same file
``<cache_dir>/<key>.json`` holding ``{"spec": ..., "result": ...}``. A run skips every spec
whose file exists, so re-running a finished grid costs nothing and re-running an
interrupted one does only what is left. Files are written whole-or-not-at-all (a temporary
file renamed into place), so an interruption never leaves a half-written result that would
later be mistaken for a finished one.

Fits run in separate processes by default (``spawn``, because JAX and forked processes do
not mix); ``processes=1`` runs them in this process, in order.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path


def spec_key(spec: Mapping) -> str:
    """A stable 16-hex-digit key of a spec (its canonical, key-sorted JSON)."""
    text = json.dumps(spec, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def grid(models: Sequence[str], settings: Sequence[str], seeds: Iterable[int],
         variants: Sequence[Mapping] = ({},), **common) -> list[dict]:
    """All combinations as specs: ``{"model", "setting", "seed", "variant", **common}``."""
    return [dict(common, model=m, setting=s, seed=int(seed), variant=dict(v))
            for m, s, seed, v in itertools.product(models, settings, list(seeds), variants)]


def cache_path(cache_dir: str | Path, spec: Mapping) -> Path:
    return Path(cache_dir) / f"{spec_key(spec)}.json"


def load_cached(cache_dir: str | Path, spec: Mapping) -> dict | None:
    """The cached result of ``spec``, or ``None`` when it has not finished."""
    p = cache_path(cache_dir, spec)
    if not p.exists():
        return None
    with p.open() as fh:
        return json.load(fh)["result"]


def _store(cache_dir: Path, spec: Mapping, result: Mapping) -> None:
    p = cache_path(cache_dir, spec)
    tmp = p.with_suffix(f".tmp{os.getpid()}")
    with tmp.open("w") as fh:
        json.dump({"spec": spec, "result": result}, fh, default=str)
    os.replace(tmp, p)           # atomic: a reader sees the old state or the whole file


class GridError(RuntimeError):
    """Some specs failed; the others are cached. ``failures`` maps spec key → message."""

    def __init__(self, failures: dict[str, str]):
        self.failures = failures
        lines = "; ".join(f"{k}: {v}" for k, v in list(failures.items())[:5])
        super().__init__(f"{len(failures)} experiment(s) failed (the rest are cached; "
                         f"re-run to retry only these): {lines}")


@dataclass
class GridRun:
    """Results in spec order, and which specs were computed now (the rest came from cache)."""

    results: list[dict]
    computed: list[str]
    cached: list[str]
    seconds: float


def run_grid(specs: Sequence[Mapping], fn: Callable[[dict], dict], cache_dir: str | Path, *,
             processes: int | None = None, progress: bool = True) -> GridRun:
    """Run ``fn(spec)`` for every spec not cached yet, caching each result as it finishes.

    Parameters
    ----------
    specs : sequence of dict
        JSON-able grid points (see :func:`grid`). Duplicates run once.
    fn : callable
        ``spec -> JSON-able dict``; a module-level function when ``processes > 1``
        (it is pickled into the worker processes).
    cache_dir : path
    processes : int, optional
        Worker processes; default ``os.cpu_count()``; ``1`` runs serially in this process.

    Raises
    ------
    GridError
        After every other spec has finished and been cached, if some raised.
    """
    t0 = time.perf_counter()
    cache_dir = Path(cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    unique = {spec_key(s): dict(s) for s in specs}
    todo = {k: s for k, s in unique.items() if not cache_path(cache_dir, s).exists()}
    cached = [k for k in unique if k not in todo]
    processes = (os.cpu_count() or 1) if processes is None else max(1, int(processes))
    failures: dict[str, str] = {}
    done = 0

    def note(k, ok):
        nonlocal done
        done += 1
        if progress:
            print(f"[grid] {done}/{len(todo)} {'done' if ok else 'FAILED'} {k} "
                  f"({time.perf_counter() - t0:.0f}s; {len(cached)} cached)", file=sys.stderr)

    if processes == 1 or len(todo) <= 1:
        for k, s in todo.items():
            try:
                _store(cache_dir, s, fn(s))
                note(k, True)
            except Exception as exc:             # noqa: BLE001 - reported in GridError
                failures[k] = f"{type(exc).__name__}: {exc}"
                note(k, False)
    else:
        with ProcessPoolExecutor(min(processes, len(todo)), mp_context=get_context("spawn")) as ex:
            futs = {ex.submit(fn, s): k for k, s in todo.items()}
            for f in as_completed(futs):
                k = futs[f]
                try:
                    _store(cache_dir, todo[k], f.result())
                    note(k, True)
                except Exception as exc:         # noqa: BLE001
                    failures[k] = f"{type(exc).__name__}: {exc}"
                    note(k, False)
    if failures:
        raise GridError(failures)
    results = [load_cached(cache_dir, s) for s in specs]
    return GridRun(results, [k for k in todo], cached, time.perf_counter() - t0)


# ------------------------------------------------------------------ the standard experiment
def audit_job(spec: dict) -> dict:
    """One simulated audit: simulate, fit online (``spec["variant"]``) and NUTS with the same
    priors, compare. Spec keys: ``model`` (couple|crowdbt), ``setting`` (a worker type),
    ``seed``, ``variant`` (online options, e.g. ``{"taylor": "full"}``) and optionally
    ``n_items, n_workers, tasks_per_worker, kmax, chains, tune, draws, backend``.
    Returns the comparison's JSON summary plus timings.
    """
    from models.priors import Priors
    from models.simulate import simulate

    from .audit import AuditConfig, Subject, audit_model

    model = spec["model"]
    sim = simulate("couple", n_items=spec.get("n_items", 40), n_workers=spec.get("n_workers", 10),
                   tasks_per_worker=spec.get("tasks_per_worker", 30), kmax=spec.get("kmax", 4),
                   setting=spec["setting"], seed=spec["seed"])
    data = sim.rankings
    priors = Priors.geometric(data.workers, max(data.K, 2))
    # the audit's own pipeline and defaults; the spec overrides the sampler settings
    cfg = AuditConfig(models=(model,), seed=spec["seed"], permutations=0,
                      **{k: spec[k] for k in ("chains", "tune", "draws", "backend")
                         if k in spec})
    subject = Subject(data, truth=sim.lam,
                      truth_eta1=sim.eta[:, 0] if model == "couple" else None)
    variant = dict(spec.get("variant", {}))
    a = audit_model(subject, model, priors, cfg, None, variants=[variant])
    cmp = a.comparisons[0]
    out = cmp.to_dict()
    out["timings"] = {"online": a.online_seconds, "nuts": dict(a.nuts.timings)}
    return out


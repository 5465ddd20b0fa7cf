"""Grids of experiments (models × settings × seeds × variants) with an on-disk cache.

Each point of a grid is a plain JSON-able *spec* (a dict). Its cache key is a hash of the
canonical JSON of the spec, so the same spec always maps to the same file
``<cache_dir>/<key>.json`` holding ``{"spec": ..., "result": ...}``. A run skips every spec
whose file exists, so re-running a finished grid costs nothing and re-running an
interrupted one does only what is left. Files are written whole-or-not-at-all (a temporary
file renamed into place), so an interruption never leaves a half-written result that would
later be mistaken for a finished one.

Fits run in separate processes by default (``spawn``, because JAX and forked processes do
not mix); ``processes=1`` runs them in this process, in order. With ``scheduler`` the same
tasks go to a Dask ``distributed`` cluster instead (:func:`dask_client`): ``"local"``
starts a ``LocalCluster`` of ``processes`` single-threaded worker processes on this
machine, an address (``tcp://host:8786``) connects to a running ``dask scheduler`` whose
``dask worker`` processes import this project, and a ``distributed.Client`` is used as
given. Results come back to this process and are cached here, as they finish, exactly as
with local processes: the workers need the project's code (and any data file a spec
names), never the cache directory, and a finished spec is never recomputed. Every result
is ``fn(spec)``, so it is the same wherever it ran.
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


#: Environment variable naming the default scheduler of the ``crowdrank`` commands.
SCHEDULER_ENV = "CROWDRANK_SCHEDULER"


class SchedulerError(ConnectionError):
    """The Dask scheduler cannot be reached (the message says where and what to do)."""


def resolve_scheduler(option: str | None) -> str | None:
    """The scheduler a command uses: its ``--scheduler`` option, else ``$CROWDRANK_SCHEDULER``,
    else ``None`` (local processes)."""
    value = option or os.environ.get(SCHEDULER_ENV) or None
    return value.strip() if isinstance(value, str) and value.strip() else None


def dask_client(scheduler, processes: int | None = None, timeout: float = 10.0):
    """``(client, owned)`` for ``scheduler`` (see the module docstring); ``owned`` says
    that the caller must close the client (and its ``LocalCluster``).

    Raises
    ------
    SchedulerError
        When no scheduler answers at the address within ``timeout`` seconds.
    """
    from distributed import Client, LocalCluster

    if isinstance(scheduler, Client):
        return scheduler, False
    if scheduler == "local":
        n = (os.cpu_count() or 1) if processes is None else max(1, int(processes))
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                               dashboard_address=None)
        return Client(cluster), True
    try:
        return Client(str(scheduler), timeout=f"{timeout}s"), True
    except (OSError, TimeoutError) as exc:
        raise SchedulerError(
            f"cannot reach the Dask scheduler at {scheduler!r} within {timeout:g} s "
            f"({type(exc).__name__}: {exc}); start one with `dask scheduler` and workers "
            f"with `dask worker ADDRESS`, or leave --scheduler / ${SCHEDULER_ENV} unset to "
            "run in local processes") from None


def release_client(client, owned: bool) -> None:
    """Close what :func:`dask_client` opened for the caller (the client and its
    ``LocalCluster``); a client the caller passed in is left open."""
    if owned:
        cluster = getattr(client, "cluster", None)
        client.close()
        if cluster is not None:
            cluster.close()


def run_grid(specs: Sequence[Mapping], fn: Callable[[dict], dict], cache_dir: str | Path, *,
             processes: int | None = None, progress: bool = True,
             scheduler=None) -> GridRun:
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
        With ``scheduler="local"``: the ``LocalCluster``'s worker processes.
    scheduler : None, "local", str or distributed.Client
        ``None``: local processes. Otherwise the tasks run on Dask ``distributed``
        (:func:`dask_client`); ``fn`` must then be importable by the workers.

    Raises
    ------
    GridError
        After every other spec has finished and been cached, if some raised.
    SchedulerError
        ``scheduler`` is an address where no scheduler answers.
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

    if scheduler is not None and todo:
        _run_dask(todo, fn, cache_dir, scheduler, processes, note, failures, progress)
    elif processes == 1 or len(todo) <= 1:
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


def _run_dask(todo: dict, fn, cache_dir: Path, scheduler, processes, note, failures,
              progress: bool) -> None:
    """The Dask branch of :func:`run_grid`: submit every spec still to do, store each
    result here as it completes (a progress bar counts them)."""
    from distributed import as_completed as dask_completed
    from tqdm.auto import tqdm

    client, owned = dask_client(scheduler, processes)
    try:
        # pure=False: a spec is run once per submission (the cache, not Dask, dedupes);
        # the key names the spec so a cluster's dashboard shows what runs
        futs = {client.submit(fn, s, key=f"crowdrank-grid-{k}", pure=False): k
                for k, s in todo.items()}
        with tqdm(total=len(futs), disable=not progress, desc="grid (dask)",
                  unit="task", leave=False) as bar:
            for f in dask_completed(futs):
                k = futs[f]
                try:
                    _store(cache_dir, todo[k], f.result())
                    note(k, True)
                except Exception as exc:         # noqa: BLE001 - reported in GridError
                    failures[k] = f"{type(exc).__name__}: {exc}"
                    note(k, False)
                bar.update(1)
                f.release()
    finally:
        release_client(client, owned)


def sleep_job(spec: dict) -> dict:
    """A synthetic grid task for executor checks and the overhead benchmark: about
    ``spec["work"]`` seconds of CPU (a seeded NumPy loop), and a result that depends only
    on ``spec["seed"]`` (so any two executors must return the same numbers)."""
    import numpy as np

    rng = np.random.default_rng(int(spec["seed"]))
    t0 = time.process_time()
    acc = 0.0
    while time.process_time() - t0 < float(spec.get("work", 0.0)):
        acc += float(np.sum(np.sort(rng.random(20_000))[:10]))
    if spec.get("fail"):
        raise RuntimeError(f"spec asked to fail (seed {spec['seed']})")
    draws = np.random.default_rng(int(spec["seed"])).normal(size=3)
    return {"seed": int(spec["seed"]), "draws": [float(x) for x in draws], "pid": os.getpid()}

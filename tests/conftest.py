"""Shared test fixtures.

Real data sets live in ``../shared/datasets`` beside the checkout and are not vendored;
tests that need them use the ``shared_datasets`` fixture, which skips with a clear message
when the folder is absent.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("MPLBACKEND", "Agg")


def _use_this_checkout() -> None:
    """``import crowdrank`` loads the checkout these tests sit in, here and in every process
    they start (``bench/tools/checkout.py``: a ``crowdrank -> checkout`` link first on
    ``sys.path`` and ``PYTHONPATH``), not whichever checkout the environment installed; a
    clone or a worktree sharing the virtual environment needs no manual link
    (tests/test_checkout.py). Loaded by its path, before anything imports ``crowdrank``."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "bench" / "tools" / "checkout.py"
    spec = importlib.util.spec_from_file_location("crowdrank_checkout", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.use()


_use_this_checkout()

# One XLA host device per default chain, as the ``crowdrank`` entry point sets up; must run
# before JAX starts (an explicit call, not an import side effect of inference.nuts).
from crowdrank.inference.nuts import configure_host_devices

configure_host_devices()


def _quick_xla_compiles() -> None:
    """Compile this process's XLA programs with LLVM's optimisation off
    (``--xla_backend_optimization_level=0``): the flag is set, JAX's CPU backend started
    (it reads ``XLA_FLAGS`` once, then), and ``XLA_FLAGS`` put back as it was.

    Why: a small NUTS test spends most of its time compiling, not sampling (e.g. 75 of
    89 s), and most of a compile is LLVM optimising code that then runs for seconds. With
    the level at 0 the same tests took 20-30 % fewer CPU seconds, sampling included,
    measured one by one (43.7 -> 30.7 CPU-s for the Gibbs-vs-NUTS agreement test, 25.5 ->
    19.1 for the 20-item layout test). The programs compute the same model and sampler
    (XLA's graph passes are unchanged; only the machine code is less tuned), so the
    oracles do not move. The processes a test starts (the README commands) get the
    environment back as it was and compile as users' runs do; workers compared with this
    process get the flag through ``worker_compilation_cache``.
    On by default; ``CROWDRANK_TEST_XLA_O0=0`` turns it off (a level already in
    ``XLA_FLAGS`` wins). Draws differ from the default level's by ~1e-6, which changes
    every chain's trajectory as a new seed would: the whole suite took 14.7 min idle with
    it (17.7 without) and then failed only ``tests/test_nuts_adapt.py``'s prior-only check
    of the smallest simplex entry, then seed-fragile (docs/testing.md); the flag stayed
    off until that check was made robust (the exact-variance z and tail statistic of
    ``validation.reference.simplex_prior_check``). With the flag it passes now, as do the
    89 tests of the files changed since that run and of the other prior/agreement checks
    (test_gibbs, test_nuts_adapt, test_prior_check, test_simplex_exact, ...)."""
    global _XLA_O0
    flags = os.environ.get("XLA_FLAGS", "")
    if os.environ.get("CROWDRANK_TEST_XLA_O0", "1") != "1" or "optimization_level" in flags:
        return
    os.environ["XLA_FLAGS"] = f"{flags} {_O0_FLAG}".strip()
    try:
        import jax

        jax.devices()               # the backend starts now, reading the flag
    finally:
        os.environ["XLA_FLAGS"] = flags
    _XLA_O0 = True


_O0_FLAG = "--xla_backend_optimization_level=0"
_XLA_O0 = False

_quick_xla_compiles()

ROOT = Path(__file__).resolve().parents[1]


def _session_compilation_cache() -> None:
    """Let identical XLA programs compiled by different tests of this run be compiled once.

    Why: ``fit_nuts`` builds its model closure afresh on every call, so JAX's in-memory
    caches never see the same function twice, and a test that samples the same model
    twice (an extended run beside its first round, a warm-up scheme beside the default,
    the same tiny data set in several tests) recompiled NUTS's warm-up and sampling loops
    each time — most of a small test's cost. JAX's persistent cache is keyed on the
    program itself (its HLO, the compile options, the JAX version), so a hit is the same
    executable; the draws do not change. The cache lives in a fresh temporary folder
    removed when the run ends: every run starts cold, as on CI, and nothing is shared with
    other runs; the commands' subprocesses keep theirs in a subfolder (see below). Only compiles above
    :data:`CACHE_MIN_COMPILE_S` are written (the many tiny eager ones cost more to store
    than to redo). ``CROWDRANK_TEST_JAX_CACHE=0`` turns it off.

    Under pytest-xdist (``make test``: two workers) the controller makes the folder and
    hands it to its workers through :data:`CACHE_ENV` (they inherit its environment when
    they start), so a program one worker compiled is loaded by the other. The workers
    then read and write one folder at once: a size bound (:data:`CACHE_MAX_BYTES`, never
    reached by one run) turns on JAX's file lock around every read and write, so no
    worker reads an entry another is still writing. Only the process that made the
    folder removes it."""
    if os.environ.get("CROWDRANK_TEST_JAX_CACHE", "1") == "0":
        os.environ["CROWDRANK_XLA_CACHE"] = "off"   # the commands' subprocesses too
        return
    import atexit
    import shutil
    import tempfile

    import jax

    global _CACHE_DIR
    shared = os.environ.get(CACHE_ENV) if os.environ.get("PYTEST_XDIST_WORKER") else None
    if shared:
        _CACHE_DIR = shared
    else:
        _CACHE_DIR = tempfile.mkdtemp(prefix="crowdrank-test-xla-")
        atexit.register(shutil.rmtree, _CACHE_DIR, ignore_errors=True)
        os.environ[CACHE_ENV] = _CACHE_DIR         # for the xdist workers started later
    jax.config.update("jax_compilation_cache_dir", _CACHE_DIR)
    # the crowdrank commands the tests start (the README's, as typed) keep their compiled
    # programs where a user's would be kept between runs (configure_compilation_cache),
    # but in this run's folder: cold at the start of every run, as on a fresh machine,
    # and never the user's own cache
    os.environ["CROWDRANK_XLA_CACHE"] = os.path.join(_CACHE_DIR, "commands")
    jax.config.update("jax_persistent_cache_min_compile_time_secs", CACHE_MIN_COMPILE_S)
    jax.config.update("jax_compilation_cache_max_size", CACHE_MAX_BYTES)


#: compile time (s) above which a program is written to the run's compilation cache
CACHE_MIN_COMPILE_S = 0.3
#: the cache's size bound: set only so that JAX locks the folder (16 GiB, never reached)
CACHE_MAX_BYTES = 16 << 30
#: the environment variable through which xdist workers get the controller's cache folder
CACHE_ENV = "CROWDRANK_TEST_XLA_CACHE_DIR"
_CACHE_DIR: str | None = None

_session_compilation_cache()


@pytest.fixture
def pytensor_without_c():
    """PyTensor functions compiled in this test run node by node in Python (``cxx``
    empty, inner graphs included): for a density or gradient evaluated a few times that is
    cheaper than gcc compiling its ops on a cold compiledir, as on CI (18 density and
    gradient tests: 61 CPU s with C, 24 without, 41 gcc modules fewer). Same ops, same
    float64 arithmetic; the sampling tests keep the C thunks their thousands of gradients
    need."""
    import pytensor

    with pytensor.config.change_flags(cxx=""):
        yield


@pytest.fixture
def worker_compilation_cache(monkeypatch):
    """Worker processes this test starts (a Dask ``LocalCluster``) read and write the run's
    compilation cache too, through JAX's environment variables: a worker then loads the
    executable the test's in-process run compiled for the same program instead of
    compiling it again. Only for tests comparing an in-process run with the same work in
    worker processes; the README commands' subprocesses never get it."""
    if _XLA_O0:      # compiled as this process compiles (same program, same cache key)
        monkeypatch.setenv("XLA_FLAGS", f"{os.environ.get('XLA_FLAGS', '')} {_O0_FLAG}".strip())
    if _CACHE_DIR is not None:
        monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", _CACHE_DIR)
        monkeypatch.setenv("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", str(CACHE_MIN_COMPILE_S))
        monkeypatch.setenv("JAX_COMPILATION_CACHE_MAX_SIZE", str(CACHE_MAX_BYTES))


#: mappings above which a module's end drops the compiled programs (the kernel's default
#: per-process limit, ``vm.max_map_count``, is 65,530; one module adds up to ~19,000)
MAX_MAPPINGS = 30_000


def _mappings() -> int:
    try:
        with open("/proc/self/maps", "rb") as f:
            return sum(1 for _ in f)
    except OSError:          # not Linux: no such limit to stay under
        return 0


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """Drop the compiled XLA programs at the end of a module once the process holds many
    memory mappings. One process runs the whole suite; without this it keeps every
    program it ever compiled, each holding mappings, and XLA's compiler aborted mid-suite
    (twice, at the same test) — near the kernel's per-process limit on mappings. Clearing
    only past :data:`MAX_MAPPINGS` keeps most modules' programs for the next ones (a
    clear after every module costs recompilations)."""
    yield
    if _mappings() > MAX_MAPPINGS and "jax" in sys.modules:
        import gc

        sys.modules["jax"].clear_caches()
        gc.collect()


#: a slow test's cost in units of a fast test's, to order the xdist work (an estimate: the
#: fast part of the suite is ~1,200 tests in ~10 CPU-min, ~0.5 s each; a slow one costs
#: 10-60 s, ~15 on average)
SLOW_WEIGHT = 30


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """In an xdist worker (``make test``: ``-n 2 --dist loadfile``), order the files
    heaviest first (weight: fast tests 1, slow ones :data:`SLOW_WEIGHT`).

    Why: ``--dist loadfile`` keeps each file on one worker, so its tests compile their
    models once and build their module fixtures once (``--dist load`` splits a file over
    both workers, which then compile and build twice), and hands the files out in the
    order the workers collected them. Heaviest first leaves the small files for the end,
    so neither worker idles long while the other finishes a long one; xdist's own
    reordering (by number of tests) must be off (``--no-loadscope-reorder``). Every
    worker computes the same order, as xdist requires; a run without xdist keeps the
    files' order. (``--dist loadgroup`` is not used: with pytest 9 and xdist 3.8 it ignores
    the groups, because xdist renames ``item._nodeid``, which pytest 9 no longer reads.)"""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    weight: dict[str, int] = {}
    for item in items:
        f = item.nodeid.split("::", 1)[0]
        weight[f] = weight.get(f, 0) + (SLOW_WEIGHT if item.get_closest_marker("slow") else 1)
    items.sort(key=lambda it: -weight[it.nodeid.split("::", 1)[0]])   # stable within a file


SHARED_DATASETS = Path(os.environ.get("CROWDRANK_DATASETS", ROOT.parent / "shared" / "datasets"))


@pytest.fixture(scope="session")
def shared_datasets() -> Path:
    if not SHARED_DATASETS.is_dir():
        pytest.skip(f"shared data sets not found at {SHARED_DATASETS} "
                    "(set CROWDRANK_DATASETS to their folder)")
    return SHARED_DATASETS


class RankingsReaders:
    """The rankings-CSV reader's paths, forced, and an exact comparison of two reads
    (shared by tests/test_io_arrow.py and tests/test_io_registry.py through the
    ``readers`` fixture): the paths must give the same :class:`~crowdrank.models.data.Rankings`."""

    @staticmethod
    def python_only(monkeypatch):
        """The rankings CSV read entirely by the csv path (the reader before Arrow)."""
        from crowdrank.models.io import rankings_csv

        monkeypatch.setattr(rankings_csv, "_arrow_header", lambda path: None)

    @staticmethod
    def all_rows_irregular(monkeypatch):
        """Send every row through the row-by-row path of the rankings-CSV reader (from
        either of its block paths, the Arrow one and the csv one)."""
        import numpy as np

        from crowdrank.models.io import rankings_csv

        clean = rankings_csv._clean_rows
        clean_arrow = rankings_csv._clean_arrow

        def none_clean(b, rows, shape):
            ok, *rest = clean(b, rows, shape)
            return (np.zeros_like(ok), *rest)

        def none_clean_arrow(*a):
            ok, *rest = clean_arrow(*a)
            return (np.zeros_like(ok), *rest)

        monkeypatch.setattr(rankings_csv, "_clean_rows", none_clean)
        monkeypatch.setattr(rankings_csv, "_clean_arrow", none_clean_arrow)

    @staticmethod
    def same(a, b):
        """``a`` and ``b`` are the same read: ids, notes, arrays, ties, tasks."""
        import numpy as np

        assert a.items == b.items and a.workers == b.workers and a.notes == b.notes
        for f in ("order", "lengths", "worker", "origin"):
            np.testing.assert_array_equal(getattr(a, f), getattr(b, f))
        assert a.ties_split == b.ties_split
        assert (a.task is None) == (b.task is None)
        if a.task is not None:
            assert list(a.task) == list(b.task)


@pytest.fixture
def readers() -> type[RankingsReaders]:
    return RankingsReaders

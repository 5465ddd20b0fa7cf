"""What JAX must be told before it starts: host devices for parallel chains and the
persistent compilation cache. Kept apart from :mod:`crowdrank.inference.nuts` (whose import
loads NumPyro's helpers, SciPy and pandas) so that the ``crowdrank`` entry point sets both
without importing any of them: a command that never samples (``fit --method online``,
``--help``) does not pay for NUTS.

Parallel chains (NumPyro)
-------------------------
NumPyro runs chains in parallel with ``pmap`` over XLA *host devices*, whose number is
fixed by ``XLA_FLAGS=--xla_force_host_platform_device_count`` when JAX initialises.
:func:`configure_host_devices` sets that flag — an explicit call, made by the ``crowdrank``
entry point, the benchmarks and the test suite, never an import side effect — **only if JAX
is not imported yet and the user has not set it**, to ``max(4, os.cpu_count())`` so that the
default 4 chains get a device each. The choice of ``chain_method`` is ``"parallel"`` when
there are enough devices, else ``"vectorized"`` (all chains in one program).

Compiled programs kept between runs
-----------------------------------
A small fit's cost is mostly XLA compiling its warm-up and sampling loops (a 40-ranking
COUPLE fit, 2 chains x 200: 51 CPU s cold, 16 with its programs cached).
:func:`configure_compilation_cache`, called by the ``crowdrank`` entry point like the
device flag, points JAX's persistent compilation cache at a folder, so that a second run
of the same program loads the executable instead of compiling it. JAX keys an entry on
the program itself (its HLO, the compile options and flags, the JAX version): a hit is
the same executable and gives the same draws.
"""

from __future__ import annotations

import os
import sys


def configure_host_devices(n: int | None = None) -> bool:
    """Ask XLA for ``n`` CPU devices (default ``max(4, cpu_count)``: one per default chain),
    if it is still possible (see module doc). Returns whether the flag was set.

    Parameters
    ----------
    n : int, optional
        The number of CPU devices; default ``max(4, cpu_count)``.
    """
    if "jax" in sys.modules:
        return False  # too late: the flag is read once, when JAX's backend starts
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_force_host_platform_device_count" in flags:
        return False  # the user's choice wins
    n = n or max(4, os.cpu_count() or 1)
    os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={n}".strip()
    return True


def default_cache_dir() -> str:
    """The compilation cache's folder when neither ``CROWDRANK_XLA_CACHE`` nor JAX's own
    ``JAX_COMPILATION_CACHE_DIR`` names one: ``crowdrank/xla`` under ``$XDG_CACHE_HOME``,
    else under ``~/.cache``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "crowdrank", "xla")


def configure_compilation_cache(path: str | None = None) -> str | None:
    """Keep compiled XLA programs on disk (see module doc); returns the folder, or ``None``
    when it is turned off or JAX is already imported.

    The folder is ``path``, else ``$CROWDRANK_XLA_CACHE`` (``off`` turns the cache off),
    else JAX's ``$JAX_COMPILATION_CACHE_DIR`` (the user's choice wins), else
    :func:`default_cache_dir`. Every compile is written, the ~100 small eager ones of a
    fit too: a fresh process that loads them (COUPLE, 4 items, 4 x (150 + 300)) took 10.4
    CPU s against 15.1 when only compiles over 0.5 s were kept, while writing them cost
    the first run nothing measurable (44-46 against 45-48 CPU s) and 1 MB of disk. The
    folder is bounded at 2 GiB (JAX evicts the least recently used entries). Set through
    JAX's environment variables, which JAX reads when it is first imported, so that this
    costs no import.

    Parameters
    ----------
    path : str, optional
        The cache folder; default as above.
    """
    if "jax" in sys.modules:
        return None  # too late: JAX read its configuration when it was imported
    choice = path or os.environ.get("CROWDRANK_XLA_CACHE")
    if choice == "off":
        return None
    folder = choice or os.environ.get("JAX_COMPILATION_CACHE_DIR") or default_cache_dir()
    os.environ["JAX_COMPILATION_CACHE_DIR"] = folder
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    os.environ.setdefault("JAX_COMPILATION_CACHE_MAX_SIZE", str(2 << 30))
    return folder

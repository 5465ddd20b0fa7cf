"""The compiled programs the ``crowdrank`` command keeps between runs
(:func:`crowdrank.inference.nuts.configure_compilation_cache`): where they go, how a user
turns it off, that an existing JAX choice wins, and that a second process loads what the
first compiled (JAX's own log says hit or miss: an oracle outside our code)."""

import os
import subprocess
import sys

import pytest

from crowdrank.inference.nuts import configure_compilation_cache
from crowdrank.inference.nuts.fit import default_cache_dir

VARS = ("CROWDRANK_XLA_CACHE", "JAX_COMPILATION_CACHE_DIR",
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "JAX_COMPILATION_CACHE_MAX_SIZE")


@pytest.fixture
def before_jax(monkeypatch):
    """This process as the command sees it at start: JAX not imported, no cache set."""
    monkeypatch.delitem(sys.modules, "jax")
    for v in VARS:
        monkeypatch.delenv(v, raising=False)
    return monkeypatch


def test_default_folder_under_the_users_cache(before_jax, tmp_path):
    before_jax.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_cache_dir() == str(tmp_path / "crowdrank" / "xla")
    assert configure_compilation_cache() == str(tmp_path / "crowdrank" / "xla")
    assert os.environ["JAX_COMPILATION_CACHE_DIR"] == str(tmp_path / "crowdrank" / "xla")
    assert float(os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"]) == 0
    assert int(os.environ["JAX_COMPILATION_CACHE_MAX_SIZE"]) == 2 << 30


def test_off_and_the_users_choices(before_jax, tmp_path):
    before_jax.setenv("CROWDRANK_XLA_CACHE", "off")
    assert configure_compilation_cache() is None
    assert "JAX_COMPILATION_CACHE_DIR" not in os.environ
    before_jax.delenv("CROWDRANK_XLA_CACHE")
    before_jax.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path / "mine"))
    before_jax.setenv("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "2")
    assert configure_compilation_cache() == str(tmp_path / "mine")       # JAX's own wins
    assert os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] == "2"
    before_jax.setenv("CROWDRANK_XLA_CACHE", str(tmp_path / "ours"))
    assert configure_compilation_cache() == str(tmp_path / "ours")       # ours names it


def test_too_late_once_jax_is_imported(monkeypatch):
    import jax  # noqa: F401

    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
    assert configure_compilation_cache("/nonexistent") is None
    assert "JAX_COMPILATION_CACHE_DIR" not in os.environ


def test_a_second_process_loads_what_the_first_compiled(tmp_path):
    """With the command's own settings: a program that compiles in milliseconds is kept
    too (the small eager programs of a fit cost a fresh process ~5 CPU s)."""
    code = ("from crowdrank.inference.nuts import configure_compilation_cache as c; c(); "
            "import jax, jax.numpy as jnp; "
            "print(jax.jit(lambda x: jnp.sin(x) * 2 + 1)(jnp.arange(3.0)))")
    env = {k: v for k, v in os.environ.items() if k not in VARS}
    env.update(CROWDRANK_XLA_CACHE=str(tmp_path / "xla"), JAX_LOGGING_LEVEL="DEBUG")
    logs = [subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, check=True).stderr for _ in range(2)]
    assert "PERSISTENT COMPILATION CACHE MISS for 'jit__lambda'" in logs[0]
    assert "Persistent compilation cache hit for 'jit__lambda'" in logs[1]
    assert "MISS for 'jit__lambda'" not in logs[1]
    assert any((tmp_path / "xla").iterdir())


def test_an_online_fit_from_the_command_line_loads_no_sampler(tmp_path):
    """The entry point sets JAX's variables (crowdrank.inference.xla_setup) without
    importing the NUTS sampler, so ``fit --method online`` loads neither it, JAX nor the
    PPLs (0.1-0.2 s of a 450,000-ranking fit's 2.5-2.9 s whole command, alternating runs)
    — and still sets them. The package's own ``__init__`` and ``config`` (NutsConfig, the
    defaults the method registry reads; no JAX) may load: its runners are imported lazily."""
    from crowdrank.models.io import write_rankings
    from crowdrank.models.simulate import simulate

    data = tmp_path / "data.csv"
    write_rankings(simulate("couple", n_items=6, n_workers=2, tasks_per_worker=5, kmax=3,
                            seed=0).rankings, data)
    heavy = ("crowdrank.inference.nuts.fit", "crowdrank.inference.nuts.numpyro",
             "crowdrank.inference.nuts.pymc", "jax", "numpyro", "pymc", "pytensor")
    code = ("import os, sys; from crowdrank.reports.cli import main; "
            f"rc = main(['fit', {str(data)!r}, '--model', 'couple', '--method', 'online', "
            f"'--out', {str(tmp_path / 'out')!r}, '--no-progress']); "
            f"print(rc, [m for m in {heavy!r} if m in sys.modules], "
            "'JAX_COMPILATION_CACHE_DIR' in os.environ, 'device_count' in "
            "os.environ.get('XLA_FLAGS', ''))")
    env = {k: v for k, v in os.environ.items() if k not in VARS and k != "XLA_FLAGS"}
    env["CROWDRANK_XLA_CACHE"] = str(tmp_path / "xla")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       check=True)
    assert r.stdout.strip().splitlines()[-1] == "0 [] True True", r.stdout + r.stderr

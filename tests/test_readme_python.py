"""README.md beyond its shell commands: the Python quickstart, run as printed, and every
``make`` target the text names.

The quickstart is read from the README's one ```` ```python ```` block under "Python
quickstart" (so the test and the README cannot drift) and run in a fresh interpreter (its
first lines must run before JAX starts); what it prints is checked against what the README
says it prints. The make targets are found in the README's text (`` `make X` ``); a target
without a check below fails, like a README command without a recipe. Targets are run as
their Makefile recipe line (the ``venv`` prerequisite would reinstall the package), with
``$(BIN)`` the test's interpreter folder; those that run the suite itself or take hours
are checked by ``make -n`` (what they would run) instead.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from readme_checks import VERDICT, _check_prior_predictive, _check_story
from test_readme_commands import make_recipe, run

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BIN = Path(sys.executable).parent


def quickstart(text: str) -> str:
    """The ```python block of the README's "Python quickstart" section."""
    sec = text.split("## Python quickstart", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"^```python\n(.*?)^```$", sec, re.MULTILINE | re.DOTALL)
    assert len(blocks) == 1, "the quickstart section must hold one ```python block"
    return blocks[0]


def make_targets(text: str) -> list[str]:
    """The targets named as `make X` anywhere in the README (prose and code blocks)."""
    found = re.findall(r"`make ([\w-]+)`", text)
    found += re.findall(r"^make ([\w-]+)", text, re.MULTILINE)
    return sorted(set(found))


def dry_run(target: str) -> str:
    """What ``make -n TARGET`` would run, less the venv set-up lines."""
    res = subprocess.run(["make", "-n", "-s", target], cwd=ROOT, capture_output=True,
                         text=True, timeout=60, check=True)
    return "\n".join(ln for ln in res.stdout.splitlines()
                     if ln.strip() and "pip install" not in ln and "-m venv" not in ln
                     and not ln.startswith("touch "))


@pytest.mark.slow
def test_python_quickstart_runs_as_printed(tmp_path):
    """The block runs; it prints the gate's verdict, which the README says is "reference
    NOT trusted" at these tiny settings (2 chains × 200 draws cannot reach an ESS of 400
    on every parameter), the λ aggregates and the head of the parameter table."""
    code = quickstart(README.read_text())
    assert "fit_nuts(" in code and "fit_online(" in code and "compare(" in code
    env = dict(os.environ)
    for k in ("XLA_FLAGS", "CROWDRANK_DEBUG"):      # as a user runs it, on this checkout:
        env.pop(k, None)
    # PYTHONPATH holds only the link to this checkout (tests/conftest.py)
    env["PYTHONPATH"] = env["PYTHONPATH"].split(os.pathsep)[0]
    res = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=900, check=False)
    assert res.returncode == 0, res.stderr[-4000:]
    v = VERDICT.findall(res.stdout)
    assert len(v) == 1, res.stdout
    claim = re.search(r'the gate will say "reference (NOT trusted|TRUSTED)"',
                      README.read_text().replace("\n", " "))
    assert claim and v[0][0] == claim.group(1), (v, claim)
    assert "bulk ESS" in v[0][1]
    agg = re.search(r"\{[^{}]*'median_abs_z': ([\d.e-]+)[^{}]*'median_sd_ratio': "
                    r"([\d.e-]+)[^{}]*\}", res.stdout)
    assert agg, res.stdout
    assert 0 <= float(agg.group(1)) < 5 and 0 < float(agg.group(2)) < 5
    # the aggregate is over every item the quickstart simulates, one score each
    n_items = int(re.search(r"n_items=(\d+)", code).group(1))
    assert re.search(rf"'n': {n_items},", agg.group(0)), agg.group(0)
    head = res.stdout[agg.end():]
    assert re.search(r"param\s+id\s+mcmc_mean\s+approx_mean\s+z\s+sd_ratio", head), head
    rows = re.findall(r"^\d+\s+lambda\[(i\d+)\]\s+(i\d+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)$", head,
                      re.MULTILINE)
    assert len(rows) == 5, head                                            # .head()
    for name, id_, m, q, z, ratio in rows:
        # z = (E_q - m)/s: its sign is the approximation's side of the NUTS mean
        assert name == id_ and float(ratio) > 0
        assert (float(z) > 0) == (float(q) > float(m)), (name, m, q, z)


# ---------------------------------------------------------------- make targets
def _check_test(out: str):
    # both cores, whole files per worker (tests/conftest.py), every test, the 25 slowest
    # listed at the end
    assert re.fullmatch(r"\S+/python -m pytest -q -n 2 --dist loadfile "
                        r"--no-loadscope-reorder --durations=25", out.strip()), out


def _check_test_fast(out: str):
    assert re.fullmatch(r"\S+/python -m pytest -q -n 2 --dist loadfile "
                        r"--no-loadscope-reorder -m \"not slow\"", out.strip()), out


def _check_script(script: str):
    def check(out: str):
        assert f"/python {script}" in out and (ROOT / script).is_file(), out
    return check


DRY = {"test": _check_test, "test-fast": _check_test_fast,
       "bench": _check_script("bench/run_all.py"), "mutate": _check_script("bench/tools/mutation.py"),
       "docs": _check_script("docs/_ext/check_site.py"),
       "verify": _check_script("bench/tools/verify.py")}
#: run for real: story (in a temporary folder), results (--check: nothing written), lint;
#: audit is the README's `make audit` recipe in tests/test_readme_commands.py
RUN = ("story", "results", "lint", "audit")


def test_every_make_target_in_the_readme_is_checked():
    named = make_targets(README.read_text())
    assert {"test", "audit", "test-fast", "story", "results", "lint"} <= set(named), named
    missing = [t for t in named if t not in DRY and t not in RUN]
    assert not missing, f"make targets named in README.md without a check here: {missing}"


@pytest.mark.parametrize("target", sorted(DRY))
def test_make_target_dry_run(target):
    DRY[target](dry_run(target))


def _recipe_argv(target: str) -> list[str]:
    import shlex

    line = make_recipe(target).replace("$(BIN)", str(BIN))
    assert "$(" not in line, f"unexpanded Makefile variable in {line!r}"
    return shlex.split(line)


def test_make_lint_is_clean():
    res = subprocess.run(_recipe_argv("lint"), cwd=ROOT, capture_output=True, text=True,
                         timeout=300, check=False)
    assert res.returncode == 0, res.stdout[-4000:]


def test_make_results_is_current():
    """`make results` re-renders docs/results.md (and README's headline) from
    bench/results/*.json; with its --check it writes nothing and exits 1 when the committed
    docs/results.md is not what it would write (the headline: tests/test_docs.py)."""
    res = subprocess.run([*_recipe_argv("results"), "--check"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300, check=False)
    assert res.returncode == 0, res.stderr[-2000:]


@pytest.mark.slow
def test_make_story(tmp_path):
    argv = _recipe_argv("story")
    assert argv[0] == str(BIN / "crowdrank")
    res = run(["crowdrank", *argv[1:]], tmp_path)
    _check_story("story-out")(tmp_path, {"make story": res})
    _check_prior_predictive(tmp_path / "story-out", res.stdout + res.stderr)


def test_install_lines_name_what_pyproject_defines():
    """The README's install lines (not run here: CI's ``make test`` is the first one) name
    extras that ``pyproject.toml`` defines and the Python it requires, so a renamed extra
    or a raised floor cannot leave them stale."""
    import tomllib

    text = README.read_text()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = re.findall(r'pip install -e "\.\[([\w,-]+)\]"', text)
    assert {"dev", "nutpie"} <= set(extras), extras
    for e in extras:
        assert set(e.split(",")) <= set(project["optional-dependencies"]), e
    floor = re.match(r">=\s*(\d+\.\d+)", project["requires-python"]).group(1)
    assert f"python{floor} -m venv" in text and f"Python {floor}" in text, floor
    assert re.search(r"^\.venv/bin/pip install -e \"\.\[nutpie\]\"", text, re.MULTILINE)

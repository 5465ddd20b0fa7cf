"""Every command of README.md, run as typed through the installed ``crowdrank`` entry point.

The commands are read from README.md's code blocks (fenced, and indented blocks that start
with ``crowdrank``), so a README change is noticed: a command without a recipe below fails
(``test_every_readme_command_has_a_recipe``), and so does a recipe whose command left the
README. ``make audit`` runs the Makefile's own ``audit:`` recipe line.

Each command runs with the README's arguments and the program's defaults (progress bars
on, default backend and precision). Optional ``[...]`` parts are left out, except where a
recipe runs a second instance with them; ``{a,b}`` choices take the values listed in the
recipe. The only changes are *documented* options that scale a run down (``--chains``,
``--tune``, ``--draws``, ``--permutations``, and ``--loo-models ''``, which keeps the
model checks but skips the NUTS fits of PL and BT made for the LOO comparison only;
``make audit`` runs them unscaled), appended where a run would otherwise take many
minutes; they are listed in each recipe. Placeholders (``DATA``, ``DIR``, ``F``) get
small files made by ``crowdrank simulate``.

Runs that take more than ~20 s are marked ``slow``; real-data runs are also ``realdata``
and skip when ``../shared/datasets`` is absent.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from test_pinned_cli import crowdrank_exe  # the installed entry point, found one way

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MAKEFILE = ROOT / "Makefile"


# ============================================================== reading the README
def readme_commands(text: str) -> list[str]:
    """``crowdrank …`` and ``make …`` lines of the code blocks, continuation lines
    (``\\`` or an unclosed ``[``) joined, comments dropped, white space collapsed."""
    lines = text.splitlines()
    out: list[str] = []

    def flush(block):
        cur = ""
        for ln in block:
            cur = f"{cur} {ln.strip()}" if cur else ln.strip()
            if cur.endswith("\\"):
                cur = cur[:-1].rstrip()
                continue
            if cur.count("[") > cur.count("]"):
                continue
            cmd = " ".join(re.sub(r"\s+#\s.*$", "", cur).split())
            if cmd.startswith(("crowdrank ", "make ")):
                out.append(cmd)
            cur = ""

    i = 0
    while i < len(lines):
        if lines[i].startswith("```"):
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            flush(lines[i + 1:j])
            i = j + 1
        elif lines[i].startswith("    crowdrank ") and (i == 0 or not lines[i - 1].strip()):
            j = i
            while j < len(lines) and lines[j].startswith("    ") and lines[j].strip():
                j += 1
            flush(lines[i:j])
            i = j
        else:
            i += 1
    return out


def make_recipe(target: str) -> str:
    """The first recipe line of a Makefile target."""
    lines = MAKEFILE.read_text().splitlines()
    for k, ln in enumerate(lines):
        if re.match(rf"^{re.escape(target)}\s*:", ln):
            return lines[k + 1].strip()
    raise AssertionError(f"Makefile has no target {target!r}")


def drop_optional(cmd: str) -> str:
    """The command without its ``[...]`` parts (brackets may nest)."""
    out, depth = [], 0
    for ch in cmd:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return " ".join("".join(out).split())


# ============================================================== running
_RUNS: dict[tuple, subprocess.CompletedProcess] = {}


def run(argv: list[str], cwd: Path, timeout: int = 1200) -> subprocess.CompletedProcess:
    """``crowdrank ARGV`` in ``cwd`` (once per distinct command and folder)."""
    key = (str(cwd), tuple(argv))
    if key not in _RUNS:
        assert argv[0] == "crowdrank"
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        env.pop("CROWDRANK_DEBUG", None)
        _RUNS[key] = subprocess.run([crowdrank_exe(), *argv[1:]], cwd=cwd, env=env,
                                    capture_output=True, text=True, timeout=timeout,
                                    check=False)
    res = _RUNS[key]
    assert res.returncode == 0, (f"`{shlex.join(argv)}` exited {res.returncode}\n"
                                 f"stdout: {res.stdout[-3000:]}\nstderr: {res.stderr[-5000:]}")
    return res


@pytest.fixture(scope="module")
def ws(tmp_path_factory) -> Path:
    """A folder with the small files the README's placeholders stand for."""
    d = tmp_path_factory.mktemp("readme")
    run(["crowdrank", "simulate", "--model", "couple", "--items", "12", "--workers", "4",
         "--tasks", "10", "--kmax", "4", "--seed", "1", "--gold", "3", "--out", "tiny"], d)
    run(["crowdrank", "simulate", "--model", "couple", "--items", "12", "--workers", "5",
         "--tasks", "4", "--kmax", "4", "--seed", "2", "--out", "tiny2"], d)
    for src, dst in (("tiny/rankings.csv", "data.csv"), ("tiny/truth.csv", "truth.csv"),
                     ("tiny/gold.csv", "gold.csv"), ("tiny2/rankings.csv", "more.csv")):
        shutil.copy(d / src, d / dst)
    return d


# ============================================================== recipes
@dataclass
class Recipe:
    """How to run one README command: ``instances`` are argv strings (README text with
    placeholders filled, optional parts dropped or chosen, scale-down options appended);
    ``needs`` are commands run first (their outputs are the inputs); ``check`` inspects
    the folder and the last result."""

    instances: list[str]
    needs: list[str] = field(default_factory=list)
    check: object = None
    slow: bool = False
    realdata: bool = False
    note: str = ""


def _exists(*paths):
    def check(d, res):
        for p in paths:
            assert (d / p).exists(), f"{p} was not written"
    return check


def _check_sim(d, res):
    _exists("sim/rankings.csv", "sim/truth.csv", "sim/workers.csv", "sim/simulation.json")(d, res)
    n = len((d / "sim/rankings.csv").read_text().splitlines()) - 1
    assert n == 10 * 20                     # W workers × T tasks
    assert (d / "sim-gold/gold.csv").exists()


def _check_summary(d, res):
    assert "rankings" in res.stdout


def _check_summary_json(d, res):
    s = json.loads(res.stdout)
    assert isinstance(s, dict) and s


def _check_babyface(d, res):
    assert "3068" in res.stdout.replace(",", "")


def _check_online(out, taylor="paper", score_alpha="updated", passes=1):
    def check(d, res):
        p = json.loads((d / out / "posterior.json").read_text())
        assert p["model"] == "couple" and p["method"] == "online"
        assert p["algorithm"] == "online-gbmm"
        o = p["options"]
        assert (o["taylor"], o["score_alpha"], o["stage_order"]) == (taylor, score_alpha,
                                                                     "reverse")
        assert o["runs"][-1]["passes"] == passes
        header = (d / out / "items.csv").read_text().splitlines()[0]
        assert header == "rank,item,mu,sigma2,sd"
    return check


def _check_replicate(out):
    def check(d, res):
        _exists(f"{out}/babyface.html", f"{out}/results.json", f"{out}/results.csv")(d, res)
        s = json.loads((d / out / "results.json").read_text())
        acc = s["sets"][0]["full"]["accuracy"]
        assert set(acc) == {"couple", "crowdbt", "pl", "bt", "peergrader"}
        assert acc["couple"]["n"] == 20
        assert "92.30" in (d / out / "babyface.html").read_text()
    return check


def _check_state_in(d, res):
    _check_online("fit-couple-2")(d, res)
    p = json.loads((d / "fit-couple-2/posterior.json").read_text())
    first = json.loads((d / "fit-couple/posterior.json").read_text())
    assert p["n_rankings"] == first["n_rankings"] + sum(
        1 for _ in (d / "more.csv").read_text().splitlines()[1:])
    assert len(p["options"]["runs"]) == 2


def _check_nuts(out):
    def check(d, res):
        _exists(f"{out}/posterior.nc", f"{out}/summary.csv")(d, res)
        assert "reference" in res.stdout and "trusted" in res.stdout
    return check


def _check_agreement(out):
    def check(d, res):
        _check_audit(out, ("couple",))(d, res)
        m = json.loads((d / out / "metrics.json").read_text())
        ag = m["models"]["couple"]["backend_agreement"]
        assert ag["labels"] == ["numpyro", "pymc"] and ag["n_params"] > 0
        assert (d / out / "couple" / "nuts-pymc" / "posterior.nc").exists()
        assert "numpyro against pymc" in (d / out / "report.html").read_text()
    return check


def _check_audit(out, models=("couple", "crowdbt")):
    def check(d, res):
        from test_pinned_report import check_audit_dir

        _exists(f"{out}/report.html", f"{out}/metrics.json", f"{out}/parameters.csv")(d, res)
        m = json.loads((d / out / "metrics.json").read_text())
        assert sorted(m["models"]) == sorted(models)
        assert f"report: {out}/report.html" in res.stdout
        assert check_audit_dir(d / out) > 0
    return check


def _check_story(out):
    return _exists(f"{out}/story.md", f"{out}/story.json")


def _check_stories(d, res):
    _check_story("story-out")(d, res)
    _exists("story-out/story.html")(d, res)
    _exists("story-pp/story.html", "story-pp/prior_predictive.json",
            "story-pp/prior_predictive.csv")(d, res)


SCALE_NUTS = "--chains 2 --tune 30 --draws 30"
SCALE_AUDIT = "--chains 2 --tune 30 --draws 30 --permutations 2 --loo-models ''"
SCALE_SBC = "--chains 2 --tune 30 --draws 50"      # 2 × 50 draws: the default 100 ranks
NUTS_README = ("crowdrank fit data.csv --method nuts --model couple --backend {numpyro,pymc} "
               "--out fit-nuts")

RECIPES: dict[str, Recipe] = {
    "make audit": Recipe(["MAKE audit"], check=_check_audit("audit-out"), slow=True,
                         note="the Makefile's audit recipe, OUT=audit-out; not scaled"),
    "make test": Recipe([], note="the test suite itself: not run from inside it"),
    # the list of sub-commands: each has --help
    "crowdrank simulate --model couple --setting amateur --items 50 --workers 10 --tasks 20 "
    "--kmax 4 --seed 0 [--gold G] [--paper-scale] --out sim/": Recipe(
        [("crowdrank simulate --model couple --setting amateur --items 50 --workers 10 "
         "--tasks 20 --kmax 4 --seed 0 --out sim/"),
         ("crowdrank simulate --model couple --setting amateur --items 50 --workers 10 "
         "--tasks 20 --kmax 4 --seed 0 --gold 5 --out sim-gold/")],
        check=_check_sim),
    "crowdrank data summary sim/rankings.csv --truth sim/truth.csv [--json]": Recipe(
        ["crowdrank data summary sim/rankings.csv --truth sim/truth.csv",
         "crowdrank data summary sim/rankings.csv --truth sim/truth.csv --json"],
        needs=[("crowdrank simulate --model couple --setting amateur --items 50 --workers 10 "
               "--tasks 20 --kmax 4 --seed 0 --out sim/")],
        check=_check_summary_json),
    "crowdrank data summary babyface": Recipe(["crowdrank data summary babyface"],
                                              check=_check_babyface, realdata=True),
    "crowdrank data list": Recipe(["crowdrank data list", "crowdrank data --help"],
                                  check=lambda d, res: "babyface" in res.stdout or
                                  "data list" in res.stdout),
    "crowdrank story [--model couple] [--setting amateur] [--seed 0] [--prior-predictive] "
    "[--out story-out]": Recipe(
        ["crowdrank story", "crowdrank story --prior-predictive --out story-pp"],
        check=_check_stories),
    "crowdrank fit data.csv --model couple --method online --out fit-couple": Recipe(
        ["crowdrank fit data.csv --model couple --method online --out fit-couple"],
        check=_check_online("fit-couple")),
    "crowdrank fit more.csv --model couple --method online --state-in "
    "fit-couple/posterior.json --out fit-couple-2": Recipe(
        [("crowdrank fit more.csv --model couple --method online --state-in "
         "fit-couple/posterior.json --out fit-couple-2")],
        needs=["crowdrank fit data.csv --model couple --method online --out fit-couple"],
        check=_check_state_in),
    NUTS_README: Recipe(
        # the defaults (float64, progress bars on), each backend; every sub-command's --help
        # (the other NUTS options run in tests/test_nuts.py)
        ["crowdrank fit --help", "crowdrank simulate --help", "crowdrank story --help",
         "crowdrank audit --help", "crowdrank sbc --help",
         (f"crowdrank fit data.csv --method nuts --model couple --backend numpyro "
          f"{SCALE_NUTS} --out fit-nuts"),
         (f"crowdrank fit data.csv --method nuts --model couple --backend pymc {SCALE_NUTS} "
          "--out fit-nuts-pymc")],
        check=_check_nuts("fit-nuts"), slow=True, note=f"scaled by {SCALE_NUTS}"),
    "crowdrank audit data.csv --truth truth.csv --model couple --check-backends "
    "--out audit-x": Recipe(
        [(f"crowdrank audit data.csv --truth truth.csv --model couple --check-backends "
          f"{SCALE_AUDIT} --out audit-x")],
        check=_check_agreement("audit-x"), slow=True, note=f"scaled by {SCALE_AUDIT}"),
    "crowdrank sbc --model crowdbt --backend {numpyro,pymc} --sims 200 --out sbc-crowdbt":
        Recipe([(f"crowdrank sbc --model crowdbt --backend numpyro --sims 2 {SCALE_SBC} "
                 "--out sbc-crowdbt"),
                (f"crowdrank sbc --model crowdbt --backend pymc --sims 2 {SCALE_SBC} "
                 "--out sbc-crowdbt-pymc")],
               check=_exists("sbc-crowdbt/ranks.csv", "sbc-crowdbt/sbc.json",
                             "sbc-crowdbt/sbc.html"),
               slow=True, note=f"--sims 2, scaled by {SCALE_SBC}"),
    "crowdrank audit --out audit-out": Recipe(
        ["crowdrank audit --out audit-out"], check=_check_audit("audit-out"), slow=True,
        note="the embedded default, not scaled (the same run as `make audit`)"),
    "crowdrank audit babyface --quick --out audit-babyface": Recipe(
        [f"crowdrank audit babyface --quick {SCALE_AUDIT} --out audit-babyface"],
        check=_check_audit("audit-babyface"), slow=True, realdata=True,
        note=f"scaled by {SCALE_AUDIT}"),
    "crowdrank replicate babyface --repeats 20 --out rep-babyface": Recipe(
        ["crowdrank replicate babyface --repeats 20 --out rep-babyface"],
        check=_check_replicate("rep-babyface"), slow=True, realdata=True, note="as typed"),
    "crowdrank audit readlevel --model crowdbt --quick --out audit-readlevel": Recipe(
        [(f"crowdrank audit readlevel --model crowdbt --quick {SCALE_AUDIT} "
         "--out audit-readlevel")],
        check=_check_audit("audit-readlevel", ("crowdbt",)), slow=True, realdata=True,
        note=f"scaled by {SCALE_AUDIT}"),
}

COMMANDS = readme_commands(README.read_text()) if README.exists() else []


def _argv(instance: str) -> list[str]:
    if instance.startswith("MAKE "):
        # the Makefile's recipe with its variables: BIN is this interpreter's folder
        line = make_recipe(instance.split()[1])
        line = line.replace("$(BIN)/crowdrank", "crowdrank").replace("$(OUT)", "audit-out")
        assert "$(" not in line, f"unexpanded Makefile variable in {line!r}"
        return shlex.split(line)
    return shlex.split(instance)


def _params():
    out = []
    for cmd in COMMANDS:
        r = RECIPES.get(cmd)
        marks = []
        if r is not None and r.slow:
            marks.append(pytest.mark.slow)
        if r is not None and r.realdata:
            marks.append(pytest.mark.realdata)
        out.append(pytest.param(cmd, marks=marks, id=cmd[:60]))
    return out


def test_readme_has_commands():
    assert len(COMMANDS) >= 15, COMMANDS


def test_every_readme_command_has_a_recipe():
    missing = [c for c in COMMANDS if c not in RECIPES]
    assert not missing, ("README commands without a recipe in tests/test_readme_commands.py "
                         "(add one, so the command is run):\n" + "\n".join(missing))
    stale = [c for c in RECIPES if c not in COMMANDS]
    assert not stale, "recipes for commands no longer in README.md:\n" + "\n".join(stale)


def test_instances_are_instances_of_the_readme_text():
    """Every instance starts like its README command with the optional parts dropped and
    uses only options that appear in the README command or are documented scale-downs."""
    scale = set(shlex.split(SCALE_AUDIT))
    for cmd, r in RECIPES.items():
        words = set(shlex.split(cmd.replace("[", " ").replace("]", " ").replace("|", " ")))
        for inst in r.instances:
            if inst.startswith("MAKE "):
                continue
            for w in shlex.split(inst):
                if w.startswith("--"):
                    assert w in words or w in scale or w == "--help" or w == "--json" or \
                        w == "--gold", f"{inst!r}: option {w} is not in `{cmd}`"


@pytest.mark.parametrize("cmd", _params())
def test_readme_command_runs(cmd, ws, request):
    r = RECIPES.get(cmd)
    if r is None:
        pytest.fail(f"no recipe for README command `{cmd}`")
    if not r.instances:
        pytest.skip(r.note)
    if r.realdata:
        request.getfixturevalue("shared_datasets")
    for need in r.needs:
        run(_argv(need), ws)
    res = None
    for inst in r.instances:
        res = run(_argv(inst), ws)
    if r.check is not None:
        r.check(ws, res)

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

import csv
import json
import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from readme_checks import (
    VERDICT,
    _check_audit,
    _check_prior_predictive,
    _check_story,
    _csv,
    _exists,
    _gate_ok,
    _last,
    _rankings,
)
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
        env = dict(os.environ)     # PYTHONPATH: this checkout (conftest, bench/tools/checkout.py)
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
    the folder and ``{instance: result}`` of the runs."""

    instances: list[str]
    needs: list[str] = field(default_factory=list)
    check: object = None
    slow: bool = False
    realdata: bool = False
    note: str = ""


def _check_sim(d, results):
    _exists("sim/rankings.csv", "sim/truth.csv", "sim/workers.csv",
            "sim/simulation.json")(d, results)
    rk = _rankings(d / "sim/rankings.csv")
    truth = {r["item"] for r in _csv(d / "sim/truth.csv")}
    assert len(rk) == 10 * 20 and len(truth) == 50          # W workers × T tasks; L items
    assert {w for w, _ in rk} == {r["worker"] for r in _csv(d / "sim/workers.csv")}
    assert all(2 <= len(r) <= 4 and len(set(r)) == len(r) and set(r) <= truth
               for _, r in rk)                                # --kmax 4, no repeats
    etas = [[float(v) for k, v in r.items() if k.startswith("eta_")]
            for r in _csv(d / "sim/workers.csv")]
    assert all(len(e) == 4 and abs(sum(e) - 1) < 1e-9 for e in etas)   # η_w: a simplex
    gold = _csv(d / "sim-gold/gold.csv")
    assert len(gold) == 10 * 5                                # --gold 5 per worker
    # seeded: the file holds the rankings the Python API draws with the same seed and
    # sizes, worker by worker and in order (a seed the command ignored would not)
    from crowdrank.models.simulate import simulate

    api = simulate("couple", setting="amateur", n_items=50, n_workers=10,
                   tasks_per_worker=20, kmax=4, seed=0).rankings
    assert rk == [(str(api.workers[w]), [str(api.items[i]) for i in r])
                  for w, r in zip(api.worker, api.as_lists())]


def _summary_oracle(d) -> dict:
    """What ``data summary sim/rankings.csv --truth sim/truth.csv`` must say, counted here."""
    rk = _rankings(d / "sim/rankings.csv")
    score = {r["item"]: float(r["score"]) for r in _csv(d / "sim/truth.csv")}
    ks = [len(r) for _, r in rk]
    pairs = [(r[a], r[b]) for _, r in rk for a in range(len(r)) for b in range(a + 1, len(r))]
    return {"rankings": len(rk), "workers": len({w for w, _ in rk}),
            "items": len({i for _, r in rk for i in r}), "K": max(ks),
            "k_counts": {str(k): ks.count(k) for k in sorted(set(ks))},
            "pairs": len(pairs),
            "first": sum(score[r[0]] > score[r[1]] for _, r in rk) / len(rk),
            "all": sum(score[a] > score[b] for a, b in pairs) / len(pairs)}


def _check_summary_json(d, results):
    o = _summary_oracle(d)
    text, js = (r.stdout for r in results.values())
    s = json.loads(js)
    assert (s["rankings"], s["workers"], s["items"], s["K"], s["k_counts"]) == (
        o["rankings"], o["workers"], o["items"], o["K"], o["k_counts"])
    assert s["pairs_after_rank_breaking"] == o["pairs"] and s["items_never_ranked"] == 0
    assert s["truth"]["first_pair_agreement"] == pytest.approx(o["first"], abs=1e-12)
    assert s["truth"]["pairwise_agreement"] == pytest.approx(o["all"], abs=1e-12)
    # the printed page says the same
    line = {ln[:20].strip(): ln[20:].strip() for ln in text.splitlines()}
    assert line["rankings"].startswith(f"{o['rankings']:,} ")
    assert line["pairs (rank-broken)"] == f"{o['pairs']:,}"
    assert line["agrees with truth"].startswith(
        f"first pair {100 * o['first']:.1f} %, all pairs {100 * o['all']:.1f} %")


def _check_babyface(d, results):
    # [Pan18] Sect. 5.4: 18 faces, 21 workers, rankings of three; the file's 3,074 rows
    # less the 6 that name an item twice (docs/data.md)
    line = {ln[:20].strip(): ln[20:].strip() for ln in _last(results).stdout.splitlines()}
    assert (line["items"], line["workers"], line["rankings"]) == ("18", "21", "3,068")
    assert line["ranking length k"] == "k=3: 3,068 (K = 3)"
    assert line["pairs (rank-broken)"] == f"{3 * 3068:,}"
    assert line["note"].startswith("skipped 6 invalid ranking(s)")


def _check_data_list(d, results):
    """Every registered set is listed with its state and description; with the shared
    folder present each is ``present`` and BabyFace says what it loads."""
    from crowdrank.models.io.datasets import REGISTRY
    from crowdrank.models.io.pair_datasets import PAIR_DATASETS

    text = _last(results).stdout
    heads = {ln.split()[0]: ln.split()[1] for ln in text.splitlines()
             if len(ln.split()) > 1 and not ln.startswith((" ", "shared"))}
    names = [*REGISTRY, *PAIR_DATASETS]
    assert list(heads) == names, heads              # the rankings sets, then the pair tables
    registered = {**REGISTRY, **PAIR_DATASETS}
    for name in names:
        block = text.split(f"\n{name} ", 1)[1].split("\n\n", 1)[0]
        # the registry's own description, whole (a label with an empty or cut text fails)
        desc = [ln for ln in block.splitlines() if ln.strip().startswith("description ")]
        assert len(desc) == 1, f"{name}: no description line"
        assert " ".join(desc[0].split()[1:]) == " ".join(registered[name].description.split()), \
            (name, desc[0])
    if (ROOT.parent / "shared" / "datasets").is_dir() and \
            "CROWDRANK_DATASETS" not in os.environ:
        assert set(heads.values()) == {"present"}, heads
        assert "3,068 rankings" in text.split("\nbabyface ", 1)[1].split("\n\n", 1)[0]


def _check_online(out, taylor="paper", score_alpha="updated", passes=1, data="data.csv"):
    def check(d, results):
        p = json.loads((d / out / "posterior.json").read_text())
        assert p["model"] == "couple" and p["method"] == "online"
        assert p["algorithm"] == "online-gbmm"
        o = p["options"]
        assert (o["taylor"], o["score_alpha"], o["stage_order"]) == (taylor, score_alpha,
                                                                     "reverse")
        assert o["runs"][-1]["passes"] == passes
        rows = _csv(d / out / "items.csv")
        assert list(rows[0]) == ["rank", "item", "mu", "sigma2", "sd"]
        items = {i for _, r in _rankings(d / data) for i in r}
        assert {r["item"] for r in rows} >= items
        mu = [float(r["mu"]) for r in rows]
        assert [int(r["rank"]) for r in rows] == list(range(1, len(rows) + 1))
        assert mu == sorted(mu, reverse=True)                  # ranked best first
        for r in rows:
            assert float(r["sd"]) == pytest.approx(float(r["sigma2"]) ** 0.5, rel=1e-6)
    return check


def _check_replicate(out):
    def check(d, results):
        _exists(f"{out}/babyface.html", f"{out}/results.json", f"{out}/results.csv")(d, results)
        s = json.loads((d / out / "results.json").read_text())
        e = s["sets"][0]
        acc = e["full"]["accuracy"]
        assert set(acc) == {"couple", "crowdbt", "pl", "bt", "peergrader"}
        assert acc["couple"]["n"] == 20
        # our result beside the paper's: the cleaned COUPLE accuracy is the one recorded
        # by the R = 1000 benchmark (order-free: sd 1e-14 over its 1,000 orders; recomputed
        # by a fit in tests/test_replicate.py), on the same six removed workers
        rec = json.loads((ROOT / "bench/results/replicate_babyface.json").read_text())
        rec_c = rec["summary"]["sets"][0]["cleaned"][0]
        ours = next(c for c in e["cleaned"] if c["removed"] == rec_c["removed"])
        assert ours["accuracy"]["couple"]["mean"] == pytest.approx(
            rec_c["accuracy"]["couple"]["mean"], abs=1e-9)
        assert e["same_six"] == rec["summary"]["sets"][0]["same_six"]
        import html

        page = html.unescape((d / out / "babyface.html").read_text())
        # the sentence that sets ours beside the paper's, ours first (the accuracy table
        # elsewhere on the page also prints 92.81, so a sentence quoting the paper's
        # figure as ours would pass a search of the whole page)
        said = re.search(r"COUPLE: ours ([\d.]+) ± [\d.]+ % vs the paper.s ≈ ([\d.]+) %", page)
        assert said, page[:2000]
        assert said.group(1) == f"{ours['accuracy']['couple']['mean']:.2f}"    # 92.81
        assert said.group(2) == "92.30"                                         # [Pan18]
    return check


def _check_state_in(d, results):
    _check_online("fit-couple-2", data="more.csv")(d, results)
    p = json.loads((d / "fit-couple-2/posterior.json").read_text())
    first = json.loads((d / "fit-couple/posterior.json").read_text())
    assert p["n_rankings"] == first["n_rankings"] + len(_rankings(d / "more.csv"))
    assert len(p["options"]["runs"]) == 2


def _check_nuts(d, results):
    """Each backend's own printout and files: one verdict line, NOT trusted (2 × 30 draws
    cannot reach ESS 400: ArviZ caps ESS at n log10 n ≈ 107), agreeing with the gate's
    figures and with what posterior.nc records; summary.csv holds the draws' means."""
    import arviz_base as azb
    import numpy as np

    from crowdrank.inference.nuts import read_nuts

    for backend, out in (("numpyro", "fit-nuts"), ("pymc", "fit-nuts-pymc")):
        res = next(r for inst, r in results.items() if f"--backend {backend} " in inst)
        v = VERDICT.findall(res.stdout)
        assert len(v) == 1, res.stdout
        word, reasons, rhat, eb, et, div, ebfmi = v[0]
        assert word == "NOT trusted" and "bulk ESS" in reasons, v
        assert not _gate_ok(float(rhat), float(eb), float(et), int(div), float(ebfmi))
        dt = read_nuts(d / out)
        assert int(dt.attrs["gate_trusted"]) == 0
        assert float(dt.attrs["gate_ess_bulk_min"]) == pytest.approx(float(eb), abs=0.51)
        post = azb.convert_to_dataset(dt, group="posterior")
        assert (post.sizes["chain"], post.sizes["draw"]) == (2, 30)
        lam = post["lambda"].values.reshape(60, -1).mean(axis=0)
        rows = {r["parameter"]: float(r["mean"]) for r in _csv(d / out / "summary.csv")}
        got = np.array([v for k, v in rows.items() if k.startswith("lambda[")])
        np.testing.assert_allclose(np.sort(got), np.sort(lam), rtol=1e-9, atol=1e-12)


def _check_agreement(out):
    def check(d, results):
        _check_audit(out, ("couple",), trusted=False)(d, results)
        m = json.loads((d / out / "metrics.json").read_text())
        ag = m["models"]["couple"]["backend_agreement"]
        assert ag["labels"] == ["numpyro", "pymc"] and ag["n_params"] > 0
        assert (d / out / "couple" / "nuts-pymc" / "posterior.nc").exists()
        assert "numpyro against pymc" in (d / out / "report.html").read_text()
    return check


def _check_stories(d, results):
    _check_story("story-out")(d, results)
    _check_story("story-pp")(d, results)
    _check_prior_predictive(d / "story-pp", _last(results).stdout + _last(results).stderr)
    assert not (d / "story-out/prior_predictive.json").exists()   # only when asked
    assert _csv(d / "story-pp/prior_predictive.csv")


def _check_posterior_sbc(d, results):
    """20 replicates of the one-pass update on data.csv: the printed verdict is the stored
    one, ranks.csv has a row per replicate and a column per checked parameter."""
    res = next(iter(results.values()))
    s = json.loads((d / "psbc" / "posterior_sbc.json").read_text())
    assert (s["method"], s["model"], s["replicates"]) == ("online", "couple", 20)
    assert f"  verdict: {s['verdict']}" in res.stdout
    rows = list(csv.reader((d / "psbc" / "ranks.csv").open(newline="")))
    assert rows[0][1:] == s["names"] and len(rows) == 21    # COUPLE's names hold commas
    # the default augmentation: R times the data's rankings per replicate
    from crowdrank.validation.pipelines.posterior_sbc import DEFAULT_AUGMENT

    assert s["config"]["augment"] == DEFAULT_AUGMENT
    assert s["timing"]["rankings_added"] == round(DEFAULT_AUGMENT * s["data"]["rankings"])


def _check_sbc(d, results):
    """Each backend's study: 2 replicates of 100 thinned draws (2 chains × 50), ranks in
    0..100 for every parameter, every replicate failing the gate (2 × 50 draws cannot
    reach ESS 400), as the printed gate line says."""
    for backend, out in (("numpyro", "sbc-crowdbt"), ("pymc", "sbc-crowdbt-pymc")):
        res = next(r for inst, r in results.items() if f"--backend {backend} " in inst)
        s = json.loads((d / out / "sbc.json").read_text())
        assert (s["config"]["model"], s["config"]["backend"]) == ("crowdbt", backend)
        assert (s["replicates"], s["n_draws"]) == (2, 100)
        assert (s["gate"]["passed"], s["gate"]["failed"]) == (0, 2)
        rows = _csv(d / out / "ranks.csv")
        assert len(rows) == 2 * len(s["parameters"])
        assert all(0 <= int(r["rank"]) <= 100 for r in rows)
        assert {r["gate_passed"] for r in rows} == {"0"}
        assert f"crowdbt / {backend}: 2 replicates, 100 thinned draws each" in res.stdout
        assert re.search(r"^  gate: 0 passed, 2 failed;", res.stdout, re.MULTILINE), res.stdout
        assert (d / out / "sbc.html").stat().st_size > 0


def _check_gibbs(d, results):
    """The Gibbs sampler's printout and files: one verdict line without HMC's figures,
    the one posterior.nc stores; 2 chains x 30 draws; items.csv holds the draws' means."""
    import numpy as np
    import pandas as pd
    import xarray as xr

    res = next(iter(results.values()))
    lines = [x for x in res.stdout.splitlines() if x.startswith("reference ")]
    assert len(lines) == 1 and "divergences" not in lines[0], res.stdout
    dt = xr.open_datatree(d / "fit-gibbs" / "posterior.nc", engine="h5netcdf")
    assert dt.attrs["sampler"] == "gibbs" and dt.attrs["gate_kind"] == "gibbs"
    assert lines[0].startswith("reference TRUSTED" if int(dt.attrs["gate_trusted"])
                               else "reference NOT trusted")
    lam = dt["posterior"]["lambda"]
    assert (lam.sizes["chain"], lam.sizes["draw"]) == (2, 30)
    items = pd.read_csv(d / "fit-gibbs" / "items.csv").set_index("item")
    means = lam.mean(("chain", "draw"))
    for item, v in zip(means["item"].values.astype(str), means.values):
        assert items.loc[item, "mu"] == pytest.approx(float(v), abs=1e-9)
    assert np.all(np.isfinite(dt["posterior"]["eta"].values))


SCALE_NUTS = "--chains 2 --tune 30 --draws 30"
# --max-draws 30: one round of draws. A scaled-down reference always fails the gate, and
# the audit would extend it in rounds up to 4 x draws, sampling each round with the poorly
# adapted kernel of a 30-iteration warm-up (the BabyFace audit: 96 s with the rounds, 54 s
# without, one run each)
# --posterior-sbc 40: the verdict's section with a fifth of the default replicates (the
# read-level audit spent 14 of its 74 s on 200)
SCALE_AUDIT = ("--chains 2 --tune 30 --draws 30 --max-draws 30 --permutations 2 "
               "--loo-models '' --posterior-sbc 40")
SCALE_SBC = "--chains 2 --tune 30 --draws 50"      # 2 × 50 draws: the default 100 ranks
NUTS_README = ("crowdrank fit data.csv --method nuts --model couple --backend {numpyro,pymc} "
               "--out fit-nuts")

RECIPES: dict[str, Recipe] = {
    # the main job: its references must be trusted (README: "a reference you can trust");
    # `crowdrank audit --out audit-out` below is the same command: one run (one file, one
    # worker under xdist's --dist loadfile)
    "make audit": Recipe(["MAKE audit"], check=_check_audit("audit-out", trusted=True),
                         slow=True,
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
    "crowdrank data list": Recipe(["crowdrank data list"], check=_check_data_list),
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
        check=_check_nuts, slow=True, note=f"scaled by {SCALE_NUTS}"),
    "crowdrank fit data.csv --method gibbs --model couple --out fit-gibbs": Recipe(
        ["crowdrank fit data.csv --method gibbs --model couple --draws 30 --out fit-gibbs"],
        check=_check_gibbs, note="scaled by --draws 30"),
    "crowdrank audit data.csv --truth truth.csv --model couple --check-backends "
    "--out audit-x": Recipe(
        [(f"crowdrank audit data.csv --truth truth.csv --model couple --check-backends "
          f"{SCALE_AUDIT} --out audit-x")],
        check=_check_agreement("audit-x"), slow=True,
        note=f"scaled by {SCALE_AUDIT}"),
    "crowdrank sbc --model crowdbt --backend {numpyro,pymc} --sims 200 --out sbc-crowdbt":
        Recipe([(f"crowdrank sbc --model crowdbt --backend numpyro --sims 2 {SCALE_SBC} "
                 "--out sbc-crowdbt"),
                (f"crowdrank sbc --model crowdbt --backend pymc --sims 2 {SCALE_SBC} "
                 "--out sbc-crowdbt-pymc")],
               check=_check_sbc, slow=True,
               note=f"--sims 2, scaled by {SCALE_SBC}"),
    "crowdrank sbc --posterior data.csv --model couple --method online [--sims 200] --out psbc":
        Recipe([("crowdrank sbc --posterior data.csv --model couple --method online --sims 20 "
                 "--out psbc")], check=_check_posterior_sbc, note="--sims 20"),
    "crowdrank audit --out audit-out": Recipe(
        ["crowdrank audit --out audit-out"], check=_check_audit("audit-out", trusted=True),
        slow=True,
        note="the embedded default, not scaled (the same run as `make audit`)"),
    "crowdrank audit babyface --quick --out audit-babyface": Recipe(
        [f"crowdrank audit babyface --quick {SCALE_AUDIT} --out audit-babyface"],
        check=_check_audit("audit-babyface", trusted=False), slow=True, realdata=True,
        note=f"scaled by {SCALE_AUDIT}"),
    "crowdrank replicate babyface --repeats 20 --out rep-babyface": Recipe(
        ["crowdrank replicate babyface --repeats 20 --out rep-babyface"],
        check=_check_replicate("rep-babyface"), slow=True, realdata=True,
        note="as typed"),
    "crowdrank audit readlevel --model crowdbt --quick --out audit-readlevel": Recipe(
        [(f"crowdrank audit readlevel --model crowdbt --quick {SCALE_AUDIT} "
         "--out audit-readlevel")],
        check=_check_audit("audit-readlevel", ("crowdbt",), trusted=False), slow=True,
        realdata=True,
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
    results = {inst: run(_argv(inst), ws) for inst in r.instances}
    if r.check is not None:
        r.check(ws, results)

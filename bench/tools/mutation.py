"""Mutation testing of the core modules with cosmic-ray (``make mutate``).

Each core module is mutated one small change at a time (an operator replaced, a number
moved by one, a comparison flipped, a loop skipped, ...) and a *targeted* subset of the fast
tests is run against every mutant; a mutant that no test notices "survives". Survivors are
either killed by a new test or listed, with the reason, in ``bench/tools/mutation_equivalent.json``
(a mutant that cannot change any observable result, e.g. ``x < κ`` vs ``x <= κ`` where equality
has measure zero).

The work happens in a temporary copy of the repository (tracked and untracked, not
ignored, files; with ``--ref REV`` the tree of a commit), so the working tree is never
modified. Modules run one after another, mutants one at a time (cosmic-ray's ``local``
distributor); run it under ``nice``.

numba: mutants of ``kernels.py`` run with ``NUMBA_DISABLE_JIT=1`` (the ``@njit`` functions
run as plain Python: no compilation per mutant, same arithmetic); the decorator-removal
operator is skipped there because removing ``@njit`` changes only speed. Other modules use
the compiled kernels from a numba cache inside the temporary copy.

Slow modules: a kernels mutant costs 20-40 s (pure Python), a NumPyro or PyMC one a minute
when killed and several when it survives (JAX/PyTensor compilations), so these three run a
seeded sample by default (``default_sample``: 100, 40, 40, each large enough that the 95 %
interval's lower end reaches 90 % when every sampled mutant is killed); a timeout counts as killed, so the timeout is
at least 3x the unmutated tests' wall time.

Usage::

    python bench/tools/mutation.py                        # every module, writes the results
    python bench/tools/mutation.py --modules gate,metrics # a subset (results are merged)
    python bench/tools/mutation.py --list                 # modules, files and test subsets
    python bench/tools/mutation.py --modules crowdbt --sample 120 --seed 1   # a random sample
    python bench/tools/mutation.py --modules metrics --retest-survivors       # after new tests
    python bench/tools/mutation.py --modules pymc --ref HEAD  # the committed tree, not the working one

Writes ``bench/results/mutation.json``: per module the number of mutants, killed,
survived (not listed as equivalent), equivalent (with reasons), timeouts, incompetent
mutants (the mutated code did not even import), the score ``killed / (mutants −
equivalent)`` and every survivor's operator, line and code.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results" / "mutation.json"
EQUIVALENT = ROOT / "bench" / "tools" / "mutation_equivalent.json"

PYTEST = "-x -q -p no:cacheprovider -m 'not slow'"

# Module → (files, targeted tests, extra environment, definition-name filter or None).
# The pinned tests come first: they are fast and kill most mutants, so ``-x`` stops early.
MODULES: dict[str, dict] = {
    "gbmm": {
        # the quadrature moment matching is checked in test_online_ep.py (Monte Carlo)
        "files": ["inference/online/gbmm.py"],
        "tests": "tests/test_pinned_online.py tests/test_pinned_online_edges.py "
                 "tests/test_online_math.py tests/test_online_ep.py "
                 "tests/test_online_kernels.py tests/test_online_guards.py",
    },
    "kernels": {
        "files": ["inference/online/kernels.py"],
        # the quadrature kernels: test_crowdbt_quadrature.py and test_online_ep.py
        "tests": "tests/test_pinned_online.py tests/test_pinned_kernels.py "
                 "tests/test_online_kernels.py "
                 "tests/test_online_guards.py tests/test_online_openskill.py "
                 "tests/test_pinned_online_edges.py tests/test_online_math.py "
                 "tests/test_online_state.py tests/test_crowdbt_quadrature.py "
                 "tests/test_online_ep.py",
        "env": {"NUMBA_DISABLE_JIT": "1"},
        "default_sample": 100,
        "skip_operators": ["core/RemoveDecorator"],
    },
    "crowdbt": {
        # the quadrature update (its own test file) beside the Taylor updates
        "files": ["inference/online/crowdbt.py"],
        "tests": "tests/test_pinned_online.py tests/test_pinned_online_edges.py "
                 "tests/test_online_math.py tests/test_crowdbt_quadrature.py "
                 "tests/test_online_kernels.py tests/test_online_guards.py",
    },
    "wenglin": {
        "files": ["inference/online/wenglin.py"],
        "tests": "tests/test_pinned_wenglin.py tests/test_online_openskill.py "
                 "tests/test_online_kernels.py tests/test_online_guards.py",
    },
    "likelihood": {
        # the pairwise (LOO) and PeerGrader densities are checked where they are used
        "files": ["models/likelihood.py"],
        "tests": "tests/test_pinned_likelihood.py tests/test_likelihood.py "
                 "tests/test_loo_pairs.py tests/test_peergrader.py",
    },
    "numpyro": {
        # the densities against the NumPy reference first, then the sampler's gradient
        # the programs live in the package; numpyro_models.py re-exports them
        "files": ["models/numpyro/*.py"],
        # the models as functions of arrays (arrays.py), their prior draws (dists.py) and
        # the level's joint site are checked by test_ppl_contract, whose names do not say
        # numpyro: its tests but the PyMC ones
        "tests": "-k 'numpyro or (ppl_contract and not pymc)' tests/test_pinned_ppl.py "
                 "tests/test_ppl_contract.py tests/test_ppl_models.py tests/test_observed.py "
                 "tests/test_gradients.py",
        # 40: with every mutant killed the 95 % Wilson interval's lower end is 91 % (35 is
        # the least reaching 90 %); a surviving mutant costs minutes (JAX compilations)
        "default_sample": 40,
    },
    "pymc": {
        "files": ["models/pymc_models.py"],
        # the level's decomposition (lambda = m + c) is checked by test_ppl_contract's PyMC
        # tests, the shared SBC graph's checks of its arguments by test_sbc_pymc_reuse's
        "tests": "-k pymc tests/test_ppl_models.py tests/test_pinned_ppl.py "
                 "tests/test_observed.py tests/test_gradients.py tests/test_ppl_contract.py "
                 "tests/test_sbc_pymc_reuse.py::"
                 "test_shared_graph_is_build_model_for_each_loaded_data_set",
        # 40: with every mutant killed the 95 % Wilson interval's lower end is 91 % (35 is
        # the least reaching 90 %); a surviving mutant costs minutes (PyTensor compilations)
        "default_sample": 40,
    },
    "metrics": {
        # the identified summaries (centred, contrasts, order probabilities) in
        # test_identified.py
        "files": ["validation/metrics.py"],
        "tests": "tests/test_pinned_validation.py tests/test_pinned_metrics_edges.py "
                 "tests/test_metrics.py tests/test_identified.py",
    },
    "gate": {
        "files": ["inference/gate.py"],
        "tests": "tests/test_pinned_validation.py tests/test_gate_records.py",
    },
    "readers": {
        # the readers' error paths only: models/io.py, or the package it becomes
        "files": ["models/io.py", "models/io/*.py"],
        "tests": "tests/test_pinned_io.py tests/test_pinned_io_edges.py tests/test_io.py",
        "definitions": ["_csv_rows", "_columns", "_parse_rankings_csv", "_parse_pairwise_csv",
                        "_parse_wide_csv", "_parse_wwl", "_parse_preflib_order",
                        "_read_preflib", "read_truth_scores", "read_truth",
                        "read_worker_truth", "read_gold", "_check", "worker_id",
                        "skip_blank"],
    },
}

# Operators left out everywhere: replacements that cannot type-check on floats (bit
# operations, shifts), that duplicate others (floor division and modulo of floats behave
# like a wrong division, which ``Div`` replacements already cover), identity comparisons
# on numbers, and the random variable-substitution operators (thousands of mutants, mostly
# NameErrors).
EXCLUDE_OPERATORS = [
    r"core/ReplaceBinaryOperator_.*_(BitOr|BitAnd|BitXor|LShift|RShift|FloorDiv|Mod)$",
    r"core/ReplaceBinaryOperator_(BitOr|BitAnd|BitXor|LShift|RShift|FloorDiv|Mod)_.*",
    r"core/ReplaceComparisonOperator_(Eq|NotEq|Lt|LtE|Gt|GtE)_(Is|IsNot)$",
    r"core/ReplaceComparisonOperator_(Is|IsNot)_(Eq|NotEq|Lt|LtE|Gt|GtE)$",
    r"core/ReplaceUnaryOperator_.*_Invert$",
    r"core/ReplaceUnaryOperator_(Invert|Delete_Invert).*",
    r"core/VariableReplacer",
    r"core/VariableInserter",
]


def copy_repo(dst: Path, ref: str | None = None) -> None:
    """Tracked and untracked-but-not-ignored files of the working tree, or (``ref``) the
    tree of a commit: in a tree that others are editing, uncommitted half-done changes of
    the module under test would otherwise be mutated and tested."""
    if ref is not None:
        tar = subprocess.run(["git", "archive", "--format=tar", ref], cwd=ROOT,
                             capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(dst)], input=tar, check=True)
        return
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         cwd=ROOT, capture_output=True, check=True)
    for rel in filter(None, out.stdout.decode().split("\0")):
        src = ROOT / rel
        if src.is_file():
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / rel)


def module_files(spec: dict, base: Path) -> list[str]:
    files = []
    for pat in spec["files"]:
        files += sorted(str(p.relative_to(base)) for p in base.glob(pat))
    return files


def config_text(files: list[str], tests: str, timeout: float) -> str:
    paths = ", ".join(json.dumps(f) for f in files)
    cmd = f"{sys.executable} -m pytest {PYTEST} {tests}"
    excl = ", ".join(json.dumps(e) for e in EXCLUDE_OPERATORS)
    return (f"[cosmic-ray]\nmodule-path = [{paths}]\ntimeout = {timeout}\n"
            f"excluded-modules = []\ntest-command = {json.dumps(cmd)}\n\n"
            f"[cosmic-ray.distributor]\nname = \"local\"\n\n"
            f"[cosmic-ray.filters.operators-filter]\nexclude-operators = [{excl}]\n")


#: the fields every entry of ``bench/tools/mutation_equivalent.json`` must have: a mutant is
#: listed as equivalent only by its file, its code line (stripped), its column and its
#: operator, so one entry cannot cover another mutant of the same operator elsewhere on an
#: identical line
EQUIVALENT_FIELDS = ("module", "file", "operator", "code", "col", "reason")


def equivalent_table(path: Path = EQUIVALENT) -> list[dict]:
    """The equivalent-mutant entries, each checked to name file, code, column and
    operator (``ValueError`` naming the entry otherwise)."""
    table = json.loads(path.read_text()) if path.exists() else []
    for i, e in enumerate(table):
        missing = [k for k in EQUIVALENT_FIELDS if k not in e]
        if missing:
            raise ValueError(f"{path.name} entry {i} ({e.get('module')}, "
                             f"{e.get('operator')}, {e.get('code')!r}) lacks {missing}: an "
                             "entry must name its file, code line, column and operator")
        if not isinstance(e["col"], int) or isinstance(e["col"], bool):
            raise TypeError(f"{path.name} entry {i}: col must be an integer, not "
                             f"{e['col']!r}")
    return table


def matches_equivalent(e: dict, mutant: dict) -> bool:
    """Whether entry ``e`` lists ``mutant`` (its operator, file, code line, col and
    definition name as :func:`summarise` records them): file, code, column and operator
    must all agree; a ``definition`` in the entry narrows it to one function."""
    return (e["operator"] == mutant["operator"] and e["file"] == mutant["file"]
            and e["code"] == mutant["code"] and e["col"] == mutant["col"]
            and e.get("definition", mutant.get("definition")) == mutant.get("definition"))


def dead_equivalents(table: list[dict], base: Path = ROOT) -> list[dict]:
    """Entries whose code line is no longer in their file (in the tree at ``base``)."""
    out = []
    for e in table:
        f = base / e["file"]
        lines = f.read_text().splitlines() if f.is_file() else []
        if e["code"] not in (x.strip() for x in lines):
            out.append(e)
    return out


def _line_text(base: Path, path: str, line: int) -> str:
    lines = (base / path).read_text().splitlines()
    return lines[line - 1].strip() if 0 < line <= len(lines) else ""


NOT_SAMPLED = "not in the random sample"
NOT_RETESTED = "not a survivor of the previous run"


def _key(mut) -> tuple:
    """A mutant's identity, stable across ``cosmic-ray init`` runs of the same file (job ids
    are random): file, operator, occurrence, position."""
    return (str(mut.module_path), mut.operator_name, int(mut.occurrence),
            int(mut.start_pos[0]), int(mut.start_pos[1]))


def _ordinal(lines: list[str], line: int) -> int:
    """How many lines before ``line`` (1-based) read the same, stripped."""
    text = lines[line - 1].strip()
    return sum(1 for x in lines[:line - 1] if x.strip() == text)


def _survivor_matches(mut, survivors: list[dict], base: Path,
                      old_texts: dict[str, list[str]]) -> list[int]:
    """Indices of the recorded survivors this mutant re-runs: the same file, operator,
    column and code line, and the same place: the same line number when the file is
    unchanged, else the same rank among the file's identical lines (read from the first
    run's commit), else a code line that is unique in the file."""
    path, op = str(mut.module_path), mut.operator_name
    line, col = int(mut.start_pos[0]), int(mut.start_pos[1])
    lines = (base / path).read_text().splitlines()
    code = lines[line - 1].strip() if 0 < line <= len(lines) else ""
    out = []
    for i, s in enumerate(survivors):
        if (s["file"], s["operator"], s["col"]) != (path, op, col) or s.get("code") != code:
            continue
        old = old_texts.get(path)
        if old is not None and old == lines:
            same = s["line"] == line and s.get("occurrence") in (None, mut.occurrence)
        elif old is not None:
            same = 0 < s["line"] <= len(old) and old[s["line"] - 1].strip() == code and \
                _ordinal(old, s["line"]) == _ordinal(lines, line)
        else:
            same = s["line"] == line or sum(1 for x in lines if x.strip() == code) == 1
        if same:
            out.append(i)
    return out


def _old_texts(previous: dict | None, files: list[str]) -> dict[str, list[str]]:
    """The mutated files as the first run saw them, when it ran on a commit."""
    tree = (previous or {}).get("tree", "")
    if not tree.startswith("commit "):
        return {}
    rev = tree.split()[1]
    out = {}
    for f in files:
        got = subprocess.run(["git", "show", f"{rev}:{f}"], cwd=ROOT, capture_output=True,
                             text=True, check=False)
        if got.returncode == 0:
            out[f] = got.stdout.splitlines()
    return out


def mark_skipped(db_path: Path, spec: dict, cfg_path: Path, base: Path,
                 sample: int | None = None, seed: int = 0,
                 retest: list[dict] | None = None,
                 old_texts: dict[str, list[str]] | None = None) -> dict:
    """Skip excluded operators and mutants outside the listed definitions (in the work
    database, as cosmic-ray's own filters do).

    ``sample``: of the mutants left, run a seeded simple random sample of that size (the
    rest are marked skipped as "not in the random sample"). ``retest``: run only the mutants
    that match these survivor entries of a previous run. Returns the counts per reason.
    """
    import random
    import re

    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    pats = [re.compile(p) for p in EXCLUDE_OPERATORS + spec.get("skip_operators", [])]
    defs = spec.get("definitions")
    n = {"filter": 0, "population": 0, "not_sampled": 0, "not_retested": 0, "hits": {}}

    def skip(db, item, why):
        db.set_result(item.job_id, WorkResult(output=why, worker_outcome=WorkerOutcome.SKIPPED))

    with use_db(str(db_path), WorkDB.Mode.open) as db:
        kept = []
        for item in list(db.pending_work_items):
            mut = item.mutations[0]
            why = None
            if any(p.match(mut.operator_name) for p in pats):
                why = "operator excluded"
            elif defs is not None and mut.definition_name not in defs:
                why = "outside the readers' error paths"
            if why:
                skip(db, item, why)
                n["filter"] += 1
            else:
                kept.append(item)
        n["population"] = len(kept)
        if retest is not None:
            for item in kept:
                hit = _survivor_matches(item.mutations[0], retest, base, old_texts or {})
                if hit:
                    n["hits"][item.job_id] = hit
                else:
                    skip(db, item, NOT_RETESTED)
                    n["not_retested"] += 1
        elif sample is not None and sample < len(kept):
            # sorted by a stable identity first, so the same seed draws the same mutants
            kept.sort(key=lambda it: _key(it.mutations[0]))
            chosen = {it.job_id for it in random.Random(seed).sample(kept, sample)}
            for item in kept:
                if item.job_id not in chosen:
                    skip(db, item, NOT_SAMPLED)
                    n["not_sampled"] += 1
    return n


def run_module(name: str, spec: dict, base: Path, timeout: float, sample: int | None = None,
               seed: int = 0, previous: dict | None = None) -> dict:
    files = module_files(spec, base)
    if not files:
        return {"error": f"no file matches {spec['files']}"}
    cfg = base / f"cr-{name}.toml"
    db = base / f"cr-{name}.sqlite"
    env = dict(os.environ, **spec.get("env", {}))
    env.setdefault("NUMBA_CACHE_DIR", str(base / ".numba-cache"))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(import_copy(base)),
                                                      env.get("PYTHONPATH")]))
    check_imports_copy(base, env)
    cr = str(Path(sys.executable).parent / "cosmic-ray")
    t0 = time.time()
    # the unmutated code must pass its tests, or every mutant would look killed
    base_run = subprocess.run(f"{sys.executable} -m pytest {PYTEST} {spec['tests']}",
                              shell=True, cwd=base, env=env, capture_output=True, text=True,
                              check=False)
    if base_run.returncode != 0:
        return {"error": "the targeted tests fail on the unmutated code",
                "output": base_run.stdout[-2000:]}
    # a timeout counts as killed, so it must mean "much slower than the unmutated code",
    # not "the shared machine was busy": at least 3x the unmutated run's wall time
    base_seconds = time.time() - t0
    timeout = max(timeout, 3.0 * base_seconds)
    cfg.write_text(config_text(files, spec["tests"], timeout))
    subprocess.run([cr, "init", str(cfg), str(db)], cwd=base, env=env, check=True)
    retest = previous["survivors"] if previous is not None else None
    skipped = mark_skipped(db, spec, cfg, base, sample, seed, retest,
                           _old_texts(previous, files))
    subprocess.run([cr, "exec", str(cfg), str(db)], cwd=base, env=env, check=True)
    dump = subprocess.run([cr, "dump", str(db)], cwd=base, env=env, capture_output=True,
                          text=True, check=True).stdout
    seconds = time.time() - t0
    r = summarise(name, dump, base, skipped["filter"], seconds, spec)
    r["unmutated_seconds"], r["timeout_seconds"] = round(base_seconds, 1), round(timeout, 1)
    r["imports"] = "crowdrank from the mutated copy (PYTHONPATH)"
    if sample is not None and skipped["not_sampled"]:
        r["sample"] = sample_summary(r, skipped["population"], seed)
    if previous is not None:
        r = merge_retest(previous, r, skipped["hits"], dump)
    return r


def import_copy(base: Path) -> Path:
    """A folder holding ``crowdrank`` -> the temporary copy, for ``PYTHONPATH``: the package
    is installed editable from the working tree, so without it the tests would import the
    unmutated working tree and every mutant would survive. Beside ``base``, not inside it,
    so no walk of the copy loops through the link."""
    shim = base.parent / f"{base.name}-import"
    shim.mkdir(exist_ok=True)
    link = shim / "crowdrank"
    if not link.exists():
        link.symlink_to(base, target_is_directory=True)
    return shim


def check_imports_copy(base: Path, env: dict) -> str:
    """The file ``import crowdrank`` loads under ``env``; an error unless it is the copy's."""
    got = subprocess.run([sys.executable, "-c", "import crowdrank; print(crowdrank.__file__)"],
                         cwd=base, env=env, capture_output=True, text=True, check=False)
    path = Path(got.stdout.strip() or "?").resolve()
    if got.returncode != 0 or not path.is_relative_to(base.resolve()):
        raise RuntimeError(f"the tests would import crowdrank from {path}, not from the "
                           f"mutated copy {base}: {got.stderr[-500:]}")
    return str(path)


def wilson(k: int, n: int, z: float = 1.96) -> list[float] | None:
    """95 % Wilson interval of a proportion k/n (the sampled score's uncertainty)."""
    if n == 0:
        return None
    p = k / n
    c = (p + z * z / (2 * n)) / (1 + z * z / n)
    h = z * ((p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5) / (1 + z * z / n)
    return [round(max(0.0, c - h), 4), round(min(1.0, c + h), 4)]


def sample_summary(r: dict, population: int, seed: int) -> dict:
    denom = r["mutants"] - r["equivalent"] - r["incompetent"]
    return {"size": r["mutants"], "population": population, "seed": seed,
            "score_95ci": wilson(r["killed"], denom),
            "note": "a seeded simple random sample of the module's mutants; counts are "
                    "of the sample, the score estimates the whole module's"}


def merge_retest(prev: dict, new: dict, hits: dict[str, list[int]], dump: str) -> dict:
    """The previous run's counts with its survivors re-run against the current tests.

    Each survivor is decided by the mutants that re-ran it (``hits``: job id → survivor
    indices; where a position holds several mutants of one operator, e.g. ``n + 1`` and
    ``n − 1``, all re-run): killed when all of them are killed, equivalent when none
    survives unlisted and one is listed as equivalent, otherwise still a survivor (also
    when none re-ran it: its code line is gone). The counts stay those of the first run's
    mutants, so a sample stays a sample.
    """
    status = {}
    eq_keys = {(e["file"], e["line"], e["col"], e["occurrence"]) for e in
               new["equivalent_mutants"]}
    eq_by_key = {(e["file"], e["line"], e["col"], e["occurrence"]): e
                 for e in new["equivalent_mutants"]}
    for line in dump.splitlines():
        item, result = json.loads(line)
        if result is None or result.get("worker_outcome") == "skipped":
            continue
        mut = item["mutations"][0]
        key = (mut["module_path"], mut["start_pos"][0], mut["start_pos"][1],
               mut["occurrence"])
        outcome = result.get("test_outcome")
        if outcome == "survived":
            outcome = "equivalent" if key in eq_keys else "survived"
        status[item["job_id"]] = (outcome, key)
    per = {i: [] for i in range(len(prev["survivors"]))}
    for job, idx in hits.items():
        for i in idx:
            if job in status:
                per[i].append(status[job])
    killed, survivors, equivalent = 0, [], []
    for i, s in enumerate(prev["survivors"]):
        outs = [o for o, _ in per[i]]
        if not outs:
            survivors.append(dict(s, retest="not re-run: its code line is gone from the file"))
        elif "survived" in outs:
            survivors.append(s)
        elif "equivalent" in outs:
            equivalent.append(eq_by_key[next(k for o, k in per[i] if o == "equivalent")])
        else:
            killed += 1
    out = dict(prev)
    out["killed"] = prev["killed"] + killed
    out["survived"] = len(survivors)
    out["survivors"] = survivors
    eq = list(prev["equivalent_mutants"]) + equivalent
    out["equivalent_mutants"] = eq
    out["equivalent"] = len(eq)
    denom = out["mutants"] - out["equivalent"] - out["incompetent"]
    out["score"] = round(out["killed"] / denom, 4) if denom else None
    if "sample" in prev:
        out["sample"] = sample_summary(out, prev["sample"]["population"],
                                       prev["sample"]["seed"])
    out["retest"] = {"survivors_retested": prev["survived"], "mutants_rerun": new["mutants"],
                     "killed_now": killed, "equivalent_now": len(equivalent),
                     "not_found": sum(1 for i in per if not per[i]),
                     "seconds": new["seconds"], "tests": new["tests"],
                     "note": "the previous run's survivors re-run against the current tests "
                             "(the other mutants were not re-run)"}
    # an entry matched in the previous run stays matched: its mutant was not re-run
    seen = {(e["operator"], e["code"]) for e in prev["equivalent_mutants"]}
    out["unmatched_equivalent_entries"] = [e for e in new["unmatched_equivalent_entries"]
                                           if (e["operator"], e["code"]) not in seen]
    return out


def summarise(name, dump, base, skipped, seconds, spec) -> dict:
    eq = [e for e in equivalent_table() if e["module"] == name]
    used = set()
    counts = {"mutants": 0, "killed": 0, "timeout": 0, "incompetent": 0, "survived": 0}
    survivors, equivalent = [], []
    for line in dump.splitlines():
        item, result = json.loads(line)
        if result is None or result.get("worker_outcome") == "skipped":
            continue
        mut = item["mutations"][0]
        counts["mutants"] += 1
        lineno = mut["start_pos"][0]
        entry = {"operator": mut["operator_name"], "file": mut["module_path"], "line": lineno,
                 "col": mut["start_pos"][1], "occurrence": mut["occurrence"],
                 "definition": mut.get("definition_name"),
                 "code": _line_text(base, mut["module_path"], lineno)}
        outcome = result.get("test_outcome")
        if outcome == "killed":
            if (result.get("output") or "").strip() == "timeout":
                counts["timeout"] += 1
            counts["killed"] += 1
            continue
        if outcome == "incompetent":
            counts["incompetent"] += 1
            continue
        match = [i for i, e in enumerate(eq) if matches_equivalent(e, entry)]
        if match:
            used.update(match)
            equivalent.append(dict(entry, reason=eq[match[0]]["reason"]))
        else:
            counts["survived"] += 1
            survivors.append(entry)
    denom = counts["mutants"] - len(equivalent) - counts["incompetent"]
    return {**counts, "equivalent": len(equivalent),
            "score": round(counts["killed"] / denom, 4) if denom else None,
            "skipped_by_filter": skipped, "seconds": round(seconds, 1),
            "tests": spec["tests"], "env": spec.get("env", {}),
            "survivors": survivors, "equivalent_mutants": equivalent,
            # the module's entries that matched no surviving mutant of this run: their
            # mutant was killed or, in a sample, not drawn (not a sign of a stale entry;
            # --check-equivalents checks that every entry still names existing code)
            "unmatched_equivalent_entries": [e for i, e in enumerate(eq) if i not in used]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--modules", default=",".join(MODULES),
                    help=f"comma-separated subset of {','.join(MODULES)}")
    ap.add_argument("--timeout", type=float, default=120.0,
                    help="seconds per mutant's test run, at least 3x the unmutated "
                         "run's (a timeout counts as killed)")
    ap.add_argument("--keep", default=None, help="work in this folder and keep it")
    ap.add_argument("--out", default=str(RESULTS))
    ap.add_argument("--list", action="store_true", help="print the modules and exit")
    ap.add_argument("--sample", type=int, default=None, metavar="N",
                    help="run a seeded random sample of N mutants per module (the score is "
                         "then an estimate, reported with its size and a 95%% interval); "
                         "without it, kernels, numpyro and pymc run their default sample "
                         "(100, 40, 40: their mutants are slow) and the others run in full")
    ap.add_argument("--seed", type=int, default=0, help="seed of --sample")
    ap.add_argument("--ref", default=None, metavar="REV",
                    help="mutate and test the committed tree of REV (e.g. HEAD) instead of "
                         "the working tree (tracked and untracked files)")
    ap.add_argument("--check-equivalents", action="store_true",
                    help="check bench/tools/mutation_equivalent.json (every entry names file, "
                         "code, column and operator; its code line still exists) and exit")
    ap.add_argument("--retest-survivors", action="store_true",
                    help="re-run only the survivors recorded in the results file for each "
                         "module (after adding tests) and update its counts")
    args = ap.parse_args(argv)
    names = [m.strip() for m in args.modules.split(",") if m.strip()]
    unknown = [m for m in names if m not in MODULES]
    if unknown:
        ap.error(f"unknown module(s) {unknown}; expected {list(MODULES)}")
    if args.check_equivalents:
        dead = dead_equivalents(equivalent_table())
        for e in dead:
            print(f"{e['file']}: no line reads {e['code']!r} ({e['module']}, "
                  f"{e['operator']})", file=sys.stderr)
        return 1 if dead else 0
    if args.list:
        for m in names:
            print(f"{m}: {MODULES[m]['files']} <- {MODULES[m]['tests']}")
        return 0
    out = Path(args.out)
    results = json.loads(out.read_text()) if out.exists() else {}
    results.setdefault("modules", {})
    tmp = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="crowdrank-mut-"))
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        # what was mutated and tested: a commit, or the working tree as it was at the start
        commit = _rev(args.ref or "HEAD")
        tree = (f"commit {commit}" if args.ref else
                f"working tree at {commit} with its uncommitted changes")
        copy_repo(tmp, args.ref)
        load_start = round(os.getloadavg()[0], 2)
        for m in names:
            print(f"mutation: {m} ...", file=sys.stderr, flush=True)
            prev = None
            if args.retest_survivors:
                prev = results["modules"].get(m)
                if not prev or "survivors" not in prev:
                    print(f"mutation: {m}: no previous result to retest", file=sys.stderr)
                    continue
            sample = args.sample if args.sample is not None else \
                MODULES[m].get("default_sample")
            r = run_module(m, MODULES[m], tmp, args.timeout, sample, args.seed, prev)
            # re-read before writing: another run (another module) may have written since
            results = json.loads(out.read_text()) if out.exists() else {}
            print(f"mutation: {m}: " + json.dumps({k: r.get(k) for k in
                  ("mutants", "killed", "survived", "equivalent", "timeout", "incompetent",
                   "score", "seconds", "error")}), file=sys.stderr, flush=True)
            if prev is not None and r.get("error"):
                # a retest that could not run leaves the module's record as it was, and says
                # why beside it
                r = dict(results.get("modules", {}).get(m, prev),
                         retest_error={"error": r["error"], "output": r.get("output", "")})
                rec = r["retest_error"]
            else:
                # a retest keeps the first run's tree and date and records its own
                rec = r["retest"] if prev is not None and "retest" in r else r
            results.setdefault("modules", {})[m] = r
            rec["tree"] = tree
            # the commit the mutated files are read from: render_results.py calls a record
            # stale when ``git log COMMIT..HEAD -- <module files>`` is not empty
            rec["commit"] = commit
            rec["files"] = MODULES[m]["files"]
            if args.ref is None:
                rec["uncommitted"] = _uncommitted(module_files(MODULES[m], ROOT))
            rec["command"] = "python bench/tools/mutation.py " + " ".join(argv if argv is not None
                                                                    else sys.argv[1:])
            rec["date"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            rec["load_avg_1m"] = load_start    # the machine is shared: a mutant's wall time
            results["machine"] = machine()
            results["date"] = rec["date"]
            results["tool"] = "cosmic-ray " + _version()
            results["excluded_operators"] = EXCLUDE_OPERATORS
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(results, indent=1) + "\n")   # after every module
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
            shutil.rmtree(tmp.parent / f"{tmp.name}-import", ignore_errors=True)
    bad = [m for m in names if m in results["modules"] and (
           results["modules"][m].get("survived") or results["modules"][m].get("error"))]
    return 1 if bad else 0


def machine() -> str:
    import platform
    return (f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs, "
            f"Python {platform.python_version()}")


def _rev(ref: str) -> str:
    return subprocess.run(["git", "rev-parse", "--short", ref], cwd=ROOT, capture_output=True,
                          text=True, check=True).stdout.strip()


def _uncommitted(files: list[str]) -> list[str]:
    """Those of ``files`` whose working copy differs from HEAD (a working-tree run mutated
    them, not the commit)."""
    if not files:
        return []
    out = subprocess.run(["git", "status", "--porcelain", "--", *files], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    return [line[3:] for line in out.splitlines() if line.strip()]


def _version() -> str:
    from importlib.metadata import version
    return version("cosmic-ray")


if __name__ == "__main__":
    sys.exit(main())

"""``bench/tools/mutation.py``: an equivalent-mutant entry lists exactly one mutant position.

An entry must name file, code line, column and operator; a surviving mutant is counted as
equivalent only when all four agree (the same operator elsewhere on an identical line, or
in another file, stays a survivor). The mutants here are built by hand in the shape
``summarise`` records them; no cosmic-ray run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bench_scripts import load_script

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def mutation():
    return load_script("bench/tools/mutation.py", "crowdrank_bench_mutation")


ENTRY = {"module": "gate", "file": "inference/gate.py", "operator": "core/NumberReplacer",
         "code": "divergences: int = 0", "col": 23, "reason": "a default always overridden"}
MUTANT = {"operator": "core/NumberReplacer", "file": "inference/gate.py", "line": 35,
          "col": 23, "occurrence": 0, "definition": "Gate", "code": "divergences: int = 0"}


def test_match_needs_file_code_column_and_operator(mutation):
    assert mutation.matches_equivalent(ENTRY, MUTANT)
    for key, other in (("col", 24), ("file", "inference/other.py"),
                       ("operator", "core/ReplaceBinaryOperator_Add_Sub"),
                       ("code", "divergences: int = 1")):
        assert not mutation.matches_equivalent(ENTRY, dict(MUTANT, **{key: other})), key
    # a definition narrows the entry to one function
    assert mutation.matches_equivalent(dict(ENTRY, definition="Gate"), MUTANT)
    assert not mutation.matches_equivalent(dict(ENTRY, definition="check"), MUTANT)


@pytest.mark.parametrize("drop", ["col", "file", "operator", "code", "reason"])
def test_an_entry_without_a_field_is_an_error(mutation, tmp_path, drop):
    p = tmp_path / "eq.json"
    p.write_text(json.dumps([{k: v for k, v in ENTRY.items() if k != drop}]))
    with pytest.raises(ValueError, match=drop):
        mutation.equivalent_table(p)


def test_a_non_integer_column_is_an_error(mutation, tmp_path):
    p = tmp_path / "eq.json"
    p.write_text(json.dumps([dict(ENTRY, col="23")]))
    with pytest.raises(TypeError, match="integer"):
        mutation.equivalent_table(p)


def test_the_committed_table_is_well_formed(mutation):
    table = mutation.equivalent_table()
    assert table, "bench/tools/mutation_equivalent.json is empty"
    assert {e["module"] for e in table} <= set(mutation.MODULES)
    # every entry still points at a line of today's code (an entry for a line that was
    # rewritten would wait to excuse an unrelated mutant on an identical new line)
    assert mutation.dead_equivalents(table) == []


def test_dead_entries_are_found(mutation, tmp_path):
    (tmp_path / "inference").mkdir()
    (tmp_path / "inference" / "gate.py").write_text("x = 1\n    divergences: int = 0\n")
    assert mutation.dead_equivalents([ENTRY], tmp_path) == []
    gone = dict(ENTRY, code="n_draws = 0")
    assert mutation.dead_equivalents([ENTRY, gone], tmp_path) == [gone]


def test_the_tests_import_the_mutated_copy(mutation, tmp_path):
    """crowdrank is installed editable from the working tree: without the PYTHONPATH shim
    the tests of a mutant would import the unmutated package (every mutant survives)."""
    import os

    base = tmp_path / "copy"
    base.mkdir()
    (base / "__init__.py").write_text((ROOT / "__init__.py").read_text())
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    with pytest.raises(RuntimeError, match="not from the mutated copy"):
        mutation.check_imports_copy(base, env)
    env["PYTHONPATH"] = str(mutation.import_copy(base))
    assert Path(mutation.check_imports_copy(base, env)).is_relative_to(base.resolve())


def test_a_retest_that_cannot_run_keeps_the_record(mutation, tmp_path, monkeypatch):
    """``--retest-survivors`` whose unmutated baseline fails (or that cannot run at all)
    leaves the module's score, counts and survivors as they were and says why beside
    them, with the retest's own date and command; a retest that ran replaces them."""
    before = {"mutants": 60, "killed": 58, "survived": 2, "score": 0.9667, "commit": "abc1234",
              "survivors": [{"operator": "x", "file": "f.py", "line": 1, "col": 0,
                             "code": "a < b"}]}
    out = tmp_path / "mutation.json"
    out.write_text(json.dumps({"modules": {"gbmm": before}}))
    monkeypatch.setattr(mutation, "copy_repo", lambda tmp, ref: None)
    monkeypatch.setattr(mutation, "run_module", lambda *a: {
        "error": "the targeted tests fail on the unmutated code", "output": "1 failed"})
    mutation.main(["--modules", "gbmm", "--retest-survivors", "--out", str(out),
                   "--keep", str(tmp_path / "work")])
    rec = json.loads(out.read_text())["modules"]["gbmm"]
    assert {k: rec[k] for k in before} == before
    assert rec["retest_error"]["error"].startswith("the targeted tests fail")
    assert rec["retest_error"]["output"] == "1 failed"
    assert "--retest-survivors" in rec["retest_error"]["command"]

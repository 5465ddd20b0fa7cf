"""The documentation inside the repository agrees with the JSON results and with the code.

* ``docs/results.md`` is exactly what ``bench/tools/render_results.py`` renders from
  ``bench/results/*.json`` (so no figure in the docs can drift from its measurement);
* every citation key ``[Key]`` used in ``docs/*.md`` or in the Python files of ``models/``,
  ``inference/``, ``validation/`` and ``reports/`` is defined in ``docs/references.md``;
* ``docs/contracts.md`` names only functions, parameters (with their defaults), fields and
  columns that exist in the code under those names, and its signatures list every
  parameter the code has.

Only imports and tiny objects; no sampling, no numba, no JAX.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import re
from pathlib import Path

import numpy as np
import pytest
from bench_scripts import load_script

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
CONTRACTS = (DOCS / "contracts.md").read_text(encoding="utf-8")
KEY = re.compile(r"\[([A-Z][A-Za-z]+\d\d[a-z]?)\]")


# ------------------------------------------------------------------ results.md
def _render_module():
    return load_script("bench/tools/render_results.py", "render_results")


def test_results_md_is_rendered_from_the_json():
    mod = _render_module()
    fresh = mod.render(ROOT / "bench" / "results")
    current = (DOCS / "results.md").read_text(encoding="utf-8")
    assert current == fresh, "docs/results.md is stale: run python bench/tools/render_results.py"


def test_readme_headline_table_is_rendered_from_the_json():
    """README's figures come from bench/results/*.json by the same script: none by hand."""
    mod = _render_module()
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert mod.BEGIN in text and mod.END in text, "README has no headline table markers"
    assert text == mod.readme_with_headline(text, ROOT / "bench" / "results"), \
        "README's headline table is stale: run python bench/tools/render_results.py"


#: The sections of docs/fidelity.md that a benchmark renders from its record:
#: (section, benchmark, record)
FIDELITY_SECTIONS = (("approx", "bench_approx", "approx.json"),
                     ("approx-study", "bench_approx_study", "approx_study.json"),
                     ("approx-diagnose", "bench_approx_diagnose", "approx_diagnose.json"),
                     ("approx-paper", "bench_approx_paper", "approx_paper.json"))


@pytest.mark.parametrize("section,bench,record", FIDELITY_SECTIONS,
                         ids=[s[0] for s in FIDELITY_SECTIONS])
def test_fidelity_sections_are_what_their_records_render(section, bench, record):
    """Each benchmark's section of docs/fidelity.md (between its markers) is exactly what
    its ``render_section`` makes of the record: a figure there cannot drift from its
    measurement, and a planted edit of the page fails."""
    path = ROOT / "bench" / "results" / record
    assert path.is_file(), f"bench/results/{record} is missing"
    mod = load_script(f"bench/{bench}.py", bench)
    fresh = mod.render_section(json.loads(path.read_text()))
    page = (DOCS / "fidelity.md").read_text()
    start, end = f"<!-- {section}:start -->", f"<!-- {section}:end -->"
    assert fresh.startswith(start) and fresh.endswith(end)
    stored = page[page.index(start):page.index(end) + len(end)]
    assert stored == fresh, (f"docs/fidelity.md's {section} section is stale: run "
                             f"python bench/{bench}.py render")


def test_fidelity_page_is_what_the_study_and_reference_records_render(tmp_path):
    """docs/fidelity.md's own part (the study's tables, the medium-scale references from
    ``reference_medium.json``, the goals, the diagnoses) is exactly what
    ``bench/bench_fidelity.py render`` makes of the records: a record changed without
    re-rendering, or a figure typed into the page, fails. Rendered into a copy of the page,
    so that the blocks other benchmarks own (tested above) are carried over unchanged."""
    mod = load_script("bench/bench_fidelity.py", "bench_fidelity")
    page = (DOCS / "fidelity.md").read_text()
    copy = tmp_path / "fidelity.md"
    copy.write_text(page)
    mod.render(ROOT / "bench" / "results" / "fidelity.json", copy)
    assert copy.read_text() == page, ("docs/fidelity.md is stale: run "
                                      "python bench/bench_fidelity.py render")
    # every medium reference record is a row of its table
    recs = json.loads((ROOT / "bench" / "results" / "reference_medium.json").read_text())
    table = page[page.index("## The medium-scale references"):].split("|---|", 1)[1]
    rows = table.split("\n\n", 1)[0].splitlines()[1:]
    assert len(rows) == len(recs) and all(r.startswith("| ") for r in rows)


def test_sbc_table_is_what_its_record_renders():
    """docs/sbc.md's table of measured figures (between its markers) is exactly what
    ``bench/bench_sbc.py``'s ``render_section`` makes of ``sbc.json``: a figure typed into
    the page, or a record changed without re-rendering, fails. One row per study record."""
    rec = json.loads((ROOT / "bench" / "results" / "sbc.json").read_text())
    mod = load_script("bench/bench_sbc.py", "bench_sbc")
    fresh = mod.render_section(rec)
    page = (DOCS / "sbc.md").read_text()
    stored = page[page.index(mod.START):page.index(mod.END) + len(mod.END)]
    assert stored == fresh, "docs/sbc.md is stale: run python bench/bench_sbc.py render"
    rows = [ln for ln in fresh.splitlines() if ln.startswith("| ") and "---" not in ln][1:]
    assert len(rows) == len(rec["runs"])
    # a study that is not calibrated says so in bold: the online CrowdBT fits are not
    assert any("crowdbt" in r and "**NOT calibrated**" in r for r in rows)


def test_readme_fidelity_summary_says_what_its_record_shows():
    """README's "How close the approximations are" quotes fidelity.json in prose: the
    closest centred |z| per worker type at medium scale and the best EP variants on the
    trusted CrowdBT default (|z|, sd ratio, cost). Each number is compared with the record
    rounded as printed, so an edit of either that leaves them apart fails."""
    text = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    fid = json.loads((ROOT / "bench" / "results" / "fidelity.json").read_text())
    closest = re.search(r"closest centred \|z\|: ([^)]*)\)", text).group(1)
    quoted = {k: float(v) for k, v in re.findall(r"(\w+) ([\d.]+)", closest)}
    recorded = {k.removeprefix("medium-"): g["closest_within_cost"]["centred_abs_z"]
                for k, g in fid["goals"].items() if k.startswith("medium-")}
    assert set(quoted) == set(recorded)
    assert all(f"{recorded[k]:.2f}" == f"{v:.2f}" for k, v in quoted.items()), (quoted, recorded)
    assert not any(g["variants_in_goal"] for k, g in fid["goals"].items()
                   if k.startswith("medium-")), "README says no variant is inside the box"
    crowdbt = next(s for s in fid["subjects"] if s["name"] == "default-crowdbt")
    assert crowdbt["trusted"]
    variants = {v["variant"]: v for v in crowdbt["variants"]}

    def quoted_as(name):
        v = variants[name]
        return (f"{v['centred']['median_abs_z']:.2f}", f"{v['centred']['median_sd_ratio']:.2f}",
                f"{v.get('cpu_x_one_pass', v['cost_x_one_pass']):.0f}×")   # CPU, as the page
    z, sd, cost = quoted_as("ep5 damping=0")
    assert float(z) <= 0.1 and 0.9 <= float(sd) <= 1.1
    assert f"box at {cost} the one-pass cost (5 passes" in text
    z, sd, cost = quoted_as("ep5 damping=0 taylor=quadrature")
    assert f"`--taylor quadrature`: |z| {z}, sd ratio {sd}, {cost})" in text


def test_render_survives_unknown_json(tmp_path):
    mod = _render_module()
    (tmp_path / "new.json").write_text('{"date": "2030-01-02", "x": 1.5, "rows": '
                                       '[{"a": 1, "b": {"c": 2}}], "deep": {"d": [[1]]}}')
    (tmp_path / "broken.json").write_text("{not json")
    (tmp_path / "audit.json").write_text('[{"name": "odd"}]')    # known name, odd shape
    text = mod.render(tmp_path)
    assert "## `new.json`" in text and "2030-01-02" in text and "b.c" in text
    assert "could not be read" in text
    assert "bench/results/audit.json" in text


# ------------------------------------------------------------------ citations
def _defined_keys() -> set[str]:
    text = (DOCS / "references.md").read_text(encoding="utf-8")
    return set(re.findall(r"^- \*\*\[([A-Za-z]+\d\d[a-z]?)\]\*\*", text, flags=re.MULTILINE))


def test_every_cited_key_is_in_references():
    defined = _defined_keys()
    assert {"Pan18", "Chen13", "WL11", "MT00", "Talts18", "Vehtari21"} <= defined
    used: dict[str, list[str]] = {}
    files = sorted(DOCS.glob("*.md"))
    for pkg in ("models", "inference", "validation", "reports"):
        files += sorted((ROOT / pkg).rglob("*.py"))
    for f in files:
        for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            for key in KEY.findall(line):
                used.setdefault(key, []).append(f"{f.relative_to(ROOT)}:{n}")
    missing = {k: v for k, v in used.items() if k not in defined}
    assert not missing, f"citation keys not defined in docs/references.md: {missing}"


# ------------------------------------------------------------------ contracts.md
def _contract_call(name: str) -> str:
    """The text between the parentheses of the first ``name(`` in contracts.md (not part of
    a longer dotted or underscored name)."""
    m = re.search(rf"(?<![\w.]){re.escape(name)}\(", CONTRACTS)
    assert m, f"docs/contracts.md has no {name}(...)"
    start = m.end()
    depth, i = 1, start
    while depth:
        depth += {"(": 1, ")": -1}.get(CONTRACTS[i], 0)
        i += 1
    return " ".join(CONTRACTS[start:i - 1].split())


def _split_top(text: str) -> list[str]:
    parts, depth, cur, quote = [], 0, "", None
    for ch in text:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
            continue
        cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


def _contract_params(name: str) -> tuple[list[str], dict[str, object], bool]:
    """Names in order, literal defaults (first alternative of ``a|b``), and ``**`` seen."""
    names, defaults, var_kw = [], {}, False
    for p in _split_top(_contract_call(name)):
        if p == "*":
            continue
        if p.startswith("**"):
            var_kw = True
            continue
        pname, _, default = p.partition("=")
        pname = re.split(r"[\s:(]", pname.strip())[0]
        names.append(pname)
        if default:
            default = default.split("|")[0].strip()
            try:
                defaults[pname] = ast.literal_eval(default)
            except (ValueError, SyntaxError):
                pass
    return names, defaults, var_kw


def _check_signature(contract_name: str, fn, skip_self: bool = False):
    names, defaults, var_kw = _contract_params(contract_name)
    sig = inspect.signature(fn)
    params = [p for p in sig.parameters.values()
              if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
    if skip_self:
        params = params[1:]
    assert names == [p.name for p in params], (
        f"docs/contracts.md {contract_name}(...) lists {names}; the code has "
        f"{[p.name for p in params]}")
    for pname, value in defaults.items():
        assert sig.parameters[pname].default == value, (
            f"{contract_name}: default of {pname} is {sig.parameters[pname].default!r} in the "
            f"code, {value!r} in docs/contracts.md")
    has_var_kw = any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values())
    assert var_kw == has_var_kw, f"{contract_name}: **options in one place only"


def test_contract_signatures():
    from crowdrank.inference.nuts import fit_nuts, read_nuts, write_nuts
    from crowdrank.inference.online import OnlinePosterior, fit_online, fit_online_stream
    from crowdrank.validation.compare import compare
    from crowdrank.validation.runtime.grid import run_grid

    _check_signature("fit_nuts", fit_nuts)
    _check_signature("fit_online", fit_online)
    _check_signature("fit_online_stream", fit_online_stream)
    _check_signature("to_datatree", OnlinePosterior.to_datatree, skip_self=True)
    _check_signature("crowdrank.validation.compare.compare", compare)
    _check_signature("crowdrank.validation.runtime.grid.run_grid", run_grid)
    from crowdrank.inference.online.ep import fit_ep
    _check_signature("crowdrank.inference.online.ep.fit_ep", fit_ep)
    _check_signature("write_nuts", write_nuts)
    _check_signature("read_nuts", read_nuts)


def _fields(cls) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


def test_contract_dataclass_fields():
    from crowdrank.inference.gate import Gate
    from crowdrank.inference.nuts import NutsResult
    from crowdrank.inference.online import OnlinePosterior
    from crowdrank.models.priors import Priors
    from crowdrank.validation.compare import Comparison
    from crowdrank.validation.runtime.grid import GridRun

    assert _contract_params("Priors")[0] == _fields(Priors)
    assert _contract_params("Gate")[0] == _fields(Gate)
    assert _contract_params("GridRun")[0] == _fields(GridRun)
    assert {"idata", "gate", "timings", "adaptation"} == set(_fields(NutsResult))
    for name in ("idata", "gate", "timings", "adaptation"):
        assert f"`NutsResult.{name}`" in CONTRACTS
    for name in ("verdict", "to_dict"):
        assert f"`.{name}()`" in CONTRACTS and callable(getattr(Gate, name))
    # OnlinePosterior: every field is named in its bullet, and the methods exist
    bullet = CONTRACTS[CONTRACTS.index("- `OnlinePosterior`:"):CONTRACTS.index("- Errors:")]
    for name in _fields(OnlinePosterior):
        assert f"`{name}`" in bullet, f"OnlinePosterior.{name} is not in docs/contracts.md"
    for name in ("to_json", "from_json", "items_table", "to_datatree"):
        assert f"`{name}(" in bullet or f".{name}(" in bullet
        assert callable(getattr(OnlinePosterior, name))
    # Comparison: the fields, then to_dict
    bullet = CONTRACTS[CONTRACTS.index("- `Comparison`:"):]
    bullet = bullet[:bullet.index("\n- ")]
    for name in _fields(Comparison):
        assert f"`{name}`" in bullet, f"Comparison.{name} is not in docs/contracts.md"
    assert "`to_dict()`" in bullet and callable(Comparison.to_dict)


def test_contract_constants():
    from crowdrank.inference import gate
    from crowdrank.inference.online.state import ALGORITHMS, CLAMP_KEYS
    from crowdrank.validation.compare import PARAM_COLUMNS

    m = re.search(r"`crowdrank\.validation\.compare\.PARAM_COLUMNS`: `([^`]*)`", CONTRACTS)
    listed = tuple(re.sub(r"\s*\(.*?\)", "", c).strip() for c in m.group(1).split(","))
    assert listed == tuple(PARAM_COLUMNS)
    m = re.search(r"thresholds\s+R-hat < ([\d.]+), ESS ≥ (\d+), no divergences, E-BFMI ≥ "
                  r"([\d.]+)", CONTRACTS)
    assert (float(m.group(1)), float(m.group(2)), float(m.group(3))) == (
        gate.RHAT_MAX, gate.ESS_MIN, gate.EBFMI_MIN)
    for alg in ALGORITHMS.values():
        assert f"`{alg}`" in CONTRACTS
    m = re.search(r"keys always present: (.*?)guard replacements; (.*?) = how often",
                  CONTRACTS, flags=re.DOTALL)
    assert set(re.findall(r"`(\w+)`", m.group(1) + m.group(2))) == set(CLAMP_KEYS)


def test_contract_datatree_attrs_and_layout():
    """The attrs the contract lists are those ``to_datatree`` and ``fit_nuts`` write."""
    from crowdrank.inference import nuts

    m = re.search(r"\(`idata\.attrs`\): (.*?); `write_nuts` adds", CONTRACTS, flags=re.DOTALL)
    listed = set(re.findall(r"`(\w+)`(?!\()", re.sub(r"\(`[^)]*\)", "", m.group(1))))
    src = inspect.getsource(nuts.to_datatree) + inspect.getsource(nuts.fit_nuts)
    written = set(re.findall(r'"(\w+)": ', src))
    missing = listed - written
    assert not missing, f"attrs in docs/contracts.md that the code never writes: {missing}"
    block = src[src.index("extra_attrs={"):src.index("gate = check(idata)")]
    attrs_src = inspect.getsource(nuts.to_datatree)
    attrs_src = attrs_src[attrs_src.index("attrs = {"):]
    code_attrs = set(re.findall(r'"(\w+)": ', block)) | set(re.findall(r'"(\w+)": ',
                                                                     attrs_src))
    undocumented = code_attrs - listed
    assert not undocumented, f"attrs written but not in docs/contracts.md: {undocumented}"


def test_contract_crowdbt_prior_is_beta():
    """contracts.md: CrowdBT reads ``Priors.beta()`` — ``ab`` if given, else
    ``alpha[:, :2]`` — in both the NUTS inputs and the online state."""
    from crowdrank.inference.online import OnlinePosterior
    from crowdrank.models.data import Rankings
    from crowdrank.models.model_inputs import model_inputs
    from crowdrank.models.priors import Priors

    data = Rankings.from_lists([["a", "b", "c"], ["b", "c"]], ["u", "v"])
    alpha = np.array([[3.0, 2.0, 1.0], [4.0, 1.5, 0.5]])
    ab = np.array([[7.0, 1.0], [2.0, 5.0]])
    with_ab = Priors(("u", "v"), alpha, ab=ab)
    without = Priors(("u", "v"), alpha)
    assert np.array_equal(with_ab.beta(), ab)
    assert np.array_equal(without.beta(), alpha[:, :2])
    assert np.array_equal(model_inputs("crowdbt", data, with_ab).alpha, ab)
    assert np.array_equal(model_inputs("crowdbt", data, without).alpha, alpha[:, :2])
    post = OnlinePosterior.from_priors("crowdbt", data.items, with_ab, workers=data.workers)
    assert np.array_equal(post.alpha, ab)
    assert "`ab` when it is given" in CONTRACTS and "otherwise `alpha[:, :2]`" in CONTRACTS


def test_contract_online_datatree_layout():
    """``OnlinePosterior.to_datatree`` has the contract's variables, dims and attrs."""
    from crowdrank.inference.online import OnlinePosterior
    from crowdrank.models.priors import Priors

    priors = Priors(("u", "v"), np.array([[3.0, 2.0, 1.0], [4.0, 1.5, 0.5]]))
    post = OnlinePosterior.from_priors("couple", ["a", "b", "c"], priors)
    tree = post.to_datatree(draws=5, seed=1)
    assert tree["posterior"]["lambda"].dims == ("chain", "draw", "item")
    assert tree["posterior"]["eta"].dims == ("chain", "draw", "worker", "stage")
    for key in ("model", "method", "algorithm", "seed", "mu0", "sigma0", "prior_spec"):
        assert key in tree.attrs
        assert f"`{key}`" in CONTRACTS or f"`{key}=" in CONTRACTS
    assert tree.attrs["method"] == "online"


@pytest.mark.parametrize("name", ["fit_nuts", "fit_online", "compare", "run_grid"])
def test_contract_parser_sees_the_calls(name):
    assert _contract_params(name if name not in ("compare", "run_grid") else
                            {"compare": "crowdrank.validation.compare.compare",
                             "run_grid": "crowdrank.validation.runtime.grid.run_grid"}[name])[0]


def test_guide_peers_table_is_its_record():
    """docs/guide.md's table of the peers (accuracy / Spearman ρ per data set) says what
    ``bench/results/peers.json`` holds, to its three decimals: a record re-run with other
    figures, or a cell typed wrong, fails. Every method of the record has its row."""
    rec = json.loads((ROOT / "bench" / "results" / "peers.json").read_text())
    cols = {"babyface": "BabyFace", "readlevel": "read-level", "preflib-dots": "PrefLib dots",
            "preflib-puzzle": "PrefLib puzzle"}
    text = (DOCS / "guide.md").read_text(encoding="utf-8")
    head = "| method | " + " | ".join(cols[s["dataset"]] for s in rec["sets"]) + " |"
    assert head in text, "the peers table's header (its data sets) differs from the record"
    table = text[text.index(head):].split("\n\n", 1)[0].splitlines()[2:]
    rows = {ln.split(" | ")[0].removeprefix("| "): ln for ln in table}
    labels = [r["label"] for r in rec["sets"][0]["rows"]]
    assert list(rows) == labels
    for lab in labels:
        cells = [f"{r['accuracy']:.3f} / {r['spearman']:.3f}" for s in rec["sets"]
                 for r in s["rows"] if r["label"] == lab]
        assert rows[lab] == f"| {lab} | " + " | ".join(cells) + " |", lab


def test_replication_cost_table_is_its_record():
    """docs/replication.md's table of cost ratios (Fig. 8 / Table 2) says what
    ``bench/results/replicate_cost.json`` holds, to two decimals: CPU of the whole pass and
    the update loop's best wall time on BabyFace, CPU of the pass at paper scale."""
    cost = json.loads((ROOT / "bench" / "results" / "replicate_cost.json").read_text())
    cost = cost["summary"]["cost"]
    text = (DOCS / "replication.md").read_text(encoding="utf-8")

    def row(label, data, suffix, bold=False):
        r = cost[data]["ratio_to_pl"]
        cells = [f"{r[m + ':pl' + suffix]:.2f}" for m in ("couple", "crowdbt", "bt")]
        cells[0] = f"**{cells[0]}**" if bold else cells[0]
        return f"| {label} | " + " | ".join(cells) + " |"

    cpu = " (cpu, whole pass)"
    assert row("BabyFace ×5, CPU of the pass", "babyface", cpu, bold=True) in text
    assert row("BabyFace ×5, update loop (best wall)", "babyface", "") in text
    assert row("amateur, 450k, CPU of the pass", "synthetic", cpu) in text


def test_guide_preflib_difficulty_table_is_its_record():
    """docs/guide.md's table of the PrefLib difficulty levels (share of pairs in the true
    order, the contextual BT gap with its sd, choix's BT gap on the level alone) says what
    ``pair_models.json``'s ``preflib_covariates`` hold, as rounded there."""
    rec = json.loads((ROOT / "bench" / "results" / "pair_models.json").read_text())
    text = (DOCS / "guide.md").read_text(encoding="utf-8")
    n = 0
    for ds in ("preflib-dots-pairs", "preflib-puzzle-pairs"):
        for step, v in rec["preflib_covariates"][ds]["per_difficulty"].items():
            cells = (f"| {v['category']} ({step}) | {v['share_in_true_order']:.3f} | "
                     f"{v['contextual_gap_p1_p4']:.2f} ({v['contextual_gap_sd']:.2f}) | "
                     f"{v['choix_bt_gap_p1_p4']:.2f} | ")
            assert cells in text, cells
            n += 1
    assert n == 8


def test_guide_pair_audit_times_are_their_record():
    """docs/guide.md's table of the pair models' audits gives each command's wall and CPU
    seconds as ``pair_audit.json`` holds them (rounded to the second)."""
    rec = json.loads((ROOT / "bench" / "results" / "pair_audit.json").read_text())
    text = (DOCS / "guide.md").read_text(encoding="utf-8")
    labels = {"crowdbt-bias": "crowdbt-bias (β ~ N(0, 1.5²))",
              "crowdbt-domain": "crowdbt-domain (3 categories)",
              "contextual-bt": "contextual-bt (1 covariate)"}
    for name, r in rec["runs"].items():
        cells = f"| {labels[name]} | {r['wall_s']:.0f} / {r['cpu_s']:.0f} | "
        assert cells in text, cells


def test_replication_dask_table_is_its_record():
    """docs/replication.md's Dask-overhead table and its best-against-best figure say what
    ``replicate_dask.json`` holds."""
    rec = json.loads((ROOT / "bench" / "results" / "replicate_dask.json").read_text())
    text = (DOCS / "replication.md").read_text(encoding="utf-8")
    for i, r in enumerate(rec["runs"], 1):
        row = (f"| {i} | {r['pool_seconds']:.2f} s | {r['dask_seconds']:.2f} s | "
               f"{r['overhead']:+.1%} | {'yes' if r['identical_results'] else 'no'} |")
        assert row.replace("%", " %") in text, row
    assert f"Best against best: {rec['overhead_best']:+.1%}".replace("%", " %") in text

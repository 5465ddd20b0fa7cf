"""The approximation study's added rows (``bench_approx_study.py run --methods``): some
methods of the plan run on some subjects, against references already on disk, merged into
the record's subjects beside the rows measured before (each row keeps its own commit).

References: a folder of ``bench_approx_study.py``'s cache (``posterior.nc`` +
``reference.json``), or one written by the Gibbs/NUTS reference runs (``out/gibbs-nuts``:
a flat ``posterior.nc`` + ``record.json``). Of ``<subject>`` and ``<subject>-pymc`` the one
whose record matches :data:`bench_approx_study.REFERENCE_CONFIGS` (back-end, warm-up,
draws) is taken, else the first present; the record says which and how it differs. Its
trust is the record's gate (the draws are those the gate passed). The CPU seconds the goal
compares with are those of the reference the earlier study measured for the subject (its
record's ``reference.cpu_s``), kept so that every row of a subject is judged against the one
figure; the CPU seconds of the reference read here are beside them.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

#: Registry names of the methods added to the study when the registry has them.
NEW_METHODS = ("structured-vi", "coupled-vi", "flow-vi")


def _flat_to_tree(tree):
    """A ``posterior.nc`` written as one flat dataset, as a tree with its ``posterior``."""
    import xarray as xr

    if "posterior" in tree.children:
        return tree
    return xr.DataTree.from_dict({"posterior": tree.to_dataset()})


def config_differences(record: dict, cfg: dict) -> list[str]:
    """Where a reference's record differs from the study's configuration (back-end,
    warm-up, draws per chain; ``max_draws`` allows a record extended up to it)."""
    out = []
    if (record.get("backend") or "numpyro") != cfg["backend"]:
        out.append(f"backend {record.get('backend')} (study: {cfg['backend']})")
    if int(record.get("tune", -1)) != cfg["tune"]:
        out.append(f"tune {record.get('tune')} (study: {cfg['tune']})")
    draws, lo, hi = int(record.get("draws", -1)), cfg["draws"], cfg.get("max_draws", cfg["draws"])
    if not lo <= draws <= hi:
        out.append(f"draws {draws} (study: {lo}" + (f"–{hi})" if hi != lo else ")"))
    return out


def pick_reference(name: str, cache: Path, configs: dict) -> tuple[Path, list[str]]:
    """The folder of ``name``'s reference under ``cache`` and its differences from the
    study's configuration (module docstring)."""
    found = []
    for folder in (cache / name, cache / f"{name}-pymc"):
        if not (folder / "posterior.nc").is_file():
            continue
        info = folder / "reference.json"
        rec = json.loads((info if info.is_file() else folder / "record.json").read_text())
        diff = config_differences(rec, configs[name])
        if not diff:
            return folder, []
        found.append((folder, diff))
    if not found:
        raise FileNotFoundError(f"{cache}: no reference of {name}")
    return found[0]


def cached_reference(name: str, cache: Path, configs: dict, old: dict | None, log):
    """``(draws tree, reference record)`` of ``name`` from ``cache`` (module docstring);
    ``old`` is the subject's earlier record (its reference's CPU seconds are kept)."""
    from crowdrank.inference.nuts import read_nuts

    folder, diff = pick_reference(name, cache, configs)
    tree = _flat_to_tree(read_nuts(folder))
    info = folder / "reference.json"
    src = json.loads((info if info.is_file() else folder / "record.json").read_text())
    old_ref = (old or {}).get("reference") or {}
    rec = {k: src.get(k) for k in ("backend", "tune", "draws", "target_accept", "max_draws",
                                   "wall_s", "loadavg_before", "date", "commit")}
    rec["backend"] = rec["backend"] or "numpyro"
    rec["loadavg_before"] = rec["loadavg_before"] or src.get("load_before")
    rec.update(
        folder=str(folder), trusted=bool(src.get("trusted")), gate=src.get("gate"),
        computed_here=False, config_matches=not diff, config_differences=diff,
        cpu_s=old_ref.get("cpu_s", src.get("cpu_s")),
        cpu_s_source=("the earlier study's reference of this subject (its record)"
                      if old_ref.get("cpu_s") is not None else "this reference's record"),
        cpu_s_this_reference=src.get("cpu_s"), gradients=old_ref.get("gradients") or {},
        extras_wall_s=old_ref.get("extras_wall_s", 0.0))
    log(f"{name}: reference {folder} ({rec['gate']}; config "
        f"{'as the study' if not diff else 'differs: ' + '; '.join(diff)})")
    return tree, rec


def plan_rows(model: str, plan: list[tuple[str, dict]], labels: list[str]) -> tuple:
    """The plan's rows named by ``labels`` and the labels the plan lacks (a method not in
    the registry, or not fitting ``model``)."""
    have = dict(plan)
    return [(lab, have[lab]) for lab in labels if lab in have], \
        [lab for lab in labels if lab not in have]


def merge_run(study, names: list[str], labels: list[str], cache: Path, path: Path,
              argv: list[str]) -> dict:
    """Run ``labels`` of the plan on every subject of ``names`` and merge the rows into
    the record at ``path`` (rows of the same label replaced, the others kept with the
    commit of the record that measured them)."""
    from crowdrank.models.registry import get as get_model

    fid = study.fid

    def log(msg):
        print(f"[{datetime.now(UTC):%H:%M:%S}] {msg}", flush=True)

    when = study.stamp(argv, speed=False, script=study.__file__)
    rec = json.loads(path.read_text())
    for subj in rec["subjects"]:                # rows measured before keep their commit
        for m in subj["methods"]:
            m.setdefault("commit", rec.get("commit"))
            m.setdefault("date", rec.get("date"))
    run_rec = {k: when[k] for k in ("date", "commit", "command")}
    run_rec.update(subjects=[], methods=labels, absent={})
    rec.setdefault("merged_runs", []).append(run_rec)
    by_name = {s["name"]: s for s in rec["subjects"]}
    for name in names:
        model = fid.subjects()[name][1]
        rows, absent = plan_rows(model, study.method_plan(model), labels)
        if absent:
            run_rec["absent"][name] = absent
            log(f"{name}: not in the plan (registry or model): {absent}")
        if not rows:
            continue
        old = by_name.get(name)
        tree, ref_rec = cached_reference(name, cache, study.REFERENCE_CONFIGS, old, log)
        load, _, _ = fid.subjects()[name]
        d, pri = load()
        pri = get_model(model).worker_priors(pri, d)
        ref = fid.Reference(tree)
        subj = old or {"name": name, "model": model, "status": "done", "methods": []}
        subj.setdefault("data", d.summary())
        subj.setdefault("reference", ref_rec)
        subj.setdefault("trusted", ref_rec["trusted"])
        # every reference an added run compared with, by folder: the rows of earlier runs
        # keep naming theirs
        refs = subj.setdefault("added_references", {})
        prev = subj.get("reference_for_added_rows")
        if prev and prev.get("folder") not in refs:
            refs[prev["folder"]] = prev
        refs[ref_rec["folder"]] = ref_rec
        subj["reference_for_added_rows"] = ref_rec
        if old is None:
            rec["subjects"].append(subj)
            by_name[name] = subj
        for lab, opts in rows:
            try:
                row = study.run_method(d, model, pri, lab, opts, ref, log)
            except Exception as exc:  # noqa: BLE001  (a failed method is a result)
                row = {"label": lab, "options": opts, "inside_box": None,
                       "box_distance": None,
                       "status": f"failed: {type(exc).__name__}: {str(exc)[:300]}"}
                log(f"  {lab}: {row['status']}")
            row.update(commit=when["commit"], date=fid.env()["date"],
                       reference_cpu_s=ref_rec["cpu_s"], reference_folder=ref_rec["folder"])
            subj["methods"] = [m for m in subj["methods"] if m["label"] != lab] + [row]
            study._write(rec, path)
        run_rec["subjects"].append(name)
        study._write(rec, path)
    run_rec["finished"] = fid.env()["date"]
    study._write(rec, path)
    return rec

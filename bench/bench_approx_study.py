"""The study of the PPLs' approximations (issue "PPL approximations", item 4): every method of
the registry that fits the model, on the subjects of ``bench/bench_fidelity.py``, against
their trusted NUTS references, with its cost.

Per subject (in this order: default COUPLE and CrowdBT, the four medium worker types, then
BabyFace and read-level) the NUTS reference is read from the fidelity cache
(``out/fidelity/<subject>``) or computed there with the configuration docs/fidelity.md
trusted for it (:data:`REFERENCE_CONFIGS`); then each method runs on the same data and
priors: the online one-pass update and undamped EP (the fidelity study's rows, for
context), ``advi``, ``fullrank-advi``, ``lowrank-advi``, ``pathfinder`` and ``laplace-ppl``
(NumPyro back-end, the registry's default options). Per method: the box figures (median
|z| and sd ratio on centred scores and on ``E[η_w^1]``, as ``goals()`` of
bench_fidelity.py reads them), PSIS k̂ (ArviZ, [Yao18]; [Vehtari24]), process CPU seconds
(``getrusage`` of this process and its children: JAX's threads and compilation included),
gradient evaluations where the method reports them, and the reference's CPU seconds.

The centred and η¹ figures of a method that returns draws are computed from its draws
(``λ_i − mean(λ)`` per draw), so a correlated approximation (full-rank, low-rank, Laplace,
Pathfinder) is not read as if its marginals were independent; the online and EP rows use
their closed-form independent Gaussians (``compare_variant``), which is their density.

Partial results are written after every method; a subject or method that did not run
before ``--stop-at`` (UTC) is recorded as not run, never filled in::

    python bench/bench_approx_study.py run [--only NAME,...] [--stop-at 05:45]
        [--last-reference-at 05:20] [--resume]
    python bench/bench_approx_study.py close    # mark what a killed run left as not run
    python bench/bench_approx_study.py render   # figures + the section of docs/fidelity.md

Writes ``bench/results/approx_study.json``; ``render`` draws
``docs/figures/approx_frontier_<subject>.png`` and the ``approx-study`` section of
docs/fidelity.md (also run by ``make results``).
"""


from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench" / "tools"))
from stamp import stamp

sys.path.insert(0, str(ROOT / "bench"))

import bench_fidelity as fid

# the references and rows, and the page: their own modules, re-exported here (the other
# benches and the tests read them as this script's)
from approx_study_render import (  # noqa: F401
    COST_GOAL,
    COST_GOAL_TENTH,
    END,
    FIGURES,
    INTRO,
    KHAT_OK,
    RESULTS,
    START,
    advice,
    advice_section,
    frontier_figure,
    khat_section,
    khat_table,
    render,
    render_section,
    subject_section,
)
from approx_study_rows import (  # noqa: F401
    PSIS_DRAWS,
    PSIS_POOL,
    REFERENCE_CONFIGS,
    SD_BOX,
    Z_BOX,
    aligned_draws,
    box_figures,
    compare_draws,
    cpu_seconds,
    draw_figures,
    gradient_evals,
    nuts_gradients,
    psis_figures,
    reference,
    run_method,
)

SUBJECTS = ("default-couple", "default-crowdbt", "medium-expert", "medium-amateur",
            "medium-spammer", "medium-malicious", "babyface-couple", "readlevel-couple",
            "readlevel-crowdbt")
PPL_METHODS = ("advi", "fullrank-advi", "lowrank-advi", "pathfinder", "laplace-ppl")
CONTEXT = ("one-pass", "ep5 damping=0")     # labels of bench_fidelity.variants()
#: undamped EP run to convergence (tol 1e-3) or 200 passes: on BabyFace EP does not converge
#: and its centred means still move after the 10 passes of its default
EP_LONG = ("ep200 damping=0", {"method": "ep", "ep_passes": "200", "damping": 0.0})
#: EP with exact worker moments: EP's score part, and the exact one (labels, options)
EP_EXACT = (("ep-exact", {"method": "ep-exact"}),
            ("ep-exact scores=exact", {"method": "ep-exact", "scores": "exact"}),
            ("ep-exact workers=joint", {"method": "ep-exact", "workers": "joint"}),
            ("ep-exact workers=joint scores=exact",
             {"method": "ep-exact", "workers": "joint", "scores": "exact"}),
            ("ep-exact workers=joint lam=plugin",
             {"method": "ep-exact", "workers": "joint", "lam": "plugin"}),
            # run to convergence (tol 1e-3) or 200 passes, as ep200 (BabyFace's EP
            # converges slowly)
            ("ep-exact passes=200", {"method": "ep-exact", "ep_passes": "200"}),
            # importance-corrected: the fit's factorised density resampled by PSIS
            # against the exact log joint (PSIS_POOL draws, PSIS_DRAWS kept; the VI
            # methods' --psis defaults), k̂ the pool's
            ("ep-exact workers=joint psis",
             {"method": "ep-exact", "workers": "joint", "psis": True}))


def method_plan(model: str) -> list[tuple[str, dict]]:
    """(label, fit_variant options) of every method studied on ``model``."""
    from approx_study_merge import NEW_METHODS

    from crowdrank.inference.methods import REGISTRY
    from crowdrank.inference.methods import get as get_method

    ctx = dict(fid.variants(model))
    out = [(lab, ctx[lab]) for lab in CONTEXT if lab in ctx] + [EP_LONG]
    out += [(m, {"method": m}) for m in PPL_METHODS if get_method(m).fits(model)]
    # the exact score part is COUPLE's (CrowdBT's scores are the quadrature's either way)
    out += [(lab, o) for lab, o in EP_EXACT if get_method("ep-exact").fits(model)
            and (model == "couple" or ("scores" not in o and "workers" not in o))]
    # the structured and flow guides, where the registry has them
    return out + [(m, {"method": m}) for m in NEW_METHODS
                  if m in REGISTRY and REGISTRY[m].fits(model)]



# ------------------------------------------------------------------ the study
def _write(rec: dict, path: Path) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(rec, indent=1, allow_nan=False) + "\n")
    tmp.replace(path)


def _stop_time(stop_at: str | None) -> datetime | None:
    if not stop_at:
        return None
    hh, mm = (int(x) for x in stop_at.split(":"))
    now = datetime.now(UTC)
    return now.replace(hour=hh, minute=mm, second=0, microsecond=0)


def close_record(rec: dict, why: str = "stopped at the deadline") -> dict:
    """Mark what an interrupted run left unfinished: a subject still running (its
    reference or a method in flight) and every method not run."""
    for subj in rec["subjects"]:
        for m in subj["methods"]:
            if m.get("status") == "not run":
                m["status"] = f"not run: {why}"
        if subj["status"] == "running" and "reference" not in subj:
            subj["status"] = f"not run: {why} before its NUTS reference finished"
        elif subj["status"] == "running":
            n = sum(m.get("status") == "done" for m in subj["methods"])
            subj["status"] = f"partial ({n} of {len(subj['methods'])} methods; {why})"
        elif subj["status"] == "not run":
            subj["status"] = f"not run: {why}"
    return rec


def run(names: list[str], cache: Path, stop_at: str | None, path: Path, argv: list[str],
        last_reference: str | None = None, resume: bool = False,
        skip: dict | None = None) -> dict:
    """Every subject of ``names`` in turn (module docstring); the record is rewritten after
    each method, and what the deadline left out is marked ``not run``. No NUTS reference
    starts sampling after ``last_reference`` (UTC HH:MM); ``resume`` keeps the subjects the
    record at ``path`` holds as done (with their own dates and loads); ``skip`` maps
    ``(subject, method label)`` to the reason it is not run (``--skip``, in the record's
    command)."""
    from crowdrank.models.registry import get as get_model

    stop, last_ref = _stop_time(stop_at), _stop_time(last_reference)
    old = json.loads(path.read_text()) if resume and path.is_file() else {"subjects": []}
    kept = {s["name"]: s for s in old["subjects"] if s.get("status") == "done"}
    for n, s in kept.items():           # a record written before extras_wall_s existed
        if "extras_wall_s" in s["reference"]:
            continue
        t = json.loads((cache / n / "reference.json").read_text()).get("timings") or {}
        s["reference"]["extras_wall_s"] = round(
            sum(t.get(k, 0.0) for k in ("pointwise", "predictive")), 1)

    def log(msg):
        print(f"[{datetime.now(UTC):%H:%M:%S}] {msg}", flush=True)

    def late() -> bool:
        return stop is not None and datetime.now(UTC) >= stop

    when = stamp(argv, speed=False, script=__file__)
    rec = {"bench": "approx_study", **{k: when[k] for k in ("date", "commit", "command")},
           "stop_at_utc": stop_at, "load_before": [round(x, 2) for x in os.getloadavg()],
           "env": fid.env(), "box": {"abs_z": Z_BOX, "sd_ratio": list(SD_BOX),
                                     "on": ["centred", "eta1"]},
           "subjects": [kept.get(n) or {
               "name": n, "model": fid.subjects()[n][1], "status": "not run",
               "methods": [{"label": lab, "options": o, "status": "not run"}
                           for lab, o in method_plan(fid.subjects()[n][1])]}
                        for n in names]}
    if kept:
        rec["resumed"] = {k: old.get(k) for k in ("date", "commit", "command")} | {
            "kept": sorted(kept)}
    _write(rec, path)
    try:
        for subj in rec["subjects"]:
            name, model = subj["name"], subj["model"]
            if name in kept:
                continue
            if late():
                subj["status"] = "not run: the study's deadline came first"
                continue
            if (last_ref is not None and datetime.now(UTC) >= last_ref
                    and not (cache / name / "posterior.nc").is_file()):
                subj["status"] = (f"not run: its NUTS reference would have started after "
                                  f"{last_reference} UTC, too late to end by the deadline")
                continue
            subj["status"] = "running"
            try:
                idata, subj["reference"] = reference(name, cache, log)
            except Exception as exc:  # noqa: BLE001  (recorded; the next subject is tried)
                # PyMC turns the hard stop's SIGINT into its own error: said as the stop
                subj["status"] = ("not run: stopped at the deadline before its NUTS "
                                  "reference finished" if late() else
                                  f"not run: the reference failed ({type(exc).__name__}: "
                                  f"{exc})")
                _write(rec, path)
                continue
            subj["trusted"] = subj["reference"]["trusted"]
            load, _, _ = fid.subjects()[name]
            d, pri = load()
            pri = get_model(model).worker_priors(pri, d)
            subj["data"] = d.summary()
            ref = fid.Reference(idata)
            for i, m in enumerate(subj["methods"]):
                if late():
                    m["status"] = "not run: the study's deadline came first"
                    continue
                if (name, m["label"]) in (skip or {}):
                    m["status"] = f"not run: skipped ({skip[name, m['label']]})"
                    log(f"  {m['label']}: {m['status']}")
                    _write(rec, path)
                    continue
                try:
                    subj["methods"][i] = run_method(d, model, pri, m["label"], m["options"],
                                                    ref, log)
                except Exception as exc:  # noqa: BLE001  (a failed method is a result)
                    m["status"] = f"failed: {type(exc).__name__}: {str(exc)[:300]}"
                    log(f"  {m['label']}: {m['status']}")
                subj["methods"][i]["reference_cpu_s"] = subj["reference"]["cpu_s"]
                _write(rec, path)
            ran = [m for m in subj["methods"] if m["status"] == "done"]
            subj["status"] = ("done" if len(ran) == len(subj["methods"])
                              else f"partial ({len(ran)} of {len(subj['methods'])} methods)")
            subj["env"] = fid.env()
            _write(rec, path)
    except KeyboardInterrupt:        # the hard stop (timeout --signal=INT) came first
        close_record(rec)
        _write(rec, path)
        raise
    rec["load_after"] = [round(x, 2) for x in os.getloadavg()]
    rec["finished"] = fid.env()["date"]
    _write(rec, path)
    return rec



def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", choices=("run", "close", "render"))
    ap.add_argument("--only", default=None, help="comma-separated subjects, in this order")
    ap.add_argument("--cache", default=str(fid.CACHE), help="folder of the NUTS references")
    ap.add_argument("--stop-at", default=None,
                    help="UTC HH:MM after which no new subject or method starts")
    ap.add_argument("--last-reference-at", default=None,
                    help="UTC HH:MM after which no NUTS reference starts sampling")
    ap.add_argument("--resume", action="store_true",
                    help="keep the subjects the record already holds as done")
    ap.add_argument("--skip", action="append", default=[], metavar="SUBJECT:METHOD",
                    help="do not run this method on this subject (repeatable); recorded "
                    "as not run with --skip-why")
    ap.add_argument("--skip-why", default="--skip", help="the reason --skip records")
    ap.add_argument("--out", default=str(RESULTS))
    ap.add_argument("--methods", default=None, metavar="LABEL,...",
                    help="run only these labels of the plan and merge their rows into the "
                    "record's subjects, beside the rows measured before "
                    "(bench/approx_study_merge.py; --cache may be out/gibbs-nuts)")
    args = ap.parse_args(argv)
    skip = {tuple(x.split(":", 1)): args.skip_why for x in args.skip}
    names = list(SUBJECTS) if args.only is None else args.only.split(",")
    bad = [n for n in names if n not in SUBJECTS]
    if bad:
        ap.error(f"unknown subject(s) {bad}; expected {list(SUBJECTS)}")
    if args.step == "run" and args.methods:
        from approx_study_merge import merge_run
        merge_run(sys.modules[__name__], names, args.methods.split(","), Path(args.cache),
                  Path(args.out), argv)
        return 0
    if args.step == "run":
        run(names, Path(args.cache), args.stop_at, Path(args.out), argv,
            args.last_reference_at, args.resume, skip)
        return 0
    if args.step == "close":          # a run stopped from outside: say what it left
        rec = close_record(json.loads(Path(args.out).read_text()))
        rec.setdefault("stopped", fid.env()["date"])
        _write(rec, Path(args.out))
        return 0
    print(render(Path(args.out)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

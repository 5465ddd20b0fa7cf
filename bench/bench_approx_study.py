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
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench" / "tools"))
from stamp import stamp

sys.path.insert(0, str(ROOT / "bench"))

import bench_fidelity as fid
import numpy as np
from fidelity_pages import write_block

RESULTS = ROOT / "bench" / "results" / "approx_study.json"
SUBJECTS = ("default-couple", "default-crowdbt", "medium-expert", "medium-amateur",
            "medium-spammer", "medium-malicious", "babyface-couple", "readlevel-couple",
            "readlevel-crowdbt")
#: The NUTS configuration docs/fidelity.md trusted per subject (4 chains each, warm-started
#: from the online posterior); BabyFace and read-level keep the fidelity study's settings,
#: which did not pass the gate there.
REFERENCE_CONFIGS = {
    "default-couple": {"backend": "numpyro", "tune": 500, "draws": 1000},
    "default-crowdbt": {"backend": "numpyro", "tune": 500, "draws": 1000},
    **{f"medium-{t}": {"backend": "pymc", "tune": 500, "draws": 2000, "target_accept": 0.8,
                       "chain_method": "sequential"}
       for t in ("expert", "amateur", "spammer")},
    # sampling extended in rounds of 1,500 draws until the gate passes (at most 9,000)
    "medium-malicious": {"backend": "numpyro", "tune": 500, "draws": 1500, "max_draws": 9000,
                         "target_accept": 0.8},
    "babyface-couple": {"backend": "numpyro", "tune": 250, "draws": 500},
    "readlevel-couple": {"backend": "numpyro", "tune": 250, "draws": 500},
    "readlevel-crowdbt": {"backend": "numpyro", "tune": 250, "draws": 500},
}
# the study reads the posterior draws only: no pointwise log-likelihood, no predictive
# draws (PyMC draws the latter in object mode, minutes that are not the sampler's cost)
for _cfg in REFERENCE_CONFIGS.values():
    _cfg.update(pointwise=False, predictive=False)
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
#: the pool and the resample of a ``psis`` row (the VI methods' ``--pool``, ``--draws``)
PSIS_POOL, PSIS_DRAWS = 4000, 1000
Z_BOX, SD_BOX = 0.1, (0.9, 1.1)


def cpu_seconds() -> float:
    """CPU seconds of this process (every thread) and of its finished children."""
    import resource

    me, ch = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return me.ru_utime + me.ru_stime + ch.ru_utime + ch.ru_stime


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


# ------------------------------------------------------------------ the reference
def nuts_gradients(idata, timings: dict) -> dict:
    """Leapfrog steps (one gradient each): warm-up where the sampler reports it, sampling
    from ``sample_stats``."""
    ss = idata["sample_stats"] if "sample_stats" in idata.children else None
    sampling = None
    for key in ("n_steps", "num_steps", "tree_size"):
        if ss is not None and key in ss:
            sampling = float(np.asarray(ss[key].values, float).sum())
            break
    warm = timings.get("warmup_gradients")
    return {"warmup": None if warm is None else float(warm), "sampling": sampling,
            "total": None if warm is None or sampling is None else float(warm) + sampling}


def reference(name: str, cache: Path, log) -> tuple[object, dict]:
    """The subject's NUTS draws and its record: read from the cache, else sampled here with
    :data:`REFERENCE_CONFIGS` (and kept in the cache for bench_fidelity.py)."""
    from crowdrank.inference.nuts import configure_host_devices
    configure_host_devices()
    from crowdrank.inference.gate import check
    from crowdrank.inference.nuts import fit_nuts, read_nuts, write_nuts
    from crowdrank.inference.online import fit_online
    from crowdrank.models.registry import get as get_model

    out = cache / name
    computed = False
    if not (out / "posterior.nc").is_file():
        load, model, _ = fid.subjects()[name]
        d, pri = load()
        pri = get_model(model).worker_priors(pri, d)
        cfg = REFERENCE_CONFIGS[name]
        on = fit_online(d, model, pri, progress=False)
        load0 = [round(x, 2) for x in os.getloadavg()]
        log(f"{name}: NUTS {cfg} at load {load0[0]}")
        t, c = time.perf_counter(), cpu_seconds()
        r = fit_nuts(d, model, pri, chains=4, seed=0, progress=False, approx=on, **cfg)
        wall, cpu = time.perf_counter() - t, cpu_seconds() - c
        write_nuts(r, out)
        (out / "reference.json").write_text(json.dumps(
            {"name": name, "model": model, **cfg, "draws": int(r.idata.attrs["draws"]),
             "trusted": bool(r.gate.trusted), "gate": r.gate.verdict(),
             "wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "loadavg_before": load0,
             "timings": {k: float(v) for k, v in r.timings.items()
                         if isinstance(v, (int, float))},
             "saved_by": "bench/bench_approx_study.py", **fid.env()}, indent=1))
        computed = True
    idata = read_nuts(out)
    info = json.loads((out / "reference.json").read_text())
    gate = check(idata)
    rec = {k: info.get(k) for k in ("backend", "tune", "draws", "target_accept", "max_draws",
                                    "wall_s", "cpu_s", "loadavg_before", "date")}
    rec["backend"] = rec["backend"] or "numpyro"
    rec.update(trusted=bool(gate.trusted), gate=gate.verdict(), computed_here=computed,
               cpu_s_kind=("getrusage, this process and its children" if computed
                           or info.get("saved_by") else "process_time of the sampling process"),
               gradients=nuts_gradients(idata, info.get("timings") or {}),
               # wall seconds of the pointwise log-likelihood and predictive draws inside
               # the CPU s (a reference sampled with them on)
               extras_wall_s=round(sum((info.get("timings") or {}).get(k, 0.0)
                                       for k in ("pointwise", "predictive")), 1))
    log(f"{name}: reference {rec['gate']} ({rec['cpu_s']} CPU s)")
    return idata, rec


# ------------------------------------------------------------------ one method
def _box_part(r: dict) -> dict:
    return {k: (None if r.get(k) is None else round(float(r[k]), 4))
            for k in ("median_abs_z", "median_sd_ratio", "mean_coverage_90")}


def aligned_draws(post, ref):
    """A draw-based posterior's ``λ`` draws ``(S, L)`` and ``η^1`` draws ``(S, W)`` (or
    ``None``), in the reference's item and worker order."""
    lam_da = post.tree["posterior"]["lambda"]
    items = [str(i) for i in lam_da["item"].values]
    lam = np.asarray(lam_da.transpose(..., "item").values, float).reshape(-1, len(items))
    lam = lam[:, [items.index(i) for i in ref.items]]
    if ref.eta1 is None or "eta" not in post.tree["posterior"]:
        return lam, None
    eda = post.tree["posterior"]["eta"]
    if "stage" in eda.dims:
        eda = eda.isel(stage=0)
    ws = [str(w) for w in eda["worker"].values]
    e = np.asarray(eda.transpose(..., "worker").values, float).reshape(-1, len(ws))
    return lam, e[:, [ws.index(w) for w in ref.workers]]


def compare_draws(post, ref) -> dict:
    """Raw, centred and ``η^1`` figures of a draw-based posterior, from its draws."""
    return draw_figures(*aligned_draws(post, ref), ref)


def draw_figures(lam, e, ref) -> dict:
    """Raw, centred and ``η^1`` figures of draws ``lam`` ``(S, L)`` and ``e`` ``(S, W)``
    (or ``None``) in the reference's item and worker order."""
    from crowdrank.validation import metrics as M

    cen = lam - lam.mean(1, keepdims=True)

    def fig(x, target):
        r = M.parameter_metrics("normal", x.mean(0), x.std(0, ddof=1), *target)
        return fid._agg(r)
    out = {"raw": fig(lam, ref.raw), "centred": fig(cen, ref.centred), "eta1": {}}
    if e is not None:
        out["eta1"] = fig(e, ref.eta1)
    return out


def box_figures(res: dict) -> dict:
    """Inside the box (centred and η¹: |z| ≤ 0.1, sd ratio in [0.9, 1.1]) and the distance
    to it: the largest excess of any of the four figures over its bound (0 inside)."""
    parts = [res["centred"]] + ([res["eta1"]] if res.get("eta1") else [])
    excess = []
    for p in parts:
        z, s = p.get("median_abs_z"), p.get("median_sd_ratio")
        if z is None or s is None:
            return {"inside_box": None, "box_distance": None}
        excess += [z - Z_BOX, SD_BOX[0] - s, s - SD_BOX[1]]
    dist = max(0.0, *excess)
    return {"inside_box": bool(dist == 0.0), "box_distance": round(float(dist), 4)}


def psis_figures(post, d, model, pri, ref) -> tuple[dict, dict]:
    """The figures of ``post``'s factorised density importance-resampled against the exact
    log joint (:func:`~crowdrank.inference.approx.psis.online_log_ratios` draws the pool and
    scores it, :func:`~crowdrank.inference.approx.psis.resample_pool` resamples it, as the
    VI methods' ``--psis``), and the pool's k̂."""
    from crowdrank.inference.approx.psis import label, online_log_ratios, resample_pool

    r = online_log_ratios(post, d, model, pri, n=PSIS_POOL, seed=0)
    khat, idx = resample_pool(r["log_p"], r["log_q"], PSIS_DRAWS, seed=1)
    items = [str(i) for i in d.items]               # the pool is in the data's order
    lam = r["lambda"][idx][:, [items.index(i) for i in ref.items]]
    e = None
    if ref.eta1 is not None and r["eta"] is not None:
        ws = [str(w) for w in d.workers]
        e = r["eta"][idx][:, [ws.index(w) for w in ref.workers], 0]
    return draw_figures(lam, e, ref), {"psis_khat": khat, "psis_label": label(khat)}


def gradient_evals(post, opts: dict) -> dict:
    """Gradient evaluations of log p as far as the method reports them: ADVI's are its
    steps × particles (one reparametrised draw per particle per Adam step); L-BFGS fits
    report iterations only, a lower bound (line-search evaluations are not counted, nor
    Laplace's Hessian); the online and EP updates take no gradients of log p."""
    d = post.diagnostics or {}
    m = opts.get("method", "online")
    if m in ("online", "ep", "ep-exact"):
        return {"grad_evals": 0, "grad_evals_kind": "none (closed-form updates)"}
    if m.endswith("advi"):
        if d.get("steps") is None:
            return {"grad_evals": None, "grad_evals_kind": "not reported"}
        return {"grad_evals": int(d["steps"]) * int(post.options.get("particles", 1)),
                "grad_evals_kind": "exact (steps × particles)"}
    steps = d.get("steps_per_path") or ([d["steps"]] if d.get("steps") is not None else None)
    if steps is None:
        return {"grad_evals": None, "grad_evals_kind": "not reported"}
    what = ("L-BFGS iterations of all paths; line searches and the ELBO's draws not "
            "counted" if m == "pathfinder" else
            "L-BFGS iterations; line searches and the Hessian not counted")
    return {"grad_evals": int(sum(steps)), "grad_evals_kind": f"lower bound ({what})"}


def run_method(d, model, pri, label, opts, ref, log) -> dict:
    from crowdrank.inference.approx.psis import posterior_khat
    from crowdrank.validation.pipelines.variants import fit_variant

    load0 = round(os.getloadavg()[0], 2)
    fit_opts = {k: v for k, v in opts.items() if k != "psis"}
    t, c = time.perf_counter(), cpu_seconds()
    post = fit_variant(d, model, pri, fit_opts, progress=False)
    if opts.get("psis"):
        res, k = psis_figures(post, d, model, pri, ref)
    cpu, wall = cpu_seconds() - c, time.perf_counter() - t
    if not opts.get("psis"):
        res = (fid.compare_variant(post, ref) if post.method in ("online", "ep", "ep-exact")
               else compare_draws(post, ref))
        k = posterior_khat(post, d, model, pri, seed=0)
    diag = post.diagnostics or {}
    row = {"label": label, "options": opts, "status": "done", "cpu_s": round(cpu, 4),
           "wall_s": round(wall, 2), "load_1min": load0,
           **gradient_evals(post, opts),
           "converged": diag.get("converged"), "steps": diag.get("steps"),
           "khat": None if k["psis_khat"] is None else round(float(k["psis_khat"]), 3),
           "khat_label": k["psis_label"],
           "centred": _box_part(res["centred"]), "eta1": _box_part(res.get("eta1") or {}),
           "raw": _box_part(res["raw"])}
    if not res.get("eta1"):
        row["eta1"] = {}
    row.update(box_figures(row))
    log(f"  {label}: centred |z| {row['centred']['median_abs_z']} sd "
        f"{row['centred']['median_sd_ratio']}; eta1 {row['eta1'].get('median_abs_z')}; "
        f"k̂ {row['khat']}; {row['cpu_s']} CPU s; box {row['inside_box']}")
    return row


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


# ------------------------------------------------------------------ what the record shows
START, END = "<!-- approx-study:start -->", "<!-- approx-study:end -->"
FIGURES = ROOT / "docs" / "figures"
KHAT_OK = 0.7
COST_GOAL = 5.0          # at most 1/5 of the reference's CPU seconds
COST_GOAL_TENTH = 10.0   # the "beyond Gaussian" goal: inside the box at ≤ 1/10 of it


def _done(subj: dict) -> list[dict]:
    return [m for m in subj["methods"] if m.get("status") == "done"]


def khat_table(rec: dict) -> dict:
    """The 2×2 counts over (subject, method) rows with a trusted reference and a k̂:
    ``{(khat_ok, inside): n}`` as ``"ok_in"``, ``"ok_out"``, ``"bad_in"``, ``"bad_out"``,
    and the rows left out (untrusted reference, no k̂)."""
    out = {"ok_in": 0, "ok_out": 0, "bad_in": 0, "bad_out": 0, "untrusted": 0, "no_khat": 0}
    for subj in rec["subjects"]:
        for m in _done(subj):
            if not subj.get("trusted"):
                out["untrusted"] += 1
            elif m.get("khat") is None or m.get("inside_box") is None:
                out["no_khat"] += 1
            else:
                key = ("ok" if m["khat"] <= KHAT_OK else "bad") + \
                      ("_in" if m["inside_box"] else "_out")
                out[key] += 1
    return out


def advice(subj: dict) -> dict:
    """Per subject: the cheapest method inside the box (CPU s), whether it costs at most
    1/5 of the reference's, and the method closest to the box."""
    done = _done(subj)
    ref = (subj.get("reference") or {}).get("cpu_s")
    inside = sorted((m for m in done if m.get("inside_box")), key=lambda m: m["cpu_s"])
    closest = min(done, key=lambda m: (m["box_distance"], m["cpu_s"]), default=None)
    best = inside[0] if inside else None
    return {"best": best, "closest": closest, "reference_cpu_s": ref,
            "goal": bool(best and ref and best["cpu_s"] * COST_GOAL <= ref),
            "goal_tenth": bool(ref and any(m["cpu_s"] * COST_GOAL_TENTH <= ref
                                           for m in inside)),
            "within_cost": [m["label"] for m in inside
                            if ref and m["cpu_s"] * COST_GOAL <= ref]}


def _f(x, nd=2) -> str:
    return "—" if x is None else f"{x:.{nd}f}"


def _ref_line(subj: dict) -> str:
    r = subj["reference"]
    cfg = f"{r['backend']}, 4 chains × ({r['tune']} + {r['draws']})"
    g = r.get("gradients") or {}
    grads = "" if g.get("sampling") is None else \
        f", {g['sampling']:,.0f} leapfrog steps in sampling" + \
        ("" if g.get("warmup") is None else f" + {g['warmup']:,.0f} in warm-up")
    trust = "trusted" if subj["trusted"] else "**NOT trusted**: its rows are not a verdict"
    by = ("this study" if r.get("computed_here")
          else "bench/bench_fidelity.py reference into the same cache")
    load = (r.get("loadavg_before") or ["?"])[0]
    extra = ("" if not r.get("extras_wall_s") else
             f" (of which {r['extras_wall_s']} s wall the pointwise log-likelihood and "
             "predictive draws, not sampling)")
    return (f"Reference: {cfg}, {trust} ({r['gate']}); {r['cpu_s']} CPU s, {r['wall_s']} s "
            f"wall{extra}{grads}; sampled by {by} ({r.get('date')}, load {load}).")


def subject_section(subj: dict) -> list[str]:
    d = subj.get("data") or {}
    head = f"### {subj['name']} ({subj['model']}"
    head += (f"; {d.get('items', d.get('n_items'))} items, {d.get('workers', d.get('n_workers'))}"
             f" workers, {d.get('rankings', d.get('n_rankings'))} rankings)" if d else ")")
    if "reference" not in subj:
        return [head, "", f"{subj['status']}: no row of this subject was measured.", ""]
    out = [head, "", _ref_line(subj), ""]
    adds = list((subj.get("added_references") or {}).values()) or \
        [a for a in [subj.get("reference_for_added_rows")] if a]
    for add in adds:
        cfg = (f"{add['backend']}, 4 chains × ({add['tune']} + {add['draws']})")
        diff = ("the study's configuration" if add.get("config_matches") else
                "differs from the study's: " + "; ".join(add.get("config_differences", [])))
        labels = sorted({m["label"] for m in subj["methods"]
                         if m.get("reference_folder") == add["folder"]})
        if not labels:
            continue
        out += [(f"Rows {', '.join(labels)} compare with `{add['folder']}` ({cfg}, "
                 f"{'trusted' if add['trusted'] else 'NOT trusted'}: {add['gate']}; {diff}; "
                 f"sampled {add.get('date')} at {add.get('commit')}, "
                 f"{add.get('cpu_s_this_reference')} CPU s); × reference uses "
                 f"{add['cpu_s']} CPU s ({add.get('cpu_s_source')})."), ""]
    if adds:
        out += ["The other rows compare with the reference above, a different run of NUTS.",
                ""]
    if (FIGURES / f"approx_frontier_{subj['name']}.png").is_file():
        out += [(f"![accuracy-cost frontier, {subj['name']}]"
                f"(figures/approx_frontier_{subj['name']}.png)"), ""]
    out += [("| method | centred \\|z\\| | centred sd ratio | η¹ \\|z\\| | η¹ sd ratio | "
            "k̂ | in the box | distance | CPU s | × reference | gradients | converged (steps) |"),
            "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    ref = subj["reference"]["cpu_s"]
    for m in subj["methods"]:
        if m.get("status") != "done":
            out.append(f"| {m['label']} | {m['status']} |" + " |" * 10)
            continue
        c, e = m["centred"], m["eta1"] or {}
        g = m.get("grad_evals")
        gs = "—" if g is None else (f"{g:,}" + (" (≥)" if "lower" in m["grad_evals_kind"]
                                                 else ""))
        conv = "—" if m.get("converged") is None else \
            f"{'yes' if m['converged'] else 'no'} ({m.get('steps')})"
        k = m.get("khat")
        out.append(f"| {m['label']} | {_f(c['median_abs_z'])} | {_f(c['median_sd_ratio'])} | "
                   f"{_f(e.get('median_abs_z'))} | {_f(e.get('median_sd_ratio'))} | "
                   f"{'n/a' if k is None else f'{k:.2f}'} | "
                   f"{'**yes**' if m['inside_box'] else 'no'} | {_f(m['box_distance'])} | "
                   f"{m['cpu_s']:.1f} | {_f(m['cpu_s'] / ref if ref else None)} | {gs} | "
                   f"{conv} |")
    return out + [""]


def advice_section(rec: dict) -> list[str]:
    out = ["### Which approximation should I use", "",
           ("Per subject, from the rows above: the cheapest method inside the box, whether it "
           f"costs at most 1/{COST_GOAL:.0f} of the trusted reference's CPU seconds (the "
           f"first study's goal) and whether one inside costs at most 1/{COST_GOAL_TENTH:.0f} "
           "(the goal of the structured, flow and exact-moment methods), and the method "
           "closest to the box."), "",
           ("| subject | reference | cheapest inside the box (CPU s) | ≤ 1/5 of NUTS | "
           "≤ 1/10 of NUTS | closest to the box (distance, CPU s) | k̂ ≤ 0.7 |"),
           "|---|---|---|---|---|---|---|"]
    for subj in rec["subjects"]:
        if "reference" not in subj:
            out.append(f"| {subj['name']} | {subj['status']} | | | | | |")
            continue
        a = advice(subj)
        b, c = a["best"], a["closest"]
        ok = [m["label"] for m in _done(subj) if m.get("khat") is not None
              and m["khat"] <= KHAT_OK]
        out.append(
            f"| {subj['name']} | {'trusted' if subj['trusted'] else 'NOT trusted'}, "
            f"{a['reference_cpu_s']} CPU s | "
            f"{'none' if b is None else f'{b['label']} ({b['cpu_s']:.1f})'} | "
            f"{'yes' if a['goal'] else 'no'} | {'yes' if a['goal_tenth'] else 'no'} | "
            f"{'—' if c is None else f'{c['label']} ({c['box_distance']:.2f}, {c['cpu_s']:.1f})'}"
            f" | {', '.join(ok) or 'none'} |")
    return out + [""]


def khat_section(rec: dict) -> list[str]:
    t = khat_table(rec)
    n_ok, n_bad = t["ok_in"] + t["ok_out"], t["bad_in"] + t["bad_out"]
    out = ["### Does k̂ ≤ 0.7 predict \"inside the box\"?", "",
           ("Every (subject, method) row measured against a trusted reference that has a k̂ "
           f"({n_ok + n_bad} rows; {t['untrusted']} rows of untrusted references and "
           f"{t['no_khat']} without a k̂ left out)."), "",
           "| | inside the box | outside |", "|---|---|---|",
           f"| k̂ ≤ 0.7 | {t['ok_in']} | {t['ok_out']} |",
           f"| k̂ > 0.7 | {t['bad_in']} | {t['bad_out']} |", ""]
    if n_ok + n_bad:
        out.append(f"Inside the box: {t['ok_in']} of {n_ok} rows with k̂ ≤ 0.7, "
                   f"{t['bad_in']} of {n_bad} with k̂ > 0.7.")
        out.append("")
    return out


INTRO = """## The study of the PPL approximations (`bench/bench_approx_study.py`)

Every method of the registry that fits the model, with the same priors and data, against
the subject's NUTS reference (the configuration trusted above; sampled again on this
machine): the online one-pass update and undamped EP for context, then the PPLs' own
`advi`, `fullrank-advi`, `lowrank-advi`, `pathfinder` and `laplace-ppl` (NumPyro, the
registry's default options), undamped EP to convergence or 200 passes (`ep200
damping=0`), then `ep-exact` (EP whose site updates integrate the worker's
η exactly; with EP's score part, and with the exact one: `scores=exact`) and the
structured and flow guides (`structured-vi`, `coupled-vi`, `flow-vi`) where the registry
has them. The box is the goals' (centred |z| ≤ 0.1 and sd ratio in
[0.9, 1.1], and the same on `E[η_w^1]`); the distance to it is the largest excess of those
four figures over their bounds (0 inside). Figures of a method with draws come from its
draws (centred per draw), those of the online and EP rows from their independent
Gaussians. k̂: PSIS of the approximation against the exact posterior ([Yao18];
[Vehtari24]). CPU s: `getrusage` of the study's one process and its children, for one fit,
JIT compilation included (the first one-pass fit of a model in the process also loads the
numba kernels that EP then shares: the default subjects' rows); gradients: log-density gradients where the method reports them ("≥": L-BFGS
iterations, a lower bound). The machine's 2 cores were shared with other work (load in the
JSON): CPU seconds are less inflated by that than wall seconds, not immune.
Frontier figures: x CPU seconds (log; below 0.01 drawn at 0.01), y distance to the box;
filled markers k̂ ≤ 0.7, the line joins the methods no other beats on both; vertical
lines: the reference's CPU s, 1/5 and 1/10 of it."""


def render_section(rec: dict) -> str:
    """The docs/fidelity.md section, from the record alone."""
    fin = rec.get("finished")
    lines = [START, INTRO, "",
             (f"Measured {rec['date']} → {fin or 'stopped before the end (see the rows)'} "
             f"at commit {rec['commit']}: `{rec['command']}`, load {rec['load_before'][0]} "
             f"at the start; no subject or method started after {rec.get('stop_at_utc')} UTC."),
             ""]
    for r in rec.get("merged_runs", []):
        absent = "; ".join(f"{k}: {', '.join(v)}" for k, v in r.get("absent", {}).items())
        lines += [(f"Rows added {r['date']} → {r.get('finished', 'stopped')} at commit "
                   f"{r['commit']}: `{r['command']}` (subjects {', '.join(r['subjects'])}"
                   + (f"; not in the plan there: {absent}" if absent else "") + "). Each row "
                   "records its commit; a subject's rows of an added run compare with the "
                   "reference named under its table."), ""]
    lines += advice_section(rec) + khat_section(rec)
    for subj in rec["subjects"]:
        lines += subject_section(subj)
    lines.append(END)
    return "\n".join(lines)


def frontier_figure(subj: dict, path: Path) -> None:
    """x: CPU s (log); y: distance to the box; the Pareto front of the two."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # getrusage's resolution: a fit under 0.01 CPU s is drawn at 0.01 (log axis)
    done = [dict(m, cpu_s=max(m["cpu_s"], 0.01))
            for m in sorted(_done(subj), key=lambda m: m["cpu_s"])]
    fig, ax = plt.subplots(figsize=(8.0, 4.0))
    for i, m in enumerate(done):
        ok = m.get("khat") is not None and m["khat"] <= KHAT_OK
        ax.scatter(m["cpu_s"], m["box_distance"], s=40, color="C0",
                   facecolors="C0" if ok else "none", zorder=3)
        ax.annotate(m["label"], (m["cpu_s"], m["box_distance"]), fontsize=7,
                    xytext=(4, 3 if i % 2 == 0 else -10), textcoords="offset points")
    front, best = [], float("inf")
    for m in done:
        if m["box_distance"] < best:
            front.append(m)
            best = m["box_distance"]
    ax.step([m["cpu_s"] for m in front], [m["box_distance"] for m in front], where="post",
            color="C0", lw=1, alpha=0.6)
    ref = subj["reference"]["cpu_s"]
    ax.axvline(ref, color="k", lw=1, label=f"NUTS reference ({ref:.0f} CPU s)")
    ax.axvline(ref / COST_GOAL, color="k", lw=1, ls="--", label="1/5 of it")
    ax.axvline(ref / COST_GOAL_TENTH, color="k", lw=1, ls=":", label="1/10 of it")
    ax.set_xscale("log")
    ax.set_xlabel("CPU seconds of one fit (log)")
    ax.set_ylabel("distance to the box")
    ax.set_title(f"{subj['name']}" + ("" if subj.get("trusted") else " (reference NOT trusted)"),
                 fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.margins(x=0.15, y=0.12)
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)


def render(path: Path = RESULTS, out: Path = ROOT / "docs" / "fidelity.md",
           figures: bool = True) -> str:
    """Figures (``figures=True``) and the section of ``out`` between the markers, after
    the ``approx`` section."""
    rec = json.loads(path.read_text())
    if figures:
        FIGURES.mkdir(parents=True, exist_ok=True)
        for subj in rec["subjects"]:
            if "reference" in subj and _done(subj):
                frontier_figure(subj, FIGURES / f"approx_frontier_{subj['name']}.png")
    section = render_section(rec)
    write_block(out, START, END, section)
    return section


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

"""The approximation study's references and rows (``bench/bench_approx_study.py``): the
trusted NUTS reference of a subject (read from the cache, or sampled with the configuration
docs/fidelity.md trusted for it) and one method's row — its fit's CPU seconds, its box
figures against the reference (from its draws, or from the closed-form marginals of the
online and EP updates), PSIS k̂ and gradient evaluations."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import bench_fidelity as fid
import numpy as np

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
#: the pool and the resample of a ``psis`` row (the VI methods' ``--pool``, ``--draws``)
PSIS_POOL, PSIS_DRAWS = 4000, 1000
Z_BOX, SD_BOX = 0.1, (0.9, 1.1)


def cpu_seconds() -> float:
    """CPU seconds of this process (every thread) and of its finished children."""
    import resource

    me, ch = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return me.ru_utime + me.ru_stime + ch.ru_utime + ch.ru_stime



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


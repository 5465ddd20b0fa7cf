"""The pair-table models: EM / MAP against NUTS, the extensions' EM at read-level size,
and contextual BT / the domain model on real data with a difficulty covariate.

Three parts (``--parts``, default all; each replaces only its own key of the JSON):

``audit`` (key ``runs``)
    For each of ``crowdbt-bias``, ``crowdbt-domain`` (EM) and ``contextual-bt`` (MAP) and
    each back-end, one simulated data set is fitted by the point method and by NUTS
    (:mod:`crowdrank.validation.pipelines.pair_audit`); the aggregates of ``z`` and the sd ratio per family.
``em-scale`` (key ``em_scale``)
    The extensions' EM on the *real* read-level pairs (490 items, 624 workers, 12,726
    pairs) with a seeded synthetic presentation order (and, for the domain model, a seeded
    synthetic category of 3): plain EM, SQUAREM alone and SQUAREM + projected Newton (the
    default, :func:`crowdrank.inference.batch.crowdbt_ext.newton_step`), each with its trace of the
    projected gradient and log posterior, and what creeps (per family gradients, the
    accuracies on the bound and near 1/2) after the first 200 steps.
``preflib`` (key ``preflib_covariates``)
    ``preflib-dots-pairs`` / ``preflib-puzzle-pairs`` (:mod:`crowdrank.models.io.pair_datasets`):
    contextual BT with ``x = difficulty``, the domain model's accuracy per difficulty and,
    as an independent check, a separate BT fit per difficulty by ``choix``.

Wall and CPU seconds and the load average are written beside every time (the machine is
shared: wall times are upper bounds).

    .venv/bin/python bench/bench_pair_models.py            # -> bench/results/pair_models.json
    .venv/bin/python bench/bench_pair_models.py --parts em-scale,preflib
    .venv/bin/python bench/bench_pair_models.py --backends numpyro --pairs 400 --out /tmp/x.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _summary(rep: dict) -> dict:
    out = {}
    for name, f in rep["families"].items():
        p = f["parameters"]
        out[name] = {"n": len(p["z"]), "max_abs_z": float(np.max(np.abs(p["z"]))),
                     "median_abs_z": f["aggregate"]["median_abs_z"],
                     "sd_ratio_min": float(np.min(p["sd_ratio"])),
                     "sd_ratio_median": f["aggregate"]["median_sd_ratio"],
                     "sd_ratio_max": float(np.max(p["sd_ratio"])),
                     "mean_coverage_90": f["aggregate"]["mean_coverage_90"]}
    return out


def run_one(model: str, backend: str, args) -> dict:
    from crowdrank.models import crowdbt_ext as cbx
    from crowdrank.validation.pipelines.pair_audit import audit_contextual, audit_crowdbt_ext

    nuts_kw = {"chains": args.chains, "tune": args.tune, "draws": args.draws, "seed": 1}
    load0, c0, t0 = os.getloadavg(), _cpu(), time.perf_counter()
    if model == "contextual-bt":
        from crowdrank.inference.batch.contextual import simulate_contextual
        from crowdrank.models.contextual import table_from_simulation
        win, lose, X, _, _ = simulate_contextual(args.items, args.pairs, 1, seed=args.seed)
        t = table_from_simulation(win, lose, X, seed=args.seed)
        rep = audit_contextual(t, X, backend=backend, nuts_kw=nuts_kw)
        size = {"items": args.items, "pairs": args.pairs, "covariates": 1}
    else:
        tab, _ = cbx.simulate(args.items, args.workers, args.pairs, model, seed=args.seed)
        st = cbx.structure(tab, model, "category" if model == "crowdbt-domain" else None)
        wab = np.tile([4.0, 1.5], (st.n_workers, 1))
        rep = audit_crowdbt_ext(st, wab, backend=backend, nuts_kw=nuts_kw)
        size = {"items": args.items, "workers": args.workers, "pairs": args.pairs,
                "groups": st.n_groups, "eta_prior": [4.0, 1.5]}
    point = rep.get("em") or rep.get("map")
    return {"model": model, "backend": backend, "approximation": rep["approximation"],
            "data": size, "seconds": time.perf_counter() - t0, "cpu_seconds": _cpu() - c0,
            "load_average_start": list(load0), "load_average_end": list(os.getloadavg()),
            "point_method": {k: point[k] for k in ("iterations", "converged")
                             if k in point} | ({"seconds": point["seconds"]}
                                                if "seconds" in point else {}),
            "nuts": rep["nuts"], "families": _summary(rep)}


def _timed(fn, *a, **kw):
    load0, c0, t0 = os.getloadavg(), _cpu(), time.perf_counter()
    out = fn(*a, **kw)
    return out, {"seconds": time.perf_counter() - t0, "cpu_seconds": _cpu() - c0,
                 "load_average_start": list(load0), "load_average_end": list(os.getloadavg())}


def readlevel_table(seed: int = 0, categories: int = 3):
    """Read-level's real pairs with a seeded random presentation order and a seeded random
    category ``c0..`` per pair (the data have neither)."""
    from crowdrank.models.io.datasets import load_dataset
    from crowdrank.models.pair_table import PairTable, from_rankings

    data, _ = load_dataset("readlevel")
    t = from_rankings(data)
    rng = np.random.default_rng(seed)
    flip = rng.random(t.n_pairs) < 0.5
    cat = np.asarray([f"c{k}" for k in rng.integers(0, categories, t.n_pairs)], dtype=object)
    return PairTable(t.items, t.workers, np.where(flip, t.second, t.first),
                     np.where(flip, t.first, t.second), (~flip).astype(np.int64), t.worker,
                     {"category": cat}, None, True,
                     f"readlevel (synthetic order and category, seed {seed})")


def _creep(st, Z, theta, eta, ab) -> dict:
    """Which parameters hold the projected gradient up (at a point of an unconverged run)."""
    from crowdrank.inference.batch import crowdbt_ext as ext

    gt, ge = ext.gradient(st, Z, theta, eta, ab)
    L = st.n_items
    gl = ge * eta * (1 - eta)
    n = np.bincount(st.group, minlength=st.n_groups)
    worst = np.argsort(-np.abs(gl))[:5]
    return {"max_grad_lambda": float(np.abs(gt[:L]).max()),
            "max_grad_beta": float(np.abs(gt[L:]).max()) if st.bias else None,
            "max_grad_logit_eta": float(np.abs(gl).max()),
            "eta_above_0.999": int(np.sum(eta > 0.999)),
            "eta_within_0.05_of_half": int(np.sum(np.abs(eta - 0.5) < 0.05)),
            "slowest_groups": [{"group": str(st.groups[g]), "eta": float(eta[g]),
                                "pairs": int(n[g]), "grad_logit_eta": float(gl[g])}
                               for g in worst]}


def run_em_scale(args, prev: dict | None = None) -> dict:
    from crowdrank.inference.batch import crowdbt_ext as ext
    from crowdrank.models import crowdbt_ext as cbx

    table = readlevel_table(args.seed_order)
    out = {"data": "readlevel (real pairs), synthetic presentation order and 3 categories "
                   f"(seed {args.seed_order})", "n_items": table.n_items,
           "n_workers": table.n_workers, "n_pairs": table.n_pairs,
           "eta_prior": [5.0, 1.0], "tol": 1e-6, "models": {}}
    for model in ("crowdbt-bias", "crowdbt-domain"):
        st = cbx.structure(table, model, "category")
        wab = np.tile([5.0, 1.0], (st.n_workers, 1))
        ab = cbx.group_beta(st, wab)
        Z = ext.design(st, 0.0, 1.0, 1.0)
        res = {"n_groups": st.n_groups, "solvers": {}}
        old = ((prev or {}).get("models", {}).get(model, {}).get("solvers", {}))
        for name, kw in (("em", {"accelerate": False, "newton_below": None,
                                 "max_iter": args.em_cap}),
                         ("squarem", {"newton_below": None, "max_iter": args.squarem_cap}),
                         ("squarem+newton", {})):
            if name not in args.em_solvers.split(","):
                if name in old:                  # kept from the previous run, with its date
                    res["solvers"][name] = old[name]
                continue
            fit, tm = _timed(ext.fit_ext_em, st, wab, **kw)
            lam, beta = fit.mu, fit.beta
            theta = np.concatenate([lam, beta]) if st.bias else lam
            r = {"date": datetime.now(UTC).isoformat(timespec="seconds"),
                 "iterations": fit.iterations, "newton_steps": fit.newton_steps,
                 "converged": fit.converged, "grad_norm": fit.grad_norm,
                 "objective": fit.objective, "cap": kw.get("max_iter", 5000), **tm,
                 "trace": [[int(i), k, float(g)] for i, k, g in fit.trace]}
            if not fit.converged:
                r["creeping_at_cap"] = _creep(st, Z, theta, fit.eta, ab)
            res["solvers"][name] = r
            print(f"em-scale {model} {name}: {fit.iterations} steps ({fit.newton_steps} "
                  f"Newton), converged {fit.converged}, |g| {fit.grad_norm:.1e}, F "
                  f"{fit.objective:.6f}, {tm['seconds']:.1f} s wall / {tm['cpu_seconds']:.1f}"
                  " s CPU", flush=True)
        f = ext.fit_ext_em(st, wab)
        th = np.concatenate([f.mu, f.beta]) if st.bias else f.mu
        res["solution"] = _creep(st, Z, th, f.eta, ab) | {"objective": f.objective}
        out["models"][model] = res
    return out


def run_preflib(args) -> dict:
    import choix

    from crowdrank.inference.batch.contextual import fit_contextual
    from crowdrank.inference.batch.crowdbt_ext import fit_ext_em
    from crowdrank.models.contextual import encode_covariates
    from crowdrank.models.crowdbt_ext import structure
    from crowdrank.models.io.pair_datasets import PAIR_DATASETS, load_pair_dataset

    out = {}
    for name in PAIR_DATASETS:
        (t, truth), tm = _timed(load_pair_dataset, name)
        X = encode_covariates(t, [("difficulty", False)]).X
        w, lo = t.winner_loser()
        fit, tf = _timed(fit_contextual, w, lo, X, t.n_items)
        d = X[:, 0].astype(int)
        theta = np.concatenate([fit.lam, fit.gamma[:, 0]])
        levels = {}
        for x in range(4):
            m = d == x
            lv = min(set(t.extra["level"][m]))
            s = fit.lam + x * fit.gamma[:, 0]
            c = np.zeros(8)
            c[[0, 3]], c[[4, 7]] = [1.0, -1.0], [x, -x]          # (λ + xγ)_p1 − (λ + xγ)_p4
            # independent: BT by choix on this level's pairs alone (ML, tiny ridge)
            bt = choix.opt_pairwise(4, list(zip(w[m], lo[m])), alpha=1e-6)
            levels[str(x)] = {
                "level": lv, "category": min(set(t.extra["category"][m])),
                "pairs": int(m.sum()), "share_in_true_order": float(np.mean(w[m] < lo[m])),
                "contextual_strengths": s.tolist(),
                "contextual_gap_p1_p4": float(c @ theta),
                "contextual_gap_sd": float(np.sqrt(c @ fit.cov @ c)),
                "contextual_order_is_true": bool(np.all(np.argsort(-s) == np.argsort(-truth))),
                "choix_bt_strengths": (bt - bt.mean()).tolist(),
                "choix_bt_gap_p1_p4": float(bt[0] - bt[3])}
        c = np.zeros(8)
        c[[4, 7]] = [1.0, -1.0]
        st = structure(t, "crowdbt-domain", "category")
        dom, td = _timed(fit_ext_em, st, np.array([[5.0, 1.0]]))
        out[name] = {
            "n_pairs": t.n_pairs, "orientation": t.source, "load": tm,
            "contextual_bt": {"lambda": fit.lam.tolist(), "gamma": fit.gamma[:, 0].tolist(),
                              "slope_gap_p1_p4_per_difficulty": float(c @ theta),
                              "slope_sd": float(np.sqrt(c @ fit.cov @ c)),
                              "iterations": fit.iterations, **tf},
            "per_difficulty": levels,
            "crowdbt_domain": {"eta": {g.split("|")[1]: float(e)
                                       for g, e in zip(st.groups, dom.eta)},
                               "eta_sd_laplace": None if dom.joint is None else
                               {g.split("|")[1]: float(s) for g, s in
                                zip(st.groups, dom.joint["eta_sd"])},
                               "lambda": dom.mu.tolist(), "iterations": dom.iterations,
                               "newton_steps": dom.newton_steps,
                               "converged": dom.converged, "eta_prior": [5.0, 1.0], **td}}
        print(f"preflib {name}: contextual gap p1-p4 per difficulty step "
              f"{c @ theta:+.3f} (sd {np.sqrt(c @ fit.cov @ c):.3f}); per level "
              + ", ".join(f"{v['level']}: {v['contextual_gap_p1_p4']:.2f} (choix "
                          f"{v['choix_bt_gap_p1_p4']:.2f})" for v in levels.values())
              + "; domain eta " + ", ".join(f"{k} {v:.3f}" for k, v in
                                            out[name]["crowdbt_domain"]["eta"].items()),
              flush=True)
    return out


def main(argv=None) -> int:
    from crowdrank.inference.nuts import configure_host_devices

    configure_host_devices()
    argv = sys.argv[1:] if argv is None else list(argv)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="crowdbt-bias,crowdbt-domain,contextual-bt")
    ap.add_argument("--backends", default="numpyro,pymc")
    ap.add_argument("--items", type=int, default=5)
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--pairs", type=int, default=400)
    ap.add_argument("--chains", type=int, default=2)
    ap.add_argument("--tune", type=int, default=400)
    ap.add_argument("--draws", type=int, default=500)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "pair_models.json"))
    ap.add_argument("--parts", default="audit,em-scale,preflib",
                    help="audit, em-scale, preflib (each replaces its key of --out)")
    ap.add_argument("--em-cap", type=int, default=200,
                    help="em-scale: plain EM's step cap")
    ap.add_argument("--squarem-cap", type=int, default=1000,
                    help="em-scale: SQUAREM-alone's step cap")
    ap.add_argument("--em-solvers", default="em,squarem,squarem+newton",
                    help="em-scale: which solvers to run (the others are kept from --out)")
    ap.add_argument("--seed-order", type=int, default=0,
                    help="em-scale: seed of read-level's synthetic order and categories")
    args = ap.parse_args(argv)
    parts = args.parts.split(",")
    unknown = set(parts) - {"audit", "em-scale", "preflib"}
    if unknown:
        ap.error(f"unknown parts {sorted(unknown)}")
    prev = {}
    if Path(args.out).exists():
        prev = json.loads(Path(args.out).read_text())
    res = {"benchmark": "pair_models", "machine": platform.machine(), "cpus": os.cpu_count(),
           "python": platform.python_version(),
           "note": "shared 2-core machine: wall times are upper bounds; CPU seconds and the "
                   "load average are recorded beside them"}
    dated = {}
    for key in ("runs", "em_scale", "preflib_covariates"):
        if key in prev:
            res[key] = prev[key]
    dated.update(prev.get("parts", {}))
    cmd = " ".join([".venv/bin/python bench/bench_pair_models.py", *argv])
    now = datetime.now(UTC).isoformat(timespec="seconds")
    if "em-scale" in parts:
        res["em_scale"] = run_em_scale(args, prev.get("em_scale"))
        dated["em_scale"] = {"date": now, "command": cmd}
    if "preflib" in parts:
        res["preflib_covariates"] = run_preflib(args)
        dated["preflib_covariates"] = {"date": now, "command": cmd}
    if "audit" in parts:
        res["runs"] = run_audit(args)
        dated["runs"] = {"date": now, "command": cmd, "settings": vars(args)}
    if "runs" in res and "runs" not in dated and "date" in prev:
        dated["runs"] = {"date": prev["date"], "command": prev.get("command"),
                         "settings": prev.get("settings")}
    res["parts"] = dated
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1, default=float))
    print(f"wrote {args.out}")
    return 0


def run_audit(args) -> list:
    runs = []
    for model in args.models.split(","):
        for backend in args.backends.split(","):
            r = run_one(model, backend, args)
            runs.append(r)
            fam = "; ".join(f"{k} max|z| {v['max_abs_z']:.2f} sd ratio "
                            f"{v['sd_ratio_min']:.2f}-{v['sd_ratio_max']:.2f}"
                            for k, v in r["families"].items())
            print(f"{model} {backend}: {r['seconds']:.1f} s wall, {r['cpu_seconds']:.1f} s "
                  f"CPU, R-hat {r['nuts']['max_r_hat']:.3f}: {fam}", flush=True)
    return runs


if __name__ == "__main__":
    raise SystemExit(main())

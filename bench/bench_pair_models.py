"""The pair-table models audited: EM / MAP against NUTS on seeded simulated sets.

For each of ``crowdbt-bias``, ``crowdbt-domain`` (EM) and ``contextual-bt`` (MAP) and each
back-end, one simulated data set is fitted by the point method and by NUTS
(:mod:`validation.pair_audit`), and the aggregates of ``z`` and the sd ratio per parameter
family are written with wall and CPU seconds and the load average beside every time (the
machine is shared: wall times are upper bounds).

    .venv/bin/python bench/bench_pair_models.py            # -> bench/results/pair_models.json
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
    from models import crowdbt_ext as cbx
    from validation.pair_audit import audit_contextual, audit_crowdbt_ext

    nuts_kw = {"chains": args.chains, "tune": args.tune, "draws": args.draws, "seed": 1}
    load0, c0, t0 = os.getloadavg(), _cpu(), time.perf_counter()
    if model == "contextual-bt":
        from inference.batch.contextual import simulate_contextual
        from models.contextual import table_from_simulation
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


def main(argv=None) -> int:
    from inference.nuts import configure_host_devices

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
    args = ap.parse_args(argv)
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
    res = {"benchmark": "pair_models", "date": datetime.now(UTC).isoformat(timespec="seconds"),
           "command": " ".join([".venv/bin/python bench/bench_pair_models.py", *argv]),
           "machine": platform.machine(), "cpus": os.cpu_count(),
           "python": platform.python_version(), "settings": vars(args), "runs": runs,
           "note": "shared 2-core machine: wall times are upper bounds; CPU seconds and the "
                   "load average are recorded beside them"}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1, default=float))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The pair-table audit as a user runs it: ``crowdrank audit PAIRS.csv --model M --quick
--check-backends`` on one simulated set per model (the whole command: EM/MAP, NUTS with
both PPLs, plain CrowdBT and BT for the LOO comparison, predictive checks, the page).

Per model: wall and CPU seconds with the load average (the machine is shared: wall times
are upper bounds), the gate, the backend agreement, the LOO table (elpd, se, difference,
max Pareto k̂), the number of flagged predictive statistics per fitted model, and the
aggregates per parameter family.

    .venv/bin/python bench/bench_pair_audit.py        # -> bench/results/pair_audit.json
    .venv/bin/python bench/bench_pair_audit.py --models crowdbt-bias --pairs 300 --out /tmp/x.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODELS = ("crowdbt-bias", "crowdbt-domain", "contextual-bt")


def _cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _data(model: str, pairs: int, folder: Path) -> tuple[Path, list[str]]:
    """A simulated pairwise CSV for ``model`` and the options it needs."""
    from crowdrank.models.io import write_pair_table

    if model == "contextual-bt":
        from crowdrank.inference.batch.contextual import simulate_contextual
        from crowdrank.models.contextual import table_from_simulation
        win, lose, X, _, _ = simulate_contextual(6, pairs, 1, seed=21)
        t = table_from_simulation(win, lose, X, seed=21, n_workers=4)
        f = write_pair_table(t, folder / "ctx.csv", {"x0": t.extra["x0"]})
        return f, ["--covariates", "x0"]
    from crowdrank.models.crowdbt_ext import simulate
    t, _ = simulate(6, 4, pairs, model, n_categories=3, eta_ab=(8.0, 2.0), bias_sd=1.5,
                    seed=21)
    extra = {"category": t.extra["category"]} if "category" in t.extra else None
    f = write_pair_table(t, folder / f"{model}.csv", extra)
    return f, (["--category", "category"] if extra else []) + ["--eta-beta", "4,1.5"]


def run(model: str, pairs: int, folder: Path) -> dict:
    from crowdrank.reports.cli import main

    f, opts = _data(model, pairs, folder)
    out = folder / f"audit-{model}"
    argv = ["audit", str(f), "--model", model, "--quick", "--check-backends", "--quiet",
            "--out", str(out)] + opts
    load0, c0, t0 = os.getloadavg(), _cpu(), time.perf_counter()
    rc = main(argv)
    wall, cpu = time.perf_counter() - t0, _cpu() - c0
    rep = json.loads((out / "metrics.json").read_text())
    loo = rep["checks"]["loo"]["tables"][0]
    shown = [f.name if x == str(f) else "DIR" if x == str(out) else x for x in argv]
    return {"command": "crowdrank " + " ".join(shown),
            "rc": rc, "pairs": pairs, "wall_s": wall, "cpu_s": cpu,
            "loadavg_before": load0, "loadavg_after": os.getloadavg(),
            "gate": rep["gate"],
            "agreement": {k: rep["backend_agreement"][k]
                          for k in ("agree", "n_params", "n_disagree", "z_max")},
            "other_gate_trusted": rep["backend_agreement"]["other_gate"]["trusted"],
            "loo": [{k: r[k] for k in ("model", "elpd", "se", "elpd_diff", "dse")}
                    for r in loo["table"]],
            "pareto_max_k": {m: p["max_k"] for m, p in loo["pareto"].items()},
            "ppc_flagged": {m: c["n_flagged"] for m, c in rep["checks"]["ppc"].items()},
            "ppc_statistics": {m: len(c["rows"]) for m, c in rep["checks"]["ppc"].items()},
            "families": {k: v["aggregate"] for k, v in rep["families"].items()},
            "nuts_seconds": {"audited": rep["nuts"]["seconds"],
                             "other": rep["backend_agreement"]["other_nuts"]["seconds"],
                             **{m: v["seconds"]
                                for m, v in rep["checks"]["baselines"].items()}}}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--pairs", type=int, default=600)
    p.add_argument("--out", default=str(ROOT / "bench" / "results" / "pair_audit.json"))
    a = p.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from crowdrank.inference.nuts import configure_host_devices
    configure_host_devices()
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for m in a.models.split(","):
            print(f"auditing {m} ...", file=sys.stderr, flush=True)
            runs[m] = run(m, a.pairs, Path(tmp))
            print(f"  {runs[m]['wall_s']:.1f} s wall, {runs[m]['cpu_s']:.1f} s CPU",
                  file=sys.stderr, flush=True)
    res = {"date": datetime.now(UTC).isoformat(timespec="seconds"),
           "machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                       "python": platform.python_version()},
           "command": "python bench/bench_pair_audit.py " + " ".join(argv or sys.argv[1:]),
           "runs": runs}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=1, default=float))
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

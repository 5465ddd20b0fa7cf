"""``crowdrank audit PAIRS.csv --model {crowdbt-bias,crowdbt-domain,contextual-bt}``: the
point method of a pair-table model against its NUTS posterior
(:mod:`validation.pair_audit`).

The approximation is ``--approx em`` for the CrowdBT extensions (the EM MAP with Laplace's
sd and the Beta of the responsibilities, plus the joint Laplace over ``(λ, β, η)``) and
``--approx map`` for contextual BT (Laplace). Writes ``DIR/metrics.json`` (settings, the
EM/MAP and NUTS summaries, per family the per-parameter metrics and their aggregates)
and ``DIR/parameters.csv`` (one row per parameter: ``family, parameter, mcmc_mean,
mcmc_sd, approx_mean, approx_sd, z, sd_ratio, coverage_50, coverage_90, ...``). No HTML
page yet.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from models.errors import UsageError
from models.registry import PAIR_MODELS, PAIR_TABLE

APPROX = {name: PAIR_TABLE[name].extra["approx"] for name in PAIR_MODELS}


def add_arguments(p) -> None:
    """The same model options as ``crowdrank fit`` (one definition)."""
    from reports.commands.fit_pairs import add_arguments as model_options

    model_options(p)


def _rows(families: dict, names: dict) -> list[dict]:
    rows = []
    for fam, f in families.items():
        p = f["parameters"]
        labels = names.get(fam.removesuffix("_joint"), [])
        for j in range(len(p["z"])):
            rows.append({"family": fam, "parameter": labels[j] if j < len(labels) else j,
                         **{k: v[j] for k, v in p.items()}})
    return rows


def run(args) -> int:
    import pandas as pd

    from models.pair_table import read_pair_table
    from validation.pair_audit import audit_contextual, audit_crowdbt_ext

    if args.data is None:
        raise UsageError(f"--model {args.model} audits a pairwise CSV: give DATA")
    want = APPROX[args.model]
    if args.approx not in (None, want):
        raise UsageError(f"--model {args.model} audits --approx {want}, not {args.approx!r}")
    if args.check_backends or getattr(args, "scheduler", None):
        raise UsageError(f"--model {args.model}: --check-backends and --scheduler are not "
                         "supported for the pair-table models yet")
    nuts_kw = {"chains": args.chains or (2 if args.quick else 4),
               "tune": args.tune or (250 if args.quick else 1000),
               "draws": args.draws or (500 if args.quick else 1000), "seed": args.seed,
               "target_accept": args.target_accept or 0.8, "progress": args.progress_bars}
    mu0, s0 = args.prior_mu, args.prior_sigma
    if args.model == "contextual-bt":
        from models.contextual import encode_covariates, parse_spec
        spec = parse_spec(args.covariates)
        table = read_pair_table(args.data, tuple(n for n, _ in spec))
        cov = encode_covariates(table, spec)
        rep = audit_contextual(table, cov.X, backend=args.backend, mu0=mu0, sigma0=s0,
                               tau=args.tau, nuts_kw=nuts_kw)
        rep["covariates"], rep["baselines"] = list(cov.names), cov.baselines
        names = {"lambda": list(table.items),
                 "gamma": [f"{i}:{c}" for i in table.items for c in cov.names]}
    else:
        from models.crowdbt_ext import structure
        from reports.commands.fit_pairs import _worker_ab
        if args.model == "crowdbt-domain" and not args.category:
            raise UsageError("--model crowdbt-domain needs --category COLUMN")
        table = read_pair_table(args.data, (args.category,) if args.category else ())
        st = structure(table, args.model, args.category)
        wab = _worker_ab(args, st.workers)
        if np.any(wab < 1):
            raise UsageError("the EM MAP needs Beta(a, b) priors with a, b >= 1")
        rep = audit_crowdbt_ext(st, wab, backend=args.backend, mu0=mu0, sigma0=s0,
                                bias_sd=args.bias_sd, nuts_kw=nuts_kw)
        names = {"lambda": list(st.items), "eta": list(st.groups), "beta": list(st.workers)}
    rep["data"] = str(args.data)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "metrics.json").write_text(json.dumps(rep, indent=1, default=float))
    pd.DataFrame(_rows(rep["families"], names)).to_csv(out / "parameters.csv", index=False,
                                                       float_format="%.10g")
    parts = [f"{k} median |z| {f['aggregate']['median_abs_z']:.2f}, median sd ratio "
             f"{f['aggregate']['median_sd_ratio']:.2f}" for k, f in rep["families"].items()]
    print(f"{args.model}: {want} vs NUTS ({args.backend}, max R-hat "
          f"{rep['nuts']['max_r_hat']:.3f}): " + "; ".join(parts)
          + f"; wrote {out / 'metrics.json'} and {out / 'parameters.csv'}")
    return 0


__all__ = ["APPROX", "PAIR_MODELS", "add_arguments", "run"]

"""``crowdrank audit PAIRS.csv --model {crowdbt-bias,crowdbt-domain,contextual-bt}``: the
point method of a pair-table model against its NUTS posterior
(:mod:`crowdrank.validation.pipelines.pair_audit`).

The approximation is ``--approx em`` for the CrowdBT extensions (the EM MAP with Laplace's
sd and the Beta of the responsibilities, plus the joint Laplace over ``(λ, β, η)``) and
``--approx map`` for contextual BT (Laplace). Writes into ``DIR``:

- ``report.html``: the gate, the approximation vs NUTS per parameter family, figures,
  what the model says, the backend agreement, PSIS-LOO and the predictive checks
  (:mod:`crowdrank.reports.pair_audit_html`);
- ``metrics.json``: settings, the EM/MAP and NUTS summaries, the gate, per family the
  per-parameter metrics and their aggregates, ``backend_agreement``, ``checks``;
- ``parameters.csv``: one row per parameter (``family, parameter, mcmc_mean, mcmc_sd,
  approx_mean, approx_sd, z, sd_ratio, coverage_50, coverage_90, ...``);
- ``nuts/posterior.nc`` (posterior, sample stats, pointwise log-likelihood),
  ``nuts-<other PPL>/posterior.nc`` and ``agreement.csv`` with ``--check-backends``,
  ``checks/<model>/posterior.nc`` for the LOO baselines and ``checks/ppc.csv``.

``--check-backends`` also fits the model with the other PPL and compares the posteriors
parameter by parameter (:func:`crowdrank.validation.reference.backend_agreement`);
``--scheduler`` runs every NUTS fit as a Dask task; ``--no-checks`` skips LOO and the
predictive checks; ``--loo-models`` picks the baselines among ``crowdbt`` and ``bt``
(``pl`` is ``bt`` on pairs).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from crowdrank.models.errors import UsageError
from crowdrank.models.registry import PAIR_MODELS, PAIR_TABLE


def pair_approx(model: str) -> str:
    """The method-registry name of the approximation a pair-table model is audited with:
    its spec's ``approx`` (models never import inference), read through
    :mod:`crowdrank.inference.methods` here, where the audit is dispatched (an unknown
    name is a :class:`UsageError` naming the registry's choices)."""
    from crowdrank.inference import methods

    return methods.get(PAIR_TABLE[model].approx).name


APPROX = {name: pair_approx(name) for name in PAIR_MODELS}


def add_arguments(p) -> None:
    """The same model options as ``crowdrank fit`` (one definition)."""
    from crowdrank.reports.commands.fit_pairs import add_arguments as model_options

    model_options(p)


def nuts_settings(args) -> dict:
    """The pair-table audit's NUTS settings: those on the line, else NutsConfig's defaults
    (its warm-up too: unlike the ranking audit's ``AUDIT_TUNE``), else with ``--quick``
    the ranking audit's quick warm-up and draws."""
    from crowdrank.inference.nuts.config import nuts_default
    from crowdrank.validation.pipelines.audit_config import QUICK_DRAWS, QUICK_TUNE

    quick = {"tune": QUICK_TUNE, "draws": QUICK_DRAWS} if args.quick else {}
    out = {}
    for name in ("backend", "chains", "tune", "draws", "target_accept"):
        given = getattr(args, name, None)
        out[name] = given if given is not None else quick.get(name, nuts_default(name))
    return out


def _rows(families: dict, names: dict) -> list[dict]:
    rows = []
    for fam, f in families.items():
        p = f["parameters"]
        labels = names.get(fam.removesuffix("_joint"), [])
        for j in range(len(p["z"])):
            rows.append({"family": fam, "parameter": labels[j] if j < len(labels) else j,
                         **{k: v[j] for k, v in p.items()}})
    return rows


def _baselines(text: str | None) -> tuple[str, ...]:
    from crowdrank.validation.pipelines.pair_audit import BASELINES

    if text is None:
        return BASELINES
    out = []
    for m in (t.strip() for t in text.split(",")):
        if not m:
            continue
        m = "bt" if m == "pl" else m          # on pairs PL is BT
        if m not in BASELINES:
            raise UsageError(f"--loo-models: the pair-table audit compares with "
                             f"{', '.join(BASELINES)} (pl = bt on pairs), not {m!r}")
        if m not in out:
            out.append(m)
    return tuple(out)


def run(args) -> int:
    import pandas as pd

    from crowdrank.models.io import read_pair_table
    from crowdrank.validation.pipelines.pair_audit import contextual_audit, crowdbt_ext_audit
    from crowdrank.validation.runtime.grid import SchedulerError, resolve_scheduler

    if args.data is None:
        raise UsageError(f"--model {args.model} audits a pairwise CSV: give DATA")
    want = APPROX[args.model]
    if args.approx not in (None, want):
        raise UsageError(f"--model {args.model} audits --approx {want}, not {args.approx!r}")
    if args.processes is not None and args.processes < 1:
        raise UsageError("--processes must be >= 1")
    settings = nuts_settings(args)
    backend = settings.pop("backend")
    nuts_kw = {**settings, "seed": args.seed, "progress": args.progress_bars}
    log = (lambda msg: None) if args.quiet else _log()
    opts = {"check_backends": args.check_backends, "checks": not args.no_checks,
            "baselines": _baselines(args.loo_models),
            "scheduler": resolve_scheduler(args.scheduler), "processes": args.processes,
            "seed": args.seed, "log": log, "warm_start": not args.cold_start}
    mu0, s0 = args.prior_mu, args.prior_sigma
    try:
        if PAIR_TABLE[args.model].covariates:
            from crowdrank.models.contextual import encode_covariates, parse_spec
            from crowdrank.reports.commands.fit_pairs import _worker_ab
            spec = parse_spec(args.covariates)
            table = read_pair_table(args.data, tuple(n for n, _ in spec))
            cov = encode_covariates(table, spec)
            audit = contextual_audit(table, cov.X, backend=backend, mu0=mu0, sigma0=s0,
                                     tau=args.tau, nuts_kw=nuts_kw, covariates=cov.names,
                                     worker_ab=_worker_ab(args, table.workers), **opts)
            rep = audit.report
            rep["covariates"], rep["baselines"] = list(cov.names), cov.baselines
            names = {"lambda": list(table.items),
                     "gamma": [f"{i}:{c}" for i in table.items for c in cov.names]}
        else:
            from crowdrank.models.crowdbt_ext import structure
            from crowdrank.reports.commands.fit_pairs import _worker_ab
            if PAIR_TABLE[args.model].category and not args.category:
                raise UsageError(f"--model {args.model} needs --category COLUMN")
            table = read_pair_table(args.data, (args.category,) if args.category else ())
            st = structure(table, args.model, args.category)
            wab = _worker_ab(args, st.workers)
            if np.any(wab < 1):
                raise UsageError("the EM MAP needs Beta(a, b) priors with a, b >= 1")
            audit = crowdbt_ext_audit(
                st, wab, backend=backend, mu0=mu0, sigma0=s0, bias_sd=args.bias_sd,
                nuts_kw=nuts_kw,
                categories=table.extra[args.category] if args.category else None, **opts)
            rep = audit.report
            names = {"lambda": list(st.items), "eta": list(st.groups),
                     "beta": list(st.workers)}
    except SchedulerError as exc:
        raise UsageError(f"--scheduler: {exc}") from None
    rep["data"] = str(args.data)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_outputs(audit, out, names)
    (out / "metrics.json").write_text(json.dumps(jsonable(rep), indent=1))
    pd.DataFrame(_rows(rep["families"], names)).to_csv(out / "parameters.csv", index=False,
                                                       float_format="%.10g")
    from crowdrank.reports.pair_audit_html import write_pair_report
    write_pair_report(out / "report.html", audit)
    parts = [f"{k} median |z| {f['aggregate']['median_abs_z']:.2f}, median sd ratio "
             f"{f['aggregate']['median_sd_ratio']:.2f}" for k, f in rep["families"].items()]
    print(f"{args.model}: {want} vs NUTS ({backend}; "
          f"{'reference trusted' if rep['gate']['trusted'] else 'reference NOT trusted'}, "
          f"max R-hat {rep['gate']['rhat_max']:.3f}): " + "; ".join(parts))
    if audit.agreement is not None:
        print(f"{args.model}: {audit.agreement.verdict()}")
    if audit.loo is not None and audit.loo.table is not None:
        best = audit.loo.table.index[0]
        print(f"{args.model}: PSIS-LOO best {best} ("
              + ", ".join(f"{m} elpd {r['elpd']:.1f}" for m, r in audit.loo.table.iterrows())
              + ")")
    print(f"report: {out / 'report.html'}")
    return 0


def _log():
    from crowdrank.validation.pipelines.audit import Log

    return Log(True)


def jsonable(x):
    from crowdrank.validation.pipelines.audit import jsonable as j

    return j(x)


def write_outputs(audit, out: Path, names: dict) -> None:
    """The fits and tables beside ``metrics.json`` (module docstring)."""
    (out / "nuts").mkdir(parents=True, exist_ok=True)
    audit.tree.to_netcdf(out / "nuts" / "posterior.nc", engine="h5netcdf")
    if audit.other_tree is not None:
        d = out / f"nuts-{audit.other.backend}"
        d.mkdir(parents=True, exist_ok=True)
        audit.other_tree.to_netcdf(d / "posterior.nc", engine="h5netcdf")
        audit.agreement.table.to_csv(out / "agreement.csv", index=False, float_format="%.10g")
    for name, (_, _, tree) in audit.baselines.items():
        d = out / "checks" / name
        d.mkdir(parents=True, exist_ok=True)
        tree.to_netcdf(d / "posterior.nc", engine="h5netcdf")
    if audit.ppc:
        import pandas as pd
        (out / "checks").mkdir(parents=True, exist_ok=True)
        pd.concat([c.rows.assign(model=m) for m, c in audit.ppc.items()],
                  ignore_index=True).to_csv(out / "checks" / "ppc.csv", index=False,
                                            float_format="%.10g")


__all__ = ["APPROX", "PAIR_MODELS", "add_arguments", "run"]

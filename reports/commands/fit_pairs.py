"""``crowdrank fit PAIRS.csv --model {contextual-bt,crowdbt-bias,crowdbt-domain}``: the
models that read presented pairs with extra columns (:mod:`crowdrank.models.pair_table`).

- ``contextual-bt`` (:mod:`crowdrank.models.contextual`): ``--method map`` (damped Newton with
  Laplace's covariance, :func:`crowdrank.inference.batch.contextual.fit_contextual`) or ``--method
  nuts`` (NumPyro or PyMC); ``--covariates col1,col2[:cat]`` names the covariate columns
  (categorical ones one-hot with a reported baseline). Writes ``items.csv`` (``λ``),
  ``coefficients.csv`` (``item, covariate, mean, sd``: ``γ``) and ``fit.json``.
- ``crowdbt-bias`` / ``crowdbt-domain`` (:mod:`crowdrank.models.crowdbt_ext`): ``--method map`` (EM
  in SQUAREM cycles finished by projected Newton steps, :mod:`crowdrank.inference.batch.crowdbt_ext`)
  or ``nuts``; the domain model needs ``--category
  COLUMN``. Writes ``items.csv``, ``groups.csv`` (one row per worker, or per worker and
  category: accuracy ``eta``; with EM the Beta ``a, b`` of its responsibilities and, when
  every accuracy is inside (0, 1), ``eta_sd_laplace`` from the joint Laplace; ``beta`` and
  ``beta_sd`` for the bias model) and ``fit.json``.

``DATA`` is a pairwise CSV or a registered pair data set (``preflib-dots-pairs``,
``preflib-puzzle-pairs``: :mod:`crowdrank.models.io.pair_datasets`).

The worker accuracy prior is ``Beta(a, b)`` from ``--worker-prior-file`` (CSV
``worker,a,b``) or ``--eta-beta A,B`` for every worker (default ``5,1``, the CrowdBT choice
of [Pan18], Sect. 5.1). With ``--method nuts`` a ``posterior.nc`` holds the draws.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from crowdrank.models.errors import DataError, UsageError
from crowdrank.models.registry import PAIR_MODELS, PAIR_TABLE, pair_names


def add_arguments(p) -> None:
    """The pair-table models' options, shared by ``crowdrank fit`` and ``crowdrank audit``."""
    g = p.add_argument_group("pair-table models (--model contextual-bt, crowdbt-bias, "
                             "crowdbt-domain; DATA a pairwise CSV worker,left,right,label,...)")
    g.add_argument("--covariates", default=None, metavar="COL[,COL:cat]",
                   help="contextual-bt: covariate columns of the CSV (numeric, or "
                        "categorical: one-hot against the first level in sorted order)")
    g.add_argument("--category", default=None, metavar="COLUMN",
                   help="crowdbt-domain: the column holding each comparison's category")
    g.add_argument("--tau", type=float, default=None,
                   help=f"contextual-bt: sd of γ ~ Normal (default: {DEFAULTS['tau']})")
    g.add_argument("--bias-sd", type=float, default=None,
                   help="crowdbt-bias: sd of the worker bias β_w ~ Normal (log-odds; "
                        f"default: {DEFAULTS['bias_sd']})")
    g.add_argument("--eta-beta", default=None, metavar="A,B",
                   help="crowdbt-bias/domain: Beta(a, b) accuracy prior of every worker "
                        "(a, b >= 1 for the EM MAP; --worker-prior-file overrides; "
                        f"default: {DEFAULTS['eta_beta']})")


#: the pair-table options' defaults: parsed as ``None`` so that one given with another
#: model is seen (:func:`check_pair_options`), then filled in (:func:`resolve`)
DEFAULTS = {"tau": 1.0, "bias_sd": 1.0, "eta_beta": "5,1"}
#: the options only the pair-table models read, by dest
PAIR_OPTIONS = ("covariates", "category", "tau", "bias_sd", "eta_beta")


def check_pair_options(args) -> None:
    """A :class:`UsageError` when a pair-table option is given with a model that does not
    read it (argparse would take it silently: every model's options are on one parser)."""
    if args.model in PAIR_MODELS:
        return
    given = ["--" + d.replace("_", "-") for d in PAIR_OPTIONS
             if getattr(args, d, None) is not None]
    if given:
        raise UsageError(f"{', '.join(given)}: option(s) of the pair-table models "
                         f"(--model {', '.join(PAIR_MODELS)}), not of --model {args.model}")


def resolve(args) -> None:
    """Fill the pair-table options left unset with their defaults (:data:`DEFAULTS`)."""
    for dest, value in DEFAULTS.items():
        if getattr(args, dest, None) is None:
            setattr(args, dest, value)


def _worker_ab(args, workers) -> np.ndarray:
    if args.worker_prior_file:
        from crowdrank.models.priors import read_worker_prior_file
        pri = read_worker_prior_file(args.worker_prior_file)
        index = {w: k for k, w in enumerate(pri.workers)}
        missing = [w for w in workers if w not in index]
        if missing:
            raise DataError(f"no prior for workers {missing[:5]}", args.worker_prior_file)
        ab = pri.beta()
        return np.asarray([ab[index[w]] for w in workers], float)
    try:
        a, b = (float(v) for v in args.eta_beta.split(","))
    except ValueError:
        raise UsageError(f"--eta-beta must be A,B (two numbers), got {args.eta_beta!r}") from None
    if not (a > 0 and b > 0 and np.isfinite(a) and np.isfinite(b)):
        raise UsageError(f"--eta-beta needs finite a, b > 0, got {args.eta_beta!r}")
    return np.tile([a, b], (len(workers), 1))


def _check(args) -> None:
    if args.method not in ("map", "nuts"):
        raise UsageError(f"--model {args.model} fits by --method map or nuts, not "
                         f"{args.method!r}")
    if not (args.tau > 0 and args.bias_sd > 0 and args.prior_sigma > 0):
        raise UsageError("--tau, --bias-sd and --prior-sigma must be > 0")
    spec = PAIR_TABLE[args.model]
    if args.covariates and not spec.covariates:
        raise UsageError(f"--covariates is for --model {', '.join(pair_names(covariates=True))}")
    if args.category and not spec.category:
        raise UsageError(f"--category is for --model {', '.join(pair_names(category=True))}")


def _nuts_options(args):
    """NUTS's options of the command line (``crowdrank fit`` parses an option left out as
    ``None``, which keeps ``NutsOptions``' default)."""
    from dataclasses import fields

    from crowdrank.inference import methods
    nuts = methods.get("nuts")
    return nuts.options(**{f.name: getattr(args, f.name, None)
                           for f in fields(nuts.options_class)})


def _nuts_kw(args) -> dict:
    o = _nuts_options(args)
    return {"chains": o.chains, "tune": o.tune, "draws": o.draws, "seed": args.seed,
            "target_accept": o.target_accept, "progress": not args.no_progress}


def _sample(args, numpyro_model, pymc_model):
    from crowdrank.inference.nuts.pair_nuts import sample

    if _nuts_options(args).backend == "numpyro":
        import jax
        jax.config.update("jax_enable_x64", True)
        return sample("numpyro", numpyro_model(), **_nuts_kw(args))
    return sample("pymc", pymc_model(), **_nuts_kw(args))


def _items_table(items, mu, sd, extra: dict | None = None):
    import pandas as pd
    df = pd.DataFrame({"item": list(items), "mu": mu, "sigma2": np.asarray(sd) ** 2, "sd": sd,
                       **(extra or {})})
    df = df.sort_values("mu", ascending=False, kind="stable").reset_index(drop=True)
    df.insert(0, "rank", np.arange(1, len(df) + 1))
    return df


def _nuts_info(res) -> dict:
    return {"backend": res.backend, "seconds": res.seconds, "max_r_hat": res.max_rhat(),
            "min_ess": res.min_ess(), **res.settings}


def run(args) -> int:
    from crowdrank.models.io import read_pair_table

    resolve(args)
    _check(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if PAIR_TABLE[args.model].covariates:
        return run_contextual(args, out)
    extra = (args.category,) if args.category else ()
    if PAIR_TABLE[args.model].category and not args.category:
        raise UsageError(f"--model {args.model} needs --category COLUMN")
    table = read_pair_table(args.data, extra)
    return run_crowdbt_ext(args, table, out)


def run_contextual(args, out: Path) -> int:
    import pandas as pd

    from crowdrank.models.contextual import encode_covariates, numpyro_model, parse_spec, pymc_model
    from crowdrank.models.io import read_pair_table

    spec = parse_spec(args.covariates)
    table = read_pair_table(args.data, tuple(n for n, _ in spec))
    cov = encode_covariates(table, spec)
    X, p, L = cov.X, cov.X.shape[1], table.n_items
    info = {"model": "contextual-bt", "method": args.method, "n_items": L,
            "n_pairs": table.n_pairs, "covariates": list(cov.names), "kinds": cov.kinds,
            "baselines": cov.baselines,
            "prior": {"mu0": args.prior_mu, "sigma0": args.prior_sigma, "tau": args.tau}}
    if args.method == "map":
        from crowdrank.inference.batch.contextual import fit_contextual
        win, lose = table.winner_loser()
        fit = fit_contextual(win, lose, X, L, mu0=args.prior_mu, sigma0=args.prior_sigma,
                             tau=args.tau, tol=1e-9 if args.tol is None else args.tol,
                             max_iter=args.max_iter or 100)
        sd_l, sd_g = fit.sd()
        mu_l, mu_g = fit.lam, fit.gamma
        info.update(solver="newton", iterations=fit.iterations, grad_norm=fit.grad_norm,
                    converged=fit.converged)
        state = ("converged" if fit.converged else "NOT converged") + \
            f" in {fit.iterations} Newton iterations"
    else:
        res = _sample(args, lambda: numpyro_model(table, X, args.prior_mu, args.prior_sigma,
                                                  args.tau),
                      lambda: pymc_model(table, X, args.prior_mu, args.prior_sigma, args.tau,
                                         cov.names))
        mu_l, sd_l = res.mean("lambda"), res.sd("lambda")
        mu_g = res.mean("gamma") if p else np.zeros((L, 0))
        sd_g = res.sd("gamma") if p else np.zeros((L, 0))
        info["nuts"] = _nuts_info(res)
        state = f"NUTS max R-hat {res.max_rhat():.3f}, min ESS {res.min_ess():.0f}"
        dims = {"lambda": [("item", table.items)],
                "gamma": [("item", table.items), ("covariate", cov.names)]}
        res.to_netcdf(out / "posterior.nc", dims)
    _items_table(table.items, mu_l, sd_l).to_csv(out / "items.csv", index=False,
                                                 float_format="%.17g")
    rows = [{"item": it, "covariate": nm, "mean": mu_g[i, k], "sd": sd_g[i, k]}
            for i, it in enumerate(table.items) for k, nm in enumerate(cov.names)]
    pd.DataFrame(rows, columns=["item", "covariate", "mean", "sd"]).to_csv(
        out / "coefficients.csv", index=False, float_format="%.17g")
    (out / "fit.json").write_text(json.dumps(info, indent=1, default=float))
    base = "; ".join(f"{k}: baseline {v!r}" for k, v in cov.baselines.items())
    print(f"contextual-bt {args.method}: {state}; covariates {list(cov.names)}"
          + (f" ({base})" if base else "")
          + f"; wrote {out / 'items.csv'}, {out / 'coefficients.csv'} and {out / 'fit.json'}")
    return 0


def run_crowdbt_ext(args, table, out: Path) -> int:
    import pandas as pd

    from crowdrank.models.crowdbt_ext import numpyro_model, pymc_model, structure

    st = structure(table, args.model, args.category)
    wab = _worker_ab(args, st.workers)
    mu0, s0, bsd = args.prior_mu, args.prior_sigma, args.bias_sd
    info = {"model": args.model, "method": args.method, "n_items": st.n_items,
            "n_workers": st.n_workers, "n_groups": st.n_groups, "n_pairs": len(st.first),
            "presented_first": "the left column", "category": args.category,
            "prior": {"mu0": mu0, "sigma0": s0, "bias_sd": bsd if st.bias else None,
                      "eta": "--worker-prior-file" if args.worker_prior_file
                      else f"Beta({args.eta_beta})"}}
    groups = pd.DataFrame({"group": list(st.groups),
                           "worker": [st.workers[w] for w in st.group_worker]})
    if args.method == "map":
        from crowdrank.inference.batch.crowdbt_ext import fit_ext_em
        if np.any(wab < 1):
            raise UsageError("the EM MAP needs Beta(a, b) priors with a, b >= 1")
        fit = fit_ext_em(st, wab, mu0=mu0, sigma0=s0, bias_sd=bsd,
                         tol=1e-6 if args.tol is None else args.tol,
                         max_iter=args.max_iter or 5000)
        mu, sd = fit.mu, fit.sd
        groups["eta"], groups["a"], groups["b"] = fit.eta, fit.alpha[:, 0], fit.alpha[:, 1]
        if fit.joint is not None:      # Laplace over (λ, β, η): the observed information
            groups["eta_sd_laplace"] = fit.joint["eta_sd"]
        if st.bias:
            groups["beta"], groups["beta_sd"] = fit.beta, fit.beta_sd
        info.update(solver="em", joint_laplace=fit.joint is not None, iterations=fit.iterations,
                    newton_steps=fit.newton_steps, grad_norm=fit.grad_norm,
                    converged=fit.converged, objective=fit.objective)
        state = ("converged" if fit.converged else "NOT converged") + \
            f" in {fit.iterations} steps ({fit.newton_steps} of them Newton)"
    else:
        res = _sample(args, lambda: numpyro_model(st, wab, mu0, s0, bsd),
                      lambda: pymc_model(st, wab, mu0, s0, bsd))
        mu, sd = res.mean("lambda"), res.sd("lambda")
        groups["eta"], groups["eta_sd"] = res.mean("eta"), res.sd("eta")
        if st.bias:
            groups["beta"], groups["beta_sd"] = res.mean("beta"), res.sd("beta")
        info["nuts"] = _nuts_info(res)
        state = f"NUTS max R-hat {res.max_rhat():.3f}, min ESS {res.min_ess():.0f}"
        dims = {"lambda": [("item", st.items)], "eta": [("group", st.groups)],
                "beta": [("worker", st.workers)]}
        res.to_netcdf(out / "posterior.nc", dims)
    _items_table(st.items, mu, sd).to_csv(out / "items.csv", index=False, float_format="%.17g")
    groups.to_csv(out / "groups.csv", index=False, float_format="%.17g")
    (out / "fit.json").write_text(json.dumps(info, indent=1, default=float))
    print(f"{args.model} {args.method}: {state}; {st.n_groups} reliability groups; wrote "
          f"{out / 'items.csv'}, {out / 'groups.csv'} and {out / 'fit.json'}")
    return 0

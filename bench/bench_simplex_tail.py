"""The tail of the smallest simplex entry in prior-only NUTS: how well is E[η_t] estimated,
and is :func:`crowdrank.validation.reference.simplex_prior_check` honest about it?

The model is the one of the prior-only tests (COUPLE, 4 items, 2 workers, geometric prior
``α = 10·6^-t``, ``α_4 ≈ 0.0077``), run prior-only with NumPyro's default NUTS at the tests'
size (2 chains × 1,000 draws after 300 warm-up) for many seeds. The seeds run as one
vectorised MCMC of ``2·seeds`` chains (one compilation; every chain adapts on its own, so
chains ``2i, 2i+1`` are one seed's run). For every seed and worker it records the estimate
of E[η_t], ArviZ's MCSE, the exact-variance MCSE of the check, the tail visits, and whether
the check passes with ArviZ's MCSE ("before") and as it is now ("after"). The same for iid
Dirichlet draws of the same size, and the check's power against planted errors (iid draws
with ``α_4`` doubled or halved, draws whose upper-tail visits are thinned, NumPyro's
stick-breaking Dirichlet).

    nice -n 10 python bench/bench_simplex_tail.py --seeds 100 --iid-repeats 500 \
        --power-repeats 200 --pymc-seeds 4
    nice -n 10 python bench/bench_simplex_tail.py --sequential-seeds 25 --sequential-only
    nice -n 10 python bench/bench_simplex_tail.py --remedy-only --seeds 100

(the second adds the tests' own sequential form for seeds 0–24, default level and the
per-worker level test's; the third a candidate remedy, the boost's ``e_t`` through a probit
coordinate, both merged into the file the first one wrote) writes ``bench/results/simplex_tail.json`` (machine, date, CPU seconds, load average and the
command beside every figure).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ALPHA = 10 * 6.0 ** -np.arange(1, 5)          # the geometric prior, K = 4
DRAWS, TUNE, CHAINS = 1000, 300, 2            # the prior-only tests' size


def _clock():
    return time.time(), time.process_time()


def _since(t):
    return {"wall_s": round(time.time() - t[0], 2), "cpu_s": round(time.process_time() - t[1], 2),
            "loadavg": [round(x, 2) for x in os.getloadavg()]}


def numpyro_sweep(seeds: int, precision: str, level_sd: float | None, simplex: str = "gamma",
                  seed: int = 0) -> tuple[np.ndarray, dict]:
    """Prior-only draws ``(2·seeds, DRAWS, W, K)`` of the tests' model, one vectorised run."""
    import jax
    from numpyro.infer import MCMC, NUTS

    from crowdrank.models import numpyro_models as npm
    from crowdrank.models.model_inputs import model_inputs
    from crowdrank.models.priors import Priors
    from crowdrank.models.simulate import simulate

    d = simulate("couple", n_items=4, n_workers=2, tasks_per_worker=4, kmax=4, seed=1).rankings
    inp = model_inputs("couple", d, Priors.geometric(d.workers, 4))
    lsd = None if level_sd is None else np.full(d.n_workers, level_sd)
    t = _clock()
    with jax.enable_x64(precision == "float64"):
        m = MCMC(NUTS(lambda: npm.model(inp, prior_only=True, level_sd=lsd, simplex=simplex)),
                 num_warmup=TUNE, num_samples=DRAWS, num_chains=CHAINS * seeds,
                 chain_method="vectorized", progress_bar=False)
        m.run(jax.random.PRNGKey(seed), extra_fields=("diverging", "num_steps"))
        eta = np.asarray(m.get_samples(group_by_chain=True)["eta"], float)
        ex = m.get_extra_fields(group_by_chain=True)
    info = {"precision": precision, "level_sd": level_sd, "simplex": simplex, "seeds": seeds,
            "divergences": int(np.asarray(ex["diverging"]).sum()),
            "mean_leapfrogs_per_draw": float(np.asarray(ex["num_steps"]).mean()), **_since(t)}
    return eta, info


def probit_simplex_model(alpha: np.ndarray, level_sd: float | None = None):
    """A candidate remedy, prior only: the boost's ``e_t ~ Exponential(1)`` through a probit
    coordinate, ``w_t ~ Normal(0, 1)`` and ``e_t = −log Φ(w_t)`` (``U_t = Φ(w_t)`` is
    uniform, so ``e_t = −log U_t`` is exactly Exponential(1)); everything else as the
    default sampler (``u_t ~ Gamma(α_t + 1)``, plain Gammas for ``α_t ≥ 0.5``, the level
    factor). Small ``e_t`` (the upper tail of ``η_t``) is large ``w_t``: ``e < 0.01`` is
    ``w > 2.33``, 2.7 nats up a Gaussian instead of ~3.6 up the log-Exponential's linear
    tail."""
    import jax
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    from crowdrank.models.model_inputs import boost_split, level_log_ratio

    a = jnp.asarray(alpha)
    big, small = boost_split(alpha)
    log_g = jnp.zeros(a.shape, a.dtype)
    g = numpyro.sample("eta_g", dist.Gamma(a[big], 1.0).to_event(1))
    log_g = log_g.at[big].set(jnp.log(g))
    a_s = a[small]
    u = numpyro.sample("eta_u", dist.Gamma(a_s + 1.0, 1.0).to_event(1))
    w = numpyro.sample("eta_w", dist.Normal(jnp.zeros_like(a_s), 1.0).to_event(1))
    e = -jax.scipy.special.log_ndtr(w)
    log_g = log_g.at[small].set(jnp.log(u) - e / a_s)
    log_s = jax.scipy.special.logsumexp(log_g, axis=1)
    numpyro.factor("eta_level", jnp.sum(level_log_ratio(log_s, np.asarray(alpha).sum(axis=1),
                                                        jnp, level_sd)))
    numpyro.deterministic("eta", jnp.exp(log_g - log_s[:, None]))


def remedy_sweep(seeds: int, seed: int = 0) -> tuple[np.ndarray, dict]:
    """:func:`probit_simplex_model` at the tests' size, ``2·seeds`` vectorised chains."""
    import jax
    from numpyro.infer import MCMC, NUTS

    alpha = np.stack([ALPHA, ALPHA])
    t = _clock()
    with jax.enable_x64(True):
        m = MCMC(NUTS(lambda: probit_simplex_model(alpha)), num_warmup=TUNE,
                 num_samples=DRAWS, num_chains=CHAINS * seeds, chain_method="vectorized",
                 progress_bar=False)
        m.run(jax.random.PRNGKey(seed), extra_fields=("diverging", "num_steps"))
        eta = np.asarray(m.get_samples(group_by_chain=True)["eta"], float)
        ex = m.get_extra_fields(group_by_chain=True)
    info = {"coordinate": "probit: e = -log Phi(w), w ~ Normal(0, 1)", "seeds": seeds,
            "divergences": int(np.asarray(ex["diverging"]).sum()),
            "mean_leapfrogs_per_draw": float(np.asarray(ex["num_steps"]).mean()), **_since(t)}
    return eta, info


def pymc_sweep(seeds: int) -> tuple[np.ndarray, dict]:
    """The same prior-only run through ``fit_nuts(backend="pymc")``, one call per seed."""
    from crowdrank.inference import nuts
    from crowdrank.models.priors import Priors
    from crowdrank.models.simulate import simulate

    d = simulate("couple", n_items=4, n_workers=2, tasks_per_worker=4, kmax=4, seed=1).rankings
    pr = Priors.geometric(d.workers, 4)
    t = _clock()
    out = []
    for s in range(seeds):
        r = nuts.fit_nuts(d, "couple", pr, backend="pymc", chains=CHAINS, tune=TUNE,
                          draws=DRAWS, seed=s, progress=False, prior_only=True)
        out.append(np.asarray(r.idata["posterior"]["eta"].values, float))
    return np.concatenate(out, axis=0), {"backend": "pymc", "seeds": seeds, **_since(t)}


def sequential_sweep(seeds: int, level_sd) -> dict:
    """The prior-only tests' own form: one sequential 2-chain MCMC, ``PRNGKey(seed)`` for
    ``seed = 0 … seeds − 1`` (the per-worker level test: ``level_sd = [0.03, 0.3]``)."""
    import jax
    from numpyro.infer import MCMC, NUTS

    from crowdrank.models import numpyro_models as npm
    from crowdrank.models.model_inputs import model_inputs
    from crowdrank.models.priors import Priors
    from crowdrank.models.simulate import simulate

    d = simulate("couple", n_items=4, n_workers=2, tasks_per_worker=4, kmax=4, seed=1).rankings
    inp = model_inputs("couple", d, Priors.geometric(d.workers, 4))
    lsd = None if level_sd is None else np.asarray(level_sd, float)
    t = _clock()
    etas = []
    with jax.enable_x64(True):
        m = MCMC(NUTS(lambda: npm.model(inp, prior_only=True, level_sd=lsd)), num_warmup=TUNE,
                 num_samples=DRAWS, num_chains=CHAINS, chain_method="sequential",
                 progress_bar=False)
        for s in range(seeds):
            m.run(jax.random.PRNGKey(s))
            etas.append(np.asarray(m.get_samples(group_by_chain=True)["eta"], float))
    info = {"form": "sequential, PRNGKey(seed)", "level_sd": level_sd, "seeds": seeds,
            **_since(t)}
    rows = per_run(np.concatenate(etas, axis=0))
    return {"run": info, "summary": summarise(rows),
            "failures": [{"seed": r["run"], "worker": r["worker"], "before": r["before"],
                          "after": r["after"]} for r in rows
                         if not (r["before"] and r["after"])]}


def iid_draws(rng, alpha, repeats: int, n: int) -> np.ndarray:
    """``(repeats·CHAINS, n/CHAINS, K)`` exact Dirichlet draws (log-space Gammas)."""
    from crowdrank.inference.nuts.starts import log_dirichlet_draws

    x = np.exp(log_dirichlet_draws(rng, np.asarray(alpha)[None], repeats * n))[:, 0, :]
    return x.reshape(repeats * CHAINS, n // CHAINS, len(alpha))


def per_run(eta: np.ndarray, alpha=ALPHA, z_max: float = 5.0) -> list[dict]:
    """The check on every run (chains ``2i, 2i+1``) and worker: before and after."""
    from crowdrank.validation.reference import simplex_prior_check

    eta = eta if eta.ndim == 4 else eta[:, :, None, :]
    rows = []
    for i in range(eta.shape[0] // CHAINS):
        for w in range(eta.shape[2]):
            res = simplex_prior_check(eta[CHAINS * i:CHAINS * (i + 1), :, w, :], alpha,
                                      z_max=z_max)
            z_old = [(r["mean_draws"] - r["mean_exact"]) / r["mcse_arviz"] for r in res.rows]
            before = all(abs(z) <= z_max for z in z_old) and all(
                abs(r["z_tail"]) <= z_max for r in res.rows)
            rows.append({"run": i, "worker": w, "after": res.passed, "before": bool(before),
                         "z_mean_arviz": z_old,
                         **{k: [r[k] for r in res.rows] for k in
                            ("mean_draws", "mcse", "mcse_arviz", "z_mean", "z_above", "z_tail",
                             "excursions", "tail_visits_effective", "p_above_draws")}})
    return rows


def _first_failure(rows: list[dict], key: str) -> int:
    """How many consecutive runs (all workers) pass from the first one."""
    runs = sorted({r["run"] for r in rows})
    for k, i in enumerate(runs):
        if not all(r[key] for r in rows if r["run"] == i):
            return k
    return len(runs)


def summarise(rows: list[dict], alpha=ALPHA) -> dict:
    """Across runs: bias, the sd of the estimate against the MCSEs (over-confidence), the
    spread of the z's and the failures before and after."""
    exact = alpha / alpha.sum()
    est = np.array([r["mean_draws"] for r in rows])
    out = {"runs": len(rows), "fail_before": int(sum(not r["before"] for r in rows)),
           "fail_after": int(sum(not r["after"] for r in rows)),
           "consecutive_seeds_passing_before": _first_failure(rows, "before"),
           "consecutive_seeds_passing_after": _first_failure(rows, "after"), "entries": []}
    for t in range(len(alpha)):
        zo = np.array([r["z_mean_arviz"][t] for r in rows])
        zn = np.array([r["z_mean"][t] for r in rows])
        za = np.array([r["z_above"][t] for r in rows])
        sd = float(est[:, t].std(ddof=1))

        def rms(k, t=t):
            return float(np.sqrt(np.mean([r[k][t] ** 2 for r in rows])))

        out["entries"].append({
            "t": t + 1, "alpha": float(alpha[t]), "mean_exact": float(exact[t]),
            "mean_of_estimates": float(est[:, t].mean()),
            "se_of_that_mean": sd / np.sqrt(len(rows)), "sd_of_estimate": sd,
            "rms_mcse_arviz": rms("mcse_arviz"), "rms_mcse_check": rms("mcse"),
            "overconfidence_arviz": sd / rms("mcse_arviz"),
            "overconfidence_check": sd / rms("mcse"),
            "z_arviz": {"sd": float(zo.std()), "min": float(zo.min()), "max": float(zo.max()),
                        "share_abs_gt_3": float(np.mean(abs(zo) > 3)),
                        "share_abs_gt_5": float(np.mean(abs(zo) > 5))},
            "z_check": {"sd": float(zn.std()), "min": float(zn.min()), "max": float(zn.max()),
                        "share_abs_gt_3": float(np.mean(abs(zn) > 3)),
                        "share_abs_gt_5": float(np.mean(abs(zn) > 5))},
            "z_above": {"sd": float(za.std()), "min": float(za.min()), "max": float(za.max()),
                        "share_abs_gt_5": float(np.mean(abs(za) > 5))},
            "excursions_per_run": float(np.mean([r["excursions"][t] for r in rows])),
            "effective_tail_visits_per_run": float(np.mean(
                [r["tail_visits_effective"][t] for r in rows])),
            "share_of_draws_above_q99": float(np.mean([r["p_above_draws"][t] for r in rows]))})
    return out


def thin_tail(rng, eta: np.ndarray, alpha, keep: float) -> np.ndarray:
    """Replace each draw whose smallest entry lies above its exact 0.99 quantile, with
    probability ``1 − keep``, by an exact draw conditioned below it: a sampler that visits
    the upper tail ``keep`` times as often as it should and is exact elsewhere."""
    from scipy import stats

    S = alpha.sum()
    q = stats.beta.isf(0.01, alpha[-1], S - alpha[-1])
    out = eta.copy()
    hit = (out[..., -1] > q) & (rng.random(out.shape[:-1]) > keep)
    pool = iid_draws(rng, alpha, 1, 4 * int(hit.sum()) + 2 * CHAINS).reshape(-1, len(alpha))
    pool = pool[pool[:, -1] <= q]
    out[hit] = pool[: int(hit.sum())]
    return out


def power(rng, repeats: int, n: int) -> dict:
    """Share of runs of ``n`` draws the check fails, for exact draws and planted errors."""
    from crowdrank.validation.reference import simplex_prior_check

    cases = {"exact": lambda: iid_draws(rng, ALPHA, 1, n),
             "alpha4_x2": lambda: iid_draws(rng, ALPHA * [1, 1, 1, 2], 1, n),
             "alpha4_x0.5": lambda: iid_draws(rng, ALPHA * [1, 1, 1, 0.5], 1, n),
             "tail_visits_x0.5": lambda: thin_tail(rng, iid_draws(rng, ALPHA, 1, n), ALPHA, 0.5),
             "tail_visits_x0": lambda: thin_tail(rng, iid_draws(rng, ALPHA, 1, n), ALPHA, 0.0)}
    out = {}
    for name, draw in cases.items():
        res = [simplex_prior_check(draw(), ALPHA) for _ in range(repeats)]
        which = {"mean": 0, "above": 0, "below": 0}
        for r in res:
            row = r.rows[3]
            which["mean"] += abs(row["z_mean"]) > 5
            which["above"] += abs(row["z_above"]) > 5
            which["below"] += abs(row["z_tail"]) > 5
        out[name] = {"repeats": repeats, "draws": n, "fail_rate": float(np.mean(
            [not r.passed for r in res])), **{f"eta4_{k}_fails": int(v) for k, v in which.items()}}
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=100, help="NumPyro runs per configuration")
    p.add_argument("--iid-repeats", type=int, default=500)
    p.add_argument("--power-repeats", type=int, default=200)
    p.add_argument("--pymc-seeds", type=int, default=0, help="PyMC runs (one compile each)")
    p.add_argument("--configs", nargs="+", default=["float64", "float64:0.03", "float32"],
                   help="PRECISION[:LEVEL_SD] of the NumPyro sweeps")
    p.add_argument("--sequential-seeds", type=int, default=0,
                   help="also run the tests' sequential form for seeds 0..N-1")
    p.add_argument("--sequential-only", action="store_true",
                   help="run only the sequential sweeps and merge them into --out")
    p.add_argument("--remedy-only", action="store_true",
                   help="run only the probit-coordinate remedy and merge it into --out")
    p.add_argument("--out", default=str(ROOT / "bench" / "results" / "simplex_tail.json"))
    a = p.parse_args(argv)
    from crowdrank.inference.nuts import configure_host_devices

    configure_host_devices()
    t_all = _clock()
    rng = np.random.default_rng(20261201)
    res = {"command": "python bench/bench_simplex_tail.py " + " ".join(argv or sys.argv[1:]),
           "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
           "machine": {"platform": platform.platform(), "python": platform.python_version(),
                       "cpus": os.cpu_count()},
           "model": "couple, 4 items, 2 workers, geometric prior alpha = 10*6^-t (K = 4), "
                    "prior only; 2 chains x 1,000 draws, 300 warm-up per run",
           "alpha": ALPHA.tolist(), "numpyro": {}, "iid": {}, "power": {}}
    if a.sequential_only or a.remedy_only:
        res = json.loads(Path(a.out).read_text())
        a.configs = []
    if a.remedy_only:
        eta, info = remedy_sweep(a.seeds)
        summ = summarise(per_run(eta))
        base = res["numpyro"]["float64"]
        per_grad = lambda s, i: (s["entries"][3]["effective_tail_visits_per_run"]
                                 / (CHAINS * DRAWS * i["mean_leapfrogs_per_draw"]) * 1e3)
        res["remedy_probit"] = {
            "command": "python bench/bench_simplex_tail.py " + " ".join(argv or sys.argv[1:]),
            "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "run": info, "summary": summ,
            "eta4_effective_visits_per_1000_gradients": per_grad(summ, info),
            "default_eta4_effective_visits_per_1000_gradients": per_grad(base["summary"],
                                                                         base["run"])}
        print(json.dumps({k: v for k, v in res["remedy_probit"].items() if k != "summary"}))
        Path(a.out).write_text(json.dumps(res, indent=1, default=float) + "\n")
        return 0
    if a.sequential_seeds:
        res["sequential"] = {"command": "python bench/bench_simplex_tail.py "
                             + " ".join(argv or sys.argv[1:]),
                             "date": dt.datetime.now(dt.UTC).isoformat(
                                 timespec="seconds")}
        for name, lsd in (("default", None), ("per_worker_level_test", [0.03, 0.3])):
            res["sequential"][name] = sequential_sweep(a.sequential_seeds, lsd)
            print(name, json.dumps(res["sequential"][name]["failures"]), flush=True)
    if a.sequential_only:
        Path(a.out).write_text(json.dumps(res, indent=1, default=float) + "\n")
        print("wrote", a.out)
        return 0
    for cfg in a.configs:
        prec, _, lsd = cfg.partition(":")
        eta, info = numpyro_sweep(a.seeds, prec, float(lsd) if lsd else None)
        res["numpyro"][cfg] = {"run": info, "summary": summarise(per_run(eta))}
        print(cfg, json.dumps({k: v for k, v in res["numpyro"][cfg]["summary"].items()
                               if k != "entries"}), flush=True)
    eta, info = numpyro_sweep(max(2, a.seeds // 10), "float64", None, simplex="dirichlet")
    rows = per_run(eta)
    res["numpyro"]["stick_breaking"] = {"run": info, "fail_rate": float(
        np.mean([not r["after"] for r in rows])), "eta4_mean": float(
        np.mean([r["mean_draws"][3] for r in rows]))}
    t = _clock()
    res["iid"] = {"summary": summarise(per_run(iid_draws(rng, ALPHA, a.iid_repeats,
                                                         CHAINS * DRAWS))), **_since(t)}
    print("iid", res["iid"]["summary"]["fail_before"], res["iid"]["summary"]["fail_after"],
          flush=True)
    t = _clock()
    for n in (CHAINS * DRAWS, 8 * DRAWS):
        res["power"][str(n)] = power(rng, a.power_repeats, n)
        print("power", n, json.dumps(res["power"][str(n)]), flush=True)
    res["power"]["time"] = _since(t)
    if a.pymc_seeds:
        eta, info = pymc_sweep(a.pymc_seeds)
        res["pymc"] = {"run": info, "summary": summarise(per_run(eta))}
    res["total"] = _since(t_all)
    Path(a.out).write_text(json.dumps(res, indent=1, default=float) + "\n")
    print("wrote", a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The approximation study's subjects, variants and comparison (``bench_fidelity.py``):
what the study measures on, what it measures, and how one variant is compared with its
NUTS reference. Shared by ``bench_fidelity.py``, its probes (``fidelity_probes.py``) and
the PPL approximations' study (``bench_approx_study.py``)."""

from __future__ import annotations

import functools
import os
import platform
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench" / "tools"))

import numpy as np
from speed import speed_probe
from stamp import stamp

RESULTS = ROOT / "bench" / "results"
CACHE = ROOT / "out" / "fidelity"
WORKER_TYPES = ("expert", "amateur", "spammer", "malicious")


# ------------------------------------------------------------------ subjects
def subjects() -> dict:
    """name -> (loader, model, NUTS settings); loaders return (Rankings, Priors)."""
    out = {}

    def default(model):
        def load():
            from crowdrank.validation.pipelines.audit import (
                AuditConfig,
                default_subject,
                make_priors,
            )
            s = default_subject()
            return s.data, make_priors(s.data, AuditConfig(), s.gold)
        return load

    def medium(setting):
        def load():
            from crowdrank.models.priors import Priors
            from crowdrank.models.simulate import simulate
            d = simulate("couple", setting=setting, n_items=100, n_workers=50,
                         tasks_per_worker=100, kmax=4, seed=0).rankings
            return d, Priors.geometric(d.workers, d.K, a0=10, a=6)
        return load

    def shared(name):
        def load():
            from crowdrank.models.io import read_data
            from crowdrank.models.priors import build_priors
            d, _ = read_data(name)
            return d, build_priors(d)
        return load

    # NUTS settings (NumPyro): a fixed budget where it is trusted, and where it is not, rounds
    # of ``draws`` continued while the gate fails on R-hat or ESS alone, up to ``max_draws``
    # per chain (the medium settings' ladder is in reference_medium.json)
    out["default-couple"] = (default("couple"), "couple", {"tune": 500, "draws": 1000})
    out["default-crowdbt"] = (default("crowdbt"), "crowdbt", {"tune": 500, "draws": 1000})
    for t in WORKER_TYPES:
        out[f"medium-{t}"] = (medium(t), "couple",
                              {"tune": 500, "draws": 2000, "max_draws": 10000})
    shared_kw = {"tune": 250, "draws": 500, "max_draws": 2000}
    out["babyface-couple"] = (shared("babyface"), "couple", shared_kw)
    out["readlevel-couple"] = (shared("readlevel"), "couple", shared_kw)
    out["readlevel-crowdbt"] = (shared("readlevel"), "crowdbt", shared_kw)
    return out


def variants(model: str) -> list[tuple[str, dict]]:
    """(label, fit_variant options) of every variant studied for ``model``."""
    out = [("one-pass", {})]
    if model == "couple":
        for taylor in ("paper", "full", "plugin", "quadrature"):
            for sa in ("updated", "prior"):
                if (taylor, sa) != ("paper", "updated"):
                    out.append((f"one-pass taylor={taylor},score_alpha={sa}",
                                {"taylor": taylor, "score_alpha": sa}))
    if model == "crowdbt":          # Gauss–Hermite over the pair's score difference
        out.append(("one-pass taylor=quadrature", {"taylor": "quadrature"}))
    # what `fit --method ep` runs: up to 10 passes, undamped, stopping once converged
    out.append(("ep default", {"method": "ep"}))
    # "epN": damping 0.5 (EP's default when these rows were first measured; explicit, so
    # that the label keeps its meaning now that the default is undamped)
    for p in (2, 5, 10):
        out.append((f"ep{p}", {"method": "ep", "ep_passes": str(p), "damping": 0.5}))
    # undamped EP (the default): the same fixed point in fewer passes when no cavity turns
    # improper (improper ones are skipped and counted either way)
    for p in (3, 5):
        out.append((f"ep{p} damping=0", {"method": "ep", "ep_passes": str(p), "damping": 0.0}))
    if model == "couple":
        out.append(("ep4 damping=0", {"method": "ep", "ep_passes": "4", "damping": 0.0}))
        # the score step with the stage's prior α (ADF's tilted distribution): the cheap
        # EP variant closest on spammers
        out.append(("ep5 damping=0 score_alpha=prior",
                    {"method": "ep", "ep_passes": "5", "damping": 0.0, "score_alpha": "prior"}))
        for p in (2, 5, 10):
            out.append((f"ep{p} taylor=quadrature,score_alpha=prior",
                        {"method": "ep", "ep_passes": str(p), "taylor": "quadrature",
                         "score_alpha": "prior", "damping": 0.5}))
        out.append(("ep5 damping=0 taylor=quadrature,score_alpha=prior",
                    {"method": "ep", "ep_passes": "5", "taylor": "quadrature",
                     "score_alpha": "prior", "damping": 0.0}))
    if model == "crowdbt":
        for p in (3, 5):
            out.append((f"ep{p} damping=0 taylor=quadrature",
                        {"method": "ep", "ep_passes": str(p), "damping": 0.0,
                         "taylor": "quadrature"}))
    return out


@functools.cache
def _speed() -> dict:
    """The machine's speed probe, once per process (~6 s)."""
    return speed_probe()


def env() -> dict:
    """``stamp()`` (date, commit, command, CPU) with the probe measured once per process,
    and the keys this file's records have always used (``machine``, ``python``,
    ``loadavg``)."""
    return {"machine": platform.machine(), "python": platform.python_version(),
            "loadavg": [round(x, 2) for x in os.getloadavg()], **stamp(speed=False),
            "speed": _speed()}


# ------------------------------------------------------------------ step 2: the study
class Reference:
    """What every variant is compared with, computed once per subject from the NUTS draws:
    flattened draws and ArviZ MCSEs of raw scores, centred scores and ``η_w^1``, the common
    level, and the order probabilities of a seeded sample of pairs."""

    def __init__(self, idata, max_pairs: int = 300):
        import xarray as xr

        from crowdrank.validation.compare import _mcse, item_pairs
        from crowdrank.validation.metrics import order_probability_draws

        post = idata["posterior"]
        self.items = [str(v) for v in post["item"].values]
        lam = np.asarray(post["lambda"].transpose("chain", "draw", "item").values, float)
        cen = lam - lam.mean(-1, keepdims=True)
        self.raw = (lam.reshape(-1, lam.shape[-1]), _mcse(lam))
        self.centred = (cen.reshape(-1, lam.shape[-1]), _mcse(cen))
        lev = lam.mean(-1)[..., None]
        self.level = (lev.reshape(-1, 1), _mcse(lev))
        self.c_sd = self.centred[0].std(0, ddof=1)
        self.eta1 = None
        if "eta" in post:
            eta = post["eta"]
            if "stage" in eta.dims:
                eta = eta.isel(stage=0)
            self.workers = [str(v) for v in post["worker"].values]
            e = np.asarray(eta.transpose("chain", "draw", "worker").values, float)
            self.eta1 = (e.reshape(-1, e.shape[-1]), _mcse(e))
        self.i, self.j = item_pairs(len(self.items), max_pairs, seed=0)
        self.p_order = order_probability_draws(self.raw[0], self.i, self.j)
        del xr


def _agg(r) -> dict:
    from crowdrank.validation import metrics as M
    a = M.aggregate(r["z"], r["sd_ratio"], r["coverage_50"], r["coverage_90"])
    return {k: a[k] for k in ("n", "median_abs_z", "median_sd_ratio", "mean_coverage_90",
                              "share_close")}


def compare_variant(post, ref: Reference) -> dict:
    """Raw, centred, level, ``η^1`` and order-probability comparisons of one fit."""
    from crowdrank.validation import metrics as M

    idx = {it: k for k, it in enumerate(post.items)}
    sel = [idx[i] for i in ref.items]
    mu, sd = post.mu[sel], np.sqrt(post.sigma2[sel])
    out = {"raw": _agg(M.parameter_metrics("normal", mu, sd, *ref.raw))}
    cm, cs = M.centred_normal(mu, sd)
    out["centred"] = _agg(M.parameter_metrics("normal", cm, cs, *ref.centred))
    lm, ls = M.level_normal(mu, sd)
    lv = M.parameter_metrics("normal", np.array([lm]), np.array([ls]), *ref.level)
    out["level"] = {k: float(lv[k][0]) for k in ("mcmc_mean", "mcmc_sd", "approx_mean",
                                                 "approx_sd", "z", "sd_ratio")}
    if "mu0" in post.options:
        km, ks = M.level_corrected_normal(mu, sd, post.options["mu0"], post.options["sigma0"])
        out["raw_level_corrected"] = _agg(M.parameter_metrics("normal", km, ks, *ref.raw))
    pq = M.order_probability_normal(mu, sd, ref.i, ref.j)
    out["order_probability"] = M.order_probability_summary(pq, ref.p_order,
                                                           ref.raw[0].shape[0])
    out["eta1"] = {}
    if ref.eta1 is not None and post.alpha is not None:
        widx = {w: k for k, w in enumerate(post.workers)}
        al = post.alpha[[widx[w] for w in ref.workers]]
        if post.model == "crowdbt":
            a, b = al[:, 0], al[:, 1]
        else:
            a, b = al[:, 0], al.sum(1) - al[:, 0]
        out["eta1"] = _agg(M.parameter_metrics("beta", a, b, *ref.eta1))
    return out


def per_variable_gate(idata) -> dict:
    """The gate's R-hat and ESS figures per variable (``lambda``, ``eta``): a reference can
    fail the gate on a few worker parameters while its scores pass it, and the comparisons
    of centred scores then stand on draws that pass."""
    import arviz_stats as azs

    from crowdrank.inference.gate import ESS_MIN, RHAT_MAX

    post = idata["posterior"].to_dataset()
    out = {}
    for v in post.data_vars:
        r = float(np.nanmax(np.asarray(azs.rhat(post[v]))))
        b = float(np.nanmin(np.asarray(azs.ess(post[v], method="bulk"))))
        t = float(np.nanmin(np.asarray(azs.ess(post[v], method="tail"))))
        out[v] = {"rhat_max": round(r, 4), "ess_bulk_min": round(b, 1),
                  "ess_tail_min": round(t, 1),
                  "passes": bool(r < RHAT_MAX and b >= ESS_MIN and t >= ESS_MIN)}
    return out

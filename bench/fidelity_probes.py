"""The approximation study's probes (``bench_fidelity.py diagnose | damping |
fixedpoints``): where the error of a variant comes from (per parameter against the
reference), whether EP's fixed point depends on its damping, and whether EP started from
the NUTS posterior's sites stays where EP from the prior ends."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench" / "tools"))

import numpy as np
from fidelity_core import (
    RESULTS,
    Reference,
    compare_variant,
    env,
    subjects,
    variants,
)

DIAGNOSE_VARIANTS = ("one-pass", "ep5 damping=0", "ep10 taylor=quadrature,score_alpha=prior")


def _with_reference(names, cache: Path):
    """``(name, model, data, worker priors, NUTS draws)`` of each subject among ``names``
    whose reference is in ``cache`` (``bench_fidelity.py reference``); the others are
    skipped."""
    from crowdrank.inference.nuts import read_nuts
    from crowdrank.models.registry import get as get_model

    for name in names:
        if not (cache / name / "posterior.nc").is_file():
            continue
        load, model, _ = subjects()[name]
        d, pri = load()
        yield name, model, d, get_model(model).worker_priors(pri, d), read_nuts(cache / name)


def diagnose(names, cache: Path, labels=DIAGNOSE_VARIANTS) -> None:
    """Where the error is (``bench/results/fidelity_diagnosis.json``): per subject and
    variant, the centred means' scale against NUTS (least-squares slope of the
    approximation's centred means on NUTS's, and their correlation), the spread of the
    per-item z (quantiles, share with |z| > 0.1), whether the z grow with the score
    (Spearman ρ of z against NUTS's centred mean), and the workers whose ``E[η_w^1]`` is
    furthest off (NUTS mean/sd, the approximation's, z, rankings of the worker)."""
    from scipy import stats

    from crowdrank.validation.pipelines.audit import fit_variant

    out = {"bench": "fidelity_diagnosis", "subjects": [], **env()}
    for name, model, d, pri, idata in _with_reference(names, cache):
        ref = Reference(idata)
        cen = ref.centred[0]
        m_ref, s_ref = cen.mean(0), cen.std(0, ddof=1)
        per = dict(variants(model))
        rows = []
        for lab in labels:
            if lab not in per:
                continue
            post = fit_variant(d, model, pri, per[lab], progress=False)
            idx = {it: k for k, it in enumerate(post.items)}
            mu = post.mu[[idx[i] for i in ref.items]]
            cm = mu - mu.mean()
            z = (cm - m_ref) / s_ref
            slope = float(np.dot(cm, m_ref) / np.dot(m_ref, m_ref))
            row = {"variant": lab, "centred_slope": slope,
                   "centred_corr": float(np.corrcoef(cm, m_ref)[0, 1]),
                   "z_quantiles": {q: float(np.quantile(np.abs(z), float(q)))
                                   for q in ("0.5", "0.9", "0.99")},
                   "share_abs_z_over_0.1": float(np.mean(np.abs(z) > 0.1)),
                   "z_vs_score_spearman": float(stats.spearmanr(z, m_ref)[0]),
                   "signed_z_mean": float(z.mean())}
            if ref.eta1 is not None and post.alpha is not None:
                widx = {w: k for k, w in enumerate(post.workers)}
                al = post.alpha[[widx[w] for w in ref.workers]]
                a = al[:, 0]
                b = (al[:, 1] if model == "crowdbt" else al.sum(1) - al[:, 0])
                am, asd = a / (a + b), np.sqrt(a * b / ((a + b) ** 2 * (a + b + 1)))
                e = ref.eta1[0]
                em, esd = e.mean(0), e.std(0, ddof=1)
                ez = (am - em) / esd
                n_rk = np.bincount(d.worker, minlength=len(d.workers))
                wpos = {w: k for k, w in enumerate(d.workers)}
                worst = np.argsort(-np.abs(ez))[:5]
                row["eta1"] = {
                    "signed_z_mean": float(ez.mean()),
                    "share_abs_z_over_0.1": float(np.mean(np.abs(ez) > 0.1)),
                    "z_vs_nuts_mean_spearman": float(stats.spearmanr(ez, em)[0]),
                    "worst": [{"worker": ref.workers[k], "nuts_mean": float(em[k]),
                               "nuts_sd": float(esd[k]), "approx_mean": float(am[k]),
                               "approx_sd": float(asd[k]), "z": float(ez[k]),
                               "rankings": int(n_rk[wpos[ref.workers[k]]])}
                              for k in worst]}
            rows.append(row)
            print(f"{name} {lab}: slope {slope:.3f}, |z| q50/q90 "
                  f"{row['z_quantiles']['0.5']:.2f}/{row['z_quantiles']['0.9']:.2f}, "
                  f"z~score rho {row['z_vs_score_spearman']:.2f}", flush=True)
        out["subjects"].append({"name": name, "model": model, "variants": rows})
    path = RESULTS / "fidelity_diagnosis.json"
    path.write_text(json.dumps(out, indent=1, allow_nan=False))
    print(f"wrote {path}")


def damping_study(names, passes: int = 200, tol: float = 1e-6) -> None:
    """Does damping move EP's fixed point? (``bench/results/ep_damping.json``): per subject,
    EP with damping 0 and 0.5 run to ``tol`` or ``passes``; passes used, convergence,
    improper cavities, CPU seconds, and the largest gap between the two end points in item
    sds on centred and raw means, in ``|Δ log σ²|`` and in ``|Δ log α|``."""
    from crowdrank.inference.online.ep import fit_ep
    from crowdrank.models.registry import get as get_model

    out = {"bench": "ep_damping", "passes": passes, "tol": tol, "subjects": [], **env()}
    for name in names:
        load, model, _ = subjects()[name]
        d, pri = load()
        pri = get_model(model).worker_priors(pri, d)
        runs = {}
        fit_ep(d.subset(np.arange(min(20, d.n_rankings))), model, pri, passes=2,
               progress=False)                     # load the kernels outside the timing
        for dmp in (0.0, 0.5):
            t = time.process_time()
            e = fit_ep(d, model, pri, passes=passes, damping=dmp, tol=tol, progress=False)
            runs[dmp] = (e, time.process_time() - t)
        a, b = runs[0.0][0], runs[0.5][0]
        sd = np.sqrt(b.sigma2)
        row = {"name": name, "model": model,
               **{f"damping_{k}": {"passes_run": e.options["ep"]["passes_run"],
                                   "converged": e.options["ep"]["converged"],
                                   "improper_cavities": e.options["ep"]["improper_cavities"],
                                   "cpu_s": round(c, 3), "level": float(e.mu.mean())}
                  for k, (e, c) in (("0", runs[0.0]), ("0.5", runs[0.5]))},
               "max_gap_centred_sd": float(np.max(np.abs((a.mu - a.mu.mean())
                                                          - (b.mu - b.mu.mean())) / sd)),
               "max_gap_raw_sd": float(np.max(np.abs(a.mu - b.mu) / sd)),
               "max_gap_log_sigma2": float(np.max(np.abs(np.log(a.sigma2 / b.sigma2)))),
               "max_gap_log_alpha": float(np.max(np.abs(np.log(a.alpha / b.alpha))))}
        out["subjects"].append(row)
        print(name, json.dumps(row), flush=True)
    path = RESULTS / "ep_damping.json"
    path.write_text(json.dumps(out, indent=1, allow_nan=False))
    print(f"wrote {path}")


def _sites_from(state, mu, s2, alpha) -> None:
    """Give the EP ``state`` sites whose product with the prior is the approximation
    ``(mu, s2, alpha)``: each item's natural-parameter difference from the prior split
    evenly over the units that contain it, each worker's concentration difference per
    component over its units long enough to touch that component."""
    post = state.post
    tau_p, nu_p = 1.0 / post.sigma2, post.mu / post.sigma2
    a_p = post.alpha.copy()
    dtau, dnu = 1.0 / s2 - tau_p, mu / s2 - nu_p
    k = state.lengths
    cnt = np.zeros(len(mu))
    for j in range(state.ordr.shape[0]):
        np.add.at(cnt, state.ordr[j][k > j], 1.0)
    for j in range(state.ordr.shape[0]):
        on = k > j
        r = state.ordr[j][on]
        state.site_tau[on, j] = dtau[r] / cnt[r]
        state.site_nu[on, j] = dnu[r] / cnt[r]
    da = alpha - a_p
    K = alpha.shape[1]
    wcnt = np.zeros((alpha.shape[0], K))
    for t in range(K):
        np.add.at(wcnt[:, t], state.wk[k > t], 1.0)
    for t in range(K):
        on = k > t
        w = state.wk[on]
        state.site_alpha[on, t] = np.where(wcnt[w, t] > 0, da[w, t] / np.maximum(wcnt[w, t], 1),
                                           0.0)
    untouched = wcnt == 0
    post.mu[:], post.sigma2[:] = mu, s2
    post.alpha[:] = np.where(untouched, a_p, alpha)
    state.passes_done = 1                 # later passes: cavities, not the one-pass update


def fixed_points(names, cache: Path, passes: int = 60) -> None:
    """Is EP's fixed point unique? (``bench/results/ep_fixed_points.json``): EP from the
    prior (the usual start) against EP started at NUTS's answer (items: the reference's
    marginal means and variances; workers: Dirichlet/Beta matched to the reference's ``η``
    means and first-component variance), each run undamped to tol 1e-6; both compared with
    the reference. Ending at the same point means the error is the fixed point's; ending
    near NUTS means the usual start reaches another fixed point."""
    from crowdrank.inference.online.ep import converged, ep_export, ep_init, ep_pass, fit_ep

    out = {"bench": "ep_fixed_points", "passes": passes, "subjects": [], **env()}
    for name, model, d, pri, idata in _with_reference(names, cache):
        ref = Reference(idata)
        a = fit_ep(d, model, pri, passes=passes, damping=0.0, tol=1e-6, progress=False)
        st = ep_init(d, model, pri)
        imap = {it: i for i, it in enumerate(st.post.items)}
        sel = [imap[i] for i in ref.items]
        raw = ref.raw[0]
        mu, s2 = st.post.mu.copy(), st.post.sigma2.copy()
        mu[sel], s2[sel] = raw.mean(0), raw.var(0, ddof=1)
        eta = idata["posterior"]["eta"]
        wdim = "worker"
        e = np.asarray(eta.transpose("chain", "draw", wdim, ...).values, float)
        e = e.reshape(-1, *e.shape[2:])
        if e.ndim == 2:                               # CrowdBT: a Beta per worker
            e = np.stack([e, 1.0 - e], -1)
        m, v1 = e.mean(0), e[..., 0].var(0, ddof=1)
        S = m[:, 0] * (1 - m[:, 0]) / v1 - 1.0
        wmap = {w: i for i, w in enumerate(st.post.workers)}
        wsel = [wmap[str(w)] for w in eta[wdim].values]
        alpha = st.post.alpha.copy()
        alpha[wsel, : m.shape[1]] = np.maximum(S[:, None] * m, 1e-3)
        _sites_from(st, mu, s2, alpha)
        order = np.arange(d.n_rankings) if not st.pairwise else None
        if st.pairwise:
            from crowdrank.inference.online.api import pairs_sequence
            order = pairs_sequence(d.lengths, np.arange(d.n_rankings))
        start = compare_variant(ep_export(st), ref)
        for _ in range(passes):
            entry = ep_pass(st, order, 0.0)
            if converged(entry, 1e-6):
                break
        b = ep_export(st, damping=0.0)
        ca, cb = compare_variant(a, ref), compare_variant(b, ref)
        sd = np.sqrt(a.sigma2)
        row = {"name": name, "model": model,
               "from_prior": {"passes": a.options["ep"]["passes_run"],
                              "converged": a.options["ep"]["converged"],
                              "centred": ca["centred"], "eta1": ca["eta1"]},
               "from_nuts_start": {"centred": start["centred"], "eta1": start["eta1"]},
               "from_nuts": {"passes": b.options["ep"]["passes_run"],
                             "converged": b.options["ep"]["converged"],
                             "improper_cavities": b.options["ep"]["improper_cavities"],
                             "centred": cb["centred"], "eta1": cb["eta1"]},
               "max_gap_centred_sd": float(np.max(np.abs((a.mu - a.mu.mean())
                                                          - (b.mu - b.mu.mean())) / sd)),
               "max_gap_log_alpha": float(np.max(np.abs(np.log(a.alpha / b.alpha))))}
        out["subjects"].append(row)
        print(f"{name}: from prior |z| {ca['centred']['median_abs_z']:.3f} eta1 "
              f"{ca['eta1'].get('median_abs_z', float('nan')):.3f}; NUTS start "
              f"{start['centred']['median_abs_z']:.3f}/"
              f"{start['eta1'].get('median_abs_z', float('nan')):.3f}; from NUTS "
              f"{cb['centred']['median_abs_z']:.3f}/"
              f"{cb['eta1'].get('median_abs_z', float('nan')):.3f} after "
              f"{b.options['ep']['passes_run']} passes; gap {row['max_gap_centred_sd']:.2e} sd, "
              f"log alpha {row['max_gap_log_alpha']:.2e}", flush=True)
    path = RESULTS / "ep_fixed_points.json"
    path.write_text(json.dumps(out, indent=1, allow_nan=False))
    print(f"wrote {path}")

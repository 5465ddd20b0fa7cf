"""Figures of the audit report: each function takes plain results and returns a Figure.

MCMC diagnostics use ArviZ 1.x (``arviz_plots``: trace, rank, energy); the comparisons of
the two posteriors, for which ArviZ has no plot, are matplotlib. No figure grows with the
number of parameters: the forest shows a fixed number of items (top, bottom and a seeded
random middle), trace and rank plots only the worst parameters, and the rest are
histograms or one scatter.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

WORST = 4          # parameters in the trace / rank plots
FOREST_EACH = 5    # items from the top, the bottom and the middle of the forest plot


def _plt():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def _fig(ncols=1, nrows=1, w=4.2, h=3.3):
    plt = _plt()
    fig, axes = plt.subplots(nrows, ncols, figsize=(w * ncols, h * nrows), squeeze=False,
                             layout="constrained")
    return fig, axes.ravel()


def _pc_figure(pc):
    """The matplotlib Figure behind an ``arviz_plots`` PlotCollection."""
    fig = pc.viz["figure"]
    return fig.item() if hasattr(fig, "item") else fig


# ------------------------------------------------------------------ MCMC diagnostics
def worst_parameters(table: pd.DataFrame, n: int = WORST) -> list[str]:
    """The ``n`` parameters with the highest R-hat, ties broken by the lowest bulk ESS."""
    t = table.assign(_r=-table.rhat.fillna(np.inf), _e=table.ess_bulk.fillna(-np.inf))
    return list(t.sort_values(["_r", "_e"]).param[:n])


def _worst_datatree(idata, table: pd.DataFrame, n: int):
    """A small DataTree with one variable ``worst`` over ``param`` = the worst parameters,
    so ArviZ draws exactly ``n`` panels whatever the model's size."""
    import arviz_base as ab

    cols, names = [], []
    for p in worst_parameters(table, n):
        row = table[table.param == p].iloc[0]
        da = idata["posterior"][row.kind]
        sel = {}
        if "item" in da.dims:
            sel["item"] = row.id
        if "worker" in da.dims:
            sel["worker"] = row.id
        if "stage" in da.dims:
            sel["stage"] = int(row.stage)
        cols.append(np.asarray(da.sel(sel).transpose("chain", "draw").values, float))
        names.append(p)
    groups = {"posterior": {"worst": np.stack(cols, axis=-1)}}
    if "sample_stats" in idata.children and "diverging" in idata["sample_stats"]:
        groups["sample_stats"] = {"diverging": np.asarray(
            idata["sample_stats"]["diverging"].transpose("chain", "draw").values, bool)}
    return ab.from_dict(groups, dims={"worst": ["param"]}, coords={"param": names})


def trace_worst(idata, table: pd.DataFrame, n: int = WORST):
    """ArviZ trace plot of the ``n`` worst parameters (by R-hat, then ESS)."""
    import arviz_plots as azp

    pc = azp.plot_trace(_worst_datatree(idata, table, n), backend="matplotlib",
                        figure_kwargs={"figsize": (10, 3.2)})
    return _pc_figure(pc)


def rank_worst(idata, table: pd.DataFrame, n: int = WORST):
    """ArviZ rank (Δ-ECDF) plot of the ``n`` worst parameters."""
    import arviz_plots as azp

    pc = azp.plot_rank(_worst_datatree(idata, table, n), backend="matplotlib",
                       figure_kwargs={"figsize": (10, 3.4)})
    return _pc_figure(pc)


def energy(idata):
    """ArviZ energy plot (marginal vs transition energy) with per-chain E-BFMI."""
    import arviz_plots as azp

    pc = azp.plot_energy(idata, backend="matplotlib", figure_kwargs={"figsize": (9, 2.6)})
    return _pc_figure(pc)


def rhat_ess(table: pd.DataFrame):
    """Histograms of R-hat and bulk/tail ESS over all parameters, with the gate's lines."""
    fig, ax = _fig(2)
    ax[0].hist(table.rhat, bins=30, color="C0")
    ax[0].axvline(1.01, color="k", ls="--", lw=1)
    ax[0].set(xlabel="rank-normalised split R-hat", ylabel="parameters")
    ax[1].hist(table.ess_bulk, bins=30, alpha=0.6, label="bulk")
    ax[1].hist(table.ess_tail, bins=30, alpha=0.6, label="tail")
    ax[1].axvline(400, color="k", ls="--", lw=1)
    ax[1].set(xlabel="ESS", ylabel="parameters")
    ax[1].legend(frameon=False)
    return fig


# ------------------------------------------------------------------ approximation vs MCMC
#: Panel titles and axis symbols of the parameter kinds (other kinds show their name).
KIND_LABELS = {"lambda": ("items λ", "λ"), "eta": ("workers η", "η"), "beta": ("bias β", "β"),
               "gamma": ("covariate effects γ", "γ")}


def _kinds(table: pd.DataFrame, kinds) -> list[str]:
    return [k for k in (kinds or ("lambda", "eta")) if (table.kind == k).any()]


def means_scatter(table: pd.DataFrame, kinds=None, approx_label: str = "online"):
    """Approximate vs MCMC means with ±1 sd error bars, one panel per kind (``kinds``,
    default λ and η), y = x line."""
    kinds = _kinds(table, kinds)
    fig, ax = _fig(len(kinds))
    for j, (a, k) in enumerate(zip(ax, kinds)):
        t = table[table.kind == k]
        a.errorbar(t.mcmc_mean, t.approx_mean, xerr=t.mcmc_sd, yerr=t.approx_sd, fmt="o",
                   ms=2.5, lw=0.5, alpha=0.6, color=f"C{j}")
        lo = min(t.mcmc_mean.min(), t.approx_mean.min())
        hi = max(t.mcmc_mean.max(), t.approx_mean.max())
        a.plot([lo, hi], [lo, hi], "k--", lw=1)
        title, sym = KIND_LABELS.get(k, (k, k))
        a.set(xlabel=f"NUTS mean of {sym}", ylabel=f"{approx_label} mean", title=title)
    return fig


def z_and_sd_ratio(table: pd.DataFrame, kinds=None):
    """Histograms of z (with the median noise floor ±e/s) and of the sd ratio."""
    fig, ax = _fig(2)
    for j, k in enumerate(_kinds(table, kinds)):
        c = f"C{j}"
        t = table[table.kind == k]
        if len(t):
            ax[0].hist(t.z, bins=30, alpha=0.6, color=c, label=k)
            ax[1].hist(t.sd_ratio, bins=30, alpha=0.6, color=c, label=k)
    nf = float(np.median(table.noise_floor))
    for x in (-nf, nf):
        ax[0].axvline(x, color="k", ls=":", lw=1)
    ax[0].axvspan(-0.1, 0.1, color="g", alpha=0.08)
    ax[0].set(xlabel="z = (E_q − m) / s   (dotted: MCSE noise floor)", ylabel="parameters")
    ax[1].axvspan(0.9, 1.1, color="g", alpha=0.08)
    ax[1].axvline(1.0, color="k", ls="--", lw=1)
    ax[1].set(xlabel="sd ratio sd_q / s", ylabel="parameters")
    ax[0].legend(frameon=False)
    return fig


def coverage(table: pd.DataFrame, kinds=None):
    """Per-parameter coverage of the MCMC draws by q's central 50 % and 90 % intervals."""
    fig, ax = _fig(2)
    for a, col, nominal in ((ax[0], "coverage_50", 0.5), (ax[1], "coverage_90", 0.9)):
        for j, k in enumerate(_kinds(table, kinds)):
            c = f"C{j}"
            t = table[table.kind == k]
            if len(t):
                a.hist(t[col], bins=np.linspace(0, 1, 41), alpha=0.6, color=c, label=k)
        a.axvline(nominal, color="k", ls="--", lw=1)
        a.set(xlabel=f"share of MCMC draws in q's central {int(nominal * 100)} % interval",
              ylabel="parameters")
    ax[0].legend(frameon=False)
    return fig


def forest_items(table: pd.DataFrame, idata, n_each: int = FOREST_EACH, seed: int = 0):
    """NUTS and online 50 %/90 % intervals for the top, bottom and a seeded random middle
    of the items (by NUTS mean): at most ``3 n_each`` rows, whatever the number of items."""
    from scipy import stats

    t = table[table.kind == "lambda"].sort_values("mcmc_mean", ascending=False)
    L = len(t)
    if L <= 3 * n_each:
        pick = t
    else:
        mid = t.iloc[n_each:L - n_each]
        rng = np.random.default_rng(seed)
        mid = mid.iloc[np.sort(rng.choice(len(mid), n_each, replace=False))]
        pick = pd.concat([t.iloc[:n_each], mid, t.iloc[L - n_each:]])
    lam = idata["posterior"]["lambda"]
    fig, ax = _fig(1, w=7, h=0.32 * len(pick) + 1.2)
    a = ax[0]
    for i, (_, row) in enumerate(pick.iterrows()):
        y = len(pick) - 1 - i
        x = np.asarray(lam.sel(item=row.id).values).ravel()
        q = np.quantile(x, [0.05, 0.25, 0.5, 0.75, 0.95])
        a.plot(q[[0, 4]], [y + 0.15] * 2, color="C0", lw=1)
        a.plot(q[[1, 3]], [y + 0.15] * 2, color="C0", lw=3.5)
        a.plot(q[2], y + 0.15, "o", color="white", mec="C0", ms=4)
        g = stats.norm(row.approx_mean, row.approx_sd).ppf([0.05, 0.25, 0.5, 0.75, 0.95])
        a.plot(g[[0, 4]], [y - 0.15] * 2, color="C3", lw=1)
        a.plot(g[[1, 3]], [y - 0.15] * 2, color="C3", lw=3.5)
        a.plot(g[2], y - 0.15, "o", color="white", mec="C3", ms=4)
    a.set_yticks(range(len(pick)), list(pick.id)[::-1], fontsize=7)
    a.plot([], [], color="C0", lw=3, label="NUTS")
    a.plot([], [], color="C3", lw=3, label="online")
    a.legend(frameon=False, loc="lower right")
    a.set(xlabel="λ (thick: 50 %, thin: 90 % central interval)",
          title=f"top {n_each}, random middle {n_each}, bottom {n_each} items by NUTS mean"
          if L > 3 * n_each else "all items")
    return fig


# ------------------------------------------------------------------ workers, ranking, order
def workers(w: dict):
    """``E[η_w^1]`` online vs NUTS (and vs the truth when known); the six lowest-quality
    workers of each method are marked ([Pan18], Sect. 5.3)."""
    on, nu = np.asarray(w["quality_online"]), np.asarray(w["quality_nuts"])
    ids = list(w["ids"])
    truth = w.get("quality_truth")
    fig, ax = _fig(2 if truth is not None else 1)
    a = ax[0]
    a.scatter(nu, on, s=12, alpha=0.7)
    low_on, low_nu = set(w["lowest_online"]), set(w["lowest_nuts"])
    for i, wid in enumerate(ids):
        if wid in low_on or wid in low_nu:
            a.scatter(nu[i], on[i], s=40, facecolors="none",
                      edgecolors="C3" if wid in low_on and wid in low_nu else "C1")
    lo, hi = min(on.min(), nu.min()), max(on.max(), nu.max())
    a.plot([lo, hi], [lo, hi], "k--", lw=1)
    a.set(xlabel="NUTS E[η¹]", ylabel="online E[η¹]",
          title=f"lowest {w['lowest_k']}: {w['lowest_overlap']} shared (red)")
    if truth is not None:
        t = np.asarray(truth)
        ax[1].scatter(t, nu, s=12, label="NUTS")
        ax[1].scatter(t, on, s=12, label="online", marker="x")
        ax[1].set(xlabel="true η¹ (simulation)", ylabel="E[η¹]")
        ax[1].legend(frameon=False)
    return fig


def order_sensitivity(order: dict):
    """Per item: spread of the online means over permutations vs their gap to MCMC, both
    in MCMC sds; above the line ``gap = 2 spread`` the order does not explain the gap."""
    sp, gap = np.asarray(order["per_item"]["spread"]), np.asarray(order["per_item"]["gap"])
    fig, ax = _fig(1, w=4.8)
    a = ax[0]
    a.scatter(sp, gap, s=10, alpha=0.6)
    hi = max(sp.max(), gap.max() / 2, 1e-3)
    a.plot([0, hi], [0, 2 * hi], "k--", lw=1, label="gap = 2 × spread")
    a.set(xlabel="sd of online mean over permutations / MCMC sd",
          ylabel="|online − MCMC mean| / MCMC sd")
    a.legend(frameon=False)
    return fig


def timings(rows: list[dict]):
    """Wall-clock seconds of each fit (log scale): ``rows`` of ``{"label", "seconds"}``."""
    fig, ax = _fig(1, w=6, h=0.35 * len(rows) + 1.2)
    a = ax[0]
    y = np.arange(len(rows))[::-1]
    a.barh(y, [max(r["seconds"], 1e-4) for r in rows],
           color=["C0" if "NUTS" in r["label"] else "C3" for r in rows])
    a.set_yticks(y, [r["label"] for r in rows], fontsize=8)
    a.set_xscale("log")
    a.set(xlabel="seconds (log scale)")
    return fig


def variants(rows: list[dict]):
    """Median |z| and median sd ratio of λ for each online variant (``rows`` of
    ``{"label", "median_abs_z", "median_sd_ratio"}``)."""
    fig, ax = _fig(2, w=4.2, h=0.35 * len(rows) + 1.4)
    y = np.arange(len(rows))[::-1]
    labels = [r["label"] for r in rows]
    ax[0].barh(y, [r["median_abs_z"] for r in rows], color="C0")
    ax[0].axvline(0.1, color="k", ls="--", lw=1)
    ax[0].set_yticks(y, labels, fontsize=8)
    ax[0].set(xlabel="median |z| of λ")
    ax[1].barh(y, [r["median_sd_ratio"] for r in rows], color="C1")
    ax[1].axvline(1.0, color="k", ls="--", lw=1)
    ax[1].set_yticks(y, labels, fontsize=8)
    ax[1].set(xlabel="median sd ratio of λ")
    return fig


def backend_agreement(ag):
    """Standardised difference of posterior means between two back-ends, per parameter."""
    import matplotlib.pyplot as plt

    t = ag.table
    fig, ax = plt.subplots(figsize=(7, 2.8))
    kinds = list(dict.fromkeys(t.kind))
    for k in kinds:
        sel = t[t.kind == k]
        ax.plot(sel.index, sel.z, "o", ms=3, label=k)
    for s in (-1, 1):
        ax.axhline(s * ag.z_max, ls="--", c="k", lw=0.8)
    ax.set_xlabel("parameter")
    ax.set_ylabel(f"z ({ag.labels[0]} − {ag.labels[1]})")
    ax.legend(frameon=False, fontsize=8)
    fig.tight_layout()
    return fig

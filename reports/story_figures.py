"""The figures of ``crowdrank story`` (:func:`crowdrank.reports.story.tell`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from crowdrank.models.registry import get
from crowdrank.models.simulate import WORKER_TYPES


def story_figures(figdir: Path, model, setting, eta, pred, zs, perms, st, e4, Z, plv, items
                  ) -> dict[str, Path]:
    """The story's five figures (files ``story_*.png`` in ``figdir``), by key."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    types = list(WORKER_TYPES)
    colors = dict(zip(types, ["#1b7837", "#5aae61", "#9970ab", "#c2a5cf"]))
    paths: dict[str, Path] = {}
    kw = {"dpi": 90, "bbox_inches": "tight"}

    # η by type
    fig, ax = plt.subplots(figsize=(6, 3.2))
    w = 0.2
    for j, t in enumerate(types):
        a = np.asarray(WORKER_TYPES[t])
        ax.bar(np.arange(4) + (j - 1.5) * w, a / a.sum(), w, label=t, color=colors[t])
    if len(eta) == 4 and get(model).has_eta:
        ax.plot(np.arange(4) + (types.index(setting) - 1.5) * w, eta, "ko", ms=5,
                label=f"our {setting}")
    ax.set_xticks(range(4), [f"η{t}" for t in "¹²³⁴"])
    ax.set_ylabel("E[η] under Dir(α0)")
    ax.set_title("Worker types: where the report comes from")
    ax.legend(fontsize=8, ncol=3)
    paths["eta"] = figdir / "story_eta_by_type.png"
    fig.savefig(paths["eta"], **kw)
    plt.close(fig)

    # agreement by type
    fig, ax = plt.subplots(figsize=(6, 3.2))
    x = np.arange(len(types))
    v = pred["types"]
    ax.bar(x - 0.2, [v[t]["top1_true"] for t in types], 0.4, label="top item = true winner",
           color="#4393c3")
    ax.bar(x + 0.2, [(v[t]["tau_true_mean"] + 1) / 2 for t in types], 0.4,
           label="pairs in true order", color="#f4a582")
    ax.set_xticks(x, types)
    ax.set_ylim(0, 1)
    ax.axhline(1 / pred["k"], color="grey", lw=0.8, ls=":")
    ax.set_ylabel("share of reports")
    ax.set_title(f"Report vs true order by worker type ({model}, k={pred['k']})")
    ax.legend(fontsize=8)
    paths["agreement"] = figdir / "story_agreement_by_type.png"
    fig.savefig(paths["agreement"], **kw)
    plt.close(fig)

    # Kendall tau distributions
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.2), sharey=True)
    for ax, key, title in ((axes[0], "tau_true_hist", "τ(report, true order)"),
                           (axes[1], "tau_lambda_hist", "τ(report, order by λ)")):
        vals = [float(s) for s in v[types[0]][key]]
        wd = (vals[1] - vals[0]) / 5 if len(vals) > 1 else 0.3
        for j, t in enumerate(types):
            ax.bar(np.array(vals) + (j - 1.5) * wd, list(v[t][key].values()), wd, label=t,
                   color=colors[t])
        ax.set_title(title)
        ax.set_xlabel("Kendall τ")
    axes[0].set_ylabel("share of reports")
    axes[1].legend(fontsize=8)
    fig.suptitle("Prior predictive Kendall τ per worker type", fontsize=10, y=1.03)
    paths["tau"] = figdir / "story_kendall_tau.png"
    fig.savefig(paths["tau"], **kw)
    plt.close(fig)

    # orderings
    order = np.argsort(-st)
    fig, ax = plt.subplots(figsize=(8, 3.2))
    x = np.arange(len(perms))
    ax.bar(x - 0.27, st[order], 0.27, label="story (simulator)", color="#4393c3")
    ax.bar(x, e4[order], 0.27, label=f"Eq. 4 (sums to {Z:.3f})", color="#d6604d")
    ax.bar(x + 0.27, (e4 / Z)[order], 0.27, label="normalised COUPLE", color="#92c5de")
    ax.set_xticks(x, ["".join(items[i] for i in perms[j]) for j in order], rotation=90,
                  fontsize=7)
    ax.set_ylabel("probability")
    ax.set_title("One task, every ordering")
    ax.legend(fontsize=8)
    paths["orderings"] = figdir / "story_orderings.png"
    fig.savefig(paths["orderings"], **kw)
    plt.close(fig)

    # normaliser
    fig, ax = plt.subplots(figsize=(6, 3.2))
    for kk, c in ((3, "#4393c3"), (4, "#d6604d")):
        ax.hist(zs[kk], bins=40, alpha=0.6, color=c, label=f"k = {kk}")
    ax.axvline(1.0, color="k", lw=1)
    ax.set_xlabel("Z = Σ over orderings of Eq. 4")
    ax.set_ylabel("tasks")
    ax.set_title("Eq. 4 is not normalised for k ≥ 3")
    ax.legend(fontsize=8)
    paths["normalizer"] = figdir / "story_normalizer.png"
    fig.savefig(paths["normalizer"], **kw)
    plt.close(fig)
    return paths

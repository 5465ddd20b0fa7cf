"""The prior predictive part of ``crowdrank story --prior-predictive``.

For each named inference prior (:data:`crowdrank.validation.prior_predictive.PRIOR_KINDS`) data sets
are drawn from the prior predictive with the model's own simulator and summarised with the
statistics of :mod:`crowdrank.validation.predictive_stats`; this module turns them into a Markdown
section, two figures, ``prior_predictive.json`` (summaries) and ``prior_predictive.csv``
(one row per draw, prior and worker).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from crowdrank.models.registry import get
from crowdrank.validation.prior_predictive import (
    PRIOR_KINDS,
    named_prior,
    prior_predictive,
    summary,
)


@dataclass
class PriorCheck:
    markdown: str
    facts: dict
    workers: pd.DataFrame
    figures: dict[str, Path] = field(default_factory=dict)


def _f(x, d=3) -> str:
    return f"{x:.{d}f}"


def _table(header, rows) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return "\n".join(out + ["| " + " | ".join(map(str, r)) + " |" for r in rows])


def check_priors(model: str = "couple", kinds=PRIOR_KINDS, *, n_draws: int = 100,
                 n_workers: int = 20, n_items: int = 30, tasks_per_worker: int = 30,
                 K: int = 4, a0: float = 10.0, a: float = 6.0, gold_tasks: int = 20,
                 seed: int = 0, out: str | Path | None = None, figures: bool = True,
                 progress: bool = False, heading: str = "##") -> PriorCheck:
    """Run the prior predictive for each prior in ``kinds`` and describe it.

    With ``out`` the two tables and the figures (``out/figures/prior_*.png``) are written.
    """
    spec = get(model)
    fam = spec.worker_prior
    K = 2 if spec.pairwise else K
    facts: dict = {"model": model, "K": K, "n_draws": n_draws, "n_workers": n_workers,
                   "n_items": n_items, "tasks_per_worker": tasks_per_worker, "seed": seed,
                   "priors": {}}
    tables = []
    for j, kind in enumerate(kinds):
        pri = named_prior(kind, model, n_workers, K, a0=a0, a=a, gold_tasks=gold_tasks,
                          seed=seed + 1000 + j)
        w, d = prior_predictive(model, pri, n_draws=n_draws, n_items=n_items,
                                tasks_per_worker=tasks_per_worker, k=K, seed=seed + j,
                                progress=progress)
        s = summary(w, d, K)
        alpha = pri.alpha[:, :K] if fam is None else fam.table(pri, K)
        s["spec"] = pri.spec
        s["alpha_first_worker"] = [float(x) for x in alpha[0]]
        s["alpha_mean"] = [float(x) for x in alpha.mean(axis=0)]
        facts["priors"][kind] = s
        w.insert(0, "prior", kind)
        tables.append(w)
    workers = pd.concat(tables, ignore_index=True)

    h = heading
    md = [f"{h} Prior predictive checks: what the inference priors imply\n"]
    what = "perfect workers (η = e₁) — only the λ prior matters" if fam is None else fam.describe
    md.append(
        f"Before any data is seen, the priors already say what a crowd reports. For each prior "
        f"we draw {n_draws} data sets from the prior predictive of `{model}`: fresh "
        f"λ ~ N(0, 1) and fresh worker qualities ({what}) for {n_workers} workers, each "
        f"giving {tasks_per_worker} tasks of k = {K} of {n_items} items, generated with the "
        "model's own simulator (the same code as `crowdrank simulate`). Each data set is "
        "summarised with the statistics the predictive checks use (validation.predictive_stats): "
        "the first-choice accuracy of every worker (is the reported top item the task's true "
        "winner?), the stage-by-stage rate of picking the best remaining item, and the share "
        "of rank-broken pairs in the true order and in the order by λ.\n")
    rows = []
    for kind, s in facts["priors"].items():
        qs = s["first_choice_quantiles"]
        rows.append([kind, ", ".join(f"{x:.3g}" for x in s["alpha_mean"]),
                     _f(s["eta1_mean"]), _f(s["first_choice_mean"]),
                     f"{_f(qs['0.05'], 2)} / {_f(qs['0.5'], 2)} / {_f(qs['0.95'], 2)}",
                     _f(s["worse_than_random"]), _f(s["pair_agreement_mean"]),
                     _f(s["pair_agreement_lambda_mean"])])
    md.append(_table(["prior", f"mean {'α' if fam is None else fam.table_label}",
                      "E[η¹] drawn", "first-choice accuracy", "per worker 5 % / 50 % / 95 %",
                      f"workers below 1/k = {1 / K:.2f}", "pairs in true order",
                      "pairs in λ order"], rows))
    if K > 2:
        md.append("\nStage by stage (share of choices that are the best remaining item of the "
                  "true order):\n")
        md.append(_table(["prior"] + [f"stage {i + 1} (of {K - i})" for i in range(K - 1)],
                         [[kind] + [_f(v) for v in s["stage_rates"]]
                          for kind, s in facts["priors"].items()]))
    md.append("\n" + _reading(facts, model, K))

    check = PriorCheck(markdown="", facts=facts, workers=workers)
    if out is not None:
        out = Path(out)
        (out / "figures").mkdir(parents=True, exist_ok=True)
        workers.to_csv(out / "prior_predictive.csv", index=False)
        (out / "prior_predictive.json").write_text(json.dumps(facts, indent=1) + "\n")
        if figures:
            check.figures = _figures(out / "figures", facts, workers, model, K)
            caps = {"first_choice": "Per-worker first-choice accuracy under each prior "
                                    "(prior predictive; dotted: a random worker, 1/k).",
                    "stages": "Stage rates and pair agreement under each prior."}
            for key, p in check.figures.items():
                md.append(f"\n![{caps[key]}](figures/{p.name})\n\n*{caps[key]}*\n")
    check.markdown = "\n".join(md) + "\n"
    return check


def _reading(facts: dict, model: str, K: int) -> str:
    p = facts["priors"]
    parts = []
    if "geometric" in p:
        g = p["geometric"]
        parts.append(
            f"- *geometric* (the paper's a0 = 10, a = 6): the concentrations are tiny "
            f"(α = {', '.join(f'{x:.3g}' for x in g['alpha_first_worker'])}), so each drawn "
            "η sits near a corner of the simplex. The prior expects good workers on average "
            f"(first-choice accuracy {g['first_choice_mean']:.2f}) but the per-worker spread "
            f"is wide: {100 * g['worse_than_random']:.1f} % of the simulated workers are worse "
            "than random at the first choice — the prior allows a few workers who are almost "
            "always wrong in the same way, and so lets the data decide who they are.")
    if "flat" in p:
        f = p["flat"]
        parts.append(
            f"- *flat* Dir(1, …, 1): the prior expects a random worker (first-choice accuracy "
            f"{f['first_choice_mean']:.2f} ≈ 1/k; pairs in true order "
            f"{f['pair_agreement_mean']:.2f} ≈ 0.5): reports carry no information about λ "
            "until the data say which workers are good. CrowdBT's likelihood is symmetric under "
            "(λ, η¹) → (−λ, 1 − η¹), so under a flat Beta(1, 1) the mirrored ranking with "
            "adversarial workers is exactly as probable as the right one.")
    if "gold" in p:
        q = p["gold"]
        parts.append(
            f"- *gold* (counts of a mixed crowd's gold tasks): each worker's prior is "
            f"concentrated near what that worker did on gold, so the prior predictive is a "
            f"mixture of the four worker types (first-choice accuracy "
            f"{q['first_choice_mean']:.2f}; 5 %–95 % per worker "
            f"{q['first_choice_quantiles']['0.05']:.2f}–"
            f"{q['first_choice_quantiles']['0.95']:.2f}).")
    if not get(model).has_eta:
        parts = [("- PL and BT have perfect workers: every prior gives the same reports, which "
                  "agree with the true order always and with λ only as much as "
                  "Plackett–Luce's own randomness allows.")]
    return ("Reading the table:\n\n" + "\n".join(parts) + "\n\nEven a perfect report agrees "
            "with the order by λ less often than with the true order: the true order of a task "
            "is itself a Plackett–Luce draw (the last column).\n")


def _figures(figdir: Path, facts: dict, workers: pd.DataFrame, model: str, K: int
             ) -> dict[str, Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = list(facts["priors"])
    colors = dict(zip(("geometric", "flat", "gold"), ("#2166ac", "#b2182b", "#1b7837")))
    kw = {"dpi": 90, "bbox_inches": "tight"}
    paths = {}
    fig, axes = plt.subplots(1, len(kinds), figsize=(3.2 * len(kinds), 3), sharey=True,
                             squeeze=False)
    bins = np.linspace(0, 1, 21)
    for ax, kind in zip(axes[0], kinds):
        v = workers.loc[workers["prior"] == kind, "first_choice_true"]
        ax.hist(v, bins=bins, color=colors.get(kind, "grey"), density=True)
        ax.axvline(1 / K, color="k", ls=":", lw=1)
        ax.set_title(kind, fontsize=10)
        ax.set_xlabel("first-choice accuracy")
    axes[0][0].set_ylabel("density over workers")
    fig.suptitle(f"Prior predictive per-worker accuracy ({model}, k = {K})", fontsize=10,
                 y=1.04)
    paths["first_choice"] = figdir / "prior_first_choice.png"
    fig.savefig(paths["first_choice"], **kw)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6.5, 3.2))
    labels = [f"stage {i + 1}" for i in range(K - 1)] + ["pairs, true", "pairs, λ"]
    x = np.arange(len(labels))
    wd = 0.8 / len(kinds)
    for j, kind in enumerate(kinds):
        s = facts["priors"][kind]
        vals = list(s["stage_rates"]) + [s["pair_agreement_mean"],
                                         s["pair_agreement_lambda_mean"]]
        ax.bar(x + (j - (len(kinds) - 1) / 2) * wd, vals, wd, label=kind,
               color=colors.get(kind, "grey"))
    ax.set_xticks(x, labels, fontsize=8)
    ax.set_ylim(0, 1)
    ax.set_ylabel("share")
    ax.set_title("Prior predictive: stage rates and pair agreement", fontsize=10)
    ax.legend(fontsize=8)
    paths["stages"] = figdir / "prior_stages.png"
    fig.savefig(paths["stages"], **kw)
    plt.close(fig)
    return paths

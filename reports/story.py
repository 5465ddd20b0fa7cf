"""The generative story, told for teaching (``crowdrank story``).

One small seeded example is walked through in words and numbers: true item scores, a worker's
uncertainty vector η, one task, its true order drawn from Plackett–Luce, then the worker's
report stage by stage (candidates, PL probabilities, η̄, the true winner, the offset drawn, the
item reported). The same example then shows that the paper's stagewise likelihood (Pan et al. 2018,
Eq. 4) does not sum to 1 over the ``k!`` orderings of a task for ``k >= 3``, how it differs
from the probability the stagewise story actually assigns, and what normalised COUPLE changes.
Figures show what the worker types do to the data (prior predictive) and how far the Eq. 4
normaliser strays from 1.

Everything is a deterministic function of ``seed``. :func:`tell` returns the Markdown, the
figure paths and the example's numbers (``facts``), which the tests check.
"""

from __future__ import annotations

import json
import string
from dataclasses import dataclass, field
from itertools import combinations, permutations
from pathlib import Path

import numpy as np
from scipy.special import softmax

from crowdrank.models.errors import UsageError
from crowdrank.models.likelihood import (
    couple_loglik,
    couple_normalizer,
    couple_stage_prob,
    crowdbt_pair_prob,
    eq4_all_orderings,
    pl_loglik,
)
from crowdrank.models.registry import get
from crowdrank.models.simulate import (
    WORKER_TYPES,
    couple_normalized_report,
    pl_true_order,
    sim_models,
    simulate,
    worker_alpha0,
)
from crowdrank.validation.predictive_stats import kendall_tau, order_by_scores, summarise

from .story_figures import story_figures

COUPLE_FAMILY = ("couple", "couple-normalized")


@dataclass
class Story:
    markdown: str
    facts: dict
    figures: dict[str, Path] = field(default_factory=dict)
    path: Path | None = None
    html_path: Path | None = None


# ------------------------------------------------------------------------------ numbers
def _etabar(eta: np.ndarray, m: int) -> np.ndarray:
    a = np.asarray(eta, float)[:m]
    return a / a.sum()


def story_report_prob(lam, eta, subset, reported) -> float:
    """Probability that the stagewise *story* (the simulator of ``couple``) produces
    ``reported``: the sum over true orders τ of PL(τ | λ) × Π_i η̄_{t_i}, where ``t_i`` is
    the offset of the reported item in what remains of τ."""
    total = 0.0
    for tau in permutations(subset):
        p = np.exp(pl_loglik(lam, np.array(tau)))
        rem = list(tau)
        for i, item in enumerate(reported[:-1]):
            t = rem.index(item)
            p *= _etabar(eta, len(subset) - i)[t]
            rem.pop(t)
        total += p
    return float(total)


def eq4_normalizers(lam: np.ndarray, eta: np.ndarray, k: int) -> np.ndarray:
    """Vectorised Eq. 4 normaliser ``Z`` for ``n`` tasks of ``k`` items:
    ``lam`` ``(n, k)`` scores of the task's items, ``eta`` ``(n, >=k)``."""
    _, logp = eq4_all_orderings(lam, eta[:, :k])
    return np.exp(logp).sum(1)


def kendall_tau_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Kendall τ between two orderings of the same items, row by row (``(n, k)`` each)."""
    n, k = a.shape
    pos = (b[:, None, :] == a[:, :, None]).argmax(-1)   # where each item of a sits in b
    s = np.zeros(n)
    for i, j in combinations(range(k), 2):
        s += np.sign(pos[:, j] - pos[:, i])
    return s / (k * (k - 1) / 2)


# ------------------------------------------------------------------------------ formatting
def _f(x: float, d: int = 3) -> str:
    return f"{x:.{d}f}"


def _table(header: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def _seq(ids) -> str:
    return " > ".join(ids)


# ------------------------------------------------------------------------------ the story
def tell(model: str = "couple", setting: str = "amateur", seed: int = 0, *,
         out: str | Path | None = None, n_items: int = 8, markdown_name: str = "story.md",
         figures: bool = True, predictive_workers: int = 60, predictive_tasks: int = 50,
         prior_check: dict | None = None, html: bool = True) -> Story:
    """Tell the generative story of ``model`` for a worker of type ``setting``.

    With ``out`` the Markdown is written to ``out/markdown_name`` and the figures to
    ``out/figures/story_*.png`` (linked as ``figures/...``), plus ``out/story.json`` and,
    with ``html``, the same story as one self-contained page beside the Markdown
    (``story.md`` → ``story.html``, figures embedded). ``prior_check`` (keyword arguments
    of :func:`crowdrank.reports.prior.check_priors`, ``{}`` for its defaults) adds section 8, the
    prior predictive checks of the inference priors, and writes
    ``out/prior_predictive.{json,csv}``.
    """
    if model not in sim_models():
        raise UsageError(f"unknown model {model!r}; expected one of {sim_models()}")
    if setting not in WORKER_TYPES:
        raise UsageError(f"unknown worker type {setting!r}; expected one of "
                         f"{tuple(WORKER_TYPES)}")
    if not 4 <= n_items <= 26:
        raise UsageError("n_items must be between 4 and 26")
    spec = get(model)
    k = 2 if spec.pairwise else 4
    tale = _Tale(model, setting, seed, spec, k, list(string.ascii_uppercase[:n_items]),
              np.random.default_rng(seed), (predictive_workers, predictive_tasks))
    tale.facts.update({"model": model, "setting": setting, "seed": seed, "k": k})
    for section in (_items, _worker, _task, _report, _likelihood, _normalisation,
                    _predictive):
        section(tale)
    return _finish(tale, out, markdown_name, figures, prior_check, html)


@dataclass
class _Tale:
    """What the story's sections share while it is told: the seeded streams, the example's
    draws as each section makes them, and the Markdown and facts collected so far."""

    model: str
    setting: str
    seed: int
    spec: object
    k: int
    items: list
    rng: np.random.Generator
    predictive: tuple[int, int]
    md: list = field(default_factory=list)
    facts: dict = field(default_factory=dict)
    lam: np.ndarray | None = None
    eta: np.ndarray | None = None
    subset: np.ndarray | None = None
    true: np.ndarray | None = None
    check_rng: np.random.Generator | None = None
    n_chk: int = 0
    reported: np.ndarray | None = None
    orderings: tuple = ()
    pred: dict | None = None
    zs: dict | None = None


def _items(tale: _Tale) -> None:
    """The items and their true scores λ (section 1)."""
    md, facts, rng, items = tale.md, tale.facts, tale.rng, tale.items
    n_items = len(items)
    model, setting, seed = tale.model, tale.setting, tale.seed
    lam = rng.normal(0.0, 1.0, size=n_items)
    by_score = np.argsort(-lam)
    md.append(f"# The generative story of `{model}`, told on one example\n")
    md.append(
        f"*Generated by `crowdrank story --model {model} --setting {setting} --seed {seed}`: "
        "every number below is drawn from that seed, so the same command tells the same "
        "story.* The models are those of docs/design.md (Pan et al. 2018: COUPLE, Eq. 3–4; CrowdBT of "
        "Chen et al. 2013; Plackett–Luce and Bradley–Terry).\n")
    md.append("## 1. Items and their true scores\n")
    md.append(
        f"There are {n_items} items, `{items[0]}` to `{items[-1]}`. Each has a true score "
        "λ drawn from the prior λ ~ Normal(0, 1); a higher score means a better item. "
        "Nobody observes λ: the whole point of the models is to infer it from what the "
        "crowd reports.\n")
    md.append(_table(["rank by λ", "item", "λ"],
                     [[str(r + 1), items[i], _f(lam[i])] for r, i in enumerate(by_score)]))
    facts["lambda"] = {items[i]: float(lam[i]) for i in range(n_items)}
    tale.lam = lam


def _worker(tale: _Tale) -> None:
    """The worker and the uncertainty vector η (section 2)."""
    md, facts, rng, spec = tale.md, tale.facts, tale.rng, tale.spec
    pairwise = spec.pairwise
    model, setting, K = tale.model, tale.setting, tale.k
    md.append("\n## 2. The worker and the uncertainty vector η\n")
    md.append(
        "A worker is described by an *uncertainty vector* η = (η¹, …, η^K), a probability "
        "vector: at each place of the report, ηᵗ is the chance that the worker reports the "
        "item at offset t of the true order of the items still on the table (Pan et al. 2018, "
        "Sect. 3.2). η¹ is being right; η², η³, … are increasingly bad slips. The paper's "
        "worker types draw η from a Dirichlet with these concentrations α0 (Sect. 5.2):\n")
    rows = []
    for name, a in WORKER_TYPES.items():
        a = np.asarray(a)
        rows.append([("**" + name + "**") if name == setting else name,
                     ", ".join(f"{x:g}" for x in a),
                     ", ".join(_f(x, 2) for x in a / a.sum())])
    md.append(_table(["type", "α0", "E[η] = α0 / Σα0"], rows))
    if not spec.has_eta:
        eta = np.zeros(K)
        eta[0] = 1.0
        md.append(
            f"\nUnder `{model}` workers are perfect: η = (1, 0, …), whatever their type "
            "(the type matters for CrowdBT and COUPLE only), so the report below is the "
            "true order itself.\n")
    else:
        a0 = worker_alpha0(setting, K)
        eta = rng.dirichlet(a0)
        eta = np.maximum(eta, 1e-300)
        eta /= eta.sum()
        what = ("η¹ is CrowdBT's accuracy (the chance of reporting a pair the right way "
                "round) and Dir(α1, α2) is the Beta(a, b) prior of CrowdBT"
                if pairwise else "its length is K = 4, the largest task size")
        md.append(
            f"\nOur worker is {'an' if setting[0] in 'aeiou' else 'a'} **{setting}**. Drawing η ~ Dir({', '.join(f'{x:g}' for x in a0)}) "
            f"gave η = ({', '.join(_f(x) for x in eta)}); {what}.\n")
    facts["eta"] = [float(x) for x in eta]
    tale.eta = eta


def _task(tale: _Tale) -> None:
    """A task and its true order, with the check of the Gumbel trick (section 3)."""
    md, facts, rng, items = tale.md, tale.facts, tale.rng, tale.items
    n_items = len(items)
    k, lam, seed = tale.k, tale.lam, tale.seed
    subset = rng.choice(n_items, size=k, replace=False)
    g = rng.gumbel(size=k)
    true = subset[np.argsort(-(lam[subset] + g), kind="stable")]
    md.append("\n## 3. A task and its true order\n")
    md.append(
        f"A task is a random subset of k = {k} items: {', '.join(items[i] for i in subset)}. "
        "Its *true order* is itself random: it is drawn from Plackett–Luce with the true "
        "scores, by the Gumbel trick (add an independent standard Gumbel draw to each λ and "
        "sort; this is exactly PL). A better item is more likely, but not certain, to come "
        "first.\n")
    md.append(_table(["item", "λ", "Gumbel", "λ + Gumbel"],
                     [[items[i], _f(lam[i]), _f(gg), _f(lam[i] + gg)]
                      for i, gg in sorted(zip(subset, g), key=lambda z: -(lam[z[0]] + z[1]))]))
    md.append(f"\nTrue order: **{_seq(items[i] for i in true)}** (PL probability "
              f"{_f(np.exp(pl_loglik(lam, true)))}).\n")
    facts["task"] = [items[i] for i in subset]
    facts["true_order"] = [items[i] for i in true]
    # the checks draw from their own stream, so the example itself stays what it was
    check_rng = np.random.default_rng([seed, 3])
    n_chk = 20_000
    many = pl_true_order(check_rng, lam, np.repeat(subset[None], n_chk, axis=0))
    won = np.array([np.mean(many[:, 0] == i) for i in subset])
    sm = softmax(lam[subset])
    md.append(
        "Check of the Gumbel trick with the simulator (`models.simulate.pl_true_order`): in "
        f"{n_chk:,} fresh draws of this task's true order, the share of draws each item came "
        "first, against Plackett–Luce's softmax(λ) over the task:\n")
    md.append(_table(["item", "first in simulated orders", "softmax(λ)"],
                     [[items[i], _f(w), _f(q)] for i, w, q in zip(subset, won, sm)]))
    md.append("")
    facts["gumbel_check"] = {"n": n_chk, "simulated": won.tolist(), "softmax": sm.tolist()}
    tale.subset, tale.true, tale.check_rng, tale.n_chk = subset, true, check_rng, n_chk


def _report(tale: _Tale) -> None:
    """What the worker reports, stage by stage (section 4)."""
    md, facts, rng, items = tale.md, tale.facts, tale.rng, tale.items
    spec, k = tale.spec, tale.k
    lam, eta, true, subset = tale.lam, tale.eta, tale.true, tale.subset
    md.append("## 4. What the worker reports, stage by stage\n")
    stages = []
    if spec.normalized:
        perms = [np.array(p) for p in permutations(true)]
        z = couple_normalizer(lam, eta, true)
        probs = np.array([np.exp(couple_loglik(lam, eta, p)) / z for p in perms])
        u = rng.random()
        j = int(min(np.searchsorted(np.cumsum(probs), u, side="right"), len(perms) - 1))
        reported = perms[j]
        md.append(
            "Normalised COUPLE has no stagewise story that matches it exactly, so its sampler "
            "draws the whole reported ordering at once: every one of the "
            f"{len(perms)} orderings gets its Eq. 4 product divided by the sum over all "
            f"orderings (Z = {_f(z, 4)}), and one is drawn with those probabilities "
            f"(u = {_f(u)}). The stagewise walk of `couple` is told by "
            "`crowdrank story --model couple`; the table in section 6 lists these "
            "probabilities.\n")
    else:
        md.append(
            "The worker builds the report one place at a time. At stage i the candidates are "
            "the m = k − i + 1 items not yet reported, listed in their *true* order, so the "
            "first candidate is the true winner of this stage. Only the first m entries of η "
            "can be used, so they are renormalised: η̄ᵗ = ηᵗ / (η¹ + … + ηᵐ). The worker "
            "draws an offset t with probabilities η̄ (a uniform u against the cumulative "
            "η̄) and reports the candidate at that offset. The PL column is softmax(λ) over "
            "the candidates: the chance each would win this stage under Plackett–Luce, "
            "which is what the *likelihood* uses (section 5).\n")
        rem = list(true)
        reported = []
        rows = []
        for i in range(k - 1):
            m = k - i
            eb = _etabar(eta, m)
            pl = softmax(lam[rem])
            u = rng.random()
            t = int(min(np.searchsorted(np.cumsum(eb), u, side="right"), m - 1))
            pick = rem[t]
            stages.append({"stage": i + 1, "candidates": [items[x] for x in rem],
                           "pl": pl.tolist(), "etabar": eb.tolist(), "u": float(u),
                           "offset": t + 1, "reported": items[pick],
                           "true_winner": items[rem[0]]})
            rows.append([str(i + 1), " ".join(items[x] for x in rem), str(m),
                         " ".join(_f(x, 2) for x in pl), " ".join(_f(x, 2) for x in eb),
                         items[rem[0]], _f(u), str(t + 1),
                         f"**{items[pick]}**" + ("" if t == 0 else " (a slip)")])
            reported.append(pick)
            rem.pop(t)
        reported.append(rem[0])
        reported = np.array(reported)
        md.append(_table(["stage i", "candidates (true order)", "m", "PL softmax(λ)",
                          "η̄", "true winner", "u", "offset t", "reported"], rows))
        md.append(f"\nThe last item, {items[rem[0]]}, takes the last place.\n")
    slips = int(sum(s["offset"] > 1 for s in stages))
    md.append(f"Reported ranking: **{_seq(items[i] for i in reported)}**; true order "
              f"{_seq(items[i] for i in true)}; order by λ "
              f"{_seq(items[i] for i in subset[np.argsort(-lam[subset])])}."
              + (f" The worker slipped at {slips} stage(s)." if stages else "") + "\n")
    facts["stages"] = stages
    facts["reported"] = [items[i] for i in reported]
    tale.reported = reported


def _likelihood(tale: _Tale) -> None:
    """The report's likelihood under Eq. 4 (section 5)."""
    md, facts, items, k = tale.md, tale.facts, tale.items, tale.k
    pairwise = tale.spec.pairwise
    lam, eta, reported = tale.lam, tale.eta, tale.reported
    md.append("## 5. How likely is this report? The paper's stagewise likelihood (Eq. 4)\n")
    md.append(
        "The likelihood does not know the true order: it sees only the reported ranking ρ. "
        "COUPLE (Pan et al. 2018, Eq. 3) scores stage i by mixing, with weights η̄, the PL "
        "probabilities of the candidates ρ(i), ρ(i+1), … *in reported order*: "
        "P(stage i) = Σₜ η̄ᵗ · softmax(λ_{ρ(i..k)})[ρ(i+t−1)]. Eq. 4 is the product over "
        "stages. With η = (1, 0, …) it is Plackett–Luce; with k = 2 it is CrowdBT.\n")
    rows = []
    for i in range(k - 1):
        cand = reported[i:]
        sp = couple_stage_prob(lam, eta, cand)
        pl = softmax(lam[cand])
        rows.append([str(i + 1), " ".join(items[x] for x in cand),
                     " ".join(_f(x, 2) for x in pl),
                     " ".join(_f(x, 2) for x in _etabar(eta, len(cand))), _f(sp, 4)])
    md.append(_table(["stage", "candidates (reported order)", "softmax(λ)", "η̄",
                      "P(stage) = η̄ · softmax"], rows))
    eq4 = float(np.exp(couple_loglik(lam, eta, reported)))
    plp = float(np.exp(pl_loglik(lam, reported)))
    md.append(f"\nEq. 4 = product of the stages = **{_f(eq4, 4)}**; Plackett–Luce alone "
              f"(a perfect worker) gives {_f(plp, 4)}.")
    if pairwise:
        md.append(f" For a pair this is CrowdBT: η¹·σ(Δλ) + (1 − η¹)·σ(−Δλ) = "
                  f"{_f(crowdbt_pair_prob(lam[reported[0]], lam[reported[1]], eta[0]), 4)}.")
    md.append("\n")
    facts["eq4_report"] = eq4


def _normalisation(tale: _Tale) -> None:
    """Eq. 4 over all orderings, and normalised COUPLE (section 6)."""
    md, facts, rng, items = tale.md, tale.facts, tale.rng, tale.items
    n_items = len(items)
    model, setting, lam, eta, true = tale.model, tale.setting, tale.lam, tale.eta, tale.true
    check_rng, n_chk = tale.check_rng, tale.n_chk
    md.append("## 6. Eq. 4 does not sum to 1 over orderings (k ≥ 3); normalised COUPLE\n")
    if model in COUPLE_FAMILY:
        eta_c, sub_c = eta, true
        intro = "On our task and worker"
    else:
        a0 = worker_alpha0(setting, 4)
        eta_c = rng.dirichlet(a0)
        eta_c = np.maximum(eta_c, 1e-300) / np.maximum(eta_c, 1e-300).sum()
        sub_c = rng.choice(n_items, size=4, replace=False)
        sub_c = sub_c[np.argsort(-lam[sub_c])]
        intro = (f"`{model}` itself is normalised, so we borrow a COUPLE {setting} worker, "
                 f"η = ({', '.join(_f(x) for x in eta_c)}), and a 4-item task "
                 f"{', '.join(items[i] for i in sub_c)} with the same λ. On them")
    kc = len(sub_c)
    perms = [np.array(p) for p in permutations(sub_c)]
    e4 = np.array([np.exp(couple_loglik(lam, eta_c, p)) for p in perms])
    Z = float(couple_normalizer(lam, eta_c, sub_c))
    st = np.array([story_report_prob(lam, eta_c, list(sub_c), list(p)) for p in perms])
    plv = np.array([np.exp(pl_loglik(lam, p)) for p in perms])
    md.append(
        f"{intro}, list all {kc}! = {len(perms)} orderings a worker could report and "
        "compute, for each: the probability the *stagewise story* of section 4 produces it "
        "(the simulator of `couple`: a PL true order, then the worker's slips), the paper's "
        "Eq. 4 product, and normalised COUPLE (Eq. 4 divided by its sum Z over the "
        "orderings), beside the frequencies of normalised COUPLE's exact sampler (the "
        "simulator of `couple-normalized`).\n")
    # normalised COUPLE's exact sampler (the simulator of `couple-normalized`) on this task
    rep = couple_normalized_report(check_rng, lam, np.repeat(np.asarray(sub_c)[None], n_chk, 0),
                                   np.repeat(np.asarray(eta_c)[None, :kc], n_chk, 0))
    where = {tuple(int(x) for x in p): j for j, p in enumerate(perms)}
    freq = np.bincount([where[tuple(int(x) for x in r)] for r in rep],
                       minlength=len(perms)) / n_chk
    order = np.argsort(-st)
    rows = [[_seq(items[i] for i in perms[j]), _f(st[j], 4), _f(e4[j], 4), _f(e4[j] / Z, 4),
             _f(freq[j], 4), _f(plv[j], 4)] for j in order]
    rows.append(["**sum**", f"**{_f(st.sum(), 4)}**", f"**{_f(e4.sum(), 4)}**",
                 f"**{_f((e4 / Z).sum(), 4)}**", f"**{_f(freq.sum(), 4)}**",
                 f"**{_f(plv.sum(), 4)}**"])
    md.append(_table(["ordering", "story (simulator)", "Eq. 4", "normalised COUPLE",
                      f"normalised, {n_chk:,} simulated", "PL (perfect worker)"], rows))
    tv_story_eq4 = 0.5 * float(np.abs(st - e4 / Z).sum())
    md.append(
        f"\nThe Eq. 4 column sums to **Z = {_f(Z, 4)}**, not 1: Eq. 4 is not a probability "
        "distribution over orderings for k ≥ 3, and Z depends on λ and η (section 7 shows "
        "how much). Three observations:\n\n"
        "- *Inference on Eq. 4* (NUTS on the paper's model, and OnlineGBMM, which "
        "approximates it) is the posterior of the paper's model, but that model has no "
        "simulator: no process generates rankings with probabilities proportional to Eq. 4 "
        "without dividing by Z.\n"
        "- *Normalised COUPLE* divides each ranking's Eq. 4 by its task's Z (feasible for "
        "k ≤ 6). It is a proper distribution with an exact sampler (draw the whole ordering), "
        "so simulation-based calibration can use it.\n"
        "- The stagewise *story* is yet another distribution (total variation distance to "
        f"normalised COUPLE here: {_f(tv_story_eq4, 3)}): it describes how a worker slips "
        "relative to a true order, whereas Eq. 4 scores the reported order directly.\n")
    # k = 2: all coincide
    pair = sub_c[:2]
    z2 = couple_normalizer(lam, eta_c, pair)
    md.append(
        f"For a pair all of this disappears: on {items[pair[0]]}, {items[pair[1]]} the two "
        f"orderings' Eq. 4 values sum to {_f(z2, 6)}, and Eq. 4 is exactly CrowdBT.\n")
    facts["normalizer"] = {"Z": Z, "k": kc, "eq4_sum": float(e4.sum()),
                           "normalized_sum": float((e4 / Z).sum()),
                           "story_sum": float(st.sum()), "pl_sum": float(plv.sum()),
                           "Z_pair": float(z2), "tv_story_vs_normalized": tv_story_eq4,
                           "sampler_max_gap": float(np.abs(freq - e4 / Z).max()),
                           "sampler_draws": n_chk}
    tale.orderings = (perms, st, e4, Z, plv)


def _predictive(tale: _Tale) -> None:
    """What the worker types do to the data: the prior predictive (section 7)."""
    md, facts, rng, model = tale.md, tale.facts, tale.rng, tale.model
    predictive_workers, predictive_tasks = tale.predictive
    md.append("## 7. What the worker types do to the data (prior predictive)\n")
    pred = prior_predictive(model, rng, predictive_workers, predictive_tasks)
    zs = {kk: eq4_normalizers(*_random_tasks(rng, kk, 4000), kk) for kk in (3, 4)}
    md.append(
        f"For each worker type we simulate {predictive_workers} workers × "
        f"{predictive_tasks} tasks of k = {pred['k']} items under `{model}` (fresh λ, η for "
        "every worker) and compare what they report with the task's true order and with "
        "the order by λ. Kendall τ is +1 for the same order and −1 for the reverse.\n")
    rows = [[t, _f(v["top1_true"], 3), _f(v["pairs_true"], 3), _f(v["tau_true_mean"], 3),
             _f(v["tau_lambda_mean"], 3)] for t, v in pred["types"].items()]
    md.append(_table(["worker type", "P(top item = true winner)", "pairs in true order",
                      "mean τ(report, true order)", "mean τ(report, λ order)"], rows))
    md.append(
        "\nExperts almost always reproduce the true order; amateurs slip to the runner-up "
        "often; spammers are close to random; malicious workers prefer the second-best "
        "candidate, so their reports are anti-correlated with the truth at the top. Even a "
        "perfect report agrees with λ only as well as Plackett–Luce lets the true order do "
        "(the right column).\n")
    md.append(
        f"Across random tasks (λ ~ N(0,1), η ~ Dir(α0) of a random type), the Eq. 4 "
        f"normaliser ranged over [{_f(zs[3].min(), 3)}, {_f(zs[3].max(), 3)}] for k = 3 and "
        f"[{_f(zs[4].min(), 3)}, {_f(zs[4].max(), 3)}] for k = 4 (median "
        f"{_f(np.median(zs[3]), 3)} and {_f(np.median(zs[4]), 3)}).\n")
    facts["prior_predictive"] = pred
    facts["Z_range"] = {str(kk): [float(v.min()), float(np.median(v)), float(v.max())]
                        for kk, v in zs.items()}
    tale.pred, tale.zs = pred, zs


def _finish(tale: _Tale, out, markdown_name: str, figures: bool, prior_check: dict | None,
            html: bool) -> Story:
    """Figures, the prior check (section 8), the command that reproduces the story,
    and the files."""
    md, facts, model, setting, seed = tale.md, tale.facts, tale.model, tale.setting, tale.seed
    eta, pred, zs, items = tale.eta, tale.pred, tale.zs, tale.items
    perms, st, e4, Z, plv = tale.orderings
    story = Story(markdown="", facts=facts)
    if out is not None:
        out = Path(out)
        figdir = out / "figures"
        figdir.mkdir(parents=True, exist_ok=True)
        if figures:
            story.figures = story_figures(figdir, model, setting, eta, pred, zs, perms, st, e4, Z,
                                     plv, items)
            md.append("### Figures\n")
            captions = {
                "eta": "Expected η per worker type (bars) and our worker's η (dots).",
                "agreement": "How often the report agrees with the truth, per worker type.",
                "tau": "Kendall τ between report and true order, per worker type.",
                "orderings": "The example's orderings: story vs Eq. 4 vs normalised COUPLE.",
                "normalizer": "The Eq. 4 normaliser Z over random tasks (1 = normalised).",
            }
            for key, p in story.figures.items():
                md.append(f"![{captions[key]}](figures/{p.name})\n\n*{captions[key]}*\n")
    if prior_check is not None:
        from crowdrank.reports.prior import check_priors

        check = check_priors(model, **dict({"seed": seed, "figures": figures},
                                           **prior_check), out=out, heading="## 8.")
        md.append(check.markdown)
        story.figures.update({f"prior_{k}": p for k, p in check.figures.items()})
        facts["prior_check"] = check.facts
    md.append("## Reproduce\n")
    md.append(f"```\ncrowdrank story --model {model} --setting {setting} --seed {seed} "
              + ("--prior-predictive " if prior_check is not None else "")
              + "--out story-out\n```\n")
    story.markdown = "\n".join(md)
    if out is not None:
        story.path = out / markdown_name
        story.path.write_text(story.markdown)
        (out / "story.json").write_text(json.dumps(facts, indent=1, default=float) + "\n")
        if html:
            from crowdrank.reports.story_html import story_page

            story.html_path = story_page(story.markdown, out,
                                         out / (Path(markdown_name).stem + ".html"))
    return story


def _random_tasks(rng, k: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    lam = rng.normal(size=(n, k))
    types = list(WORKER_TYPES)
    eta = np.stack([rng.dirichlet(worker_alpha0(types[j], k))
                    for j in rng.integers(0, len(types), size=n)])
    return lam, np.maximum(eta, 1e-300)


def prior_predictive(model: str, rng, n_workers: int = 60, n_tasks: int = 50) -> dict:
    """Per worker type: top-1 agreement with the true winner and Kendall τ between the report
    and (a) the task's true order, (b) the order by λ, from the model's own simulator."""
    k = 2 if get(model).pairwise else 4
    out = {"k": k, "types": {}}
    for t in WORKER_TYPES:
        sim = simulate(model, n_items=30, n_workers=n_workers, tasks_per_worker=n_tasks,
                       kmin=k, kmax=k, setting=t, seed=int(rng.integers(2**31)))
        # the statistics of the predictive checks (validation.predictive_stats)
        data = sim.rankings
        s_true = summarise(data, sim.true_order)
        tau_t = kendall_tau(data, sim.true_order)
        tau_l = kendall_tau(data, order_by_scores(data, sim.lam))
        vals = np.round(np.linspace(-1, 1, k * (k - 1) // 2 + 1), 6)
        out["types"][t] = {
            "top1_true": s_true["first_choice"],
            "pairs_true": s_true["pair_agreement"],
            "stage_rates_true": s_true["stage_rate"],
            "tau_true_mean": float(tau_t.mean()),
            "tau_lambda_mean": float(tau_l.mean()),
            "tau_true_hist": {f"{v:g}": float(np.mean(np.isclose(tau_t, v))) for v in vals},
            "tau_lambda_hist": {f"{v:g}": float(np.mean(np.isclose(tau_l, v))) for v in vals},
        }
    return out

"""Write the tutorial notebooks (``docs/tutorials/*.ipynb``) from the cells below.

The notebooks are stored *without outputs*: the test suite executes every one of them
(``tests/test_tutorials.py``, with ``nbclient``), so stored outputs would only be a second,
possibly stale copy of what the code prints, and their embedded figures would make every
change a large binary diff. Edit the cells here, then run::

    .venv/bin/python docs/tutorials/make_notebooks.py

and commit the script and the notebooks together (a test checks that they agree).
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent

PANDAS = """pd.set_option("display.precision", 3)
pd.set_option("display.width", 120)"""
SETUP = "import numpy as np\nimport pandas as pd\n\n" + PANDAS
SETUP_PLT = "import matplotlib.pyplot as plt\n" + SETUP
SETUP_NUTS = ("import numpy as np\nimport pandas as pd\n\n"
              "from crowdrank.inference.nuts import configure_host_devices\n\n" + PANDAS + """
configure_host_devices()      # one XLA CPU device per chain: before JAX starts""")

# ============================================================================ 1. the story
STORY = [
    ("md", """\
# 1. The generative story

Every model in crowdrank is a *story of how the data were made*. Inference runs the story
backwards, so before fitting anything we run it forwards: item scores λ, a worker's
uncertainty vector η, a task, its true order, and what the worker reports, one stage at a
time (COUPLE, Pan et al. 2018, Sect. 3.2; the models are in `docs/design.md`).

Everything below uses the package's own simulator (`models.simulate`), the same code as
`crowdrank simulate`, and every random choice takes a seed. The command `make story`
(`crowdrank story --out story-out`) tells the same story on one example and writes it as
`story-out/story.md` and as a single HTML page, `story-out/story.html`."""),
    ("code", SETUP),
    ("md", """\
## Items and their scores

Each item has a true score λ ~ Normal(0, 1). Nobody observes λ; the crowd's rankings are
noisy evidence about it."""),
    ("code", """\
rng = np.random.default_rng(0)
items = list("ABCDEFGH")
lam = rng.normal(0.0, 1.0, size=len(items))
pd.DataFrame({"item": items, "lambda": lam}).sort_values("lambda", ascending=False)"""),
    ("md", """\
## A worker and the uncertainty vector η

At each stage of a report, ηᵗ is the chance that the worker reports the item at offset t of
the true order of the items still on the table: η¹ is being right, η², η³, … are worse and
worse slips. The paper's four worker types draw η from a Dirichlet with concentrations α0
(Sect. 5.2):"""),
    ("code", """\
from crowdrank.models.simulate import WORKER_TYPES, worker_alpha0

types = pd.DataFrame(WORKER_TYPES, index=["α1", "α2", "α3", "α4"]).T
types["E[η¹]"] = types["α1"] / types[["α1", "α2", "α3", "α4"]].sum(axis=1)
types"""),
    ("code", """\
eta = rng.dirichlet(worker_alpha0("amateur", 4))
print("an amateur's η:", np.round(eta, 3))"""),
    ("md", """\
## A task and its true order (the Gumbel trick)

A task is a random subset of k items. Its *true order* is itself random: a draw from
Plackett–Luce with the scores λ. Adding an independent standard Gumbel variable to each λ
and sorting gives exactly that draw — which is how the simulator does it
(`models.simulate.pl_true_order`)."""),
    ("code", """\
from crowdrank.models.simulate import pl_true_order, sample_subsets

task = sample_subsets(rng, len(items), 4, 1)          # one task of k = 4 items
true = pl_true_order(rng, lam, task)[0]
print("task:", [items[i] for i in task[0]], " true order:", " > ".join(items[i] for i in true))"""),
    ("md", """\
Check the Gumbel trick against Plackett–Luce's own formula: the chance that item `i` wins a
task is softmax(λ) over the task's items."""),
    ("code", """\
from scipy.special import softmax

many = pl_true_order(rng, lam, np.repeat(task, 20000, axis=0))
winners = pd.Series(many[:, 0]).value_counts(normalize=True).reindex(task[0], fill_value=0)
assert np.allclose(winners.to_numpy(), softmax(lam[task[0]]), atol=0.015)   # 4 standard errors
pd.DataFrame({"item": [items[i] for i in task[0]],
              "simulated P(first)": winners.to_numpy(),
              "softmax(λ)": softmax(lam[task[0]])})"""),
    ("md", """\
## The worker's slips, stage by stage

With m items left, the worker uses only the first m entries of η, renormalised:
η̄ᵗ = ηᵗ / (η¹ + … + ηᵐ), draws an offset t with these probabilities, and reports the item
at offset t of the remaining true order (`models.simulate.couple_report`).
`reports.story.tell` narrates one such report stage by stage (on its own seeded example,
the one `crowdrank story --seed 0` tells):"""),
    ("code", """\
from crowdrank.reports.story import tell

story = tell("couple", "amateur", seed=0, figures=False, html=False,
             predictive_workers=20, predictive_tasks=20)
pd.DataFrame(story.facts["stages"])[["stage", "candidates", "etabar", "true_winner", "u",
                                      "offset", "reported"]]"""),
    ("md", """\
Many reports of the *same* true order by the same worker: the share of stage-1 reports at
each offset is η̄ over all four places, i.e. η itself."""),
    ("code", """\
from crowdrank.models.simulate import couple_report

reports = couple_report(rng, np.repeat(true[None], 20000, axis=0), np.repeat(eta[None], 20000, axis=0))
offset1 = (reports[:, :1] == true[None, :]).argmax(axis=1)
assert np.allclose(np.bincount(offset1, minlength=4) / len(offset1), eta, atol=0.015)
pd.DataFrame({"offset": [1, 2, 3, 4],
              "simulated": np.bincount(offset1, minlength=4) / len(offset1),
              "η": eta})"""),
    ("md", """\
## A crowd of each worker type

Now a small crowd of each type, simulated end to end. The statistics are those the
predictive checks use (`validation.predictive_stats`), against each task's true order: the
share of reports whose first item is the true winner, the stage-by-stage rate of picking
the best remaining item, the share of rank-broken pairs in the true order, Kendall's τ."""),
    ("code", """\
from crowdrank.models.simulate import simulate
from crowdrank.validation.predictive_stats import summarise

rows, examples = [], {}
for t in WORKER_TYPES:
    sim = simulate("couple", n_items=20, n_workers=10, tasks_per_worker=40, kmin=4, kmax=4,
                   setting=t, seed=1)
    s = summarise(sim.rankings, sim.true_order)
    rows.append({"type": t, "first choice": s["first_choice"],
                 "stage 1": s["stage_rate"][0], "stage 2": s["stage_rate"][1],
                 "stage 3": s["stage_rate"][2], "pairs in true order": s["pair_agreement"],
                 "mean τ": s["tau_mean"]})
    ex = sim.rankings.as_lists(ids=True)[:3]
    examples[t] = [" > ".join(r) for r in ex]
crowd = pd.DataFrame(rows).set_index("type")
crowd"""),
    ("code", """\
for t, ex in examples.items():
    print(f"{t:>9}:", " | ".join(ex))
ax = crowd[["first choice", "pairs in true order"]].plot.bar(figsize=(6, 3), rot=0)
ax.axhline(1 / 4, color="grey", ls=":")
ax.set_ylabel("share")
ax.set_title("What each worker type reports (k = 4)");"""),
    ("md", """\
Experts reproduce the true order; amateurs often swap in the runner-up; spammers are close
to random; malicious workers prefer the second-best item, so their first choice is *worse*
than random.

## Why the paper's likelihood (Eq. 4) is not normalised for k ≥ 3

The likelihood sees only the reported ranking ρ, not the true order. COUPLE's Eq. 4 scores
stage i by mixing, with weights η̄, the Plackett–Luce probabilities of the candidates
*in reported order*. Summed over all k! orderings of a task it gives a number Z that is
1 for k = 2 (CrowdBT) but not for k ≥ 3:"""),
    ("code", """\
from crowdrank.models.likelihood import eq4_all_orderings

for k in (2, 3, 4):
    perms, logp = eq4_all_orderings(lam[None, true[:k]], eta[None, :k])
    print(f"k = {k}: Z = sum over the {len(perms)} orderings of Eq. 4 = {np.exp(logp).sum():.4f}")
    if k == 2:
        assert np.isclose(np.exp(logp).sum(), 1.0)      # pairs: Eq. 4 is CrowdBT, normalised"""),
    ("md", """\
On this task and worker Z is close to 1, but it depends on λ and η. Over random tasks
(λ ~ N(0, 1), η from a random worker type) it strays far:"""),
    ("code", """\
from crowdrank.reports.story import eq4_normalizers


def random_Z(k, n=3000):
    lam_k = rng.normal(size=(n, k))
    kinds = rng.choice(list(WORKER_TYPES), size=n)
    eta_k = np.stack([rng.dirichlet(worker_alpha0(t, k)) for t in kinds])
    return eq4_normalizers(lam_k, np.maximum(eta_k, 1e-300), k)

pd.DataFrame({f"k = {k}": pd.Series(random_Z(k)).describe()[["min", "50%", "max"]]
              for k in (2, 3, 4)})"""),
    ("md", """\
So Eq. 4 is not a probability distribution over orderings and has no simulator.
*Normalised COUPLE* divides each task's Eq. 4 by its Z, which makes it a proper
distribution with an exact sampler (draw the whole ordering), and that is what
simulation-based calibration needs. The stagewise story is a third distribution. One task,
all 24 orderings, three columns:"""),
    ("code", """\
from crowdrank.reports.story import story_report_prob

sub = list(true)
perms, logp = eq4_all_orderings(lam[None, sub], eta[None, :4])
e4 = np.exp(logp[0])
tab = pd.DataFrame({
    "ordering": [" > ".join(items[sub[j]] for j in p) for p in perms],
    "story (simulator)": [story_report_prob(lam, eta, sub, [sub[j] for j in p]) for p in perms],
    "Eq. 4": e4, "normalised COUPLE": e4 / e4.sum()})
print(tab[["story (simulator)", "Eq. 4", "normalised COUPLE"]].sum().round(4).to_dict())
tab.sort_values("story (simulator)", ascending=False).head(8)"""),
    ("md", """\
The normalised model's sampler (`simulate("couple-normalized", ...)`) reproduces its
column: simulate many reports of this one task and compare frequencies."""),
    ("code", """\
from crowdrank.models.simulate import couple_normalized_report

rep = couple_normalized_report(rng, lam, np.repeat(np.array(sub)[None], 40000, axis=0),
                               np.repeat(eta[None], 40000, axis=0))
keys = [" > ".join(items[i] for i in r) for r in rep]
freq = pd.Series(keys).value_counts(normalize=True)
tab["simulated (normalised)"] = tab["ordering"].map(freq).fillna(0.0)
gap = float((tab["simulated (normalised)"] - tab["normalised COUPLE"]).abs().max())
assert gap < 0.01                     # about 8 standard errors of a frequency near 0.05
print("largest gap:", gap)"""),
    ("md", """\
## The same story as a page

`crowdrank story` (what `make story` runs) writes this story for one seeded example, with
figures, as Markdown and as one self-contained HTML page; `--prior-predictive` adds the
prior predictive checks of the next notebook."""),
    ("code", """\
s = tell("couple", "amateur", seed=0, out="story-out", predictive_workers=20, predictive_tasks=20)
print(s.path, s.html_path)"""),
    ("md", """\
Next: [2. Prior predictive checks](02-prior-predictive.ipynb)."""),
]

# ============================================================================ 2. prior predictive
PRIOR = [
    ("md", """\
# 2. Prior predictive checks

Inference needs priors: λ ~ N(0, 1) for the items and, for each worker, η_w ~ Dir(α_w)
(COUPLE) or η_w¹ ~ Beta(a_w, b_w) (CrowdBT). Before any data is seen, a prior already says
what a crowd reports. A *prior predictive check* draws parameters from the prior, generates
data sets with the model's own simulator, and summarises them with the same statistics a
posterior predictive check uses (`validation.predictive_stats`).

Three worker priors, as `crowdrank fit` and `crowdrank audit` accept them:

- **geometric**: the paper's profile α_w = a0·(a⁻¹, …, a⁻ᴷ) with a0 = 10, a = 6 (Sect. 5.3);
- **flat**: Dir(1, …, 1);
- **gold**: α_w = 1 + counts of the offsets a worker reported on gold tasks whose true
  order is known (Sect. 5.1)."""),
    ("code", SETUP_PLT),
    ("code", """\
from crowdrank.validation.prior_predictive import (
    PRIOR_KINDS,
    draw_eta,
    named_prior,
    prior_predictive,
    summary,
)

W, K = 20, 4
priors = {kind: named_prior(kind, "couple", W, K, seed=1) for kind in PRIOR_KINDS}
pd.DataFrame({kind: p.alpha[:4].round(3).tolist() for kind, p in priors.items()},
             index=[f"worker {w}" for w in range(4)])"""),
    ("md", """\
The geometric prior's concentrations are tiny: α = (1.67, 0.28, 0.046, 0.0077). A Dirichlet
with concentrations below 1 puts much of its mass near the corners of the simplex, so a
drawn η is often *almost one-hot*: that worker nearly always takes the same offset — usually
the first, but sometimes another one. Draw many η and look at η¹ and at the largest entry:"""),
    ("code", """\
rng = np.random.default_rng(0)
fig, axes = plt.subplots(1, 3, figsize=(10, 2.8), sharey=True)
rows = []
for ax, (kind, p) in zip(axes, priors.items()):
    eta = np.concatenate([draw_eta(rng, "couple", p, K) for _ in range(200)])
    ax.hist(eta[:, 0], bins=np.linspace(0, 1, 21), density=True)
    ax.set_title(kind)
    ax.set_xlabel("η¹ drawn from the prior")
    rows.append({"prior": kind, "E[η¹]": eta[:, 0].mean(),
                 "share with max η > 0.9": np.mean(eta.max(axis=1) > 0.9),
                 "share with max η > 0.99": np.mean(eta.max(axis=1) > 0.99),
                 "share with η¹ < 0.25": np.mean(eta[:, 0] < 0.25)})
pd.DataFrame(rows).set_index("prior")"""),
    ("md", """\
## What rankings do the priors imply?

For each prior: 60 draws of (λ, η), each generating a data set of 20 workers × 30 tasks of
k = 4 items with the model's simulator. Statistics against each task's true order (first
choice, stages, pairs) and against the order by the drawn λ."""),
    ("code", """\
results, tables = {}, []
for j, (kind, p) in enumerate(priors.items()):
    workers, draws = prior_predictive("couple", p, n_draws=60, n_items=30, tasks_per_worker=30,
                                      seed=j)
    results[kind] = summary(workers, draws, K)
    tables.append(workers.assign(prior=kind))
per_worker = pd.concat(tables)
pd.DataFrame({kind: {"first-choice accuracy": s["first_choice_mean"],
                     "per-worker sd": s["first_choice_sd"],
                     "workers worse than random": s["worse_than_random"],
                     "stage 1": s["stage_rates"][0], "stage 2": s["stage_rates"][1],
                     "stage 3": s["stage_rates"][2],
                     "pairs in true order": s["pair_agreement_mean"],
                     "pairs in λ order": s["pair_agreement_lambda_mean"]}
              for kind, s in results.items()})"""),
    ("code", """\
fig, axes = plt.subplots(1, 3, figsize=(10, 2.8), sharey=True)
for ax, kind in zip(axes, priors):
    v = per_worker.loc[per_worker.prior == kind, "first_choice_true"]
    ax.hist(v, bins=np.linspace(0, 1, 21), density=True)
    ax.axvline(1 / K, color="k", ls=":")
    ax.set_title(kind)
    ax.set_xlabel("per-worker first-choice accuracy")"""),
    ("md", """\
Reading it:

- **geometric**: good workers on average, but a long tail — a few percent of the simulated
  workers are *worse than random*, because their η sits near another corner (they almost
  always slip the same way). The paper's prior thus lets the data reveal adversarial
  workers, at the price of a posterior that can be multimodal when data are few.
- **flat**: the prior expects a random worker (first choice ≈ 1/k, pairs ≈ 0.5): the reports
  say nothing about λ until the model has learnt who is good.
- **gold**: a mixture of the four worker types the gold tasks came from.

The last row shows the Plackett–Luce randomness of the true order itself: even perfect
reports agree with the order by λ on far fewer pairs than with the true order.

## A check with a closed form

For COUPLE with k = K, the stage-1 rate is E[η¹] = α₁/Σα, and by the Dirichlet's
aggregation property the stage-i rate is α₁/(α₁ + … + αₘ) with m items left. The
simulation agrees:"""),
    ("code", """\
a = priors["geometric"].alpha[0]
closed = [a[0] / a[:m].sum() for m in (4, 3, 2)]
assert np.allclose(results["geometric"]["stage_rates"], closed, atol=0.03)
pd.DataFrame({"simulated": results["geometric"]["stage_rates"],
              "α₁ / (α₁+…+αₘ)": closed},
             index=["stage 1 (m=4)", "stage 2 (m=3)", "stage 3 (m=2)"])"""),
    ("md", """\
## CrowdBT: pairs, and the mirror image

For pairs, COUPLE is CrowdBT and the worker prior is a Beta(a, b) on the accuracy η¹.
CrowdBT's likelihood does not change under (λ, η¹) → (−λ, 1 − η¹): a ranking read backwards
by adversarial workers explains the data as well as the right one. Only the prior tells
them apart, and a flat Beta(1, 1) does not — its prior predictive agrees with the order by
λ on half of the pairs, the geometric prior on most of them:"""),
    ("code", """\
from crowdrank.models.priors import Priors

pair_priors = {"geometric": named_prior("geometric", "crowdbt", W, 2),
               "flat Beta(1, 1)": Priors(tuple(f"w{w}" for w in range(W)), np.ones((W, 2)))}
rows = {}
for name, p in pair_priors.items():
    _, d = prior_predictive("crowdbt", p, n_draws=60, n_items=30, tasks_per_worker=30, seed=3)
    rows[name] = {"(a, b)": tuple(np.round(p.beta()[0], 3)),
                  "pairs in true order": d["pair_agreement"].mean(),
                  "pairs in λ order": d["pair_agreement_lambda"].mean()}
pd.DataFrame(rows).T"""),
    ("md", """\
## The same as a command

`crowdrank story --prior-predictive --out story-out` adds these checks (with figures, and
`prior_predictive.json`/`.csv`) to the story page; `--priors`, `--prior-draws`,
`--geometric a0=..,a=..` choose what is drawn."""),
    ("code", """\
from crowdrank.reports.prior import check_priors

chk = check_priors("couple", n_draws=20, out="prior-out", figures=False)
print(chk.markdown[:600])"""),
    ("md", """\
Next: [3. Two ways to infer](03-two-ways-to-infer.ipynb)."""),
]

# ============================================================================ 3. two ways to infer
INFER = [
    ("md", """\
# 3. Two ways to infer

The same posterior, two ways: **NUTS** (exact up to Monte Carlo error, in NumPyro and in
PyMC) and the **online update** (OnlineGBMM, Pan et al. 2018, Algorithm 1: one pass of
moment matching, milliseconds). The validation layer (`validation.compare`) says how far
apart they are; the audit report (`crowdrank audit`) puts it on one page.

The settings here are small so that the notebook runs in about a minute: 2 chains ×
(500 + 1,000) draws, enough on this small data set for the sampler's convergence gate to
trust both references. With fewer draws (try `TUNE, DRAWS = 150, 150`) the gate says *NOT
trusted*, and then neither the comparison nor the two PPLs' agreement means much: the Monte
Carlo errors they rest on are themselves unreliable. For a real audit use the defaults
(4 chains × (1000 + 1000))."""),
    ("code", "import matplotlib.pyplot as plt\n" + SETUP_NUTS),
    ("code", """\
from crowdrank.models.priors import Priors
from crowdrank.models.simulate import simulate

CHAINS, TUNE, DRAWS = 2, 500, 1000     # small; the gate trusts both references
sim = simulate("couple", n_items=8, n_workers=4, tasks_per_worker=15, kmax=3,
               setting=["expert", "amateur", "amateur", "malicious"], seed=0)
data = sim.rankings
priors = Priors.geometric(data.workers, K=data.K, a0=10, a=3)
data"""),
    ("md", """\
## The online update

One pass over the rankings in file order; the posterior is Gaussian for each λ and
Dirichlet for each η."""),
    ("code", """\
import time

from crowdrank.inference.online import fit_online

t = time.perf_counter()
online = fit_online(data, "couple", priors, progress=False)
print(f"online pass: {1000 * (time.perf_counter() - t):.1f} ms")
online.items_table().head()"""),
    ("md", """\
## NUTS in NumPyro and in PyMC

Both read the *same* `Priors` object; the chains start from the online posterior
(`approx=online`, a warm start)."""),
    ("code", """\
from crowdrank.inference.nuts import fit_nuts

nuts = fit_nuts(data, "couple", priors, backend="numpyro", chains=CHAINS, tune=TUNE,
                draws=DRAWS, approx=online, progress=False, seed=0)
print("NumPyro:", nuts.gate.verdict())
nuts_pymc = fit_nuts(data, "couple", priors, backend="pymc", chains=CHAINS, tune=TUNE,
                     draws=DRAWS, approx=online, progress=False, seed=1)
print("PyMC:   ", nuts_pymc.gate.verdict())"""),
    ("md", """\
Do the two PPLs agree? `validation.reference.backend_agreement` matches parameters by id
and tests each difference of means against its Monte Carlo error (Bonferroni)."""),
    ("code", """\
from crowdrank.validation.reference import backend_agreement

agreement = backend_agreement(nuts.idata, nuts_pymc.idata)
print(agreement.verdict())"""),
    ("md", """\
## Comparing the online posterior with NUTS

`validation.compare.compare` puts the two side by side, parameter by parameter:
z = (online mean − NUTS mean) / NUTS sd, the sd ratio (below 1: the approximation is
over-confident), KL, W1 and the coverage of the approximation's intervals."""),
    ("code", """\
from crowdrank.validation.compare import align, compare

# truths aligned with the posterior's item and worker coordinates (ids, never positions)
ids = [str(i) for i in nuts.idata["posterior"]["item"].values]
wids = [str(w) for w in nuts.idata["posterior"]["worker"].values]
cmp = compare(online, nuts.idata, gate=nuts.gate, truth=align(sim.lam, data.items, ids),
              truth_eta1=align(sim.eta[:, 0], data.workers, wids, "worker(s)"), model="couple")
pd.DataFrame(cmp.aggregates).T[["n", "median_abs_z", "median_sd_ratio", "mean_coverage_90"]]"""),
    ("code", """\
tab = cmp.parameters
fig, ax = plt.subplots(figsize=(5, 3.2))
for kind, g in tab.groupby("kind"):
    ax.scatter(g["z"], g["sd_ratio"], label=kind)
ax.axvline(0, color="grey", lw=0.8)
ax.axhline(1, color="grey", lw=0.8)
ax.set_xlabel("z = (online mean − NUTS mean) / NUTS sd")
ax.set_ylabel("sd ratio (online / NUTS)")
ax.legend();"""),
    ("md", """\
## Change the data order

NUTS does not care about the order of the rankings; a one-pass online update does. Refit
online on seeded permutations and measure how far the item means move, in units of the
NUTS sd (`validation.compare.order_sensitivity`)."""),
    ("code", """\
from crowdrank.validation.compare import order_sensitivity

lam_rows = tab[tab.kind == "lambda"]
perm = np.stack([align(fit_online(data, "couple", priors, order="shuffle", seed=s,
                                  progress=False).mu, online.items, ids) for s in range(8)])
order = order_sensitivity(perm, lam_rows.approx_mean.to_numpy(), lam_rows.mcmc_mean.to_numpy(),
                          lam_rows.mcmc_sd.to_numpy(), ids=ids)
{k: v for k, v in order.items() if k != "per_item"}"""),
    ("code", """\
fig, ax = plt.subplots(figsize=(6, 3))
x = np.arange(len(ids))
ax.errorbar(x, lam_rows.mcmc_mean, yerr=lam_rows.mcmc_sd, fmt="o", color="k", label="NUTS ± sd")
for p in perm:
    ax.plot(x + 0.15, p, "_", color="tab:orange", ms=10)
ax.plot([], [], "_", color="tab:orange", label="online, 8 orders")
ax.set_xticks(x, ids)
ax.set_ylabel("λ")
ax.legend();"""),
    ("md", """\
## The diagnostic report

`crowdrank audit` runs these steps for every model and writes `report.html`. Here the
pieces computed above are handed to the same pipeline (`validation.pipelines.audit.build_metrics`
and `reports.audit_html.write_audit_report`), so no sampler runs again. Open
`audit-tutorial/report.html` in a browser: the summary says whether the reference is
trusted (R-hat, ESS, divergences, E-BFMI), then z and sd ratio per parameter, coverage,
the workers, the order sensitivity and the two PPLs' agreement."""),
    ("code", """\
from pathlib import Path

from crowdrank.reports.audit_html import write_audit_report
from crowdrank.validation.pipelines.audit import AuditConfig, ModelAudit, Subject, build_metrics

subject = Subject(data, truth=sim.lam, truth_eta1=sim.eta[:, 0],
                  description="tutorial: 8 items, 4 workers (expert, 2 amateurs, malicious)")
cfg = AuditConfig(models=("couple",), chains=CHAINS, tune=TUNE, draws=DRAWS, permutations=8,
                  check_backends=True)
agreement.other_gate = nuts_pymc.gate
audit = ModelAudit("couple", nuts, online, [cmp], [{}], order, timings=[],
                   online_seconds={"default": {"wall": online.seconds, "updates": online.seconds}},
                   agreement=agreement)
metrics = build_metrics(subject, cfg, priors, [audit], seconds=0.0)
page = write_audit_report(Path("audit-tutorial") / "report.html", subject, cfg, priors, [audit],
                          metrics)
print(page, f"{page.stat().st_size / 1e3:.0f} kB")
print("reference trusted:", metrics["models"]["couple"]["reference_trusted"])"""),
    ("md", """\
From the command line the whole notebook is one line (on a file of your own:
`crowdrank audit data.csv --truth truth.csv --model couple --check-backends --out audit-x`).

Next: [4. Real data: BabyFace](04-real-data-babyface.ipynb)."""),
]

# ============================================================================ 4. real data
REAL = [
    ("md", """\
# 4. Real data: BabyFace

BabyFace (Pan et al. 2018, Sect. 5.4): 18 face images ranked by age by 21 crowd workers,
3 images per task, about 145 tasks per worker, with a ground-truth order. The paper fits
COUPLE, finds the noisiest workers from their posterior η¹, removes their rankings and
fits again (Table 6). The data set lives in `../shared/datasets` beside the checkout
(`CROWDRANK_DATASETS` names another folder)."""),
    ("code", SETUP_NUTS),
    ("code", """\
from crowdrank.models.io import load_dataset

data, truth = load_dataset("babyface")
print(data)
for note in data.notes:
    print("note:", note)
pd.Series(data.summary()).head(8)"""),
    ("md", """\
## Fit COUPLE online, under the paper's geometric prior

Accuracy is the paper's pairwise accuracy against the ground truth
(`validation.compare.pairwise_accuracy`). A one-pass online fit depends on the data order,
so, like the paper, we repeat it on shuffled orders and report mean ± sd."""),
    ("code", """\
from crowdrank.inference.online import fit_online
from crowdrank.models.priors import Priors
from crowdrank.validation.compare import align, pairwise_accuracy, worker_quality_online

priors = Priors.geometric(data.workers, K=data.K, a0=10, a=6)
online = fit_online(data, "couple", priors, progress=False)

def accuracies(d, n=20):
    p = Priors.geometric(d.workers, K=d.K, a0=10, a=6)
    acc = []
    for s in range(n):
        post = fit_online(d, "couple", p, order="shuffle", seed=s, progress=False)
        acc.append(pairwise_accuracy(align(truth, data.items, post.items), post.mu))
    return np.mean(acc), np.std(acc)

acc_all = accuracies(data)
print(f"COUPLE online, all workers: accuracy {acc_all[0]:.3f} ± {acc_all[1]:.3f}")"""),
    ("md", """\
## What the worker posteriors say

E[η_w¹] = α_w¹ / Σα_w is a worker's posterior chance of reporting the best remaining item.
Beside it: how often the worker's first choice is the true best (from the ground truth,
with `validation.predictive_stats`)."""),
    ("code", """\
from crowdrank.validation.predictive_stats import (
    order_by_scores,
    worker_first_choice,
    worker_pair_agreement,
)

ref = order_by_scores(data, truth)
workers = pd.DataFrame({
    "E[η¹] online": align(worker_quality_online(online), online.workers, data.workers, "workers"),
    "first choice = truth": worker_first_choice(data, ref),
    "pairs in true order": worker_pair_agreement(data, ref),
    "rankings": data.rankings_per_worker()}, index=list(data.workers))
workers.sort_values("E[η¹] online").head(8)"""),
    ("code", """\
ax = workers.plot.scatter("first choice = truth", "E[η¹] online", figsize=(4.5, 3.5))
ax.set_title("BabyFace: worker posterior vs agreement with the truth");"""),
    ("md", """\
And the same worker posteriors from NUTS (a short run, warm-started from the online
posterior; raise the draws for a trusted reference):"""),
    ("code", """\
from crowdrank.inference.nuts import fit_nuts
from crowdrank.validation.compare import worker_quality_nuts

nuts = fit_nuts(data, "couple", priors, chains=2, tune=150, draws=150, approx=online,
                progress=False)
print(nuts.gate.verdict())
wids = [str(w) for w in nuts.idata["posterior"]["worker"].values]
workers["E[η¹] NUTS"] = align(worker_quality_nuts(nuts.idata), wids, data.workers, "workers")
workers[["E[η¹] online", "E[η¹] NUTS"]].corr(method="spearman")"""),
    ("md", """\
## The cleaned re-run

Remove every ranking of the six workers with the lowest E[η¹] and fit again."""),
    ("code", """\
from crowdrank.validation.compare import lowest

noisy = lowest(workers["E[η¹] online"].to_numpy(), list(workers.index), 6)
keep = np.flatnonzero(~np.isin(np.asarray(data.workers)[data.worker], noisy))
cleaned = data.subset(keep)
acc_clean = accuracies(cleaned)
print("removed:", noisy, "- the lowest six by NUTS:",
      lowest(workers["E[η¹] NUTS"].to_numpy(), list(workers.index), 6),
      "- by agreement with the truth:",
      lowest(workers["pairs in true order"].to_numpy(), list(workers.index), 6))
pd.DataFrame({"rankings": [data.n_rankings, cleaned.n_rankings],
              "accuracy (mean)": [acc_all[0], acc_clean[0]],
              "accuracy (sd over orders)": [acc_all[1], acc_clean[1]]},
             index=["all workers", "cleaned"])"""),
    ("md", """\
The paper reports COUPLE's accuracy stable around 92 % before and after cleaning (Table 6):
COUPLE already discounts the noisy workers' reports, so removing them changes little.
The three lists of "noisy" workers above need not coincide: E[η¹] measures how often a
worker's *stagewise* choice is the best remaining item under the model, given everyone
else's reports, while the last list uses the ground truth, which a real analysis does not
have; with the short NUTS run the posterior means are themselves noisy. `crowdrank audit babyface --quick` runs
the full audit of this data set (online against NUTS, for COUPLE and CrowdBT)."""),
]

NOTEBOOKS = {
    "01-generative-story.ipynb": STORY,
    "02-prior-predictive.ipynb": PRIOR,
    "03-two-ways-to-infer.ipynb": INFER,
    "04-real-data-babyface.ipynb": REAL,
}


def build(cells) -> nbformat.NotebookNode:
    nb = new_notebook(cells=[new_markdown_cell(src) if kind == "md" else new_code_cell(src)
                             for kind, src in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    for i, c in enumerate(nb.cells):
        c["id"] = f"cell-{i:02d}"           # stable ids: the files do not change on rebuild
    return nb


def main(argv=None) -> int:
    out = Path(argv[0]) if argv else HERE
    for name, cells in NOTEBOOKS.items():
        nbformat.write(build(cells), out / name)
        print(out / name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

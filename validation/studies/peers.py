"""The peers' table: every crowdrank method beside other packages' aggregators, in one
process on the same data.

On one data set (:func:`crowdrank.models.io.load_dataset`) each method gives a score per item, and
each score vector is judged by the same two numbers against the set's truth:

- **accuracy**: the paper's pairwise accuracy ([Pan18], Sect. 5.1) over the pairs the truth
  orders inside one component of the comparison graph
  (:func:`crowdrank.validation.compare.pairwise_accuracy_comparable`);
- **Spearman's ρ** between the scores and the truth over the items the truth scores.

crowdrank's methods: the online updates (COUPLE's OnlineGBMM, CrowdBT online, Weng–Lin's
OnlinePL and OnlineBT) and TrueSkill over ``orders`` random orders (mean and sd; file
order would be unfair: PrefLib's files list identical rankings together, and TrueSkill in
that order scores dots at accuracy 0.58 against 1.0 shuffled),
the batch MAP of BT and PL (``N(0, 1)`` prior, Newton), CrowdBT's MAP by EM, and
PeerGrader's MAP, under the paper's real-data priors (:func:`crowdrank.validation.studies.replicate.real_priors`).
The peers: ``crowd-kit``'s ``BradleyTerry`` (ML by MM; twice: as shipped, which stops
after two MM updates — the convergence test of crowd-kit 1.4.2 compares the iterate
with an alias of itself — and with ``tol=0``, which runs every iteration) and
``NoisyBradleyTerry`` (BT with per-worker skill and left/right bias) [CrowdKit], and ``choix``'s ILSR and penalised
ML (``opt_pairwise``, the same ``N(0, 1)`` MAP as ours) on the rank-broken pairs.

The pairs handed to crowd-kit are shown left/right in a seeded random orientation: the
shared sets do not record which item was shown first, and rank-breaking lists the winner
first — NoisyBT's left-bias term would otherwise read every label as a bias. Items a
method gives no score (crowd-kit drops items absent from its pairs) are reported and get
the median score, so every method is judged on the same pairs.
"""

from __future__ import annotations

import time

import numpy as np

#: EM's iteration cap here (its linear convergence can take thousands of iterations on
#: a set with few, very busy workers: PrefLib's one pseudo-worker per file).
EM_MAX_ITER = 1000
#: choix's ILSR iteration cap (its default 100 is not enough on read-level).
ILSR_MAX_ITER = 2000
#: Methods of the table in display order, with their labels.
LABELS = {
    "couple": "COUPLE (OnlineGBMM, online)", "crowdbt": "CrowdBT (online)",
    "pl": "OnlinePL (Weng–Lin)", "bt": "OnlineBT (Weng–Lin)", "trueskill": "TrueSkill",
    "map-bt": "BT MAP (Newton)", "map-pl": "PL MAP (Newton)", "em-crowdbt": "CrowdBT MAP (EM)",
    "peergrader": "PeerGrader MAP",
    "crowdkit-bt": "crowd-kit BradleyTerry (as shipped)",
    "crowdkit-bt-full": "crowd-kit BradleyTerry (tol=0: every MM iteration)",
    "crowdkit-noisybt": "crowd-kit NoisyBradleyTerry",
    "choix-ilsr": "choix ilsr_pairwise", "choix-map": "choix opt_pairwise (N(0,1) MAP)",
}
ONLINE = ("couple", "crowdbt", "pl", "bt")
#: Methods whose answer depends on the order of the data: run over random orders.
ORDERED = ONLINE + ("trueskill",)
CROWDKIT = ("crowdkit-bt", "crowdkit-bt-full", "crowdkit-noisybt")
#: MM iterations of crowd-kit's BradleyTerry (``n_iter``) in both rows.
CROWDKIT_BT_ITER = 3000


def pairs_frame(data, seed: int = 0):
    """The rank-broken pairs of ``data`` as crowd-kit's ``worker, left, right, label``
    frame, left/right in a seeded random orientation (the module docstring)."""
    import pandas as pd

    pr = data.rank_break()
    win, lose = pr.order
    flip = np.random.default_rng(seed).random(len(win)) < 0.5
    items = np.asarray(data.items, dtype=object)
    return pd.DataFrame({"worker": np.asarray(data.workers, dtype=object)[pr.worker],
                         "left": items[np.where(flip, lose, win)],
                         "right": items[np.where(flip, win, lose)],
                         "label": items[win]})


def _aligned(data, series):
    """crowd-kit's score Series aligned with ``data.items``; the missing items' count."""
    s = np.array(series.reindex(list(data.items)).to_numpy(float))
    miss = ~np.isfinite(s)
    if miss.all():
        raise ValueError("no item has a score")
    s[miss] = np.median(s[~miss])
    return s, int(miss.sum())


def score(truth, scores, components) -> dict:
    from scipy.stats import spearmanr

    from crowdrank.validation.studies.replicate import accuracy

    ok = np.isfinite(np.asarray(truth, float))
    rho = spearmanr(np.asarray(truth, float)[ok], np.asarray(scores, float)[ok])[0]
    return {"accuracy": accuracy(truth, scores, components), "spearman": float(rho)}


def method_scores(data, method: str, *, seed: int = 0, priors=None):
    """Scores of one method (``LABELS``) on ``data`` (one order for the online ones,
    ``seed``): ``(scores aligned with data.items, info dict)``."""
    from crowdrank.validation.studies.replicate import real_priors

    pri = real_priors(data) if priors is None else priors
    info = {}
    if method in ONLINE:
        from crowdrank.inference.online import fit_online
        post = fit_online(data, method, pri, order="shuffle", seed=seed, progress=False)
        return np.asarray(post.mu, float), info
    if method == "trueskill":
        from crowdrank.inference.online.trueskill import fit_trueskill
        perm = np.random.default_rng(seed).permutation(data.n_rankings)
        return np.asarray(fit_trueskill(data.subset(perm), pri).mu, float), info
    if method in ("map-bt", "map-pl"):
        from crowdrank.inference.batch import fit_batch
        fit = fit_batch(data, method[-2:], pri, laplace_cov=False)
        return np.asarray(fit.mu, float), {"converged": bool(fit.converged)}
    if method == "em-crowdbt":
        from crowdrank.inference.batch.crowdbt_em import fit_crowdbt_em
        fit = fit_crowdbt_em(data, pri, max_iter=EM_MAX_ITER)
        return np.asarray(fit.mu, float), {"iterations": int(fit.iterations),
                                           "converged": bool(fit.converged)}
    if method == "peergrader":
        from crowdrank.inference.peergrader import fit_peergrader
        fit = fit_peergrader(data, pri)
        return np.asarray(fit.lam, float), {"converged": bool(fit.converged)}
    if method in CROWDKIT:
        from crowdkit.aggregation import BradleyTerry, NoisyBradleyTerry
        df = pairs_frame(data, seed)
        if method == "crowdkit-noisybt":
            agg = NoisyBradleyTerry(n_iter=100, random_state=seed)
        else:
            # crowd-kit 1.4.2 keeps its previous iterate as an alias of the current one,
            # so the change it tests is 0 and the loop stops after two MM updates
            # whatever tol > 0 is asked; tol=0 runs all n_iter updates (to the ML)
            agg = BradleyTerry(n_iter=CROWDKIT_BT_ITER,
                               tol=0.0 if method == "crowdkit-bt-full" else 1e-5)
        s, miss = _aligned(data, agg.fit(df).scores_)
        # BradleyTerry's scores are p_i > 0 (only their order matters here); log for
        # a scale comparable with the others
        return (s if method == "crowdkit-noisybt" else np.log(np.maximum(s, 1e-300))), \
            {"items_without_score": miss}
    if method in ("choix-ilsr", "choix-map"):
        import choix
        pr = data.rank_break()
        pairs = [(int(a), int(b)) for a, b in pr.order.T]
        if method == "choix-ilsr":
            return np.asarray(choix.ilsr_pairwise(data.n_items, pairs, alpha=1e-4,
                                                  tol=1e-10, max_iter=ILSR_MAX_ITER),
                              float), {"alpha": 1e-4}
        s0 = float(pri.sigma0)
        return np.asarray(choix.opt_pairwise(data.n_items, pairs, alpha=1 / (2 * s0 ** 2),
                                             method="BFGS", tol=1e-8), float), {}
    raise ValueError(f"unknown method {method!r}; expected one of {tuple(LABELS)}")


def table(data, truth, methods=None, *, orders: int = 5, seed: int = 0,
          progress: bool = False) -> list[dict]:
    """One row per method: accuracy and Spearman ρ (mean ± sd over ``orders`` random
    orders for the order-dependent methods, :data:`ORDERED`; one fit otherwise), wall and
    CPU seconds per fit. A method that raises gets a row with its ``error`` and no
    numbers: a peer's failure is part of the table, not the end of it."""
    from tqdm.auto import tqdm

    from crowdrank.validation.compare import comparison_components
    from crowdrank.validation.studies.replicate import order_seed

    methods = list(LABELS) if methods is None else list(methods)
    comps = comparison_components(data)
    rows = []
    for m in tqdm(methods, desc="peers", disable=not progress):
        runs = orders if m in ORDERED else 1
        acc, rho, wall, cpu, info = [], [], [], [], {}
        for r in range(runs):
            t, c = time.perf_counter(), time.process_time()
            try:
                s, info = method_scores(data, m, seed=order_seed(seed, r) if m in ORDERED
                                        else seed)
            except Exception as exc:  # noqa: BLE001 (a peer's failure is a table entry)
                rows.append({"method": m, "label": LABELS[m], "runs": r, "accuracy": None,
                             "spearman": None, "error": f"{type(exc).__name__}: {exc}"})
                break
            wall.append(time.perf_counter() - t)
            cpu.append(time.process_time() - c)
            sc = score(truth, s, comps)
            acc.append(sc["accuracy"])
            rho.append(sc["spearman"])
        else:
            rows.append({
                "method": m, "label": LABELS[m], "runs": runs, "accuracy": float(np.mean(acc)),
                "accuracy_sd": float(np.std(acc, ddof=1)) if runs > 1 else 0.0,
                "spearman": float(np.mean(rho)),
                "spearman_sd": float(np.std(rho, ddof=1)) if runs > 1 else 0.0,
                "seconds": float(np.mean(wall)), "cpu_seconds": float(np.mean(cpu)), **info})
    return rows

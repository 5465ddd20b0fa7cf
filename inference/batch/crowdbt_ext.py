"""The MAP of the CrowdBT extensions (annotator bias, domain-specific reliability) by EM.

The model is (E1) of :mod:`crowdrank.models.crowdbt_ext`: ``P(y_s) = η_g σ(y_s(d_s + β_w)) +
(1 − η_g) σ(y_s(β_w − d_s))``. As for CrowdBT (:mod:`.crowdbt_em`, the article in
``seeds/002_*``, "EM"), a latent indicator ``z_s`` says whether the worker judged the true
comparison (``z = 1``) or its reverse. With ``θ = (λ, β)``, ``A_s = σ(y_s(d_s + β_w))`` and
``B_s = σ(y_s(β_w − d_s))``:

- **E-step**: ``r_s = η_g A_s / (η_g A_s + (1 − η_g) B_s)``;
- **M-step, reliabilities**: ``η_g = (Σ_{s∈g} r_s + a_g − 1) / (n_g + a_g + b_g − 2)``, the
  mode of ``Beta(a_g + Σ r_s, b_g + Σ(1 − r_s))`` (BBQ's Beta prior);
- **M-step, items and biases**: ``Q(θ) = Σ_s r_s log σ(z_s^u·θ) + (1 − r_s) log σ(z_s^v·θ)
  + log N(λ; μ0, σ0²) + log N(β; 0, τ_β²)`` with ``z^u = y(e_f − e_t + e_{β_w})`` and
  ``z^v = y(e_t − e_f + e_{β_w})`` — a weighted logistic regression, concave, raised by one
  Newton step with backtracking (a generalised EM step, so ``F`` never decreases).

EM converges linearly, slowly when the latent choice hides much information; by default the
steps are grouped in SQUAREM cycles [Varadhan08], which extrapolate along the EM path and
keep a cycle only when it does not lower ``F``, and once the projected gradient is below
1 each cycle first tries a projected Newton step on ``F`` itself (:func:`newton_step`,
the exact observed information of :func:`neg_hessian_full`), which finishes in a few steps
what EM would take hundreds for (read-level: 29 steps instead of 834).

By Fisher's identity ``∇_θ F = ∇_θ Q`` at the current ``r``, which gives the stopping
rule: the largest entry of ``∇F`` in ``(θ, logit η)``, projected on ``0 ≤ η ≤ 1``
(as :func:`.crowdbt_em.projected_norm`), ``≤ tol``. The uncertainty reported is Laplace's
for ``θ`` with ``η`` fixed (:func:`neg_hessian`, the exact observed-data Hessian) and the
Beta of the responsibilities for each ``η_g``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from scipy import sparse
from scipy.linalg import cho_factor, cho_solve
from scipy.special import expit

from crowdrank.models.crowdbt_ext import Structure, group_beta, loglik
from crowdrank.models.errors import DataError


@dataclass(frozen=True, eq=False)
class Design:
    """``Zu``, ``Zv`` ``(S, D)`` over ``θ = (λ (L), β (W) if bias)``; prior mean and
    precision of ``θ``."""

    Zu: sparse.csr_matrix
    Zv: sparse.csr_matrix
    mean: np.ndarray
    prec: np.ndarray


def design(st: Structure, mu0: float, sigma0: float, bias_sd: float) -> Design:
    S, L = len(st.first), st.n_items
    D = L + (st.n_workers if st.bias else 0)
    y = st.sign.astype(float)
    rows = np.repeat(np.arange(S), 3 if st.bias else 2)

    def mat(sd):                         # sd = +1: z^u, −1: z^v
        cols = [st.first, st.second] + ([L + st.worker] if st.bias else [])
        vals = [sd * y, -sd * y] + ([y] if st.bias else [])
        return sparse.csr_matrix((np.stack(vals, 1).ravel(), (rows, np.stack(cols, 1).ravel())),
                                 shape=(S, D))

    mean = np.concatenate([np.full(L, float(mu0)), np.zeros(D - L)])
    prec = np.concatenate([np.full(L, 1 / sigma0**2), np.full(D - L, 1 / bias_sd**2)])
    return Design(mat(1.0), mat(-1.0), mean, prec)


def _split(st: Structure, theta):
    L = st.n_items
    return theta[:L], (theta[L:] if st.bias else None)


def log_posterior(st: Structure, Z: Design, theta, eta, ab) -> float:
    """``F(θ, η)`` up to a constant: ``Σ log P(y_s)`` + the Normal and Beta log priors."""
    lam, beta = _split(st, theta)
    return float(np.sum(loglik(st, lam, eta, beta))
                 - 0.5 * np.sum(Z.prec * (theta - Z.mean) ** 2)
                 + np.sum((ab[:, 0] - 1) * np.log(eta) + (ab[:, 1] - 1) * np.log1p(-eta)))


def _parts(st, Z, theta, eta):
    A, B = expit(Z.Zu @ theta), expit(Z.Zv @ theta)
    e = eta[st.group]
    P = e * A + (1 - e) * B
    return A, B, e, P


def gradient(st: Structure, Z: Design, theta, eta, ab):
    """``(∂F/∂θ, ∂F/∂η)`` (exact; ``∂P/∂η_g = A − B``)."""
    A, B, e, P = _parts(st, Z, theta, eta)
    cu, cv = e * A * (1 - A) / P, (1 - e) * B * (1 - B) / P
    gt = Z.Zu.T @ cu + Z.Zv.T @ cv - Z.prec * (theta - Z.mean)
    ge = (np.bincount(st.group, (A - B) / P, st.n_groups)
          + (ab[:, 0] - 1) / eta - (ab[:, 1] - 1) / (1 - eta))
    return gt, ge


def neg_hessian(st: Structure, Z: Design, theta, eta) -> np.ndarray:
    """``−∂²F/∂θ²`` with ``η`` fixed: ``Σ_s g_s g_sᵀ − [η A(1−A)(1−2A) z^u z^uᵀ +
    (1−η) B(1−B)(1−2B) z^v z^vᵀ]/P`` (``g_s = ∇ log P(y_s)``) plus the prior precision."""
    A, B, e, P = _parts(st, Z, theta, eta)
    cu, cv = e * A * (1 - A) / P, (1 - e) * B * (1 - B) / P
    G = sparse.diags(cu) @ Z.Zu + sparse.diags(cv) @ Z.Zv
    hu, hv = cu * (1 - 2 * A), cv * (1 - 2 * B)
    H = (G.T @ G - Z.Zu.T @ sparse.diags(hu) @ Z.Zu - Z.Zv.T @ sparse.diags(hv) @ Z.Zv)
    H = np.asarray(H.todense())
    H[np.diag_indices_from(H)] += Z.prec
    return H


def neg_hessian_full(st: Structure, Z: Design, theta, eta, ab) -> np.ndarray:
    """``−∂²F`` over ``(θ, η)`` (the observed information, ``η`` not fixed): the
    :func:`neg_hessian` block, the cross terms ``−∂²log P/∂θ∂η = −[A(1−A) z^u − B(1−B) z^v]/P
    + k g`` and ``−∂²F/∂η_g² = Σ k² + (a−1)/η² + (b−1)/(1−η)²`` with ``k = (A − B)/P``. The
    Beta of the responsibilities is the *complete-data* posterior of ``η`` with ``λ`` known;
    this one also carries what the data leave unsure about ``λ`` (the missing information
    of [Louis82])."""
    Htt, cross, Hee = _full_blocks(st, Z, theta, eta, ab)
    cross = np.asarray(cross.todense())
    return np.block([[Htt, cross], [cross.T, np.diag(Hee)]])


def _full_blocks(st: Structure, Z: Design, theta, eta, ab):
    """The blocks of :func:`neg_hessian_full`: ``Htt`` (dense ``D × D``), the cross block
    (sparse ``D × G``: a pair touches its group only) and the diagonal of the ``η`` block
    (``G,``: groups share no pair)."""
    A, B, e, P = _parts(st, Z, theta, eta)
    cu, cv = e * A * (1 - A) / P, (1 - e) * B * (1 - B) / P
    k = (A - B) / P
    Htt = neg_hessian(st, Z, theta, eta)
    S, G = len(A), st.n_groups
    E = sparse.csr_matrix((np.ones(S), (np.arange(S), st.group)), shape=(S, G))
    cross = (Z.Zu.T @ sparse.diags(-A * (1 - A) / P + k * cu) @ E
             + Z.Zv.T @ sparse.diags(B * (1 - B) / P + k * cv) @ E)
    Hee = (np.bincount(st.group, k * k, G) + (ab[:, 0] - 1) / eta**2
           + (ab[:, 1] - 1) / (1 - eta) ** 2)
    return Htt, sparse.csr_matrix(cross), Hee


def newton_direction(st: Structure, Z: Design, theta, eta, ab, free, gt, ge):
    """Solve ``−∇²F δ = ∇F`` over ``θ`` and the accuracies ``free`` (a mask) through the
    Schur complement of the diagonal ``η`` block: ``(Htt − C diag(1/h) Cᵀ) δθ = g_θ −
    C (g_η / h)``, ``δη = (g_η − Cᵀ δθ) / h`` — a ``D × D`` system, the size of EM's own
    M-step, however many groups (the domain model has one per worker and category).
    Raises ``LinAlgError`` when ``−∇²F`` is not positive definite there."""
    Htt, C, h = _full_blocks(st, Z, theta, eta, ab)
    C, h, gf = C[:, np.flatnonzero(free)], h[free], ge[free]
    if np.any(~(h > 0)):
        raise np.linalg.LinAlgError("the accuracy block is not positive definite")
    Sc = Htt - (C @ sparse.diags(1.0 / h) @ C.T).toarray()
    dt = cho_solve(cho_factor(Sc), gt - C @ (gf / h))
    return dt, (gf - C.T @ dt) / h


def projected_norm(st, Z, theta, eta, ab, edge: float = 1e-9) -> float:
    gt, ge = gradient(st, Z, theta, eta, ab)
    ge = np.where(((eta >= 1 - edge) & (ge > 0)) | ((eta <= edge) & (ge < 0)), 0.0, ge)
    return float(max(np.abs(gt).max(), np.abs(ge * eta * (1 - eta)).max()))


def responsibilities(st, Z, theta, eta) -> np.ndarray:
    A, _, e, P = _parts(st, Z, theta, eta)
    return e * A / P


def em_step(st: Structure, Z: Design, theta, eta, ab):
    """One EM iteration (module docstring); returns ``(θ, η)``."""
    r = responsibilities(st, Z, theta, eta)
    n = np.bincount(st.group, minlength=st.n_groups).astype(float)
    R = np.bincount(st.group, r, st.n_groups)
    eta = np.clip((R + ab[:, 0] - 1) / (n + ab[:, 0] + ab[:, 1] - 2), 1e-12, 1 - 1e-12)

    def q(th):
        from scipy.special import log_expit
        return float(np.sum(r * log_expit(Z.Zu @ th)) + np.sum((1 - r) * log_expit(Z.Zv @ th))
                     - 0.5 * np.sum(Z.prec * (th - Z.mean) ** 2))

    A, B = expit(Z.Zu @ theta), expit(Z.Zv @ theta)
    g = Z.Zu.T @ (r * (1 - A)) + Z.Zv.T @ ((1 - r) * (1 - B)) - Z.prec * (theta - Z.mean)
    H = (Z.Zu.T @ sparse.diags(r * A * (1 - A)) @ Z.Zu
         + Z.Zv.T @ sparse.diags((1 - r) * B * (1 - B)) @ Z.Zv).toarray()
    H[np.diag_indices_from(H)] += Z.prec
    step = cho_solve(cho_factor(H), g)
    f0, t = q(theta), 1.0
    while t > 1e-10:                    # Armijo backtracking on the concave M-step objective
        cand = theta + t * step
        if q(cand) >= f0 + 1e-4 * t * float(g @ step):
            return cand, eta
        t *= 0.5
    return theta, eta


@dataclass(eq=False)
class ExtFit:
    """The EM MAP of a CrowdBT extension. ``mu``/``sd``: items (Laplace, ``η`` fixed);
    ``beta``/``beta_sd``: worker biases (bias model); ``eta``: per group (mode);
    ``alpha``: ``(G, 2)`` Beta of the responsibilities."""

    variant: str
    items: list
    workers: list
    groups: list
    mu: np.ndarray
    sd: np.ndarray
    beta: np.ndarray | None
    beta_sd: np.ndarray | None
    eta: np.ndarray
    alpha: np.ndarray
    iterations: int
    grad_norm: float
    converged: bool
    objective: float
    seconds: float
    tol: float
    prior: dict
    #: Laplace over (θ, η) jointly (:func:`neg_hessian_full`): ``{"lambda_sd", "beta_sd",
    #: "eta_sd"}``, or ``None`` when some ``η`` sits at a bound (b = 1 lets it reach 1)
    #: or the observed information is not positive definite there.
    joint: dict | None = None
    #: Newton steps among ``iterations`` (:func:`newton_step`)
    newton_steps: int = 0
    #: ``(steps so far, "squarem"|"em"|"newton", projected gradient)`` after each cycle
    trace: list = field(default_factory=list)

    def items_table(self):
        import pandas as pd
        df = pd.DataFrame({"item": self.items, "mu": self.mu, "sigma2": self.sd**2,
                           "sd": self.sd})
        df = df.sort_values("mu", ascending=False, kind="stable").reset_index(drop=True)
        df.insert(0, "rank", np.arange(1, len(df) + 1))
        return df

    def groups_table(self):
        """One row per reliability group: ``group, worker, eta, a, b`` and, for the bias
        model, ``beta, beta_sd`` (groups are the workers there)."""
        import pandas as pd
        df = pd.DataFrame({"group": self.groups, "eta": self.eta, "a": self.alpha[:, 0],
                           "b": self.alpha[:, 1]})
        if self.beta is not None:
            df["beta"], df["beta_sd"] = self.beta, self.beta_sd
        return df

    def fit_dict(self) -> dict:
        return {"model": self.variant, "method": "map", "solver": "em",
                "iterations": int(self.iterations), "newton_steps": int(self.newton_steps),
                "grad_norm": float(self.grad_norm),
                "converged": bool(self.converged), "tol": float(self.tol),
                "objective": float(self.objective), "seconds": float(self.seconds),
                "prior": self.prior, "n_items": len(self.items),
                "n_workers": len(self.workers), "n_groups": len(self.groups)}


def squarem_step(st: Structure, Z: Design, theta, eta, ab):
    """One SQUAREM cycle (:func:`crowdrank.inference.batch.squarem.squarem_cycle`) of :func:`em_step`
    in ``x = (θ, η)``: ``η`` projected into ``(0, 1)`` (on the logit scale instead,
    accuracies creeping to 1 barely moved: 3x slower), and an extrapolation where some
    ``P(y_s)`` underflows is not admissible. Returns ``(θ, η, EM steps used)``."""
    from .squarem import squarem_cycle

    D = len(theta)

    def em_map(x):
        return np.concatenate(em_step(st, Z, x[:D], x[D:], ab))

    def project(x):
        return np.concatenate([x[:D], np.clip(x[D:], 1e-12, 1 - 1e-12)])

    x, k = squarem_cycle(em_map, lambda x: log_posterior(st, Z, x[:D], x[D:], ab),
                         np.concatenate([theta, eta]), project=project,
                         admissible=lambda x: bool(np.all(_parts(st, Z, x[:D], x[D:])[3] > 0)))
    return x[:D], x[D:], k


def newton_step(st: Structure, Z: Design, theta, eta, ab, edge: float = 1e-6):
    """One projected Newton step on the *observed-data* log posterior ``F(θ, η)``, or
    ``None`` when it cannot help (then EM goes on).

    EM's linear rate is the fraction of the information that the latent choice hides,
    and it is worst along directions that couple the item scores with the accuracies
    (a larger spread of ``λ`` with lower ``η`` explains the data almost as well). On
    read-level (``bench/bench_pair_models.py``, ``em_scale``) plain EM's largest gradients
    after 200 steps were in ``λ`` and in the accuracies of workers with few pairs drifting
    down from 0.94-0.99, while 500 of the 624 accuracies end on the bound 1 of their
    ``Beta(5, 1)`` mode; SQUAREM needed 834 steps. Newton on ``F`` itself is not slowed
    by the hidden information. The accuracies pushed against a bound (within ``edge`` and ``∂F/∂η`` pointing
    out) are set on the bound (EM's clip) and held there (the projection of projected
    Newton [Bertsekas82]); on the others and ``θ`` the step solves ``−∇²F δ = ∇F`` with the
    exact observed information (:func:`newton_direction`), is shortened to keep every
    ``η`` inside ``(0, 1)`` (99 % of the way to the bound at most) and backtracked until
    ``F`` rises (Armijo). Returns ``(θ, η)`` or ``None`` when ``−∇²F`` is not positive
    definite on the free set or no step length raises ``F``."""
    lo, hi = 1e-12, 1 - 1e-12
    gt, ge = gradient(st, Z, theta, eta, ab)
    up, down = (eta >= 1 - edge) & (ge > 0), (eta <= edge) & (ge < 0)
    eta0 = np.where(up, hi, np.where(down, lo, eta))
    free = ~(up | down)
    D = len(theta)
    if np.any(up | down):
        gt, ge = gradient(st, Z, theta, eta0, ab)
    try:
        dt, de = newton_direction(st, Z, theta, eta0, ab, free, gt, ge)
    except (np.linalg.LinAlgError, ValueError):
        return None
    step, g = np.concatenate([dt, de]), np.concatenate([gt, ge[free]])
    ef = eta0[free]
    with np.errstate(divide="ignore", invalid="ignore"):
        room = np.where(de > 0, (hi - ef) / de, np.where(de < 0, (lo - ef) / de, np.inf))
    t = min(1.0, 0.99 * float(np.min(room, initial=np.inf)))
    f0 = log_posterior(st, Z, theta, eta0, ab)
    slope = float(g @ step)
    while t > 1e-8:
        th = theta + t * step[:D]
        e = eta0.copy()
        e[free] = ef + t * de
        f = log_posterior(st, Z, th, e, ab)
        if np.isfinite(f) and f >= f0 + 1e-4 * t * slope:
            return th, e
        t *= 0.5
    return None


def fit_ext_em(st: Structure, worker_ab, *, mu0: float = 0.0, sigma0: float = 1.0,
               bias_sd: float = 1.0, tol: float = 1e-6, max_iter: int = 5000,
               accelerate: bool = True, newton_below: float | None = 1.0) -> ExtFit:
    """The MAP of (E1) by EM; ``worker_ab`` ``(W, 2)``: each worker's Beta ``(a, b)`` (the
    domain model gives every category of a worker that worker's prior). ``accelerate``:
    SQUAREM cycles (:func:`squarem_step`, same fixed point, monotone) instead of plain EM
    steps. ``newton_below``: once the projected gradient is below it, each cycle first
    tries a projected Newton step on the observed-data posterior (:func:`newton_step`)
    and falls back to EM when that fails (``None``: EM only). Every step raises ``F``.
    ``max_iter`` counts EM steps plus Newton steps."""
    t0 = time.perf_counter()
    wab = np.asarray(worker_ab, float)
    if wab.shape != (st.n_workers, 2):
        raise ValueError(f"worker_ab must be ({st.n_workers}, 2), got {wab.shape}")
    if np.any(wab < 1):
        raise DataError("the MAP needs Beta(a, b) priors with a, b >= 1 (below 1 the "
                        "posterior is unbounded at 0 or 1)", st.source)
    ab = group_beta(st, wab)
    Z = design(st, mu0, sigma0, bias_sd)
    theta = Z.mean.copy()
    # (E1) is unchanged by λ → −λ, β → β, η → 1 − η: starting every accuracy at 0.7 or
    # more picks the mode in which the workers are, on the whole, truthful (at η = 1/2
    # and λ = μ0 the gradient in λ vanishes: a saddle EM would not leave)
    eta = np.clip((ab[:, 0] - 1) / np.maximum(ab.sum(1) - 2, 1e-12), 0.7, 1 - 1e-6)
    it = n_newton = 0
    gnorm = projected_norm(st, Z, theta, eta, ab)
    trace = [(0, "start", gnorm)]
    while it < max_iter and gnorm > tol:
        nt = None
        if newton_below is not None and gnorm < newton_below:
            nt = newton_step(st, Z, theta, eta, ab)
        if nt is not None:
            (theta, eta), k, kind = nt, 1, "newton"
            n_newton += 1
        elif accelerate:
            (theta, eta, k), kind = squarem_step(st, Z, theta, eta, ab), "squarem"
        else:
            (theta, eta), k, kind = em_step(st, Z, theta, eta, ab), 1, "em"
        it += k
        gnorm = projected_norm(st, Z, theta, eta, ab)
        trace.append((it, kind, gnorm))
    H = neg_hessian(st, Z, theta, eta)
    try:
        cov = cho_solve(cho_factor(H), np.eye(len(theta)))
    except np.linalg.LinAlgError:
        raise DataError("Laplace's covariance does not exist at the EM MAP (the Hessian in "
                        "(λ, β) is not negative definite there)", st.source) from None
    sd = np.sqrt(np.diag(cov))
    L = st.n_items
    r = responsibilities(st, Z, theta, eta)
    R = np.bincount(st.group, r, st.n_groups)
    n = np.bincount(st.group, minlength=st.n_groups).astype(float)
    alpha = np.stack([ab[:, 0] + R, ab[:, 1] + n - R], 1)
    lam, beta = _split(st, theta)
    joint = None
    if np.all((eta > 1e-6) & (eta < 1 - 1e-6)):
        try:
            C = cho_solve(cho_factor(neg_hessian_full(st, Z, theta, eta, ab)),
                          np.eye(len(theta) + st.n_groups))
            js = np.sqrt(np.diag(C))
            joint = {"lambda_sd": js[:L], "beta_sd": js[L:len(theta)] if st.bias else None,
                     "eta_sd": js[len(theta):]}
        except np.linalg.LinAlgError:
            joint = None
    return ExtFit(st.variant, list(st.items), list(st.workers), list(st.groups), lam,
                  sd[:L], beta, sd[L:] if st.bias else None, eta, alpha, it, gnorm,
                  gnorm <= tol, log_posterior(st, Z, theta, eta, ab),
                  time.perf_counter() - t0, tol,
                  {"mu0": mu0, "sigma0": sigma0, "bias_sd": bias_sd if st.bias else None,
                   "eta": "Beta(a_w, b_w) of each group's worker"}, joint, n_newton,
                  trace)

"""EP with exact worker moments ([Minka01]; docs/design.md, Online, EP): the readable
specification and the fit (the loop runs in :mod:`.ep_exact_kernel`, tested equal).

:mod:`.ep` revisits each unit's site, but its site update is the one-pass kernel's: for
COUPLE, the worker's Dirichlet moves stage by stage through the Taylor estimate of
``E[softmax]`` (appendix 1.1.2 of [Pan18]) and each stage's moment matching (Eq. 9–10).
Here the *worker part* of the site update is the tilted distribution's exact marginal.

**COUPLE.** Site ``n``: a ranking of ``k`` items by worker ``w``; cavity ``q\\n(λ) =
Π_j N(m_j, v_j)`` and ``Dir(η; a)``. Its likelihood is ``Π_{s=0}^{k−2} Σ_t η̄^{(s)}_t
p_{s,t}(λ)`` ([Pan18], Eq. 3–4), ``p_s = softmax(λ of the items s..k−1)``, ``η̄^{(s)}`` the
first ``m = k − s`` entries of ``η`` renormalised. Expanded over the ``k!`` combinations
``c = (t_0, …, t_{k−2})``, the tilted distribution is

``p̂(λ, η) ∝ q\\n(λ) Dir(η; a) Σ_c Π_s η̄^{(s)}_{t_s} Π_s p_{s,t_s}(λ)``,        (E1)

so its η-marginal is ``Dir(η; a) Σ_c M_c Π_s η̄^{(s)}_{t_s}`` with ``M_c = E_{q\\n}[Π_s
p_{s,t_s}(λ)]`` — the scores integrated *jointly* over the stages (the stages share items),
by a tensor Gauss–Hermite rule over the ``k`` cavity Gaussians (:data:`GH_POINTS` per item).
The likelihood depends on ``η`` only through ``η̃ = η_{1..k} / Σ_{t≤k} η_t ~ Dir(a_{1..k})``
(aggregation, [Ng11]); by neutrality ``η̃`` is a product of independent Betas: ``u_i = S_{i−1}/S_i
~ Beta(a_1 + … + a_{i−1}, a_i)``, ``i = 2..k`` (``S_i = Σ_{t≤i} η̃_t``), and
``η̄^{(m)}_j = (1 − u_j)^{[j ≥ 2]} Π_{i=j+1}^{m} u_i``. Every integrand — the evidence and
``E[η̃_t]``, ``E[η̃_t²]`` — is a polynomial of degree ≤ ``k + 1 ≤ 5`` in each ``u_i``, so a
3-node Gauss–Jacobi rule per ``u_i`` ([Golub69]) integrates it exactly
(:func:`dirichlet_product_moments`), however close to a corner ``a`` puts the mass. The
projection matches the moments the one-pass update matches, the first two per component
([Pan18], Eq. 10): ``α_t = (E1_t − E2_t) E1_t / (E2_t − E1_t²)``, ``t ≤ k``, with ``E1_t``,
``E2_t`` those of ``η_t = S_k η̃_t`` (``S_k = Σ_{t≤k} η_t``, independent of ``η̃``, which the
site does not inform; :func:`project_worker`, ``projection="full"``) or of ``η̃_t`` as the
one-pass update takes a stage's renormalised sub-vector (``"sub"``); the two agree when
``k = K``, and measured they differ by ≤ 0.02 in any box figure. The entries beyond ``k``
keep the cavity's.

The *score part* is EP's: the one-pass stage updates on the cavity (``scores="ep"``, the
default), or, with ``scores="exact"``, the tilted Gaussian's marginal moments from the same
grid, with ``F(λ) = Σ_c D_c Π_s p_{s,t_s}(λ)``, ``D_c = E_{Dir(a)}[Π_s η̄^{(s)}_{t_s}]``:
``m_j ← m_j + √v_j E[F z_j]/E[F]``, ``v_j ← v_j max(1 + E[F(z_j²−1)]/E[F] − (E[F z_j]/E[F])², κ)``
(Stein's lemma [Stein81], as :func:`.gbmm.score_update_quadrature`).

Rankings longer than :data:`K_MAX` (= 4) are refused: the ``k!`` combinations and the
``n^k`` grid grow too fast (24 and 1,296 at ``k = 4``).

**CrowdBT.** Site: a rank-broken pair ``w > l``; likelihood ``η σ(d) + (1 − η) σ(−d)``,
linear in ``η``, so the η-marginal of the tilted distribution is ``Beta(η; a, b) (η c_1 +
(1 − η)(1 − c_1))`` with ``c_1 = E_{q\\n}[σ(d)]`` (64-node Gauss–Hermite over ``d``):
``E[η]``, ``E[η²]`` by a 2-node Gauss–Jacobi rule (exact: degree ≤ 3), the Beta matched to
them as Chen et al.'s step ([Chen13], Sect. 3) — without the ``κ2`` floor on ``c_1``. The
scores are the quadrature variant's tilted moments (:mod:`.crowdbt`).

Everything else — cavities, the improper-cavity rule, damping, convergence, the export —
is :mod:`.ep`'s.
"""

from __future__ import annotations

import time
from itertools import product

import numpy as np

from crowdrank.models.data import Rankings
from crowdrank.models.errors import UsageError
from crowdrank.models.priors import Priors

from . import ep as _ep
from . import kernels
from .ep_exact_kernel import GH_POINTS, K_MAX, ep_exact_couple_pass, ep_exact_crowdbt_pass
from .gbmm import gauss_hermite, ranking_update
from .simplex_moments import alpha_from_moments, combos
from .state import CLAMP_KEYS, empty_counts

#: the models ep-exact fits and how each worker's parameter is integrated: COUPLE's η over
#: the K-simplex (nested Betas), CrowdBT's accuracy over [0, 1] (Gauss–Jacobi)
WORKER_PART = {"couple": "simplex", "crowdbt": "beta"}

SCORES = ("ep", "exact")
PROJECTIONS = ("full", "sub")
WORKERS = ("site", "joint")
#: Gauss–Jacobi nodes per nested Beta variable (exact for degree ≤ 5; module docstring).
JACOBI_NODES = 3


# ------------------------------------------------------------------ the integrals
def beta_rule(p: float, q: float, n: int = JACOBI_NODES):
    """Gauss–Jacobi nodes ``x`` on [0, 1] and weights summing to one for ``Beta(p, q)``:
    ``Σ w g(x) = E[g(U)]`` for polynomials ``g`` of degree ``< 2n`` ([Golub69])."""
    from scipy.special import roots_jacobi

    y, w = roots_jacobi(n, q - 1.0, p - 1.0)       # weight (1−y)^(q−1) (1+y)^(p−1)
    return (1.0 + y) / 2.0, w / w.sum()


def simplex_rule(a) -> tuple[np.ndarray, np.ndarray]:
    """A product rule for ``Dir(a)`` (``k = len(a)``): points ``η̃`` ``(n^{k−1}, k)`` and
    weights, through ``u_i ~ Beta(a_1+…+a_{i−1}, a_i)`` (module docstring)."""
    a = np.asarray(a, float)
    k = len(a)
    rules = [beta_rule(a[:i - 1].sum(), a[i - 1]) for i in range(2, k + 1)]
    pts, wts = [], []
    for pick in product(*[range(len(r[0])) for r in rules]):
        S = np.ones(k + 1)                          # S[i] = Σ_{t≤i} η̃_t, S[k] = 1
        wt = 1.0
        for i in range(k, 1, -1):                   # S_{i−1} = u_i S_i
            x, w = rules[i - 2][0][pick[i - 2]], rules[i - 2][1][pick[i - 2]]
            S[i - 1] = x * S[i]
            wt *= w
        eta = np.array([S[1]] + [S[i] - S[i - 1] for i in range(2, k + 1)])
        pts.append(eta)
        wts.append(wt)
    return np.array(pts), np.array(wts)


def stage_weights(eta: np.ndarray, k: int, combo) -> float:
    """``Π_s η̄^{(s)}_{t_s}`` at one point ``η̃`` of the ``k``-simplex."""
    out = 1.0
    for s, t in enumerate(combo):
        m = k - s
        out *= eta[t] / eta[:m].sum()
    return out


def dirichlet_product_moments(a, M: dict) -> tuple[float, np.ndarray, np.ndarray]:
    """Evidence, ``E[η̃_t]`` and ``E[η̃_t²]`` under ``Dir(a) Σ_c M[c] Π_s η̄^{(s)}_{t_s}``
    (Eq. E1's η-marginal), by :func:`simplex_rule`."""
    k = len(a)
    pts, wts = simplex_rule(a)
    like = np.array([sum(M[c] * stage_weights(p, k, c) for c in M) for p in pts])
    wl = wts * like
    Z = wl.sum()
    return Z, wl @ pts / Z, wl @ pts ** 2 / Z


def softmax_product_moments(mc, vc, D: dict | None = None):
    """``M_c = E[Π_s p_{s,t_s}(λ)]`` under ``N(mc, diag vc)`` by the tensor Gauss–Hermite
    rule of :data:`GH_POINTS`; with ``D``, also ``(Z, G, H)`` of ``F = Σ_c D_c Π_s p_{s,t_s}``
    (module docstring)."""
    from scipy.special import softmax

    k = len(mc)
    z1, w1 = gauss_hermite(GH_POINTS[k])
    grid = np.stack(np.meshgrid(*([z1] * k), indexing="ij"), -1).reshape(-1, k)
    wts = np.prod(np.stack(np.meshgrid(*([w1] * k), indexing="ij"), -1).reshape(-1, k), 1)
    lam = np.asarray(mc, float) + np.sqrt(np.asarray(vc, float)) * grid
    ps = [softmax(lam[:, s:], axis=1) for s in range(k - 1)]
    prods = {c: np.prod([ps[s][:, t] for s, t in enumerate(c)], axis=0) for c in combos(k)}
    M = {c: float(wts @ v) for c, v in prods.items()}
    if D is None:
        return M, None
    wF = wts * sum(D[c] * prods[c] for c in prods)
    return M, (wF.sum(), wF @ grid, wF @ (grid ** 2 - 1.0))


def project_worker(a_c, E1, E2, projection="full") -> np.ndarray:
    """The cavity row ``a_c`` with its first ``k = len(E1)`` entries from Eq. 10.

    ``"full"``: Eq. 10 on the moments of ``η_t`` itself, ``η_t = S_k η̃_t`` with ``S_k =
    Σ_{t≤k} η_t ~ Beta(A_k, S − A_k)`` independent of ``η̃`` and left as it was by the
    site (aggregation, [Ng11]): ``E[η_t] = (A_k/S) E[η̃_t]``, ``E[η_t²] = A_k(A_k+1)/(S(S+1))
    E[η̃_t²]`` (``A_k = Σ_{t≤k} a_t``, ``S = Σ a``); for ``k = K`` the two agree.
    ``"sub"``: Eq. 10 on ``η̃``'s moments, as the one-pass update treats a stage's
    renormalised sub-vector."""
    a_c = np.asarray(a_c, float)
    k = len(E1)
    A, S = a_c[:k].sum(), a_c.sum()
    s1, s2 = (A / S, A * (A + 1.0) / (S * (S + 1.0))) if projection == "full" else (1.0, 1.0)
    out = a_c.copy()
    out[:k] = alpha_from_moments(s1 * np.asarray(E1), s2 * np.asarray(E2))
    return out


def couple_site_python(mc, vc, a_c, *, scores="ep", projection="full", opts=None):
    """One COUPLE site update on the cavity ``N(mc, vc)``, ``Dir(a_c)`` (``a_c`` the
    worker's full row; ``k = len(mc)``): returns ``(m', v', α')`` before damping;
    ``projection`` as :func:`project_worker`."""
    k = len(mc)
    if k > K_MAX:
        raise UsageError(f"ep-exact integrates a worker's simplex for rankings of at most "
                         f"{K_MAX} items; this one has {k}")
    a_c = np.asarray(a_c, float)
    ak = a_c[:k]
    pts, wts = simplex_rule(ak)
    D = {c: float(wts @ np.array([stage_weights(p, k, c) for p in pts])) for c in combos(k)}
    M, tilted = softmax_product_moments(mc, vc, D if scores == "exact" else None)
    _, E1, E2 = dirichlet_product_moments(ak, M)
    a_new = project_worker(a_c, E1, E2, projection)
    o = opts or {}
    kappa = float(o.get("kappa", 1e-4))
    if scores == "exact":
        Z, G, H = tilted
        G, H = G / Z, H / Z
        m_new = np.asarray(mc) + np.sqrt(vc) * G
        v_new = np.asarray(vc) * np.maximum(1.0 + H - G * G, kappa)
    else:                                           # EP's score part: the stage updates
        mu, s2, row = list(mc), list(vc), list(a_c)
        ranking_update(mu, s2, row, list(range(k)), taylor=o.get("taylor", "paper"),
                       score_alpha=o.get("score_alpha", "updated"), kappa=kappa,
                       kappa2=float(o.get("kappa2", 1e-4)), counts=empty_counts())
        m_new, v_new = np.array(mu), np.array(s2)
    return m_new, v_new, a_new


def crowdbt_worker_python(a: float, b: float, c1: float) -> tuple[float, float]:
    """The exact tilted Beta's ``(a', b')``: ``E[η]``, ``E[η²]`` under ``Beta(a, b) (η c1 +
    (1 − η)(1 − c1))`` by a 2-node Gauss–Jacobi rule, then Chen et al.'s match."""
    x, w = beta_rule(a, b, 2)
    wl = w * (x * c1 + (1.0 - x) * (1.0 - c1))
    E1, E2 = wl @ x / wl.sum(), wl @ x ** 2 / wl.sum()
    s = (E1 - E2) / (E2 - E1 * E1)
    return float(E1 * s), float((1.0 - E1) * s)


# ------------------------------------------------------------------ the passes
def ep_exact_pass_python(state: _ep.EPState, seq: np.ndarray, damping: float, *,
                         scores: str = "ep", projection: str = "full") -> dict:
    """One pass, readable (the specification of :mod:`.ep_exact_kernel`'s loops): the
    cavity, the exact site update (:func:`couple_site_python`, or for CrowdBT the
    quadrature scores and :func:`crowdbt_worker_python`), damping, as :mod:`.ep`."""
    from .crowdbt import _scores_quadrature, difference_moments

    post = state.post
    mu, s2, alpha = post.mu, post.sigma2, post.alpha
    mu0, s20, a0 = mu.copy(), s2.copy(), alpha.copy()
    first = state.passes_done == 0
    d = 0.0 if first else float(damping)
    counts = empty_counts()
    improper = 0
    t0 = time.perf_counter()
    for n in (int(x) for x in seq):
        k = int(state.lengths[n])
        it = state.ordr[:k, n]
        w = int(state.wk[n])
        st, sn = state.site_tau[n, :k], state.site_nu[n, :k]
        tau_c, nu_c = 1.0 / s2[it] - st, mu[it] / s2[it] - sn
        a_c = alpha[w] - state.site_alpha[n]
        if np.any(~(tau_c > 0)) or np.any(~(a_c > 0)):
            improper += 1
            continue
        mc, vc = (mu[it].copy(), s2[it].copy()) if first else (nu_c / tau_c, 1.0 / tau_c)
        if WORKER_PART[state.model] == "simplex":
            m_new, v_new, a_new = couple_site_python(mc, vc, a_c, scores=scores,
                                                     projection=projection, opts=state.opts)
        else:
            S0, S1, S2 = difference_moments(mc[0], mc[1], vc[0], vc[1])
            m_new = np.empty(2)
            v_new = np.empty(2)
            m_new[0], m_new[1], v_new[0], v_new[1] = _scores_quadrature(
                mc[0], mc[1], vc[0], vc[1], a_c[0], a_c[1], S0, S1, S2,
                float(state.opts.get("kappa", 1e-4)), counts)
            a_new = np.array(crowdbt_worker_python(a_c[0], a_c[1], S0))
        new_t = d * st + (1.0 - d) * (1.0 / v_new - tau_c)
        new_n = d * sn + (1.0 - d) * (m_new / v_new - nu_c)
        new_a = d * state.site_alpha[n] + (1.0 - d) * (a_new - a_c)
        if first:                                  # pass 1: ADF's output as it is
            mu[it], s2[it], alpha[w] = m_new, v_new, a_new
        else:
            tq = tau_c + new_t
            mu[it], s2[it], alpha[w] = (nu_c + new_n) / tq, 1.0 / tq, a_c + new_a
        state.site_tau[n, :k], state.site_nu[n, :k] = new_t, new_n
        state.site_alpha[n] = new_a
    counts = np.array([counts[key] for key in CLAMP_KEYS], dtype=np.int64)
    return _ep._finish_pass(state, d, improper, counts, time.perf_counter() - t0, mu0, s20,
                            a0)


def ep_exact_pass(state: _ep.EPState, seq: np.ndarray, damping: float, *,
                  scores: str = "ep", projection: str = "full", python: bool = False) -> dict:
    """One pass in place (numba; ``python=True``: :func:`ep_exact_pass_python`)."""
    if not 0.0 <= damping < 1.0:
        raise UsageError(f"damping must be in [0, 1), got {damping!r}")
    if python:
        return ep_exact_pass_python(state, seq, damping, scores=scores,
                                    projection=projection)
    post, o = state.post, state.opts
    mu0, s20, a0 = post.mu.copy(), post.sigma2.copy(), post.alpha.copy()
    first = state.passes_done == 0
    d = 0.0 if first else float(damping)
    counts = np.zeros(len(CLAMP_KEYS), dtype=np.int64)
    err = np.zeros(3, dtype=np.int64)
    out = np.zeros(1, dtype=np.int64)
    seq = np.asarray(seq, dtype=np.int64)
    t0 = time.perf_counter()
    if WORKER_PART[state.model] == "simplex":
        bad = ep_exact_couple_pass(
            first, d, seq, state.ordr, state.lengths, state.wk, post.mu, post.sigma2,
            post.alpha, state.site_tau, state.site_nu, state.site_alpha, scores == "exact",
            projection == "full",
            kernels.TAYLOR_CODES.get(o.get("taylor", "paper"), 0),
            o.get("score_alpha", "updated") == "prior", float(o.get("kappa", 1e-4)),
            float(o.get("kappa2", 1e-4)), state.strict, counts, err, out)
    else:
        bad = ep_exact_crowdbt_pass(
            first, d, seq, state.ordr, state.wk, post.mu, post.sigma2, post.alpha,
            state.site_tau, state.site_nu, state.site_alpha, float(o.get("kappa", 1e-4)),
            state.strict, counts, err, out)
    secs = time.perf_counter() - t0
    if bad >= 0:
        from .api import _raise_strict
        _raise_strict(state.data, state.src, seq, err, state.passes_done, state.pairwise)
    return _ep._finish_pass(state, d, int(out[0]), counts, secs, mu0, s20, a0)


def ep_exact_init(data: Rankings, model: str, priors: Priors, **kw) -> _ep.EPState:
    """:func:`.ep.ep_init` for COUPLE or CrowdBT, refusing rankings longer than
    :data:`K_MAX` (COUPLE) with a clear message."""
    if model not in WORKER_PART:
        raise UsageError(f"ep-exact fits {' and '.join(WORKER_PART)} (a worker parameter to "
                         f"integrate), not {model!r}")
    if WORKER_PART[model] == "simplex" and data.n_rankings and int(data.lengths.max()) > K_MAX:
        raise UsageError(
            f"ep-exact integrates each worker's η exactly over the simplex for rankings of "
            f"at most {K_MAX} items (K ≤ {K_MAX}: k! stage combinations and a k-dimensional "
            f"Gauss–Hermite grid per ranking); these data have rankings of "
            f"{int(data.lengths.max())} items: use ep")
    if WORKER_PART[model] == "beta":
        kw["taylor"] = "quadrature"                 # the scores' exact moments
    return _ep.ep_init(data, model, priors, **kw)


def _joint_sweeps(state, data, priors, sweeps, lam, damping, scores, projection):
    """Alternate the joint worker factor and a score pass; the workers' EP sites are set to
    equal shares of (joint − prior), so the pass's cavities stay positive (each is
    ``a⁰/N_w + (1 − 1/N_w)·joint``) and end on the joint workers."""
    from .ep_joint import joint_worker_update

    post = state.post
    a0 = post.alpha.copy()                          # the prior: α minus the worker sites
    np.add.at(a0, state.wk, -state.site_alpha)
    nw = np.bincount(state.wk, minlength=len(a0))
    for sweep in range(sweeps + 1):
        joint = joint_worker_update(a0, post.mu, post.sigma2, state.ordr, state.lengths,
                                    state.wk, lam, (state.site_tau, state.site_nu))
        post.alpha[:] = joint
        state.site_alpha[:] = (joint - a0)[state.wk] / np.maximum(nw[state.wk], 1)[:, None]
        if sweep == sweeps:
            break
        seq = np.arange(data.n_rankings)
        ep_exact_pass(state, seq, _ep.pass_damping(damping, state.log), scores=scores,
                      projection=projection)


def fit_ep_exact(data: Rankings, model: str, priors: Priors, *, passes: int = _ep.EP_PASSES,
                 damping: float = _ep.EP_DAMPING, tol: float = _ep.EP_TOL,
                 order: str = "file", seed: int = 0, strict: bool = False,
                 scores: str = "ep", projection: str = "full", workers: str = "site",
                 sweeps: int = 2, lam: str = "gh", callback=None, **alg):
    """EP with exact worker moments (module docstring): passes as :func:`.ep.fit_ep`
    (stopping once :func:`.ep.converged`); ``scores`` is ``"ep"`` (the stage updates) or
    ``"exact"`` (COUPLE: the tilted Gaussian's moments on the same grid); ``projection``
    as :func:`project_worker`; ``alg`` the one-pass options of the score part.
    ``workers="joint"`` (COUPLE): after the passes, ``sweeps`` times each worker's η from
    all its rankings at once (:mod:`.ep_joint`, ``lam`` its score integral) and one more
    pass for the scores with those workers, ending on the joint workers. Returns an
    ``OnlinePosterior``."""
    if scores not in SCORES:
        raise UsageError(f"scores must be one of {SCORES}, got {scores!r}")
    if workers not in WORKERS or (workers == "joint" and WORKER_PART.get(model) != "simplex"):
        raise UsageError(f"workers must be one of {WORKERS} (joint: COUPLE), got {workers!r}")
    if projection not in PROJECTIONS:
        raise UsageError(f"projection must be one of {PROJECTIONS}, got {projection!r}")
    _ep.check_pass_options(passes, tol, damping)
    state = ep_exact_init(data, model, priors, strict=strict, **alg)
    from .api import pairs_sequence, pass_orders

    for rseq in pass_orders(data.n_rankings, order, seed, passes):
        seq = pairs_sequence(data.lengths, rseq) if state.pairwise else rseq
        entry = ep_exact_pass(state, seq, _ep.pass_damping(damping, state.log),
                              scores=scores, projection=projection)
        if callback is not None:
            callback(entry)
        if state.passes_done > 1 and _ep.converged(entry, tol):
            break
    if workers == "joint":
        _joint_sweeps(state, data, priors, sweeps, lam, damping, scores, projection)
    post = _ep.ep_export(state, tol=tol, order=order, seed=seed, damping=damping,
                         max_passes=passes)
    post.options["ep"].update(worker_moments="exact", scores=scores, projection=projection,
                              gh_points={str(k): v for k, v in GH_POINTS.items()},
                              jacobi_nodes=JACOBI_NODES, workers=workers,
                              **({"sweeps": sweeps, "lam": lam} if workers == "joint" else {}))
    return post

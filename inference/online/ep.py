"""Expectation propagation over the online updates ([Minka01]; docs/design.md, Online, EP).

The one-pass methods (:mod:`.gbmm`, :mod:`.crowdbt`, :mod:`.wenglin`) are assumed-density
filtering: every ranking is absorbed once, into whatever the approximation was when it came,
and never revisited, so the result depends on the order and its early rankings were matched
against a nearly flat prior. EP keeps what each *unit* (a ranking; a rank-broken pair for
CrowdBT and for OnlineBT with ``bt_breaking="pairs"``) contributed — its **site** — and
revisits it:

- site of unit ``n``: the change it made to the natural parameters of its items' Gaussians,
  ``Δτ_r = 1/σ_r²(after) − 1/σ_r²(before)`` and ``Δν_r = μ_r/σ_r²(after) − μ_r/σ_r²(before)``,
  and to its worker's Dirichlet (COUPLE) or Beta (CrowdBT), ``Δα = α(after) − α(before)``
  (the concentrations *are* the natural parameters up to a shift of one, so sites add);
- **cavity**: the current approximation with the site removed, ``τ − Δτ_n``, ``ν − Δν_n``,
  ``α_w − Δα_n``;
- the same moment-matching update as the one-pass method (the kernels of :mod:`.kernels`,
  unchanged) applied to the cavity gives ``q*``; the full new site is ``q* − cavity``;
- **damping** ``d``: the stored site becomes ``d · old + (1 − d) · full``, so the new
  approximation is the convex combination ``d · q_old + (1 − d) · q*`` in natural
  parameters — proper whenever the cavity is. The default is ``d = 0`` (undamped): on
  every subject of the approximation study (docs/fidelity.md: the default COUPLE and
  CrowdBT data, the four medium-scale worker types, read-level) it reaches the damped
  run's fixed point (centred means within 7e-6 sd) in 2–3× fewer passes, with no improper
  cavity (on BabyFace neither run converges in 200 passes, the common level still
  drifting, and their centred means agree to 0.04 sd). Should a pass meet an improper
  cavity, the later passes of :func:`fit_ep` fall back to ``d = 0.5``
  (:func:`pass_damping`, logged per pass);
- **improper cavity** rule: when a cavity has ``τ ≤ 0`` for one of its items or a
  concentration ``≤ 0`` (removing a site can leave no distribution), the unit is skipped in
  that pass — its site is kept as it is and the approximation is unchanged — and counted
  (``improper_cavities`` per pass, in the result);
- the first pass starts with every site at zero, so its cavity is the current approximation
  and it *is* the one-pass update (bit for bit, undamped); damping applies from pass 2.

Convergence is measured after each pass: the largest item-mean change in units of the
previous sd, the largest ``|Δ log σ²|`` and the largest ``|Δ log α|``; the run stops when all
three are below ``tol`` (or after ``passes``). The result is an
:class:`~crowdrank.inference.online.state.OnlinePosterior` in the usual ``posterior.json`` schema
(``algorithm = "ep-" + the one-pass algorithm``, the per-pass log in ``options["ep"]``), so
the audit compares it like any other variant.

The functions follow the (init, update, export) pattern: :func:`ep_init` builds the state
(prior approximation, zero sites), :func:`ep_pass` runs one pass in place and returns its
log entry, :func:`ep_export` returns the posterior; :func:`fit_ep` strings them together.
Weng–Lin with ``tau > 0`` adds variance before every game (a dynamic model): it has no fixed
point to refine and is refused.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from numba import njit

from crowdrank.models.data import Rankings
from crowdrank.models.errors import UsageError
from crowdrank.models.priors import Priors
from crowdrank.models.registry import ModelSpec

from . import kernels
from .api import (
    _raise_strict,
    _run_kernel,
    _start_state,
    algorithm_options,
    is_pairwise,
    kernel_arrays,
    pass_orders,
)
from .state import CLAMP_KEYS, OnlinePosterior

#: Default convergence threshold on the per-pass changes (see the module docstring).
EP_TOL = 1e-3
#: Default damping: the weight kept on a site's previous value (0 = undamped; module doc).
EP_DAMPING = 0.0
#: The damping of the passes after one that met an improper cavity, when less was asked.
EP_FALLBACK_DAMPING = 0.5
#: Default maximum number of passes.
EP_PASSES = 10


@dataclass
class EPState:
    """The approximation (``post``, updated in place), the sites and the per-pass log.

    ``site_tau``, ``site_nu``: ``(N, m)`` item-site natural parameters, row ``n`` for unit
    ``n``, column ``j`` for its ``j``-th item (``m`` = longest unit); ``site_alpha``:
    ``(N, K)`` worker-site concentrations (None for PL/BT).
    """

    post: OnlinePosterior
    model: str
    opts: dict
    data: Rankings
    src: Rankings                   # the units: rankings, or rank-broken pairs
    pairwise: bool
    ordr: np.ndarray                # (m, N) state item indices of each unit, best first
    lengths: np.ndarray             # (N,)
    wk: np.ndarray                  # (N,) state worker index of each unit
    site_tau: np.ndarray
    site_nu: np.ndarray
    site_alpha: np.ndarray | None
    strict: bool = False
    passes_done: int = 0
    log: list = field(default_factory=list)
    seconds: float = 0.0


def ep_init(data: Rankings, model: str | ModelSpec, priors: Priors, *,
            strict: bool = False, **alg) -> EPState:
    """The EP state at the prior: approximation ``=`` prior, every site zero. ``model``: a
    name (looked up once, here) or its spec.

    ``alg`` are the one-pass options (:func:`~crowdrank.inference.online.api.algorithm_options`:
    ``taylor``, ``score_alpha``, ``kappa``, ``kappa2``, ``wl_params``, ``bt_breaking``).
    """
    opts = algorithm_options(model, priors=priors, **alg)
    if float(opts.get("tau", 0.0)) != 0.0:      # Weng–Lin's dynamics
        raise UsageError("EP needs a static model: Weng–Lin tau must be 0 (tau > 0 adds "
                         "variance before every game, so there is no fixed point)")
    post = _start_state(data, model, priors, None, opts)
    item_map, worker_map = post.index_maps(data)
    pairwise = is_pairwise(model, opts)
    src = data.rank_break() if pairwise else data
    ordr, wk, lengths = kernel_arrays(src, item_map, worker_map)
    N, m = src.n_rankings, ordr.shape[0]
    return EPState(post=post, model=post.model, opts=opts, data=data, src=src,
                   pairwise=pairwise,
                   ordr=ordr, lengths=lengths, wk=wk,
                   site_tau=np.zeros((N, m)), site_nu=np.zeros((N, m)),
                   site_alpha=None if post.alpha is None else np.zeros((N, post.alpha.shape[1])),
                   strict=strict)


def _changes(mu0, s20, a0, mu1, s21, a1) -> dict:
    """The convergence measures between two approximations (module docstring)."""
    out = {"max_dmu_sd": float(np.max(np.abs(mu1 - mu0) / np.sqrt(s20))) if mu0.size else 0.0,
           "max_dlog_sigma2": float(np.max(np.abs(np.log(s21 / s20)))) if mu0.size else 0.0,
           "max_dlog_alpha": 0.0}
    if a0 is not None and a0.size:
        out["max_dlog_alpha"] = float(np.max(np.abs(np.log(a1 / a0))))
    return out


def ep_pass(state: EPState, seq: np.ndarray, damping: float = EP_DAMPING, *,
            python: bool = False) -> dict:
    """One EP pass over the units ``seq`` (unit indices, in that order), in place.

    Returns the pass's log entry: convergence measures, ``improper_cavities`` and the guard
    counters of this pass. The loop runs in :func:`ep_pass_kernel` (numba), or, with
    ``python=True``, in the readable :func:`_ep_pass_python` it transcribes (tested equal).
    """
    if not python:
        return _ep_pass_numba(state, seq, damping)
    return _ep_pass_python(state, seq, damping)


def _ep_pass_python(state: EPState, seq: np.ndarray, damping: float) -> dict:
    """The readable pass (the specification of :func:`ep_pass_kernel`)."""
    if not 0.0 <= damping < 1.0:
        raise UsageError(f"damping must be in [0, 1), got {damping!r}")
    post = state.post
    mu, s2, alpha = post.mu, post.sigma2, post.alpha
    mu0, s20 = mu.copy(), s2.copy()
    a0 = None if alpha is None else alpha.copy()
    counts = np.zeros(len(CLAMP_KEYS), dtype=np.int64)
    err = np.zeros(3, dtype=np.int64)
    first = state.passes_done == 0
    d = 0.0 if first else float(damping)
    improper = 0
    one = np.zeros(1, dtype=np.int64)
    t0 = time.perf_counter()
    for n in seq:
        n = int(n)
        k = int(state.lengths[n])
        it = state.ordr[:k, n]
        w = int(state.wk[n])
        st, sn = state.site_tau[n, :k], state.site_nu[n, :k]
        tau, nu = 1.0 / s2[it], mu[it] / s2[it]
        tau_c, nu_c = tau - st, nu - sn
        if alpha is not None:
            a_old = alpha[w].copy()
            a_c = a_old - state.site_alpha[n]
        if np.any(~(tau_c > 0)) or (alpha is not None and np.any(~(a_c > 0))):
            improper += 1           # no cavity distribution: keep the site as it is
            continue
        if not first:               # load the cavity (pass 1: the cavity is q itself)
            mu[it], s2[it] = nu_c / tau_c, 1.0 / tau_c
            if alpha is not None:
                alpha[w] = a_c
        one[0] = n
        bad = _run_kernel(state.model, state.opts, state.ordr, state.lengths, state.wk, one,
                          0, 1, mu, s2, alpha, state.strict, counts, err)
        if bad >= 0:
            _raise_strict(state.data, state.src, one, err, state.passes_done, state.pairwise)
        tau_s, nu_s = 1.0 / s2[it], mu[it] / s2[it]
        new_t = d * st + (1.0 - d) * (tau_s - tau_c)
        new_n = d * sn + (1.0 - d) * (nu_s - nu_c)
        if not first:               # pass 1 keeps the kernel's output bit for bit
            tau_q = tau_c + new_t
            mu[it], s2[it] = (nu_c + new_n) / tau_q, 1.0 / tau_q
        state.site_tau[n, :k], state.site_nu[n, :k] = new_t, new_n
        if alpha is not None:
            new_a = d * state.site_alpha[n] + (1.0 - d) * (alpha[w] - a_c)
            if not first:
                alpha[w] = a_c + new_a
            state.site_alpha[n] = new_a
    return _finish_pass(state, d, improper, counts, time.perf_counter() - t0, mu0, s20, a0)


def _finish_pass(state, d, improper, counts, secs, mu0, s20, a0) -> dict:
    post = state.post
    state.seconds += secs
    state.passes_done += 1
    for key, c in zip(CLAMP_KEYS, counts):
        post.clamped[key] = int(post.clamped.get(key, 0) + c)
    entry = {"pass": state.passes_done, "damping": d, "improper_cavities": int(improper),
             "clamped": {k: int(c) for k, c in zip(CLAMP_KEYS, counts)},
             "seconds": secs, **_changes(mu0, s20, a0, post.mu, post.sigma2, post.alpha)}
    state.log.append(entry)
    return entry


_MODEL_CODES = {"couple": 0, "crowdbt": 1, "pl": 2, "bt": 3}


def _ep_pass_numba(state: EPState, seq: np.ndarray, damping: float) -> dict:
    if not 0.0 <= damping < 1.0:
        raise UsageError(f"damping must be in [0, 1), got {damping!r}")
    post = state.post
    mu0, s20 = post.mu.copy(), post.sigma2.copy()
    a0 = None if post.alpha is None else post.alpha.copy()
    first = state.passes_done == 0
    d = 0.0 if first else float(damping)
    counts = np.zeros(len(CLAMP_KEYS), dtype=np.int64)
    err = np.zeros(3, dtype=np.int64)
    out = np.zeros(1, dtype=np.int64)
    has_alpha = post.alpha is not None
    alpha = post.alpha if has_alpha else np.ones((1, 1))
    sa = state.site_alpha if has_alpha else np.zeros((1, 1))
    o = state.opts
    g = o.get("gamma", "sigma/c")
    gmode = kernels.GAMMA_CODES.get(g, 2) if isinstance(g, str) else 2
    t0 = time.perf_counter()
    bad = ep_pass_kernel(
        _MODEL_CODES[state.model], first, d, np.asarray(seq, dtype=np.int64), state.ordr,
        state.lengths, state.wk, post.mu, post.sigma2, alpha, has_alpha, state.site_tau,
        state.site_nu, sa, kernels.TAYLOR_CODES.get(o.get("taylor", "paper"), 0),
        o.get("score_alpha", "updated") == "prior", float(o.get("kappa", 1e-4)),
        float(o.get("kappa2", 1e-4)), float(o.get("beta", 1.0)), float(o.get("tau", 0.0)),
        gmode, float(g) if gmode == 2 else 0.0, state.strict, counts, err, out)
    secs = time.perf_counter() - t0
    if bad >= 0:
        _raise_strict(state.data, state.src, np.asarray(seq, dtype=np.int64), err,
                      state.passes_done, state.pairwise)
    return _finish_pass(state, d, int(out[0]), counts, secs, mu0, s20, a0)


@njit(cache=True, error_model="numpy")
def ep_pass_kernel(model, first, d, seq, ordr, lengths, wk, mu, s2, alpha, has_alpha,
                   site_tau, site_nu, site_alpha, taylor, score_prior, kappa, kappa2, beta,
                   tau, gmode, gconst, strict, counts, err, out):
    """:func:`_ep_pass_python` as one numba loop; the update of a unit is the one-pass
    kernel of ``model`` (0 couple, 1 crowdbt, 2 pl, 3 bt) on a one-element sequence.
    ``out[0]`` receives the number of improper cavities; returns ``-1``, or the position
    in ``seq`` of a strict-mode failure (``err`` as the kernels fill it)."""
    K = ordr.shape[0]
    Ka = alpha.shape[1]
    tau_c = np.empty(K)
    nu_c = np.empty(K)
    a_c = np.empty(Ka)
    one = np.empty(1, dtype=np.int64)
    # COUPLE's work arrays once per pass, not once per ranking, and the update inlined:
    # the one-pass kernel's allocations and the call per ranking were most of a pass's cost
    (mu_w, s2_w, e_w, p_w, R_w, a_w, an_w, cand_w, QA_w, QB_w, QC_w, qi_w, qz_w,
     ql_w) = kernels.gbmm_scratch(K)
    improper = 0
    for pos in range(seq.shape[0]):
        n = seq[pos]
        k = lengths[n]
        w = wk[n]
        ok = True
        for j in range(k):
            r = ordr[j, n]
            tau_c[j] = 1.0 / s2[r] - site_tau[n, j]
            nu_c[j] = mu[r] / s2[r] - site_nu[n, j]
            if not tau_c[j] > 0.0:
                ok = False
        if has_alpha:
            for t in range(Ka):
                a_c[t] = alpha[w, t] - site_alpha[n, t]
                if not a_c[t] > 0.0:
                    ok = False
        if not ok:
            improper += 1             # no cavity distribution: keep the site as it is
            continue
        if not first:
            for j in range(k):
                r = ordr[j, n]
                mu[r] = nu_c[j] / tau_c[j]
                s2[r] = 1.0 / tau_c[j]
            if has_alpha:
                for t in range(Ka):
                    alpha[w, t] = a_c[t]
        one[0] = n
        if model == 0:
            # inlined (with its guards): numba's on-disk cache of this function is keyed on
            # this file alone, so it is rebuilt from a changed gbmm_units only when this
            # file changes too (kernels.gbmm_units' docstring)
            bad = kernels.gbmm_units(ordr, lengths, wk, one, 0, 1, mu, s2, alpha, taylor,
                                     score_prior, kappa, kappa2, strict, counts, err, mu_w,
                                     s2_w, e_w, p_w, R_w, a_w, an_w, cand_w, QA_w, QB_w, QC_w,
                                     qi_w, qz_w, ql_w)
        elif model == 1:
            bad = kernels.crowdbt_kernel(ordr, wk, one, 0, 1, mu, s2, alpha, kappa, kappa2,
                                         strict, counts, err, taylor)
        elif model == 2:
            bad = kernels.pl_kernel(ordr, lengths, one, 0, 1, mu, s2, beta, kappa, tau,
                                    gmode, gconst, strict, counts, err)
        else:
            bad = kernels.bt_kernel(ordr, lengths, one, 0, 1, mu, s2, beta, kappa, tau,
                                    gmode, gconst, strict, counts, err)
        if bad >= 0:
            err[0] = pos
            out[0] = improper
            return pos
        for j in range(k):
            r = ordr[j, n]
            ts = 1.0 / s2[r]
            ns = mu[r] / s2[r]
            nt = d * site_tau[n, j] + (1.0 - d) * (ts - tau_c[j])
            nn = d * site_nu[n, j] + (1.0 - d) * (ns - nu_c[j])
            if not first:
                tq = tau_c[j] + nt
                mu[r] = (nu_c[j] + nn) / tq
                s2[r] = 1.0 / tq
            site_tau[n, j] = nt
            site_nu[n, j] = nn
        if has_alpha:
            for t in range(Ka):
                na = d * site_alpha[n, t] + (1.0 - d) * (alpha[w, t] - a_c[t])
                if not first:
                    alpha[w, t] = a_c[t] + na
                site_alpha[n, t] = na
    out[0] = improper
    return -1


def pass_damping(damping: float, log: list[dict]) -> float:
    """The damping of the next pass: ``damping``, or :data:`EP_FALLBACK_DAMPING` once a
    pass of ``log`` met an improper cavity (the undamped update then overshot somewhere;
    the skip rule keeps that pass proper, damping keeps the next ones from repeating it)."""
    if damping < EP_FALLBACK_DAMPING and any(e["improper_cavities"] for e in log):
        return EP_FALLBACK_DAMPING
    return damping


def converged(entry: dict, tol: float = EP_TOL) -> bool:
    """All three per-pass changes below ``tol``."""
    return max(entry["max_dmu_sd"], entry["max_dlog_sigma2"], entry["max_dlog_alpha"]) < tol


def ep_export(state: EPState, *, tol: float = EP_TOL, order: str = "file", seed: int = 0,
              damping: float = EP_DAMPING, max_passes: int | None = None) -> OnlinePosterior:
    """The approximation as an :class:`OnlinePosterior` (a copy), with the EP log in
    ``options["ep"]`` and ``algorithm = "ep-<one-pass algorithm>"``."""
    post = state.post.copy()
    post.algorithm = "ep-" + state.post.algorithm.removeprefix("ep-")
    post.n_rankings = state.data.n_rankings * state.passes_done
    post.seconds = state.seconds
    last = state.log[-1] if state.log else None
    post.options["ep"] = {
        "passes_run": state.passes_done, "max_passes": max_passes, "damping": damping,
        "tol": tol, "order": order, "seed": int(seed),
        "units": "pairs" if state.pairwise else "rankings",
        "converged": bool(last is not None and converged(last, tol)),
        "improper_cavities": int(sum(e["improper_cavities"] for e in state.log)),
        "damping_fallback_pass": next((e["pass"] for e in state.log[1:]
                                       if e["damping"] != damping), None),
        "per_pass": [dict(e) for e in state.log]}
    post.options.setdefault("runs", []).append(
        {"source": str(state.data.source), "order": order, "seed": int(seed),
         "passes": state.passes_done, "rankings": int(state.data.n_rankings),
         "strict": bool(state.strict), "method": "ep"})
    return post


def check_pass_options(passes, tol, damping) -> None:
    """EP's pass count, tolerance and damping, or a :class:`UsageError` naming the bad one
    (shared by :func:`fit_ep` and ep-exact's fit)."""
    if not (isinstance(passes, (int, np.integer)) and passes >= 1):
        raise UsageError(f"passes must be an integer >= 1, got {passes!r}")
    if not tol > 0:
        raise UsageError(f"tol must be > 0, got {tol!r}")
    if not 0.0 <= damping < 1.0:
        raise UsageError(f"damping must be in [0, 1), got {damping!r}")


def fit_ep(data: Rankings, model: str | ModelSpec, priors: Priors, *,
           passes: int = EP_PASSES, damping: float = EP_DAMPING, tol: float = EP_TOL,
           order: str = "file", seed: int = 0, strict: bool = False, progress: bool = True,
           callback=None, **alg) -> OnlinePosterior:
    """EP refinement of the one-pass method of ``model`` (module docstring).

    Parameters
    ----------
    passes : the most passes (the first is the one-pass update); stops earlier once
        :func:`converged`.
    damping : weight kept on a site's previous value, in ``[0, 1)``; from the pass after
        one with an improper cavity at least :data:`EP_FALLBACK_DAMPING` (:func:`pass_damping`).
    tol : convergence threshold.
    order, seed : unit order per pass, as :func:`~crowdrank.inference.online.api.fit_online`
        (``"shuffle"`` draws a new seeded permutation each pass).
    callback : called with each pass's log entry (the CLI prints it).
    alg : the one-pass options (``taylor``, ``score_alpha``, ``kappa``, ``kappa2``,
        ``wl_params``, ``bt_breaking``).
    """
    check_pass_options(passes, tol, damping)
    state = ep_init(data, model, priors, strict=strict, **alg)
    seqs = pass_orders(data.n_rankings, order, seed, passes)
    from tqdm.auto import tqdm

    with tqdm(total=passes, disable=not progress or state.src.n_rankings * passes < 200_000,
              desc=f"ep-{state.post.algorithm}", unit="pass", leave=False) as bar:
        for rseq in seqs:
            if state.pairwise:
                from .api import pairs_sequence
                seq = pairs_sequence(data.lengths, rseq)
            else:
                seq = rseq
            entry = ep_pass(state, seq, pass_damping(damping, state.log))
            bar.update(1)
            if callback is not None:
                callback(entry)
            if state.passes_done > 1 and converged(entry, tol):
                break
    return ep_export(state, tol=tol, order=order, seed=seed, damping=damping,
                     max_passes=passes)

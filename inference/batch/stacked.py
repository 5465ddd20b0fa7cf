"""Many weightings of one MAP problem solved together: the bootstrap's refits as one
stacked, truncated Newton solve.

A bootstrap refits the same stages (:mod:`.luce`) under ``B`` different weight vectors.
Rather than ``B`` dense ``L × L`` Hessians and Cholesky factorisations, each Newton
direction here is found by preconditioned conjugate gradients ([Nocedal06], Ch. 5 and
Alg. 7.1, *Newton-CG*) on all ``B`` systems at once: the only operations are the
Hessian-vector product of every resample,

``(−∇²f) v = Σ_s w_s (p_s ∘ v[C_s] − p_s (p_s · v[C_s])) + v/σ0²``

(scattered to the candidates of each stage; the same ``diag p − p pᵀ`` as
:func:`.luce.neg_hessian`), its Jacobi preconditioner (the diagonal of that matrix), and
the gradient — each a dense ``(B, S·m)`` array operation and one sparse product with the
stages' incidence matrix. The work per step grows with the number of stages, not with
``L²`` or ``L³``.

Inexact Newton ([Nocedal06], Thm. 7.2): CG stops at a residual ``≤ η ‖∇f‖`` with the
forcing term ``η = min(0.1, ‖∇f‖)`` (quadratic convergence; a looser ``η`` saves CG
products but costs more Newton steps, each with its line search); each resample then
takes the largest step ``1, ½, ¼, …`` that satisfies Armijo's condition on its own
objective. A resample is done when ``max |∇f| ≤ tol``, the same test as
:func:`.solvers.solve`; the MAP is strictly concave, so its answer is the same optimum.
MAP only (the Gaussian prior makes every Hessian positive definite).
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

from . import luce

#: The largest forcing term of the inexact Newton steps (the module docstring).
ETA = 0.1


class Stacked:
    """The stages of a problem laid out for stacked products: ``cand`` ``(S, m)``, a mask,
    and the sparse incidence ``(S·m, L)`` of candidate slots to items."""

    def __init__(self, st: luce.Stages, prior: luce.Prior):
        self.st, self.prior = st, prior
        S, m = st.cand.shape
        self.S, self.m, self.L = S, m, st.n_items
        flat = st.mask.ravel()
        self.inc = sparse.csr_matrix(
            (flat.astype(float), (np.arange(S * m), st.cand.ravel())), shape=(S * m, self.L))
        self.chosen = sparse.csr_matrix((np.ones(S), (np.arange(S), st.cand[:, 0])),
                                        shape=(S, self.L))
        self.mask = st.mask
        # pairwise stages (BT, or PL with k = 2 only): the Hessian is D' diag(c) D with D
        # the signed incidence (+1 chosen, −1 other) and c = w p (1 − p), so a product
        # is two sparse products
        self.pairs = m == 2 and bool(st.mask.all())
        if self.pairs:
            self.D = sparse.csr_matrix(
                (np.r_[np.ones(S), -np.ones(S)],
                 (np.r_[np.arange(S), np.arange(S)], np.r_[st.cand[:, 0], st.cand[:, 1]])),
                shape=(S, self.L))
            self.Dabs = abs(self.D).T.tocsr()
            self.DT = self.D.T.tocsr()

    def _scatter(self, x):                       # (B, S·m) -> (B, L)
        return np.asarray((self.inc.T @ x.T).T)

    def probs(self, lam):
        """``(log p, p)`` of every stage under every row of ``lam`` ``(B, L)``."""
        x = np.where(self.mask, lam[:, self.st.cand], -np.inf)
        x = x - x.max(-1, keepdims=True)
        logp = x - np.log(np.exp(x).sum(-1, keepdims=True))
        return logp, np.exp(logp)

    def objective(self, lam, w, logp):
        return (w * logp[..., 0]).sum(-1) - ((lam - self.prior.mu0) ** 2).sum(-1) / (
            2 * self.prior.sigma0 ** 2)

    def gradient(self, lam, w, p):
        B = len(lam)
        wins = np.asarray((self.chosen.T @ w.T).T)
        return (wins - self._scatter((w[..., None] * p).reshape(B, -1))
                - (lam - self.prior.mu0) / self.prior.sigma0 ** 2)

    def hess_op(self, w, p):
        """``(v ↦ (−∇²f) v, diag(−∇²f))`` for every row at the probabilities ``p``
        (the module docstring)."""
        s2 = 1.0 / self.prior.sigma0 ** 2
        if self.pairs:
            cT = (w * p[..., 0] * p[..., 1]).T                      # (S, B)

            def op(v):
                return np.asarray(self.DT @ (cT * (self.D @ v.T))).T + s2 * v

            return op, np.asarray(self.Dabs @ cT).T + s2
        wp = w[..., None] * p
        B = len(w)

        def op(v):
            vc = np.where(self.mask, v[:, self.st.cand], 0.0)
            pv = (p * vc).sum(-1, keepdims=True)
            return self._scatter((wp * (vc - pv)).reshape(B, -1)) + s2 * v

        return op, self._scatter((wp * (1 - p)).reshape(B, -1)) + s2


def _pcg(op, b, diag, rtol, max_iter):
    """Preconditioned CG on every row of ``b`` (``op`` positive definite per row), row ``i``
    stopping at ``‖r‖ ≤ rtol[i]·‖b‖``; rows that are done stop moving, so each row's
    answer does not depend on which other rows share the stack."""
    x = np.zeros_like(b)
    r = b.copy()
    z = r / diag
    d = z.copy()
    rz = (r * z).sum(-1)
    target = rtol * np.linalg.norm(b, axis=-1)
    for _ in range(max_iter):
        active = np.linalg.norm(r, axis=-1) > target
        if not active.any():
            break
        Ad = op(d)
        dAd = (d * Ad).sum(-1)
        alpha = np.where(active, rz / np.where(active, dAd, 1.0), 0.0)
        x += alpha[:, None] * d
        r -= alpha[:, None] * Ad
        z = r / diag
        rz_new = (r * z).sum(-1)
        beta = np.where(active, rz_new / np.where(rz > 0, rz, 1.0), 0.0)
        d = np.where(active[:, None], z + beta[:, None] * d, d)
        rz = rz_new
    return x


def solve_stacked(st: luce.Stages, prior: luce.Prior, weights, lam0, *, tol: float = 1e-6,
                  max_iter: int = 50, cg_iter: int = 500):
    """Maximise the MAP objective of ``st`` under each row of ``weights`` ``(B, S)``
    (per-stage weights), from ``lam0`` (``(L,)`` or ``(B, L)``). Returns ``(lam (B, L),
    converged (B,) bool, newton iterations)``."""
    if prior is None:
        raise ValueError("solve_stacked needs a prior (MAP): ML's Hessian is singular")
    P = Stacked(st, prior)
    w = np.asarray(weights, float)
    lam = np.array(np.broadcast_to(lam0, (len(w), st.n_items)), float)
    logp, p = P.probs(lam)
    f = P.objective(lam, w, logp)
    g = P.gradient(lam, w, p)
    it = 0
    for it in range(1, max_iter + 1):
        gmax = np.abs(g).max(-1)
        todo = gmax > tol
        if not todo.any():
            it -= 1
            break
        ix = np.flatnonzero(todo)
        wi, pi, gi = w[ix], p[ix], g[ix]
        gn = np.linalg.norm(gi, axis=-1)
        op, diag = P.hess_op(wi, pi)
        d = _pcg(op, gi, diag, np.minimum(ETA, gn), cg_iter)
        slope = (gi * d).sum(-1)
        step = np.ones(len(ix))
        eps = 64 * np.finfo(float).eps * np.maximum(1.0, np.abs(f[ix]))
        for _ in range(60):
            cand = lam[ix] + step[:, None] * d
            lp, pc = P.probs(cand)
            fc = P.objective(cand, wi, lp)
            ok = fc >= f[ix] + 1e-4 * step * slope - eps
            if ok.all():
                break
            step = np.where(ok, step, 0.5 * step)
        lam[ix], f[ix], p[ix] = cand, fc, pc
        g[ix] = P.gradient(cand, wi, pc)
    return lam, np.abs(g).max(-1) <= tol, it

"""Block Newton (Fisher scoring) for the joint IRT likelihood, the default solver.

Given the abilities, the likelihood separates over items; given the items, over
pipelines. The Newton system of the joint problem therefore has a 3x3 block per
item (d, b, g), a diagonal over pipelines, and a dense cross block. Each
iteration makes one fused pass over the responses (log-likelihood, gradient,
Fisher information per item and per pipeline, and per response the two Fisher
weights kept as float32), then solves the system exactly in the space of the
person parameters: the item blocks are eliminated (Schur complement) and the
reduced system, of the size of the abilities (or of the factor effects in the
hierarchical model), is solved by preconditioned conjugate gradients whose
products cost one pass over the stored weights and no ``exp``.

The expected (Fisher) information is positive semi-definite, so every
direction descends; an item switches to its observed 3x3 Hessian (exact prior
curvature included) once its gradient is within a standard error of zero and
that block is positive definite, which removes the slow linear tail of Fisher
scoring on poorly identified items. A Levenberg-Marquardt damping, a trust
region per item and per pipeline, a projected backtracking line search under
the bounds, and an active set for parameters held at a bound make the steps
safe. The likelihood is exactly invariant along the location (theta + c,
b + c) and scale (theta s, b s, d / s) ridges, so each trial point is moved
along them to the optimum of the priors alone, from a few sums, at no cost in
passes. The per-response weights cost 8 bytes per response (4 for 1PL/2PL).
Convergence uses the same criterion as L-BFGS-B (:meth:`Problem.step_in_se`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.optimize import minimize_scalar

from ragrade.io import JSONObject
from ragrade.irt.model import block_slices
from ragrade.irt.problem import Problem

F64 = npt.NDArray[np.float64]
F32 = npt.NDArray[np.float32]
I8 = npt.NDArray[np.int8]
PassFn = Callable[[I8, F64, F64, F64, F64, F32, F32, bool], tuple[F64, F64, F64, F64, F64, F64]]
ApplyFn = Callable[[F32, F32, F64, F64, F64, F64, F64, F64, bool], tuple[F64, F64]]
MAX_HALVINGS = 30

CG_MAX_ITER = 200
NEWTON_MAX_ITER = 200  # beyond this L-BFGS-B takes over (see fit.optimise)
MAX_ABILITY_STEP = 1.0
NEAR_SE = 1.0  # an item's blocks use its observed Hessian once its gradient is within this many SEs
MAX_DIFFICULTY_STEP = 1.0
MAX_GUESSING_STEP = 0.1


def newton_pass_numpy(
    R: I8, theta: F64, d: F64, b: F64, g: F64, A_out: F32, B_out: F32, has_g: bool
) -> tuple[F64, F64, F64, F64, F64, F64]:
    """One pass: NLL per item, item gradient ``G`` (n, 3), item Fisher ``F`` and observed Hessian ``H`` (n, 6 each:
    dd db bb gg dg bg), per-person gradient and Fisher information; the per-response weights ``A`` and
    ``Bg`` go to the buffers when they have the shape of ``R`` (``B_out`` only for the 3PL)."""
    n_items, n_persons = R.shape
    L = np.zeros(n_items)
    G, F, H = np.zeros((n_items, 3)), np.zeros((n_items, 6)), np.zeros((n_items, 6))
    gth, dth = np.zeros(n_persons), np.zeros(n_persons)
    for sl in block_slices(n_items, n_persons):
        r = R[sl]
        m = (r >= 0).astype(np.float64)
        rf = (r == 1).astype(np.float64)
        dd, bb, gg = d[sl, None], b[sl, None], g[sl, None]
        og = 1.0 - gg
        diff = theta[None, :] - bb
        z = np.clip(dd * diff, -500.0, 500.0)
        t = np.exp(-np.abs(z))
        inv = 1.0 / (1.0 + t)
        pos = z >= 0
        s = np.where(pos, inv, t * inv)
        sc = np.where(pos, t * inv, inv)
        p = gg + og * s
        q1 = og * sc
        ip = 1.0 / p
        L[sl] = -(m * np.log(rf * p + (1.0 - rf) * q1)).sum(1)
        lz = m * (rf * q1 * s * ip - (1.0 - rf) * s)
        lg = m * (rf * sc * ip - (1.0 - rf) / og)
        bg = m * s * sc * ip
        a = og * s * bg
        G[sl, 0] = -(lz * diff).sum(1)
        G[sl, 1] = lz.sum(1) * d[sl]
        G[sl, 2] = -lg.sum(1)
        F[sl, 0] = (a * diff * diff).sum(1)
        F[sl, 1] = -d[sl] * (a * diff).sum(1)
        F[sl, 2] = d[sl] ** 2 * a.sum(1)
        F[sl, 3] = (m * sc * ip / og).sum(1)
        F[sl, 4] = (bg * diff).sum(1)
        F[sl, 5] = -d[sl] * bg.sum(1)
        pl = q1 * s * ip
        lzz = m * (rf * (pl * (1.0 - 2.0 * s) - pl * pl) - (1.0 - rf) * s * sc)
        lzg = -m * rf * s * sc * ip * ip
        H[sl, 0] = -(lzz * diff * diff).sum(1)
        H[sl, 1] = (lzz * diff).sum(1) * d[sl] + lz.sum(1)
        H[sl, 2] = -(d[sl] ** 2) * lzz.sum(1)
        H[sl, 3] = (m * (rf * (sc * ip) ** 2 + (1.0 - rf) / og**2)).sum(1)
        H[sl, 4] = -(lzg * diff).sum(1)
        H[sl, 5] = d[sl] * lzg.sum(1)
        gth -= (lz * dd).sum(0)
        dth += (a * dd * dd).sum(0)
        A_out[sl] = a
        if has_g:
            B_out[sl] = bg
    return L, G, F, H, gth, dth


def schur_apply_numpy(
    A: F32, Bg: F32, theta: F64, d: F64, b: F64, Binv: F64, v: F64, Y: F64, has_g: bool
) -> tuple[F64, F64]:
    """``W_i = Binv_i (C_i' v + Y_i)`` per item and ``sum_i C_i W_i`` per person, where ``C`` is the
    Fisher cross block between pipelines and item parameters."""
    n_items, n_persons = A.shape
    out = np.zeros(n_persons)
    W = np.zeros((n_items, 3))
    for sl in block_slices(n_items, n_persons):
        a = A[sl].astype(np.float64)
        ad = a * (theta[None, :] - b[sl, None])
        di = d[sl]
        U = np.stack([di * (ad @ v), -(di**2) * (a @ v), di * (Bg[sl] @ v) if has_g else np.zeros(len(di))], 1)
        U += Y[sl]
        Wb = np.einsum("iab,ib->ia", Binv[sl], U)
        W[sl] = Wb
        out += ad.T @ (di * Wb[:, 0]) - a.T @ (di**2 * Wb[:, 1])
        if has_g:
            out += Bg[sl].astype(np.float64).T @ (di * Wb[:, 2])
    return out, W


def pick_newton_kernels(backend: str) -> tuple[PassFn, ApplyFn]:
    """The numpy or the numba pair (``backend`` as resolved by the problem)."""
    if backend == "numba":
        from ragrade.irt._kernels import newton_pass_numba, schur_apply_numba

        return newton_pass_numba, schur_apply_numba
    return newton_pass_numpy, schur_apply_numpy


@dataclass
class Point:
    """A parameter vector with everything one pass computed there."""

    x: F64
    f: float  # negative log-posterior (total, not per response)
    grad: F64  # packed gradient (total)
    G: F64  # item gradient with priors (n, 3)
    F: F64  # item Fisher without priors (n, 6)
    H: F64  # item observed Hessian without priors (n, 6)
    gth: F64  # likelihood gradient in theta
    dth: F64  # Fisher information of theta (diagonal)
    person: F64
    params: tuple[F64, F64, F64, F64]  # theta, d, b, g


class NewtonSolver:
    """Damped block Newton with an exact Schur-complement solve over the person parameters."""

    def __init__(self, prob: Problem) -> None:
        self.prob = prob
        R = prob.data.R
        self.pass_fn, self.apply_fn = pick_newton_kernels(prob.backend)
        self.A = np.empty(R.shape, dtype=np.float32)
        self.has_g = prob.free_g
        self.Bg = np.empty(R.shape, dtype=np.float32) if prob.free_g else np.zeros((1, R.shape[1]), dtype=np.float32)
        self.lo, self.hi = prob.box_arrays()
        self.n_apply = 0
        X = prob.design.X if prob.design is not None else None
        self.X = X
        self.loc_penalty = prob.design is None and prob.cfg.priors.theta_sd is None

    # -- evaluation ---------------------------------------------------------------------------
    def evaluate(self, x: F64) -> Point:
        """One fused pass at ``x`` (refreshes the stored per-response weights)."""
        prob = self.prob
        prob.n_evals += 1
        theta, d, b, g, z = prob.unpack(x)
        L, G, F, H, gth, dth = self.pass_fn(prob.data.R, theta, d, b, g, self.A, self.Bg, self.has_g)
        person = z if prob.design is not None else theta
        fp, pg = prob.prior_terms(person, d, b, g)
        g_person = (self.X.T @ gth if self.X is not None else gth) + pg[0]
        Gp = G + np.stack(
            [pg[1] if prob.free_d else np.zeros_like(d), pg[2], pg[3] if prob.free_g else np.zeros_like(g)], 1
        )
        grad = prob.pack(g_person, Gp[:, 0], Gp[:, 1], Gp[:, 2])
        return Point(x, float(L.sum()) + fp, grad, Gp, F, H, gth, dth, person, (theta, d, b, g))

    # -- the Newton direction -----------------------------------------------------------------
    def _item_system(self, pt: Point, lam: float, observed: bool) -> tuple[F64, F64]:
        """Damped, bound-aware inverse item blocks and the masked item gradient."""
        prob = self.prob
        _, d, _, g = pt.params
        fixed = self._items_view(self._at_bound(pt.x, pt.grad), True)
        fixed[:, 0] |= not prob.free_d
        fixed[:, 2] |= not prob.free_g
        keep = (~fixed).astype(np.float64)
        mask = keep[:, :, None] * keep[:, None, :]
        idx = np.arange(3)
        # the observed Hessian (with the exact prior curvature) where it is positive definite, else Fisher
        obs = sym_blocks(pt.H) + _diag3(self._item_prior_diag(d, g, exact=True))
        obs = obs * mask
        obs[:, idx, idx] += fixed
        fisher = (sym_blocks(pt.F) + _diag3(self._item_prior_diag(d, g))) * mask
        use = np.zeros(len(d), dtype=bool)
        if observed:
            # per item: observed curvature once its own gradient is within a standard error of zero
            fdiag = np.maximum(np.diagonal(fisher, axis1=1, axis2=2), 1e-300)
            near = (np.abs(pt.G * keep) / np.sqrt(fdiag)).max(axis=1) < NEAR_SE
            w = np.linalg.eigvalsh(obs[near])
            use[np.flatnonzero(near)[w[:, 0] > 1e-6 * np.maximum(w[:, 2], 1e-300)]] = True
        B = np.where(use[:, None, None], obs, fisher)
        B[:, idx, idx] = B[:, idx, idx] * (1.0 + lam) + 1e-10
        B = B * mask
        B[:, idx, idx] += fixed
        Binv = np.linalg.inv(B) * mask
        return Binv, pt.G * keep

    def _at_bound(self, x: F64, grad: F64) -> npt.NDArray[np.bool_]:
        """Coordinates held at a bound by a gradient pointing outwards (the active set)."""
        return ((x <= self.lo + 1e-12) & (grad > 0)) | ((x >= self.hi - 1e-12) & (grad < 0))

    def _items_view(self, vec: npt.NDArray[Any], fill: object) -> npt.NDArray[Any]:
        """The (n_items, 3) view (d, b, g) of the item part of a packed vector; fixed blocks get ``fill``."""
        k, nd, nb, ng = self.prob.sizes()
        out = np.full((nb, 3), fill, dtype=vec.dtype)
        pos = k
        for col, n in enumerate((nd, nb, ng)):
            if n:
                out[:, col] = vec[pos : pos + n]
                pos += n
        return out

    def _item_prior_diag(self, d: F64, g: F64, exact: bool = False) -> F64:
        pr = self.prob.cfg.priors
        out = np.zeros((len(d), 3))
        if pr.log_discrimination_sd is not None and self.prob.free_d:
            out[:, 0] = (1.0 - np.log(d)) / (pr.log_discrimination_sd**2 * d**2)
            if not exact:
                out[:, 0] = np.maximum(out[:, 0], 0.0)
        if pr.difficulty_sd is not None:
            out[:, 1] = 1.0 / pr.difficulty_sd**2
        if pr.guessing_beta is not None and self.prob.free_g:
            a, c = pr.guessing_beta
            out[:, 2] = np.maximum((a - 1.0) / g**2 + (c - 1.0) / (1.0 - g) ** 2, 0.0)
        return out

    def direction(self, pt: Point, lam: float, rtol: float, observed: bool) -> F64:
        """The damped Fisher-scoring step (packed), with parameters held at active bounds fixed."""
        prob = self.prob
        theta, d, b, _ = pt.params
        Binv, Gi = self._item_system(pt, lam, observed)
        X = self.X
        k = prob.k
        pr = prob.cfg.priors
        prior_prec = 0.0 if pr.theta_sd is None else 1.0 / pr.theta_sd**2
        g_person = pt.grad[:k]
        fixed_p = self._at_bound(pt.x, pt.grad)[:k]
        free_p = (~fixed_p).astype(np.float64)
        base = ((X**2).T @ pt.dth if X is not None else pt.dth) + prior_prec
        precond = (base * (1.0 + lam) + 1e-10) * free_p + (1.0 - free_p)

        def to_theta(v: F64) -> F64:
            return X @ v if X is not None else v

        def from_theta(v: F64) -> F64:
            return X.T @ v if X is not None else v

        def op(v: F64) -> F64:
            v = v * free_p
            vt = to_theta(v)
            self.n_apply += 1
            cross, _ = self.apply_fn(self.A, self.Bg, theta, d, b, Binv, vt, np.zeros((len(d), 3)), self.has_g)
            out = from_theta(pt.dth * vt - cross) + (prior_prec + lam * base) * v
            if self.loc_penalty:
                out = out + prob.penalty[0] * v.mean()
            return out * free_p

        self.n_apply += 1
        cross_g, _ = self.apply_fn(self.A, self.Bg, theta, d, b, Binv, np.zeros(len(theta)), Gi, self.has_g)
        rhs = (-g_person + from_theta(cross_g)) * free_p
        dp = _pcg(op, rhs, precond, rtol, min(CG_MAX_ITER, k))
        self.n_apply += 1
        _, W = self.apply_fn(self.A, self.Bg, theta, d, b, Binv, to_theta(dp), Gi, self.has_g)
        return prob.pack(dp, -W[:, 0], -W[:, 1], -W[:, 2])

    # -- ridge moves ----------------------------------------------------------------------------
    def ridge(self, x: F64) -> F64:
        """Move along the exact invariances of the likelihood to the best point of the priors alone."""
        prob = self.prob
        theta, d, b, g, z = prob.unpack(x)
        person = z if prob.design is not None else theta
        if prob.free_d:
            person, d, b = self._ridge_scale(person, d, b, g)
        if prob.design is None:
            person, b = self._ridge_location(person, d, b, g)
        return prob.pack(person, d, b, g)

    def _feasible(self, vals: F64, lo: float, hi: float) -> tuple[float, float]:
        """Range of scale factors s with lo <= s * vals <= hi for every value."""
        pos, neg = vals[vals > 1e-300], vals[vals < -1e-300]
        smin, smax = 0.0, np.inf
        if pos.size:
            smin, smax = max(smin, float((lo / pos).max())), min(smax, float((hi / pos).min()))
        if neg.size:
            smin, smax = max(smin, float((hi / neg).max())), min(smax, float((lo / neg).min()))
        return smin, smax

    def _ridge_scale(self, person: F64, d: F64, b: F64, g: F64) -> tuple[F64, F64, F64]:
        prob = self.prob
        bd = prob.cfg.bounds
        theta_vals = prob.design.X @ person if prob.design is not None else person
        lo1, hi1 = self._feasible(theta_vals, *bd.theta)
        lo2, hi2 = self._feasible(b, *bd.difficulty)
        lo3, hi3 = float((d / bd.discrimination[1]).max()), float((d / bd.discrimination[0]).min())
        smin, smax = max(lo1, lo2, lo3, np.exp(-0.5)), min(hi1, hi2, hi3, np.exp(0.5))
        if not smin < 1.0 < smax:
            return person, d, b

        # the prior terms that change along the ridge, as a function of u = log s, from a few sums
        pr = prob.cfg.priors
        quad = 0.0  # coefficient of s^2
        if pr.theta_sd is not None:
            quad += 0.5 * float(person @ person) / pr.theta_sd**2
        elif prob.design is None:
            quad += 0.5 * prob.penalty[0] * len(person) * float(person.mean()) ** 2  # the location penalty
        if pr.difficulty_sd is not None:
            quad += 0.5 * float(b @ b) / pr.difficulty_sd**2
        ld = np.log(d)
        n, s1, s2 = len(d), float(ld.sum()), float(ld @ ld)
        lsd = pr.log_discrimination_sd
        scale_penalty = pr.theta_sd is None and lsd is None

        def f(u: float) -> float:
            v = quad * float(np.exp(2.0 * u))
            if lsd is not None:
                v += (s2 - 2.0 * u * s1 + n * u * u) / (2.0 * lsd**2)
            if scale_penalty:
                v += 0.5 * prob.penalty[1] * n * (s1 / n - u) ** 2
            return v

        res = minimize_scalar(f, bounds=(np.log(smin), np.log(smax)), method="bounded", options={"xatol": 1e-12})
        if not (res.success and f(float(res.x)) < f(0.0)):
            return person, d, b
        s = float(np.exp(res.x))
        return person * s, np.clip(d / s, *bd.discrimination), np.clip(b * s, *bd.difficulty)

    def _ridge_location(self, theta: F64, d: F64, b: F64, g: F64) -> tuple[F64, F64]:
        prob = self.prob
        bd = prob.cfg.bounds
        cmin = max(bd.theta[0] - float(theta.min()), bd.difficulty[0] - float(b.min()))
        cmax = min(bd.theta[1] - float(theta.max()), bd.difficulty[1] - float(b.max()))
        if not cmin <= 0.0 <= cmax or cmin == cmax:
            return theta, b

        # the prior terms along theta + c, b + c are quadratic in c: a c^2 + beta c + const
        pr = prob.cfg.priors
        a, beta = 0.0, 0.0
        if pr.theta_sd is not None:
            a += 0.5 * len(theta) / pr.theta_sd**2
            beta += float(theta.sum()) / pr.theta_sd**2
        else:  # the location penalty 0.5 n mean(theta)^2
            a += 0.5 * prob.penalty[0] * len(theta)
            beta += prob.penalty[0] * float(theta.sum())
        if pr.difficulty_sd is not None:
            a += 0.5 * len(b) / pr.difficulty_sd**2
            beta += float(b.sum()) / pr.difficulty_sd**2
        c = float(np.clip(-beta / (2.0 * a), cmin, cmax))
        if not a * c * c + beta * c < 0.0:
            return theta, b
        return np.clip(theta + c, *bd.theta), np.clip(b + c, *bd.difficulty)

    # -- the loop -------------------------------------------------------------------------------
    def solve(self, x0: F64, max_iter: int, target: float) -> tuple[F64, JSONObject]:
        """Iterate until the step left is below ``target`` standard errors; returns x and a report."""
        prob = self.prob
        scale = prob.scales()
        n_obs = prob.n_obs
        pt = self.evaluate(self.ridge(np.clip(x0, self.lo, self.hi)))
        lam, it, status, msg = 1e-3, 0, 1, "iteration limit reached"
        step_se = prob.step_in_se(pt.x, pt.grad / n_obs, scale)
        while it < max_iter:
            if step_se <= target:
                status, msg = 0, "converged: step left below the target in standard errors"
                break
            it += 1
            rtol = min(0.1, max(0.01, 0.1 * step_se))  # inexact Newton: looser far from the optimum
            # per item: Fisher scoring far from its optimum (robust), observed curvature near it (fast)
            delta = self._limit_step(pt.x, self.direction(pt, lam, rtol, observed=True))
            new, alpha = self._line_search(pt, delta)
            if new is None:
                status, msg = 2, "line search failed"
                pt = self.evaluate(pt.x)  # restore the stored weights of the current point
                break
            pt = new
            lam = max(lam * 0.3, 1e-9) if alpha == 1.0 else min(lam * 10.0, 1e6)
            step_se = prob.step_in_se(pt.x, pt.grad / n_obs, scale)
        return pt.x, {
            "newton_status": status,
            "newton_message": msg,
            "newton_iterations": it,
            "newton_step_in_se": step_se,
            "schur_products": self.n_apply,
            "objective": pt.f / n_obs,
        }

    def _limit_step(self, x: F64, delta: F64) -> F64:
        """A trust region per item and per pipeline, then the barriers of the priors.

        Far from the optimum the quadratic model of a badly placed item (a very hard one, say, answered
        mostly by guessing) can propose a jump across the whole scale, and one such item would make the
        global line search shorten every other step. Each item's step is therefore scaled so that
        |db| <= 1, |dg| <= 0.1 and d changes by at most a factor 2, and each ability moves by at most 1;
        a step also goes at most halfway to the barrier of a prior (g = 0 or 1 under a beta prior, d = 0
        under a log-normal one).
        """
        prob = self.prob
        pr = prob.cfg.priors
        k, nd, nb, ng = prob.sizes()
        delta = delta.copy()
        delta[:k] = np.clip(delta[:k], -MAX_ABILITY_STEP, MAX_ABILITY_STEP)
        ratio = np.zeros(nb)
        pos = k
        for n, lim in ((nd, None), (nb, MAX_DIFFICULTY_STEP), (ng, MAX_GUESSING_STEP)):
            if n:
                step = delta[pos : pos + n]
                ratio = np.maximum(ratio, np.abs(step) / (x[pos : pos + n] if lim is None else lim))
                pos += n
        shrink = 1.0 / np.maximum(ratio, 1.0)
        delta[k:] *= np.tile(shrink, (nd > 0) + 1 + (ng > 0))
        if nd and pr.log_discrimination_sd is not None:
            sl = slice(k, k + nd)
            delta[sl] = np.maximum(delta[sl], -0.5 * x[sl])
        if ng and pr.guessing_beta is not None:
            sl = slice(k + nd + nb, k + nd + nb + ng)
            a, c = pr.guessing_beta
            if a > 1:
                delta[sl] = np.maximum(delta[sl], -0.5 * x[sl])
            if c > 1:
                delta[sl] = np.minimum(delta[sl], 0.5 * (1.0 - x[sl]))
        return delta

    def _line_search(self, pt: Point, delta: F64) -> tuple[Point | None, float]:
        """Projected backtracking with a sufficient-decrease test (ridge moves applied to each trial)."""
        alpha = 1.0
        for _ in range(MAX_HALVINGS):
            xt = self.ridge(np.clip(pt.x + alpha * delta, self.lo, self.hi))
            new = self.evaluate(xt)
            slope = float(pt.grad @ (xt - pt.x))
            if np.isfinite(new.f) and new.f <= pt.f + 1e-4 * min(slope, 0.0):
                return new, alpha
            alpha *= 0.5
        return None, alpha


def sym_blocks(v: F64) -> F64:
    """(n, 3, 3) symmetric blocks from the (n, 6) packing dd db bb gg dg bg."""
    B = np.empty((v.shape[0], 3, 3))
    B[:, 0, 0], B[:, 1, 1], B[:, 2, 2] = v[:, 0], v[:, 2], v[:, 3]
    B[:, 0, 1] = B[:, 1, 0] = v[:, 1]
    B[:, 0, 2] = B[:, 2, 0] = v[:, 4]
    B[:, 1, 2] = B[:, 2, 1] = v[:, 5]
    return B


def _diag3(v: F64) -> F64:
    out = np.zeros((v.shape[0], 3, 3))
    idx = np.arange(3)
    out[:, idx, idx] = v
    return out


def _pcg(op: Callable[[F64], F64], rhs: F64, precond: F64, rtol: float, max_iter: int) -> F64:
    """Preconditioned conjugate gradients for ``op(x) = rhs`` (``op`` symmetric positive definite)."""
    x = np.zeros_like(rhs)
    r = rhs.copy()
    norm0 = float(np.linalg.norm(r))
    if norm0 == 0.0:
        return x
    zv = r / precond
    p = zv.copy()
    rz = float(r @ zv)
    for _ in range(max(1, max_iter)):
        q = op(p)
        pq = float(p @ q)
        if pq <= 0:
            break
        a = rz / pq
        x += a * p
        r -= a * q
        if float(np.linalg.norm(r)) <= rtol * norm0:
            break
        zv = r / precond
        rz_new = float(r @ zv)
        p = zv + (rz_new / rz) * p
        rz = rz_new
    return x


def newton_optimise(prob: Problem, x0: F64) -> tuple[F64, dict[str, Any]]:
    """Run the Newton solver; the report follows the L-BFGS-B one (plus Newton counters)."""
    t0 = time.perf_counter()
    solver = NewtonSolver(prob)
    x, rep = solver.solve(x0, min(prob.cfg.max_iter, NEWTON_MAX_ITER), prob.cfg.gtol / 4.0)
    rep["time_s"] = round(time.perf_counter() - t0, 4)
    return x, rep


__all__ = [
    "NewtonSolver",
    "newton_optimise",
    "newton_pass_numpy",
    "pick_newton_kernels",
    "schur_apply_numpy",
    "sym_blocks",
]

"""Fused numba kernels of the 3PL (imported lazily): objective and gradient, Newton pass, Schur products.

One pass over the ``int8`` response matrix computes everything: per response one
``exp`` and one ``log``, no temporaries. Items are split into chunks processed
in parallel; each chunk accumulates its own ability gradient row, summed at the
end. The per-item loops are branch-free and use the polynomial ``exp``/``log``
below, so LLVM vectorises them (SIMD lanes over pipelines).
"""

from __future__ import annotations

import math

import numba
import numpy as np
import numpy.typing as npt
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

F64 = npt.NDArray[np.float64]


@numba.njit(parallel=True, cache=True, nogil=True)
def _nll_grad(R, theta, d, b, g, n_chunks):  # type: ignore[no-untyped-def]  # pragma: no cover - jitted
    n_items, n_persons = R.shape
    g_d = np.zeros(n_items)
    g_b = np.zeros(n_items)
    g_g = np.zeros(n_items)
    g_theta_parts = np.zeros((n_chunks, n_persons))
    nll_parts = np.zeros(n_chunks)
    step = (n_items + n_chunks - 1) // n_chunks
    for c in numba.prange(n_chunks):
        lo = c * step
        hi = min(n_items, lo + step)
        acc = 0.0
        for i in range(lo, hi):
            ll, sd, sb, sg = _grad_row(R[i], theta, d[i], b[i], g[i], g_theta_parts[c])
            acc -= ll
            g_d[i] = sd
            g_b[i] = sb
            g_g[i] = sg
        nll_parts[c] = acc
    return nll_parts.sum(), g_theta_parts.sum(axis=0), g_d, g_b, g_g


def nll_grad_numba(R: npt.NDArray[np.int8], theta: F64, d: F64, b: F64, g: F64) -> tuple[float, F64, F64, F64, F64]:
    """Same contract as :func:`ragrade.irt.model.nll_grad_numpy`, fused and parallel."""
    n_chunks = max(1, min(R.shape[0], 8 * numba.get_num_threads()))
    nll, gt, gd, gb, gg = _nll_grad(R, theta, d, b, g, n_chunks)
    return float(nll), gt, gd, gb, gg


# --- vectorisable exp and log --------------------------------------------------------------------
# libm's exp and log stop LLVM from vectorising a loop (numba has no SVML here); these branch-free
# versions (range reduction and a polynomial, exponent bits set or read through a bitcast) are accurate
# to about 1e-15 relative on the ranges used below and let each loop run on SIMD lanes.


@intrinsic
def _i64_as_f64(typingctx, x):  # type: ignore[no-untyped-def]  # pragma: no cover - compile time
    sig = types.float64(types.int64)

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        return builder.bitcast(args[0], ir.DoubleType())

    return sig, codegen


@intrinsic
def _f64_as_i64(typingctx, x):  # type: ignore[no-untyped-def]  # pragma: no cover - compile time
    sig = types.int64(types.float64)

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        return builder.bitcast(args[0], ir.IntType(64))

    return sig, codegen


_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
_SQRT2 = 1.4142135623730951
_FAST = {"nsz", "arcp", "contract", "reassoc"}


@numba.njit(inline="always", fastmath=_FAST, error_model="numpy", cache=True)
def _exp_neg(x):  # type: ignore[no-untyped-def]  # pragma: no cover - jitted
    """exp(x) for x in [-700, 0]: x = k ln2 + r, |r| <= ln2 / 2, Taylor to degree 12, times 2^k."""
    kf = math.floor(x * _LOG2E + 0.5)
    r = (x - kf * _LN2_HI) - kf * _LN2_LO
    p = 1.0 / 479001600.0
    p = p * r + 1.0 / 39916800.0
    p = p * r + 1.0 / 3628800.0
    p = p * r + 1.0 / 362880.0
    p = p * r + 1.0 / 40320.0
    p = p * r + 1.0 / 5040.0
    p = p * r + 1.0 / 720.0
    p = p * r + 1.0 / 120.0
    p = p * r + 1.0 / 24.0
    p = p * r + 1.0 / 6.0
    p = p * r + 0.5
    p = p * r + 1.0
    p = p * r + 1.0
    return p * _i64_as_f64((np.int64(kf) + 1023) << 52)  # type: ignore[call-arg]


@numba.njit(inline="always", fastmath=_FAST, error_model="numpy", cache=True)
def _log_pos(x):  # type: ignore[no-untyped-def]  # pragma: no cover - jitted
    """log(x) for normal x > 0: x = 2^e m with m in [sqrt(1/2), sqrt(2)), log m = 2 atanh((m-1)/(m+1))."""
    bits = _f64_as_i64(x)  # type: ignore[call-arg,var-annotated]
    e = np.float64((bits >> 52) - 1023)
    m = _i64_as_f64((bits & 0x000FFFFFFFFFFFFF) | 0x3FF0000000000000)
    big = m > _SQRT2
    m = m * 0.5 if big else m
    e = e + 1.0 if big else e
    f = m - 1.0
    s = f / (2.0 + f)
    s2 = s * s
    p = 1.0 / 19.0
    p = p * s2 + 1.0 / 17.0
    p = p * s2 + 1.0 / 15.0
    p = p * s2 + 1.0 / 13.0
    p = p * s2 + 1.0 / 11.0
    p = p * s2 + 1.0 / 9.0
    p = p * s2 + 1.0 / 7.0
    p = p * s2 + 1.0 / 5.0
    p = p * s2 + 1.0 / 3.0
    p = p * s2 + 1.0
    return e * _LN2_HI + (e * _LN2_LO + 2.0 * s * p)


@numba.njit(inline="always", fastmath=_FAST, error_model="numpy", cache=True)
def _response_terms(r, z):  # type: ignore[no-untyped-def]  # pragma: no cover - jitted
    """Mask (0 for a missing response), correctness, and s = sigmoid(z), 1 - s of z clipped to +-500, from one exp."""
    m = 1.0 if r >= 0 else 0.0
    rf = 1.0 if r == 1 else 0.0
    z = min(max(z, -500.0), 500.0)
    t = _exp_neg(-abs(z))
    inv = 1.0 / (1.0 + t)
    ti = t * inv
    return m, rf, (inv if z >= 0 else ti), (ti if z >= 0 else inv)


@numba.njit(fastmath=_FAST, error_model="numpy", cache=True, nogil=True)
def _grad_row(r_row, theta, di, bi, gi, g_theta):  # type: ignore[no-untyped-def]  # pragma: no cover - jitted
    """One item's log-likelihood and gradient sums (branch-free, so the loop runs on SIMD lanes)."""
    og = 1.0 - gi
    inv_og = 1.0 / og
    ll = sd = sb = sg = 0.0
    for j in range(r_row.size):
        diff = theta[j] - bi
        m, rf, s, sc = _response_terms(r_row[j], di * diff)
        p = gi + og * s
        ip = 1.0 / p
        # q = p when correct, (1 - g)(1 - s) when wrong; missing responses weigh 0
        ll += m * _log_pos(rf * p + (1.0 - rf) * og * sc)
        lz = m * (rf * og * s * sc * ip - (1.0 - rf) * s)
        sg += m * ((1.0 - rf) * inv_og - rf * sc * ip)
        sd -= lz * diff
        sb += lz * di
        g_theta[j] -= lz * di
    return ll, sd, sb, sg


# --- block Newton (Fisher scoring) kernels -------------------------------------------------------
# Per response, with z = d (theta - b), s = sigmoid(z), p = g + (1 - g) s, the Fisher information of
# (z, g) is [[A, Bg], [Bg, Cg]] with A = (1-g) s^2 (1-s) / p, Bg = s (1-s) / p, Cg = (1-s) / ((1-g) p);
# the chain rule through dz/dtheta = d, dz/dd = theta - b, dz/db = -d gives every block.


@numba.njit(fastmath=_FAST, error_model="numpy", cache=True, nogil=True)
def _pass_row(r_row, theta, di, bi, gi, gth, dth, A_row, B_row, store_g):  # type: ignore[no-untyped-def]  # pragma: no cover
    """One item's responses: sums for its gradient, Fisher and observed Hessian; per-person terms added in place."""
    og = 1.0 - gi
    inv_og = 1.0 / og
    s_ll = s_lz = s_lzd = s_lg = s_a0 = s_a1 = s_a2 = s_b0 = s_b1 = s_c0 = 0.0
    h2 = h1 = h0 = hg1 = hg0 = hgg = 0.0
    for j in range(r_row.size):
        diff = theta[j] - bi
        m, rf, s, sc = _response_terms(r_row[j], di * diff)
        p = gi + og * s
        q1 = og * sc
        ip = 1.0 / p
        s_ll += m * _log_pos(rf * p + (1.0 - rf) * q1)
        lz = m * (rf * q1 * s * ip - (1.0 - rf) * s)
        s_lz += lz
        s_lzd += lz * diff
        s_lg += m * (rf * sc * ip - (1.0 - rf) * inv_og)
        bg = m * s * sc * ip
        a = og * s * bg
        s_a0 += a
        s_a1 += a * diff
        s_a2 += a * diff * diff
        s_b0 += bg
        s_b1 += bg * diff
        s_c0 += m * sc * ip * inv_og
        pl = q1 * s * ip
        lzz = m * (rf * (pl * (1.0 - 2.0 * s) - pl * pl) - (1.0 - rf) * s * sc)
        lzg = -m * rf * s * sc * ip * ip
        h2 += lzz * diff * diff
        h1 += lzz * diff
        h0 += lzz
        hg1 += lzg * diff
        hg0 += lzg
        hgg -= m * (rf * sc * sc * ip * ip + (1.0 - rf) * inv_og * inv_og)
        gth[j] -= lz * di
        dth[j] += a * di * di
        A_row[j] = a
        if store_g:
            B_row[j] = bg
    return s_ll, s_lz, s_lzd, s_lg, s_a0, s_a1, s_a2, s_b0, s_b1, s_c0, h2, h1, h0, hg1, hg0, hgg


@numba.njit(parallel=True, cache=True, nogil=True)
def _newton_pass(R, theta, d, b, g, n_chunks, A_out, B_out, store_g):  # type: ignore[no-untyped-def]  # pragma: no cover
    n_items, n_persons = R.shape
    G = np.zeros((n_items, 3))
    F = np.zeros((n_items, 6))
    H = np.zeros((n_items, 6))
    L = np.zeros(n_items)
    gth_parts = np.zeros((n_chunks, n_persons))
    dth_parts = np.zeros((n_chunks, n_persons))
    step = (n_items + n_chunks - 1) // n_chunks
    for c in numba.prange(n_chunks):
        lo = c * step
        hi = min(n_items, lo + step)
        for i in range(lo, hi):
            di = d[i]
            B_row = B_out[i] if store_g else B_out[0]
            ll, lz, lzd, lg, a0, a1, a2, b0, b1, c0, h2, h1, h0, hg1, hg0, hgg = _pass_row(
                R[i], theta, di, b[i], g[i], gth_parts[c], dth_parts[c], A_out[i], B_row, store_g
            )
            L[i] = -ll
            G[i, 0] = -lzd
            G[i, 1] = lz * di
            G[i, 2] = -lg
            F[i, 0] = a2
            F[i, 1] = -di * a1
            F[i, 2] = di * di * a0
            F[i, 3] = c0
            F[i, 4] = b1
            F[i, 5] = -di * b0
            H[i, 0] = -h2
            H[i, 1] = h1 * di + lz
            H[i, 2] = -di * di * h0
            H[i, 3] = -hgg
            H[i, 4] = -hg1
            H[i, 5] = di * hg0
    return L, G, F, H, gth_parts.sum(axis=0), dth_parts.sum(axis=0)


@numba.njit(fastmath=_FAST, error_model="numpy", cache=True, nogil=True)
def _dot_row(A_row, B_row, theta, bi, v, has_g):  # type: ignore[no-untyped-def]  # pragma: no cover
    u0 = u1 = u2 = 0.0
    for j in range(A_row.size):
        a = A_row[j] * v[j]
        u0 += a * (theta[j] - bi)
        u1 += a
    if has_g:
        for j in range(A_row.size):
            u2 += B_row[j] * v[j]
    return u0, u1, u2


@numba.njit(fastmath=_FAST, error_model="numpy", cache=True, nogil=True)
def _axpy_row(out, A_row, B_row, theta, bi, k0, k1, k2, has_g):  # type: ignore[no-untyped-def]  # pragma: no cover
    for j in range(A_row.size):
        out[j] += A_row[j] * ((theta[j] - bi) * k0 + k1)
    if has_g:
        for j in range(A_row.size):
            out[j] += B_row[j] * k2


@numba.njit(parallel=True, cache=True, nogil=True)
def _schur_apply(A, Bg, theta, d, b, Binv, v, Y, n_chunks, has_g):  # type: ignore[no-untyped-def]  # pragma: no cover
    n_items, n_persons = A.shape
    W = np.zeros((n_items, 3))
    out_parts = np.zeros((n_chunks, n_persons))
    step = (n_items + n_chunks - 1) // n_chunks
    for c in numba.prange(n_chunks):
        lo = c * step
        hi = min(n_items, lo + step)
        for i in range(lo, hi):
            di = d[i]
            bi = b[i]
            B_row = Bg[i] if has_g else A[i]
            u0, u1, u2 = _dot_row(A[i], B_row, theta, bi, v, has_g)
            u0 = di * u0 + Y[i, 0]
            u1 = -di * di * u1 + Y[i, 1]
            u2 = di * u2 + Y[i, 2]
            w0 = Binv[i, 0, 0] * u0 + Binv[i, 0, 1] * u1 + Binv[i, 0, 2] * u2
            w1 = Binv[i, 1, 0] * u0 + Binv[i, 1, 1] * u1 + Binv[i, 1, 2] * u2
            w2 = Binv[i, 2, 0] * u0 + Binv[i, 2, 1] * u1 + Binv[i, 2, 2] * u2
            W[i, 0] = w0
            W[i, 1] = w1
            W[i, 2] = w2
            _axpy_row(out_parts[c], A[i], B_row, theta, bi, di * w0, -di * di * w1, di * w2, has_g)
    return out_parts.sum(axis=0), W


def newton_pass_numba(
    R: npt.NDArray[np.int8],
    theta: F64,
    d: F64,
    b: F64,
    g: F64,
    A_out: npt.NDArray[np.float32],
    B_out: npt.NDArray[np.float32],
    has_g: bool,
) -> tuple[F64, F64, F64, F64, F64, F64]:
    """Same contract as :func:`ragrade.irt.newton.newton_pass_numpy`, fused and parallel."""
    n_chunks = max(1, min(R.shape[0], 8 * numba.get_num_threads()))
    L, G, F, H, gth, dth = _newton_pass(R, theta, d, b, g, n_chunks, A_out, B_out, has_g)
    return L, G, F, H, gth, dth


def schur_apply_numba(
    A: npt.NDArray[np.float32],
    Bg: npt.NDArray[np.float32],
    theta: F64,
    d: F64,
    b: F64,
    Binv: F64,
    v: F64,
    Y: F64,
    has_g: bool,
) -> tuple[F64, F64]:
    """Same contract as :func:`ragrade.irt.newton.schur_apply_numpy`, fused and parallel."""
    n_chunks = max(1, min(A.shape[0], 8 * numba.get_num_threads()))
    out, W = _schur_apply(A, Bg, theta, d, b, Binv, v, Y, n_chunks, has_g)
    return out, W


__all__ = ["newton_pass_numba", "nll_grad_numba", "schur_apply_numba"]


@numba.njit(fastmath=_FAST, error_model="numpy", cache=True, nogil=True)
def _ll_row(r_row, theta, di, bi, gi, sq_person):  # type: ignore[no-untyped-def]  # pragma: no cover
    og = 1.0 - gi
    ll = 0.0
    sq = 0.0
    for j in range(r_row.size):
        m, rf, s, sc = _response_terms(r_row[j], di * (theta[j] - bi))
        p = gi + og * s
        ll += m * _log_pos(rf * p + (1.0 - rf) * og * sc)
        e = m * (rf - p) * (rf - p)
        sq += e
        sq_person[j] += e
    return ll, sq


@numba.njit(parallel=True, cache=True, nogil=True)
def _loglik_sse(R, theta, d, b, g, n_chunks):  # type: ignore[no-untyped-def]  # pragma: no cover
    n_items, n_persons = R.shape
    sq_item = np.zeros(n_items)
    sq_parts = np.zeros((n_chunks, n_persons))
    ll_parts = np.zeros(n_chunks)
    step = (n_items + n_chunks - 1) // n_chunks
    for c in numba.prange(n_chunks):
        lo = c * step
        hi = min(n_items, lo + step)
        acc = 0.0
        for i in range(lo, hi):
            ll, sq = _ll_row(R[i], theta, d[i], b[i], g[i], sq_parts[c])
            acc += ll
            sq_item[i] = sq
        ll_parts[c] = acc
    return ll_parts.sum(), sq_item, sq_parts.sum(axis=0)


def loglik_sse_numba(R: npt.NDArray[np.int8], theta: F64, d: F64, b: F64, g: F64) -> tuple[float, F64, F64]:
    """Log-likelihood and squared errors (r - p)^2 per item and per person, in one parallel pass."""
    n_chunks = max(1, min(R.shape[0], 8 * numba.get_num_threads()))
    ll, sq_item, sq_person = _loglik_sse(R, theta, d, b, g, n_chunks)
    return float(ll), sq_item, sq_person


__all__ += ["loglik_sse_numba"]

"""Fused numba kernel for the 3PL negative log-likelihood and gradient (imported lazily).

One pass over the ``int8`` response matrix computes everything: per response one
``exp`` and one ``log``, no temporaries. Items are split into chunks processed
in parallel; each chunk accumulates its own ability gradient row, summed at the end.
"""

from __future__ import annotations

import math

import numba
import numpy as np
import numpy.typing as npt

F64 = npt.NDArray[np.float64]


@numba.njit(parallel=True, fastmath=False, cache=True, nogil=True)
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
            di = d[i]
            bi = b[i]
            gi = g[i]
            og = 1.0 - gi
            inv_og = 1.0 / og
            sd = 0.0
            sb = 0.0
            sg = 0.0
            for j in range(n_persons):
                r = R[i, j]
                if r < 0:
                    continue
                rf = float(r)
                diff = theta[j] - bi
                z = min(max(di * diff, -500.0), 500.0)
                t = math.exp(-abs(z))
                inv = 1.0 / (1.0 + t)
                ti = t * inv
                s = inv if z >= 0 else ti
                sc = ti if z >= 0 else inv
                p = gi + og * s
                ip = 1.0 / p
                # branch-free: q = p when correct, (1 - g)(1 - s) when wrong
                acc -= math.log(rf * p + (1.0 - rf) * og * sc)
                lz = rf * og * s * sc * ip - (1.0 - rf) * s
                sg += (1.0 - rf) * inv_og - rf * sc * ip
                sd -= lz * diff
                sb += lz * di
                g_theta_parts[c, j] -= lz * di
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


__all__ = ["nll_grad_numba"]

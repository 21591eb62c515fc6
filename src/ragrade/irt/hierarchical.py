"""Hierarchical abilities: theta of a pipeline = sum over factors of its level's effect.

Identifiability: within each factor the effects sum to zero. This is built into
the parametrisation: a factor with L levels has L-1 free coordinates ``z`` and
effects ``C z`` where ``C`` is the orthonormal Helmert basis of the
sum-to-zero subspace (so a N(0, s) prior on every effect is a N(0, s) prior on
``z``). The location of abilities is therefore fixed without a reference level,
and the level order is the sorted order recorded in the output.

Standard errors come from the observed information of the whole problem
(effects and every item's parameters), reduced to the effects by a Schur
complement over the 3x3 item blocks: ``S = H_zz - sum_i H_zi H_ii^-1 H_iz``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ragrade.errors import DataError
from ragrade.irt.io import Factor
from ragrade.irt.model import _block_slices, item_blocks_numpy

F64 = npt.NDArray[np.float64]


def helmert(n_levels: int) -> F64:
    """Orthonormal basis (n_levels x n_levels-1) of vectors summing to zero."""
    C = np.zeros((n_levels, max(0, n_levels - 1)))
    for j in range(1, n_levels):
        C[:j, j - 1] = 1.0
        C[j, j - 1] = -float(j)
        C[:, j - 1] /= np.sqrt(j * (j + 1.0))
    return C


class Design:
    """The additive design of pipelines over factors: ``theta = X z``, effects ``C_f z_f``."""

    def __init__(self, factors: Sequence[Factor]) -> None:
        if not factors:
            raise DataError("the hierarchical model needs at least one factor")
        self.factors = list(factors)
        self.bases = [helmert(len(f.levels)) for f in self.factors]
        self.slices: list[slice] = []
        blocks = []
        start = 0
        for f, C in zip(self.factors, self.bases, strict=True):
            self.slices.append(slice(start, start + C.shape[1]))
            start += C.shape[1]
            blocks.append(C[f.codes])
        self.X: F64 = np.hstack(blocks) if blocks else np.zeros((0, 0))
        self.k = start
        self._check_rank()

    def _check_rank(self) -> None:
        if self.k == 0:
            raise DataError("every factor has a single level; nothing to estimate (drop --factors)")
        rank = np.linalg.matrix_rank(np.hstack([np.ones((self.X.shape[0], 1)), self.X]))
        if rank < self.k + 1:
            names = ", ".join(f.name for f in self.factors)
            raise DataError(
                f"the factors ({names}) are not separately identifiable from these pipelines "
                f"(design rank {rank - 1} < {self.k} free effects): some levels always occur together"
            )

    def effects(self, z: F64) -> list[F64]:
        """Per factor: the effect of every level (sums to zero)."""
        return [C @ z[sl] for C, sl in zip(self.bases, self.slices, strict=True)]

    def effect_cov(self, cov_z: F64) -> list[F64]:
        """Per factor: covariance of the level effects."""
        return [C @ cov_z[sl, sl] @ C.T for C, sl in zip(self.bases, self.slices, strict=True)]

    def z_from_effects(self, effects: Sequence[F64]) -> F64:
        """Coordinates of given level effects (projected onto sum-to-zero first)."""
        parts = [C.T @ (e - e.mean()) for C, e in zip(self.bases, effects, strict=True)]
        return np.concatenate(parts) if parts else np.zeros(0)

    def describe(self) -> dict[str, object]:
        """JSON-friendly description of the factors and their level order."""
        return {f.name: {"levels": f.levels, "constraint": "sum-to-zero"} for f in self.factors}


def observed_information(
    R: npt.NDArray[np.int8],
    theta: F64,
    item_params: tuple[F64, F64, F64],
    item_prior_hess: F64,
    X: F64 | None = None,
    nuisance: Sequence[int] = (),
) -> tuple[F64, F64, F64 | None]:
    """One blockwise pass over the responses for the observed information.

    Returns the item blocks ``H`` (n_items, 3, 3) in (d, b, g) without priors, the
    per-person ``d^2(-l)/dtheta^2`` sums, and, when ``X`` is given, the Schur
    reduction ``sum_i X' C_i B_i^-1 C_i' X`` over the ``nuisance`` item parameters
    (0=d, 1=b, 2=g), whose blocks ``B_i`` include ``item_prior_hess`` (n_items, 3).
    """
    d, b, g = item_params
    H_all = np.zeros((R.shape[0], 3, 3))
    h_tt = np.zeros(R.shape[1])
    nz = list(nuisance)
    red = None if X is None else np.zeros((X.shape[1], X.shape[1]))
    for sl in _block_slices(*R.shape):
        H, C, htt = item_blocks_numpy(R, theta, d, b, g, sl)
        H_all[sl] = H
        h_tt += htt.sum(axis=0)
        if X is None or red is None or not nz:
            continue
        B = H[:, nz][:, :, nz] + np.stack([np.diag(v) for v in item_prior_hess[sl][:, nz]])
        B += np.eye(len(nz)) * 1e-9
        XC = np.einsum("pk,ipa->ika", X, C[:, :, nz])
        red += np.einsum("ika,iab,ilb->kl", XC, np.linalg.pinv(B, hermitian=True), XC)
    return H_all, h_tt, red


def effects_cov(X: F64, h_tt: F64, reduction: F64 | None, z_prior_prec: float) -> F64:
    """Covariance of the effect coordinates: inverse of ``X' diag(h) X + prior - reduction``."""
    S = X.T @ (h_tt[:, None] * X) + np.eye(X.shape[1]) * z_prior_prec
    if reduction is not None:
        S -= reduction
    S = 0.5 * (S + S.T)
    try:
        return np.asarray(np.linalg.inv(S))
    except np.linalg.LinAlgError:
        return np.asarray(np.linalg.pinv(S))


__all__ = ["Design", "effects_cov", "helmert", "observed_information"]

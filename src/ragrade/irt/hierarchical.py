"""Hierarchical abilities: theta of a pipeline = sum over factors of its level's effect.

Identifiability: within each factor the effects sum to zero. This is built into
the parametrisation: a factor with L levels has L-1 free coordinates ``z`` and
effects ``C z`` where ``C`` is the orthonormal Helmert basis of the
sum-to-zero subspace (so a N(0, s) prior on every effect is a N(0, s) prior on
``z``). The location of abilities is therefore fixed without a reference level,
and the level order is the sorted order recorded in the output.

A factor that does not apply to a pipeline (code -1, e.g. the chunker of a
closed-book pipeline) contributes nothing to its ability: the pipeline's row of
that factor's block of ``X`` is zero. Since the effects sum to zero over the
applicable levels, such a pipeline is placed at the average applicable level,
and the factor's effects are identified by the pipelines where it applies
(the others still inform the item parameters and the shared factors).

Standard errors come from the observed information of the whole problem
(effects and every item's parameters), reduced to the effects by a Schur
complement over the 3x3 item blocks: ``S = H_zz - sum_i H_zi H_ii^-1 H_iz``.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ragrade.errors import DataError
from ragrade.irt.io import Factor
from ragrade.irt.model import block_slices, item_blocks_numpy

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
        for f in self.factors:
            if not f.levels:
                raise DataError(
                    f"factor '{f.name}' does not apply to any pipeline (every value is one of its "
                    f"not-applicable values {list(f.not_applicable)}); drop it from the factors"
                )
        self.bases = [helmert(len(f.levels)) for f in self.factors]
        self.slices: list[slice] = []
        blocks = []
        start = 0
        for f, C in zip(self.factors, self.bases, strict=True):
            self.slices.append(slice(start, start + C.shape[1]))
            start += C.shape[1]
            blocks.append(factor_block(C, f.codes))
        self.X: F64 = np.hstack(blocks) if blocks else np.zeros((0, 0))
        self.k = start
        self._check_rank()

    @property
    def has_not_applicable(self) -> bool:
        """Whether some factor does not apply to some pipeline."""
        return any(f.n_not_applicable for f in self.factors)

    def _rank(self, idx: Sequence[int]) -> tuple[int, int]:
        """Rank of the effect columns of factors ``idx`` beyond the constant, and their number."""
        cols = [np.ones((self.X.shape[0], 1))] + [self.X[:, self.slices[i]] for i in idx]
        k = sum(self.bases[i].shape[1] for i in idx)
        return int(np.linalg.matrix_rank(np.hstack(cols))) - 1, k

    def _deficient(self, idx: Sequence[int]) -> bool:
        rank, k = self._rank(idx)
        return rank < k

    def _check_rank(self) -> None:
        if self.k == 0:
            raise DataError("every factor has a single level; nothing to estimate (drop $factors)")
        rank, k = self._rank(range(len(self.factors)))
        if rank < k:
            names = ", ".join(f.name for f in self.factors)
            pair = next(
                (
                    (self.factors[i].name, self.factors[j].name)
                    for i, j in itertools.combinations(range(len(self.factors)), 2)
                    if self._deficient([i, j])
                ),
                None,
            )
            hint = f" (e.g. {pair[0]} and {pair[1]})" if pair else ""
            na = [f"{f.name}: {f.n_not_applicable}" for f in self.factors if f.n_not_applicable]
            if na:
                hint += (
                    "; counted over the pipelines where each factor applies (not applicable: "
                    + ", ".join(na)
                    + " pipelines)"
                )
            raise DataError(
                f"the factors ({names}) are not separately identifiable from these pipelines "
                f"(design rank {rank} < {self.k} free effects): some levels always occur together{hint}"
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
        """JSON-friendly description of the factors, their level order and where they do not apply."""
        out: dict[str, object] = {}
        for f in self.factors:
            rec: dict[str, object] = {"levels": f.levels, "constraint": "sum-to-zero"}
            if f.n_not_applicable:
                rec["constraint"] = "sum-to-zero over the applicable levels"
                rec["not_applicable"] = dict(
                    f.describe_not_applicable(),
                    treatment="no effect from this factor: the pipeline sits at the average applicable level",
                )
            if len(f.levels) == 1:
                rec["note"] = "a single applicable level: no effect estimated"
            out[f.name] = rec
        return out


def factor_block(C: F64, codes: npt.NDArray[np.int64]) -> F64:
    """Rows of the basis ``C`` per pipeline code; a zero row where the factor does not apply (code < 0)."""
    padded = np.vstack([C, np.zeros((1, C.shape[1]))])
    return np.asarray(padded[np.where(codes >= 0, codes, C.shape[0])])


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
    for sl in block_slices(*R.shape):
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


__all__ = ["Design", "effects_cov", "factor_block", "helmert", "observed_information"]

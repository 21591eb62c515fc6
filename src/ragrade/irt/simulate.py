"""Simulated 3PL response data with known parameters (for tests, benchmarks and demos)."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import pandas as pd

from ragrade.irt.io import Factor, Responses

F64 = npt.NDArray[np.float64]


@dataclass
class Truth:
    """The generating parameters."""

    theta: F64
    discrimination: F64
    difficulty: F64
    guessing: F64
    effects: dict[str, F64] = field(default_factory=dict)


def draw_items(
    n_items: int, rng: np.random.Generator, guess: tuple[float, float] = (0.15, 0.3)
) -> tuple[F64, F64, F64]:
    """d ~ lognormal(0, 0.5), b ~ N(0, 1), g ~ U(guess)."""
    return rng.lognormal(0.0, 0.5, n_items), rng.normal(0.0, 1.0, n_items), rng.uniform(*guess, n_items)


def sample_matrix(
    theta: F64, d: F64, b: F64, g: F64, rng: np.random.Generator, missing: float = 0.0, block: int = 2048
) -> npt.NDArray[np.int8]:
    """Items-major int8 responses drawn in blocks of items (bounded memory), -1 where missing."""
    R = np.empty((len(d), len(theta)), dtype=np.int8)
    for lo in range(0, len(d), block):
        sl = slice(lo, min(lo + block, len(d)))
        z = d[sl, None] * (theta[None, :] - b[sl, None])
        p = g[sl, None] + (1 - g[sl, None]) / (1 + np.exp(-z))
        R[sl] = (rng.random(p.shape) < p).astype(np.int8)
        if missing > 0:
            R[sl][rng.random(p.shape) < missing] = -1
    return R


def simulate_flat(n_persons: int, n_items: int, seed: int = 0, missing: float = 0.0) -> tuple[Responses, Truth]:
    """A flat 3PL data set: theta ~ N(0, 1)."""
    rng = np.random.default_rng(seed)
    theta = rng.normal(0.0, 1.0, n_persons)
    d, b, g = draw_items(n_items, rng)
    R = sample_matrix(theta, d, b, g, rng, missing)
    pipes = [f"p{m:05d}" for m in range(n_persons)]
    items = [f"q{i:06d}" for i in range(n_items)]
    counts = {"n_rows": R.size, "n_missing_correct": int((R < 0).sum()), "n_absent_pairs": 0}
    return Responses(pipes, items, R, [], counts, "<simulated>"), Truth(theta, d, b, g)


def simulate_hierarchical(
    levels: Mapping[str, int],
    n_items: int,
    seed: int = 0,
    effect_sd: float = 0.8,
    drop_combinations: float = 0.0,
) -> tuple[Responses, Truth]:
    """Pipelines from the full grid of factor levels (optionally with a share of combinations missing).

    Effects are drawn N(0, effect_sd) and centred within each factor; theta = sum of effects.
    """
    rng = np.random.default_rng(seed)
    names = list(levels)
    effects = {}
    for name in names:
        e = rng.normal(0.0, effect_sd, levels[name])
        effects[name] = e - e.mean()
    combos = list(itertools.product(*[range(levels[n]) for n in names]))
    if drop_combinations > 0:
        keep = rng.random(len(combos)) >= drop_combinations
        combos = [c for c, k in zip(combos, keep, strict=True) if k]
    codes = np.array(combos, dtype=np.int64)
    theta = sum(effects[n][codes[:, j]] for j, n in enumerate(names))
    theta = np.asarray(theta, dtype=np.float64)
    d, b, g = draw_items(n_items, rng)
    R = sample_matrix(theta, d, b, g, rng)
    width = len(str(max(levels.values())))
    lvl_names = {n: [f"{n}{i:0{width}d}" for i in range(levels[n])] for n in names}
    pipes = ["+".join(lvl_names[n][c[j]] for j, n in enumerate(names)) for c in combos]
    order = np.argsort(pipes, kind="stable")
    factors = [Factor(n, lvl_names[n], codes[order, j]) for j, n in enumerate(names)]
    items = [f"q{i:06d}" for i in range(n_items)]
    resp = Responses(
        [pipes[i] for i in order],
        items,
        np.ascontiguousarray(R[:, order]),
        factors,
        {"n_rows": R.size, "n_missing_correct": 0, "n_absent_pairs": 0},
        "<simulated>",
    )
    return resp, Truth(theta[order], d, b, g, effects)


def simulate_not_applicable(
    n_items: int,
    *,
    indexed: int = 3,
    index_free: int = 2,
    chunkers: int = 3,
    icl: int = 3,
    seed: int = 0,
    effect_sd: float = 0.8,
) -> tuple[Responses, Truth]:
    """An exam sweep where the chunker applies only to pipelines with an index.

    Retrievers ``idx1..`` use an index and are crossed with chunkers ``c1..``; retrievers ``nox1..`` (closed
    book, oracle) have chunker ``none``; every retriever is crossed with ``icl``. Effects are drawn
    N(0, effect_sd) and centred within each factor, the chunker's over its real levels; a pipeline without
    a chunker gets no chunker effect, which is exactly the model's parametrisation, so ``Truth.effects``
    (in sorted level order) is directly comparable with the estimates.
    """
    rng = np.random.default_rng(seed)
    n_ret = indexed + index_free
    eff = {}
    for name, n in (("retriever", n_ret), ("chunker", chunkers), ("icl", icl)):
        e = rng.normal(0.0, effect_sd, n)
        eff[name] = e - e.mean()
    combos = [(r, c, i) for r in range(n_ret) for c in (range(chunkers) if r < indexed else [-1]) for i in range(icl)]
    codes = np.array(combos, dtype=np.int64)
    chunk = np.where(codes[:, 1] >= 0, eff["chunker"][np.maximum(codes[:, 1], 0)], 0.0)
    theta = eff["retriever"][codes[:, 0]] + chunk + eff["icl"][codes[:, 2]]
    d, b, g = draw_items(n_items, rng)
    R = sample_matrix(theta, d, b, g, rng)
    levels = {
        "retriever": [f"idx{r + 1}" for r in range(indexed)] + [f"nox{r + 1}" for r in range(index_free)],
        "chunker": [f"c{c + 1}" for c in range(chunkers)],
        "icl": [str(i) for i in range(icl)],
    }
    pipes = [f"{levels['retriever'][r]}+{levels['chunker'][c] if c >= 0 else 'none'}+icl{i}" for r, c, i in combos]
    order = np.argsort(pipes, kind="stable")
    factors = [
        Factor(name, levels[name], codes[order, j], not_applicable_seen=["none"] if name == "chunker" else [])
        for j, name in enumerate(("retriever", "chunker", "icl"))
    ]
    resp = Responses(
        [pipes[i] for i in order],
        [f"q{i:06d}" for i in range(n_items)],
        np.ascontiguousarray(R[:, order]),
        factors,
        {"n_rows": R.size, "n_missing_correct": 0, "n_absent_pairs": 0},
        "<simulated>",
    )
    return resp, Truth(theta[order], d, b, g, eff)


def to_frame(resp: Responses) -> pd.DataFrame:
    """The long table (pipeline, question_id, correct, factors) of a response matrix; NaN for missing."""
    n_items, n_p = resp.R.shape
    df = pd.DataFrame(
        {
            "pipeline": np.tile(np.array(resp.pipelines, dtype=object), n_items),
            "question_id": np.repeat(np.array(resp.items, dtype=object), n_p),
            "correct": np.where(resp.R.ravel() >= 0, resp.R.ravel(), np.nan),
        }
    )
    for f in resp.factors:
        df[f.name] = np.tile(np.array(f.labels(), dtype=object), n_items)
    return df


__all__ = [
    "Truth",
    "draw_items",
    "sample_matrix",
    "simulate_flat",
    "simulate_hierarchical",
    "simulate_not_applicable",
    "to_frame",
]

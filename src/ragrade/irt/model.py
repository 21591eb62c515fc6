"""The 3PL item response model: probabilities, log-likelihood, analytic derivatives, priors.

Responses are stored items-major as an ``int8`` matrix ``R`` of shape
``(n_items, n_persons)`` holding 1 (correct), 0 (wrong) or -1 (missing), so
that the mask costs no extra memory. For one response with ``z = d (theta - b)``
and ``s = sigmoid(z)`` the model is ``p = g + (1 - g) s``; writing ``1 - p =
(1 - g)(1 - s)`` keeps both tails exact, and each response costs one ``exp``
and one ``log``. Derivatives with respect to ``z`` and ``g``:

* correct:  ``l_z = (1-g) s (1-s) / p``, ``l_g = (1-s) / p``
* wrong:    ``l_z = -s``,                ``l_g = -1 / (1-g)``

The numpy functions here work on blocks of items so that temporaries stay
bounded; :mod:`ragrade.irt._kernels` holds the fused numba version.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np
import numpy.typing as npt

from ragrade.errors import ConfigError
from ragrade.io import JSONObject

F64 = npt.NDArray[np.float64]
I8 = npt.NDArray[np.int8]

MODELS = ("1pl", "2pl", "3pl")
# responses per numpy block: bounds the float64 temporaries to a few tens of MB
BLOCK_RESPONSES = 1 << 20


@dataclass(frozen=True)
class Bounds:
    """Box constraints of the parameters (all configurable)."""

    theta: tuple[float, float] = field(
        default=(-6.0, 6.0),
        metadata={"description": "(low, high) of each ability (with factors: of each factor effect)"},
    )
    difficulty: tuple[float, float] = field(
        default=(-6.0, 6.0), metadata={"description": "(low, high) of each question's difficulty"}
    )
    discrimination: tuple[float, float] = field(
        default=(0.05, 5.0),
        metadata={"description": "(low, high) of each question's discrimination (2PL, 3PL); low must be positive"},
    )
    guessing: tuple[float, float] = field(
        default=(0.0, 0.5), metadata={"description": "(low, high) of each question's guessing (3PL), within [0, 1)"}
    )

    def __post_init__(self) -> None:
        for name, (lo, hi) in asdict(self).items():
            if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
                raise ConfigError(f"bound '{name}' must be finite with low < high, got [{lo}, {hi}]")
        if self.discrimination[0] <= 0:
            raise ConfigError("the discrimination lower bound must be positive")
        if self.guessing[0] < 0 or self.guessing[1] >= 1:
            raise ConfigError("guessing bounds must lie in [0, 1)")

    @classmethod
    def parse(cls, spec: str | None) -> Bounds:
        """Parse ``"theta=-6:6,d=0.05:5,b=-6:6,g=0:0.5"`` (any subset) into bounds."""
        if not spec:
            return cls()
        alias = {
            "theta": "theta",
            "b": "difficulty",
            "difficulty": "difficulty",
            "d": "discrimination",
            "discrimination": "discrimination",
            "g": "guessing",
            "guessing": "guessing",
        }
        values: dict[str, tuple[float, float]] = {}
        for part in spec.split(","):
            if not part.strip():
                continue
            try:
                key, rng = part.split("=")
                lo, hi = rng.split(":")
                values[alias[key.strip()]] = (float(lo), float(hi))
            except (ValueError, KeyError) as exc:
                raise ConfigError(
                    f"cannot parse bound '{part}'; expected NAME=LOW:HIGH with NAME in theta, b, d, g"
                ) from exc
        return cls(**values)


@dataclass(frozen=True)
class Priors:
    """Weak priors for MAP estimation; ``None`` disables the prior of that parameter.

    theta (or each factor effect) ~ N(0, theta_sd); difficulty ~ N(0, difficulty_sd);
    log discrimination ~ N(0, log_discrimination_sd) (a normal prior on log d, whose mode is
    d = 1, so it also anchors the scale); guessing ~ Beta(a, b).
    """

    theta_sd: float | None = field(
        default=1.0,
        metadata={
            "description": "SD of the N(0, SD) prior of each ability (with factors: of each factor effect); "
            "none: no prior"
        },
    )
    difficulty_sd: float | None = field(
        default=2.0, metadata={"description": "SD of the N(0, SD) prior of each question's difficulty; none: no prior"}
    )
    log_discrimination_sd: float | None = field(
        default=0.5,
        metadata={
            "description": "SD of the N(0, SD) prior of each question's log discrimination (2PL, 3PL; its mode, "
            "discrimination 1, also anchors the scale); none: no prior"
        },
    )
    guessing_beta: tuple[float, float] | None = field(
        default=(5.0, 17.0),
        metadata={
            "description": "(a, b) of the Beta prior of each question's guessing (3PL; the default's mean: "
            "0.23); none: no prior"
        },
    )

    @classmethod
    def named(cls, name: str) -> Priors:
        """``weak`` (the default: MAP) or ``none`` (pure joint maximum likelihood)."""
        if name == "weak":
            return cls()
        if name == "none":
            return cls(None, None, None, None)
        raise ConfigError(f"unknown prior '{name}'; valid choices: weak, none")

    @property
    def active(self) -> bool:
        """True when at least one prior is on."""
        return any(v is not None for v in asdict(self).values())

    def describe(self) -> JSONObject:
        """JSON-friendly description."""
        return {
            "theta": None if self.theta_sd is None else f"normal(0, {self.theta_sd})",
            "difficulty": None if self.difficulty_sd is None else f"normal(0, {self.difficulty_sd})",
            "discrimination": None
            if self.log_discrimination_sd is None
            else f"lognormal(0, {self.log_discrimination_sd})",
            "guessing": None if self.guessing_beta is None else f"beta{tuple(self.guessing_beta)}",
        }


def check_model(model: str) -> str:
    """Normalise and validate a model name."""
    m = model.lower().strip()
    if m not in MODELS:
        raise ConfigError(f"unknown IRT model '{model}'; valid choices: {', '.join(MODELS)}")
    return m


def prob(theta: F64, d: F64, b: F64, g: F64) -> F64:
    """P(correct) for every (item, theta) pair: shape ``(n_items, n_theta)``."""
    z = d[:, None] * (np.asarray(theta)[None, :] - b[:, None])
    s = 0.5 * (1.0 + np.tanh(0.5 * z))  # stable sigmoid
    return np.asarray(g[:, None] + (1.0 - g[:, None]) * s)


def sig_pair(z: F64) -> tuple[F64, F64]:
    """sigmoid(z) and 1 - sigmoid(z), both accurate in the tails, with one exp."""
    s, sc, _ = _sig_triple(z)
    return s, sc


def _sig_triple(z: F64) -> tuple[F64, F64, F64]:
    """sigmoid(z), 1 - sigmoid(z) and t = exp(-|z|)."""
    t = np.exp(-np.abs(z))
    inv = 1.0 / (1.0 + t)
    pos = z >= 0
    s = np.where(pos, inv, t * inv)
    sc = np.where(pos, t * inv, inv)
    return s, sc, t


def block_slices(n_items: int, n_persons: int) -> list[slice]:
    """Item slices of at most ``BLOCK_RESPONSES`` responses each (at least one item), covering all items in order."""
    step = max(1, BLOCK_RESPONSES // max(1, n_persons))
    return [slice(i, min(i + step, n_items)) for i in range(0, n_items, step)]


def nll_grad_numpy(R: I8, theta: F64, d: F64, b: F64, g: F64) -> tuple[float, F64, F64, F64, F64]:
    """Negative log-likelihood and its gradient in (theta, d, b, g), vectorised by item blocks."""
    n_items, n_persons = R.shape
    nll = 0.0
    g_theta = np.zeros(n_persons)
    g_d, g_b, g_g = np.zeros(n_items), np.zeros(n_items), np.zeros(n_items)
    for sl in block_slices(n_items, n_persons):
        r = R[sl]
        obs = r >= 0
        right = r == 1
        dd, bb, gg = d[sl, None], b[sl, None], g[sl, None]
        diff = theta[None, :] - bb
        z = dd * diff
        s, sc, t = _sig_triple(z)
        p = gg + (1.0 - gg) * s
        l1p = np.log1p(t)
        # log p (exact log-sigmoid when g == 0) and log(1 - p) = log(1 - g) + log sigmoid(-z)
        with np.errstate(divide="ignore"):
            logp = np.where(gg > 0, np.log(p), np.minimum(z, 0.0) - l1p)
        logq = np.where(right, logp, np.log1p(-gg) - np.maximum(z, 0.0) - l1p)
        nll -= float(logq[obs].sum())
        lz = np.where(right, (1.0 - gg) * s * sc / p, -s) * obs
        lg = np.where(right, sc / p, -1.0 / (1.0 - gg)) * obs
        g_theta -= (lz * dd).sum(axis=0)
        g_d[sl] = -(lz * diff).sum(axis=1)
        g_b[sl] = (lz * dd).sum(axis=1)
        g_g[sl] = -lg.sum(axis=1)
    return nll, g_theta, g_d, g_b, g_g


def item_blocks_numpy(R: I8, theta: F64, d: F64, b: F64, g: F64, sl: slice) -> tuple[F64, F64, F64]:
    """For the items in ``sl``: observed-information pieces.

    Returns ``H`` (n, 3, 3) for (d, b, g), ``C`` (n, n_persons, 3) = d^2(-l)/(dtheta d item),
    and ``h_tt`` (n, n_persons) = d^2(-l)/dtheta^2 per response.
    """
    r = R[sl]
    obs = (r >= 0).astype(np.float64)
    right = r == 1
    dd, bb, gg = d[sl, None], b[sl, None], g[sl, None]
    diff = theta[None, :] - bb
    z = dd * diff
    s, sc = sig_pair(z)
    s1 = s * sc
    p = gg + (1.0 - gg) * s
    lz = np.where(right, (1.0 - gg) * s1 / p, -s) * obs
    lzz = np.where(right, (1.0 - gg) * s1 * (1.0 - 2.0 * s) / p - ((1.0 - gg) * s1 / p) ** 2, -s1) * obs
    lzg = np.where(right, -s1 / p**2, 0.0) * obs
    lgg = np.where(right, -(sc**2) / p**2, -1.0 / (1.0 - gg) ** 2) * obs
    n = r.shape[0]
    H = np.empty((n, 3, 3))
    H[:, 0, 0] = -(lzz * diff**2).sum(1)
    H[:, 1, 1] = -(lzz * dd**2).sum(1)
    H[:, 2, 2] = -lgg.sum(1)
    H[:, 0, 1] = H[:, 1, 0] = -(-lzz * diff * dd - lz).sum(1)
    H[:, 0, 2] = H[:, 2, 0] = -(lzg * diff).sum(1)
    H[:, 1, 2] = H[:, 2, 1] = -(-lzg * dd).sum(1)
    C = np.empty((n, r.shape[1], 3))
    C[:, :, 0] = -(lzz * dd * diff + lz)
    C[:, :, 1] = lzz * dd**2
    C[:, :, 2] = -lzg * dd
    h_tt = -lzz * dd**2
    return H, C, h_tt


def information(theta: F64, d: F64, b: F64, g: F64) -> F64:
    """3PL item information ``d^2 ((p-g)/(1-g))^2 (1-p)/p``: shape ``(n_items, n_theta)``."""
    p = prob(theta, d, b, g)
    gg = g[:, None]
    return np.asarray((d[:, None] ** 2) * ((p - gg) / (1.0 - gg)) ** 2 * (1.0 - p) / p)


def fisher_theta(R: I8, theta: F64, d: F64, b: F64, g: F64) -> F64:
    """Per person: the test information at their ability over the items they answered."""
    out = np.zeros(R.shape[1])
    for sl in block_slices(*R.shape):
        info = information(theta, d[sl], b[sl], g[sl])
        out += (info * (R[sl] >= 0)).sum(axis=0)
    return out


def predict_sq_error(R: I8, theta: F64, d: F64, b: F64, g: F64) -> tuple[float, F64, F64]:
    """Sum of squared errors (r - p)^2 over observed responses, and per item / per person sums."""
    per_item = np.zeros(R.shape[0])
    per_person = np.zeros(R.shape[1])
    for sl in block_slices(*R.shape):
        r = R[sl]
        err = np.where(r >= 0, (r - prob(theta, d[sl], b[sl], g[sl])) ** 2, 0.0)
        per_item[sl] = err.sum(1)
        per_person += err.sum(0)
    return float(per_item.sum()), per_item, per_person


def loglik_sse(R: I8, theta: F64, d: F64, b: F64, g: F64, fused: bool = False) -> tuple[float, float, F64, F64]:
    """Log-likelihood, total squared error and its per-item / per-person sums; ``fused`` uses the
    one-pass numba kernel (for large matrices), else numpy blockwise."""
    if fused:
        from ragrade.irt._kernels import loglik_sse_numba

        ll, sq_item, sq_person = loglik_sse_numba(R, theta, d, b, g)
        return ll, float(sq_item.sum()), sq_item, sq_person
    sse, sq_item, sq_person = predict_sq_error(R, theta, d, b, g)
    return loglik(R, theta, d, b, g), sse, sq_item, sq_person


def loglik(R: I8, theta: F64, d: F64, b: F64, g: F64) -> float:
    """Log-likelihood of the observed responses (numpy, blockwise), exact in both tails."""
    total = 0.0
    for sl in block_slices(*R.shape):
        r = R[sl]
        gg = g[sl, None]
        z = d[sl, None] * (theta[None, :] - b[sl, None])
        s, _, t = _sig_triple(z)
        l1p = np.log1p(t)
        with np.errstate(divide="ignore"):
            logp = np.where(gg > 0, np.log(gg + (1.0 - gg) * s), np.minimum(z, 0.0) - l1p)
        logq = np.where(r == 1, logp, np.log1p(-gg) - np.maximum(z, 0.0) - l1p)
        total += float(logq[r >= 0].sum())
    return total


__all__ = [
    "MODELS",
    "Bounds",
    "Priors",
    "block_slices",
    "check_model",
    "fisher_theta",
    "information",
    "item_blocks_numpy",
    "loglik",
    "loglik_sse",
    "nll_grad_numpy",
    "predict_sq_error",
    "prob",
    "sig_pair",
]

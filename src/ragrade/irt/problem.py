"""The shared types of an IRT fit: its options (:class:`FitConfig`) and the packed problem (:class:`Problem`).

:mod:`ragrade.irt.fit`, :mod:`ragrade.irt.newton` and :mod:`ragrade.irt.result` all read these; this
module imports none of them, so the three read in one direction (problem -> newton -> fit -> result).

The backend of the per-response passes is chosen here by problem size (:func:`pick_kernel`): numpy
below :data:`NUMBA_MIN_RESPONSES`, where a pass takes milliseconds and numba's one-off compilation
(about 10 s with a cold cache) could never pay back; numba above it when its compiled cache is warm,
and above :data:`NUMBA_COLD_MIN_RESPONSES` even when cold. The compiled cache lives in the ragrade
cache directory (``$RAGRADE_CACHE_DIR/numba``, default ``~/.cache/ragrade/numba``) unless
``NUMBA_CACHE_DIR`` is set.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Self

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ragrade.errors import ConfigError
from ragrade.irt.hierarchical import Design
from ragrade.irt.io import Responses
from ragrade.irt.model import Bounds, Priors, check_model, nll_grad_numpy

F64 = npt.NDArray[np.float64]
Kernel = Callable[..., tuple[float, F64, F64, F64, F64]]
# measured (benchmarks/bench_irt.py, 2 shared cores): below this numpy's passes take a few ms and
# numba's parallel kernels gain nothing; a cold compile (~10 s) pays back only on the largest fits
NUMBA_MIN_RESPONSES = 250_000
NUMBA_COLD_MIN_RESPONSES = 5_000_000
GUESS_EPS = 1e-6
SOLVERS = ("newton", "lbfgs")
# weight of the penalties that remove the flat location/scale directions without priors once bounds bind
# (see :func:`ragrade.irt.fit.fit_responses`): small, so that they no longer trade likelihood for themselves
WEAK_PENALTY = 1e-3
SE_METHODS = ("observed", "sandwich", "bootstrap", "parametric", "jackknife", "none")


class FitConfig(BaseModel):
    """Options of an IRT fit (defaults: 3PL, weak priors, observed-information SEs).

    Frozen: a changed copy is :meth:`replace` (validated again). In a config file ``priors`` may be a name
    (``"weak"``, ``"none"``) and ``bounds`` a spec (``"theta=-4:4,d=0.2:3"``), as the ``irt fit`` flags take them.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = "3pl"
    factors: tuple[str, ...] = ()
    bounds: Bounds = Field(default_factory=Bounds)
    priors: Priors = Field(default_factory=Priors)
    max_iter: int = 3000
    ftol: float = 1e-13  # L-BFGS-B only; small, so that the SE-based criterion decides
    gtol: float = 0.05  # converged when no coordinate is more than this many SEs from its optimum
    backend: str = "auto"  # auto | numpy | numba
    solver: str = "newton"  # newton (block Fisher scoring, the default) | lbfgs (L-BFGS-B)
    se: str = "observed"  # observed | sandwich (robust, for effects) | bootstrap | parametric | jackknife | none
    n_boot: int = 50
    jackknife_groups: int = 20  # groups of pipelines left out in turn by se="jackknife"
    seed: int = Field(
        default=0, description="seed of the bootstrap and parametric replicates and of the jackknife's groups"
    )
    theta_grid: tuple[float, float, int] = Field(
        default=(-4.0, 4.0, 81),
        description="(low, high, points) of the ability grid the information curves are drawn on, widened to "
        "every fitted ability plus 0.5",
    )
    # factor (or "*" for every factor not named) -> values meaning "does not apply to this pipeline";
    # None: DEFAULT_NOT_APPLICABLE ("none" and empty cells) for every factor; an empty tuple: strict
    not_applicable: Mapping[str, tuple[str, ...]] | None = None

    @field_validator("model")
    @classmethod
    def _model(cls, value: str) -> str:
        return check_model(value)

    @field_validator("bounds", mode="before")
    @classmethod
    def _bounds_spec(cls, value: object) -> object:
        return Bounds.parse(value) if isinstance(value, str) else value

    @field_validator("priors", mode="before")
    @classmethod
    def _priors_name(cls, value: object) -> object:
        return Priors.named(value) if isinstance(value, str) else value

    @field_validator("not_applicable", mode="before")
    @classmethod
    def _not_applicable(cls, value: object) -> object:
        if not isinstance(value, Mapping):
            return value
        for key, values in value.items():
            if isinstance(values, str) or not all(isinstance(v, str) for v in values):
                raise ConfigError(f"not-applicable values of '{key}' must be a list of strings, got {values!r}")
        return {k: tuple(v) for k, v in value.items()}

    @model_validator(mode="after")
    def _check(self) -> FitConfig:
        if self.backend not in ("auto", "numpy", "numba"):
            raise ConfigError(f"unknown backend '{self.backend}'; valid choices: auto, numpy, numba")
        if self.solver not in SOLVERS:
            raise ConfigError(f"unknown solver '{self.solver}'; valid choices: {', '.join(SOLVERS)}")
        if self.se not in SE_METHODS:
            raise ConfigError(f"unknown SE method '{self.se}'; valid choices: {', '.join(SE_METHODS)}")
        if self.max_iter < 1 or self.n_boot < 2 or self.jackknife_groups < 2:
            raise ConfigError("$max_iter must be >= 1, $n_boot >= 2 and $jackknife_groups >= 2")
        if self.se == "jackknife" and not self.factors:
            raise ConfigError("$se jackknife corrects factor effects: it needs $factors (the hierarchical model)")
        if len(set(self.factors)) != len(self.factors):
            raise ConfigError("a factor is listed twice")
        return self

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes`` (field names), validated as a new config."""
        fields = {name: getattr(self, name) for name in type(self).model_fields}
        return type(self).model_validate({**fields, **changes})


def numba_cache_dir() -> Path:
    """Where numba keeps the compiled kernels: ``$NUMBA_CACHE_DIR`` if set, else the ragrade cache dir."""
    env = os.environ.get("NUMBA_CACHE_DIR")
    if env:
        return Path(env)
    base = (
        os.environ.get("RAGRADE_CACHE_DIR")
        or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ragrade"
    )
    return Path(base).expanduser() / "numba"


def _numba_cache_warm(directory: Path) -> bool:
    """Whether compiled kernels of this package version are in the cache (index files of ``_kernels``)."""
    try:
        return any(directory.rglob("_kernels.*.nbi"))
    except OSError:
        return False


def choose_backend(backend: str, n_responses: int) -> str:
    """``numpy`` or ``numba`` for a problem of ``n_responses`` (see the module docstring for ``auto``)."""
    if backend != "auto":
        return backend
    if n_responses < NUMBA_MIN_RESPONSES:
        return "numpy"
    if n_responses >= NUMBA_COLD_MIN_RESPONSES or _numba_cache_warm(numba_cache_dir()):
        return "numba"
    return "numpy"


def pick_kernel(backend: str, n_responses: int) -> tuple[Kernel, str]:
    """The numpy or the fused numba kernel; numba is imported only when used (its cache set first)."""
    if choose_backend(backend, n_responses) == "numpy":
        return nll_grad_numpy, "numpy"
    os.environ.setdefault("NUMBA_CACHE_DIR", str(numba_cache_dir()))
    try:
        from ragrade.irt._kernels import nll_grad_numba
    except ImportError:
        if backend == "numba":
            from ragrade.errors import MissingDependency

            raise MissingDependency("numba", extra="fast", purpose="the fused IRT kernel") from None
        return nll_grad_numpy, "numpy"
    return nll_grad_numba, "numba"


class Problem:
    """Packs the free parameters into one vector; evaluates objective and gradient."""

    def __init__(self, data: Responses, cfg: FitConfig, design: Design | None) -> None:
        self.data, self.cfg, self.design = data, cfg, design
        self.n_items, self.n_persons = data.R.shape
        self.free_d = cfg.model in ("2pl", "3pl")
        self.free_g = cfg.model == "3pl"
        self.k = design.k if design else self.n_persons
        self.n_obs = max(1, data.n_observed)
        self.kernel, self.backend = pick_kernel(cfg.backend, data.R.size)
        obs = data.R >= 0
        self.item_counts = obs.sum(axis=1).astype(np.float64)
        self.person_counts = obs.sum(axis=0).astype(np.float64)
        self.n_evals = 0
        # weights of the location and scale penalties (no priors only); they vanish on the anchored member
        # of each flat family of the likelihood, and are weakened when a bound makes that member infeasible
        self.penalty = [1.0, 1.0]
        self._box: tuple[F64, F64] | None = None

    # layout: [person block (theta or z)] [d]? [b] [g]?
    def sizes(self) -> list[int]:
        """Block sizes of the parameter vector."""
        return [self.k, self.n_items if self.free_d else 0, self.n_items, self.n_items if self.free_g else 0]

    def unpack(self, x: F64) -> tuple[F64, F64, F64, F64, F64]:
        """(theta, d, b, g, z) from the parameter vector (z is empty for the flat model)."""
        k, nd, nb, ng = self.sizes()
        pos = np.cumsum([0, k, nd, nb, ng])
        person = x[pos[0] : pos[1]]
        d = x[pos[1] : pos[2]] if self.free_d else np.ones(self.n_items)
        b = x[pos[2] : pos[3]]
        g = x[pos[3] : pos[4]] if self.free_g else np.zeros(self.n_items)
        if self.design is not None:
            return self.design.X @ person, d, b, g, person
        return person, d, b, g, np.zeros(0)

    def pack(self, person: F64, d: F64, b: F64, g: F64) -> F64:
        """The parameter vector of given blocks."""
        parts = [person, d if self.free_d else None, b, g if self.free_g else None]
        return np.concatenate([p for p in parts if p is not None])

    def box(self) -> list[tuple[float, float]]:
        """L-BFGS-B bounds for every coordinate."""
        bd = self.cfg.bounds
        glo = bd.guessing[0]
        if self.cfg.priors.guessing_beta is not None:
            glo = max(glo, GUESS_EPS)
        k, nd, nb, ng = self.sizes()
        return [bd.theta] * k + [bd.discrimination] * nd + [bd.difficulty] * nb + [(glo, bd.guessing[1])] * ng

    def box_arrays(self) -> tuple[F64, F64]:
        """Lower and upper bounds of every coordinate as arrays (cached)."""
        if self._box is None:
            lo, hi = np.array(self.box(), dtype=np.float64).reshape(-1, 2).T
            self._box = (lo, hi)
        return self._box

    def prior_terms(self, person: F64, d: F64, b: F64, g: F64) -> tuple[float, list[F64]]:
        """Negative log prior and its gradient per block."""
        pr = self.cfg.priors
        f = 0.0
        grads = [np.zeros_like(person), np.zeros_like(d), np.zeros_like(b), np.zeros_like(g)]
        if pr.theta_sd is not None:
            f += 0.5 * float(person @ person) / pr.theta_sd**2
            grads[0] = person / pr.theta_sd**2
        if pr.log_discrimination_sd is not None and self.free_d:
            ld = np.log(d)
            s2 = pr.log_discrimination_sd**2
            f += float((0.5 * ld**2 / s2).sum())  # normal on log d: its mode is d = 1
            grads[1] = ld / (s2 * d)
        if pr.difficulty_sd is not None:
            f += 0.5 * float(b @ b) / pr.difficulty_sd**2
            grads[2] = b / pr.difficulty_sd**2
        if pr.guessing_beta is not None and self.free_g:
            a, c = pr.guessing_beta
            f -= float(((a - 1.0) * np.log(g) + (c - 1.0) * np.log1p(-g)).sum())
            grads[3] = -(a - 1.0) / g + (c - 1.0) / (1.0 - g)
        # without priors the likelihood is flat along location (flat model) and scale shifts; these
        # penalties vanish on the anchored member of each flat family, so they change no estimate but
        # remove the flat directions the optimiser would otherwise wander along
        if pr.theta_sd is None and self.design is None:
            mt = float(person.mean())
            f += 0.5 * self.penalty[0] * len(person) * mt**2
            grads[0] = grads[0] + self.penalty[0] * mt
        if pr.theta_sd is None and pr.log_discrimination_sd is None and self.free_d:
            ml = float(np.log(d).mean())
            f += 0.5 * self.penalty[1] * len(d) * ml**2
            grads[1] = grads[1] + self.penalty[1] * ml / d
        return f, grads

    def objective(self, x: F64) -> tuple[float, F64]:
        """Negative log-posterior per observed response, and its gradient."""
        self.n_evals += 1
        theta, d, b, g, z = self.unpack(x)
        nll, gt, gd, gb, gg = self.kernel(self.data.R, theta, d, b, g)
        person = z if self.design is not None else theta
        fp, pg = self.prior_terms(person, d, b, g)
        g_person = (self.design.X.T @ gt if self.design is not None else gt) + pg[0]
        grad = self.pack(g_person, gd + pg[1], gb + pg[2], gg + pg[3])
        return (nll + fp) / self.n_obs, grad / self.n_obs

    def scales(self) -> F64:
        """Rough square roots of each coordinate's curvature (Fisher information ~ 0.15 per response)."""
        if self.design is not None:
            pc = (self.design.X**2).T @ self.person_counts
        else:
            pc = self.person_counts
        _, nd, _, ng = self.sizes()
        ic = self.item_counts
        parts = [pc * 0.15, ic * 0.15 if nd else None, ic * 0.15, ic * 1.0 if ng else None]
        curv = np.concatenate([p for p in parts if p is not None]) / self.n_obs
        return np.sqrt(np.maximum(curv, 1e-12))

    def step_in_se(self, x: F64, grad: F64, scale: F64) -> float:
        """Largest projected gradient / sqrt(curvature): the step left to go, in standard errors."""
        if not x.size:
            return 0.0
        lo, hi = self.box_arrays()
        gproj = np.where((x <= lo + 1e-12) & (grad > 0), 0.0, grad)
        gproj = np.where((x >= hi - 1e-12) & (gproj < 0), 0.0, gproj)
        return float(np.max(np.abs(gproj / scale)) * np.sqrt(self.n_obs))


__all__ = [
    "GUESS_EPS",
    "NUMBA_COLD_MIN_RESPONSES",
    "NUMBA_MIN_RESPONSES",
    "SE_METHODS",
    "SOLVERS",
    "WEAK_PENALTY",
    "FitConfig",
    "Problem",
    "choose_backend",
    "numba_cache_dir",
    "pick_kernel",
]

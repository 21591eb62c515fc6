"""The :class:`Testbed` protocol, the records it names, and the registry lookup of a testbed.

The lowest module of the robustness stage's testbed machinery: the shared construction
(:mod:`ragrade.robust.build`), scoring and table helpers and the testbeds themselves
(:mod:`ragrade.robust.testbeds`) all import it, and it imports none of them, so the helpers
find a testbed by name through the registry (:func:`get_testbed`) rather than by importing the
testbeds package (which imports the helpers).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, get_args, runtime_checkable

from ragrade.errors import ConfigError, check_choice
from ragrade.io import JSONObject

if TYPE_CHECKING:
    from ragrade.robust.data import RGBItem
    from ragrade.robust.detect import Detectors
    from ragrade.robust.prompts import LangPrompts

Shortfall = Literal["pad", "skip", "fewer"]
SHORTFALLS: tuple[Shortfall, ...] = get_args(Shortfall)
Construction = Literal["ragrade", "rgb"]
CONSTRUCTIONS: tuple[Construction, ...] = get_args(Construction)


@dataclass(frozen=True)
class BuildOptions:
    """How instances are built: documents per question, shortfall policy, construction, seed.

    ``n_docs`` is the ``docs`` setting of ``robust run`` (:class:`~ragrade.robust.config.RobustRunConfig`), and
    errors name it so; a string that is not a valid choice (from a config file) fails here too.
    """

    n_docs: int = 5
    shortfall: Shortfall = "pad"
    construction: Construction = "ragrade"
    seed: int = 0
    correct_ratio: float = 0.0  # counterfactual: share of documents that are uncorrupted positives
    min_positives: int = 0  # leave out items with fewer supporting passages (0: keep every item)

    def __post_init__(self) -> None:
        if self.min_positives < 0:
            raise ConfigError(f"$min_positives must be at least 0, got {self.min_positives}")
        if self.n_docs < 1:
            raise ConfigError(f"$docs must be at least 1, got {self.n_docs}")
        check_choice(self.shortfall, SHORTFALLS, "shortfall")
        check_choice(self.construction, CONSTRUCTIONS, "construction")
        if not 0.0 <= self.correct_ratio <= 1.0:
            raise ConfigError(f"$correct_ratio must be within [0, 1], got {self.correct_ratio}")


@dataclass(frozen=True)
class Doc:
    """One prompt document: its pool (positive, negative, positive_wrong), index in the pool, group."""

    pool: str
    index: int
    text: str
    group: int | None = None

    def to_record(self) -> JSONObject:
        """JSON form."""
        rec: JSONObject = {"pool": self.pool, "index": self.index, "text": self.text}
        if self.group is not None:
            rec["group"] = self.group
        return rec


@dataclass
class Instance:
    """One question as presented to the model under one condition."""

    item: RGBItem
    testbed: str
    noise_ratio: float
    condition: str = "documents"  # or "no_documents" (closed book, counterfactual Acc)
    docs: list[Doc] = field(default_factory=list)
    skipped: str | None = None  # reason, when the item is left out of this ratio
    flags: list[str] = field(default_factory=list)
    system_prompt: bool = True  # False: asked without the system instruction (original construction, no document)

    @property
    def key(self) -> str:
        """Unique key of this instance within a run."""
        return f"{self.item.id}|{self.noise_ratio:g}|{self.condition}"

    @property
    def n_noise(self) -> int:
        """Number of noise documents."""
        return sum(d.pool == "negative" for d in self.docs)

    @property
    def n_positive(self) -> int:
        """Number of documents from a positive pool (corrupted ones included)."""
        return len(self.docs) - self.n_noise

    @property
    def noise_ratio_actual(self) -> float | None:
        """Share of noise among the documents presented (None without documents)."""
        return self.n_noise / len(self.docs) if self.docs else None


Metrics = dict[str, Any]
Cells = dict[str, float | None]


@runtime_checkable
class Testbed(Protocol):
    """What ``ragrade robust run`` asks of a testbed.

    ``data_kinds``: record shapes it accepts; ``data_file``: the file of ``robust build`` it reads
    (``base``, ``integration``, ``counterfactual``); ``default_ratios``: noise ratios run when none
    are given; ``ratios_fixed``: the ratios cannot be chosen; ``ratio_cap``: the highest ratio
    ``ragrade run`` gives it (None: any below 1); ``metrics``: the metrics.json keys it fills;
    ``judge_task``: what the optional judge is asked ("rejection", "error" or None).
    """

    name: str
    description: str
    data_kinds: tuple[str, ...]
    data_file: str
    default_ratios: tuple[float, ...]
    ratios_fixed: bool
    ratio_cap: float | None
    metrics: tuple[str, ...]
    judge_task: str | None

    def build(self, item: RGBItem, ratio: float, opts: BuildOptions, condition: str = "documents") -> Instance:
        """The documents ``item`` is shown at noise ``ratio`` (its contexts)."""
        ...

    def build_instances(
        self, items: Sequence[RGBItem], ratios: Sequence[float], opts: BuildOptions, *, closed_book: bool
    ) -> list[Instance]:
        """Every instance of a run: each item at each ratio, plus any extra condition."""
        ...

    def ratio_notes(self, instances: Sequence[Instance]) -> list[str]:
        """Warnings about actual noise ratios that differ from the requested ones."""
        ...

    def messages(self, inst: Instance, lp: LangPrompts) -> tuple[tuple[str, str], ...]:
        """The (role, content) messages of one instance."""
        ...

    def label(self, record: Mapping[str, object], scoring: str, detectors: Detectors, lang: str) -> JSONObject:
        """The labels of one answered (or failed) record under ``scoring``."""
        ...

    def summarise(self, records: Sequence[Mapping[str, object]], scoring: str, seed: int = 0) -> Metrics:
        """The metrics of one group of labelled records."""
        ...

    def table_cells(self, metrics: Mapping[str, object]) -> Cells:
        """Column label -> percentage of one run, for the paper-shaped table."""
        ...

    def actual_cells(self, metrics: Mapping[str, object]) -> Cells:
        """Column label -> mean actual noise ratio (empty when the columns are not noise ratios)."""
        ...


@runtime_checkable
class SharedConstruction(Protocol):
    """The hooks of the shared construction (:func:`ragrade.robust.build.assemble`; a ``BaseTestbed`` has them)."""

    name: str
    noise_only: bool
    pad_with_noise: bool
    short_note: str

    def supporting_passages(self, item: RGBItem) -> int:
        """Passages that support the answer (compared with ``--min-positives``)."""
        ...

    def pool_size(self, item: RGBItem) -> int:
        """Documents the positives are drawn from."""
        ...

    def correct_count(self, opts: BuildOptions) -> int:
        """Uncorrupted positives asked for besides the positives (counterfactual only)."""
        ...

    def plan(self, inst: Instance, want_noise: int, want_pos: int, opts: BuildOptions) -> tuple[int, int] | None:
        """Adjust the (noise, positive) counts, or skip the instance (set ``inst.skipped``, return None)."""
        ...

    def positives(self, item: RGBItem, count: int, n_correct: int) -> list[Doc]:
        """The positive documents of one instance."""
        ...

    def rgb_docs(
        self, item: RGBItem, rng: random.Random, n_docs: int, ratio: float, neg_num: int, correct_ratio: float
    ) -> list[Doc]:
        """The original benchmark's selection for this testbed (before the final shuffle)."""
        ...


def get_testbed(name: str | Testbed) -> Testbed:
    """The testbed registered as ``name`` (a ConfigError with the choices and a did-you-mean otherwise)."""
    if not isinstance(name, str):
        return name
    from ragrade.registry import create

    tb: Testbed = create("testbed", name)
    return tb


def testbed_names() -> list[str]:
    """The registered testbed names, sorted."""
    from ragrade.registry import names

    return names("testbed")


__all__ = [
    "CONSTRUCTIONS",
    "SHORTFALLS",
    "BuildOptions",
    "Cells",
    "Construction",
    "Doc",
    "Instance",
    "Metrics",
    "SharedConstruction",
    "Shortfall",
    "Testbed",
    "get_testbed",
    "testbed_names",
]

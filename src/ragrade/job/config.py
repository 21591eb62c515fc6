"""The typed config of ``ragrade run``: one TOML file describing every stage.

Layers merge once: built-in defaults < the config file < CLI flags (``None``
means "not given"). The demo is this config with :data:`DEMO_CONFIG` as its
file layer.

A stage's table is that stage's own settings model, subclassed with the job's keys, so a key means the same
here as in the stage's verb: ``[sweep]`` is a sweep file's grid and run settings
(:class:`~ragrade.run.spec.GridConfig`, :class:`~ragrade.run.spec.GridRunSettings`), ``[adaptive]`` an
:class:`~ragrade.run.adaptive_config.AdaptiveConfig`, ``[exam]`` an :class:`~ragrade.exam.config.ExamConfig`,
``[irt]`` a :class:`~ragrade.irt.problem.FitConfig`, ``[robust]`` ``robust run``'s
:class:`~ragrade.robust.config.RobustSettings`, ``[judge]`` ``judge``'s :class:`~ragrade.judge.run.JudgeSettings`;
``[llm_options]`` is the :class:`~ragrade.llm.options.LLMOptions` every LLM of the job shares. The old job-only
spellings are read once with a warning (:mod:`ragrade.job.legacy`). Stage keys (:mod:`ragrade.job.runner`) keep
the shape they had before, so finished run folders are reused after the change.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import ClassVar

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    field_validator,
    model_validator,
)

from ragrade.config import build_config, load_toml
from ragrade.corpus.demo import DEMO_TOPICS
from ragrade.corpus.load import CorpusConfig
from ragrade.errors import ConfigError
from ragrade.exam.config import ExamConfig
from ragrade.irt.model import Priors, check_model
from ragrade.irt.problem import FitConfig
from ragrade.job.legacy import upgrade_job_layer
from ragrade.judge.calibrate import CalibrationConfig
from ragrade.judge.run import JudgeSettings
from ragrade.llm.options import LLMOptions, rename_options_table
from ragrade.retrieval.index import IndexConfig
from ragrade.robust.config import RobustSettings
from ragrade.run.adaptive_config import AdaptiveConfig
from ragrade.run.spec import GridConfig, GridRunSettings, no_repeats


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CorpusSection(CorpusConfig):
    """Where the documents come from: the built-in demo corpus or paths, loaded with ``ragrade corpus``'s own
    settings (:class:`~ragrade.corpus.load.CorpusConfig`: same keys, e.g. ``api_docstrings``, ``templates``)."""

    demo: bool = False
    demo_limit: int | None = Field(default=None, ge=1)
    demo_topics: list[str] | None = None  # standard-library modules/packages the demo corpus is built from
    paths: list[str] = Field(
        default_factory=list,
        description="files or folders of documents to load (folders read recursively; a relative path is read from "
        "the config file's folder); ignored when demo = true, needed otherwise",
    )

    def corpus_config(self) -> CorpusConfig:
        """The settings ``ragrade corpus`` takes (the section less the job's own keys)."""
        return CorpusConfig.model_validate(self.model_dump(include=set(CorpusConfig.model_fields)))

    def stage_key(self) -> dict[str, object]:
        """The corpus stage's key: the keys the section had before it embedded :class:`CorpusConfig` always,
        the loader's other settings only where they differ from their defaults (earlier folders keep theirs)."""
        old = ("demo", "demo_limit", "demo_topics", "paths", "text_field", "id_field", "drop_patterns")
        return stage_key(self, old)


class ChunkerSection(_Section):
    """One chunking of the corpus; each gets its own index."""

    strategy: str = "recursive"
    size: int = Field(default=200, ge=8)
    overlap: int = Field(default=20, ge=0)
    name: str | None = Field(
        default=None,
        description="the chunking's label: its value of the chunker factor in results, and the name [exam], "
        "[sweep], [robust] and [judge] give to pick it (None: STRATEGY-SIZE, e.g. recursive-200); unique",
    )

    @property
    def label(self) -> str:
        """The chunker's name in results (the ``chunker`` factor)."""
        return self.name or f"{self.strategy}-{self.size}"

    @model_validator(mode="after")
    def _check(self) -> ChunkerSection:
        if self.overlap >= self.size:
            raise ValueError(f"overlap ({self.overlap}) must be smaller than size ({self.size})")
        return self


class IndexSection(IndexConfig):
    """How chunks are indexed: a ``ragrade index`` config (:class:`~ragrade.retrieval.index.IndexConfig`: same keys,
    e.g. ``embedder``, ``headings``, ``store``, ``bm25``, ``device``) less what the job decides elsewhere: the
    chunking (each ``[[chunkers]]`` table) and whether dense vectors are built (when a retriever needs them)."""

    #: keys of ``ragrade index`` that a job decides itself (refused here; the reference leaves them out)
    DECIDED_BY_JOB: ClassVar[dict[str, str]] = {
        "strategy": "chunking is set per [[chunkers]] table",
        "size": "chunking is set per [[chunkers]] table",
        "overlap": "chunking is set per [[chunkers]] table",
        "chunker_options": "chunking is set per [[chunkers]] table",
        "dense": "dense vectors are built when a retriever of [sweep] or [judge] needs them",
    }

    @model_validator(mode="after")
    def _job_decides(self) -> IndexSection:
        for name in sorted(self.model_fields_set & set(self.DECIDED_BY_JOB)):
            raise ValueError(f"[index] {name}: {self.DECIDED_BY_JOB[name]}")
        return self

    def index_config(self, dense: bool) -> IndexConfig:
        """The settings ``build_index`` takes for one chunking (the section with ``dense`` decided by the job)."""
        return IndexConfig.model_validate({**self.model_dump(exclude={"dense"}), "dense": dense})


#: ``[llm_options]`` (``[llm]``, its old name, read with a warning): how every LLM of the job is reached (the key
#: comes from OPENAI_API_KEY); ``ragrade --dry-run run`` sets its ``dry_run``, which stage keys leave out
#: (:meth:`~ragrade.llm.options.LLMOptions.stage_key`)
LLMSection = LLMOptions


class ExamSection(ExamConfig):
    """Exam generation: an ``exam generate`` config (same keys) plus the job's own: an LLM spec (``offline``
    for the offline cloze generator), the chunking it reads, or an existing exam file instead."""

    enabled: bool = Field(
        default=True,
        description="generate the exam (false: no exam unless path names one; without an exam the sweep, IRT, "
        "adaptive and corpus-built robustness stages are left out)",
    )
    path: str | None = None  # use an existing exam file instead of generating one
    llm: str = "offline"
    chunker: str | None = None  # which chunking to generate from (default: the first)
    # the job's own defaults: a larger exam than `exam generate`'s 100 (the IRT fits and the improvement read
    # it), stratified by the corpus' topics
    n: int = Field(default=200, ge=1, description="questions wanted in the exam")
    topic_field: str | None = Field(default="topic", description="stratify sampling by this chunk metadata field")

    def exam_config(self) -> ExamConfig:
        """The settings ``exam generate`` takes (the section less the job's own keys)."""
        return ExamConfig.model_validate(self.model_dump(include=set(ExamConfig.model_fields)))

    def stage_key(self) -> dict[str, object]:
        """The exam stage's key, shaped as before the section embedded :class:`ExamConfig` (the exam settings
        given under ``options``), so earlier run folders keep their stage."""
        key: dict[str, object] = {
            name: getattr(self, name) for name in ("enabled", "path", "llm", "n", "seed", "chunker", "topic_field")
        }
        options = set(ExamConfig.model_fields) - set(key)
        key["options"] = self.model_dump(mode="json", include=options, exclude_unset=True)
        return key


class SweepSection(GridConfig, GridRunSettings):
    """The grid of pipelines that take the exam: the axes of a sweep file's ``[grid]`` (same keys, same
    defaults; ``chunkers`` default to every ``[[chunkers]]``) and its run settings, plus the job's own."""

    _table: ClassVar[str] = "[sweep]"
    enabled: bool = Field(
        default=True,
        description="let every pipeline of the grid take the exam into sweep/ (needs an exam; the IRT stage runs "
        "only after it)",
    )
    top: int = Field(default=5, ge=2)  # pipelines compared pairwise for the verdicts

    def grid(self, chunkers: list[str]) -> GridConfig:
        """The grid axes (``chunkers``: the labels used when the section names none)."""
        axes = self.model_dump(include=set(GridConfig.model_fields))
        return GridConfig.model_validate({**axes, "chunkers": self.chunkers or chunkers})

    def run_settings(self) -> GridRunSettings:
        """The sweep file's top-level settings of this section (seed, limit, executor, ...)."""
        return GridRunSettings.model_validate(self.model_dump(include=set(GridRunSettings.model_fields)))

    def stage_key(self) -> dict[str, object]:
        """The section as the sweep stage's key: the axes [sweep] gained with the one grid schema (prompts,
        methods, temperature, max_tokens) count only when set, so earlier run folders keep their stages."""
        key = self.model_dump(exclude=set(THROUGHPUT_SETTINGS))  # how fast answers come is no part of them
        defaults = GridConfig().model_dump()
        for name in _GRID_AXES_ADDED:
            if key[name] == defaults[name]:
                del key[name]
        return key


_GRID_AXES_ADDED = ("prompts", "methods", "temperature", "max_tokens")
#: run settings of a grid that change how fast answers come, never what they are, or only what is recorded
#: (left out of the stage keys, as :data:`ragrade.llm.options.THROUGHPUT_OPTIONS` are)
THROUGHPUT_SETTINGS = ("executor", "samples", "shard_size", "parallel_shards", "ray_address", "ray_workers")


class AdaptiveSection(AdaptiveConfig):
    """Adaptive, IRT-driven evaluation of the sweep's grid into ``adaptive/`` (off by default).

    ``replay``: answer from the full sweep's responses instead of asking the LLMs (the demo's check of
    how close an adaptive run comes to the full grid; writes ``adaptive/comparison.json``).
    """

    replay: bool = Field(
        default=False,
        description="answer from the full sweep's responses (replay/LLM) instead of asking the LLMs, and write "
        "adaptive/comparison.json: how close the adaptive estimates come to the full grid; needs the sweep",
    )


class IRTSection(FitConfig):
    """Item Response Theory over the sweep's responses: an IRT fit's settings (same keys) plus the
    improvement's steps and drop; ``factors`` default to the sweep's retriever, chunker and ICL."""

    enabled: bool = Field(
        default=True, description="fit the IRT models on the sweep's responses (runs only after the sweep)"
    )
    factors: tuple[str, ...] = ("retriever", "chunker", "icl")
    improve_steps: int = Field(
        default=3,
        ge=0,
        description="drop-and-refit rounds after the fit, into irt/improve/: each drops the drop share of the "
        "questions left with the lowest discrimination (0: no improvement; it stops before fewer than 5 are left)",
    )
    drop: float = Field(
        default=0.1,
        gt=0,
        lt=1,
        description="share of the questions left that each improvement round drops (at least one question)",
    )

    @field_validator("model")
    @classmethod
    def _model(cls, value: str) -> str:
        try:  # as the fit checks it, reported at [irt] model
            return check_model(value)
        except ConfigError as exc:
            raise ValueError(str(exc)) from exc

    @model_validator(mode="wrap")
    @classmethod
    def _in_table(cls, data: object, handler: ModelWrapValidatorHandler[IRTSection]) -> IRTSection:
        try:  # the fit's own checks raise ConfigError; here they name the [irt] table like every other key
            section = handler(data)
        except ConfigError as exc:
            raise ValueError(str(exc)) from exc
        if section.not_applicable is not None:
            raise ValueError("not_applicable is set by the job ('none' and empty cells do not apply), not here")
        return section

    def fit_config(self, factors: Sequence[str], not_applicable: Sequence[str]) -> FitConfig:
        """The fit over ``factors`` (those of the plan): the jackknife corrects factor effects only, so a fit
        without factors keeps observed-information SEs."""
        fields = {name: getattr(self, name) for name in FitConfig.model_fields}
        se = self.se if factors or self.se not in ("jackknife", "sandwich") else "observed"
        return FitConfig.model_validate(
            {**fields, "factors": tuple(factors), "not_applicable": {"*": tuple(not_applicable)}, "se": se}
        )

    def stage_key(self) -> dict[str, object]:
        """The IRT stage's key: the keys the section had before it embedded :class:`FitConfig` (old names), then
        every other fit setting that differs from its default."""
        key = stage_key(self, ("enabled", "model", "factors", "improve_steps", "drop", "se", "jackknife_groups"))
        key["groups"] = key.pop("jackknife_groups")
        key["prior"] = _prior_name(self.priors)
        key.pop("priors", None)
        return key


def _prior_name(priors: Priors) -> object:
    for name in ("weak", "none"):
        if priors == Priors.named(name):
            return name
    return asdict(priors)


class RobustSection(RobustSettings):
    """Robustness testbeds built from the corpus (or an RGB-format file) and run: ``robust run``'s settings
    (same keys) plus the testbeds, the build from the corpus (chunker, retriever, k) and the job's defaults."""

    enabled: bool = Field(
        default=True,
        description="build and run the robustness testbeds (built from the corpus they need the exam; from a data "
        "file they do not)",
    )
    data: str | None = None  # an RGB-format JSONL file instead of building from the corpus
    testbeds: list[str] = Field(default_factory=lambda: ["noise", "negative", "counterfactual"])
    llm: list[str] = Field(default_factory=lambda: ["offline/extractive"])
    noise_ratios: list[float] | None = Field(default_factory=lambda: [0.0, 0.2, 0.4, 0.6, 0.8])
    limit: int | None = Field(default=60, ge=1)  # questions per testbed at most (built and run); None: all
    # questions with fewer supporting passages are left out (0: at least 1 when built from the corpus, all kept
    # for an RGB-format `data` file); a built question keeps 5 positives at most
    min_positives: int = Field(default=0, ge=0, le=5)
    chunker: str | None = None  # which index finds the hard negatives (default: the first)
    retriever: str = Field(
        default="bm25",
        description="the retriever whose results on the chunker's index give a testbed built from the corpus its "
        "positives and hard negatives (unused with data)",
    )
    k: int = Field(
        default=30, ge=1, description="chunks retrieved per question when building from the corpus (unused with data)"
    )

    def run_settings(self) -> dict[str, object]:
        """The ``robust run`` settings of the section (its keys of :class:`RobustSettings`)."""
        return {name: getattr(self, name) for name in RobustSettings.model_fields}

    def build_key(self) -> dict[str, object]:
        """The key of the ``robust:build`` stage (the names as before the section embedded the run's settings)."""
        key: dict[str, object] = {name: getattr(self, name) for name in ("chunker", "retriever", "k", "seed", "lang")}
        key["n"] = self.limit
        if "min_positives" in self.model_fields_set:  # only when set, so earlier runs keep their stage keys
            key["min_positives"] = self.min_positives
        return key

    def testbed_key(self) -> dict[str, object]:
        """The key of a ``robust:<testbed>`` stage, less the testbed and the LLM options."""
        old = ("data", "llm", "noise_ratios", "docs", "limit", "lang", "seed")
        key = stage_key(self, old, skip=("min_positives", "chunker", "retriever", "k", "testbeds", "enabled"))
        key["llms"], key["n"] = key.pop("llm"), key.pop("limit")
        if "min_positives" in self.model_fields_set:
            key["min_positives"] = self.min_positives
        return key


class JudgeSection(JudgeSettings):
    """Free-text answers judged (off by default: LLM judges need an LLM): ``judge``'s settings (same keys;
    ``llm`` is the judge LLM) plus the QA triplets and the grid that answers them."""

    enabled: bool = Field(
        default=False,
        description="run the judge stage into judge/: QA triplets from the exam's chunking, answered in free text "
        "by the answer_llms x retrievers grid, scored by the metrics ([calibration] after it, given labels)",
    )
    n: int = Field(
        default=40, ge=1, description="QA triplets to generate for the judges (fewer when the chunks do not yield them)"
    )
    qa_llm: str = Field(
        default="offline", description="PROVIDER/MODEL that writes the QA triplets, or 'offline' (no LLM)"
    )
    answer_llms: list[str] = Field(
        default_factory=lambda: ["offline/extractive"],
        description="the LLMs that answer the triplets: an axis of the grid",
    )
    retrievers: list[str] = Field(
        default_factory=lambda: ["bm25"], description="the retrievers of the answering grid (ICL 0, one k)"
    )
    chunkers: list[str] | None = None  # default: the sweep's chunkers
    k: int | None = Field(default=None, ge=1)  # passages per answer (default: the sweep's first k)

    @field_validator("answer_llms", "retrievers", "chunkers")
    @classmethod
    def _no_repeats(cls, values: list[str] | None) -> list[str] | None:
        return no_repeats(values)  # the axes of the grid that answers, refused here rather than at the judge stage

    def judge_settings(self) -> dict[str, object]:
        """The ``judge`` settings of the section (its keys of :class:`JudgeSettings`)."""
        return {name: getattr(self, name) for name in JudgeSettings.model_fields}

    def stage_key(self) -> dict[str, object]:
        """The judge stage's key (the names as before the section embedded the judge's settings)."""
        old = ("enabled", "n", "qa_llm", "answer_llms", "retrievers", "chunkers", "k", "metrics", "llm")
        key = stage_key(self, old)
        key["judge_llm"] = key.pop("llm")
        return key


def stage_key(section: BaseModel, old: Sequence[str], skip: Sequence[str] = ()) -> dict[str, object]:
    """A stage's key from its section: the ``old`` keys always, every other setting (less ``skip``) only where it
    differs from the section's default, so a setting the section gained leaves earlier run folders' keys alone."""
    dump = section.model_dump(mode="json")
    defaults = type(section)().model_dump(mode="json")
    key: dict[str, object] = {name: dump[name] for name in old}
    for name, value in dump.items():
        if name not in key and name not in skip and value != defaults[name]:
            key[name] = value
    return key


class CalibrationSection(CalibrationConfig):
    """Human labels that correct the judges' means (PPI++): a ``ragrade judge calibrate`` config
    (:class:`~ragrade.judge.calibrate.CalibrationConfig`, same keys: ``human``, the labels JSONL from
    ``ragrade label``; ``level``; ``min_labels``); off without a labels file."""


class ReportSection(_Section):
    """The HTML report."""

    enabled: bool = Field(default=True, description="write report.html once the other stages are done")
    top: int = Field(default=5, ge=2)  # pipelines whose pairwise verdicts are shown
    title: str | None = Field(default=None, description="the report page's title (None: ragrade report)")


class JobConfig(_Section):
    """Everything ``ragrade run`` does, stage by stage."""

    name: str = Field(
        default="ragrade run", description="the job's name: recorded in manifest.json, shown on the report's job line"
    )
    out: str = Field(
        default="runs/latest",
        description="the run folder every stage writes into (a relative path in the file is read from its "
        "folder); ragrade run --out replaces it",
    )
    corpus: CorpusSection = Field(default_factory=CorpusSection)
    chunkers: list[ChunkerSection] = Field(default_factory=lambda: [ChunkerSection()])
    index: IndexSection = Field(default_factory=IndexSection)
    llm: LLMSection = Field(default_factory=LLMSection, validation_alias=AliasChoices("llm_options", "llm"))
    exam: ExamSection = Field(default_factory=ExamSection)
    sweep: SweepSection = Field(default_factory=SweepSection)
    irt: IRTSection = Field(default_factory=IRTSection)
    adaptive: AdaptiveSection = Field(default_factory=AdaptiveSection)
    robust: RobustSection = Field(default_factory=RobustSection)
    judge: JudgeSection = Field(default_factory=JudgeSection)
    calibration: CalibrationSection = Field(default_factory=CalibrationSection)
    report: ReportSection = Field(default_factory=ReportSection)

    @model_validator(mode="before")
    @classmethod
    def _old_spellings(cls, data: object) -> object:
        return upgrade_job_layer(rename_options_table(data, "llm", "job config"))

    @model_validator(mode="after")
    def _check(self) -> JobConfig:
        if not self.corpus.demo and not self.corpus.paths:
            raise ValueError("corpus: give paths = [...] or demo = true")
        labels = [c.label for c in self.chunkers]
        if not labels:
            raise ValueError("chunkers: at least one chunker is needed")
        if len(set(labels)) != len(labels):
            raise ValueError(f"chunkers: names must be unique, got {labels}")
        if self.calibration.human and not self.judge.enabled:
            raise ValueError("calibration: human labels calibrate the judges; set [judge] enabled = true")
        named = [self.exam.chunker, self.robust.chunker, *(self.sweep.chunkers or []), *(self.judge.chunkers or [])]
        for name in named:
            if name is not None and name not in labels:
                raise ValueError(f"unknown chunker '{name}'; defined: {', '.join(labels)}")
        return self

    def chunker(self, label: str | None) -> ChunkerSection:
        """The chunker named ``label`` (the first when None)."""
        if label is None:
            return self.chunkers[0]
        for c in self.chunkers:
            if c.label == label:
                return c
        raise ConfigError(f"unknown chunker '{label}'")


DEMO_CONFIG: dict[str, object] = {
    "name": "ragrade demo (offline baselines on the Python standard library's documentation)",
    "out": "runs/demo",
    # eight related packages (every document of them): retrieval has to tell similar documents apart, and every
    # topic gets twenty questions or more (the per-topic chart)
    "corpus": {"demo": True, "demo_topics": list(DEMO_TOPICS)},
    "chunkers": [
        {"strategy": "recursive", "size": 200, "overlap": 20},
        {"strategy": "sentence", "size": 120, "overlap": 0},
    ],
    # short stems (six words each side of the blank, the topic as subject): a question does not copy its
    # whole source sentence, so a retriever has to find the passage rather than match it verbatim
    "exam": {"llm": "offline", "n": 200, "seed": 0, "stem_window": 6, "stem_subject": "topic"},
    # k=1 gives every retriever the oracle's context budget (one passage); k=3 shows what more passages buy
    "sweep": {"retrievers": ["closed", "bm25", "dense", "hybrid", "oracle"], "icl": [0, 1, 2], "k": [1, 3]},
    "irt": {"model": "3pl", "factors": ["retriever", "chunker", "icl"], "improve_steps": 3},
    "robust": {"testbeds": ["noise", "negative", "counterfactual"], "limit": 40},
    # the free-text path with offline baselines: QA from the corpus, extractive answers, claims + exact match
    "judge": {
        "enabled": True,
        "n": 40,
        "retrievers": ["closed", "bm25", "dense", "oracle"],
        "chunkers": ["recursive-200"],
        "k": 3,
        "metrics": ["claims", "exact"],
        "llm": "offline/judge",
    },
    # after the full sweep, an adaptive rerun replaying its answers: how close it comes, at what share of requests
    "adaptive": {"enabled": True, "replay": True, "min_items": 20, "batch": 5},
}


def load_job_config(
    path: str | Path | None, overrides: Mapping[str, object] | None = None, base: Mapping[str, object] | None = None
) -> JobConfig:
    """Merge defaults < ``base`` (e.g. the demo) < the file at ``path`` < ``overrides``.

    Every relative path in the file (``out``, corpus paths, an exam, robustness data, human labels, an
    adaptive calibration, model files in LLM and embedder specs) is read relative to the file's folder;
    ``overrides`` (command-line flags) are taken as given.
    """
    where = str(path or "job config")
    file_layer = None
    if path is not None:  # old spellings renamed first: the file's key wins over the base's whatever its spelling
        file_layer = _resolve_paths(upgrade_job_layer(load_toml(path), where), Path(path).resolve().parent)
    return build_config(
        JobConfig, _upgraded(base, where), file_layer, _upgraded(overrides, where), source=str(path or "config")
    )


def _upgraded(layer: Mapping[str, object] | None, where: str) -> Mapping[str, object] | None:
    out = upgrade_job_layer(layer, where)
    return out if isinstance(out, Mapping) else None


def _resolve_paths(data: object, base: Path) -> dict[str, object]:
    """The file layer with every path field made absolute against ``base`` (the config file's folder)."""
    from ragrade.config_paths import resolve_embedder_spec, resolve_keys

    if not isinstance(data, dict):
        raise ConfigError("a job config is a TOML table")
    resolve_keys(data, ("out",), base)
    keys: tuple[str, ...]
    for section, keys in (
        ("corpus", ("paths",)),
        ("exam", ("path", "prompt_file", "system_prompt_file")),
        ("robust", ("data", "prompts")),
        ("calibration", ("human",)),
        ("adaptive", ("calibration",)),
    ):
        resolve_keys(data.get(section), keys, base)
    for section, keys in (
        ("exam", ("llm",)),
        ("sweep", ("llms", "transform_llm")),
        ("robust", ("llm", "judge")),
        ("judge", ("qa_llm", "answer_llms", "llm")),
    ):
        resolve_keys(data.get(section), keys, base, llm=True)
    judge = data.get("judge")
    prompts = judge.get("prompts") if isinstance(judge, dict) else None
    if isinstance(prompts, dict):  # metric -> prompt file
        resolve_keys(prompts, tuple(prompts), base)
    index = data.get("index")
    if isinstance(index, dict) and "embedder" in index:
        index["embedder"] = resolve_embedder_spec(index["embedder"], base)
    return data


def config_paths(cfg: JobConfig, out: str | Path) -> dict[str, str | list[str]]:
    """The job's resolved file paths (what ``run --check`` prints and the manifest records)."""
    paths: dict[str, str | list[str]] = {"out": str(Path(out).resolve())}
    if not cfg.corpus.demo:
        paths["corpus"] = list(cfg.corpus.paths)
    for key, value in (
        ("exam", cfg.exam.path),
        ("robust_data", cfg.robust.data),
        ("calibration_human", cfg.calibration.human),
        ("adaptive_calibration", cfg.adaptive.calibration),
    ):
        if value:
            paths[key] = value
    return paths


__all__ = [
    "DEMO_CONFIG",
    "ChunkerSection",
    "ExamSection",
    "IRTSection",
    "JobConfig",
    "JudgeSection",
    "ReportSection",
    "RobustSection",
    "config_paths",
    "load_job_config",
    "stage_key",
]

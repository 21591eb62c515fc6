"""The typed config of ``ragrade run``: one TOML file describing every stage.

Layers merge once: built-in defaults < the config file < CLI flags (``None``
means "not given"). The demo is this config with :data:`DEMO_CONFIG` as its
file layer.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator, model_validator

from ragrade.config import build_config, load_toml
from ragrade.corpus.demo import DEMO_TOPICS
from ragrade.errors import ConfigError
from ragrade.llm.options import LLMOptions, rename_options_table
from ragrade.run.adaptive_config import AdaptiveConfig
from ragrade.run.spec import GridConfig, GridRunSettings, no_repeats


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CorpusSection(_Section):
    """Where the documents come from: the built-in demo corpus or paths."""

    demo: bool = False
    demo_limit: int | None = Field(default=None, ge=1)
    demo_topics: list[str] | None = None  # standard-library modules/packages the demo corpus is built from
    paths: list[str] = Field(default_factory=list)
    text_field: str | None = None
    id_field: str | None = None
    drop_patterns: list[str] = Field(default_factory=list)


class ChunkerSection(_Section):
    """One chunking of the corpus; each gets its own index."""

    strategy: str = "recursive"
    size: int = Field(default=200, ge=8)
    overlap: int = Field(default=20, ge=0)
    name: str | None = None

    @property
    def label(self) -> str:
        """The chunker's name in results (the ``chunker`` factor)."""
        return self.name or f"{self.strategy}-{self.size}"

    @model_validator(mode="after")
    def _check(self) -> ChunkerSection:
        if self.overlap >= self.size:
            raise ValueError(f"overlap ({self.overlap}) must be smaller than size ({self.size})")
        return self


class IndexSection(_Section):
    """How chunks are indexed."""

    embedder: str = "minilm"
    headings: bool = False  # index each chunk with its heading path (page > section) before its text


#: ``[llm_options]`` (``[llm]``, its old name, read with a warning): how every LLM of the job is reached (the key
#: comes from OPENAI_API_KEY); ``ragrade --dry-run run`` sets its ``dry_run``, which stage keys leave out
#: (:meth:`~ragrade.llm.options.LLMOptions.stage_key`)
LLMSection = LLMOptions


class ExamSection(_Section):
    """Exam generation: an LLM spec, or ``offline`` for the offline cloze generator."""

    enabled: bool = True
    path: str | None = None  # use an existing exam file instead of generating one
    llm: str = "offline"
    n: int = Field(default=200, ge=1)
    seed: int = 0
    chunker: str | None = None  # which chunking to generate from (default: the first)
    topic_field: str | None = "topic"
    options: dict[str, Any] = Field(default_factory=dict)  # more ExamConfig fields (filters, oversample, ...)


class SweepSection(GridConfig, GridRunSettings):
    """The grid of pipelines that take the exam: the axes of a sweep file's ``[grid]`` (same keys, same
    defaults; ``chunkers`` default to every ``[[chunkers]]``) and its run settings, plus the job's own."""

    _table: ClassVar[str] = "[sweep]"
    enabled: bool = True
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
        key = self.model_dump()
        defaults = GridConfig().model_dump()
        for name in _GRID_AXES_ADDED:
            if key[name] == defaults[name]:
                del key[name]
        return key


_GRID_AXES_ADDED = ("prompts", "methods", "temperature", "max_tokens")


class AdaptiveSection(AdaptiveConfig):
    """Adaptive, IRT-driven evaluation of the sweep's grid into ``adaptive/`` (off by default).

    ``replay``: answer from the full sweep's responses instead of asking the LLMs (the demo's check of
    how close an adaptive run comes to the full grid; writes ``adaptive/comparison.json``).
    """

    replay: bool = False


class IRTSection(_Section):
    """Item Response Theory over the sweep's responses."""

    enabled: bool = True
    model: str = "3pl"
    factors: list[str] = Field(default_factory=lambda: ["retriever", "chunker", "icl"])
    improve_steps: int = Field(default=3, ge=0)
    drop: float = Field(default=0.1, gt=0, lt=1)
    prior: str = "weak"
    # SEs of the factor effects: "jackknife" also bias-corrects them (see `irt fit --se`); groups for it
    se: Literal["observed", "sandwich", "jackknife"] = "observed"
    groups: int = Field(default=20, ge=2)


class RobustSection(_Section):
    """Robustness testbeds built from the corpus (or an RGB-format file)."""

    enabled: bool = True
    data: str | None = None  # an RGB-format JSONL file instead of building from the corpus
    testbeds: list[str] = Field(default_factory=lambda: ["noise", "negative", "counterfactual"])
    llms: list[str] = Field(default_factory=lambda: ["offline/extractive"])
    noise_ratios: list[float] = Field(default_factory=lambda: [0.0, 0.2, 0.4, 0.6, 0.8])
    docs: int = Field(default=5, ge=1)
    n: int = Field(default=60, ge=1)  # questions per testbed at most (`robust run --limit`, `--max-questions`)
    # questions with fewer supporting passages are left out (`robust build/run --min-positives`); None: 1 when
    # built from the corpus, 0 (keep all) for an RGB-format `data` file
    min_positives: int | None = Field(default=None, ge=0, le=5)  # a built question keeps 5 positives at most
    lang: str = "en"
    seed: int = 0
    chunker: str | None = None  # which index finds the hard negatives (default: the first)
    retriever: str = "bm25"
    k: int = Field(default=30, ge=1)


class JudgeSection(_Section):
    """Free-text answers judged (off by default: LLM judges need an LLM)."""

    enabled: bool = False
    n: int = Field(default=40, ge=1)
    qa_llm: str = "offline"
    answer_llms: list[str] = Field(default_factory=lambda: ["offline/extractive"])
    retrievers: list[str] = Field(default_factory=lambda: ["bm25"])
    chunkers: list[str] | None = None  # default: the sweep's chunkers
    k: int | None = Field(default=None, ge=1)  # passages per answer (default: the sweep's first k)
    metrics: list[str] = Field(default_factory=lambda: ["bertscore", "exact"])
    judge_llm: str | None = None

    @field_validator("answer_llms", "retrievers", "chunkers")
    @classmethod
    def _no_repeats(cls, values: list[str] | None) -> list[str] | None:
        return no_repeats(values)  # the axes of the grid that answers, refused here rather than at the judge stage


class CalibrationSection(_Section):
    """Human labels that correct the judges' means (PPI++, ``ragrade judge calibrate``); off without a file."""

    human: str | None = None  # labels JSONL ({"id", "metric", "label"} per line), e.g. from `ragrade label`
    level: float = Field(default=0.95, gt=0.5, lt=1.0)
    min_labels: int = Field(default=10, ge=2)


class ReportSection(_Section):
    """The HTML report."""

    enabled: bool = True
    top: int = Field(default=5, ge=2)  # pipelines whose pairwise verdicts are shown
    title: str | None = None


class JobConfig(_Section):
    """Everything ``ragrade run`` does, stage by stage."""

    name: str = "ragrade run"
    out: str = "runs/latest"
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
    def _old_table_name(cls, data: object) -> object:
        return rename_options_table(data, "llm", "job config")

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
    "exam": {"llm": "offline", "n": 200, "seed": 0, "options": {"stem_window": 6, "stem_subject": "topic"}},
    # k=1 gives every retriever the oracle's context budget (one passage); k=3 shows what more passages buy
    "sweep": {"retrievers": ["closed", "bm25", "dense", "hybrid", "oracle"], "icl": [0, 1, 2], "k": [1, 3]},
    "irt": {"model": "3pl", "factors": ["retriever", "chunker", "icl"], "improve_steps": 3},
    "robust": {"testbeds": ["noise", "negative", "counterfactual"], "n": 40},
    # the free-text path with offline baselines: QA from the corpus, extractive answers, claims + exact match
    "judge": {
        "enabled": True,
        "n": 40,
        "retrievers": ["closed", "bm25", "dense", "oracle"],
        "chunkers": ["recursive-200"],
        "k": 3,
        "metrics": ["claims", "exact"],
        "judge_llm": "offline/judge",
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
    file_layer = _resolve_paths(load_toml(path), Path(path).resolve().parent) if path is not None else None
    return build_config(JobConfig, base, file_layer, overrides, source=str(path or "config"))


def _resolve_paths(data: dict[str, object], base: Path) -> dict[str, object]:
    """The file layer with every path field made absolute against ``base`` (the config file's folder)."""
    from ragrade.config_paths import resolve_embedder_spec, resolve_keys

    resolve_keys(data, ("out",), base)
    keys: tuple[str, ...]
    for section, keys in (
        ("corpus", ("paths",)),
        ("exam", ("path",)),
        ("robust", ("data",)),
        ("calibration", ("human",)),
        ("adaptive", ("calibration",)),
    ):
        resolve_keys(data.get(section), keys, base)
    for section, keys in (
        ("exam", ("llm",)),
        ("sweep", ("llms", "transform_llm")),
        ("robust", ("llms",)),
        ("judge", ("qa_llm", "answer_llms", "judge_llm")),
    ):
        resolve_keys(data.get(section), keys, base, llm=True)
    exam = data.get("exam")
    if isinstance(exam, dict):
        resolve_keys(exam.get("options"), ("prompt_file", "system_prompt_file"), base)
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


__all__ = ["DEMO_CONFIG", "ChunkerSection", "JobConfig", "ReportSection", "config_paths", "load_job_config"]

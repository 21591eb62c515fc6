"""Pipeline specs and sweep configuration: typed data, grid expansion, stable ids.

A pipeline is one combination of chunking (an index label), retriever, top-k,
LLM, in-context examples (ICL@n), prompt template and answer method. Its id is
readable and stable, e.g. ``llm=offline/student|retriever=bm25|k=3|icl=1|chunker=recursive-200``;
factors that do not apply are normalised (closed book: ``k=0``, ``chunker=none``;
oracle: ``k=1``, ``chunker=none``) so a grid never holds two identical pipelines.

Configuration layers merge as defaults < ``sweep.toml`` < command-line flags
(:func:`ragrade.config.build_config`).
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, ClassVar, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ragrade.config import build_config, deprecated, describe_validation, load_toml
from ragrade.errors import ConfigError
from ragrade.llm.gguf import llm_label
from ragrade.llm.options import LLMOptions
from ragrade.retrieval.base import retriever_caps
from ragrade.run.adaptive_config import AdaptiveConfig

NO_INDEX = "none"
NO_LLM = ("none", "-")  # the llm of a pipeline without an LLM (its external system answers, or nothing does)
EXTERNAL_PREFIX = "external:"
NO_TRANSFORM = "none"  # the untransformed query / no post-processing (a real level of the query and post factors)
NOT_APPLICABLE = "n/a"  # the query and post factors of pipelines that search no index (closed, oracle, external)

T = TypeVar("T")
AnswerMethod = Literal["auto", "loglikelihood", "generate"]
ScoreNorm = Literal["auto", "per_char", "per_token", "sum"]


class PipelineSpec(BaseModel):
    """One RAG pipeline variant (immutable; build with :meth:`normalised` to fill implied factors)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    llm: str = "offline/student"
    retriever: str = "bm25"
    k: int = Field(default=3, ge=0, le=1000)
    icl: int = Field(default=0, ge=0, le=16)
    chunker: str = NO_INDEX
    prompt: str = "default"
    method: AnswerMethod = "auto"
    query: str = NO_TRANSFORM  # query transform: none, hyde, multi-query, rm3
    post: str = NO_TRANSFORM  # passage post-processing chain, e.g. rerank+compress
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)  # None: the run's setting
    max_tokens: int | None = Field(default=None, ge=1, le=8192)  # None: the run's setting

    @field_validator("llm", "retriever", "chunker", "prompt", "query", "post")
    @classmethod
    def _no_separators(cls, v: str) -> str:
        v = v.strip()
        if not v or "|" in v or "=" in v:
            raise ValueError(f"'{v}' must be non-empty and contain neither '|' nor '='")
        return v

    @property
    def is_external(self) -> bool:
        """True when the retriever is an external system (``external:NAME``)."""
        return self.retriever.startswith(EXTERNAL_PREFIX)

    @property
    def needs_index(self) -> bool:
        """True when the retriever searches an index (not an external system, not one registered without)."""
        return not self.is_external and retriever_caps(self.retriever).needs_index

    @property
    def retrieves(self) -> bool:
        """False when the retriever never returns a passage (closed book), so "gold retrieved" does not apply."""
        return self.is_external or retriever_caps(self.retriever).retrieves

    @property
    def has_llm(self) -> bool:
        """False for a pipeline without an LLM (``llm`` is ``none`` or ``-``)."""
        return self.llm not in NO_LLM

    def normalised(self) -> PipelineSpec:
        """The same pipeline with factors that do not apply set to their canonical values.

        What applies comes from the retriever's registration (:func:`~ragrade.retrieval.base.retriever_caps`):
        one that searches no index has no chunker, query transform or post-processing, and a fixed ``k`` is set.
        """
        no_tx = {"query": NO_TRANSFORM, "post": NO_TRANSFORM}
        if self.is_external:
            return self.model_copy(update={"chunker": NO_INDEX, **no_tx})
        caps = retriever_caps(self.retriever)
        upd: dict[str, str | int] = {} if caps.needs_index else {"chunker": NO_INDEX, **no_tx}
        if caps.fixed_k is not None:
            upd["k"] = caps.fixed_k
        elif self.k == 0:
            raise ConfigError(f"retriever '{self.retriever}' needs k >= 1")
        return self.model_copy(update=upd) if upd else self

    @property
    def id(self) -> str:
        """The readable, stable pipeline id."""
        parts = [
            f"llm={llm_label(self.llm)}",
            f"retriever={self.retriever}",
            f"k={self.k}",
            f"icl={self.icl}",
            f"chunker={self.chunker}",
        ]
        if self.prompt != "default":
            parts.append(f"prompt={self.prompt}")
        if self.method != "auto":
            parts.append(f"method={self.method}")
        for name in ("query", "post"):
            if getattr(self, name) != NO_TRANSFORM:
                parts.append(f"{name}={getattr(self, name)}")
        for name in ("temperature", "max_tokens"):
            if getattr(self, name) is not None:
                parts.append(f"{name}={getattr(self, name)}")
        return "|".join(parts)

    def factors(self) -> dict[str, str | int | float]:
        """The factor columns of this pipeline (one column each in responses.parquet)."""
        return {
            "llm": llm_label(self.llm),
            "retriever": self.retriever,
            "k": self.k,
            "icl": self.icl,
            "chunker": self.chunker,
            "prompt": self.prompt,
            "query": self.query if self.needs_index else NOT_APPLICABLE,
            "post": self.post if self.needs_index else NOT_APPLICABLE,
            **{n: getattr(self, n) for n in ("temperature", "max_tokens") if getattr(self, n) is not None},
        }

    @property
    def transformed(self) -> bool:
        """True when the pipeline rewrites its query or post-processes its passages."""
        return self.query != NO_TRANSFORM or self.post != NO_TRANSFORM

    @classmethod
    def from_id(cls, pid: str) -> PipelineSpec:
        """Parse an id written by :attr:`id`."""
        fields: dict[str, str] = {}
        for part in pid.split("|"):
            key, sep, value = part.partition("=")
            if not sep:
                raise ConfigError(f"malformed pipeline id '{pid}'")
            fields[key] = value
        try:
            return cls.model_validate(fields)
        except ValueError as exc:
            raise ConfigError(f"malformed pipeline id '{pid}': {exc}") from exc


# The grid's one spelling: every axis is a list; an axis named by a countable noun takes the plural (llms,
# retrievers, chunkers, prompts, methods), the others keep their name (k, icl, query, post, temperature,
# max_tokens). The same table is ``[grid]`` of a sweep file and ``[sweep]`` of a ``ragrade run`` config.
DEPRECATED_AXES = {
    "llm": "llms",
    "retriever": "retrievers",
    "chunker": "chunkers",
    "prompt": "prompts",
    "method": "methods",
}


#: the axes of :class:`GridConfig`, in the order of its fields
GRID_AXES = (
    "llms",
    "retrievers",
    "k",
    "icl",
    "chunkers",
    "prompts",
    "methods",
    "query",
    "post",
    "temperature",
    "max_tokens",
)


def upgrade_grid_keys(table: object, where: str = "[grid]") -> None:
    """Rename the old spellings of grid axes in ``table`` (in place), with a deprecation line on stderr (once per
    process: :func:`ragrade.config.deprecated`).

    Read for one release: ``llm``, ``retriever``, ``chunker``, ``prompt`` and ``method`` (the singular keys of
    a sweep file's ``[grid]``). Both spellings of one axis in the same table are a ConfigError.
    """
    if not isinstance(table, dict):
        return
    old = [key for key in DEPRECATED_AXES if key in table]
    if not old:
        return
    both = [key for key in old if DEPRECATED_AXES[key] in table]
    if both:
        pairs = ", ".join(f"{key} and {DEPRECATED_AXES[key]}" for key in both)
        raise ConfigError(f"{where}: {pairs} name the same axis; keep only the second")
    for key in old:
        table[DEPRECATED_AXES[key]] = table.pop(key)
    renamed = ", ".join(f"{key} -> {DEPRECATED_AXES[key]}" for key in old)
    later = "the old ones are read until the next release"
    deprecated(f"{where}: deprecated key spelling ({renamed}); write the new keys ({later})")


def no_repeats(values: list[T] | None) -> list[T] | None:
    """``values`` unchanged; ValueError naming the first value listed twice (a config list is a set of levels:
    a repeat is a typo, never a second pipeline)."""
    seen: list[object] = []
    for value in values or ():
        if value in seen:
            raise ValueError(f"{value!r} is listed twice; list each value once")
        seen.append(value)
    return values


class GridConfig(BaseModel):
    """Axes of the pipeline grid; every combination becomes a pipeline (the grid's defaults live here only).

    A value listed twice on one axis is refused (``k = [3, 3]``, ``--k 3,3``), as a chunker named twice is.
    """

    model_config = ConfigDict(extra="forbid")

    llms: list[str] = Field(default_factory=lambda: ["offline/student"])
    retrievers: list[str] = Field(default_factory=lambda: ["closed", "bm25", "dense", "hybrid", "oracle"])
    k: list[Annotated[int, Field(ge=0, le=1000)]] = Field(default_factory=lambda: [3])
    icl: list[Annotated[int, Field(ge=0, le=16)]] = Field(default_factory=lambda: [0])
    chunkers: list[str] | None = None  # index labels (chunkings); default: every index
    prompts: list[str] = Field(default_factory=lambda: ["default"])  # "default" or names of [prompts] templates
    methods: list[AnswerMethod] = Field(default_factory=lambda: list[AnswerMethod](["auto"]))
    query: list[str] = Field(default_factory=lambda: [NO_TRANSFORM])  # query transforms: none, hyde, multi-query, rm3
    post: list[str] = Field(default_factory=lambda: [NO_TRANSFORM])  # post-processing chains, e.g. rerank+compress
    temperature: list[float | None] = Field(
        default_factory=lambda: list[float | None]([None]),
        description="sampling temperatures of answers by generation, an axis of the grid (a value other than None "
        "is in the pipeline's id); None: the run's one value ([answer] temperature for exam take, --temperature "
        "for qa answer)",
    )
    max_tokens: list[int | None] = Field(
        default_factory=lambda: list[int | None]([None]),
        description="reply budgets in tokens of answers by generation, an axis of the grid (a value other than None "
        "is in the pipeline's id); None: the run's one value ([answer] max_tokens for exam take, --max-tokens for "
        "qa answer)",
    )

    _table: ClassVar[str] = "[grid]"  # the table's name in deprecation messages

    @model_validator(mode="before")
    @classmethod
    def _old_spellings(cls, data: object) -> object:
        if isinstance(data, dict) and any(key in data for key in DEPRECATED_AXES):
            data = dict(data)
            upgrade_grid_keys(data, cls._table)
        return data

    @field_validator(*GRID_AXES)
    @classmethod
    def _no_repeats(cls, values: list[T] | None) -> list[T] | None:
        return no_repeats(values)


class GridRunSettings(BaseModel):
    """How a grid runs besides its axes: shared by a sweep file (top level) and a job's ``[sweep]``."""

    model_config = ConfigDict(extra="forbid")

    transform_llm: str | None = None  # the LLM of hyde, multi-query, llm-rerank, llm-compress
    transform_options: dict[str, dict[str, object]] = Field(default_factory=dict)  # transform name -> its options
    seed: int = 0
    icl_pool: int = Field(default=5, ge=1)  # questions held out as few-shot examples when any ICL > 0
    limit: int | None = Field(default=None, ge=1)  # take only the first N questions (after the hold-out)
    executor: Literal["local", "ray"] = "local"
    samples: bool = True  # write samples.jsonl: every request sent and its raw reply


class AnswerConfig(BaseModel):
    """How answers are chosen and scored."""

    model_config = ConfigDict(extra="forbid")

    # which log-likelihood normalisation decides `correct`; "auto": per_char for token log-probabilities
    # (length-penalised, as in the exam paper), sum for baselines whose scores are already per candidate
    score: ScoreNorm = "auto"
    target: Literal["text", "letter"] = "text"  # score the candidate text, or its letter after listing choices
    max_tokens: int = Field(default=16, ge=1, le=4096)  # generation budget for the letter
    temperature: float = Field(
        default=0.0,
        description="sampling temperature of a pipeline that answers by generation (a grid temperature replaces it)",
    )


class SweepConfig(GridRunSettings):
    """Everything ``ragrade exam take`` and ``ragrade qa answer`` need besides the questions (``sweep.toml``)."""

    grid: GridConfig = Field(default_factory=GridConfig)
    pipelines: list[PipelineSpec] | None = None  # explicit list; replaces the grid when given
    indexes: dict[str, str] = Field(default_factory=dict)  # chunker label -> index dir
    external: dict[str, str] = Field(default_factory=dict)  # name -> "module:function" or http(s) URL
    prompts: dict[str, str] = Field(default_factory=dict)  # prompt name -> template file
    answer: AnswerConfig = Field(default_factory=AnswerConfig)
    llm_options: LLMOptions = Field(default_factory=LLMOptions)  # the [llm_options] table: how LLMs are reached
    retriever_options: dict[str, object] = Field(default_factory=dict)  # keyword arguments of Index.retriever
    shard_size: int = Field(default=32, ge=1)
    parallel_shards: int = Field(
        default=2,
        ge=1,
        description="shards the local executor runs at once (for an in-process hf/ model, left unset, raised to "
        "fill its batches); the ray executor does not read it",
    )
    ray_address: str | None = None
    ray_workers: int | None = Field(default=None, ge=1)
    adaptive: AdaptiveConfig = Field(default_factory=AdaptiveConfig)  # the [adaptive] table

    @model_validator(mode="after")
    def _check(self) -> SweepConfig:
        for name, target in self.external.items():
            if not target.startswith(("http://", "https://")) and ":" not in target:
                raise ValueError(f"external '{name}': expected 'module:function' or an http(s) URL, got '{target}'")
        from ragrade.retrieval.transforms import check_transform_options

        check_transform_options(self.transform_options)  # ConfigError: every name and option, before any run
        return self


def expand_pipelines(cfg: SweepConfig) -> list[PipelineSpec]:
    """The pipelines of ``cfg`` (explicit list or grid), normalised, deduplicated, validated, in order."""
    labels = list(cfg.indexes)
    if cfg.pipelines is not None:
        raw = [
            p
            if p.chunker != NO_INDEX or not p.needs_index or len(labels) != 1
            else p.model_copy(update={"chunker": labels[0]})
            for p in cfg.pipelines
        ]
    else:
        g = cfg.grid
        chunkers = g.chunkers if g.chunkers is not None else (labels or [NO_INDEX])
        empty = [name for name in GRID_AXES if name != "chunkers" and not getattr(g, name)]
        if empty or not chunkers:
            name = empty[0] if empty else "chunkers"
            raise ConfigError(f"grid axis '{name}' is empty (= []): give it at least one value, or leave it out "
                              "for its default")  # fmt: skip
        raw = []
        axes = (g.llms, g.retrievers, g.k, g.icl, chunkers, g.prompts, g.methods, g.query, g.post, g.temperature)
        for llm, ret, k, icl, chunker, prompt, method, query, post, temp in itertools.product(*axes):
            for max_tokens in g.max_tokens:
                try:
                    spec = PipelineSpec(
                        llm=llm,
                        retriever=ret,
                        k=k,
                        icl=icl,
                        chunker=chunker,
                        prompt=prompt,
                        method=method,
                        query=query,
                        post=post,
                        temperature=temp,
                        max_tokens=max_tokens,
                    )
                except ValidationError as exc:
                    raise ConfigError(f"invalid pipeline: {describe_validation(exc)}") from exc
                raw.append(spec)
    _check_labels(spec.llm for spec in raw)
    out: list[PipelineSpec] = []
    seen: set[str] = set()
    for spec in raw:
        spec = spec.normalised()
        if spec.id in seen:
            continue
        seen.add(spec.id)
        _validate_spec(spec, cfg)
        out.append(spec)
    if not out:
        raise ConfigError("the sweep has no pipelines")
    return out


def _check_labels(llms: Iterable[str]) -> None:
    """ConfigError when two different LLM specs would get the same label (e.g. two ``model.gguf`` files)."""
    by_label: dict[str, set[str]] = {}
    for llm in llms:
        by_label.setdefault(llm_label(llm), set()).add(llm)
    for label, specs in by_label.items():
        if len(specs) > 1:
            raise ConfigError(
                f"the LLMs {', '.join(sorted(specs))} would all be named '{label}' in pipeline ids; "
                "give the model files distinct names (a symbolic link will do)"
            )


def _validate_spec(spec: PipelineSpec, cfg: SweepConfig) -> None:
    if spec.needs_index:
        if not cfg.indexes:
            raise ConfigError(f"retriever '{spec.retriever}' needs an index; give one with $indexes")
        if spec.chunker not in cfg.indexes:
            raise ConfigError(
                f"pipeline '{spec.id}' names index '{spec.chunker}', but the indexes are: {', '.join(cfg.indexes)}"
            )
    if spec.is_external:
        name = spec.retriever[len(EXTERNAL_PREFIX) :]
        if name not in cfg.external:
            raise ConfigError(f"external pipeline '{name}' is not defined; define it with $external {name}=TARGET")
    if spec.prompt != "default" and spec.prompt not in cfg.prompts:
        raise ConfigError(f"prompt '{spec.prompt}' is not defined; give its template file with $prompts")
    if spec.transformed:
        from ragrade.retrieval.transforms import check_transforms

        check_transforms(spec.query, spec.post, cfg.transform_llm is not None)


def load_sweep_file(path: str | Path) -> dict[str, object]:
    """Read ``sweep.toml`` into a config layer, every relative path resolved against the file's folder.

    Paths: ``[indexes]`` and ``[prompts]`` values, ``[adaptive] calibration``, ``[llm_options] replay_from``
    and model files in LLM specs (``[grid] llms``, ``transform_llm``, ``[[pipelines]] llm``); flags on the
    command line stay relative to the current directory (see :mod:`ragrade.config_paths`). The old
    spellings of grid axes are renamed here (:func:`upgrade_grid_keys`), before any layer is merged.
    """
    from ragrade.config_paths import resolve_keys

    path = Path(path)
    data = load_toml(path)
    base = path.resolve().parent
    for table in ("indexes", "prompts"):
        entries = data.get(table)
        if isinstance(entries, dict):
            resolve_keys(entries, tuple(entries), base)
    resolve_keys(data.get("adaptive"), ("calibration",), base)
    resolve_keys(data.get("llm_options"), ("replay_from",), base)
    upgrade_grid_keys(data.get("grid"), f"{path}: [grid]")
    resolve_keys(data.get("grid"), ("llms",), base, llm=True)
    resolve_keys(data, ("transform_llm",), base, llm=True)
    for pipeline in data.get("pipelines") or []:
        resolve_keys(pipeline, ("llm",), base, llm=True)
    return data


def build_sweep_config(*layers: Mapping[str, object] | None) -> SweepConfig:
    """Merge layers (defaults < file < flags) into a validated :class:`SweepConfig`."""
    return build_config(SweepConfig, *layers, source="sweep config")


def fingerprint(obj: object) -> str:
    """A short sha256 of ``obj``'s canonical JSON."""
    blob = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


__all__ = [
    "EXTERNAL_PREFIX",
    "GRID_AXES",
    "NOT_APPLICABLE",
    "NO_INDEX",
    "NO_LLM",
    "NO_TRANSFORM",
    "AnswerConfig",
    "GridConfig",
    "GridRunSettings",
    "PipelineSpec",
    "SweepConfig",
    "build_sweep_config",
    "expand_pipelines",
    "fingerprint",
    "llm_label",
    "load_sweep_file",
    "no_repeats",
    "upgrade_grid_keys",
]

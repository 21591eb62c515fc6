"""What the commands that run a pipeline grid share: their options and the sweep config they build.

``ragrade exam take`` (multiple choice) and ``ragrade qa answer`` (free text)
run the same grid of pipelines (LLM x retriever x k x ICL x chunker x prompt)
configured the same way: a ``sweep.toml`` overridden by flags. The options
both offer are declared once here, as the fields of :class:`GridFlags` (a
command's own options extend it); :func:`with_flags` offers them on a command,
which receives one typed object and builds its settings with
:meth:`GridFlags.sweep_config`.

Only typer is imported at module level (``ragrade --help`` must stay light).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ragrade.cli.common import split_list, split_numbers
from ragrade.cli.flags import with_flags
from ragrade.cli.llm_flags import LLMFlags
from ragrade.errors import ConfigError

if TYPE_CHECKING:
    import pandas as pd

    from ragrade.run.spec import SweepConfig

# --- options both grid commands offer ------------------------------------------------------------------------------
RunDirOption = Annotated[
    Path, typer.Option("--out", "-o", help="Run directory (created; rerun the same command to resume).")
]
ConfigOption = Annotated[Path | None, typer.Option("--config", "-c", help="sweep.toml (grid, indexes, prompts, ...).")]
IndexOption = Annotated[
    list[str] | None, typer.Option("--index", help="[LABEL=]INDEX_DIR, repeatable (one per chunking).")
]
RetrieversOption = Annotated[
    str | None,
    typer.Option("--retrievers", help="Comma list: closed,bm25,dense,hybrid,rerank(hybrid),oracle."),
]
IclOption = Annotated[str | None, typer.Option("--icl", help="Comma list of few-shot counts, e.g. 0,1,2.")]
KOption = Annotated[str | None, typer.Option("--k", help="Comma list of top-k values.")]
ChunkersOption = Annotated[str | None, typer.Option("--chunkers", help="Comma list of index labels (default: all).")]
ExternalOption = Annotated[
    list[str] | None,
    typer.Option(
        "--external",
        help="NAME=module:function or NAME=http://... (module:function imports and RUNS that Python code; "
        "the current folder is on sys.path).",
    ),
]
SeedOption = Annotated[int | None, typer.Option("--seed", help="Seed of the ICL hold-out and example choice.")]
IclPoolOption = Annotated[
    int | None, typer.Option("--icl-pool", min=0, help="Questions held out as few-shot examples.")
]
LimitOption = Annotated[int | None, typer.Option("--limit", min=1, help="Only the first N evaluated questions.")]
ShardSizeOption = Annotated[int | None, typer.Option("--shard-size", min=1, help="Questions per work unit.")]
ExecutorOption = Annotated[str | None, typer.Option("--executor", help="local (default) or ray.")]
LlmOption = Annotated[str | None, typer.Option("--llm", help="Comma list of PROVIDER/MODEL (e.g. offline/student).")]
PromptOption = Annotated[list[str] | None, typer.Option("--prompt", help="[NAME=]FILE prompt template, repeatable.")]
MaxFailedOption = Annotated[
    float | None,
    typer.Option(
        "--max-failed",
        help="Share of failed LLM requests a pipeline may have before the command exits with code 3 (default 0.05).",
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")]
QueryOption = Annotated[
    str | None, typer.Option("--query", help="Comma list of query transforms: none, hyde, multi-query, rm3.")
]
PostOption = Annotated[
    str | None,
    typer.Option(
        "--post",
        help="Comma list of passage post-processing chains, each joined by '+' "
        "(rerank, llm-rerank, mmr, threshold, compress, llm-compress), e.g. none,mmr,rerank+compress.",
    ),
]
TransformLlmOption = Annotated[
    str | None,
    typer.Option("--transform-llm", help="PROVIDER/MODEL for hyde, multi-query, llm-rerank and llm-compress."),
]


# --- flags -> config layer -----------------------------------------------------------------------------------------
def parse_pairs(values: list[str] | None, option: str, *, default_label: bool = False) -> dict[str, str] | None:
    """Parse repeated ``NAME=VALUE`` options; None when none are given.

    With ``default_label`` a bare ``VALUE`` is named after its folder/file
    stem. A name given twice or an empty side is a ConfigError.
    """
    if not values:
        return None
    out: dict[str, str] = {}
    for raw in values:
        name, sep, value = raw.partition("=")
        if not sep:
            if not default_label:
                raise ConfigError(f"{option} expects NAME=VALUE, got '{raw}'")
            value = raw
            name = Path(raw.rstrip("/")).stem or raw
        name, value = name.strip(), value.strip()
        if not name or not value:
            raise ConfigError(f"{option} expects NAME=VALUE, got '{raw}'")
        if name in out:
            raise ConfigError(f"{option}: the name '{name}' is given twice")
        out[name] = value
    return out


def _prune(table: Mapping[str, object]) -> dict[str, object]:
    """Drop None values (not given) recursively, and tables left empty."""
    out = {k: _prune(v) if isinstance(v, dict) else v for k, v in table.items() if v is not None}
    return {k: v for k, v in out.items() if v != {}}


@dataclass(frozen=True)
class GridFlags(LLMFlags):
    """The options every grid command offers, as typed values (``None``: not given, never overrides the file).

    A command declares them with :func:`with_flags`; :meth:`layer` turns them into the config layer of
    :class:`~ragrade.run.spec.SweepConfig` field by field, and :meth:`sweep_config` merges it over ``--config``.
    """

    config: ConfigOption = None
    index: IndexOption = None
    retrievers: RetrieversOption = None
    llm: LlmOption = None
    icl: IclOption = None
    k: KOption = None
    chunkers: ChunkersOption = None
    prompt: PromptOption = None
    query: QueryOption = None
    post: PostOption = None
    transform_llm: TransformLlmOption = None
    external: ExternalOption = None
    seed: SeedOption = None
    icl_pool: IclPoolOption = None
    limit: LimitOption = None
    shard_size: ShardSizeOption = None
    executor: ExecutorOption = None
    max_failed: MaxFailedOption = None  # read by the command, after the run: not a setting of the run
    as_json: JsonOption = False

    def layer(self) -> dict[str, object]:
        """The config layer of these flags (the grid axes in the one spelling of :class:`GridConfig`)."""
        prompts = parse_pairs(self.prompt, "--prompt", default_label=True)
        grid = {
            "llms": split_list(self.llm, "--llm"),
            "retrievers": split_list(self.retrievers, "--retrievers"),
            "k": split_numbers(self.k, "--k", int),
            "icl": split_numbers(self.icl, "--icl", int),
            "chunkers": split_list(self.chunkers, "--chunkers"),
            "prompts": list(prompts) if prompts else None,
            "query": split_list(self.query, "--query"),
            "post": split_list(self.post, "--post"),
        }
        layer = _prune(
            {
                "grid": grid,
                "indexes": parse_pairs(self.index, "--index", default_label=True),
                "external": parse_pairs(self.external, "--external"),
                "prompts": {k: str(Path(v).resolve()) for k, v in prompts.items()} if prompts else None,
                "llm_options": self.llm_layer(),  # and `ragrade --dry-run`
                "transform_llm": self.transform_llm,
                "seed": self.seed,
                "icl_pool": self.icl_pool,
                "limit": self.limit,
                "shard_size": self.shard_size,
                "executor": self.executor,
            }
        )
        return layer

    def sweep_config(self) -> SweepConfig:
        """The command's settings: the ``--config`` sweep file (if any) overridden by these flags."""
        from ragrade.run.spec import build_sweep_config, load_sweep_file

        file_layer = load_sweep_file(self.config) if self.config else {}
        flags = self.layer()
        external_pipelines(flags, file_layer)
        return build_sweep_config(file_layer, flags)


def _names(table: object) -> list[str]:
    """The keys of a table (none when it is missing or not a table: the config's validation reports that)."""
    return list(table) if isinstance(table, dict) else []


def external_pipelines(layer: dict[str, object], file_layer: Mapping[str, object]) -> None:
    """Add an ``external:NAME`` retriever to the grid for every external system given by flag or file."""
    names = _names(file_layer.get("external")) + _names(layer.get("external"))
    if not names:
        return
    grid = layer.get("grid")
    if not isinstance(grid, dict):
        grid = layer["grid"] = {}
    file_grid = file_layer.get("grid")
    base = grid.get("retrievers") or (file_grid.get("retrievers") if isinstance(file_grid, dict) else None) or []
    added = [r for r in dict.fromkeys(f"external:{n}" for n in names) if r not in base]
    grid["retrievers"] = [*base, *added]  # the list given kept as it is: a value listed twice is refused


def check_grid_failures(
    rows: pd.DataFrame | Sequence[Mapping[str, object]],
    max_failed: float | None,
    resume: str | None = None,
    *,
    backends_only: bool = False,
) -> None:
    """Exit 2/3 (see :mod:`ragrade.llm.failures`) when the grid's failed requests are beyond the threshold.

    ``rows``: a DataFrame or dict rows with ``pipeline``, ``llm`` and ``error``; ``resume``: how to resume;
    ``backends_only``: exit 2 only, for a backend declared unusable.
    """
    from ragrade.llm import failures

    failures.check_grid_failures(rows, max_failed, resume, backends_only=backends_only)


__all__ = [
    "GridFlags",
    "PostOption",
    "QueryOption",
    "TransformLlmOption",
    "check_grid_failures",
    "external_pipelines",
    "parse_pairs",
    "with_flags",
]

"""What the commands that run a pipeline grid share: their options and the sweep config they build.

``ragrade exam take`` (multiple choice) and ``ragrade qa answer`` (free text)
run the same grid of pipelines (LLM x retriever x k x ICL x chunker x prompt)
configured the same way: a ``sweep.toml`` overridden by flags. The options
both offer are declared once here (``Annotated`` aliases); a command reads
them back with :func:`grid_config` from its parsed parameters.

Only typer is imported at module level (``ragrade --help`` must stay light).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ragrade.cli.common import dry_run_requested, split_list
from ragrade.errors import ConfigError

if TYPE_CHECKING:
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
LlmBaseUrlOption = Annotated[
    str | None, typer.Option("--llm-base-url", help="Base URL of an OpenAI-compatible server.")
]
ConcurrencyOption = Annotated[int | None, typer.Option("--concurrency", min=1, help="LLM requests in flight.")]
NoCacheOption = Annotated[bool, typer.Option("--no-cache", help="Do not use the LLM response cache.")]
TimeoutOption = Annotated[
    float | None, typer.Option("--timeout", help="Seconds per LLM request attempt (default 60).")
]
MaxRetriesOption = Annotated[
    int | None,
    typer.Option("--max-retries", help="Retries of a failed LLM request (default 5); then it is missing."),
]
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


def parse_ints(value: str | None, option: str) -> list[int] | None:
    """Parse a comma list of integers; None when not given."""
    items = split_list(value, option)
    if items is None:
        return None
    try:
        return [int(v) for v in items]
    except ValueError as exc:
        raise ConfigError(f"{option} expects integers, got '{value}'") from exc


def _prune(value: Any) -> Any:
    """Drop None values (not given) recursively, and tables left empty."""
    if isinstance(value, dict):
        out = {k: _prune(v) for k, v in value.items() if v is not None}
        return {k: v for k, v in out.items() if v != {}}
    return value


def flag_layer(params: Mapping[str, Any]) -> dict[str, Any]:
    """The config layer of the grid flags in ``params`` (by parameter name; absent or None = not given)."""
    kw = {k: v for k, v in params.items() if v is not None}
    grid = {
        "llm": split_list(kw.get("llm"), "--llm"),
        "retriever": split_list(kw.get("retrievers"), "--retrievers"),
        "k": parse_ints(kw.get("k"), "--k"),
        "icl": parse_ints(kw.get("icl"), "--icl"),
        "chunker": split_list(kw.get("chunkers"), "--chunkers"),
        "method": split_list(kw.get("method"), "--method"),
        "query": split_list(kw.get("query"), "--query"),
        "post": split_list(kw.get("post"), "--post"),
    }
    prompts = parse_pairs(kw.get("prompt"), "--prompt", default_label=True)
    if prompts:
        grid["prompt"] = list(prompts)
    llm_options = {
        "base_url": kw.get("llm_base_url"),
        "concurrency": kw.get("concurrency"),
        "cache": False if kw.get("no_cache") else None,
        "timeout": kw.get("timeout"),
        "max_retries": kw.get("max_retries"),
        "dry_run": dry_run_requested() or None,  # `ragrade --dry-run`: shipped to every worker with the options
    }
    return _prune(
        {
            "grid": grid,
            "indexes": parse_pairs(kw.get("index"), "--index", default_label=True),
            "external": parse_pairs(kw.get("external"), "--external"),
            "prompts": {k: str(Path(v).resolve()) for k, v in prompts.items()} if prompts else None,
            "answer": {"score": kw.get("score"), "target": kw.get("target")},
            "llm_options": llm_options,
            "transform_llm": kw.get("transform_llm"),
            "samples": False if kw.get("no_samples") else None,
            **{
                key: kw.get(key)
                for key in ("seed", "icl_pool", "limit", "shard_size", "executor", "ray_address", "ray_workers")
            },
        }
    )


def external_pipelines(layer: dict[str, Any], file_layer: Mapping[str, Any]) -> None:
    """Add an ``external:NAME`` retriever to the grid for every external system given by flag or file."""
    names = list((file_layer.get("external") or {}).keys()) + list((layer.get("external") or {}).keys())
    if not names:
        return
    grid = layer.setdefault("grid", {})
    base = grid.get("retriever") or (file_layer.get("grid") or {}).get("retriever")
    if base is None:
        base = [f"external:{n}" for n in names]
    grid["retriever"] = list(dict.fromkeys([*base, *(f"external:{n}" for n in names)]))


def grid_config(params: Mapping[str, Any]) -> SweepConfig:
    """The sweep config of a grid command: ``params["config"]`` (a sweep.toml) overridden by the flags.

    ``params`` are the command's parsed parameters (``typer.Context.params``);
    the flags are read by their parameter names (see :func:`flag_layer`), so
    a flag the command does not offer counts as not given.
    """
    from ragrade.run.spec import build_sweep_config, load_sweep_file

    config = params.get("config")
    file_layer = load_sweep_file(config) if config else {}
    flags = flag_layer(params)
    external_pipelines(flags, file_layer)
    return build_sweep_config(file_layer, flags)


def check_grid_failures(rows: Any, max_failed: float | None, resume: str | None = None) -> None:
    """Exit 2/3 (see :mod:`ragrade.llm.failures`) when the grid's failed requests are beyond the threshold.

    ``rows``: a DataFrame or dict rows with ``pipeline``, ``llm`` and ``error``; ``resume``: how to resume.
    """
    from ragrade.llm import failures

    failures.check_grid_failures(rows, max_failed, resume)


__all__ = [
    "PostOption",
    "QueryOption",
    "TransformLlmOption",
    "check_grid_failures",
    "external_pipelines",
    "flag_layer",
    "grid_config",
    "parse_ints",
    "parse_pairs",
]

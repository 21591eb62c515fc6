"""The documentation's reference pages, written from the code at build time (never copied by hand).

Each ``*_page`` function returns one page's Markdown: the command line from the Typer app, the job config
from its settings models, the files from the constants that write them, and the Python API from the names
``ragrade`` exports. ``scripts/docs/hooks.py`` adds them to the MkDocs build; ``tests/docs`` checks that they
cover every verb, flag and key the code has.
"""

from __future__ import annotations

import dataclasses
import inspect
import io
import tokenize
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

#: reference pages: path under docs/ -> (title, page function name)
PAGES = {
    "reference/cli.md": "cli_page",
    "reference/config.md": "config_page",
    "reference/files.md": "files_page",
    "reference/api.md": "api_page",
}


def _cell(text: object) -> str:
    """One Markdown table cell: one line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _code(text: object) -> str:
    value = str(text)
    return f"`` {value} ``" if "`" in value else f"`{value}`"


# -- command line -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Flag:
    """One option or argument of a verb as ``--help`` shows it."""

    names: tuple[str, ...]  # ("--out", "-o"), or ("PATHS",) for an argument
    kind: str  # "option" or "argument"
    type: str
    default: str
    required: bool
    help: str
    panel: str


@dataclass(frozen=True)
class Verb:
    """One command of ``ragrade`` (``("exam", "take")``) with its help and flags."""

    path: tuple[str, ...]
    help: str
    flags: tuple[Flag, ...]
    is_group: bool


def _root_command() -> Any:
    import typer.main

    from ragrade.cli.app import app

    return typer.main.get_command(app)


def _context(command: Any) -> Any:
    try:
        from typer._click import Context
    except ImportError:  # pragma: no cover - older typer on click
        from click import Context  # type: ignore[no-redef,assignment,import-not-found,unused-ignore]
    return Context(command, info_name=command.name)


def _default(param: Any) -> str:
    default = param.default
    if default is None or param.required or callable(default) or default is False or repr(default) == "Sentinel.UNSET":
        return ""
    if isinstance(default, (list, tuple)):
        return ",".join(map(str, default)) if default else ""
    return str(default)


def _flag(param: Any, ctx: Any) -> Flag:
    argument = type(param).__name__.endswith("Argument")
    names = (param.name.upper(),) if argument else (*param.opts, *param.secondary_opts)
    try:
        kind_name = str(param.display_type(ctx)).strip("<>")
    except (TypeError, AttributeError):  # pragma: no cover - another typer
        kind_name = ""
    return Flag(
        names=tuple(names),
        kind="argument" if argument else "option",
        type=kind_name,
        default=_default(param),
        required=bool(param.required),
        help=param.help or "",
        panel=param.rich_help_panel or "",
    )


def walk_verbs(command: Any = None, path: tuple[str, ...] = ()) -> Iterator[Verb]:
    """Every visible command of the ``ragrade`` app (groups too), depth first, in ``--help`` order."""
    command = command if command is not None else _root_command()
    ctx = _context(command)
    flags = tuple(_flag(p, ctx) for p in command.params if not getattr(p, "hidden", False))
    subcommands = getattr(command, "commands", None)
    yield Verb(path=path, help=inspect.cleandoc(command.help or ""), flags=flags, is_group=subcommands is not None)
    for name in command.list_commands(ctx) if subcommands is not None else ():
        sub = command.get_command(ctx, name)
        if sub is not None and not sub.hidden:
            yield from walk_verbs(sub, (*path, name))


def _verb_section(verb: Verb) -> list[str]:
    title = " ".join(("ragrade", *verb.path))
    out = [f"{'##' if len(verb.path) <= 1 else '###'} {title}", ""]
    if verb.help:
        out += [verb.help.replace("\b\n", ""), ""]
    if not verb.flags:
        return out
    out += ["| flag | type | default | meaning |", "| --- | --- | --- | --- |"]
    for f in verb.flags:
        names = ", ".join(_code(n) for n in f.names)
        if f.required:
            names += " (required)"
        help_text = f"{f.panel}: {f.help}" if f.panel else f.help
        default = _code(f.default) if f.default else ""
        out.append(f"| {names} | {_cell(f.type)} | {_cell(default)} | {_cell(help_text)} |")
    return [*out, ""]


def cli_page() -> str:
    """Every verb and flag of ``ragrade``, from the Typer app."""
    out = [
        "# Command line",
        "",
        "Every verb and flag of `ragrade`, written from the command-line app when this site was built. "
        "`ragrade VERB --help` prints the same. Flags left unset take the value of the verb's `--config` file, "
        "else the built-in default (a blank default here means one of those decides).",
        "",
    ]
    for verb in walk_verbs():
        out += _verb_section(verb)
    return "\n".join(out)


# -- configuration ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Key:
    """One key of a config file's table."""

    table: str  # "[exam]", "[[chunkers]]", "" for the top level
    name: str
    type: str
    default: str
    meaning: str
    table_doc: str = ""


def _type_text(annotation: object) -> str:
    if annotation is None or annotation is type(None):
        return "none"
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type_text(args[0])
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_text(a) for a in args)
    if origin is not None:
        name = getattr(origin, "__name__", str(origin))
        inner = ", ".join("..." if a is Ellipsis else _type_text(a) for a in args)
        return f"{name}[{inner}]" if args else name
    if isinstance(annotation, type):
        if issubclass(annotation, BaseModel):
            return "table"
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def _toml(value: object) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace('"', '\\"') + '"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + "}"
    if hasattr(value, "__dataclass_fields__"):
        return type(value).__name__
    return str(value)


def _comments(model: type[BaseModel]) -> dict[str, str]:
    """Field name -> the comment on the line that declares it, over the model's classes (base classes first)."""
    found: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        if not (isinstance(cls, type) and issubclass(cls, BaseModel)) or cls is BaseModel:
            continue
        try:
            source = inspect.cleandoc("\n" + inspect.getsource(cls))
        except (OSError, TypeError):
            continue
        names: dict[int, str] = {}
        comments: dict[int, str] = {}
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.NAME and tok.start[1] == 4 and tok.start[0] not in names:
                names[tok.start[0]] = tok.string
            elif tok.type == tokenize.COMMENT:
                comments[tok.start[0]] = tok.string.lstrip("#").strip()
        for line, name in names.items():
            if line in comments and name in inspect.get_annotations(cls):
                found[name] = comments[line]
    return found


def _is_table(kind: object) -> bool:
    return isinstance(kind, type) and (issubclass(kind, BaseModel) or dataclasses.is_dataclass(kind))


def _model_of(annotation: object) -> tuple[type | None, bool]:
    """The settings model (or dataclass) a field holds, and whether it is a list of them (an array of tables)."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (list, tuple) and args and _is_table(args[0]):
        return typing.cast(type, args[0]), True
    if _is_table(annotation):
        return typing.cast(type, annotation), False
    return None, False


def _dataclass_keys(kind: type, table: str, value: object) -> Iterator[Key]:
    for f in dataclasses.fields(kind):
        default = getattr(value, f.name) if value is not None else f.default
        doc = inspect.getdoc(kind) or ""
        meaning = str(f.metadata.get("description", ""))  # field(metadata={"description": ...})
        yield Key(
            table=table, name=f.name, type=_type_text(f.type), default=_toml(default), meaning=meaning, table_doc=doc
        )


def _field_default(field: FieldInfo) -> object:
    if field.default_factory is not None:
        return field.default_factory()  # type: ignore[call-arg]
    return field.default


def walk_keys(model: type[BaseModel], table: str = "", defaults: BaseModel | None = None) -> Iterator[Key]:
    """Every key of ``model`` and of the tables nested in it, as a config file spells them.

    ``defaults``: the instance a nested table defaults to (its values, not its class's, are the defaults).
    """
    comments = _comments(model)
    nested: list[tuple[str, type[BaseModel], bool, object]] = []
    decided = getattr(model, "DECIDED_BY_JOB", {})  # keys a job refuses because it decides them itself
    for name, field in model.model_fields.items():
        if name in decided:
            continue
        spelled = _spelling(field, name)
        sub, many = _model_of(field.annotation)
        value = getattr(defaults, name) if defaults is not None else _field_default(field)
        if sub is not None:
            nested.append((spelled, sub, many, value))
            continue
        yield Key(
            table=table,
            name=spelled,
            type=_type_text(field.annotation),
            default="(required)" if value is PydanticUndefined else _toml(value),
            meaning=field.description or comments.get(name, ""),
            table_doc=inspect.getdoc(model) or "",
        )
    for spelled, sub, many, value in nested:
        inner = f"{table.strip('[]')}.{spelled}" if table else spelled
        where = f"[[{inner}]]" if many else f"[{inner}]"
        if issubclass(sub, BaseModel):
            yield from walk_keys(sub, where, value if isinstance(value, BaseModel) else None)
        else:
            yield from _dataclass_keys(sub, where, value if dataclasses.is_dataclass(value) else None)


def _spelling(field: FieldInfo, name: str) -> str:
    """The key a file uses: the first alias of a field read under another name (``llm_options`` for ``llm``)."""
    alias = field.validation_alias
    choices = getattr(alias, "choices", None)
    if choices:
        return str(choices[0])
    return name


#: the verb whose flags a table's keys mirror (a key without a meaning of its own takes its flag's help)
JOB_TABLE_VERBS: dict[str, tuple[str, ...]] = {
    "[corpus]": ("corpus",),
    "[[chunkers]]": ("chunk",),
    "[index]": ("index",),
    "[llm_options]": ("exam", "take"),
    "[exam]": ("exam", "generate"),
    "[sweep]": ("exam", "take"),
    "[irt]": ("irt", "fit"),
    "[adaptive]": ("exam", "take"),
    "[robust]": ("robust", "run"),
    "[judge]": ("judge", "score"),
    "[calibration]": ("judge", "calibrate"),
}
SWEEP_TABLE_VERBS: dict[str, tuple[str, ...]] = {
    "": ("exam", "take"),
    "[grid]": ("exam", "take"),
    "[answer]": ("exam", "take"),
    "[adaptive]": ("exam", "take"),
    "[llm_options]": ("exam", "take"),
}


def _doc_text(doc: str) -> str:
    """A docstring as Markdown prose: reST roles and double backticks reduced to inline code."""
    import re

    text = re.sub(r":[a-z]+:`~?([^`]+)`", lambda m: f"`{m.group(1).rsplit('.', 1)[-1]}`", doc)
    return text.replace("``", "`")


def _flag_helps() -> dict[tuple[str, ...], dict[str, str]]:
    """Verb -> flag spelled as a key (``--max-rounds`` -> ``max_rounds``) -> its help."""
    out: dict[tuple[str, ...], dict[str, str]] = {}
    for verb in walk_verbs():
        helps: dict[str, str] = {}
        for flag in verb.flags:
            for name in flag.names:
                if name.startswith("--") and flag.help:
                    helps.setdefault(name[2:].replace("-", "_"), flag.help)
        out[verb.path] = helps
    return out


def _meaning(key: Key, verbs: dict[str, tuple[str, ...]], helps: dict[tuple[str, ...], dict[str, str]]) -> str:
    if key.meaning:
        return key.meaning
    verb = verbs.get(key.table)
    if verb is None:
        return ""
    names = (key.name, key.name.rstrip("s"), f"no_{key.name}")
    for name in names:
        text = helps.get(verb, {}).get(name)
        if text:
            flag = "--" + name.replace("_", "-")
            return f"As `ragrade {' '.join(verb)} {flag}`: {text}"
    return ""


def _key_tables(keys: list[Key], verbs: dict[str, tuple[str, ...]]) -> list[str]:
    helps = _flag_helps()
    out: list[str] = []
    table = None
    for key in keys:
        if key.table != table:
            table = key.table
            out += ["", f"### {_code(table) if table else 'top level'}", ""]
            if key.table_doc and table:
                out += [_doc_text(key.table_doc), ""]
            out += ["| key | type | default | meaning |", "| --- | --- | --- | --- |"]
        default = _code(key.default) if key.default else ""
        meaning = _meaning(key, verbs, helps)
        out.append(f"| `{key.name}` | {_cell(key.type)} | {_cell(default)} | {_cell(meaning)} |")
    return out


def job_keys() -> list[Key]:
    """Every key of a ``ragrade run`` config."""
    from ragrade.job.config import JobConfig

    return list(walk_keys(JobConfig))


def sweep_keys() -> list[Key]:
    """Every key of a sweep file (``exam take --config``, ``qa answer --config``)."""
    from ragrade.run.spec import SweepConfig

    return list(walk_keys(SweepConfig))


def config_page() -> str:
    """Every key of the job config and of a sweep file, with type, default and meaning, from the models."""
    out = [
        "# Configuration files",
        "",
        "Written from the settings models when this site was built. Layers merge once: built-in defaults < the "
        "file < command-line flags. Relative paths in a file are read from the file's folder. An unknown key is "
        "an error naming the closest valid one; `ragrade run --check CONFIG` validates a whole job and prints "
        "its plan. A blank meaning means the model declares none; the key's stage verb's `--help` describes the "
        "flag of the same name.",
        "",
        "## Job config (`ragrade run CONFIG.toml`)",
        "",
        "A stage's table takes that stage's own settings (the same keys as its verb's config) plus the job's.",
    ]
    out += _key_tables(job_keys(), JOB_TABLE_VERBS)
    out += [
        "",
        "## Sweep file (`exam take --config`, `qa answer --config`)",
        "",
        "The `[grid]` table has the same keys as the job's `[sweep]`.",
    ]
    out += _key_tables(sweep_keys(), SWEEP_TABLE_VERBS)
    return "\n".join(out) + "\n"


# -- files ---------------------------------------------------------------------------------------------------------


def _record_kinds() -> list[str]:
    from ragrade import schemas

    out = ["| record kind | checked by | fields |", "| --- | --- | --- |"]
    for kind, check in schemas.CHECKS.items():
        doc = inspect.getdoc(check) or ""
        out.append(f"| {kind} | `ragrade.schemas.{check.__name__}` | {_cell(_doc_text(doc))} |")
    manifest = inspect.getdoc(schemas.check_index_manifest) or ""
    out.append(f"| index manifest | `ragrade.schemas.check_index_manifest` | {_cell(_doc_text(manifest))} |")
    return out


def _columns(title: str, names: typing.Iterable[str], types_: typing.Iterable[str] | None = None) -> list[str]:
    names = list(names)
    kinds = list(types_) if types_ is not None else [""] * len(names)
    out = ["", f"### {title}", "", "| column | type |", "| --- | --- |"]
    out += [f"| `{n}` | {_cell(t)} |" for n, t in zip(names, kinds, strict=True)]
    return out


def _exam_summary_columns() -> list[str]:
    """The columns of an ``exam take`` run's summary.csv: the run's own summary of one made-up answered row."""
    import pandas as pd
    import pyarrow as pa

    from ragrade.run.partial import mark_partial
    from ragrade.run.summary import RESPONSES_SCHEMA, summarise

    def value(kind: pa.DataType) -> object:
        if pa.types.is_list(kind):
            return [0.0] if pa.types.is_floating(kind.value_type) else ["x"]
        if pa.types.is_boolean(kind):
            return False
        if pa.types.is_integer(kind):
            return 1
        return 0.5 if pa.types.is_floating(kind) else "x"

    row = {f.name: value(f.type) for f in RESPONSES_SCHEMA}
    row.update(correct=1, error=None, transform_error=None, score_norm="sum")
    frame = pd.DataFrame([row])
    return [str(c) for c in mark_partial(summarise(frame), frame, 1).columns]


def file_columns() -> dict[str, list[str]]:
    """Result file -> the columns the code writes into it."""
    from ragrade.adaptive.runner import ADAPTIVE_COLUMNS
    from ragrade.judge.summary import CSV_COLUMNS
    from ragrade.qa.run import SUMMARY_COLUMNS
    from ragrade.run.summary import RESPONSES_SCHEMA

    exam_summary = _exam_summary_columns()
    return {
        "responses.parquet": [f.name for f in RESPONSES_SCHEMA],
        "summary.csv (exam take)": exam_summary,
        "summary.csv (exam take --adaptive: these beside the exam's)": list(ADAPTIVE_COLUMNS),
        "summary.csv (qa answer)": list(SUMMARY_COLUMNS),
        "summary.csv (judge)": list(CSV_COLUMNS),
    }


#: (module, constant naming the file, what the file holds): the names come from the code that writes them
RUN_FILES: tuple[tuple[str, str, str], ...] = (
    (
        "ragrade.run.manifest",
        "MANIFEST_FILE",
        "the run's full config, every component's arguments, seeds, package "
        "versions, git revision, times, and `status` (`partial: ...` for an interrupted run)",
    ),
    ("ragrade.schemas", "RESPONSES_FILE", "one row per pipeline and question (columns below)"),
    (
        "ragrade.run.summary",
        "SUMMARY_FILE",
        "per pipeline: accuracy with its Wilson 95% interval, `n_errors`, the "
        "rule that decided it (`decision_rule`), the accuracy under both log-likelihood rules, `partial`",
    ),
    ("ragrade.run.summary", "SUMMARY_BY_TAG_FILE", "the same per question tag (Bloom level, question word, topic)"),
    (
        "ragrade.run.samples",
        "SAMPLES_FILE",
        "every request sent and its raw reply, one line per row (`--no-samples`: none)",
    ),
    ("ragrade.run.compare", "COMPARISONS_FILE", "paired verdicts written by `ragrade compare`"),
    (
        "ragrade.adaptive.runner",
        "ROUNDS_FILE",
        "an adaptive run's rounds: requests, pipelines running, standard errors, eliminations, audit bias, misfit",
    ),
    (
        "ragrade.journal",
        "JOURNAL_FILE",
        "the resume state: one row per unit and item, one committed transaction per finished batch",
    ),
    ("ragrade.runlock", "LOCK_FILE", "present while a command writes the folder: the holder's process id and command"),
    ("ragrade.judge.run", "SCORES_FILE", "`judge`: every verdict, unparsed ones with their raw text"),
    ("ragrade.judge.run", "AGREEMENT_FILE", "`judge`: agreement between the metrics"),
    (
        "ragrade.judge.calibrate",
        "CALIBRATION_FILE",
        "`judge calibrate`: per metric and configuration the PPI++ "
        "estimate, its interval, the human-only interval, the judge's bias",
    ),
    ("ragrade.job.layout", "STAGES_FILE", "`ragrade run`: each stage's key and state, so a rerun reuses it"),
    ("ragrade.job.layout", "TIMINGS_FILE", "`ragrade run`: seconds per stage"),
    ("ragrade.job.layout", "REPORT_FILE", "the HTML report (`ragrade run`; `ragrade report` writes it too)"),
    ("ragrade.llm.cache", "CACHE_FILE", "not in the run folder: the LLM response cache under `$RAGRADE_CACHE_DIR`"),
)


def _run_files() -> list[str]:
    import importlib

    out = ["| file | named in | what |", "| --- | --- | --- |"]
    for module, constant, what in RUN_FILES:
        name = getattr(importlib.import_module(module), constant)
        out.append(f"| `{name}` | `{module}` | {_cell(what)} |")
    return out


def files_page() -> str:
    """Record kinds (schemas.py) and result columns, from the constants that write them."""
    from ragrade.run.summary import RESPONSES_SCHEMA

    out = [
        "# Files",
        "",
        "Written from the code when this site was built. Every file ragrade writes is versioned: a JSONL file "
        'starts with a header line `{"ragrade": {"kind": ..., "version": ...}}`, a JSON file carries `version`, '
        "and a run folder holds `manifest.json` (the full config, every component's arguments, seeds, package "
        "versions, times). No pickle anywhere. Every record read is checked by one validator per file kind; a "
        "bad one fails as `FILE:LINE: bad <kind> record: ...`.",
        "",
        "## What a run folder holds",
        "",
        *_run_files(),
        "",
        "## Records read and written",
        "",
        *_record_kinds(),
        "",
        "## Result tables",
        "",
        "A failed LLM request is a row with `error` set and `correct` empty: missing, never wrong.",
    ]
    for name, columns in file_columns().items():
        kinds = [str(f.type) for f in RESPONSES_SCHEMA] if name == "responses.parquet" else None
        out += _columns(_code(name), columns, kinds)
    return "\n".join(out) + "\n"


# -- Python API ----------------------------------------------------------------------------------------------------


def api_names() -> list[str]:
    """The functions and classes ``import ragrade`` exports (``ragrade.__all__``, less the version): the
    functions first, then the classes, then the errors."""
    import ragrade

    names = [n for n in ragrade.__all__ if not n.startswith("_")]

    def rank(name: str) -> int:
        obj = getattr(ragrade, name)
        return 2 if isinstance(obj, type) and issubclass(obj, Exception) else 1 if isinstance(obj, type) else 0

    return sorted(names, key=rank)


def api_page() -> str:
    """One mkdocstrings block per exported name (rendered from its docstring and signature)."""
    import ragrade

    out = [
        "# Python API",
        "",
        "Every verb is also a function of `ragrade`, with the same settings as its flags and the same files "
        "written (`import ragrade as rg`). Written from the docstrings when this site was built.",
        "",
    ]
    for name in api_names():
        obj = getattr(ragrade, name)
        module = getattr(obj, "__module__", "ragrade")
        out += [f"::: {module}.{getattr(obj, '__qualname__', name)}", ""]
    return "\n".join(out)


__all__ = [
    "PAGES",
    "Flag",
    "Key",
    "Verb",
    "api_names",
    "api_page",
    "cli_page",
    "config_page",
    "file_columns",
    "files_page",
    "job_keys",
    "sweep_keys",
    "walk_keys",
    "walk_verbs",
]

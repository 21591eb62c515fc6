"""The reference pages cover the code: every verb, flag and config key, and nothing that no longer exists.

The pages are written from the code at build time (``scripts/docs/reference.py``); these tests walk the Typer
app and the settings models on their own and look for each name in the written Markdown, and they check that
the hand-written pages name only verbs and flags that exist.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
import typing
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer.main
from pydantic import BaseModel
from scripts.docs import reference

from ragrade.cli.app import app

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def _commands(command: typing.Any = None, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], typing.Any]]:
    command = command if command is not None else typer.main.get_command(app)
    yield path, command
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        if not sub.hidden:
            yield from _commands(sub, (*path, name))


def _sections(page: str) -> dict[str, str]:
    """Heading text -> the Markdown under it, up to the next heading of any level."""
    parts = re.split(r"^#{1,6} (.+)$", page, flags=re.M)
    return {parts[i].strip(): parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def test_every_verb_and_flag_is_in_the_cli_reference() -> None:
    sections = _sections(reference.cli_page())
    missing = []
    for path, command in _commands():
        title = " ".join(("ragrade", *path))
        if title not in sections:
            missing.append(title)
            continue
        for param in command.params:
            if param.hidden:
                continue
            names = [param.name.upper()] if type(param).__name__.endswith("Argument") else param.opts
            missing += [f"{title} {n}" for n in names if f"`{n}`" not in sections[title]]
    assert not missing, missing


def test_the_cli_reference_names_only_verbs_that_exist() -> None:
    verbs = {" ".join(("ragrade", *path)) for path, _ in _commands()}
    headings = {h for h in _sections(reference.cli_page()) if h.startswith("ragrade")}
    assert headings == verbs


def _model_keys(model: type[BaseModel], table: str = "") -> Iterator[tuple[str, str]]:
    decided = getattr(model, "DECIDED_BY_JOB", {})  # keys a job refuses (it decides them itself): not offered
    for name, field in model.model_fields.items():
        if name in decided:
            continue
        alias = getattr(field.validation_alias, "choices", None)
        spelled = str(alias[0]) if alias else name
        kind = field.annotation
        args = typing.get_args(kind)
        inner = args[0] if typing.get_origin(kind) is list and args else kind
        sub = f"{table.strip('[]')}.{spelled}" if table else spelled
        if isinstance(inner, type) and issubclass(inner, BaseModel):
            yield from _model_keys(inner, f"[[{sub}]]" if inner is not kind else f"[{sub}]")
        elif isinstance(inner, type) and dataclasses.is_dataclass(inner):  # IRT bounds and priors: a table
            yield from ((f"[{sub}]", f.name) for f in dataclasses.fields(inner))
        else:
            yield table, spelled


@pytest.mark.parametrize("which", ["job", "sweep"])
def test_every_config_key_is_in_the_config_reference(which: str) -> None:
    from ragrade.job.config import JobConfig
    from ragrade.run.spec import SweepConfig

    page = reference.config_page()
    head = "## Job config" if which == "job" else "## Sweep file"
    part = page.split(head, 1)[1]
    if which == "job":
        part = part.split("## Sweep file", 1)[0]
    tables = _sections(part)
    model = JobConfig if which == "job" else SweepConfig
    missing = []
    keys = list(_model_keys(model))
    assert len(keys) > 100 if which == "job" else len(keys) > 40
    for table, key in keys:
        title = f"`{table}`" if table else "top level"
        if f"| `{key}` |" not in tables.get(title, ""):
            missing.append(f"{table} {key}")
    assert not missing, missing


def test_the_config_reference_names_only_keys_that_exist() -> None:
    from ragrade.job.config import JobConfig

    page = reference.config_page().split("## Sweep file", 1)[0]
    known = set(_model_keys(JobConfig))
    written = set()
    for title, body in _sections(page).items():
        table = title.strip("`") if title.startswith("`") else ""
        written |= {(table, k) for k in re.findall(r"^\| `([^`]+)` \|", body, flags=re.M)}
    assert written == known


def test_every_config_key_says_what_it_does() -> None:
    """No blank meaning: a field's description, its line comment or its verb's flag help (a dataclass table
    such as ``[irt.bounds]``: its fields' metadata)."""
    rows, blank, table = 0, [], ""
    for line in reference.config_page().splitlines():
        if line.startswith("#"):
            table = line.lstrip("# ")
        elif line.startswith("| `"):
            rows += 1
            if re.search(r"\|\s+\|$", line):
                blank.append(f"{table} {line.split('`')[1]}")
    assert rows > 300
    assert blank == []


def test_keys_a_job_decides_itself_are_not_offered_under_index() -> None:
    from ragrade.job.config import IndexSection

    page = reference.config_page()
    index = page.split("`[index]`", 1)[1].split("\n#", 1)[0] if "`[index]`" in page else ""
    assert index, "the [index] table is in the reference"
    for key in IndexSection.DECIDED_BY_JOB:
        assert f"| `{key}` |" not in index, key


def test_the_files_reference_has_the_response_columns() -> None:
    from ragrade.run.summary import RESPONSES_SCHEMA

    page = reference.files_page()
    assert all(f"| `{f.name}` |" in page for f in RESPONSES_SCHEMA)
    for kind in ("documents", "chunks", "exam", "qa", "rgb"):
        assert f"| {kind} |" in page


def test_the_api_reference_documents_every_export() -> None:
    import ragrade

    page = reference.api_page()
    blocks = re.findall(r"^::: (\S+)$", page, flags=re.M)
    assert len(blocks) == len(ragrade.__all__) - 1  # all but __version__
    for target in blocks:
        module, _, name = target.rpartition(".")
        assert getattr(__import__(module, fromlist=[name]), name) is not None


# -- the hand-written pages -----------------------------------------------------------------------------------


def _commands_in_pages() -> Iterator[tuple[str, list[str]]]:
    """(page, argv) for every `ragrade ...` command written in a code block or in inline code."""
    for page in sorted(DOCS.rglob("*.md")):
        text = page.read_text(encoding="utf-8")
        blocks = re.findall(r"^```(?:bash|text)\n(.*?)^```", text, flags=re.M | re.S)
        lines = []
        for block in blocks:
            lines += block.replace("\\\n", " ").splitlines()
        lines += re.findall(r"`(ragrade [^`]+)`", text)
        for line in lines:
            line = line.split("#", 1)[0].strip()
            if line.startswith("ragrade ") and not line.startswith("ragrade: "):
                yield page.name, shlex.split(line)[1:]


def _verb_of(argv: list[str]) -> tuple[tuple[str, ...], list[str]]:
    """The longest verb path at the start of ``argv`` (root options skipped), and the options of the command."""
    root = typer.main.get_command(app)
    command, options = root, [o for p in root.params for o in p.opts]
    path: tuple[str, ...] = ()
    for word in argv:
        if word.startswith("-") and not path:
            continue
        subcommands = getattr(command, "commands", {})
        sub = subcommands.get(word)
        default = str(getattr(command, "default_command", ""))
        if sub is None and default in subcommands:  # `ragrade judge ANSWERS` runs `judge score`
            command, path = subcommands[default], (*path, default)
            break
        if sub is None:
            break
        command, path = sub, (*path, word)
    names = [o for p in command.params for o in (*p.opts, *p.secondary_opts)]
    return path, [*options, *names, "--help", "-h"]


def test_hand_written_pages_name_only_verbs_and_flags_that_exist() -> None:
    found, bad = 0, []
    for page, argv in _commands_in_pages():
        path, flags = _verb_of(argv)
        words = [a for a in argv if not a.startswith("-")]
        if words and (not path or path[0] != words[0]):
            bad.append(f"{page}: ragrade {' '.join(argv)} (no such verb)")
            continue
        found += 1
        for arg in argv:
            flag = arg.split("=", 1)[0]
            if flag.startswith("--") and flag not in flags:
                bad.append(f"{page}: ragrade {' '.join(path)} has no {flag}")
    assert found > 40
    assert not bad, bad


def test_every_environment_variable_and_exit_code_is_listed() -> None:
    from ragrade import interrupt
    from ragrade.errors import FailedRequests, RagradeError

    page = (DOCS / "reference" / "exit-codes.md").read_text(encoding="utf-8")
    in_code = set()
    for source in (ROOT / "src" / "ragrade").rglob("*.py"):
        in_code |= set(re.findall(r"RAGRADE_[A-Z_]+[A-Z]", source.read_text(encoding="utf-8")))
    listed = set(re.findall(r"^\| `(RAGRADE_[A-Z_]+)` \|", page, flags=re.M))
    assert listed == in_code
    codes = set(re.findall(r"^\| (\d+) \|", page, flags=re.M))
    assert {str(RagradeError.exit_code), str(FailedRequests.exit_code), str(interrupt.EXIT_CODE), "0"} == codes


def test_readme_is_the_front_door() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 150
    commands = [line.split("#")[0].strip() for line in lines if line.startswith("make ")]
    assert commands[:2] == ["make demo", "make test"]
    first_block = next(i for i, line in enumerate(lines) if line.startswith("```"))
    assert lines[first_block + 1].startswith("make demo") and lines[first_block + 2].startswith("make test")
    targets = re.findall(r"\]\((docs/[^)#]+)", "\n".join(lines))
    assert len(targets) > 15
    assert [t for t in targets if not (ROOT / t).is_file()] == []


def test_pictures_are_small_and_used() -> None:
    pictures = sorted((DOCS / "img").glob("*.png"))
    assert pictures
    assert sum(p.stat().st_size for p in pictures) < 400 * 1024
    text = "".join(p.read_text(encoding="utf-8") for p in DOCS.rglob("*.md"))
    assert all(f"img/{p.name}" in text for p in pictures)

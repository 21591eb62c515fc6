"""Errors name settings; the command line spells them as the flags of the verb the user typed."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import typer.main

from ragrade.cli.app import app
from ragrade.cli.main import main
from ragrade.cli.setting_flags import SETTING_ALIASES, flag_table, setting_speller, spell
from ragrade.errors import ConfigError, DataError, check_choice, render_settings

if TYPE_CHECKING:
    from typer._click import core as _core


def test_api_message_names_the_setting() -> None:
    exc = ConfigError("$drop is a fraction in (0, 1), got 10; $min_positives too; $HOME is left alone")
    assert str(exc) == "drop is a fraction in (0, 1), got 10; min_positives too; $HOME is left alone"
    assert exc.settings == ("drop", "min_positives")
    assert DataError("no setting here").settings == ()


def test_render_spells_known_settings_and_keeps_the_others() -> None:
    exc = ConfigError("$drop and $steps and $nothing_like_it")
    spelled = exc.render({"drop": "--drop", "steps": "--steps"}.get)
    assert spelled == "--drop and --steps and nothing_like_it"


def test_speller_follows_the_verb_typed() -> None:
    spell = setting_speller(["irt", "improve", "RUN", "--drop", "10"])
    assert spell("drop") == "--drop"
    assert spell("steps") == "--steps"
    assert spell("no_such_setting") is None
    # a group alone, or an unknown verb, spells nothing and never raises
    assert setting_speller(["irt"])("drop") is None
    assert setting_speller(["nope", "--x"])("drop") is None


def test_cli_error_names_the_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["irt", "improve", str(tmp_path), "--drop", "10"]) == 2
    err = capsys.readouterr().err
    assert "--drop is a fraction in (0, 1), got 10" in err
    assert "$" not in err


def test_aliases_spell_the_flag_of_a_setting_named_otherwise() -> None:
    assert setting_speller(["exam", "take", "EXAM", "--retrievers", "bm25"])("indexes") == "--index"
    assert setting_speller(["irt", "fit", "RUN"])("jackknife_groups") == "--groups"
    assert setting_speller(["corpus", "DIR"])("drop_patterns") == "--drop-pattern"
    assert setting_speller(["ask", "INDEX", "Q"])("base_url") == "--llm-base-url"
    # robust run's own --prompts is found under the setting's name when the verb has no --prompt
    assert setting_speller(["robust", "run", "DATA"])("prompts") == "--prompts"
    assert setting_speller(["exam", "take", "EXAM"])("prompts") == "--prompt"


def test_a_group_with_a_default_command_spells_that_commands_flags() -> None:
    # `ragrade judge ANSWERS --field ...` runs `judge score`
    assert setting_speller(["judge", "answers.jsonl", "--field", "x"])("fields") == "--field"
    assert setting_speller(["judge", "calibrate", "SCORES"])("min_labels") == "--min-labels"


def test_cli_error_through_an_alias_names_the_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    answers = tmp_path / "a.jsonl"
    answers.write_text('{"question": "Q", "answer": "A", "reference": "A"}\n')
    assert main(["judge", str(answers), "--out", str(tmp_path / "o"), "--metrics", "exact", "--field", "oops"]) == 2
    err = capsys.readouterr().err
    assert "--field expects TARGET=SOURCE" in err and "$" not in err


def test_check_choice_narrows_and_names_the_setting() -> None:
    assert check_choice("doc", ("chunk", "doc"), "level") == "doc"
    with pytest.raises(ConfigError) as bad:
        check_choice("chnk", ("chunk", "doc"), "level")
    assert str(bad.value) == "level must be chunk or doc, got 'chnk'. Did you mean 'chunk'?"
    assert bad.value.settings == ("level",)
    with pytest.raises(ConfigError, match=r"^shortfall must be pad, skip or fewer, got 'x'$"):
        check_choice("x", ("pad", "skip", "fewer"), "shortfall")


def test_render_settings_for_text_that_is_logged_rather_than_raised() -> None:
    assert render_settings("rerun with $timeout 2 $concurrency 1") == "rerun with timeout 2 concurrency 1"
    assert render_settings("$timeout", {"timeout": "--timeout"}.get) == "--timeout"


# --------------------------------------------------------------------------- every setting an error names

_SRC = Path(__file__).resolve().parents[2] / "src" / "ragrade"
_SETTING = re.compile(r"\$([a-z][a-z0-9_]*)")

#: settings an error may name that no verb has a flag for: they live in config files (or the Python API) only
CONFIG_ONLY = {
    "min_chunk_chars": "ExamConfig.min_chunk_chars: the [exam] table of an exam generate config file",
    "letter_fallback": "LLMOptions.letter_fallback: the [llm_options] table of a config file",
    "dense": "IndexConfig.dense: a boolean the index verb turns off with --no-dense (a negative flag, not aliased)",
    "calibration_mode": "AdaptiveConfig.calibration_mode: the [adaptive] table of a sweep or job config",
    "audit_share": "AdaptiveConfig.audit_share: the [adaptive] table of a sweep or job config",
}


def _library_modules() -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted(_SRC.rglob("*.py")):
        if "cli" not in path.relative_to(_SRC).parts:
            yield path, ast.parse(path.read_text())


def _docstrings(tree: ast.Module) -> set[int]:
    kinds = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, kinds) and node.body and isinstance(node.body[0], ast.Expr)
    }


def _named_settings() -> dict[str, str]:
    """Every setting named in library code: ``$name`` in a string (not a docstring), and the setting argument of
    :func:`check_choice`; name -> where (the first place)."""
    found: dict[str, str] = {}
    for path, tree in _library_modules():
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
                names = _SETTING.findall(node.value)
            elif isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == (
                "check_choice"
            ):
                given = [k.value for k in node.keywords if k.arg == "setting"]
                arg = node.args[2] if len(node.args) > 2 else (given[0] if given else None)
                names = [arg.value] if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else []
            for name in names:
                found.setdefault(name, f"{path.relative_to(_SRC)}:{getattr(node, 'lineno', 0)}")
    return found


def _all_flag_tables() -> list[dict[str, str]]:
    def walk(cmd: _core.Command) -> Iterator[dict[str, str]]:
        subs = getattr(cmd, "commands", None)  # a group
        if isinstance(subs, dict):
            for sub in subs.values():
                yield from walk(sub)
        else:
            yield flag_table(cmd)

    return list(walk(typer.main.get_command(app)))


def test_every_setting_an_error_names_is_a_flag_of_some_verb() -> None:
    named = _named_settings()
    assert {"drop", "indexes", "level", "shortfall", "timeout"} <= set(named)  # the collector sees every form
    tables = _all_flag_tables()
    unspelled = {n: where for n, where in named.items() if not any(spell(t, n) for t in tables)}
    assert set(unspelled) <= set(CONFIG_ONLY), {n: w for n, w in unspelled.items() if n not in CONFIG_ONLY}
    # no stale entries: each config-only setting is still named somewhere, and still has no flag
    assert set(CONFIG_ONLY) <= set(unspelled), set(CONFIG_ONLY) - set(unspelled)


def test_every_alias_leads_to_a_flag() -> None:
    tables = _all_flag_tables()
    assert all(any(alias in t for t in tables) for alias in SETTING_ALIASES.values()), SETTING_ALIASES


# --------------------------------------------------------------------------- no error outside the cli names a flag

# library code outside the command line names settings, never flags: an error that spells a `--flag` speaks to a
# user who may never have typed it. A flag is `--word` or a lone `-x`; a whole command line quoted for the user to
# copy (`ragrade robust build --qa FILE`) names a command, not a setting, and is left alone.
_FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*|-[a-zA-Z](?=[\s,;:)=]|$))")
_COMMAND = re.compile(r"`ragrade [^`]*`")
_ONLY_FLAGS = re.compile(r"^\s*--[a-z][a-z0-9-]*(\s+or\s+--[a-z][a-z0-9-]*)*\s*$")


def _strings(node: ast.AST) -> Iterator[ast.Constant]:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            yield sub


def _assigned(scope: ast.AST) -> dict[str, list[ast.AST]]:
    """Name -> the values assigned to it directly in ``scope`` (a function or the module)."""
    out: dict[str, list[ast.AST]] = {}
    for node in ast.walk(scope):
        if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Name):
                    out.setdefault(t.id, []).append(node.value)
    return out


def _raise_texts(tree: ast.Module) -> Iterator[ast.Constant]:
    """The strings a raise's message is built from: its literals (however split over lines or formatted), and
    those of the names it uses, assigned in its function or at module level."""
    module_names = _assigned(tree)
    scopes = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    seen: set[int] = set()
    for scope in [*reversed(scopes), tree]:  # innermost functions first: a raise is read in its own scope
        local = _assigned(scope) if scope is not tree else {}
        for node in ast.walk(scope):
            if not isinstance(node, ast.Raise) or node.exc is None or id(node) in seen:
                continue
            seen.add(id(node))
            yield from _strings(node.exc)
            for name in (n.id for n in ast.walk(node.exc) if isinstance(n, ast.Name)):
                for value in local.get(name, []) or module_names.get(name, []):
                    yield from _strings(value)


def _passed_flags(tree: ast.Module) -> Iterator[ast.Constant]:
    """Strings that are nothing but flags (``"--query"``) handed to a function or kept in a name: a helper puts
    them in its message (an argv list for another program, ``["git", "--porcelain"]``, is not one)."""
    for node in ast.walk(tree):
        values: list[ast.AST] = []
        if isinstance(node, ast.Call):
            values = [*node.args, *(k.value for k in node.keywords)]
        elif isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            values = [node.value]
        for v in values:
            if isinstance(v, ast.Constant) and isinstance(v.value, str) and _ONLY_FLAGS.match(v.value):
                yield v


def _offenders() -> list[str]:
    out: set[str] = set()
    for path, tree in _library_modules():
        for const in [*_raise_texts(tree), *_passed_flags(tree)]:
            text = _COMMAND.sub("", str(const.value))
            flags = _FLAG.findall(text)
            if flags:
                out.add(f"{path.relative_to(_SRC)}:{const.lineno}: {' '.join(flags)}")
    return sorted(out)


def test_the_guard_sees_every_form_of_a_flag_in_an_error() -> None:
    tree = ast.parse(
        "def f(x):\n"
        "    hint = ' (use --testbed negative)'\n"
        "    if x:\n"
        "        raise ConfigError(\n"
        "            f'bad {x}'\n"
        "            '; pass --index DIR'\n"
        "        )\n"
        "    raise ConfigError(f'-k must be positive{hint}')\n"
        "g(value, '--query')\n"
        "_git(['status', '--porcelain'])\n"
        "raise ConfigError('see `ragrade robust build --qa FILE`; x-y and -1 are no flags')\n"
    )
    found = sorted(_FLAG.findall(_COMMAND.sub("", str(c.value))) for c in [*_raise_texts(tree), *_passed_flags(tree)])
    assert sorted(f for fs in found for f in fs) == ["--index", "--query", "--testbed", "-k"]


def test_no_error_outside_the_cli_names_a_flag() -> None:
    assert _offenders() == []

"""One way to declare a verb's options (issue 37.7): the fields of a flags dataclass
(:func:`ragrade.cli.flags.with_flags`), never typer default parameters of the command function
(``x: int = typer.Option(3, "--x")``), whose declared type typer does not check against the default."""

from __future__ import annotations

import ast
from pathlib import Path

CLI = Path(__file__).resolve().parents[2] / "src" / "ragrade" / "cli"
ROOT_OPTIONS = {("app.py", "_root")}  # the root command's --version, --dry-run and --quiet: no verb's


def _option_defaults(fn: ast.FunctionDef) -> list[str]:
    """The parameters of ``fn`` declared as ``name: T = typer.Option(...)``."""
    args = [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]
    defaults: list[ast.expr | None] = [None] * (len(fn.args.posonlyargs) + len(fn.args.args) - len(fn.args.defaults))
    defaults += [*fn.args.defaults, *fn.args.kw_defaults]
    return [
        a.arg
        for a, d in zip(args, defaults, strict=True)
        if isinstance(d, ast.Call) and ast.unparse(d.func) in ("typer.Option", "Option")
    ]


def test_no_verb_declares_options_as_typer_default_parameters() -> None:
    old_style = []
    for path in sorted(CLI.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and (path.name, node.name) not in ROOT_OPTIONS:
                old_style += [f"{path.name}:{node.name}({name})" for name in _option_defaults(node)]
    assert not old_style, old_style


def test_the_check_finds_an_option_default() -> None:
    fn = ast.parse('def verb(x: int = typer.Option(3, "--x"), *, y: bool = typer.Option(False)) -> None: ...').body[0]
    assert isinstance(fn, ast.FunctionDef) and _option_defaults(fn) == ["x", "y"]

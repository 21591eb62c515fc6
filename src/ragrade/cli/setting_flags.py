"""Spell the settings an error names (``$drop``) as the flags of the command the user typed (``--drop``).

Library code names settings, never flags (a Python or config-file user never typed ``--drop``); the
command line maps each name to the flag of the verb that ran, found from the arguments alone. A setting
that verb has no flag for keeps its bare name.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typer._click import core as _core


def _leaf(root: _core.Command, argv: Sequence[str]) -> _core.Command:
    """The (sub)command ``argv`` runs: follow the words that name a subcommand of the current group."""
    cmd = root
    for word in argv:
        commands = getattr(cmd, "commands", None)  # a group (typer's groups are not click's Group class)
        if not isinstance(commands, dict):
            break
        if word.startswith("-"):
            continue
        sub = commands.get(word)
        if sub is None:
            break
        cmd = sub
    return cmd


def flag_table(command: _core.Command) -> dict[str, str]:
    """Setting name -> the flag that sets it, for every option of ``command`` (by parameter name, and by
    the flag's own name with dashes as underscores)."""
    table: dict[str, str] = {}
    for param in command.params:
        if getattr(param, "param_type_name", None) != "option":
            continue
        longs = [o for o in param.opts if o.startswith("--")] or list(param.opts)
        if not longs:
            continue
        flag = longs[0]
        if param.name:
            table.setdefault(param.name, flag)
        for opt in longs:
            table.setdefault(opt.lstrip("-").replace("-", "_"), opt)
    return table


def setting_speller(argv: Sequence[str]) -> Callable[[str], str | None]:
    """A function giving the flag (of the verb ``argv`` runs) for a setting name, None where it has none."""
    import typer.main

    from ragrade.cli.app import app

    try:
        table = flag_table(_leaf(typer.main.get_command(app), argv))
    except Exception:  # spelling an error must never hide it
        table = {}
    return table.get


__all__ = ["flag_table", "setting_speller"]

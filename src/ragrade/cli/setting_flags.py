"""Spell the settings an error names (``$drop``) as the flags of the command the user typed (``--drop``).

Library code names settings, never flags (a Python or config-file user never typed ``--drop``); the
command line maps each name to the flag of the verb that ran, found from the arguments alone. A setting
that verb has no flag for keeps its bare name. Where a setting's name and its flag's differ (``indexes``
is set by ``--index``), :data:`SETTING_ALIASES` says so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typer._click import core as _core


#: setting name (Python keyword / config field) -> the name of the flag that sets it, where the two differ: the
#: flag's long name with dashes as underscores (``--index`` -> ``index``), looked up in the verb the user typed
#: (a verb without that flag falls back to a flag named as the setting, then to the bare name)
SETTING_ALIASES: dict[str, str] = {
    "base_url": "llm_base_url",  # LLMOptions.base_url; --llm-base-url (--base-url is its short alias)
    "drop_patterns": "drop_pattern",  # CorpusConfig.drop_patterns; corpus --drop-pattern, repeated
    "fields": "field",  # JudgeRunConfig.fields; judge score --field TARGET=SOURCE, repeated
    "indexes": "index",  # SweepConfig.indexes; exam take / qa answer --index
    "jackknife_groups": "groups",  # FitConfig.jackknife_groups; irt fit --groups
    "methods": "method",  # the grid axis GridConfig.methods; exam take --method
    "prompts": "prompt",  # SweepConfig.prompts; exam take / qa answer --prompt (robust run's --prompts is its own)
}


def spell(table: Mapping[str, str], name: str) -> str | None:
    """The flag of ``table`` (a verb's :func:`flag_table`) that sets setting ``name``, or None."""
    alias = SETTING_ALIASES.get(name)
    return (table.get(alias) if alias is not None else None) or table.get(name)


def _leaf(root: _core.Command, argv: Sequence[str]) -> _core.Command:
    """The (sub)command ``argv`` runs: follow the words that name a subcommand of the current group; a group
    with a ``default_command`` (``judge ANSWERS`` runs ``judge score``) routes any other word to it."""
    cmd = root
    for word in argv:
        commands = getattr(cmd, "commands", None)  # a group (typer's groups are not click's Group class)
        if not isinstance(commands, dict):
            break
        sub = commands.get(word)
        if sub is None:
            default = getattr(cmd, "default_command", None)
            sub = commands.get(default) if isinstance(default, str) else None
            if sub is None and word.startswith("-"):  # an option of the group itself (``ragrade --quiet``)
                continue
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
    return lambda name: spell(table, name)


__all__ = ["SETTING_ALIASES", "flag_table", "setting_speller", "spell"]

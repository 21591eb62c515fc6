"""A command's options as one typed object: :func:`with_flags`.

A command with many options declares them as the fields of a frozen dataclass, each annotated with its
typer option (``Annotated[int | None, typer.Option("--k", help=...)] = None``; a field without a default is
a required option), and names one parameter ``flags: ThatClass``. :func:`with_flags` offers the fields as
the command's options, in that place of ``--help``, and hands the command one instance built from typer's
parsed values: the command reads typed attributes, never parameters picked out by name.

Only the standard library is imported here (``ragrade --help`` must stay light).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, get_type_hints

if TYPE_CHECKING:
    from _typeshed import DataclassInstance


def _options(flags_type: type[DataclassInstance]) -> list[inspect.Parameter]:
    """The dataclass's fields as keyword parameters whose annotations are their typer options."""
    hints = get_type_hints(flags_type, include_extras=True)
    out = []
    for f in dataclasses.fields(flags_type):
        if f.default is not dataclasses.MISSING:
            default: object = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = inspect.Parameter.empty  # a required option
        out.append(inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=hints[f.name]))
    return out


def with_flags(flags_type: type[DataclassInstance]) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Offer the fields of ``flags_type`` as the decorated command's options; the command gets one object.

    The command names a parameter ``flags: <flags_type>``; its options (in ``--help``, in that place)
    are the dataclass's fields, each an ``Annotated`` typer option, and typer's parsed values are handed to
    the command as one ``flags_type`` instance (typed, built by the dataclass, not picked out by name).
    """
    options = _options(flags_type)
    names = [p.name for p in options]

    def decorate(command: Callable[..., None]) -> Callable[..., None]:
        own = list(inspect.signature(command, eval_str=True).parameters.values())
        at = [p.name for p in own].index("flags")
        # keyword-only: typer passes every value by name, and a required option may follow an optional one
        params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in [*own[:at], *options, *own[at + 1 :]]]

        @functools.wraps(command)
        def run(**parsed: Any) -> None:
            flags = flags_type(**{name: parsed.pop(name) for name in names})
            command(**parsed, flags=flags)

        run.__signature__ = inspect.Signature(params, return_annotation=None)  # type: ignore[attr-defined]
        run.__annotations__ = {p.name: p.annotation for p in params}
        del run.__wrapped__  # typer reads the signature above, not the command's
        return run

    return decorate


__all__ = ["with_flags"]

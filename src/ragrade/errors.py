"""The one exception hierarchy of ragrade.

Every error a user can cause (bad input, bad config, unreachable backend,
missing optional dependency) is a :class:`RagradeError`. The CLI prints such
errors as one line and exits with code 2 (3 for :class:`FailedRequests`);
anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from typing import TypeVar

#: how a message names a setting: ``$name`` (the setting's Python/config name, lower case)
_SETTING = re.compile(r"\$([a-z][a-z0-9_]*)")

_Choice = TypeVar("_Choice", bound=str)


class RagradeError(Exception):
    """Base class of every error ragrade raises on purpose.

    A message names the settings it is about as ``$name`` (``"$drop is a fraction in (0, 1)"``): read
    through the Python API or a config file it says ``drop``; the command line renders the same name as
    the flag the user typed (``--drop``), see :meth:`render`.
    """

    exit_code: int = 2

    def __str__(self) -> str:
        return self.render()

    @property
    def settings(self) -> tuple[str, ...]:
        """The names of the settings the message is about, in order of mention."""
        return tuple(dict.fromkeys(_SETTING.findall(super().__str__())))

    def render(self, spell: Callable[[str], str | None] | None = None) -> str:
        """The message with each ``$name`` spelled by ``spell`` (a flag, say), or as the bare name where
        ``spell`` is None or returns None."""

        return render_settings(super().__str__(), spell)


class ConfigError(RagradeError):
    """An option, argument or configuration file is invalid."""


class DataError(RagradeError):
    """An input file or record is malformed, empty or inconsistent."""


class BackendError(RagradeError):
    """A model backend, server or store failed in a way the caller cannot fix by retrying."""


class FailedRequests(RagradeError):
    """Too many LLM requests failed (after their retries); the results are kept, the failures are missing.

    Exits with its own code (3) so that scripts can tell "rerun later to fill the gaps" from a bad input (2).
    """

    exit_code = 3


class MissingDependency(RagradeError):
    """An optional dependency is not installed; the message says how to install it."""

    def __init__(self, package: str, extra: str | None = None, purpose: str | None = None) -> None:
        hint = f"pip install 'ragrade[{extra}]'" if extra else f"pip install {package}"
        what = f" (needed for {purpose})" if purpose else ""
        super().__init__(f"the optional package '{package}' is not installed{what}; install it with: {hint}")
        self.package = package
        self.extra = extra


def render_settings(text: str, spell: Callable[[str], str | None] | None = None) -> str:
    """``text`` with each ``$name`` spelled by ``spell``, or as the bare name (for a message that is logged or
    stored rather than raised, or raised later by code that does not know it names settings)."""

    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        return (spell(name) if spell is not None else None) or name

    return _SETTING.sub(one, text)


def did_you_mean(value: str, choices: list[str]) -> str:
    """A hint sentence for an error message naming the closest valid choice, if any is close."""
    close = difflib.get_close_matches(value, choices, n=1, cutoff=0.5)
    return f" Did you mean '{close[0]}'?" if close else ""


def check_choice(value: str, choices: tuple[_Choice, ...], setting: str) -> _Choice:
    """``value`` as one of ``choices`` (the values of a ``Literal``: ``get_args(Level)``), typed as that
    ``Literal``; a ConfigError naming ``$setting`` for a string from a config file or a flag that is none of them."""
    for choice in choices:
        if value == choice:
            return choice
    *head, last = choices
    valid = f"{', '.join(head)} or {last}" if head else last
    hint = did_you_mean(str(value), list(choices))
    raise ConfigError(f"${setting} must be {valid}, got '{value}'" + (f".{hint}" if hint else ""))


def open_error(
    path: object, exc: OSError, error: type[RagradeError], expected: str, missing: str = "file not found"
) -> RagradeError:
    """The error naming ``path`` for a file that could not be read: missing, a folder where ``expected``
    (e.g. "a JSON file") was wanted, or unreadable (raise it ``from exc``)."""
    if isinstance(exc, FileNotFoundError):
        return error(f"{path}: {missing}")
    if isinstance(exc, IsADirectoryError):
        return error(f"{path}: is a folder, expected {expected}")
    return error(f"{path}: cannot read ({exc.strerror or exc})")


__all__ = [
    "BackendError",
    "ConfigError",
    "DataError",
    "FailedRequests",
    "MissingDependency",
    "RagradeError",
    "check_choice",
    "did_you_mean",
    "open_error",
    "render_settings",
]

"""The ``ragrade`` command: verbs are registered by one thin module per stage.

User errors (:class:`~ragrade.errors.RagradeError`) print one line and exit 2;
anything else is a bug and keeps its traceback. The first Ctrl-C or SIGTERM stops a
run cleanly (one line, exit 130; see :mod:`ragrade.interrupt`), a second one at once.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

import typer

try:  # typer >= 0.2x vendors its own click
    from typer._click import exceptions as _cx
except ImportError:  # pragma: no cover - older typer on real click
    from click import exceptions as _cx  # type: ignore[no-redef]

from ragrade import interrupt
from ragrade.cli.app import app
from ragrade.cli.common import CommandSettings, error_line
from ragrade.errors import RagradeError


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script; returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if "--dry-run" in _root_options(args):
        from ragrade.cli.dryrun import run_dry

        return run_dry(args, _invoke)
    return _invoke(args)


def _root_options(args: list[str]) -> list[str]:
    """The arguments before the verb (the root command's own options)."""
    out = []
    for a in args:
        if not a.startswith("-"):
            break
        out.append(a)
    return out


def _invoke(
    argv: list[str], report: Callable[[str], None] = error_line, settings: CommandSettings | None = None
) -> int:
    """Run the CLI on ``argv`` with ``settings`` (what every verb reads) and map errors to exit codes
    (user errors go to ``report``)."""
    with interrupt.handle_signals():
        return _dispatch(argv, report, settings or CommandSettings())


def _dispatch(argv: list[str], report: Callable[[str], None], settings: CommandSettings) -> int:
    try:
        code: object = app(args=argv, prog_name="ragrade", standalone_mode=False, obj=settings)
    except interrupt.Interrupted:
        typer.echo(f"ragrade: {interrupt.message()}", err=True)
        return interrupt.EXIT_CODE
    except RagradeError as exc:
        from ragrade.cli.setting_flags import setting_speller

        report(exc.render(setting_speller(argv)) if exc.settings else str(exc))
        return exc.exit_code
    except typer.Exit as exc:
        return int(exc.exit_code or 0)
    except _cx.ClickException as exc:
        report(_click_message(exc))
        return 2
    except typer.Abort:
        report("aborted")
        return 130
    except KeyboardInterrupt:
        report("interrupted")
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:
        message = _user_fault(exc)
        if message is None:
            raise
        report(message)
        return 2
    if code == interrupt.EXIT_CODE:  # typer turns a KeyboardInterrupt into this code, silently
        typer.echo(f"ragrade: {interrupt.message()}", err=True)
        return interrupt.EXIT_CODE
    return 0


def _click_message(exc: _cx.ClickException) -> str:
    """Typer/click's usage errors as one line, with where to find help."""
    text = " ".join(exc.format_message().split())
    ctx = getattr(exc, "ctx", None)
    if isinstance(exc, _cx.UsageError) and ctx is not None:
        text += f" (see '{ctx.command_path} --help')"
    return text


def _user_fault(exc: Exception) -> str | None:
    """A one-line message for errors a user causes that a stage did not translate; None for bugs."""
    from pydantic import ValidationError

    from ragrade.config import describe_validation

    if isinstance(exc, ValidationError):
        return f"invalid option {describe_validation(exc)}"
    full = _no_space(exc)
    if full is not None:
        return full
    from ragrade.storage import folder_expected

    blocked = folder_expected(exc)  # `--out notes.txt` for a command that writes a folder
    if blocked is not None:
        return blocked
    if isinstance(exc, OSError) and exc.filename:
        return f"{exc.filename}: {exc.strerror or exc}"
    return None


def _no_space(exc: Exception) -> str | None:
    """The one line for a full disk met by a writer that did not name its file (see :mod:`ragrade.storage`)."""
    from ragrade.storage import NO_PERMISSION, write_failure

    if isinstance(exc, OSError) and exc.errno in NO_PERMISSION:
        return None  # maybe a read: the file and the reason, below
    failure = write_failure(exc)
    return None if failure is None else str(failure)


def run() -> None:
    """Console-script wrapper: exit with :func:`main`'s code.

    An interrupted run ends without the interpreter's shutdown (everything finished is on disk already):
    it waits neither for worker threads still in a model call nor through a window in which another
    Ctrl-C would kill it without its exit code.
    """
    interrupt.install()
    code = main()
    if code == interrupt.EXIT_CODE:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    run()

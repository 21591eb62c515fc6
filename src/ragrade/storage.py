"""One rule for a write that fails for lack of space or permission: one line naming the device and the file.

A run writes its journal, samples, manifest and result files as it goes; a disk that fills up (or a
quota, a read-only mount, a folder the user may not write) used to end it with a traceback from
whichever writer met it first (``OSError: [Errno 28]`` from a file write, ``sqlite3.OperationalError:
database or disk is full`` from the journal). Every writer of a run wraps its writes in
:func:`writing`, which turns such a failure into a :class:`WriteFailed` (one line, exit 2)::

    no space left on /data writing /data/run/samples.jsonl; free space and rerun the same command to resume

The journal commits each batch in one transaction, so a failed commit leaves it holding the batches
before it, and a rerun asks exactly the rest. :func:`write_failure` classifies an error raised
elsewhere (the command line's last resort, where the file may be unknown).
"""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ragrade.errors import ConfigError, DataError

#: errnos that mean "the device has no room" (a full file system, an exhausted quota)
NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
#: errnos that mean "this process may not write there"
NO_PERMISSION = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})
#: below this many free bytes a failed write is put down to a full device whatever it says (SQLite
#: reports a write into a full WAL as "disk I/O error")
LOW_SPACE_BYTES = 1 << 20
RERUN = "rerun the same command to resume"


class WriteFailed(DataError):
    """A file could not be written: the device is full, or the process may not write there."""


def _existing(path: str | Path) -> Path:
    """``path`` or its nearest folder that exists (a name too long to look up counts as missing)."""
    p = Path(os.path.abspath(path))
    while p != p.parent:
        try:
            if p.exists():
                break
        except OSError:
            pass
        p = p.parent
    return p


def device_of(path: str | Path) -> str:
    """The mount point holding ``path`` (its nearest existing folder's), as a user would name the device."""
    p = _existing(path)
    while not os.path.ismount(p) and p != p.parent:
        p = p.parent
    return str(p)


def _free_bytes(path: Path) -> int | None:
    try:
        return shutil.disk_usage(_existing(path)).free
    except OSError:
        return None


def _sqlite_full(exc: BaseException) -> bool:
    import sqlite3

    return isinstance(exc, sqlite3.OperationalError) and "full" in str(exc).lower()


def _is_no_space(exc: BaseException, path: Path | None) -> bool:
    if isinstance(exc, OSError) and exc.errno in NO_SPACE:
        return True
    if _sqlite_full(exc) or (isinstance(exc, OSError) and "no space left on device" in str(exc).lower()):
        return True
    if path is None:
        return False
    import sqlite3

    io_error = isinstance(exc, sqlite3.OperationalError) and "disk i/o error" in str(exc).lower()
    if not (io_error or (isinstance(exc, OSError) and exc.errno in (None, errno.EIO))):
        return False  # a named failure (a name too long, a missing folder) is not put down to space
    free = _free_bytes(path)
    return free is not None and free < LOW_SPACE_BYTES


def write_failure(exc: BaseException, path: str | Path | None = None) -> WriteFailed | None:
    """The one-line error for ``exc`` raised while writing ``path`` (its own file name when None), or None when
    it is not a lack of space or permission (a bug, or an error the caller reports itself)."""
    named = path if path is not None else getattr(exc, "filename", None)
    where = Path(str(named)) if named else None
    if _is_no_space(exc, where):
        if where is None:
            return WriteFailed(f"no space left on the device a file was being written to; free space and {RERUN}")
        return WriteFailed(f"no space left on {device_of(where)} writing {where}; free space and {RERUN}")
    if isinstance(exc, OSError) and exc.errno in NO_PERMISSION and where is not None:
        why = (exc.strerror or "permission denied").lower()
        return WriteFailed(f"cannot write {where} ({why}); make it writable, or write to another place")
    return None


_said: set[str] = set()  # the cache folders already named on standard error in this process


def cache_root() -> Path:
    """ragrade's cache folder (LLM responses, embeddings, exported and assembled models): ``$RAGRADE_CACHE_DIR``,
    else ``~/.cache/ragrade``.

    With ``HOME`` unset (a service, a cron job, a container) the home folder is the one the system records for
    the user running ragrade: the folder is then said once on standard error (logging), so that the cache
    does not land somewhere unseen; a user the system records no home for gets a ConfigError asking for
    ``$RAGRADE_CACHE_DIR``.
    """
    env = os.environ.get("RAGRADE_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    try:
        path = Path.home() / ".cache" / "ragrade"
    except RuntimeError as exc:  # no HOME and no home folder recorded for this user
        raise ConfigError(
            "HOME is not set and this user has no home folder: set RAGRADE_CACHE_DIR to the folder of ragrade's "
            "cache (LLM responses, embeddings)"
        ) from exc
    if not os.environ.get("HOME") and str(path) not in _said:
        import logging

        _said.add(str(path))
        logging.getLogger("ragrade").warning(
            "ragrade: warning: HOME is not set: the cache goes to %s (the home folder of the user running ragrade); "
            "set RAGRADE_CACHE_DIR to choose its place",
            path,
        )
    return path


def folder_expected(exc: BaseException) -> str | None:
    """The line for an output folder that cannot be made because a file is in the way: the path itself is a
    file (``--out notes.txt`` for a command that writes a run folder), or one above it is; else None."""
    name = getattr(exc, "filename", None)
    if not name:
        return None
    path = Path(str(name))
    if isinstance(exc, FileExistsError) and path.is_file():
        return (
            f"{path} is a file, and this command writes a folder of results there; give the name of a new "
            "folder (or of a folder it wrote before, to resume)"
        )
    if isinstance(exc, NotADirectoryError):
        above = next((p for p in path.parents if p.is_file()), None)
        if above is not None:
            return f"{path}: {above} is a file, not a folder; give a path whose folders are folders"
    return None


def no_space(exc: BaseException, path: str | Path) -> WriteFailed | None:
    """:func:`write_failure` for a full disk only, for a step that also reads (a permission error there may be a
    read, which the caller reports itself)."""
    failure = write_failure(exc, path)
    return failure if failure is not None and str(failure).startswith("no space left") else None


@contextmanager
def writing(path: str | Path) -> Iterator[None]:
    """Turn a failure for lack of space or permission inside the block into :class:`WriteFailed` naming ``path``."""
    try:
        yield
    except WriteFailed:
        raise
    except Exception as exc:
        failure = write_failure(exc, path)
        if failure is None:
            raise
        raise failure from exc


__all__ = [
    "LOW_SPACE_BYTES",
    "NO_PERMISSION",
    "NO_SPACE",
    "WriteFailed",
    "cache_root",
    "device_of",
    "folder_expected",
    "no_space",
    "write_failure",
    "writing",
]

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

from ragrade.errors import DataError

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


def device_of(path: str | Path) -> str:
    """The mount point holding ``path`` (its nearest existing folder's), as a user would name the device."""
    p = Path(os.path.abspath(path))
    while not p.exists() and p != p.parent:
        p = p.parent
    while not os.path.ismount(p) and p != p.parent:
        p = p.parent
    return str(p)


def _free_bytes(path: Path) -> int | None:
    p = Path(os.path.abspath(path))
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        return shutil.disk_usage(p).free
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
    if not (isinstance(exc, OSError) or io_error):
        return False
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
        return WriteFailed(f"cannot write {where} ({why}); make it writable or choose another output, then {RERUN}")
    return None


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


__all__ = ["LOW_SPACE_BYTES", "NO_PERMISSION", "NO_SPACE", "WriteFailed", "device_of", "write_failure", "writing"]

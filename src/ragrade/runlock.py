"""One process per run folder: a lock file naming its holder.

Every command that writes a run folder (``exam take``, ``qa answer``, ``robust run``, ``judge``, ``ragrade run``)
holds ``ragrade.lock`` in it while it runs: the holder's PID, its process start time, the host and the command
line. A second command on the same folder stops at once with one line naming the holder (so two processes never
ask the same questions twice, nor interleave their writes); a lock whose process is gone (killed with ``kill -9``,
a machine that rebooted) is taken over with a note. The lock is created atomically (``O_CREAT | O_EXCL``) and
removed when the command ends, however it ends short of ``kill -9``.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ragrade.errors import ConfigError

LOCK_FILE = "ragrade.lock"
LOCK_VERSION = 1


class RunFolderBusy(ConfigError):
    """Another process holds the run folder's lock."""


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux), to tell a reused PID from its holder."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[-1].split()[19]


def _alive(pid: int, started: str | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # a process of another user holds that PID
    now = _start_time(pid)
    return started is None or now is None or now == started


def _holder() -> dict[str, object]:
    return {
        "version": LOCK_VERSION,
        "pid": os.getpid(),
        "started": _start_time(os.getpid()),
        "host": socket.gethostname(),
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])[:500],
        "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def _read(path: Path) -> dict[str, object]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _busy(folder: Path, info: dict[str, object]) -> RunFolderBusy:
    since = f" since {info['since']}" if info.get("since") else ""
    return RunFolderBusy(
        f"{folder} is in use by process {info.get('pid')} on {info.get('host')}{since} "
        f"({info.get('command')}); wait for it to finish, stop it, or write to another $out directory"
    )


def _try_create(path: Path, body: bytes) -> bool:
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    try:
        os.write(fd, body)
        os.fsync(fd)
    except BaseException:  # a full disk: no empty lock is left to block the rerun
        os.close(fd)
        path.unlink(missing_ok=True)
        raise
    os.close(fd)
    return True


def stderr_note(text: str) -> None:
    """The default way a take-over is said: one line on standard error."""
    print(text, file=sys.stderr)


def acquire(folder: str | Path, note: Callable[[str], None] | None = stderr_note) -> Path:
    """Take ``folder``'s lock (creating the folder): :class:`RunFolderBusy` when a live process holds it; a lock
    left by a process that is gone is taken over, with ``note`` told so (default: standard error). Returns the
    lock file's path."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK_FILE
    me = _holder()
    body = json.dumps(me).encode()
    for _ in range(30):
        if _try_create(path, body):
            return path
        info = _read(path)
        pid = info.get("pid")
        host = info.get("host")
        if isinstance(pid, int) and pid == os.getpid() and host == me["host"]:
            return path  # this process holds it already (a stage of a job that holds its folder)
        if not isinstance(pid, int) and time.time() - _mtime(path) < 2.0:  # being written by its holder now
            time.sleep(0.1)
            continue
        if isinstance(pid, int) and host == me["host"] and _alive(pid, _opt_str(info.get("started"))):
            raise _busy(folder, info)
        if isinstance(pid, int) and host != me["host"]:
            raise _busy(folder, info)  # another machine's process: its liveness cannot be checked from here
        if note is not None:
            holder = (
                f"process {pid} ({info.get('command')})" if isinstance(pid, int) else "a process that left it empty"
            )
            note(f"{folder}: taking over the lock of {holder}, which is gone; its finished results are kept")
        path.unlink(missing_ok=True)
    raise _busy(folder, _read(path))


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _opt_str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def release(path: Path) -> None:
    """Remove the lock at ``path`` if this process holds it."""
    info = _read(path)
    if info.get("pid") == os.getpid():
        path.unlink(missing_ok=True)


@contextmanager
def run_lock(folder: str | Path, note: Callable[[str], None] | None = stderr_note) -> Iterator[Path]:
    """Hold ``folder``'s lock for the ``with`` block (:func:`acquire`, then :func:`release`). A folder this call
    created is removed again when the block leaves it empty (a refused rerun leaves nothing behind). Nested use
    in one process holds it once."""
    folder = Path(folder)
    existed = folder.exists()
    path = folder / LOCK_FILE
    mine = not (path.is_file() and _read(path).get("pid") == os.getpid())
    path = acquire(folder, note)
    try:
        yield path
    finally:
        if mine:
            release(path)
            if not existed:
                with contextlib.suppress(OSError):
                    folder.rmdir()  # only when empty


__all__ = ["LOCK_FILE", "RunFolderBusy", "acquire", "release", "run_lock"]
